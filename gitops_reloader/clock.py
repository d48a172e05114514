"""Clocks, injected wherever time is read so tests can use a fake one."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic time for delays and wall time for timestamps."""

    def monotonic(self) -> float: ...

    def now(self) -> float:
        """Wall-clock Unix seconds."""
        ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> float:
        return time.time()


class FakeClock:
    """A clock that only moves when told to (thread-safe)."""

    def __init__(self, start: float = 1_000.0, wall: float = 1_700_000_000.0) -> None:
        self._lock = threading.Lock()
        self._mono = start
        self._wall = wall

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def now(self) -> float:
        with self._lock:
            return self._wall

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._mono += seconds
            self._wall += seconds
