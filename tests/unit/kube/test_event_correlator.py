"""The Event correlator alone, on a fake clock: client-go's aggregation, counting and spam filter."""

from __future__ import annotations

from gitops_reloader.clock import FakeClock
from gitops_reloader.kube.eventcorrelator import (
    AGGREGATE_PREFIX,
    EventCorrelator,
    EventKey,
)


def key(message: str = "reload failed, still pending: host down", reason: str = "ReloadFailed",
        name: str = "web") -> EventKey:
    return EventKey("shop", "Deployment", name, "uid-1", "Warning", reason, message)


def test_event_aggregation_counts_a_repeated_event_on_one_object() -> None:
    clock = FakeClock()
    correlator = EventCorrelator(clock)
    first = correlator.correlate(key(), "web.1")
    assert (first.skip, first.patch, first.name, first.count) == (False, False, "web.1", 1)
    created_at = first.first_timestamp
    for count in range(2, 8):
        clock.advance(30)
        again = correlator.correlate(key(), f"web.{count}")
        assert (again.skip, again.patch, again.name, again.count) == (False, True, "web.1", count)
        assert again.first_timestamp == created_at  # the first occurrence's time is kept


def test_event_aggregation_combines_ten_distinct_messages_of_one_reason() -> None:
    clock = FakeClock()
    correlator = EventCorrelator(clock)
    names = set()
    for attempt in range(1, 26):  # within the spam filter's burst of 25
        clock.advance(5)
        result = correlator.correlate(key(f"attempt {attempt} failed"), f"web.{attempt}")
        assert not result.skip
        names.add(result.name)
        if attempt >= 10:
            assert result.message == AGGREGATE_PREFIX + f"attempt {attempt} failed"
    # nine single events, then one aggregate object whose count grows
    assert len(names) == 10
    assert result.patch and result.count == 16


def test_event_aggregation_starts_over_after_ten_quiet_minutes() -> None:
    clock = FakeClock()
    correlator = EventCorrelator(clock)
    for attempt in range(12):
        correlator.correlate(key(f"m{attempt}"), f"web.{attempt}")
    clock.advance(601)
    fresh = correlator.correlate(key("a new message"), "web.new")
    assert fresh.message == "a new message" and not fresh.patch


def test_event_aggregation_spam_filter_allows_a_burst_then_one_per_five_minutes() -> None:
    clock = FakeClock()
    correlator = EventCorrelator(clock)
    written = [not correlator.correlate(key(), f"web.{i}").skip for i in range(40)]
    assert written.count(True) == 25  # the burst
    assert not any(written[25:])
    clock.advance(299)
    assert correlator.correlate(key(), "x").skip
    clock.advance(1)
    assert not correlator.correlate(key(), "x").skip  # refilled one token
    # another object has its own bucket
    assert not correlator.correlate(key(name="api"), "api.1").skip


def test_event_aggregation_ten_minutes_of_failures_leave_a_bounded_number_of_objects() -> None:
    """One failing workload retried with the controller's backoff (1 s doubling to 5 min) for
    10 minutes, writing ReloadFailed at each attempt and ReloadStillFailing once: 2 objects."""
    clock = FakeClock()
    correlator = EventCorrelator(clock)
    objects, writes, delay, elapsed, attempt = set(), 0, 1.0, 0.0, 0
    while elapsed < 600:
        attempt += 1
        result = correlator.correlate(key(), f"web.{attempt}")
        if not result.skip:
            writes += 1
            objects.add(result.name)
        if attempt == 12:
            objects.add(correlator.correlate(key("still failing", reason="ReloadStillFailing"), "s").name)
        clock.advance(delay)
        elapsed += delay
        delay = min(delay * 2, 300.0)
    assert len(objects) <= 2
    assert writes == attempt  # every attempt counted on the one object
