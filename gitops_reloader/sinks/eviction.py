"""The ``eviction`` sink: a workload with no pod template (an operator's custom resource).

Such a workload has nothing the controller may write that restarts its pods; the operator
owns them. The sink records the change in the workload's **metadata** — the eviction record
(:mod:`gitops_reloader.rollout.eviction`) with the hash of every source its pods must run
with — and the evictor (:mod:`gitops_reloader.control.evictor`) restarts the pods through
the Eviction API. The record is also what the next reload compares with (``recorded_hash``),
so a restart of the controller or a relist restarts nothing. Chosen by the controller for
kinds configured with ``pods:`` and no ``podTemplatePath``; never by annotation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from gitops_reloader.hashing import DELETED_HASH
from gitops_reloader.kube.api import MERGE, KubeApi
from gitops_reloader.kube.workloads import WorkloadAdapter, WorkloadRecord
from gitops_reloader.model import Outcome, OutcomeStatus, ReloadRequest, SourceRef
from gitops_reloader.rollout.eviction import EVICTION_ANNOTATION, EvictionRecord, parse_record

__all__ = ["EVICTION_SINK", "EvictionSink", "record_key"]

EVICTION_SINK = "eviction"
MAX_RECORDED_SOURCES = 64


def record_key(ref: SourceRef) -> str:
    """How a source is named in the record: ``ConfigMap/name`` (the workload's namespace)."""
    return f"{ref.kind.kube_kind}/{ref.name}"


class EvictionSink:
    """Record the change on the workload; the evictor restarts its pods."""

    name: ClassVar[str] = EVICTION_SINK

    def __init__(self, api: KubeApi, adapters: Mapping[str, WorkloadAdapter], *,
                 dry_run: bool = False) -> None:
        self.api = api
        self.adapters = adapters
        self.dry_run = dry_run

    def recorded_hash(self, record: WorkloadRecord, ref: SourceRef, container: str | None) -> str | None:
        """The hash the workload's pods were restarted for, by its eviction record."""
        current = parse_record(record.annotations.get(EVICTION_ANNOTATION))
        return current.sources.get(record_key(ref)) if current is not None else None

    def emit(self, request: ReloadRequest) -> Outcome:
        record = request.workload
        current = parse_record(record.annotations.get(EVICTION_ANNOTATION))
        sources = dict(current.sources) if current is not None else {}
        changed = []
        for item in request.items:
            key = record_key(item.source.ref)
            value = DELETED_HASH if item.deleted else item.source.hash
            if sources.get(key) != value:
                sources.pop(key, None)
                sources[key] = value
                changed.append(key)
        if not changed and not request.restart:
            return Outcome(OutcomeStatus.ALREADY_CURRENT, self.name)
        kept = dict(list(sources.items())[-MAX_RECORDED_SOURCES:])
        detail = f"evict its pods for {', '.join(changed) or 'a restart'}"
        if self.dry_run:
            return Outcome(OutcomeStatus.WOULD_APPLY, self.name, f"would {detail}")
        value = EvictionRecord(since=int(request.observed_at), sources=kept).encode()
        patch = {"metadata": {"annotations": {**request.workload_annotations, EVICTION_ANNOTATION: value}}}
        self.api.patch(self.adapters[record.ref.kind].resource, record.ref.namespace, record.ref.name,
                       patch, content_type=MERGE)
        return Outcome(OutcomeStatus.APPLIED, self.name, detail)
