"""Which informer deltas are data changes, and the changes waiting for their workload.

:class:`ChangeDetector` turns a source's old/new record into the changes that matter
(data differs, deleted and re-created with other data, and — when asked — creations and
deletions). :class:`PendingChanges` keeps, per workload key, the changed sources not yet
emitted, in the order they changed, plus the batch groups a batch sink collects them in.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

from gitops_reloader.model import SourceMeta, SourceRef

_TOMBSTONES = 10_000


@dataclass(frozen=True, slots=True)
class PendingSource:
    """A changed source waiting for its workload's turn (deleted: a delete to record)."""

    meta: SourceMeta
    deleted: bool = False
    resync: bool = False
    detected: float | None = None
    """Monotonic time the change was seen (None: a resync, not a change)."""


@dataclass(frozen=True, slots=True)
class Change:
    """A source whose data changed (``deleted``: the change is its deletion)."""

    meta: SourceMeta
    deleted: bool = False
    previous: SourceMeta | None = field(default=None, compare=False)
    """The source before the change (an empty one for a creation, ``meta`` itself for a
    deletion, after which no key is left; None: unknown), so key-level reload can tell which
    keys it touched."""


class ChangeDetector:
    """Decides from informer deltas which are data changes (informer threads only).

    A deleted source leaves a tombstone (its change key, the last ``limit`` kept) so that
    a delete-and-re-create with other data counts as a change, and with the same data
    does not.
    """

    def __init__(self, *, reload_on_create: bool, reload_on_delete: bool,
                 limit: int = _TOMBSTONES) -> None:
        self.reload_on_create = reload_on_create
        self.reload_on_delete = reload_on_delete
        self.limit = limit
        self._tombstones: OrderedDict[SourceRef, str] = OrderedDict()

    def changes(self, old: SourceMeta | None, new: SourceMeta | None) -> list[Change]:
        """The changes one delta (``old`` → ``new``; None for absent) amounts to."""
        if old is not None and new is not None:
            return [Change(new, previous=old)] if old.change_key != new.change_key else []
        if new is not None:
            previous = self._tombstones.pop(new.ref, None)
            if previous is not None and previous != new.change_key:
                return [Change(new)]  # deleted and re-created with other data
            return [Change(new, previous=SourceMeta(new.ref))] if self.reload_on_create else []
        if old is not None:
            self._tombstones[old.ref] = old.change_key
            while len(self._tombstones) > self.limit:
                self._tombstones.popitem(last=False)
            return [Change(old, deleted=True, previous=old)] if self.reload_on_delete else []
        return []


class PendingChanges:
    """Changed sources per workload key, and batch groups of workload keys (thread-safe).

    What :meth:`take` / :meth:`take_group` hand out stays *in flight* until
    :meth:`settle` is called for the same key, so :meth:`sources` names every source
    with work outstanding, queued or under way (the state store holds those back).
    """

    def __init__(self) -> None:
        self._pending: dict[str, dict[SourceRef, PendingSource]] = {}
        self._groups: dict[str, set[str]] = {}
        self._in_flight: dict[str, set[SourceRef]] = {}
        self._flying_members: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._pending)

    def add(self, key: str, sources: Mapping[SourceRef, PendingSource], *, retry: bool = False) -> None:
        """Record ``sources`` for ``key``; on ``retry`` a newer change already recorded wins."""
        with self._lock:
            pending = self._pending.setdefault(key, {})
            for ref, item in sources.items():
                if retry and ref in pending:
                    continue  # a newer change arrived meanwhile: it wins
                pending.pop(ref, None)  # keep insertion order = order of change
                pending[ref] = item

    def keys(self) -> set[str]:
        """The workload keys with sources pending (not yet taken)."""
        with self._lock:
            return {key for key, sources in self._pending.items() if sources}

    def pending_for(self, key: str) -> set[SourceRef]:
        """The sources pending for workload ``key`` (not yet taken)."""
        with self._lock:
            return set(self._pending.get(key, ()))

    def take(self, key: str) -> dict[SourceRef, PendingSource]:
        """Remove and return what is pending for ``key`` (empty: nothing); in flight until settled."""
        with self._lock:
            taken = self._pending.pop(key, {})
            if taken:
                self._in_flight.setdefault(key, set()).update(taken)
            return taken

    def settle(self, key: str) -> None:
        """The work taken for ``key`` (a workload or batch group key) is finished."""
        with self._lock:
            self._in_flight.pop(key, None)
            self._flying_members.pop(key, None)

    def busy(self) -> set[str]:
        """Every workload key with work outstanding: pending, in a batch group, or in flight."""
        with self._lock:
            out = set(self._pending) | set(self._in_flight)
            for members in self._groups.values():
                out |= members
            for flying in self._flying_members.values():
                out.update(flying)
            return out

    def members(self, group: str) -> list[str]:
        """The workload keys of batch ``group`` (waiting now, or taken and not yet settled)."""
        with self._lock:
            return sorted(self._groups.get(group, set()) | set(self._flying_members.get(group, ())))

    def sources(self) -> set[SourceRef]:
        """Every source with work outstanding: pending or in flight."""
        with self._lock:
            out = {ref for pending in self._pending.values() for ref in pending}
            for refs in self._in_flight.values():
                out |= refs
            return out

    def join_group(self, group: str, key: str) -> None:
        """Make ``key`` a member of batch ``group`` (emitted together)."""
        with self._lock:
            self._groups.setdefault(group, set()).add(key)

    def take_group(self, group: str) -> dict[str, dict[SourceRef, PendingSource]]:
        """Remove the group and return each member's pending sources, members sorted."""
        with self._lock:
            members = sorted(self._groups.pop(group, set()))
            taken = {key: self._pending.pop(key, {}) for key in members}
            if members:
                self._flying_members[group] = members
            flying = {ref for sources in taken.values() for ref in sources}
            if flying:
                self._in_flight.setdefault(group, set()).update(flying)
            return taken
