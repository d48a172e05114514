"""``gitops-reloader explain`` for the git and pull-request sinks, end to end: the located
manifest (repository, branch, path, document) and the rule that found it — explicit
annotation, Argo CD tracking id -> Application, Flux labels -> Kustomization ->
GitRepository, scan — or the refusal, on a real ``git http-backend`` remote with Argo CD
and Flux objects in the API test server. The remote is only read.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from git_setup import REPO, GitSetup
from kubernetes.client import ApiClient
from reload_helpers import call, configmap, create
from test_git_sink import (
    git_workload,
    manifest,
)

from gitops_reloader import cli
from gitops_reloader.gitops.locate import (
    ARGOCD_TRACKING_ANNOTATION,
    FLUX_NAME_LABEL,
    FLUX_NAMESPACE_LABEL,
    FLUX_ORIGIN_ANNOTATION,
    GIT_PATH_ANNOTATION,
)
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.githost import GitHostServer

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

SINK = "gitops-reloader.io/sink"


def explain_manifest(capsys: Any, server: ApiServer, git: GitSetup, *flags: str) -> dict[str, Any]:
    kubeconfig = str(server.write_kubeconfig(git.tmp / "kubeconfig"))
    code = cli.main(["explain", "deployment/web", "-n", "ns", "--kubeconfig", kubeconfig,
                     f"--git-config={git.config_path}", "--output", "json", *flags])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    assert result["sink"] in ("git", "pull-request")
    return result["manifest"]


def test_explicit_git_path(server: ApiServer, api_client: ApiClient, git: GitSetup, host: GitHostServer,
                           capsys: Any) -> None:
    git.create({"clusters/prod/web.yaml": manifest("web"), "clusters/staging/web.yaml": manifest("web")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web", annotations={GIT_PATH_ANNOTATION: "clusters/prod/web.yaml"}))
    before = host.log(REPO)
    found = explain_manifest(capsys, server, git)
    assert {k: found[k] for k in ("repository", "branch", "path", "document", "method")} == {
        "repository": REPO, "branch": "main", "path": "clusters/prod/web.yaml", "document": 0,
        "method": "git-path"}
    assert found["rule"] == f"explicit: {GIT_PATH_ANNOTATION} annotation"
    assert host.log(REPO) == before  # read only


def test_argocd_tracking_id_names_the_application(server: ApiServer, api_client: ApiClient, git: GitSetup,
                                                   host: GitHostServer, capsys: Any) -> None:
    git.create({"apps/argo/web.yaml": "---\n" + manifest("other") + "---\n" + manifest("web"),
                "apps/other/web.yaml": manifest("web")})
    git.configure()
    call(api_client, "POST", "/apis/argoproj.io/v1alpha1/namespaces/team-a/applications", {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "web-app", "namespace": "team-a"},
        "spec": {"project": "default",
                 "source": {"repoURL": host.repo_url(REPO), "path": "apps/argo", "targetRevision": "main"},
                 "destination": {"server": "https://kubernetes.default.svc", "namespace": "ns"}}})
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web", annotations={
        ARGOCD_TRACKING_ANNOTATION: "team-a_web-app:apps/Deployment:ns/web", SINK: "pull-request"}))
    found = explain_manifest(capsys, server, git)
    assert (found["method"], found["path"], found["document"]) == ("argocd", "apps/argo/web.yaml", 1)
    assert found["found_by"] == ["team-a/Application/web-app"]
    assert found["rule"].startswith(f"Argo CD: {ARGOCD_TRACKING_ANNOTATION}")
    # Located, but this repository has no pullRequest block: the pull-request sink refuses.
    assert found["refused"] == (
        f"ns/Deployment/web: repository {REPO} has no pullRequest settings in --git-config")
    git.configure(extra="    pullRequest: {host: gitea, apiUrl: 'http://127.0.0.1:9/api/v1', "
                        "repository: org/manifests}\n")  # the host's API is never called
    found = explain_manifest(capsys, server, git)
    assert "refused" not in found and (found["path"], found["document"]) == ("apps/argo/web.yaml", 1)


def test_flux_labels_lead_to_kustomization_and_git_repository(
        server: ApiServer, api_client: ApiClient, git: GitSetup, host: GitHostServer, capsys: Any) -> None:
    git.create({"clusters/prod/apps/web/deploy.yaml": manifest("web"),
                "clusters/dev/web.yaml": manifest("web")})
    git.configure()
    call(api_client, "POST", "/apis/source.toolkit.fluxcd.io/v1/namespaces/flux-system/gitrepositories", {
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
        "metadata": {"name": "fleet", "namespace": "flux-system"},
        "spec": {"url": host.repo_url(REPO), "ref": {"branch": "main"}, "interval": "1m"}})
    call(api_client, "POST", "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations", {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "flux-system"},
        "spec": {"path": "./clusters/prod", "interval": "5m", "prune": True,
                 "sourceRef": {"kind": "GitRepository", "name": "fleet"}}})
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload(
        "web", labels={FLUX_NAME_LABEL: "apps", FLUX_NAMESPACE_LABEL: "flux-system"},
        annotations={FLUX_ORIGIN_ANNOTATION: "path: apps/web/deploy.yaml\n"}))
    found = explain_manifest(capsys, server, git)
    assert (found["method"], found["path"]) == ("flux", "clusters/prod/apps/web/deploy.yaml")
    assert sorted(found["found_by"]) == ["flux-system/GitRepository/fleet", "flux-system/Kustomization/apps"]
    assert found["rule"] == f"Flux: {FLUX_NAME_LABEL} labels -> Kustomization -> GitRepository"


def test_scan_of_the_default_repository(server: ApiServer, api_client: ApiClient, git: GitSetup,
                                        capsys: Any) -> None:
    git.create({"a/web-other-ns.yaml": manifest("web", namespace="other"), "c/deep/web.yml": manifest("web")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    found = explain_manifest(capsys, server, git)
    assert (found["method"], found["path"], found["document"]) == ("scan", "c/deep/web.yml", 0)
    assert found["rule"].startswith("scan:")


def test_refusals_are_reported(server: ApiServer, api_client: ApiClient, git: GitSetup, capsys: Any) -> None:
    git.create({"apps/web.yaml": manifest("web"), "charts/web/Chart.yaml": "apiVersion: v2\nname: web\n",
                "charts/web/templates/deployment.yaml": manifest("web")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    body = git_workload("web")
    body["metadata"]["ownerReferences"] = [{
        "apiVersion": "example.com/v1", "kind": "WebApp", "name": "web", "uid": "1234", "controller": True}]
    create(api_client, body)
    found = explain_manifest(capsys, server, git)
    assert "WebApp web" in found["refused"]

    call(api_client, "PATCH", "/apis/apps/v1/namespaces/ns/deployments/web",
         {"metadata": {"ownerReferences": None, "annotations": {GIT_PATH_ANNOTATION: "apps/missing.yaml"}}},
         "application/merge-patch+json")
    found = explain_manifest(capsys, server, git)
    assert (found["method"], found["refused"]) == (
        "git-path", f"ns/Deployment/web: {REPO}:apps/missing.yaml does not exist")

    # Found, but the git sink's own editability check refuses it (a Helm chart template).
    call(api_client, "PATCH", "/apis/apps/v1/namespaces/ns/deployments/web",
         {"metadata": {"annotations": {GIT_PATH_ANNOTATION: "charts/web/templates/deployment.yaml"}}},
         "application/merge-patch+json")
    found = explain_manifest(capsys, server, git)
    assert found["refused"].startswith("ns/Deployment/web: charts/web/templates/deployment.yaml "
                                       "is a template of the Helm chart in charts/web/")


def test_no_git_config_is_a_refusal(server: ApiServer, api_client: ApiClient, git: GitSetup,
                                    capsys: Any) -> None:
    create(api_client, git_workload("web"))
    kubeconfig = str(server.write_kubeconfig(git.tmp / "kubeconfig"))
    assert cli.main(["explain", "deployment/web", "-n", "ns", "--kubeconfig", kubeconfig]) == 0
    text = capsys.readouterr().out
    assert "  sink: git (annotation gitops-reloader.io/sink)" in text
    assert "    REFUSED: no --git-config: the git and pull-request sinks are not configured" in text
