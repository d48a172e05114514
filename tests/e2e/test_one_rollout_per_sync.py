"""One rollout per sync (issue 32): a ConfigMap and its Deployment changed together roll once.

Helm, Argo CD and Flux apply a changed ConfigMap and then, a few milliseconds later, the
changed Deployment. The Deployment's new pods read the new data, so the controller must not
roll it a second time. :class:`~gitops_reloader.testing.replicasets.ReplicaSetPlayer` plays
the Deployment controller's ReplicaSets, so the rollouts are counted as ``kubectl get rs``
would show them; :class:`engines.EnginePlayer` plays Argo CD for the git sink.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engines import EnginePlayer
from git_setup import REPO, GitSetup
from kubernetes.client import ApiClient, AppsV1Api
from reload_helpers import configmap, create, env_of, events, metric, quiet, wait_event, workload
from test_git_follow import KUSTOMIZE_DEPLOYMENT, TENANTS
from test_git_sink import assert_no_new_commit, commits, git_controller, wait_commits
from test_storm_brakes import rewrite, template_writes

from gitops_reloader import cli, syncs
from gitops_reloader.hashing import configmap_hash
from gitops_reloader.kube.api import FIELD_MANAGER, field_manager
from gitops_reloader.syncs import RESTARTED_AT, SYNCED_ANNOTATION
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import deployment, running_controller, wait_for
from gitops_reloader.testing.replicasets import ReplicaSetPlayer

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

ENV = "STAKATER_APP_CONFIG_CONFIGMAP"
AUTO = {"reloader.stakater.com/auto": "true"}
DEFAULT_WINDOW = "--coalesce-window=2s"
"""The flag's default (the test harness's own default is 0, for speed)."""
SHORT_WINDOW = "--coalesce-window=0.5s"
"""Long enough for a sync's second half (milliseconds behind), short enough for tests that change often."""


def web(image: str = "nginx:1.26") -> dict[str, Any]:
    return deployment("web", annotations=AUTO, containers=[
        {"name": "app", "image": image, "envFrom": [{"configMapRef": {"name": "app-config"}}]}])


def sync_image(api_client: ApiClient, image: str) -> None:
    """What Argo CD or ``helm upgrade`` does right after the ConfigMap: the Deployment's new template."""
    AppsV1Api(api_client).patch_namespaced_deployment(
        "web", "ns", {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}},
        field_manager="argocd-controller")


@pytest.fixture
def replicasets(api_client: ApiClient) -> Iterator[ReplicaSetPlayer]:
    with ReplicaSetPlayer(api_client) as player:
        yield player


def count_rs(player: ReplicaSetPlayer, expected: int) -> None:
    wait_for(lambda: len(player.replicasets("web")) == expected, message=f"{expected} ReplicaSets")


def test_one_rollout_per_sync_configmap_then_deployment_makes_one_new_replicaset(
        server: ApiServer, api_client: ApiClient, replicasets: ReplicaSetPlayer,
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, web())
    count_rs(replicasets, 1)
    with running_controller(api_client, [DEFAULT_WINDOW]) as app:
        rewrite(api_client, "v1")
        sync_image(api_client, "nginx:1.27")
        event = wait_event(api_client, "web", "ReloadSynced")
        assert "ConfigMap/app-config changed before the pod template did" in event["message"]
        quiet(app)
        count_rs(replicasets, 2)  # the sync's; none of the controller's
        live = workload(server, "Deployment", "web")
        assert template_writes(server, "web") == 1
        assert ENV not in env_of(live)
        assert live["metadata"]["annotations"][SYNCED_ANNOTATION].startswith(
            f"ConfigMap/app-config={configmap_hash({'url': 'v1'})}@")
        assert metric(app, "reloads_synced_total", sink="env-vars") == 1
        assert not [e for e in events(api_client, "web") if e["reason"] == "Reloaded"]
        # Owned by the controller's field manager, outside the pod template: Argo CD's diff
        # compares the fields its manifest sets (server-side diff: those argocd-controller owns).
        assert field_manager(live["metadata"], SYNCED_ANNOTATION) == FIELD_MANAGER
    # A restart reads the record from the workload: nothing to catch up on, no rollout.
    with running_controller(api_client, [DEFAULT_WINDOW, "--sync-after-restart"]) as app:
        quiet(app)
        assert template_writes(server, "web") == 1
        assert len(replicasets.replicasets("web")) == 2
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    capsys.readouterr()
    assert cli.main(["explain", "deployment/web", "-n", "ns", "--kubeconfig", kubeconfig]) == 0
    shown = capsys.readouterr().out
    assert "brought by a sync or the last write (gitops-reloader.io/synced-sources)" in shown


