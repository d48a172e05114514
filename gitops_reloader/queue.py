"""A work queue of keys with client-go ``workqueue`` semantics: dedupe, delay, rate-limited retry.

Informer handlers only compute a key (``namespace/name``) and ``add`` it; workers ``get`` a key,
sync it from the *current* cache state, then call ``done``. The queue holds keys, never objects,
so adding the same key many times costs nothing and the worker always sees the latest state.

State, all guarded by one ``threading.Condition``:

* ``queue``: FIFO deque of keys ready to be handed out;
* ``dirty``: keys that need processing (all of ``queue``, plus keys re-added while processing);
* ``processing``: keys handed out by ``get`` and not yet ``done``;
* ``waiting``: keys scheduled by ``add_after``, as a min-heap of ``(ready_time, seq, key)`` plus a
  dict of each waiting key's live entry, so a key waits at most once (stale entries are skipped).

Guarantees:

1. **No key is processed twice at once.** ``get`` never returns a key that is in ``processing``.
2. **Bursts collapse.** Adding a key that is already queued is a no-op: many adds, one run.
3. **A key added while processing runs once more after ``done``.** It is marked dirty, and
   ``done`` puts it at the back of the queue.
4. **FIFO among ready keys.** Keys are handed out in the order they became ready.
5. **Delayed keys become ready in time order** of the injected clock (ties: in the order they
   were scheduled).
6. **``add_after`` never postpones.** A key has at most one pending run, at the *earliest* time
   anyone asked for: a later ``add_after`` of a waiting key keeps the earlier time, an earlier
   one moves it forward, ``add_after`` of an already-queued key is a no-op, and ``add`` of a
   waiting key makes it ready now and cancels the wait (the single run reads current state).
7. **Shutdown wakes blocked getters**, and **keys added after shutdown are dropped**.

Deliberate differences from client-go: ``add`` supersedes a pending delayed run of the same key
instead of leaving it to fire once more later (6); ``shutdown()`` without drain drops queued keys
so workers stop at once, while ``shutdown(drain=True)`` lets workers finish queued and processing
keys; delayed keys not yet due are dropped by either kind of shutdown.

Time: ready times come from ``clock.monotonic()``. Blocking is real (``Condition.wait``): ``get``
sleeps until the next delayed key is due by the clock's reckoning, or until the caller's timeout,
whichever comes first. With a ``FakeClock`` nothing becomes due by itself: tests call
``clock.advance(x)`` and then poll with ``get(timeout=0)``, which promotes every due key first.

Callers must not: forget ``done`` (the key would stay in processing and never run again), call
``done`` for a key they did not ``get`` (it is ignored), or mutate a key after adding it (keys
must be hashable and immutable).
"""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from gitops_reloader.backoff import floored
from gitops_reloader.clock import Clock, SystemClock
from gitops_reloader.ratelimit import ItemExponentialLimiter, RateLimiter

__all__ = ["WorkQueue"]

K = TypeVar("K", bound=Hashable)

# Rebuild the delayed heap once stale entries outnumber live ones (and it is big enough to
# matter), so repeatedly re-adding long-waiting keys cannot grow it without bound.
_COMPACT_MIN = 64
_COMPACT_FACTOR = 2
# Condition.wait rejects timeouts above threading.TIMEOUT_MAX (a key delayed by inf would ask
# for one); half of it is still "forever" and leaves room for float rounding in wait_for.
_MAX_WAIT = threading.TIMEOUT_MAX / 2


