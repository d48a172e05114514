"""Notice when mounted files change: the kubelet's atomic ``..data`` swap of a Secret volume.

A Secret or ConfigMap volume is a directory of symlinks into a timestamped directory; the
kubelet writes the new version beside the old and swaps the ``..data`` link, so a file's
path stays the same while what it resolves to changes. :class:`FileWatch` polls
``os.stat`` (which follows the links) of each file every ``interval`` seconds and calls
``on_change`` with the paths whose identity (device, inode, size, modification time) moved,
appeared or disappeared — and, with ``recheck_every``, with no path at that period, for
checks that do not hang on a file. It reads no content: a credential file is never opened
here.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable

__all__ = ["FileWatch", "identity"]

log = logging.getLogger(__name__)

Identity = tuple[int, int, int, int] | None


def identity(path: str) -> Identity:
    """What changes when the file at ``path`` is replaced or rewritten (None: absent/unreadable)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class FileWatch:
    """Polls the identity of ``paths`` from a daemon thread; ``stop()`` ends it."""

    def __init__(self, paths: Iterable[str], on_change: Callable[[list[str]], None], *,
                 interval: float = 2.0, recheck_every: float | None = None) -> None:
        self.paths = sorted({p for p in paths if p})
        self.on_change = on_change
        self.interval = interval
        self.recheck_every = recheck_every
        """Also call ``on_change([])`` this often (seconds) with nothing changed; None: never."""
        self._since_recheck = 0.0
        self._seen = {path: identity(path) for path in self.paths}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if (not self.paths and self.recheck_every is None) or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="file-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def poll(self) -> list[str]:
        """Compare once; returns (and reports) the paths that changed since the last poll."""
        changed = []
        for path in self.paths:
            now = identity(path)
            if now != self._seen[path]:
                self._seen[path] = now
                changed.append(path)
        if changed:
            self._notify(changed)
        return changed

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if self.poll():
                self._since_recheck = 0.0
                continue
            self._since_recheck += self.interval
            if self.recheck_every is not None and self._since_recheck >= self.recheck_every:
                self._since_recheck = 0.0
                self._notify([])

    def _notify(self, changed: list[str]) -> None:
        try:
            self.on_change(changed)
        except Exception:  # a listener's bug must not end the watch
            log.exception("file change listener failed", extra={"paths": changed})
