"""One remote in two spellings: ``aliases:`` of a ``--git-config`` repository, end to end (issue 28).

``flux bootstrap`` writes the GitRepository as ``ssh://git@host/org/fleet`` and Argo CD
Applications are often written ``git@host:org/fleet.git``, while ``--git-config`` names the
repository over HTTP(S). Here the only remote is the real ``git http-backend`` on
127.0.0.1 (token auth), configured by its ``http://`` URL; the Flux GitRepository and the
Argo CD Application spell it ``ssh://git@127.0.0.1/manifests`` and
``git@127.0.0.1:manifests.git``, a host no SSH server answers on: a commit that lands
proves the push went through the configured URL. The controller runs in-process with
the git sink, on the API test server with the real CRD schemas (fixtures and helpers
from ``test_git_sink.py``, the Application/GitRepository shapes of
``test_git_target_refresh.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from git_setup import REPO, GitSetup
from kubernetes.client import ApiClient
from reload_helpers import call, configmap, create
from test_git_sink import (
    assert_no_new_commit,
    commits,
    file_at,
    git_controller,
    git_workload,
    hash_value,
    manifest,
    put_data,
    wait_event,
)
from test_git_target_refresh import (
    APPLICATIONS,
    GIT_REPOSITORIES,
    KUSTOMIZATIONS,
    annotations_of,
    flux_git_repository,
    wait_requested,
)

from gitops_reloader import cli
from gitops_reloader.gitops.locate import (
    ARGOCD_TRACKING_ANNOTATION,
    FLUX_NAME_LABEL,
    FLUX_NAMESPACE_LABEL,
)
from gitops_reloader.gitops.refresh import ARGOCD_REFRESH_ANNOTATION
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

FLUX_URL = f"ssh://git@127.0.0.1/{REPO}"         # flux bootstrap's spelling
ARGO_URL = f"git@127.0.0.1:{REPO}.git"           # the scp-like spelling of an Application
ALIASES = f"    aliases: ['{FLUX_URL}']\n"       # one alias: for Argo CD both are one spelling
FILES = {"apps/flux/web.yaml": manifest("web"), "apps/argo/api.yaml": manifest("api"),
         "apps/allowed/ok.yaml": manifest("ok")}


def deploy_both(api_client: ApiClient) -> None:
    """Flux deploys ``web`` from ``apps/flux``, Argo CD ``api`` from ``apps/argo``, in the two spellings."""
    call(api_client, "POST", GIT_REPOSITORIES, flux_git_repository(FLUX_URL))
    call(api_client, "POST", KUSTOMIZATIONS, kustomization("apps", "./apps/flux"))
    call(api_client, "POST", APPLICATIONS, {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "api-app", "namespace": "argocd"},
        "spec": {"project": "default",
                 "source": {"repoURL": ARGO_URL, "path": "apps/argo", "targetRevision": "main"},
                 "destination": {"server": "https://kubernetes.default.svc", "namespace": "ns"}}})
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web", labels=flux_labels("apps")))
    create(api_client, git_workload("api", annotations={
        ARGOCD_TRACKING_ANNOTATION: "api-app:apps/Deployment:ns/api"}))


def kustomization(name: str, path: str) -> dict[str, Any]:
    return {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name, "namespace": "flux-system"},
            "spec": {"path": path, "interval": "10m", "prune": True,
                     "sourceRef": {"kind": "GitRepository", "name": "fleet"}}}


def flux_labels(kustomization_name: str) -> dict[str, str]:
    return {FLUX_NAME_LABEL: kustomization_name, FLUX_NAMESPACE_LABEL: "flux-system"}


def explain(capsys: Any, server: ApiServer, git: GitSetup, name: str, output: str) -> str:
    kubeconfig = str(server.write_kubeconfig(git.tmp / "kubeconfig"))
    code = cli.main(["explain", f"deployment/{name}", "-n", "ns", "--kubeconfig", kubeconfig,
                     f"--git-config={git.config_path}", "--output", output])
    out = capsys.readouterr()
    assert code == 0, out.err
    return str(out.out)


def test_ssh_and_scp_spellings_find_the_https_repository_through_its_alias_and_commit_there(
        server: ApiServer, api_client: ApiClient, git: GitSetup, host: GitHostServer, capsys: Any) -> None:
    git.create(FILES)
    git.configure(extra=ALIASES)
    deploy_both(api_client)
    for name, spelled in (("web", FLUX_URL), ("api", ARGO_URL)):
        found = json.loads(explain(capsys, server, git, name, "json"))["manifest"]
        assert (found["repository"], found["url"]) == (REPO, host.repo_url(REPO))
        assert found["aliases"] == [FLUX_URL]
        assert found["matched"] == f"{spelled} (as its alias {FLUX_URL})"
        assert "refused" not in found, found["refused"]
    text = explain(capsys, server, git, "api", "text")
    assert f"    aliases: {FLUX_URL}\n" in text
    assert f"    matched: {ARGO_URL} (as its alias {FLUX_URL})\n" in text
    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        web = wait_for(lambda: hash_value(file_at(host, "apps/flux/web.yaml")), timeout=30, message="web")
        api = wait_for(lambda: hash_value(file_at(host, "apps/argo/api.yaml")), timeout=30, message="api")
        assert web == api  # one ConfigMap, one digest
        # the refresh lookups find the Flux and Argo CD objects through the alias too
        wait_requested(api_client, f"{GIT_REPOSITORIES}/fleet")
        wait_requested(api_client, f"{KUSTOMIZATIONS}/apps")
        assert wait_for(lambda: annotations_of(api_client, f"{APPLICATIONS}/api-app").get(
            ARGOCD_REFRESH_ANNOTATION), timeout=20, message="refresh on the Application") == "normal"
    assert file_at(host, "apps/allowed/ok.yaml") == FILES["apps/allowed/ok.yaml"]


def test_without_the_alias_both_spellings_are_refused_naming_the_line_to_add(
        server: ApiServer, api_client: ApiClient, git: GitSetup, host: GitHostServer, capsys: Any) -> None:
    git.create(FILES)
    git.configure()
    deploy_both(api_client)
    lines = {"web": f'aliases: ["{FLUX_URL}"]', "api": f'aliases: ["{ARGO_URL}"]'}
    refusal = f"repository {REPO} has the same host and path in another spelling"
    found = json.loads(explain(capsys, server, git, "api", "json"))["manifest"]
    assert refusal in found["refused"] and lines["api"] in found["refused"]
    with git_controller(api_client, git) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        for name, spelled in (("web", FLUX_URL), ("api", ARGO_URL)):
            message = wait_event(api_client, name, "ManifestNotFound")["message"]
            assert f"deploys from {spelled}, which is not in --git-config" in message
            assert refusal in message
            assert f"give repository {REPO} this line in --git-config: {lines[name]}" in message
        assert_no_new_commit(app, host, 1)


def test_a_tenant_restricted_path_stays_refused_through_either_spelling(
        api_client: ApiClient, git: GitSetup, host: GitHostServer, tmp_path: Path) -> None:
    git.create(FILES)
    git.configure(extra=ALIASES + "    tenants: [{namespaces: [ns], paths: ['apps/allowed/**']}]\n")
    deploy_both(api_client)
    # the control: a third workload, through the ssh spelling, in the allowed path
    call(api_client, "POST", KUSTOMIZATIONS, kustomization("allowed", "./apps/allowed"))
    create(api_client, git_workload("ok", labels=flux_labels("allowed")))
    with git_controller(api_client, git) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_for(lambda: hash_value(file_at(host, "apps/allowed/ok.yaml")), timeout=30, message="ok's hash")
        for name in ("web", "api"):
            message = wait_event(api_client, name, "PolicyDenied")["message"]
            assert f"tenancy policy of repository {REPO} does not let namespace ns" in message
        assert_no_new_commit(app, host, len(commits(host)))
    assert file_at(host, "apps/flux/web.yaml") == FILES["apps/flux/web.yaml"]
    assert file_at(host, "apps/argo/api.yaml") == FILES["apps/argo/api.yaml"]
