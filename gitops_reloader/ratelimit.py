"""Rate limiters: per-key retry backoff and a client-side token bucket for API writes.

Two independent tools live here, modelled on client-go's
``util/workqueue/default_rate_limiters.go`` and ``golang.org/x/time/rate``:

``ItemExponentialLimiter``
    Per-key exponential backoff for retries. ``when(key)`` returns ``base_delay * 2**n`` seconds,
    capped at ``max_delay``, where ``n`` is the number of times ``when`` was called for that key
    since the last ``forget(key)``. The work queue uses it through the :class:`RateLimiter`
    protocol (``WorkQueue.add_rate_limited``); any object with the same three methods can
    replace it.

``TokenBucket``
    ``burst`` tokens, refilled at ``qps`` tokens per second of the injected clock, never above
    ``burst``. It limits how fast *we* write to the Kubernetes API, before the server has to
    throttle us.

Guarantees:

* Both classes are thread-safe: every public method is atomic under one internal lock.
* The bucket reads time only through its injected ``Clock``; the backoff limiter never reads
  it. Only ``TokenBucket.acquire`` sleeps, in real time and outside the lock.
* Nothing is global: each instance owns its own state.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Hashable
from typing import Protocol

from gitops_reloader.backoff import exponential
from gitops_reloader.clock import Clock, SystemClock

__all__ = ["ItemExponentialLimiter", "RateLimiter", "TokenBucket"]

# Token counts are floats fed by clock differences, so 0.05 s + 0.05 s at 10 qps can sum to
# 0.9999999999999 tokens. Balances within this tolerance of a whole token count as whole.
_EPSILON = 1e-9


class RateLimiter(Protocol):
    """What ``WorkQueue`` needs from a per-key retry limiter.

    Implementations must be thread-safe; ``when`` is called once per retry and records it.
    """

    def when(self, key: Hashable) -> float:
        """Record one more failure of ``key``; return the seconds to wait before retrying it."""
        ...

    def forget(self, key: Hashable) -> None:
        """Clear ``key``'s failure history (call after it succeeds or is given up)."""
        ...

    def num_requeues(self, key: Hashable) -> int:
        """How many times ``when`` was called for ``key`` since it was last forgotten."""
        ...


class ItemExponentialLimiter:
    """Per-key exponential backoff: ``base_delay * 2**failures`` seconds, capped at ``max_delay``.

    Example::

        limiter = ItemExponentialLimiter(base_delay=0.05, max_delay=60.0)
        limiter.when("ns/web")    # 0.05, then 0.1, 0.2, ... up to 60.0
        limiter.forget("ns/web")  # the next when() returns 0.05 again

    Guarantees: thread-safe; keys are independent; the delay never exceeds ``max_delay`` and
    never overflows however many failures accumulate. Memory grows with the number of keys that
    failed and were not forgotten, so callers must ``forget`` a key once it succeeds or is
    abandoned.
    """

    def __init__(self, base_delay: float = 0.05, max_delay: float = 60.0) -> None:
        if math.isnan(base_delay) or base_delay < 0:
            raise ValueError(f"base_delay must be >= 0, got {base_delay!r}")
        if math.isnan(max_delay) or max_delay < base_delay:
            raise ValueError(f"max_delay must be >= base_delay ({base_delay!r}), got {max_delay!r}")
        self._base = float(base_delay)
        self._max = float(max_delay)
        self._lock = threading.Lock()
        self._failures: dict[Hashable, int] = {}

    @property
    def base_delay(self) -> float:
        """Delay returned for a key's first failure, in seconds."""
        return self._base

    @property
    def max_delay(self) -> float:
        """Upper bound of any returned delay, in seconds."""
        return self._max

    def when(self, key: Hashable) -> float:
        """Return the backoff for ``key`` and count one more failure of it."""
        with self._lock:
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
        return exponential(self._base, failures, self._max)

    def forget(self, key: Hashable) -> None:
        """Reset ``key``'s failure count; unknown keys are ignored."""
        with self._lock:
            self._failures.pop(key, None)

    def num_requeues(self, key: Hashable) -> int:
        """Number of ``when(key)`` calls since ``key`` was last forgotten (0 if never)."""
        with self._lock:
            return self._failures.get(key, 0)


