"""The state store at run time: record what happens, write it in batches, read it once.

:class:`StateKeeper` is what the controller talks to:

* informer handlers call :meth:`~StateKeeper.observe` / :meth:`~StateKeeper.forget_source`
  (cheap: one HMAC and a dict update, no I/O);
* after an emission, :meth:`~StateKeeper.emitted` records what the workload was given;
* on becoming active, :meth:`~StateKeeper.load` reads the shards once (the batch thread
  retries a failed read before it writes anything), and
  :meth:`~StateKeeper.out_of_date` answers the start-up question with
  :func:`~gitops_reloader.state.resync.out_of_date` (and :meth:`~StateKeeper.deleted_while_down`
  names the sources gone since the store was written under the same scope);
* :meth:`~StateKeeper.start` runs a thread that writes a batch every ``interval`` seconds
  (and :meth:`~StateKeeper.stop` writes a last one), holding back sources the controller
  still has work for (``held``); :meth:`~StateKeeper.abandon` (leadership lost) stops
  all writing at once.

Only the active instance loads and writes; a standby only observes, so its view is warm
when it takes over. With ``read_only`` (``--dry-run``) nothing is ever written. A write
that fails is logged, counted and retried with the next batch; the controller carries on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable

from gitops_reloader.errors import ReloaderError
from gitops_reloader.model import ObjectRef, Source, SourceKind, SourceMeta, SourceRef
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.state.batch import StateBatch
from gitops_reloader.state.codec import merge_shards, state_digest
from gitops_reloader.state.resync import missed_while_down, out_of_date, out_of_date_over_keys
from gitops_reloader.state.shards import STORE_LABEL, ConfigMapShards

__all__ = ["STORED_KINDS", "StateKeeper", "source_id"]

log = logging.getLogger(__name__)


STORED_KINDS = frozenset({SourceKind.CONFIGMAP, SourceKind.SECRET})
"""What the store records. A SecretProviderClass (CSI) changes through its pods' reported
versions, not its data, and keeps today's marker-only start-up check."""


def source_id(ref: SourceRef) -> str:
    """``ns/ConfigMap/name``: a source's entry in the store."""
    return str(ref)


_KIND_OF = {kind.kube_kind: kind for kind in STORED_KINDS}


def _source_ref(stored_id: str) -> SourceRef:
    """The ref of a stored source id (the codec only reads ``ns/ConfigMap|Secret/name``)."""
    namespace, kind, name = stored_id.split("/", 2)
    return SourceRef(_KIND_OF[kind], namespace, name)


