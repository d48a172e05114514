"""Which ConfigMaps/Secrets a pod template references, and the reverse index over workloads.

:func:`extract_refs` turns a raw pod spec (JSON as the API returns it) into
:class:`~gitops_reloader.model.PodRefs`, once, when the workload enters the cache.
It reads, for every container and init container, ``env[].valueFrom.configMapKeyRef`` /
``secretKeyRef`` and ``envFrom[].configMapRef`` / ``secretRef`` (→
``ContainerRefs.configmaps`` / ``.secrets``), and for the pod's volumes ``configMap.name``,
``secret.secretName``, ``projected.sources[].configMap.name`` / ``.secret.name`` and
``csi.volumeAttributes.secretProviderClass`` (→ ``PodRefs.volume_configmaps`` /
``.volume_secrets`` / ``.volume_spcs``, each source name mapped to the containers that
mount such a volume; the CSI attribute is read whatever the driver, as Stakater does).
It never raises: a missing, ``null`` or wrongly typed field simply contributes nothing.

It also records which *keys* the pod uses of each ConfigMap/Secret (``PodRefs.key_uses``,
for ``--reload-on=used-keys``), reading containers, init containers and ephemeral
containers alike:

* ``env[].valueFrom.configMapKeyRef`` / ``secretKeyRef`` use their ``key``;
* a volume (or projected volume source) with ``items`` uses the items' keys; when every
  mount of that volume has a ``subPath``, only the items whose ``path`` the subPaths
  reach (equal, inside, or a directory holding it);
* a volume *without* ``items`` whose every mount has a ``subPath`` uses the keys the
  subPaths' first path segments name (each key of such a volume is a file named by the
  key, so ``subPath: a`` reads key ``a`` and nothing else);
* ``envFrom``, a volume without items mounted whole (or not mounted at all, or through
  ``subPathExpr``), or a key reference without a ``key`` use the whole object.

A source used whole anywhere in the pod depends on the whole object and is left out of
the key maps. Key names are interned and equal key sets shared: most workloads reading
keys read the same few. Ephemeral containers only count for keys: a source they alone
reference is not a reference (they are not part of a pod template).

:class:`ReferenceIndex` answers "which workloads use ``ns/ConfigMap/x``?" in time
proportional to the answer, with memory proportional to the number of references.
Pure: no I/O; a :class:`threading.Lock` makes it safe to share between informer threads.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from gitops_reloader.model import EMPTY_MAP, ContainerRefs, PodRefs, SourceKind, SourceRef, WorkloadKey

__all__ = ["ReferenceIndex", "extract_refs"]


_NO_NAMES: frozenset[str] = frozenset()


def _frozen(names: set[str]) -> frozenset[str]:
    """``names`` frozen, sharing one empty set (most containers reference nothing)."""
    return frozenset(names) if names else _NO_NAMES


def _map(value: object) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Mapping[str, Any]]:
    """The JSON objects of ``value`` if it is a JSON array, else nothing."""
    if not isinstance(value, list | tuple):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def _name(value: object, field: str = "name") -> str | None:
    """``value[field]`` if ``value`` is an object and that field a non-empty string."""
    name = _map(value).get(field)
    return name if isinstance(name, str) and name else None


def _container_refs(container: Mapping[str, Any], *, init: bool) -> ContainerRefs | None:
    name = _name(container)
    if name is None:  # the API requires a name; a nameless one cannot be patched anyway
        return None
    configmaps: set[str] = set()
    secrets: set[str] = set()
    for env in _list(container.get("env")):
        value_from = _map(env.get("valueFrom"))
        if cm := _name(value_from.get("configMapKeyRef")):
            configmaps.add(cm)
        if secret := _name(value_from.get("secretKeyRef")):
            secrets.add(secret)
    for env_from in _list(container.get("envFrom")):
        if cm := _name(env_from.get("configMapRef")):
            configmaps.add(cm)
        if secret := _name(env_from.get("secretRef")):
            secrets.add(secret)
    return ContainerRefs(
        name=sys.intern(name), init=init, configmaps=_frozen(configmaps), secrets=_frozen(secrets)
    )


_Uses = dict[tuple[SourceKind, str], set[str] | None]
"""(kind, name) → the keys used of it; None: the whole object."""


def _use(uses: _Uses, kind: SourceKind, name: str, keys: Iterable[str] | None) -> None:
    """Record a use of ``keys`` of a source (None: the whole object, which wins)."""
    if keys is None:
        uses[(kind, name)] = None
        return
    current = uses.setdefault((kind, name), set())
    if current is not None:
        current.update(keys)


@functools.lru_cache(maxsize=4096)
def _keyset(keys: tuple[str, ...]) -> frozenset[str]:
    """One shared frozenset of interned names per distinct key set."""
    return frozenset(sys.intern(k) for k in keys) if keys else _NO_NAMES


def _env_key_uses(container: Mapping[str, Any], uses: _Uses) -> None:
    for env in _list(container.get("env")):
        value_from = _map(env.get("valueFrom"))
        for field, kind in (("configMapKeyRef", SourceKind.CONFIGMAP), ("secretKeyRef", SourceKind.SECRET)):
            if name := _name(value_from.get(field)):
                key = _name(value_from.get(field), "key")
                _use(uses, kind, name, None if key is None else (key,))
    for env_from in _list(container.get("envFrom")):
        if cm := _name(env_from.get("configMapRef")):
            _use(uses, SourceKind.CONFIGMAP, cm, None)
        if secret := _name(env_from.get("secretRef")):
            _use(uses, SourceKind.SECRET, secret, None)


def _sub_path(mount: Mapping[str, Any]) -> str | None:
    """The mount's subPath without surrounding slashes; None: mounted whole (no subPath,
    ``.``, or a ``subPathExpr`` whose value is only known in the pod)."""
    if mount.get("subPathExpr"):
        return None
    sub = _name(mount, "subPath")
    sub = sub.strip("/") if sub is not None else None
    return sub if sub and sub != "." else None


def _reaches(sub_path: str, path: str) -> bool:
    """Whether a mount of ``sub_path`` sees the item projected at ``path``."""
    path = path.strip("/")
    return path == sub_path or path.startswith(sub_path + "/") or sub_path.startswith(path + "/")


def _volume_keys(source: Mapping[str, Any], mounts: list[str | None]) -> set[str] | None:
    """The keys a volume source (configMap, secret, projected entry) exposes to its mounts."""
    items = [(key, _name(item, "path") or key) for item in _list(source.get("items"))
             if (key := _name(item, "key"))]
    sub_paths = [m for m in mounts if m is not None] if mounts and None not in mounts else None
    if items:
        if sub_paths is None:
            return {key for key, _ in items}
        return {key for key, path in items if any(_reaches(s, path) for s in sub_paths)}
    if sub_paths is None:
        return None
    return {s.split("/", 1)[0] for s in sub_paths}


def _key_uses(spec: Mapping[str, Any]) -> dict[tuple[SourceKind, str], frozenset[str]]:
    """(kind, name) → keys, for the sources used key by key only."""
    uses: _Uses = {}
    mounts: dict[str, list[str | None]] = {}
    for group in ("containers", "initContainers", "ephemeralContainers"):
        for container in _list(spec.get(group)):
            _env_key_uses(container, uses)
            for mount in _list(container.get("volumeMounts")):
                if volume_name := _name(mount):
                    mounts.setdefault(volume_name, []).append(_sub_path(mount))
    for volume in _list(spec.get("volumes")):
        mounted = mounts.get(_name(volume) or "", [])
        if cm := _name(volume.get("configMap")):
            _use(uses, SourceKind.CONFIGMAP, cm, _volume_keys(_map(volume.get("configMap")), mounted))
        if secret := _name(volume.get("secret"), "secretName"):
            _use(uses, SourceKind.SECRET, secret, _volume_keys(_map(volume.get("secret")), mounted))
        for source in _list(_map(volume.get("projected")).get("sources")):
            for field, kind in (("configMap", SourceKind.CONFIGMAP), ("secret", SourceKind.SECRET)):
                if name := _name(source.get(field)):
                    _use(uses, kind, name, _volume_keys(_map(source.get(field)), mounted))
    return {source: _keyset(tuple(sorted(keys))) for source, keys in uses.items() if keys is not None}


def _mounted_volumes(container: Mapping[str, Any]) -> set[str]:
    return {n for m in _list(container.get("volumeMounts")) if (n := _name(m))}


def extract_refs(pod_spec: Mapping[str, Any] | None) -> PodRefs:
    """The ConfigMaps/Secrets/SecretProviderClasses referenced by a pod spec.

    ``containers`` lists regular containers first, then init containers, each group in
    spec order; containers without a name are skipped. ``ContainerRefs`` hold env and
    envFrom references only; volume references are in ``volume_configmaps`` /
    ``volume_secrets`` / ``volume_spcs``: source name → names of the containers (regular,
    then init, in that order, no duplicates) whose ``volumeMounts`` mount a volume of that
    source. A volume nobody mounts still counts as a reference (with an empty tuple).
    Never raises.
    """
    spec = _map(pod_spec)
    raw_containers = [(c, False) for c in _list(spec.get("containers"))]
    raw_containers += [(c, True) for c in _list(spec.get("initContainers"))]

    containers: list[ContainerRefs] = []
    mounts: list[tuple[str, set[str]]] = []
    for raw, init in raw_containers:
        refs = _container_refs(raw, init=init)
        if refs is not None:
            containers.append(refs)
            mounts.append((refs.name, _mounted_volumes(raw)))

    # source name -> names of the volumes that carry it
    cm_volumes: dict[str, list[str | None]] = {}
    secret_volumes: dict[str, list[str | None]] = {}
    spc_volumes: dict[str, list[str | None]] = {}
    for volume in _list(spec.get("volumes")):
        volume_name = _name(volume)
        if cm := _name(volume.get("configMap")):
            cm_volumes.setdefault(cm, []).append(volume_name)
        if secret := _name(volume.get("secret"), "secretName"):
            secret_volumes.setdefault(secret, []).append(volume_name)
        for source in _list(_map(volume.get("projected")).get("sources")):
            if cm := _name(source.get("configMap")):
                cm_volumes.setdefault(cm, []).append(volume_name)
            if secret := _name(source.get("secret")):
                secret_volumes.setdefault(secret, []).append(volume_name)
        attributes = _map(volume.get("csi")).get("volumeAttributes")
        if spc := _name(attributes, "secretProviderClass"):
            spc_volumes.setdefault(spc, []).append(volume_name)

    def mounters(volume_names: list[str | None]) -> tuple[str, ...]:
        wanted = {v for v in volume_names if v is not None}
        return tuple(dict.fromkeys(c for c, mounted in mounts if mounted & wanted))

    names = {SourceKind.CONFIGMAP: set(cm_volumes), SourceKind.SECRET: set(secret_volumes)}
    for container_refs in containers:
        names[SourceKind.CONFIGMAP] |= container_refs.configmaps
        names[SourceKind.SECRET] |= container_refs.secrets
    return PodRefs(
        containers=tuple(containers),
        key_uses=tuple((kind, name, keys) for (kind, name), keys in sorted(_key_uses(spec).items())
                       if name in names[kind]),
        volume_configmaps={name: mounters(v) for name, v in cm_volumes.items()} or EMPTY_MAP,
        volume_secrets={name: mounters(v) for name, v in secret_volumes.items()} or EMPTY_MAP,
        volume_spcs={name: mounters(v) for name, v in spc_volumes.items()} or EMPTY_MAP,
    )


def _source_refs(namespace: str, refs: PodRefs) -> tuple[SourceRef, ...]:
    return tuple(
        SourceRef(kind, namespace, name) for kind in SourceKind for name in sorted(refs.names(kind))
    )


class ReferenceIndex:
    """Reverse index: source (``SourceRef``) → workloads whose pod template references it.

    Also tracks, per namespace, the workloads flagged *explicit* (they carry a non-empty
    reload list: such a workload can match a source it does not reference, so the
    controller must evaluate it for every change in its namespace).

    Thread-safe: every method takes the internal lock, and results are fresh frozensets
    the caller may keep. One entry per workload and per referenced source: a source used
    by a single workload (the common case) maps to that key itself, not to a set of one.
    Callers must pass the same namespace the workload key names;
    the index does not parse keys.

    >>> index = ReferenceIndex()
    >>> app = {"name": "app", "envFrom": [{"configMapRef": {"name": "cfg"}}]}
    >>> refs = extract_refs({"containers": [app]})
    >>> index.update(WorkloadKey("ns/Deployment/web"), "ns", refs, explicit=False)
    >>> sorted(index.lookup(SourceRef(SourceKind.CONFIGMAP, "ns", "cfg")))
    ['ns/Deployment/web']
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_source: dict[SourceRef, WorkloadKey | set[WorkloadKey]] = {}
        self._explicit: dict[str, set[WorkloadKey]] = {}
        self._entries: dict[WorkloadKey, tuple[str, tuple[SourceRef, ...], bool]] = {}

    def update(self, key: WorkloadKey, namespace: str, refs: PodRefs, *, explicit: bool) -> None:
        """Record (or replace) what workload ``key`` in ``namespace`` references."""
        sources = _source_refs(namespace, refs)
        with self._lock:
            self._remove_locked(key)
            self._entries[key] = (namespace, sources, explicit)
            for source in sources:
                users = self._by_source.get(source)
                if users is None or users == key:
                    self._by_source[source] = key
                elif isinstance(users, set):
                    users.add(key)
                else:
                    self._by_source[source] = {users, key}
            if explicit:
                self._explicit.setdefault(namespace, set()).add(key)

    def remove(self, key: WorkloadKey) -> None:
        """Forget workload ``key``; unknown keys are ignored."""
        with self._lock:
            self._remove_locked(key)

    def _remove_locked(self, key: WorkloadKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        namespace, sources, explicit = entry
        for source in sources:
            users = self._by_source.get(source)
            if users == key:
                del self._by_source[source]
            elif isinstance(users, set):
                users.discard(key)
                if len(users) == 1:
                    self._by_source[source] = next(iter(users))
        if explicit:
            keys = self._explicit.get(namespace)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._explicit[namespace]

    def lookup(self, ref: SourceRef) -> frozenset[WorkloadKey]:
        """Workloads whose pod template references ``ref`` (same namespace, kind and name)."""
        with self._lock:
            users = self._by_source.get(ref)
            if users is None:
                return frozenset()
            return frozenset(users) if isinstance(users, set) else frozenset((users,))

    def explicit_in(self, namespace: str) -> frozenset[WorkloadKey]:
        """Workloads in ``namespace`` flagged explicit (a reload list needs no reference)."""
        with self._lock:
            keys = self._explicit.get(namespace)
            return frozenset(keys) if keys else frozenset()

    def candidates(self, ref: SourceRef) -> frozenset[WorkloadKey]:
        """Every workload a change to ``ref`` may reload: those referencing it, and those in
        its namespace flagged explicit (the policy decides for each)."""
        return self.lookup(ref) | self.explicit_in(ref.namespace)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        """The number of workloads indexed."""
        with self._lock:
            return len(self._entries)
