"""Value types shared across the package.

Everything here is immutable and free of I/O. Raw Kubernetes JSON is converted to these
types once, at the edge (``kube/``); policy, index and sinks speak only these.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NewType

WorkloadKey = NewType("WorkloadKey", str)
"""``namespace/Kind/name`` of a workload; the work queue's key."""


class SourceKind(enum.StrEnum):
    """The two kinds of object whose data change triggers a reload."""

    CONFIGMAP = "CONFIGMAP"
    SECRET = "SECRET"

    @property
    def kube_kind(self) -> str:
        """``ConfigMap`` or ``Secret``."""
        return "ConfigMap" if self is SourceKind.CONFIGMAP else "Secret"

    @property
    def plural(self) -> str:
        """The API resource name: ``configmaps`` or ``secrets``."""
        return "configmaps" if self is SourceKind.CONFIGMAP else "secrets"


class SinkName(enum.StrEnum):
    """How a reload is emitted for one workload."""

    ENV_VARS = "env-vars"
    ANNOTATIONS = "annotations"
    GIT = "git"
    PULL_REQUEST = "pull-request"
    WEBHOOK = "webhook"

    @classmethod
    def from_annotation(cls, value: str) -> SinkName | None:
        """The sink an annotation value names (trimmed, exact spelling); None for anything else."""
        text = value.strip()
        return cls(text) if text in cls._value2member_map_ else None


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """A namespaced Kubernetes object, by kind (``Deployment``, ``ConfigMap``...)."""

    kind: str
    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"

    @classmethod
    def from_key(cls, key: str) -> ObjectRef:
        """The reference a :attr:`key` (``namespace/Kind/name``) was made from."""
        namespace, kind, name = key.split("/", 2)
        return cls(kind, namespace, name)

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True, slots=True)
class SourceRef:
    """A ConfigMap or Secret, by namespace and name."""

    kind: SourceKind
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind.kube_kind}/{self.name}"


@dataclass(frozen=True, slots=True)
class SourceMeta:
    """What the controller keeps of a ConfigMap/Secret: never its data (DESIGN contract 3).

    ``hash`` is the Stakater hash ("" when not computed: decoding every Secret of the
    initial list is the largest start-up cost and no decision needs it then);
    ``fingerprint`` changes exactly when the data changes and is what change detection
    compares (for Secrets a digest of the base64 text, for ConfigMaps the hash itself).
    ``annotations`` holds only the few keys the policy reads.
    """

    ref: SourceRef
    hash: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    resource_version: str = ""
    fingerprint: str = ""

    @property
    def change_key(self) -> str:
        """What differs exactly when the data differs."""
        return self.fingerprint or self.hash


@dataclass(frozen=True, slots=True)
class Source:
    """A source as seen in one reload: which object and the hash of its data."""

    ref: SourceRef
    hash: str


@dataclass(frozen=True, slots=True)
class ContainerRefs:
    """The ConfigMaps/Secrets one container (or init container) references."""

    name: str
    init: bool
    configmaps: frozenset[str] = frozenset()
    secrets: frozenset[str] = frozenset()

    def uses(self, kind: SourceKind, name: str) -> bool:
        return name in (self.configmaps if kind is SourceKind.CONFIGMAP else self.secrets)


@dataclass(frozen=True, slots=True)
class PodRefs:
    """References of a pod template: per container, plus those of volumes (pod-wide).

    ``volume_configmaps``/``volume_secrets`` map a source name to the containers that mount
    it (an unmounted volume maps to an empty tuple).
    """

    containers: tuple[ContainerRefs, ...] = ()
    volume_configmaps: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    volume_secrets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def names(self, kind: SourceKind) -> frozenset[str]:
        """Every name of ``kind`` referenced anywhere in the pod template."""
        out: set[str] = set(
            self.volume_configmaps if kind is SourceKind.CONFIGMAP else self.volume_secrets
        )
        for c in self.containers:
            out |= c.configmaps if kind is SourceKind.CONFIGMAP else c.secrets
        return frozenset(out)


@dataclass(frozen=True, slots=True)
class ReloadItem:
    """One source to record on one workload, and in which container (env-vars sink)."""

    source: Source
    container: str | None
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class ReloadRequest:
    """What a sink is asked to do for one workload.

    ``workload`` is the workload's record as last seen in the informer cache
    (:class:`gitops_reloader.kube.workloads.WorkloadRecord`; read-only: a sink must not
    mutate it); ``items`` are the changed sources, oldest change first.
    """

    ref: ObjectRef
    workload: Any
    items: tuple[ReloadItem, ...]
    observed_at: int
    tracked: tuple[Source, ...] = ()
    """Every source the workload reloads for, with current hashes (set for batch sinks:
    the git digest covers all of them, so it does not depend on which one changed)."""
    resync: bool = False
    """A start-up / take-over check, not a change: emit only where the workload already
    records a value that is out of date (never a first record)."""


class OutcomeStatus(enum.StrEnum):
    APPLIED = "applied"
    ALREADY_CURRENT = "already-current"
    SKIPPED = "skipped"
    WOULD_APPLY = "would-apply"
    """``--dry-run``: the sink decided to write and wrote nothing."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of one emission. ``detail`` is safe to log (never data)."""

    status: OutcomeStatus
    sink: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class TemplateEdit:
    """A change to a pod template, independent of how it is sent to the API server.

    ``set_env`` holds (container, env var name, value); ``remove_env`` (container, name);
    ``annotations`` are pod-template annotations to set.
    """

    set_env: tuple[tuple[str, str, str], ...] = ()
    remove_env: tuple[tuple[str, str], ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.set_env or self.remove_env or self.annotations)
