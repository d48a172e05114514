"""Issue 24: the git sink follows each pushed commit into the cluster and answers per workload.

A real git remote on 127.0.0.1, the API test server, the controller in-process (the
fixtures of ``test_git_sink.py``), and :class:`engines.EnginePlayer` playing Flux
(``kubectl kustomize`` / ``helm template``, applied as kustomize-controller /
helm-controller, their statuses written as they write them) and Argo CD.
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from engines import EnginePlayer, complete_rollout, template_hash
from git_setup import REPO, GitSetup
from kubernetes.client import ApiClient
from processes import Cluster, Controller, stop_process
from reload_helpers import call, configmap, create
from test_git_sink import (
    CONTROLLER_NS,
    assert_no_new_commit,
    commits,
    events,
    git_controller,
    metric,
    put_data,
    wait_commits,
    wait_event,
)
from test_pull_request_sink import REPO as PR_REPO
from test_pull_request_sink import PrSetup, pr_controller, wait_open_pull

from gitops_reloader import cli
from gitops_reloader.app import App
from gitops_reloader.control.follower import Followed
from gitops_reloader.gitops.refresh import FLUX_REQUESTED_AT_ANNOTATION
from gitops_reloader.model import ObjectRef
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import settle, wait_for
from gitops_reloader.testing.prhost import PrHost

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

FOLLOW = ("--git-follow-interval=200ms", "--git-apply-timeout=5m")
TENANTS = "    tenants: [{namespaces: [ns], paths: ['apps/**', 'envs/**']}]\n"

KUSTOMIZE_DEPLOYMENT = textwrap.dedent("""\
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: web
      namespace: ns
      annotations:
        gitops-reloader.io/sink: git
        configmap.reloader.stakater.com/reload: app-config
    spec:
      replicas: 2
      selector:
        matchLabels: {app: web}
      template:
        metadata:
          labels: {app: web}
          annotations:
            owner: team-web
        spec:
          containers:
            - name: app
              image: nginx
              envFrom:
                - configMapRef: {name: app-config}
    """)
KUSTOMIZE_FILES = {"apps/web/kustomization.yaml": "resources:\n  - deployment.yaml\n",
                   "apps/web/deployment.yaml": KUSTOMIZE_DEPLOYMENT}

CHART = {
    "charts/web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\nappVersion: '1.0'\n",
    "charts/web/templates/deployment.yaml": textwrap.dedent("""\
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: {{ .Release.Name }}
          namespace: {{ .Release.Namespace }}
          annotations:
            gitops-reloader.io/sink: git
            configmap.reloader.stakater.com/reload: app-config
            gitops-reloader.io/git-target: {{ .Values.gitTarget | quote }}
        spec:
          replicas: 1
          selector:
            matchLabels: {app: web}
          template:
            metadata:
              labels: {app: web}
              {{- with .Values.podAnnotations }}
              annotations:
                {{- toYaml . | nindent 10 }}
              {{- end }}
            spec:
              containers:
                - name: app
                  image: nginx
                  envFrom:
                    - configMapRef: {name: app-config}
        """),
}


def values(target: str) -> str:
    return textwrap.dedent(f"""\
        # Production values of the web chart.
        gitTarget: {target}
        podAnnotations:
          owner: team-web
        # Not used by the chart (a common mistake: the chart reads podAnnotations).
        annotations:
          team: web
        """)


@pytest.fixture
def player(api_client: ApiClient, host: GitHostServer, tmp_path: Path) -> EnginePlayer:
    return EnginePlayer(api_client, host, REPO, tmp_path)


def flux_web(api_client: ApiClient, git: GitSetup, player: EnginePlayer, *,
             suspend: bool = False) -> None:
    """The Deployment ns/web in a kustomize directory, applied once by the Kustomization flux-system/web."""
    git.create(KUSTOMIZE_FILES)
    git.configure(extra=TENANTS)
    create(api_client, configmap("app-config", {"url": "a"}))
    player.kustomization("web", "./apps/web", suspend=suspend)
    player.reconcile_kustomization("web", "apps/web")


def argo_web(api_client: ApiClient, git: GitSetup, player: EnginePlayer) -> None:
    """The Deployment ns/web as a plain file, synced once by the Application argocd/web."""
    git.create({"apps/web/deployment.yaml": KUSTOMIZE_DEPLOYMENT})
    git.configure(extra=TENANTS)
    create(api_client, configmap("app-config", {"url": "a"}))
    player.application("web", "apps/web")
    player.sync_application("web", "apps/web")


def change_config(api_client: ApiClient, host: GitHostServer) -> str:
    """Change the ConfigMap and wait for the git sink's commit; its sha."""
    before = len(commits(host))
    put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
    return wait_commits(host, before + 1)[0][0]


