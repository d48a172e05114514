"""The informers and what they keep: one small record per object, looked up by key.

:class:`Caches` builds the namespace, ConfigMap/Secret and workload informers from the
configuration (scopes, label and field selectors, shard) and answers lookups from their
stores — never a LIST call. Handlers are the controller's; they run on informer threads.
With ``--enable-csi-integration`` it also holds the Secrets Store CSI informers
(:class:`~gitops_reloader.csiwatch.CsiWatch`), so SecretProviderClasses are looked up
like any other source.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any

from gitops_reloader.config import Config, namespace_windows
from gitops_reloader.csiwatch import ChangeHandler, CsiWatch
from gitops_reloader.hashing import KEYS_NOT_TRACKED, data_fingerprint, hash_object, key_digests
from gitops_reloader.kube.api import JSON, KubeApi, field_manager
from gitops_reloader.kube.fieldselectors import field_selector
from gitops_reloader.kube.informer import Handler, Informer, InformerEvent, InformerOptions, WatchObserver
from gitops_reloader.kube.resources import CONFIGMAPS, NAMESPACES, SECRETS, ResourceKind
from gitops_reloader.kube.store import object_key
from gitops_reloader.kube.workloads import WorkloadAdapter, WorkloadRecord
from gitops_reloader.membership import NamespaceMembership
from gitops_reloader.model import ObjectRef, SourceKind, SourceMeta, SourceRef, resource_version_number
from gitops_reloader.state.shards import STORE_LABEL
from gitops_reloader.windows import ReloadWindow, choose_window

from .changes import Change

log = logging.getLogger(__name__)

SourcesByNamespace = Mapping[tuple[SourceKind, str], list[SourceMeta]]


OVERRIDE_MANAGER = "gitops-reloader.io/reload-now.field-manager"
"""Kept beside the ``reload-now`` annotation: the field manager that set it (from managedFields)."""


def source_transform(kind: SourceKind, keys: Iterable[str],
                     full_hash: Callable[[], bool], *,
                     label_keys: Iterable[str] = (), override_key: str = "") -> Callable[[JSON], SourceMeta]:
    """Informer transform: hash the data, keep the annotations (``keys``) and labels
    (``label_keys``) a decision reads, drop the rest. With the ``override_key`` annotation
    (``reload-now``) present, the field manager that set it is kept too (:data:`OVERRIDE_MANAGER`).

    For Secrets the Stakater hash (which decodes every value) is computed only when
    ``full_hash()`` says so — after the initial list, or for ``--sync-after-restart``;
    change detection uses the per-key digests (or, past their key limit, the cheap
    fingerprint) either way. Per-key digests (16 bytes a
    key, for ``--reload-on=used-keys``) are kept for every object: a workload may opt in
    by annotation at any time, and the payload is gone by then. Namespaces and annotation
    values are interned: they repeat across thousands of cached objects.
    """
    wanted = tuple(keys)
    wanted_labels = tuple(label_keys)

    def transform(raw: JSON) -> SourceMeta:
        metadata = raw.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        labels = metadata.get("labels") or {}
        secret = kind is SourceKind.SECRET
        digests = key_digests(kind, raw)
        kept = {k: sys.intern(str(annotations[k])) for k in wanted if k in annotations}
        if override_key and override_key in kept:
            # Who set it, as the API server recorded it (the field manager), never a typed name.
            kept[OVERRIDE_MANAGER] = sys.intern(field_manager(metadata, override_key))
        return SourceMeta(
            ref=SourceRef(kind, sys.intern(str(metadata.get("namespace", ""))), str(metadata["name"])),
            hash=hash_object(kind, raw) if not secret or full_hash() else "",
            labels={k: sys.intern(str(labels[k])) for k in wanted_labels if k in labels},
            annotations=kept,
            resource_version=str(metadata.get("resourceVersion", "")),
            fingerprint=data_fingerprint(raw) if secret and digests in (b"", KEYS_NOT_TRACKED) else "",
            key_digests=digests,
        )

    return transform


def _with_previous(adapter: WorkloadAdapter,
                   informer: Informer[WorkloadRecord]) -> Callable[[JSON], WorkloadRecord]:
    """The adapter's transform, handed the informer's cached record of the same object (an
    unchanged generation keeps its template fingerprint: no digest per status update)."""
    def transform(raw: JSON) -> WorkloadRecord:
        metadata = raw.get("metadata") or {}
        key = object_key(metadata.get("namespace") or None, str(metadata.get("name", "")))
        previous = informer.store.get(key)
        return adapter.record(raw, previous)

    return transform


class Caches:
    """Every informer of one controller and the lookups over their stores."""

    def __init__(self, config: Config, api: KubeApi, adapters: Mapping[str, WorkloadAdapter],
                 *, observer: WatchObserver | None = None) -> None:
        self.config = config
        self.api = api
        self.adapters = adapters
        self.observer = observer
        self.membership: NamespaceMembership[Change] | None = None
        """Namespaces ``--namespace-selector`` selects, by version (None: no selector)."""
        self._on_handover: Callable[[Change], None] = lambda change: None
        self.source_informers: dict[SourceKind, list[Informer[SourceMeta]]] = {}
        self.workload_informers: dict[str, list[Informer[WorkloadRecord]]] = {}
        self.namespace_informer: Informer[int | None] | None = None
        self.namespace_windows: Informer[str] | None = None
        """Each namespace's ``reload-window`` annotation ("" none), with maintenance windows configured."""
        self.csi: CsiWatch | None = None
        """The CSI informers; None unless the integration is on and its API is served."""

    # --- building and running ------------------------------------------------------

    def build(self, *, on_source: Handler[SourceMeta], on_workload: Handler[WorkloadRecord],
              on_class_change: ChangeHandler | None = None,
              on_handover: Callable[[Change], None] | None = None,
              pending: Collection[str] = ()) -> None:
        """Create (not start) the informers the configuration asks for.

        ``on_class_change`` receives SecretProviderClass changes (``--enable-csi-integration``);
        ``on_handover`` receives the changes a namespace joining the selector hands back:
        seen before the join arrived, made after it (``membership.py``). The workload kinds
        in ``pending`` (not served yet) get their informers from :meth:`add_workload_kind`.
        """
        filters = self.config.filters
        if on_handover is not None:
            self._on_handover = on_handover
        if filters.namespace_selector:
            self.membership = NamespaceMembership()
            self.namespace_informer = Informer(
                self.api, NAMESPACES,
                lambda raw: resource_version_number((raw.get("metadata") or {}).get("resourceVersion")),
                self._on_namespace,
                options=InformerOptions(label_selector=filters.namespace_selector),
                observer=self.observer,
            )
        if namespace_windows(self.config):
            window_key = self.config.keys.reload_window
            self.namespace_windows = Informer(
                self.api, NAMESPACES,
                lambda raw: sys.intern(str(((raw.get("metadata") or {}).get("annotations") or {})
                                           .get(window_key, ""))[:253]),
                lambda event: None, observer=self.observer)
        keys = (self.config.keys.ignore, self.config.keys.match, self.config.keys.reload_now)
        owns = filters.shard.owns if filters.shard.sharded else None
        kinds: list[tuple[SourceKind, ResourceKind]] = []
        if not filters.ignore_configmaps:
            kinds.append((SourceKind.CONFIGMAP, CONFIGMAPS))
        if not filters.ignore_secrets:
            kinds.append((SourceKind.SECRET, SECRETS))
        for source_kind, resource in kinds:
            self.source_informers[source_kind] = [
                Informer(
                    self.api, resource,
                    source_transform(source_kind, keys, self._full_hashes(source_kind),
                                     label_keys=(STORE_LABEL,), override_key=self.config.keys.reload_now),
                    on_source,
                    options=InformerOptions(
                        namespace=scope, label_selector=filters.resource_label_selector,
                        field_selector=field_selector(filters, secrets=source_kind is SourceKind.SECRET),
                        accept_namespace=owns,
                    ),
                    observer=self.observer,
                )
                for scope in self._scopes()
            ]
        self.workload_informers = {kind: self._workload_informers(adapter, on_workload)
                                   for kind, adapter in self.adapters.items() if kind not in pending}
        if self.config.behaviour.enable_csi_integration and on_class_change is not None:
            csi = CsiWatch(self.config, self.api, on_change=on_class_change, observer=self.observer,
                           namespace_allowed=self.namespace_allowed)
            self.csi = csi if csi.build() else None

    def _workload_informers(self, adapter: WorkloadAdapter,
                            on_workload: Handler[WorkloadRecord]) -> list[Informer[WorkloadRecord]]:
        filters = self.config.filters
        owns = filters.shard.owns if filters.shard.sharded else None
        out: list[Informer[WorkloadRecord]] = []
        for scope in self._scopes():
            informer = Informer(
                self.api, adapter.resource, adapter.record, on_workload,
                options=InformerOptions(namespace=scope, field_selector=field_selector(filters),
                                        accept_namespace=owns),
                observer=self.observer,
            )
            informer.transform = _with_previous(adapter, informer)
            out.append(informer)
        return out

    def add_workload_kind(self, kind: str,
                          on_workload: Handler[WorkloadRecord]) -> list[Informer[WorkloadRecord]]:
        """Create (not start) the informers of a kind whose API appeared after :meth:`build`.

        The informer map is replaced, never changed in place: lookups running on other
        threads keep iterating the map they started with.
        """
        informers = self._workload_informers(self.adapters[kind], on_workload)
        self.workload_informers = {**self.workload_informers, kind: informers}
        return informers

    def informers(self) -> list[Informer[Any]]:
        """Every informer built, the namespace informer first."""
        out: list[Informer[Any]] = []
        if self.namespace_informer is not None:
            out.append(self.namespace_informer)
        if self.namespace_windows is not None:
            out.append(self.namespace_windows)
        for group in self.source_informers.values():
            out.extend(group)
        for wgroup in self.workload_informers.values():
            out.extend(wgroup)
        if self.csi is not None:
            out.extend(self.csi.informers())
        return out

    def synced(self) -> bool:
        return all(i.has_synced() for i in self.informers())

    def _scopes(self) -> list[str | None]:
        return list(self.config.filters.namespaces) or [None]

    def _full_hashes(self, kind: SourceKind) -> Callable[[], bool]:
        """Whether the informer for ``kind`` must compute Stakater hashes right now."""
        if (self.config.behaviour.sync_after_restart or self.config.runtime.enable_ha
                or self.config.state.enabled or self.config.rollouts.budgeted):
            # Start-up / take-over checks, the state store, and the waves a restart resumes
            # (control/resume.py: a marker names a change by its hash) compare hashes.
            return lambda: True
        return lambda: all(i.has_synced() for i in self.source_informers.get(kind, ()))

    def _on_namespace(self, event: InformerEvent[int | None]) -> None:
        """A namespace starts or stops matching --namespace-selector (hand-over: membership.py)."""
        assert self.membership is not None
        namespace, delta = event.delta.key, event.delta
        if delta.new is None:
            self.membership.leave(namespace, resource_version_number(event.resource_version))
        elif delta.old is None:
            for change in self.membership.join(namespace, delta.new, initial=event.initial):
                self._on_handover(change)  # changed after the join, seen before it
        else:
            return  # still matching: nothing moves
        if not event.initial:
            joined = delta.new is not None
            log.info("namespace joined the selector" if joined else "namespace left the selector",
                     extra={"namespace": namespace, "selector": self.config.filters.namespace_selector})

    # --- lookups -------------------------------------------------------------------

    def namespace_allowed(self, namespace: str) -> bool:
        """Whether changes in ``namespace`` are this instance's now (selector and shard)."""
        membership = self.membership
        return ((membership is None or membership.selected(namespace))
                and self.config.filters.shard.owns(namespace))

    def owns_change(self, change: Change, version: str) -> bool:
        """Whether ``change``, made at resourceVersion ``version``, is this instance's.

        With a selector, by the namespace's membership *at that version*; a declined change
        is kept in case its namespace joins at an older version (``membership.py``).
        """
        namespace = change.meta.ref.namespace
        if not self.config.filters.shard.owns(namespace):
            return False
        membership = self.membership
        return membership is None or membership.owns(namespace, resource_version_number(version),
                                                     change.meta.ref, change)

    def still_owns(self, meta: SourceMeta) -> bool:
        """At write time: whether a change to ``meta`` is still this instance's (a relabel
        seen since it was accepted may have handed its namespace to another shard)."""
        membership = self.membership
        return membership is None or membership.still_owns(meta.ref.namespace,
                                                           resource_version_number(meta.resource_version))

    def reload_window(self, record: WorkloadRecord) -> ReloadWindow | None:
        """The maintenance window ``record``'s reloads wait for (:func:`choose_window`: its
        ``reload-window`` annotation, else its namespace's, else the default; None: none);
        :class:`ConfigError` for an annotation naming no window."""
        namespace = (self.namespace_windows.store.get(record.ref.namespace) or None
                     if self.namespace_windows is not None else None)
        return choose_window(self.config.runtime.reload_windows,
                             record.annotations.get(self.config.keys.reload_window), namespace)

    def source_kinds(self) -> list[SourceKind]:
        """The source kinds watched (``--resources-to-ignore`` drops one; SecretProviderClass
        with the CSI integration on)."""
        kinds = list(self.source_informers)
        return [*kinds, SourceKind.SECRETPROVIDERCLASS] if self.csi is not None else kinds

    def source(self, ref: SourceRef) -> SourceMeta | None:
        if ref.kind is SourceKind.SECRETPROVIDERCLASS:
            return self.csi.source(ref) if self.csi is not None else None
        for informer in self.source_informers.get(ref.kind, ()):
            meta = informer.store.get(object_key(ref.namespace, ref.name))
            if meta is not None:
                return meta
        return None

    def sources_in(self, kind: SourceKind, namespace: str) -> list[SourceMeta]:
        if kind is SourceKind.SECRETPROVIDERCLASS:
            return self.csi.sources_in(namespace) if self.csi is not None else []
        prefix = f"{namespace}/"
        out: list[SourceMeta] = []
        for informer in self.source_informers.get(kind, ()):
            keys = [k for k in list(informer.store.keys()) if k.startswith(prefix)]
            out.extend(m for k in keys if (m := informer.store.get(k)) is not None)
        return out

    def sources(self) -> Iterator[SourceMeta]:
        """Every cached source, SecretProviderClasses included."""
        for informers in self.source_informers.values():
            for informer in informers:
                yield from informer.store.values()
        if self.csi is not None:
            yield from self.csi.sources()

    def sources_by_namespace(self) -> dict[tuple[SourceKind, str], list[SourceMeta]]:
        """All cached sources grouped by (kind, namespace): one pass over the stores."""
        grouped: dict[tuple[SourceKind, str], list[SourceMeta]] = {}
        for meta in self.sources():
            grouped.setdefault((meta.ref.kind, meta.ref.namespace), []).append(meta)
        return grouped

    def workload(self, ref: ObjectRef) -> WorkloadRecord | None:
        for informer in self.workload_informers.get(ref.kind, ()):
            record = informer.store.get(object_key(ref.namespace, ref.name))
            if record is not None:
                return record
        return None

    def workloads(self) -> list[WorkloadRecord]:
        return [r for group in self.workload_informers.values() for i in group
                for r in i.store.values()]
