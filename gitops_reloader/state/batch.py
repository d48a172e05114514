"""Which state entries changed, and which shards a batch rewrites (pure, thread-safe).

:class:`StateBatch` keeps two views of the state: what the ConfigMap shards hold
(*persisted*, as last loaded or written) and what the controller knows now (*desired*).
Changes only mark entries dirty; :meth:`StateBatch.prepare` turns every dirty entry into
one :class:`Batch` that rewrites only the shards those entries live in, and
:meth:`StateBatch.committed` records a batch as written. So a burst of changes costs one
write per touched shard, not one per change.

A source entry is *held back* while the controller still has work outstanding for that
source (``held`` in :meth:`~StateBatch.prepare`): its stored digest must not move ahead of
the reloads it stands for, or a crash between the store write and the reload would lose
the reload. Workload entries are set after an emission, so they are never held.

Whole shards are written, each replacing the previous content, so a batch that failed
half-way is repaired by the next one (its entries stay dirty), and every batch has a new
generation. Every entry has a *home* shard (:func:`~.codec.shard_of`). A shard may also
hold *copies* of entries whose home is elsewhere: when the shard count grows, entries move,
and a shard written whole cannot drop an entry before the entry's home holds it, in every
write order (two entries may swap shards). So a copy stays, with the entry's current
value, in every write of its shard until a batch that wrote the home has been committed;
the next write of that shard drops it. After growth that is two batches; after a crash in
the middle of growth, the copies found at load (:class:`~.codec.Decoded` says where each
entry was read) are kept until their homes are written. A crash at any point leaves every
entry readable, at its old or its new value (see :func:`~.codec.merge_shards`).

Every shard written names the writer's ``scope``; while the shards do not all name it
(first start, filters changed, a crash during such a rewrite), the next batch rewrites
every shard, so the store covers a scope only when all of its entries were written under it.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from gitops_reloader.state.codec import (
    MAX_SHARD_BYTES,
    MAX_SHARDS,
    Decoded,
    encode_shard,
    shard_count_for,
    shard_of,
    source_line,
    workload_line,
)

__all__ = ["Batch", "ShardWrite", "StateBatch"]

_SOURCE, _WORKLOAD = "s", "w"
Key = tuple[str, str]
"""(``"s"``, source id) or (``"w"``, workload key)."""


@dataclass(frozen=True, slots=True)
class ShardWrite:
    """Replace shard ``index`` with ``data``."""

    index: int
    data: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Batch:
    """Shard writes in the order they must happen, and the entries they persist.

    ``sources``/``workloads`` map each changed entry to its new value (None: removed).
    """

    generation: int
    count: int
    writes: tuple[ShardWrite, ...]
    sources: Mapping[str, str | None]
    workloads: Mapping[str, Mapping[str, str] | None]
    copies: Mapping[int, frozenset[Key]]
    """Per written shard, the copies of other shards' entries it was written with."""


