"""One configured repository as the git sinks and the follow-up share it.

:class:`RepositoryHandle` holds the working clone, its scan index and the lock that
serializes both: the sink that writes and the follow-up that reads commits take the same
lock, so neither sees the clone half-synced.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from gitops_reloader.gitops.gitconfig import RepositoryConfig
from gitops_reloader.gitops.repo import Repository
from gitops_reloader.gitops.scanindex import ScanIndex

__all__ = ["RepositoryHandle"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RepositoryHandle:
    """One configured repository: its clone, its scan index and the lock serializing both."""

    config: RepositoryConfig
    repo: Repository
    index: ScanIndex
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sync(self) -> str:
        """Fetch and reset the clone to the remote branch; bring the index to the new head."""
        head = self.repo.sync()
        update = self.index.refresh(head)
        log.debug("repository synced", extra={"repo": self.config.name, "head": head[:12],
                                              "index_full": update.full, "files_read": update.files_read,
                                              "index_seconds": round(update.seconds, 3)})
        return head
