"""Behaviour of WorkQueue: one test per guarantee in gitops_reloader/queue.py, plus edges.

Single-threaded tests drive time with a FakeClock and poll with ``get(timeout=0)``. A few
threaded tests use the real clock with tiny, bounded waits (each well under a second).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Hashable

import pytest

from gitops_reloader.clock import FakeClock, SystemClock
from gitops_reloader.queue import WorkQueue
from gitops_reloader.ratelimit import ItemExponentialLimiter, RateLimiter

JOIN = 2.0  # generous cap for joining helper threads; tests finish far sooner


def make_queue(
    clock: FakeClock | None = None, *, limiter: RateLimiter | None = None
) -> WorkQueue[str]:
    return WorkQueue(clock=clock or FakeClock(), limiter=limiter, name="test")


def drain_ready(q: WorkQueue[str]) -> list[str]:
    """Get every ready key (marking each done) without blocking."""
    keys = []
    while (key := q.get(timeout=0)) is not None:
        keys.append(key)
        q.done(key)
    return keys


class RecordingLimiter:
    """A limiter that always answers ``delay`` and records what it was asked."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls: list[tuple[str, Hashable]] = []

    def when(self, key: Hashable) -> float:
        self.calls.append(("when", key))
        return self.delay

    def forget(self, key: Hashable) -> None:
        self.calls.append(("forget", key))

    def num_requeues(self, key: Hashable) -> int:
        self.calls.append(("num_requeues", key))
        return 7


# -- adding and getting ---------------------------------------------------------------------


def test_added_key_is_handed_out_and_moves_to_processing() -> None:
    q = make_queue()
    q.add("ns/web")

    assert q.get(timeout=0) == "ns/web"
    assert q.depth() == {"queued": 0, "delayed": 0, "processing": 1}


def test_get_on_empty_queue_with_zero_timeout_returns_none_without_blocking() -> None:
    q = make_queue()

    started = time.monotonic()
    assert q.get(timeout=0) is None
    assert q.get(timeout=-1) is None
    assert time.monotonic() - started < 0.25


def test_get_returns_none_after_its_timeout_expires() -> None:
    q = make_queue()

    started = time.monotonic()
    assert q.get(timeout=0.02) is None
    assert 0.015 <= time.monotonic() - started < 0.5


def test_burst_of_adds_of_one_key_collapses_to_one() -> None:
    q = make_queue()
    for _ in range(100):
        q.add("ns/web")

    assert len(q) == 1
    assert drain_ready(q) == ["ns/web"]


def test_ready_keys_are_handed_out_in_fifo_order() -> None:
    q = make_queue()
    for key in ["c", "a", "b", "a", "c"]:
        q.add(key)

    assert drain_ready(q) == ["c", "a", "b"]


def test_key_is_not_handed_out_again_while_it_is_processing() -> None:
    q = make_queue()
    q.add("k")
    assert q.get(timeout=0) == "k"

    q.add("k")

    assert q.get(timeout=0) is None


def test_key_added_while_processing_runs_again_after_done() -> None:
    q = make_queue()
    q.add("k")
    key = q.get(timeout=0)
    q.add("k")

    assert key is not None
    q.done(key)

    assert q.get(timeout=0) == "k"


def test_key_added_many_times_while_processing_runs_exactly_once_more() -> None:
    q = make_queue()
    q.add("k")
    key = q.get(timeout=0)
    for _ in range(10):
        q.add("k")
    assert key is not None
    q.done(key)

    assert drain_ready(q) == ["k"]


def test_key_re_added_while_processing_goes_to_the_back_of_the_queue() -> None:
    q = make_queue()
    q.add("a")
    assert q.get(timeout=0) == "a"
    q.add("a")
    q.add("b")

    q.done("a")

    assert drain_ready(q) == ["b", "a"]


def test_done_without_a_re_add_does_not_requeue() -> None:
    q = make_queue()
    q.add("k")
    assert q.get(timeout=0) == "k"

    q.done("k")

    assert q.get(timeout=0) is None
    assert q.depth() == {"queued": 0, "delayed": 0, "processing": 0}


def test_done_for_a_key_that_is_not_processing_is_ignored() -> None:
    q = make_queue()
    q.add("queued")

    q.done("queued")
    q.done("unknown")

    assert drain_ready(q) == ["queued"]


