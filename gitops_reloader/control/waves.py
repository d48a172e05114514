"""Waves: before a live write, may this workload's rollout start now?

:class:`Waves` sits between the reconciler and the live sinks when a rollout budget is set
(``--max-concurrent-rollouts`` / ``-per-namespace``). The reconciler asks :meth:`Waves.admit`
before a write; a reload that may not start yet is parked (its pending change stays
pending, so a newer change of the same source coalesces into it) and :meth:`Waves.dispatch`
— run by a worker on the ``waves|dispatch`` queue key whenever a rollout finishes, a reload
parks or a rollout's deadline passes — grants the next ones by the pure
:func:`~gitops_reloader.rollout.budget.next_wave` over the cluster's state: the
:class:`~gitops_reloader.rollout.tracker.Tracker`'s rollouts under way (from the controller's
markers and the workloads' status) plus the grants not written yet. A granted key goes back
to the work queue; its write carries the marker and :meth:`Waves.started` hands the rollout
to the tracker.

Exempt (never parked, no marker): webhook (rolls nothing), pull-request (people gate it), a
git-sink workload written through a ``git-target`` (its manifest cannot carry the marker), and
Jobs and CronJobs (done at the write). The git sink writes the marker into the workload's
manifest in the commit; the engine applying the commit brings it to the cluster.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from gitops_reloader.clock import Clock
from gitops_reloader.config import Rollouts
from gitops_reloader.model import ObjectRef, SinkName, Source
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.rollout.budget import PRIORITY_ANNOTATION, Budget, Waiting, next_wave, parse_priority
from gitops_reloader.rollout.completion import PAUSED, Phase, RolloutStatus
from gitops_reloader.rollout.marker import MARKER_ANNOTATION, Marker, change_ids, marker_for, parse_marker
from gitops_reloader.rollout.tracker import Rollout, Tracker
from gitops_reloader.sinks.eviction import EVICTION_SINK

WAVES_KEY = "waves|dispatch"
"""The work-queue key of :meth:`Waves.dispatch` (one at a time, de-duplicated by the queue)."""

GATHER_SECONDS = 0.1
"""A parked reload asks for a dispatch this much later, so that the reloads of one change
(queued together) are all waiting before the first wave is chosen by priority."""

GATED_SINKS = frozenset({SinkName.ENV_VARS, SinkName.ANNOTATIONS, SinkName.GIT, EVICTION_SINK})
"""The git sink commits a wave at a time (its batch asks per workload, see the reconciler)."""
AT_WRITE_KINDS = frozenset({"Job", "CronJob"})

Warn = Callable[[ObjectRef, str, str], None]
"""(workload, reason, message): a log line and a Warning Event on the workload."""


def gates(sink: str | None, ref: ObjectRef) -> bool:
    """Whether a write by ``sink`` to ``ref`` waits for the budget (live sinks and the git
    sink, kinds that roll: a Job or CronJob is done at the write)."""
    return sink in GATED_SINKS and ref.kind not in AT_WRITE_KINDS


class Waves:
    """The rollout budget and holds, applied to the reconciler's live writes (thread-safe)."""

    def __init__(self, settings: Rollouts, *, clock: Clock, metrics: Metrics,
                 schedule: Callable[[str, float], None], warn: Warn,
                 tracker: Tracker | None = None) -> None:
        """``schedule(key, delay)`` puts a key on the work queue (a granted workload, or
        :data:`WAVES_KEY`); ``warn`` records a Warning Event on a workload."""
        self.settings = settings
        self.budget = Budget(settings.max_concurrent, settings.max_per_namespace)
        self.tracker = tracker or Tracker(timeout=settings.timeout)
        self.clock = clock
        self.metrics = metrics
        self.schedule = schedule
        self.warn = warn
        self._waiting: dict[str, Waiting] = {}
        self._granted: dict[str, str] = {}  # key → namespace, counted until written or released
        self._announced: dict[str, frozenset[str]] = {}  # held key → the changes its Event named
        self._paused: dict[str, int] = {}  # paused key → its marker's ``at`` (announced once)
        self._wave_start: float | None = None
        self._due: float | None = None
        self._timer: threading.Timer | None = None
        self._closed = False
        self._active = False
        self._lock = threading.Lock()
        self.tracker.subscribe(self._finished)

    # --- the reconciler's questions ---------------------------------------------------

    def gates(self, sink: str | None, ref: ObjectRef) -> bool:
        """Whether a write by ``sink`` to ``ref`` waits for the budget (:func:`gates`)."""
        return gates(sink, ref)

    def admit(self, ref: ObjectRef, annotations: Mapping[str, str], sources: Iterable[Source],
              detected: float | None = None) -> bool:
        """May the rollout of ``ref`` start now? True once :meth:`dispatch` granted it; else
        the reload waits (with its priority and the changes it carries) and False.

        ``annotations``: the workload's (its ``rollout-priority``); ``sources``: the changes
        the write carries out; ``detected``: monotonic time of the oldest change.
        """
        key = ref.key
        with self._lock:
            if key in self._granted:
                return True
        entry = Waiting(ref, self._priority(ref, annotations), change_ids(sources))
        with self._lock:
            self._waiting[key] = entry
            if self._wave_start is None:
                self._wave_start = detected if detected is not None else self.clock.monotonic()
        self.schedule(WAVES_KEY, GATHER_SECONDS)
        return False

    def marker(self, sources: Iterable[Source]) -> Marker:
        """The marker a granted write carries (written in the same patch as the reload)."""
        return marker_for(sources, self.clock.now())

    def annotations(self, marker: Marker) -> dict[str, str]:
        """The workload annotations of a granted write."""
        return {MARKER_ANNOTATION: marker.encode()}

    def started(self, ref: ObjectRef, marker: Marker) -> None:
        """The granted write is done: the rollout counts through the tracker from now on."""
        self.tracker.begin(ref, marker)
        with self._lock:
            self._granted.pop(ref.key, None)
        self._wake_at(marker.at + self.settings.timeout)

    def release(self, ref: ObjectRef) -> None:
        """The key's work is over; a grant it did not use (nothing to write) goes back."""
        with self._lock:
            unused = self._granted.pop(ref.key, None) is not None
        if unused:
            self.schedule(WAVES_KEY, 0.0)

    def assume_announced(self, key: str, changes: frozenset[str]) -> None:
        """A restart resumes ``key``'s reload carrying ``changes`` while a failed rollout of
        them holds it: the instance before announced that hold (``ReloadHeld``), not again."""
        with self._lock:
            self._announced[key] = changes

    # --- the informer's news ----------------------------------------------------------

    def observe(self, ref: ObjectRef, annotations: Mapping[str, str], status: RolloutStatus | None) -> None:
        """A workload as the informer sees it (its marker and its kind's verdict)."""
        marker = parse_marker(annotations.get(MARKER_ANNOTATION))
        self.tracker.observe(ref, marker, status, self.clock.now())
        if marker is not None and status is not None and status.phase is Phase.PROGRESSING:
            self._wake_at(marker.at + self.settings.timeout)
            if status.reason == PAUSED:
                self._announce_pause(ref, marker, status)

    def _announce_pause(self, ref: ObjectRef, marker: Marker, status: RolloutStatus) -> None:
        """A rollout its owner paused holds its slot (and so the wave): say so once per rollout.
        Seen before :meth:`activate` (a restart's initial list, an HA standby), it is only
        recorded: the instance that saw it begin announced it."""
        with self._lock:
            if self._paused.get(ref.key) == marker.at:
                return
            self._paused[ref.key] = marker.at
            if not self._active:
                return
        self.warn(ref, "RolloutPaused",
                  f"rollout paused by the workload's owner ({status.message}); it keeps its place in "
                  f"the rollout budget until it is resumed and completes, or fails at --rollout-timeout "
                  f"({self.settings.timeout:.0f}s after its write)"[:1024])

    def _wake_at(self, due: float) -> None:
        """Dispatch again at wall-clock second ``due`` (a rollout's deadline), unless an
        earlier wake-up is set. A timer, not a delayed queue key: the queue stays empty (and
        the controller idle) while rollouts run."""
        with self._lock:
            if self._closed or (self._due is not None and self._due <= due):
                return
            if self._timer is not None:
                self._timer.cancel()
            self._due = due
            self._timer = threading.Timer(max(0.0, due - self.clock.now()) + 0.1, self._wake)
            self._timer.daemon = True
            self._timer.start()

    def _wake(self) -> None:
        with self._lock:
            self._due, self._timer = None, None
        self.schedule(WAVES_KEY, 0.0)

    def close(self) -> None:
        """Stop the deadline timer (the controller is stopping)."""
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()

    def forget(self, ref: ObjectRef) -> None:
        """The workload is gone."""
        self.tracker.forget(ref)
        with self._lock:
            self._waiting.pop(ref.key, None)
            self._announced.pop(ref.key, None)
            self._paused.pop(ref.key, None)
        self.release(ref)

    # --- the dispatcher ---------------------------------------------------------------

    def dispatch(self) -> None:
        """Grant the next reloads the budget allows; announce new holds; keep the metrics."""
        now = self.clock.now()
        self.tracker.poll(now)
        rollouts = self.tracker.rollouts(now)
        rolling = Counter(r.ref.namespace for r in rollouts if r.status.phase is Phase.PROGRESSING)
        failed = frozenset(c for r in rollouts if r.status.phase is Phase.FAILED for c in r.marker.changes)
        with self._lock:
            counts = rolling + Counter(self._granted.values())
            wave = next_wave(self.budget, self._waiting.values(), counts, failed_changes=failed,
                             hold=self.settings.hold_on_failure)
            for entry in wave.start:
                del self._waiting[entry.ref.key]
                self._granted[entry.ref.key] = entry.ref.namespace
                self._announced.pop(entry.ref.key, None)
            newly_held = [e for e in wave.held if self._announced.get(e.ref.key) != e.changes]
            for entry in newly_held:
                self._announced[entry.ref.key] = entry.changes
            under_way = sum(counts.values()) + len(wave.start)
            finished_wave = self._end_wave(under_way)
        self.metrics.set_rollouts(queued=len(wave.waiting), held=len(wave.held), rolling=under_way)
        if finished_wave is not None:
            self.metrics.observe_wave(finished_wave)
        for entry in wave.start:
            self.schedule(entry.ref.key, 0.0)
        for entry in newly_held:
            culprits = sorted({str(r.ref) for r in rollouts if r.status.phase is Phase.FAILED
                               and r.marker.changes & entry.changes})
            self.warn(entry.ref, "ReloadHeld",
                      f"reload held: the rollout of the same change failed in {', '.join(culprits[:5])}; "
                      "a new change of the source or the failed workload becoming healthy releases it")
        deadline = self.tracker.next_deadline()
        if deadline is not None:
            self._wake_at(deadline)

    def _end_wave(self, under_way: int) -> float | None:
        """Seconds since the wave began once nothing waits or rolls any more (lock held)."""
        if self._wave_start is None or self._waiting or under_way:
            return None
        seconds, self._wave_start = self.clock.monotonic() - self._wave_start, None
        return seconds

    def activate(self) -> None:
        """This instance acts from now on: failures it sees are announced (Event, metric).

        Before, a failure is only recorded: the initial list after a restart shows failures
        already announced, and an HA standby's informers see the leader's."""
        self._active = True

    def _finished(self, rollout: Rollout) -> None:
        """Tracker listener: a rollout completed or failed (any thread): dispatch again."""
        if rollout.status.phase is Phase.FAILED and self._active:
            self.metrics.rollout_failed(rollout.status.reason)
            held = " Reloads of the same change are held." if self.settings.hold_on_failure else ""
            self.warn(rollout.ref, "RolloutFailed",
                      f"rollout failed ({rollout.status.reason}): {rollout.status.message}.{held}"[:1024])
        self.schedule(WAVES_KEY, 0.0)

    def _priority(self, ref: ObjectRef, annotations: Mapping[str, str]) -> int:
        raw = annotations.get(PRIORITY_ANNOTATION)
        if raw is None:
            return 0
        try:
            return parse_priority(str(raw))
        except ValueError as exc:
            self.metrics.invalid_annotation(ref.kind)
            self.warn(ref, "InvalidAnnotation",
                      f"{PRIORITY_ANNOTATION}={str(raw)[:40]!r} ignored ({exc}); priority 0")
            return 0
