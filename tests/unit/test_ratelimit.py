"""Behaviour of the per-key backoff limiter and the token bucket (fake clock, no real waiting)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Hashable

import pytest

from gitops_reloader.clock import FakeClock
from gitops_reloader.ratelimit import ItemExponentialLimiter, RateLimiter, TokenBucket

# -- ItemExponentialLimiter -------------------------------------------------------------------


def test_backoff_doubles_per_failure_starting_at_base_delay() -> None:
    limiter = ItemExponentialLimiter(base_delay=0.05, max_delay=60.0)

    assert [limiter.when("ns/web") for _ in range(4)] == pytest.approx([0.05, 0.1, 0.2, 0.4])


def test_backoff_is_capped_at_max_delay() -> None:
    limiter = ItemExponentialLimiter(base_delay=1.0, max_delay=5.0)

    assert [limiter.when("k") for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_backoff_stays_at_max_delay_after_thousands_of_failures_without_overflow() -> None:
    limiter = ItemExponentialLimiter(base_delay=0.05, max_delay=60.0)

    delays = [limiter.when("k") for _ in range(3000)]

    assert delays[-1] == 60.0
    assert max(delays) == 60.0
    assert limiter.num_requeues("k") == 3000


def test_forget_resets_backoff_to_base_delay() -> None:
    limiter = ItemExponentialLimiter(base_delay=1.0, max_delay=100.0)
    limiter.when("k")
    limiter.when("k")

    limiter.forget("k")

    assert limiter.num_requeues("k") == 0
    assert limiter.when("k") == 1.0


def test_forget_of_unknown_key_is_harmless() -> None:
    limiter = ItemExponentialLimiter()

    limiter.forget("never-seen")

    assert limiter.num_requeues("never-seen") == 0


def test_keys_back_off_independently() -> None:
    limiter = ItemExponentialLimiter(base_delay=1.0, max_delay=100.0)
    limiter.when("a")
    limiter.when("a")

    assert limiter.when("b") == 1.0
    assert limiter.when("a") == 4.0
    assert (limiter.num_requeues("a"), limiter.num_requeues("b")) == (3, 1)


def test_zero_base_delay_always_returns_zero() -> None:
    limiter = ItemExponentialLimiter(base_delay=0.0, max_delay=0.0)

    assert [limiter.when("k") for _ in range(3)] == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("base", "maximum"),
    [(-0.1, 1.0), (2.0, 1.0), (math.nan, 1.0), (0.1, math.nan)],
)
def test_limiter_rejects_invalid_delays(base: float, maximum: float) -> None:
    with pytest.raises(ValueError):
        ItemExponentialLimiter(base_delay=base, max_delay=maximum)


def test_limiter_counts_every_failure_under_concurrent_calls() -> None:
    limiter = ItemExponentialLimiter()

    def fail_many() -> None:
        for _ in range(500):
            limiter.when("k")

    threads = [threading.Thread(target=fail_many) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)

    assert limiter.num_requeues("k") == 4000


def test_exponential_limiter_satisfies_the_rate_limiter_protocol() -> None:
    limiter: RateLimiter = ItemExponentialLimiter()
    key: Hashable = ("ns", "web")

    assert limiter.when(key) == pytest.approx(0.05)
    assert limiter.num_requeues(key) == 1


# -- TokenBucket --------------------------------------------------------------------------------


def test_bucket_starts_full_allows_a_burst_then_refuses() -> None:
    bucket = TokenBucket(qps=1, burst=3, clock=FakeClock())

    assert [bucket.try_acquire() for _ in range(4)] == [True, True, True, False]


def test_bucket_refills_at_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=2, clock=clock)
    bucket.try_acquire()
    bucket.try_acquire()

    clock.advance(0.1)

    assert bucket.try_acquire() is True
    assert bucket.try_acquire() is False


def test_bucket_accumulates_fractional_tokens() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=1, clock=clock)
    bucket.try_acquire()

    clock.advance(0.05)
    assert bucket.try_acquire() is False
    clock.advance(0.05)
    assert bucket.try_acquire() is True


def test_bucket_never_refills_beyond_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=100, burst=2, clock=clock)

    clock.advance(3600)

    assert bucket.tokens() == 2
    assert [bucket.try_acquire() for _ in range(3)] == [True, True, False]


def test_clock_stepping_back_adds_no_tokens() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=1, clock=clock)
    bucket.try_acquire()

    clock.advance(-5)

    assert bucket.try_acquire() is False


def test_try_acquire_never_goes_into_debt() -> None:
    bucket = TokenBucket(qps=1, burst=1, clock=FakeClock())
    bucket.try_acquire()

    for _ in range(5):
        bucket.try_acquire()

    assert bucket.tokens() == 0


def test_reserve_returns_zero_while_tokens_remain() -> None:
    bucket = TokenBucket(qps=1, burst=2, clock=FakeClock())

    assert [bucket.reserve(), bucket.reserve()] == [0.0, 0.0]


def test_reserve_beyond_the_burst_hands_out_growing_waits() -> None:
    bucket = TokenBucket(qps=10, burst=2, clock=FakeClock())

    waits = [bucket.reserve() for _ in range(5)]

    assert waits == pytest.approx([0.0, 0.0, 0.1, 0.2, 0.3])


def test_reserved_debt_must_be_refilled_before_tokens_are_available_again() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=1, clock=clock)
    bucket.reserve()
    bucket.reserve()  # one token of debt: due 0.1 s from now

    clock.advance(0.1)
    assert bucket.try_acquire() is False  # the refill paid the debt only
    assert bucket.reserve() == pytest.approx(0.1)
    clock.advance(0.2)
    assert bucket.try_acquire() is True


def test_reserve_waits_shrink_as_the_clock_advances() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=4, burst=1, clock=clock)
    bucket.reserve()

    clock.advance(0.1)

    assert bucket.reserve() == pytest.approx(0.15)


def test_acquire_returns_at_once_when_a_token_is_available() -> None:
    bucket = TokenBucket(qps=1, burst=1, clock=FakeClock())

    assert bucket.acquire(timeout=0) is True
    assert bucket.tokens() == 0


def test_acquire_fails_without_taking_a_token_when_the_wait_exceeds_the_timeout() -> None:
    bucket = TokenBucket(qps=1, burst=1, clock=FakeClock())
    bucket.try_acquire()

    started = time.monotonic()
    assert bucket.acquire(timeout=0.5) is False  # next token is 1 s away
    assert bucket.acquire(timeout=0) is False

    assert time.monotonic() - started < 0.25  # decided up front, no sleeping
    assert bucket.tokens() == 0


def test_acquire_sleeps_for_the_wait_then_succeeds() -> None:
    bucket = TokenBucket(qps=100, burst=1, clock=FakeClock())
    bucket.try_acquire()

    started = time.monotonic()
    assert bucket.acquire(timeout=1.0) is True

    assert time.monotonic() - started >= 0.009  # 1 token at 100 qps: 10 ms of real sleep
    assert bucket.tokens() == pytest.approx(-1.0)  # the sleep does not move the fake clock


def test_bucket_with_infinite_qps_never_makes_anyone_wait() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=math.inf, burst=1, clock=clock)

    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    clock.advance(0.001)
    assert bucket.try_acquire() is True


@pytest.mark.parametrize(("qps", "burst"), [(0, 1), (-1, 1), (math.nan, 1), (1, 0)])
def test_bucket_rejects_invalid_arguments(qps: float, burst: int) -> None:
    with pytest.raises(ValueError):
        TokenBucket(qps=qps, burst=burst, clock=FakeClock())


def test_bucket_hands_out_exactly_burst_tokens_under_concurrent_callers() -> None:
    bucket = TokenBucket(qps=1, burst=100, clock=FakeClock())
    granted: list[bool] = []
    lock = threading.Lock()

    def grab() -> None:
        mine = [bucket.try_acquire() for _ in range(50)]
        with lock:
            granted.extend(mine)

    threads = [threading.Thread(target=grab) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)

    assert granted.count(True) == 100
