"""The ``git`` sink: a config change becomes one commit to the manifest repository.

:class:`GitSink` is a batch sink (:class:`~gitops_reloader.sinks.base.BatchSink`): the
controller queues every workload of one repository under ``group_key(record)`` (the
repository's name), so all workloads whose sources changed within one coalescing
window reach :meth:`GitSink.emit_batch` together and give **one commit**.

For one repository, ``emit_batch``:

1. syncs the clone (``fetch`` + hard reset to the remote branch) and refreshes the
   repository's :class:`~gitops_reloader.gitops.scanindex.ScanIndex` incrementally;
2. locates each workload's document (:class:`~gitops_reloader.gitops.locate.Locator`:
   annotations, Argo CD, Flux, scan; re-located on every sync, so moved files are
   followed). A document found through the scan index alone is edited first and the
   edit then checked with an independent parser
   (:func:`~gitops_reloader.gitops.scanindex.edit_confined`: only that document changed,
   it is this workload, it holds the new value); otherwise the document is confirmed
   with the reference parser and the edit redone — a wrong hint never edits another
   object;
3. computes the value to write, the keyed digest
   ``keyed_digest(key, [("<Kind>/<namespace>/<name>", hash) ...])`` over the sources in
   the request (each with its *current* hash; a deleted source counts with Stakater's
   delete marker). It is deterministic: the same sources with the same data give the
   same value, so a replayed request finds it already in the file;
4. sets ``gitops-reloader.io/config-hash`` under ``spec.template.metadata.annotations``
   (``spec.jobTemplate.spec.template`` for a CronJob), or in the map a ``git-target``
   names, with :mod:`~gitops_reloader.gitops.yamledit` (every other byte unchanged).
   A value already there → ``ALREADY_CURRENT`` and no edit;
5. makes one commit for the batch (message from the repository's template; it names
   workloads and sources, never data or hashes), and pushes it.

**Push races.** When the push is rejected because someone else pushed first, the sink
syncs again, re-applies *all* edits on the new tip (the other commit is kept — there is
no force push anywhere) and pushes again, up to ``max_push_attempts`` times with a
short, growing pause. This is the one place a sink waits and retries by itself: the
race is between two pushes a few milliseconds apart, and re-queueing the whole batch
would only widen it. After the last attempt :class:`~gitops_reloader.errors.PushRejected`
(retryable) is raised and the work queue retries with backoff.

**Failures.** An unreachable host or refused credentials raise
:class:`~gitops_reloader.errors.GitError` (retryable, message scrubbed of tokens): the
controller puts the sources back, records a Warning Event and retries with backoff, so
nothing is lost. Per-workload problems — no manifest, an unparsable or uneditable file,
a malformed annotation, an operator-owned workload, a path that escapes the clone or goes
through a symlink (:class:`~gitops_reloader.errors.UnsafePath`), a file in a Helm chart's
``templates/`` directory, a ``git-target`` outside the repository's ``annotationKeys``
(:class:`GitTargetRefused`) or one that would create more than the annotations map
itself — are permanent and skip only that workload: a Warning Event on it naming only
its own object and path, ``git_error`` metric, an ``Outcome`` of ``skipped``; the rest
of the batch is still committed in the same window and nothing is retried for it. Files
larger than the scan index's ``max_file_bytes`` are not edited.

After a successful push, with ``--request-refresh``, the Argo CD Application or Flux
GitRepository + Kustomization / HelmRelease that deploys each changed workload (for a
``git-target`` or ``git-path`` too: ``Location.refresh``) is asked to reconcile now.
Then each pushed workload (and, on a start-up check, each whose value was already
committed) is handed to the injected :class:`~gitops_reloader.sinks.following.CommitFollower`
(the controller's :class:`~gitops_reloader.control.follower.Follower`), which follows the
commit into the cluster and answers ``Applied`` / ``NotApplied`` on the workload. With a
rollout budget the reconciler passes only the granted workloads of a wave, each request
carrying the rollout marker (``workload_annotations``), which is written into the workload's
own ``metadata.annotations`` in the same commit.

A repository whose mounts failed the start-up checks
(:mod:`gitops_reloader.gitops.preflight`: key, known_hosts or token file, clone
directory) has no handle: each workload that needs it is skipped the same way, with
reason ``RepositoryUnusable`` and the file named; the others go on.

Nothing secret leaves the cluster: only the keyed digest is written; logs, events and
commit messages carry workload and source kind/namespace/name only.

Thread-safety: ``group_key`` runs on informer threads and only resolves (API reads,
cached per workload uid + resourceVersion); ``emit_batch`` runs on worker threads and
serializes work per repository with a lock.

Steps 2-4 (resolve, locate, compute the digest, edit) live in :class:`ManifestPlanner`,
which the ``pull-request`` sink (:mod:`gitops_reloader.sinks.pullrequest`) shares: both
sinks write exactly the same edit, one to the base branch, the other to a PR branch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from gitops_reloader.clock import Clock, SystemClock
from gitops_reloader.errors import (
    AnnotationError,
    ConfigError,
    GitError,
    HostKeyRefused,
    ManifestNotFound,
    PolicyDenied,
    PushRejected,
    ReloaderError,
    RepositoryUnusable,
    UnsafePath,
    YamlEditError,
)
from gitops_reloader.gitops.digestkey import DigestKey
from gitops_reloader.gitops.gitconfig import GitConfig, RepositoryConfig
from gitops_reloader.gitops.handle import RepositoryHandle
from gitops_reloader.gitops.hosts.githubapp import app_tokens
from gitops_reloader.gitops.locate import (
    GIT_TARGET_ANNOTATION,
    Location,
    Locator,
    Method,
    OperatorOwned,
    Resolution,
    workload_identity,
)
from gitops_reloader.gitops.refresh import RefreshRequester, RefreshTarget
from gitops_reloader.gitops.repo import Repository
from gitops_reloader.gitops.scanindex import DocKey, edit_confined
from gitops_reloader.gitops.yamledit import (
    CONFIG_HASH_KEY,
    EditResult,
    read_at_path,
    set_at_path,
    set_template_annotation,
)
from gitops_reloader.hashing import DELETED_HASH
from gitops_reloader.kube.events import EventRecorder
from gitops_reloader.model import Outcome, OutcomeStatus, ReloadRequest, SinkName
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.sinks.following import CommitFollower
from gitops_reloader.syncs import RESTARTED_AT

__all__ = [
    "EditPlan",
    "GitSink",
    "GitTargetRefused",
    "ManifestPlanner",
    "UnsupportedWorkload",
    "bounded_text",
    "failure_reason",
    "skip_workload",
    "source_digest_inputs",
]

log = logging.getLogger(__name__)

_CORE_TEMPLATE = ("spec", "template")
_SUBJECT_ITEMS = 5
_BODY_LINES = 200
_PERMANENT = (ManifestNotFound, YamlEditError, AnnotationError, ConfigError)


class UnsupportedWorkload(ReloaderError):
    """The workload kind can't be reloaded through its manifest (e.g. a Job)."""


