"""Failed emissions: recorded in the ledger, tried again after their class's delay, raised once.

:class:`Failing` is told of every failed attempt (an exception from a sink, or a sink holding a
reload back for a reason a person can fix). It records the attempt on the entries of the
workloads the queue key works for (:meth:`~gitops_reloader.ledger.Ledger.fail`: since when,
how many attempts, the class, the redacted error, the next try from
:mod:`.retrypolicy`); the controller then puts the queue key back for that time. Nothing is
dropped: after ``--max-retries`` attempts the failure is *raised* — a log line, a
``ReloadStillFailing`` Warning Event on each workload, an alert — once per failing episode,
and it is still retried until it goes through (:meth:`recovered` says so) or the workload no
longer owes anything.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from gitops_reloader.clock import Clock
from gitops_reloader.control.retrypolicy import RetrySchedule, classify, failure_reason
from gitops_reloader.durations import format_duration
from gitops_reloader.errors import ReloaderError
from gitops_reloader.ledger import Failure, FailureClass, Ledger
from gitops_reloader.model import ObjectRef, Outcome
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.redaction import redact_text

__all__ = ["Failing"]

log = logging.getLogger(__name__)


class Failing:
    """Failed attempts and their retries (thread-safe through the ledger)."""

    def __init__(self, ledger: Ledger, *, retry: RetrySchedule, metrics: Metrics, clock: Clock,
                 max_retries: int, sink_of: Callable[[str], str | None],
                 warn: Callable[[ObjectRef, str, str], None],
                 alert: Callable[[str], None] | None = None) -> None:
        self.ledger = ledger
        self.retry = retry
        self.metrics = metrics
        self.clock = clock
        self.max_retries = max_retries
        self.sink_of = sink_of
        """The sink a workload key is reloaded through (None: unknown)."""
        self.warn = warn
        self.alert = alert
        self._random = random.Random()

    def failed(self, queue_key: str, exc: ReloaderError) -> bool:
        """One failed attempt of ``queue_key``; False when it works for no workload that still
        owes anything (a waves or unpause step, or a check that was dropped)."""
        workloads = [key for key in self.ledger.members(queue_key) if self.ledger.owed(key)]
        if not workloads and "/" in queue_key and self.ledger.owed(queue_key):
            workloads = [queue_key]
        if not workloads:
            return False
        self._record(queue_key, workloads, classify(exc), failure_reason(exc), str(exc),
                     retry_after=exc.retry_after)
        return True

    def held(self, queue_key: str, key: str, outcome: Outcome) -> None:
        """A sink held workload ``key`` back for a reason a person can fix (no manifest, an
        unparsable file, an unknown repository): still owed, tried again slowly, under its own
        key (the rest of its group ``queue_key`` is not failing)."""
        self._record(key, [key], FailureClass.NEEDS_PERSON, outcome.held or "Held", outcome.detail)

    def recovered(self, key: str, failure: Failure) -> None:
        """Workload ``key`` went through after failing."""
        self.metrics.set_pending_failures(self.ledger.counts())
        log.info("emission went through after failing", extra={
            "object": key, "attempts": failure.attempts, "failing_since": _stamp(failure.since)})

    def waiting_for_a_person(self) -> list[str]:
        """The queue keys whose failure only a person can fix (tried at once when an input changes)."""
        return sorted({entry.queue_key for entry in self.ledger.entries()
                       if entry.failure is not None and entry.failure.failure is FailureClass.NEEDS_PERSON})

    def _record(self, queue_key: str, workloads: Iterable[str], failure: FailureClass, reason: str,
                error: str, *, retry_after: float | None = None) -> None:
        workloads = list(workloads)
        previous = self.ledger.failure(queue_key)
        attempts = (previous.attempts if previous is not None else 0) + 1
        delay = self.retry.delay(failure, attempts, retry_after=retry_after, spread=self._random.random())
        sink = next((s for s in map(self.sink_of, workloads) if s), None) or "unknown"
        entry = self.ledger.fail(queue_key, workloads, sink=sink, reason=reason, failure=failure,
                                 error=redact_text(error), now=self.clock.now(), delay=delay)
        if entry is None:
            return
        self.metrics.set_pending_failures(self.ledger.counts())
        log.info("emission failed, still pending; will retry", extra={
            "object": queue_key, "error": redact_text(error), "attempt": entry.attempts,
            "class": failure.value, "retry_in": round(delay, 3)})
        if entry.attempts >= self.max_retries and not entry.raised:
            self._raise(entry, workloads)

    def _raise(self, entry: Failure, workloads: list[str]) -> None:
        """``--max-retries`` attempts failed: say it loudly, once per failing episode."""
        self.ledger.mark_raised(entry.key)
        self.metrics.failure_raised(entry.sink)
        every = ("every " + format_duration(self.retry.slow)) if entry.failure is FailureClass.NEEDS_PERSON \
            else f"with backoff up to {format_duration(self.retry.cap)}"
        message = (f"reload still failing after {entry.attempts} attempts since {_stamp(entry.since)} "
                   f"({entry.reason}); it stays pending and is retried {every}: {entry.error}")
        log.error("emission still failing; raised, still pending", extra={
            "object": entry.key, "attempts": entry.attempts, "reason": entry.reason,
            "failing_since": _stamp(entry.since), "error": entry.error})
        for key in workloads:
            self.warn(ObjectRef.from_key(key), "ReloadStillFailing", message)
        if self.alert is not None:
            self.alert(f"gitops-reloader: {', '.join(sorted(workloads)[:5])}: {message}")


def _stamp(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
