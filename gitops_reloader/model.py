"""Value types shared across the package.

Everything here is immutable and free of I/O. Raw Kubernetes JSON is converted to these
types once, at the edge (``kube/``); policy, index and sinks speak only these.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NewType, Self

WorkloadKey = NewType("WorkloadKey", str)
"""``namespace/Kind/name`` of a workload; the work queue's key."""


class SourceKind(enum.StrEnum):
    """The kinds of object whose change triggers a reload.

    The value is Stakater's type name: the env var suffix (``STAKATER_<NAME>_<VALUE>``)
    and the ``type`` of ``last-reloaded-from``. ``SECRETPROVIDERCLASS`` (Secrets Store
    CSI, ``--enable-csi-integration``) changes when a pod's
    ``SecretProviderClassPodStatus`` reports new object versions (:mod:`gitops_reloader.csi`).
    """

    CONFIGMAP = "CONFIGMAP"
    SECRET = "SECRET"
    SECRETPROVIDERCLASS = "SECRETPROVIDERCLASS"

    @property
    def kube_kind(self) -> str:
        """``ConfigMap``, ``Secret`` or ``SecretProviderClass``."""
        return _KUBE_KINDS[self]

    @property
    def plural(self) -> str:
        """The API resource name: ``configmaps``, ``secrets`` or ``secretproviderclasses``."""
        return _PLURALS[self]


_KUBE_KINDS: dict[SourceKind, str] = {
    SourceKind.CONFIGMAP: "ConfigMap",
    SourceKind.SECRET: "Secret",
    SourceKind.SECRETPROVIDERCLASS: "SecretProviderClass",
}
_BY_KUBE_KIND = {kube_kind: kind for kind, kube_kind in _KUBE_KINDS.items()}
_PLURALS: dict[SourceKind, str] = {
    SourceKind.CONFIGMAP: "configmaps",
    SourceKind.SECRET: "secrets",
    SourceKind.SECRETPROVIDERCLASS: "secretproviderclasses",
}


class _Choice(enum.StrEnum):
    """A string enum whose members an annotation value names."""

    @classmethod
    def from_annotation(cls, value: str) -> Self | None:
        """The member an annotation value names (trimmed, exact spelling); None for anything else."""
        text = value.strip()
        return cls(text) if text in cls._value2member_map_ else None


class ReloadOn(_Choice):
    """What change of a source reloads a workload (``--reload-on``, annotation
    ``gitops-reloader.io/reload-on``): any data change (Stakater), or only a change of a
    key the workload uses (``docs/rollouts.md``)."""

    ANY_CHANGE = "any-change"
    USED_KEYS = "used-keys"


class SinkName(_Choice):
    """How a reload is emitted for one workload."""

    ENV_VARS = "env-vars"
    ANNOTATIONS = "annotations"
    GIT = "git"
    PULL_REQUEST = "pull-request"
    WEBHOOK = "webhook"


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

    @property
    def local_id(self) -> str:
        """``ConfigMap/name``: the source as named beside a workload of its namespace."""
        return f"{self.kind.kube_kind}/{self.name}"

    @classmethod
    def from_local_id(cls, namespace: str, local_id: str) -> SourceRef | None:
        """The source a :attr:`local_id` names in ``namespace`` (None: not of that form)."""
        kind_name, _, name = local_id.partition("/")
        kind = _BY_KUBE_KIND.get(kind_name)
        return cls(kind, namespace, name) if kind is not None and name else None


