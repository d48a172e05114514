"""The ``pull-request`` sink: a config change becomes a commit on a branch and a pull request.

:class:`PullRequestSink` is a batch sink (:class:`~gitops_reloader.sinks.base.BatchSink`).
``group_key(record)`` is ``<repository>#<branch key>`` — the workload
(``ns-deployment-web``) or ``all`` with ``grouping: repository`` — so everything that
changed for one pull request within a coalescing window reaches :meth:`emit_batch`
together. The edit itself is exactly the git sink's
(:class:`~gitops_reloader.sinks.git.ManifestPlanner`: locate the manifest, write the keyed
digest into ``gitops-reloader.io/config-hash``, every other byte unchanged); only where it
goes differs. Branch names, title, body and the "is this branch still ours" decision are
pure functions in :mod:`gitops_reloader.gitops.prpolicy`.

For one branch (``gitops-reloader/<base>/<key>``, or its newest generation
``<branch>-<n>`` on the remote), :meth:`emit_batch`:

1. syncs the base branch, lists the remote's generations of the branch (one
   ``ls-remote``) and takes the newest, asks the host for the *open* pull request of
   that branch (``find_open``; no local state: the branch name is the key), and fetches it;
2. plans the batch's edits against the base. Nothing to change and no open pull request
   → ``already-current``: no branch, no pull request;
3. with an open pull request, checks the branch is still ours
   (:func:`~gitops_reloader.gitops.prpolicy.branch_ownership`: at most one commit on top
   of the base, carrying a valid seal — an HMAC over its tree and parent keyed with the
   digest key, which only the controller holds; names and e-mails are never trusted).
   If anyone else pushed to it, the branch is left alone: no push, no commit, no
   auto-merge, and a ``ForeignCommits`` Warning Event on each workload. With
   ``autoMerge`` on, the auto-merge asked for earlier is cancelled
   (:meth:`~gitops_reloader.gitops.hosts.GitHost.cancel_auto_merge`), so foreign content is
   never merged on the controller's authority; the Event says whether it was cancelled,
   none was armed, or cancelling failed (``git_errors_total{reason="cancel-auto-merge"}``;
   then the batch is ``skipped`` and the cancel tried again on the next change, the other
   workloads carry on). Otherwise the controller stops vouching for that pull request
   (:meth:`PullRequestSink._disown`: one comment ending with a marker keyed with the digest
   key, found again on the host so it is never repeated, and the
   ``gitops-reloader/foreign-commits`` label; ``pr_foreign_commits_total{host}``) and the
   batch goes on with the next generation, ``<branch>-<n+1>``, as a branch without a pull
   request;
4. **rebuilds the branch as one sealed commit on the latest base**: the config-hash
   changes of the previous commit of the open pull request are carried over file by file
   (a file whose change is anything else is refused and logged; unchanged by the base
   since → its content; changed by the base → a three-way merge, ``git merge-file``; a
   conflict keeps the base's version of that file and is logged), then this batch's
   edits are applied on top. So an accumulating pull request keeps the edits of earlier batches, a base
   that moved on is never reverted, and the batch's own workloads always get their
   latest value. Without an open pull request the branch starts from the base alone (a
   merged or closed pull request is history; its branch is rebuilt) — unless the branch
   holds anything but one commit sealed by the controller: someone else's branch that
   carries the name is never rewritten, the reload takes the next name, ``<branch>-<n+1>``;
5. pushes only when the new tree differs from the branch's
   (:meth:`~gitops_reloader.gitops.repo.Repository.push_branch` with a lease on the sha
   fetched in step 1: force, but only on our branch and only if nobody pushed since —
   the base is never pushed to). A lost lease raises
   :class:`~gitops_reloader.errors.PushRejected` (retryable): the work queue retries, and
   the retry finds the winner's branch and pull request and updates them;
6. opens the pull request (``create``: a host answering "already exists" is found and
   updated, so two controllers racing never open two) or updates its title, body and
   labels when they changed, and asks for auto-merge on a new one if configured.

A branch whose rebuilt tree equals the base (every edit it held is on the base now) has
nothing left to propose: its open pull request is closed.

Every edit of a pushed or current pull request is handed to the injected
:class:`~gitops_reloader.sinks.following.CommitFollower` as *waiting for merge*; once the base holds
it, the commit is followed into the cluster like the git sink's.

**Failures.** Host down, 5xx or rate-limited → the host client's bounded retries, then a
retryable :class:`~gitops_reloader.errors.HostError`: the controller records a Warning
Event, puts the sources back and retries with backoff, so no change is lost. A refused
token (:class:`~gitops_reloader.errors.HostAuthError`) is permanent: Warning Event on
each workload, ``skipped``. Per-workload problems (no manifest, unparsable file, ...)
skip that workload only, as in the git sink. Metrics:
``pr_operations_total{host, operation}`` (``create``, ``update``, ``skip``, ``close``,
``auto-merge``, ``cancel-auto-merge``, ``comment``, ``label``),
``pr_foreign_commits_total{host}`` and ``git_errors_total{repo, reason}``.

**Secrets.** Only keyed digests are written; the body shows their first 12 hex digits.
Titles, bodies, commit messages, logs and events carry kind/namespace/name only. Tokens
never appear: the host clients and the git adapter scrub every message they raise.

Thread-safety: ``group_key`` runs on informer threads and only resolves (cached);
``emit_batch`` runs on worker threads and serializes all work on one repository's clone
with the handle's lock. The clones are the sink's own (``<cache>/.pull-requests/<name>``),
never shared with the git sink.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from gitops_reloader.clock import Clock
from gitops_reloader.errors import (
    AnnotationError,
    ConfigError,
    GitError,
    HostError,
    HostKeyRefused,
    ManifestNotFound,
    PushRejected,
    ReloaderError,
    RemoteRefused,
    RepositoryUnusable,
    YamlEditError,
)
from gitops_reloader.gitops import prpolicy
from gitops_reloader.gitops.digestkey import DigestKey
from gitops_reloader.gitops.gitconfig import GitConfig, PullRequestConfig
from gitops_reloader.gitops.handle import RepositoryHandle
from gitops_reloader.gitops.hosts import GitHost, PullRequest
from gitops_reloader.gitops.locate import Locator, Resolution
from gitops_reloader.gitops.prbranch import PullRequestRepository
from gitops_reloader.kube.events import EventRecorder
from gitops_reloader.model import ObjectRef, Outcome, OutcomeStatus, ReloadRequest, SinkName
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.sinks.following import CommitFollower
from gitops_reloader.sinks.git import (
    EditPlan,
    ManifestPlanner,
    UnsupportedWorkload,
    skip_workload,
    tell_app_notices,
)

__all__ = ["PullRequestNotConfigured", "PullRequestSink", "require_pull_request_settings"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_PERMANENT = (ManifestNotFound, YamlEditError, AnnotationError, ConfigError, UnsupportedWorkload)
_BODY_LINES = 200


class PullRequestNotConfigured(ConfigError):
    """The workload's repository has no ``pullRequest`` block in ``--git-config``."""

    def __init__(self, ref: object, repo_name: str) -> None:
        super().__init__(f"{ref}: repository {repo_name} has no pullRequest settings in --git-config")


