"""What the test players share: threads started on ``with`` and stopped at its end."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Self


class BackgroundPlayer:
    """Runs ``loops`` (``(target, thread name)``) on daemon threads inside a ``with`` block.

    A loop ends when ``_stop`` is set; ``_lock`` is a condition the loops may wait on (it is
    notified when the block ends).
    """

    def __init__(self, loops: Iterable[tuple[Callable[[], None], str]]) -> None:
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=target, daemon=True, name=name) for target, name in loops]

    def __enter__(self) -> Self:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        for thread in self._threads:
            thread.join(10)
