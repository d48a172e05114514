"""Wires informers → change detection → policy → work queue → sinks.

Flow: the ConfigMap/Secret informers keep only a :class:`SourceMeta` (hash, labels, the
annotations we read) per object. A *data* change (hash differs from the cached one) looks
the workloads up in the :class:`ReferenceIndex` — never a LIST call — records the source
as pending for each and adds the workload key to the queue after the coalescing window.
A worker takes the key, reads the *current* workload and sources from the caches, asks the
policy, and hands one :class:`ReloadRequest` to the workload's sink. Success → ``forget``;
a retryable error → the pending sources are put back and the key re-queued with backoff
(up to ``--max-retries``); a permanent error → log, metric, Warning Event.

Handlers run on informer threads and only record and enqueue; all writes happen on the
worker threads.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gitops_reloader import policy
from gitops_reloader.clock import Clock, SystemClock
from gitops_reloader.config import Config, parse_duration
from gitops_reloader.errors import KubeNotFound, ReloaderError
from gitops_reloader.hashing import data_fingerprint, hash_object
from gitops_reloader.index import ReferenceIndex
from gitops_reloader.kube.api import JSON, STRATEGIC, KubeApi
from gitops_reloader.kube.events import EventRecorder
from gitops_reloader.kube.fieldselectors import field_selector
from gitops_reloader.kube.informer import Informer, InformerEvent, InformerOptions
from gitops_reloader.kube.resources import CONFIGMAPS, NAMESPACES, SECRETS, ResourceKind
from gitops_reloader.kube.store import object_key
from gitops_reloader.kube.workloads import WorkloadAdapter, WorkloadRecord, adapters_for
from gitops_reloader.membership import NamespaceMembership
from gitops_reloader.model import (
    ObjectRef,
    Outcome,
    OutcomeStatus,
    ReloadItem,
    ReloadRequest,
    SinkName,
    Source,
    SourceKind,
    SourceMeta,
    SourceRef,
    WorkloadKey,
)
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.queue import WorkQueue
from gitops_reloader.ratelimit import ItemExponentialLimiter
from gitops_reloader.sinks.base import Sink

log = logging.getLogger(__name__)

UNPAUSE_PREFIX = "unpause|"
BATCH_PREFIX = "batch|"
_TOMBSTONES = 10_000
_SHOWN_PATTERNS = 3
_SHOWN_PATTERN_CHARS = 64


@dataclass(frozen=True, slots=True)
class PendingSource:
    """A changed source waiting for its workload's turn (deleted: a delete to record)."""

    meta: SourceMeta
    deleted: bool = False
    resync: bool = False
    detected: float | None = None
    """Monotonic time the change was seen (None: a resync, not a change)."""


def source_transform(kind: SourceKind, keys: Iterable[str],
                     full_hash: Callable[[], bool]) -> Callable[[JSON], SourceMeta]:
    """Informer transform: hash the data, keep labels and the annotations we read, drop the rest.

    For Secrets the Stakater hash (which decodes every value) is computed only when
    ``full_hash()`` says so — after the initial list, or for ``--sync-after-restart``;
    change detection uses the cheap fingerprint either way.
    """
    wanted = tuple(keys)

    def transform(raw: JSON) -> SourceMeta:
        metadata = raw.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        secret = kind is SourceKind.SECRET
        return SourceMeta(
            ref=SourceRef(kind, str(metadata.get("namespace", "")), str(metadata["name"])),
            hash=hash_object(kind, raw) if not secret or full_hash() else "",
            labels=dict(metadata.get("labels") or {}),
            annotations={k: str(annotations[k]) for k in wanted if k in annotations},
            resource_version=str(metadata.get("resourceVersion", "")),
            fingerprint=data_fingerprint(raw) if secret else "",
        )

    return transform


def choose_sink(config: Config, record: WorkloadRecord) -> tuple[SinkName | None, str]:
    """The sink for ``record`` (None: the annotation names no known sink) and why, in words.

    ``--webhook-url`` wins; then the sink annotation (workload, else pod template); then
    ``--default-sink``; then ``--reload-strategy``.
    """
    behaviour = config.behaviour
    if behaviour.webhook_url:
        return SinkName.WEBHOOK, "--webhook-url is set"
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


