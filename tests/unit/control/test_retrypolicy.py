"""When a failed emission is tried again: classes, backoff, cap, jitter, Retry-After."""

from __future__ import annotations

import pytest

from gitops_reloader.control.retrypolicy import FailureClass, RetrySchedule, classify, failure_reason
from gitops_reloader.errors import (
    GitError,
    HostAuthError,
    HostError,
    HostKeyRefused,
    HostRateLimited,
    KubeConflict,
    KubeError,
    ManifestNotFound,
    RemoteRefused,
    RepositoryUnusable,
)


@pytest.mark.parametrize(("exc", "expected"), [
    (KubeConflict("409", status=409), FailureClass.RACE),
    (KubeError("500", status=500), FailureClass.TRANSIENT),
    (KubeError("timeout"), FailureClass.TRANSIENT),
    (KubeError("403", status=403), FailureClass.NEEDS_PERSON),
    (GitError("connection refused"), FailureClass.TRANSIENT),
    (HostError("503"), FailureClass.TRANSIENT),
    (HostRateLimited("429", retry_after=3), FailureClass.TRANSIENT),
    (HostKeyRefused("changed", reason="HostKeyChanged"), FailureClass.NEEDS_PERSON),
    (HostAuthError("401"), FailureClass.NEEDS_PERSON),
    (RemoteRefused("protected", reason="PushDeclined"), FailureClass.NEEDS_PERSON),
    (RepositoryUnusable("x", repository="r", reason="KnownHostsMissing", path="/p"),
     FailureClass.NEEDS_PERSON),
    (ManifestNotFound("none"), FailureClass.NEEDS_PERSON),
])
def test_failures_are_classed(exc, expected) -> None:
    assert classify(exc) is expected


def test_reasons_are_short_words_never_the_message() -> None:
    assert failure_reason(HostKeyRefused("secret text", reason="HostKeyChanged")) == "HostKeyChanged"
    assert failure_reason(KubeError("x", status=503)) == "ServerError"
    assert failure_reason(KubeError("x", status=403)) == "Forbidden"
    assert failure_reason(GitError("https://user:tok@host failed")) == "GitError"


def test_transient_backoff_doubles_from_one_second_to_the_cap() -> None:
    policy = RetrySchedule(base=1.0, cap=300.0)
    delays = [policy.delay(FailureClass.TRANSIENT, n) for n in range(1, 14)]
    assert delays[:5] == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert delays[-1] == 300.0 and max(delays) == 300.0
    assert policy.delay(FailureClass.TRANSIENT, 10_000) == 300.0  # no overflow


def test_races_retry_fast_and_person_failures_slowly() -> None:
    policy = RetrySchedule(base=1.0, race_base=0.05, cap=300.0, slow=300.0)
    assert policy.delay(FailureClass.RACE, 1) == 0.05
    assert policy.delay(FailureClass.NEEDS_PERSON, 1) == 300.0
    assert policy.delay(FailureClass.NEEDS_PERSON, 50) == 300.0


def test_jitter_only_shortens_and_stays_in_its_band() -> None:
    policy = RetrySchedule(base=1.0, cap=300.0, jitter=0.2)
    for spread in (0.0, 0.3, 0.99):
        delay = policy.delay(FailureClass.TRANSIENT, 20, spread=spread)
        assert 240.0 <= delay <= 300.0


def test_retry_after_is_a_floor_under_the_backoff_never_a_replacement() -> None:
    policy = RetrySchedule()
    assert policy.delay(FailureClass.TRANSIENT, 1, retry_after=42.0) == 42.0  # longer: waited
    assert policy.delay(FailureClass.TRANSIENT, 3, retry_after=0.2) == 4.0  # shorter: the backoff
    # Retry-After: 1 on every try still doubles the delay (no 1 Hz loop, keys spread by jitter).
    delays = [policy.delay(FailureClass.TRANSIENT, n, retry_after=1.0) for n in range(1, 12)]
    assert delays == sorted(delays) and delays[-1] == 300.0


def test_retry_after_is_bounded_by_the_cap_and_never_shortens_a_slow_retry() -> None:
    policy = RetrySchedule(cap=300.0, slow=300.0)
    assert policy.delay(FailureClass.TRANSIENT, 1, retry_after=86_400.0) == 300.0
    assert policy.delay(FailureClass.TRANSIENT, 1, retry_after=float("inf")) == 1.0  # not a value
    assert policy.delay(FailureClass.TRANSIENT, 2, retry_after=-5.0) == 2.0
    assert policy.delay(FailureClass.NEEDS_PERSON, 1, retry_after=1.0) == 300.0
