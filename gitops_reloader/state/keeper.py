"""The state store at run time: record what happens, write it in batches, read it once.

:class:`StateKeeper` is what the controller talks to:

* informer handlers call :meth:`~StateKeeper.observe` / :meth:`~StateKeeper.forget_source`
  (cheap: one HMAC and a dict update, no I/O);
* after an emission, :meth:`~StateKeeper.emitted` records what the workload was given;
* on becoming active, :meth:`~StateKeeper.load` reads the shards once, and
  :meth:`~StateKeeper.out_of_date` answers the start-up question with
  :func:`~gitops_reloader.state.resync.out_of_date`;
* :meth:`~StateKeeper.start` runs a thread that writes a batch every ``interval`` seconds
  (and :meth:`~StateKeeper.stop` writes a last one), holding back sources the controller
  still has work for (``held``).

Only the active instance loads and writes; a standby only observes, so its view is warm
when it takes over. With ``read_only`` (``--dry-run``) nothing is ever written. A write
that fails is logged, counted and retried with the next batch; the controller carries on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable

from gitops_reloader.errors import ReloaderError
from gitops_reloader.model import ObjectRef, Source, SourceMeta, SourceRef
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.state.batch import StateBatch
from gitops_reloader.state.codec import merge_shards, state_digest
from gitops_reloader.state.resync import out_of_date
from gitops_reloader.state.shards import ConfigMapShards

__all__ = ["StateKeeper", "source_id"]

log = logging.getLogger(__name__)


def source_id(ref: SourceRef) -> str:
    """``ns/ConfigMap/name``: a source's entry in the store."""
    return str(ref)


def _emitted_id(ref: SourceRef) -> str:
    """``ConfigMap/name``: a source inside its workload's entry (same namespace)."""
    return f"{ref.kind.kube_kind}/{ref.name}"


class StateKeeper:
    """Keeps the reload state of one controller in :class:`ConfigMapShards`."""

    def __init__(self, shards: ConfigMapShards, key: Callable[[], bytes], *, metrics: Metrics,
                 interval: float = 5.0, shard_bytes: int = 512 * 1024, read_only: bool = False) -> None:
        self.shards = shards
        self._key = key
        self.metrics = metrics
        self.interval = interval
        self.read_only = read_only
        self.batch = StateBatch(shard_bytes=shard_bytes)
        self._loaded = False
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._held: Callable[[], Collection[SourceRef]] = frozenset

    def __repr__(self) -> str:
        return f"StateKeeper({self.shards.namespace}/{self.shards.name}, loaded={self._loaded})"

    # --- recording (any thread) --------------------------------------------------------

    def digest(self, ref: SourceRef, data_hash: str) -> str:
        """The keyed digest stored for ``ref`` at ``data_hash``."""
        return state_digest(self._key(), source_id(ref), data_hash)

    def observe(self, meta: SourceMeta) -> None:
        """A source as the cache holds it now (no hash yet: nothing to record)."""
        if meta.hash:
            self.batch.set_source(source_id(meta.ref), self.digest(meta.ref, meta.hash))

    def forget_source(self, ref: SourceRef) -> None:
        self.batch.drop_source(source_id(ref))

    def emitted(self, workload: ObjectRef, sources: Iterable[Source]) -> None:
        """The workload was given these sources' hashes (an emission that applied)."""
        entry = {_emitted_id(s.ref): self.digest(s.ref, s.hash) for s in sources if s.hash}
        if entry and not self.batch.set_emitted(workload.key, entry):
            log.warning("state store: workload entry too large, not recorded",
                        extra={"object": workload.key, "sources": len(entry)})

    def forget_workload(self, workload: ObjectRef) -> None:
        self.batch.drop_workload(workload.key)

    # --- start-up ----------------------------------------------------------------------

    def load(self, *, sources: Collection[SourceRef], workloads: Collection[ObjectRef]) -> None:
        """Read every shard once; forget entries of objects that no longer exist.

        ``sources``/``workloads`` are everything the synced caches hold. Raises
        :class:`KubeError` when the shards can't be listed (the caller decides).
        """
        decoded = merge_shards(self.shards.read())
        self.batch.load(decoded)
        self._loaded = True
        if decoded.invalid:
            self.metrics.state_store_invalid(decoded.invalid)
            log.warning("state store: unreadable entries skipped",
                        extra={"object": f"{self.shards.namespace}/ConfigMap/{self.shards.name}-*",
                               "entries": decoded.invalid})
        dropped = self.batch.retain_sources({source_id(r) for r in sources})
        dropped += self.batch.retain_workloads({r.key for r in workloads})
        stored_sources, stored_workloads, count = self.batch.sizes()
        self.metrics.set_state_store_entries(stored_sources, stored_workloads, count)
        log.info("state store loaded", extra={"sources": stored_sources, "workloads": stored_workloads,
                                              "shards": count, "dropped": dropped})

    def out_of_date(self, workload: ObjectRef, meta: SourceMeta, marker: str | None) -> bool:
        """Whether ``workload`` must reload for ``meta`` (see :mod:`.resync`); needs :meth:`load`."""
        current = self.digest(meta.ref, meta.hash)
        emitted = self.batch.stored_workload(workload.key) or {}
        return out_of_date(current_hash=meta.hash, current_digest=current, marker=marker,
                           emitted=emitted.get(_emitted_id(meta.ref)),
                           seen=self.batch.stored_source(source_id(meta.ref)))

    # --- writing -------------------------------------------------------------------------

    def start(self, held: Callable[[], Collection[SourceRef]]) -> None:
        """Write a batch every ``interval`` seconds from now on (the active instance only)."""
        self._held = held
        if self.read_only or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="state-store", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.flush()

    def flush(self) -> bool:
        """Write one batch now; False if a write failed (its entries stay for the next)."""
        if self.read_only or not self._loaded:
            return True
        with self._write_lock:
            batch = self.batch.prepare({source_id(r) for r in self._held()})
            if batch is None:
                return True
            try:
                for write in batch.writes:
                    self.shards.write(write.index, write.data)
            except ReloaderError as exc:
                self.metrics.state_store_write(False)
                log.warning("state store write failed, will retry with the next batch",
                            extra={"object": f"{self.shards.namespace}/ConfigMap/{self.shards.name}-*",
                                   "error": str(exc)})
                return False
            self.batch.committed(batch)
            self.metrics.state_store_write(True)
            stored_sources, stored_workloads, count = self.batch.sizes()
            self.metrics.set_state_store_entries(stored_sources, stored_workloads, count)
            log.debug("state store written", extra={"shards": len(batch.writes),
                                                    "entries": len(batch.sources) + len(batch.workloads)})
            return True

    def stop(self) -> None:
        """Stop the writer and write what is left (a clean stop loses nothing)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
            self._thread = None
        self.flush()
