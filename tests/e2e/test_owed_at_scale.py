"""Issue 45: nothing owed is forgotten where the first checker's world stopped — budgets, brakes
across restarts, deletes, a hand-edited record, a fleet, a typo, a migration.

Each test drives the controller through an ordinary sequence on the API test server and judges it
by what the cluster shows (pod templates, generations, Events, the Lease); each failed on the main
it was written against (9532097's successor, 7d8843f) for the behaviour its name says.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest
from kubernetes.client import ApiClient, AppsV1Api, CoordinationV1Api, CoreV1Api
from processes import HA_FLAGS, Controller, running_cluster, stop_process
from reload_helpers import call, configmap, create, env_of, events, metric, quiet, wait_event, workload
from test_reload_windows import open_window, windows_file
from test_reload_windows import rewrite as rewrite_seen
from test_rollout_waves import lease_holder_pid

from gitops_reloader.clock import FakeClock
from gitops_reloader.hashing import configmap_hash
from gitops_reloader.ledger import Wait
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for
from gitops_reloader.testing.rollouts import DeploymentPlayer

pytestmark = pytest.mark.e2e

RECORD = "/api/v1/namespaces/default/configmaps/gitops-reloader-failures"
RELOAD = {"configmap.reloader.stakater.com/reload": "app-config"}


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


def test_owed_a_grant_found_synced_gives_its_budget_slot_back(
        server: ApiServer, api_client: ApiClient) -> None:
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
        image = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}
        AppsV1Api(api_client).patch_namespaced_deployment("w2", "ns", image, field_manager="argocd")
        wait_event(api_client, "w2", "ReloadSynced")
        wait_for(lambda: not player.under_way(), timeout=20, message="the rollouts done")
        set_data(api_client, "cfg-b", {"v": "1"})
        wait_for(lambda: runs(server, "w3", "cfg-b", {"v": "1"}), timeout=20,
                 message="w3 reloaded: the slot w2 was granted came back")
        quiet(app)
        assert generation(server, "w2") == 2  # the sync's rollout only
        assert player.order.count("w3") == 1


# --- 2: a reload parked for the budget is granted after a restart, with any flags ---------------


@pytest.mark.parametrize("second_flags", [["--max-concurrent-rollouts=1"], []],
                         ids=["same-budget", "budget-removed"])
def test_owed_a_reload_parked_for_the_budget_is_granted_after_a_restart(
        server: ApiServer, api_client: ApiClient, second_flags: list[str]) -> None:
    """Budget 1: cfg-a changes, w1 rolls; cfg-b changes, w2 waits for the budget. A graceful
    restart (the budget kept, or removed): w2 is still reloaded, once w1's rollout is done."""
    create(api_client, configmap("cfg-a", {"v": "0"}))
    create(api_client, configmap("cfg-b", {"v": "0"}))
    create(api_client, reader("w1", "cfg-a"))
    create(api_client, reader("w2", "cfg-b"))
    with DeploymentPlayer(api_client, complete_after=3.0) as player:
        with running_controller(api_client, ["--max-concurrent-rollouts=1"]) as app:
            set_data(api_client, "cfg-a", {"v": "1"})
            wait_for(lambda: runs(server, "w1", "cfg-a", {"v": "1"}), message="w1 reloaded")
            set_data(api_client, "cfg-b", {"v": "1"})
            wait_for(lambda: app.controller.ledger.reasons().get("budget") == 1, message="w2 parked")
        assert not runs(server, "w2", "cfg-b", {"v": "1"})
        assert [e["w"] for e in record(api_client)["entries"]] == ["ns/Deployment/w2"]
        with running_controller(api_client, second_flags) as app:
            wait_for(lambda: runs(server, "w2", "cfg-b", {"v": "1"}), timeout=20,
                     message="w2 granted by the next instance")
            wait_for(lambda: not player.under_way(), timeout=20, message="rollouts done")
            quiet(app)
            assert generation(server, "w2") == 2
            assert app.controller.ledger.reasons() == {}


# --- 3: a deleted workload leaves the ledger and the record ----------------------------------