def require_pull_request_settings(git_config: GitConfig, ref: object, repo_name: str) -> PullRequestConfig:
    """The ``pullRequest`` block of ``repo_name``; :class:`PullRequestNotConfigured` when it has none."""
    repo_config = git_config.get(repo_name)
    if repo_config is None or repo_config.pull_request is None:
        raise PullRequestNotConfigured(ref, repo_name)
    return repo_config.pull_request


@dataclass(frozen=True, slots=True)
class _Target:
    """Where the pull requests of one repository live."""

    config: PullRequestConfig
    host: GitHost


class PullRequestSink:
    """Opens and updates one pull request per branch key; see the module docstring.

    Collaborators are injected: ``repositories`` (name → handle whose ``repo`` is a
    :class:`PullRequestRepository` with its own clone), ``hosts`` (name → the
    :class:`~gitops_reloader.gitops.hosts.GitHost` of each repository with a
    ``pullRequest`` block), ``unusable`` (name → why a repository failed its start-up
    checks: its workloads are skipped with a Warning Event), the ``locator``,
    ``digest_key`` (returns the HMAC key, loaded lazily), ``metrics``, an optional
    ``recorder`` for Warning Events and ``default_grouping`` (``--pr-grouping``).
    Callers must not use a handle's clone while the sink runs, nor share it with the
    git sink.
    """

    name: ClassVar[str] = SinkName.PULL_REQUEST.value

    def __init__(
        self,
        *,
        git_config: GitConfig,
        repositories: Mapping[str, RepositoryHandle],
        hosts: Mapping[str, GitHost],
        locator: Locator,
        digest_key: Callable[[], DigestKey],
        metrics: Metrics,
        recorder: EventRecorder | None = None,
        clock: Clock | None = None,
        default_grouping: str = "workload",
        resolve_ttl: float = 30.0,
        unusable: Mapping[str, RepositoryUnusable] | None = None,
    ) -> None:
        if default_grouping not in ("workload", "repository"):
            raise ConfigError(f"--pr-grouping: {default_grouping!r} is not workload or repository")
        self.git_config = git_config
        self.repositories = dict(repositories)
        self.unusable: dict[str, RepositoryUnusable] = dict(unusable or {})
        """Repositories that failed their start-up checks (clone or API token): why, by name."""
        for name, handle in self.repositories.items():
            if not isinstance(handle.repo, PullRequestRepository):
                raise TypeError(f"repository {name}: the pull-request sink needs a PullRequestRepository")
        self.targets: dict[str, _Target] = {}
        for name, host in hosts.items():
            settings = require_pull_request_settings(git_config, "--git-config", name)
            self.targets[name] = _Target(settings, host)
        self.planner = ManifestPlanner(locator=locator, sink_name=self.name, clock=clock,
                                       resolve_ttl=resolve_ttl)
        self.digest_key = digest_key
        self.metrics = metrics
        self.recorder = recorder
        self.default_grouping = default_grouping
        self._fallback_group = git_config.default_repository or "unresolved"
        self.follower: CommitFollower | None = None
        """Follows each edit until merged, then into the cluster (injected, :mod:`.following`)."""

    def adopt(self, name: str, handle: RepositoryHandle, host: GitHost) -> None:
        """Repository ``name``, unusable so far, passes its checks now (its clone and its API
        token): open its pull requests from here on."""
        settings = require_pull_request_settings(self.git_config, "--git-config", name)
        self.targets[name] = _Target(settings, host)
        self.repositories[name] = handle
        self.unusable.pop(name, None)

    def repository(self, name: str) -> RepositoryHandle:
        """The handle of a repository with pull requests (KeyError if unknown)."""
        return self.repositories[name]

    def close(self) -> None:
        """Release the HTTP clients the host clients made (injected ones stay open); stop following."""
        if self.follower is not None:
            self.follower.stop()
        for target in self.targets.values():
            closer = getattr(target.host, "close_client", None)
            if closer is not None:
                closer()

    # -- BatchSink protocol ------------------------------------------------------------

    def group_key(self, record: Any) -> str:
        """``<repository>#<branch key>`` of the workload; never raises.

        A workload that can't be resolved, or whose repository has no pull requests
        configured, still gets a group; ``emit_batch`` then says why on the workload.
        """
        try:
            resolution = self.planner.resolve(record)
        except ReloaderError:
            return prpolicy.group_key(self._fallback_group, "unresolved")
        target = self.targets.get(resolution.repo_name)
        if target is None:
            return prpolicy.group_key(resolution.repo_name, "unconfigured")
        return prpolicy.group_key(resolution.repo_name, self.branch_key(target, record.ref))

    def emit(self, request: ReloadRequest) -> Outcome:
        """One workload on its own (used when the controller did not batch it)."""
        return self.emit_batch([request])[0]

    def emit_batch(self, requests: Sequence[ReloadRequest]) -> list[Outcome]:
        """Push and open (or update) the pull request of every branch key in ``requests``.

        Returns one Outcome per request, in order. Raises a retryable
        :class:`~gitops_reloader.errors.ReloaderError` when a repository, its branch or
        its host could not be reached (or a lease was lost); branches already handled
        stay, and the retry finds them current.
        """
        return self._batch(requests, self._emit_branch)

    def preview_batch(self, requests: Sequence[ReloadRequest]) -> list[Outcome]:
        """What :meth:`emit_batch` would do (``--dry-run``), judged against the base branch.

        Syncs the base, asks the host for the open pull request (a read) and plans the
        edits; nothing is committed or pushed and no pull request is opened, updated or
        closed. A workload whose file differs from the base gets ``would-apply``.
        """
        return self._batch(requests, self._preview_branch)

    def _batch(self, requests: Sequence[ReloadRequest],
               per_branch: Callable[[RepositoryHandle, _Target, str,
                                     Sequence[tuple[int, ReloadRequest, Resolution]], DigestKey],
                                    dict[int, Outcome]]) -> list[Outcome]:
        outcomes: dict[int, Outcome] = {}
        groups: dict[tuple[str, str], list[tuple[int, ReloadRequest, Resolution]]] = {}
        retry: ReloaderError | None = None
        for position, request in enumerate(requests):
            try:
                self.planner.check_supported(request)
                resolution = self.planner.resolve(request.workload)
            except _PERMANENT as exc:
                outcomes[position] = self._skip(request, "-", exc)
                continue
            except ReloaderError as exc:
                retry = retry or exc
                continue
            name = resolution.repo_name
            if name in self.unusable:
                outcomes[position] = self._skip(request, name, self.unusable[name])
                continue
            target = self.targets.get(name)
            if target is None or name not in self.repositories:
                outcomes[position] = self._skip(request, name, PullRequestNotConfigured(request.ref, name))
                continue
            key = self.branch_key(target, request.ref)
            groups.setdefault((name, key), []).append((position, request, resolution))
        if groups:
            digest_key = self.digest_key()  # KubeError: retryable, nothing done yet
            for (name, key), items in groups.items():
                try:
                    outcomes.update(per_branch(self.repositories[name], self.targets[name], key,
                                               items, digest_key))
                except ReloaderError as exc:
                    if exc.retryable:
                        retry = retry or exc
                        continue
                    for position, request, _ in items:
                        outcomes[position] = self._skip(request, name, exc)
                finally:
                    tell_app_notices(self.repositories[name], items, self.recorder)
        if retry is not None:
            raise retry
        return [outcomes.get(i) or Outcome(OutcomeStatus.SKIPPED, self.name, "not handled")
                for i in range(len(requests))]

    # -- one branch ----------------------------------------------------------------------

    def branch_key(self, target: _Target, ref: ObjectRef) -> str:
        """The branch key of ``ref``'s pull request (its repository's grouping, else ``--pr-grouping``)."""
        return prpolicy.branch_key(ref, target.config.grouping or self.default_grouping)

    def _emit_branch(self, handle: RepositoryHandle, target: _Target, key: str,
                     items: Sequence[tuple[int, ReloadRequest, Resolution]],
                     digest_key: DigestKey) -> dict[int, Outcome]:
        name = handle.config.name
        base = handle.config.branch
        repo = _branch_repository(handle)
        slug = target.config.repository
        host = target.host
        with handle.lock:
            base_sha = self._git_step(name, "sync", handle.sync)
            generation = self._generation(handle, key)
            branch = prpolicy.generation_branch(base, key, generation)
            pull = self._host_step(name, lambda: host.find_open(slug, head=branch, base=base))
            remote_sha = self._git_step(name, "fetch", lambda: repo.fetch_branch(branch))

            # What the batch needs, against the base: edits, values, and who is current there.
            wanted = self.planner.plan(handle, items, digest_key)
            outcomes = {position: self._skip(request, name, exc) for position, request, exc in wanted.skipped}
            located = [item for item in items if item[0] in wanted.values]
            if pull is None and not wanted.changed:
                outcomes.update(wanted.outcomes)  # already on the base: no branch, no pull request
                if self.follower is not None:  # e.g. merged while the controller was down
                    for position, request, location in wanted.current:
                        self.follower.resume(request, location, wanted.values[position], sink=self.name)
                return outcomes

            if pull is None and remote_sha is not None:
                # No pull request of ours: the branch is rebuilt only if it holds nothing but
                # our own sealed commit (a merged or closed pull request's). Someone else's
                # branch that happens to carry our name is never rewritten.
                ahead = self._git_step(name, "inspect", lambda: repo.commits_ahead(base_sha, remote_sha))
                taken = prpolicy.branch_ownership(ahead, key=digest_key.value)
                if not taken.ours:
                    if generation >= prpolicy.MAX_GENERATION:
                        refused = RemoteRefused(f"branch {branch} holds commits gitops-reloader did not make "
                                                f"({taken.reason}) and no further name is left; delete it",
                                                reason="BranchTaken")
                        outcomes.update({position: self._skip(request, name, refused)
                                         for position, request, _ in located})
                        return outcomes
                    log.warning("a branch with the pull-request branch's name holds commits gitops-reloader "
                                "did not make; it is left alone and the reload takes the next name", extra={
                                    "repo": name, "branch": branch, "why": taken.reason})
                    generation += 1
                    branch, remote_sha = prpolicy.generation_branch(base, key, generation), None

            ahead: list[prpolicy.CommitInfo] = []
            if pull is not None and remote_sha is not None:
                tip = remote_sha
                ahead = self._git_step(name, "inspect", lambda: repo.commits_ahead(base_sha, tip))
                decision = prpolicy.branch_ownership(ahead, key=digest_key.value)
                if not decision.ours:
                    self.metrics.pr_operation(host.kind, "skip")
                    note, cancelled = self._cancel_auto_merge(name, target, pull, branch)
                    if not cancelled or generation >= prpolicy.MAX_GENERATION:
                        # Our auto-merge may still merge foreign content (the cancel is tried
                        # again on the next change), or there is no generation left: report only.
                        for position, request, _ in located:
                            outcomes[position] = self._foreign(request, name, branch, pull, decision, note)
                        return outcomes
                    successor = prpolicy.generation_branch(base, key, generation + 1)
                    self._disown(name, target, pull, branch, successor, decision, digest_key)
                    for _, request, _ in located:
                        self._foreign(request, name, branch, pull, decision, note, successor=successor)
                    # The new branch starts from the base with only our own sealed commit's
                    # config-hash lines carried over (earlier workloads of a grouped pull
                    # request keep their edit); nothing the other person pushed.
                    previous = prpolicy.own_commit(ahead, key=digest_key.value)
                    return self._rebuild(handle, target, successor, base_sha, None, None, previous,
                                         wanted, located, outcomes, digest_key,
                                         earlier=pull.body if previous is not None else "")

            previous = remote_sha if pull is not None and len(ahead) == 1 else None
            return self._rebuild(handle, target, branch, base_sha, pull, remote_sha, previous,
                                 wanted, located, outcomes, digest_key,
                                 earlier=pull.body if pull is not None else "")

    def _rebuild(self, handle: RepositoryHandle, target: _Target, branch: str, base_sha: str,
                 pull: PullRequest | None, remote_sha: str | None, previous: str | None,
                 wanted: EditPlan, located: Sequence[tuple[int, ReloadRequest, Resolution]],
                 outcomes: dict[int, Outcome], digest_key: DigestKey, *, earlier: str) -> dict[int, Outcome]:
        """Rebuild ``branch`` as one sealed commit on the base, push it if it changed, open or
        update its pull request. ``previous``: our commit whose config-hash lines are carried
        over; ``earlier``: the body whose workload entries the new body keeps listing. Runs
        under the handle's lock (the caller holds it)."""
        name = handle.config.name
        base = handle.config.branch
        repo = _branch_repository(handle)
        # Rebuild: one commit on the latest base = previous commit carried over + this batch.
        carried = self._rebuild_start(handle, branch, base_sha, previous)
        rebuilt = self.planner.plan(handle, located, digest_key)
        for position, request, exc in rebuilt.skipped:  # the carried text broke the edit
            outcomes[position] = self._skip(request, name, exc)
        entries = prpolicy.merge_entries(
            prpolicy.parse_entries(earlier),
            [prpolicy.entry_for(request, wanted.values[position])
             for position, request, _ in wanted.applied if position not in outcomes],
            drop=[request.ref.key for position, request, _ in located if position in wanted.outcomes])
        head = self._commit(handle, rebuilt, carried, entries, digest_key)
        tree = repo.tree(head)
        if tree == repo.tree(base_sha):
            self._close_obsolete(name, target, pull, branch)
            for position, _, _ in located:
                outcomes.setdefault(position, wanted.outcomes.get(position) or Outcome(
                    OutcomeStatus.ALREADY_CURRENT, self.name, f"{name}:{base} already has this edit"))
            return outcomes

        pushed = remote_sha is None or repo.tree(remote_sha) != tree
        if pushed:
            self._push(handle, branch, remote_sha)
        pull, changed = self._open_or_update(name, target, pull, branch, base, entries)

        for position, _, _ in wanted.applied:
            if position in outcomes:
                continue
            if pushed or changed:
                outcomes[position] = Outcome(OutcomeStatus.APPLIED, self.name,
                                             f"pull request #{pull.number} ({branch} into {base})")
            else:
                outcomes[position] = Outcome(OutcomeStatus.ALREADY_CURRENT, self.name,
                                             f"pull request #{pull.number} already has this edit")
        for position, outcome in wanted.outcomes.items():
            outcomes.setdefault(position, outcome)
        if self.follower is not None:
            for position, request, location in wanted.applied:
                if outcomes[position].status in (OutcomeStatus.APPLIED, OutcomeStatus.ALREADY_CURRENT):
                    self.follower.await_merge(request, location, wanted.values[position], sink=self.name)
        log.info("pull request branch handled", extra={
            "repo": name, "branch": branch, "number": pull.number, "pushed": pushed,
            "pr_changed": changed, "workloads": len(entries)})
        return outcomes

    def _preview_branch(self, handle: RepositoryHandle, target: _Target, key: str,
                        items: Sequence[tuple[int, ReloadRequest, Resolution]],
                        digest_key: DigestKey) -> dict[int, Outcome]:
        """Plan the branch's edits against the base; read the host, write nothing."""
        name = handle.config.name
        base = handle.config.branch
        with handle.lock:
            self._git_step(name, "sync", handle.sync)
            branch = self.branch_for(handle, key)
            pull = self._host_step(name, lambda: target.host.find_open(
                target.config.repository, head=branch, base=base))
            wanted = self.planner.plan(handle, items, digest_key)
            outcomes = {position: self._skip(request, name, exc) for position, request, exc in wanted.skipped}
            action = f"update pull request #{pull.number}" if pull is not None else "open a pull request"
            for position, _, location in wanted.applied:
                outcomes[position] = Outcome(OutcomeStatus.WOULD_APPLY, self.name,
                                             f"would push {branch} and {action}: {location.path} into {base}")
            outcomes.update(wanted.outcomes)
            return outcomes

    def _rebuild_start(self, handle: RepositoryHandle, branch: str, base_sha: str,
                       previous: str | None) -> tuple[str, ...]:
        """Check out ``branch`` at the base and carry the previous commit's files over."""
        repo = _branch_repository(handle)
        name = handle.config.name
        self._git_step(name, "checkout", lambda: repo.checkout_new_branch_from(base_sha, branch))
        if previous is None:
            return ()
        commit = previous
        carry = self._git_step(name, "carry-over", lambda: repo.carry_over(commit))
        if carry.conflicted:
            log.warning("edits of the open pull request clash with the base; the base's files are kept",
                        extra={"repo": name, "branch": branch, "paths": ",".join(carry.conflicted)})
        if carry.refused:
            self.metrics.git_error(name, "carry-over-refused")
            log.warning("changes of the open pull request other than config-hash lines are not carried over",
                        extra={"repo": name, "branch": branch, "paths": ",".join(carry.refused)})
        return carry.carried

    def _commit(self, handle: RepositoryHandle, plan: EditPlan, carried: Sequence[str],
                entries: Sequence[prpolicy.WorkloadEntry], digest_key: DigestKey) -> str:
        """Write the plan, commit it sealed with the carried files; the new head (the base if nothing)."""
        repo = _branch_repository(handle)
        paths = sorted(set(plan.changed) | set(carried))

        def seal(tree: str, parents: tuple[str, ...]) -> str:
            return prpolicy.seal_trailer(digest_key.value, tree, parents)

        def write_and_commit() -> str | None:
            for path in sorted(plan.changed):
                repo.write(path, plan.texts[path].encode("utf-8"))
            return repo.commit_sealed(self.commit_message(handle, entries), paths, seal) if paths else None

        sha = self._git_step(handle.config.name, "commit", write_and_commit)
        return sha if sha is not None else repo.head()

    def _push(self, handle: RepositoryHandle, branch: str, expected: str | None) -> None:
        name = handle.config.name
        repo = _branch_repository(handle)
        try:
            repo.push_branch(branch, branch, expected_remote_sha=expected)
        except PushRejected:
            self.metrics.git_push_rejected(name)
            log.info("push of the pull-request branch lost its lease; will retry",
                     extra={"repo": name, "branch": branch})
            raise
        except GitError as exc:
            self.metrics.git_error(name, "push")
            log.warning("push of the pull-request branch failed",
                        extra={"repo": name, "branch": branch, "error": str(exc)})
            raise

    def _open_or_update(self, name: str, target: _Target, pull: PullRequest | None, branch: str,
                        base: str, entries: Sequence[prpolicy.WorkloadEntry]) -> tuple[PullRequest, bool]:
        """Create the pull request, or update it if its title or body differ; (it, changed?)."""
        host = target.host
        slug = target.config.repository
        labels = target.config.labels
        title = prpolicy.render_title(entries)
        limit = min(prpolicy.BODY_LIMIT, getattr(host, "max_body", prpolicy.BODY_LIMIT))
        body = prpolicy.render_body(entries, branch=branch, base=base, limit=limit)
        if pull is None:
            created = self._host_step(name, lambda: host.create(
                slug, head=branch, base=base, title=title, body=body, labels=labels))
            self.metrics.pr_operation(host.kind, "create")
            log.info("pull request opened", extra={"repo": name, "branch": branch, "number": created.number})
            if target.config.auto_merge:
                self._auto_merge(name, target, created)
            return created, True
        if _same(pull.title, title) and _same(pull.body, body):
            return pull, False
        updated = self._host_step(name, lambda: host.update(
            slug, pull.number, title=title, body=body, labels=labels))
        self.metrics.pr_operation(host.kind, "update")
        log.info("pull request updated", extra={"repo": name, "branch": branch, "number": pull.number})
        return updated, True

    def _auto_merge(self, name: str, target: _Target, pull: PullRequest) -> None:
        """Ask for auto-merge; a failure is logged, never fails the reload (the PR exists)."""
        try:
            enabled = target.host.enable_auto_merge(target.config.repository, pull.number)
        except HostError as exc:
            self.metrics.git_error(name, "auto-merge")
            log.warning("could not enable auto-merge", extra={
                "repo": name, "number": pull.number, "error": str(exc)})
            return
        if enabled:
            self.metrics.pr_operation(target.host.kind, "auto-merge")
        else:
            log.info("auto-merge not available on this host or repository",
                     extra={"repo": name, "number": pull.number})

    def _cancel_auto_merge(self, name: str, target: _Target, pull: PullRequest,
                           branch: str) -> tuple[str, bool]:
        """Cancel the auto-merge we may have armed on a branch that is not ours any more.

        Returns the sentence for the ``ForeignCommits`` Event (``""`` without ``autoMerge``)
        and whether no auto-merge of ours is left armed. A failure is logged and counted,
        never raised: the next change tries again.
        """
        if not target.config.auto_merge:
            return "", True
        fields = {"repo": name, "branch": branch, "number": pull.number}
        try:
            cancelled = target.host.cancel_auto_merge(target.config.repository, pull.number)
        except HostError as exc:
            self.metrics.git_error(name, "cancel-auto-merge")
            log.warning("could not cancel the auto-merge of a pull request with foreign commits; "
                        "tried again on the next change", extra={**fields, "error": str(exc)})
            return (f" Its auto-merge could NOT be cancelled ({_short_error(exc)}): cancel it by hand; "
                    "it is tried again on the next change."), False
        if cancelled:
            self.metrics.pr_operation(target.host.kind, "cancel-auto-merge")
            log.warning("auto-merge cancelled: the pull-request branch has foreign commits", extra=fields)
            return " Its auto-merge was cancelled.", True
        log.info("no auto-merge armed on the pull request with foreign commits", extra=fields)
        return " There was no auto-merge of ours to cancel.", True

    def branch_for(self, handle: RepositoryHandle, key: str) -> str:
        """The branch the next change of branch key ``key`` goes to: its newest generation on
        the remote (one ``git ls-remote``; the host's API is not asked)."""
        return prpolicy.generation_branch(handle.config.branch, key, self._generation(handle, key))

    def _generation(self, handle: RepositoryHandle, key: str) -> int:
        """The newest generation of ``key``'s branch on the remote (0 when there is none)."""
        repo = _branch_repository(handle)
        first = prpolicy.branch_name(handle.config.branch, key)
        heads = self._git_step(handle.config.name, "inspect", lambda: repo.branches_starting(first))
        return max(prpolicy.generations(handle.config.branch, key, heads), default=0)

    def _disown(self, name: str, target: _Target, pull: PullRequest, branch: str, successor: str,
                decision: prpolicy.BranchDecision, digest_key: DigestKey) -> None:
        """Say on ``pull`` (once) that the controller no longer vouches for it, and label it.

        The notice ends with a marker keyed with the digest key
        (:func:`~gitops_reloader.gitops.prpolicy.foreign_notice_marker`), so a restart or the
        next change finds it and does not comment again, and nobody else's comment passes
        for it. A host error that retrying can fix is raised (nothing is pushed yet, the
        retry finds what was done); a refusal (no right to comment, or to label) is logged
        and counted, the other step is still tried, and the reload goes on.
        """
        host = target.host
        slug = target.config.repository
        fields = {"repo": name, "branch": branch, "number": pull.number, "successor": successor}
        marker = prpolicy.foreign_notice_marker(digest_key.value, slug, pull.number, branch)

        def comment() -> None:
            bodies = self._host_step(name, lambda: host.comments(slug, pull.number))
            if prpolicy.has_notice(bodies, marker):
                return
            notice = prpolicy.foreign_notice(branch=branch, decision=decision, successor=successor,
                                             marker=marker)
            self._host_step(name, lambda: host.add_comment(slug, pull.number, notice))
            self.metrics.pr_foreign_commits(host.kind)
            self.metrics.pr_operation(host.kind, "comment")
            log.warning("pull request with foreign commits commented; the reload moves to a new branch",
                        extra=fields)

        def label() -> None:
            if prpolicy.FOREIGN_LABEL in pull.labels:
                return
            if self._host_step(name, lambda: host.add_labels(slug, pull.number, [prpolicy.FOREIGN_LABEL])):
                self.metrics.pr_operation(host.kind, "label")

        for step, what in ((comment, "comment on"), (label, "label")):
            try:
                step()
            except HostError as exc:
                if exc.retryable:
                    raise
                self.metrics.git_error(name, "foreign-notice")
                log.warning(f"could not {what} the pull request with foreign commits",
                            extra={**fields, "error": str(exc)})

    def _close_obsolete(self, name: str, target: _Target, pull: PullRequest | None, branch: str) -> None:
        """Every edit of the branch is on the base now: close its open pull request."""
        if pull is None:
            return
        self._host_step(name, lambda: target.host.close(target.config.repository, pull.number))
        self.metrics.pr_operation(target.host.kind, "close")
        log.info("pull request closed: the base branch already has all its edits",
                 extra={"repo": name, "branch": branch, "number": pull.number})

    def commit_message(self, handle: RepositoryHandle, entries: Sequence[prpolicy.WorkloadEntry]) -> str:
        """Subject from the repository's template, then one line per workload. Names only."""
        config = handle.config
        workloads = list(dict.fromkeys(e.name for e in entries)) or ["workloads"]
        sources = list(dict.fromkeys(s.label for e in entries for s in e.sources))
        subject = config.commit_message.format(
            workloads=_short(workloads), sources=_short(sources), repository=config.name, count=len(entries))
        lines = [f"- {e.key}: " + ", ".join(s.describe() for s in e.sources) for e in entries[:_BODY_LINES]]
        if len(entries) > _BODY_LINES:
            lines.append(f"- and {len(entries) - _BODY_LINES} more")
        return f"{subject}\n\n" + "\n".join(lines) + "\n\nReloaded-by: gitops-reloader\n"

    # -- steps with their metrics ------------------------------------------------------------

    def _git_step(self, repo_name: str, step: str, call: Callable[[], _T]) -> _T:
        try:
            return call()
        except GitError as exc:
            self.metrics.git_error(repo_name, exc.reason if isinstance(exc, HostKeyRefused) else step)
            log.warning("git step of the pull-request sink failed",
                        extra={"repo": repo_name, "step": step, "error": str(exc)})
            raise

    def _host_step(self, repo_name: str, call: Callable[[], _T]) -> _T:
        try:
            return call()
        except HostError as exc:
            self.metrics.git_error(repo_name, "host")
            log.warning("git host request failed",
                        extra={"repo": repo_name, "error": str(exc), "retryable": exc.retryable})
            raise

    # -- reporting ------------------------------------------------------------------------------

    def _foreign(self, request: ReloadRequest, repo_name: str, branch: str, pull: PullRequest,
                 decision: prpolicy.BranchDecision, auto_merge_note: str = "", *,
                 successor: str = "") -> Outcome:
        if successor:
            then = (f"Pull request #{pull.number} is theirs now: gitops-reloader said so on it and no longer "
                    f"updates it; the reload goes to a new pull request from branch {successor}.")
        else:
            then = (f"Pull request #{pull.number} is theirs now: merge or close it, and the next change "
                    "opens a new one.")
        message = (f"pull-request sink, repository {repo_name}: branch {branch} has commits from someone "
                   f"else ({decision.reason}); not updated. {then}{auto_merge_note}")
        log.warning("pull-request branch has commits from someone else; not updated", extra={
            "object": request.ref.key, "sink": self.name, "repo": repo_name, "branch": branch,
            "number": pull.number, "reason": decision.reason, "successor": successor})
        self.metrics.git_error(repo_name, "ForeignCommits")
        if self.recorder is not None:
            self.recorder.warning(request.ref, "ForeignCommits", message, uid=str(request.workload.uid))
        return Outcome(OutcomeStatus.SKIPPED, self.name, f"branch {branch} has commits from someone else")

    def _skip(self, request: ReloadRequest, repo_name: str, exc: ReloaderError) -> Outcome:
        return skip_workload(self.name, request, repo_name, exc, metrics=self.metrics,
                             recorder=self.recorder)


def _branch_repository(handle: RepositoryHandle) -> PullRequestRepository:
    repo = handle.repo
    assert isinstance(repo, PullRequestRepository)  # checked in PullRequestSink.__init__
    return repo


def _same(a: str, b: str) -> bool:
    """Equal up to line endings and surrounding whitespace (hosts normalize both)."""
    return a.replace("\r\n", "\n").strip() == b.replace("\r\n", "\n").strip()


def _short_error(exc: HostError, limit: int = 200) -> str:
    """The host client's message (already scrubbed of tokens), cut to ``limit`` characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(items: Sequence[str]) -> str:
    shown = ", ".join(items[:5])
    return shown + (f" and {len(items) - 5} more" if len(items) > 5 else "")
