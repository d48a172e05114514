"""``gitops-reloader status`` (and ``explain`` / ``plan`` on waves), end to end, during an incident.

A real controller (in process) runs with ``--max-concurrent-rollouts=1
--hold-on-failed-rollout`` on the API test server and a git remote on 127.0.0.1: one
Deployment on the git sink deployed by a Flux Kustomization (played by
:class:`engines.EnginePlayer`), three on the env-vars sink sharing the Secret ``db``. The
Deployment controller is played by :class:`DeploymentPlayer`, which fails the first rollout of
the Secret's change with ``ProgressDeadlineExceeded``. The CLI then reads the cluster through
a kubeconfig, as it would from a laptop, and must tell what is held, by whom, what rolled, and
where the git commit stands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from engines import EnginePlayer, complete_rollout
from git_setup import REPO, GitSetup
from kubernetes.client import ApiClient, AppsV1Api, CoreV1Api
from reload_helpers import create, secret
from test_git_follow import FOLLOW, TENANTS, change_config, flux_web
from test_git_sink import git_controller, git_workload, metric

from gitops_reloader import cli
from gitops_reloader.hashing import secret_hash
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import deployment, env_from_secret, wait_for
from gitops_reloader.testing.rollouts import DeploymentPlayer

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

BUDGET = ("--max-concurrent-rollouts=1", "--hold-on-failed-rollout")
FLEET = ("web-00", "web-01", "web-02")
ENV = "STAKATER_DB_SECRET"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str, expect: int = 0) -> str:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    assert code == expect, out.err
    return out.out


def status(capsys: pytest.CaptureFixture[str], kubeconfig: str, git: GitSetup, *more: str) -> str:
    return run_cli(capsys, "status", "--kubeconfig", kubeconfig, f"--git-config={git.config_path}",
                   *BUDGET, *FOLLOW, *more)


def status_json(capsys: pytest.CaptureFixture[str], kubeconfig: str, git: GitSetup) -> dict[str, Any]:
    return json.loads(status(capsys, kubeconfig, git, "-o", "json"))


def create_fleet(api_client: ApiClient) -> None:
    """Secret ``db`` and three Deployments recording its hash (reloaded before)."""
    created = create(api_client, secret("db", {"password": "0"}))
    container = {**env_from_secret("db"), "env": [{"name": ENV, "value": secret_hash(created["data"])}]}
    for name in FLEET:
        create(api_client, deployment(name, annotations={"secret.reloader.stakater.com/auto": "true"},
                                      containers=[container]))


def held_events(api_client: ApiClient) -> set[str]:
    listed = CoreV1Api(api_client).list_namespaced_event("ns", field_selector="reason=ReloadHeld")
    return {e.involved_object.name for e in listed.items}


def player_done(api_client: ApiClient, name: str) -> bool:
    """The player's last status write for the Deployment's generation is in (its rollout
    complete by the player's one replica)."""
    live = AppsV1Api(api_client).read_namespaced_deployment(name, "ns")
    status = live.status
    return bool(status and status.observed_generation == live.metadata.generation
                and status.replicas == status.updated_replicas == 1)


def change_of(report: dict[str, Any], source: str) -> dict[str, Any]:
    found = [c for c in report["changes"] if c["source"] == source]
    assert len(found) == 1, report["changes"]
    return found[0]


def test_status_explain_and_plan_during_a_held_wave_and_a_followed_git_commit(
        server: ApiServer, api_client: ApiClient, git: GitSetup, host: GitHostServer, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    engine = EnginePlayer(api_client, host, REPO, tmp_path)
    flux_web(api_client, git, engine)  # Deployment ns/web on the git sink, applied by Flux
    create_fleet(api_client)
    with git_controller(api_client, git, *FOLLOW, *BUDGET) as (app, _), DeploymentPlayer(
            api_client, complete_after=0.3, fail_after=0.1,
            fails=lambda name, generation: name == "web-00" and generation == 2) as player:
        wait_for(player.settled, message="the Deployment player's first status writes")
        # 1. A git commit pushed, not applied by the engine yet.
        sha = change_config(api_client, host)
        report = status_json(capsys, kubeconfig, git)
        commit, = report["commits"]
        assert (commit["repository"], commit["commit"], commit["stages"]) == (REPO, sha, {"pushed": 1})
        assert commit["workloads"][0]["workload"] == "ns/Deployment/web"
        assert commit["workloads"][0]["engine"] == "Kustomization flux-system/web"

        # 2. Flux applies it: the marker reaches the cluster and web's rollout (2 replicas, the
        # player writes 1) holds the budget of 1; the Secret changes meanwhile: its 3 reloads wait.
        engine.reconcile_kustomization("web", "apps/web")
        wait_for(lambda: player_done(api_client, "web"), message="web rolling, 1 of 2 replicas updated")
        CoreV1Api(api_client).patch_namespaced_secret("db", "ns", {"stringData": {"password": "bad"}})
        wait_for(lambda: metric(app, "rollouts", state="queued") == 3, message="three reloads waiting")
        report = status_json(capsys, kubeconfig, git)
        assert report["commits"][0]["stages"] == {"in-template": 1}
        assert report["budget"]["in_use"] == 1
        rolling, = change_of(report, "ns/ConfigMap/app-config")["workloads"]
        assert (rolling["workload"], rolling["state"], rolling["wave"]) == ("ns/Deployment/web", "rolling", 0)
        waiting = change_of(report, "ns/Secret/db")["workloads"]
        assert [(w["workload"], w["state"], w["wave"], w["reason"]) for w in waiting] == [
            (f"ns/Deployment/{n}", "waiting", wave, "WaitingForBudget") for wave, n in enumerate(FLEET, 1)]
        text = status(capsys, kubeconfig, git).splitlines()
        assert text[0] == "budget: 1 of 1 in use, holds on failed rollouts"
        assert "change ns/Secret/db@(secret: not shown): 3 waiting" in text
        assert "  waiting  ns/Deployment/web-02  wave 3" in text
        assert any(line.startswith("  rolling  ns/Deployment/web  wave 0, started ") for line in text)
        assert f"git commit {sha[:12]} ({REPO}): 1 in-template" in text
        explain = ("explain", "deployment/web-01", "-n", "ns", "--kubeconfig", kubeconfig, *BUDGET)
        waits, = json.loads(run_cli(capsys, *explain, "--output", "json"))["rollout"]["pending"]
        assert (waits["state"], waits["wave"], waits["held_by"]) == ("waiting", 2, [])
        assert ("  WAITING: ns/Secret/db@(secret: not shown) waits for the rollout budget "
                "(1 rolling in this namespace, wave 2 in this namespace)") in run_cli(capsys, *explain)

        # 3. web rolls out; web-00 rolls next (budget 1) and fails: web-01 and web-02 are held.
        complete_rollout(api_client, "web")
        wait_for(lambda: held_events(api_client) == {"web-01", "web-02"}, timeout=30,
                 message="ReloadHeld on the two reloads not started")

        report = json.loads(status(capsys, kubeconfig, git, "-A", "-o", "json"))  # -A: the default
        assert report["budget"]["max_concurrent"] == 1 and report["budget"]["hold"] is True
        assert report["budget"]["in_use"] == 0  # the failed rollout freed its slot
        change = change_of(report, "ns/Secret/db")
        assert change["change"] == "ns/Secret/db@(secret: not shown)"
        assert {k: v for k, v in change["counts"].items() if v} == {"failed": 1, "held": 2}
        failed, *held = change["workloads"]
        assert (failed["workload"], failed["state"], failed["reason"], failed["wave"]) == (
            "ns/Deployment/web-00", "failed", "ProgressDeadlineExceeded", 0)
        assert failed["since"] is not None
        assert [(h["workload"], h["state"], h["held_by"]) for h in held] == [
            ("ns/Deployment/web-01", "held", ["ns/Deployment/web-00"]),
            ("ns/Deployment/web-02", "held", ["ns/Deployment/web-00"])]
        assert all(h["since"] is not None and h["since"] >= failed["since"] - 1 for h in held)
        assert report["commits"][0]["commit"] == sha  # the git commit is still shown (recent)

        text = status(capsys, kubeconfig, git).splitlines()
        assert text[0] == "budget: 0 of 1 in use, holds on failed rollouts"
        assert "change ns/Secret/db@(secret: not shown): 1 failed, 2 held" in text
        assert any(line.startswith("  failed   ns/Deployment/web-00  [ProgressDeadlineExceeded] since ")
                   for line in text)
        assert sum(line.startswith("  held     ns/Deployment/web-0") and "held by ns/Deployment/web-00 since"
                   in line for line in text) == 2
        assert f"git commit {sha[:12]} ({REPO}): 1 rolled" in text
        assert "  rolled       ns/Deployment/web via Kustomization flux-system/web" in "\n".join(text)

        # -n narrows the census to a namespace the fleet is not in.
        other = json.loads(status(capsys, kubeconfig, git, "-n", "default", "-o", "json"))
        assert other["changes"] == [] and other["commits"] == []

        # explain on a held workload: held, by which failed rollout, since when.
        out = json.loads(run_cli(capsys, *explain, "--output", "json"))
        hold, = out["rollout"]["pending"]
        assert (hold["state"], hold["held_by"], hold["change"]) == (
            "held", ["ns/Deployment/web-00"], "ns/Secret/db@(secret: not shown)")
        assert hold["since"] is not None
        text = run_cli(capsys, *explain)
        assert ("  HELD: ns/Secret/db@(secret: not shown) is held by the failed rollout of "
                "ns/Deployment/web-00") in text

        # plan: the waves a change of the Secret would make with the budget flags.
        plan = json.loads(run_cli(capsys, "plan", "--secret", "ns/db", "--kubeconfig", kubeconfig, *BUDGET,
                                  "--output", "json", expect=1))
        assert {w["key"]: w["wave"] for w in plan["workloads"]} == {
            "ns/Deployment/web-00": 1, "ns/Deployment/web-01": 2, "ns/Deployment/web-02": 3}
        text = run_cli(capsys, "plan", "--secret", "ns/db", "--kubeconfig", kubeconfig, *BUDGET, expect=1)
        assert "ns/Deployment/web-02 [env-vars] would-write, wave 3" in text


def test_a_repository_that_cannot_be_read_is_named_once_without_its_token(
        server: ApiServer, api_client: ApiClient, git: GitSetup, host: GitHostServer, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    flux_web(api_client, git, EnginePlayer(api_client, host, REPO, tmp_path))
    create(api_client, git_workload("api"))  # a second git workload in the same repository
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-the-token-5f3a9\n")
    git.configure(token_file=wrong, extra=TENANTS)
    report = status_json(capsys, kubeconfig, git)
    assert report["commits"] == []
    assert len(report["notes"]) == 1 and report["notes"][0].startswith(
        f"repository {REPO} could not be read, its commits are not shown: ")
    text = status(capsys, kubeconfig, git)
    assert f"note: repository {REPO} could not be read" in text
    assert "not-the-token-5f3a9" not in text + json.dumps(report)
