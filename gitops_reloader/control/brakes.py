"""Storm brakes: how often one workload may restart, how many restarts the cluster takes a
minute, and how long a source that keeps changing waits before its change is handled.

A Secret rewritten in a loop (an External Secrets refresh stamping a timestamp, a
cert-manager renewal loop, a bad CI job) would otherwise restart its readers again and
again. Three brakes, all pure (times are passed in), used by the controller:

- :class:`Window` per workload (``--max-reloads-per-workload``, annotation
  ``gitops-reloader.io/max-reloads``): at most ``count`` reloads in any ``period``. Past it
  the workload is *held*, not dropped: its pending change waits (newer changes still replace
  it) and the latest data is applied once the oldest reload of the window has aged out.
- :class:`Window` for the cluster (``--cluster-reload-rate``): the same over every
  workload, so one bad source cannot restart the cluster at once.
- :class:`SourceBackoff` per source: the coalescing window of a source that keeps changing
  is doubled for each change that follows the previous one within ``quiet`` (after
  ``free`` such changes), up to ``cap`` — client-go's per-item exponential rate limiter,
  keyed by source — and is back to normal once the source has been quiet. A loop of one
  change a second then yields a bounded number of reloads, and through the git sink a
  bounded number of commits.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from dataclasses import dataclass

from gitops_reloader.backoff import exponential
from gitops_reloader.durations import format_duration, parse_duration

__all__ = ["Rate", "SourceBackoff", "StormBrakes", "Window", "parse_rate"]

_RATE = re.compile(r"^\s*(?P<count>\d{1,6})\s*/\s*(?P<period>\S{1,32})\s*$")
_MAX_PERIOD = 7 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``count`` events in any ``period`` seconds."""

    count: int
    period: float

    def __str__(self) -> str:
        return f"{self.count}/{format_duration(self.period)}"


def parse_rate(text: str) -> Rate | None:
    """``"6/10m"`` → ``Rate(6, 600.0)``; ``"0"``, ``"off"`` or ``""`` → ``None`` (no limit).

    Raises :class:`ValueError` naming what is wrong; the period is a Go duration of at most
    a week and the count at least 1.
    """
    cleaned = text.strip().lower()
    if cleaned in ("", "0", "off", "none"):
        return None
    match = _RATE.match(cleaned)
    if match is None:
        raise ValueError(f"{text[:40]!r} is not COUNT/PERIOD, e.g. 6/10m")
    count = int(match["count"])
    try:
        period = parse_duration(match["period"])
    except ValueError:
        raise ValueError(f"{match['period']!r} is not a duration such as 10m or 1h") from None
    if count < 1 or not 0 < period <= _MAX_PERIOD:
        raise ValueError(f"{text[:40]!r}: the count must be at least 1 and the period between 0 and 168h")
    return Rate(count, period)


class Window:
    """The times of the latest reloads of each key; when the next one may happen.

    Keeps at most ``rate.count`` times per key and forgets keys whose newest time is older
    than the longest period seen, so memory follows the workloads reloaded recently.
    """

    def __init__(self) -> None:
        self._times: dict[str, deque[float]] = {}
        self._horizon = 0.0
        self._notes = 0

    def wait(self, key: str, rate: Rate, now: float) -> float:
        """Seconds until ``key`` may be reloaded again under ``rate`` (0: now)."""
        times = self._times.get(key)
        if not times:
            return 0.0
        recent = [t for t in times if t > now - rate.period]
        if len(recent) < rate.count:
            return 0.0
        return max(0.0, recent[-rate.count] + rate.period - now)

    def note(self, key: str, rate: Rate, now: float) -> None:
        """``key`` was reloaded at ``now``."""
        times = self._times.get(key)
        if times is None or times.maxlen != rate.count:
            times = deque(times or (), maxlen=rate.count)
            self._times[key] = times
        times.append(now)
        self._horizon = max(self._horizon, rate.period)
        self._notes += 1
        if self._notes % 1024 == 0:
            self._forget(now)

    def latest(self, key: str) -> float | None:
        """When ``key`` was last noted (None: not within memory)."""
        times = self._times.get(key)
        return times[-1] if times else None

    def drop(self, key: str, at: float) -> None:
        """Forget the reload of ``key`` noted at ``at`` (it applied nothing)."""
        times = self._times.get(key)
        if times is not None and at in times:
            times.remove(at)

    def _forget(self, now: float) -> None:
        stale = [key for key, times in self._times.items() if not times or times[-1] <= now - self._horizon]
        for key in stale:
            del self._times[key]


