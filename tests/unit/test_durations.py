"""The one duration parser and the one way of printing a duration (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitops_reloader.durations import format_duration, parse_duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("0", 0.0), ("", 0.0), ("500ms", 0.5), ("2s", 2.0), ("1m30s", 90.0), ("1h", 3600.0), (" 10m ", 600.0),
])
def test_parse_duration_reads_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["-1s", "ten minutes", "1x", "1" * 80 + "s"])
def test_parse_duration_refuses_with_a_message(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (0.25, "250ms"), (1.5, "1.5s"), (45, "45s"), (60, "1m"), (65, "1m5s"), (300, "5m"),
    (3600, "1h"), (3900, "1h5m"), (3661, "1h1m1s"), (float("inf"), "inf"), (-2, "-2s"),
])
def test_format_duration_prints_the_units_that_are_not_zero(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.integers(min_value=1, max_value=7 * 24 * 3600))
def test_a_printed_whole_duration_parses_back_to_itself(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)) == seconds