def test_keys_can_be_any_hashable_value() -> None:
    q: WorkQueue[tuple[str, str]] = WorkQueue(clock=FakeClock())
    q.add(("ns", "web"))
    q.add(("ns", "web"))

    assert q.get(timeout=0) == ("ns", "web")
    assert q.get(timeout=0) is None


# -- delays -----------------------------------------------------------------------------------


def test_delayed_key_is_not_ready_before_its_time() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add_after("k", 5.0)

    clock.advance(4.999)

    assert q.get(timeout=0) is None
    assert len(q) == 1


def test_delayed_key_becomes_ready_once_the_clock_reaches_its_time() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add_after("k", 5.0)

    clock.advance(5.0)

    assert q.get(timeout=0) == "k"


def test_delayed_keys_become_ready_in_time_order() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add_after("late", 3.0)
    q.add_after("early", 1.0)
    q.add_after("middle", 2.0)

    clock.advance(10.0)

    assert drain_ready(q) == ["early", "middle", "late"]


def test_delayed_keys_due_at_the_same_time_keep_their_scheduling_order() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    for key in ["b", "c", "a"]:
        q.add_after(key, 1.0)

    clock.advance(1.0)

    assert drain_ready(q) == ["b", "c", "a"]


def test_delayed_key_that_becomes_ready_queues_behind_keys_already_ready() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add_after("delayed", 1.0)
    clock.advance(1.0)
    q.add("direct")

    # "delayed" was due first but is only queued when a get() looks at the clock.
    assert drain_ready(q) == ["direct", "delayed"]


def test_add_after_with_a_later_time_does_not_postpone_a_waiting_key() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add_after("k", 1.0)
    q.add_after("k", 10.0)

    clock.advance(1.0)

    assert drain_ready(q) == ["k"]
    clock.advance(20.0)
    assert drain_ready(q) == []  # the later request did not leave a second run behind


def test_add_after_with_an_earlier_time_moves_a_waiting_key_forward_once() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add_after("k", 10.0)
    q.add_after("k", 1.0)
    assert len(q) == 1

    clock.advance(1.0)
    assert drain_ready(q) == ["k"]
    clock.advance(20.0)
    assert drain_ready(q) == []


def test_add_after_of_an_already_queued_key_is_a_no_op() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add("k")
    q.add_after("k", 1.0)

    assert q.depth() == {"queued": 1, "delayed": 0, "processing": 0}
    clock.advance(5.0)
    assert drain_ready(q) == ["k"]


def test_add_of_a_waiting_key_makes_it_ready_now_and_cancels_the_wait() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add_after("k", 5.0)

    q.add("k")

    assert q.depth() == {"queued": 1, "delayed": 0, "processing": 0}
    assert drain_ready(q) == ["k"]
    clock.advance(10.0)
    assert drain_ready(q) == []


@pytest.mark.parametrize("delay", [0.0, -1.0, -math.inf])
def test_add_after_with_a_non_positive_delay_adds_immediately(delay: float) -> None:
    q = make_queue()

    q.add_after("k", delay)

    assert q.get(timeout=0) == "k"


def test_add_after_rejects_nan_delay() -> None:
    q = make_queue()

    with pytest.raises(ValueError):
        q.add_after("k", math.nan)


def test_infinitely_delayed_key_waits_until_it_is_added() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add_after("k", math.inf)

    clock.advance(1e12)
    assert q.get(timeout=0) is None
    q.add("k")
    assert q.get(timeout=0) == "k"


def test_delayed_key_due_while_processing_runs_after_done() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add("k")
    assert q.get(timeout=0) == "k"
    q.add_after("k", 1.0)

    clock.advance(1.0)
    assert q.get(timeout=0) is None  # still processing: never twice at once
    q.done("k")

    assert q.get(timeout=0) == "k"


def test_many_cancelled_waits_do_not_accumulate_in_the_delay_heap() -> None:
    clock = FakeClock()
    q = make_queue(clock)

    for _ in range(1_000):
        q.add_after("k", 60.0)
        q.add("k")
        assert drain_ready(q) == ["k"]

    assert len(q._heap) <= 100  # compacted; internal, but it is the bound we promise
    q.add_after("k", 1.0)
    clock.advance(1.0)
    assert drain_ready(q) == ["k"]


# -- rate-limited retries ---------------------------------------------------------------------


