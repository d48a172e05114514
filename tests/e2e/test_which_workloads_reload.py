"""ACCEPTANCE "Hashing and naming" and "Which workloads reload", end to end.

Objects are created through the official client in the API test server, the controller
runs in-process, the data is changed, and the pod template is checked. "Not reloaded"
means the workload is byte-for-byte unchanged and no write reached the API server.
"""

from __future__ import annotations

import copy
import json

import pytest
from reload_helpers import (
    PLURAL,
    configmap,
    create,
    env_of,
    patch_source,
    secret,
    set_cm_data,
    workload,
    writes,
)

from gitops_reloader.model import ObjectRef, SourceKind, SourceRef
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for

pytestmark = pytest.mark.e2e

KINDS = ["Deployment", "DaemonSet", "StatefulSet"]
STAKATER_HASH = "3c9a892aeaedc759abc3df9884a37b8be5680382"
CM_ENV = "STAKATER_APP_CFG_CONFIGMAP"


def uses_cm(name: str, container: str = "app") -> dict:
    return {"name": container, "image": "nginx", "envFrom": [{"configMapRef": {"name": name}}]}


def uses_secret(name: str, container: str = "app") -> dict:
    return {"name": container, "image": "nginx", "envFrom": [{"secretRef": {"name": name}}]}


def change_cm(app, api_client, name="app-cfg", data=None):
    """Replace the ConfigMap's data (PUT) and wait until the controller has handled it."""
    set_cm_data(app, api_client, name, data or {"test.url": "www.stakater.com"})


def assert_not_reloaded(server, kind, name, before, writes_before):
    assert workload(server, kind, name) == before
    assert writes(server, PLURAL[kind]) == writes_before


@pytest.mark.parametrize("kind", KINDS)
def test_explicit_list_reloads_on_data_change_with_stakater_hash(server, api_client, kind):
    create(api_client, configmap("app-cfg", {"a": "1"}))
    create(api_client, deployment("web", kind=kind,
                                  annotations={"configmap.reloader.stakater.com/reload": "app-cfg"}))
    with running_controller(api_client) as app:
        change_cm(app, api_client)
        env = wait_for(lambda: env_of(workload(server, kind, "web")).get(CM_ENV))
        assert env == STAKATER_HASH


@pytest.mark.parametrize("kind", KINDS)
def test_label_only_change_and_identical_reapply_do_not_reload(server, api_client, kind):
    create(api_client, configmap("app-cfg", {"a": "1"}))
    create(api_client, deployment("web", kind=kind,
                                  annotations={"configmap.reloader.stakater.com/reload": "app-cfg"}))
    with running_controller(api_client) as app:
        before = workload(server, kind, "web")
        writes_before = writes(server, PLURAL[kind])
        patch_source(app, api_client, SourceKind.CONFIGMAP, "app-cfg",
                     {"metadata": {"labels": {"x": "y"}, "annotations": {"note": "n"}}})
        patch_source(app, api_client, SourceKind.CONFIGMAP, "app-cfg", {"data": {"a": "1"}})
        assert_not_reloaded(server, kind, "web", before, writes_before)


@pytest.mark.parametrize("kind", KINDS)
def test_two_changes_leave_exactly_one_env_entry_with_latest_hash(server, api_client, kind):
    create(api_client, configmap("app-cfg", {"a": "1"}))
    create(api_client, deployment("web", kind=kind,
                                  annotations={"configmap.reloader.stakater.com/reload": "app-cfg"}))
    with running_controller(api_client) as app:
        change_cm(app, api_client, data={"a": "2"})
        change_cm(app, api_client, data={"test.url": "www.stakater.com"})
        wait_for(lambda: env_of(workload(server, kind, "web")).get(CM_ENV) == STAKATER_HASH)
        containers = workload(server, kind, "web")["spec"]["template"]["spec"]["containers"]
        names = [e["name"] for e in containers[0]["env"]]
        assert names.count(CM_ENV) == 1


def test_other_namespace_and_unannotated_workloads_are_not_reloaded(server, api_client):
    create(api_client, configmap("app-cfg", {"a": "1"}))
    create(api_client, configmap("app-cfg", {"a": "1"}, namespace="other"))
    create(api_client, deployment("elsewhere", namespace="other",
                                  annotations={"configmap.reloader.stakater.com/reload": "app-cfg"}))
    create(api_client, deployment("plain", containers=[uses_cm("app-cfg")]))
    with running_controller(api_client) as app:
        before = (workload(server, "Deployment", "elsewhere", "other"),
                  workload(server, "Deployment", "plain"))
        writes_before = writes(server, "deployments")
        change_cm(app, api_client)
        assert workload(server, "Deployment", "elsewhere", "other") == before[0]
        assert workload(server, "Deployment", "plain") == before[1]
        assert writes(server, "deployments") == writes_before