class GitTargetRefused(AnnotationError):
    """A ``git-target`` names a map the repository does not let the digest be written into."""


@dataclass(slots=True)
class EditPlan:
    """The edits of one attempt on one repository (see :meth:`ManifestPlanner.plan`).

    ``texts`` holds the new text of every file looked at, ``changed`` the paths whose
    text differs from the work tree; ``applied`` the workloads whose edit changed a
    file, ``outcomes`` the ``already-current`` ones, ``skipped`` those that could not be
    edited (permanent errors), all keyed by the position in the batch. ``values`` is the
    digest written (or found) for every workload that was not skipped.
    """

    texts: dict[str, str] = field(default_factory=dict)
    changed: set[str] = field(default_factory=set)
    applied: list[tuple[int, ReloadRequest, Location]] = field(default_factory=list)
    outcomes: dict[int, Outcome] = field(default_factory=dict)
    skipped: list[tuple[int, ReloadRequest, ReloaderError]] = field(default_factory=list)
    values: dict[int, str] = field(default_factory=dict)
    current: list[tuple[int, ReloadRequest, Location]] = field(default_factory=list)
    """The workloads whose value the file already holds (``already-current``)."""


def source_digest_inputs(request: ReloadRequest) -> list[tuple[str, str]]:
    """The ``(source id, hash)`` pairs the written digest covers.

    Every source the workload tracks (``request.tracked``, current hashes), so the value
    does not depend on which source changed and a start-up check computes the same one;
    the request's items override (a deleted source counts with
    :data:`~gitops_reloader.hashing.DELETED_HASH`). The id is ``<Kind>/<namespace>/<name>``.
    """
    pairs: dict[str, str] = {}
    for source in request.tracked:
        ref = source.ref
        pairs[f"{ref.kind.kube_kind}/{ref.namespace}/{ref.name}"] = source.hash
    for item in request.items:
        ref = item.source.ref
        pairs[f"{ref.kind.kube_kind}/{ref.namespace}/{ref.name}"] = (
            DELETED_HASH if item.deleted else item.source.hash)
    return sorted(pairs.items())


