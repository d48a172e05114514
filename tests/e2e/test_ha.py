"""High availability with real processes: two controllers, one Lease, a leader killed mid-burst.

The API test server runs in its own process (``python -m gitops_reloader.testing.apiserver``)
and so does each controller (``python -m gitops_reloader.cli run --enable-ha``), exactly as
they would be deployed. The leader is found from the Lease's ``holderIdentity``
(``<hostname>-<pid>``) and killed with SIGKILL: no clean-up of any kind runs. Each process
serves /metrics on an ephemeral port, read from its JSON log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from kubernetes import config as kube_config
from kubernetes.client import ApiClient, CoordinationV1Api, CoreV1Api
from kubernetes.client.exceptions import ApiException
from reload_helpers import configmap, create, env_of

from gitops_reloader.hashing import configmap_hash
from gitops_reloader.testing.harness import deployment, wait_for

pytestmark = pytest.mark.e2e

PAIRS = 20
ROOT = Path(__file__).resolve().parents[2]
LEASE = ("default", "gitops-reloader")


def stop_process(proc: subprocess.Popen) -> int | None:
    """SIGTERM, then SIGKILL if it does not exit; by PID, only our own child."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode


@dataclass
class Cluster:
    url: str
    kubeconfig: str
    api_client: ApiClient
    http: httpx.Client

    def requests(self, verb: str, resource: str) -> int:
        counts = self.http.get(self.url + "/_testing/requests").json()["requests"]
        return sum(c["count"] for c in counts if (c["verb"], c["resource"]) == (verb, resource))

    def deployment(self, name: str) -> dict:
        response = self.http.get(self.url + f"/apis/apps/v1/namespaces/ns/deployments/{name}")
        response.raise_for_status()
        return response.json()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    kubeconfig = tmp_path / "kubeconfig"
    with (tmp_path / "apiserver.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gitops_reloader.testing.apiserver", "--port", "0",
             "--kubeconfig", str(kubeconfig)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("READY http://127.0.0.1:"), line
        url = line.split(" ", 1)[1]
        api_client = kube_config.new_client_from_config(config_file=str(kubeconfig))
        with httpx.Client(headers={"Authorization": "Bearer test-token"}) as http:
            yield Cluster(url, str(kubeconfig), api_client, http)
        api_client.close()
    finally:
        stop_process(proc)
        proc.stdout.close()


class Controller:
    """One ``gitops-reloader run --enable-ha`` process and its JSON log."""

    def __init__(self, cluster: Cluster, log_path: Path) -> None:
        self.log_path = log_path
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "ALERT_", "POD_"))}
        env["HOME"] = str(log_path.parent)
        with log_path.open("w") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gitops_reloader.cli", "run", "--kubeconfig", cluster.kubeconfig,
                 "--enable-ha", "--lease-duration=2s", "--coalesce-window=0",
                 "--http-address=127.0.0.1:0", "--lease-namespace=default", "--log-format=json"],
                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)
        self.pid = self.proc.pid
        self.metrics_url = ""

    def log(self) -> list[dict]:
        lines = self.log_path.read_text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def wait_ready(self, http: httpx.Client) -> None:
        """Until /readyz answers 200: informer caches synced (also on a standby)."""

        def address() -> str:
            assert self.proc.poll() is None, self.log_path.read_text()
            return next((r["address"] for r in self.log() if r["msg"] == "http server listening"), "")

        self.metrics_url = "http://" + wait_for(address, timeout=15, message="http server")
        wait_for(lambda: http.get(self.metrics_url + "/readyz").status_code == 200, timeout=15,
                 message="caches synced")

    def metric(self, http: httpx.Client, name: str) -> float:
        for line in http.get(self.metrics_url + "/metrics").text.splitlines():
            if line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError(f"{name} not exported by pid {self.pid}")


@pytest.fixture
def controllers(cluster: Cluster, tmp_path: Path) -> Iterator[dict[int, Controller]]:
    started: dict[int, Controller] = {}
    try:
        for number in range(2):
            (tmp_path / f"c{number}").mkdir()
            controller = Controller(cluster, tmp_path / f"c{number}" / "log.jsonl")
            started[controller.pid] = controller
        for controller in started.values():
            controller.wait_ready(cluster.http)
        yield started
    finally:
        for controller in started.values():
            stop_process(controller.proc)


RELOADS = 'reloader_reload_executed_total{success="true"}'
LEADER = "gitops_reloader_leader"


def holder(api_client: ApiClient) -> str:
    try:
        lease = CoordinationV1Api(api_client).read_namespaced_lease(LEASE[1], LEASE[0])
    except ApiException:
        return ""
    return lease.spec.holder_identity or ""


