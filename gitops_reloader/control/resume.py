"""After a restart or take-over: continue what the previous instance had under way, whatever the flags.

:class:`Resumer` runs once when an instance becomes active (:meth:`Controller.activate`),
before its workers start, and reads everything from the cluster and the repository — nothing
from the memory of the instance that stopped:

1. **The git follow-up.** For every workload of the ``git`` sink, the synced clone says what
   its manifest holds (the committed ``config-hash`` and, with a budget, the rollout marker);
   a committed value goes to :meth:`Follower.resume
   <gitops_reloader.control.follower.Follower.resume>`, which follows the commit that last wrote
   the file while it is younger than ``--git-apply-timeout`` and reports its end unless the
   Event is already on the workload (one ``Applied`` per commit). Nothing is committed here.
   The ``pull-request`` sink's workloads go to :func:`~gitops_reloader.sinks.prresume.resume_pull_requests`:
   an open pull request of the controller's is awaited until merged, a merged one is followed
   through the same :meth:`Follower.resume`; nothing is pushed, opened or commented.
2. **Writes not seen yet.** A marker committed in a manifest that the live workload does not
   carry yet (the engine has not applied the commit) is a rollout under way: the
   :class:`~gitops_reloader.rollout.tracker.Tracker` counts it from the commit, so the
   budget is never exceeded by granting the next wave before the previous one reached the
   cluster (:meth:`Tracker.restore <gitops_reloader.rollout.tracker.Tracker.restore>`).
3. **Waves in flight.** The changes named by the markers at their sources' current hashes
   (:mod:`gitops_reloader.rollout.resume`) were being rolled out; each gated workload still
   waiting for one of them (its record is not that change) becomes pending again and goes
   through the budget as the rest of the wave would have. A change made while no instance
   ran is not resumed (no marker names it): that stays ``--sync-after-restart``'s job.

Holds already in force (a failed rollout of the same change) are not announced again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from gitops_reloader.clock import Clock
from gitops_reloader.control.caches import Caches
from gitops_reloader.control.reconciler import Reconciler
from gitops_reloader.control.waves import Waves
from gitops_reloader.control.writtenat import DataWrittenAt
from gitops_reloader.errors import ReloaderError
from gitops_reloader.gitops.locate import Resolution
from gitops_reloader.gitops.yamledit import read_at_path
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.workloads import WorkloadAdapter, WorkloadRecord
from gitops_reloader.ledger import PendingSource
from gitops_reloader.model import EMPTY_MAP, ObjectRef, ReloadRequest, SinkName, Source, SourceRef
from gitops_reloader.rollout.marker import MARKER_ANNOTATION, Marker, change_id, parse_marker
from gitops_reloader.rollout.resume import InFlight, in_flight, unseen, waits
from gitops_reloader.sinks.git import GitSink, ManifestPlanner, source_digest_inputs
from gitops_reloader.sinks.prresume import resume_pull_requests
from gitops_reloader.sinks.pullrequest import PullRequestSink

log = logging.getLogger(__name__)

_METADATA_ANNOTATIONS = ("metadata", "annotations")


@dataclass(frozen=True, slots=True)
class Committed:
    """What a ``git`` workload's manifest holds in the synced clone."""

    digest: str | None
    """The committed ``config-hash`` (None: none yet)."""
    current: str
    """The digest of the workload's sources as they are now (equal: nothing to commit)."""
    marker: Marker | None
    """The rollout marker committed in its ``metadata.annotations`` (None: none, or unreadable)."""


@dataclass(slots=True)
class Resumed:
    """What :meth:`Resumer.run` found to continue."""

    pending: dict[str, dict[SourceRef, PendingSource]] = field(default_factory=dict)
    """Workload key → the in-flight source changes it still waits for."""
    in_flight: int = 0
    restored: int = 0
    """Rollouts counted from a commit the cluster has not shown yet."""
    followed: int = 0
    """Git and pull-request workloads handed to the follow-up."""
    current: set[str] = field(default_factory=set)
    """Git workloads whose manifest holds their sources' current digest: nothing to commit."""


