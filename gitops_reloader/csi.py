"""Secrets Store CSI integration, the pure part: what is kept of the driver's objects.

Stakater's ``--enable-csi-integration`` treats a ``SecretProviderClassPodStatus`` (one
per pod and mounted SecretProviderClass, written by the CSI driver) as a change of the
*SecretProviderClass* it names (``status.secretProviderClassName``) when the pod's
object versions change. The hash is :func:`~gitops_reloader.hashing.spc_pod_status_hash`
(object ids and versions, never secret values), so every pod of a workload that sees the
same versions reports the same hash.

Kept per pod status: a :class:`PodStatus` (names and the hash, a few hundred bytes).
Kept per SecretProviderClass: a :class:`~gitops_reloader.model.SourceMeta` with the
annotations the policy reads (``reloader.stakater.com/ignore``, ``match``); its
``hash`` is filled in by :class:`LatestHashes` from the pod statuses.

Change rule (:func:`status_changed`): an update whose hash differs from the previous
one. Creates and deletes of pod statuses are never changes (Stakater ignores them: a
new pod mounts the current versions anyway).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gitops_reloader.hashing import spc_pod_status_hash
from gitops_reloader.model import SourceKind, SourceMeta, SourceRef, resource_version_number

__all__ = ["LatestHashes", "PodStatus", "pod_status_record", "spc_record", "status_changed"]


@dataclass(frozen=True, slots=True)
class PodStatus:
    """What is kept of one ``SecretProviderClassPodStatus``."""

    namespace: str
    name: str
    pod: str
    """``status.podName`` ("" if the driver has not written it)."""
    spc: str
    """``status.secretProviderClassName``."""
    hash: str
    resource_version: int = 0

    @property
    def source(self) -> SourceRef:
        """The SecretProviderClass this status reports on."""
        return SourceRef(SourceKind.SECRETPROVIDERCLASS, self.namespace, self.spc)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def pod_status_record(raw: Mapping[str, Any]) -> PodStatus:
    """Informer transform for pod statuses: names and hash; the objects list is dropped."""
    metadata = raw.get("metadata") or {}
    status = raw.get("status")
    status = status if isinstance(status, Mapping) else {}
    return PodStatus(
        namespace=_text(metadata.get("namespace")),
        name=_text(metadata.get("name")),
        pod=_text(status.get("podName")),
        spc=_text(status.get("secretProviderClassName")),
        hash=spc_pod_status_hash(status),
        resource_version=resource_version_number(metadata.get("resourceVersion")) or 0,
    )


def status_changed(old: PodStatus, new: PodStatus) -> bool:
    """Whether an update of one pod status is a change of its SecretProviderClass."""
    return bool(new.spc) and old.hash != new.hash


def spc_record(raw: Mapping[str, Any], keys: Iterable[str]) -> SourceMeta:
    """Informer transform for SecretProviderClasses: the annotations in ``keys``.

    ``hash`` stays empty: a SecretProviderClass's own spec is not the change signal.
    """
    metadata = raw.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    return SourceMeta(
        ref=SourceRef(SourceKind.SECRETPROVIDERCLASS, _text(metadata.get("namespace")),
                      _text(metadata.get("name"))),
        hash="",
        annotations={k: str(annotations[k]) for k in keys if k in annotations},
        resource_version=_text(metadata.get("resourceVersion")),
    )


class LatestHashes:
    """The hash a SecretProviderClass was last reported with, by any pod (thread-safe).

    "Last" is the pod status written last (highest resourceVersion), so the initial list,
    whatever its order, picks the newest report, not a stale one of a terminating pod.
    One entry per SecretProviderClass seen in a pod status; entries are dropped with
    :meth:`forget` when the class is deleted, so memory follows the live classes.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hashes: dict[SourceRef, tuple[int, str]] = {}

    def record(self, ref: SourceRef, digest: str, resource_version: int) -> None:
        """Keep ``digest`` unless a later-written report is already kept."""
        with self._lock:
            kept = self._hashes.get(ref)
            if kept is None or resource_version >= kept[0]:
                self._hashes[ref] = (resource_version, digest)

    def get(self, ref: SourceRef) -> str:
        with self._lock:
            kept = self._hashes.get(ref)
            return kept[1] if kept is not None else ""

    def forget(self, ref: SourceRef) -> None:
        with self._lock:
            self._hashes.pop(ref, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._hashes)