def explain_emission(capsys: pytest.CaptureFixture[str], server: ApiServer,
                     git: GitSetup) -> dict[str, Any]:
    """``gitops-reloader explain deployment/web``'s last emission (JSON)."""
    kubeconfig = str(server.write_kubeconfig(git.tmp / "kubeconfig"))
    code = cli.main(["explain", "deployment/web", "-n", "ns", "--kubeconfig", kubeconfig,
                     f"--git-config={git.config_path}", "--output", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)["manifest"]["emission"]


def metric_value(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(f"gitops_reloader_{name}", labels) or 0.0


def followed(app: App) -> Followed | None:
    """What the app's git sink follows (or last followed) for the Deployment ns/web."""
    follower = app.controller.sinks["git"].follower  # type: ignore[attr-defined]
    return follower.state_of(ObjectRef("Deployment", "ns", "web"))


def reasons(api_client: ApiClient, name: str = "web") -> list[str]:
    return [e["reason"] for e in events(api_client, name) if e["reason"] in ("Applied", "NotApplied",
                                                                              "RolloutFailed")]


def test_flux_kustomization_applied_and_rolled_reports_applied_with_the_time(
        api_client: ApiClient, git: GitSetup, host: GitHostServer,
        player: EnginePlayer) -> None:
    flux_web(api_client, git, player)
    with git_controller(api_client, git, *FOLLOW) as (app, _):
        sha = change_config(api_client, host)
        player.reconcile_kustomization("web", "apps/web")  # Flux applies the commit
        assert template_hash(api_client, "web") is not None
        assert wait_for(lambda: followed(app), timeout=20)
        complete_rollout(api_client, "web")  # the Deployment controller rolls it out
        event = wait_event(api_client, "web", "Applied")
        assert event["type"] == "Normal"
        assert f"commit {sha[:12]}" in event["message"] and "rolled out" in event["message"]
        assert metric(app, "change_to_rollout_seconds_count", sink="git") == 1.0
        assert metric(app, "git_follow_outcomes_total", sink="git", outcome="rolled", reason="") == 1.0
        settle(app)
        assert reasons(api_client) == ["Applied"]


def test_a_follow_round_reads_the_workload_from_the_cache_and_the_engine_once(
        server: ApiServer, api_client: ApiClient, git: GitSetup, host: GitHostServer,
        player: EnginePlayer) -> None:
    """Issue 28: a round GETs the engine, never the workload (the informer cache has it)."""
    flux_web(api_client, git, player)
    with git_controller(api_client, git, *FOLLOW) as (app, _):
        sha = change_config(api_client, host)
        player.reconcile_kustomization("web", "apps/web")  # applied: the template carries the digest
        assert wait_for(lambda: (entry := followed(app)) is not None and entry.commit == sha
                        and entry.state.stage.value == "in-template", timeout=20)
        server.reset_request_counts()
        wait_for(lambda: server.request_counts().get(("get", "kustomizations"), 0) >= 3, timeout=20,
                 message="three follow rounds")
        counts = server.request_counts()
        assert counts.get(("get", "deployments"), 0) == 0, counts
        assert followed(app).state.stage.value == "in-template"  # still rolling, read from the cache
        complete_rollout(api_client, "web")  # the cache sees the rollout end: Applied
        event = wait_event(api_client, "web", "Applied")
        assert f"commit {sha[:12]}" in event["message"]


@pytest.mark.parametrize(("target", "reason"), [
    ("envs/prod/values.yaml#annotations", "NotApplied"),
    ("envs/prod/values.yaml#podAnnotations", "Applied"),
])
def test_helm_values_key_the_chart_does_not_render_is_not_applied_naming_the_target(
        server: ApiServer, capsys: pytest.CaptureFixture[str], api_client: ApiClient,
        git: GitSetup, host: GitHostServer, player: EnginePlayer,
        target: str, reason: str) -> None:
    git.create({**CHART, "envs/prod/values.yaml": values(target)})
    git.configure(extra=TENANTS)
    create(api_client, configmap("app-config", {"url": "a"}))
    player.helm_release("web")
    player.reconcile_helm_release("web", "charts/web", "envs/prod/values.yaml")
    # A long timeout: a wrong target is reported when the engine reports the commit applied, not at it.
    with git_controller(api_client, git, FOLLOW[0], "--git-apply-timeout=10m") as (app, _):
        sha = change_config(api_client, host)
        player.reconcile_helm_release("web", "charts/web", "envs/prod/values.yaml")
        if reason == "Applied":
            wait_for(lambda: template_hash(api_client, "web"), timeout=10)
            complete_rollout(api_client, "web")
        event = wait_event(api_client, "web", reason)
        assert f"commit {sha[:12]}" in event["message"]
        if reason == "NotApplied":
            assert event["type"] == "Warning"
            assert f"{REPO}:{target}" in event["message"]
            assert "not rendered into the pod template" in event["message"]
            assert "HelmRelease ns/web" in event["message"]
            assert metric(app, "git_follow_outcomes_total", sink="git", outcome="not-applied",
                          reason="TargetNotRendered") == 1.0
        assert reasons(api_client) == [reason]
        emission = explain_emission(capsys, server, git)
        assert emission["commit"] == sha and emission["engine"] == "HelmRelease ns/web"
        assert (emission["stage"], emission["reason"]) == (
            ("rolled", "") if reason == "Applied" else ("not-applied", "TargetNotRendered"))


def test_suspended_kustomization_is_not_applied_with_that_reason(
        api_client: ApiClient, git: GitSetup, host: GitHostServer,
        player: EnginePlayer) -> None:
    flux_web(api_client, git, player, suspend=True)  # applied once, then suspended
    with git_controller(api_client, git, *FOLLOW):
        sha = change_config(api_client, host)
        event = wait_event(api_client, "web", "NotApplied")
        assert f"commit {sha[:12]}" in event["message"]
        assert "Suspended" in event["message"]
        assert "Kustomization flux-system/web is suspended" in event["message"]


def test_a_failed_flux_apply_that_flux_retries_is_followed_until_it_is_applied(
        api_client: ApiClient, git: GitSetup, host: GitHostServer, player: EnginePlayer) -> None:
    """kustomize-controller keeps ``Reconciling`` (``ProgressingWithRetry``) after a failed
    attempt and tries again: not the end of the emission (the real Flux showed one such
    transient failure in the engines tier). A stalled one is (next test)."""
    flux_web(api_client, git, player)
    with git_controller(api_client, git, *FOLLOW) as (app, _):
        sha = change_config(api_client, host)
        player.fail_kustomization("web", "kustomize build failed: must build at directory")
        retrying = wait_for(lambda: (entry := followed(app)) is not None
                            and "retries it" in entry.state.message and entry.state,
                            timeout=20, message="the follow-up sees Flux retrying")
        assert retrying.stage.value == "pushed" and not retrying.done
        assert f"failed to apply {sha[:12]}: BuildFailed: kustomize build failed" in retrying.message
        player.reconcile_kustomization("web", "apps/web")  # Flux's retry succeeds
        complete_rollout(api_client, "web")
        event = wait_event(api_client, "web", "Applied")
        assert f"commit {sha[:12]}" in event["message"]
        settle(app)
        assert reasons(api_client) == ["Applied"]


def test_a_failed_flux_apply_flux_stalled_on_is_reported_at_once(
        api_client: ApiClient, git: GitSetup, host: GitHostServer, player: EnginePlayer) -> None:
    flux_web(api_client, git, player)
    with git_controller(api_client, git, *FOLLOW):
        sha = change_config(api_client, host)
        player.fail_kustomization("web", "invalid expression", stalled=True)
        event = wait_event(api_client, "web", "NotApplied")
        assert f"commit {sha[:12]}" in event["message"] and "SyncFailed" in event["message"]
        assert "Kustomization flux-system/web failed to apply" in event["message"]


@pytest.mark.parametrize("fail", ["", "one or more objects failed to apply: admission denied"])
def test_argocd_sync_applied_and_rolled_or_failed_with_its_message(
        api_client: ApiClient, git: GitSetup, host: GitHostServer,
        player: EnginePlayer, fail: str) -> None:
    argo_web(api_client, git, player)
    with git_controller(api_client, git, *FOLLOW):
        sha = change_config(api_client, host)
        player.sync_application("web", "apps/web", fail=fail)
        if not fail:
            complete_rollout(api_client, "web")
        event = wait_event(api_client, "web", "NotApplied" if fail else "Applied")
        assert f"commit {sha[:12]}" in event["message"]
        if fail:
            assert "SyncFailed" in event["message"] and "admission denied" in event["message"]
            assert "Application argocd/web failed to apply" in event["message"]


def test_nothing_applied_is_reported_after_the_timeout(
        api_client: ApiClient, git: GitSetup, host: GitHostServer,
        player: EnginePlayer) -> None:
    flux_web(api_client, git, player)
    with git_controller(api_client, git, FOLLOW[0], "--git-apply-timeout=2s") as (app, _):
        sha = change_config(api_client, host)  # Flux never reconciles it
        event = wait_event(api_client, "web", "NotApplied")
        assert f"commit {sha[:12]}" in event["message"] and "Timeout" in event["message"]
        assert "Kustomization flux-system/web did not apply the commit within 2s" in event["message"]
        assert metric(app, "git_follow_outcomes_total", sink="git", outcome="not-applied",
                      reason="Timeout") == 1


def test_controller_killed_while_following_reports_once_and_commits_nothing_twice(
        server: ApiServer, api_client: ApiClient, git: GitSetup, host: GitHostServer,
        player: EnginePlayer) -> None:
    flux_web(api_client, git, player)
    kubeconfig = str(server.write_kubeconfig(git.tmp / "kubeconfig"))
    first = Controller(Cluster("", kubeconfig, api_client, httpx.Client()), git.tmp / "first.log",
                       flags=git.flags(*FOLLOW, f"--lease-namespace={CONTROLLER_NS}"))  # the same digest key
    try:
        wait_for(lambda: any(r["msg"] == "caches synced" for r in first.log()), timeout=30,
                 message="first instance running")
        sha = change_config(api_client, host)
        pushed = time.time()
        wait_for(lambda: any(r["msg"] == "following emission" for r in first.log()), timeout=20,
                 message="first instance following the commit")
        os.kill(first.pid, signal.SIGKILL)  # killed while following: nothing reported yet
        first.proc.wait(10)
    finally:
        stop_process(first.proc)
    assert reasons(api_client) == []
    # Flux and the rollout go on while no controller runs.
    count = len(commits(host))
    player.reconcile_kustomization("web", "apps/web")
    complete_rollout(api_client, "web")
    for _ in range(2):  # the new instance, and one more restart after it reported
        with git_controller(api_client, git, *FOLLOW, "--sync-after-restart") as (app, _):
            event = wait_event(api_client, "web", "Applied")
            assert f"commit {sha[:12]}" in event["message"]
            settle(app)
            wait_for(lambda: followed(app).state.done, timeout=20)
        assert reasons(api_client) == ["Applied"]
        assert len(commits(host)) == count
    # Events expire (1 h); a commit older than --git-apply-timeout is not followed again at all.
    for event in events(api_client, "web"):
        call(api_client, "DELETE", f"/api/v1/namespaces/ns/events/{event['metadata']['name']}")
    wait_for(lambda: time.time() - pushed > 1.5, timeout=5, message="the commit older than the timeout")
    with git_controller(api_client, git, FOLLOW[0], "--git-apply-timeout=1s",
                        "--sync-after-restart") as (app, _):
        settle(app)
        assert followed(app) is None
    assert reasons(api_client) == [] and len(commits(host)) == count


# --------------------------------------------------------------------------- pull requests


@pytest.fixture
def pr_setup(tmp_path: Path, githost: GitHostServer, prhost: PrHost) -> PrSetup:
    return PrSetup(tmp_path, githost, prhost, "github")


def requested_at(api_client: ApiClient, flux: EnginePlayer) -> tuple[str | None, str | None]:
    """The ``reconcile.fluxcd.io/requestedAt`` of the player's GitRepository and of its
    Kustomization ``web``."""
    found = []
    for path in (f"/apis/source.toolkit.fluxcd.io/v1/namespaces/flux-system/gitrepositories/{flux.source}",
                 "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations/web"):
        annotations = call(api_client, "GET", path)["metadata"].get("annotations") or {}
        found.append(annotations.get(FLUX_REQUESTED_AT_ANNOTATION))
    return found[0], found[1]


def test_pull_request_waits_for_its_merge_then_follows_the_merge_into_the_cluster(
        api_client: ApiClient, pr_setup: PrSetup, githost: GitHostServer, prhost: PrHost,
        tmp_path: Path) -> None:
    manifest = KUSTOMIZE_DEPLOYMENT.replace("sink: git", "sink: pull-request")
    pr_setup.create({**KUSTOMIZE_FILES, "apps/web/deployment.yaml": manifest})
    pr_setup.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    flux = EnginePlayer(api_client, githost, PR_REPO, tmp_path)
    flux.kustomization("web", "./apps/web")
    flux.reconcile_kustomization("web", "apps/web")
    with pr_controller(api_client, pr_setup, *FOLLOW) as (_, sink):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        pull = wait_open_pull(prhost)
        assert sink.follower is not None
        ref = ObjectRef("Deployment", "ns", "web")
        waiting = wait_for(lambda: (entry := sink.follower.state_of(ref)) and entry.state.stage.value
                           == "waiting-for-merge" and entry.state, timeout=20)
        assert "pull request open for" in waiting.message
        assert reasons(api_client) == []  # people decide: no timeout while the pull request is open
        assert requested_at(api_client, flux) == (None, None)  # an open pull request deploys nothing
        merged = prhost.merge(PR_REPO, pull["number"])
        # The round that sees the merge asks Flux to reconcile now, as the git sink does after a push.
        wait_for(lambda: None not in requested_at(api_client, flux), timeout=20,
                 message="requestedAt on the GitRepository and the Kustomization after the merge")
        flux.reconcile_kustomization("web", "apps/web")
        complete_rollout(api_client, "web")
        event = wait_event(api_client, "web", "Applied")
        assert f"commit {merged[:12]}" in event["message"]
        assert metric_value(sink.metrics, "change_to_rollout_seconds_count", sink="pull-request") == 1.0


# --------------------------------------------------------------------------- waves through git

WAVE_NAMES = [f"web-{i:02d}" for i in range(12)]


def wave_files() -> dict[str, str]:
    """Twelve Deployments on one ConfigMap, one file each, applied by one Kustomization."""
    files = {f"apps/{name}.yaml": KUSTOMIZE_DEPLOYMENT.replace("name: web\n", f"name: {name}\n")
             .replace("{app: web}", f"{{app: {name}}}") for name in WAVE_NAMES}
    files["apps/kustomization.yaml"] = "resources:\n" + "".join(f"  - {name}.yaml\n" for name in WAVE_NAMES)
    return files


def committed(host: GitHostServer, sha: str) -> set[str]:
    """The workloads whose config-hash changed in commit ``sha``."""
    changed = set()
    for name in WAVE_NAMES:
        now, before = (host.read_file(REPO, f"apps/{name}.yaml", ref) or b"" for ref in (sha, f"{sha}~1"))
        if hash_of(now) != hash_of(before):
            changed.add(name)
    return changed


def hash_of(text: bytes) -> str | None:
    for line in text.decode().splitlines():
        if "gitops-reloader.io/config-hash:" in line:
            return line.split(":", 1)[1].strip()
    return None


def assert_no_commit_while_rolling(host: GitHostServer, count: int) -> None:
    """The budget is full: no next wave is committed (parked reloads keep the controller busy,
    so there is no idle state to wait for; a wave's commit follows its grant within 0.1 s)."""
    time.sleep(2.0)
    assert len(commits(host)) == count, [s for _, s in commits(host)]


@pytest.fixture
def waves_setup(api_client: ApiClient, git: GitSetup, player: EnginePlayer) -> None:
    git.create(wave_files())
    git.configure(extra=TENANTS)
    create(api_client, configmap("app-config", {"url": "a"}))
    player.kustomization("apps", "./apps")
    player.reconcile_kustomization("apps", "apps")


WAVES = ("--max-concurrent-rollouts=3", "--rollout-timeout=5m", *FOLLOW)


def test_git_waves_commit_one_wave_per_completed_budget(
        api_client: ApiClient, git: GitSetup, host: GitHostServer, player: EnginePlayer,
        waves_setup: None) -> None:
    with git_controller(api_client, git, *WAVES) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        waves: list[set[str]] = []
        for number in range(1, 5):
            log = wait_commits(host, 1 + number)
            assert len(log) == 1 + number
            waves.append(committed(host, log[0][0]))
            assert len(waves[-1]) == 3, waves
            player.reconcile_kustomization("apps", "apps")  # Flux applies the wave's commit
            if number < 4:
                assert_no_commit_while_rolling(host, 1 + number)  # its rollouts are not complete yet
            for name in sorted(waves[-1]):
                complete_rollout(api_client, name)
        assert waves == [set(WAVE_NAMES[i:i + 3]) for i in range(0, 12, 3)]  # priority, then name
        for name in WAVE_NAMES:
            wait_event(api_client, name, "Applied")
        assert_no_new_commit(app, host, 5)


def test_git_waves_a_failed_rollout_holds_the_rest_until_a_new_change(
        api_client: ApiClient, git: GitSetup, host: GitHostServer, player: EnginePlayer,
        waves_setup: None) -> None:
    with git_controller(api_client, git, *WAVES) as _:
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        player.reconcile_kustomization("apps", "apps")
        for name in WAVE_NAMES[:3]:
            complete_rollout(api_client, name)
        wait_commits(host, 3)
        player.reconcile_kustomization("apps", "apps")
        complete_rollout(api_client, "web-03", fail=True)  # ProgressDeadlineExceeded
        for name in WAVE_NAMES[4:6]:
            complete_rollout(api_client, name)
        wait_event(api_client, "web-03", "RolloutFailed")
        for name in WAVE_NAMES[6:]:
            event = wait_event(api_client, name, "ReloadHeld")
            assert "ns/Deployment/web-03" in event["message"]
        assert_no_commit_while_rolling(host, 3)
        assert {hash_of(host.read_file(REPO, f"apps/{n}.yaml") or b"") for n in WAVE_NAMES[6:]} == {None}

        put_data(api_client, "ConfigMap", "app-config", {"url": "c"})  # the fix releases them
        log = wait_commits(host, 4)
        assert len(committed(host, log[0][0])) == 3
        player.reconcile_kustomization("apps", "apps")
        for name in sorted(committed(host, log[0][0])):
            complete_rollout(api_client, name)
        wait_commits(host, 5)
