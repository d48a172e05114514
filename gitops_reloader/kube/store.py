"""A thread-safe cache of transformed objects keyed ``namespace/name``.

Records are whatever the informer's transform returns (immutable values); the store only
keeps each record with the resourceVersion it came from, so a relist can tell what
changed. Readers get the record itself: callers must not mutate it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


def object_key(namespace: str | None, name: str) -> str:
    """``namespace/name``, or ``name`` for cluster-scoped objects."""
    return f"{namespace}/{name}" if namespace else name


@dataclass(frozen=True, slots=True)
class Delta(Generic[T]):
    """One change the store saw: ``old`` is None for an add, ``new`` None for a delete."""

    key: str
    old: T | None
    new: T | None


class Store(Generic[T]):
    """Key → (resourceVersion, record), guarded by one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, tuple[str, T]] = {}

    def get(self, key: str) -> T | None:
        with self._lock:
            entry = self._items.get(key)
        return entry[1] if entry else None

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def values(self) -> list[T]:
        with self._lock:
            return [record for _, record in self._items.values()]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def upsert(self, key: str, resource_version: str, record: T) -> Delta[T] | None:
        """Store a record; None when this resourceVersion is already stored (a replay)."""
        with self._lock:
            previous = self._items.get(key)
            if previous is not None and previous[0] == resource_version:
                return None
            self._items[key] = (resource_version, record)
        return Delta(key, previous[1] if previous else None, record)

    def delete(self, key: str) -> Delta[T] | None:
        with self._lock:
            previous = self._items.pop(key, None)
        return Delta(key, previous[1], None) if previous else None

    def replace(self, entries: Iterable[tuple[str, str, T]]) -> list[Delta[T]]:
        """Replace everything with a fresh list; return only what differs.

        An entry whose resourceVersion equals the stored one produces no delta, so a relist
        with nothing changed notifies nobody.
        """
        fresh = {key: (rv, record) for key, rv, record in entries}
        deltas: list[Delta[T]] = []
        with self._lock:
            for key, (rv, record) in fresh.items():
                previous = self._items.get(key)
                if previous is None:
                    deltas.append(Delta(key, None, record))
                elif previous[0] != rv:
                    deltas.append(Delta(key, previous[1], record))
            for key, (_, record) in self._items.items():
                if key not in fresh:
                    deltas.append(Delta(key, record, None))
            self._items = fresh
        return deltas
