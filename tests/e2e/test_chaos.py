"""Chaos, bounded in time: the controller killed mid-batch, watches cut over and over, the API
server restarting with history compaction while changes keep coming.

What must hold every time: nothing lost (every workload ends on the latest hash), nothing
duplicated (each change rolls a workload exactly once: the Deployment's ``generation``
counts template changes), no mass reload after a restart.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from kubernetes.client import CoreV1Api
from processes import Controller, running_cluster, stop_process
from reload_helpers import configmap, create, env_of, workload

from gitops_reloader.hashing import configmap_hash
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for

pytestmark = pytest.mark.e2e

PAIRS = 12
LAST_RELOADED = "reloader.stakater.com/last-reloaded-from"


def create_pairs(api_client, count: int = PAIRS) -> None:
    for i in range(count):
        create(api_client, configmap(f"cfg-{i}", {"v": "0"}))
        create(api_client, deployment(
            f"web-{i}", annotations={"reloader.stakater.com/auto": "true"},
            containers=[{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": f"cfg-{i}"}}]}]))


def change(api_client, i: int, value: str) -> None:
    CoreV1Api(api_client).patch_namespaced_config_map(f"cfg-{i}", "ns", {"data": {"v": value}})


def recorded(obj: dict, sink: str, i: int) -> str | None:
    """The hash the workload records for cfg-i through ``sink``."""
    if sink == "env-vars":
        return env_of(obj).get(f"STAKATER_CFG_{i}_CONFIGMAP")
    annotation = (obj["spec"]["template"]["metadata"].get("annotations") or {}).get(LAST_RELOADED)
    return json.loads(annotation)["hash"] if annotation else None


@pytest.mark.parametrize("sink", ["env-vars", "annotations"])
def test_kill_9_mid_batch_then_restart_loses_nothing_and_repeats_nothing(tmp_path: Path, sink: str):
    flags = ("--coalesce-window=0", "--sync-after-restart", f"--reload-strategy={sink}", "--workers=1")
    with running_cluster(tmp_path) as cluster:
        create_pairs(cluster.api_client)
        first = Controller(cluster, tmp_path / "first.jsonl", flags)
        second: Controller | None = None
        try:
            first.wait_ready(cluster.http)
            for i in range(PAIRS):
                change(cluster.api_client, i, "1")
            v1 = configmap_hash({"v": "1"})
            wait_for(lambda: all(recorded(cluster.deployment(f"web-{i}"), sink, i) == v1
                                 for i in range(PAIRS)), timeout=20, message="first round reloaded")
            # Slow writes down so the kill lands in the middle of the second round.
            cluster.http.post(cluster.url + "/_testing/faults", json={
                "verb": "patch", "resource": "deployments", "status": None, "times": None, "latency": 0.1})
            for i in range(PAIRS):
                change(cluster.api_client, i, "2")
            v2 = configmap_hash({"v": "2"})
            wait_for(lambda: sum(recorded(cluster.deployment(f"web-{i}"), sink, i) == v2
                                 for i in range(PAIRS)) >= 3, timeout=20, message="second round under way")
            os.kill(first.pid, signal.SIGKILL)
            first.proc.wait(5)
            cluster.http.delete(cluster.url + "/_testing/faults")
            time.sleep(0.3)  # whatever the dead process had on the wire has landed or failed
            done_before = [i for i in range(PAIRS) if recorded(cluster.deployment(f"web-{i}"), sink, i) == v2]
            assert len(done_before) < PAIRS, "the kill came too late to be mid-batch"

            second = Controller(cluster, tmp_path / "second.jsonl", flags)
            second.wait_ready(cluster.http)
            wait_for(lambda: all(recorded(cluster.deployment(f"web-{i}"), sink, i) == v2
                                 for i in range(PAIRS)),
                     timeout=20, message="the rest reloaded after the restart")
            time.sleep(0.5)
            generations = [cluster.deployment(f"web-{i}")["metadata"]["generation"] for i in range(PAIRS)]
            assert generations == [3] * PAIRS  # created, round 1, round 2: nothing twice
            reloads = 'reloader_reload_executed_total{success="true"}'
            assert second.metric(cluster.http, reloads) == PAIRS - len(done_before)  # no mass reload
        finally:
            stop_process(first.proc)
            if second is not None:
                stop_process(second.proc)


def test_watches_cut_every_few_events_for_a_while(server, api_client):
    create_pairs(api_client)
    rounds = 6
    with running_controller(api_client) as app:
        server.cut_watches_after(3)
        for round_ in range(1, rounds + 1):
            for i in range(PAIRS):
                change(api_client, i, str(round_))
            expected = configmap_hash({"v": str(round_)})
            wait_for(lambda e=expected: all(env_of(workload(server, "Deployment", f"web-{i}")).get(
                f"STAKATER_CFG_{i}_CONFIGMAP") == e for i in range(PAIRS)), timeout=20,
                message=f"round {round_} reloaded")
        server.cut_watches_after(0)
        settle(app)
        generations = {workload(server, "Deployment", f"web-{i}")["metadata"]["generation"]
                       for i in range(PAIRS)}
        assert generations == {1 + rounds}


def test_api_server_restarts_with_compaction_while_changes_continue(server, api_client):
    create_pairs(api_client)
    stop = threading.Event()

    def restart_repeatedly() -> None:
        while not stop.wait(0.15):
            server.restart(compact=True)

    with running_controller(api_client) as app:
        restarter = threading.Thread(target=restart_repeatedly, daemon=True)
        restarter.start()
        try:
            for round_ in range(1, 5):
                for i in range(PAIRS):
                    change(api_client, i, str(round_))
                time.sleep(0.2)
        finally:
            stop.set()
            restarter.join(5)
        latest = configmap_hash({"v": "4"})
        wait_for(lambda: all(env_of(workload(server, "Deployment", f"web-{i}")).get(
            f"STAKATER_CFG_{i}_CONFIGMAP") == latest for i in range(PAIRS)), timeout=30,
            message="every workload on the latest data")
        settle(app)
        patches = server.request_counts().get(("patch", "deployments"), 0)
        assert PAIRS <= patches <= 4 * PAIRS  # at most one write per change
        server.restart(compact=True)
        wait_for(lambda: all(i.has_synced() for i in app.controller.informers()))
        time.sleep(0.5)
        settle(app)
        assert server.request_counts().get(("patch", "deployments"), 0) == patches  # relist: nothing


GIT_TOKEN = "chaos-git-token-7d1e"
GIT_MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: ns
spec:
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
        - name: app
          image: nginx
"""