class TokenBucket:
    """A token bucket: up to ``burst`` operations at once, then ``qps`` per second on average.

    The bucket starts full. Tokens accrue continuously at ``qps`` per second of
    ``clock.monotonic()`` and never exceed ``burst``. ``reserve`` may take a token the bucket does
    not have yet, leaving a debt that later callers wait out, like ``rate.Limiter.Reserve`` in
    ``golang.org/x/time/rate``; so the waits handed out by ``reserve``/``acquire`` queue up in
    call order and the long-run rate never exceeds ``qps``.

    Example::

        bucket = TokenBucket(qps=5, burst=10)
        if bucket.acquire(timeout=2.0):
            api.patch(...)

    Guarantees: thread-safe; ``try_acquire`` and ``reserve`` never block; ``acquire`` sleeps in
    real time (even when the clock is a ``FakeClock``) and never holds the lock while sleeping.
    ``qps`` may be ``math.inf``: then only ``burst`` bounds one instant and nobody waits.
    ``clock`` defaults to ``SystemClock()``.
    """

    def __init__(self, qps: float, burst: int, *, clock: Clock | None = None) -> None:
        if not qps > 0:  # also rejects NaN
            raise ValueError(f"qps must be > 0, got {qps!r}")
        if burst < 1:
            raise ValueError(f"burst must be >= 1, got {burst!r}")
        self._qps = float(qps)
        self._burst = int(burst)
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._last = self._clock.monotonic()

    @property
    def qps(self) -> float:
        """Refill rate in tokens per second."""
        return self._qps

    @property
    def burst(self) -> int:
        """Capacity of the bucket."""
        return self._burst

    def tokens(self) -> float:
        """Tokens available now; negative while reservations are outstanding (tests, metrics)."""
        with self._lock:
            self._refill()
            return self._tokens

    def try_acquire(self) -> bool:
        """Take a token if one is available now; never blocks and never goes into debt."""
        with self._lock:
            self._refill()
            if self._tokens + _EPSILON >= 1:
                self._tokens -= 1
                return True
            return False

    def reserve(self) -> float:
        """Take a token now; return the seconds the caller must wait before using it (0 if none).

        The token is taken whatever the wait, so the caller must honour it: sleep the returned
        time, or drop the operation and accept that the token is spent.
        """
        with self._lock:
            self._refill()
            self._tokens -= 1
            return 0.0 if self._tokens + _EPSILON >= 0 else -self._tokens / self._qps

    def acquire(self, timeout: float | None = None) -> bool:
        """Block, really sleeping, until a token is ours; False at once if it would take too long.

        The decision is made up front: if the wait for the next token is longer than ``timeout``
        seconds, no token is taken and False is returned without sleeping. ``timeout=None`` waits
        as long as needed; ``timeout=0`` behaves like :meth:`try_acquire`.
        """
        with self._lock:
            self._refill()
            wait = 0.0 if self._tokens + _EPSILON >= 1 else (1 - self._tokens) / self._qps
            if timeout is not None and wait > max(timeout, 0.0):
                return False
            self._tokens -= 1
        if wait > 0:
            time.sleep(wait)
        return True

    def _refill(self) -> None:
        # Caller holds the lock. A clock that stands still (FakeClock) or steps back adds
        # nothing; skipping elapsed == 0 also avoids 0 * inf == nan when qps is infinite.
        now = self._clock.monotonic()
        elapsed = now - self._last
        if elapsed > 0:
            self._tokens = min(float(self._burst), self._tokens + elapsed * self._qps)
            self._last = now