def test_one_rollout_per_sync_replicas_only_change_still_reloads(
        server: ApiServer, api_client: ApiClient, replicasets: ReplicaSetPlayer) -> None:
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, web())
    count_rs(replicasets, 1)
    with running_controller(api_client, [SHORT_WINDOW]) as app:
        rewrite(api_client, "v1")
        AppsV1Api(api_client).patch_namespaced_deployment(  # a sync that scales, template unchanged
            "web", "ns", {"spec": {"replicas": 3}, "metadata": {"labels": {"tier": "web"}}},
            field_manager="argocd-controller")
        wait_for(lambda: env_of(workload(server, "Deployment", "web")).get(ENV)
                 == configmap_hash({"url": "v1"}), message="reloaded")
        quiet(app)
        count_rs(replicasets, 2)  # the controller's reload
        assert metric(app, "reloads_synced_total", sink="env-vars") == 0
        assert SYNCED_ANNOTATION not in workload(server, "Deployment", "web")["metadata"]["annotations"]


def test_one_rollout_per_sync_source_back_to_the_recorded_data_still_restarts(
        server: ApiServer, api_client: ApiClient, replicasets: ReplicaSetPlayer) -> None:
    """After a sync brought v1, the variable still reads v0; v1 → v0 must roll the pods anyway,
    and the next change after that is written as usual."""
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, web())
    with running_controller(api_client, [SHORT_WINDOW]) as app:
        rewrite(api_client, "v0-prime")  # a first reload records a variable
        wait_for(lambda: env_of(workload(server, "Deployment", "web")).get(ENV)
                 == configmap_hash({"url": "v0-prime"}), message="first reload")
        rewrite(api_client, "v1")
        sync_image(api_client, "nginx:1.27")
        wait_event(api_client, "web", "ReloadSynced")
        quiet(app)
        count_rs(replicasets, 3)  # created, first reload, the sync
        rewrite(api_client, "v0-prime")  # back to what the variable records
        wait_for(lambda: RESTARTED_AT in (workload(server, "Deployment", "web")["spec"]["template"]
                                          ["metadata"].get("annotations") or {}), message="restarted")
        quiet(app)
        count_rs(replicasets, 4)
        live = workload(server, "Deployment", "web")
        assert SYNCED_ANNOTATION not in live["metadata"]["annotations"]  # replaced by the write
        rewrite(api_client, "v2")
        wait_for(lambda: env_of(workload(server, "Deployment", "web")).get(ENV)
                 == configmap_hash({"url": "v2"}), message="the next change written as usual")
        quiet(app)
        count_rs(replicasets, 5)


CONFIGMAP_YAML = textwrap.dedent("""\
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: app-config
      namespace: ns
    data:
      url: {url}
    """)


def test_one_rollout_per_sync_git_sink_makes_no_second_commit_for_a_commit_that_changed_both(
        api_client: ApiClient, git: GitSetup, host: GitHostServer, tmp_path: Path) -> None:
    git.create({"apps/web/app-config.yaml": CONFIGMAP_YAML.format(url="a"),
                "apps/web/deployment.yaml": KUSTOMIZE_DEPLOYMENT})
    git.configure(extra=TENANTS)
    argo = EnginePlayer(api_client, host, REPO, tmp_path)
    argo.application("web", "apps/web")
    argo.sync_application("web", "apps/web")  # app-config.yaml sorts first: ConfigMaps first
    with git_controller(api_client, git, "--coalesce-window=2s") as (app, _):
        host.commit_directly(REPO, {  # one commit changes both
            "apps/web/app-config.yaml": CONFIGMAP_YAML.format(url="b"),
            "apps/web/deployment.yaml": KUSTOMIZE_DEPLOYMENT.replace("image: nginx", "image: nginx:1.27")})
        argo.sync_application("web", "apps/web")
        wait_event(api_client, "web", "ReloadSynced")
        assert_no_new_commit(app, host, len(commits(host)))
        assert metric(app, "reloads_synced_total", sink="git") == 1
        # A later change of the ConfigMap alone is committed as always.
        before = len(commits(host))
        host.commit_directly(REPO, {"apps/web/app-config.yaml": CONFIGMAP_YAML.format(url="c")})
        argo.sync_application("web", "apps/web")
        wait_commits(host, before + 2)  # the person's and the controller's
        assert_no_new_commit(app, host, before + 2)


def test_one_rollout_per_sync_trusts_only_the_entries_the_controller_wrote(
        server: ApiServer, api_client: ApiClient, replicasets: ReplicaSetPlayer) -> None:
    """A synced-sources entry someone else typed (here by kubectl, claiming the coming data) is
    not the controller's record: the change is reloaded as usual."""
    create(api_client, configmap("app-config", {"url": "v0"}))
    body = web()
    digest = syncs.record_digest(None)  # what the entry would need to hold while no variable is written
    body["metadata"]["annotations"][SYNCED_ANNOTATION] = (
        f"ConfigMap/app-config={configmap_hash({'url': 'v1'})}@{digest}")
    AppsV1Api(api_client).create_namespaced_deployment("ns", body, field_manager="kubectl-client-side-apply")
    with running_controller(api_client, [SHORT_WINDOW]) as app:
        rewrite(api_client, "v1")
        wait_for(lambda: env_of(workload(server, "Deployment", "web")).get(ENV)
                 == configmap_hash({"url": "v1"}), message="reloaded despite the typed entry")
        quiet(app)
        count_rs(replicasets, 2)
        assert metric(app, "reloads_synced_total", sink="env-vars") == 0
