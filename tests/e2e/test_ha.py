"""High availability with real processes: two controllers, one Lease, a leader killed mid-burst.

The API test server runs in its own process (``python -m gitops_reloader.testing.apiserver``)
and so does each controller (``python -m gitops_reloader.cli run --enable-ha``), exactly as
they would be deployed. The leader is found from the Lease's ``holderIdentity``
(``<hostname>-<pid>``) and killed with SIGKILL: no clean-up of any kind runs. Each process
serves /metrics on an ephemeral port, read from its JSON log.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import ApiClient, CoordinationV1Api, CoreV1Api
from kubernetes.client.exceptions import ApiException
from processes import Cluster, Controller, running_cluster, stop_process
from reload_helpers import configmap, create, env_of

from gitops_reloader.hashing import configmap_hash
from gitops_reloader.testing.harness import deployment, wait_for

pytestmark = pytest.mark.e2e

PAIRS = 20
LEASE = ("default", "gitops-reloader")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path) as running:
        yield running


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
    wait_for(lambda: chosen.sample(cluster.http, LEADER) == 1, message="leader active")
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
    assert cluster.quiet("deployments") == 5
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
    total = cluster.quiet("deployments")
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


def test_v2_leader_election_flags_and_release_on_cancel(cluster, tmp_path):
    """Stakater v2's spellings drive the Lease; on SIGTERM the leader empties the holder,
    so the standby takes over at its next retry instead of after the lease duration."""
    flags = ("--enable-ha", "--coalesce-window=0", "--leader-election-id=reloader-v2",
             "--leader-election-namespace=default", "--leader-election-lease-duration=60s",
             "--leader-election-retry-period=200ms", "--leader-election-release-on-cancel")
    coordination = CoordinationV1Api(cluster.api_client)

    def lease_holder() -> str:
        try:
            return coordination.read_namespaced_lease("reloader-v2", "default").spec.holder_identity or ""
        except ApiException:
            return ""

    started: list[Controller] = []
    try:
        for number in range(2):
            (tmp_path / f"v{number}").mkdir()
            started.append(Controller(cluster, tmp_path / f"v{number}" / "log.jsonl", flags))
        for controller in started:
            controller.wait_ready(cluster.http)
        first = wait_for(lambda: lease_holder(), message="a holder of reloader-v2")
        old = next(c for c in started if first.endswith(f"-{c.pid}"))
        standby = next(c for c in started if c is not old)
        assert coordination.read_namespaced_lease("reloader-v2", "default").spec.lease_duration_seconds == 60
        assert stop_process(old.proc) == 0
        assert any(r["msg"] == "released lease" for r in old.log())
        # Without the release the standby would wait out 60 s; it takes over within its retries.
        wait_for(lambda: lease_holder().endswith(f"-{standby.pid}"), timeout=10, message="standby took over")
        wait_for(lambda: standby.sample(cluster.http, LEADER) == 1, timeout=10, message="standby leads")
    finally:
        for controller in started:
            stop_process(controller.proc)