def test_kill_9_of_the_git_sink_inside_the_window_then_restart_commits_once(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    names = ["api", "web", "worker"]
    with running_cluster(tmp_path) as cluster, GitHostServer(tmp_path / "srv", token=GIT_TOKEN) as host:
        host.create_repo("manifests", {f"apps/{n}.yaml": GIT_MANIFEST.format(name=n) for n in names})
        (tmp_path / "token").write_text(GIT_TOKEN)
        (tmp_path / "git-config.yaml").write_text(
            f"repositories:\n  - name: manifests\n    url: {host.repo_url('manifests')}\n"
            f"    tokenFile: {tmp_path / 'token'}\n")
        create(cluster.api_client, configmap("app-config", {"v": "0"}))
        for name in names:
            create(cluster.api_client, deployment(name, annotations={
                "configmap.reloader.stakater.com/reload": "app-config", "gitops-reloader.io/sink": "git",
                "gitops-reloader.io/git-repo": "manifests",
                "gitops-reloader.io/git-path": f"apps/{name}.yaml"}))
        flags = ("--coalesce-window=3s", "--sync-after-restart", "--lease-namespace=default",
                 f"--git-config={tmp_path / 'git-config.yaml'}", f"--git-cache-dir={tmp_path / 'cache'}")
        runs: list[Controller] = []
        try:
            runs.append(Controller(cluster, tmp_path / "first.jsonl", flags))
            runs[-1].wait_ready(cluster.http)
            initial = len(host.log("manifests"))
            core = CoreV1Api(cluster.api_client)
            core.patch_namespaced_config_map("app-config", "ns", {"data": {"v": "1"}})
            wait_for(lambda: len(host.log("manifests")) == initial + 1, timeout=30, message="first commit")
            # The second change: killed inside the coalescing window, before any commit.
            core.patch_namespaced_config_map("app-config", "ns", {"data": {"v": "2"}})
            time.sleep(0.5)
            os.kill(runs[-1].pid, signal.SIGKILL)
            runs[-1].proc.wait(5)
            assert len(host.log("manifests")) == initial + 1
            before = {n: host.read_file("manifests", f"apps/{n}.yaml") for n in names}

            runs.append(Controller(cluster, tmp_path / "second.jsonl", flags))
            runs[-1].wait_ready(cluster.http)
            wait_for(lambda: len(host.log("manifests")) == initial + 2, timeout=30,
                     message="the lost change committed after the restart")
            after = {n: host.read_file("manifests", f"apps/{n}.yaml") for n in names}
            assert all(after[n] != before[n] for n in names)  # every workload's digest moved on
            stop_process(runs[-1].proc)

            # A third start with nothing changed: no commit at all.
            runs.append(Controller(cluster, tmp_path / "third.jsonl", flags))
            runs[-1].wait_ready(cluster.http)
            time.sleep(4)
            assert len(host.log("manifests")) == initial + 2
        finally:
            for run in runs:
                stop_process(run.proc)
