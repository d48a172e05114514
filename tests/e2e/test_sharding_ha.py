"""Two shards, each an HA pair of real processes; one shard's leader killed (issue 15).

Four ``gitops-reloader run --enable-ha`` processes against the API test server in its own
process, two per shard, each shard electing on its own Lease. Two set-ups:

- hash shards: ``--shard-count=2 --shard-index=I`` (Lease ``gitops-reloader-shard-<I>``);
- label shards: the exact container args the Helm chart renders for ``reloader.shards``
  (``values-tests/shards-by-label.yaml``: ``--namespace-selector=<release>,<shard>``,
  ``--lease-name=<fullname>-<shard>``), so the chart's shards are proven to work together.

Killing shard 0's leader with SIGKILL hands shard 0 to its standby, which reloads the
changes made meanwhile exactly once; shard 1 keeps its leader and reloads its own
namespaces throughout.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes.client import ApiClient, CoordinationV1Api, CoreV1Api
from kubernetes.client.exceptions import ApiException
from processes import HA_FLAGS, Cluster, Controller, running_cluster, stop_process
from reload_helpers import configmap, create, env_of

from gitops_reloader.hashing import configmap_hash
from gitops_reloader.shard import shard_of
from gitops_reloader.testing.harness import deployment, wait_for

# tests/ is not a package: make tests/helm_tools.py importable from here.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helm_tools import CHART_DIR, render, require_helm

pytestmark = pytest.mark.e2e

RELOADS = 'reloader_reload_executed_total{success="true"}'
LEADER = "gitops_reloader_leader"
TEST_FLAGS = ("--lease-duration=2s", "--coalesce-window=0", "--lease-namespace=default")


@dataclass(frozen=True)
class Layout:
    """Namespaces (name → labels), which shard owns each, and each shard's flags and Lease."""

    namespaces: dict[str, dict[str, str]]
    owner: dict[str, int | None]
    flags: tuple[Sequence[str], Sequence[str]]
    leases: tuple[str, str]


def hash_layout() -> Layout:
    namespaces: dict[str, dict[str, str]] = {f"team-{i}": {} for i in range(6)}
    flags = [(*HA_FLAGS, "--shard-count=2", f"--shard-index={i}") for i in (0, 1)]
    return Layout(namespaces, {ns: shard_of(ns, 2) for ns in namespaces}, (flags[0], flags[1]),
                  ("gitops-reloader-shard-0", "gitops-reloader-shard-1"))


def chart_label_layout(tmp_path: Path) -> Layout:
    docs = render(require_helm(), CHART_DIR, home=tmp_path / "helm",
                  values_files=[CHART_DIR / "values-tests" / "shards-by-label.yaml"])
    args = {d["metadata"]["name"]: d["spec"]["template"]["spec"]["containers"][0]["args"][1:]
            for d in docs if d["kind"] == "Deployment"}
    flags = [(*args[f"reloader-gitops-reloader-{s}"], *TEST_FLAGS) for s in ("a", "b")]
    watched = {"reloader.stakater.com/watch": "true"}
    namespaces = {f"team-{s}{i}": {**watched, "reloader-shard": s} for s in ("a", "b") for i in (1, 2)}
    namespaces["unwatched"] = {"reloader-shard": "a"}  # the release-wide selector excludes it
    owner: dict[str, int | None] = {"team-a1": 0, "team-a2": 0, "team-b1": 1, "team-b2": 1, "unwatched": None}
    return Layout(namespaces, owner, (flags[0], flags[1]),
                  ("reloader-gitops-reloader-a", "reloader-gitops-reloader-b"))


@pytest.fixture(params=["hash", "chart-labels"])
def layout(request: pytest.FixtureRequest, tmp_path: Path) -> Layout:
    return hash_layout() if request.param == "hash" else chart_label_layout(tmp_path)


