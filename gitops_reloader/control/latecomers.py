"""Changes owed to a workload whose creation the controller hears of after the change.

A workload created just before a source it reads changes (Stakater's own suite creates a CronJob
and changes its ConfigMap ~10 ms later) may reach the controller after the change: the two come
on different watches, in no set order. When the change was handled, the workload was not in the
reference index, so nothing was made owed; when its creation arrives, the change is over. Its
pods (a CronJob's next Job) may have started with the data before the change, so it is owed it.
A delete (``--reload-on-delete``) is remembered alike, ordered by the delete's own version.

Which came first is told by resourceVersion, not by time (creation and write times are whole
seconds; the race is milliseconds): kube-apiserver's versions are etcd's revision, one counter
for every object of one store, as the ledger's template baselines already assume. A workload
whose ADDED event carries a version below the change's was created before it. A workload
changed again before its ADDED event arrived (a relist's newer version) cannot be ordered and
is left as created after: the error is one reload fewer, as it was before this existed.

Changes are remembered for :data:`HORIZON` seconds of the monotonic clock: a watch event held
back longer than that has bigger problems (a relist, which the start-up check covers).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from gitops_reloader.clock import Clock
from gitops_reloader.model import SourceMeta, SourceRef, resource_version_number

__all__ = ["HORIZON", "RecentChange", "RecentChanges"]

HORIZON = 120.0
"""Seconds a handled change is remembered for a workload whose creation is heard of late."""


@dataclass(frozen=True)
class RecentChange:
    """A handled data change: the source after it, before it (None: unknown), its version."""

    meta: SourceMeta
    previous: SourceMeta | None
    number: int
    seen: float
    deleted: bool = False
    """A delete (``meta``: the source as it was), remembered with ``--reload-on-delete``."""


class RecentChanges:
    """The data changes handled in the last :data:`HORIZON` seconds, newest per source."""

    def __init__(self, clock: Clock, horizon: float = HORIZON) -> None:
        self._clock = clock
        self._horizon = horizon
        self._changes: dict[SourceRef, RecentChange] = {}
        self._lock = threading.Lock()

    def note(self, meta: SourceMeta, previous: SourceMeta | None, *, deleted: bool = False,
             version: str = "") -> None:
        """Remember a change of ``meta.ref`` (before its readers are looked up, so a workload
        indexed meanwhile finds it here); ``version``: the change's resourceVersion where it is
        not the object's (a delete's is the event's), else ``meta``'s."""
        number = resource_version_number(version or meta.resource_version)
        if number is None:
            return
        with self._lock:
            self._prune()
            self._changes.pop(meta.ref, None)  # re-inserted last: the dict stays in order of seen
            self._changes[meta.ref] = RecentChange(meta, previous, number, self._clock.monotonic(), deleted)

    def made_after(self, created_version: str) -> list[RecentChange]:
        """The remembered changes written after the object at ``created_version`` was."""
        number = resource_version_number(created_version)
        if number is None:
            return []
        with self._lock:
            self._prune()
            return [change for change in self._changes.values() if change.number > number]

    def __len__(self) -> int:
        with self._lock:
            return len(self._changes)

    def _prune(self) -> None:
        """Drop the changes older than the horizon: the oldest first, stopping at the first kept
        (``note`` keeps the dict in order of ``seen``), so a call costs what it drops."""
        oldest = self._clock.monotonic() - self._horizon
        while self._changes:
            ref, change = next(iter(self._changes.items()))
            if change.seen >= oldest:
                return
            del self._changes[ref]
