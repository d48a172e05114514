"""Storm brakes as pure logic: rates, windows, the source backoff (times are passed in)."""

from __future__ import annotations

import pytest

from gitops_reloader.control.brakes import Rate, SourceBackoff, StormBrakes, Window, parse_rate


@pytest.mark.parametrize(("text", "rate"), [
    ("6/10m", Rate(6, 600.0)), (" 1 / 1h ", Rate(1, 3600.0)), ("120/1m", Rate(120, 60.0)),
    ("0", None), ("off", None), ("", None),
])
def test_storm_brake_rates_parse(text: str, rate: Rate | None) -> None:
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["6", "6/", "x/10m", "0/10m", "6/0s", "6/200h", "6/ten", "1/" + "9" * 40])
def test_storm_brake_malformed_rates_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rate(text)


def test_storm_brake_window_holds_the_next_reload_until_the_oldest_ages_out() -> None:
    window, rate = Window(), Rate(3, 60.0)
    for t in (0.0, 10.0, 20.0):
        assert window.wait("ns/Deployment/web", rate, t) == 0.0
        window.note("ns/Deployment/web", rate, t)
    assert window.wait("ns/Deployment/web", rate, 30.0) == 30.0  # the reload at 0 leaves at 60
    assert window.wait("ns/Deployment/other", rate, 30.0) == 0.0  # per workload
    assert window.wait("ns/Deployment/web", rate, 60.0) == 0.0
    window.note("ns/Deployment/web", rate, 60.0)
    assert window.wait("ns/Deployment/web", rate, 61.0) == 9.0  # now the one at 10 is the oldest
    assert window.wait("ns/Deployment/web", Rate(4, 60.0), 61.0) == 0.0  # it holds the last 3 reloads


def test_storm_brake_window_memory_follows_recent_workloads() -> None:
    window, rate = Window(), Rate(2, 10.0)
    for i in range(5000):
        window.note(f"ns/Deployment/w{i}", rate, float(i))
    assert len(window._times) < 1100  # forgotten once older than the longest period


def test_storm_brake_cluster_cap_holds_every_workload_and_takes_back_unused_slots() -> None:
    brakes = StormBrakes(None, Rate(2, 60.0))
    assert brakes.admit("a", None, 0.0) == (0.0, "")  # admitted: the slot is reserved at once
    assert brakes.admit("b", None, 1.0) == (0.0, "")
    assert brakes.admit("c", None, 2.0) == (58.0, "cluster")
    brakes.release("b", 1.0)  # b's emission applied nothing
    assert brakes.admit("c", None, 2.0) == (0.0, "")
    assert brakes.admit("d", Rate(1, 10.0), 60.5) == (0.0, "")
    assert brakes.admit("d", Rate(1, 10.0), 61.0) == (9.5, "workload")


def test_storm_brake_source_backoff_stretches_a_loop_and_resets_when_quiet() -> None:
    backoff = SourceBackoff(free=2, quiet=30.0, cap=64.0)
    delays = [backoff.delay("secret/ns/token", 2.0, float(t)) for t in range(8)]
    assert delays == [2.0, 2.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    assert backoff.delay("secret/ns/token", 2.0, 8.0) == 64.0  # still stretched, and capped
    assert backoff.delay("secret/ns/other", 2.0, 8.0) == 2.0  # per source
    assert backoff.delay("secret/ns/token", 2.0, 100.0) == 2.0  # quiet for longer than 30 s: normal


def test_storm_brake_one_change_a_second_for_ten_minutes_is_bounded() -> None:
    """The model bench/storm.py prints: a loop of one change per second, 2 s coalescing."""
    backoff, window, rate = SourceBackoff(), Window(), Rate(6, 600.0)
    reloads, due = 0, None
    for second in range(600):
        delay = backoff.delay("s", 2.0, float(second))
        due = second + delay if due is None else min(due, second + delay)
        if due is not None and second >= due:
            if window.wait("w", rate, float(second)) == 0.0:
                window.note("w", rate, float(second))
                reloads += 1
            due = None
    assert 1 <= reloads <= 6
