"""The API resources the controller reads and writes, and their URL paths."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True, slots=True)
class ResourceKind:
    """One API resource: where it lives and what it is called."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def builtin(self) -> bool:
        """Built-in kinds accept strategic merge patches; custom resources don't."""
        return self.group in ("", "apps", "batch", "coordination.k8s.io", "events.k8s.io")

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The REST path: collection (all or one namespace) or one object."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
        return base


NAMESPACES = ResourceKind("", "v1", "namespaces", "Namespace", namespaced=False)
CONFIGMAPS = ResourceKind("", "v1", "configmaps", "ConfigMap")
SECRETS = ResourceKind("", "v1", "secrets", "Secret")
EVENTS = ResourceKind("", "v1", "events", "Event")
DEPLOYMENTS = ResourceKind("apps", "v1", "deployments", "Deployment")
DAEMONSETS = ResourceKind("apps", "v1", "daemonsets", "DaemonSet")
STATEFULSETS = ResourceKind("apps", "v1", "statefulsets", "StatefulSet")
JOBS = ResourceKind("batch", "v1", "jobs", "Job")
CRONJOBS = ResourceKind("batch", "v1", "cronjobs", "CronJob")
LEASES = ResourceKind("coordination.k8s.io", "v1", "leases", "Lease")
ROLLOUTS = ResourceKind("argoproj.io", "v1alpha1", "rollouts", "Rollout")
APPLICATIONS = ResourceKind("argoproj.io", "v1alpha1", "applications", "Application")
DEPLOYMENTCONFIGS = ResourceKind(
    "apps.openshift.io", "v1", "deploymentconfigs", "DeploymentConfig"
)
KUSTOMIZATIONS = ResourceKind(
    "kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "Kustomization"
)
GITREPOSITORIES = ResourceKind("source.toolkit.fluxcd.io", "v1", "gitrepositories", "GitRepository")
HELMRELEASES = ResourceKind("helm.toolkit.fluxcd.io", "v2", "helmreleases", "HelmRelease")
HELMCHARTS = ResourceKind("source.toolkit.fluxcd.io", "v1", "helmcharts", "HelmChart")
PODS = ResourceKind("", "v1", "pods", "Pod")
PODDISRUPTIONBUDGETS = ResourceKind("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
REPLICASETS = ResourceKind("apps", "v1", "replicasets", "ReplicaSet")
REPLICATIONCONTROLLERS = ResourceKind("", "v1", "replicationcontrollers", "ReplicationController")
CSI_GROUP = "secrets-store.csi.x-k8s.io"
SECRETPROVIDERCLASSES = ResourceKind(CSI_GROUP, "v1", "secretproviderclasses", "SecretProviderClass")
SECRETPROVIDERCLASSPODSTATUSES = ResourceKind(
    CSI_GROUP, "v1", "secretproviderclasspodstatuses", "SecretProviderClassPodStatus"
)
