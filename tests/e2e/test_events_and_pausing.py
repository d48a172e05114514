"""ACCEPTANCE "Events, kinds, pausing": create/delete events, sync after restart, pause period.

Objects are created through the official client in the API test server, the controller
runs in-process. "Not reloaded" means byte-for-byte unchanged and no API write.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import watch
from reload_helpers import call, configmap, create, env_of, set_cm_data, workload, writes

from gitops_reloader.hashing import DELETED_HASH, configmap_hash
from gitops_reloader.model import ObjectRef, SourceKind, SourceRef
from gitops_reloader.testing.apiserver import Fault
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for

pytestmark = pytest.mark.e2e

AUTO = {"reloader.stakater.com/auto": "true"}
RELOAD = {"configmap.reloader.stakater.com/reload": "app-cfg"}
CM_ENV = "STAKATER_APP_CFG_CONFIGMAP"
PAUSE_PERIOD = "deployment.reloader.stakater.com/pause-period"
PAUSED_AT = "deployment.reloader.stakater.com/paused-at"
LAST_RELOADED = "reloader.stakater.com/last-reloaded-from"


def uses_cm(name: str = "app-cfg") -> dict[str, Any]:
    return {"name": "app", "image": "nginx", "envFrom": [{"configMapRef": {"name": name}}]}


def wait_seen_created(app, name: str, rv: str) -> None:
    wait_for(lambda: app.controller.seen(SourceKind.CONFIGMAP, "ns", name, rv),
             message=f"controller to see configmaps/{name}")
    settle(app)


def wait_seen_deleted(app, name: str) -> None:
    wait_for(lambda: app.controller.source(SourceRef(SourceKind.CONFIGMAP, "ns", name)) is None,
             message=f"controller to see configmaps/{name} deleted")
    settle(app)


def cached(app, name: str, predicate) -> None:
    """Wait until the controller's own cache of Deployment ``name`` satisfies ``predicate``."""
    ref = ObjectRef("Deployment", "ns", name)
    wait_for(lambda: (r := app.controller.workload(ref)) is not None and predicate(r.raw),
             message=f"controller cache of {name}")


def last_reloaded(obj: dict[str, Any]) -> dict[str, Any]:
    return json.loads(obj["spec"]["template"]["metadata"]["annotations"][LAST_RELOADED])


# --- create and delete ---------------------------------------------------------------


def test_create_and_delete_do_nothing_by_default(server, api_client, core):
    create(api_client, configmap("old-cfg", {"v": "1"}))
    containers = [{"name": "app", "image": "x", "envFrom": [
        {"configMapRef": {"name": "old-cfg"}}, {"configMapRef": {"name": "new-cfg"}}]}]
    create(api_client, deployment("web", annotations=AUTO, containers=containers))
    with running_controller(api_client) as app:
        before, writes_before = workload(server, "Deployment", "web"), writes(server, "deployments")
        made = create(api_client, configmap("new-cfg", {"v": "1"}))
        wait_seen_created(app, "new-cfg", made["metadata"]["resourceVersion"])
        core.delete_namespaced_config_map("old-cfg", "ns")
        wait_seen_deleted(app, "old-cfg")
        assert workload(server, "Deployment", "web") == before
        assert writes(server, "deployments") == writes_before


@pytest.mark.parametrize("flag", [["--reload-on-create"], ["--reload-on-create=true"],
                                  ["--reload-on-create", "true"]])
def test_reload_on_create_reloads_workloads_of_a_configmap_created_after_start(
        server, api_client, flag):
    create(api_client, configmap("existing", {"v": "1"}))
    create(api_client, deployment("web", annotations=AUTO, containers=[uses_cm("app-cfg")]))
    create(api_client, deployment("old", annotations=AUTO, containers=[uses_cm("existing")]))
    with running_controller(api_client, flag) as app:
        settle(app)
        assert writes(server, "deployments") == 2  # start-up: the pre-existing CM reloads nothing
        made = create(api_client, configmap("app-cfg", {"v": "1"}))
        wait_seen_created(app, "app-cfg", made["metadata"]["resourceVersion"])
        wait_for(lambda: env_of(workload(server, "Deployment", "web")) == {
            CM_ENV: configmap_hash({"v": "1"})}, message="reloaded on create")
        assert env_of(workload(server, "Deployment", "old")) == {}