class Resumer:
    """Derives, from the caches and the repositories, what a new active instance continues."""

    def __init__(self, caches: Caches, reconciler: Reconciler, *, api: KubeApi,
                 adapters: Mapping[str, WorkloadAdapter], waves: Waves | None, clock: Clock,
                 written: DataWrittenAt | None = None) -> None:
        self.written = written
        """When a source's data was written: a change is older than its wave's first write."""
        self.caches = caches
        self.reconciler = reconciler
        self.api = api
        self.adapters = adapters
        self.waves = waves
        self.clock = clock

    def run(self) -> Resumed:
        """Resume the follow-up, restore unseen writes, and list the workloads a wave still owes."""
        git = self.reconciler.sinks.get(SinkName.GIT.value)
        reads_git = isinstance(git, GitSink) and (git.follower is not None or self.waves is not None)
        pulls = self.reconciler.sinks.get(SinkName.PULL_REQUEST.value)
        follows_pulls = isinstance(pulls, PullRequestSink) and pulls.follower is not None
        resumed = Resumed()
        if not reads_git and not follows_pulls and self.waves is None:
            return resumed  # no budget, no follow-up: nothing can be under way
        records = [r for r in self.caches.workloads() if self.caches.namespace_allowed(r.ref.namespace)]
        if follows_pulls:
            assert isinstance(pulls, PullRequestSink)
            now = int(self.clock.now())
            resumed.followed += resume_pull_requests(
                pulls, [self._request(r, now) for r in records if self.reconciler.sink_for(r) is pulls])
        committed: dict[ObjectRef, Committed] = {}
        if reads_git:
            assert isinstance(git, GitSink)
            mine = [r for r in records if self.reconciler.sink_for(r) is git and r.ref.kind != "Job"]
            committed = self._read_git(git, mine, resumed)
        waves = self.waves
        if waves is None:
            return resumed
        now = self.clock.now()
        for record in records:
            found = committed.get(record.ref)
            live = parse_marker(record.annotations.get(MARKER_ANNOTATION))
            if found is not None and found.marker is not None and unseen(found.marker, live):
                waves.tracker.restore(record.ref, found.marker, now)
                resumed.restored += 1
        flight = in_flight([parse_marker(r.annotations.get(MARKER_ANNOTATION)) for r in records]
                           + [c.marker for c in committed.values()])
        resumed.in_flight = len(flight.first_at)
        if not flight.first_at:
            return resumed
        failed = frozenset(c for r in waves.tracker.failed(now) for c in r.marker.changes)
        for record in records:
            sources = self._waiting(record, flight, committed.get(record.ref),
                                    git if isinstance(git, GitSink) else None)
            if not sources:
                continue
            resumed.pending[record.ref.key] = sources
            changes = frozenset(change_id(Source(ref, self.reconciler.source_hash(record, p.meta)))
                                for ref, p in sources.items())
            if changes & failed:
                waves.assume_announced(record.ref.key, changes)
        return resumed

    # --- waves ----------------------------------------------------------------------------

    def _waiting(self, record: WorkloadRecord, flight: InFlight, committed: Committed | None,
                 git: GitSink | None) -> dict[SourceRef, PendingSource]:
        """The in-flight changes ``record`` has not been given yet (empty: none, or not gated)."""
        assert self.waves is not None
        sink = self.reconciler.sink_for(record)
        if sink is None or not self.waves.gates(sink.name, record.ref):
            return {}
        if git is not None and sink is git and (committed is None or not git.budgeted(record)):
            return {}  # not located (reported when it is reloaded), or not waved (a git-target)
        out: dict[SourceRef, PendingSource] = {}
        created = int(record.created) or None
        for meta, container in self.reconciler.tracked(record):
            if not meta.hash:
                continue
            used = self.reconciler.source_hash(record, meta)
            change = flight.match((change_id(Source(meta.ref, used)), change_id(Source(meta.ref, meta.hash))))
            if change is None:
                continue
            if committed is not None:
                recorded, accepted = committed.digest, {committed.current}
            else:
                recorded, accepted = self.reconciler.recorded_hash(record, meta, container), {used, meta.hash}
            started = flight.first_at[change]
            if recorded is None and self.written is not None:  # the change, not its first write
                written = self.written.at(meta.ref, meta.resource_version)
                started = min(started, int(written)) if written is not None else started
            if waits(recorded, accepted, created=created, started=started):
                out[meta.ref] = PendingSource(meta, detected=self.clock.monotonic())
        return out

    def _request(self, record: WorkloadRecord, now: int) -> ReloadRequest:
        """A request for ``record`` with no changed source: what its manifest should hold now."""
        return ReloadRequest(record.ref, record, (), now, tracked=self.reconciler.tracked_sources(record))

    def _read_git(self, sink: GitSink, records: Iterable[WorkloadRecord], resumed: Resumed,
                  ) -> dict[ObjectRef, Committed]:
        """Per ``git`` workload, what its manifest holds; the committed values handed to the
        follow-up. A workload that can't be resolved or located is left out (its next reload
        reports why); a repository that can't be synced is left out and logged."""
        by_repo: dict[str, list[tuple[WorkloadRecord, Resolution]]] = {}
        for record in records:
            try:
                resolution = sink.planner.resolve(record)
            except ReloaderError:
                continue
            if resolution.repo_name in sink.repositories:
                by_repo.setdefault(resolution.repo_name, []).append((record, resolution))
        if not by_repo:
            return {}
        try:
            key = sink.digest_key()
        except ReloaderError as exc:
            log.warning("cannot resume git follow-up and waves: no digest key", extra={"error": str(exc)})
            return {}
        out: dict[ObjectRef, Committed] = {}
        now = int(self.clock.now())
        for repo_name, items in by_repo.items():
            handle = sink.repository(repo_name)
            with handle.lock:
                try:
                    handle.sync()
                except ReloaderError as exc:
                    log.warning("cannot resume git follow-up and waves: repository not synced",
                                extra={"repo": repo_name, "error": str(exc)})
                    continue
                for record, resolution in items:
                    request = self._request(record, now)
                    try:
                        location = sink.locator.locate(record, resolution, handle.index, confirm=True)
                        digest = ManifestPlanner.committed_value(handle, request, location)
                        marker = None
                        if location.yaml_path is None:
                            text = (handle.repo.read(location.path) or b"").decode("utf-8", "replace")
                            marker = parse_marker(read_at_path(
                                text, path_expr=_METADATA_ANNOTATIONS, key=MARKER_ANNOTATION,
                                doc_index=location.doc_index, path=location.path))
                    except ReloaderError as exc:
                        log.debug("not resumed: manifest not read", extra={"object": record.ref.key,
                                                                             "error": str(exc)})
                        continue
                    out[record.ref] = Committed(digest, key.digest(source_digest_inputs(request)), marker)
                    if digest is not None and digest == out[record.ref].current:
                        resumed.current.add(record.ref.key)
                    if sink.follower is not None and digest is not None:
                        marked = ({MARKER_ANNOTATION: marker.encode()}
                                  if marker is not None and self.waves is not None else EMPTY_MAP)
                        sink.follower.resume(replace(request, workload_annotations=marked), location, digest,
                                             sink=sink.name)
                        resumed.followed += 1
        return out
