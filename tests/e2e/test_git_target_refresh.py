"""A ``git-target`` push is followed by a refresh of what deploys the workload (issue 22).

Kustomize overlays (Flux Kustomization, Argo CD Application) and a Flux HelmRelease whose
chart lives in git: the commit edits only the target map, the real renderer (``kubectl
kustomize``, ``helm template``) puts the hash into the pod template, and the Argo CD /
Flux object found from the workload's own metadata is asked to reconcile. A real ``git
http-backend`` remote on 127.0.0.1, the API test server with the real CRD schemas, the
controller in-process with the git sink; fixtures and helpers from ``test_git_sink.py``.
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from git_setup import REPO, GitSetup
from helm_tools import REPO_ROOT, require_helm, run_helm
from kubernetes.client import ApiClient
from reload_helpers import call, configmap, create
from test_git_sink import (
    HASH_LINE,
    file_at,
    git_controller,
    git_workload,
    hash_value,
    line_diff,
    manifest,
    put_data,
    wait_commits,
    wait_event,
)

from gitops_reloader.gitops.locate import (
    ARGOCD_TRACKING_ANNOTATION,
    FLUX_HELM_NAME_LABEL,
    FLUX_HELM_NAMESPACE_LABEL,
    FLUX_NAME_LABEL,
    FLUX_NAMESPACE_LABEL,
    GIT_TARGET_ANNOTATION,
)
from gitops_reloader.gitops.refresh import ARGOCD_REFRESH_ANNOTATION, FLUX_REQUESTED_AT_ANNOTATION
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

CONFIG_HASH = "gitops-reloader.io/config-hash"
GIT_REPOSITORIES = "/apis/source.toolkit.fluxcd.io/v1/namespaces/flux-system/gitrepositories"
KUSTOMIZATIONS = "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations"
HELM_RELEASES = "/apis/helm.toolkit.fluxcd.io/v2/namespaces/ns/helmreleases"
APPLICATIONS = "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications"

BASE = manifest("web", annotations=False)
PATCH = textwrap.dedent("""\
    # prod: more replicas, and the owner on every pod
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: web
      namespace: ns
    spec:
      replicas: 3
      template:
        metadata:
          annotations:
            owner: team-a
    """)
OVERLAY = {
    "base/deployment.yaml": BASE,
    "base/kustomization.yaml": "resources:\n  - deployment.yaml\n",
    "overlays/prod/kustomization.yaml": "resources:\n  - ../../base\npatches:\n  - path: web-patch.yaml\n",
    "overlays/prod/web-patch.yaml": PATCH,
}
PATCH_TARGET = "overlays/prod/web-patch.yaml#spec.template.metadata.annotations"

CHART = {
    "charts/web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n",
    "charts/web/values.yaml": "replicaCount: 1\npodAnnotations: {}\n",
    "charts/web/templates/deployment.yaml": textwrap.dedent("""\
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: {{ .Release.Name }}
        spec:
          replicas: {{ .Values.replicaCount }}
          selector:
            matchLabels:
              app: {{ .Release.Name }}
          template:
            metadata:
              labels:
                app: {{ .Release.Name }}
              {{- with .Values.podAnnotations }}
              annotations:
                {{- toYaml . | nindent 8 }}
              {{- end }}
            spec:
              containers:
                - name: app
                  image: nginx
        """),
    "envs/prod/web.yaml": "# prod values for web\nreplicaCount: 3\npodAnnotations:\n  owner: team-a\n",
}


def flux_git_repository(url: str) -> dict[str, Any]:
    return {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "fleet", "namespace": "flux-system"},
            "spec": {"url": url, "ref": {"branch": "main"}, "interval": "1m"}}


def annotations_of(api_client: ApiClient, path: str) -> dict[str, str]:
    return call(api_client, "GET", path)["metadata"].get("annotations") or {}


def wait_requested(api_client: ApiClient, path: str) -> str:
    """The ``reconcile.fluxcd.io/requestedAt`` the object at ``path`` gets."""
    return wait_for(lambda: annotations_of(api_client, path).get(FLUX_REQUESTED_AT_ANNOTATION),
                    timeout=20, message=f"{FLUX_REQUESTED_AT_ANNOTATION} on {path}")


def checkout(remote: GitHostServer, into: Path) -> Path:
    """A working tree of the remote's ``main`` (what the GitOps engine fetches)."""
    subprocess.run(["git", "clone", "--quiet", "--branch", "main", str(remote.bare_path(REPO)), str(into)],
                   check=True, capture_output=True, timeout=60)
    return into


def kubectl() -> str:
    local = REPO_ROOT / ".tools" / "bin" / "kubectl"
    found = str(local) if local.is_file() else shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl not found: run `bash .ci/install-tools.sh`", pytrace=False)
    return found


def pod_annotations(documents: list[dict[str, Any]], name: str = "web") -> dict[str, str]:
    """The pod-template annotations of the rendered Deployment ``name``."""
    (found,) = [d for d in documents if d.get("kind") == "Deployment" and d["metadata"]["name"] == name]
    return found["spec"]["template"]["metadata"].get("annotations") or {}


def assert_only_the_hash_line_was_added(before: str, after: str) -> str:
    removed, added = line_diff(before, after)
    assert removed == [] and len(added) == 1 and HASH_LINE.match(added[0]), (removed, added)
    value = hash_value(after)
    assert value is not None
    return value