class WorkQueue(Generic[K]):
    """A deduplicating, delaying, rate-limited queue of keys; safe for any number of threads.

    Example (the canonical worker loop)::

        q: WorkQueue[str] = WorkQueue(name="reload")
        while (key := q.get()) is not None:
            try:
                sync(key)
            except RetryableError:
                q.add_rate_limited(key)
            else:
                q.forget(key)
            finally:
                q.done(key)

    See the module docstring for the guarantees. Every method is thread-safe; ``get`` and
    ``shutdown(drain=True)`` may block, all others return promptly. ``clock`` defaults to
    ``SystemClock()`` and ``limiter`` to ``ItemExponentialLimiter()``.
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        limiter: RateLimiter | None = None,
        name: str = "",
    ) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._limiter: RateLimiter = limiter if limiter is not None else ItemExponentialLimiter()
        self._name = name
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._heap: list[tuple[float, int, K]] = []
        self._waiting: dict[K, tuple[float, int]] = {}
        self._seq = 0
        self._shutting_down = False

    # -- introspection ----------------------------------------------------------------------

    @property
    def name(self) -> str:
        """Name given at construction, for logs and metric labels."""
        return self._name

    @property
    def shutting_down(self) -> bool:
        """True once ``shutdown`` has been called; never goes back to False."""
        with self._cond:
            return self._shutting_down

    def __len__(self) -> int:
        """Keys queued (ready) plus keys waiting for a delay; keys processing are not counted.

        A key re-added while processing counts once ``done`` re-queues it, as in client-go.
        """
        with self._cond:
            return len(self._queue) + len(self._waiting)

    def depth(self) -> dict[str, int]:
        """A consistent snapshot of ``queued``, ``delayed`` and ``processing`` counts (metrics).

        Due delayed keys are not promoted here, so ``delayed`` may include keys whose time has
        come but which no ``get`` has picked up yet.
        """
        with self._cond:
            return {
                "queued": len(self._queue),
                "delayed": len(self._waiting),
                "processing": len(self._processing),
            }

    # -- adding -----------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Mark ``key`` for processing now.

        No-op if it is already queued or shutdown has begun. If it is processing, it runs again
        after ``done``. If it was waiting for a delay, the wait is cancelled.
        """
        with self._cond:
            if self._shutting_down:
                return
            if self._waiting.pop(key, None) is not None:
                self._maybe_compact()  # its heap entry is now stale
            self._enqueue(key)

    def add_after(self, key: K, delay: float) -> None:
        """Mark ``key`` for processing ``delay`` seconds from now; ``delay <= 0`` means ``add``.

        If the key is already waiting, the earlier ready time wins. If it is already queued, or
        processing and already re-added, this is a no-op. Dropped after shutdown. ``delay`` may
        be ``math.inf`` (never due by itself); NaN raises ``ValueError``.
        """
        if math.isnan(delay):  # NaN compares false with everything and would corrupt the heap
            raise ValueError(f"delay must be a number, got {delay!r}")
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutting_down or key in self._dirty:
                return
            ready = self._clock.monotonic() + delay
            current = self._waiting.get(key)
            if current is not None and current[0] <= ready:
                return
            self._seq += 1
            self._waiting[key] = (ready, self._seq)
            heapq.heappush(self._heap, (ready, self._seq, key))
            self._maybe_compact()
            # Blocked getters may be sleeping towards a later deadline: make them recompute it.
            self._cond.notify_all()

    def add_rate_limited(self, key: K, *, retry_after: float | None = None, cap: float = math.inf) -> None:
        """Schedule a retry after the limiter's backoff: ``add_after(key, limiter.when(key))``,
        never sooner than a server's ``retry_after`` (a floor, bounded by ``cap``).

        After shutdown the key is dropped without counting a requeue.
        """
        if self.shutting_down:
            return
        self.add_after(key, floored(self._limiter.when(key), retry_after, cap))

    def forget(self, key: K) -> None:
        """Clear ``key``'s retry history in the limiter; the key stays queued if it is."""
        self._limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        """How many rate-limited retries ``key`` had since it was last forgotten."""
        return self._limiter.num_requeues(key)

    def delayed_keys(self) -> set[K]:
        """The keys waiting for a delay (a snapshot)."""
        with self._cond:
            return set(self._waiting)

    def due(self) -> int:
        """Delayed keys whose time has come by the clock but which no ``get`` picked up yet."""
        now = self._clock.monotonic()
        with self._cond:
            return sum(1 for ready, _ in self._waiting.values() if ready <= now)

    def wake(self) -> None:
        """Make blocked getters read the clock again (after a ``FakeClock`` was advanced)."""
        with self._cond:
            self._cond.notify_all()

    # -- working ----------------------------------------------------------------------------

    def get(self, timeout: float | None = None) -> K | None:
        """Hand out the next ready key and mark it processing; the caller must ``done(key)``.

        Blocks until a key is ready, for at most ``timeout`` real seconds (``None``: no limit;
        ``0``: poll without blocking). Due delayed keys are promoted first in every case.
        Returns ``None`` on timeout, or once shutdown has begun and no queued key is left.
        """
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        with self._cond:
            while True:
                self._promote_due()
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                if self._shutting_down:
                    return None
                wait: float | None = None
                if self._heap:  # after _promote_due the head is live and not yet due
                    wait = max(self._heap[0][0] - self._clock.monotonic(), 0.0)
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    wait = remaining if wait is None else min(wait, remaining)
                self._cond.wait(None if wait is None else min(wait, _MAX_WAIT))

    def done(self, key: K) -> None:
        """Finish processing ``key``; if it was re-added meanwhile, queue it again at the back.

        Ignored for a key that is not processing.
        """
        with self._cond:
            if key not in self._processing:
                return
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
            self._cond.notify_all()  # a getter may take the key; a draining shutdown may finish

    def shutdown(self, drain: bool = False, timeout: float | None = None) -> bool:
        """Stop accepting keys and wake every blocked ``get``; safe to call more than once.

        Delayed keys not yet due are dropped. Without ``drain``, queued keys are dropped too and
        ``get`` returns ``None`` at once; keys being processed may still be ``done``. With
        ``drain=True``, ``get`` keeps handing out queued keys (including keys that ``done``
        re-queues) until none is left, and this call blocks until nothing is queued or
        processing, for at most ``timeout`` real seconds (``None``: no limit).

        Returns True if the queue was idle (nothing queued or processing) on return.
        """
        with self._cond:
            self._shutting_down = True
            self._heap.clear()
            self._waiting.clear()
            if not drain:
                self._queue.clear()
                self._dirty.clear()
            self._cond.notify_all()
            if not drain:
                return self._idle()
            if timeout is not None:
                timeout = min(max(timeout, 0.0), _MAX_WAIT)
            return self._cond.wait_for(self._idle, timeout)

    # -- internals (the caller holds the lock) ----------------------------------------------

    def _idle(self) -> bool:
        return not self._queue and not self._processing

    def _enqueue(self, key: K) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return  # done() re-queues it, so it never runs twice at once
        self._queue.append(key)
        self._cond.notify_all()

    def _promote_due(self) -> None:
        """Queue due delayed keys in ready-time order; leave a live, future entry on top."""
        now = self._clock.monotonic()
        while self._heap:
            ready, seq, key = self._heap[0]
            if self._waiting.get(key) != (ready, seq):
                heapq.heappop(self._heap)  # stale: the key was re-scheduled earlier or added
                continue
            if ready > now:
                return
            heapq.heappop(self._heap)
            del self._waiting[key]
            self._enqueue(key)

    def _maybe_compact(self) -> None:
        size = len(self._heap)
        if size > _COMPACT_MIN and size > _COMPACT_FACTOR * len(self._waiting):
            self._heap = [(ready, seq, key) for key, (ready, seq) in self._waiting.items()]
            heapq.heapify(self._heap)
