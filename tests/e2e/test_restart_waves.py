"""Issue 28, across restarts: waves and the git follow-up continue after a SIGKILL, without flags.

One real controller process runs a git wave (six Deployments of one ConfigMap, one manifest
each, applied by a Flux Kustomization) and a live wave (six Deployments of one Secret,
``env-vars`` sink) at once, with two rollouts per namespace at most. It is SIGKILLed with the
git wave's first commit pushed but not applied yet and the live wave's first rollouts under
way, and restarted **without** ``--sync-after-restart`` and without HA. The new process reads
what was under way from the cluster (markers, statuses) and the repository (committed
digests and markers): the engine (played by :class:`engines.EnginePlayer`) applies each
commit, the Deployment controller (:class:`DeploymentPlayer`, one per namespace) rolls it out,
and every workload rolls exactly once, never more than two at a time per namespace, with one
``Applied`` Event per git workload and no commit twice. A change made while no controller ran
is left alone, as Stakater leaves it without ``--sync-after-restart``.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest
from engines import EnginePlayer, complete_rollout
from git_setup import REPO, GitSetup
from kubernetes.client import ApiClient, CoreV1Api
from processes import Cluster, Controller, running_cluster, stop_process
from reload_helpers import call, configmap, create, env_of, secret
from test_git_follow import (
    FOLLOW,
    KUSTOMIZE_DEPLOYMENT,
    KUSTOMIZE_FILES,
    TENANTS,
    change_config,
    flux_web,
    hash_of,
)
from test_git_sink import CONTROLLER_NS, commits, events, put_data
from test_pull_request_sink import REPO as PR_REPO
from test_pull_request_sink import PrSetup, pulls, wait_open_pull
from test_rollout_waves import change_secret, create_fleet, hashes, names

from gitops_reloader.durations import parse_rfc3339
from gitops_reloader.hashing import configmap_hash, secret_hash
from gitops_reloader.rollout.marker import MARKER_ANNOTATION
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import deployment, env_from_secret, wait_for
from gitops_reloader.testing.prhost import PrHost
from gitops_reloader.testing.rollouts import DeploymentPlayer

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

GIT = [f"web-{i:02d}" for i in range(6)]
LIVE = [f"api-{i:02d}" for i in range(6)]
ENV = "STAKATER_DB_SECRET"
BUDGET = ("--max-concurrent-rollouts=4", "--max-concurrent-rollouts-per-namespace=2", "--rollout-timeout=5m",
          "--git-follow-interval=200ms", "--git-apply-timeout=5m", f"--lease-namespace={CONTROLLER_NS}")


def git_fleet(api_client: ApiClient, git: GitSetup, flux: EnginePlayer) -> None:
    """Six git-sink Deployments in ``ns`` on ConfigMap app-config, applied once by Flux."""
    files = {f"apps/{name}.yaml": KUSTOMIZE_DEPLOYMENT.replace("name: web\n", f"name: {name}\n")
             .replace("replicas: 2", "replicas: 1")  # as DeploymentPlayer reports them
             .replace("{app: web}", f"{{app: {name}}}") for name in GIT}
    files["apps/kustomization.yaml"] = "resources:\n" + "".join(f"  - {name}.yaml\n" for name in GIT)
    git.create(files)
    git.configure(extra=TENANTS)
    create(api_client, configmap("app-config", {"url": "a"}))
    flux.kustomization("apps", "./apps")
    flux.reconcile_kustomization("apps", "apps")


def live_fleet(api_client: ApiClient) -> None:
    """Six env-vars Deployments in ``live`` on Secret db, each already recording its hash; and a
    bystander on ConfigMap side (recorded too) whose change comes while no controller runs."""
    db = create(api_client, secret("db", {"password": "0"}, namespace="live"))
    container = {**env_from_secret("db"), "env": [{"name": ENV, "value": secret_hash(db["data"])}]}
    for name in LIVE:
        create(api_client, deployment(name, namespace="live", containers=[container],
                                      annotations={"secret.reloader.stakater.com/auto": "true"}))
    side = create(api_client, configmap("side", {"v": "0"}, namespace="live"))
    create(api_client, deployment("bystander", namespace="live", annotations={
        "configmap.reloader.stakater.com/reload": "side"}, containers=[{
            "name": "app", "image": "nginx", "env": [{"name": "STAKATER_SIDE_CONFIGMAP",
                                                      "value": configmap_hash(side["data"])}]}]))


class Flux:
    """kustomize-controller for the Kustomization flux-system/apps: applies each new tip once."""

    def __init__(self, player: EnginePlayer, host: GitHostServer) -> None:
        self.player = player
        self.host = host
        self.applied = commits(host)[0][0]

    def reconcile(self) -> bool:
        """Apply the tip if it is new (called while waiting, as Flux's interval would)."""
        tip = commits(self.host)[0][0]
        if tip != self.applied:
            self.applied = self.player.reconcile_kustomization("apps", "apps")
        return True


def changed_in(host: GitHostServer, sha: str) -> set[str]:
    """The git workloads whose config-hash commit ``sha`` changed."""
    return {name for name in GIT if hash_of(host.read_file(REPO, f"apps/{name}.yaml", sha) or b"")
            != hash_of(host.read_file(REPO, f"apps/{name}.yaml", f"{sha}~1") or b"")}


def reasons(api_client: ApiClient, name: str, namespace: str, wanted: tuple[str, ...]) -> list[str]:
    return [e["reason"] for e in events(api_client, name, namespace) if e["reason"] in wanted]


def created_at(api_client: ApiClient, namespace: str, name: str) -> float:
    """Deployment ``name``'s creationTimestamp, Unix seconds."""
    stamp = parse_rfc3339(call(api_client, "GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")[
        "metadata"]["creationTimestamp"])
    assert stamp is not None
    return stamp


def live(api_client: ApiClient, name: str) -> dict:
    return call(api_client, "GET", f"/apis/apps/v1/namespaces/live/deployments/{name}")


def resumed_record(controller: Controller) -> dict | None:
    return next((r for r in controller.log() if r["msg"] == "resuming after restart"), None)


def test_killed_mid_git_wave_and_mid_live_wave_restarted_without_flags_finishes_both_once(
        server: ApiServer, api_client: ApiClient, git: GitSetup, host: GitHostServer, tmp_path: Path) -> None:
    flux_player = EnginePlayer(api_client, host, REPO, tmp_path)
    git_fleet(api_client, git, flux_player)
    live_fleet(api_client)
    flux = Flux(flux_player, host)
    cluster = Cluster("", str(server.write_kubeconfig(tmp_path / "kubeconfig")), api_client, httpx.Client())
    flags = git.flags(*BUDGET)
    assert "--sync-after-restart" not in flags
    with DeploymentPlayer(api_client, "ns", complete_after=0.5) as git_rollouts, \
            DeploymentPlayer(api_client, "live", complete_after=2.0) as live_rollouts:
        first = Controller(cluster, tmp_path / "first.jsonl", flags)
        second: Controller | None = None
        try:
            first.wait_ready(cluster.http)
            # Creation times are whole seconds: a workload created in the second its change was
            # first written may run the new data already, and the resumer leaves it to the ledger
            # record. The change comes a second after the newest workload, as it would in life.
            newest = max(created_at(api_client, "ns", n) for n in GIT)
            wait_for(lambda: time.time() >= newest + 1, timeout=5, message="a second past the creation")
            put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
            v1 = secret_hash(CoreV1Api(api_client).patch_namespaced_secret(
                "db", "live", {"stringData": {"password": "1"}}).data)
            wait_for(lambda: len(commits(host)) >= 2 and len(live_rollouts.started) >= 2, timeout=30,
                     message="the git wave's first commit pushed and the live wave's first rollouts started")
            os.kill(first.pid, signal.SIGKILL)
            first.proc.wait(10)
            given = sum(env_of(live(api_client, n)).get(ENV) == v1 for n in LIVE)  # written before the kill
            assert len(commits(host)) == 2 and flux.applied == commits(host)[1][0]  # wave 1 not applied
            first_wave = changed_in(host, commits(host)[0][0])
            assert len(first_wave) == 2
            assert 2 <= given < len(LIVE), "the kill came too late to be mid-wave"
            # While no controller runs: a change the restart must leave alone (no --sync-after-restart).
            put_data(api_client, "ConfigMap", "side", {"v": "1"}, namespace="live")

            second = Controller(cluster, tmp_path / "second.jsonl", flags)
            second.wait_ready(cluster.http)
            record = wait_for(lambda: resumed_record(second), timeout=30, message="the restart resumed")
            assert record["rollouts_restored"] == 2  # git wave 1: committed, not in the cluster yet
            assert record["git_follow_ups"] >= 2
            assert record["workloads_waiting"] == len(GIT) - 2 + len(LIVE) - given
            # The live wave finishes while Flux has not applied git wave 1: that commit's two
            # rollouts count from the repository's markers, so no second git wave is committed.
            wait_for(lambda: all(env_of(live(api_client, n)).get(ENV) == v1 for n in LIVE)
                     and live_rollouts.settled(), timeout=60, message="the live wave finished")
            rolling = 'gitops_reloader_rollouts{state="rolling"}'
            wait_for(lambda: second.sample(cluster.http, rolling) == 2, timeout=20,
                     message="git wave 1 counted as rolling")
            assert second.metric(cluster.http, 'gitops_reloader_rollouts{state="queued"}') == len(GIT) - 2
            assert len(commits(host)) == 2 and not git_rollouts.started

            def finished() -> bool:
                return (all("Applied" in reasons(api_client, n, "ns", ("Applied",)) for n in GIT)
                        and all(env_of(live(api_client, n)).get(ENV) == v1 for n in LIVE)
                        and git_rollouts.settled() and live_rollouts.settled())

            wait_for(lambda: flux.reconcile() and finished(), timeout=90,
                     message="every workload of both waves rolled out")

            # Each workload rolled exactly once, never more than two at a time in a namespace.
            assert git_rollouts.started == {name: [2] for name in GIT}
            assert live_rollouts.started == {name: [2] for name in LIVE}
            assert git_rollouts.peak == 2 and live_rollouts.peak == 2
            # Git: each workload's digest changed in exactly one commit, of at most two workloads;
            # one Applied per workload, naming that commit.
            waves = [changed_in(host, sha) for sha, _ in commits(host)[:-1]]
            assert all(1 <= len(wave) <= 2 for wave in waves), waves
            assert sorted(n for wave in waves for n in wave) == GIT
            assert waves[-1] == first_wave
            for name in GIT:
                sha = next(sha for sha, _ in commits(host)[:-1] if name in changed_in(host, sha))
                applied = [e for e in events(api_client, name, "ns") if e["reason"] == "Applied"]
                assert len(applied) == 1 and f"commit {sha[:12]}" in applied[0]["message"], applied
                assert reasons(api_client, name, "ns", ("RolloutFailed", "NotApplied", "ReloadHeld")) == []
                assert MARKER_ANNOTATION in (host.read_file(REPO, f"apps/{name}.yaml") or b"").decode()
            for name in LIVE:
                assert live(api_client, name)["metadata"]["generation"] == 2
                assert reasons(api_client, name, "live", ("RolloutFailed", "ReloadHeld")) == []
            # The change made while no controller ran was not reloaded.
            bystander = live(api_client, "bystander")
            assert bystander["metadata"]["generation"] == 1
            assert wait_for(lambda: second.sample(cluster.http, rolling) == 0, timeout=20,
                            message="nothing rolling any more")
            count = len(commits(host))
            assert second.metric(cluster.http, 'gitops_reloader_rollouts{state="queued"}') == 0
            assert len(commits(host)) == count
        finally:
            stop_process(first.proc)
            if second is not None:
                stop_process(second.proc)
            cluster.http.close()


def event_count(api_client: ApiClient, name: str, reason: str) -> int:
    return len(reasons(api_client, name, "ns", (reason,)))


def test_a_hold_in_force_survives_a_restart_without_flags_and_is_announced_once(tmp_path: Path) -> None:
    """web-00's rollout of the bad Secret fails and holds the rest of its change; the controller
    is SIGKILLed and restarted without --sync-after-restart: the hold is derived again from the
    cluster (marker and status), nothing is reloaded and nothing announced a second time; the
    fix then reaches every Deployment in waves, each held one rolled once."""
    flags = ("--coalesce-window=0", "--max-concurrent-rollouts=2")
    fleet = names(8)
    with running_cluster(tmp_path) as cluster, DeploymentPlayer(
            cluster.api_client, complete_after=0.6, fail_after=0.2,
            fails=lambda name, generation: name == "web-00" and generation == 2) as player:
        create_fleet(cluster.api_client, 8)
        first = Controller(cluster, tmp_path / "first.jsonl", flags)
        second: Controller | None = None
        try:
            first.wait_ready(cluster.http)
            v1 = change_secret(cluster.api_client, "bad")
            wait_for(lambda: event_count(cluster.api_client, "web-00", "RolloutFailed") == 1, timeout=30,
                     message="RolloutFailed on web-00")
            reloaded = {n for n, h in hashes(cluster, 8).items() if h == v1}
            held = set(fleet) - reloaded
            wait_for(lambda: all(event_count(cluster.api_client, n, "ReloadHeld") == 1 for n in held),
                     timeout=30, message="ReloadHeld on every reload not started")
            wait_for(lambda: player.settled(), timeout=30, message="the other first rollouts done")
            os.kill(first.pid, signal.SIGKILL)
            first.proc.wait(10)

            second = Controller(cluster, tmp_path / "second.jsonl", flags)
            second.wait_ready(cluster.http)
            record = wait_for(lambda: resumed_record(second), timeout=30, message="the restart resumed")
            assert record["workloads_waiting"] == len(held)
            held_metric = 'gitops_reloader_rollouts{state="held"}'
            wait_for(lambda: second.sample(cluster.http, held_metric) == len(held), timeout=30,
                     message="the resumed reloads held again")
            assert {n for n, h in hashes(cluster, 8).items() if h == v1} == reloaded
            assert event_count(cluster.api_client, "web-00", "RolloutFailed") == 1
            assert all(event_count(cluster.api_client, n, "ReloadHeld") == 1 for n in held)

            v2 = change_secret(cluster.api_client, "fixed")
            wait_for(lambda: set(hashes(cluster, 8).values()) == {v2} and player.settled(), timeout=60,
                     message="the fix reaches every Deployment")
            assert player.peak <= 2
            assert all(player.started[name] == [2] for name in held)  # never given the bad value
            assert player.started["web-00"] == [2, 3]
            assert event_count(cluster.api_client, "web-00", "RolloutFailed") == 1
        finally:
            stop_process(first.proc)
            if second is not None:
                stop_process(second.proc)


def ended_follow_up(controller: Controller) -> dict | None:
    return next((r for r in controller.log() if r["msg"] == "followed emission ended"), None)


def test_killed_while_following_a_commit_restarted_without_flags_reports_applied_once(
        server: ApiServer, api_client: ApiClient, git: GitSetup, host: GitHostServer, tmp_path: Path) -> None:
    """No budget, no flag: the follow-up of a pushed commit is found again from the repository;
    Flux and the rollout finish while no controller runs; the next instance reports Applied,
    the one after it finds that Event and reports nothing; no commit is made again."""
    player = EnginePlayer(api_client, host, REPO, tmp_path)
    flux_web(api_client, git, player)
    cluster = Cluster("", str(server.write_kubeconfig(tmp_path / "kubeconfig")), api_client, httpx.Client())
    flags = git.flags(*FOLLOW, f"--lease-namespace={CONTROLLER_NS}")
    first = Controller(cluster, tmp_path / "first.jsonl", flags)
    try:
        first.wait_ready(cluster.http)
        sha = change_config(api_client, host)
        wait_for(lambda: any(r["msg"] == "following emission" for r in first.log()), timeout=20,
                 message="the first instance following the commit")
        os.kill(first.pid, signal.SIGKILL)
        first.proc.wait(10)
    finally:
        stop_process(first.proc)
    assert reasons(api_client, "web", "ns", ("Applied", "NotApplied")) == []
    player.reconcile_kustomization("web", "apps/web")
    complete_rollout(api_client, "web")
    count = len(commits(host))
    for name in ("second", "third"):
        again = Controller(cluster, tmp_path / f"{name}.jsonl", flags)
        try:
            again.wait_ready(cluster.http)
            ended = wait_for(lambda c=again: ended_follow_up(c), timeout=30,
                             message=f"the {name} instance ended the resumed follow-up")
            assert ended["commit"] == sha[:12] and ended["outcome"] == "rolled"
        finally:
            stop_process(again.proc)
        applied = [e for e in events(api_client, "web", "ns") if e["reason"] == "Applied"]
        assert len(applied) == 1 and f"commit {sha[:12]}" in applied[0]["message"]
        assert reasons(api_client, "web", "ns", ("NotApplied", "RolloutFailed")) == []
        assert len(commits(host)) == count
    cluster.http.close()


@pytest.mark.parametrize("merged_while_down", [False, True],
                         ids=["merged-after-restart", "merged-while-down"])
def test_killed_with_a_pull_request_open_restarted_without_flags_follows_its_merge_once(
        server: ApiServer, api_client: ApiClient, githost: GitHostServer, prhost: PrHost,
        tmp_path: Path, merged_while_down: bool) -> None:
    """The pull-request half: the controller is SIGKILLed with its pull request open and waiting. The
    next instance, without flags and with a fresh cache, finds the pull request open on the host and
    waits for its merge, or (merged, applied and rolled out while no controller ran) finds the merge
    commit on the base; either way it reports Applied for the merge commit, once. The instance after
    that finds the merged commit and the Event, and reports nothing. No instance after the first
    pushes, opens, updates or comments anything: the host sees only reads."""
    setup = PrSetup(tmp_path, githost, prhost, "github")
    manifest = KUSTOMIZE_DEPLOYMENT.replace("sink: git", "sink: pull-request")
    setup.create({**KUSTOMIZE_FILES, "apps/web/deployment.yaml": manifest})
    setup.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    flux = EnginePlayer(api_client, githost, PR_REPO, tmp_path)
    flux.kustomization("web", "./apps/web")
    flux.reconcile_kustomization("web", "apps/web")
    cluster = Cluster("", str(server.write_kubeconfig(tmp_path / "kubeconfig")), api_client, httpx.Client())

    def controller(name: str) -> Controller:  # each instance its own cache: nothing read from a disk
        flags = setup.flags(f"cache-{name}", *FOLLOW, f"--lease-namespace={CONTROLLER_NS}")
        return Controller(cluster, tmp_path / f"{name}.jsonl", flags)

    first = controller("first")
    try:
        first.wait_ready(cluster.http)
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        pull = wait_open_pull(prhost)
        wait_for(lambda: any(r["msg"] == "following emission" for r in first.log()), timeout=20,
                 message="the first instance waiting for the merge")
        os.kill(first.pid, signal.SIGKILL)
        first.proc.wait(10)
    finally:
        stop_process(first.proc)
    prhost.clear_requests()
    branches = githost.branches(PR_REPO)

    def merge() -> str:
        sha = prhost.merge(PR_REPO, pull["number"])
        flux.reconcile_kustomization("web", "apps/web")
        complete_rollout(api_client, "web")
        return sha

    merged = merge() if merged_while_down else ""
    second = controller("second")
    try:
        second.wait_ready(cluster.http)
        if not merged_while_down:
            wait_for(lambda: any(r["msg"] == "following emission" for r in second.log()), timeout=30,
                     message="the second instance waiting for the merge again")
            assert reasons(api_client, "web", "ns", ("Applied", "NotApplied")) == []
            merged = merge()
        ended = wait_for(lambda: ended_follow_up(second), timeout=30,
                         message="the second instance ended the follow-up of the merge")
        assert ended["commit"] == merged[:12] and ended["outcome"] == "rolled"
    finally:
        stop_process(second.proc)
    third = controller("third")
    try:
        third.wait_ready(cluster.http)
        ended = wait_for(lambda: ended_follow_up(third), timeout=30,
                         message="the third instance ended the resumed follow-up")
        assert ended["commit"] == merged[:12] and ended["outcome"] == "rolled"
    finally:
        stop_process(third.proc)
    applied = [e for e in events(api_client, "web", "ns") if e["reason"] == "Applied"]
    assert len(applied) == 1 and f"commit {merged[:12]}" in applied[0]["message"]
    assert reasons(api_client, "web", "ns", ("NotApplied", "RolloutFailed")) == []
    assert [p["number"] for p in pulls(prhost)] == [pull["number"]]  # no second pull request
    assert {r.method for r in prhost.requests} == {"GET"}  # nothing opened, updated or commented
    assert githost.branches(PR_REPO) == {**branches, "main": merged}  # nothing pushed
    cluster.http.close()
