"""Playing the GitOps engines and the Deployment controller in tests (TESTING.md "Playing the controllers").

:class:`EnginePlayer` takes the tip of a branch of the git test host, renders it with the
real renderer (``.tools/bin/kubectl kustomize`` for a kustomize directory,
``.tools/bin/helm template`` for a chart with a values file), applies every rendered
object with the engine's field manager (``kustomize-controller``, ``helm-controller``,
``argocd-controller``) and the labels the engine puts on what it applies, then writes the
engine's status as that controller does. The API test server has no server-side apply:
an object is created, or merge-patched (metadata labels/annotations and spec), with the
engine's ``fieldManager`` — the fields our controller reads are the same.

:func:`complete_rollout` writes a Deployment's status as the Deployment controller does
once a rollout is done (or failed), with the shapes of :mod:`gitops_reloader.testing.rollouts`.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client import ApiClient
from reload_helpers import call

from gitops_reloader.gitops.locate import (
    ARGOCD_TRACKING_ANNOTATION,
    FLUX_HELM_NAME_LABEL,
    FLUX_HELM_NAMESPACE_LABEL,
    FLUX_NAME_LABEL,
    FLUX_NAMESPACE_LABEL,
)
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.rollouts import status_complete, status_failed

TOOLS = Path(__file__).resolve().parents[2] / ".tools" / "bin"
KUSTOMIZATIONS = "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{ns}/kustomizations"
GITREPOSITORIES = "/apis/source.toolkit.fluxcd.io/v1/namespaces/{ns}/gitrepositories"
HELMRELEASES = "/apis/helm.toolkit.fluxcd.io/v2/namespaces/{ns}/helmreleases"
APPLICATIONS = "/apis/argoproj.io/v1alpha1/namespaces/{ns}/applications"
_PLURALS = {"Deployment": "deployments", "ConfigMap": "configmaps", "Service": "services"}
_NOW = "2026-11-26T03:00:00Z"


def _path(kind: str, namespace: str, name: str = "") -> str:
    group = "/apis/apps/v1" if kind == "Deployment" else "/api/v1"
    return f"{group}/namespaces/{namespace}/{_PLURALS[kind]}" + (f"/{name}" if name else "")


def ready(status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": reason, "message": message,
            "lastTransitionTime": _NOW, "observedGeneration": 1}


class EnginePlayer:
    """Flux and Argo CD for one repository of the git test host (see the module docstring)."""

    def __init__(self, api_client: ApiClient, host: GitHostServer, repo: str, tmp: Path) -> None:
        self.api_client = api_client
        self.host = host
        self.repo = repo
        self.source = repo.rsplit("/", 1)[-1]  # the GitRepository's name
        self.tmp = tmp
        self.env = {**os.environ, "HELM_CACHE_HOME": str(tmp / "helm-cache"),
                    "HELM_CONFIG_HOME": str(tmp / "helm-config"), "HELM_DATA_HOME": str(tmp / "helm-data")}

    # -- the repository ------------------------------------------------------------------

    def checkout(self, branch: str = "main") -> tuple[str, Path]:
        """The tip of ``branch`` and a fresh checkout of it."""
        sha = self.host.log(self.repo, branch)[0][0]
        where = Path(tempfile.mkdtemp(dir=self.tmp, prefix="engine-"))
        subprocess.run(["git", "clone", "--quiet", "--branch", branch, str(self.host.bare_path(self.repo)),
                        str(where)], check=True, env=self.env)
        return sha, where

    def _run(self, *argv: str) -> list[dict[str, Any]]:
        out = subprocess.run(list(argv), check=True, capture_output=True, text=True, env=self.env).stdout
        return [doc for doc in yaml.safe_load_all(out) if doc]

    # -- applying ------------------------------------------------------------------------

    def apply(self, docs: list[dict[str, Any]], *, manager: str, labels: dict[str, str] | None = None,
              annotations: dict[str, str] | None = None) -> None:
        """Create or merge-patch every object with ``manager`` and the engine's labels."""
        for doc in docs:
            metadata = doc.setdefault("metadata", {})
            metadata.setdefault("labels", {}).update(labels or {})
            metadata.setdefault("annotations", {}).update(annotations or {})
            namespace, name, kind = metadata.get("namespace", "ns"), metadata["name"], doc["kind"]
            metadata["namespace"] = namespace
            try:
                call(self.api_client, "GET", _path(kind, namespace, name))
            except Exception:  # absent: create it
                call(self.api_client, "POST", _path(kind, namespace) + f"?fieldManager={manager}", doc)
                continue
            patch = {"metadata": {"labels": metadata["labels"], "annotations": metadata["annotations"]},
                     "spec": doc.get("spec"), "data": doc.get("data")}
            call(self.api_client, "PATCH", _path(kind, namespace, name) + f"?fieldManager={manager}",
                 {k: v for k, v in patch.items() if v is not None},
                 content_type="application/merge-patch+json")

    # -- Flux ----------------------------------------------------------------------------

    def git_repository(self) -> None:
        """Create the GitRepository ``flux-system/<source>`` for the main branch."""
        call(self.api_client, "POST", GITREPOSITORIES.format(ns="flux-system"),
             {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
              "metadata": {"name": self.source, "namespace": "flux-system"},
              "spec": {"interval": "1m", "url": self.host.repo_url(self.repo), "ref": {"branch": "main"}}})

    def kustomization(self, name: str, path: str, *, suspend: bool = False) -> None:
        """Create the GitRepository and the Kustomization ``flux-system/<name>`` applying ``path``."""
        self.git_repository()
        body = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": name, "namespace": "flux-system"},
                "spec": {"interval": "10m", "path": path, "prune": True, "suspend": suspend,
                         "sourceRef": {"kind": "GitRepository", "name": self.source}}}
        call(self.api_client, "POST", KUSTOMIZATIONS.format(ns="flux-system"), body)

    def reconcile_kustomization(self, name: str, path: str) -> str:
        """kustomize-controller: build ``path`` at the tip, apply it, record the revision applied."""
        sha, where = self.checkout()
        docs = self._run(str(TOOLS / "kubectl"), "kustomize", str(where / path))
        self.apply(docs, manager="kustomize-controller",
                   labels={FLUX_NAME_LABEL: name, FLUX_NAMESPACE_LABEL: "flux-system"})
        revision = f"main@sha1:{sha}"
        self._status(KUSTOMIZATIONS.format(ns="flux-system") + f"/{name}", {
            "observedGeneration": 1, "lastAppliedRevision": revision, "lastAttemptedRevision": revision,
            "conditions": [ready("True", "ReconciliationSucceeded", f"Applied revision: {revision}")]})
        return sha

    def fail_kustomization(self, name: str, message: str, *, stalled: bool = False) -> str:
        """kustomize-controller failing to build the tip: ``Ready`` ``False`` (``BuildFailed``),
        ``Reconciling`` ``True`` (``ProgressingWithRetry``: it tries again after
        ``retryInterval``, its ``finalizeStatus``) and, when ``stalled``, ``Stalled`` ``True``
        (it does not). The revision applied before stays."""
        sha = self.host.log(self.repo)[0][0]
        path = KUSTOMIZATIONS.format(ns="flux-system") + f"/{name}"
        status = call(self.api_client, "GET", path).get("status") or {}
        reconciling = {**ready("True", "ProgressingWithRetry", message), "type": "Reconciling"}
        conditions = [ready("False", "BuildFailed", message), reconciling]
        if stalled:
            conditions.append({**ready("True", "BuildFailed", message), "type": "Stalled"})
        self._status(path, {"observedGeneration": 1, "lastAppliedRevision": status.get("lastAppliedRevision"),
                            "lastAttemptedRevision": f"main@sha1:{sha}", "conditions": conditions})
        return sha

    def helm_release(self, name: str, namespace: str = "ns") -> None:
        """Create the HelmRelease ``<namespace>/<name>`` (chart from the GitRepository, strategy Revision)."""
        body = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"interval": "10m", "chart": {"spec": {
                    "chart": "./charts/web", "reconcileStrategy": "Revision",
                    "valuesFiles": ["./envs/prod/values.yaml"],
                    "sourceRef": {"kind": "GitRepository", "name": self.source,
                                  "namespace": "flux-system"}}}}}
        call(self.api_client, "POST", HELMRELEASES.format(ns=namespace), body)

    def reconcile_helm_release(self, name: str, chart: str, values: str, namespace: str = "ns") -> str:
        """helm-controller: ``helm template`` the chart with the values file at the tip, apply, record it."""
        sha, where = self.checkout()
        docs = self._run(str(TOOLS / "helm"), "template", name, str(where / chart), "-f", str(where / values),
                         "--namespace", namespace)
        self.apply(docs, manager="helm-controller",
                   labels={FLUX_HELM_NAME_LABEL: name, FLUX_HELM_NAMESPACE_LABEL: namespace})
        version = f"0.1.0+{sha[:12]}"
        snapshot = {"name": name, "namespace": namespace, "version": 2, "status": "deployed",
                    "chartName": "web", "chartVersion": version, "appVersion": "1.0",
                    "digest": "sha256:" + "0" * 64, "configDigest": "sha256:" + "1" * 64,
                    "firstDeployed": _NOW, "lastDeployed": _NOW}
        self._status(HELMRELEASES.format(ns=namespace) + f"/{name}", {
            "observedGeneration": 1, "lastAttemptedRevision": version, "lastAttemptedGeneration": 1,
            "lastAttemptedReleaseAction": "upgrade", "history": [snapshot],
            "helmChart": f"flux-system/{namespace}-{name}",
            "conditions": [ready("True", "UpgradeSucceeded", f"Helm upgrade succeeded for release "
                                 f"{namespace}/{name}.v2 with chart web@{version}")]})
        return sha

    def _status(self, path: str, status: dict[str, Any]) -> None:
        call(self.api_client, "PATCH", path + "/status", {"status": status},
             content_type="application/merge-patch+json")

    # -- Argo CD -------------------------------------------------------------------------

    def application(self, name: str, path: str, *, destination: str = "ns", automated: bool = True) -> None:
        """Create the Application ``argocd/<name>`` for ``path`` of the repository's main branch."""
        spec: dict[str, Any] = {"project": "default",
                                "source": {"repoURL": self.host.repo_url(self.repo), "path": path,
                                           "targetRevision": "main"},
                                "destination": {"server": "https://kubernetes.default.svc",
                                                "namespace": destination}}
        if automated:
            spec["syncPolicy"] = {"automated": {"prune": True}}
        call(self.api_client, "POST", APPLICATIONS.format(ns="argocd"),
             {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
              "metadata": {"name": name, "namespace": "argocd"}, "spec": spec})

    def sync_application(self, name: str, path: str, *, fail: str = "") -> str:
        """argocd-application-controller: apply plain files at the tip (or fail with ``fail``), record it."""
        sha, where = self.checkout()
        app_path = APPLICATIONS.format(ns="argocd") + f"/{name}"
        if fail:
            # The application controller has no status subresource: it writes the whole object.
            call(self.api_client, "PATCH", app_path, {"status": {
                "sync": {"status": "OutOfSync", "revision": sha},
                "operationState": {"phase": "Failed", "message": fail, "startedAt": _NOW, "finishedAt": _NOW,
                                   "operation": {"sync": {"revision": sha}},
                                   "syncResult": {"revision": sha, "resources": []}}}},
                 content_type="application/merge-patch+json")
            return sha
        docs = [doc for file in sorted((where / path).glob("*.yaml"))
                for doc in yaml.safe_load_all(file.read_text()) if doc]
        for doc in docs:
            meta = doc.setdefault("metadata", {})
            tracking = f"{name}:{'apps' if doc['kind'] == 'Deployment' else ''}/{doc['kind']}:" \
                       f"{meta.get('namespace', 'ns')}/{meta['name']}"
            meta.setdefault("annotations", {})[ARGOCD_TRACKING_ANNOTATION] = tracking
        self.apply(docs, manager="argocd-controller")
        call(self.api_client, "PATCH", app_path, {"status": {
            "sync": {"status": "Synced", "revision": sha},
            "operationState": {"phase": "Succeeded", "message": "successfully synced (all tasks run)",
                               "startedAt": _NOW, "finishedAt": _NOW,
                               "operation": {"sync": {"revision": sha}},
                               "syncResult": {"revision": sha, "resources": []}}}},
             content_type="application/merge-patch+json")
        return sha


def complete_rollout(api_client: ApiClient, name: str, namespace: str = "ns", *, fail: bool = False) -> None:
    """The Deployment controller, once the new ReplicaSet is available (or past its progress deadline)."""
    path = _path("Deployment", namespace, name)
    live = call(api_client, "GET", path)
    generation, replicas = live["metadata"]["generation"], (live.get("spec") or {}).get("replicas", 1)
    status = (status_failed if fail else status_complete)(generation, replicas)
    call(api_client, "PATCH", path + "/status", {"status": status},
         content_type="application/merge-patch+json")


def template_hash(api_client: ApiClient, name: str, namespace: str = "ns") -> str | None:
    """The config-hash annotation of a Deployment's live pod template."""
    live = call(api_client, "GET", _path("Deployment", namespace, name))
    annotations = live["spec"]["template"].get("metadata", {}).get("annotations") or {}
    return annotations.get("gitops-reloader.io/config-hash")
