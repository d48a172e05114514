"""One workload (or one batch group) from what it owes to an emission.

:class:`Reconciler` is what a worker calls for a queue key: it reads the *current*
workload and sources from the caches, asks the policy which owed sources this workload
reloads for, checks the holds (a closed window, a storm brake, the rollout budget), hands one
:class:`ReloadRequest` to the workload's sink (or one batch to a batch sink), and reports the
outcome as a log line, metrics, an Event and to the listeners.

What a workload owes lives in the :class:`~gitops_reloader.ledger.Ledger` until it is
*discharged*: the emission went through, found the workload current, or a sync rolled it;
the policy no longer reloads it for a source; the workload is gone. Anything else — a hold,
a failure, an exception — leaves the entry as it is, so nothing has to be put back and nothing
owed can be lost on the way. A failure is re-raised for the controller to record and retry;
a failed *check* of the slow resync (nothing known to be owed) is dropped with a metric.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gitops_reloader import policy, syncs, usedkeys
from gitops_reloader.clock import Clock
from gitops_reloader.config import Config
from gitops_reloader.control.brakes import StormBrakes
from gitops_reloader.control.caches import Caches, SourcesByNamespace
from gitops_reloader.control.holds import Holds
from gitops_reloader.control.waves import Waves
from gitops_reloader.control.writechecks import WriteChecks
from gitops_reloader.errors import KubeNotFound, ReloaderError
from gitops_reloader.kube.api import MERGE, KubeApi
from gitops_reloader.kube.events import EventRecorder
from gitops_reloader.kube.workloads import WorkloadAdapter, WorkloadRecord
from gitops_reloader.ledger import Failure, Hold, Ledger, PendingSource, Wait
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
from gitops_reloader.rollout.marker import Marker
from gitops_reloader.sinks.base import Sink
from gitops_reloader.sinks.eviction import EVICTION_SINK
from gitops_reloader.syncs import TemplateChange

log = logging.getLogger(__name__)


Listener = Callable[[ReloadRequest, Outcome], None]
Held = Callable[[str, str, Outcome], None]
"""``(queue key, workload key, outcome)``: a sink held one workload's reload back for a reason
a person can fix; it still owes it (the controller records the failure and its next try)."""
Recovered = Callable[[str, Failure], None]
"""``(workload key, failure)``: a workload that was failing went through."""


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



@dataclass(frozen=True, slots=True)
class _Plan:
    """One workload's emission, ready to go: what it discharges when it goes through."""

    sink: Any
    request: ReloadRequest
    owed: Mapping[SourceRef, PendingSource]
    marker: Marker | None = None


