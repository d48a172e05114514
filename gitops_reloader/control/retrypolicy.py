"""When a failed emission is tried again (pure: no I/O, no clock of its own).

A failed emission is never dropped: it stays pending until it succeeds or a newer change of
its sources replaces it. How soon it is tried again depends on what failed:

``RACE``
    Someone else wrote first (409 conflict): try again almost at once, as client-go's
    per-item limiter does for every error (``base`` 50 ms, doubling).
``TRANSIENT``
    The far side is down or busy (connection refused, timeouts, 5xx, 429, an unknown git
    failure): exponential backoff from ``base`` (1 s), doubling, capped at ``cap`` (5 min),
    with jitter so a fleet of failing workloads does not knock on a recovering host at one
    instant. A ``Retry-After`` the host sent is a floor under that delay (never above the
    cap): it can make a wait longer, never shorter.
``NEEDS_PERSON``
    Nothing changes until someone acts (a host key that does not match, credentials refused
    with 401/403, an unknown repository, a protected branch, an unusable mount): tried again
    only every ``slow`` seconds (5 min) — and at once when an input a person would fix changes
    (a mounted SSH key or known_hosts file, the workload's annotations).

Why a 5-minute cap: client-go's controllers cap at 1000 s, which is long for a reload users
wait on; 5 minutes bounds the delay between a host coming back and the change landing, while
an hour-long outage costs about 12 attempts an hour per failing key (and, through the Event
correlator, one Event object whose count grows). ``--max-retries`` no longer drops anything:
after that many attempts the failure is *raised* (a Warning Event, an alert, ``status``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gitops_reloader.backoff import Backoff, floored
from gitops_reloader.errors import (
    HostAuthError,
    HostKeyRefused,
    KubeConflict,
    KubeError,
    ReloaderError,
    RemoteRefused,
    RepositoryUnusable,
)
from gitops_reloader.ledger import FailureClass

__all__ = ["FailureClass", "RetrySchedule", "classify", "failure_reason"]


_PERSON_STATUSES = frozenset({401, 403})
_STATUS_REASONS = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
                   429: "TooManyRequests"}


def classify(exc: ReloaderError) -> FailureClass:
    """How a failure is retried (see the module docstring)."""
    if isinstance(exc, KubeConflict):
        return FailureClass.RACE
    if isinstance(exc, KubeError):
        return FailureClass.NEEDS_PERSON if exc.status in _PERSON_STATUSES else FailureClass.TRANSIENT
    if isinstance(exc, HostKeyRefused | HostAuthError | RepositoryUnusable | RemoteRefused):
        return FailureClass.NEEDS_PERSON
    if not exc.retryable:
        return FailureClass.NEEDS_PERSON  # a permanent error waits for a person, slowly
    return FailureClass.TRANSIENT


def failure_reason(exc: ReloaderError) -> str:
    """A short CamelCase word for metric labels and ``status`` (never the message)."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str) and reason.isidentifier():
        return reason  # HostKeyChanged, SshKeyPermissions, ...
    if isinstance(exc, KubeError) and exc.status is not None:
        if exc.status >= 500:
            return "ServerError"
        return _STATUS_REASONS.get(exc.status, type(exc).__name__)
    return type(exc).__name__


@dataclass(frozen=True, slots=True)
class RetrySchedule:
    """The delays before the next attempt, per class of failure (seconds)."""

    base: float = 1.0
    race_base: float = 0.05
    cap: float = 300.0
    slow: float = 300.0
    jitter: float = 0.2
    """A delay is cut by up to this fraction at random: spread, never longer than the cap."""

    def delay(self, failure: FailureClass, attempts: int, *, retry_after: float | None = None,
              spread: float = 0.0) -> float:
        """Seconds before attempt ``attempts + 1`` after ``attempts`` failed ones (≥ 1).

        ``spread`` in [0, 1) picks where in the jitter band the delay lands (the caller's
        random draw; 0 means none). A host's ``retry_after`` is a floor under the delay,
        bounded by the cap (:mod:`gitops_reloader.backoff`): it never shortens a wait.
        """
        if failure is FailureClass.NEEDS_PERSON:
            return floored(self.slow, retry_after, self.cap)
        base = self.race_base if failure is FailureClass.RACE else self.base
        return Backoff(base, self.cap, self.jitter).delay(attempts, retry_after=retry_after, spread=spread)