def test_add_rate_limited_waits_for_the_limiter_backoff() -> None:
    clock = FakeClock()
    q = make_queue(clock, limiter=ItemExponentialLimiter(base_delay=1.0, max_delay=60.0))

    q.add_rate_limited("k")  # 1 s
    clock.advance(0.5)
    assert q.get(timeout=0) is None
    clock.advance(0.5)
    assert drain_ready(q) == ["k"]

    q.add_rate_limited("k")  # 2 s
    clock.advance(1.0)
    assert q.get(timeout=0) is None
    clock.advance(1.0)
    assert drain_ready(q) == ["k"]
    assert q.num_requeues("k") == 2


def test_forget_resets_the_requeue_count_and_backoff() -> None:
    clock = FakeClock()
    q = make_queue(clock, limiter=ItemExponentialLimiter(base_delay=1.0, max_delay=60.0))
    q.add_rate_limited("k")
    q.add_rate_limited("k")

    q.forget("k")

    assert q.num_requeues("k") == 0


def test_queue_uses_the_injected_limiter() -> None:
    clock = FakeClock()
    limiter = RecordingLimiter(delay=3.0)
    q = make_queue(clock, limiter=limiter)

    q.add_rate_limited("k")
    q.forget("k")
    assert q.num_requeues("k") == 7

    assert limiter.calls == [("when", "k"), ("forget", "k"), ("num_requeues", "k")]
    clock.advance(3.0)
    assert q.get(timeout=0) == "k"


def test_default_limiter_is_per_item_exponential() -> None:
    q: WorkQueue[str] = WorkQueue()

    q.add_rate_limited("k")
    q.add_rate_limited("k")

    assert q.num_requeues("k") == 2
    assert q.depth()["delayed"] == 1


# -- introspection ------------------------------------------------------------------------------


def test_len_counts_queued_and_delayed_keys_but_not_processing_ones() -> None:
    q = make_queue()
    q.add("processing")
    assert q.get(timeout=0) == "processing"
    q.add("queued")
    q.add_after("delayed", 5.0)

    assert len(q) == 2


def test_depth_reports_queued_delayed_and_processing_counts() -> None:
    q = make_queue()
    q.add("p1")
    q.add("p2")
    q.get(timeout=0)
    q.get(timeout=0)
    q.add("q1")
    q.add_after("d1", 1.0)
    q.add_after("d2", 2.0)

    assert q.depth() == {"queued": 1, "delayed": 2, "processing": 2}


def test_name_is_kept_for_metrics() -> None:
    assert make_queue().name == "test"


# -- shutdown -----------------------------------------------------------------------------------


def test_keys_added_after_shutdown_are_dropped() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.shutdown()

    q.add("a")
    q.add_after("b", 1.0)
    q.add_rate_limited("c")
    clock.advance(5.0)

    assert q.get(timeout=0) is None
    assert len(q) == 0
    assert q.num_requeues("c") == 0


def test_shutting_down_turns_true_on_shutdown() -> None:
    q = make_queue()
    assert q.shutting_down is False

    q.shutdown()

    assert q.shutting_down is True


def test_shutdown_without_drain_drops_queued_keys_and_get_returns_none() -> None:
    q = make_queue()
    q.add("a")
    q.add("b")

    assert q.shutdown() is True

    assert q.get(timeout=0) is None
    assert q.get() is None  # no timeout: still returns at once


def test_shutdown_without_drain_does_not_rerun_a_key_re_added_while_processing() -> None:
    q = make_queue()
    q.add("k")
    assert q.get(timeout=0) == "k"
    q.add("k")

    assert q.shutdown() is False  # "k" is still processing
    q.done("k")

    assert q.get(timeout=0) is None
    assert q.depth() == {"queued": 0, "delayed": 0, "processing": 0}


def test_shutdown_drops_delayed_keys() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add_after("k", 1.0)

    q.shutdown(drain=True, timeout=0)
    clock.advance(5.0)

    assert q.get(timeout=0) is None
    assert len(q) == 0


def test_shutdown_with_drain_keeps_handing_out_queued_keys_then_none() -> None:
    q = make_queue()
    q.add("a")
    q.add("b")

    assert q.shutdown(drain=True, timeout=0) is False  # nobody worked them off yet

    assert drain_ready(q) == ["a", "b"]
    assert q.get() is None


def test_shutdown_with_drain_reruns_a_key_re_added_while_processing() -> None:
    q = make_queue()
    q.add("k")
    assert q.get(timeout=0) == "k"
    q.add("k")
    q.shutdown(drain=True, timeout=0)

    q.done("k")

    assert drain_ready(q) == ["k"]
    assert q.get(timeout=0) is None