class ManifestPlanner:
    """Where a workload's manifest is, and the config-hash edit that records its sources.

    Shared by the ``git`` and ``pull-request`` sinks. :meth:`resolve` is cached per
    workload uid + resourceVersion for ``resolve_ttl`` seconds (it runs on informer
    threads through ``group_key``; thread-safe). :meth:`plan` reads the handle's work
    tree and scan index: the caller holds the handle's lock. ``sink_name`` only names
    the sink in the outcomes it builds.
    """

    def __init__(self, *, locator: Locator, sink_name: str, clock: Clock | None = None,
                 resolve_ttl: float = 30.0) -> None:
        self.locator = locator
        self.sink_name = sink_name
        self.clock = clock or SystemClock()
        self.resolve_ttl = resolve_ttl
        self._cache: dict[tuple[str, str], tuple[float, Resolution | ReloaderError]] = {}
        self._cache_lock = threading.Lock()

    @staticmethod
    def check_supported(request: ReloadRequest) -> None:
        """Raise :class:`UnsupportedWorkload` for kinds a manifest edit can't reload (Jobs)."""
        if request.ref.kind == "Job":
            raise UnsupportedWorkload(
                f"{request.ref}: a Job's pod template is immutable; reload its CronJob or re-create it")

    def resolve(self, record: Any) -> Resolution:
        """The repository and search scope of the workload (cached; permanent errors too)."""
        metadata = record.raw.get("metadata") or {}
        key = (str(record.uid), str(metadata.get("resourceVersion", "")))
        now = self.clock.monotonic()
        with self._cache_lock:
            cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            if isinstance(cached[1], ReloaderError):
                raise cached[1]
            return cached[1]
        try:
            value: Resolution | ReloaderError = self.locator.resolve(record)
        except ReloaderError as exc:
            if exc.retryable:
                raise
            value = exc
        with self._cache_lock:
            if len(self._cache) > 10_000:
                self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
            self._cache[key] = (now + self.resolve_ttl, value)
        if isinstance(value, ReloaderError):
            raise value
        return value

    def plan(self, handle: RepositoryHandle, items: Sequence[tuple[int, ReloadRequest, Resolution]],
             key: DigestKey) -> EditPlan:
        """Locate and edit every workload of ``items`` in the handle's current work tree.

        Nothing is written: the new texts are in the returned plan. Permanent
        per-workload errors land in :attr:`EditPlan.skipped`; retryable ones raise.
        """
        plan = EditPlan()
        for position, request, resolution in items:
            try:
                location = self.locator.locate(request.workload, resolution, handle.index)
                self.check_location(handle, request, location)
                value = key.digest(source_digest_inputs(request))
                result: EditResult | None = None
                try:
                    text, result = self._apply(handle, plan, request, location, value)
                except YamlEditError:
                    if location.confirmed:
                        raise
                if not location.confirmed and (
                        result is None or not self._confined(request, location, text, result, value)):
                    # Unconfirmed index hit that the editor disagrees with: confirm the document, redo.
                    location = self.locator.locate(request.workload, resolution, handle.index, confirm=True)
                    self.check_location(handle, request, location)
                    text, result = self._apply(handle, plan, request, location, value)
            except _PERMANENT as exc:
                plan.skipped.append((position, request, exc))
                continue
            assert result is not None  # a failed unconfirmed edit was redone (or raised) above
            if request.restart and not result.changed:
                # The pods run data a sync brought; the file already records the target data:
                # a digest that differs, so the commit rolls them (syncs.needs_restart).
                value = key.digest([*source_digest_inputs(request), (RESTARTED_AT, str(request.observed_at))])
                text, result = self._apply(handle, plan, request, location, value)
            if request.resync and result.previous is None:
                # A start-up check only brings recorded values up to date; it never adds a
                # first one (that would be a commit for every workload on first start).
                plan.outcomes[position] = Outcome(OutcomeStatus.SKIPPED, self.sink_name,
                                                  f"{location} records no value yet")
                continue
            if result.changed and request.workload_annotations:
                try:
                    result = self._mark(request, location, result)
                except YamlEditError as exc:
                    plan.skipped.append((position, request, exc))
                    continue
            plan.texts[location.path] = result.text
            plan.values[position] = value
            if result.changed:
                plan.changed.add(location.path)
                plan.applied.append((position, request, location))
            else:
                plan.outcomes[position] = self.current(location)
                plan.current.append((position, request, location))
        return plan

    def budgeted(self, record: Any) -> bool:
        """Whether the workload's own manifest is edited (its metadata can carry the rollout marker).

        A ``git-target`` (a Helm values file, a patch) renders the workload elsewhere: such a
        workload is not counted by the rollout budget (documented in docs/rollouts.md).
        """
        try:
            return (self.resolve(record).method is not Method.TARGET
                    and record.ref.kind not in ("Job", "CronJob"))
        except ReloaderError:
            return False

    @staticmethod
    def _mark(request: ReloadRequest, location: Location, result: EditResult) -> EditResult:
        """The request's workload annotations (the rollout marker) set in the same document."""
        text = result.text
        for key, value in sorted(request.workload_annotations.items()):
            text = set_at_path(text, path_expr=("metadata", "annotations"), key=key, value=value,
                               doc_index=location.doc_index, path=location.path).text
        return replace(result, text=text)

    def current(self, location: Location) -> Outcome:
        """The ``already-current`` outcome for a workload whose value is at ``location``."""
        return Outcome(OutcomeStatus.ALREADY_CURRENT, self.sink_name,
                       f"{location} already records these sources")

    @classmethod
    def check_location(cls, handle: RepositoryHandle, request: ReloadRequest, location: Location) -> None:
        """Refuse a located manifest this sink must not edit (raises a permanent error).

        Outside the repository's configured paths, through a symlink, a Helm chart
        template, or a ``git-target`` not ending in an ``annotationKeys`` map.
        """
        cls._check_allowed(handle, request, location)
        cls._check_editable(handle, request, location)

    @staticmethod
    def _check_allowed(handle: RepositoryHandle, request: ReloadRequest, location: Location) -> None:
        if not handle.config.allows(location.path):
            raise ManifestNotFound(
                f"{request.ref}: {location.path} is outside the paths configured for "
                f"repository {handle.config.name}")

    @staticmethod
    def _check_editable(handle: RepositoryHandle, request: ReloadRequest, location: Location) -> None:
        """Refuse, for this workload only, a path or target the sink must not edit.

        The path must not go through a symlink (:class:`UnsafePath`) nor lie in a Helm
        chart's ``templates/`` directory; a ``git-target`` must end in one of the
        repository's ``annotationKeys``.
        """
        try:
            handle.repo.check_editable(location.path)
        except UnsafePath as exc:
            raise UnsafePath(f"{request.ref}: {exc}") from None
        chart = _chart_of_template(handle.repo, location.path)
        if chart is not None:
            raise YamlEditError(
                f"{request.ref}: {location.path} is a template of the Helm chart in {chart or '.'}/; "
                f"point {GIT_TARGET_ANNOTATION} at the chart's values file instead")
        if location.yaml_path is not None:
            keys = handle.config.annotation_keys
            last = location.yaml_path[-1] if location.yaml_path else None
            if not isinstance(last, str) or last not in keys:
                raise GitTargetRefused(
                    f"{request.ref}: {GIT_TARGET_ANNOTATION} must name a map whose key is one of "
                    f"{', '.join(keys)} (the annotationKeys of repository {handle.config.name})")

    def _apply(self, handle: RepositoryHandle, plan: EditPlan, request: ReloadRequest, location: Location,
               value: str) -> tuple[str, EditResult]:
        """The file's text in this plan (edits of earlier workloads included) and the edit."""
        text = plan.texts.get(location.path)
        if text is None:
            text = _read_text(handle.repo, location.path, handle.index.max_file_bytes)
        return text, self._edit(request, location, text, value)

    @classmethod
    def committed_value(cls, handle: RepositoryHandle, request: ReloadRequest,
                        location: Location) -> str | None:
        """The digest the located document holds now in the clone (``None``: none yet)."""
        return cls.value_in(_read_text(handle.repo, location.path, handle.index.max_file_bytes),
                            request, location)

    @classmethod
    def value_in(cls, text: str, request: ReloadRequest, location: Location) -> str | None:
        """The digest the located document holds in ``text``, a version of its file (``None``: none)."""
        return read_at_path(text, path_expr=cls._annotations_path(request, location),
                            doc_index=location.doc_index, path=location.path)

    @staticmethod
    def _annotations_path(request: ReloadRequest, location: Location) -> tuple[str | int, ...]:
        if location.yaml_path is not None:
            return location.yaml_path
        return (*request.workload.template_path, "metadata", "annotations")

    def _edit(self, request: ReloadRequest, location: Location, text: str, value: str) -> EditResult:
        if location.yaml_path is None and request.workload.template_path == _CORE_TEMPLATE:
            return set_template_annotation(text, doc_index=location.doc_index, value=value,
                                           path=location.path)
        # In the kind's own pod template (a CronJob's jobTemplate, a custom kind's
        # podTemplate) metadata and annotations may be created, the template must exist;
        # a git-target may create the annotations map itself under an existing parent.
        return set_at_path(text, path_expr=self._annotations_path(request, location), value=value,
                           doc_index=location.doc_index, path=location.path,
                           max_create=2 if location.yaml_path is None else 1)

    def _confined(self, request: ReloadRequest, location: Location, before: str, result: EditResult,
                  value: str) -> bool:
        identity = workload_identity(request.workload)
        return edit_confined(
            before, result.text, doc_index=location.doc_index,
            expected=DocKey(identity.group, identity.kind, identity.namespace, identity.name),
            path_expr=self._annotations_path(request, location), key=CONFIG_HASH_KEY, value=value)


