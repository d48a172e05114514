"""Argo CD / Flux location and refresh rules end to end (issue 11, issue 10's Argo CD tenancy check).

A real ``git http-backend`` remote on 127.0.0.1 (token auth), the API test server, and
the controller in-process with the git sink, as in ``test_git_sink.py`` (whose fixtures
and helpers are reused).
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from git_setup import REPO, GitSetup
from kubernetes import client, watch
from kubernetes.client import ApiClient
from reload_helpers import call, configmap, create
from test_git_sink import (
    TOKEN,
    git_controller,
    git_workload,
    manifest,
    put_data,
    wait_event,
)

from gitops_reloader.clock import FakeClock
from gitops_reloader.errors import GitError
from gitops_reloader.gitops.auth import GitAuth
from gitops_reloader.gitops.gitconfig import RepositoryConfig
from gitops_reloader.gitops.locate import ARGOCD_TRACKING_ANNOTATION
from gitops_reloader.gitops.refresh import (
    ARGOCD_REFRESH_ANNOTATION,
    ARGOCD_REFRESH_TIMESTAMP_ANNOTATION,
    FLUX_REQUESTED_AT_ANNOTATION,
    RefreshKind,
    RefreshRequester,
    RefreshTarget,
)
from gitops_reloader.gitops.remotehead import ask_remote
from gitops_reloader.gitops.repo import remote_default_branch
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

APPS = "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications"


def application(name: str, url: str, path: str, *, revision: str, destination: str) -> dict[str, Any]:
    """An Application valid against the Argo CD CRD schema."""
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": "argocd"},
            "spec": {"project": "default",
                     "source": {"repoURL": url, "path": path, "targetRevision": revision},
                     "destination": {"server": "https://kubernetes.default.svc", "namespace": destination}}}


def deploy_tracked_web(api_client: ApiClient, url: str, *, revision: str) -> None:
    """Application ``web-app`` deploying ``apps`` of ``url`` into ns, and its tracked workload ``web``."""
    call(api_client, "POST", APPS, application("web-app", url, "apps", revision=revision, destination="ns"))
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web", annotations={
        ARGOCD_TRACKING_ANNOTATION: "web-app:apps/Deployment:ns/web"}))


def test_head_is_the_remotes_default_branch_not_the_first_config_entry(
        api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    # The remote's HEAD is "trunk"; "main" exists too and is listed first in --git-config.
    host.create_repo(REPO, {"apps/web.yaml": manifest("web")}, branch="trunk")
    host.commit_directly(REPO, {"apps/web.yaml": manifest("web")}, branch="main", message="main branch")
    url = host.repo_url(REPO)
    git.config_path.write_text(textwrap.dedent(f"""\
        defaultRepository: on-main
        repositories:
          - {{name: on-main, url: '{url}', branch: main, tokenFile: '{git.token_file}', username: bot}}
          - {{name: on-trunk, url: '{url}', branch: trunk, tokenFile: '{git.token_file}', username: bot}}
        """))
    main_before = host.branches(REPO)["main"]
    deploy_tracked_web(api_client, url, revision="HEAD")
    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_for(lambda: len(host.log(REPO, "trunk")) >= 2, timeout=30, message="a commit on trunk")
        data = host.read_file(REPO, "apps/web.yaml", "trunk")
        assert data is not None and b"gitops-reloader.io/config-hash" in data
        assert host.branches(REPO)["main"] == main_before


def test_an_application_naming_the_repository_in_other_case_is_the_same_repository(
        api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    # Argo CD's git.SameURL lower-cases the whole URL and drops ".git": the Application
    # deploys what --git-config writes, so the commit goes there (through the configured URL).
    git.create({"apps/web.yaml": manifest("web")})
    git.configure()
    shouted = host.repo_url(REPO).upper().replace("HTTP://", "http://").removesuffix(".GIT")
    deploy_tracked_web(api_client, shouted, revision="main")
    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_for(lambda: len(host.log(REPO)) >= 2, timeout=30, message="a commit")
        data = host.read_file(REPO, "apps/web.yaml")
        assert data is not None and b"gitops-reloader.io/config-hash" in data


def test_an_application_deploying_elsewhere_is_refused_without_revealing_its_source(
        api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    other_team = manifest("web", namespace=None)
    git.create({"team-b/payments/web.yaml": other_team})
    git.configure()
    call(api_client, "POST", APPS, application("payments", host.repo_url(REPO), "team-b/payments",
                                               revision="main", destination="team-b"))
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web", annotations={
        ARGOCD_TRACKING_ANNOTATION: "payments:apps/Deployment:ns/web"}))
    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        event = wait_event(api_client, "web", "ManifestNotFound")
        message = event["message"]
        assert "Application argocd/payments does not deploy into namespace ns" in message
        for leak in (host.repo_url(REPO), "127.0.0.1", "team-b/payments", f"{REPO}.git"):
            assert leak not in message
    assert host.read_file(REPO, "team-b/payments/web.yaml") == other_team.encode()
    assert len(host.log(REPO)) == 1


def requested_values(api_client: ApiClient, resource_version: str, count: int) -> list[str]:
    """The ``requestedAt`` values of the GitRepository's MODIFIED events after ``resource_version``."""
    objects = client.CustomObjectsApi(api_client)
    values: list[str] = []
    stream = watch.Watch()
    for event in stream.stream(objects.list_namespaced_custom_object, "source.toolkit.fluxcd.io", "v1",
                               "flux-system", "gitrepositories", resource_version=resource_version,
                               timeout_seconds=10):
        annotations = event["object"]["metadata"].get("annotations") or {}
        if event["type"] == "MODIFIED" and FLUX_REQUESTED_AT_ANNOTATION in annotations:
            values.append(annotations[FLUX_REQUESTED_AT_ANNOTATION])
            if len(values) == count:
                stream.stop()
    return values


