"""Which workloads are rolling because of the controller, and when each one is done.

The :class:`Tracker` is fed from the workload informer (``observe``: the workload's marker
and the verdict of its kind's completion rule, computed when the object arrived) and by
whoever starts a rollout (``begin``: counted from the write until the cache shows it). It
keeps only rollouts that are under way or failed; a complete one is dropped. Failure is the
kind's own (``ProgressDeadlineExceeded``, a Rollout ``Degraded``) or ``--rollout-timeout``
after the marker's ``at``. Listeners hear of every rollout that finishes (complete or failed,
timeouts included once :meth:`poll` is called after the deadline).

Thread-safe; listeners are called outside the lock.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from gitops_reloader.model import ObjectRef
from gitops_reloader.rollout.completion import Phase, RolloutStatus, with_deadline
from gitops_reloader.rollout.marker import Marker, shows

RECENT_COMPLETIONS = 1024
"""Completed rollouts remembered (their marker's ``at``), for a write whose rollout the
informer reports complete before the writer has called :meth:`Tracker.begin`."""

_WRITE_NOT_SEEN = RolloutStatus(Phase.PROGRESSING, "WriteNotSeen", "waiting for the write to be observed")
_SEEN_COMPLETE = RolloutStatus(Phase.COMPLETE, "RolloutComplete", "complete before the writer reported it")


@dataclass(frozen=True, slots=True)
class Rollout:
    """One tracked rollout: the workload, its marker and where it stands (deadline applied)."""

    ref: ObjectRef
    marker: Marker
    status: RolloutStatus


Listener = Callable[[Rollout], None]


class Tracker:
    """Rollouts under way or failed, derived from the cluster (plus writes not seen yet)."""

    def __init__(self, *, timeout: float) -> None:
        self.timeout = timeout
        self._observed: dict[ObjectRef, tuple[Marker, RolloutStatus]] = {}
        self._begun: dict[ObjectRef, Marker] = {}
        self._failed: set[ObjectRef] = set()
        self._completed: OrderedDict[ObjectRef, Marker] = OrderedDict()  # recent, bounded
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener`` with every rollout that completes or fails from now on."""
        self._listeners.append(listener)

    # --- feeding ---------------------------------------------------------------------

    def begin(self, ref: ObjectRef, marker: Marker) -> None:
        """A rollout of ``ref`` was just started (its write carried ``marker``).

        The informer may have been quicker than the writer: a rollout it already showed under
        way stays as observed; one it already showed complete (a kind done at the write, such
        as ``OnDelete`` or ``completesLike: none``) is announced now, since its observation
        had nothing to announce it to."""
        done = None
        with self._lock:
            self._failed.discard(ref)
            seen = self._observed.get(ref)
            if seen is not None and shows(seen[0], marker):
                return
            completed = self._completed.get(ref)
            if completed is not None and shows(completed, marker):
                done = Rollout(ref, marker, _SEEN_COMPLETE)
            else:
                self._begun[ref] = marker
        self._notify(done)

    def restore(self, ref: ObjectRef, marker: Marker, now: float) -> None:
        """A write an earlier instance made that the cache has not shown yet (a marker committed
        to git, the engine not having applied it): counted as :meth:`begin` counts it. One
        already past ``--rollout-timeout`` is failed without being announced again (the earlier
        instance announced it, or died before it could: either way not twice)."""
        self.begin(ref, marker)
        if self.timeout > 0 and now - marker.at >= self.timeout:
            with self._lock:
                if ref in self._begun:
                    self._failed.add(ref)

    def observe(self, ref: ObjectRef, marker: Marker | None, status: RolloutStatus | None,
                now: float) -> None:
        """The workload as the informer sees it: its marker and its kind's verdict."""
        with self._lock:
            begun = self._begun.get(ref)
            tracked = begun is not None or ref in self._observed
            if begun is not None:
                if marker is None or not shows(marker, begun):
                    self._observed.pop(ref, None)  # a view from before our write
                    return
                del self._begun[ref]  # the cache shows our write
            if marker is None or status is None:
                self._observed.pop(ref, None)
                return
            verdict = with_deadline(status, now - marker.at, self.timeout)
            if verdict.phase is Phase.COMPLETE:
                self._observed.pop(ref, None)
                self._failed.discard(ref)
                self._completed[ref] = marker
                self._completed.move_to_end(ref)
                if len(self._completed) > RECENT_COMPLETIONS:
                    self._completed.popitem(last=False)
                done = Rollout(ref, marker, verdict) if tracked else None
            else:
                self._observed[ref] = (marker, status)
                done = self._fail(Rollout(ref, marker, verdict))
        self._notify(done)

    def forget(self, ref: ObjectRef) -> None:
        """The workload is gone (or no longer this instance's)."""
        with self._lock:
            self._observed.pop(ref, None)
            self._begun.pop(ref, None)
            self._failed.discard(ref)
            self._completed.pop(ref, None)

    def poll(self, now: float) -> None:
        """Apply ``--rollout-timeout`` to the rollouts under way (listeners hear of timeouts)."""
        finished: list[Rollout] = []
        with self._lock:
            for rollout in self._rollouts(now):
                done = self._fail(rollout)
                if done is not None:
                    finished.append(done)
        for rollout in finished:
            self._notify(rollout)

    # --- reading ---------------------------------------------------------------------

    def rollouts(self, now: float) -> list[Rollout]:
        """Every tracked rollout (under way or failed), with the deadline applied at ``now``."""
        with self._lock:
            return self._rollouts(now)

    def rolling_by_namespace(self, now: float) -> Counter[str]:
        """How many rollouts are under way, per namespace."""
        return Counter(r.ref.namespace for r in self.rollouts(now) if r.status.phase is Phase.PROGRESSING)

    def failed(self, now: float) -> list[Rollout]:
        """The failed rollouts (the kind's failure or the timeout)."""
        return [r for r in self.rollouts(now) if r.status.phase is Phase.FAILED]

    def status(self, ref: ObjectRef, now: float) -> RolloutStatus | None:
        """Where the rollout of ``ref`` stands (None: not tracked — complete or never started)."""
        return next((r.status for r in self.rollouts(now) if r.ref == ref), None)

    def next_deadline(self) -> float | None:
        """The wall-clock second the next rollout under way times out (None: none)."""
        with self._lock:
            starts = [m.at for m, s in self._observed.values() if s.phase is Phase.PROGRESSING]
            starts += [m.at for ref, m in self._begun.items() if ref not in self._observed]
        return min(starts) + self.timeout if starts and self.timeout > 0 else None

    # --- internals -------------------------------------------------------------------

    def _rollouts(self, now: float) -> list[Rollout]:
        out = [Rollout(ref, marker, with_deadline(status, now - marker.at, self.timeout))
               for ref, (marker, status) in self._observed.items() if ref not in self._begun]
        out += [Rollout(ref, marker, with_deadline(_WRITE_NOT_SEEN, now - marker.at, self.timeout))
                for ref, marker in self._begun.items()]
        return out

    def _fail(self, rollout: Rollout) -> Rollout | None:
        """``rollout`` if it has just failed (announced once), else None."""
        if rollout.status.phase is not Phase.FAILED:
            self._failed.discard(rollout.ref)
            return None
        if rollout.ref in self._failed:
            return None
        self._failed.add(rollout.ref)
        return rollout

    def _notify(self, rollout: Rollout | None) -> None:
        if rollout is None:
            return
        for listener in self._listeners:
            listener(rollout)
