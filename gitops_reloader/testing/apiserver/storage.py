"""The object store behind the API test server: objects, resourceVersions, watch history.

Guarantees (all under one lock, so they hold for any number of client threads):

* One global ``resourceVersion`` counter: every committed create, update and delete of
  any resource takes the next integer, so versions are unique and monotonic across
  kinds. No-op updates commit nothing (no new version, no event).
* Stored objects are immutable ``Record``s holding the object's JSON bytes, serialised
  once at commit time; every read hands out a fresh copy (``Record.load``).
* Each resource keeps its last ``history_size`` events. A watch from version ``N``
  replays every retained event newer than ``N`` and then receives live events in
  commit order, with no gap and no duplicate, because replay and registration happen
  under the same lock as commits. A version older than the retained history (after
  overflow or ``compact``) raises a 410 ``ApiError``.
* Live events are pushed into each watcher's own queue and its condition variable is
  notified at commit time: a waiting stream wakes immediately, nothing polls.
  A watcher that falls ``max_queue`` events behind is closed (its client re-watches),
  which bounds memory like the real server's slow-watcher eviction.
* Lists walk keys in ``namespace/name`` order; a ``continue`` token resumes after the
  last key returned, so pages never repeat or skip an object that exists throughout.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .crdschema import CrdSchemas
from .resources import Registry, ResourceType
from .selectors import (
    EVERYTHING_FIELDS,
    EVERYTHING_LABELS,
    FieldSelector,
    LabelSelector,
)
from .status import ApiError, already_exists, bad_request, expired, not_found
from .strategy import check_delete_preconditions, prepare_create, prepare_update

__all__ = ["Event", "ListPage", "Record", "Store", "Watcher"]

Key = tuple[str, str]
_DUMPS: Final = json.JSONEncoder(separators=(",", ":")).encode
_BUILTIN_NAMESPACES: Final = ("default", "kube-system", "kube-public", "kube-node-lease")


def dumps(value: Any) -> bytes:
    """Compact JSON bytes (ASCII-safe)."""
    return _DUMPS(value).encode()


@dataclass(frozen=True, slots=True)
class Record:
    """One stored version of one object. Never mutated after creation."""

    namespace: str
    name: str
    rv: int
    labels: Mapping[str, str]
    raw: bytes
    """The full object as JSON, ``kind`` and ``apiVersion`` first."""
    fields: Mapping[str, str] = field(default_factory=dict)
    """The resource's selectable fields (e.g. a Secret's ``type``), read once at commit so
    a field-selected list does not parse every stored object."""

    def load(self) -> dict[str, Any]:
        """A private, mutable copy of the object."""
        obj: dict[str, Any] = json.loads(self.raw)
        return obj


@dataclass(frozen=True, slots=True)
class Event:
    """A committed change of one object, as watches see it."""

    rv: int
    type: str
    record: Record
    prev: Record | None = None


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of a list: the records plus the list metadata to send."""

    records: list[Record]
    resource_version: int
    continue_token: str | None
    remaining: int | None


@dataclass(slots=True)
class _Table:
    rt: ResourceType
    history: deque[Event]
    objects: dict[Key, Record] = field(default_factory=dict)
    keys: list[Key] = field(default_factory=list)
    horizon: int = 0
    watchers: set[Watcher] = field(default_factory=set)


def _selectable(rt: ResourceType, obj: Mapping[str, Any]) -> Mapping[str, str]:
    return {path: _field_value(obj, path) for path in rt.selectable_fields}


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, Mapping):
        # core Event "source" is matched by its component
        return str(cur.get("component", ""))
    return str(cur)


