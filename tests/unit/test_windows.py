"""Maintenance windows as pure logic: cron in a time zone, a duration, daylight saving."""

from __future__ import annotations

import datetime as _dt
from zoneinfo import ZoneInfo

import pytest

from gitops_reloader.errors import ConfigError
from gitops_reloader.windows import ReloadWindow, parse_windows

BERLIN = ZoneInfo("Europe/Berlin")


def at(*parts: int, zone: ZoneInfo = BERLIN, fold: int = 0) -> float:
    return _dt.datetime(*parts, tzinfo=zone, fold=fold).timestamp()


def test_reload_window_weeknights_open_and_closed_across_midnight() -> None:
    window = ReloadWindow("weeknights", "0 22 * * 1-5", "Europe/Berlin", 6 * 3600)
    assert window.opens_in(at(2026, 11, 30, 21, 0)) == 3600  # Monday 21:00: opens at 22:00
    assert window.opens_in(at(2026, 11, 30, 22, 0)) == 0
    assert window.opens_in(at(2026, 12, 1, 3, 59)) == 0  # past midnight, still the Monday window
    assert window.opens_in(at(2026, 12, 1, 4, 0)) == 18 * 3600  # closed until Tuesday 22:00
    saturday = at(2026, 11, 28, 23, 0)
    assert window.opens_in(saturday) == at(2026, 11, 30, 22, 0) - saturday  # not on the weekend
    assert "opens at 2026-11-30 22:00 (Europe/Berlin)" in window.describe(saturday)


def test_reload_window_spring_forward_start_in_the_skipped_hour_opens_at_three() -> None:
    window = ReloadWindow("night", "30 2 * * *", "Europe/Berlin", 3600)
    before = at(2026, 3, 29, 1, 0)  # 2026-03-29 02:00 → 03:00 in Berlin
    assert window.opens_in(before) == at(2026, 3, 29, 3, 0) - before  # as cron: the first minute after
    assert window.opens_in(at(2026, 3, 29, 3, 30)) == 0
    assert window.opens_in(at(2026, 3, 29, 4, 0)) > 0  # one hour of elapsed time, not more


def test_reload_window_fall_back_repeated_hour_opens_once_for_its_duration() -> None:
    window = ReloadWindow("night", "30 2 * * *", "Europe/Berlin", 1800)
    first = at(2026, 10, 25, 2, 30, fold=0)  # 02:30 CEST; the clock shows 02:30 again an hour later
    assert window.opens_in(first) == 0
    assert window.opens_in(first + 1799) == 0
    assert window.opens_in(at(2026, 10, 25, 2, 45, fold=1)) > 0  # the repeated 02:30 is not a second start
    assert window.opens_in(first + 1800) == at(2026, 10, 26, 2, 30) - (first + 1800)


NEW_YORK = ZoneInfo("America/New_York")


def test_reload_window_wildcard_schedule_opens_in_both_passes_of_the_repeated_hour() -> None:
    """As Debian cron runs a job whose minute or hour field is a wildcard: in both passes of the
    repeated hour (a fixed time, the test above, opens once)."""
    window = ReloadWindow("quarter", "*/15 1 * * *", "America/New_York", 300)
    first = at(2026, 11, 1, 1, 15, zone=NEW_YORK, fold=0)  # 01:15 EDT
    second = at(2026, 11, 1, 1, 15, zone=NEW_YORK, fold=1)  # 01:15 EST, an hour later
    assert second - first == 3600
    assert window.opens_in(first) == 0 and window.opens_in(second) == 0
    assert window.opens_in(first + 600) == 300  # closed between two starts of the first pass


def test_reload_window_duration_is_elapsed_time_across_a_dst_change() -> None:
    window = ReloadWindow("weekend", "0 22 * * 6", "Europe/Berlin", 6 * 3600)
    start = at(2026, 10, 24, 22, 0)  # Saturday 22:00 CEST, the night the clocks go back
    assert window.opens_in(start + 6 * 3600 - 1) == 0  # 03:00 CET on the wall, six hours later
    assert window.opens_in(start + 6 * 3600) > 0


def test_reload_window_config_is_validated_field_by_field() -> None:
    ok = parse_windows("windows:\n  - {name: nights, schedule: '0 22 * * *', timeZone: UTC, duration: 6h}\n"
                       "default: nights\n")
    assert ok.for_annotation(None) == ok.windows["nights"]
    assert ok.for_annotation("none") is None
    with pytest.raises(ConfigError, match="no reload window named 'days'"):
        ok.for_annotation("days")
    for text, field in (
        ("windows: [{name: a, schedule: '61 * * * *', timeZone: UTC, duration: 1h}]", "windows[0].schedule"),
        ("windows: [{name: a, schedule: '0 * * * *', timeZone: Mars/Olympus, duration: 1h}]",
         "windows[0].timeZone"),
        ("windows: [{name: a, schedule: '0 * * * *', duration: forever}]", "windows[0].duration"),
        ("windows: [{name: A, schedule: '0 * * * *', duration: 1h}]", "windows[0].name"),
        ("windows: [{name: a, schedule: '0 * * * *', duration: 1h}]\ndefault: b", "default"),
        ("windows: [", "not valid YAML"),
    ):
        with pytest.raises(ConfigError, match=field.replace("[", r"\[").replace("]", r"\]")):
            parse_windows(text)