class SourceBackoff:
    """How long a change of a source waits before it is handled, stretched while it keeps changing.

    Each change within ``quiet`` seconds of the previous one adds to the source's streak; past
    ``free`` changes the wait doubles per change, up to ``cap``; a change after a quiet spell
    starts over at ``base`` (the coalescing window).
    """

    def __init__(self, *, free: int = 5, quiet: float = 30.0, cap: float = 300.0) -> None:
        self.free = free
        self.quiet = quiet
        self.cap = cap
        self._streaks: dict[str, tuple[float, int]] = {}

    def delay(self, source: str, base: float, now: float) -> float:
        """The wait before handling the change of ``source`` seen at ``now``."""
        last, streak = self._streaks.get(source, (None, -1))
        streak = streak + 1 if last is not None and now - last < self.quiet else 0
        self._streaks[source] = (now, streak)
        if len(self._streaks) > 4096:
            self._streaks = {k: v for k, v in self._streaks.items() if now - v[0] < self.quiet}
        over = streak - self.free
        if over <= 0:
            return base
        return exponential(max(base, 1.0), over + 1, self.cap)


class StormBrakes:
    """The per-workload and cluster windows together: may this workload reload now?

    :meth:`admit` checks and reserves in one step (workers run in parallel: two must not both
    take the cluster's last slot); a reservation whose emission applied nothing is given back
    with :meth:`release`. Thread-safe.
    """

    def __init__(self, per_workload: Rate | None, cluster: Rate | None) -> None:
        self.per_workload = per_workload
        self.cluster = cluster
        self._workloads = Window()
        self._cluster = Window()
        self._until: dict[str, float] = {}
        """Key (``""``: the cluster) → no reload before this monotonic time: a brake an earlier
        instance recorded (its memory of the writes is gone with it)."""
        self._lock = threading.Lock()

    def hold_until(self, key: str, scope: str, until: float) -> None:
        """An earlier instance's brake held ``key`` (``scope`` ``workload`` or ``cluster``) until
        monotonic ``until``: nothing is admitted before then."""
        slot = "" if scope == "cluster" else key
        with self._lock:
            self._until[slot] = max(self._until.get(slot, until), until)

    def admit(self, key: str, rate: Rate | None, now: float) -> tuple[float, str]:
        """``(0, "")`` and a reserved slot when ``key`` may reload now under its ``rate`` and the
        cluster's; else ``(seconds, scope)`` until it may, ``scope`` ``workload`` or ``cluster``."""
        with self._lock:
            for slot, scope in ((key, "workload"), ("", "cluster")):
                until = self._until.get(slot)
                if until is not None and until > now:
                    return until - now, scope
                self._until.pop(slot, None)
            if rate is not None:
                wait = self._workloads.wait(key, rate, now)
                if wait > 0:
                    return wait, "workload"
            if self.cluster is not None:
                wait = self._cluster.wait("", self.cluster, now)
                if wait > 0:
                    return wait, "cluster"
            if rate is not None:
                self._workloads.note(key, rate, now)
            if self.cluster is not None:
                self._cluster.note("", self.cluster, now)
            return 0.0, ""

    def recall(self, key: str, rate: Rate, at: float) -> None:
        """``key`` was written at monotonic ``at`` by an earlier instance (the cluster says so):
        noted, unless this brake already knows a write as late (it made it)."""
        with self._lock:
            latest = self._workloads.latest(key)
            if latest is None or latest < at - 1.0:
                self._workloads.note(key, rate, at)

    def release(self, key: str, now: float) -> None:
        """Give back the slot :meth:`admit` reserved for ``key`` at ``now`` (nothing was applied)."""
        with self._lock:
            self._workloads.drop(key, now)
            self._cluster.drop("", now)

