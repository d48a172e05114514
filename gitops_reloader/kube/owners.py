"""Which workload runs a pod: its controller owner chain, read from metadata on demand.

A Secrets Store CSI ``SecretProviderClassPodStatus`` names its pod; the reload belongs
to the workload that owns that pod. :class:`OwnerResolver` follows the *controller*
``ownerReferences`` (the one with ``controller: true``): pod → ReplicaSet → Deployment
(or Argo Rollout), pod → ReplicationController → DeploymentConfig, pod → Job →
CronJob, pod → StatefulSet / DaemonSet. Each step is one GET; only the owner reference
of each object is kept, never the pod, in a bounded LRU cache keyed by object (owners
do not change in practice: a controller adopts orphans, it never swaps them).

:func:`controller_owner` is pure; the resolver does the I/O and is thread-safe.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from gitops_reloader.errors import KubeError
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.resources import JOBS, PODS, REPLICASETS, REPLICATIONCONTROLLERS, ResourceKind
from gitops_reloader.model import ObjectRef
from gitops_reloader.rollout.eviction import controller_reference

__all__ = ["MAX_DEPTH", "OwnerResolver", "controller_owner"]

log = logging.getLogger(__name__)

MAX_DEPTH = 4
"""Owner chains are short (pod → ReplicaSet → Deployment); a longer one is cut here."""

_INTERMEDIATE: Mapping[str, ResourceKind] = {
    "ReplicaSet": REPLICASETS,
    "ReplicationController": REPLICATIONCONTROLLERS,
    "Job": JOBS,
}
"""Owner kinds that are read in turn to find their own owner."""


def controller_owner(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(kind, name) of the ``controller: true`` owner reference of ``obj``, if any."""
    ref = controller_reference(obj)
    kind, name = (ref.get("kind"), ref.get("name")) if ref is not None else (None, None)
    if isinstance(kind, str) and isinstance(name, str) and kind and name:
        return kind, name
    return None


class OwnerResolver:
    """Pod → the objects that own it, nearest first, with a bounded cache of owner links.

    ``capacity`` bounds the cache (entries of a few strings each). Objects that cannot be
    read (gone, forbidden, API down) are not cached; the caller decides what an unknown
    owner means.
    """

    def __init__(self, api: KubeApi, *, capacity: int = 8192) -> None:
        self.api = api
        self.capacity = capacity
        self._links: OrderedDict[tuple[str, str, str], tuple[str, str] | None] = OrderedDict()
        self._lock = threading.Lock()

    def owners_of_pod(self, namespace: str, pod: str) -> tuple[ObjectRef, ...] | None:
        """The pod's owner chain (e.g. ReplicaSet, then Deployment); None if it cannot be read.

        An empty tuple is a pod without a controller (a bare pod: no workload to reload).
        A chain cut short by an unreadable intermediate owner keeps what was found.
        """
        link = self._owner(PODS, namespace, pod)
        if link is False:
            return None
        chain: list[ObjectRef] = []
        while isinstance(link, tuple) and len(chain) < MAX_DEPTH:
            kind, name = link
            chain.append(ObjectRef(kind, namespace, name))
            resource = _INTERMEDIATE.get(kind)
            if resource is None:
                break
            link = self._owner(resource, namespace, name)
        return tuple(chain)

    def _owner(self, resource: ResourceKind, namespace: str, name: str) -> tuple[str, str] | bool | None:
        """The object's controller owner; None: it has none; False: it cannot be read."""
        key = (resource.kind, namespace, name)
        with self._lock:
            if key in self._links:
                self._links.move_to_end(key)
                return self._links[key]
        try:
            obj = self.api.get(resource, namespace, name)
        except KubeError as exc:
            log.debug("cannot read owner", extra={"object": f"{namespace}/{resource.kind}/{name}",
                                                  "error": str(exc)})
            return False
        owner = controller_owner(obj)
        with self._lock:
            self._links[key] = owner
            while len(self._links) > self.capacity:
                self._links.popitem(last=False)
        return owner

    def __len__(self) -> int:
        with self._lock:
            return len(self._links)