def test_reload_on_delete_env_vars_removes_the_env_var(server, api_client, core):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, configmap("other", {"v": "1"}))
    containers = [{"name": "app", "image": "x", "env": [{"name": "KEEP", "value": "me"}],
                   "envFrom": [{"configMapRef": {"name": "app-cfg"}}, {"configMapRef": {"name": "other"}}]}]
    create(api_client, deployment("web", annotations=AUTO, containers=containers))
    with running_controller(api_client, ["--reload-on-delete"]) as app:
        set_cm_data(app, api_client, "app-cfg", {"v": "2"})
        set_cm_data(app, api_client, "other", {"v": "2"})
        assert set(env_of(workload(server, "Deployment", "web"))) == {
            CM_ENV, "STAKATER_OTHER_CONFIGMAP", "KEEP"}
        core.delete_namespaced_config_map("app-cfg", "ns")
        wait_seen_deleted(app, "app-cfg")
        wait_for(lambda: env_of(workload(server, "Deployment", "web")) == {
            "KEEP": "me", "STAKATER_OTHER_CONFIGMAP": configmap_hash({"v": "2"})},
            message="env var removed")


def test_reload_on_delete_annotations_writes_the_delete_marker_hash(server, api_client, core):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, deployment("web", annotations=AUTO, containers=[uses_cm()]))
    with running_controller(api_client, ["--reload-on-delete=true",
                                         "--reload-strategy=annotations"]) as app:
        set_cm_data(app, api_client, "app-cfg", {"v": "2"})
        assert last_reloaded(workload(server, "Deployment", "web"))["hash"] == configmap_hash({"v": "2"})
        core.delete_namespaced_config_map("app-cfg", "ns")
        wait_seen_deleted(app, "app-cfg")
        record = wait_for(lambda: (r := last_reloaded(workload(server, "Deployment", "web")))
                          ["hash"] == DELETED_HASH and r, message="delete marker")
    assert DELETED_HASH == "aae45badef99284e4dae01d6046154ea9d99532f"
    assert (record["type"], record["name"], record["namespace"], record["hash"]) == (
        "CONFIGMAP", "app-cfg", "ns", DELETED_HASH)


def test_reload_on_delete_reaches_a_workload_created_just_before_and_heard_of_after_it(server, api_client):
    """Stakater's flags suite creates a Deployment and deletes its ConfigMap ~60 ms later: the
    delete may come in before the Deployment's creation (two watches, no set order). A delete is
    remembered as a change is (control/latecomers.py), so the workload created before it is owed
    it; here the Deployment watch is held back so the delete is heard of first."""
    create(api_client, configmap("app-cfg", {"v": "1"}))
    web = ObjectRef("Deployment", "ns", "web")
    with running_controller(api_client, ["--reload-on-delete", "--reload-strategy=annotations"]) as app:
        server.add_fault(Fault(verb="watch", resource="deployments", status=None, latency=3.0, times=1))
        server.cut_watches()
        create(api_client, deployment("web", annotations=RELOAD))
        created = writes(server, "deployments")
        call(api_client, "DELETE", "/api/v1/namespaces/ns/configmaps/app-cfg")
        wait_seen_deleted(app, "app-cfg")
        assert app.controller.workload(web) is None  # the Deployment not heard of yet
        wait_for(lambda: writes(server, "deployments") > created, timeout=15,
                 message="reloaded for the delete")
        settle(app)
    record = last_reloaded(workload(server, "Deployment", "web"))
    assert (record["name"], record["hash"]) == ("app-cfg", DELETED_HASH)
    assert writes(server, "deployments") == created + 1