def test_owed_a_workload_deleted_while_parked_leaves_the_ledger_and_the_record(
        server: ApiServer, api_client: ApiClient) -> None:
    """Budget 1, w2 parked behind w1's rollout, then w2 is deleted: nothing is owed to it any
    more — not in the ledger, not in ``ledger_entries{why="budget"}``, not in the record."""
    create(api_client, configmap("cfg-a", {"v": "0"}))
    for name in ("w1", "w2"):
        create(api_client, reader(name, "cfg-a"))
    with DeploymentPlayer(api_client, complete_after=30.0), \
            running_controller(api_client, ["--max-concurrent-rollouts=1"]) as app:
        set_data(api_client, "cfg-a", {"v": "1"})
        wait_for(lambda: app.controller.ledger.reasons().get("budget") == 1, message="one parked")
        parked, = app.controller.ledger.held(Wait.BUDGET)
        wait_for(lambda: [e["w"] for e in record(api_client).get("entries", [])] == [parked],
                 message="the parked reload recorded")
        AppsV1Api(api_client).delete_namespaced_deployment(parked.rsplit("/", 1)[1], "ns")
        wait_for(lambda: metric(app, "ledger_entries", why="budget") == 0, message="gone from the ledger")
        wait_for(lambda: record(api_client).get("entries") == [], message="gone from the record")


# --- 5: a storm brake holds across a restart with --sync-after-restart ---------------------------


def test_owed_a_storm_brake_is_not_let_through_early_by_the_start_up_check(
        server: ApiServer, api_client: ApiClient) -> None:
    """Braked at one reload an hour: v1 written, v2 held by the brake. A restart with
    ``--sync-after-restart`` (what an HA take-over does too) finds the workload out of date: it
    still waits for the brake's hour — nothing within a minute, v2 once the hour is up."""
    clock = FakeClock()
    create(api_client, configmap("app-config", {"url": "v0"}))
    braked = {**RELOAD, "gitops-reloader.io/max-reloads": "1/1h"}
    create(api_client, deployment("web", annotations=braked))
    flags = ["--source-backoff-cap=0", "--sync-after-restart"]
    with running_controller(api_client, flags, clock=clock) as app:
        rewrite_seen(api_client, "v1", app, clock)
        assert runs(server, "web", "app-config", {"url": "v1"})
        rewrite_seen(api_client, "v2", app, clock)
        wait_event(api_client, "web", "ReloadThrottled")
    with running_controller(api_client, flags, clock=clock) as app:
        for _ in range(6):
            clock.advance(10)
            app.controller.queue.wake()
            settle(app)
        assert runs(server, "web", "app-config", {"url": "v1"})  # a minute on: still held
        clock.advance(3600)
        app.controller.queue.wake()
        wait_for(lambda: runs(server, "web", "app-config", {"url": "v2"}), message="v2 once the hour is up")
        quiet(app)
        assert generation(server, "web") == 3
        assert reasons(api_client, "web").count("ReloadThrottled") == 1  # announced once


# --- 6: a held reload follows the window configuration in force now ---------------------------------

EARLY_ONLY = """\
windows:
  - name: early
    schedule: "0 6 * * *"
    timeZone: UTC
    duration: 1h
default: early
"""
MOVED = EARLY_ONLY.replace('"0 6 * * *"', '"* * * * *"')


def test_owed_a_held_reload_follows_a_window_moved_across_a_restart(
        server: ApiServer, api_client: ApiClient, tmp_path: Path) -> None:
    """A change held by the default window (opens at 06:00); the operator moves the window to one
    that is open now and restarts: the held reload goes at once, not at the old opening time."""
    clock = FakeClock()
    path = tmp_path / "windows.yaml"
    path.write_text(EARLY_ONLY)
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations=RELOAD))
    flags = [f"--reload-windows-config={path}"]
    with running_controller(api_client, flags, clock=clock) as app:
        rewrite_seen(api_client, "v1", app, clock)
        wait_event(api_client, "web", "ReloadWaitingForWindow")
    path.write_text(MOVED)
    with running_controller(api_client, flags, clock=clock) as app:
        wait_for(lambda: runs(server, "web", "app-config", {"url": "v1"}), timeout=10,
                 message="reloaded in the window configured now")
        quiet(app)
        assert generation(server, "web") == 2