def test_flux_kustomization_overlay_target_is_committed_and_the_kustomization_reconciles(
        api_client: ApiClient, git: GitSetup, host: GitHostServer, tmp_path: Path) -> None:
    git.create(OVERLAY)
    git.configure()  # no tenants: the target is allowed because it lies in the Kustomization's path
    call(api_client, "POST", GIT_REPOSITORIES, flux_git_repository(host.repo_url(REPO)))
    call(api_client, "POST", KUSTOMIZATIONS, {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "flux-system"},
        "spec": {"path": "./overlays/prod", "interval": "10m", "prune": True,
                 "sourceRef": {"kind": "GitRepository", "name": "fleet"}}})
    # kustomize-controller's record of what it applied: web, not api.
    call(api_client, "PATCH", f"{KUSTOMIZATIONS}/apps/status",
         {"status": {"inventory": {"entries": [{"id": "ns_web_apps_Deployment", "v": "v1"}]}}},
         content_type="application/merge-patch+json")
    create(api_client, configmap("app-config", {"url": "a"}))
    labels = {FLUX_NAME_LABEL: "apps", FLUX_NAMESPACE_LABEL: "flux-system"}
    create(api_client, git_workload("web", labels=labels, annotations={GIT_TARGET_ANNOTATION: PATCH_TARGET}))
    # api carries the same labels (anyone applying it may write them): the inventory disowns it.
    create(api_client, git_workload("api", labels=labels, annotations={GIT_TARGET_ANNOTATION: PATCH_TARGET}))
    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        digest = assert_only_the_hash_line_was_added(PATCH, file_at(host, "overlays/prod/web-patch.yaml"))
        assert file_at(host, "base/deployment.yaml") == BASE
        assert "no Argo CD Application or Flux Kustomization deploys the workload" in wait_event(
            api_client, "api", "PolicyDenied")["message"]
        wait_requested(api_client, f"{KUSTOMIZATIONS}/apps")
        wait_requested(api_client, f"{GIT_REPOSITORIES}/fleet")
    tree = checkout(host, tmp_path / "checkout")
    rendered = subprocess.run([kubectl(), "kustomize", str(tree / "overlays/prod")], check=True,
                              capture_output=True, text=True, timeout=60).stdout
    assert pod_annotations(list(yaml.safe_load_all(rendered))) == {"owner": "team-a", CONFIG_HASH: digest}


def test_argocd_application_overlay_target_is_committed_and_the_application_refreshes(
        api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    git.create(OVERLAY)
    git.configure(extra="    tenants: [{namespaces: [ns], paths: ['overlays/prod/**']}]\n")
    call(api_client, "POST", APPLICATIONS, {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "web-app", "namespace": "argocd"},
        "spec": {"project": "default",
                 "source": {"repoURL": host.repo_url(REPO), "path": "overlays/prod",
                            "targetRevision": "main"},
                 "destination": {"server": "https://kubernetes.default.svc", "namespace": "ns"}}})
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web", annotations={
        ARGOCD_TRACKING_ANNOTATION: "web-app:apps/Deployment:ns/web", GIT_TARGET_ANNOTATION: PATCH_TARGET}))
    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        assert_only_the_hash_line_was_added(PATCH, file_at(host, "overlays/prod/web-patch.yaml"))
        refresh = wait_for(lambda: annotations_of(api_client, f"{APPLICATIONS}/web-app")
                           .get(ARGOCD_REFRESH_ANNOTATION), timeout=20, message="refresh on the Application")
        assert refresh == "normal"


def test_helm_release_chart_in_git_values_target_is_committed_and_the_release_reconciles(
        api_client: ApiClient, git: GitSetup, host: GitHostServer, tmp_path: Path) -> None:
    git.create(CHART)
    git.configure()  # no tenants: the values file is one of the HelmRelease's valuesFiles
    call(api_client, "POST", GIT_REPOSITORIES, flux_git_repository(host.repo_url(REPO)))
    call(api_client, "POST", HELM_RELEASES, {
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {"interval": "10m", "chart": {"spec": {
            "chart": "./charts/web", "reconcileStrategy": "Revision",
            "valuesFiles": ["charts/web/values.yaml", "envs/prod/web.yaml"],
            "sourceRef": {"kind": "GitRepository", "name": "fleet", "namespace": "flux-system"}}}}})
    create(api_client, configmap("app-config", {"url": "a"}))
    # helm-controller's labels on what it installs; the values file is the target.
    labels = {FLUX_HELM_NAME_LABEL: "web", FLUX_HELM_NAMESPACE_LABEL: "ns"}
    create(api_client, git_workload("web", labels=labels,
                                    annotations={GIT_TARGET_ANNOTATION: "envs/prod/web.yaml#podAnnotations"}))
    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        values = CHART["envs/prod/web.yaml"]
        digest = assert_only_the_hash_line_was_added(values, file_at(host, "envs/prod/web.yaml"))
        assert file_at(host, "charts/web/values.yaml") == CHART["charts/web/values.yaml"]
        wait_requested(api_client, f"{HELM_RELEASES}/web")
        wait_requested(api_client, f"{GIT_REPOSITORIES}/fleet")
    tree = checkout(host, tmp_path / "checkout")
    result = run_helm(require_helm(), ["template", "web", str(tree / "charts/web"), "--namespace", "ns",
                                       "--values", str(tree / "charts/web/values.yaml"),
                                       "--values", str(tree / "envs/prod/web.yaml")], home=tmp_path / "helm")
    assert result.returncode == 0, result.stderr
    rendered = list(yaml.safe_load_all(result.stdout))
    assert pod_annotations(rendered) == {"owner": "team-a", CONFIG_HASH: digest}
