"""The ledger record: the :class:`~gitops_reloader.ledger.Ledger` in a ConfigMap (I/O).

One ConfigMap ``<lease name>-failures`` (``Runtime.failure_record``; the name the failure record
it replaced had, so the chart's RBAC and an upgrade keep working) in the controller's namespace
holds what every workload is owed and why it waits (:func:`~gitops_reloader.ledger.encode`):
the sources, the hold (a window, a brake, the budget, the coalescing window), the failure.

- **Read before written.** On becoming active an instance reads the record back (a restart or
  a new leader continues every entry). A read that fails (anything but 404) is retried in the
  background with backoff, and *nothing is written until a read succeeded*: a replica that
  cannot read the record never overwrites entries it has not seen. What it read is handed to
  ``on_loaded`` and merged into the ledger, then written with the rest.
- **Written when changed.** From a background thread, whenever the ledger's version moved, at
  most every ``interval`` seconds; a write that fails (the API server's write path is what is
  down) is logged once per outage, counted, and tried again at the next tick.
- **Stopped at once when leadership is lost** (:meth:`LedgerStore.abandon`), with no last write.

Tenants cannot write in the controller's namespace, and what the record names is only ever
*compared* again (a reload is still emitted only where the data differs), so a stale or forged
entry costs a comparison, never a restart.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from gitops_reloader.backoff import exponential
from gitops_reloader.clock import Clock, SystemClock
from gitops_reloader.errors import KubeConflict, KubeError, KubeNotFound
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.resources import CONFIGMAPS
from gitops_reloader.ledger import Ledger, Record, encode, encode_counted, read_record
from gitops_reloader.model import ObjectRef, SourceKind, SourceRef
from gitops_reloader.observability.metrics import Metrics

__all__ = ["LedgerStore"]

log = logging.getLogger(__name__)

RECORD_LABEL = "gitops-reloader.io/failure-record"
MAX_READ_BACKOFF = 30.0
Warn = Callable[[ObjectRef, str, str], None]
"""``(object, reason, message)``: a Warning Event (the record's ConfigMap is the object)."""


class LedgerStore:
    """Reads the ledger record once and keeps it written while this instance is active."""

    def __init__(self, api: KubeApi, ledger: Ledger, *, namespace: str, name: str,
                 metrics: Metrics, interval: float = 2.0, read_only: bool = False,
                 clock: Clock | None = None, warn: Warn | None = None) -> None:
        self.api = api
        self.clock = clock or SystemClock()
        self.warn = warn
        self.ledger = ledger
        self.namespace = namespace
        self.name = name
        self.metrics = metrics
        self.interval = interval
        self.read_only = read_only
        self.loaded = False
        """Whether the record was read (or found absent): only then is it written."""
        self._version = ""
        self._written = -1
        self._data: Mapping[str, str] | None = None
        """What the record holds, as last read or written (None: unknown)."""
        self._failing_write = False
        self._truncated = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._on_loaded: Callable[[Record], None] | None = None

    @property
    def object(self) -> str:
        return f"{self.namespace}/ConfigMap/{self.name}"

    def is_record(self, ref: SourceRef) -> bool:
        """Whether ``ref`` is this record's ConfigMap (its changes are never a reload)."""
        return ref.kind is SourceKind.CONFIGMAP and ref.namespace == self.namespace and ref.name == self.name

    def read(self) -> Record | None:
        """What an earlier instance recorded (empty: nothing, or no record), as recorded; None when
        it cannot be read now (then nothing is written until it can). What could not be read back
        (a hand edit) is skipped with a log line and a metric."""
        try:
            stored = self.api.get(CONFIGMAPS, self.namespace, self.name)
        except KubeNotFound:
            self.loaded, self._data = True, encode([])  # nothing to write while nothing is owed
            return Record([])
        except KubeError as exc:
            self.metrics.failure_record_read(False)
            log.warning("ledger record unreadable; read again before anything is written", extra={
                "object": self.object, "error": str(exc)})
            return None
        self.metrics.failure_record_read(True)
        self._version = str((stored.get("metadata") or {}).get("resourceVersion", ""))
        data = stored.get("data")
        self.loaded = True
        if not isinstance(data, Mapping):
            return Record([])
        self._data = dict(data)
        record = read_record(data, now=self.clock.now())
        if record.skipped:
            self.metrics.ledger_record_skipped(record.skipped)
            log.warning("ledger record: items skipped (malformed or out of bounds; edited by hand?); "
                        "what they owed is found again by the resync where the cluster shows it",
                        extra={"object": self.object, "skipped": record.skipped})
        return record

    def start(self, on_loaded: Callable[[Record], None]) -> None:
        """Keep the record written from now on (the active instance only). Not read yet (the
        first read failed): read it first, in the background, then hand what it holds to
        ``on_loaded`` and only then write."""
        if self.read_only or self._thread is not None:
            return
        self._on_loaded = on_loaded
        self._thread = threading.Thread(target=self._run, name="ledger-record", daemon=True)
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
        """Write the ledger now if it changed since the last write; False if the write failed
        or the record was never read."""
        if self.read_only:
            return True
        if not self.loaded:
            return False
        version = self.ledger.version
        if version == self._written:
            return True
        data, truncated = encode_counted(self.ledger.entries(), wall_of=self._wall)
        self._said_truncated(truncated)
        if data == self._data:  # what changed is not recorded (a check, a coalescing hold's time)
            self._written = version
            return True
        try:
            self._write(data)
        except KubeError as exc:
            self.metrics.failure_record_write(False)
            if not self._failing_write:
                log.warning("cannot write the ledger record; retrying (what is owed stays pending "
                            "in memory meanwhile)", extra={"object": self.object, "error": str(exc)})
            self._failing_write = True
            return False
        self.metrics.failure_record_write(True)
        if self._failing_write:
            log.info("ledger record written again", extra={"object": self.object})
        self._failing_write = False
        self._written, self._data = version, data
        return True

    def _wall(self, monotonic: float) -> float:
        """Wall-clock seconds of a monotonic time (when a shared change was seen)."""
        return self.clock.now() - (self.clock.monotonic() - monotonic)

    def _said_truncated(self, truncated: int) -> None:
        """Entries the record cannot hold: a log line, the gauge and a Warning Event when the
        count changes (never silent); the resync covers those it can."""
        if truncated == self._truncated:
            return
        self._truncated = truncated
        self.metrics.set_ledger_record_truncated(truncated)
        if not truncated:
            return
        message = (f"the ledger record is full ({truncated} entries not recorded): after a restart only "
                   "the resync finds what they owe, where their own records show it")
        log.warning(message, extra={"object": self.object, "truncated": truncated})
        if self.warn is not None:
            self.warn(ObjectRef("ConfigMap", self.namespace, self.name), "LedgerRecordFull", message)

    def _run(self) -> None:
        """The record's thread: read until read, then write when changed. Nothing ends it but
        :meth:`stop` or :meth:`abandon`: a failure is logged and the next tick tries again."""
        reads = 0
        while not self.loaded:
            reads += 1
            if self._stop.wait(exponential(self.interval, reads, MAX_READ_BACKOFF)):
                return
            try:
                record = self.read()
                if record is not None and self._on_loaded is not None:
                    self._on_loaded(record)
            except Exception:  # a bug must not end the record: it would never be written again
                log.exception("restoring the ledger record failed; carrying on",
                              extra={"object": self.object})
        while not self._stop.wait(self.interval):
            try:
                self.flush()
            except Exception:
                log.exception("writing the ledger record failed; trying again", extra={"object": self.object})

    def _write(self, data: Mapping[str, str]) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name, "namespace": self.namespace,
                "labels": {"app.kubernetes.io/managed-by": "gitops-reloader", RECORD_LABEL: "true"},
                "annotations": {"gitops-reloader.io/purpose": "reloads owed and why they wait (failing, "
                                "windows, brakes); written by the controller, read on restart and by status"},
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
