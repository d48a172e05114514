"""Secrets Store CSI integration, the wiring: informers on the driver's objects → changes.

With ``--enable-csi-integration`` and the ``secrets-store.csi.x-k8s.io/v1`` API served,
:class:`CsiWatch` keeps two informers per watched namespace scope:

* ``secretproviderclasspodstatuses`` (``--resource-label-selector`` applies, as in
  Stakater), each kept as a small :class:`~gitops_reloader.csi.PodStatus`;
* ``secretproviderclasses``, each kept as a :class:`~gitops_reloader.model.SourceMeta`
  with the annotations the policy reads (``ignore`` and ``match`` on the class).

An update of a pod status whose hash changed is a change of its SecretProviderClass
(:func:`~gitops_reloader.csi.status_changed`). The watch then resolves the pod's owner
chain (:class:`~gitops_reloader.kube.owners.OwnerResolver`, one cached GET per link) and
calls ``on_change(meta, owners)``: ``owners`` are the workloads running the pod, so only
they are candidates; ``None`` when the pod cannot be read (gone, forbidden), and the
caller then falls back to Stakater's rule, every workload that uses the class. The
owner lookup runs on the pod-status informer's thread: it delays only later pod-status
events, never ConfigMap, Secret or workload events.

Without the API group the integration logs one warning and stays off; everything else
runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from gitops_reloader.config import Config
from gitops_reloader.csi import LatestHashes, PodStatus, pod_status_record, spc_record, status_changed
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.fieldselectors import field_selector
from gitops_reloader.kube.informer import Informer, InformerEvent, InformerOptions, WatchObserver
from gitops_reloader.kube.owners import OwnerResolver
from gitops_reloader.kube.resources import (
    CSI_GROUP,
    SECRETPROVIDERCLASSES,
    SECRETPROVIDERCLASSPODSTATUSES,
)
from gitops_reloader.kube.store import object_key
from gitops_reloader.model import ObjectRef, SourceMeta, SourceRef

__all__ = ["ChangeHandler", "CsiWatch"]

log = logging.getLogger(__name__)

ChangeHandler = Callable[[SourceMeta, "frozenset[ObjectRef] | None"], None]
"""Called with the class's current meta (hash = the new one) and the pod's owners."""


class CsiWatch:
    """The CSI informers and their change detection; build with :meth:`build`."""

    def __init__(self, config: Config, api: KubeApi, *, on_change: ChangeHandler,
                 observer: WatchObserver | None = None, owners: OwnerResolver | None = None,
                 namespace_allowed: Callable[[str], bool] = lambda _: True) -> None:
        self.config = config
        self.api = api
        self.on_change = on_change
        self.observer = observer
        self.owners = owners or OwnerResolver(api)
        self.namespace_allowed = namespace_allowed
        self.hashes = LatestHashes()
        self.status_informers: list[Informer[PodStatus]] = []
        self.class_informers: list[Informer[SourceMeta]] = []

    def build(self) -> bool:
        """Create the informers if the API is served; False (and a warning) if not."""
        if not self.api.discover_group(CSI_GROUP, "v1"):
            log.warning("--enable-csi-integration is set but the API server does not serve "
                        "secrets-store.csi.x-k8s.io/v1 (Secrets Store CSI driver not installed?): "
                        "SecretProviderClass changes will not reload anything; everything else runs")
            return False
        filters = self.config.filters
        scopes: Sequence[str | None] = list(filters.namespaces) or [None]
        owns = filters.shard.owns if filters.shard.sharded else None
        keys = (self.config.keys.ignore, self.config.keys.match)
        self.status_informers = [
            Informer(self.api, SECRETPROVIDERCLASSPODSTATUSES, pod_status_record, self._on_status,
                     options=InformerOptions(namespace=scope, label_selector=filters.resource_label_selector,
                                             field_selector=field_selector(filters), accept_namespace=owns),
                     observer=self.observer)
            for scope in scopes
        ]
        self.class_informers = [
            Informer(self.api, SECRETPROVIDERCLASSES, lambda raw: spc_record(raw, keys), self._on_class,
                     options=InformerOptions(namespace=scope, field_selector=field_selector(filters),
                                             accept_namespace=owns),
                     observer=self.observer)
            for scope in scopes
        ]
        log.info("Secrets Store CSI integration on: watching SecretProviderClassPodStatuses")
        return True

    def informers(self) -> list[Informer[Any]]:
        return [*self.class_informers, *self.status_informers]

    def source(self, ref: SourceRef) -> SourceMeta | None:
        """The class's meta with its latest reported hash; None if no pod reported it yet.

        A class the cache does not hold (deleted, or not readable) still has a meta, with
        no annotations, as Stakater proceeds when its GET of the class fails.
        """
        digest = self.hashes.get(ref)
        if not digest:
            return None
        for informer in self.class_informers:
            meta = informer.store.get(object_key(ref.namespace, ref.name))
            if meta is not None:
                return SourceMeta(meta.ref, digest, meta.labels, meta.annotations, meta.resource_version)
        return SourceMeta(ref, digest)

    def sources_in(self, namespace: str) -> list[SourceMeta]:
        """Every class in ``namespace`` that a pod reported on."""
        return [m for m in self.sources() if m.ref.namespace == namespace]

    def sources(self) -> list[SourceMeta]:
        """Every class that a pod reported on."""
        out: list[SourceMeta] = []
        for informer in self.class_informers:
            for meta in informer.store.values():
                found = self.source(meta.ref)
                if found is not None:
                    out.append(found)
        return out

    # --- handlers (informer threads) ------------------------------------------------

    def _on_status(self, event: InformerEvent[PodStatus]) -> None:
        old, new = event.delta.old, event.delta.new
        if new is None or not new.spc:
            return
        self.hashes.record(new.source, new.hash, new.resource_version)
        if old is None:  # initial list or a new pod: the current versions, not a change
            return
        if not status_changed(old, new) or not self.namespace_allowed(new.namespace):
            return
        meta = self.source(new.source)
        assert meta is not None
        owners = self.owners.owners_of_pod(new.namespace, new.pod) if new.pod else None
        if owners is None:
            log.info("pod of a SecretProviderClassPodStatus not readable: every workload using "
                     "the class is a candidate (Stakater's rule)",
                     extra={"object": f"{new.namespace}/SecretProviderClassPodStatus/{new.name}",
                            "pod": new.pod})
        log.debug("SecretProviderClass versions changed",
                  extra={"object": str(new.source), "pod": new.pod,
                         "owners": None if owners is None else [o.key for o in owners]})
        self.on_change(meta, None if owners is None else frozenset(owners))

    def _on_class(self, event: InformerEvent[SourceMeta]) -> None:
        if event.delta.new is None and event.delta.old is not None:
            self.hashes.forget(event.delta.old.ref)