@pytest.mark.parametrize(("listed", "source", "reloads"), [
    ("app-config-.*", "app-config-x", True),
    ("app", "app-config", False),
    (" other , app-config ", "app-config", True),
    ("[invalid, app-config", "app-config", True),
])
def test_reload_list_entries_are_trimmed_anchored_regexes(server, api_client, listed, source,
                                                          reloads):
    create(api_client, configmap(source, {"a": "1"}))
    create(api_client, deployment("web",
                                  annotations={"configmap.reloader.stakater.com/reload": listed}))
    with running_controller(api_client) as app:
        change_cm(app, api_client, name=source, data={"a": "2"})
        env = env_of(workload(server, "Deployment", "web"))
        name = "STAKATER_" + source.upper().replace("-", "_") + "_CONFIGMAP"
        assert (name in env) is reloads


def test_invalid_regex_entry_gives_warning_event_and_others_still_work(server, api_client, core):
    create(api_client, configmap("good", {"a": "1"}))
    create(api_client, deployment("web",
                                  annotations={"configmap.reloader.stakater.com/reload": "(bad,good"}))
    with running_controller(api_client) as app:
        change_cm(app, api_client, name="good", data={"a": "2"})
        assert "STAKATER_GOOD_CONFIGMAP" in env_of(workload(server, "Deployment", "web"))
        app.recorder.flush()
        events = core.list_namespaced_event("ns").items
        warnings = [e for e in events if e.type == "Warning" and e.reason == "InvalidAnnotation"]
        assert warnings and warnings[0].involved_object.name == "web"
        assert "(bad" in warnings[0].message


def test_lists_are_per_type_secret_named_like_listed_configmap_does_not_match(server, api_client):
    create(api_client, secret("app-cfg", {"p": "1"}))
    create(api_client, deployment("web",
                                  annotations={"configmap.reloader.stakater.com/reload": "app-cfg"},
                                  containers=[uses_secret("app-cfg")]))
    with running_controller(api_client) as app:
        before = workload(server, "Deployment", "web")
        patch_source(app, api_client, SourceKind.SECRET, "app-cfg", {"stringData": {"p": "2"}})
        assert workload(server, "Deployment", "web") == before


def test_explicit_match_needs_no_reference_env_goes_to_first_regular_container(server, api_client):
    create(api_client, configmap("app-cfg", {"a": "1"}))
    create(api_client, deployment(
        "web", annotations={"configmap.reloader.stakater.com/reload": "app-cfg"},
        containers=[{"name": "first", "image": "x"}, {"name": "second", "image": "y"}],
        init_containers=[{"name": "init", "image": "z"}]))
    with running_controller(api_client) as app:
        change_cm(app, api_client)
        obj = workload(server, "Deployment", "web")
        assert env_of(obj, "first") == {CM_ENV: STAKATER_HASH}
        assert env_of(obj, "second") == {}


@pytest.mark.parametrize("value", ["true", "1", "True", "TRUE", "t"])
def test_auto_truthy_spellings_reload_referenced_configmap(server, api_client, value):
    create(api_client, configmap("app-cfg", {"a": "1"}))
    create(api_client, deployment("web", annotations={"reloader.stakater.com/auto": value},
                                  containers=[uses_cm("app-cfg")]))
    with running_controller(api_client) as app:
        change_cm(app, api_client)
        assert env_of(workload(server, "Deployment", "web"))[CM_ENV] == STAKATER_HASH


@pytest.mark.parametrize("annotation", [
    "reloader.stakater.com/auto", "configmap.reloader.stakater.com/auto",
    "reloader.stakater.com/search",
])
def test_auto_typed_auto_and_search_need_a_reference(server, api_client, annotation):
    create(api_client, configmap("app-cfg", {"a": "1"},
                                 annotations={"reloader.stakater.com/match": "true"}))
    create(api_client, deployment("web", annotations={annotation: "true"}))
    with running_controller(api_client) as app:
        before = workload(server, "Deployment", "web")
        change_cm(app, api_client)
        assert workload(server, "Deployment", "web") == before