class _EmptyMap(dict[str, Any]):
    """An empty dict that refuses to change: one instance stands for every empty map of
    the cached records (a fresh ``{}`` costs 64 bytes per record). Being a dict, it
    serialises, copies and compares like ``{}``."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> Any:
        raise TypeError("this empty map is shared and read-only")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse


EMPTY_MAP: Mapping[str, Any] = _EmptyMap()
"""The shared read-only empty map (records without annotations, labels, volume refs)."""

CONFIG_HASH_KEY = "gitops-reloader.io/config-hash"
"""The pod-template annotation the git sinks write (a keyed digest); its change rolls the workload."""

LAST_RELOADED_FROM = "reloader.stakater.com/last-reloaded-from"
"""The pod-template annotation the ``annotations`` sink writes (Stakater's name and JSON)."""


class SourceMeta:
    """What the controller keeps of a ConfigMap/Secret: never its data (DESIGN contract 3).

    ``hash`` is the Stakater hash as hex text ("" when not computed: decoding every Secret
    of the initial list is the largest start-up cost and no decision needs it then);
    ``fingerprint`` changes exactly when the data changes and is what change detection
    compares when set (a Secret without per-key digests — no data, or too many keys: a
    digest of the base64 text); else a Secret compares its per-key digests, which need
    no decoding either, and a ConfigMap its hash.
    ``labels`` and ``annotations`` hold only the few keys a decision reads (the label
    selector itself is applied by the API server).

    One of these exists per cached ConfigMap/Secret, so it is stingy: both digests are
    kept as 20 raw bytes (the hex text is made when asked for; text that is not
    lower-case hex is kept as given), ``__slots__``, and one shared read-only mapping
    when there are no labels or annotations. Immutable: callers must not
    mutate ``annotations``; :meth:`replace` makes a changed copy.

    ``key_digests`` is what key-level reload (``--reload-on=used-keys``) compares: per data
    key a 16-byte entry (8-byte digest of the key name, 8-byte digest of the value),
    sorted, in one ``bytes`` (:func:`gitops_reloader.hashing.key_digests`); never the data.
    """

    __slots__ = ("_fingerprint", "_hash", "annotations", "key_digests", "labels", "ref",
                 "resource_version")

    ref: SourceRef
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    resource_version: str
    _hash: bytes | str
    _fingerprint: bytes | str
    key_digests: bytes

    def __init__(self, ref: SourceRef, hash: str = "", labels: Mapping[str, str] | None = None,
                 annotations: Mapping[str, str] | None = None, resource_version: str = "",
                 fingerprint: str = "", key_digests: bytes = b"") -> None:
        setter = object.__setattr__
        setter(self, "ref", ref)
        setter(self, "_hash", _digest(hash))
        setter(self, "labels", labels if labels else EMPTY_MAP)
        setter(self, "annotations", annotations if annotations else EMPTY_MAP)
        setter(self, "resource_version", resource_version)
        setter(self, "_fingerprint", _digest(fingerprint))
        setter(self, "key_digests", key_digests)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"SourceMeta is immutable (cannot set {name!r})")

    @property
    def hash(self) -> str:
        """The Stakater hash (hex), or "" when not computed."""
        return _text(self._hash)

    @property
    def fingerprint(self) -> str:
        """The change-detection digest (hex), or "" when the hash serves."""
        return _text(self._fingerprint)

    @property
    def change_key(self) -> str:
        """What differs exactly when the data differs: the fingerprint if kept, else for a
        Secret a digest of its per-key digests (no second digest of the data is kept), else
        the hash."""
        if self._fingerprint:
            return _text(self._fingerprint)
        if self.ref.kind is SourceKind.SECRET and self.key_digests:
            return hashlib.sha1(self.key_digests).hexdigest()
        return _text(self._hash)

    def replace(self, **changes: Any) -> SourceMeta:
        """A copy with some constructor arguments changed."""
        fields = {"ref": self.ref, "hash": self.hash, "labels": self.labels,
                  "annotations": self.annotations,
                  "resource_version": self.resource_version, "fingerprint": self.fingerprint,
                  "key_digests": self.key_digests}
        return SourceMeta(**{**fields, **changes})

    def __reduce__(self) -> tuple[Any, ...]:
        return (SourceMeta, (self.ref, self.hash, dict(self.labels), dict(self.annotations),
                             self.resource_version, self.fingerprint, self.key_digests))

    def _key(self) -> tuple[object, ...]:
        return (self.ref, self._hash, dict(self.labels), dict(self.annotations),
                self.resource_version, self._fingerprint, self.key_digests)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SourceMeta):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash((self.ref, self._hash, self._fingerprint, self.resource_version))

    def __repr__(self) -> str:
        return (f"SourceMeta(ref={self.ref!r}, hash={self.hash!r}, labels={dict(self.labels)!r}, "
                f"annotations={dict(self.annotations)!r}, "
                f"resource_version={self.resource_version!r}, fingerprint={self.fingerprint!r}, "
                f"keys={len(self.key_digests) // 16})")


