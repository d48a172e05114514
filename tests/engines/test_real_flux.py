"""The git and pull-request sinks under the real Flux (issue 41): source-controller fetches the
controller's commit from the project's git test server over HTTPS, kustomize-controller applies
it to the real kube-apiserver, the real Deployment controller rolls the pods (kwok runs them),
and the follow loop reads the real Kustomization's status.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import started
from controlplane import ControlPlane
from fleet import TOKEN, controller_flags, events_of, ready_pods, rolled, web_manifest
from flux import Flux, ready, running_flux
from kubernetes.client import ApiClient, AppsV1Api, CoreV1Api, CustomObjectsApi
from tls_certs import TlsFiles

from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import running_controller, wait_for
from gitops_reloader.testing.prhost import PrHost

pytestmark = [pytest.mark.engines, pytest.mark.xdist_group("engines"),
              pytest.mark.usefixtures("isolated_git")]

REPO = "org/fleet"
TIMEOUT = 90.0
KUSTOMIZE = ("kustomize.toolkit.fluxcd.io", "kustomizations")
SOURCE = ("source.toolkit.fluxcd.io", "gitrepositories")


@pytest.fixture(scope="session")
def flux(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flux]:
    yield from started(running_flux(control_plane, tmp_path_factory.mktemp("flux")))


def flux_objects(api: ApiClient, namespace: str, githost: GitHostServer, tls: TlsFiles) -> None:
    """The Secret, GitRepository and Kustomization a platform team writes for the fleet
    repository: both reconcile every 10 minutes, so only the controller's reconcile requests
    bring a commit in within a test; a failed apply is retried after 5 s (``retryInterval``,
    which Flux otherwise takes from ``interval``)."""
    CoreV1Api(api).create_namespaced_secret(namespace, {
        "metadata": {"name": "fleet-auth"}, "type": "Opaque",
        "stringData": {"username": "git", "password": TOKEN, "ca.crt": tls.ca_cert.read_text()}})
    custom = CustomObjectsApi(api)
    custom.create_namespaced_custom_object(*SOURCE[:1], "v1", namespace, SOURCE[1], {
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
        "metadata": {"name": "fleet"},
        "spec": {"url": githost.repo_url(REPO), "interval": "10m", "ref": {"branch": "main"},
                 "secretRef": {"name": "fleet-auth"}}})
    custom.create_namespaced_custom_object(*KUSTOMIZE[:1], "v1", namespace, KUSTOMIZE[1], {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "apps"},
        "spec": {"interval": "10m", "retryInterval": "5s", "path": "./apps", "prune": False,
                 "sourceRef": {"kind": "GitRepository", "name": "fleet"}}})


def deployed(api: ApiClient, namespace: str, githost: GitHostServer, tls: TlsFiles, sink: str) -> set[str]:
    """The fleet repository on the git server, Flux pointed at it, the web Deployment applied by
    the real kustomize-controller and its pods Ready; their names."""
    githost.create_repo(REPO, {"apps/web.yaml": "# web: reloaded through the sink it names\n"
                                                + web_manifest(namespace, sink)})
    core = CoreV1Api(api)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "web-config"}, "data": {"mode": "a"}})
    flux_objects(api, namespace, githost, tls)
    wait_for(lambda: ready(CustomObjectsApi(api), *KUSTOMIZE, namespace, "apps"), timeout=TIMEOUT,
             message="the Kustomization applied")
    wait_for(lambda: len(ready_pods(core, namespace)) == 2, timeout=TIMEOUT, message="web's pods Ready")
    return {p.metadata.name for p in ready_pods(core, namespace)}


def test_real_flux_applies_the_git_sink_commit_and_the_follow_loop_reports_applied(
        flux: Flux, real_client: ApiClient, namespace: str, githost: GitHostServer, tls: TlsFiles,
        tmp_path: Path) -> None:
    core = CoreV1Api(real_client)
    first = deployed(real_client, namespace, githost, tls, "git")
    flags = controller_flags(tmp_path, githost, REPO, namespace)
    with running_controller(real_client, flags, environ={"HOME": str(tmp_path), "POD_NAMESPACE": namespace}):
        core.patch_namespaced_config_map("web-config", namespace, {"data": {"mode": "b"}})
        wait_for(lambda: len(githost.log(REPO)) == 2, timeout=TIMEOUT, message="the reload's commit")
        pods = wait_for(lambda: rolled(core, namespace, first), timeout=TIMEOUT,
                        message="Flux applied the commit and the real Deployment controller rolled the pods")
        [applied] = wait_for(lambda: events_of(core, namespace, "web", "Applied"), timeout=TIMEOUT,
                             message="the follow loop's Applied Event")
    sha = githost.log(REPO)[0][0]
    assert applied.type == "Normal" and sha[:12] in applied.message
    assert all("gitops-reloader.io/config-hash" in p.metadata.annotations for p in pods)
    kustomization = CustomObjectsApi(real_client).get_namespaced_custom_object(
        KUSTOMIZE[0], "v1", namespace, KUSTOMIZE[1], "apps")
    assert kustomization["status"]["lastAppliedRevision"] == f"main@sha1:{sha}"
    live = AppsV1Api(real_client).read_namespaced_deployment("web", namespace)
    assert live.metadata.labels["kustomize.toolkit.fluxcd.io/name"] == "apps"  # what the sink followed


def test_real_flux_suspended_kustomization_is_reported_not_applied(
        flux: Flux, real_client: ApiClient, namespace: str, githost: GitHostServer, tls: TlsFiles,
        tmp_path: Path) -> None:
    """A suspended Kustomization applies nothing: the follow loop says so (NotApplied), read from
    the real object's ``spec.suspend``, and the pods keep running."""
    core = CoreV1Api(real_client)
    first = deployed(real_client, namespace, githost, tls, "git")
    CustomObjectsApi(real_client).patch_namespaced_custom_object(
        KUSTOMIZE[0], "v1", namespace, KUSTOMIZE[1], "apps", {"spec": {"suspend": True}})
    flags = controller_flags(tmp_path, githost, REPO, namespace)
    with running_controller(real_client, flags, environ={"HOME": str(tmp_path), "POD_NAMESPACE": namespace}):
        core.patch_namespaced_config_map("web-config", namespace, {"data": {"mode": "b"}})
        wait_for(lambda: len(githost.log(REPO)) == 2, timeout=TIMEOUT, message="the reload's commit")
        [event] = wait_for(lambda: events_of(core, namespace, "web", "NotApplied"), timeout=TIMEOUT,
                           message="the follow loop's NotApplied Event")
    assert event.type == "Warning" and "suspend" in event.message.lower()
    assert {p.metadata.name for p in ready_pods(core, namespace)} == first