class StateBatch:
    """Dirty tracking and shard planning for the state store. All methods are thread-safe."""

    def __init__(self, *, shard_bytes: int = 512 * 1024, scope: str = "") -> None:
        if not 1024 <= shard_bytes <= MAX_SHARD_BYTES:
            raise ValueError(f"shard size must be between 1024 and {MAX_SHARD_BYTES} bytes")
        self.shard_bytes = shard_bytes
        self.scope = scope
        self._stored_scope = ""
        self._lock = threading.Lock()
        self._sources: dict[str, str] = {}
        self._workloads: dict[str, dict[str, str]] = {}
        self._want_sources: dict[str, str] = {}
        self._want_workloads: dict[str, dict[str, str]] = {}
        self._dirty: set[Key] = set()
        self._members: dict[int, set[Key]] = {}
        self._total = 0
        self._count = 1
        self._generation = 0
        self._copies: dict[int, set[Key]] = {}
        """Entries a shard holds besides its own: copies of entries homed elsewhere."""
        self._unhomed: set[Key] = set()
        """Entries whose home shard was not yet written with them: their copies must stay."""

    # --- what is stored -------------------------------------------------------------

    def load(self, decoded: Decoded) -> None:
        """Take the stored state as persisted.

        Values recorded before (e.g. by a standby's informers) win over stored ones and
        stay dirty; stored entries nobody recorded are kept (drop them explicitly with
        :meth:`retain_sources` / :meth:`retain_workloads`).
        """
        with self._lock:
            self._sources = dict(decoded.snapshot.sources)
            self._workloads = {k: dict(v) for k, v in decoded.snapshot.workloads.items()}
            self._generation = max(self._generation, decoded.generation)
            self._count = max(decoded.count, 1)
            self._stored_scope = decoded.scope
            self._regroup()
            self._copies, self._unhomed = {}, set()
            for kind, found in ((_SOURCE, decoded.source_shards), (_WORKLOAD, decoded.workload_shards)):
                for name, index in found.items():
                    key = (kind, name)
                    if index != shard_of(_entry(key), self._count):  # a crash during growth
                        self._copies.setdefault(index, set()).add(key)
                        self._unhomed.add(key)
            for key, digest in self._sources.items():
                self._want_sources.setdefault(key, digest)
            for key, emitted in self._workloads.items():
                self._want_workloads[key] = {**emitted, **self._want_workloads.get(key, {})}
            keys = ({(_SOURCE, k) for k in self._want_sources}
                    | {(_WORKLOAD, k) for k in self._want_workloads} | self._dirty)
            self._dirty = {key for key in keys if self._differs(key)}

    def stored_source(self, source_id: str) -> str | None:
        """The digest the store holds for a source (None: no entry)."""
        with self._lock:
            return self._sources.get(source_id)

    def stored_workload(self, workload_key: str) -> Mapping[str, str] | None:
        """What the store says was last emitted for a workload (None: no entry)."""
        with self._lock:
            emitted = self._workloads.get(workload_key)
            return dict(emitted) if emitted is not None else None

    def emitted(self, workload_key: str) -> Mapping[str, str] | None:
        """What was last emitted for a workload, as known now (stored or newer)."""
        with self._lock:
            emitted = self._want_workloads.get(workload_key)
            return dict(emitted) if emitted is not None else None

    def sizes(self) -> tuple[int, int, int]:
        """(source entries, workload entries, shards) as stored."""
        with self._lock:
            return len(self._sources), len(self._workloads), self._count

    # --- what is known now ------------------------------------------------------------

    def set_source(self, source_id: str, digest: str) -> None:
        with self._lock:
            self._want_sources[source_id] = digest
            self._mark((_SOURCE, source_id))

    def drop_source(self, source_id: str) -> None:
        with self._lock:
            self._want_sources.pop(source_id, None)
            self._mark((_SOURCE, source_id))

    def retain_sources(self, keep: Collection[str]) -> int:
        """Drop every source entry not in ``keep`` (deleted while nobody watched); how many."""
        with self._lock:
            gone = [k for k in set(self._sources) | set(self._want_sources) if k not in keep]
            for key in gone:
                self._want_sources.pop(key, None)
                self._mark((_SOURCE, key))
            return len(gone)

    def set_emitted(self, workload_key: str, emitted: Mapping[str, str]) -> bool:
        """Merge ``{"Kind/name": digest}`` into the workload's entry.

        False (nothing recorded) when the entry would not fit in one shard.
        """
        with self._lock:
            merged = {**self._want_workloads.get(workload_key, {}), **emitted}
            if len(workload_line(workload_key, merged)) > MAX_SHARD_BYTES // 2:
                return False
            self._want_workloads[workload_key] = merged
            self._mark((_WORKLOAD, workload_key))
            return True

    def drop_workload(self, workload_key: str) -> None:
        with self._lock:
            self._want_workloads.pop(workload_key, None)
            self._mark((_WORKLOAD, workload_key))

    def retain_workloads(self, keep: Collection[str]) -> int:
        """Drop every workload entry not in ``keep``; how many."""
        with self._lock:
            gone = [k for k in set(self._workloads) | set(self._want_workloads) if k not in keep]
            for key in gone:
                self._want_workloads.pop(key, None)
                self._mark((_WORKLOAD, key))
            return len(gone)

    def dirty(self) -> int:
        """Entries waiting for a batch."""
        with self._lock:
            return len(self._dirty)

    # --- batches ------------------------------------------------------------------------

    def prepare(self, held: Collection[str] = ()) -> Batch | None:
        """The next batch: every dirty entry except sources in ``held``; None if none.

        Each call takes a new generation, so a retried batch is newer than a failed one.
        """
        with self._lock:
            ready = [key for key in self._dirty if not (key[0] == _SOURCE and key[1] in held)]
            if (not ready and not self._unhomed and not any(self._copies.values())
                    and self._stored_scope == self.scope):
                return None
            sources = {k: self._want_sources.get(k) for kind, k in ready if kind == _SOURCE}
            workloads: dict[str, Mapping[str, str] | None] = {
                k: self._want_workloads.get(k) for kind, k in ready if kind == _WORKLOAD}
            self._generation += 1
            total = self._total + sum(self._size(key, self._value_of(key, sources, workloads))
                                      - self._size(key, self._stored(key)) for key in ready)
            count = shard_count_for(total, shard_bytes=self.shard_bytes, at_least=self._count)
            while True:
                writes, copies, largest = self._plan(count, ready, sources, workloads)
                if largest <= self.shard_bytes or count >= MAX_SHARDS:
                    break
                count = min(count * 2, MAX_SHARDS)
            return Batch(self._generation, count, writes, sources, workloads, copies)

    def committed(self, batch: Batch) -> None:
        """Every write of ``batch`` succeeded: it is what the shards hold now."""
        with self._lock:
            for key, value in batch.sources.items():
                self._set_stored((_SOURCE, key), value)
            for key, emitted in batch.workloads.items():
                self._set_stored((_WORKLOAD, key), dict(emitted) if emitted is not None else None)
            if batch.count != self._count:
                self._count = batch.count
                self._regroup()
            written = {write.index for write in batch.writes}
            if written >= set(range(self._count)):
                self._stored_scope = self.scope
            for index in written:
                self._copies[index] = set(batch.copies.get(index, ()))
            self._copies = {index: keys for index, keys in self._copies.items() if keys}
            self._unhomed = {key for key in self._unhomed
                             if shard_of(_entry(key), self._count) not in written}
            for key in list(self._dirty):
                if not self._differs(key):
                    self._dirty.discard(key)

    # --- internals (lock held) ------------------------------------------------------

    def _mark(self, key: Key) -> None:
        if self._differs(key):
            self._dirty.add(key)
        else:
            self._dirty.discard(key)

    def _differs(self, key: Key) -> bool:
        kind, name = key
        if kind == _SOURCE:
            return self._want_sources.get(name) != self._sources.get(name)
        return self._want_workloads.get(name) != self._workloads.get(name)

    def _stored(self, key: Key) -> str | Mapping[str, str] | None:
        return self._sources.get(key[1]) if key[0] == _SOURCE else self._workloads.get(key[1])

    @staticmethod
    def _value_of(key: Key, sources: Mapping[str, str | None],
                  workloads: Mapping[str, Mapping[str, str] | None]) -> str | Mapping[str, str] | None:
        return sources[key[1]] if key[0] == _SOURCE else workloads[key[1]]

    @staticmethod
    def _size(key: Key, value: str | Mapping[str, str] | None) -> int:
        if value is None:
            return 0
        if isinstance(value, str):
            return len(source_line(key[1], value))
        return len(workload_line(key[1], value))

    def _set_stored(self, key: Key, value: str | Mapping[str, str] | None) -> None:
        self._total += self._size(key, value) - self._size(key, self._stored(key))
        members = self._members.setdefault(shard_of(_entry(key), self._count), set())
        kind, name = key
        if value is None:
            (self._sources if kind == _SOURCE else self._workloads).pop(name, None)
            members.discard(key)
            return
        if kind == _SOURCE:
            assert isinstance(value, str)
            self._sources[name] = value
        else:
            assert not isinstance(value, str)
            self._workloads[name] = dict(value)
        members.add(key)

    def _regroup(self) -> None:
        self._members = {}
        self._total = 0
        for key in [(_SOURCE, k) for k in self._sources] + [(_WORKLOAD, k) for k in self._workloads]:
            self._members.setdefault(shard_of(_entry(key), self._count), set()).add(key)
            self._total += self._size(key, self._stored(key))

    def _plan(self, count: int, ready: list[Key], sources: Mapping[str, str | None],
              workloads: Mapping[str, Mapping[str, str] | None],
              ) -> tuple[tuple[ShardWrite, ...], dict[int, frozenset[Key]], int]:
        """Shard contents after applying ``ready``, the copies each keeps, and the largest
        shard's size without copies.

        Touched: the homes of ready and unhomed entries and shards with copies to drop, or
        every shard on a new count.
        """
        unhomed = self._unhomed
        if count == self._count:
            touched = ({shard_of(_entry(key), count) for key in ready}
                       | {shard_of(_entry(key), count) for key in unhomed}
                       | {index for index, keys in self._copies.items() if keys - unhomed}
                       | (set(range(count)) if self._stored_scope != self.scope else set()))
            members = {i: set(self._members.get(i, ())) for i in touched}
            kept = {i: self._copies.get(i, set()) & unhomed for i in touched}
        else:
            touched = set(range(count))
            members = {i: set() for i in touched}
            kept = {i: self._copies.get(i, set()) & unhomed for i in touched}
            for index, group in self._members.items():
                for key in group:
                    home = shard_of(_entry(key), count)
                    members[home].add(key)
                    if home != index:
                        kept[index].add(key)  # moved out: the copy stays until the home is written
        for key in ready:
            group = members[shard_of(_entry(key), count)]
            if self._value_of(key, sources, workloads) is None:
                group.discard(key)
            else:
                group.add(key)
        largest = max((sum(self._size(k, self._current(k, sources, workloads)) for k in group)
                       for group in members.values()), default=0)
        writes = []
        for index in sorted(touched, key=lambda i: (i < self._count, i)):  # new shards first
            source_entries: list[tuple[str, str]] = []
            workload_entries: list[tuple[str, Mapping[str, str]]] = []
            for key in members[index] | kept[index]:
                value = self._current(key, sources, workloads)
                if value is None:
                    continue
                if isinstance(value, str):
                    source_entries.append((key[1], value))
                else:
                    workload_entries.append((key[1], value))
            writes.append(ShardWrite(index, encode_shard(
                generation=self._generation, count=count, sources=source_entries,
                workloads=workload_entries, scope=self.scope)))
        copies = {index: frozenset(keys) for index, keys in kept.items() if keys}
        return tuple(writes), copies, largest

    def _current(self, key: Key, sources: Mapping[str, str | None],
                 workloads: Mapping[str, Mapping[str, str] | None]) -> str | Mapping[str, str] | None:
        """The entry's value once the batch is written."""
        if _is_ready(key, sources, workloads):
            return self._value_of(key, sources, workloads)
        return self._stored(key)


def _is_ready(key: Key, sources: Mapping[str, object], workloads: Mapping[str, object]) -> bool:
    return key[1] in (sources if key[0] == _SOURCE else workloads)


def _entry(key: Key) -> str:
    """The text a shard is chosen by: the entry's kind and name."""
    return f"{key[0]}|{key[1]}"