def test_owed_a_held_reload_is_not_announced_again_when_its_window_is_asked_again(
        server: ApiServer, api_client: ApiClient, tmp_path: Path) -> None:
    """The same restart with the window unchanged: still held, and the wait announced once."""
    clock = FakeClock()
    flags = [windows_file(tmp_path, default="early")]
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations=RELOAD))
    with running_controller(api_client, flags, clock=clock) as app:
        rewrite_seen(api_client, "v1", app, clock)
        wait_event(api_client, "web", "ReloadWaitingForWindow")
    with running_controller(api_client, flags, clock=clock) as app:
        settle(app)
        assert not runs(server, "web", "app-config", {"url": "v1"})
        open_window(app, clock)
        wait_for(lambda: runs(server, "web", "app-config", {"url": "v1"}), message="reloaded at the opening")
        app.recorder.flush()
        assert reasons(api_client, "web").count("ReloadWaitingForWindow") == 1


# --- 8: a sink-name typo holds the change for a person -------------------------------------------


def test_owed_a_sink_name_typo_holds_the_change_until_the_annotation_is_fixed(
        server: ApiServer, api_client: ApiClient) -> None:
    """``gitops-reloader.io/sink: env-var`` (a typo): the change is held, said once with a
    Warning, and counted as ``needs-person``; fixing the annotation reloads it at once."""
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations={**RELOAD, "gitops-reloader.io/sink": "env-var"}))
    with running_controller(api_client, ["--retry-max-delay=5m"]) as app:
        set_data(api_client, "app-config", {"url": "v1"})
        wait_event(api_client, "web", "UnknownSink")
        wait_for(lambda: metric(app, "ledger_entries", why="needs-person") == 1, message="held for a person")
        AppsV1Api(api_client).patch_namespaced_deployment(
            "web", "ns", {"metadata": {"annotations": {"gitops-reloader.io/sink": "env-vars"}}})
        wait_for(lambda: runs(server, "web", "app-config", {"url": "v1"}), timeout=10, message="reloaded")
        quiet(app)
        assert generation(server, "web") == 2
        assert reasons(api_client, "web").count("UnknownSink") == 1
        assert metric(app, "ledger_entries", why="needs-person") == 0


# --- 4: a hand-edited record stops nothing ------------------------------------------------------


def hostile_record() -> str:
    """A record as a person may leave it: ``since`` of 400 digits, ``attempts: 1e999``, ``until:
    1e999`` (each an entry the decoder must skip, not raise on), and one good entry."""
    failing = {"w": "ns/Deployment/a", "owes": {"ConfigMap/app-config": {"v": "1"}},
               "fail": {"key": "ns/Deployment/a", "sink": "env-vars", "reason": "ServerError",
                        "class": "transient", "since": "SINCE", "attempts": 1, "next": 1, "raised": False}}
    entries = [failing,
               {**failing, "w": "ns/Deployment/b",
                "fail": {**failing["fail"], "since": 1, "attempts": "ATTEMPTS"}},
               {"w": "ns/Deployment/c", "owes": {"ConfigMap/app-config": {"v": "1"}},
                "hold": {"why": "brake", "until": "UNTIL", "detail": "workload"}},
               {"w": "ns/Deployment/web", "owes": {"ConfigMap/app-config": {"v": "1"}}}]
    text = json.dumps({"v": 2, "entries": entries, "truncated": 0})
    return (text.replace('"SINCE"', "1" + "0" * 400).replace('"ATTEMPTS"', "1e999")
            .replace('"UNTIL"', "1e999"))