class StateKeeper:
    """Keeps the reload state of one controller in :class:`ConfigMapShards`."""

    def __init__(self, shards: ConfigMapShards, key: Callable[[], bytes], *, metrics: Metrics,
                 interval: float = 5.0, shard_bytes: int = 512 * 1024, read_only: bool = False,
                 scope: str = "") -> None:
        self.shards = shards
        self._key = key
        self.metrics = metrics
        self.interval = interval
        self.read_only = read_only
        self.batch = StateBatch(shard_bytes=shard_bytes, scope=scope)
        self._loaded = False
        self._created: frozenset[str] = frozenset()
        self._deleted: tuple[SourceRef, ...] = ()
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._stop_writing = threading.Event()
        self._thread: threading.Thread | None = None
        self._thread_started = False
        self._unkeyed: dict[SourceRef, str] = {}
        self._unkeyed_lock = threading.Lock()
        self._held: Callable[[], Collection[SourceRef]] = frozenset
        self._sources: Callable[[], Collection[SourceRef]] = frozenset
        self._workloads: Callable[[], Collection[ObjectRef]] = frozenset

    def __repr__(self) -> str:
        return f"StateKeeper({self.shards.namespace}/{self.shards.name}, loaded={self._loaded})"

    # --- recording (any thread) --------------------------------------------------------

    def digest(self, ref: SourceRef, data_hash: str) -> str:
        """The keyed digest stored for ``ref`` at ``data_hash``."""
        return state_digest(self._key(), source_id(ref), data_hash)

    def observe(self, meta: SourceMeta) -> None:
        """A source as the cache holds it now (no hash yet: nothing to record).

        Never raises: while the digest key can't be read, the source waits in memory
        (its hash only, never written) and is digested before the next batch.
        """
        if not meta.hash or meta.ref.kind not in STORED_KINDS or self.is_shard(meta):
            return
        try:
            digest = self.digest(meta.ref, meta.hash)
        except ReloaderError as exc:
            with self._unkeyed_lock:
                first = not self._unkeyed
                self._unkeyed[meta.ref] = meta.hash
            if first:
                self.metrics.state_store_error("key")
                log.warning("state store: digest key unavailable, recording later",
                            extra={"object": str(meta.ref), "error": str(exc)})
            return
        with self._unkeyed_lock:  # ordered with _digest_unkeyed: the newest hash wins
            self._unkeyed.pop(meta.ref, None)
            self.batch.set_source(source_id(meta.ref), digest)

    def is_shard(self, meta: SourceMeta) -> bool:
        """Whether ``meta`` is one of this store's own ConfigMaps (never recorded: each
        write would change it and call for another)."""
        return (meta.ref.namespace == self.shards.namespace
                and meta.labels.get(STORE_LABEL) == self.shards.name)

    def _digest_unkeyed(self) -> bool:
        """Digest the sources observed while the key was unavailable; False if it still is."""
        with self._unkeyed_lock:
            if not self._unkeyed:
                return True
            try:
                digests = {ref: self.digest(ref, data_hash) for ref, data_hash in self._unkeyed.items()}
            except ReloaderError:
                return False
            for ref, digest in digests.items():
                self.batch.set_source(source_id(ref), digest)
            self._unkeyed.clear()
            return True

    def forget_source(self, ref: SourceRef) -> None:
        with self._unkeyed_lock:
            self._unkeyed.pop(ref, None)
        self.batch.drop_source(source_id(ref))

    def emitted(self, workload: ObjectRef, sources: Iterable[Source]) -> None:
        """The workload was given these sources' hashes (an emission that applied)."""
        entry = {s.ref.local_id: self.digest(s.ref, s.hash) for s in sources
                 if s.hash and s.ref.kind in STORED_KINDS}
        if entry and not self.batch.set_emitted(workload.key, entry):
            log.warning("state store: workload entry too large, not recorded",
                        extra={"object": workload.key, "sources": len(entry)})

    def assume_current(self, workload: ObjectRef, sources: Iterable[Source]) -> None:
        """A ``used-keys`` workload's first sight of these sources (hashes over its used
        keys): recorded as given where the workload has no entry for the source yet.

        The source-level digest covers every key, so it cannot tell a restart whether a
        used key changed while nobody watched; this per-workload entry can.
        """
        known = self.batch.emitted(workload.key) or {}
        fresh = [s for s in sources if s.ref.local_id not in known]
        if fresh:
            self.emitted(workload, fresh)

    def forget_workload(self, workload: ObjectRef) -> None:
        self.batch.drop_workload(workload.key)

    # --- start-up ----------------------------------------------------------------------

    def load(self, *, sources: Callable[[], Collection[SourceRef]],
             workloads: Callable[[], Collection[ObjectRef]]) -> bool:
        """Read every shard once; forget entries of objects that no longer exist.

        ``sources``/``workloads`` list everything the synced caches hold. False when the
        shards can't be read: logged and counted; the batch thread tries again before it
        writes anything (a store never written over unread).
        """
        self._sources, self._workloads = sources, workloads
        try:
            self._key()  # the start-up check digests every source: fail here, not half-way
            decoded = merge_shards(self.shards.read())
        except ReloaderError as exc:
            self.metrics.state_store_error("read")
            log.warning("state store unreadable; start-up check falls back to workload markers",
                        extra={"object": self._where, "error": str(exc)})
            return False
        self.batch.load(decoded)
        self._loaded = True
        if decoded.invalid:
            self.metrics.state_store_invalid(decoded.invalid)
            log.warning("state store: unreadable entries skipped",
                        extra={"object": self._where, "entries": decoded.invalid})
        current = {source_id(r) for r in sources()
                   if r.kind in STORED_KINDS and not self.shards.is_shard(r)}
        self._created, deleted = missed_while_down(
            stored=decoded.snapshot.sources.keys(), current=current,
            covered=bool(self.batch.scope) and decoded.scope == self.batch.scope)
        self._deleted = tuple(_source_ref(s) for s in sorted(deleted))
        dropped = self.batch.retain_sources(current)
        dropped += self.batch.retain_workloads({r.key for r in workloads()})
        stored_sources, stored_workloads, count = self.batch.sizes()
        self.metrics.set_state_store_entries(stored_sources, stored_workloads, count)
        log.info("state store loaded", extra={"object": self._where, "sources": stored_sources,
                                              "workloads": stored_workloads, "shards": count,
                                              "dropped": dropped, "created_while_down": len(self._created),
                                              "deleted_while_down": len(self._deleted)})
        return True

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def _where(self) -> str:
        return f"{self.shards.namespace}/ConfigMap/{self.shards.name}-*"

    def out_of_date(self, workload: ObjectRef, meta: SourceMeta, marker: str | None, *,
                    on_create: bool = False, used_key_hash: str | None = None) -> bool:
        """Whether ``workload`` must reload for ``meta`` (see :mod:`.resync`); needs :meth:`load`.

        ``on_create`` (``--reload-on-create``): a source created while down reloads.
        ``used_key_hash``: the workload uses the source key by key (``--reload-on=used-keys``)
        and this is the hash over those keys; a marker or entry holding it, or the whole
        object's hash, is current, and the source-level digest (every key) is not consulted.
        """
        current = self.digest(meta.ref, meta.hash)
        emitted = (self.batch.stored_workload(workload.key) or {}).get(meta.ref.local_id)
        created = on_create and source_id(meta.ref) in self._created
        if used_key_hash is None:
            return out_of_date(current_hash=meta.hash, current_digest=current, marker=marker,
                               emitted=emitted, seen=self.batch.stored_source(source_id(meta.ref)),
                               created=created)
        used_digest = self.digest(meta.ref, used_key_hash)
        return out_of_date_over_keys(used_hash=used_key_hash, used_digest=used_digest, whole_hash=meta.hash,
                                     whole_digest=current, marker=marker, emitted=emitted, created=created)

    def was_given(self, workload: ObjectRef, ref: SourceRef, marker: str | None, data_hash: str) -> bool:
        """Whether ``workload`` was last given ``data_hash`` for ``ref``, by the records
        :meth:`out_of_date` trusts, in its order: the workload's marker when it has one,
        else the store's entry for it (needs :meth:`load`). False when neither says."""
        if marker is not None:
            return marker == data_hash
        emitted = (self.batch.stored_workload(workload.key) or {}).get(ref.local_id)
        return emitted is not None and emitted == self.digest(ref, data_hash)

    def deleted_while_down(self) -> tuple[SourceRef, ...]:
        """Sources the store held, under the scope the caches have now, that are gone
        (empty unless the last :meth:`load` found the store covering that scope)."""
        return self._deleted

    # --- writing -------------------------------------------------------------------------

    def start(self, held: Callable[[], Collection[SourceRef]]) -> None:
        """Write a batch every ``interval`` seconds from now on (the active instance only)."""
        self._held = held
        if self.read_only or self._thread_started:
            return
        self._thread_started = True
        self._thread = threading.Thread(target=self._run, name="state-store", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.flush()

    def flush(self) -> bool:
        """Write one batch now; False if a write failed (its entries stay for the next)."""
        if self.read_only or self._stop_writing.is_set():
            return True
        if not self._loaded and not self.load(sources=self._sources, workloads=self._workloads):
            return False
        if not self._digest_unkeyed():
            return False
        with self._write_lock:
            batch = self.batch.prepare({source_id(r) for r in self._held()})
            if batch is None:
                return True
            try:
                for write in batch.writes:
                    self.shards.write(write.index, write.data)
            except ReloaderError as exc:
                # Some shards may have been written: read them all again before the next batch,
                # so that entries the failed writes moved are found where they are.
                self._loaded = False
                self.metrics.state_store_error("write")
                log.warning("state store write failed, will read it again and retry",
                            extra={"object": self._where, "error": str(exc)})
                return False
            self.batch.committed(batch)
            self.metrics.state_store_batch()
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
        if self._thread_started:
            self.flush()

    def abandon(self) -> None:
        """Leadership lost: never write again (the new leader owns the store)."""
        self._stop_writing.set()
        self._stop.set()