def test_delete_and_recreate_with_other_data_is_a_change_with_same_data_is_not(
        server, api_client, core):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, deployment("web", annotations=RELOAD))
    with running_controller(api_client) as app:
        core.delete_namespaced_config_map("app-cfg", "ns")
        wait_seen_deleted(app, "app-cfg")
        made = create(api_client, configmap("app-cfg", {"v": "1"}))
        wait_seen_created(app, "app-cfg", made["metadata"]["resourceVersion"])
        assert writes(server, "deployments") == 1  # only our own create
        core.delete_namespaced_config_map("app-cfg", "ns")
        wait_seen_deleted(app, "app-cfg")
        made = create(api_client, configmap("app-cfg", {"v": "2"}))
        wait_seen_created(app, "app-cfg", made["metadata"]["resourceVersion"])
        wait_for(lambda: env_of(workload(server, "Deployment", "web")) == {
            CM_ENV: configmap_hash({"v": "2"})}, message="reloaded on re-create")


# --- sync after restart --------------------------------------------------------------


def test_sync_after_restart_reloads_only_workloads_recording_an_old_hash(server, api_client):
    for name in ("stale", "current"):
        create(api_client, configmap(f"{name}-cfg", {"v": "1"}))
        create(api_client, deployment(name, annotations=AUTO, containers=[uses_cm(f"{name}-cfg")]))
    with running_controller(api_client) as app:
        set_cm_data(app, api_client, "stale-cfg", {"v": "2"})
        set_cm_data(app, api_client, "current-cfg", {"v": "2"})
    # While no controller runs, one ConfigMap changes again.
    path = "/api/v1/namespaces/ns/configmaps/stale-cfg"
    call(api_client, "PATCH", path, {"data": {"v": "3"}}, "application/merge-patch+json")
    before = {n: workload(server, "Deployment", n) for n in ("stale", "current")}
    writes_before = writes(server, "deployments")

    with running_controller(api_client) as app:  # without the flag: start-up touches nothing
        settle(app)
    assert {n: workload(server, "Deployment", n) for n in before} == before
    assert writes(server, "deployments") == writes_before

    with running_controller(api_client, ["--sync-after-restart"]) as app:
        settle(app)
        assert env_of(workload(server, "Deployment", "stale")) == {
            "STAKATER_STALE_CFG_CONFIGMAP": configmap_hash({"v": "3"})}
        assert workload(server, "Deployment", "current") == before["current"]
        assert writes(server, "deployments") == writes_before + 1


def test_sync_after_restart_with_annotations_sink(server, api_client):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, deployment("web", annotations=AUTO, containers=[uses_cm()]))
    flags = ["--reload-strategy=annotations"]
    with running_controller(api_client, flags) as app:
        set_cm_data(app, api_client, "app-cfg", {"v": "2"})
    call(api_client, "PATCH", "/api/v1/namespaces/ns/configmaps/app-cfg", {"data": {"v": "3"}},
         "application/merge-patch+json")
    with running_controller(api_client, [*flags, "--sync-after-restart"]) as app:
        settle(app)
        assert last_reloaded(workload(server, "Deployment", "web"))["hash"] == configmap_hash({"v": "3"})
        writes_before = writes(server, "deployments")
    with running_controller(api_client, [*flags, "--sync-after-restart"]) as app:
        settle(app)
        assert writes(server, "deployments") == writes_before


# --- pause period --------------------------------------------------------------------


def paused_versions(apps, resource_version: str, name: str = "web", timeout: int = 8):
    """Every version of Deployment ``name`` after ``resource_version`` until it is unpaused
    again (a watch from that version replays all of them: nothing can be missed)."""
    seen: list[Any] = []
    stream = watch.Watch()
    for event in stream.stream(apps.list_namespaced_deployment, "ns", resource_version=resource_version,
                               field_selector=f"metadata.name={name}", timeout_seconds=timeout):
        obj = event["object"]
        seen.append(obj)
        if any(v.spec.paused for v in seen) and not obj.spec.paused:
            stream.stop()
    return seen


