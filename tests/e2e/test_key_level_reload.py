"""Key-level reload (``--reload-on=used-keys``) and ``--prune-stale-env-vars`` end to end.

One ConfigMap ``shared`` with keys ``a`` and ``b``; Deployment ``a-reader`` reads ``a``
through ``configMapKeyRef``, ``b-reader`` mounts ``b`` through a volume item, ``whole``
takes everything through ``envFrom``. Changing ``a`` rolls ``a-reader`` and ``whole`` only,
changing ``b`` rolls ``b-reader`` and ``whole`` only. A workload's ``generation`` counts its
template changes, so "rolled" and "not rolled" are exact.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient
from reload_helpers import call, configmap, create, env_of, events, secret, workload

from gitops_reloader import cli
from gitops_reloader.hashing import configmap_hash, key_digests, used_key_hash
from gitops_reloader.model import SourceKind, SourceRef
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for

pytestmark = pytest.mark.e2e

AUTO = {"reloader.stakater.com/auto": "true"}
USED_KEYS = ["--reload-on=used-keys"]
STORE = ["--state-store=configmap", "--state-store-interval=100ms", "--sync-after-restart"]
ENV = "STAKATER_SHARED_CONFIGMAP"
NAMES = ("a-reader", "b-reader", "whole")


def a_reader(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    env = [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "shared", "key": "a"}}}]
    return deployment("a-reader", annotations={**AUTO, **(annotations or {})},
                      containers=[{"name": "app", "image": "x", "env": env}])


def b_reader() -> dict[str, Any]:
    return deployment("b-reader", annotations=AUTO,
                      containers=[{"name": "app", "image": "x",
                                   "volumeMounts": [{"name": "conf", "mountPath": "/conf"}]}],
                      volumes=[{"name": "conf", "configMap": {"name": "shared",
                                                              "items": [{"key": "b", "path": "b.conf"}]}}])


def whole() -> dict[str, Any]:
    return deployment("whole", annotations=AUTO, containers=[
        {"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "shared"}}]}])


def set_data(api_client: ApiClient, data: dict[str, str], name: str = "shared") -> None:
    call(api_client, "PATCH", f"/api/v1/namespaces/ns/configmaps/{name}", {"data": data},
         "application/merge-patch+json")


def generations(server: ApiServer, names: tuple[str, ...] = NAMES) -> dict[str, int]:
    return {name: workload(server, "Deployment", name)["metadata"]["generation"] for name in names}


def used(data: dict[str, str], *keys: str) -> str:
    digest = used_key_hash(key_digests(SourceKind.CONFIGMAP, {"data": data}), keys)
    assert digest is not None
    return digest


def reloads(app: Any) -> float:
    return app.registry.get_sample_value("reloader_reload_executed_total", {"success": "true"}) or 0.0


def skipped(app: Any) -> float:
    return app.registry.get_sample_value("gitops_reloader_unused_key_changes_total",
                                         {"kind": "ConfigMap"}) or 0.0


def run_plan(kubeconfig: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``gitops-reloader plan ... --reload-on=used-keys`` in a subprocess."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, "HOME": str(tmp_path)}
    argv = [sys.executable, "-m", "gitops_reloader.cli", "plan", f"--kubeconfig={kubeconfig}",
            *args, *USED_KEYS]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.fixture
def three(api_client: ApiClient) -> None:
    create(api_client, configmap("shared", {"a": "1", "b": "1"}))
    for body in (a_reader(), b_reader(), whole()):
        create(api_client, body)


def test_a_change_reloads_only_the_workloads_using_the_changed_key(
        server: ApiServer, api_client: ApiClient, three: None) -> None:
    with running_controller(api_client, USED_KEYS) as app:
        set_data(api_client, {"a": "2"})
        wait_for(lambda: generations(server) == {"a-reader": 2, "b-reader": 1, "whole": 2}, timeout=10,
                 message="a-reader and whole reloaded")
        settle(app)
        assert generations(server) == {"a-reader": 2, "b-reader": 1, "whole": 2}
        assert skipped(app) == 1  # b-reader left alone
        data = {"a": "2", "b": "1"}
        # a-reader records the hash over its key only; whole (envFrom) keeps Stakater's.
        assert env_of(workload(server, "Deployment", "a-reader"))[ENV] == used(data, "a")
        assert env_of(workload(server, "Deployment", "whole"))[ENV] == configmap_hash(data)

        set_data(api_client, {"b": "2"})
        wait_for(lambda: generations(server) == {"a-reader": 2, "b-reader": 2, "whole": 3}, timeout=10,
                 message="b-reader and whole reloaded")
        settle(app)
        assert generations(server) == {"a-reader": 2, "b-reader": 2, "whole": 3}
        assert env_of(workload(server, "Deployment", "b-reader"))[ENV] == used({"a": "2", "b": "2"}, "b")
        assert reloads(app) == 4
        assert skipped(app) == 2

        set_data(api_client, {"c": "new"})  # a key nobody reads by name: envFrom sees it
        wait_for(lambda: generations(server)["whole"] == 4, timeout=10, message="whole reloaded")
        settle(app)
        assert generations(server) == {"a-reader": 2, "b-reader": 2, "whole": 4}


def test_the_annotations_sink_records_the_used_key_hash(
        server: ApiServer, api_client: ApiClient, three: None) -> None:
    with running_controller(api_client, [*USED_KEYS, "--reload-strategy=annotations"]) as app:
        set_data(api_client, {"a": "2"})
        wait_for(lambda: generations(server) == {"a-reader": 2, "b-reader": 1, "whole": 2}, timeout=10,
                 message="a-reader and whole reloaded")
        settle(app)
    template = workload(server, "Deployment", "a-reader")["spec"]["template"]["metadata"]["annotations"]
    recorded = json.loads(template["reloader.stakater.com/last-reloaded-from"])
    assert (recorded["name"], recorded["hash"]) == ("shared", used({"a": "2", "b": "1"}, "a"))


def test_any_change_mode_stays_stakaters(server: ApiServer, api_client: ApiClient, three: None) -> None:
    with running_controller(api_client) as app:
        set_data(api_client, {"b": "2"})
        wait_for(lambda: generations(server) == {"a-reader": 2, "b-reader": 2, "whole": 2}, timeout=10,
                 message="every user reloaded")
        settle(app)
        hashed = configmap_hash({"a": "1", "b": "2"})
        assert {env_of(workload(server, "Deployment", n))[ENV] for n in NAMES} == {hashed}
        assert skipped(app) == 0


def test_the_annotation_opts_one_workload_in_and_a_bad_value_keeps_the_default(
        server: ApiServer, api_client: ApiClient) -> None:
    create(api_client, configmap("shared", {"a": "1", "b": "1"}))
    create(api_client, a_reader({"gitops-reloader.io/reload-on": "used-keys"}))
    other = b_reader()
    other["spec"]["template"]["metadata"]["annotations"] = {"gitops-reloader.io/reload-on": "only-mine"}
    create(api_client, other)
    with running_controller(api_client) as app:
        set_data(api_client, {"b": "2"})
        wait_for(lambda: generations(server, ("a-reader", "b-reader"))["b-reader"] == 2, timeout=10,
                 message="b-reader reloaded")
        settle(app)
        assert generations(server, ("a-reader", "b-reader")) == {"a-reader": 1, "b-reader": 2}
        set_data(api_client, {"a": "2"})
        wait_for(lambda: generations(server, ("a-reader", "b-reader")) == {"a-reader": 2, "b-reader": 3},
                 timeout=10, message="both reloaded: b-reader is on the default, any-change")
        warning = wait_for(lambda: [e for e in events(api_client, "b-reader")
                                    if e.get("reason") == "InvalidAnnotation"], timeout=10,
                           message="InvalidAnnotation event")[0]
        assert warning["type"] == "Warning"
        assert "'only-mine'" in warning["message"] and "any-change" in warning["message"]
        assert app.registry.get_sample_value("gitops_reloader_invalid_annotations_total",
                                             {"kind": "Deployment"}) >= 1


def test_a_restart_after_an_unused_key_change_reloads_nothing(
        server: ApiServer, api_client: ApiClient) -> None:
    """With --sync-after-restart and the state store: a-reader carries a marker, b-reader
    was never reloaded (no marker). A change of key ``z`` while the controller is down is
    pending for neither; a change of ``b`` while down reloads b-reader alone."""
    names = ("a-reader", "b-reader")
    create(api_client, configmap("shared", {"a": "1", "b": "1", "z": "1"}))
    create(api_client, a_reader())
    create(api_client, b_reader())
    flags = [*USED_KEYS, *STORE]
    with running_controller(api_client, flags) as app:
        set_data(api_client, {"a": "2"})
        wait_for(lambda: generations(server, names) == {"a-reader": 2, "b-reader": 1}, timeout=10,
                 message="a-reader reloaded")
        settle(app)
        state = app.controller.state
        wait_for(lambda: state.batch.dirty() == 0 and state.batch.stored_workload("ns/Deployment/b-reader"),
                 timeout=10, message="b-reader's first entry written")

    set_data(api_client, {"z": "2"})
    with running_controller(api_client, flags) as app:
        settle(app)
        assert reloads(app) == 0
    assert generations(server, names) == {"a-reader": 2, "b-reader": 1}

    set_data(api_client, {"b": "2"})
    with running_controller(api_client, flags) as app:
        settle(app)
        assert reloads(app) == 1
    assert generations(server, names) == {"a-reader": 2, "b-reader": 2}
    expected = used({"a": "2", "b": "2", "z": "2"}, "b")
    assert env_of(workload(server, "Deployment", "b-reader"))[ENV] == expected


def test_prune_stale_env_vars_removes_them_in_the_reload_patch(server: ApiServer,
                                                               api_client: ApiClient) -> None:
    create(api_client, configmap("cfg", {"v": "1"}))
    env = [{"name": "STAKATER_OLD_CONFIGMAP", "value": "0" * 40}, {"name": "KEEP", "value": "k"},
           {"name": "STAKATER_MODE", "value": "m"}]
    create(api_client, deployment("web", annotations=AUTO, containers=[
        {"name": "app", "image": "x", "env": env, "envFrom": [{"configMapRef": {"name": "cfg"}}]}]))
    with running_controller(api_client, ["--prune-stale-env-vars"]) as app:
        set_data(api_client, {"v": "2"}, name="cfg")
        wait_for(lambda: workload(server, "Deployment", "web")["metadata"]["generation"] == 2, timeout=10,
                 message="web reloaded")
        settle(app)
        assert app.registry.get_sample_value("gitops_reloader_stale_env_vars_pruned_total") == 1
    after = env_of(workload(server, "Deployment", "web"))
    assert after == {"KEEP": "k", "STAKATER_MODE": "m", "STAKATER_CFG_CONFIGMAP": configmap_hash({"v": "2"})}
    assert workload(server, "Deployment", "web")["metadata"]["generation"] == 2  # one rollout
    assert server.request_counts().get(("patch", "deployments"), 0) == 1


def test_without_a_reload_nothing_is_pruned(server: ApiServer, api_client: ApiClient) -> None:
    create(api_client, configmap("cfg", {"v": "1"}))
    create(api_client, deployment("web", annotations=AUTO, containers=[
        {"name": "app", "image": "x", "env": [{"name": "STAKATER_OLD_CONFIGMAP", "value": "x"}],
         "envFrom": [{"configMapRef": {"name": "cfg"}}]}]))
    with running_controller(api_client, ["--prune-stale-env-vars"]) as app:
        call(api_client, "PATCH", "/api/v1/namespaces/ns/configmaps/cfg",
             {"metadata": {"labels": {"x": "y"}}}, "application/merge-patch+json")  # not a data change
        settle(app)
    assert "STAKATER_OLD_CONFIGMAP" in env_of(workload(server, "Deployment", "web"))
    assert workload(server, "Deployment", "web")["metadata"]["generation"] == 1


def test_explain_and_plan_name_the_keys_and_whether_a_change_touches_them(
        server: ApiServer, api_client: ApiClient, three: None, tmp_path: Path, capsys: Any) -> None:
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    code = cli.main(["explain", "deploy/a-reader", "-n", "ns", "--kubeconfig", kubeconfig, *USED_KEYS,
                     "--output", "json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["reload_on"] == "used-keys"
    [shared] = result["sources"]
    assert shared["keys"] == ["a"] and shared["current_hash"] == used({"a": "1", "b": "1"}, "a")
    code = cli.main(["explain", "deploy/whole", "-n", "ns", "--kubeconfig", kubeconfig, *USED_KEYS])
    text = capsys.readouterr().out
    assert code == 0 and "reload on: used-keys" in text and "keys:" not in text  # envFrom: whole

    plan = run_plan(kubeconfig, tmp_path, "--configmap", "ns/shared", "--from-literal", "a=1",
                    "--from-literal", "b=2")
    assert plan.returncode == 1, plan.stderr  # something would be written
    assert ("note: ns/Deployment/a-reader uses keys a of ns/ConfigMap/shared (used-keys); "
            "the change touches none of them: not reloaded") in plan.stdout
    assert ("note: ns/Deployment/b-reader uses keys b of ns/ConfigMap/shared (used-keys); "
            "the change touches them") in plan.stdout
    assert "2 of 2 workload(s) would be reloaded" in plan.stdout
    assert "ns/Deployment/a-reader [" not in plan.stdout


def test_plan_never_prints_a_secret_s_used_key_hash(server: ApiServer, api_client: ApiClient,
                                                    tmp_path: Path) -> None:
    create(api_client, secret("db", {"password": "hunter2", "user": "app"}))
    env = [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]
    create(api_client, deployment("web", annotations=AUTO,
                                  containers=[{"name": "app", "image": "x", "env": env}]))
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    plan = run_plan(kubeconfig, tmp_path, "--secret", "ns/db", "--from-literal", "password=hunter3",
                    "--from-literal", "user=app")
    assert plan.returncode == 1, plan.stderr
    new = {"password": base64.b64encode(b"hunter3").decode(), "user": base64.b64encode(b"app").decode()}
    used_hash = used_key_hash(key_digests(SourceKind.SECRET, {"data": new}), {"password"})
    assert used_hash is not None and used_hash not in plan.stdout
    assert "STAKATER_DB_SECRET=<secret-hash>" in plan.stdout


def c_reader(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """Reads key ``c`` of ``shared`` if it exists (``optional``): today it does not."""
    env = [{"name": "C", "valueFrom": {"configMapKeyRef": {"name": "shared", "key": "c", "optional": True}}}]
    return deployment("c-reader", annotations={**AUTO, **(annotations or {})},
                      containers=[{"name": "app", "image": "x", "env": env}])


DELETE_NAMES = (*NAMES, "c-reader")
DELETES = ["--reload-on-delete", "--reload-strategy=annotations"]


@pytest.mark.parametrize("mode", ["flag", "annotation", "any-change"])
def test_a_delete_reloads_only_the_workloads_whose_keys_it_removes(
        server: ApiServer, api_client: ApiClient, three: None, mode: str) -> None:
    """``--reload-on-delete``: a deletion is judged like a change in which every key
    disappears. a-reader, b-reader and whole read keys the ConfigMap had: they reload (the
    annotations sink records the deletion); c-reader reads only ``c``, which the ConfigMap
    never had, so in ``used-keys`` mode (flag, or its own annotation) the deletion touches
    nothing it reads and it is left alone and counted; in ``any-change`` mode it reloads
    as with Stakater."""
    opted_in = {"gitops-reloader.io/reload-on": "used-keys"} if mode == "annotation" else {}
    create(api_client, c_reader(opted_in))
    flags = [*DELETES, *(USED_KEYS if mode == "flag" else [])]
    with running_controller(api_client, flags) as app:
        call(api_client, "DELETE", "/api/v1/namespaces/ns/configmaps/shared")
        wait_for(lambda: all(g == 2 for n, g in generations(server, DELETE_NAMES).items() if n != "c-reader"),
                 timeout=10, message="the readers of the deleted ConfigMap's keys reloaded")
        settle(app)
        key_level = mode != "any-change"
        assert generations(server, DELETE_NAMES) == {"a-reader": 2, "b-reader": 2, "whole": 2,
                                                     "c-reader": 1 if key_level else 2}
        assert skipped(app) == (1 if key_level else 0)
    recorded = json.loads(workload(server, "Deployment", "a-reader")["spec"]["template"]["metadata"]
                          ["annotations"]["reloader.stakater.com/last-reloaded-from"])
    assert recorded["name"] == "shared"  # the deletion, recorded as Stakater records it


def test_a_delete_reloads_a_workload_whose_optional_key_the_configmap_had(
        server: ApiServer, api_client: ApiClient) -> None:
    """The same rule the other way: once ``c`` exists, deleting the ConfigMap removes it."""
    create(api_client, configmap("shared", {"a": "1", "c": "1"}))
    create(api_client, c_reader())
    with running_controller(api_client, [*DELETES, *USED_KEYS]) as app:
        call(api_client, "DELETE", "/api/v1/namespaces/ns/configmaps/shared")
        wait_for(lambda: generations(server, ("c-reader",)) == {"c-reader": 2}, timeout=10,
                 message="c-reader reloaded")
        settle(app)
        assert skipped(app) == 0


def test_a_delete_while_down_leaves_a_workload_that_ran_without_its_keys_alone(
        server: ApiServer, api_client: ApiClient) -> None:
    """The state store names ``shared`` deleted while the controller was down; its keys are
    not known any more. a-reader last ran with key ``a`` present (its marker): it reloads.
    c-reader's first-sight entry says it ran with ``c`` absent, so the deletion removed
    nothing it reads: left alone, as a live delete would leave it."""
    names = ("a-reader", "c-reader")
    create(api_client, configmap("shared", {"a": "1", "b": "1"}))
    create(api_client, a_reader())
    create(api_client, c_reader())
    flags = [*USED_KEYS, *STORE, *DELETES]
    with running_controller(api_client, flags) as app:
        set_data(api_client, {"a": "2"})
        wait_for(lambda: generations(server, names) == {"a-reader": 2, "c-reader": 1}, timeout=10,
                 message="a-reader reloaded")
        settle(app)
        state = app.controller.state
        wait_for(lambda: state.batch.dirty() == 0 and state.batch.stored_workload("ns/Deployment/c-reader"),
                 timeout=10, message="c-reader's first entry written")

    call(api_client, "DELETE", "/api/v1/namespaces/ns/configmaps/shared")
    with running_controller(api_client, flags) as app:
        settle(app)
        assert app.controller.state.deleted_while_down() == (SourceRef(SourceKind.CONFIGMAP, "ns", "shared"),)
        assert reloads(app) == 1
    assert generations(server, names) == {"a-reader": 3, "c-reader": 1}