class _Matcher:
    """Namespace + label + field selection of records."""

    __slots__ = ("fields", "labels", "namespace", "trivial")

    def __init__(self, namespace: str, labels: LabelSelector, fields: FieldSelector) -> None:
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.trivial = labels.empty and fields.empty

    def __call__(self, rec: Record) -> bool:
        if self.namespace and rec.namespace != self.namespace:
            return False
        if self.trivial:
            return True
        if not self.labels.matches(rec.labels):
            return False
        if self.fields.empty:
            return True
        loaded: dict[str, Any] | None = None

        def lookup(path: str) -> str:
            nonlocal loaded
            if path == "metadata.name":
                return rec.name
            if path == "metadata.namespace":
                return rec.namespace
            if path in rec.fields:
                return rec.fields[path]
            if loaded is None:
                loaded = rec.load()
            return _field_value(loaded, path)

        return self.fields.matches(lookup)


class Watcher:
    """One open watch: its replay, its live queue and its selection.

    The stream owner calls ``take`` in a loop and ``render`` per event; any thread may
    call ``close``. Callers must not touch the queue directly.
    """

    def __init__(
        self,
        store: Store,
        table: _Table,
        matcher: _Matcher,
        *,
        initial: list[Event],
        min_rv: int,
        start_rv: int,
    ) -> None:
        self._store = store
        self._table = table
        self._matcher = matcher
        self._cond = threading.Condition(store.lock)
        self._queue: deque[Event] = deque()
        self.initial = initial
        """Events to send before live ones (synthetic ADDED or history replay)."""
        self.start_rv = start_rv
        """The store version when the watch was registered."""
        self._min_rv = min_rv
        self.closed = False
        self.close_reason = ""

    @property
    def rt(self) -> ResourceType:
        """The watched resource."""
        return self._table.rt

    def _push(self, event: Event) -> None:  # caller holds the store lock
        if self.closed or event.rv <= self._min_rv:
            return
        namespace = self._matcher.namespace
        if namespace and event.record.namespace != namespace:
            return
        if len(self._queue) >= self._store.max_queue:
            self._close_locked("overflow")
            return
        self._queue.append(event)
        self._cond.notify()

    def _close_locked(self, reason: str) -> None:
        if not self.closed:
            self.closed = True
            self.close_reason = reason
            self._table.watchers.discard(self)
            self._cond.notify_all()

    def close(self, reason: str = "closed") -> None:
        """End the watch; a blocked ``take`` returns at once."""
        with self._store.lock:
            self._close_locked(reason)

    def take(self, timeout: float | None) -> tuple[list[Event], int]:
        """Wait up to ``timeout`` for events; return them and the store version.

        When the returned list is empty, every event up to the returned version has
        already been handed out, so it is a safe bookmark version.
        """
        with self._cond:
            if not self._queue and not self.closed:
                self._cond.wait(timeout)
            events = list(self._queue)
            self._queue.clear()
            return events, self._store.rv

    def render(self, event: Event) -> bytes | None:
        """The watch line for ``event`` as this watcher sees it, or ``None`` to skip.

        With selectors, an object that stops matching is sent as DELETED (its previous
        content at the new version) and one that starts matching as ADDED.
        """
        match = self._matcher
        rec = event.record
        if match.trivial:
            if match.namespace and rec.namespace != match.namespace:
                return None
            return _line(event.type, rec.raw)
        now = match(rec)
        if event.type == "MODIFIED" and event.prev is not None:
            before = match(event.prev)
            if now and before:
                return _line("MODIFIED", rec.raw)
            if now:
                return _line("ADDED", rec.raw)
            if before:
                obj = event.prev.load()
                obj["metadata"]["resourceVersion"] = str(event.rv)
                return _line("DELETED", dumps(obj))
            return None
        return _line(event.type, rec.raw) if now else None


def _line(kind: str, raw: bytes) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + raw + b"}\n"


def _encode_continue(rv: int, key: Key) -> str:
    payload = dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": f"{key[0]}/{key[1]}"})
    return base64.urlsafe_b64encode(payload).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, Key]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded))
        ns, _, name = str(data["start"]).partition("/")
        return int(data["rv"]), (ns, name)
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        ) from None


