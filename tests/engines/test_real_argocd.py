"""The live sinks and the git sink under the real Argo CD (issue 41): an Application with
automated sync and self-heal deploys the web Deployment from the git test server (HTTPS);
the real application-controller compares, syncs and reports health, the real Deployment
controller rolls the pods and kwok runs them.

What users rely on: a live reload (``annotations`` or ``env-vars`` sink) leaves the
Application Synced and Healthy, with the default diff and with server-side diff, and self-heal
does not revert it; a git-sink commit is synced by Argo CD and the follow loop says Applied.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from argocd import ArgoCd, app_status, application, repository, running_argocd, trust, wait_synced
from conftest import started
from controlplane import ControlPlane
from fleet import TOKEN, controller_flags, events_of, ready_pods, rolled, web_manifest
from kubernetes.client import ApiClient, AppsV1Api, CoreV1Api
from tls_certs import TlsFiles

from gitops_reloader import cli
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import running_controller, wait_for

pytestmark = [pytest.mark.engines, pytest.mark.xdist_group("engines"),
              pytest.mark.usefixtures("isolated_git")]

REPO = "org/apps"
TIMEOUT = 120.0


@pytest.fixture(scope="session")
def argo(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArgoCd]:
    yield from started(running_argocd(control_plane, tmp_path_factory.mktemp("argocd")))


def web_files(namespace: str, sink: str, **manifest: Any) -> dict[str, str]:
    """The apps repository holding the web Deployment (reloaded through ``sink``) in ``web/``."""
    return {"web/web.yaml": web_manifest(namespace, sink, **manifest)}


def deployed(argo: ArgoCd, api: ApiClient, namespace: str, githost: GitHostServer, tls: TlsFiles,
             files: dict[str, str], *, server: str, path: str = "web",
             server_side_diff: bool = False) -> tuple[str, set[str]]:
    """The apps repository holding ``files``, an Application for its ``path`` (named after
    ``namespace``), synced and healthy with two Ready pods; (the Application's name, the pods' names)."""
    githost.create_repo(REPO, files)
    CoreV1Api(api).create_namespaced_config_map(namespace, {"metadata": {"name": "web-config"},
                                                            "data": {"mode": "a"}})
    trust(argo, tls.ca_cert.read_text())
    repository(api, githost.repo_url(REPO), "git", TOKEN)
    name = namespace
    application(api, name, githost.repo_url(REPO), path, namespace, server,
                server_side_diff=server_side_diff)
    wait_synced(api, name, timeout=TIMEOUT)
    core = CoreV1Api(api)
    wait_for(lambda: len(ready_pods(core, namespace)) == 2, timeout=TIMEOUT, message="web's pods Ready")
    return name, {p.metadata.name for p in ready_pods(core, namespace)}


def explained(control_plane: ControlPlane, namespace: str,
              capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """``gitops-reloader explain deploy/web --output json`` against the real apiserver."""
    code = cli.main(["explain", "deploy/web", "-n", namespace, "--kubeconfig", str(control_plane.kubeconfig),
                     "--output", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def reconciled_after(api: ApiClient, name: str, since: str) -> dict[str, Any] | None:
    """The Application's status once Argo CD compared it again after ``since`` (its
    ``reconciledAt``, RFC 3339 seconds)."""
    status = app_status(api, name)
    return status if (status.get("reconciledAt") or "") > since else None


@pytest.mark.parametrize("server_side_diff", [False, True], ids=["default-diff", "server-side-diff"])
@pytest.mark.parametrize("sink", ["annotations", "env-vars"])
def test_real_argocd_live_reload_leaves_the_application_synced_and_is_not_reverted(
        argo: ArgoCd, control_plane: ControlPlane, real_client: ApiClient, namespace: str,
        githost: GitHostServer, tls: TlsFiles, tmp_path: Path, sink: str, server_side_diff: bool,
        capsys: pytest.CaptureFixture[str]) -> None:
    core, apps = CoreV1Api(real_client), AppsV1Api(real_client)
    name, first = deployed(argo, real_client, namespace, githost, tls, web_files(namespace, sink),
                           server=control_plane.url, server_side_diff=server_side_diff)
    assert explained(control_plane, namespace, capsys)["drift"] == ""  # what Argo CD's apply recorded
    with running_controller(real_client, [f"--namespaces={namespace}"],
                            environ={"HOME": str(tmp_path), "POD_NAMESPACE": namespace}):
        core.patch_namespaced_config_map("web-config", namespace, {"data": {"mode": "b"}})
        pods = wait_for(lambda: rolled(core, namespace, first), timeout=TIMEOUT,
                        message="the real Deployment controller rolled the pods")
        live = apps.read_namespaced_deployment("web", namespace)
        written, generation = live.spec.template, live.metadata.generation
        since = app_status(real_client, name).get("reconciledAt") or ""
        seen: list[str] = []

        def healthy_again() -> dict[str, Any] | None:
            """Each comparison after the reload; the first that finds the rollout Healthy (one
            made while the Deployment's status still counts the old ReplicaSet is Progressing)."""
            status = reconciled_after(real_client, name, since)
            if status is None:
                return None
            seen.append(status["sync"]["status"])
            return status if status["health"]["status"] == "Healthy" else None

        status = wait_for(healthy_again, timeout=TIMEOUT, interval=0.2,
                          message="Argo CD compared the Application again after the reload: Healthy")
    assert status["sync"]["status"] == "Synced" and set(seen) == {"Synced"}  # never drift, not once
    after = apps.read_namespaced_deployment("web", namespace)
    template = after.spec.template
    assert template == written and after.metadata.generation == generation  # self-heal reverted nothing
    if sink == "annotations":
        assert "reloader.stakater.com/last-reloaded-from" in (template.metadata.annotations or {})
    else:
        assert any(e.name == "STAKATER_WEB_CONFIG_CONFIGMAP" for e in template.spec.containers[0].env or ())
    sets = apps.list_namespaced_replica_set(namespace, label_selector="app=web").items
    assert sorted(rs.spec.replicas for rs in sets) == [0, 2] and len(pods) == 2


def test_real_argocd_syncs_the_git_sink_commit_and_the_follow_loop_reports_applied(
        argo: ArgoCd, control_plane: ControlPlane, real_client: ApiClient, namespace: str,
        githost: GitHostServer, tls: TlsFiles, tmp_path: Path) -> None:
    core = CoreV1Api(real_client)
    name, first = deployed(argo, real_client, namespace, githost, tls, web_files(namespace, "git"),
                           server=control_plane.url)
    with running_controller(real_client, controller_flags(tmp_path, githost, REPO, namespace),
                            environ={"HOME": str(tmp_path), "POD_NAMESPACE": namespace}):
        core.patch_namespaced_config_map("web-config", namespace, {"data": {"mode": "b"}})
        wait_for(lambda: len(githost.log(REPO)) == 2, timeout=TIMEOUT, message="the reload's commit")
        sha = githost.log(REPO)[0][0]
        wait_synced(real_client, name, revision=sha, timeout=TIMEOUT)
        wait_for(lambda: rolled(core, namespace, first), timeout=TIMEOUT, message="the pods rolled")
        applied = wait_for(lambda: events_of(core, namespace, "web", "Applied"),
                           timeout=TIMEOUT, message="the follow loop's Applied Event")
    assert applied[0].type == "Normal" and sha[:12] in applied[0].message


CHART = {
    "charts/web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    "charts/web/values.yaml": textwrap.dedent("""\
        # Values for the web chart.
        replicas: 2
        podAnnotations:
          team: platform
        """),
}


def chart_template(namespace: str) -> str:
    """The chart's Deployment: its pod annotations come from the values file the sink edits."""
    target = 'gitops-reloader.io/git-target: "charts/web/values.yaml#podAnnotations"'
    return web_manifest(namespace, "git", replicas="{{ .Values.replicas }}", annotations=(target,),
                        pod_annotations="{{- toYaml .Values.podAnnotations | nindent 8 }}")


def test_real_argocd_renders_the_helm_values_the_git_sink_changed_into_the_template(
        argo: ArgoCd, control_plane: ControlPlane, real_client: ApiClient, namespace: str,
        githost: GitHostServer, tls: TlsFiles, tmp_path: Path) -> None:
    """A Helm source: the sink writes the hash into values.yaml (``git-target``), the real
    repo-server renders it with helm into the pod template, Argo CD syncs, the pods roll."""
    core, apps = CoreV1Api(real_client), AppsV1Api(real_client)
    _, first = deployed(argo, real_client, namespace, githost, tls,
                        {**CHART, "charts/web/templates/deployment.yaml": chart_template(namespace)},
                        server=control_plane.url, path="charts/web")
    with running_controller(real_client, controller_flags(tmp_path, githost, REPO, namespace),
                            environ={"HOME": str(tmp_path), "POD_NAMESPACE": namespace}):
        core.patch_namespaced_config_map("web-config", namespace, {"data": {"mode": "b"}})
        wait_for(lambda: len(githost.log(REPO)) == 2, timeout=TIMEOUT, message="the reload's commit")
        sha = githost.log(REPO)[0][0]
        wait_synced(real_client, namespace, revision=sha, timeout=TIMEOUT)
        pods = wait_for(lambda: rolled(core, namespace, first), timeout=TIMEOUT, message="the pods rolled")
    annotations = apps.read_namespaced_deployment("web", namespace).spec.template.metadata.annotations
    assert annotations["team"] == "platform" and len(annotations["gitops-reloader.io/config-hash"]) == 64
    assert all(p.metadata.annotations["gitops-reloader.io/config-hash"] == annotations[
        "gitops-reloader.io/config-hash"] for p in pods)


def test_real_argocd_shows_drift_when_the_manifest_sets_an_empty_pod_annotations_map(
        argo: ArgoCd, control_plane: ControlPlane, real_client: ApiClient, namespace: str,
        githost: GitHostServer, tls: TlsFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What the real Argo CD says where it differs: a manifest whose pod template sets
    ``annotations: {}`` owns that map in the default (three-way) diff, so the ``annotations``
    sink's reload shows as OutOfSync (server-side diff does not). docs/troubleshooting.md says
    so, and ``explain`` says it before the reload, from what Argo CD's apply recorded."""
    core, apps = CoreV1Api(real_client), AppsV1Api(real_client)
    empty = web_files(namespace, "annotations", pod_annotations="{}")
    deployed(argo, real_client, namespace, githost, tls, empty, server=control_plane.url)
    said = explained(control_plane, namespace, capsys)
    assert said["sink"] == "annotations" and said["drift"].startswith(
        "Argo CD manages it (argocd.argoproj.io/tracking-id): its last apply set the pod template's")
    with running_controller(real_client, [f"--namespaces={namespace}"],
                            environ={"HOME": str(tmp_path), "POD_NAMESPACE": namespace}):
        core.patch_namespaced_config_map("web-config", namespace, {"data": {"mode": "b"}})
        wait_for(lambda: "reloader.stakater.com/last-reloaded-from" in (
            apps.read_namespaced_deployment("web", namespace).spec.template.metadata.annotations or {}),
            timeout=TIMEOUT, message="the reload written")
        status = wait_for(lambda: (s := app_status(real_client, namespace)).get("sync", {}).get("status")
                          == "OutOfSync" and s, timeout=TIMEOUT, message="Argo CD reports the drift")
        # Self-heal syncs the drift: a client-side apply of ``annotations: {}`` removes nothing
        # it never applied, so the reload stays and so does the drift.
        healed = wait_for(lambda: (app_status(real_client, namespace).get("operationState") or {}).get(
            "finishedAt"), timeout=TIMEOUT, message="self-heal's sync")
    template = apps.read_namespaced_deployment("web", namespace).spec.template
    assert "reloader.stakater.com/last-reloaded-from" in template.metadata.annotations
    after = app_status(real_client, namespace)
    assert healed and after["sync"]["status"] == "OutOfSync"
    assert [r["status"] for r in status["resources"] if r["kind"] == "Deployment"] == ["OutOfSync"]
