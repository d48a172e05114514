"""``--state-store configmap``: the controller killed with SIGKILL in the middle of a batch write.

Real processes (tests/e2e/processes.py): the API test server and each controller run on
their own. Shards are kept small (``--state-store-shard-size=1024``) so that one batch is
several ConfigMap writes, and every write to them is slowed down, so the kill lands after
the batch began and before it ended. Then, while nothing runs, a Secret used by a workload
that was never reloaded changes, and so does one ConfigMap again. After the restart with
``--sync-after-restart``: exactly those two workloads roll, once (nothing lost), none of
the workloads reloaded before the kill rolls again (nothing doubled), and the store
catches up with every source.
"""

from __future__ import annotations

import base64
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import Cluster, Controller, running_cluster, stop_process
from reload_helpers import configmap, create, env_of, secret

from gitops_reloader.hashing import configmap_hash, secret_hash
from gitops_reloader.state.codec import Decoded, ShardData, merge_shards, state_digest
from gitops_reloader.testing.harness import deployment, wait_for

pytestmark = pytest.mark.e2e

PAIRS = 24
FLAGS = ("--coalesce-window=0", "--sync-after-restart", "--state-store=configmap",
         "--state-store-interval=200ms", "--state-store-shard-size=1024", "--workers=2")
SHARDS = "/api/v1/namespaces/default/configmaps?labelSelector=gitops-reloader.io/state-store"
RELOADS = 'reloader_reload_executed_total{success="true"}'


def auto(name: str, ref: dict) -> dict:
    return deployment(name, annotations={"reloader.stakater.com/auto": "true"},
                      containers=[{"name": "app", "image": "x", "envFrom": [ref]}])


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path) as running:
        api = running.api_client
        for i in range(PAIRS):
            create(api, configmap(f"cfg-{i}", {"v": "0"}))
            create(api, auto(f"web-{i}", {"configMapRef": {"name": f"cfg-{i}"}}))
        create(api, secret("db", {"password": "hunter2"}))
        create(api, auto("web-db", {"secretRef": {"name": "db"}}))
        create(api, configmap("still", {"v": "0"}))
        create(api, auto("web-still", {"configMapRef": {"name": "still"}}))
        yield running


def stored(cluster: Cluster) -> Decoded:
    items = cluster.http.get(cluster.url + SHARDS).json()["items"]
    return merge_shards([ShardData(int(i["metadata"]["name"].rsplit("-", 1)[1]), i["data"]) for i in items])


def stored_sources(cluster: Cluster) -> dict[str, str]:
    """The store's source entries in the test namespace (the digest key Secret has one too)."""
    return {k: v for k, v in stored(cluster).snapshot.sources.items() if k.startswith("ns/")}


def source_digests(cluster: Cluster, key: bytes, values: dict[str, str], password: str) -> dict[str, str]:
    """What the store must hold once it caught up: the keyed digest of every source."""
    b64 = base64.b64encode(password.encode()).decode()
    out = {f"ns/ConfigMap/cfg-{i}": state_digest(key, f"ns/ConfigMap/cfg-{i}", configmap_hash({"v": v}))
           for i, v in values.items()}
    out["ns/ConfigMap/still"] = state_digest(key, "ns/ConfigMap/still", configmap_hash({"v": "0"}))
    out["ns/Secret/db"] = state_digest(key, "ns/Secret/db", secret_hash({"password": b64}))
    return out


def digest_key(cluster: Cluster) -> bytes:
    response = cluster.http.get(cluster.url + "/api/v1/namespaces/default/secrets/gitops-reloader-digest-key")
    return base64.b64decode(response.json()["data"]["digest-key"])


def patch(cluster: Cluster, plural: str, name: str, data: dict[str, str]) -> None:
    response = cluster.http.patch(cluster.url + f"/api/v1/namespaces/ns/{plural}/{name}", json={"data": data},
                                  headers={"Content-Type": "application/merge-patch+json"})
    response.raise_for_status()


