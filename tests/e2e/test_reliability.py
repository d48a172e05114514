"""Faults between the controller and the API server: every change reloads exactly once.

Each test makes N data changes, each to its own ConfigMap used by its own Deployment,
while the API server misbehaves, then checks every Deployment carries the latest hash and
was written exactly once per change.
"""

from __future__ import annotations

import pytest
from reload_helpers import call, configmap, create, env_of, workload

from gitops_reloader.hashing import configmap_hash
from gitops_reloader.testing.apiserver import Fault
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for

pytestmark = pytest.mark.e2e

N = 8


def setup_pairs(api_client, n=N):
    for i in range(n):
        create(api_client, configmap(f"cfg-{i}", {"v": "0"}))
        create(api_client, deployment(
            f"web-{i}", annotations={"reloader.stakater.com/auto": "true"},
            containers=[{"name": "app", "image": "x",
                         "envFrom": [{"configMapRef": {"name": f"cfg-{i}"}}]}]))


def change(api_client, i, value):
    call(api_client, "PATCH", f"/api/v1/namespaces/ns/configmaps/cfg-{i}",
         {"data": {"v": value}}, "application/merge-patch+json")


def all_current(server, value, n=N):
    expected = configmap_hash({"v": value})
    return all(env_of(workload(server, "Deployment", f"web-{i}")).get(
        "STAKATER_CFG_" + str(i) + "_CONFIGMAP") == expected for i in range(n))


def deployment_patches(server):
    return server.request_counts().get(("patch", "deployments"), 0)


def test_watch_cut_mid_stream_loses_no_change(server, api_client):
    setup_pairs(api_client)
    with running_controller(api_client) as app:
        server.cut_watches_after(2)
        for i in range(N):
            change(api_client, i, "1")
        wait_for(lambda: all_current(server, "1"), timeout=20, message="all reloaded")
        server.cut_watches_after(0)
        settle(app)
        assert deployment_patches(server) == N


def test_410_storm_relists_without_spurious_reloads(server, api_client):
    setup_pairs(api_client)
    with running_controller(api_client) as app:
        for round_ in range(3):
            for i in range(N):
                change(api_client, i, str(round_ + 1))
            server.restart(compact=True)
        wait_for(lambda: all_current(server, "3"), timeout=20, message="all reloaded")
        settle(app)
        patches = deployment_patches(server)
        # at most one write per change, at least one per workload; none for relists
        assert N <= patches <= 3 * N
        for _ in range(3):
            server.restart(compact=True)
        wait_for(lambda: all(i.has_synced() for i in app.controller.informers()))
        settle(app)
        assert deployment_patches(server) == patches


def test_409_on_every_first_write_is_retried(server, api_client):
    setup_pairs(api_client)
    with running_controller(api_client) as app:
        server.add_fault(Fault(verb="patch", resource="deployments", status=409, times=N))
        for i in range(N):
            change(api_client, i, "1")
        wait_for(lambda: all_current(server, "1"), timeout=20, message="all reloaded")
        settle(app)
        # N rejected + N applied
        assert deployment_patches(server) == 2 * N


def test_500s_for_a_while_then_everything_lands(server, api_client):
    setup_pairs(api_client)
    with running_controller(api_client, ["--max-retries=20"]) as app:
        server.add_fault(Fault(verb="patch", resource="deployments", status=500, times=3 * N))
        for i in range(N):
            change(api_client, i, "1")
        wait_for(lambda: all_current(server, "1"), timeout=30, message="all reloaded")
        settle(app)
        assert deployment_patches(server) == 4 * N


def test_429_with_retry_after_is_honoured(server, api_client):
    setup_pairs(api_client, 2)
    with running_controller(api_client) as app:
        server.add_fault(Fault(verb="patch", resource="deployments", status=429, times=2,
                               retry_after=0.2))
        for i in range(2):
            change(api_client, i, "1")
        wait_for(lambda: all_current(server, "1", 2), timeout=20, message="all reloaded")
        settle(app)


def test_relist_with_nothing_changed_writes_nothing(server, api_client):
    setup_pairs(api_client)
    with running_controller(api_client) as app:
        server.restart(compact=True)
        server.cut_watches()
        wait_for(lambda: all(i.has_synced() for i in app.controller.informers()))
        settle(app)
        assert deployment_patches(server) == 0


def test_restart_of_controller_touches_nothing(server, api_client):
    setup_pairs(api_client, 3)
    with running_controller(api_client) as app:
        change(api_client, 0, "1")
        wait_for(lambda: all_current(server, "1", 1))
        settle(app)
    before = deployment_patches(server)
    with running_controller(api_client) as app:
        settle(app)
    with running_controller(api_client, ["--sync-after-restart"]) as app:
        settle(app)
    assert deployment_patches(server) == before