@pytest.fixture
def cluster(tmp_path: Path, layout: Layout) -> Iterator[Cluster]:
    with running_cluster(tmp_path) as running:
        core = CoreV1Api(running.api_client)
        for ns, labels in layout.namespaces.items():
            core.create_namespace({"metadata": {"name": ns, "labels": labels}})
            create(running.api_client, configmap("cfg", {"v": "0"}, namespace=ns))
            create(running.api_client, deployment(
                "web", namespace=ns, annotations={"reloader.stakater.com/auto": "true"},
                containers=[{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]))
        yield running


@pytest.fixture
def shards(cluster: Cluster, layout: Layout, tmp_path: Path) -> Iterator[dict[int, list[Controller]]]:
    """Shard index → its two controller processes."""
    started: dict[int, list[Controller]] = {0: [], 1: []}
    try:
        for index in (0, 1):
            for replica in (0, 1):
                directory = tmp_path / f"shard{index}-{replica}"
                directory.mkdir()
                started[index].append(Controller(cluster, directory / "log.jsonl", layout.flags[index]))
        for controller in started[0] + started[1]:
            controller.wait_ready(cluster.http)
        yield started
    finally:
        for controller in started[0] + started[1]:
            stop_process(controller.proc)


def holder(api_client: ApiClient, lease: str) -> str:
    try:
        found = CoordinationV1Api(api_client).read_namespaced_lease(lease, "default")
    except ApiException:
        return ""
    return found.spec.holder_identity or ""


def leader(cluster: Cluster, pair: Sequence[Controller], lease: str) -> Controller:
    """The process holding ``lease``, once it acts as leader."""
    pid = int(wait_for(lambda: holder(cluster.api_client, lease), message=f"a holder of {lease}")
              .rsplit("-", 1)[1])
    [chosen] = [c for c in pair if c.pid == pid]
    wait_for(lambda: chosen.sample(cluster.http, LEADER) == 1, message=f"{lease} leader active")
    return chosen


def web(cluster: Cluster, ns: str) -> dict:
    response = cluster.http.get(cluster.url + f"/apis/apps/v1/namespaces/{ns}/deployments/web")
    response.raise_for_status()
    return response.json()



def change(cluster: Cluster, namespaces: Sequence[str], value: str) -> None:
    core = CoreV1Api(cluster.api_client)
    for ns in namespaces:
        core.patch_namespaced_config_map("cfg", ns, {"data": {"v": value}})


def reloaded(cluster: Cluster, namespaces: Sequence[str], value: str) -> None:
    expected = {"STAKATER_CFG_CONFIGMAP": configmap_hash({"v": value})}
    wait_for(lambda: all(env_of(web(cluster, ns)) == expected for ns in namespaces), timeout=15,
             message=f"{namespaces} reloaded with v={value}")


def test_killing_one_shards_leader_hands_it_to_its_standby_and_leaves_the_other_shard_alone(
        cluster, layout, shards):
    owned = {index: [ns for ns, owner in layout.owner.items() if owner == index] for index in (0, 1)}
    assert owned[0] and owned[1]  # fixed names, fixed hash: both shards own something
    nobody = [ns for ns, owner in layout.owner.items() if owner is None]
    everything = list(layout.namespaces)
    leaders = {index: leader(cluster, shards[index], layout.leases[index]) for index in (0, 1)}
    standbys = {index: next(c for c in shards[index] if c is not leaders[index]) for index in (0, 1)}

    change(cluster, everything, "1")
    reloaded(cluster, owned[0] + owned[1], "1")
    for index in (0, 1):
        wait_for(lambda index=index: leaders[index].metric(cluster.http, RELOADS) == len(owned[index]),
                 message=f"shard {index} leader counted its reloads")
        assert standbys[index].metric(cluster.http, RELOADS) == 0

    os.kill(leaders[0].pid, signal.SIGKILL)
    leaders[0].proc.wait(5)
    change(cluster, everything, "2")
    # Shard 1 does not wait for shard 0's election: its leader reloads its namespaces.
    reloaded(cluster, owned[1], "2")
    wait_for(lambda: holder(cluster.api_client, layout.leases[0]).endswith(f"-{standbys[0].pid}"),
             timeout=15, message="shard 0's standby took its lease")
    reloaded(cluster, owned[0], "2")
    wait_for(lambda: standbys[0].sample(cluster.http, RELOADS) == len(owned[0]),
             message="shard 0's new leader counted its reloads")

    # Exactly once: one template write per owned namespace and round, nothing redone after
    # the take-over (the leader was killed while idle, so nothing of it was on the wire).
    assert cluster.quiet("deployments") == 2 * len(owned[0] + owned[1])
    generations = {ns: web(cluster, ns)["metadata"]["generation"] for ns in everything}
    assert generations == {ns: 1 if ns in nobody else 3 for ns in everything}  # created at 1
    assert standbys[0].metric(cluster.http, LEADER) == 1
    # Shard 1 never noticed: same leader, which did all of its reloads; its standby none.
    assert holder(cluster.api_client, layout.leases[1]).endswith(f"-{leaders[1].pid}")
    assert leaders[1].metric(cluster.http, LEADER) == 1
    assert leaders[1].metric(cluster.http, RELOADS) == 2 * len(owned[1])
    assert standbys[1].metric(cluster.http, RELOADS) == 0
    assert standbys[1].metric(cluster.http, LEADER) == 0
    # The new leader of shard 0 wrote only its own shard's namespaces.
    assert standbys[0].metric(cluster.http, RELOADS) == len(owned[0])