def test_pause_period_pauses_updates_template_then_unpauses(server, api_client, apps):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    start = create(api_client, deployment("web", annotations={**RELOAD, PAUSE_PERIOD: "1s"}))
    new_hash = configmap_hash({"v": "2"})
    with running_controller(api_client) as app:
        started_at = time.time()
        call(api_client, "PATCH", "/api/v1/namespaces/ns/configmaps/app-cfg", {"data": {"v": "2"}},
             "application/merge-patch+json")
        versions = paused_versions(apps, start["metadata"]["resourceVersion"])
        unpaused_at = time.time()
        settle(app)
    paused = next(v for v in versions if v.spec.paused)
    assert PAUSED_AT in paused.metadata.annotations
    assert {e.name: e.value for e in paused.spec.template.spec.containers[0].env} == {CM_ENV: new_hash}
    paused_at = datetime.fromisoformat(paused.metadata.annotations[PAUSED_AT].replace("Z", "+00:00"))
    assert abs(paused_at.timestamp() - started_at) < 3
    final = workload(server, "Deployment", "web")
    assert final["spec"].get("paused") in (False, None)
    assert PAUSED_AT not in final["metadata"]["annotations"]
    assert final["metadata"]["annotations"][PAUSE_PERIOD] == "1s"
    assert env_of(final) == {CM_ENV: new_hash}
    assert unpaused_at >= paused_at.timestamp() + 1  # not before the period is over


def test_paused_deployment_is_unpaused_by_a_restarted_controller(server, api_client):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, deployment("web", annotations={**RELOAD, PAUSE_PERIOD: "2s"}))
    with running_controller(api_client):
        call(api_client, "PATCH", "/api/v1/namespaces/ns/configmaps/app-cfg", {"data": {"v": "2"}},
             "application/merge-patch+json")
        wait_for(lambda: workload(server, "Deployment", "web")["spec"].get("paused"), message="paused")
    paused = workload(server, "Deployment", "web")  # the controller stopped while paused
    assert paused["spec"]["paused"] is True and PAUSED_AT in paused["metadata"]["annotations"]
    with running_controller(api_client):
        unpaused = wait_for(lambda: (d := workload(server, "Deployment", "web"))
                            and not d["spec"].get("paused") and d, timeout=5, message="unpaused")
    assert PAUSED_AT not in unpaused["metadata"]["annotations"]
    assert env_of(unpaused) == {CM_ENV: configmap_hash({"v": "2"})}


def test_reload_during_the_pause_keeps_the_first_paused_at(server, api_client):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, deployment("web", annotations={**RELOAD, PAUSE_PERIOD: "2s"}))
    path = "/api/v1/namespaces/ns/configmaps/app-cfg"
    with running_controller(api_client) as app:
        call(api_client, "PATCH", path, {"data": {"v": "2"}}, "application/merge-patch+json")
        cached(app, "web", lambda raw: raw["spec"].get("paused"))
        first = workload(server, "Deployment", "web")["metadata"]["annotations"][PAUSED_AT]
        call(api_client, "PATCH", path, {"data": {"v": "3"}}, "application/merge-patch+json")
        cached(app, "web", lambda raw: env_of(raw).get(CM_ENV) == configmap_hash({"v": "3"}))
        during = workload(server, "Deployment", "web")
        settle(app)
        after = workload(server, "Deployment", "web")
    assert during["spec"]["paused"] is True
    assert during["metadata"]["annotations"][PAUSED_AT] == first
    assert not after["spec"].get("paused") and PAUSED_AT not in after["metadata"]["annotations"]


