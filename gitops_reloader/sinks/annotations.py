"""The ``annotations`` sink: pod-template annotation ``reloader.stakater.com/last-reloaded-from``.

The value is Stakater's JSON ``{"type","name","namespace","hash","containerRefs",
"observedAt"}``. One annotation records one source: when several sources changed in one
window, the last one is recorded (the single write rolls the pods for all of them).
Idempotent: the same (type, name, namespace, hash) already recorded → no write.
"""

from __future__ import annotations

import json
from typing import ClassVar

from gitops_reloader.hashing import DELETED_HASH
from gitops_reloader.kube.workloads import WorkloadRecord
from gitops_reloader.model import (
    LAST_RELOADED_FROM,
    Outcome,
    OutcomeStatus,
    ReloadItem,
    ReloadRequest,
    SinkName,
    SourceRef,
    TemplateEdit,
)
from gitops_reloader.sinks.live import RESTART_DETAIL, LivePatcher, restarting

__all__ = ["LAST_RELOADED_FROM", "AnnotationsSink", "describe_annotation", "recorded_source", "rolled_at"]


def recorded_source(record: WorkloadRecord) -> tuple[str, str, str, str] | None:
    """(type, name, namespace, hash) recorded on the workload, if any and well-formed."""
    return _parsed(record.template_annotations.get(LAST_RELOADED_FROM))


def rolled_at(record: WorkloadRecord) -> float | None:
    """When the reload ``last-reloaded-from`` records was written (its ``observedAt``, Unix
    seconds, as Stakater and this sink write it); None: no record, or no usable time."""
    text = record.template_annotations.get(LAST_RELOADED_FROM)
    if not text or len(text) > 4096:
        return None
    try:
        observed = json.loads(text).get("observedAt")
    except (ValueError, AttributeError):
        return None
    if isinstance(observed, bool) or not isinstance(observed, int | float) or not 0 < observed < 10 ** 11:
        return None
    return float(observed)


def _parsed(text: str | None) -> tuple[str, str, str, str] | None:
    if not text:
        return None
    try:
        data = json.loads(text)
        return (str(data["type"]), str(data["name"]), str(data["namespace"]), str(data["hash"]))
    except (ValueError, KeyError, TypeError):
        return None


def _identity(item: ReloadItem) -> tuple[str, str, str, str]:
    ref = item.source.ref
    digest = DELETED_HASH if item.deleted else item.source.hash
    return (ref.kind.value, ref.name, ref.namespace, digest)


class AnnotationsSink:
    """Record the changed source in the pod-template annotation."""

    name: ClassVar[str] = SinkName.ANNOTATIONS.value

    def __init__(self, patcher: LivePatcher) -> None:
        self.patcher = patcher

    def recorded_hash(self, record: WorkloadRecord, ref: SourceRef,
                      container: str | None) -> str | None:
        """The hash recorded for ``ref`` if the annotation records that very source."""
        recorded = recorded_source(record)
        if recorded is None or recorded[:3] != (ref.kind.value, ref.name, ref.namespace):
            return None
        return recorded[3]

    def rolled_at(self, record: WorkloadRecord) -> float | None:
        """When the workload's pods last rolled for a reload (:func:`rolled_at`)."""
        return rolled_at(record)

    def recorded_after(self, request: ReloadRequest, ref: SourceRef, container: str | None) -> str | None:
        """The hash the workload records for ``ref`` once ``request`` is written: the one source
        the annotation names then (the write's latest pending source, else the one it names now)."""
        text = self.edit_for(request).annotations.get(LAST_RELOADED_FROM)
        named = recorded_source(request.workload) if text is None else _parsed(text)
        if named is None or named[:3] != (ref.kind.value, ref.name, ref.namespace):
            return None
        return named[3]

    def edit_for(self, request: ReloadRequest) -> TemplateEdit:
        """The annotation write that records the latest pending source (empty: already current;
        the restart annotation when the request must restart pods whose record is current)."""
        recorded = recorded_source(request.workload)
        pending = [item for item in request.items if _identity(item) != recorded]
        if not pending:
            return restarting(TemplateEdit(), request)
        item = pending[-1]
        kind, name, namespace, digest = _identity(item)
        value = json.dumps({
            "type": kind, "name": name, "namespace": namespace, "hash": digest,
            "containerRefs": [item.container] if item.container else [],
            "observedAt": int(request.observed_at),
        }, separators=(",", ":"))
        return restarting(TemplateEdit(annotations={LAST_RELOADED_FROM: value}), request)

    def emit(self, request: ReloadRequest) -> Outcome:
        edit = self.edit_for(request)
        if not edit:
            return Outcome(OutcomeStatus.ALREADY_CURRENT, self.name)
        self.patcher.apply(request.workload, edit, now=request.observed_at,
                           annotations=request.workload_annotations)
        return Outcome(OutcomeStatus.APPLIED, self.name, describe_annotation(edit))


def describe_annotation(edit: TemplateEdit) -> str:
    """``configmap/<name>`` (or ``secret/...``) of the source an annotation edit records."""
    if LAST_RELOADED_FROM not in edit.annotations:
        return RESTART_DETAIL
    data = json.loads(edit.annotations[LAST_RELOADED_FROM])
    return f"{str(data['type']).lower()}/{data['name']}"
