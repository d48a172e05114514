"""One workload (or one batch group) from its pending changes to an emission.

:class:`Reconciler` is what a worker calls for a queue key: it reads the *current*
workload and sources from the caches, asks the policy which pending sources this
workload reloads for, hands one :class:`ReloadRequest` to the workload's sink (or one
batch to a batch sink), and reports the outcome as a log line, metrics, an Event and to
the listeners. A failure puts the pending sources back before it is re-raised: the
controller retries it until it succeeds (a newer change of a source replaces it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gitops_reloader import policy, syncs, usedkeys
from gitops_reloader.clock import Clock
from gitops_reloader.config import Config
from gitops_reloader.control.brakes import Rate, StormBrakes, parse_rate
from gitops_reloader.control.caches import OVERRIDE_MANAGER, Caches, SourcesByNamespace
from gitops_reloader.control.changes import PendingChanges, PendingSource
from gitops_reloader.control.waves import Waves
from gitops_reloader.errors import KubeNotFound, ReloaderError
from gitops_reloader.kube.api import MERGE, KubeApi
from gitops_reloader.kube.events import EventRecorder
from gitops_reloader.kube.workloads import WorkloadAdapter, WorkloadRecord
from gitops_reloader.model import (
    CONFIG_HASH_KEY,
    EMPTY_MAP,
    ObjectRef,
    Outcome,
    OutcomeStatus,
    ReloadItem,
    ReloadOn,
    ReloadRequest,
    SinkName,
    Source,
    SourceMeta,
    SourceRef,
)
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.queue import WorkQueue
from gitops_reloader.rollout.eviction import (
    EVICTION_ANNOTATION,
    EVICTION_STRATEGY,
    STRATEGY_ANNOTATION,
    EvictionRecord,
    strategy_wanted,
)
from gitops_reloader.rollout.marker import Marker
from gitops_reloader.sinks.base import Sink
from gitops_reloader.sinks.eviction import EVICTION_SINK
from gitops_reloader.syncs import TemplateChange
from gitops_reloader.windows import ReloadWindow

log = logging.getLogger(__name__)

LIVE_SINKS = frozenset({SinkName.ENV_VARS, SinkName.ANNOTATIONS})
"""The sinks whose write an eviction follows (a git commit reaches the cluster later)."""
EVICTING_SINKS = LIVE_SINKS | {EVICTION_SINK}
"""The sinks after whose write the evictor restarts the pods (the eviction sink's is the record alone)."""

Listener = Callable[[ReloadRequest, Outcome], None]
Held = Callable[[str, str, Outcome], None]
"""``(queue key, workload key, outcome)``: a sink held one workload's reload back for a reason
a person can fix; its pending sources are back (and, for a batch sink, it is in the group
again, the queue key)."""


def choose_sink(config: Config, record: WorkloadRecord) -> tuple[str | None, str]:
    """The sink for ``record`` (None: the annotation names no known sink) and why, in words.

    ``--webhook-url`` wins; then a kind with no pod template has the eviction sink; then the
    sink annotation (workload, else pod template); then ``--default-sink``; then
    ``--reload-strategy``.
    """
    behaviour = config.behaviour
    if behaviour.webhook_url:
        return SinkName.WEBHOOK, "--webhook-url is set"
    if not record.template_path:
        return EVICTION_SINK, "its kind has no pod template: its pods are restarted by eviction"
    key = config.keys.sink
    chosen = record.annotations.get(key) or record.template_annotations.get(key)
    if chosen:
        sink = SinkName.from_annotation(chosen)
        if sink is None:
            return None, f"annotation {key}={chosen[:64]!r} names no known sink"
        return sink, f"annotation {key}"
    if behaviour.default_sink:
        return behaviour.default_sink, "--default-sink"
    return behaviour.reload_strategy, "--reload-strategy"


def eviction_wanted(config: Config, record: WorkloadRecord) -> tuple[bool, str]:
    """Whether ``record``'s pods are restarted by eviction after its write, and why
    (:func:`~gitops_reloader.rollout.eviction.strategy_wanted` for ``--eviction``)."""
    return strategy_wanted(config.rollouts.eviction, record.annotations,
                           rolls_on_write=record.rolls_on_write, has_template=bool(record.template_path))


def written_record(recorder: Callable[[WorkloadRecord, SourceRef, str | None], str | None] | None,
                   record: WorkloadRecord, ref: SourceRef, container: str | None) -> str | None:
    """What a workload's sink wrote for ``ref`` in its pod template: the sink's own per-source
    record (``recorder``: a live sink's ``recorded_hash``), else the git digest (None: nothing)."""
    if recorder is not None:
        return recorder(record, ref, container)
    return record.template_annotations.get(CONFIG_HASH_KEY)


def view(record: WorkloadRecord) -> policy.WorkloadView:
    """What the policy reads of a workload record."""
    return policy.WorkloadView(record.ref, record.annotations, record.template_annotations,
                               record.refs)


class Reconciler:
    """Turns a workload's pending changes into one emission and reports its outcome."""

    def __init__(self, config: Config, caches: Caches, pending: PendingChanges,
                 queue: WorkQueue[str], *, sinks: Mapping[str, Sink],
                 adapters: Mapping[str, WorkloadAdapter], metrics: Metrics, clock: Clock,
                 recorder: EventRecorder | None = None, listeners: Iterable[Listener] = (),
                 waves: Waves | None = None, on_held: Held | None = None,
                 on_emitted: Callable[[str], None] | None = None, brakes: StormBrakes | None = None,
                 api: KubeApi | None = None) -> None:
        self.config = config
        self.caches = caches
        self.pending = pending
        self.queue = queue
        self.sinks = sinks
        self.adapters = adapters
        self.metrics = metrics
        self.clock = clock
        self.recorder = recorder
        self.listeners = tuple(listeners)
        self.waves = waves
        self.on_held = on_held
        self.on_emitted = on_emitted
        """Called with a workload key whose emission went through (a held one is released)."""
        self.brakes = brakes
        self.api = api
        """Writes the synced-sources annotation (None: nothing is recorded, e.g. in unit tests)."""
        self.template_changes: dict[str, TemplateChange] = {}
        """Workload key → its last pod-template change by someone else since start (syncs.py)."""
        self._throttled: set[str] = set()
        self._waiting: set[str] = set()
        """Workload keys waiting for their maintenance window."""
        self._parked: set[str] = set()
        """Workload keys whose resync check waits for the window (nothing known to have changed)."""
        self._overrides: dict[SourceRef, tuple[str, str]] = {}
        """Source → its last ``reload-now`` value and the source version that value let through
        a window (one entry a source: a new value replaces the old one)."""
        self._admitted: dict[str, float] = {}
        """Workload key → when its storm-brake slot was reserved (given back if nothing applied)."""
        self.options = policy.PolicyOptions(keys=config.keys,
                                            auto_reload_all=config.behaviour.auto_reload_all)

    # --- what a workload tracks ----------------------------------------------------

    def sink_name(self, record: WorkloadRecord) -> str | None:
        """The sink for this workload (None: the annotation names no known sink)."""
        return choose_sink(self.config, record)[0]

    def sink_for(self, record: WorkloadRecord) -> Sink | None:
        return self.sinks.get(self.sink_name(record) or "")

    def tracked(self, record: WorkloadRecord, by_namespace: SourcesByNamespace | None = None,
                ) -> list[tuple[SourceMeta, str | None]]:
        """Every cached source the policy says this workload reloads for, with its container."""
        workload = view(record)
        explicit = policy.has_explicit_lists(workload, self.config.keys)
        out: list[tuple[SourceMeta, str | None]] = []
        for kind in self.caches.source_kinds():
            if explicit:
                metas = (by_namespace.get((kind, record.ref.namespace), []) if by_namespace is not None
                         else self.caches.sources_in(kind, record.ref.namespace))
            else:
                found = (self.caches.source(SourceRef(kind, record.ref.namespace, n))
                         for n in sorted(record.refs.names(kind)))
                metas = [m for m in found if m is not None]
            for meta in metas:
                decision = policy.decide(workload, meta, self.options)
                if decision.reload:
                    out.append((meta, decision.container))
        return out

    def tracked_sources(self, record: WorkloadRecord) -> tuple[Source, ...]:
        """The hashed sources this workload tracks (a batch sink records them all)."""
        return tuple(Source(m.ref, self.source_hash(record, m)) for m, _ in self.tracked(record) if m.hash)

    def reload_on(self, record: WorkloadRecord) -> tuple[ReloadOn, str | None]:
        """The workload's ``--reload-on`` mode and an annotation value naming none (to report)."""
        return usedkeys.reload_on(record.annotations, record.template_annotations,
                                  self.config.keys.reload_on, self.config.behaviour.reload_on)

    def key_scope(self, record: WorkloadRecord, ref: SourceRef) -> frozenset[str] | None:
        """The keys of ``ref`` this workload reloads for; None: the whole object."""
        return usedkeys.key_scope(self.reload_on(record)[0], record.refs, ref)

    def source_hash(self, record: WorkloadRecord, meta: SourceMeta) -> str:
        """The value this workload records for ``meta``: over its used keys in ``used-keys``
        mode, else (and for sources used whole) the Stakater hash."""
        return usedkeys.source_hash(meta, self.key_scope(record, meta.ref))

    def recorded_hash(self, record: WorkloadRecord, meta: SourceMeta,
                      container: str | None) -> str | None:
        """The hash the workload runs with for ``meta`` by its own records (None: none): the
        one a sync brought (``synced-sources``) while it holds, else what its sink recorded."""
        recorder = getattr(self.sink_for(record), "recorded_hash", None)
        written = written_record(recorder, record, meta.ref, container)
        return syncs.runs_with(record.annotations, meta.ref, written, recorder is not None)[0]

    def record_of(self, record: WorkloadRecord, ref: SourceRef, container: str | None) -> str | None:
        """What the workload's sink wrote for ``ref`` in the pod template (:func:`written_record`)."""
        return written_record(getattr(self.sink_for(record), "recorded_hash", None), record, ref, container)

    def items(self, record: WorkloadRecord, pending: Mapping[SourceRef, PendingSource], *,
              lookup: Callable[[SourceRef], SourceMeta | None] | None = None) -> list[ReloadItem]:
        """The pending sources the policy says this workload reloads for.

        ``lookup`` reads a source's current meta (the cache by default).
        """
        workload = view(record)
        mode, invalid_mode = self.reload_on(record)
        if invalid_mode is not None:
            self.metrics.invalid_annotation(record.ref.kind)
            self.warn(record, "InvalidAnnotation",
                      f"annotation {self.config.keys.reload_on}={invalid_mode!r} names no mode "
                      f"({', '.join(ReloadOn)}); using --reload-on={mode}")
        items: list[ReloadItem] = []
        for ref, item in pending.items():
            meta = item.meta if item.deleted else (lookup or self.caches.source)(ref)
            if meta is None:
                continue  # deleted since the change; a delete is its own event
            if item.detected is not None and not self.caches.still_owns(item.meta):
                log.info("namespace handed to another shard since the change; not ours to reload",
                         extra={"object": str(ref), "workload": record.ref.key})
                continue
            if not meta.hash and not item.deleted:
                log.error("no hash for source, skipped", extra={"object": str(ref)})
                continue
            decision = policy.decide(workload, meta, self.options)
            if decision.invalid_patterns:
                self.metrics.invalid_annotation(record.ref.kind)
                self.warn(record, "InvalidAnnotation",
                          "invalid regex in reload list, entry skipped: "
                          + policy.shown_patterns(decision.invalid_patterns))
            if decision.oversized:
                self.metrics.invalid_annotation(record.ref.kind)
                self.warn(record, "AnnotationTooLarge",
                          f"annotation {', '.join(decision.oversized)} is over "
                          f"{policy.MAX_LIST_BYTES} bytes or {policy.MAX_LIST_ENTRIES} entries; "
                          "ignored")
            if decision.reload:
                data_hash = meta.hash if item.deleted else usedkeys.source_hash(
                    meta, usedkeys.key_scope(mode, record.refs, ref))
                items.append(ReloadItem(Source(ref, data_hash), decision.container, item.deleted,
                                        version=meta.resource_version))
        return items

    # --- one workload --------------------------------------------------------------

    def sync(self, key: str) -> None:
        """Emit what is pending for one workload key (raises on failure, pending kept on retry)."""
        pending = self.pending.take(key)
        if not pending:
            return
        ref = ObjectRef.from_key(key)
        record = self.caches.workload(ref)
        if record is None and ref.kind in self.adapters:
            record = self.adapters[ref.kind].orphan(ref)  # e.g. a Job deleted, not yet re-created
        if record is None:
            return
        try:
            emitted = self._emit(record, pending)
        except ReloaderError as exc:
            # Never dropped: pending until it succeeds or a newer change of a source replaces it.
            self.pending.add(key, pending, retry=True)
            self.metrics.reload_executed(False, ref.namespace)
            self.warn(record, "ReloadFailed", f"reload failed, still pending: {exc}")
            raise
        finally:
            if self.waves is not None:
                self.waves.release(record.ref)  # a grant no write used goes back
        if emitted is None:
            return
        request, outcome = emitted
        if outcome.held and self.on_held is not None:
            self.pending.add(key, pending, retry=True)  # not dropped: a person can fix it
            self.on_held(key, key, outcome)
            return
        if self.on_emitted is not None:
            self.on_emitted(key)
        self._observe_latency(outcome, pending.values())
        self.report(record, request, outcome)

    def _emit(self, record: WorkloadRecord,
              pending: Mapping[SourceRef, PendingSource]) -> tuple[ReloadRequest, Outcome] | None:
        items = self.items(record, pending)
        if not items:
            return None
        name = self.sink_name(record)
        if not record.has_template and record.ref.kind != "CronJob" and name != EVICTION_SINK:
            log.info("workload has no pod template (e.g. a Rollout with workloadRef), skipped",
                     extra={"object": record.ref.key})
            return None
        sink = self.sinks.get(name or "")
        if self.refused(record, name or "unknown"):
            return None
        if sink is None and name == EVICTION_SINK:
            self.metrics.sink_error(EVICTION_SINK, "eviction-off")
            self.warn(record, "EvictionDisabled", "its kind has no pod template, so only eviction can "
                      "restart its pods, and the controller runs with --eviction=off; not reloaded")
            return None
        if sink is None:
            self.metrics.sink_error(name or "unknown", "unknown-sink")
            self.warn(record, "UnknownSink",
                      f"{self.config.keys.sink} names no available sink; not reloaded")
            return None
        items, restart = self._settle_synced(record, items, pending, sink.name)
        key = record.ref.key
        if not items or self._outside_window(record, pending, key) or self._braked(record, pending, key):
            return None
        marker, annotations = None, EMPTY_MAP
        if self.waves is not None and self.waves.gates(name, record.ref):
            sources = [item.source for item in items]
            if not self.waves.admit(record.ref, record.annotations, sources, _oldest(pending.values())):
                self.pending.add(record.ref.key, pending, retry=True)  # waits; a newer change joins it
                self._reloaded(record, None)
                return None
            marker = self.waves.marker(sources)
            annotations = self.waves.annotations(marker)
        # A live write replaces the synced entries of what it writes (the pods it rolls read it).
        annotations = {**annotations, **syncs.dropped(record.annotations, [i.source.ref for i in items]),
                       **self.eviction_record(record, sink.name)}
        request = ReloadRequest(record.ref, record, tuple(items), int(self.clock.now()),
                                workload_annotations=annotations, restart=restart)
        with self.metrics.time_emit(sink.name):
            try:
                outcome = sink.emit(request)
            except ReloaderError as exc:
                self._reloaded(record, None)
                self.metrics.sink_outcome(sink.name, "error")
                self.metrics.sink_error(sink.name, type(exc).__name__)
                if isinstance(exc, KubeNotFound):
                    return None  # the workload is gone
                raise
        self.metrics.sink_outcome(sink.name, outcome.status.value)
        self._reloaded(record, outcome)
        if marker is not None and self.waves is not None and outcome.status is OutcomeStatus.APPLIED:
            self.waves.started(record.ref, marker)
        return request, outcome

    # --- one batch group -----------------------------------------------------------

    def sync_batch(self, group: str) -> None:
        """One emission for every workload of a batch group (e.g. one git commit)."""
        pending = self.pending.take_group(group)
        requests: list[tuple[str, WorkloadRecord, ReloadRequest]] = []
        markers: dict[str, Marker] = {}
        sink: Any = None
        for key, sources in pending.items():
            record = self.caches.workload(ObjectRef.from_key(key))
            if record is None or not sources:
                continue
            items = self.items(record, sources)
            name = self.sink_name(record) or "unknown"
            if items and not self.refused(record, name):
                items, restart = self._settle_synced(record, items, sources, name)
                if not items:
                    continue
                if self._outside_window(record, sources, group) or self._braked(record, sources, group):
                    self.pending.join_group(group, key)
                    continue
                sink = self.sink_for(record)
                self.eviction_record(record, name)  # a commit carries none: warns if one is asked for
                marked: Mapping[str, str] = EMPTY_MAP
                if self._budgeted(sink, record):
                    assert self.waves is not None
                    changed = [item.source for item in items]
                    oldest = _oldest(sources.values())
                    if not self.waves.admit(record.ref, record.annotations, changed, oldest):
                        self.pending.add(key, sources, retry=True)  # waits for a later wave's commit
                        self.pending.join_group(group, key)
                        self._reloaded(record, None)
                        continue
                    markers[key] = self.waves.marker(changed)
                    marked = self.waves.annotations(markers[key])
                resync = all(p.resync for p in sources.values())
                requests.append((key, record, ReloadRequest(
                    record.ref, record, tuple(items), int(self.clock.now()),
                    tracked=self.tracked_sources(record), resync=resync, workload_annotations=marked,
                    restart=restart)))
        if not requests or sink is None:
            return
        try:
            with self.metrics.time_emit(sink.name):
                outcomes = sink.emit_batch([r for _, _, r in requests])
        except ReloaderError as exc:
            self.metrics.sink_outcome(sink.name, "error")
            self.metrics.sink_error(sink.name, type(exc).__name__)
            for key, record, _ in requests:  # never dropped: pending until it succeeds
                self._reloaded(record, None)
                self.pending.add(key, pending[key], retry=True)
                self.pending.join_group(group, key)
                self.metrics.reload_executed(False, record.ref.namespace)
                self.warn(record, "ReloadFailed", f"{sink.name} sink, still pending: {exc}")
            raise
        for (key, record, request), outcome in zip(requests, outcomes, strict=True):
            if key in markers and self.waves is not None:
                if outcome.status is OutcomeStatus.APPLIED:
                    self.waves.started(record.ref, markers[key])  # rolling once the engine applies it
                else:
                    self.waves.release(record.ref)
            self.metrics.sink_outcome(sink.name, outcome.status.value)
            self._reloaded(record, outcome)
            if outcome.held and not request.resync and self.on_held is not None:
                self.pending.add(key, pending[key], retry=True)  # not dropped: a person can fix it
                self.pending.join_group(group, key)
                self.on_held(group, key, outcome)
                continue
            if self.on_emitted is not None:
                self.on_emitted(key)
            self._observe_latency(outcome, pending[key].values())
            self.report(record, request, outcome)

    # --- one rollout per sync ------------------------------------------------------

    def _settle_synced(self, record: WorkloadRecord, items: list[ReloadItem],
                       pending: Mapping[SourceRef, PendingSource],
                       sink: str) -> tuple[list[ReloadItem], bool]:
        """The items still to emit, and whether that write must restart the pods
        (:attr:`~gitops_reloader.model.ReloadRequest.restart`).

        An item whose data a sync already brought (the workload's ``synced-sources`` entry
        holds its hash) is dropped; so is one whose change someone else's later pod-template
        change rolled (:mod:`gitops_reloader.syncs`), after it is recorded as synced.
        """
        # A CronJob's reload runs a Job now, which no change of its template does; a Job's is immutable.
        rolls = record.ref.kind not in ("CronJob", "Job")
        change = self.template_changes.get(record.ref.key) if rolls else None
        left: list[ReloadItem] = []
        newly: list[tuple[SourceRef, str, str | None]] = []
        restart = False
        for item in items:
            ref = item.source.ref
            recorded = self.record_of(record, ref, item.container)
            synced = syncs.synced_hash(record.annotations, ref, recorded)
            seen = pending.get(ref)
            if item.deleted:
                left.append(item)
            elif synced == item.source.hash:
                continue
            elif (change is not None and seen is not None and seen.detected is not None
                  and change.after(item.version, seen.detected)):
                newly.append((ref, item.source.hash, recorded))
            else:
                restart = restart or syncs.needs_restart(synced, item.source.hash)
                left.append(item)
        if newly:
            self._record_synced(record, newly, sink)
        return left, restart

    def _record_synced(self, record: WorkloadRecord, synced: list[tuple[SourceRef, str, str | None]],
                       sink: str) -> None:
        """Record changes a sync rolled in the workload's ``synced-sources`` annotation (its
        metadata: no rollout, no drift), with a Normal Event, a log line and a metric."""
        names = ", ".join(f"{ref.kind.kube_kind}/{ref.name}" for ref, _, _ in synced)
        message = (f"{names} changed before the pod template did (a sync, an upgrade): its new pods "
                   "read the new data, so the change is recorded without a second rollout")
        if self.config.runtime.dry_run:
            log.info("would record a change a sync rolled (dry run)", extra={"object": record.ref.key,
                                                                              "detail": names})
            return
        if self.api is not None:
            patch = {"metadata": {"annotations": {
                syncs.SYNCED_ANNOTATION: syncs.with_synced(record.annotations, synced)}}}
            self.api.patch(self.adapters[record.ref.kind].resource, record.ref.namespace, record.ref.name,
                           patch, content_type=MERGE)
        self.metrics.reload_synced(sink)
        log.info("change already rolled by a sync; no second rollout",
                 extra={"object": record.ref.key, "detail": names, "sink": sink})
        self.note(record, "ReloadSynced", message)

    # --- eviction ---------------------------------------------------------------------

    def evicts(self, record: WorkloadRecord) -> tuple[bool, str]:
        """Whether this workload's pods are restarted by eviction after its write, and why
        (:func:`eviction_wanted`)."""
        return eviction_wanted(self.config, record)

    def eviction_record(self, record: WorkloadRecord, sink: str) -> dict[str, str]:
        """The eviction record a live write carries (the evictor restarts the pods from it), or
        nothing; a workload that asks for eviction where it cannot be done gets a Warning Event."""
        if sink == EVICTION_SINK:
            return {}  # the eviction sink writes the record itself
        wanted, why = self.evicts(record)
        if not wanted:
            if why == "--eviction=off" and STRATEGY_ANNOTATION in record.annotations:
                self.warn(record, "EvictionDisabled", f"{STRATEGY_ANNOTATION}={EVICTION_STRATEGY} is set, "
                          "but the controller runs with --eviction=off: the write restarts no pod")
            return {}
        if sink not in LIVE_SINKS:
            self.warn(record, "EvictionNotSupported", f"restart by eviction ({why}) follows a live write; "
                      f"the {sink} sink's change restarts no pod of this workload by itself")
            return {}
        return {EVICTION_ANNOTATION: EvictionRecord(since=int(self.clock.now())).encode()}

    def holding(self) -> set[str]:
        """The workload keys a storm brake or a closed maintenance window holds now (their
        change waits for a time, not for work)."""
        return self._throttled | self._waiting | self._parked

    def _outside_window(self, record: WorkloadRecord, pending: Mapping[SourceRef, PendingSource],
                        queue_key: str) -> bool:
        """Whether ``record``'s maintenance window is closed now: then its change waits (pending, a
        newer one replaces it) and ``queue_key`` comes back when the window opens. A Normal Event
        when it starts waiting and when it is released."""
        if not self.config.runtime.reload_windows.windows:
            return False
        key = record.ref.key
        try:
            window = self.caches.reload_window(record)
        except ReloaderError as exc:  # an unknown name: hold rather than restart outside a window
            self.metrics.invalid_annotation(record.ref.kind)
            self.warn(record, "InvalidAnnotation", f"{self.config.keys.reload_window}: {exc}; the reload "
                      "waits until the annotation names a window")
            self._wait(key, pending, queue_key, self.config.runtime.retry_max_delay)
            return True
        wait = window.opens_in(self.clock.now()) if window is not None else 0.0
        overridden = wait > 0 and self._let_through(record, pending, window)  # type: ignore[arg-type]
        if wait <= 0 or overridden:
            self._parked.discard(key)
            if key in self._waiting:
                self._waiting.discard(key)
                self.metrics.set_waiting_for_window(len(self._waiting))
                if not overridden:
                    opened = window.describe(self.clock.now()) if window else "no window"
                    self.note(record, "ReloadWindowOpen", f"{opened}: the reload goes ahead")
            return False
        self._wait(key, pending, queue_key, wait)
        if all(p.resync for p in pending.values()):
            self._parked.add(key)
            return True  # a resync check (nothing known to have changed): it waits, unannounced
        self._parked.discard(key)
        if key not in self._waiting:
            self._waiting.add(key)
            self.metrics.set_waiting_for_window(len(self._waiting))
            message = f"waiting for {window.describe(self.clock.now())}"  # type: ignore[union-attr]
            self.note(record, "ReloadWaitingForWindow", message)
            log.info("reload waits for its maintenance window", extra={"object": key, "detail": message})
        return True

    def _wait(self, key: str, pending: Mapping[SourceRef, PendingSource], queue_key: str,
              delay: float) -> None:
        """Keep ``key``'s change pending (a newer one replaces it) and bring ``queue_key`` back
        after ``delay`` seconds: a closed window or a storm brake holds it until then."""
        self.pending.add(key, pending, retry=True)
        self.queue.add_after(queue_key, delay)

    def _let_through(self, record: WorkloadRecord, pending: Mapping[SourceRef, PendingSource],
                     window: ReloadWindow) -> bool:
        """Whether a pending source carries ``reload-now``: its value lets one change through closed
        windows (every workload of that change, no later one), with a Normal Event saying who set
        it: the field manager the API server recorded, beside the value as written."""
        key = self.config.keys.reload_now
        for ref, item in pending.items():
            meta = self.caches.source(ref)
            value = meta.annotations.get(key) if meta is not None else None
            if not value:
                continue
            version = item.meta.resource_version
            used = self._overrides.get(ref)
            if used is not None and used[0] == value and used[1] != version:
                continue  # that value already let an earlier change through
            self._overrides[ref] = (value, version)
            manager = meta.annotations.get(OVERRIDE_MANAGER) or "unknown"  # type: ignore[union-attr]
            shown = "".join(ch for ch in value[:64] if ch.isprintable())
            self.note(record, "ReloadWindowOverride",
                      f"let through {window.describe(self.clock.now())}: {ref} is annotated {key}={shown!r} "
                      f"(set by field manager {manager})")
            log.info("reload let through a closed window", extra={
                "object": record.ref.key, "source": str(ref), "field_manager": manager})
            return True
        return False

    def reload_rate(self, record: WorkloadRecord) -> Rate | None:
        """The workload's storm brake: its ``max-reloads`` annotation, else the flag's."""
        default = self.brakes.per_workload if self.brakes is not None else None
        text = record.annotations.get(self.config.keys.max_reloads)
        if text is None:
            return default
        try:
            return parse_rate(text)
        except ValueError as exc:
            self.metrics.invalid_annotation(record.ref.kind)
            self.warn(record, "InvalidAnnotation", f"{self.config.keys.max_reloads}: {exc}; using the "
                      f"default {default or 'no limit'}")
            return default

    def _braked(self, record: WorkloadRecord, pending: Mapping[SourceRef, PendingSource],
                queue_key: str) -> bool:
        """Whether a storm brake holds ``record`` now: then its change waits (pending, a newer one
        replaces it), ``queue_key`` comes back when the brake allows, and the first hold of an
        episode gets a ``ReloadThrottled`` Warning Event."""
        if self.brakes is None:
            return False
        rate = self.reload_rate(record)
        now = self.clock.monotonic()
        wait, scope = self.brakes.admit(record.ref.key, rate, now)
        if wait <= 0:
            self._admitted[record.ref.key] = now
            return False
        self._wait(record.ref.key, pending, queue_key, wait)
        if record.ref.key not in self._throttled:
            self._throttled.add(record.ref.key)
            self.metrics.reload_throttled(scope, len(self._throttled))
            limit = rate if scope == "workload" else self.brakes.cluster
            what = "this workload" if scope == "workload" else "the cluster"
            self.warn(record, "ReloadThrottled",
                      f"storm brake: {what} reached {limit} reloads; the change waits and the latest data "
                      f"is applied in {wait:.0f}s")
            log.warning("reload throttled", extra={"object": record.ref.key, "scope": scope,
                                                   "limit": str(limit), "wait": round(wait, 1)})
        return True

    def _reloaded(self, record: WorkloadRecord, outcome: Outcome | None) -> None:
        """An emission ended (``None``: it failed): an applied reload keeps its storm-brake
        slot, anything else gives it back."""
        admitted = self._admitted.pop(record.ref.key, None)
        if self.brakes is None or admitted is None:
            return
        if outcome is None or outcome.status is not OutcomeStatus.APPLIED:
            self.brakes.release(record.ref.key, admitted)
            return
        if record.ref.key in self._throttled:
            self._throttled.discard(record.ref.key)
            self.metrics.reload_throttled("", len(self._throttled))

    def refused(self, record: WorkloadRecord, sink: str) -> bool:
        """Whether the kind's adapter refuses any template change to this workload (e.g. a
        Knative Service with a fixed revision name): then a Warning Event, nothing written."""
        adapter = self.adapters.get(record.ref.kind)
        refusal = adapter.refusal(record) if adapter is not None else None
        if refusal is None:
            return False
        reason, message = refusal
        self.metrics.sink_error(sink, reason)
        self.warn(record, reason, message)
        return True

    def _budgeted(self, sink: Any, record: WorkloadRecord) -> bool:
        """Whether a batch sink's write of ``record`` waits for the rollout budget (one commit a wave)."""
        if self.waves is None or not self.waves.gates(getattr(sink, "name", None), record.ref):
            return False
        budgeted = getattr(sink, "budgeted", None)
        return budgeted is not None and bool(budgeted(record))

    # --- reporting -----------------------------------------------------------------

    def warn_ref(self, ref: ObjectRef, reason: str, message: str) -> None:
        """:meth:`warn` for a workload known by its reference (the cached record, if any)."""
        record = self.caches.workload(ref)
        log.warning(message, extra={"object": ref.key, "reason": reason})
        if self.recorder is not None:
            self.recorder.warning(ref, reason, message, uid=record.uid if record is not None else "")

    def _observe_latency(self, outcome: Outcome, sources: Iterable[PendingSource]) -> None:
        """change → emit latency of an applied emission, from its oldest detected change."""
        detected = [p.detected for p in sources if p.detected is not None]
        if outcome.status is OutcomeStatus.APPLIED and detected:
            self.metrics.observe_change_to_emit(outcome.sink,
                                                self.clock.monotonic() - min(detected))

    def report(self, record: WorkloadRecord, request: ReloadRequest, outcome: Outcome) -> None:
        """An applied emission: log line, metric, Normal Event, listeners (alerts)."""
        if outcome.status is OutcomeStatus.WOULD_APPLY:
            self._report_dry_run(record, outcome)
            return
        if outcome.status is not OutcomeStatus.APPLIED:
            return
        ref = record.ref
        self.metrics.reload_executed(True, ref.namespace)
        log.info("reloaded", extra={"object": ref.key, "sink": outcome.sink, "detail": outcome.detail})
        if self.recorder is not None:
            adapter = self.adapters.get(ref.kind)
            rolls = adapter is None or adapter.rolls
            self.recorder.normal(ref, "Reloaded", f"reloaded through {outcome.sink}: {outcome.detail}"
                                 + ("" if rolls else "; this kind does not roll on a template change: "
                                    "pods created from now on get it"), uid=record.uid)
        for listener in self.listeners:
            try:
                listener(request, outcome)
            except Exception:  # a listener (alerts) must never break a reload
                log.exception("reload listener failed", extra={"object": ref.key})

    def _report_dry_run(self, record: WorkloadRecord, outcome: Outcome) -> None:
        """``--dry-run``: what would have been written, as a log line, a metric and an Event.

        No reload is counted and no listener (alerts) is called: nothing happened.
        """
        ref = record.ref
        self.metrics.dry_run_decision(outcome.sink, ref.namespace)
        log.info("would reload (dry run)", extra={"object": ref.key, "sink": outcome.sink,
                                                  "detail": outcome.detail})
        if self.recorder is not None:
            self.recorder.normal(ref, "WouldReload", f"dry run, {outcome.sink} sink: {outcome.detail}",
                                 uid=record.uid)

    def note(self, record: WorkloadRecord, reason: str, message: str) -> None:
        """Something operators want to see about one workload: a Normal Event on it."""
        if self.recorder is not None:
            self.recorder.normal(record.ref, reason, message, uid=record.uid)

    def warn(self, record: WorkloadRecord, reason: str, message: str) -> None:
        """A problem with one workload: a log line and a Warning Event on it."""
        log.warning(message, extra={"object": record.ref.key, "reason": reason})
        if self.recorder is not None:
            self.recorder.warning(record.ref, reason, message, uid=record.uid)


def _oldest(sources: Iterable[PendingSource]) -> float | None:
    """Monotonic time of the oldest detected change among ``sources`` (None: resyncs only)."""
    detected = [p.detected for p in sources if p.detected is not None]
    return min(detected) if detected else None
