"""Workload kinds: where each keeps its pod template and how a template change is applied.

The kinds are one table, :func:`adapters_for`: the core kinds (a :class:`WorkloadAdapter`
subclass where the write differs), then one row per :class:`~gitops_reloader.kinds.KindSpec`
(Knative Serving, OpenKruise, ``--workload-kinds-config``), each a plain adapter built from
the row: pod template path, whether a template change rolls, a revision-name field that
refuses a write (:meth:`WorkloadAdapter.refusal`). Nothing outside this table branches on
those kinds. Sinks describe *what* changes as a
:class:`~gitops_reloader.model.TemplateEdit`; the adapter decides *how*: a strategic merge
patch for built-in kinds, a JSON patch guarded by the resourceVersion for custom
resources (which don't support strategic merge), a new Job for a CronJob, delete and
re-create for a Job, ``spec.restartAt`` for a Rollout with the restart strategy.
"""

from __future__ import annotations

import copy
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import jsonpatch

from gitops_reloader.documents import value_at
from gitops_reloader.durations import parse_rfc3339
from gitops_reloader.errors import KubeNotFound
from gitops_reloader.hashing import ENV_VAR_PREFIX
from gitops_reloader.index import extract_refs
from gitops_reloader.kinds import BUILTIN_KINDS, KindSpec
from gitops_reloader.kube.api import (
    FIELD_MANAGER,
    JSON,
    JSON_PATCH,
    MERGE,
    STRATEGIC,
    KubeApi,
    field_manager,
    written_by,
)
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
from gitops_reloader.model import CONFIG_HASH_KEY, EMPTY_MAP, ObjectRef, PodRefs, TemplateEdit
from gitops_reloader.rollout.completion import COMPLETES_LIKE, RolloutStatus, rollout_status, section
from gitops_reloader.rollout.eviction import EVICTION_ANNOTATION, eviction_status
from gitops_reloader.rollout.marker import MARKER_ANNOTATION
from gitops_reloader.syncs import SYNCED_ANNOTATION, template_fingerprint

_DROP_METADATA = ("managedFields",)
_UNREAD_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})
"""Annotations no decision reads, dropped on arrival (kubectl's copy of the whole manifest)."""


@dataclass(frozen=True, slots=True)
class WorkloadRecord:
    """What the workload informer keeps of one workload.

    ``raw`` is the object minus status and managedFields for kinds whose write needs the
    whole object (JSON-patched custom resources, Jobs, CronJobs). For kinds patched with a
    strategic merge (Deployment, DaemonSet, StatefulSet) it is a :class:`SlimObject`: the
    same mapping shape, built on each read from the few fields readers use, so 20,000
    Deployments do not keep 20,000 pod templates. Read-only for every caller.
    """

    ref: ObjectRef
    uid: str
    raw: Mapping[str, Any]
    annotations: Mapping[str, str]
    template_annotations: Mapping[str, str]
    refs: PodRefs
    has_template: bool
    template_path: tuple[str, ...] = ("spec", "template")
    """Where the kind keeps its pod template (the git sinks edit its annotations there)."""
    rollout: RolloutStatus | None = None
    """Where the rollout stands by the kind's own status, for a workload carrying the
    controller's rollout marker (:mod:`gitops_reloader.rollout.marker`) or a git sink's
    digest in its pod template (``gitops-reloader.io/config-hash``: the git follow-up,
    :mod:`gitops_reloader.control.follower`); None otherwise. The status itself is not
    kept: this verdict is all the rollout budget and the follow-up read of it."""
    template_fingerprint: int = 0
    """A digest of the pod template minus the controller's own fields
    (:func:`gitops_reloader.syncs.template_fingerprint`): its change is someone else's
    template change, a sync whose new pods read the current data."""
    generation: int = 0
    """``metadata.generation``: while it stays, the spec (and the fingerprint) did not change."""
    rolls_on_write: bool = True
    """Whether a write of its pod template rolls its pods: not for ``updateStrategy``
    ``OnDelete``, nor for a kind that does not roll (eviction restarts those, if enabled)."""
    rolling: bool = False
    """Whether its pods are being replaced now, by the kind's own status (its controller has
    reported one, and its completion rule says progressing): a pod started now reads the
    sources' data as they are now, so a change seen now may reach some pods and not others."""
    written: float = 0.0
    """When the controller's own field manager last changed it (managedFields; 0: never): a new
    instance's storm brake remembers the last write from it (``StormBrakes.recall``)."""
    created: float = 0.0
    """``metadata.creationTimestamp`` in Unix seconds (0: unknown): a workload created after a
    change its pods read is not owed it (:func:`gitops_reloader.control.restore.readers_of`)."""


