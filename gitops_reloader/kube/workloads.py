"""Workload kinds: where each keeps its pod template and how a template change is applied.

Adding a kind (Knative, OpenKruise...) is one :class:`WorkloadAdapter` subclass and one
entry in :func:`adapters_for`. Sinks describe *what* changes as a
:class:`~gitops_reloader.model.TemplateEdit`; the adapter decides *how*: a strategic merge
patch for built-in kinds, a JSON patch guarded by the resourceVersion for custom
resources (which don't support strategic merge), a new Job for a CronJob, delete and
re-create for a Job, ``spec.restartAt`` for a Rollout with the restart strategy.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import jsonpatch

from gitops_reloader.errors import KubeNotFound
from gitops_reloader.index import extract_refs
from gitops_reloader.kube.api import JSON, JSON_PATCH, MERGE, STRATEGIC, KubeApi
from gitops_reloader.kube.resources import (
    CRONJOBS,
    DAEMONSETS,
    DEPLOYMENTCONFIGS,
    DEPLOYMENTS,
    JOBS,
    ROLLOUTS,
    STATEFULSETS,
    ResourceKind,
)
from gitops_reloader.model import ObjectRef, PodRefs, TemplateEdit

_DROP_METADATA = ("managedFields",)


@dataclass(frozen=True, slots=True)
class WorkloadRecord:
    """What the workload informer keeps: the object (minus status and managedFields)."""

    ref: ObjectRef
    uid: str
    raw: Mapping[str, Any]
    annotations: Mapping[str, str]
    template_annotations: Mapping[str, str]
    refs: PodRefs
    has_template: bool
    extra: Mapping[str, str] = field(default_factory=dict)


def rfc3339(unix_seconds: float) -> str:
    return datetime.fromtimestamp(unix_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dig(obj: Mapping[str, Any], path: Iterable[str]) -> Any:
    node: Any = obj
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _strings(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items() if v is not None}


def apply_edit_in_place(template: dict[str, Any], edit: TemplateEdit) -> None:
    """Apply ``edit`` to a pod template dict (used for custom resources and Jobs)."""
    if edit.annotations:
        metadata = template.setdefault("metadata", {}) or {}
        template["metadata"] = metadata
        annotations = metadata.get("annotations") or {}
        annotations.update(edit.annotations)
        metadata["annotations"] = annotations
    spec = template.get("spec") or {}
    containers = {c.get("name"): c for c in spec.get("containers") or () if isinstance(c, dict)}
    for container_name, env_name, value in edit.set_env:
        container = containers.get(container_name)
        if container is None:
            continue
        env = container.get("env") or []
        for entry in env:
            if entry.get("name") == env_name:
                entry.pop("valueFrom", None)
                entry["value"] = value
                break
        else:
            env.append({"name": env_name, "value": value})
        container["env"] = env
    for container_name, env_name in edit.remove_env:
        container = containers.get(container_name)
        if container is not None and container.get("env"):
            container["env"] = [e for e in container["env"] if e.get("name") != env_name]


def strategic_template_patch(edit: TemplateEdit) -> JSON:
    """The strategic-merge fragment for a pod template (containers and env by name)."""
    template: JSON = {}
    if edit.annotations:
        template["metadata"] = {"annotations": dict(edit.annotations)}
    containers: dict[str, list[JSON]] = {}
    for container_name, env_name, value in edit.set_env:
        containers.setdefault(container_name, []).append({"name": env_name, "value": value})
    for container_name, env_name in edit.remove_env:
        containers.setdefault(container_name, []).append({"name": env_name, "$patch": "delete"})
    if containers:
        template["spec"] = {
            "containers": [{"name": name, "env": env} for name, env in containers.items()]
        }
    return template


def _nest(path: tuple[str, ...], leaf: JSON) -> JSON:
    body = leaf
    for key in reversed(path):
        body = {key: body}
    return body


class WorkloadAdapter:
    """A kind whose pod template lives at ``template_path``; patched in place."""

    resource: ResourceKind = DEPLOYMENTS
    template_path: tuple[str, ...] = ("spec", "template")

    def __init__(self, resource: ResourceKind | None = None) -> None:
        if resource is not None:
            self.resource = resource

    @property
    def kind(self) -> str:
        return self.resource.kind

    def pod_template(self, raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
        template = _dig(raw, self.template_path)
        return template if isinstance(template, Mapping) else None

    def orphan(self, ref: ObjectRef) -> WorkloadRecord | None:
        """A workload this adapter removed and has not put back yet (a Job whose re-create
        failed), so that a retry can finish the write; None for kinds patched in place."""
        return None

    def record(self, raw: JSON) -> WorkloadRecord:
        """The informer transform: trim the object and extract references once."""
        metadata = raw.get("metadata") or {}
        for key in _DROP_METADATA:
            metadata.pop(key, None)
        raw.pop("status", None)
        template = self.pod_template(raw)
        pod_spec = (template or {}).get("spec") or {}
        return WorkloadRecord(
            ref=ObjectRef(self.kind, str(metadata.get("namespace", "")), str(metadata["name"])),
            uid=str(metadata.get("uid", "")),
            raw=raw,
            annotations=_strings(metadata.get("annotations")),
            template_annotations=_strings(((template or {}).get("metadata") or {}).get("annotations")),
            refs=extract_refs(pod_spec),
            has_template=template is not None and bool(pod_spec.get("containers")),
        )

    def strategic_body(self, edit: TemplateEdit, extra_patch: JSON | None = None) -> JSON:
        """The strategic-merge patch a built-in kind's :meth:`apply` sends for ``edit``."""
        body = _nest(self.template_path, strategic_template_patch(edit))
        return _merge(body, extra_patch) if extra_patch else body

    def apply(self, api: KubeApi, record: WorkloadRecord, edit: TemplateEdit, *, now: float,
              extra_patch: JSON | None = None) -> None:
        """Write ``edit`` to the workload (one API write)."""
        ref = record.ref
        if self.resource.builtin:
            api.patch(self.resource, ref.namespace, ref.name, self.strategic_body(edit, extra_patch),
                      content_type=STRATEGIC)
            return
        after = copy.deepcopy(dict(record.raw))
        template = _dig(after, self.template_path)
        if isinstance(template, dict):
            apply_edit_in_place(template, edit)
        if extra_patch:
            after = _merge(after, extra_patch)
        operations = jsonpatch.make_patch(dict(record.raw), after).patch
        if not operations:
            return
        guard = {"op": "test", "path": "/metadata/resourceVersion",
                 "value": (record.raw.get("metadata") or {}).get("resourceVersion", "")}
        api.patch(self.resource, ref.namespace, ref.name, [guard, *operations],
                  content_type=JSON_PATCH)