def test_real_flux_applies_the_merged_pull_request_and_the_follow_loop_reports_applied(
        flux: Flux, real_client: ApiClient, namespace: str, githost: GitHostServer, tls: TlsFiles,
        tmp_path: Path) -> None:
    core = CoreV1Api(real_client)
    prhost = PrHost(githost)
    api_url = prhost.mount("github")
    # The GitRepository fetches every 10 minutes: only the follow loop's reconcile request,
    # made when it sees the merge, brings the merge in within the test's timeout.
    first = deployed(real_client, namespace, githost, tls, "pull-request")
    block = f"    pullRequest: {{host: github, apiUrl: {api_url}}}\n"
    flags = controller_flags(tmp_path, githost, REPO, namespace, pull_request=block)
    with running_controller(real_client, flags, environ={"HOME": str(tmp_path), "POD_NAMESPACE": namespace}):
        core.patch_namespaced_config_map("web-config", namespace, {"data": {"mode": "b"}})
        [pull] = wait_for(lambda: prhost.pulls(REPO), timeout=TIMEOUT, message="the reload's pull request")
        assert len(githost.log(REPO)) == 1 and {p.metadata.name for p in ready_pods(core, namespace)} == first
        prhost.merge(REPO, pull["number"])  # a reviewer merges it
        wait_for(lambda: rolled(core, namespace, first), timeout=TIMEOUT,
                 message="Flux applied the merge and the pods rolled")
        [applied] = wait_for(lambda: events_of(core, namespace, "web", "Applied"), timeout=TIMEOUT,
                             message="the follow loop's Applied Event")
    assert applied.type == "Normal"