@pytest.mark.parametrize("ha", [False, True], ids=["single", "ha"])
def test_owed_a_hand_edited_record_neither_stops_the_controller_nor_its_leadership(
        tmp_path: Path, ha: bool) -> None:
    """The controller starts on that record (no crash loop), keeps the Lease when it leads (no dead
    election thread), says what it skipped, reloads the next change and writes the record again."""
    with running_cluster(tmp_path) as cluster:
        api_client = cluster.api_client
        CoreV1Api(api_client).create_namespaced_config_map("default", {
            "metadata": {"name": "gitops-reloader-failures"}, "data": {"ledger.json": hostile_record()}})
        create(api_client, configmap("app-config", {"url": "v0"}))
        for name in ("a", "b", "c", "web"):
            create(api_client, deployment(name, annotations=RELOAD))
        flags = (*HA_FLAGS,) if ha else ("--coalesce-window=0",)
        controller = Controller(cluster, tmp_path / "controller.jsonl", flags)
        try:
            controller.wait_ready(cluster.http)
            if ha:
                wait_for(lambda: lease_holder_pid(api_client) == controller.pid, message="it leads")
            skipped = "gitops_reloader_ledger_record_skipped_total"
            wait_for(lambda: controller.sample(cluster.http, skipped) == 3,
                     message="the three hostile entries skipped, and counted")
            set_data(api_client, "app-config", {"url": "v1"})
            wait_for(lambda: all(env_of(cluster.deployment(n)).get(env_name("app-config")) ==
                                 configmap_hash({"url": "v1"}, None) for n in ("a", "b", "c", "web")),
                     timeout=30, message="every reader reloaded")
            wait_for(lambda: "1e999" not in str(record(api_client)) and record(api_client).get("v") == 3,
                     message="the record written again")
            assert controller.proc.poll() is None
            if ha:
                renewed = CoordinationV1Api(api_client).read_namespaced_lease("gitops-reloader", "default")
                wait_for(lambda: CoordinationV1Api(api_client).read_namespaced_lease(
                    "gitops-reloader", "default").spec.renew_time > renewed.spec.renew_time,
                    message="the Lease still renewed")
            skipped = [r for r in controller.log() if "items skipped" in r["msg"]]
            assert skipped and skipped[0]["object"] == "default/ConfigMap/gitops-reloader-failures"
        finally:
            stop_process(controller.proc)


# --- 7: a fleet held by a window: every reader reloaded after a restart, each once ----------------

FLEET = int(os.environ.get("FLEET", "5000"))


