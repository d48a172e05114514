"""The resources the test server serves, and the discovery documents describing them.

``RESOURCES`` is the fixed catalogue (core v1, apps, batch, coordination, events.k8s.io,
Argo, OpenShift, Flux and Secrets Store CSI kinds). Custom kinds are validated against their CRD where the
server holds one (``crdschema``); the status subresource flags here match the CRDs.
A ``Registry`` is the catalogue minus the disabled API groups: disabled groups vanish
from discovery and their paths answer 404, which is how tests exercise auto-detection of
optional APIs such as ``apps.openshift.io``.

Every value here is immutable; a registry is safe to share between threads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from .patch import POD_TEMPLATE_SCHEMA, SERVICE_SCHEMA, MergeSchema

__all__ = ["RESOURCES", "Registry", "ResourceType"]

_VERBS: Final = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One served resource (``apps/v1`` ``deployments``) and how it behaves."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    status_subresource: bool = False
    """Writes to the main resource keep ``status``; ``/status`` writes change only it."""
    custom: bool = False
    """A custom resource: no strategic merge patch (415), list items keep kind."""
    merge_schema: MergeSchema = POD_TEMPLATE_SCHEMA
    selectable_fields: frozenset[str] = frozenset()
    """Field selector labels beyond ``metadata.name`` and ``metadata.namespace``."""

    @property
    def group_version(self) -> str:
        """``apps/v1`` or ``v1``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        """Lower-case kind, as discovery reports it."""
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        """``DeploymentList``."""
        return f"{self.kind}List"

    @property
    def key(self) -> str:
        """``deployments.apps`` (``configmaps`` for core): unique across the catalogue."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


_EVENT_FIELDS: Final = frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }
)
_POD_FIELDS: Final = frozenset(
    {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }
)

RESOURCES: Final[tuple[ResourceType, ...]] = (
    ResourceType(
        "",
        "v1",
        "namespaces",
        "Namespace",
        namespaced=False,
        short_names=("ns",),
        status_subresource=True,
        selectable_fields=frozenset({"status.phase"}),
    ),
    ResourceType("", "v1", "configmaps", "ConfigMap", short_names=("cm",)),
    ResourceType("", "v1", "secrets", "Secret", selectable_fields=frozenset({"type"})),
    ResourceType("", "v1", "events", "Event", short_names=("ev",), selectable_fields=_EVENT_FIELDS),
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        short_names=("po",),
        status_subresource=True,
        selectable_fields=_POD_FIELDS,
    ),
    ResourceType(
        "",
        "v1",
        "services",
        "Service",
        short_names=("svc",),
        status_subresource=True,
        merge_schema=SERVICE_SCHEMA,
    ),
    ResourceType("apps", "v1", "deployments", "Deployment", short_names=("deploy",), status_subresource=True),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", short_names=("rs",), status_subresource=True),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", short_names=("ds",), status_subresource=True),
    ResourceType("apps", "v1", "statefulsets", "StatefulSet", short_names=("sts",), status_subresource=True),
    ResourceType(
        "batch",
        "v1",
        "jobs",
        "Job",
        status_subresource=True,
        selectable_fields=frozenset({"status.successful"}),
    ),
    ResourceType("batch", "v1", "cronjobs", "CronJob", short_names=("cj",), status_subresource=True),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease"),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", short_names=("pdb",),
                 status_subresource=True),
    ResourceType(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        short_names=("ev",),
        selectable_fields=frozenset(
            {
                "reason",
                "type",
                "regarding.kind",
                "regarding.name",
                "regarding.namespace",
                "regarding.uid",
                "reportingController",
            }
        ),
    ),
    ResourceType(
        "argoproj.io",
        "v1alpha1",
        "rollouts",
        "Rollout",
        short_names=("ro",),
        status_subresource=True,
        custom=True,
    ),
    ResourceType(
        "argoproj.io",
        "v1alpha1",
        "applications",
        "Application",
        short_names=("app", "apps"),
        custom=True,
    ),
    ResourceType(
        "argoproj.io",
        "v1alpha1",
        "applicationsets",
        "ApplicationSet",
        short_names=("appset", "appsets"),
        status_subresource=True,
        custom=True,
    ),
    ResourceType(
        "apps.openshift.io",
        "v1",
        "deploymentconfigs",
        "DeploymentConfig",
        short_names=("dc",),
        status_subresource=True,
    ),
    ResourceType(
        "kustomize.toolkit.fluxcd.io",
        "v1",
        "kustomizations",
        "Kustomization",
        short_names=("ks",),
        status_subresource=True,
        custom=True,
    ),
    ResourceType(
        "source.toolkit.fluxcd.io",
        "v1",
        "gitrepositories",
        "GitRepository",
        short_names=("gitrepo",),
        status_subresource=True,
        custom=True,
    ),
    ResourceType(
        "source.toolkit.fluxcd.io",
        "v1beta2",
        "ocirepositories",
        "OCIRepository",
        short_names=("ocirepo",),
        status_subresource=True,
        custom=True,
    ),
    ResourceType(
        "helm.toolkit.fluxcd.io",
        "v2",
        "helmreleases",
        "HelmRelease",
        short_names=("hr",),
        status_subresource=True,
        custom=True,
    ),
    # Secrets Store CSI driver: no status subresource in its CRDs (the driver writes the
    # pod status's `status` through the main resource); v1alpha1 is served, deprecated.
    *(
        ResourceType("secrets-store.csi.x-k8s.io", version, plural, kind, custom=True)
        for version in ("v1", "v1alpha1")
        for plural, kind in (
            ("secretproviderclasses", "SecretProviderClass"),
            ("secretproviderclasspodstatuses", "SecretProviderClassPodStatus"),
        )
    ),
)


class Registry:
    """The served resources, looked up by URL parts, and their discovery documents."""

    def __init__(
        self,
        resources: Iterable[ResourceType] = RESOURCES,
        *,
        disabled_groups: Iterable[str] = frozenset(),
    ) -> None:
        disabled = frozenset(disabled_groups)
        self.resources: tuple[ResourceType, ...] = tuple(r for r in resources if r.group not in disabled)
        self._by_path = {(r.group, r.version, r.plural): r for r in self.resources}
        self._by_key: dict[str, ResourceType] = {}
        for r in self.resources:
            self._by_key.setdefault(r.plural, r)  # first wins: core "events"
            self._by_key[r.key] = r
            self._by_key[f"{r.group}/{r.plural}"] = r
        self._group_versions: dict[str, list[str]] = {}
        for r in self.resources:
            versions = self._group_versions.setdefault(r.group, [])
            if r.version not in versions:
                versions.append(r.version)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The resource served at ``/apis/{group}/{version}/{plural}`` (group "" is core)."""
        return self._by_path.get((group, version, plural))

    def by_name(self, name: str) -> ResourceType | None:
        """Find by ``deployments``, ``deployments.apps`` or ``apps/deployments``."""
        return self._by_key.get(name)

    def has_group_version(self, group: str, version: str | None = None) -> bool:
        """Whether the group (and version) is served."""
        versions = self._group_versions.get(group)
        return versions is not None and (version is None or version in versions)

    # ------------------------------------------------------------------ discovery

    def api_versions(self, server_address: str) -> dict[str, Any]:
        """``GET /api``."""
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
        }

    def _group_doc(self, group: str) -> dict[str, Any]:
        versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in self._group_versions[group]]
        return {"name": group, "versions": versions, "preferredVersion": versions[0]}

    def api_group_list(self) -> dict[str, Any]:
        """``GET /apis``."""
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [self._group_doc(g) for g in self._group_versions if g],
        }

    def api_group(self, group: str) -> dict[str, Any]:
        """``GET /apis/{group}``."""
        return {"kind": "APIGroup", "apiVersion": "v1", **self._group_doc(group)}

    def api_resource_list(self, group: str, version: str) -> dict[str, Any]:
        """``GET /api/v1`` or ``GET /apis/{group}/{version}``."""
        entries: list[dict[str, Any]] = []
        for r in self.resources:
            if r.group != group or r.version != version:
                continue
            entry: dict[str, Any] = {
                "name": r.plural,
                "singularName": r.singular,
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": list(_VERBS),
            }
            if r.short_names:
                entry["shortNames"] = list(r.short_names)
            entries.append(entry)
            if r.status_subresource:
                entries.append(
                    {
                        "name": f"{r.plural}/status",
                        "singularName": "",
                        "namespaced": r.namespaced,
                        "kind": r.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            if r.kind == "Pod" and not r.group:  # as kube-apiserver lists it
                entries.append({"name": "pods/eviction", "singularName": "", "namespaced": True,
                                "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]})
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": entries,
        }