@pytest.mark.parametrize("clock", [FakeClock(), None], ids=["frozen-clock", "system-clock"])
def test_two_refresh_requests_within_one_second_are_both_observed(api_client: ApiClient,
                                                                  clock: FakeClock | None) -> None:
    repositories = "/apis/source.toolkit.fluxcd.io/v1/namespaces/flux-system/gitrepositories"
    created = call(api_client, "POST", repositories, {
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
        "metadata": {"name": "fleet", "namespace": "flux-system"},
        "spec": {"interval": "1m", "url": "https://git.example.com/fleet.git", "ref": {"branch": "main"}}})
    call(api_client, "POST", APPS, application("web-app", "https://git.example.com/fleet.git", "apps",
                                               revision="main", destination="ns"))
    requester = RefreshRequester(KubeApi(api_client), clock=clock)
    flux = RefreshTarget(RefreshKind.FLUX_GITREPOSITORY, "flux-system", "fleet")
    argo = RefreshTarget(RefreshKind.ARGOCD_APPLICATION, "argocd", "web-app")
    assert requester.request([flux, argo]) == 2
    first = call(api_client, "GET", f"{APPS}/web-app")["metadata"]["annotations"]
    assert requester.request([flux, argo]) == 2
    second = call(api_client, "GET", f"{APPS}/web-app")["metadata"]["annotations"]
    values = requested_values(api_client, created["metadata"]["resourceVersion"], 2)
    assert len(values) == 2 and values[0] != values[1]
    if clock is not None:  # the frozen clock did not move at all: same second, same nanosecond
        assert values[0][:19] == values[1][:19]
    assert first[ARGOCD_REFRESH_ANNOTATION] == second[ARGOCD_REFRESH_ANNOTATION] == "normal"
    assert first[ARGOCD_REFRESH_TIMESTAMP_ANNOTATION] != second[ARGOCD_REFRESH_TIMESTAMP_ANNOTATION]


def test_remote_default_branch_asks_the_real_remote_with_credentials(host: GitHostServer,
                                                                     git: GitSetup) -> None:
    host.create_repo(REPO, {"a.yaml": "a: 1\n"}, branch="trunk")
    host.commit_directly(REPO, {"a.yaml": "a: 2\n"}, branch="main")
    url = host.repo_url(REPO)
    assert remote_default_branch(url, auth=GitAuth(username="bot", token=TOKEN)) == "trunk"
    repo = RepositoryConfig(name=REPO, url=url, token_file=str(git.token_file), username="bot")
    assert ask_remote(repo) == "trunk"
    with pytest.raises(GitError) as caught:
        remote_default_branch(url, auth=GitAuth(username="bot", token="wrong-token-123"))
    assert "wrong-token-123" not in str(caught.value)
    assert "refused the credentials" in str(caught.value)