class Reconciler:
    """Turns what a workload owes into one emission and reports its outcome."""

    def __init__(self, config: Config, caches: Caches, ledger: Ledger, *, sinks: Mapping[str, Sink],
                 adapters: Mapping[str, WorkloadAdapter], metrics: Metrics, clock: Clock,
                 recorder: EventRecorder | None = None, listeners: Iterable[Listener] = (),
                 waves: Waves | None = None, on_held: Held | None = None,
                 on_recovered: Recovered | None = None, brakes: StormBrakes | None = None,
                 api: KubeApi | None = None) -> None:
        self.config = config
        self.caches = caches
        self.ledger = ledger
        self.sinks = sinks
        self.adapters = adapters
        self.metrics = metrics
        self.clock = clock
        self.recorder = recorder
        self.listeners = tuple(listeners)
        self.waves = waves
        self.on_held = on_held
        self.on_recovered = on_recovered
        self.api = api
        """Writes the synced-sources annotation (None: nothing is recorded, e.g. in unit tests)."""
        self.holds = Holds(config, caches, ledger, metrics=metrics, clock=clock, brakes=brakes,
                           note=self.note, warn=self.warn)
        self.checks = WriteChecks(config, adapters, metrics=metrics, clock=clock, warn=self.warn)
        """Eviction wanted or not, the eviction record a write carries, a refused write."""
        self.template_changes: dict[str, TemplateChange] = {}
        """Workload key → its last pod-template change by someone else since start (syncs.py)."""
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
        return syncs.runs_with(record.annotations, meta.ref, written, recorder is not None,
                               record.template_fingerprint)[0]

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

    def holding(self) -> set[str]:
        """The workload keys a storm brake or a closed maintenance window holds now."""
        return self.holds.holding()

    def sync(self, key: str) -> None:
        """Emit what workload ``key`` owes (raises on failure: the entry stays owed). A grant of
        the rollout budget that no write used goes back on every way out (found synced, held,
        nothing owed any more, failed)."""
        try:
            self._sync(key)
        finally:
            if self.waves is not None:
                self.waves.release(ObjectRef.from_key(key))

    def _sync(self, key: str) -> None:
        owed = self.ledger.take(key)
        if not owed:
            return
        ref = ObjectRef.from_key(key)
        record = self.caches.workload(ref)
        if record is None and ref.kind in self.adapters:
            record = self.adapters[ref.kind].orphan(ref)  # e.g. a Job deleted, not yet re-created
        if record is None:
            self.ledger.drop(key)  # the workload is gone: nothing to reload
            return
        plan = self._plan(record, owed, batch=False)
        if plan is None:
            return
        try:
            with self.metrics.time_emit(plan.sink.name):
                outcome = plan.sink.emit(plan.request)
        except ReloaderError as exc:
            self._failed(record, plan, exc)
            if isinstance(exc, KubeNotFound):
                self.ledger.drop(key)  # the workload is gone
                return
            raise
        # before the grant goes back (sync's finally): the rollout counts (waves.started) without a gap
        self._finish(key, record, plan, outcome)

    def sync_batch(self, group: str) -> None:
        """One emission for every workload of a batch group (e.g. one git commit); the grants
        none of them used go back, whatever happened."""
        owed_by_key = self.ledger.take_group(group)
        try:
            self._sync_batch(group, owed_by_key)
        finally:
            if self.waves is not None:
                for key in owed_by_key:
                    self.waves.release(ObjectRef.from_key(key))

    def _sync_batch(self, group: str, owed_by_key: Mapping[str, Mapping[SourceRef, PendingSource]]) -> None:
        plans: list[tuple[WorkloadRecord, _Plan]] = []
        for key, owed in owed_by_key.items():
            record = self.caches.workload(ObjectRef.from_key(key))
            if record is None:
                self.ledger.drop(key)
                continue
            plan = self._plan(record, owed, batch=True)
            if plan is not None:
                plans.append((record, plan))
        if not plans:
            return
        sink = plans[-1][1].sink
        try:
            with self.metrics.time_emit(sink.name):
                outcomes = sink.emit_batch([plan.request for _, plan in plans])
        except ReloaderError as exc:
            for record, plan in plans:
                self._failed(record, plan, exc)
            if all(plan.request.resync for _, plan in plans):
                return  # only checks: nothing was owed, the next resync pass checks again
            raise
        for (record, plan), outcome in zip(plans, outcomes, strict=True):
            self._finish(group, record, plan, outcome)

    def _plan(self, record: WorkloadRecord, owed: Mapping[SourceRef, PendingSource], *,
              batch: bool) -> _Plan | None:
        """What ``record`` emits now for ``owed``; None when nothing goes now — what it no longer
        owes is discharged, what waits is held, in the ledger."""
        key = record.ref.key
        self.ledger.end_coalescing(key, self.clock.now())  # the window is over: it is worked now
        items = self.items(record, owed)
        reloading = {item.source.ref for item in items}
        self.ledger.discharge(key, {ref: p for ref, p in owed.items() if ref not in reloading})
        if not items:
            return None
        name = self.sink_name(record)
        sink = self.sinks.get(name or "")
        if sink is None and name != EVICTION_SINK:
            self.metrics.sink_error(name or "unknown", "unknown-sink")
            self.holds.needs_person(record, "UnknownSink", f"{self.config.keys.sink} names no available "
                                    "sink; the reload waits until it names one")
            return None
        if not self._emittable(record, name, sink, batch=batch):
            self.ledger.drop(key)
            return None
        assert sink is not None
        items, restart = self._settle_synced(record, items, owed, sink.name)
        if not items or self.holds.check(record, owed):
            return None
        marker, annotations = None, EMPTY_MAP
        if self._budgeted(sink, record, batch=batch):
            assert self.waves is not None
            changed = [item.source for item in items]
            if not self.waves.admit(record.ref, record.annotations, changed, _oldest(owed.values())):
                self.ledger.hold(key, Hold(Wait.BUDGET, None))  # a wave grants it (the waves key)
                self.holds.released(record, None)
                return None
            marker = self.waves.marker(changed)
            annotations = self.waves.annotations(marker)
        request = ReloadRequest(record.ref, record, tuple(items), int(self.clock.now()),
                                tracked=self.tracked_sources(record) if batch else (),
                                resync=all(p.resync for p in owed.values()),
                                workload_annotations=annotations, restart=restart)
        if batch:
            self.checks.eviction_record(record, sink.name)  # a commit carries none: warns if one is asked for
        else:
            # The live write records what its new pods start with, and the eviction they wait for.
            annotations = {**annotations, **self._snapshot(record, request, sink),
                           **self.checks.eviction_record(record, sink.name)}
            request = replace(request, workload_annotations=annotations)
        return _Plan(sink, request, owed, marker)

    def _emittable(self, record: WorkloadRecord, name: str | None, sink: Sink | None, *,
                   batch: bool) -> bool:
        """Whether ``record`` can be written at all (else it is told why and owes nothing)."""
        if not batch and not record.has_template and record.ref.kind != "CronJob" and name != EVICTION_SINK:
            log.info("workload has no pod template (e.g. a Rollout with workloadRef), skipped",
                     extra={"object": record.ref.key})
            return False
        if self.checks.refused(record, name or "unknown"):
            return False
        if sink is None and name == EVICTION_SINK:
            self.metrics.sink_error(EVICTION_SINK, "eviction-off")
            self.warn(record, "EvictionDisabled", "its kind has no pod template, so only eviction can "
                      "restart its pods, and the controller runs with --eviction=off; not reloaded")
            return False
        return True

    def _failed(self, record: WorkloadRecord, plan: _Plan, exc: ReloaderError) -> None:
        """An emission raised: its brake slot goes back; a change is still owed (the controller
        records the failure), a check is dropped with a metric and a debug line."""
        self.holds.released(record, None)
        self.metrics.sink_outcome(plan.sink.name, "error")
        self.metrics.sink_error(plan.sink.name, type(exc).__name__)
        if plan.marker is not None and self.waves is not None:
            self.waves.release(record.ref)
        if plan.request.resync:
            self._check_failed(record, plan, str(exc))
        elif not isinstance(exc, KubeNotFound):
            self.metrics.reload_executed(False, record.ref.namespace)
            self.warn(record, "ReloadFailed", f"{plan.sink.name} sink, still pending: {exc}")

    def _check_failed(self, record: WorkloadRecord, plan: _Plan, why: str) -> None:
        """A check of the slow resync could not run (a host down): nothing was owed, so nothing
        is recorded as failing and nobody is told; the next resync pass checks again."""
        self.ledger.discharge(record.ref.key, plan.owed)
        self.metrics.resync_check_failed(plan.sink.name)
        log.debug("resync check could not run; the next pass checks again",
                  extra={"object": record.ref.key, "sink": plan.sink.name, "error": why})

    def _finish(self, queue_key: str, record: WorkloadRecord, plan: _Plan, outcome: Outcome) -> None:
        """One workload's outcome: discharged and reported, or held for a person."""
        key = record.ref.key
        if plan.marker is not None and self.waves is not None:
            if outcome.status is OutcomeStatus.APPLIED:
                self.waves.started(record.ref, plan.marker)  # a commit: rolling once the engine applies it
            else:
                self.waves.release(record.ref)
        self.metrics.sink_outcome(plan.sink.name, outcome.status.value)
        self.holds.released(record, outcome)
        if outcome.held:
            if plan.request.resync:
                self._check_failed(record, plan, outcome.detail)
            elif self.on_held is not None:
                self.on_held(queue_key, key, outcome)  # still owed: a person can fix it
            return
        recovered = self.ledger.discharge(key, plan.owed)
        if recovered is not None and self.on_recovered is not None:
            self.on_recovered(key, recovered)
        self._observe_latency(outcome, plan.owed.values())
        self.report(record, plan.request, outcome)

    def _budgeted(self, sink: Any, record: WorkloadRecord, *, batch: bool) -> bool:
        """Whether ``record``'s write waits for the rollout budget (a batch sink's: one commit a wave)."""
        if self.waves is None or not self.waves.gates(getattr(sink, "name", None), record.ref):
            return False
        budgeted = getattr(sink, "budgeted", None) if batch else None
        return not batch or (budgeted is not None and bool(budgeted(record)))

    # --- one rollout per sync ------------------------------------------------------

    def _settle_synced(self, record: WorkloadRecord, items: list[ReloadItem],
                       owed: Mapping[SourceRef, PendingSource],
                       sink: str) -> tuple[list[ReloadItem], bool]:
        """The items still to emit, and whether that write must restart the pods
        (:attr:`~gitops_reloader.model.ReloadRequest.restart`).

        An item whose data the pods already run (the workload's ``synced-sources`` entry holds
        its hash, and no pod started while it changed) is discharged; so is one whose change a
        pod-template change by someone else rolled (:func:`gitops_reloader.syncs.rolled_since`:
        the template differs from the one in effect when the source changed, and the kind's
        template change restarts its pods), after it is recorded as synced. A change seen while
        the pods were being replaced (:attr:`~gitops_reloader.ledger.PendingSource.raced`)
        restarts them even where the record already reads the target: pods started meanwhile
        read other data.
        """
        # A CronJob's reload runs a Job now, which no change of its template does; a Job's is immutable.
        rolls = record.rolls_on_write and record.ref.kind not in ("CronJob", "Job")
        left: list[ReloadItem] = []
        newly: list[tuple[SourceRef, str, str | None, int]] = []
        current: dict[SourceRef, PendingSource] = {}
        restart = False
        for item in items:
            ref = item.source.ref
            recorded = self.record_of(record, ref, item.container)
            synced = syncs.synced_hash(record.annotations, ref, recorded, record.template_fingerprint)
            seen = owed.get(ref)
            raced = seen is not None and seen.raced
            rolled = rolls and seen is not None and syncs.rolled_since(seen.baseline,
                                                                       record.template_fingerprint)
            if item.deleted:
                left.append(item)
            elif (synced == item.source.hash and not raced) or rolled:
                if synced != item.source.hash:  # what undoes it: the template back at its baseline
                    newly.append((ref, item.source.hash, recorded, seen.baseline if seen is not None else 0))
                if seen is not None:
                    current[ref] = seen
            else:
                restart = restart or raced or syncs.needs_restart(synced, item.source.hash)
                left.append(item)
        if newly:
            self._record_synced(record, newly, sink)
        self.ledger.discharge(record.ref.key, current)
        return left, restart

    def _snapshot(self, record: WorkloadRecord, request: ReloadRequest, sink: Sink) -> dict[str, str | None]:
        """The ``synced-sources`` annotation a live write carries: every source the workload
        tracks whose hash the sink's own record will not hold after the write (a source never
        written, a source the annotations sink's single record does not name), with the hash
        its new pods start with — so that a later change of it is known to be owed, after a
        restart too; the entries of the sources the write records go."""
        after = getattr(sink, "recorded_after", None)
        if after is None:
            return {}
        recorded: list[SourceRef] = []
        entries: list[tuple[SourceRef, str, str | None]] = []
        for meta, container in self.tracked(record):
            if not meta.hash:
                continue
            value = self.source_hash(record, meta)
            written = after(request, meta.ref, container)
            if written == value:
                recorded.append(meta.ref)
            else:
                entries.append((meta.ref, value, written))
        return syncs.with_snapshot(record.annotations, entries, recorded)

    def _record_synced(self, record: WorkloadRecord, synced: list[tuple[SourceRef, str, str | None, int]],
                       sink: str) -> None:
        """Record changes a sync rolled in the workload's ``synced-sources`` annotation (its
        metadata: no rollout, no drift), with a Normal Event, a log line and a metric."""
        names = ", ".join(f"{ref.kind.kube_kind}/{ref.name}" for ref, *_ in synced)
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
