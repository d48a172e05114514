"""Two shards over six namespaces on one API server (issue 15, "Sharding").

Each instance owns the namespaces ``shard_of`` gives it: it never stores the others'
objects (dropped at the informer door) and never writes to them, so every change is
reloaded exactly once, by its owner. With label shards (``--namespace-selector``) a
namespace relabelled mid-run is handed over: its next change is reloaded once, by the
new owner, and the hand-over itself writes nothing. A shard's leader killed, with its
standby taking over, is ``test_sharding_ha.py`` (real processes).
"""

from __future__ import annotations

import logging

import pytest
from kubernetes.client import CoreV1Api
from reload_helpers import configmap, create, env_of, workload

from gitops_reloader.app import App
from gitops_reloader.hashing import configmap_hash
from gitops_reloader.model import SourceKind, SourceRef
from gitops_reloader.shard import shard_of
from gitops_reloader.testing.apiserver import Fault
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


def create_mover(core: CoreV1Api, api_client) -> None:
    """Namespace ``mover`` on shard ``a``, with ``cfg`` and a Deployment ``web`` using it."""
    core.create_namespace({"metadata": {"name": "mover", "labels": {"shard": "a"}}})
    create(api_client, configmap("cfg", {"v": "1"}, namespace="mover"))
    create(api_client, deployment("web", namespace="mover",
                                  annotations={"reloader.stakater.com/auto": "true"},
                                  containers=[{"name": "app", "image": "x",
                                               "envFrom": [{"configMapRef": {"name": "cfg"}}]}]))


def acts_in(app: App, namespace: str) -> bool:
    """Whether ``app`` would reload ``namespace``/web for a change to its ConfigMap now."""
    meta = app.controller.source(SourceRef(SourceKind.CONFIGMAP, namespace, "cfg"))
    assert meta is not None, f"{namespace}/cfg not cached"  # label shards list every namespace
    return bool(app.controller.requests_for_change(meta.replace(hash="next")))


def test_relabelled_namespace_is_handed_over_and_its_next_change_reloads_once_by_the_new_shard(
        server, api_client, caplog):
    caplog.set_level(logging.INFO, logger="gitops_reloader")
    core = CoreV1Api(api_client)
    labels = {"alpha": "a", "beta": "b", "mover": "a"}
    for ns, shard in labels.items():
        core.create_namespace({"metadata": {"name": ns, "labels": {"shard": shard}}})
        create(api_client, configmap("cfg", {"v": "1"}, namespace=ns))
        create(api_client, deployment("web", namespace=ns, annotations={"reloader.stakater.com/auto": "true"},
                                      containers=[{"name": "app", "image": "x",
                                                   "envFrom": [{"configMapRef": {"name": "cfg"}}]}]))

    def change_all(value: str) -> None:
        for ns in labels:
            core.patch_namespaced_config_map("cfg", ns, {"data": {"v": value}})
        expected = configmap_hash({"v": value})
        for ns in labels:
            wait_for(lambda ns=ns: env_of(workload(server, "Deployment", "web", ns)).get(
                "STAKATER_CFG_CONFIGMAP") == expected, message=f"{ns}/web reloaded with v={value}")
        for app in (a, b):
            settle(app)

    def reloads(app: App) -> float:
        assert not app.registry.get_sample_value(RELOADS, {"success": "false"})
        return app.registry.get_sample_value(RELOADS, {"success": "true"}) or 0

    def generation() -> int:
        return workload(server, "Deployment", "web", "mover")["metadata"]["generation"]

    with (running_controller(api_client, ["--namespace-selector=shard=a"]) as a,
          running_controller(api_client, ["--namespace-selector=shard=b"]) as b):
        assert [acts_in(a, "mover"), acts_in(b, "mover")] == [True, False]
        change_all("2")
        assert (reloads(a), reloads(b)) == (2, 1)  # alpha and mover by A, beta by B
        assert generation() == 2

        core.patch_namespace("mover", {"metadata": {"labels": {"shard": "b"}}})
        wait_for(lambda: not acts_in(a, "mover"), message="A releases mover")
        wait_for(lambda: acts_in(b, "mover"), message="B acquires mover")
        for app in (a, b):
            settle(app)
        moves = {(r.getMessage(), r.selector) for r in caplog.records
                 if getattr(r, "namespace", "") == "mover"}
        assert moves == {("namespace left the selector", "shard=a"),
                         ("namespace joined the selector", "shard=b")}
        # The hand-over writes nothing: B treats mover's ConfigMap as current.
        assert (reloads(a), reloads(b)) == (2, 1)
        assert generation() == 2

        change_all("3")
        assert (reloads(a), reloads(b)) == (3, 3)  # alpha by A; beta and mover by B
        assert generation() == 3  # one template write for mover's change, not two


