"""Wires informers → change detection → policy → work queue → sinks.

Flow: the ConfigMap/Secret informers (:mod:`.control.caches`) keep only a
:class:`SourceMeta` (digests and the few labels and annotations we read) per object. A *data* change
(:mod:`.control.changes`) looks the workloads up in the :class:`ReferenceIndex` — never a
LIST call — records in the :class:`~gitops_reloader.ledger.Ledger` that each owes a reload
for it, and puts the workload key on the queue for when the ledger says it is due (after
the coalescing window). A worker takes the key and hands it to the
:class:`~.control.reconciler.Reconciler`, which reads the *current* workload and sources
from the caches, asks the policy, checks the holds, and emits one :class:`ReloadRequest`
through the workload's sink; what went through is discharged from the ledger. Whatever is
still owed after a run — held by a window, a brake, the budget, or failing (recorded by
:mod:`.control.failing` with its class's next try) — is put back on the queue for when it is
due; the ledger is written to the cluster (:mod:`.state.ledgerstore`) so a restart or a new
leader continues every entry: never dropped. After ``--max-retries`` failed attempts it is
*raised* (log, Warning Event, alert). A slow resync (``--resync-period``)
compares every workload with its sources from the caches and queues whatever a missed
change left out of date. Pause periods (:mod:`.control.pause`) and the start-up check
(:mod:`.control.startup`) feed the same queue. With ``--state-store`` a
:class:`~.state.keeper.StateKeeper` is told every source the caches hold and every applied
emission, loaded when this instance becomes active and written in batches from then on.

Handlers run on informer threads and only record and enqueue; all writes happen on the
worker threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from gitops_reloader import policy, syncs, usedkeys
from gitops_reloader.clock import Clock, SystemClock
from gitops_reloader.config import Config
from gitops_reloader.control.brakes import SourceBackoff, StormBrakes
from gitops_reloader.control.caches import Caches
from gitops_reloader.control.changes import ChangeDetector
from gitops_reloader.control.evictor import Evictor, Report
from gitops_reloader.control.failing import Failing
from gitops_reloader.control.latecomers import RecentChanges
from gitops_reloader.control.pause import UNPAUSE_PREFIX, PauseScheduler
from gitops_reloader.control.reconciler import Reconciler, view
from gitops_reloader.control.restore import current_entry, readers_of
from gitops_reloader.control.resume import Resumer
from gitops_reloader.control.retrypolicy import FailureClass, RetrySchedule
from gitops_reloader.control.startup import deleted_while_down, out_of_date, used_key_sources
from gitops_reloader.control.waves import WAVES_KEY, Waves
from gitops_reloader.control.writtenat import DataWrittenAt
from gitops_reloader.errors import ReloaderError
from gitops_reloader.index import ReferenceIndex
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.discovery import KindDiscovery, unserved_kinds
from gitops_reloader.kube.events import EventRecorder
from gitops_reloader.kube.informer import Informer, InformerEvent
from gitops_reloader.kube.workloads import WorkloadAdapter, WorkloadRecord, adapters_for
from gitops_reloader.ledger import LONG_WAITS, Hold, Ledger, PendingSource, Record, Wait
from gitops_reloader.model import (
    ObjectRef,
    Outcome,
    ReloadRequest,
    Source,
    SourceKind,
    SourceMeta,
    SourceRef,
    WorkloadKey,
    resource_version_number,
)
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.queue import WorkQueue
from gitops_reloader.ratelimit import ItemExponentialLimiter
from gitops_reloader.rollout.eviction import EvictionMode
from gitops_reloader.sinks.base import Sink
from gitops_reloader.state.keeper import StateKeeper
from gitops_reloader.state.ledgerstore import LedgerStore
from gitops_reloader.syncs import TemplateChange

log = logging.getLogger(__name__)

BATCH_PREFIX = "batch|"
READ_ATTEMPTS = 3
"""Reads of the ledger record on becoming active before it is left to the background."""


class Controller:
    """The reloader. ``start()`` returns once caches are synced and workers run."""

    def __init__(
        self,
        config: Config,
        api: KubeApi,
        *,
        sinks: Mapping[str, Sink],
        metrics: Metrics,
        recorder: EventRecorder | None = None,
        adapters: Mapping[str, WorkloadAdapter] | None = None,
        clock: Clock | None = None,
        listeners: Iterable[Callable[[ReloadRequest, Outcome], None]] = (),
        state: StateKeeper | None = None,
        ledger_store: Callable[[Ledger], LedgerStore] | None = None,
        alert: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.state = state
        self.ledger = Ledger()
        """What each workload is owed, why it waits, when it is due (:mod:`gitops_reloader.ledger`)."""
        self.ledger_store = ledger_store(self.ledger) if ledger_store is not None else None
        runtime = config.runtime
        self.retry = RetrySchedule(base=min(runtime.retry_base_delay, runtime.retry_max_delay),
                                 cap=runtime.retry_max_delay, slow=runtime.retry_max_delay)
        if state is not None:
            listeners = (*listeners, self._record_emission)
        self.api = api
        self.sinks = dict(sinks)
        self.metrics = metrics
        self.clock = clock or SystemClock()
        behaviour = config.behaviour
        self.adapters = dict(adapters) if adapters is not None else adapters_for(
            argo_rollouts=behaviour.is_argo_rollouts,
            openshift=bool(behaviour.is_openshift),
            ignored=config.filters.ignored_workload_types,
            kinds=behaviour.kinds,
        )
        self.index = ReferenceIndex()
        self.written_at = DataWrittenAt(api)
        self.recent_changes = RecentChanges(self.clock)
        self.queue: WorkQueue[str] = WorkQueue(
            clock=self.clock,
            limiter=ItemExponentialLimiter(self.retry.base, self.retry.cap),
            name="reload",
        )
        self.caches = Caches(config, api, self.adapters, observer=_MetricsObserver(metrics))
        self.changes = ChangeDetector(reload_on_create=behaviour.reload_on_create,
                                      reload_on_delete=behaviour.reload_on_delete)
        self.waves = Waves(config.rollouts, clock=self.clock, metrics=metrics, schedule=self._schedule,
                           warn=self._warn_ref) if config.rollouts.budgeted else None
        self.failing = Failing(self.ledger, retry=self.retry, metrics=metrics, clock=self.clock,
                               max_retries=runtime.max_retries, sink_of=self._sink_of_key,
                               warn=self._warn_ref, alert=alert)
        self.reconciler = Reconciler(config, self.caches, self.ledger, sinks=self.sinks,
                                     adapters=self.adapters, metrics=metrics, clock=self.clock,
                                     recorder=recorder, listeners=listeners, waves=self.waves,
                                     on_held=self.failing.held, on_recovered=self.failing.recovered,
                                     brakes=StormBrakes(runtime.max_reloads_per_workload,
                                                        runtime.cluster_reload_rate), api=api)
        self.evictor = Evictor(api, self.adapters, config.rollouts, metrics=metrics, clock=self.clock,
                               normal=self._eviction_event(recorder, warning=False),
                               warning=self._eviction_event(recorder, warning=True),
                               ) if config.rollouts.eviction is not EvictionMode.OFF else None
        self.backoff = SourceBackoff(cap=runtime.source_backoff_cap) if runtime.source_backoff_cap else None
        self.resumer = Resumer(self.caches, self.reconciler, api=api, adapters=self.adapters,
                               waves=self.waves, clock=self.clock, written=self.written_at)
        self.pauses = PauseScheduler(config, api, self.caches, self.queue, self.adapters,
                                     self.clock, self.reconciler.warn)
        self.discovery: KindDiscovery | None = None
        self.kind_listeners: list[Callable[[str, WorkloadAdapter], None]] = []
        """Called when a discovered workload kind becomes served (discovery thread)."""
        self._workers: list[threading.Thread] = []
        self._started = threading.Event()
        self._active = threading.Event()
        self._stopping = threading.Event()
        self._resync_thread: threading.Thread | None = None
        metrics.set_queue_depth_callback(lambda: float(len(self.queue)))
        metrics.set_ledger_callback(self.ledger.reasons)
        metrics.set_hold_callbacks(lambda: float(self.reconciler.holds.waiting_for_window()),
                                   lambda: float(self.reconciler.holds.throttled()))

    @staticmethod
    def _eviction_event(recorder: EventRecorder | None, *, warning: bool) -> Report:
        """The evictor's report: a log line and an Event on the workload."""
        def report(ref: ObjectRef, uid: str, reason: str, message: str) -> None:
            (log.warning if warning else log.info)(message, extra={"object": ref.key, "reason": reason})
            if recorder is not None:
                (recorder.warning if warning else recorder.normal)(ref, reason, message, uid=uid)
        return report

    # --- lifecycle -----------------------------------------------------------------

    def informers(self) -> list[Informer[Any]]:
        return self.caches.informers()

    def ready(self) -> bool:
        """Caches synced (for /readyz)."""
        return self._started.is_set() and self.caches.synced()

    def idle(self) -> bool:
        """Nothing queued or in progress, and every workload still owed a reload waits for a time
        it was given — a failing emission's next try, a storm brake, a closed maintenance window
        (tests and benchmarks wait on it)."""
        depth = self.queue.depth()
        if depth["queued"] or depth["processing"] or self.queue.due():
            return False
        waiting: set[str] = set()
        busy: set[str] = set()
        for entry in self.ledger.entries():
            waits = entry.failure is not None or (entry.hold is not None and entry.hold.why in LONG_WAITS)
            (waiting if waits else busy).add(entry.queue_key)
        waiting -= busy  # a group waits when each of its workloads does
        return not busy and self.queue.delayed_keys() <= waiting

    def seen(self, kind: SourceKind, namespace: str, name: str, resource_version: str) -> bool:
        """Whether the cache holds this source at ``resource_version`` or later."""
        meta = self.source(SourceRef(kind, namespace, name))
        return meta is not None and int(meta.resource_version or 0) >= int(resource_version)

    def start(self, *, sync_timeout: float = 60.0, activate: bool = True,
              pending: Mapping[str, WorkloadAdapter] | None = None) -> None:
        """Start informers and wait until synced; then start workers if ``activate``.

        With HA, a standby calls ``start(activate=False)`` (warm caches, no writes) and
        :meth:`activate` when it becomes leader. ``pending``: the discovered workload kinds
        not served now (default: asked of the API server here); they are watched once
        served.
        """
        if pending is None:
            pending = unserved_kinds(self.api, self.adapters)
        self.caches.build(on_source=self._on_source, on_workload=self._on_workload,
                          on_class_change=self.class_changed,
                          on_handover=lambda change: self.changed(
                              change.meta, deleted=change.deleted, previous=change.previous),
                          pending=pending)
        self.discovery = KindDiscovery(self.api, pending, on_served=self._kind_served,
                                       interval=self.config.behaviour.kind_discovery_interval)
        for informer in self.informers():
            informer.start()
        for informer in self.informers():
            if not informer.wait_synced(sync_timeout):
                raise ReloaderError(f"cache for {informer.name} did not sync in {sync_timeout}s")
            self.metrics.set_informer_synced(informer.kind.plural, True)
        self._started.set()
        log.info("caches synced", extra={"informers": len(self.informers())})
        self.discovery.start()
        if activate:
            self.activate()

    def activate(self, *, resync: bool = False) -> None:
        """Become the active instance: start workers.

        With ``--sync-after-restart``, or ``resync`` (a standby taking over from a leader
        that may have died with changes in its queue), first reload the workloads whose
        recorded hash is out of date. Whatever the flags, continue what an earlier instance
        left under way (:mod:`.control.resume`: the git follow-up, and the waves of the
        changes its markers name), derived from the cluster and the repositories.
        """
        if self._active.is_set():
            return
        self._active.set()
        if self.waves is not None:
            self.waves.activate()
        self.pauses.schedule_all()
        state = self.state
        loaded = state is not None and state.load(sources=self._source_refs, workloads=self._workload_refs)
        if self.config.behaviour.sync_after_restart or resync:
            stale = out_of_date(self.caches, self.reconciler, state if loaded else None, self.written_at)
            for key, sources in stale.items():
                self._add_pending(key, sources)
            deleted = (deleted_while_down(self.caches, self.index, state, self.reconciler)
                       if loaded and state else {})
            for key, sources in deleted.items():
                self._add_pending(key, sources)
            log.info("sync after restart", extra={"workloads_out_of_date": len(stale),
                                                  "deleted_while_down": len(deleted),
                                                  "state_store": loaded})
        current = self._resume()
        self._restore_ledger(current)
        if state is not None and loaded:
            for record in self.workloads():
                self._assume_current(record)
        if state is not None:
            state.start(held=self.ledger.sources)  # after the check: its work is held back
        for number in range(self.config.runtime.workers):
            thread = threading.Thread(target=self._worker, name=f"worker-{number}", daemon=True)
            thread.start()
            self._workers.append(thread)
        if self.evictor is not None:
            for record in self.workloads():  # an eviction an earlier instance left under way
                self.evictor.observe(record)
            self.evictor.start()
        if self.config.runtime.resync_period > 0:
            self._resync_thread = threading.Thread(target=self._resync_loop, name="resync", daemon=True)
            self._resync_thread.start()

    def _restore_ledger(self, current: set[str]) -> None:
        """Continue every entry an earlier instance recorded in the ledger: each workload it
        names owes again what it owed, at its sources' *current* state (the sink compares, so
        what went through before the restart is not written twice), with its hold and its
        failure. A record that cannot be read now is read again in the background, and nothing
        is written before it was (:class:`~gitops_reloader.state.ledgerstore.LedgerStore`).
        What the cluster shows was already written — the record may be a write behind — is not
        owed again: a live workload whose own record holds the source's hash, a git workload
        whose manifest holds its current digest (``current``, read by the resume)."""
        store = self.ledger_store
        if store is None:
            return

        def restored(record: Record) -> None:
            self._restored(record, current)

        for _ in range(READ_ATTEMPTS):
            record = store.read()
            if record is not None:
                restored(record)
                break
        store.start(on_loaded=restored)

    def _restored(self, record: Record, current_git: set[str]) -> None:
        """Put what the ledger record held back into the ledger and on the queue (a change recorded
        once for its many readers: to each reader the cluster shows still owes it)."""
        now = self.clock.monotonic()
        entries = [*record.entries, *(entry for change in record.shared for entry in readers_of(
            change, caches=self.caches, index=self.index, monotonic=now, wall=self.clock.now()))]
        current = [entry for entry in (current_entry(e, caches=self.caches, reconciler=self.reconciler,
                                                     committed=current_git, group_of=self._group_of, now=now)
                                       for e in entries) if entry is not None]
        self.ledger.restore(current)
        for entry in current:
            self.reconciler.holds.restored(entry.workload, entry.hold)
            self._schedule_due(entry.queue_key)
        self.metrics.set_pending_failures(self.ledger.counts())
        if entries:
            log.info("resuming what the ledger recorded before the restart", extra={
                "workloads_pending": len(current), "gone": len(entries) - len(current),
                "failing": sum(1 for e in current if e.failure is not None),
                "held": sum(1 for e in current if e.hold is not None)})

    # --- the slow resync -----------------------------------------------------------

    def _resync_loop(self) -> None:
        period = self.config.runtime.resync_period
        while not self._stopping.wait(period):
            try:
                self.resync()
            except Exception:  # a bug must not stop the next pass
                log.exception("resync pass failed; the next one runs in its period")

    def resync(self) -> int:
        """One pass: every workload compared with its sources' current state, from the caches
        only (no LIST, no GET); the out-of-date ones not already pending or failing are queued.
        A git or pull-request workload is handed to its sink as a check (it compares the
        manifest's digest, and writes only where one is recorded and differs). Returns how many
        workloads were found out of date."""
        started = time.perf_counter()
        busy = self.ledger.keys()
        state = self.state if self.state is not None and self.state.loaded else None
        repaired = 0
        for key, sources in out_of_date(self.caches, self.reconciler, state, self.written_at).items():
            if key in busy:
                continue
            if not all(p.resync for p in sources.values()):
                repaired += 1
                log.info("resync: out of date, reloading", extra={
                    "object": key, "sources": sorted(str(ref) for ref in sources)})
            self._add_pending(key, {ref: p if p.resync else replace(p, detected=self.clock.monotonic())
                                    for ref, p in sources.items()})
        self.metrics.resync_pass(time.perf_counter() - started, repaired)
        return repaired

    def _resume(self) -> set[str]:
        """Continue what an earlier instance left under way (:mod:`.control.resume`); a failure
        there is logged and start-up goes on (the next change of each source still reloads).
        Returns the git workloads found current."""
        try:
            resumed = self.resumer.run()
        except Exception:  # a bug must not keep the controller from starting
            log.exception("cannot resume what was under way; carrying on")
            return set()
        for key, sources in resumed.pending.items():
            self._add_pending(key, sources)
        if resumed.pending or resumed.restored or resumed.followed:
            log.info("resuming after restart", extra={
                "changes_in_flight": resumed.in_flight, "workloads_waiting": len(resumed.pending),
                "rollouts_restored": resumed.restored, "git_follow_ups": resumed.followed})
        return resumed.current

    def stop(self, *, drain: bool = False, timeout: float = 10.0) -> None:
        self._stopping.set()
        if self.discovery is not None:
            self.discovery.stop()
        if self.waves is not None:
            self.waves.close()
        if self.evictor is not None:
            self.evictor.stop()
        self.queue.shutdown(drain=drain, timeout=timeout)
        for informer in self.informers():
            informer.stop()
        for thread in self._workers:
            thread.join(timeout)
        if self.state is not None:
            self.state.stop()  # the last batch, after the last emission
        if self.ledger_store is not None:
            self.ledger_store.stop()  # what is still owed, for the next instance

    def _kind_served(self, kind: str, adapter: WorkloadAdapter) -> None:
        """A discovered kind's API appeared: watch it (its first list indexes every
        workload of the kind) and tell the listeners (the per-kind permission check)."""
        for informer in self.caches.add_workload_kind(kind, self._on_workload):
            informer.start()
        for listener in self.kind_listeners:
            listener(kind, adapter)

    # --- lookups in the caches -----------------------------------------------------

    def namespace_allowed(self, namespace: str) -> bool:
        """Whether changes in ``namespace`` are this instance's (selector and shard)."""
        return self.caches.namespace_allowed(namespace)

    def source(self, ref: SourceRef) -> SourceMeta | None:
        return self.caches.source(ref)

    def workload(self, ref: ObjectRef) -> WorkloadRecord | None:
        return self.caches.workload(ref)

    def workloads(self) -> list[WorkloadRecord]:
        return self.caches.workloads()

    def sink_name(self, record: WorkloadRecord) -> str | None:
        """The sink for this workload (None: the annotation names no known sink)."""
        return self.reconciler.sink_name(record)

    # --- handlers (informer threads: record and enqueue only) -----------------------

    def _on_workload(self, event: InformerEvent[WorkloadRecord]) -> None:
        delta = event.delta
        if delta.new is None:
            if delta.old is not None:
                self._gone(delta.old.ref)
            return
        record = delta.new
        if self.waves is not None:
            self.waves.observe(record.ref, record.annotations, record.rollout)
        if self.evictor is not None:
            self.evictor.observe(record)
        version = str((record.raw.get("metadata") or {}).get("resourceVersion", ""))
        if (delta.old is not None and delta.old.template_fingerprint != record.template_fingerprint
                and version == event.resource_version):
            # Someone else's pod-template change (a sync, or one undone): kept with the template
            # before it, so a change of a source made before it is judged against the template in
            # effect then. Only from a watch event, whose version is the change's own: a relist
            # may fold the change together with later writes.
            number = resource_version_number(version)
            self.reconciler.template_changes[record.ref.key] = TemplateChange(
                number, delta.old.template_fingerprint)
            if number is not None:  # owed changes made after it, seen before it: their baseline
                self.ledger.rebase(record.ref.key, number, record.template_fingerprint,
                                   resource_version_number)
            self._undone(record)
        self.index.update(WorkloadKey(record.ref.key), record.ref.namespace, record.refs,
                          explicit=policy.has_explicit_lists(view(record), self.config.keys))
        if self._active.is_set():
            created = delta.old is None and not event.initial
            if created:
                self._owe_earlier_changes(record, version)
            self.pauses.schedule(record)
            if self.state is not None and self.state.loaded:
                self._assume_current(record, created=created)
            old = delta.old
            if old is not None and (old.annotations != record.annotations
                                    or old.template_annotations != record.template_annotations):
                self._retry_after_annotation_change(record.ref.key)

    def _owe_earlier_changes(self, record: WorkloadRecord, version: str) -> None:
        """A workload created before a change it reads, heard of after it (control/latecomers.py)."""
        key = record.ref.key
        for change in self.recent_changes.made_after(version):
            ref = change.meta.ref
            after = SourceMeta(ref) if change.deleted else change.meta
            if WorkloadKey(key) in self.index.candidates(ref) and (
                    change.previous is None or self.touches(key, change.previous, after)):
                log.info("created before a change it reads, heard of after it: owed the change",
                         extra={"object": key, "source": str(ref), "deleted": change.deleted})
                self._add_pending(key, {ref: PendingSource(change.meta, change.deleted,
                                                           detected=self.clock.monotonic())})

    def _gone(self, ref: ObjectRef) -> None:
        """A workload deleted: it owes nothing any more (its entry leaves the ledger and the record),
        unless its adapter deleted it to re-create it (a Job)."""
        for keeper in (self.waves, self.evictor):
            if keeper is not None:
                keeper.forget(ref)
        self.reconciler.template_changes.pop(ref.key, None)
        self.index.remove(WorkloadKey(ref.key))
        if self.state is not None:
            self.state.forget_workload(ref)
        adapter = self.adapters.get(ref.kind)
        if adapter is None or not adapter.deleted_by_us(ref):
            self.ledger.drop(ref.key)

    def _undone(self, record: WorkloadRecord) -> None:
        """A template change back to the template a recorded sync replaced (a rollback, an
        undo): the old ReplicaSet's pods, started before that change, come back, so the change
        is owed again (its ``synced-sources`` entry no longer holds)."""
        sources: dict[SourceRef, PendingSource] = {}
        for ident in syncs.undone(record.annotations, record.template_fingerprint):
            ref = SourceRef.from_local_id(record.ref.namespace, ident)
            meta = self.source(ref) if ref is not None else None
            if meta is not None and meta.hash:
                sources[meta.ref] = PendingSource(meta, detected=self.clock.monotonic(),
                                                  baseline=record.template_fingerprint)
        if sources:
            log.info("template back to the one a sync replaced; the change is owed again",
                     extra={"object": record.ref.key, "sources": sorted(str(r) for r in sources)})
            self._add_pending(record.ref.key, sources)

    def _retry_after_annotation_change(self, key: str) -> None:
        """A workload whose annotations changed, waiting for something they decide — a failure
        only a person can fix, its maintenance window (or a window name that named none), its
        storm brake: try now, as its annotations say now."""
        entry = self.ledger.entry(key)
        if entry is None:
            return
        person = entry.failure is not None and entry.failure.failure is FailureClass.NEEDS_PERSON
        if person or (entry.hold is not None and entry.hold.why in LONG_WAITS):
            log.info("annotations changed; trying the waiting reload now", extra={"object": key})
            self.queue.add(entry.queue_key)

    def _assume_current(self, record: WorkloadRecord, *, created: bool = False) -> None:
        """State store: a ``used-keys`` workload without an entry for a source it uses key by
        key runs with the current keys (unless a reload for that source is pending); so does
        every workload just ``created`` (its first pods read the data as it is now), so a
        restart never takes a change made before it existed for one it missed."""
        assert self.state is not None
        pending = self.ledger.owed(record.ref.key)
        sources = ([Source(meta.ref, self.reconciler.source_hash(record, meta))
                    for meta, _ in self.reconciler.tracked(record) if meta.hash] if created
                   else used_key_sources(self.caches, self.reconciler, record))
        sources = [s for s in sources if s.ref not in pending]
        if sources:
            self.state.assume_current(record.ref, sources)

    def _on_source(self, event: InformerEvent[SourceMeta]) -> None:
        meta = event.delta.new or event.delta.old
        assert meta is not None
        if self.state is not None and self.state.is_shard(meta):
            return  # the store's own ConfigMaps change with every batch: never a reload
        if self.ledger_store is not None and self.ledger_store.is_record(meta.ref):
            return  # likewise the ledger record
        if not event.initial:
            for change in self.changes.changes(event.delta.old, event.delta.new):
                # A delete's version is the event's; otherwise the object's own.
                version = event.resource_version if change.deleted else change.meta.resource_version
                if self.caches.owns_change(change, version):
                    self.changed(change.meta, deleted=change.deleted, previous=change.previous,
                                 version=version)
        if self.state is not None:
            # After the change is pending, so the store holds its new digest back until
            # every workload it reloads has been handled. Every cached source is recorded
            # (other hash shards' never reach the cache), so a namespace that joins this
            # instance later is known too.
            if event.delta.new is not None:
                self.state.observe(event.delta.new)
            else:
                self.state.forget_source(meta.ref)

    def _record_emission(self, request: ReloadRequest, outcome: Outcome) -> None:
        """An applied emission: the state store records what the workload was given."""
        assert self.state is not None
        self.state.emitted(request.ref, (item.source for item in request.items if not item.deleted))

    def _source_refs(self) -> list[SourceRef]:
        return [meta.ref for meta in self.caches.sources()]

    def _workload_refs(self) -> list[ObjectRef]:
        return [record.ref for record in self.workloads()]

    def changed(self, meta: SourceMeta, *, deleted: bool = False,
                previous: SourceMeta | None = None, version: str = "") -> None:
        """A source's data changed: make every workload that may use it pending.

        ``previous`` is the source before the change (None: unknown); a ``used-keys``
        workload none of whose keys it touched is left alone. A deletion (``deleted``,
        ``meta`` the source as it was, ``version`` the delete's resourceVersion) is judged by
        the same rule, as every key disappearing: it touches a workload whose keys the source
        had.
        """
        self.metrics.change_detected(meta.ref.kind.kube_kind)
        self.recent_changes.note(meta, previous, deleted=deleted, version=version)
        candidates = self.index.candidates(meta.ref)
        log.debug("source changed", extra={"object": str(meta.ref), "candidates": len(candidates)})
        after = SourceMeta(meta.ref) if deleted else meta
        delay = self._coalesce(meta.ref) if candidates else 0.0
        for key in candidates:
            if previous is not None and not self.touches(key, previous, after):
                continue
            self._add_pending(key, {meta.ref: PendingSource(
                meta, deleted, detected=self.clock.monotonic())}, delay)

    def _coalesce(self, ref: SourceRef) -> float:
        """The coalescing wait for a change of ``ref``: the window, stretched while the source
        keeps changing (:class:`~gitops_reloader.control.brakes.SourceBackoff`)."""
        window = self.config.runtime.coalesce_window
        if self.backoff is None:
            return window
        delay = self.backoff.delay(str(ref), window, self.clock.monotonic())
        if delay > window:
            self.metrics.source_backoff(ref.kind.kube_kind)
            log.info("source keeps changing; its coalescing is stretched",
                     extra={"object": str(ref), "wait": round(delay, 1)})
        return delay

    def touches(self, key: str, previous: SourceMeta, meta: SourceMeta) -> bool:
        """Whether the change ``previous`` → ``meta`` touches a key workload ``key`` reloads
        for (always, unless it is a ``used-keys`` workload using the source key by key)."""
        record = self.workload(ObjectRef.from_key(key))
        if record is None or usedkeys.touched(previous, meta, self.reconciler.key_scope(record, meta.ref)):
            return True
        self.metrics.unused_key_change(meta.ref.kind.kube_kind)
        log.debug("change touches no key the workload uses", extra={"object": str(meta.ref), "workload": key})
        return False

    def class_changed(self, meta: SourceMeta, owners: frozenset[ObjectRef] | None) -> None:
        """A pod reported new versions of a SecretProviderClass (CSI informer thread).

        Candidates are the workloads using the class; with the pod's owners known, only
        those among them (their pods are the ones that saw the new versions); unknown
        owners (pod gone or unreadable) leave every user of the class, as Stakater does.
        Several pods of one workload land on the same pending entry: one reload. The
        change is counted after queuing (tests wait on the counter).
        """
        candidates = self.index.candidates(meta.ref)
        if owners is not None:
            candidates = frozenset(k for k in candidates if ObjectRef.from_key(k) in owners)
        log.debug("SecretProviderClass changed",
                  extra={"object": str(meta.ref), "candidates": len(candidates)})
        for key in candidates:
            self._add_pending(key, {meta.ref: PendingSource(meta, detected=self.clock.monotonic())})
        self.metrics.change_detected(meta.ref.kind.kube_kind)

    def _add_pending(self, key: str, sources: Mapping[SourceRef, PendingSource],
                     delay: float | None = None) -> None:
        """Workload ``key`` owes ``sources``: into the ledger (with the template each change was
        made under), due after the coalescing window (``delay``: stretched) or its hold."""
        record = self.workload(ObjectRef.from_key(key))
        group = self._group_of(record) if record is not None else None
        if record is not None:
            sources = {ref: replace(p, baseline=p.baseline or self._baseline(record, p),
                                    raced=p.raced or (record.rolling and not p.resync))
                       for ref, p in sources.items()}
        wait = self.config.runtime.coalesce_window if delay is None else delay
        self.ledger.owe(key, sources, group=group or "", hold=Hold(Wait.COALESCING, self.clock.now() + wait))
        # When the new change is due; the rest of its group (maybe under way right now) is put
        # back by the worker when its run ends.
        self.queue.add_after(group or key, wait)

    def _baseline(self, record: WorkloadRecord, source: PendingSource) -> int:
        """The pod template's fingerprint when ``source`` changed (:mod:`gitops_reloader.syncs`)."""
        change = self.reconciler.template_changes.get(record.ref.key)
        current = record.template_fingerprint
        return change.baseline(source.meta.resource_version, current) if change is not None else current

    def _schedule_due(self, queue_key: str) -> None:
        """Put ``queue_key`` on the work queue for when the ledger says it is due (nothing when
        its workloads wait for an event: a wave's grant)."""
        now = self.clock.now()
        when = self.ledger.due_of(queue_key, now)
        if when is not None:
            self.queue.add_after(queue_key, max(0.0, when - now))

    def _schedule(self, key: str, delay: float) -> None:
        """Put ``key`` on the work queue now or after ``delay`` seconds (the waves' grants).

        A granted workload of a batch sink goes back through its batch group after the
        coalescing window, so that the grants of one window (a wave, or rollouts completing
        close together) make one commit per repository; until written they count against
        the budget.
        """
        if key != WAVES_KEY:
            entry = self.ledger.entry(key)
            if entry is not None and entry.hold is not None and entry.hold.why is Wait.BUDGET:
                self.ledger.hold(key, None)  # granted: no longer waiting for the budget
            record = self.workload(ObjectRef.from_key(key))
            group = entry.queue_key if entry is not None else (
                self._group_of(record) if record is not None else None) or key
            if group != key:
                key, delay = group, max(delay, self.config.runtime.coalesce_window)
        if delay > 0:
            self.queue.add_after(key, delay)
        else:
            self.queue.add(key)

    def _group_of(self, record: WorkloadRecord) -> str | None:
        """The batch group (``batch|...``) ``record`` is worked under with a batch sink; None: its
        own key."""
        sink = self.reconciler.sink_for(record)
        group_key = getattr(sink, "group_key", None)
        if group_key is None:
            return None
        try:
            return BATCH_PREFIX + group_key(record)
        except ReloaderError as exc:
            self.reconciler.warn(record, "CannotGroup", str(exc))
            return None

    def requests_for_change(self, meta: SourceMeta, *,
                            previous: SourceMeta | None = None) -> list[ReloadRequest]:
        """What a data change to ``meta`` would ask of each workload, queuing nothing.

        ``gitops-reloader plan`` calls this with a hypothetical ``meta`` (the new hash):
        the same watched-or-not check, index candidates, policy items and, for batch
        sinks, tracked sources as a real change. Nothing is recorded or written (with no
        recorder, invalid annotations are only logged).
        """
        if not self.namespace_allowed(meta.ref.namespace) or self.source(meta.ref) is None:
            return []  # filtered out: the controller never sees this change
        candidates = self.index.candidates(meta.ref)
        requests: list[ReloadRequest] = []
        for key in sorted(candidates):
            record = self.workload(ObjectRef.from_key(key))
            if record is None or (not record.has_template and record.ref.kind != "CronJob"):
                continue
            if previous is not None and not self.touches(key, previous, meta):
                continue
            lookup = {meta.ref: meta}
            items = self.reconciler.items(record, {meta.ref: PendingSource(meta)}, lookup=lookup.get)
            if items:
                requests.append(ReloadRequest(record.ref, record, tuple(items), int(self.clock.now()),
                                              tracked=self.reconciler.tracked_sources(record)))
        return requests

    # --- workers -------------------------------------------------------------------

    def _worker(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            try:
                if key.startswith(UNPAUSE_PREFIX):
                    self.pauses.unpause(key)
                elif key == WAVES_KEY and self.waves is not None:
                    self.waves.dispatch()
                elif key.startswith(BATCH_PREFIX):
                    self.reconciler.sync_batch(key)
                else:
                    self.reconciler.sync(key)
                self.queue.forget(key)
            except ReloaderError as exc:
                self._failed(key, exc)
            except Exception as exc:  # a bug: report, keep the worker alive
                log.exception("unexpected error while reloading", extra={"object": key})
                self._failed(key, ReloaderError(f"internal error: {type(exc).__name__}"))
            finally:
                self.metrics.set_pending_failures(self.ledger.counts())
                self._schedule_due(key)  # what is still owed: when the ledger says it is due
                self.queue.done(key)

    def _failed(self, key: str, exc: ReloaderError) -> None:
        """A failed attempt: recorded in the ledger with its next try (:class:`Failing`). A step
        that is no reload (waves, unpause) gets the queue's own backoff."""
        self.metrics.queue_retry()
        if not self.failing.failed(key, exc):
            log.info("step failed, will retry",
                     extra={"object": key, "error": str(exc), "attempt": self.queue.num_requeues(key) + 1})
            self.queue.add_rate_limited(key, retry_after=exc.retry_after, cap=self.retry.cap)

    def _warn_ref(self, ref: ObjectRef, reason: str, message: str) -> None:
        self.reconciler.warn_ref(ref, reason, message)

    def _sink_of_key(self, key: str) -> str | None:
        record = self.workload(ObjectRef.from_key(key))
        return self.sink_name(record) if record is not None else None

    def retry_waiting_for_a_person(self, why: str) -> int:
        """An input a person fixes changed (a mounted credential file, a repository usable
        again): try every failure of that class again now. Returns how many were re-queued."""
        keys = self.failing.waiting_for_a_person()
        for key in keys:
            self.queue.add(key)
        if keys:
            log.info("retrying failing emissions now: an input changed",
                     extra={"why": why, "keys": len(keys)})
        return len(keys)


class _MetricsObserver:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def watch_restarted(self, resource: str, reason: str) -> None:
        self.metrics.watch_restart(resource, reason)

    def api_error(self, verb: str, resource: str, code: int) -> None:
        self.metrics.api_error(verb, resource, code)