class GitSink:
    """Commits config-hash bumps to manifest repositories; one commit per repository and batch.

    Collaborators are injected: ``repositories`` (name → :class:`RepositoryHandle`),
    ``unusable`` (name → why a configured repository failed its start-up checks: its
    workloads are skipped with a ``RepositoryUnusable`` Warning Event), the ``locator``,
    ``digest_key`` (a callable returning the
    :class:`~gitops_reloader.gitops.digestkey.DigestKey`, loaded lazily), ``metrics``,
    an optional ``recorder`` for Warning Events, an optional ``refresher``. Callers must
    not use a handle's clone while the sink runs.
    """

    name: ClassVar[str] = SinkName.GIT.value

    def __init__(
        self,
        *,
        git_config: GitConfig,
        repositories: Mapping[str, RepositoryHandle],
        locator: Locator,
        digest_key: Callable[[], DigestKey],
        metrics: Metrics,
        recorder: EventRecorder | None = None,
        refresher: RefreshRequester | None = None,
        clock: Clock | None = None,
        unusable: Mapping[str, RepositoryUnusable] | None = None,
        max_push_attempts: int = 5,
        push_backoff: float = 0.1,
        resolve_ttl: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if max_push_attempts < 1:
            raise ValueError("max_push_attempts must be at least 1")
        self.git_config = git_config
        self.repositories = dict(repositories)
        self.unusable: dict[str, RepositoryUnusable] = dict(unusable or {})
        """Configured repositories that failed their start-up checks (no handle): why, by name."""
        self.locator = locator
        self.planner = ManifestPlanner(locator=locator, sink_name=self.name, clock=clock,
                                       resolve_ttl=resolve_ttl)
        self.digest_key = digest_key
        self.metrics = metrics
        self.recorder = recorder
        self.refresher = refresher
        self.clock = clock or SystemClock()
        self.max_push_attempts = max_push_attempts
        self.push_backoff = push_backoff
        self.resolve_ttl = resolve_ttl
        self._sleep = sleep
        self.follower: CommitFollower | None = None
        """Follows each pushed commit into the cluster (injected, :mod:`.following`)."""
        default = git_config.default_repository
        self._fallback_group = default or "unresolved"

    def adopt(self, name: str, handle: RepositoryHandle) -> None:
        """Repository ``name``, unusable so far, passes its checks now: use it from here on."""
        self.repositories[name] = handle
        self.unusable.pop(name, None)

    def repository(self, name: str) -> RepositoryHandle:
        """The handle of a configured repository (KeyError if unknown)."""
        return self.repositories[name]

    def budgeted(self, record: Any) -> bool:
        """Whether the rollout budget counts this workload (see :meth:`ManifestPlanner.budgeted`)."""
        return self.planner.budgeted(record)

    def close(self) -> None:
        """Stop following emissions (the next instance's start-up check finds them again)."""
        if self.follower is not None:
            self.follower.stop()

    # -- BatchSink protocol ------------------------------------------------------------

    def group_key(self, record: Any) -> str:
        """The repository the workload's manifest lives in (its name from ``--git-config``).

        Never raises: a workload that can't be resolved joins the default repository's
        group, and ``emit_batch`` reports why on the workload.
        """
        try:
            return self.planner.resolve(record).repo_name
        except ReloaderError:
            return self._fallback_group

    def emit(self, request: ReloadRequest) -> Outcome:
        """One workload on its own (used when the controller did not batch it)."""
        return self.emit_batch([request])[0]

    def emit_batch(self, requests: Sequence[ReloadRequest]) -> list[Outcome]:
        """Commit and push the reloads of ``requests``: one commit per repository.

        Returns one Outcome per request, in order. Raises a retryable
        :class:`~gitops_reloader.errors.ReloaderError` when a repository could not be
        synced or pushed (or an API read failed); edits already pushed for other
        repositories stay, and a retry finds them ``already-current``.
        """
        return self._batch(requests, self._emit_repository)

    def preview_batch(self, requests: Sequence[ReloadRequest]) -> list[Outcome]:
        """What :meth:`emit_batch` would do (``--dry-run``): same resolve, sync, locate and edit.

        Nothing is written, committed or pushed; a workload whose file would change gets
        ``would-apply`` naming the file and branch. Per-workload refusals are reported as
        in :meth:`emit_batch` (Warning Event, ``skipped``).
        """
        return self._batch(requests, self._preview_repository)

    def _batch(self, requests: Sequence[ReloadRequest],
               per_repository: Callable[[RepositoryHandle, Sequence[tuple[int, ReloadRequest, Resolution]],
                                         DigestKey], dict[int, Outcome]]) -> list[Outcome]:
        outcomes: dict[int, Outcome] = {}
        by_repo: dict[str, list[tuple[int, ReloadRequest, Resolution]]] = {}
        retry: ReloaderError | None = None
        for position, request in enumerate(requests):
            try:
                self.planner.check_supported(request)
                resolution = self.planner.resolve(request.workload)
            except (*_PERMANENT, UnsupportedWorkload) as exc:
                outcomes[position] = self._skip(request, "-", exc)
                continue
            except ReloaderError as exc:
                retry = retry or exc
                continue
            if resolution.repo_name in self.unusable:
                outcomes[position] = self._skip(request, resolution.repo_name,
                                                self.unusable[resolution.repo_name])
                continue
            if resolution.repo_name not in self.repositories:
                outcomes[position] = self._skip(request, resolution.repo_name, ManifestNotFound(
                    f"{request.ref}: repository {resolution.repo_name} is not configured"))
                continue
            by_repo.setdefault(resolution.repo_name, []).append((position, request, resolution))
        if by_repo:
            key = self.digest_key()  # KubeError: retryable, nothing done yet
            for repo_name, items in by_repo.items():
                try:
                    outcomes.update(per_repository(self.repositories[repo_name], items, key))
                except ReloaderError as exc:
                    if exc.retryable:
                        retry = retry or exc
                        continue
                    for position, request, _ in items:
                        outcomes[position] = self._skip(request, repo_name, exc)
                finally:
                    tell_app_notices(self.repositories[repo_name], items, self.recorder)
        if retry is not None:
            raise retry
        return [outcomes.get(i) or Outcome(OutcomeStatus.SKIPPED, self.name, "not handled")
                for i in range(len(requests))]

    # -- one repository --------------------------------------------------------------------

    def _sync(self, handle: RepositoryHandle) -> None:
        """Bring the clone to the remote's tip; a failure is counted and logged, then raised."""
        try:
            handle.sync()
        except GitError as exc:
            reason = exc.reason if isinstance(exc, HostKeyRefused) else "sync"
            self.metrics.git_error(handle.config.name, reason)
            log.warning("git sync failed", extra={"repo": handle.config.name, "error": str(exc)})
            raise

    def _emit_repository(self, handle: RepositoryHandle,
                         items: Sequence[tuple[int, ReloadRequest, Resolution]],
                         key: DigestKey) -> dict[int, Outcome]:
        name = handle.config.name
        with handle.lock:
            for attempt in range(1, self.max_push_attempts + 1):
                self._sync(handle)
                plan = self.planner.plan(handle, items, key)
                if not plan.changed:
                    return self._followed(plan, name)
                for path in sorted(plan.changed):
                    handle.repo.write(path, plan.texts[path].encode("utf-8"))
                sha = handle.repo.commit(self.commit_message(handle.config, plan), sorted(plan.changed))
                if sha is None:  # the work tree already held these bytes
                    for position, request, location in plan.applied:
                        plan.outcomes[position] = self.planner.current(location)
                        plan.current.append((position, request, location))
                    plan.applied.clear()
                    return self._followed(plan, name)
                try:
                    handle.repo.push()
                except PushRejected:
                    self.metrics.git_push_rejected(name)
                    log.info("push rejected, the remote moved on; re-applying on the new tip",
                             extra={"repo": name, "attempt": attempt})
                    if attempt < self.max_push_attempts:
                        self._sleep(self.push_backoff * attempt)
                    continue
                except GitError as exc:
                    self.metrics.git_error(name, "push")
                    log.warning("git push failed", extra={"repo": name, "error": str(exc)})
                    raise
                self.metrics.git_commit(name)
                log.info("committed and pushed", extra={
                    "repo": name, "commit": sha[:12], "workloads": len(plan.applied),
                    "files": len(plan.changed), "attempt": attempt})
                for position, _, location in plan.applied:
                    plan.outcomes[position] = Outcome(
                        OutcomeStatus.APPLIED, self.name,
                        f"commit {sha[:12]} to {location} ({handle.config.branch})")
                self._request_refresh([loc.refresh for _, _, loc in plan.applied])
                return self._followed(plan, name, sha)
        raise PushRejected(
            f"{name}: push rejected {self.max_push_attempts} times in a row (the branch keeps moving); "
            "will retry with backoff")

    def _preview_repository(self, handle: RepositoryHandle,
                            items: Sequence[tuple[int, ReloadRequest, Resolution]],
                            key: DigestKey) -> dict[int, Outcome]:
        """Sync the clone and plan the edits of ``items``; the work tree and remote stay untouched."""
        name = handle.config.name
        with handle.lock:
            self._sync(handle)
            plan = self.planner.plan(handle, items, key)
            for position, _, location in plan.applied:
                plan.outcomes[position] = Outcome(
                    OutcomeStatus.WOULD_APPLY, self.name,
                    f"would commit to {location} ({handle.config.branch})")
            return self._finish(plan, name)

    def _followed(self, plan: EditPlan, repo_name: str, sha: str | None = None) -> dict[int, Outcome]:
        """:meth:`_finish`, after handing the pushed and the already-committed values to the follower."""
        if self.follower is not None:
            for position, request, location in plan.applied:
                if sha is not None:
                    self.follower.follow(request, location, plan.values[position], sha, sink=self.name)
            for position, request, location in plan.current:
                self.follower.resume(request, location, plan.values[position], sink=self.name)
        return self._finish(plan, repo_name)

    def _finish(self, plan: EditPlan, repo_name: str) -> dict[int, Outcome]:
        for position, request, exc in plan.skipped:
            plan.outcomes[position] = self._skip(request, repo_name, exc)
        return plan.outcomes

    def commit_message(self, config: RepositoryConfig, plan: EditPlan) -> str:
        """Subject from the repository's template, then one line per workload. Names only."""
        workloads = list(dict.fromkeys(request.ref.name for _, request, _ in plan.applied))
        sources = list(dict.fromkeys(
            f"{item.source.ref.kind.kube_kind.lower()}/{item.source.ref.name}"
            for _, request, _ in plan.applied for item in request.items))
        subject = config.commit_message.format(
            workloads=_short(workloads), sources=_short(sources), repository=config.name,
            count=len(plan.applied))
        lines = []
        for _, request, location in plan.applied[:_BODY_LINES]:
            changed = ", ".join(
                f"{item.source.ref.kind.kube_kind} {item.source.ref.namespace}/{item.source.ref.name}"
                + (" (deleted)" if item.deleted else "") for item in request.items)
            lines.append(f"- {request.ref} in {location.path}: {changed}")
        if len(plan.applied) > _BODY_LINES:
            lines.append(f"- and {len(plan.applied) - _BODY_LINES} more")
        return f"{subject}\n\n" + "\n".join(lines) + "\n\nReloaded-by: gitops-reloader\n"

    def _request_refresh(self, groups: Sequence[tuple[RefreshTarget, ...]]) -> None:
        if self.refresher is None:
            return
        targets = [t for group in groups for t in group]
        if targets:
            self.refresher.request(targets)

    def _skip(self, request: ReloadRequest, repo_name: str, exc: ReloaderError) -> Outcome:
        return skip_workload(self.name, request, repo_name, exc, metrics=self.metrics,
                             recorder=self.recorder)


def tell_app_notices(handle: RepositoryHandle, items: Sequence[tuple[int, ReloadRequest, Resolution]],
                     recorder: EventRecorder | None) -> None:
    """What the repository's GitHub App has to say since its last emission (it was installed
    again, under a new installation id): a Warning Event on each workload of this emission."""
    app = handle.config.github_app
    if app is None:
        return
    for notice in app_tokens(app).notices():
        for _, request, _ in items:
            if recorder is not None:
                recorder.warning(request.ref, "GitHubAppReinstalled", notice, uid=str(request.workload.uid))


def skip_workload(sink: str, request: ReloadRequest, repo_name: str, exc: ReloaderError, *,
                  metrics: Metrics, recorder: EventRecorder | None) -> Outcome:
    """A per-workload failure of a git-based sink: metric, log line, Warning Event, ``skipped``
    — *held* (pending, retried) unless the workload is not ours to edit at all."""
    reason = failure_reason(exc)
    metrics.git_error(repo_name, reason)
    log.warning(f"{sink} sink skipped a workload", extra={
        "object": request.ref.key, "sink": sink, "repo": repo_name, "reason": reason, "error": str(exc)})
    if recorder is not None:
        where = f"{sink} sink, repository {repo_name}" if repo_name != "-" else f"{sink} sink"
        recorder.warning(request.ref, reason, f"{where}: {exc}", uid=str(request.workload.uid))
    held = "" if isinstance(exc, OperatorOwned | UnsupportedWorkload) else reason  # not ours for good
    return Outcome(OutcomeStatus.SKIPPED, sink, f"{reason}: {exc}", held=held)


def failure_reason(exc: ReloaderError) -> str:
    """The Event reason and metric label for a per-workload failure (``ManifestNotFound``...)."""
    if isinstance(exc, RepositoryUnusable):
        return "RepositoryUnusable"
    if isinstance(exc, OperatorOwned):
        return "OperatorOwned"
    if isinstance(exc, PolicyDenied):
        return "PolicyDenied"
    if isinstance(exc, UnsafePath):
        return "UnsafeManifestPath"
    if isinstance(exc, GitTargetRefused):
        return "GitTargetRefused"
    if isinstance(exc, ManifestNotFound):
        return "ManifestNotFound"
    if isinstance(exc, YamlEditError):
        return "ManifestUnparsable"
    if isinstance(exc, AnnotationError):
        return "InvalidAnnotation"
    if isinstance(exc, UnsupportedWorkload):
        return "UnsupportedWorkload"
    return type(exc).__name__


def _chart_of_template(repo: Repository, path: str) -> str | None:
    """The chart directory when ``path`` lies under a ``templates/`` beside a ``Chart.yaml``."""
    parts = path.split("/")
    for i in range(len(parts) - 1):
        if parts[i] == "templates":
            chart = "/".join(parts[:i])
            if repo.read(f"{chart}/Chart.yaml" if chart else "Chart.yaml") is not None:
                return chart
    return None


def _read_text(repo: Repository, path: str, max_bytes: int) -> str:
    data = repo.read(path)
    if data is None:
        raise ManifestNotFound(f"{path} disappeared from the work tree")
    return bounded_text(data, path, max_bytes)


def bounded_text(data: bytes, path: str, max_bytes: int) -> str:
    """A version of the file at ``path`` as text, refused (:class:`YamlEditError`) when larger
    than ``max_bytes`` (the scan index's bound) or not UTF-8: repository files are tenant input."""
    if len(data) > max_bytes:
        raise YamlEditError(f"{path}: larger than {max_bytes} bytes; not edited")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise YamlEditError(f"{path}: not UTF-8 text") from None


def _short(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_SUBJECT_ITEMS])
    return shown + (f" and {len(items) - _SUBJECT_ITEMS} more" if len(items) > _SUBJECT_ITEMS else "")