def workload_key(ref: ObjectRef) -> WorkloadKey:
    return WorkloadKey(ref.key)


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
    ) -> None:
        self.config = config
        self.listeners = tuple(listeners)
        self.api = api
        self.sinks = dict(sinks)
        self.metrics = metrics
        self.recorder = recorder
        self.clock = clock or SystemClock()
        behaviour = config.behaviour
        self.adapters = dict(adapters) if adapters is not None else adapters_for(
            argo_rollouts=behaviour.is_argo_rollouts,
            openshift=bool(behaviour.is_openshift),
            ignored=config.filters.ignored_workload_types,
        )
        self.options = policy.PolicyOptions(keys=config.keys, auto_reload_all=behaviour.auto_reload_all)
        self.index = ReferenceIndex()
        self.queue: WorkQueue[str] = WorkQueue(
            clock=self.clock,
            limiter=ItemExponentialLimiter(config.runtime.retry_base_delay,
                                           config.runtime.retry_max_delay),
            name="reload",
        )
        self._pending: dict[str, dict[SourceRef, PendingSource]] = {}
        self._pending_lock = threading.Lock()
        self._groups: dict[str, set[str]] = {}
        self._tombstones: OrderedDict[SourceRef, str] = OrderedDict()
        self._membership: NamespaceMembership[tuple[SourceMeta, bool]] | None = None
        self._source_informers: dict[SourceKind, list[Informer[SourceMeta]]] = {}
        self._workload_informers: dict[str, list[Informer[WorkloadRecord]]] = {}
        self._namespace_informer: Informer[int | None] | None = None
        self._workers: list[threading.Thread] = []
        self._started = threading.Event()
        self._active = threading.Event()
        metrics.set_queue_depth_callback(lambda: float(len(self.queue)))

    # --- lifecycle -----------------------------------------------------------------

    def informers(self) -> list[Informer[Any]]:
        out: list[Informer[Any]] = []
        if self._namespace_informer is not None:
            out.append(self._namespace_informer)
        for group in self._source_informers.values():
            out.extend(group)
        for wgroup in self._workload_informers.values():
            out.extend(wgroup)
        return out

    def ready(self) -> bool:
        """Caches synced (for /readyz)."""
        return self._started.is_set() and all(i.has_synced() for i in self.informers())

    def idle(self) -> bool:
        """Nothing pending, queued, delayed or in progress (tests and benchmarks wait on it)."""
        with self._pending_lock:
            if self._pending:
                return False
        return not any(self.queue.depth().values())

    def seen(self, kind: SourceKind, namespace: str, name: str, resource_version: str) -> bool:
        """Whether the cache holds this source at ``resource_version`` or later."""
        meta = self.source(SourceRef(kind, namespace, name))
        return meta is not None and int(meta.resource_version or 0) >= int(resource_version)

    def start(self, *, sync_timeout: float = 60.0, activate: bool = True) -> None:
        """Start informers and wait until synced; then start workers if ``activate``.

        With HA, a standby calls ``start(activate=False)`` (warm caches, no writes) and
        :meth:`activate` when it becomes leader.
        """
        self._build_informers()
        for informer in self.informers():
            informer.start()
        for informer in self.informers():
            if not informer.wait_synced(sync_timeout):
                raise ReloaderError(f"cache for {informer.name} did not sync in {sync_timeout}s")
            self.metrics.set_informer_synced(informer.kind.plural, True)
        self._started.set()
        log.info("caches synced", extra={"informers": len(self.informers())})
        if activate:
            self.activate()

    def activate(self, *, resync: bool = False) -> None:
        """Become the active instance: start workers.

        With ``--sync-after-restart``, or ``resync`` (a standby taking over from a leader
        that may have died with changes in its queue), first reload the workloads whose
        recorded hash is out of date.
        """
        if self._active.is_set():
            return
        self._active.set()
        self._schedule_unpauses()
        if self.config.behaviour.sync_after_restart or resync:
            self._sync_after_restart()
        for number in range(self.config.runtime.workers):
            thread = threading.Thread(target=self._worker, name=f"worker-{number}", daemon=True)
            thread.start()
            self._workers.append(thread)

    def stop(self, *, drain: bool = False, timeout: float = 10.0) -> None:
        self.queue.shutdown(drain=drain, timeout=timeout)
        for informer in self.informers():
            informer.stop()
        for thread in self._workers:
            thread.join(timeout)

    # --- informers -----------------------------------------------------------------

    def _scopes(self) -> list[str | None]:
        return list(self.config.filters.namespaces) or [None]

    def _build_informers(self) -> None:
        filters = self.config.filters
        observer = self.metrics_observer()
        if filters.namespace_selector:
            self._membership = NamespaceMembership()
            self._namespace_informer = Informer(
                self.api, NAMESPACES,
                lambda raw: _version((raw.get("metadata") or {}).get("resourceVersion")),
                self._on_namespace,
                options=InformerOptions(label_selector=filters.namespace_selector),
                observer=observer,
            )
        keys = (self.config.keys.ignore, self.config.keys.match)
        owns = filters.shard.owns if filters.shard.sharded else None
        kinds: list[tuple[SourceKind, ResourceKind]] = []
        if not filters.ignore_configmaps:
            kinds.append((SourceKind.CONFIGMAP, CONFIGMAPS))
        if not filters.ignore_secrets:
            kinds.append((SourceKind.SECRET, SECRETS))
        for source_kind, resource in kinds:
            self._source_informers[source_kind] = [
                Informer(
                    self.api, resource,
                    source_transform(source_kind, keys, self._full_hashes(source_kind)),
                    self._on_source,
                    options=InformerOptions(
                        namespace=scope, label_selector=filters.resource_label_selector,
                        field_selector=field_selector(filters, secrets=source_kind is SourceKind.SECRET),
                        accept_namespace=owns,
                    ),
                    observer=observer,
                )
                for scope in self._scopes()
            ]
        for kind, adapter in self.adapters.items():
            self._workload_informers[kind] = [
                Informer(
                    self.api, adapter.resource, adapter.record, self._on_workload,
                    options=InformerOptions(namespace=scope, field_selector=field_selector(filters),
                                            accept_namespace=owns),
                    observer=observer,
                )
                for scope in self._scopes()
            ]

    def _full_hashes(self, kind: SourceKind) -> Callable[[], bool]:
        """Whether the informer for ``kind`` must compute Stakater hashes right now."""
        if self.config.behaviour.sync_after_restart or self.config.runtime.enable_ha:
            return lambda: True  # start-up / take-over checks compare recorded hashes
        return lambda: all(i.has_synced() for i in self._source_informers.get(kind, ()))

    def metrics_observer(self) -> _MetricsObserver:
        return _MetricsObserver(self.metrics)

    def _namespace_allowed(self, namespace: str) -> bool:
        membership = self._membership
        return ((membership is None or membership.selected(namespace))
                and self.config.filters.shard.owns(namespace))

    def _on_namespace(self, event: InformerEvent[int | None]) -> None:
        """A namespace starts or stops matching --namespace-selector (hand-over: membership.py)."""
        assert self._membership is not None
        namespace, delta = event.delta.key, event.delta
        if delta.new is None:
            self._membership.leave(namespace, _version(event.resource_version))
        elif delta.old is None:
            for meta, deleted in self._membership.join(namespace, delta.new, initial=event.initial):
                self._changed(meta, deleted=deleted)  # changed after the join, seen before it
        else:
            return  # still matching: nothing moves
        if not event.initial:
            joined = delta.new is not None
            log.info("namespace joined the selector" if joined else "namespace left the selector",
                     extra={"namespace": namespace, "selector": self.config.filters.namespace_selector})

    # --- lookups in the caches -----------------------------------------------------

    def source(self, ref: SourceRef) -> SourceMeta | None:
        for informer in self._source_informers.get(ref.kind, ()):
            meta = informer.store.get(object_key(ref.namespace, ref.name))
            if meta is not None:
                return meta
        return None

    def sources_in(self, kind: SourceKind, namespace: str) -> list[SourceMeta]:
        prefix = f"{namespace}/"
        out: list[SourceMeta] = []
        for informer in self._source_informers.get(kind, ()):
            keys = [k for k in list(informer.store.keys()) if k.startswith(prefix)]
            out.extend(m for k in keys if (m := informer.store.get(k)) is not None)
        return out

    def workload(self, ref: ObjectRef) -> WorkloadRecord | None:
        for informer in self._workload_informers.get(ref.kind, ()):
            record = informer.store.get(object_key(ref.namespace, ref.name))
            if record is not None:
                return record
        return None

    def workloads(self) -> list[WorkloadRecord]:
        return [r for group in self._workload_informers.values() for i in group
                for r in i.store.values()]

    @staticmethod
    def view(record: WorkloadRecord) -> policy.WorkloadView:
        return policy.WorkloadView(record.ref, record.annotations, record.template_annotations,
                                   record.refs)

    # --- handlers (informer threads: record and enqueue only) -----------------------

    def _on_workload(self, event: InformerEvent[WorkloadRecord]) -> None:
        delta = event.delta
        if delta.new is None:
            if delta.old is not None:
                self.index.remove(workload_key(delta.old.ref))
            return
        record = delta.new
        self.index.update(workload_key(record.ref), record.ref.namespace, record.refs,
                          explicit=policy.has_explicit_lists(self.view(record), self.config.keys))
        if self._active.is_set():
            self._schedule_unpause(record)

    def _on_source(self, event: InformerEvent[SourceMeta]) -> None:
        if event.initial:
            return
        old, new = event.delta.old, event.delta.new
        behaviour = self.config.behaviour
        if old is not None and new is not None:
            if old.change_key != new.change_key:
                self._changed_if_ours(new, new.resource_version)
        elif new is not None:
            previous = self._tombstones.pop(new.ref, None)
            if previous is not None and previous != new.change_key:
                self._changed_if_ours(new, new.resource_version)  # re-created with other data
            elif behaviour.reload_on_create:
                self._changed_if_ours(new, new.resource_version)
        elif old is not None:
            self._tombstones[old.ref] = old.change_key
            while len(self._tombstones) > _TOMBSTONES:
                self._tombstones.popitem(last=False)
            if behaviour.reload_on_delete:
                self._changed_if_ours(old, event.resource_version, deleted=True)

    def _changed_if_ours(self, meta: SourceMeta, resource_version: str, *, deleted: bool = False) -> None:
        """Act on a change only if its namespace was selected at the change's version."""
        membership = self._membership
        if membership is None or membership.owns(meta.ref.namespace, _version(resource_version),
                                                 meta.ref, (meta, deleted)):
            self._changed(meta, deleted=deleted)

    def _changed(self, meta: SourceMeta, *, deleted: bool = False) -> None:
        self.metrics.change_detected(meta.ref.kind.kube_kind)
        candidates = self.index.lookup(meta.ref) | self.index.explicit_in(meta.ref.namespace)
        log.debug("source changed", extra={"object": str(meta.ref), "candidates": len(candidates)})
        for key in candidates:
            self._add_pending(key, {meta.ref: PendingSource(
                meta, deleted, detected=self.clock.monotonic())})

    def _add_pending(self, key: str, sources: Mapping[SourceRef, PendingSource],
                     *, retry: bool = False) -> None:
        with self._pending_lock:
            pending = self._pending.setdefault(key, {})
            for ref, item in sources.items():
                if retry and ref in pending:
                    continue  # a newer change arrived meanwhile: it wins
                pending.pop(ref, None)  # keep insertion order = order of change
                pending[ref] = item
        if not retry:
            self.queue.add_after(self._queue_key(key), self.config.runtime.coalesce_window)

    def _queue_key(self, key: str) -> str:
        """The workload's own key, or its batch group's (``batch|...``) for a batch sink."""
        record = self.workload(_ref_from_key(key))
        sink = self.sinks.get(self.sink_name(record) or "") if record is not None else None
        group_key = getattr(sink, "group_key", None)
        if record is None or group_key is None:
            return key
        try:
            group = BATCH_PREFIX + group_key(record)
        except ReloaderError as exc:
            self._warn(record, "CannotGroup", str(exc))
            return key
        with self._pending_lock:
            self._groups.setdefault(group, set()).add(key)
        return group

    def _take_pending(self, key: str) -> dict[SourceRef, PendingSource]:
        with self._pending_lock:
            return self._pending.pop(key, {})

    def requests_for_change(self, meta: SourceMeta) -> list[ReloadRequest]:
        """What a data change to ``meta`` would ask of each workload, queuing nothing.

        ``gitops-reloader plan`` calls this with a hypothetical ``meta`` (the new hash):
        the same watched-or-not check, index candidates, policy items and, for batch
        sinks, tracked sources as a real change. Nothing is recorded or written (with no
        recorder, invalid annotations are only logged).
        """
        if not self._namespace_allowed(meta.ref.namespace) or self.source(meta.ref) is None:
            return []  # filtered out: the controller never sees this change
        candidates = self.index.lookup(meta.ref) | self.index.explicit_in(meta.ref.namespace)
        requests: list[ReloadRequest] = []
        for key in sorted(candidates):
            record = self.workload(_ref_from_key(key))
            if record is None or (not record.has_template and record.ref.kind != "CronJob"):
                continue
            lookup = {meta.ref: meta}
            items = self._items(record, {meta.ref: PendingSource(meta)}, lookup=lookup.get)
            if items:
                tracked = tuple(Source(m.ref, m.hash) for m, _ in self._tracked(record) if m.hash)
                requests.append(ReloadRequest(record.ref, record, tuple(items), int(self.clock.now()),
                                              tracked=tracked))
        return requests

    # --- start-up ------------------------------------------------------------------

    def _sync_after_restart(self) -> None:
        """Reload workloads whose recorded hash is out of date; touch nothing else."""
        queued = 0
        by_namespace = self._sources_by_namespace()
        for record in self.workloads():
            if not self._namespace_allowed(record.ref.namespace):
                continue  # --namespace-selector: its sources' changes are not ours either
            sink = self.sinks.get(self.sink_name(record) or "")
            batch = getattr(sink, "group_key", None) is not None
            stale: dict[SourceRef, PendingSource] = {}
            for meta, container in self._tracked(record, by_namespace):
                if not meta.hash:
                    continue  # not hashed (no start-up check was configured at list time)
                if batch:
                    # A batch sink (git) compares the whole digest itself, and only where
                    # the manifest already records one.
                    stale[meta.ref] = PendingSource(meta, resync=True)
                    continue
                recorded = self._recorded_hash(record, meta, container)
                if recorded is not None and recorded != meta.hash:
                    stale[meta.ref] = PendingSource(meta)
            if stale:
                queued += 1
                self._add_pending(workload_key(record.ref), stale)
        log.info("sync after restart", extra={"workloads_out_of_date": queued})

    def _sources_by_namespace(self) -> dict[tuple[SourceKind, str], list[SourceMeta]]:
        """All cached sources grouped by (kind, namespace): one pass over the stores."""
        grouped: dict[tuple[SourceKind, str], list[SourceMeta]] = {}
        for kind, informers in self._source_informers.items():
            for informer in informers:
                for meta in informer.store.values():
                    grouped.setdefault((kind, meta.ref.namespace), []).append(meta)
        return grouped

    def _tracked(self, record: WorkloadRecord,
                 by_namespace: Mapping[tuple[SourceKind, str], list[SourceMeta]] | None = None,
                 ) -> list[tuple[SourceMeta, str | None]]:
        """Every cached source the policy says this workload reloads for, with its container."""
        view = self.view(record)
        explicit = policy.has_explicit_lists(view, self.config.keys)
        out: list[tuple[SourceMeta, str | None]] = []
        for kind in self._source_informers:
            if explicit:
                metas = (by_namespace.get((kind, record.ref.namespace), []) if by_namespace is not None
                         else self.sources_in(kind, record.ref.namespace))
            else:
                found = (self.source(SourceRef(kind, record.ref.namespace, n))
                         for n in sorted(record.refs.names(kind)))
                metas = [m for m in found if m is not None]
            for meta in metas:
                decision = policy.decide(view, meta, self.options)
                if decision.reload:
                    out.append((meta, decision.container))
        return out

    def _recorded_hash(self, record: WorkloadRecord, meta: SourceMeta,
                       container: str | None) -> str | None:
        recorder = getattr(self.sinks.get(self.sink_name(record) or ""), "recorded_hash", None)
        return recorder(record, meta.ref, container) if recorder is not None else None

    # --- pause period --------------------------------------------------------------

    def _pause_state(self, record: WorkloadRecord) -> tuple[float, float] | None:
        """(paused-at, period) when we paused this Deployment; None otherwise.

        A pause we cannot time (unreadable period or paused-at) is due at once: a Deployment
        must never stay paused because of an annotation we cannot read.
        """
        keys = self.config.keys
        if record.ref.kind != "Deployment":
            return None
        paused_at = record.annotations.get(keys.paused_at)
        period_text = record.annotations.get(keys.pause_period)
        if not paused_at or not period_text:
            return None
        try:
            started = datetime.fromisoformat(paused_at.replace("Z", "+00:00")).timestamp()
            period = parse_duration(period_text)
        except ValueError:
            self._warn(record, "InvalidPausePeriod",
                       f"cannot read {keys.pause_period}={_shown((period_text,))} / {keys.paused_at}; "
                       "unpausing")
            return 0.0, 0.0
        return started, period

    def _schedule_unpause(self, record: WorkloadRecord) -> None:
        state = self._pause_state(record)
        if state is None:
            return
        started, period = state
        self.queue.add_after(UNPAUSE_PREFIX + workload_key(record.ref),
                             max(0.0, started + period - self.clock.now()))

    def _schedule_unpauses(self) -> None:
        for record in self.workloads():
            self._schedule_unpause(record)

    def _unpause(self, key: str) -> None:
        ref = _ref_from_key(key[len(UNPAUSE_PREFIX):])
        record = self.workload(ref)
        state = self._pause_state(record) if record is not None else None
        if record is None or state is None:
            return
        started, period = state
        remaining = started + period - self.clock.now()
        if remaining > 0:
            self.queue.add_after(key, remaining)
            return
        if self.config.runtime.dry_run:
            log.info("would unpause after pause period (dry run)", extra={"object": ref.key})
            return
        body = {"spec": {"paused": False},
                "metadata": {"annotations": {self.config.keys.paused_at: None}}}
        self.api.patch(self.adapters["Deployment"].resource, ref.namespace, ref.name, body,
                       content_type=STRATEGIC)
        log.info("unpaused after pause period", extra={"object": ref.key})

    # --- workers -------------------------------------------------------------------

    def _worker(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            try:
                if key.startswith(UNPAUSE_PREFIX):
                    self._unpause(key)
                elif key.startswith(BATCH_PREFIX):
                    self._sync_batch(key)
                else:
                    self._sync(key)
                self.queue.forget(key)
            except ReloaderError as exc:
                self._failed(key, exc)
            except Exception as exc:  # a bug: report, keep the worker alive
                log.exception("unexpected error while reloading", extra={"object": key})
                self._failed(key, ReloaderError(f"internal error: {type(exc).__name__}"))
            finally:
                self.queue.done(key)

    def _failed(self, key: str, exc: ReloaderError) -> None:
        requeues = self.queue.num_requeues(key)
        if exc.retryable and requeues < self.config.runtime.max_retries:
            self.metrics.queue_retry()
            log.info("emission failed, will retry",
                     extra={"object": key, "error": str(exc), "attempt": requeues + 1})
            if exc.retry_after:
                self.queue.add_after(key, exc.retry_after)
            else:
                self.queue.add_rate_limited(key)
            return
        self.queue.forget(key)
        log.error("emission failed, giving up",
                  extra={"object": key, "error": str(exc), "attempts": requeues + 1})

    def sink_name(self, record: WorkloadRecord) -> str | None:
        """The sink for this workload (None: the annotation names no known sink)."""
        return choose_sink(self.config, record)[0]

    def _sync(self, key: str) -> None:
        pending = self._take_pending(key)
        if not pending:
            return
        ref = _ref_from_key(key)
        record = self.workload(ref)
        if record is None and ref.kind in self.adapters:
            record = self.adapters[ref.kind].orphan(ref)  # e.g. a Job deleted, not yet re-created
        if record is None:
            return
        try:
            emitted = self._emit(record, pending)
        except ReloaderError as exc:
            if exc.retryable and self.queue.num_requeues(key) < self.config.runtime.max_retries:
                self._add_pending(key, pending, retry=True)
            else:
                self.metrics.reload_executed(False, ref.namespace)
                self._warn(record, "ReloadFailed", f"reload failed: {exc}")
            raise
        if emitted is None:
            return
        request, outcome = emitted
        self._observe_latency(outcome, pending.values())
        self._report(record, request, outcome)

    def _sync_batch(self, group: str) -> None:
        """One emission for every workload of a batch group (e.g. one git commit)."""
        with self._pending_lock:
            members = sorted(self._groups.pop(group, set()))
            pending = {key: self._pending.pop(key, {}) for key in members}
        requests: list[tuple[str, WorkloadRecord, ReloadRequest]] = []
        sink: Any = None
        for key, sources in pending.items():
            record = self.workload(_ref_from_key(key))
            if record is None or not sources:
                continue
            items = self._items(record, sources)
            if items:
                sink = self.sinks.get(self.sink_name(record) or "")
                tracked = tuple(Source(m.ref, m.hash) for m, _ in self._tracked(record) if m.hash)
                resync = all(p.resync for p in sources.values())
                requests.append((key, record, ReloadRequest(
                    record.ref, record, tuple(items), int(self.clock.now()), tracked=tracked,
                    resync=resync)))
        if not requests or sink is None:
            return
        try:
            with self.metrics.time_emit(sink.name):
                outcomes = sink.emit_batch([r for _, _, r in requests])
        except ReloaderError as exc:
            self.metrics.sink_outcome(sink.name, "error")
            self.metrics.sink_error(sink.name, type(exc).__name__)
            retry = exc.retryable and self.queue.num_requeues(group) < self.config.runtime.max_retries
            for key, record, _ in requests:
                if retry:
                    self._add_pending(key, pending[key], retry=True)
                    with self._pending_lock:
                        self._groups.setdefault(group, set()).add(key)
                else:
                    self.metrics.reload_executed(False, record.ref.namespace)
                self._warn(record, "ReloadFailed", f"{sink.name} sink: {exc}")
            raise
        for (key, record, request), outcome in zip(requests, outcomes, strict=True):
            self.metrics.sink_outcome(sink.name, outcome.status.value)
            self._observe_latency(outcome, pending[key].values())
            self._report(record, request, outcome)

    def _observe_latency(self, outcome: Outcome, sources: Iterable[PendingSource]) -> None:
        """change → emit latency of an applied emission, from its oldest detected change."""
        detected = [p.detected for p in sources if p.detected is not None]
        if outcome.status is OutcomeStatus.APPLIED and detected:
            self.metrics.observe_change_to_emit(outcome.sink,
                                                self.clock.monotonic() - min(detected))

    def _report(self, record: WorkloadRecord, request: ReloadRequest, outcome: Outcome) -> None:
        if outcome.status is OutcomeStatus.WOULD_APPLY:
            self._report_dry_run(record, outcome)
            return
        if outcome.status is not OutcomeStatus.APPLIED:
            return
        ref = record.ref
        self.metrics.reload_executed(True, ref.namespace)
        log.info("reloaded", extra={"object": ref.key, "sink": outcome.sink, "detail": outcome.detail})
        if self.recorder is not None:
            self.recorder.normal(ref, "Reloaded", f"reloaded through {outcome.sink}: {outcome.detail}",
                                 uid=record.uid)
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

    def _items(self, record: WorkloadRecord, pending: Mapping[SourceRef, PendingSource], *,
               lookup: Callable[[SourceRef], SourceMeta | None] | None = None) -> list[ReloadItem]:
        """The pending sources the policy says this workload reloads for.

        ``lookup`` reads a source's current meta (the cache by default).
        """
        view = self.view(record)
        items: list[ReloadItem] = []
        for ref, item in pending.items():
            meta = item.meta if item.deleted else (lookup or self.source)(ref)
            if meta is None:
                continue  # deleted since the change; a delete is its own event
            if not meta.hash and not item.deleted:
                log.error("no hash for source, skipped", extra={"object": str(ref)})
                continue
            decision = policy.decide(view, meta, self.options)
            if decision.invalid_patterns:
                self.metrics.invalid_annotation(record.ref.kind)
                self._warn(record, "InvalidAnnotation",
                           "invalid regex in reload list, entry skipped: "
                           + _shown(decision.invalid_patterns))
            if decision.oversized:
                self.metrics.invalid_annotation(record.ref.kind)
                self._warn(record, "AnnotationTooLarge",
                           f"annotation {', '.join(decision.oversized)} is over "
                           f"{policy.MAX_LIST_BYTES} bytes or {policy.MAX_LIST_ENTRIES} entries; "
                           "ignored")
            if decision.reload:
                items.append(ReloadItem(Source(ref, meta.hash), decision.container, item.deleted))
        return items

    def _emit(self, record: WorkloadRecord,
              pending: Mapping[SourceRef, PendingSource]) -> tuple[ReloadRequest, Outcome] | None:
        items = self._items(record, pending)
        if not items:
            return None
        if not record.has_template and record.ref.kind != "CronJob":
            log.info("workload has no pod template (e.g. a Rollout with workloadRef), skipped",
                     extra={"object": record.ref.key})
            return None
        name = self.sink_name(record)
        sink = self.sinks.get(name or "")
        if sink is None:
            self.metrics.sink_error(name or "unknown", "unknown-sink")
            self._warn(record, "UnknownSink",
                       f"{self.config.keys.sink} names no available sink; not reloaded")
            return None
        request = ReloadRequest(record.ref, record, tuple(items), int(self.clock.now()))
        with self.metrics.time_emit(sink.name):
            try:
                outcome = sink.emit(request)
            except ReloaderError as exc:
                self.metrics.sink_outcome(sink.name, "error")
                self.metrics.sink_error(sink.name, type(exc).__name__)
                if isinstance(exc, KubeNotFound):
                    return None  # the workload is gone
                raise
        self.metrics.sink_outcome(sink.name, outcome.status.value)
        return request, outcome

    def _warn(self, record: WorkloadRecord, reason: str, message: str) -> None:
        log.warning(message, extra={"object": record.ref.key, "reason": reason})
        if self.recorder is not None:
            self.recorder.warning(record.ref, reason, message, uid=record.uid)


class _MetricsObserver:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def watch_restarted(self, resource: str, reason: str) -> None:
        self.metrics.watch_restart(resource, reason)

    def api_error(self, verb: str, resource: str, code: int) -> None:
        self.metrics.api_error(verb, resource, code)


def _shown(patterns: tuple[str, ...]) -> str:
    """Tenant patterns for a log line or Event: the first few, each shortened."""
    shown = [repr(p if len(p) <= _SHOWN_PATTERN_CHARS else p[:_SHOWN_PATTERN_CHARS] + "…")
             for p in patterns[:_SHOWN_PATTERNS]]
    if len(patterns) > _SHOWN_PATTERNS:
        shown.append(f"and {len(patterns) - _SHOWN_PATTERNS} more")
    return ", ".join(shown)


def _ref_from_key(key: str) -> ObjectRef:
    namespace, kind, name = key.split("/", 2)
    return ObjectRef(kind, namespace, name)


def _version(resource_version: object) -> int | None:
    """A resourceVersion as a number to order changes by (None: absent or not a number)."""
    try:
        return int(str(resource_version))
    except ValueError:
        return None
