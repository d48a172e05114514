"""Which namespaces a label-sharded instance acts in, decided per change by resourceVersion.

With ``--namespace-selector`` (one selector per shard, docs/scaling.md) instances hand a
relabelled namespace over with no coordinator: each sees the relabel, at resourceVersion
``m``, on its namespace watch, and every ConfigMap/Secret change, at ``r``, on its source
watches. Inside one process those streams are not ordered against each other, so asking
"is the namespace selected *now*" when a change arrives could lose it (the releasing
instance has seen the relabel, the acquiring one not yet) or act on it twice.

:class:`NamespaceMembership` therefore remembers *when* each namespace joined or left
and answers for the change's own version: the change is ours when the namespace was
selected at ``r``. A change declined because its namespace was not selected is kept (the
latest per source, a bounded number); when the namespace then joins at ``m < r`` it is
handed back to be acted on. Outcome, for every order in which the streams deliver:

- ``r < m`` (changed before the relabel): the releasing instance acts, the acquiring one
  never does.
- ``r > m``: the acquiring instance acts; the releasing one too only if it saw the change
  before the relabel *and* the relabel reached it only after the change's coalescing window
  had passed: each instance asks :meth:`NamespaceMembership.still_owns` again when it is
  about to write, so a relabel arriving within the window withdraws the change (a doubled
  reload then needs a watch skew longer than the window, and a lost one is impossible).

Namespaces selected by the first list count as selected since forever: a change older
than the namespace's own version is still ours. Thread-safe: the namespace informer and
the source informers call in from their own threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["NamespaceMembership"]

T = TypeVar("T")

_SINCE_ALWAYS = 0


class NamespaceMembership(Generic[T]):
    """Selected namespaces with the resourceVersion of their last join or leave.

    ``remember`` bounds the declined changes kept for a later join, and the leave versions
    kept for late changes (oldest dropped first): both matter only for the moments around
    a relabel.
    """

    def __init__(self, *, remember: int = 1024) -> None:
        self._lock = threading.Lock()
        self._joined: dict[str, int] = {}
        self._left: OrderedDict[str, int] = OrderedDict()
        self._declined: OrderedDict[tuple[str, Hashable], tuple[int, T]] = OrderedDict()
        self._remember = remember

    def selected(self, namespace: str) -> bool:
        """Whether ``namespace`` matches the selector now."""
        with self._lock:
            return namespace in self._joined

    def join(self, namespace: str, resource_version: int | None, *, initial: bool = False) -> list[T]:
        """``namespace`` matches from ``resource_version`` on (``initial``: the first list).

        Returns the declined changes of ``namespace`` newer than the join, oldest first:
        they happened while it was already ours, so the caller acts on them now. A
        namespace that already matched keeps its join version.
        """
        with self._lock:
            if namespace in self._joined:
                return []
            since = _SINCE_ALWAYS if initial or resource_version is None else resource_version
            self._joined[namespace] = since
            self._left.pop(namespace, None)
            mine = [key for key in self._declined if key[0] == namespace]
            replay = [self._declined.pop(key) for key in mine]
        return [change for version, change in sorted(replay, key=lambda item: item[0]) if version > since]

    def leave(self, namespace: str, resource_version: int | None) -> None:
        """``namespace`` stops matching at ``resource_version`` (None: now, version unknown)."""
        with self._lock:
            self._joined.pop(namespace, None)
            self._left.pop(namespace, None)
            if resource_version is not None:
                self._left[namespace] = resource_version
                while len(self._left) > self._remember:
                    self._left.popitem(last=False)

    def still_owns(self, namespace: str, resource_version: int | None) -> bool:
        """Read-only re-check at write time: False only when ``namespace`` has left the
        selector at a version older than the change's (the acquiring instance has it)."""
        with self._lock:
            if resource_version is None or namespace in self._joined:
                return True
            left = self._left.get(namespace)
            return left is None or resource_version < left

    def owns(self, namespace: str, resource_version: int | None, key: Hashable, change: T) -> bool:
        """Whether the change ``key`` at ``resource_version`` in ``namespace`` is ours.

        When it is not, and the namespace is not selected, the change is kept under ``key``
        (replacing an older one) in case the namespace joins at an older version.
        Without a version the answer is the current selection.
        """
        with self._lock:
            joined = self._joined.get(namespace)
            if resource_version is None:
                return joined is not None
            if joined is not None:
                return resource_version > joined
            left = self._left.get(namespace)
            if left is not None and resource_version < left:
                return True
            slot = (namespace, key)
            self._declined.pop(slot, None)
            self._declined[slot] = (resource_version, change)
            while len(self._declined) > self._remember:
                self._declined.popitem(last=False)
            return False