class Store:
    """All objects of all served resources, their history and their open watches."""

    def __init__(
        self,
        registry: Registry,
        *,
        history_size: int = 10_000,
        max_queue: int | None = None,
        builtin_namespaces: bool = True,
        schemas: CrdSchemas | None = None,
    ) -> None:
        if history_size < 1:
            raise ValueError("history_size must be at least 1")
        self.lock = threading.Lock()
        self.registry = registry
        self.schemas = schemas
        self.max_queue = max_queue if max_queue is not None else max(history_size, 1000)
        self.rv = 0
        self._compacted_rv = 0
        self._history_size = history_size
        self._tables = {rt.key: _Table(rt, deque(maxlen=history_size)) for rt in registry.resources}
        ns_rt = registry.by_name("namespaces")
        if builtin_namespaces and ns_rt is not None:
            for name in _BUILTIN_NAMESPACES:
                self.create(ns_rt, "", {"metadata": {"name": name}}, manager="kube-apiserver")

    def serve(self, registry: Registry, schemas: CrdSchemas | None) -> None:
        """Serve a larger catalogue (a CRD was installed): new resources start empty."""
        with self.lock:
            for rt in registry.resources:
                self._tables.setdefault(rt.key, _Table(rt, deque(maxlen=self._history_size)))
            self.registry, self.schemas = registry, schemas

    # ------------------------------------------------------------------ internals

    def _table(self, rt: ResourceType) -> _Table:
        return self._tables[rt.key]

    def _commit(self, table: _Table, kind: str, obj: dict[str, Any] | None, prev: Record | None) -> Record:
        """Give the change the next version, store it, record and broadcast the event."""
        self.rv += 1
        rv = self.rv
        if obj is None:  # delete: the last state at the deletion's version
            assert prev is not None
            obj = prev.load()
        meta = obj["metadata"]
        meta["resourceVersion"] = str(rv)
        rec = Record(meta.get("namespace", ""), meta["name"], rv, meta.get("labels") or {}, dumps(obj),
                     _selectable(table.rt, obj))
        key = (rec.namespace, rec.name)
        if kind == "DELETED":
            del table.objects[key]
            idx = bisect.bisect_left(table.keys, key)
            del table.keys[idx]
        else:
            if key not in table.objects:
                bisect.insort(table.keys, key)
            table.objects[key] = rec
        history = table.history
        if len(history) == history.maxlen:
            table.horizon = history[0].rv
        event = Event(rv, kind, rec, prev)
        history.append(event)
        for watcher in tuple(table.watchers):
            watcher._push(event)
        return rec

    @staticmethod
    def _dry(obj: dict[str, Any], rv: int | None) -> Record:
        meta = obj["metadata"]
        if rv is None:
            meta.pop("resourceVersion", None)
        else:
            meta["resourceVersion"] = str(rv)
        return Record(meta.get("namespace", ""), meta["name"], rv or 0, meta.get("labels") or {}, dumps(obj))

    def load(self, rt: ResourceType, items: list[Any], *, manager: str) -> int:
        """Create many objects (benchmarks' bulk seeding), each as :meth:`create` would.

        The first failure stops the load with its ``ApiError`` (earlier items stay
        created). Returns how many were created.
        """
        created = 0
        for item in items:
            namespace = str(((item or {}).get("metadata") or {}).get("namespace") or "")
            self.create(rt, namespace, item, manager=manager)
            created += 1
        return created

    # ------------------------------------------------------------------ reads

    def resource_version(self) -> int:
        """The current global resourceVersion."""
        with self.lock:
            return self.rv

    def get(self, rt: ResourceType, namespace: str, name: str) -> Record:
        """The stored record, or a 404 ``ApiError``."""
        table = self._table(rt)
        with self.lock:
            rec = table.objects.get((namespace if rt.namespaced else "", name))
        if rec is None:
            raise not_found(rt.plural, rt.group, name)
        return rec

    def find(self, rt: ResourceType, namespace: str, name: str) -> Record | None:
        """The stored record or ``None``."""
        with self.lock:
            return self._table(rt).objects.get((namespace if rt.namespaced else "", name))

    def check_fields(self, rt: ResourceType, fields: FieldSelector) -> None:
        """400 for field selector labels the resource does not support (like the real one)."""
        for name in fields.fields:
            if name not in ("metadata.name", "metadata.namespace") and (name not in rt.selectable_fields):
                raise bad_request(f"field label not supported: {name}")

    def _iter_keys(self, table: _Table, namespace: str, after: Key | None) -> Iterator[Key]:
        keys = table.keys
        if after is not None:
            start = bisect.bisect_right(keys, after)
        elif namespace:
            start = bisect.bisect_left(keys, (namespace, ""))
        else:
            start = 0
        for i in range(start, len(keys)):
            key = keys[i]
            if namespace and key[0] != namespace:
                return
            yield key

    def list_page(
        self,
        rt: ResourceType,
        namespace: str = "",
        *,
        labels: LabelSelector = EVERYTHING_LABELS,
        fields: FieldSelector = EVERYTHING_FIELDS,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> ListPage:
        """One page of matching records, sorted by namespace/name."""
        table = self._table(rt)
        ns = namespace if rt.namespaced else ""
        matcher = _Matcher(ns, labels, fields)
        after: Key | None = None
        list_rv: int | None = None
        if continue_token:
            list_rv, after = _decode_continue(continue_token)
        with self.lock:
            if list_rv is not None and list_rv < self._compacted_rv:
                raise expired(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter."
                )
            current = self.rv if list_rv is None else list_rv
            candidates = (table.objects[k] for k in self._iter_keys(table, ns, after))
            if limit is None or limit <= 0:
                return ListPage([r for r in candidates if matcher(r)], current, None, None)
            records: list[Record] = []
            more = False
            for rec in candidates:
                if not matcher(rec):
                    continue
                if len(records) == limit:
                    more = True
                    break
                records.append(rec)
            if not more:
                return ListPage(records, current, None, None)
            last = records[-1]
            remaining: int | None = None
            if matcher.trivial:
                end = bisect.bisect_left(table.keys, (ns + "\x00", "")) if ns else len(table.keys)
                remaining = end - bisect.bisect_right(table.keys, (last.namespace, last.name))
            return ListPage(
                records, current, _encode_continue(current, (last.namespace, last.name)), remaining
            )

    # ------------------------------------------------------------------ writes

    def create(
        self,
        rt: ResourceType,
        namespace: str,
        body: Any,
        *,
        manager: str,
        dry_run: bool = False,
    ) -> Record:
        """Create an object; 409 AlreadyExists on a duplicate name."""
        table = self._table(rt)
        ns = namespace if rt.namespaced else ""
        with self.lock:
            obj = prepare_create(
                rt,
                body,
                ns,
                manager=manager,
                taken=lambda n: (ns, n) in table.objects,
                schemas=self.schemas,
            )
            name = obj["metadata"]["name"]
            if (ns, name) in table.objects:
                raise already_exists(rt.plural, rt.group, name)
            if dry_run:
                return self._dry(obj, None)
            return self._commit(table, "ADDED", obj, None)

    def update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        change: Callable[[dict[str, Any]], Any],
        *,
        manager: str,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Record:
        """Replace an object by ``change(private copy of current)``, atomically.

        ``change`` returns the proposed new body (a PUT body, or the patched copy) and
        may raise ``ApiError``. A proposal equal to the current object commits nothing
        and returns the current record.
        """
        table = self._table(rt)
        key = (namespace if rt.namespaced else "", name)
        with self.lock:
            rec = table.objects.get(key)
            if rec is None:
                raise not_found(rt.plural, rt.group, name)
            proposed = change(rec.load())
            new = prepare_update(
                rt,
                rec.load(),
                proposed,
                name=name,
                manager=manager,
                subresource=subresource,
                schemas=self.schemas,
            )
            if new is None:
                return rec
            if dry_run:
                return self._dry(new, rec.rv)
            return self._commit(table, "MODIFIED", new, rec)

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        options: Any = None,
        dry_run: bool = False,
    ) -> Record:
        """Delete an object now; deleting a namespace deletes everything in it."""
        table = self._table(rt)
        key = (namespace if rt.namespaced else "", name)
        with self.lock:
            rec = table.objects.get(key)
            if rec is None:
                raise not_found(rt.plural, rt.group, name)
            check_delete_preconditions(rt, rec.load(), options)
            if dry_run:
                return rec
            if rt.kind == "Namespace" and not rt.group:
                for other in self._tables.values():
                    if other.rt.namespaced:
                        for k in list(self._iter_keys(other, name, None)):
                            self._commit(other, "DELETED", None, other.objects[k])
            return self._commit(table, "DELETED", None, rec)

    def delete_collection(
        self,
        rt: ResourceType,
        namespace: str,
        *,
        labels: LabelSelector = EVERYTHING_LABELS,
        fields: FieldSelector = EVERYTHING_FIELDS,
        dry_run: bool = False,
    ) -> list[Record]:
        """Delete every matching object; return their final records."""
        page = self.list_page(rt, namespace, labels=labels, fields=fields)
        deleted: list[Record] = []
        for rec in page.records:
            try:
                deleted.append(self.delete(rt, rec.namespace, rec.name, dry_run=dry_run))
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return deleted

    # ------------------------------------------------------------------ watches

    def watch(
        self,
        rt: ResourceType,
        namespace: str = "",
        *,
        labels: LabelSelector = EVERYTHING_LABELS,
        fields: FieldSelector = EVERYTHING_FIELDS,
        resource_version: str | None = None,
        send_initial_events: bool | None = None,
    ) -> Watcher:
        """Register a watch; 410 ``ApiError`` when the version is older than history.

        Without a version (or "0") the watch starts with a synthetic ADDED event per
        current object; with version N it replays retained events newer than N.
        """
        table = self._table(rt)
        matcher = _Matcher(namespace if rt.namespaced else "", labels, fields)
        from_state = resource_version in (None, "", "0")
        requested = 0
        if not from_state:
            assert resource_version is not None
            try:
                requested = int(resource_version)
            except ValueError:
                raise bad_request(f"invalid resource version: {resource_version}") from None
        if send_initial_events is None:
            send_initial_events = from_state
        with self.lock:
            current = self.rv
            if send_initial_events:
                initial = [
                    Event(r.rv, "ADDED", r)
                    for r in (table.objects[k] for k in self._iter_keys(table, matcher.namespace, None))
                ]
                min_rv = current
            elif from_state:  # sendInitialEvents=false without a version: from now on
                initial = []
                min_rv = current
            else:
                if requested < table.horizon:
                    raise expired(f"too old resource version: {requested} ({table.horizon})")
                replay: list[Event] = []
                for ev in reversed(table.history):
                    if ev.rv <= requested:
                        break
                    replay.append(ev)
                replay.reverse()
                initial = replay
                min_rv = requested
            watcher = Watcher(self, table, matcher, initial=initial, min_rv=min_rv, start_rv=current)
            table.watchers.add(watcher)
            return watcher

    def close_watches(self, reason: str = "cut") -> int:
        """Close every open watch; return how many were open."""
        with self.lock:
            watchers = [w for t in self._tables.values() for w in t.watchers]
            for w in watchers:
                w._close_locked(reason)
            return len(watchers)

    def compact(self) -> int:
        """Forget all history: older versions now get 410. Returns the compaction version."""
        with self.lock:
            for table in self._tables.values():
                table.history.clear()
                table.horizon = self.rv
            self._compacted_rv = self.rv
            return self.rv

    def watcher_count(self) -> int:
        """How many watches are open."""
        with self.lock:
            return sum(len(t.watchers) for t in self._tables.values())