def test_shutdown_with_drain_times_out_while_a_key_is_processing() -> None:
    q = make_queue()
    q.add("k")
    assert q.get(timeout=0) == "k"

    started = time.monotonic()
    assert q.shutdown(drain=True, timeout=0.01) is False
    assert time.monotonic() - started < 0.5


def test_shutdown_with_drain_on_an_idle_queue_returns_true_at_once() -> None:
    q = make_queue()

    assert q.shutdown(drain=True) is True


def test_shutdown_can_be_called_again() -> None:
    q = make_queue()
    q.add("k")
    q.shutdown(drain=True, timeout=0)

    assert q.shutdown() is True  # the second, non-draining call drops what was left
    assert q.get(timeout=0) is None


# -- threads (real clock, tiny bounded waits) ---------------------------------------------


def _start(target: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_blocked_get_is_woken_by_add_from_another_thread() -> None:
    q: WorkQueue[str] = WorkQueue(clock=SystemClock())
    got: list[str | None] = []
    getter = _start(lambda: got.append(q.get(timeout=JOIN)))

    time.sleep(0.01)  # let the getter block
    q.add("k")
    getter.join(JOIN)

    assert got == ["k"]


def test_blocked_get_wakes_when_a_delayed_key_becomes_due() -> None:
    q: WorkQueue[str] = WorkQueue(clock=SystemClock())
    got: list[str | None] = []
    getter = _start(lambda: got.append(q.get(timeout=JOIN)))

    time.sleep(0.01)  # the getter is blocked on an empty queue with a 2 s timeout
    started = time.monotonic()
    q.add_after("k", 0.02)  # must shorten its wait rather than leave it sleeping 2 s
    getter.join(JOIN)

    assert got == ["k"]
    assert 0.015 <= time.monotonic() - started < 1.0


def test_shutdown_wakes_blocked_getters() -> None:
    q: WorkQueue[str] = WorkQueue(clock=SystemClock())
    results: list[str | None] = []
    lock = threading.Lock()

    def blocked_get() -> None:
        key = q.get()  # no timeout: only shutdown can end it
        with lock:
            results.append(key)

    getters = [_start(blocked_get) for _ in range(3)]
    time.sleep(0.01)
    started = time.monotonic()
    q.shutdown()
    for getter in getters:
        getter.join(JOIN)

    assert results == [None, None, None]
    assert time.monotonic() - started < 1.0


def test_concurrent_workers_never_process_the_same_key_at_once() -> None:
    q: WorkQueue[str] = WorkQueue(clock=SystemClock())
    keys = [f"k{i}" for i in range(5)]
    in_flight: set[str] = set()
    overlaps: list[str] = []
    processed: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        while (key := q.get(timeout=JOIN)) is not None:
            with lock:
                if key in in_flight:
                    overlaps.append(key)
                in_flight.add(key)
            time.sleep(0.0005)  # hold the key while other threads re-add it
            with lock:
                in_flight.discard(key)
                processed.append(key)
            q.done(key)

    workers = [_start(worker) for _ in range(6)]
    for _ in range(40):
        for key in keys:
            q.add(key)
        time.sleep(0.0005)
    assert q.shutdown(drain=True, timeout=JOIN) is True
    for thread in workers:
        thread.join(JOIN)

    assert overlaps == []
    assert set(processed) == set(keys)
    assert len(processed) <= 40 * len(keys)  # never more runs than adds


def test_shutdown_with_drain_returns_once_workers_finish_their_keys() -> None:
    q: WorkQueue[str] = WorkQueue(clock=SystemClock())
    finished: list[str] = []

    def worker() -> None:
        while (key := q.get(timeout=JOIN)) is not None:
            time.sleep(0.005)
            finished.append(key)
            q.done(key)

    for key in ["a", "b", "c"]:
        q.add(key)
    thread = _start(worker)

    assert q.shutdown(drain=True, timeout=JOIN) is True
    thread.join(JOIN)

    assert finished == ["a", "b", "c"]


def test_due_counts_delayed_keys_whose_time_came_but_no_get_picked_up() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add_after("a", 1.0)
    q.add_after("b", 5.0)
    assert q.due() == 0
    clock.advance(2.0)
    assert q.due() == 1 and q.depth()["delayed"] == 2
    assert q.get(timeout=0) == "a"
    assert q.due() == 0