def _merge(base: JSON, patch: Mapping[str, Any]) -> JSON:
    out = dict(base)
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


class DeploymentAdapter(WorkloadAdapter):
    """Deployment: a template patch, plus the pause-period pause in the same write.

    A Deployment that is already paused keeps its pause as it is (as Stakater does): paused
    by its owner (no paused-at), it must never gain a paused-at, or the controller would
    unpause it; paused by us, the first paused-at (and so the unpause time) stands.
    """

    resource = DEPLOYMENTS

    def apply(self, api: KubeApi, record: WorkloadRecord, edit: TemplateEdit, *, now: float,
              extra_patch: JSON | None = None) -> None:
        pauses = bool(_dig(extra_patch or {}, ("spec", "paused")))
        if pauses and _dig(record.raw, ("spec", "paused")) is True:
            extra_patch = None
        super().apply(api, record, edit, now=now, extra_patch=extra_patch)


class RolloutAdapter(WorkloadAdapter):
    """Argo Rollout: template edit, or ``spec.restartAt`` with the restart strategy.

    A Rollout using ``workloadRef`` has no template: nothing to do (no crash).
    """

    resource = ROLLOUTS
    strategy_annotation = "reloader.stakater.com/rollout-strategy"

    def apply(self, api: KubeApi, record: WorkloadRecord, edit: TemplateEdit, *, now: float,
              extra_patch: JSON | None = None) -> None:
        if record.annotations.get(self.strategy_annotation, "").lower() == "restart":
            api.patch(self.resource, record.ref.namespace, record.ref.name,
                      {"spec": {"restartAt": rfc3339(now)}}, content_type=MERGE)
            return
        super().apply(api, record, edit, now=now, extra_patch=extra_patch)