_Env = tuple[tuple[str, str | None, bool], ...]
"""A container's ``STAKATER_*`` env entries: (name, value, has valueFrom)."""


class SlimObject(Mapping[str, Any]):
    """A workload as its readers see it, kept as a handful of fields.

    What it holds (everything else of the object is gone): ``apiVersion``, ``kind``; in
    ``metadata`` the name, namespace, uid, resourceVersion, labels, ownerReferences and the
    annotations; ``spec.paused``; in the pod template its annotations and, per container
    (and init container) its name and its ``STAKATER_*`` env entries — what locating a
    manifest, the pause logic and the env-vars sink read. Each access builds fresh dicts
    (cheap, and only on the rare write path), so a caller mutating them changes nothing.
    """

    __slots__ = ("_annotations", "_api_version", "_containers", "_init_containers", "_kind",
                 "_labels", "_name", "_namespace", "_owners", "_paused", "_resource_version",
                 "_template_annotations", "_template_path", "_uid")

    def __init__(self, *, api_version: str, kind: str, name: str, namespace: str, uid: str,
                 resource_version: str | None, labels: Mapping[str, str],
                 annotations: Mapping[str, str], owners: tuple[Any, ...], paused: Any,
                 template_path: tuple[str, ...] | None, template_annotations: Mapping[str, str],
                 containers: tuple[tuple[str, _Env], ...],
                 init_containers: tuple[tuple[str, _Env], ...]) -> None:
        self._api_version = api_version
        self._kind = kind
        self._name = name
        self._namespace = namespace
        self._uid = uid
        self._resource_version = resource_version
        self._labels = labels
        self._annotations = annotations
        self._owners = owners
        self._paused = paused
        self._template_path = template_path
        self._template_annotations = template_annotations
        self._containers = containers
        self._init_containers = init_containers

    def _build(self) -> JSON:
        metadata: JSON = {"name": self._name, "namespace": self._namespace, "uid": self._uid}
        if self._resource_version is not None:
            metadata["resourceVersion"] = self._resource_version
        if self._labels:
            metadata["labels"] = dict(self._labels)
        metadata["annotations"] = dict(self._annotations)
        if self._owners:
            metadata["ownerReferences"] = copy.deepcopy(list(self._owners))
        obj: JSON = {"apiVersion": self._api_version, "kind": self._kind, "metadata": metadata}
        if self._paused is not None:
            obj["spec"] = {"paused": self._paused}
        if self._template_path is not None:
            spec: JSON = {}
            for key, containers in (("containers", self._containers),
                                    ("initContainers", self._init_containers)):
                if containers:
                    spec[key] = [_container(name, env) for name, env in containers]
            template = {"metadata": {"annotations": dict(self._template_annotations)}, "spec": spec}
            obj = _merge(obj, _nest(self._template_path, template))
        return obj

    def __getitem__(self, key: str) -> Any:
        return self._build()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._build())

    def __len__(self) -> int:
        return len(self._build())

    def __repr__(self) -> str:
        return f"SlimObject({self._build()!r})"


def _container(name: str, env: _Env) -> JSON:
    if not env:
        return {"name": name}
    entries = [{"name": n, "valueFrom": {}} if has_from else {"name": n, "value": v}
               for n, v, has_from in env]
    return {"name": name, "env": entries}


