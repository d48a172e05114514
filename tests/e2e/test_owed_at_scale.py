"""Issue 45: nothing owed is forgotten where the first checker's world stopped — budgets, brakes
across restarts, deletes, a hand-edited record, a fleet, a typo, a migration.

Each test drives the controller through an ordinary sequence on the API test server and judges it
by what the cluster shows (pod templates, generations, Events, the Lease); each failed on the main
it was written against (9532097's successor, 7d8843f) for the behaviour its name says.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes.client import ApiClient, AppsV1Api, CoreV1Api
from reload_helpers import call, configmap, create, env_of, events, metric, quiet, wait_event, workload
from test_reload_windows import open_window, windows_file
from test_reload_windows import rewrite as rewrite_seen

from gitops_reloader.clock import FakeClock
from gitops_reloader.hashing import configmap_hash
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for
from gitops_reloader.testing.rollouts import DeploymentPlayer

pytestmark = pytest.mark.e2e

RECORD = "/api/v1/namespaces/default/configmaps/gitops-reloader-failures"


def reader(name: str, source: str, annotations: dict[str, str] | None = None) -> dict:
    """A Deployment reading ConfigMap ``source`` whole (``envFrom``), reloaded by ``auto``."""
    return deployment(name, annotations={"reloader.stakater.com/auto": "true", **(annotations or {})},
                      containers=[{"name": "app", "image": "nginx:1.26",
                                   "envFrom": [{"configMapRef": {"name": source}}]}])


def env_name(source: str) -> str:
    return "STAKATER_" + source.upper().replace("-", "_") + "_CONFIGMAP"


def runs(server: ApiServer, name: str, source: str, data: dict[str, str]) -> bool:
    """Whether Deployment ``name``'s template records ``source`` at ``data`` (its env var)."""
    return env_of(workload(server, "Deployment", name)).get(env_name(source)) == configmap_hash(data, None)


def set_data(api_client: ApiClient, name: str, data: dict[str, str]) -> None:
    CoreV1Api(api_client).patch_namespaced_config_map(name, "ns", {"data": data})


def generation(server: ApiServer, name: str) -> int:
    return int(workload(server, "Deployment", name)["metadata"]["generation"])


def reasons(api_client: ApiClient, name: str) -> list[str]:
    return [e["reason"] for e in events(api_client, name)]


def record(api_client: ApiClient) -> dict:
    """The ledger record as the controller wrote it ({} before the first write)."""
    try:
        data = call(api_client, "GET", RECORD).get("data") or {}
    except Exception:  # 404 before the first write
        return {}
    return json.loads(data.get("ledger.json") or "{}")


# --- 1: every early return after a grant gives the slot back -----------------------------------


def test_owed_a_grant_found_synced_gives_its_budget_slot_back(server: ApiServer, api_client: ApiClient) -> None:
    """Budget 1: w1 and w2 read cfg-a, w3 reads cfg-b. cfg-a changes: w1 rolls, w2 waits. Argo CD
    syncs a new image into w2 meanwhile, so when w2 is granted it is found synced and nothing is
    written — its slot must go back, or w3's later change never rolls."""
    create(api_client, configmap("cfg-a", {"v": "0"}))
    create(api_client, configmap("cfg-b", {"v": "0"}))
    for name, source in (("w1", "cfg-a"), ("w2", "cfg-a"), ("w3", "cfg-b")):
        create(api_client, reader(name, source))
    with DeploymentPlayer(api_client, complete_after=1.0) as player, \
            running_controller(api_client, ["--max-concurrent-rollouts=1"]) as app:
        set_data(api_client, "cfg-a", {"v": "1"})
        wait_for(lambda: runs(server, "w1", "cfg-a", {"v": "1"}), message="w1 reloaded first")
        assert not runs(server, "w2", "cfg-a", {"v": "1"})  # parked behind w1
        AppsV1Api(api_client).patch_namespaced_deployment(
            "w2", "ns", {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}},
            field_manager="argocd-controller")
        wait_event(api_client, "w2", "ReloadSynced")
        wait_for(lambda: not player.under_way(), timeout=20, message="the rollouts done")
        set_data(api_client, "cfg-b", {"v": "1"})
        wait_for(lambda: runs(server, "w3", "cfg-b", {"v": "1"}), timeout=20,
                 message="w3 reloaded: the slot w2 was granted came back")
        quiet(app)
        assert generation(server, "w2") == 2  # the sync's rollout only
        assert player.order.count("w3") == 1
