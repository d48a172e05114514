"""The failure record: the :class:`~gitops_reloader.control.failures.FailureBook` in a ConfigMap (I/O).

One ConfigMap ``<lease name>-failures`` (``Runtime.failure_record``) in the controller's
namespace holds what is failing (:func:`~gitops_reloader.control.failures.encode`): the
workloads and sources each failing emission waits for, since when, how many attempts, the
last error (redacted). The active instance writes it from a background thread whenever
the book changed, at most every ``interval`` seconds; a write that fails (the API
server's write path is what is down) is logged once per outage, counted, and tried again
at the next tick. On becoming active an instance reads it back, so a restart or a new
leader continues what was failing. Tenants cannot write in the controller's namespace,
and what the record names is only ever *compared* again (a reload is still emitted only
where the hash differs), so a stale or forged entry costs a comparison, never a restart.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from gitops_reloader.control.failures import Failure, FailureBook, decode, encode
from gitops_reloader.errors import KubeConflict, KubeError, KubeNotFound
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.resources import CONFIGMAPS
from gitops_reloader.model import SourceKind, SourceRef
from gitops_reloader.observability.metrics import Metrics

__all__ = ["FailureStore"]

log = logging.getLogger(__name__)

RECORD_LABEL = "gitops-reloader.io/failure-record"


class FailureStore:
    """Reads the failure record once and keeps it written while this instance is active."""

    def __init__(self, api: KubeApi, book: FailureBook, *, namespace: str, name: str,
                 metrics: Metrics, interval: float = 2.0, read_only: bool = False) -> None:
        self.api = api
        self.book = book
        self.namespace = namespace
        self.name = name
        self.metrics = metrics
        self.interval = interval
        self.read_only = read_only
        self._version = ""
        self._written = -1
        self._loaded: set[str] = set()
        self._failing_write = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def is_record(self, ref: SourceRef) -> bool:
        """Whether ``ref`` is this record's ConfigMap (its changes are never a reload)."""
        return ref.kind is SourceKind.CONFIGMAP and ref.namespace == self.namespace and ref.name == self.name

    def load(self) -> list[Failure]:
        """What an earlier instance recorded (empty when there is none or it can't be read)."""
        try:
            stored = self.api.get(CONFIGMAPS, self.namespace, self.name)
        except KubeNotFound:
            return []
        except KubeError as exc:
            log.warning("failure record unreadable; the slow resync repairs what it held",
                        extra={"object": f"{self.namespace}/ConfigMap/{self.name}", "error": str(exc)})
            return []
        self._version = str((stored.get("metadata") or {}).get("resourceVersion", ""))
        data = stored.get("data")
        loaded = decode(data) if isinstance(data, Mapping) else []
        self._loaded = {entry.key for entry in loaded}
        return loaded

    def start(self) -> None:
        """Write the book whenever it changes from now on (the active instance only); what
        :meth:`load` read is not written back unless the book dropped part of it."""
        if self.read_only or self._thread is not None:
            return
        if {entry.key for entry in self.book.failing()} == self._loaded:
            self._written = self.book.version  # the record holds the book already
        self._thread = threading.Thread(target=self._run, name="failure-record", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Write a last time and stop."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10.0)
            self._thread = None
            self.flush()

    def abandon(self) -> None:
        """Leadership lost: stop writing at once, with no last write (the new leader owns the
        record now; a late write of ours would overwrite what it recorded)."""
        self.read_only = True
        self._stop.set()

    def flush(self) -> bool:
        """Write the book now if it changed since the last write; False if the write failed."""
        if self.read_only:
            return True
        version = self.book.version
        if version == self._written:
            return True
        try:
            self._write(encode(self.book.failing()))
        except KubeError as exc:
            self.metrics.failure_record_write(False)
            if not self._failing_write:
                log.warning("cannot write the failure record; retrying (what is failing stays "
                            "pending in memory meanwhile)", extra={
                                "object": f"{self.namespace}/ConfigMap/{self.name}", "error": str(exc)})
            self._failing_write = True
            return False
        self.metrics.failure_record_write(True)
        if self._failing_write:
            log.info("failure record written again",
                     extra={"object": f"{self.namespace}/ConfigMap/{self.name}"})
        self._failing_write = False
        self._written = version
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.flush()

    def _write(self, data: Mapping[str, str]) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name, "namespace": self.namespace,
                "labels": {"app.kubernetes.io/managed-by": "gitops-reloader", RECORD_LABEL: "true"},
                "annotations": {"gitops-reloader.io/purpose": "emissions failing and still pending; "
                                "written by the controller, read on restart and by status"},
            },
            "data": dict(data),
        }
        if not self._version:
            try:
                stored = self.api.create(CONFIGMAPS, self.namespace, body)
            except KubeConflict:
                self._version = self._current_version()
            else:
                self._remember(stored)
                return
        body["metadata"]["resourceVersion"] = self._version
        try:
            stored = self.api.update(CONFIGMAPS, self.namespace, self.name, body)
        except KubeConflict:
            body["metadata"]["resourceVersion"] = self._current_version()
            stored = self.api.update(CONFIGMAPS, self.namespace, self.name, body)
        except KubeNotFound:
            self._version = ""
            raise
        self._remember(stored)

    def _current_version(self) -> str:
        current = self.api.get(CONFIGMAPS, self.namespace, self.name)
        return str((current.get("metadata") or {}).get("resourceVersion", ""))

    def _remember(self, stored: Mapping[str, object]) -> None:
        metadata = stored.get("metadata")
        self._version = str(metadata.get("resourceVersion", "")) if isinstance(metadata, Mapping) else ""
