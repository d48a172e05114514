"""Follow a git or pull-request emission into the cluster, and answer per workload.

After the git sink pushed a commit (or found its value already committed, e.g. after a
restart), :class:`Follower` keeps, per workload, the commit, the digest written and the
file it was written to, and every ``--git-follow-interval`` reads, in this order:

1. the engine that deploys the workload, found from the live workload's own metadata —
   Argo CD's ``argocd.argoproj.io/tracking-id`` (the Application), Flux's
   ``helm.toolkit.fluxcd.io/name|namespace`` labels (the HelmRelease, and its HelmChart)
   or ``kustomize.toolkit.fluxcd.io/name|namespace`` labels (the Kustomization); none
   (explicit ``git-repo``/``git-path`` without an engine) → steps 2 and 3 alone;
2. the live workload, from the controller's informer cache (no request): does its pod
   template carry the committed digest (``gitops-reloader.io/config-hash``)? The cache may
   not show an apply the engine already reports, so a verdict that the commit was *not*
   applied (or that the workload is gone) is confirmed with one GET of the workload before
   it is reported — a terminal verdict, so at most one GET per emission;
3. its rollout, by :mod:`gitops_reloader.rollout.completion`: the record keeps its kind's
   verdict (:attr:`~gitops_reloader.kube.workloads.WorkloadRecord.rollout`) for every
   workload whose template carries a digest, computed on arrival, so the status itself is
   not kept.

**At scale.** One round reads each engine once (one GET per Application / Kustomization /
HelmRelease, and its HelmChart, shared by all the workloads it deploys), asks the clone
once per pair of commits whether one descends from the other, and reads no workload from
the API server: 5,000 followed workloads take a few tens of milliseconds
(``bench/follow.py``, ``docs/benchmarks.md``). Without the caches (``explain``) each
workload is one GET.

:func:`~gitops_reloader.rollout.follow.decide` turns them into one state; an engine's
revision counts only when it is the pushed commit or a descendant of it on the branch
(:meth:`~gitops_reloader.gitops.repo.Repository.contains` in the sink's clone, fetched
when the revision is not there yet). The end is reported once on the workload: a Normal
Event ``Applied`` (commit, time from the source change to the completed rollout, metric
``change_to_rollout_seconds{sink}``), a Warning ``NotApplied`` (reason: the target is not
rendered into the pod template, the engine is suspended, its sync failed, auto-sync off,
or nothing within ``--git-apply-timeout``) or a Warning ``RolloutFailed``; metric
``git_follow_outcomes_total{sink, outcome, reason}``.

**Pull requests.** A pull request's edit waits until the base branch holds its digest
(a person merges it). The round that sees the merge asks what deploys the file to reconcile
now (``--request-refresh``, as the git sink does after its push;
:mod:`gitops_reloader.gitops.refresh`), so the engine does not wait for its own interval.

**Restarts.** Nothing is kept only here: every activation of an instance (any flags: a
restart or a take-over; :mod:`gitops_reloader.control.resume`) hands every git workload
whose value is already committed to :meth:`Follower.resume`,
which follows it from the commit that last wrote the file when that commit is younger than
``--git-apply-timeout`` (an older one was answered before), and reports its end unless an
Event with the same reason and commit is already on the workload. It never commits. A
pull-request workload whose open pull request was awaited goes to :meth:`Follower.await_merge`
again (:mod:`gitops_reloader.sinks.prresume`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from gitops_reloader.clock import Clock, SystemClock
from gitops_reloader.config import Config
from gitops_reloader.errors import GitError, KubeError, KubeNotFound
from gitops_reloader.gitops.handle import RepositoryHandle
from gitops_reloader.gitops.locate import (
    ARGOCD_TRACKING_ANNOTATION,
    FLUX_HELM_NAME_LABEL,
    FLUX_HELM_NAMESPACE_LABEL,
    FLUX_NAME_LABEL,
    FLUX_NAMESPACE_LABEL,
    Location,
    parse_tracking_id,
    workload_identity,
)
from gitops_reloader.gitops.refresh import RefreshRequester, RefreshTarget
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.events import EventRecorder
from gitops_reloader.kube.resources import (
    APPLICATIONS,
    EVENTS,
    HELMCHARTS,
    HELMRELEASES,
    KUSTOMIZATIONS,
    ResourceKind,
)
from gitops_reloader.kube.workloads import WorkloadAdapter, WorkloadRecord, adapters_for
from gitops_reloader.model import CONFIG_HASH_KEY, ObjectRef, ReloadRequest
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.rollout.follow import (
    EngineReport,
    FollowState,
    Stage,
    application_report,
    decide,
    helmrelease_report,
    kustomization_report,
)

__all__ = ["APPLIED", "NOT_APPLIED", "ROLLOUT_FAILED", "ApiWorkloads", "EngineRef", "Followed", "Follower",
           "WorkloadLookup", "build_follower", "engine_of"]

log = logging.getLogger(__name__)

APPLIED = "Applied"
NOT_APPLIED = "NotApplied"
ROLLOUT_FAILED = "RolloutFailed"
_EVENT_PAGE = 500
_ADAPTERS: dict[str, WorkloadAdapter] = adapters_for(argo_rollouts=True, openshift=True)


@dataclass(frozen=True, slots=True)
class EngineRef:
    """The object that deploys a workload: an Application, Kustomization or HelmRelease."""

    resource: ResourceKind
    namespace: str
    name: str


@dataclass(slots=True)
class Followed:
    """One emission being followed (what :meth:`Follower.state_of` shows)."""

    ref: ObjectRef
    uid: str
    sink: str
    repo_name: str
    target: str
    digest: str
    commit: str
    changed_at: float
    """Wall-clock seconds of the source change (a resumed one: the commit's time)."""
    started: float
    """Monotonic seconds the follow-up started (the push, or the resume)."""
    engine: EngineRef | None
    path: str = ""
    """The file in the repository the digest was written to."""
    resumed: bool = False
    budgeted: bool = False
    """The commit carried the rollout marker: the rollout budget's tracker reports a failed rollout."""
    waiting: bool = False
    """A pull request not merged yet: ``commit`` is empty until the base branch holds the digest."""
    refresh: tuple[RefreshTarget, ...] = ()
    """What deploys the file (the Argo CD Application, Flux's source and Kustomization or
    HelmRelease): asked to reconcile once the pull request is seen merged."""
    state: FollowState = field(default_factory=lambda: FollowState(Stage.PUSHED))


def engine_of(record: Any, argocd_namespace: str) -> EngineRef | None:
    """The engine deploying ``record``, from its own metadata (see the module docstring)."""
    metadata = record.raw.get("metadata") or {}
    labels = metadata.get("labels") or {}
    tracking = parse_tracking_id(str(record.annotations.get(ARGOCD_TRACKING_ANNOTATION, ""))[:512])
    if tracking is not None and tracking.describes(workload_identity(record)):
        return EngineRef(APPLICATIONS, tracking.app_namespace or argocd_namespace, tracking.app_name)
    for name_label, namespace_label, resource in (
            (FLUX_HELM_NAME_LABEL, FLUX_HELM_NAMESPACE_LABEL, HELMRELEASES),
            (FLUX_NAME_LABEL, FLUX_NAMESPACE_LABEL, KUSTOMIZATIONS)):
        name, namespace = str(labels.get(name_label, "")), str(labels.get(namespace_label, ""))
        if name and namespace:
            return EngineRef(resource, namespace, name)
    return None


class WorkloadLookup(Protocol):
    """Where the follow-up reads a workload: the controller's caches (:class:`.caches.Caches`)."""

    def workload(self, ref: ObjectRef) -> WorkloadRecord | None:
        """The workload's record; None when there is none."""


class ApiWorkloads:
    """Workloads read from the API server, one GET each, trimmed like the informers trim them."""

    def __init__(self, api: KubeApi, adapters: Mapping[str, WorkloadAdapter]) -> None:
        self.api = api
        self.adapters = adapters

    def workload(self, ref: ObjectRef) -> WorkloadRecord | None:
        """The workload as the API server has it now; None when it no longer exists."""
        adapter = self.adapters.get(ref.kind)
        if adapter is None:
            raise KubeError(f"{ref}: no adapter for kind {ref.kind}")
        try:
            return adapter.record(dict(self.api.get(adapter.resource, ref.namespace, ref.name)))
        except KubeNotFound:
            return None


@dataclass(slots=True)
class _Round:
    """What one round read once and shares across its emissions."""

    engines: dict[EngineRef, EngineReport | KubeError | None] = field(default_factory=dict)
    """Each engine's report (or the retryable error reading it)."""
    counts: dict[tuple[str, str, str], bool] = field(default_factory=dict)
    """(repository, followed commit, reported commit) → whether the reported one counts."""
    synced: set[str] = field(default_factory=set)
    """Repositories fetched this round (pull requests waiting for their merge)."""


class Follower:
    """Follows emissions of the git sinks until they rolled, failed or were not applied.

    ``repositories``: the sink's clone handles by repository name (read under their lock).
    ``timeout``: ``--git-apply-timeout``; ``interval``: ``--git-follow-interval``.
    ``workloads``: where workloads are read (the controller's caches); without it each is
    one GET (``explain``). ``adapters``: the workload kinds by name (default: the core and
    built-in kinds); the controller passes its own table, so a ``--workload-kinds-config`` kind
    is read (and its rollout judged, by its ``completesLike``) like any other.
    """

    def __init__(self, *, api: KubeApi, repositories: Mapping[str, RepositoryHandle], metrics: Metrics,
                 recorder: EventRecorder | None, argocd_namespace: str, timeout: float, interval: float,
                 clock: Clock | None = None, workloads: WorkloadLookup | None = None,
                 adapters: Mapping[str, WorkloadAdapter] | None = None,
                 refresher: RefreshRequester | None = None) -> None:
        self.api = api
        self.refresher = refresher
        """Asks the engine to reconcile a merged pull request now (``--request-refresh``)."""
        self.live = ApiWorkloads(api, adapters if adapters is not None else _ADAPTERS)
        """Reads a workload from the API server (confirms what the caches say was not applied)."""
        self.workloads: WorkloadLookup = workloads if workloads is not None else self.live
        self.repositories = dict(repositories)
        self.metrics = metrics
        self.recorder = recorder
        self.argocd_namespace = argocd_namespace
        self.timeout = timeout
        self.interval = interval
        self.clock = clock or SystemClock()
        self._followed: dict[str, Followed] = {}
        self._last: dict[str, Followed] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the sinks call ------------------------------------------------------------

    def follow(self, request: ReloadRequest, location: Location, digest: str, commit: str, *,
               sink: str) -> None:
        """Follow a pushed (or merged) commit that wrote ``digest`` for ``request``'s workload."""
        self._add(request, location, digest, commit, sink=sink, changed_at=float(request.observed_at),
                  resumed=False)

    def await_merge(self, request: ReloadRequest, location: Location, digest: str, *, sink: str) -> None:
        """Follow a pull request's edit: waiting until the base branch holds ``digest``, then its commit.

        A newer edit of the same workload supersedes it; one already waiting keeps its age.
        """
        with self._lock:
            current = self._followed.get(request.ref.key)
            if current is not None and current.waiting and current.digest == digest:
                return
        self._add(request, location, digest, "", sink=sink, changed_at=float(request.observed_at),
                  resumed=False, waiting=True)

    def resume(self, request: ReloadRequest, location: Location, digest: str, *, sink: str) -> None:
        """Follow a value already committed (a start-up check): from the commit that last wrote the file.

        Only a commit younger than the timeout: an older one was answered (or timed out) before.

        The caller holds the repository handle's lock (the clone is at the branch tip).
        """
        if request.ref.key in self._followed:
            return
        try:
            found = self.repositories[location.repo_name].repo.last_change(location.path)
        except GitError as exc:
            log.warning("cannot resume following", extra={"object": request.ref.key, "error": str(exc)})
            return
        if found is not None and self.clock.now() - found[1] <= self.timeout:
            # Older commits ended (or timed out) while an earlier instance followed them.
            self._add(request, location, digest, found[0], sink=sink, changed_at=float(found[1]),
                      resumed=True)

    def explain(self, request: ReloadRequest, location: Location, digest: str, *,
                sink: str) -> Followed | None:
        """The state of the last emission recorded at ``location`` (``explain``; reads only).

        Judged as if followed since the commit that last wrote the file (the caller holds
        the clone, synced); ``None`` when the file has no commit.
        """
        found = self.repositories[location.repo_name].repo.last_change(location.path)
        if found is None:
            return None
        entry = self._entry(request, location, digest, found[0], sink=sink, changed_at=float(found[1]),
                            resumed=True)
        entry.started -= max(self.clock.now() - found[1], 0.0)
        entry.state = self.assess(entry)
        return entry

    def state_of(self, ref: ObjectRef) -> Followed | None:
        """The workload's emission being followed, else the last one that ended here."""
        with self._lock:
            return self._followed.get(ref.key) or self._last.get(ref.key)

    def _entry(self, request: ReloadRequest, location: Location, digest: str, commit: str, *, sink: str,
               changed_at: float, resumed: bool, waiting: bool = False) -> Followed:
        target = f"{location}" + (f"#{'.'.join(map(str, location.yaml_path))}" if location.yaml_path else "")
        return Followed(ref=request.ref, uid=str(request.workload.uid), sink=sink,
                        repo_name=location.repo_name, target=target, digest=digest, commit=commit,
                        changed_at=changed_at, started=self.clock.monotonic(),
                        engine=engine_of(request.workload, self.argocd_namespace), path=location.path,
                        resumed=resumed, waiting=waiting, budgeted=bool(request.workload_annotations),
                        refresh=tuple(location.refresh))

    def _add(self, request: ReloadRequest, location: Location, digest: str, commit: str, *, sink: str,
             changed_at: float, resumed: bool, waiting: bool = False) -> None:
        entry = self._entry(request, location, digest, commit, sink=sink, changed_at=changed_at,
                            resumed=resumed, waiting=waiting)
        with self._lock:
            self._followed[request.ref.key] = entry  # a newer emission supersedes the older one
            self._count(sink)
        self.start()
        log.info("following emission", extra={"object": request.ref.key, "commit": commit[:12], "sink": sink,
                                              "target": entry.target, "resumed": resumed})

    # -- the loop -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the follow-up thread (idempotent)."""
        if self._thread is None and self.timeout > 0:
            self._thread = threading.Thread(target=self._run, name="git-follower", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop following (what is followed is found again by the next instance's start-up check)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.tick()

    def tick(self) -> None:
        """Read the statuses of every followed emission once; report and drop those that ended."""
        with self._lock:
            entries = list(self._followed.values())
        shared = _Round()
        for entry in entries:
            try:
                state = self._merged(entry, shared) if entry.waiting else self._assess(entry, shared)
            except (KubeError, GitError) as exc:
                log.debug("follow-up read failed, trying again", extra={"object": entry.ref.key,
                                                                        "error": str(exc)})
                continue
            entry.state = state
            if state.done:
                self._finish(entry)

    # -- one emission ---------------------------------------------------------------------

    def _merged(self, entry: Followed, shared: _Round) -> FollowState:
        """A pull request's edit: still waiting, or (the base holds the digest) followed from its commit."""
        handle = self.repositories[entry.repo_name]
        with handle.lock:
            if entry.repo_name not in shared.synced:
                handle.sync()  # once per round and repository
                shared.synced.add(entry.repo_name)
            text = handle.repo.read(entry.path) or b""
            found = handle.repo.last_change(entry.path) if entry.digest.encode() in text else None
        age = self.clock.monotonic() - entry.started
        if found is None:
            return decide(engine=None, counts=lambda _: False, in_template=False, rollout=None, elapsed=age,
                          timeout=self.timeout, target=entry.target, waiting_for_merge=True)
        log.info("pull request merged, following its commit", extra={
            "object": entry.ref.key, "commit": found[0][:12], "waited_seconds": round(age)})
        entry.commit, entry.waiting, entry.started = found[0], False, self.clock.monotonic()
        if self.refresher is not None and entry.refresh:
            self.refresher.request(entry.refresh)  # else the engine finds the merge at its interval
        return self._assess(entry, shared)

    def assess(self, entry: Followed) -> FollowState:
        """Read the engine, then the workload and its rollout; the verdict of ``entry`` now."""
        return self._assess(entry, _Round())

    def _assess(self, entry: Followed, shared: _Round) -> FollowState:
        engine = self._engine_report(entry.engine, shared)
        state = self._verdict(entry, engine, self.workloads.workload(entry.ref), shared)
        if state.stage is Stage.NOT_APPLIED and self.workloads is not self.live:
            # The cache may not show yet what the engine reports applied: ask the API server.
            state = self._verdict(entry, engine, self.live.workload(entry.ref), shared)
        return state

    def _verdict(self, entry: Followed, engine: EngineReport | None, record: WorkloadRecord | None,
                 shared: _Round) -> FollowState:
        if record is None:
            return FollowState(Stage.NOT_APPLIED, "WorkloadDeleted", f"{entry.ref} no longer exists")
        in_template = record.template_annotations.get(CONFIG_HASH_KEY) == entry.digest
        return decide(engine=engine, counts=lambda commit: self._counts(entry, commit, shared),
                      in_template=in_template, rollout=record.rollout if in_template else None,
                      elapsed=self.clock.monotonic() - entry.started, timeout=self.timeout,
                      target=entry.target)

    def _engine_report(self, ref: EngineRef | None, shared: _Round) -> EngineReport | None:
        """The engine's report, read once per round (one GET shared by all the workloads it deploys)."""
        if ref is None:
            return None
        if ref not in shared.engines:
            try:
                shared.engines[ref] = self._read_engine(ref)
            except KubeError as exc:  # retryable: every emission of this engine waits for the next round
                shared.engines[ref] = exc
        report = shared.engines[ref]
        if isinstance(report, KubeError):
            raise report
        return report

    def _read_engine(self, ref: EngineRef) -> EngineReport | None:
        try:
            obj = self.api.get(ref.resource, ref.namespace, ref.name)
        except KubeError as exc:
            if exc.retryable:
                raise
            # Not here (Argo CD in another cluster) or not readable: the template and rollout decide.
            log.debug("engine not readable", extra={"engine": f"{ref.namespace}/{ref.name}",
                                                    "error": str(exc)})
            return None
        if ref.resource is APPLICATIONS:
            return application_report(obj)
        if ref.resource is KUSTOMIZATIONS:
            return kustomization_report(obj)
        return helmrelease_report(obj, self._helm_chart(obj))

    def _helm_chart(self, release: Mapping[str, Any]) -> Mapping[str, Any] | None:
        namespace, _, name = str((release.get("status") or {}).get("helmChart") or "")[:512].partition("/")
        if not (namespace and name):
            return None
        try:
            return self.api.get(HELMCHARTS, namespace, name)
        except KubeError:
            return None

    def _counts(self, entry: Followed, commit: str, shared: _Round) -> bool:
        """Whether ``commit`` is the followed commit or a descendant on the branch (fetching once).

        Asked of the clone once per round and pair of commits: one commit deploys many workloads.
        """
        key = (entry.repo_name, entry.commit, commit)
        if key not in shared.counts:
            handle = self.repositories.get(entry.repo_name)
            if handle is None:
                return False
            with handle.lock:
                found = handle.repo.contains(entry.commit, commit)
                if found is None:
                    handle.sync()
                    found = handle.repo.contains(entry.commit, commit)
            shared.counts[key] = bool(found)
        return shared.counts[key]

    def _finish(self, entry: Followed) -> None:
        state = entry.state
        with self._lock:
            if self._followed.get(entry.ref.key) is entry:
                del self._followed[entry.ref.key]
                self._last[entry.ref.key] = entry
            self._count(entry.sink)
        reason, event = {Stage.ROLLED: ("", APPLIED), Stage.FAILED: (state.reason, ROLLOUT_FAILED)}.get(
            state.stage, (state.reason, NOT_APPLIED))
        short = entry.commit[:12]
        if state.stage is Stage.ROLLED:
            seconds = self.clock.now() - entry.changed_at
            message = f"commit {short} ({entry.target}) rolled out {seconds:.0f}s after the source change"
        else:
            message = f"commit {short} ({entry.target}): {reason}: {state.message}"
        log.log(logging.INFO if state.stage is Stage.ROLLED else logging.WARNING, "followed emission ended",
                extra={"object": entry.ref.key, "commit": short, "outcome": state.stage.value,
                       "reason": reason, "detail": state.message})
        if entry.resumed and self._reported(entry, event):
            return
        self.metrics.follow_outcome(entry.sink, state.stage.value, reason)
        if state.stage is Stage.ROLLED:
            self.metrics.observe_change_to_rollout(entry.sink, seconds)
        if self.recorder is None or (state.stage is Stage.FAILED and entry.budgeted):
            return  # a failed rollout of a budgeted commit is the rollout waves' RolloutFailed Event
        if state.stage is Stage.ROLLED:
            self.recorder.normal(entry.ref, event, message, uid=entry.uid)
        else:
            self.recorder.warning(entry.ref, event, message, uid=entry.uid)

    def _reported(self, entry: Followed, reason: str) -> bool:
        """Whether an Event with ``reason`` about this commit is on the workload already."""
        try:
            page = self.api.list(EVENTS, namespace=entry.ref.namespace, limit=_EVENT_PAGE,
                                 field_selector=f"involvedObject.name={entry.ref.name}")
        except KubeError:
            return False
        mark = f"commit {entry.commit[:12]}"
        return any(event.get("reason") == reason and mark in str(event.get("message"))
                   and (event.get("involvedObject") or {}).get("kind") == entry.ref.kind
                   for event in page.get("items") or ())

    def _count(self, sink: str) -> None:
        self.metrics.set_following(sink, sum(1 for e in self._followed.values() if e.sink == sink))


def build_follower(config: Config, api: KubeApi, *, repositories: Mapping[str, RepositoryHandle],
                   argocd_namespace: str, workloads: WorkloadLookup, adapters: Mapping[str, WorkloadAdapter],
                   metrics: Metrics, recorder: EventRecorder | None,
                   clock: Clock | None = None) -> Follower | None:
    """The follow-up of one git sink's emissions, reading workloads from ``workloads`` (the
    controller's caches); ``None`` with ``--git-apply-timeout 0`` or ``--dry-run``."""
    gitops = config.gitops
    if gitops.apply_timeout <= 0 or config.runtime.dry_run:
        return None
    return Follower(api=api, repositories=repositories, metrics=metrics, recorder=recorder,
                    argocd_namespace=argocd_namespace, timeout=gitops.apply_timeout,
                    interval=gitops.follow_interval, clock=clock, workloads=workloads, adapters=adapters,
                    refresher=RefreshRequester(api, clock=clock) if gitops.request_refresh else None)
