"""What the two live-patch sinks share: one rate-limited write through the kind adapter.

A Deployment carrying the pause-period annotation is paused in the same write and the
pause start recorded in ``paused-at``; the controller unpauses it when the period is over.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gitops_reloader.config import AnnotationKeys
from gitops_reloader.kube.api import JSON, KubeApi
from gitops_reloader.kube.workloads import WorkloadAdapter, WorkloadRecord, rfc3339
from gitops_reloader.model import EMPTY_MAP, ReloadRequest, TemplateEdit
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.ratelimit import TokenBucket
from gitops_reloader.syncs import RESTARTED_AT


class LivePatcher:
    """Apply a TemplateEdit to a workload, within the client-side write rate limit."""

    def __init__(
        self,
        api: KubeApi,
        adapters: Mapping[str, WorkloadAdapter],
        *,
        keys: AnnotationKeys,
        limiter: TokenBucket | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.api = api
        self.adapters = adapters
        self.keys = keys
        self.limiter = limiter
        self.metrics = metrics

    def pause_patch(self, record: WorkloadRecord, now: float) -> JSON | None:
        """For a Deployment with a pause period: pause it and record when."""
        if record.ref.kind != "Deployment" or not record.annotations.get(self.keys.pause_period):
            return None
        return {"spec": {"paused": True},
                "metadata": {"annotations": {self.keys.paused_at: rfc3339(now)}}}

    def apply(self, record: WorkloadRecord, edit: TemplateEdit, *, now: float,
              annotations: Mapping[str, str | None] = EMPTY_MAP) -> None:
        """Write ``edit``; ``annotations`` go on the workload's metadata in the same write
        (None removes one)."""
        adapter = self.adapters[record.ref.kind]
        if self.limiter is not None:
            self.limiter.acquire()
        extra = self.pause_patch(record, now)
        if annotations:
            extra = extra or {}
            metadata = extra.setdefault("metadata", {})
            metadata["annotations"] = {**metadata.get("annotations", {}), **annotations}
        adapter.apply(self.api, record, edit, now=now, extra_patch=extra)
        if self.metrics is not None:
            self.metrics.api_write(record.ref.kind)


RESTART_DETAIL = ("restart: the pods run data other than the record says (a sync brought it, or they "
                  "started while it changed), the record already reads the change")


def restarting(edit: TemplateEdit, request: ReloadRequest) -> TemplateEdit:
    """``edit``, plus — for a request that must restart the pods whatever the record says
    (:attr:`~gitops_reloader.model.ReloadRequest.restart`: pods run data a sync brought, or
    started while a source changed during a rollout) — the controller's restart annotation in
    the pod template, with a value never used before: the template is then one no ReplicaSet
    has had, so no old pod (one started with other data) is kept when it rolls."""
    if not request.restart:
        return edit
    stamp = rfc3339(request.observed_at)
    if request.workload.template_annotations.get(RESTARTED_AT, "").startswith(stamp):
        # A second restart within the same second must still change the template (and roll).
        previous = request.workload.template_annotations[RESTARTED_AT]
        count = previous[len(stamp) + 1:]
        stamp = f"{stamp}#{int(count) + 1 if count.isdigit() else 2}"
    return replace(edit, annotations={**edit.annotations, RESTARTED_AT: stamp})
