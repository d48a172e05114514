"""The one backoff formula and the one reader of ``Retry-After`` (pure)."""

from __future__ import annotations

import email.utils

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitops_reloader.backoff import Backoff, exponential, floored, parse_retry_after

NOW = 1_700_000_000.0


def test_exponential_doubles_from_the_base_and_stops_at_the_cap() -> None:
    assert [exponential(1.0, n, 10.0) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert exponential(0.05, 0, 1.0) == 0.05  # attempt 0 reads as the first


@given(st.integers(min_value=-10, max_value=10**9))
def test_exponential_never_overflows_or_passes_the_cap(attempt: int) -> None:
    assert 0.0 <= exponential(0.5, attempt, 300.0) <= 300.0


@pytest.mark.parametrize(("header", "expected"), [
    ("120", 120.0), (" 7 ", 7.0), ("0", 0.0), ("1.5", 1.5),
    ("-1", None), ("inf", None), ("-inf", None), ("nan", None), ("soon", None), ("", None), (None, None),
    ("9" * 400, None),  # 64 characters are read: a huge but finite number is still a number below
])
def test_parse_retry_after_reads_delay_seconds_and_refuses_the_rest(header: str | None,
                                                                  expected: float | None) -> None:
    value = parse_retry_after(header, now=NOW)
    if header == "9" * 400:
        assert value is not None and value > 1e60
    else:
        assert value == expected


def test_parse_retry_after_reads_an_http_date_relative_to_now() -> None:
    later = email.utils.formatdate(NOW + 90, usegmt=True)
    earlier = email.utils.formatdate(NOW - 90, usegmt=True)
    assert parse_retry_after(later, now=NOW) == pytest.approx(90.0, abs=1.0)
    assert parse_retry_after(earlier, now=NOW) == 0.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28", now=NOW) is None  # no zone: not an HTTP-date


@given(st.text(max_size=100))
def test_parse_retry_after_never_raises_and_never_returns_a_negative_or_infinite_wait(text: str) -> None:
    value = parse_retry_after(text, now=NOW)
    assert value is None or (value >= 0 and value != float("inf"))


def test_floored_raises_a_delay_to_the_server_floor_bounded_by_the_cap() -> None:
    assert floored(2.0, 10.0, 300.0) == 10.0
    assert floored(20.0, 10.0, 300.0) == 20.0
    assert floored(2.0, 1e9, 300.0) == 300.0
    assert floored(2.0, float("inf"), 300.0) == 2.0
    assert floored(2.0, None, 300.0) == 2.0


def test_backoff_jitter_only_shortens_and_the_floor_applies_after_it() -> None:
    backoff = Backoff(1.0, 60.0, jitter=0.5)
    assert backoff.delay(3) == 4.0
    assert backoff.delay(3, spread=0.5) == 3.0
    assert backoff.delay(3, spread=0.5, retry_after=3.5) == 3.5
    assert backoff.delay(30, spread=0.99, retry_after=5.0) >= 30.0
