"""The state shards as ConfigMaps ``<name>-<index>`` in the controller's namespace (I/O).

Read with one labelled list (``gitops-reloader.io/state-store=<name>``), written one
ConfigMap at a time with ``PUT`` on the last known ``resourceVersion``. Only the leader
writes; a ``409`` means our version is stale (e.g. the old leader's last write landed
after we listed), so the current version is read and the shard replaced again: a shard is
always written whole, from the writer's own complete view of its entries.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from gitops_reloader.errors import KubeConflict, KubeNotFound
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.resources import CONFIGMAPS
from gitops_reloader.model import SourceKind, SourceRef
from gitops_reloader.state.codec import MAX_SHARDS, ShardData

__all__ = ["STORE_LABEL", "ConfigMapShards"]

STORE_LABEL = "gitops-reloader.io/state-store"
"""Label naming the store a shard belongs to (value: the store name)."""
_PAGE = 50


class ConfigMapShards:
    """Shard ConfigMaps of one store. Thread-safe; raises :class:`KubeError` on API failures."""

    def __init__(self, api: KubeApi, *, namespace: str, name: str) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self._versions: dict[int, str] = {}
        self._lock = threading.Lock()

    def shard_name(self, index: int) -> str:
        return f"{self.name}-{index}"

    def read(self) -> list[ShardData]:
        """Every shard of this store (ConfigMaps with other names are ignored)."""
        shards: list[ShardData] = []
        versions: dict[int, str] = {}
        token = ""
        while True:
            page = self.api.list(CONFIGMAPS, namespace=self.namespace, limit=_PAGE,
                                 label_selector=f"{STORE_LABEL}={self.name}", continue_token=token)
            for item in page.get("items") or []:
                metadata = item.get("metadata") or {}
                index = self._index(str(metadata.get("name", "")))
                if index is None:
                    continue
                data = item.get("data") or {}
                shards.append(ShardData(index, {str(k): str(v) for k, v in data.items()}))
                versions[index] = str(metadata.get("resourceVersion", ""))
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                break
        with self._lock:
            self._versions = versions
        return shards

    def is_shard(self, ref: SourceRef) -> bool:
        """Whether ``ref`` names one of this store's ConfigMaps."""
        return (ref.kind is SourceKind.CONFIGMAP and ref.namespace == self.namespace
                and self._index(ref.name) is not None)

    def _index(self, name: str) -> int | None:
        prefix = f"{self.name}-"
        suffix = name[len(prefix):] if name.startswith(prefix) else ""
        if not suffix.isdigit() or len(suffix) > 3 or int(suffix) >= MAX_SHARDS:
            return None
        return int(suffix)

    def write(self, index: int, data: Mapping[str, str]) -> None:
        """Replace shard ``index`` with ``data`` (create it if it does not exist)."""
        with self._lock:
            version = self._versions.get(index)
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.shard_name(index),
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/managed-by": "gitops-reloader", STORE_LABEL: self.name},
                "annotations": {"gitops-reloader.io/purpose": "reload state (--state-store); "
                                "keyed digests only, edited by the controller"},
            },
            "data": dict(data),
        }
        if version is None:
            try:
                stored = self.api.create(CONFIGMAPS, self.namespace, body)
            except KubeConflict:
                version = self._current_version(index)
            else:
                self._remember(index, stored)
                return
        for attempt in range(2):
            body["metadata"]["resourceVersion"] = version
            try:
                stored = self.api.update(CONFIGMAPS, self.namespace, self.shard_name(index), body)
            except KubeConflict:
                if attempt:
                    raise
                version = self._current_version(index)
            except KubeNotFound:
                with self._lock:
                    self._versions.pop(index, None)
                raise
            else:
                self._remember(index, stored)
                return

    def _current_version(self, index: int) -> str:
        current = self.api.get(CONFIGMAPS, self.namespace, self.shard_name(index))
        return str((current.get("metadata") or {}).get("resourceVersion", ""))

    def _remember(self, index: int, stored: Mapping[str, object]) -> None:
        metadata = stored.get("metadata")
        version = metadata.get("resourceVersion", "") if isinstance(metadata, Mapping) else ""
        with self._lock:
            self._versions[index] = str(version)
