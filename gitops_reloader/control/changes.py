"""Which informer deltas are data changes.

:class:`ChangeDetector` turns a source's old/new record into the changes that matter
(data differs, deleted and re-created with other data, and — when asked — creations and
deletions). What each workload then owes waits in the :class:`~gitops_reloader.ledger.Ledger`.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from gitops_reloader.model import SourceMeta, SourceRef

_TOMBSTONES = 10_000


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
