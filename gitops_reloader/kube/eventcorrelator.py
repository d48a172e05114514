"""client-go's EventCorrelator for our Events: aggregate, count, and filter spam (pure).

A controller that retries a failing reload writes the same Warning again and again. The
cluster expects what client-go's ``tools/record/events_cache.go`` does, so that a storm of
failures leaves a handful of Event objects with growing counts, not hundreds:

1. **Aggregate** (``EventAggregator``): events that differ only by message (same object,
   type, reason) are grouped; once :data:`AGGREGATE_MAX_EVENTS` distinct messages were seen
   within :data:`AGGREGATE_INTERVAL` seconds of each other, the event becomes one aggregate
   whose message is ``(combined from similar events): <message>``, keyed by the group, so
   later ones count on it instead of creating new objects.
2. **Count** (``eventLogger``): an event whose key (object, type, reason, message — or the
   aggregate's group) was written before is a *patch* of that object: ``count`` + 1, the
   ``lastTimestamp`` moved, the ``firstTimestamp`` and name kept.
3. **Filter spam** (``EventSourceObjectSpamFilter``): per source and object a token bucket
   of :data:`SPAM_BURST` events refilled at one per :data:`SPAM_REFILL_SECONDS`; past it the
   event (new or patch) is not written at all.

The caches are LRUs of :data:`CACHE_ENTRIES` keys, as in client-go. All state is in memory:
after a restart the first repeat creates a new object, as a restarted client-go controller
does. Thread-safe; intervals run on the injected clock's monotonic time, timestamps on its
wall time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from gitops_reloader.clock import Clock

__all__ = ["AGGREGATE_PREFIX", "Correlated", "EventCorrelator", "EventKey"]

CACHE_ENTRIES = 4096
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL = 600.0
SPAM_BURST = 25
SPAM_REFILL_SECONDS = 300.0
AGGREGATE_PREFIX = "(combined from similar events): "

V = TypeVar("V")


class _Lru(Generic[V]):
    """A small LRU map (``groupcache/lru``): the least recently used key leaves first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, ...], V] = OrderedDict()

    def get(self, key: tuple[str, ...]) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def pop(self, key: tuple[str, ...]) -> None:
        self._items.pop(key, None)

    def put(self, key: tuple[str, ...], value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


@dataclass(frozen=True, slots=True)
class EventKey:
    """What identifies an Event for correlation: the object, its type and reason, the message."""

    namespace: str
    kind: str
    name: str
    uid: str
    type: str
    reason: str
    message: str

    @property
    def spam(self) -> tuple[str, ...]:
        """``getSpamKey``: the source and the object (our source is always ours)."""
        return (self.namespace, self.kind, self.name, self.uid)

    @property
    def group(self) -> tuple[str, ...]:
        """``EventAggregatorByReasonFunc``'s aggregate key: the object, type and reason."""
        return (*self.spam, self.type, self.reason)

    @property
    def full(self) -> tuple[str, ...]:
        """``getEventKey``: everything, message included."""
        return (*self.group, self.message)


@dataclass(frozen=True, slots=True)
class Correlated:
    """What to write for one event: nothing (``skip``), a new object, or a patch of one.

    ``name`` is the object to create (new) or patch (``patch``); ``count`` and
    ``first_timestamp`` the values it must carry; ``message`` the (maybe aggregated) text.
    """

    skip: bool
    patch: bool = False
    name: str = ""
    message: str = ""
    count: int = 1
    first_timestamp: float = 0.0


@dataclass(slots=True)
class _Observation:
    name: str
    count: int
    first_timestamp: float


@dataclass(slots=True)
class _Aggregate:
    messages: set[str] = field(default_factory=set)
    last: float = float("-inf")


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


class EventCorrelator:
    """Decides, per event, whether to create, patch or drop (see the module docstring)."""

    def __init__(self, clock: Clock, *, cache_entries: int = CACHE_ENTRIES,
                 aggregate_max: int = AGGREGATE_MAX_EVENTS, aggregate_interval: float = AGGREGATE_INTERVAL,
                 spam_burst: int = SPAM_BURST, spam_refill: float = SPAM_REFILL_SECONDS) -> None:
        self.clock = clock
        self.aggregate_max = aggregate_max
        self.aggregate_interval = aggregate_interval
        self.spam_burst = spam_burst
        self.spam_refill = spam_refill
        self._lock = threading.Lock()
        self._aggregates: _Lru[_Aggregate] = _Lru(cache_entries)
        self._observed: _Lru[_Observation] = _Lru(cache_entries)
        self._buckets: _Lru[_Bucket] = _Lru(cache_entries)

    def correlate(self, key: EventKey, new_name: str) -> Correlated:
        """The write for event ``key``; ``new_name`` names the object if one is created."""
        now, wall = self.clock.monotonic(), self.clock.now()
        with self._lock:
            message, cache_key = self._aggregate(key, now)
            seen = self._observed.get(cache_key)
            if seen is not None:
                result = Correlated(False, True, seen.name, message, seen.count + 1, seen.first_timestamp)
            else:
                result = Correlated(False, False, new_name, message, 1, wall)
            self._observed.put(cache_key, _Observation(result.name, result.count, result.first_timestamp))
            if not self._take_token(key.spam, now):
                return Correlated(True)
            return result

    def _aggregate(self, key: EventKey, now: float) -> tuple[str, tuple[str, ...]]:
        record = self._aggregates.get(key.group)
        if record is None or now - record.last > self.aggregate_interval:
            record = _Aggregate()
        record.messages.add(key.message)
        record.last = now
        self._aggregates.put(key.group, record)
        if len(record.messages) < self.aggregate_max:
            return key.message, key.full
        record.messages.pop()  # do not grow the set past the threshold
        return AGGREGATE_PREFIX + key.message, key.group

    def _take_token(self, spam: tuple[str, ...], now: float) -> bool:
        bucket = self._buckets.get(spam)
        if bucket is None:
            bucket = _Bucket(float(self.spam_burst), now)
        elapsed = max(now - bucket.stamp, 0.0)
        bucket.tokens = min(float(self.spam_burst), bucket.tokens + elapsed / self.spam_refill)
        bucket.stamp = now
        self._buckets.put(spam, bucket)
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True