def resource_version_number(text: object) -> int | None:
    """A resourceVersion as a number to order changes by (None: absent or not a number).

    The API server's versions are decimal digits; anything else (or over 20 digits) is
    not a version to order by.
    """
    value = text if isinstance(text, str) else ""
    return int(value) if value.isdigit() and len(value) <= 20 else None


def _digest(text: str) -> bytes | str:
    """Lower-case hex digest text as its bytes (half the size); any other text as it is."""
    try:
        digest = bytes.fromhex(text)
    except ValueError:
        return text
    return digest if digest.hex() == text else text


def _text(digest: bytes | str) -> str:
    return digest.hex() if isinstance(digest, bytes) else digest


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
        """Whether env/envFrom reference the source (a SecretProviderClass never is)."""
        if kind is SourceKind.CONFIGMAP:
            return name in self.configmaps
        return kind is SourceKind.SECRET and name in self.secrets


@dataclass(frozen=True, slots=True)
class PodRefs:
    """References of a pod template: per container, plus those of volumes (pod-wide).

    ``volume_configmaps``/``volume_secrets``/``volume_spcs`` map a source name to the
    containers that mount it (an unmounted volume maps to an empty tuple);
    ``volume_spcs`` holds the SecretProviderClasses of CSI volumes
    (``csi.volumeAttributes.secretProviderClass``).

    ``key_uses`` holds ``(kind, source name, keys)`` — the data keys the pod uses of a
    ConfigMap/Secret — for the sources the pod uses *only* key by key (``configMapKeyRef``/``secretKeyRef``,
    volume ``items``, ``subPath``; :func:`gitops_reloader.index.extract_refs`). A source
    referenced whole anywhere in the pod (``envFrom``, a volume without items) is not in
    them: it depends on the whole object.
    """

    containers: tuple[ContainerRefs, ...] = ()
    volume_configmaps: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    volume_secrets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    volume_spcs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    key_uses: tuple[tuple[SourceKind, str, frozenset[str]], ...] = ()
    """A tuple, not a mapping: a pod uses few sources by key, and a small tuple costs a
    third of a dict (one of these per tracked workload)."""

    def used_keys(self, kind: SourceKind, name: str) -> frozenset[str] | None:
        """The keys the pod uses of source ``kind``/``name``; None: the whole object (or
        not referenced, or a SecretProviderClass, which has no keys)."""
        for used_kind, used_name, keys in self.key_uses:
            if used_kind is kind and used_name == name:
                return keys
        return None

    def volumes(self, kind: SourceKind) -> Mapping[str, tuple[str, ...]]:
        """Source name → mounting containers, for the volumes of ``kind``."""
        if kind is SourceKind.CONFIGMAP:
            return self.volume_configmaps
        return self.volume_secrets if kind is SourceKind.SECRET else self.volume_spcs

    def names(self, kind: SourceKind) -> frozenset[str]:
        """Every name of ``kind`` referenced anywhere in the pod template."""
        out: set[str] = set(self.volumes(kind))
        if kind is not SourceKind.SECRETPROVIDERCLASS:
            for c in self.containers:
                out |= c.configmaps if kind is SourceKind.CONFIGMAP else c.secrets
        return frozenset(out)


@dataclass(frozen=True, slots=True)
class ReloadItem:
    """One source to record on one workload, and in which container (env-vars sink)."""

    source: Source
    container: str | None
    deleted: bool = False
    version: str = ""
    """The source's resourceVersion the hash was read at ("" unknown): a template change
    after it means the new pods read this data (:mod:`gitops_reloader.syncs`)."""


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
    workload_annotations: Mapping[str, str | None] = field(default_factory=lambda: EMPTY_MAP)
    """Set on the workload's own metadata in the same write as the reload (a live sink's
    rollout marker with a rollout budget, :mod:`gitops_reloader.rollout.marker`; None
    removes one, e.g. synced entries the write replaces); empty otherwise, so the write is
    exactly what it is without a budget."""
    restart: bool = False
    """The pods run data a sync brought, other than what the sink records
    (:func:`gitops_reloader.syncs.needs_restart`): the write must restart them even where
    the record already reads the target value."""


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
    held: str = ""
    """``SKIPPED`` for a reason a person can fix (``ManifestNotFound``, ``ManifestUnparsable``,
    ``RepositoryUnusable``...): the reload is not dropped but stays pending, tried again
    slowly and at once when the workload's annotations change. Empty otherwise."""


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
