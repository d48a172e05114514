"""Two shards over six namespaces on one API server (issue 15, "Sharding").

Each instance owns the namespaces ``shard_of`` gives it: it never stores the others'
objects (dropped at the informer door) and never writes to them, so every change is
reloaded exactly once, by its owner. The stricter process-level scenario (a shard's
leader killed, its standby taking over) is the HA e2e of ``test_ha.py`` per Lease; the
shards' Leases are distinct by name (``tests/unit/test_shard.py``).
"""

from __future__ import annotations

import pytest
from kubernetes.client import CoreV1Api
from reload_helpers import configmap, create, env_of, workload

from gitops_reloader.hashing import configmap_hash
from gitops_reloader.shard import shard_of
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for

pytestmark = pytest.mark.e2e

NAMESPACES = [f"team-{i}" for i in range(6)]
RELOADS = "reloader_reload_executed_total"


def test_each_change_is_reloaded_once_by_the_shard_that_owns_its_namespace(server, api_client):
    core = CoreV1Api(api_client)
    owners = {ns: shard_of(ns, 2) for ns in NAMESPACES}
    assert set(owners.values()) == {0, 1}  # both shards own something (fixed names, fixed hash)
    for ns in NAMESPACES:
        core.create_namespace({"metadata": {"name": ns}})
        create(api_client, configmap("cfg", {"v": "1"}, namespace=ns))
        create(api_client, deployment("web", namespace=ns, annotations={"reloader.stakater.com/auto": "true"},
                                      containers=[{"name": "app", "image": "x",
                                                   "envFrom": [{"configMapRef": {"name": "cfg"}}]}]))
    with (running_controller(api_client, ["--shard-count=2", "--shard-index=0"]) as first,
          running_controller(api_client, ["--shard-count=2", "--shard-index=1"]) as second):
        apps = (first, second)
        for index, app in enumerate(apps):
            stored = {record.ref.namespace for record in app.controller.workloads()}
            assert stored == {ns for ns, owner in owners.items() if owner == index}
        for ns in NAMESPACES:
            core.patch_namespaced_config_map("cfg", ns, {"data": {"v": "2"}})
        expected = configmap_hash({"v": "2"})
        for ns in NAMESPACES:
            wait_for(lambda ns=ns: env_of(workload(server, "Deployment", "web", ns)).get(
                "STAKATER_CFG_CONFIGMAP") == expected, message=f"{ns}/web reloaded")
        for app in apps:
            settle(app)
        for index, app in enumerate(apps):
            owned = sum(1 for owner in owners.values() if owner == index)
            assert app.registry.get_sample_value(RELOADS, {"success": "true"}) == owned
            assert not app.registry.get_sample_value(RELOADS, {"success": "false"})
