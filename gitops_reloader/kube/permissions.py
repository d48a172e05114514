"""What the configured features need from RBAC, checked once before any informer starts.

A user who swaps only the image keeps Stakater's ClusterRole, which lists and updates
workloads but cannot ``watch`` them (Stakater lists per change; we watch). Without this
check that shows up as an endless 403 backoff while reloads half-work. Here every verb the
configuration needs is asked of the API server with a SelfSubjectAccessReview, and all the
missing ones are reported in one message naming resource, verb, scope and the feature.

``required_permissions`` is pure (config in, list out); ``missing_permissions`` does the
I/O. An *essential* need stops start-up in ``strict`` mode; the others (Events) only
degrade what the controller reports, so they are always warnings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gitops_reloader.config import META_INFO_NAME, Config, namespace_windows
from gitops_reloader.errors import ReloaderError
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.resources import (
    CONFIGMAPS,
    EVENTS,
    JOBS,
    LEASES,
    NAMESPACES,
    PODS,
    REPLICASETS,
    REPLICATIONCONTROLLERS,
    SECRETPROVIDERCLASSES,
    SECRETPROVIDERCLASSPODSTATUSES,
    SECRETS,
    ResourceKind,
)
from gitops_reloader.kube.workloads import WorkloadAdapter
from gitops_reloader.rollout.eviction import EvictionMode

__all__ = ["Need", "PermissionsMissing", "describe", "missing_permissions", "required_permissions",
           "workload_needs"]

POD_EVICTIONS = ResourceKind("", "v1", "pods/eviction", "Eviction")
ACCESS_REVIEWS = ResourceKind("authorization.k8s.io", "v1", "selfsubjectaccessreviews",
                              "SelfSubjectAccessReview", namespaced=False)


class PermissionsMissing(ReloaderError):
    """Start-up stopped: the service account lacks verbs essential to the configuration."""


@dataclass(frozen=True, slots=True)
class Need:
    """One verb on one resource in one scope (``namespace`` "" = cluster-wide), and why."""

    group: str
    resource: str
    verb: str
    namespace: str
    feature: str
    essential: bool = True
    name: str = ""
    """One object only (RBAC ``resourceNames``), e.g. the Lease or the digest key Secret."""

    def __str__(self) -> str:
        where = f'in namespace "{self.namespace}"' if self.namespace else "cluster-wide"
        what = f"{self.resource}.{self.group}" if self.group else self.resource
        if self.name:
            what += f' "{self.name}"'
        return f"{self.verb} {what} {where} (needed to {self.feature})"


def _needs(kind: ResourceKind, verbs: Iterable[str], scopes: Sequence[str], feature: str,
           *, essential: bool = True, name: str = "") -> list[Need]:
    return [Need(kind.group, kind.plural, verb, scope, feature, essential, name)
            for scope in scopes for verb in verbs]


def required_permissions(config: Config, adapters: Mapping[str, WorkloadAdapter]) -> list[Need]:
    """Every permission the configuration uses, in a stable order, without duplicates."""
    scopes = list(config.filters.namespaces) or [""]
    needs: list[Need] = []
    if not config.filters.ignore_configmaps:
        needs += _needs(CONFIGMAPS, ("list", "watch"), scopes, "watch ConfigMaps")
    if not config.filters.ignore_secrets:
        needs += _needs(SECRETS, ("list", "watch"), scopes, "watch Secrets")
    if config.filters.namespace_selector:
        needs += _needs(NAMESPACES, ("list", "watch"), [""], "follow --namespace-selector")
    if namespace_windows(config):
        needs += _needs(NAMESPACES, ("list", "watch"), [""], "read namespaces' reload-window annotation")
    for kind, adapter in adapters.items():
        needs += workload_needs(config, kind, adapter)
    if config.behaviour.enable_csi_integration:
        needs += _csi_needs(adapters, scopes)
    if config.rollouts.eviction is not EvictionMode.OFF:
        feature = "restart pods through the Eviction API (--eviction)"
        needs += _needs(PODS, ("list",), scopes, feature)
        needs += _needs(POD_EVICTIONS, ("create",), scopes, feature)
    needs += _needs(EVENTS, ("create",), scopes, "record Events", essential=False)
    runtime = config.runtime
    if not runtime.dry_run:
        feature = "keep the failure record, from which a restart continues what is failing"
        needs += _needs(CONFIGMAPS, ("create",), [runtime.lease_namespace], feature, essential=False)
        needs += _needs(CONFIGMAPS, ("get", "update"), [runtime.lease_namespace], feature, essential=False,
                        name=runtime.failure_record)
    if runtime.enable_ha:
        needs += _needs(LEASES, ("create",), [runtime.lease_namespace], "elect a leader (--enable-ha)")
        needs += _needs(LEASES, ("get", "update"), [runtime.lease_namespace], "elect a leader (--enable-ha)",
                        name=runtime.lease_name)
    if config.gitops.config_file:
        gitops, feature = config.gitops, "keep the digest key of the git sinks"
        scope = [gitops.digest_key_namespace]
        needs += _needs(SECRETS, ("create",), scope, feature)
        needs += _needs(SECRETS, ("get",), scope, feature, name=gitops.digest_key_secret)
        if gitops.apply_timeout > 0 and not config.runtime.dry_run:
            needs += _needs(EVENTS, ("list",), scopes, "report a followed git emission once after a restart",
                            essential=False)
    if config.meta_info is not None:
        scope, feature = [config.meta_info.namespace], "publish Stakater's meta-info ConfigMap"
        needs += _needs(CONFIGMAPS, ("create",), scope, feature, essential=False)
        needs += _needs(CONFIGMAPS, ("get", "update"), scope, feature, essential=False,
                        name=META_INFO_NAME)
    if config.state.enabled:
        needs += _state_store_needs(config)
    return list(dict.fromkeys(needs))


def workload_needs(config: Config, kind: str, adapter: WorkloadAdapter) -> list[Need]:
    """What watching and reloading one workload kind needs (also asked when a discovered
    kind's API appears after start-up)."""
    scopes = list(config.filters.namespaces) or [""]
    resource = adapter.resource
    kinds = f"{kind}s" if kind == resource.kind else f"{resource.kind}s ({resource.group})"
    needs = _needs(resource, ("list", "watch"), scopes, f"watch {kinds}")
    if kind == "Job":
        needs += _needs(JOBS, ("create", "delete"), scopes, "reload Jobs (recreate them)")
    elif kind == "CronJob":
        needs += _needs(JOBS, ("create",), scopes, "reload CronJobs (start a Job)")
    else:
        needs += _needs(resource, ("patch",), scopes, f"reload {kinds}")
    return needs


def _state_store_needs(config: Config) -> list[Need]:
    """``--state-store configmap``: its shards, and the digest key its entries are keyed with.

    Shard names grow with the data, so get/update cannot be limited to named objects.
    ``--dry-run`` only reads (the list at start-up; the key is not created).
    """
    state, gitops = config.state, config.gitops
    feature = "keep reload state in ConfigMaps (--state-store)"
    read_only = config.runtime.dry_run
    needs = _needs(CONFIGMAPS, ("list",) if read_only else ("list", "get", "create", "update"),
                   [state.namespace], feature)
    key_scope = [gitops.digest_key_namespace]
    if not read_only:
        needs += _needs(SECRETS, ("create",), key_scope, feature)
    needs += _needs(SECRETS, ("get",), key_scope, feature, name=gitops.digest_key_secret)
    return needs


def _csi_needs(adapters: Mapping[str, WorkloadAdapter], scopes: Sequence[str]) -> list[Need]:
    """``--enable-csi-integration``: the driver's objects, and the owner links of pods.

    Without the owner reads the controller still works, Stakater's way (every workload
    using the class reloads), so those are not essential.
    """
    feature = "reload on Secrets Store CSI changes (--enable-csi-integration)"
    needs = _needs(SECRETPROVIDERCLASSPODSTATUSES, ("list", "watch"), scopes, feature)
    needs += _needs(SECRETPROVIDERCLASSES, ("list", "watch"), scopes, feature)
    owners = "find the workload of a pod reporting new CSI versions"
    needs += _needs(PODS, ("get",), scopes, owners, essential=False)
    needs += _needs(REPLICASETS, ("get",), scopes, owners, essential=False)
    if "Job" in adapters or "CronJob" in adapters:
        needs += _needs(JOBS, ("get",), scopes, owners, essential=False)
    if "DeploymentConfig" in adapters:
        needs += _needs(REPLICATIONCONTROLLERS, ("get",), scopes, owners, essential=False)
    return needs


def _allowed(api: KubeApi, need: Need) -> bool:
    resource, _, subresource = need.resource.partition("/")
    attributes = {"verb": need.verb, "group": need.group, "resource": resource}
    if subresource:
        attributes["subresource"] = subresource
    if need.namespace:
        attributes["namespace"] = need.namespace
    if need.name:
        attributes["name"] = need.name
    review = api.create(ACCESS_REVIEWS, None, {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    })
    return bool((review.get("status") or {}).get("allowed"))


def missing_permissions(api: KubeApi, needs: Sequence[Need]) -> list[Need]:
    """The needs the API server denies (one SelfSubjectAccessReview each).

    Raises :class:`KubeError` when reviews cannot be asked at all.
    """
    return [need for need in needs if not _allowed(api, need)]


def describe(missing: Sequence[Need]) -> str:
    """One message naming every missing permission and what it breaks."""
    essential = [need for need in missing if need.essential]
    lines = "; ".join(str(need) for need in missing)
    hint = (" Stakater's ClusterRole has no watch on workloads: use this chart's ClusterRole "
            "(helm/gitops-reloader) or add the verbs above." if any(
                n.verb == "watch" for n in essential) else "")
    return f"{len(missing)} permission(s) missing: {lines}.{hint}"