def _stakater_env(container: Mapping[str, Any]) -> _Env:
    """The ``STAKATER_*`` env entries of a container (what the env-vars sink compares)."""
    out: list[tuple[str, str | None, bool]] = []
    for entry in container.get("env") or ():
        if not isinstance(entry, Mapping):
            continue
        name = str(entry.get("name", ""))
        if name.startswith(ENV_VAR_PREFIX):
            value = entry.get("value")
            out.append((sys.intern(name), None if value is None else str(value),
                        "valueFrom" in entry))
    return tuple(out)


def _slim_containers(containers: Any) -> tuple[tuple[str, _Env], ...]:
    """(name, ``STAKATER_*`` env entries) of every container."""
    out: list[tuple[str, _Env]] = []
    for container in containers if isinstance(containers, list) else ():
        if isinstance(container, Mapping):
            out.append((sys.intern(str(container.get("name"))), _stakater_env(container)))
    return tuple(out)


def rfc3339(unix_seconds: float) -> str:
    return datetime.fromtimestamp(unix_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _strings(value: Any) -> dict[str, str]:
    """A string map with keys and values interned (they repeat across workloads)."""
    if not isinstance(value, Mapping):
        return {}
    return {sys.intern(str(k)): sys.intern(str(v)) for k, v in value.items()
            if v is not None and k not in _UNREAD_ANNOTATIONS}


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
    """A kind whose pod template lives at ``template_path``; patched in place.

    Built from a :class:`KindSpec` row (``spec=``), the kind is named by the row's key
    (``CloneSet.apps.kruise.io``) and the row's template path and rules apply.
    """

    resource: ResourceKind = DEPLOYMENTS
    template_path: tuple[str, ...] = ("spec", "template")
    spec: KindSpec | None = None

    def __init__(self, resource: ResourceKind | None = None, *, spec: KindSpec | None = None) -> None:
        if resource is not None:
            self.resource = resource
        if spec is not None:
            self.spec = spec
            self.resource = ResourceKind(spec.group, spec.version, spec.plural, spec.kind)
            self.template_path = spec.template_path

    def served_resource(self, api: KubeApi) -> ResourceKind | None:
        """The version of this kind's API the server serves: the row's own, else the first of
        its ``fallback_versions`` (None: none is served)."""
        fallbacks = self.spec.fallback_versions if self.spec is not None else ()
        for version in (self.resource.version, *fallbacks):
            resource = replace(self.resource, version=version)
            if api.serves(resource):
                return resource
        return None

    @property
    def kind(self) -> str:
        """The kind's name inside the controller (``ObjectRef.kind``)."""
        return self.spec.key if self.spec is not None else self.resource.kind

    @property
    def rolls(self) -> bool:
        """Whether a change of the pod template rolls the workload."""
        return self.spec is None or self.spec.rolls

    @property
    def discovered(self) -> bool:
        """A built-in row watched only once discovery finds its API (Knative, OpenKruise)."""
        return self.spec is not None and self.spec.discovered

    def rollout_status(self, raw: Mapping[str, Any]) -> RolloutStatus:
        """Where this workload's rollout stands, by its kind's completion rule: for a row that
        names ``completes_like`` (a configured kind's ``completesLike``), that rule."""
        evicting = eviction_status(section(raw, "metadata", "annotations"))
        if evicting is not None:
            return evicting
        named = self.spec.completes_like if self.spec is not None else ""
        rule = COMPLETES_LIKE[named] if named else None
        return rollout_status(self.resource.group, self.resource.kind, raw, rule=rule)

    def refusal(self, record: WorkloadRecord) -> tuple[str, str] | None:
        """(Event reason, message) when no template change may be written to this workload.

        Knative requires ``spec.template.metadata.name`` to change with every template
        change (``RevisionTemplateSpec.VerifyNameChange``): a Service that fixes the name
        would have every reload refused by its webhook, or break the next apply of git.
        """
        path = self.spec.revision_name_path if self.spec is not None else ()
        name = value_at(record.raw, *path) if path else None
        if not name:
            return None
        return ("FixedRevisionName",
                f"{'.'.join(path)} is fixed ({str(name)[:63]!r}) and must change with every template "
                "change, so no reload can be written without renaming the revision; not reloaded. "
                f"Remove {'.'.join(path)} (a name is then generated per revision) or change it "
                "together with the configuration")

    def pod_template(self, raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The pod template in ``raw`` (None: none, or a kind whose pods are an operator's)."""
        if not self.template_path:
            return None
        template = value_at(raw, *self.template_path)
        return template if isinstance(template, Mapping) else None

    def orphan(self, ref: ObjectRef) -> WorkloadRecord | None:
        """A workload this adapter removed and has not put back yet (a Job whose re-create
        failed), so that a retry can finish the write; None for kinds patched in place."""
        return None

    def deleted_by_us(self, ref: ObjectRef) -> bool:
        """Whether a delete of ``ref`` seen now is this adapter's own, to re-create the workload
        (so the workload still owes what it owed); False for kinds patched in place."""
        return False

    @property
    def keeps_whole_object(self) -> bool:
        """Whether :meth:`apply` needs the whole cached object (a JSON patch is a diff of
        it); built-in kinds are written with a strategic merge patch and keep a slim copy."""
        return not self.resource.builtin

    def record(self, raw: JSON, previous: WorkloadRecord | None = None) -> WorkloadRecord:
        """The informer transform: trim the object and extract references once.

        ``previous`` is the cached record of the same object, if any: while the generation
        stays (a status update, a metadata edit), its template fingerprint is kept instead of
        computed again.
        """
        metadata = raw.get("metadata") or {}
        annotations = _strings(metadata.get("annotations")) or EMPTY_MAP
        typed = [key for key in (SYNCED_ANNOTATION, EVICTION_ANNOTATION)
                 if key in annotations and field_manager(metadata, key) != FIELD_MANAGER]
        if typed:
            # Only what the controller recorded counts: an entry someone else typed is ignored.
            annotations = {k: v for k, v in annotations.items() if k not in typed} or EMPTY_MAP
            raw_annotations = metadata.get("annotations")
            for key in typed:  # nor does the verdict read it
                if isinstance(raw_annotations, dict):
                    raw_annotations.pop(key, None)
        written = written_by(metadata, FIELD_MANAGER)
        for key in _DROP_METADATA:
            metadata.pop(key, None)
        template = self.pod_template(raw)
        pod_spec = (template or {}).get("spec") or {}
        template_annotations = (
            _strings(((template or {}).get("metadata") or {}).get("annotations")) or EMPTY_MAP)
        # The rollout marker (the budget) or a git sink's digest (the follow-up) wants the verdict.
        wanted = (MARKER_ANNOTATION in annotations or CONFIG_HASH_KEY in template_annotations
                  or EVICTION_ANNOTATION in annotations)
        reported = "observedGeneration" in section(raw, "status")  # its controller has looked at it
        status = self.rollout_status(raw) if wanted or reported else None
        rollout = status if wanted else None
        on_delete = section(raw, "spec", "updateStrategy").get("type") == "OnDelete"
        raw.pop("status", None)
        ref = ObjectRef(self.kind, sys.intern(str(metadata.get("namespace", ""))),
                        str(metadata["name"]))
        uid = str(metadata.get("uid", ""))
        generation = metadata.get("generation")
        generation = generation if isinstance(generation, int) else 0
        return WorkloadRecord(
            ref=ref,
            uid=uid,
            raw=raw if self.keeps_whole_object else self._slim(
                raw, ref, uid, annotations, template_annotations),
            annotations=annotations,
            template_annotations=template_annotations,
            refs=extract_refs(pod_spec),
            has_template=template is not None and bool(pod_spec.get("containers")),
            template_path=self.template_path,
            rollout=rollout,
            template_fingerprint=(previous.template_fingerprint if previous is not None and generation
                                  and (previous.uid, previous.generation) == (uid, generation)
                                  else template_fingerprint(template)),
            generation=generation,
            rolls_on_write=self.rolls and not on_delete,
            rolling=status is not None and not status.done,
            created=parse_rfc3339(metadata.get("creationTimestamp")) or 0.0,
            written=written,
        )

    def _slim(self, raw: JSON, ref: ObjectRef, uid: str, annotations: Mapping[str, str],
              template_annotations: Mapping[str, str]) -> SlimObject:
        """What a strategic-merge kind's readers use of ``raw`` (see :class:`SlimObject`)."""
        metadata = raw.get("metadata") or {}
        owners = metadata.get("ownerReferences")
        resource_version = metadata.get("resourceVersion")
        template = self.pod_template(raw)
        pod_spec = (template or {}).get("spec") or {}
        return SlimObject(
            api_version=sys.intern(str(raw.get("apiVersion", ""))), kind=self.kind,
            name=ref.name, namespace=ref.namespace, uid=uid,
            resource_version=None if resource_version is None else str(resource_version),
            labels=_strings(metadata.get("labels")) or EMPTY_MAP, annotations=annotations,
            owners=tuple(owners) if isinstance(owners, list) else (),
            paused=value_at(raw, "spec", "paused"),
            template_path=self.template_path if template is not None else None,
            template_annotations=template_annotations,
            containers=_slim_containers(pod_spec.get("containers")),
            init_containers=_slim_containers(pod_spec.get("initContainers")),
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
        template = value_at(after, *self.template_path)
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
        pauses = bool(value_at(extra_patch or {}, "spec", "paused"))
        if pauses and value_at(record.raw, "spec", "paused") is True:
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
            body: JSON = {"spec": {"restartAt": rfc3339(now)}}
            api.patch(self.resource, record.ref.namespace, record.ref.name,
                      _merge(body, extra_patch) if extra_patch else body, content_type=MERGE)
            return
        super().apply(api, record, edit, now=now, extra_patch=extra_patch)


class CronJobAdapter(WorkloadAdapter):
    """CronJob: never modified; a Job is created from its template, as ``kubectl create job --from``."""

    resource = CRONJOBS
    template_path = ("spec", "jobTemplate", "spec", "template")

    @property
    def keeps_whole_object(self) -> bool:
        return True  # the Job is built from the whole jobTemplate

    def apply(self, api: KubeApi, record: WorkloadRecord, edit: TemplateEdit, *, now: float,
              extra_patch: JSON | None = None) -> None:
        job_template = copy.deepcopy(value_at(record.raw, "spec", "jobTemplate") or {})
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

    @property
    def keeps_whole_object(self) -> bool:
        return True  # re-created from the whole object

    def __init__(self, resource: ResourceKind | None = None) -> None:
        super().__init__(resource)
        self._orphans: dict[ObjectRef, WorkloadRecord] = {}
        self._replaced: set[ObjectRef] = set()  # re-created; the old Job's delete event not seen yet
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
        with self._lock:  # marked before the delete: its watch event may come before the call returns
            ours = ref in self._orphans
            self._orphans[ref] = record
        try:
            api.delete(JOBS, ref.namespace, ref.name, propagation="Background")
        except Exception as exc:
            if ours and isinstance(exc, KubeNotFound):
                pass  # our own delete, its re-create failed before: finish it
            else:  # deleted by someone else (not ours to bring back), or not deleted at all
                with self._lock:
                    if not ours:
                        self._orphans.pop(ref, None)
                raise
        api.create(JOBS, ref.namespace, job)
        with self._lock:
            self._orphans.pop(ref, None)
            self._replaced.add(ref)

    def deleted_by_us(self, ref: ObjectRef) -> bool:
        """Whether a delete of ``ref`` seen now is ours: re-created already (said once, for the
        old Job's delete event) or still to be re-created."""
        with self._lock:
            if ref in self._replaced:
                self._replaced.discard(ref)
                return True
            return ref in self._orphans


def adapters_for(*, argo_rollouts: bool = False, openshift: bool = False,
                 ignored: Iterable[str] = (), kinds: Iterable[KindSpec] = BUILTIN_KINDS,
                 ) -> dict[str, WorkloadAdapter]:
    """The enabled workload kinds, by kind name: the core ones, then a row per ``kinds``
    entry not named in ``ignored`` (``plural.group``)."""
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
    adapters += [WorkloadAdapter(spec=spec) for spec in kinds if spec.resource_name not in ignored_set]
    return {adapter.kind: adapter for adapter in adapters}