def test_kill_9_during_a_batch_write_loses_nothing_and_reloads_nothing_twice(
        cluster: Cluster, tmp_path: Path) -> None:
    first = Controller(cluster, tmp_path / "first.jsonl", FLAGS)
    second: Controller | None = None
    try:
        first.wait_ready(cluster.http)
        key = wait_for(lambda: digest_key(cluster) if cluster.http.get(
            cluster.url + "/api/v1/namespaces/default/secrets/gitops-reloader-digest-key").status_code == 200
            else None, timeout=15, message="digest key created")
        before = {str(i): "0" for i in range(PAIRS)}
        wait_for(lambda: stored_sources(cluster) == source_digests(cluster, key, before, "hunter2"),
                 timeout=15, message="store written at start-up")
        shard_count = stored(cluster).count
        assert shard_count >= 3  # one batch is several writes

        # Every shard write now takes a while; the reloads themselves stay fast.
        cluster.http.post(cluster.url + "/_testing/faults", json={
            "verb": "update", "resource": "configmaps", "namespace": "default", "status": None,
            "times": None, "latency": 0.5}).raise_for_status()
        updates = cluster.requests("update", "configmaps")
        for i in range(PAIRS):
            patch(cluster, "configmaps", f"cfg-{i}", {"v": "1"})
        v1 = configmap_hash({"v": "1"})
        wait_for(lambda: all(env_of(cluster.deployment(f"web-{i}")).get(f"STAKATER_CFG_{i}_CONFIGMAP") == v1
                             for i in range(PAIRS)), timeout=20, message="every workload reloaded")
        wait_for(lambda: cluster.requests("update", "configmaps") > updates, timeout=10,
                 message="a batch write under way")
        os.kill(first.pid, signal.SIGKILL)
        first.proc.wait(5)
        cluster.http.delete(cluster.url + "/_testing/faults").raise_for_status()
        after = {str(i): "1" for i in range(PAIRS)}
        wait_for(lambda: cluster.requests("update", "configmaps") - updates < shard_count
                 and stored_sources(cluster) != source_digests(cluster, key, after, "hunter2"),
                 timeout=5, message="the batch was cut short")

        # While nothing runs: the never-reloaded workload's Secret changes, and cfg-0 again.
        patch(cluster, "secrets", "db", {"password": base64.b64encode(b"hunter3").decode()})
        patch(cluster, "configmaps", "cfg-0", {"v": "2"})
        assert "STAKATER_DB_SECRET" not in env_of(cluster.deployment("web-db"))

        second = Controller(cluster, tmp_path / "second.jsonl", FLAGS)
        second.wait_ready(cluster.http)
        final = {**after, "0": "2"}
        wait_for(lambda: stored_sources(cluster) == source_digests(cluster, key, final, "hunter3"),
                 timeout=20, message="store caught up after the restart")
        wait_for(lambda: second.sample(cluster.http, RELOADS) == 2, timeout=10, message="two reloads")
        generations = {name: cluster.deployment(name)["metadata"]["generation"]
                       for name in [f"web-{i}" for i in range(PAIRS)] + ["web-db", "web-still"]}
        assert generations == {"web-0": 3, **{f"web-{i}": 2 for i in range(1, PAIRS)},
                               "web-db": 2, "web-still": 1}
        b64 = base64.b64encode(b"hunter3").decode()
        assert env_of(cluster.deployment("web-db"))["STAKATER_DB_SECRET"] == secret_hash({"password": b64})
        assert env_of(cluster.deployment("web-0"))["STAKATER_CFG_0_CONFIGMAP"] == configmap_hash({"v": "2"})
        assert second.metric(cluster.http, RELOADS) == 2  # and nothing else since
    finally:
        stop_process(first.proc)
        if second is not None:
            stop_process(second.proc)


HA = ("--enable-ha", "--lease-duration=2s", "--lease-namespace=default")
LEADER = "gitops_reloader_leader"


def test_ha_take_over_reads_the_store_the_dead_leader_wrote(cluster: Cluster, tmp_path: Path) -> None:
    """The leader dies; while no replica runs, the never-reloaded workload's Secret changes;
    a fresh replica takes the Lease over and reloads it (and only it) from the store."""
    flags = (*FLAGS, *HA)
    old = Controller(cluster, tmp_path / "old.jsonl", flags)
    new: Controller | None = None
    try:
        old.wait_ready(cluster.http)
        wait_for(lambda: old.sample(cluster.http, LEADER) == 1, timeout=15, message="old leader active")
        key = wait_for(lambda: digest_key(cluster) if cluster.http.get(
            cluster.url + "/api/v1/namespaces/default/secrets/gitops-reloader-digest-key").status_code == 200
            else None, timeout=15, message="digest key created")
        before = {str(i): "0" for i in range(PAIRS)}
        wait_for(lambda: stored_sources(cluster) == source_digests(cluster, key, before, "hunter2"),
                 timeout=15, message="store written by the leader")
        os.kill(old.pid, signal.SIGKILL)
        old.proc.wait(5)
        patch(cluster, "secrets", "db", {"password": base64.b64encode(b"hunter3").decode()})

        new = Controller(cluster, tmp_path / "new.jsonl", flags)
        new.wait_ready(cluster.http)
        wait_for(lambda: new.sample(cluster.http, LEADER) == 1, timeout=15, message="take-over")
        after = source_digests(cluster, key, before, "hunter3")
        wait_for(lambda: stored_sources(cluster) == after, timeout=15, message="store caught up")
        wait_for(lambda: new.sample(cluster.http, RELOADS) == 1, timeout=10, message="one reload")
        loaded = [r for r in new.log() if r["msg"] == "state store loaded"]
        assert len(loaded) == 1 and loaded[0]["sources"] >= PAIRS + 2
        b64 = base64.b64encode(b"hunter3").decode()
        assert env_of(cluster.deployment("web-db"))["STAKATER_DB_SECRET"] == secret_hash({"password": b64})
        generations = {cluster.deployment(name)["metadata"]["generation"]
                       for name in [f"web-{i}" for i in range(PAIRS)] + ["web-still"]}
        assert generations == {1}
    finally:
        stop_process(old.proc)
        if new is not None:
            stop_process(new.proc)