class CronJobAdapter(WorkloadAdapter):
    """CronJob: never modified; a Job is created from its template, as ``kubectl create job --from``."""

    resource = CRONJOBS
    template_path = ("spec", "jobTemplate", "spec", "template")

    def apply(self, api: KubeApi, record: WorkloadRecord, edit: TemplateEdit, *, now: float,
              extra_patch: JSON | None = None) -> None:
        job_template = copy.deepcopy(_dig(record.raw, ("spec", "jobTemplate")) or {})
        spec = job_template.get("spec") or {}
        template = spec.get("template") or {}
        apply_edit_in_place(template, edit)
        spec["template"] = template
        jt_meta = job_template.get("metadata") or {}
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "generateName": f"{record.ref.name}-",
                "namespace": record.ref.namespace,
                "labels": dict(jt_meta.get("labels") or {}),
                "annotations": {**(jt_meta.get("annotations") or {}),
                                "cronjob.kubernetes.io/instantiate": "manual"},
                "ownerReferences": [{
                    "apiVersion": "batch/v1", "kind": "CronJob", "name": record.ref.name,
                    "uid": record.uid, "controller": True, "blockOwnerDeletion": True,
                }],
            },
            "spec": spec,
        }
        api.create(JOBS, record.ref.namespace, job)


_JOB_GENERATED_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid",
                         "job-name", "batch.kubernetes.io/job-name")


class JobAdapter(WorkloadAdapter):
    """Job: its template is immutable, so it is deleted and re-created (a new UID).

    The two writes are not atomic: when the create fails after the delete succeeded, the
    Job is gone from the cache, so the record is kept as an :meth:`orphan` until a retry
    re-creates it (that retry's delete then finds nothing, which is expected).
    """

    resource = JOBS

    def __init__(self, resource: ResourceKind | None = None) -> None:
        super().__init__(resource)
        self._orphans: dict[ObjectRef, WorkloadRecord] = {}
        self._lock = threading.Lock()

    def orphan(self, ref: ObjectRef) -> WorkloadRecord | None:
        with self._lock:
            return self._orphans.get(ref)

    def apply(self, api: KubeApi, record: WorkloadRecord, edit: TemplateEdit, *, now: float,
              extra_patch: JSON | None = None) -> None:
        old = copy.deepcopy(dict(record.raw))
        metadata = old.get("metadata") or {}
        spec = old.get("spec") or {}
        spec.pop("selector", None)
        template = spec.get("template") or {}
        labels = (template.get("metadata") or {}).get("labels") or {}
        for key in _JOB_GENERATED_LABELS:
            labels.pop(key, None)
        apply_edit_in_place(template, edit)
        job: JSON = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                key: metadata[key]
                for key in ("name", "namespace", "labels", "annotations", "ownerReferences")
                if key in metadata
            },
            "spec": spec,
        }
        job_labels = job["metadata"].get("labels") or {}
        for key in _JOB_GENERATED_LABELS:
            job_labels.pop(key, None)
        ref = record.ref
        try:
            api.delete(JOBS, ref.namespace, ref.name, propagation="Background")
        except KubeNotFound:
            if self.orphan(ref) is None:
                raise  # deleted by someone else: not ours to bring back
        with self._lock:
            self._orphans[ref] = record
        api.create(JOBS, ref.namespace, job)
        with self._lock:
            self._orphans.pop(ref, None)


def adapters_for(*, argo_rollouts: bool = False, openshift: bool = False,
                 ignored: Iterable[str] = ()) -> dict[str, WorkloadAdapter]:
    """The enabled workload kinds, by kind name."""
    ignored_set = set(ignored)
    adapters: list[WorkloadAdapter] = [
        DeploymentAdapter(), WorkloadAdapter(DAEMONSETS), WorkloadAdapter(STATEFULSETS),
    ]
    if "cronjobs" not in ignored_set:
        adapters.append(CronJobAdapter())
    if "jobs" not in ignored_set:
        adapters.append(JobAdapter())
    if argo_rollouts:
        adapters.append(RolloutAdapter())
    if openshift:
        adapters.append(WorkloadAdapter(DEPLOYMENTCONFIGS))
    return {adapter.kind: adapter for adapter in adapters}