def test_pause_that_expired_while_no_controller_ran_is_lifted_at_start(server, api_client):
    long_ago = (datetime.now(UTC) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = deployment("web", annotations={**RELOAD, PAUSE_PERIOD: "10s", PAUSED_AT: long_ago})
    body["spec"]["paused"] = True
    create(api_client, body)
    with running_controller(api_client) as app:
        settle(app)
        obj = workload(server, "Deployment", "web")
    assert not obj["spec"].get("paused") and PAUSED_AT not in obj["metadata"]["annotations"]


def test_deployment_paused_by_its_owner_is_never_unpaused(server, api_client):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    body = deployment("web", annotations={**RELOAD, PAUSE_PERIOD: "1s"})
    body["spec"]["paused"] = True
    create(api_client, body)
    new_hash = configmap_hash({"v": "2"})
    with running_controller(api_client) as app:
        call(api_client, "PATCH", "/api/v1/namespaces/ns/configmaps/app-cfg", {"data": {"v": "2"}},
             "application/merge-patch+json")
        cached(app, "web", lambda raw: env_of(raw).get(CM_ENV) == new_hash)
        settle(app)  # an unpause, had one been scheduled, would have run by now
        obj = workload(server, "Deployment", "web")
    assert obj["spec"]["paused"] is True
    assert PAUSED_AT not in obj["metadata"]["annotations"]
    assert env_of(obj) == {CM_ENV: new_hash}


def test_owner_paused_deployment_without_pause_period_is_left_paused(server, api_client):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    body = deployment("web", annotations=RELOAD)
    body["spec"]["paused"] = True
    create(api_client, body)
    with running_controller(api_client) as app:
        set_cm_data(app, api_client, "app-cfg", {"v": "2"})
        cached(app, "web", lambda raw: CM_ENV in env_of(raw))
        settle(app)
        obj = workload(server, "Deployment", "web")
    assert obj["spec"]["paused"] is True and PAUSED_AT not in obj["metadata"]["annotations"]


def test_unreadable_pause_period_never_leaves_the_deployment_paused(server, api_client, core):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, deployment("web", annotations={**RELOAD, PAUSE_PERIOD: "a while"}))
    new_hash = configmap_hash({"v": "2"})
    with running_controller(api_client) as app:
        call(api_client, "PATCH", "/api/v1/namespaces/ns/configmaps/app-cfg", {"data": {"v": "2"}},
             "application/merge-patch+json")
        obj = wait_for(lambda: (d := workload(server, "Deployment", "web"))
                       and env_of(d).get(CM_ENV) == new_hash and not d["spec"].get("paused") and d,
                       timeout=5, message="reloaded and not paused")
        app.recorder.flush()
    assert PAUSED_AT not in obj["metadata"]["annotations"]
    warnings = [e for e in core.list_namespaced_event("ns").items if e.type == "Warning"]
    assert warnings and {e.reason for e in warnings} == {"InvalidPausePeriod"}
    assert "a while" in warnings[0].message


@pytest.mark.parametrize("kind", ["StatefulSet", "DaemonSet"])
def test_other_kinds_ignore_the_pause_period(server, api_client, kind):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, deployment("web", kind=kind, annotations={**RELOAD, PAUSE_PERIOD: "1s"}))
    with running_controller(api_client) as app:
        set_cm_data(app, api_client, "app-cfg", {"v": "2"})
        obj = workload(server, kind, "web")
    assert env_of(obj) == {CM_ENV: configmap_hash({"v": "2"})}
    assert "paused" not in obj["spec"]
    assert PAUSED_AT not in obj["metadata"]["annotations"]
    assert writes(server, kind.lower() + "s") == 2  # create + one reload, no unpause


# --- Events --------------------------------------------------------------------------


def test_reload_records_a_normal_reloaded_event_on_the_workload(server, api_client, core):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    made = create(api_client, deployment("web", annotations=RELOAD))
    with running_controller(api_client) as app:
        set_cm_data(app, api_client, "app-cfg", {"v": "2"})
        app.recorder.flush()
    events = [e for e in core.list_namespaced_event("ns").items if e.reason == "Reloaded"]
    assert len(events) == 1
    [event] = events
    assert event.type == "Normal"
    involved = event.involved_object
    assert (involved.kind, involved.namespace, involved.name, involved.uid) == (
        "Deployment", "ns", "web", made["metadata"]["uid"])
    assert "env-vars" in event.message and CM_ENV in event.message