def load(server: ApiServer, resource: str, items: list[dict], group: str = "") -> None:
    """Seed objects through the API test server's bulk-load path (one request per 500)."""
    for start in range(0, len(items), 500):
        body = json.dumps({"group": group, "version": "v1", "resource": resource,
                           "items": items[start:start + 500]}).encode()
        request = urllib.request.Request(f"{server.url}/_testing/load", method="POST", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            assert json.load(response)["created"] == len(items[start:start + 500])


def far_opening(now: float) -> float:
    """The start of the UTC hour twelve hours after ``now``'s: a daily window there is shut now."""
    return (now // 3600 + 12) * 3600


def far_window_file(tmp_path: Path, opens: float) -> str:
    """A default window opening daily at ``opens``'s hour (the wall clock's hour decides whether
    a fixed one is open, so a fixed hour would make the test depend on when it runs)."""
    path = tmp_path / "windows.yaml"
    hour = time.gmtime(opens).tm_hour
    path.write_text(f"windows:\n  - name: later\n    schedule: \"0 {hour} * * *\"\n    timeZone: UTC\n"
                    f"    duration: 1h\ndefault: later\n")
    return f"--reload-windows-config={path}"


def test_owed_fleet_of_5000_readers_held_by_a_window_reload_once_each_after_a_restart(
        server: ApiServer, api_client: ApiClient, tmp_path: Path) -> None:
    """5,000 never-reloaded Deployments read one ConfigMap; a default window holds its change; the
    controller restarts; the window opens: all 5,000 reload, each once (generation 2). The record
    holds the change once, not 5,000 times (it dropped a third of them when it did)."""
    clock = FakeClock(wall=time.time())  # creation times are the API server's: the same clock
    create(api_client, configmap("app-config", {"url": "v0"}))
    fleet = [f"app-{i:05}" for i in range(FLEET)]
    load(server, "deployments", [deployment(name, annotations=RELOAD) for name in fleet], group="apps")
    opens = far_opening(clock.now())
    flags = [far_window_file(tmp_path, opens), "--workers=8"]
    with running_controller(api_client, flags, clock=clock) as app:
        set_data(api_client, "app-config", {"url": "v1"})
        wait_for(lambda: len(app.controller.ledger) == FLEET, timeout=60, interval=0.5,
                 message="the change seen")
        clock.advance(5)  # past the coalescing window
        app.controller.queue.wake()
        wait_for(lambda: app.controller.ledger.reasons() == {"window": FLEET} and app.controller.idle(),
                 timeout=120, interval=0.5, message="all held")
        assert metric(app, "waiting_for_window") == FLEET
    written = record(api_client)
    assert written["truncated"] == 0 and written["entries"] == []
    assert [c["n"] for c in written["shared"]] == [FLEET]
    assert len(json.dumps(written)) < 1024
    with running_controller(api_client, flags, clock=clock) as app:
        # Held as recorded, and each checked again by a worker (idle): the clock jumps twelve
        # hours below; a worker still checking reads it before and after the jump, and its key
        # would wait another twelve.
        wait_for(lambda: app.controller.ledger.reasons() == {"window": FLEET} and app.controller.idle(),
                 timeout=120, interval=0.5, message="all held again")
        clock.advance(opens - clock.now() + 1)
        app.controller.queue.wake()
        controller = app.controller
        wait_for(lambda: not controller.ledger.reasons() and controller.idle(), timeout=600, interval=0.5,
                 message=lambda: f"the window's reloads done (left: {controller.ledger.reasons()}, "
                                 f"queue: {controller.queue.depth()})")
        quiet(app)
    target = configmap_hash({"url": "v1"}, None)
    deployments = AppsV1Api(api_client).list_namespaced_deployment("ns").items
    assert len(deployments) == FLEET
    assert {d.metadata.generation for d in deployments} == {2}  # each reloaded once
    assert {next(e.value for e in d.spec.template.spec.containers[0].env if e.name == env_name("app-config"))
            for d in deployments} == {target}


# --- 9: switched from Stakater, a second source changed while no controller ran ---------------------


def written_at(api_client: ApiClient, name: str) -> int:
    """The newest managedFields time of ConfigMap ``name`` (the API server's own record of writes)."""
    stored = call(api_client, "GET", f"/api/v1/namespaces/ns/configmaps/{name}")
    return max(int(datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp())
               for e in stored["metadata"]["managedFields"])


def stakater_reloaded(name: str, sources: list[str], recorded: str, observed_at: int) -> dict:
    """A Deployment reading ``sources``, last reloaded by Stakater Reloader with the annotations
    strategy for ``recorded`` at ``observed_at`` (its ``last-reloaded-from``, as Stakater writes it)."""
    record_json = json.dumps({"type": "CONFIGMAP", "name": recorded, "namespace": "ns",
                              "hash": configmap_hash({"v": "0"}, None), "containerRefs": ["app"],
                              "observedAt": observed_at}, separators=(",", ":"))
    return deployment(name, annotations={"reloader.stakater.com/auto": "true"},
                      template_annotations={"reloader.stakater.com/last-reloaded-from": record_json},
                      containers=[{"name": "app", "image": "nginx",
                                   "envFrom": [{"configMapRef": {"name": s}} for s in sources]}])


def test_owed_a_second_source_changed_before_the_switch_from_stakater_is_repaired(
        server: ApiServer, api_client: ApiClient) -> None:
    """Two Deployments switched from Stakater Reloader (annotations strategy), each last reloaded
    for ``app-config``: ``gap`` reads ``flags``, written after that reload while no controller ran;
    ``current`` reads ``other``, written before its reload. The resync repairs ``gap`` (once) and
    leaves ``current`` alone: what the cluster says (when each was written) decides."""
    for name in ("app-config", "flags", "other"):
        create(api_client, configmap(name, {"v": "0"}))
    set_data(api_client, "flags", {"v": "1"})  # after gap's last reload (below)
    create(api_client, stakater_reloaded("gap", ["app-config", "flags"], "app-config",
                                         written_at(api_client, "flags") - 60))
    create(api_client, stakater_reloaded("current", ["app-config", "other"], "app-config",
                                         written_at(api_client, "other") + 1))
    flags = ["--reload-strategy=annotations", "--resync-period=200ms"]
    with running_controller(api_client, flags) as app:
        wait_for(lambda: '"name":"flags"' in str(workload(server, "Deployment", "gap")["spec"]["template"]),
                 message="the resync repairs gap")
        passes = metric(app, "resync_passes_total")
        wait_for(lambda: metric(app, "resync_passes_total") >= passes + 3, message="more passes")
        quiet(app)
        assert generation(server, "gap") == 2  # once
        assert generation(server, "current") == 1
