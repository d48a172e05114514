"""Waves: a rollout budget over 30 Deployments on one Secret, a controller killed mid-wave
(restarted, or an HA standby taking over), a failing rollout holding the rest of its change
until the Secret changes again, priorities, and a status that never progresses.

The Deployment controller is played by :class:`DeploymentPlayer` (status subresource writes
as the real one makes them, observedGeneration lagging); the number of rollouts under way
is recorded from the cluster's watch stream. ``generation`` counts template changes, so a
Deployment reloaded exactly once for one change ends at generation 2.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from kubernetes.client import CoordinationV1Api, CoreV1Api, CustomObjectsApi
from kubernetes.client.exceptions import ApiException
from processes import HA_FLAGS, Controller, running_cluster, stop_process
from reload_helpers import configmap, create, env_of, secret, workload

from gitops_reloader.hashing import secret_hash
from gitops_reloader.rollout.marker import MARKER_ANNOTATION
from gitops_reloader.testing.harness import deployment, env_from_secret, running_controller, settle, wait_for
from gitops_reloader.testing.rollouts import DeploymentPlayer

pytestmark = pytest.mark.e2e

ENV = "STAKATER_DB_SECRET"


def names(count: int) -> list[str]:
    return [f"web-{i:02}" for i in range(count)]


def create_fleet(api_client, count: int) -> None:
    """One Secret and ``count`` Deployments using it, each already recording its hash (reloaded
    before), so that ``--sync-after-restart`` sees the ones a dead instance left out of date."""
    created = create(api_client, secret("db", {"password": "0"}))
    container = {**env_from_secret("db"), "env": [{"name": ENV, "value": secret_hash(created["data"])}]}
    for name in names(count):
        create(api_client, deployment(name, annotations={"secret.reloader.stakater.com/auto": "true"},
                                      containers=[container]))


def change_secret(api_client, value: str) -> str:
    changed = CoreV1Api(api_client).patch_namespaced_secret("db", "ns", {"stringData": {"password": value}})
    return secret_hash(changed.data)


def hashes(cluster, count: int) -> dict[str, str | None]:
    return {name: env_of(cluster.deployment(name)).get(ENV) for name in names(count)}


def events(api_client, reason: str) -> set[str]:
    listed = CoreV1Api(api_client).list_namespaced_event("ns")
    return {e.involved_object.name for e in listed.items if e.reason == reason}


def lease_holder_pid(api_client) -> int:
    """The pid of the controller holding the default Lease (identity ``<host>-<pid>``)."""
    try:
        lease = CoordinationV1Api(api_client).read_namespaced_lease("gitops-reloader", "default")
    except ApiException:
        return 0
    identity = lease.spec.holder_identity or ""
    return int(identity.rsplit("-", 1)[1]) if identity else 0


@pytest.mark.parametrize("handover", ["restart", "ha-take-over"])
def test_budget_of_5_over_30_deployments_and_a_kill_mid_wave(tmp_path: Path, handover: str) -> None:
    """The instance doing the wave is SIGKILLed with a third of it started; a restarted
    instance (``--sync-after-restart``) or the HA standby finishes it: never more than 5 under
    way, each Deployment reloaded exactly once."""
    flags = ("--coalesce-window=0", "--max-concurrent-rollouts=5", "--sync-after-restart")
    if handover == "ha-take-over":
        flags = (*flags, *HA_FLAGS)
    with running_cluster(tmp_path) as cluster, DeploymentPlayer(cluster.api_client) as player:
        create_fleet(cluster.api_client, 30)
        controllers = [Controller(cluster, tmp_path / "first.jsonl", flags)]
        if handover == "ha-take-over":
            controllers.append(Controller(cluster, tmp_path / "standby.jsonl", flags))
        try:
            for controller in controllers:
                controller.wait_ready(cluster.http)
            if handover == "ha-take-over":
                pid = wait_for(lambda: lease_holder_pid(cluster.api_client), message="a leader")
                first, = (c for c in controllers if c.pid == pid)
                wait_for(lambda: first.sample(cluster.http, "gitops_reloader_leader") == 1,
                         message="leader active")
            else:
                first = controllers[0]
            v1 = change_secret(cluster.api_client, "1")
            wait_for(lambda: len(player.started) >= 12, timeout=30, message="a third of the wave under way")
            os.kill(first.pid, signal.SIGKILL)
            first.proc.wait(5)
            assert len(player.started) < 30, "the kill came too late to be mid-wave"
            if handover == "restart":
                controllers.append(Controller(cluster, tmp_path / "second.jsonl", flags))
                controllers[-1].wait_ready(cluster.http)
            second, = (c for c in controllers if c is not first)
            wait_for(lambda: set(hashes(cluster, 30).values()) == {v1} and not player.under_way(),
                     timeout=60, message="every Deployment reloaded and rolled out")
            assert player.peak <= 5
            assert player.peak == 5  # the budget was used, not just respected
            assert {name: gens for name, gens in player.started.items()} == {n: [2] for n in names(30)}
            assert {cluster.deployment(n)["metadata"]["generation"] for n in names(30)} == {2}
            assert second.metric(cluster.http, 'gitops_reloader_rollouts{state="rolling"}') == 0
        finally:
            for controller in controllers:
                stop_process(controller.proc)


def test_a_failed_rollout_holds_its_change_until_the_secret_changes_again(tmp_path: Path) -> None:
    flags = ("--coalesce-window=0", "--max-concurrent-rollouts=2")
    fleet = names(12)
    with running_cluster(tmp_path) as cluster, DeploymentPlayer(
            cluster.api_client, complete_after=0.6, fail_after=0.2,
            fails=lambda name, generation: name == "web-00" and generation == 2) as player:
        create_fleet(cluster.api_client, 12)
        controller = Controller(cluster, tmp_path / "controller.jsonl", flags)
        try:
            controller.wait_ready(cluster.http)
            v1 = change_secret(cluster.api_client, "bad")
            wait_for(lambda: "web-00" in events(cluster.api_client, "RolloutFailed"), timeout=30,
                     message="RolloutFailed on web-00")
            reloaded = {n for n, h in hashes(cluster, 12).items() if h == v1}
            assert {"web-00", "web-01"} <= reloaded and len(reloaded) <= 3
            held = set(fleet) - reloaded
            wait_for(lambda: held <= events(cluster.api_client, "ReloadHeld"), timeout=30,
                     message="ReloadHeld on every reload not started")
            wait_for(lambda: not player.under_way(), timeout=30, message="the other first rollouts done")
            assert controller.metric(cluster.http, 'gitops_reloader_rollouts{state="held"}') == len(held)
            assert {n for n, h in hashes(cluster, 12).items() if h == v1} == reloaded  # still held

            v2 = change_secret(cluster.api_client, "fixed")
            wait_for(lambda: set(hashes(cluster, 12).values()) == {v2} and not player.under_way(),
                     timeout=60, message="the fix reaches every Deployment")
            assert player.peak <= 2
            for name in held:  # never given the bad value: one rollout, the fix
                assert player.started[name] == [2]
            assert player.started["web-00"] == [2, 3]
            assert controller.metric(cluster.http, 'gitops_reloader_rollouts{state="held"}') == 0
            failed = 'gitops_reloader_rollouts_failed_total{reason="ProgressDeadlineExceeded"}'
            assert controller.metric(cluster.http, failed) == 1
            waves = "gitops_reloader_rollout_wave_seconds_count"
            wait_for(lambda: controller.sample(cluster.http, waves) == 1,
                     message="one wave, from the first change to the fix's last rollout")
        finally:
            stop_process(controller.proc)


def test_priority_orders_the_waves_and_a_bad_priority_is_reported(api_client) -> None:
    create(api_client, secret("db", {"password": "0"}))
    priorities = {"a": None, "b": "10", "c": "5", "d": "high", "e": "-1"}
    for name, priority in priorities.items():
        annotations = {"secret.reloader.stakater.com/auto": "true"}
        if priority is not None:
            annotations["gitops-reloader.io/rollout-priority"] = priority
        create(api_client, deployment(name, annotations=annotations, containers=[env_from_secret("db")]))
    with DeploymentPlayer(api_client, complete_after=0.2) as player, \
            running_controller(api_client, ["--max-concurrent-rollouts=1"]) as app:
        change_secret(api_client, "1")
        wait_for(lambda: len(player.order) == 5 and not player.under_way(), timeout=30,
                 message="every rollout done")
        assert player.order == ["b", "c", "a", "d", "e"]  # d's bad value counts as 0
        assert player.peak == 1
        settle(app)  # idle once the wave is over: no wake-up left in the work queue
        wait_for(lambda: "d" in events(api_client, "InvalidAnnotation"), message="InvalidAnnotation on d")


def test_a_rollout_that_never_progresses_fails_at_the_timeout_and_frees_its_slot(server, api_client) -> None:
    """No controller writes status (no player): each rollout fails at --rollout-timeout;
    without the hold the next one starts then, so the budget is never blocked for good."""
    create_fleet(api_client, 3)
    flags = ["--max-concurrent-rollouts=1", "--rollout-timeout=1s", "--hold-on-failed-rollout=false"]
    with running_controller(api_client, flags):
        v1 = change_secret(api_client, "1")

        def reloaded() -> set[str]:
            return {n for n in names(3) if env_of(workload(server, "Deployment", n)).get(ENV) == v1}

        wait_for(lambda: reloaded(), message="the first rollout")
        assert len(reloaded()) == 1  # the others wait for the first one's timeout
        wait_for(lambda: events(api_client, "RolloutFailed") == set(names(3)), timeout=30,
                 message="each rollout failed at the timeout, one after the other")
        assert reloaded() == set(names(3))


def argo_rollout(name: str, annotations: dict[str, str]) -> dict:
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": name, "namespace": "ns",
                         "annotations": {"configmap.reloader.stakater.com/reload": "cfg", **annotations}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "strategy": {"canary": {"steps": [{"setWeight": 50}]}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                         {"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}}}}


def test_argo_rollouts_count_until_healthy(server, api_client) -> None:
    """A Rollout patched with a JSON patch (template edit) and one restarted through
    ``spec.restartAt``: both carry the marker, and the second waits until Argo reports the
    first ``Healthy`` for its new generation."""
    custom = CustomObjectsApi(api_client)
    create(api_client, configmap("cfg", {"v": "1"}))
    for name, extra in (("a", {}), ("b", {"reloader.stakater.com/rollout-strategy": "restart"})):
        custom.create_namespaced_custom_object("argoproj.io", "v1alpha1", "ns", "rollouts",
                                               argo_rollout(name, extra))

    def rollout(name: str) -> dict:
        return server.get_object("rollouts", "ns", name)

    def healthy(name: str) -> None:
        generation = rollout(name)["metadata"]["generation"]
        custom.patch_namespaced_custom_object_status("argoproj.io", "v1alpha1", "ns", "rollouts", name, {
            "status": {"observedGeneration": str(generation), "phase": "Healthy"}})

    with running_controller(api_client, ["--is-argo-rollouts", "--max-concurrent-rollouts=1"]) as app:
        CoreV1Api(api_client).patch_namespaced_config_map("cfg", "ns", {"data": {"v": "2"}})
        wait_for(lambda: rollout("a")["metadata"]["generation"] == 2, message="a reloaded")
        assert MARKER_ANNOTATION in rollout("a")["metadata"]["annotations"]
        assert wait_for(lambda: app.controller.waves.tracker.rollouts(time.time()), message="a tracked")
        assert "restartAt" not in rollout("b")["spec"]  # waits for a
        healthy("a")
        wait_for(lambda: rollout("b")["spec"].get("restartAt"), message="b restarted after a")
        assert MARKER_ANNOTATION in rollout("b")["metadata"]["annotations"]
        healthy("b")
        wait_for(lambda: not app.controller.waves.tracker.rollouts(time.time()), message="b done")
        settle(app)


def test_a_dispatch_right_after_a_write_never_grants_past_the_budget(api_client) -> None:
    """The worst interleaving, forced: the waves dispatch again the moment a write's grant goes
    back (another worker's dispatch running in between). The written rollout must count by
    then, or a second one starts with a budget of one (a gap the ledger refactor opened)."""
    create(api_client, secret("db", {"password": "0"}))
    for name in ("a", "b", "c"):
        create(api_client, deployment(name, annotations={"secret.reloader.stakater.com/auto": "true"},
                                      containers=[env_from_secret("db")]))
    with DeploymentPlayer(api_client, complete_after=0.3) as player, \
            running_controller(api_client, ["--max-concurrent-rollouts=1"]) as app:
        waves = app.controller.waves
        release = waves.release

        def release_then_dispatch(ref) -> None:
            release(ref)
            waves.dispatch()
        waves.release = release_then_dispatch
        change_secret(api_client, "1")
        wait_for(lambda: len(player.order) == 3 and not player.under_way(), timeout=30,
                 message="every rollout done")
    assert player.peak == 1