def test_change_queued_in_the_old_shard_when_its_namespace_moves_is_reloaded_once_by_the_old_shard(
        server, api_client):
    """A change seen before the relabel belongs to the old owner, even while it still
    waits in that shard's coalescing window: the new owner does not take it over."""
    core = CoreV1Api(api_client)
    create_mover(core, api_client)
    with (running_controller(api_client, ["--namespace-selector=shard=a", "--coalesce-window=3s"]) as a,
          running_controller(api_client, ["--namespace-selector=shard=b"]) as b):
        changed = core.patch_namespaced_config_map("cfg", "mover", {"data": {"v": "2"}})
        rv = changed.metadata.resource_version
        for app in (a, b):
            wait_for(lambda app=app: app.controller.seen(SourceKind.CONFIGMAP, "mover", "cfg", rv),
                     message="both shards saw the change")
        core.patch_namespace("mover", {"metadata": {"labels": {"shard": "b"}}})
        wait_for(lambda: not acts_in(a, "mover") and acts_in(b, "mover"), message="hand-over")
        # Still inside A's window: nothing written yet.
        assert workload(server, "Deployment", "web", "mover")["metadata"]["generation"] == 1
        expected = configmap_hash({"v": "2"})
        wait_for(lambda: env_of(workload(server, "Deployment", "web", "mover")).get(
            "STAKATER_CFG_CONFIGMAP") == expected, message="mover/web reloaded")
        for app in (a, b):
            settle(app)
        assert a.registry.get_sample_value(RELOADS, {"success": "true"}) == 1
        assert not b.registry.get_sample_value(RELOADS, {"success": "true"})
        assert workload(server, "Deployment", "web", "mover")["metadata"]["generation"] == 2


def test_change_seen_by_the_new_shard_before_the_relabel_is_not_lost(server, api_client):
    """The acquiring shard's namespace watch lags (a scripted 3 s delay on that watch
    only): it sees mover's change while mover is not yet its own, declines it, and acts
    on it once the relabel arrives, because the change came after the relabel."""
    core = CoreV1Api(api_client)
    create_mover(core, api_client)
    with (running_controller(api_client, ["--namespace-selector=shard=a"]) as a,
          running_controller(api_client, ["--namespace-selector=shard=b"]) as b):
        server.add_fault(Fault("watch", "namespaces", None, latency=3.0, label_selector="shard=b"))
        server.cut_watches()
        wait_for(lambda: not server.faults.pending(), message="B's namespace watch held back")
        core.patch_namespace("mover", {"metadata": {"labels": {"shard": "b"}}})
        wait_for(lambda: not acts_in(a, "mover"), message="A releases mover")
        changed = core.patch_namespaced_config_map("cfg", "mover", {"data": {"v": "2"}})
        rv = changed.metadata.resource_version
        wait_for(lambda: b.controller.seen(SourceKind.CONFIGMAP, "mover", "cfg", rv),
                 message="B saw the change")
        assert not acts_in(b, "mover")  # B saw the change first: the relabel has not reached it
        expected = configmap_hash({"v": "2"})
        wait_for(lambda: env_of(workload(server, "Deployment", "web", "mover")).get(
            "STAKATER_CFG_CONFIGMAP") == expected, timeout=15, message="mover/web reloaded by B")
        for app in (a, b):
            settle(app)
        assert not a.registry.get_sample_value(RELOADS, {"success": "true"})
        assert b.registry.get_sample_value(RELOADS, {"success": "true"}) == 1
        assert workload(server, "Deployment", "web", "mover")["metadata"]["generation"] == 2


def test_change_seen_by_the_old_shard_before_the_relabel_is_withdrawn_at_write_time(server, api_client):
    """The releasing shard's namespace watch lags (1.5 s, inside its 3 s coalescing window):
    it takes mover's post-relabel change as its own, then the relabel arrives before the
    write and withdraws it; the new owner reloads it once, so no doubled reload."""
    core = CoreV1Api(api_client)
    create_mover(core, api_client)
    # B waits longer than A, so without the write-time check A would write first (and the
    # idempotent env-vars sink would then hide B's duplicate): A must withdraw, B write.
    with (running_controller(api_client, ["--namespace-selector=shard=a", "--coalesce-window=3s"]) as a,
          running_controller(api_client, ["--namespace-selector=shard=b", "--coalesce-window=5s"]) as b):
        server.add_fault(Fault("watch", "namespaces", None, latency=1.5, label_selector="shard=a"))
        server.cut_watches()
        wait_for(lambda: not server.faults.pending(), message="A's namespace watch held back")
        core.patch_namespace("mover", {"metadata": {"labels": {"shard": "b"}}})
        changed = core.patch_namespaced_config_map("cfg", "mover", {"data": {"v": "2"}})
        rv = changed.metadata.resource_version
        wait_for(lambda: a.controller.seen(SourceKind.CONFIGMAP, "mover", "cfg", rv),
                 message="A saw the change")
        expected = configmap_hash({"v": "2"})
        wait_for(lambda: env_of(workload(server, "Deployment", "web", "mover")).get(
            "STAKATER_CFG_CONFIGMAP") == expected, timeout=15, message="mover/web reloaded by B")
        wait_for(lambda: not acts_in(a, "mover"), message="the relabel reached A")
        for app in (a, b):
            settle(app, timeout=15)
        assert not a.registry.get_sample_value(RELOADS, {"success": "true"})
        assert b.registry.get_sample_value(RELOADS, {"success": "true"}) == 1
        assert workload(server, "Deployment", "web", "mover")["metadata"]["generation"] == 2