@pytest.mark.parametrize("reference", [
    {"containers": [{"name": "app", "image": "x", "env": [{"name": "A", "valueFrom": {
        "configMapKeyRef": {"name": "app-cfg", "key": "a"}}}]}]},
    {"containers": [uses_cm("app-cfg")]},
    {"containers": [{"name": "app", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/c"}]}],
     "volumes": [{"name": "v", "configMap": {"name": "app-cfg"}}]},
    {"containers": [{"name": "app", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/c"}]}],
     "volumes": [{"name": "v", "projected": {"sources": [{"configMap": {"name": "app-cfg"}}]}}]},
], ids=["valueFrom", "envFrom", "volume", "projected"])
def test_every_kind_of_reference_counts_for_auto(server, api_client, reference):
    create(api_client, configmap("app-cfg", {"a": "1"}))
    create(api_client, deployment("web", annotations={"reloader.stakater.com/auto": "true"},
                                  **reference))
    with running_controller(api_client) as app:
        change_cm(app, api_client)
        assert env_of(workload(server, "Deployment", "web"))[CM_ENV] == STAKATER_HASH


def test_typed_auto_is_per_type_and_ored_with_generic(server, api_client):
    create(api_client, configmap("app-cfg", {"a": "1"}))
    create(api_client, secret("creds", {"p": "1"}))
    both = [{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "app-cfg"}},
                                                      {"secretRef": {"name": "creds"}}]}]
    create(api_client, deployment("cm-only", containers=both,
                                  annotations={"configmap.reloader.stakater.com/auto": "true",
                                               "reloader.stakater.com/auto": "false"}))
    with running_controller(api_client) as app:
        patch_source(app, api_client, SourceKind.SECRET, "creds", {"stringData": {"p": "2"}})
        assert "STAKATER_CREDS_SECRET" not in env_of(workload(server, "Deployment", "cm-only"))
        change_cm(app, api_client)
        assert CM_ENV in env_of(workload(server, "Deployment", "cm-only"))


def test_env_var_goes_to_the_container_that_uses_it_or_first_regular_for_init_only(
        server, api_client):
    create(api_client, configmap("app-cfg", {"a": "1"}))
    create(api_client, configmap("init-cfg", {"a": "1"}))
    create(api_client, deployment(
        "web", annotations={"reloader.stakater.com/auto": "true"},
        containers=[{"name": "main", "image": "x"}, uses_cm("app-cfg", "sidecar")],
        init_containers=[uses_cm("init-cfg", "init")]))
    with running_controller(api_client) as app:
        change_cm(app, api_client)
        change_cm(app, api_client, name="init-cfg", data={"b": "2"})
        obj = workload(server, "Deployment", "web")
        assert env_of(obj, "sidecar") == {CM_ENV: STAKATER_HASH}
        assert list(env_of(obj, "main")) == ["STAKATER_INIT_CFG_CONFIGMAP"]


def test_annotations_fall_back_to_pod_template_metadata(server, api_client):
    create(api_client, configmap("app-cfg", {"a": "1"}))
    create(api_client, deployment("web", template_annotations={
        "configmap.reloader.stakater.com/reload": "app-cfg"}))
    create(api_client, deployment("not-merged",
                                  annotations={"reloader.stakater.com/search": "true"},
                                  template_annotations={
                                      "configmap.reloader.stakater.com/reload": "app-cfg"}))
    with running_controller(api_client) as app:
        before = workload(server, "Deployment", "not-merged")
        change_cm(app, api_client)
        assert CM_ENV in env_of(workload(server, "Deployment", "web"))
        assert workload(server, "Deployment", "not-merged") == before


def test_auto_reload_all_reloads_referencing_workloads_unless_auto_is_false(server, api_client):
    create(api_client, configmap("app-cfg", {"a": "1"}))
    create(api_client, deployment("plain", containers=[uses_cm("app-cfg")]))
    create(api_client, deployment("opted-out", containers=[uses_cm("app-cfg")],
                                  annotations={"reloader.stakater.com/auto": "false"}))
    create(api_client, deployment("typed-out", containers=[uses_cm("app-cfg")],
                                  annotations={"configmap.reloader.stakater.com/auto": "no"}))
    create(api_client, deployment("unreferencing"))
    with running_controller(api_client, ["--auto-reload-all"]) as app:
        before = {n: workload(server, "Deployment", n)
                  for n in ("opted-out", "typed-out", "unreferencing")}
        change_cm(app, api_client)
        assert CM_ENV in env_of(workload(server, "Deployment", "plain"))
        for name, obj in before.items():
            assert workload(server, "Deployment", name) == obj, name


def test_search_and_match_both_needed(server, api_client):
    create(api_client, configmap("matched", {"a": "1"},
                                 annotations={"reloader.stakater.com/match": "true"}))
    create(api_client, configmap("unmatched", {"a": "1"}))
    containers = [{"name": "app", "image": "x", "envFrom": [
        {"configMapRef": {"name": "matched"}}, {"configMapRef": {"name": "unmatched"}}]}]
    create(api_client, deployment("searching", containers=containers,
                                  annotations={"reloader.stakater.com/search": "true"}))
    create(api_client, deployment("not-searching", containers=copy.deepcopy(containers)))
    with running_controller(api_client) as app:
        before = workload(server, "Deployment", "not-searching")
        change_cm(app, api_client, name="unmatched", data={"b": "1"})
        assert env_of(workload(server, "Deployment", "searching")) == {}
        change_cm(app, api_client, name="matched", data={"b": "1"})
        assert "STAKATER_MATCHED_CONFIGMAP" in env_of(workload(server, "Deployment", "searching"))
        assert workload(server, "Deployment", "not-searching") == before


def test_exclude_beats_explicit_and_auto(server, api_client):
    create(api_client, configmap("app-cfg", {"a": "1"}))
    create(api_client, deployment("web", containers=[uses_cm("app-cfg")], annotations={
        "reloader.stakater.com/auto": "true",
        "configmap.reloader.stakater.com/reload": "app-.*",
        "configmaps.exclude.reloader.stakater.com/reload": "other, app-cfg"}))
    with running_controller(api_client) as app:
        before = workload(server, "Deployment", "web")
        change_cm(app, api_client)
        assert workload(server, "Deployment", "web") == before


def test_ignore_on_the_source_beats_everything(server, api_client):
    create(api_client, configmap("app-cfg", {"a": "1"},
                                 annotations={"reloader.stakater.com/ignore": "true"}))
    create(api_client, deployment("web", containers=[uses_cm("app-cfg")], annotations={
        "reloader.stakater.com/auto": "true", "configmap.reloader.stakater.com/reload": "app-cfg"}))
    with running_controller(api_client, ["--auto-reload-all"]) as app:
        before = workload(server, "Deployment", "web")
        writes_before = writes(server, "deployments")
        change_cm(app, api_client)
        assert workload(server, "Deployment", "web") == before
        assert writes(server, "deployments") == writes_before


def test_secret_hash_is_over_decoded_data_and_env_name_is_stakaters(server, api_client):
    create(api_client, secret("my-secret", {"password": "secret-password"}))
    create(api_client, configmap("my.app.config", {"a": "1"}))
    create(api_client, deployment("web", annotations={
        "secret.reloader.stakater.com/reload": "my-secret",
        "configmap.reloader.stakater.com/reload": r"my\.app\.config"}))
    with running_controller(api_client) as app:
        patch_source(app, api_client, SourceKind.SECRET, "my-secret",
                     {"metadata": {"labels": {"x": "y"}}, "stringData": {"password": "x"}})
        patch_source(app, api_client, SourceKind.SECRET, "my-secret",
                     {"stringData": {"password": "secret-password"}})
        change_cm(app, api_client, name="my.app.config", data={"b": "2"})
        env = env_of(workload(server, "Deployment", "web"))
        assert env["STAKATER_MY_SECRET_SECRET"] == "9f77fb85ef2edde100d112a7175e27e1744dd5d0"
        assert "STAKATER_MY_APP_CONFIG_CONFIGMAP" in env


def test_annotations_sink_records_stakater_json_and_is_idempotent(server, api_client):
    create(api_client, configmap("app-cfg", {"a": "1"}))
    create(api_client, deployment("web", containers=[uses_cm("app-cfg")],
                                  annotations={"reloader.stakater.com/auto": "true"}))
    with running_controller(api_client, ["--reload-strategy=annotations"]) as app:
        change_cm(app, api_client)
        obj = workload(server, "Deployment", "web")
        record = json.loads(obj["spec"]["template"]["metadata"]["annotations"][
            "reloader.stakater.com/last-reloaded-from"])
        assert record["type"] == "CONFIGMAP" and record["name"] == "app-cfg"
        assert record["namespace"] == "ns" and record["hash"] == STAKATER_HASH
        assert record["containerRefs"] == ["app"] and isinstance(record["observedAt"], int)
        assert env_of(obj) == {}
        writes_before = writes(server, "deployments")
        # A duplicate notification of the same (type, name, namespace, hash) writes nothing,
        # once the controller's cache holds its own write.
        wait_for(lambda: "reloader.stakater.com/last-reloaded-from" in app.controller.workload(
            ObjectRef("Deployment", "ns", "web")).template_annotations)
        app.controller.changed(app.controller.source(SourceRef(SourceKind.CONFIGMAP, "ns",
                                                                "app-cfg")))
        settle(app)
        assert writes(server, "deployments") == writes_before


def test_per_workload_sink_annotation_selects_the_sink(server, api_client):
    create(api_client, configmap("app-cfg", {"a": "1"}))
    create(api_client, deployment("web", containers=[uses_cm("app-cfg")], annotations={
        "reloader.stakater.com/auto": "true", "gitops-reloader.io/sink": "annotations"}))
    with running_controller(api_client) as app:
        change_cm(app, api_client)
        obj = workload(server, "Deployment", "web")
        assert "reloader.stakater.com/last-reloaded-from" in obj["spec"]["template"]["metadata"][
            "annotations"]
        assert env_of(obj) == {}