def leader(cluster: Cluster, controllers: dict[int, Controller]) -> Controller:
    """The controller holding the Lease, once it acts as leader."""
    pid = int(wait_for(lambda: holder(cluster.api_client), message="a lease holder").rsplit("-", 1)[1])
    chosen = controllers[pid]
    wait_for(lambda: chosen.metric(cluster.http, LEADER) == 1, message="leader active")
    return chosen


def create_pairs(cluster: Cluster) -> None:
    for i in range(PAIRS):
        create(cluster.api_client, configmap(f"cfg-{i}", {"v": "0"}))
        create(cluster.api_client, deployment(
            f"web-{i}", annotations={"reloader.stakater.com/auto": "true"},
            containers=[{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": f"cfg-{i}"}}]}]))


def change(cluster: Cluster, i: int, value: str) -> None:
    CoreV1Api(cluster.api_client).patch_namespaced_config_map(f"cfg-{i}", "ns", {"data": {"v": value}})


def current(cluster: Cluster, i: int, value: str) -> bool:
    env = env_of(cluster.deployment(f"web-{i}"))
    return env == {f"STAKATER_CFG_{i}_CONFIGMAP": configmap_hash({"v": value})}


def quiet(cluster: Cluster, resource: str, *, for_seconds: float = 0.5) -> int:
    """Wait until no write to ``resource`` arrived for ``for_seconds``; the write count."""
    last = (cluster.requests("patch", resource), time.monotonic())
    while time.monotonic() - last[1] < for_seconds:
        time.sleep(0.05)
        count = cluster.requests("patch", resource)
        if count != last[0]:
            last = (count, time.monotonic())
    return last[0]


@pytest.fixture
def pairs(cluster: Cluster) -> None:
    create_pairs(cluster)


def test_standby_writes_nothing_while_the_leader_lives(cluster, pairs, controllers):
    active = leader(cluster, controllers)
    [standby] = [c for c in controllers.values() if c is not active]
    assert standby.metric(cluster.http, LEADER) == 0
    for i in range(5):
        change(cluster, i, "1")
    wait_for(lambda: all(current(cluster, i, "1") for i in range(5)), message="reloaded")
    assert quiet(cluster, "deployments") == 5
    assert active.metric(cluster.http, RELOADS) == 5
    assert standby.metric(cluster.http, RELOADS) == 0
    assert standby.metric(cluster.http, LEADER) == 0
    assert holder(cluster.api_client).endswith(f"-{active.pid}")
    assert all(c.proc.poll() is None for c in controllers.values())


def test_leader_killed_mid_burst_every_change_reloads_exactly_once(cluster, pairs, controllers):
    old = leader(cluster, controllers)
    [standby] = [c for c in controllers.values() if c is not old]
    # Slow Deployment writes down, so the kill lands while writes are in flight.
    cluster.http.post(cluster.url + "/_testing/faults", json={
        "verb": "patch", "resource": "deployments", "status": None, "times": None, "latency": 0.05})
    for i in range(PAIRS // 2):
        change(cluster, i, "1")
    wait_for(lambda: cluster.requests("patch", "deployments") >= 6, message="leader at work")
    assert standby.metric(cluster.http, RELOADS) == 0
    os.kill(old.pid, signal.SIGKILL)
    old.proc.wait(5)
    for i in range(PAIRS // 2, PAIRS):
        change(cluster, i, "1")
    time.sleep(0.3)  # what the old leader had on the wire has landed (or failed) by now
    sent_by_old = cluster.requests("patch", "deployments")
    landed_by_old = [i for i in range(PAIRS) if current(cluster, i, "1")]
    assert landed_by_old and len(landed_by_old) <= sent_by_old <= PAIRS // 2

    wait_for(lambda: holder(cluster.api_client).endswith(f"-{standby.pid}"), timeout=10,
             message="standby took the lease")
    wait_for(lambda: all(current(cluster, i, "1") for i in range(PAIRS)), timeout=10,
             message="every change reloaded")
    total = quiet(cluster, "deployments")
    # Every template changed exactly once (a second write of another value would bump the
    # generation again; one of the same value is caught by the counts below).
    assert [cluster.deployment(f"web-{i}")["metadata"]["generation"] for i in range(PAIRS)] == [2] * PAIRS
    # The new leader wrote exactly what the old one had not: nothing already done was redone.
    assert standby.metric(cluster.http, RELOADS) == PAIRS - len(landed_by_old)
    # Every request beyond one per change is one the old leader had on the wire when it was
    # killed: the server counted it on arrival but its body never came, so it changed nothing.
    assert total - PAIRS == sent_by_old - len(landed_by_old)
    assert total - PAIRS <= 4  # at most one per worker of the old leader
    assert standby.metric(cluster.http, LEADER) == 1
    assert stop_process(standby.proc) == 0  # SIGTERM: a clean exit
