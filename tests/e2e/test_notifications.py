"""ACCEPTANCE "Filters and notifications": --webhook-url, alerts on reload, reload metrics.

The controller runs in-process against the API test server; webhooks and alert sinks are
a real HTTP receiver on 127.0.0.1.
"""

from __future__ import annotations

import base64
import socket
import time
from collections.abc import Iterator

import pytest
from kubernetes.client import CoreV1Api
from prometheus_client import generate_latest
from reload_helpers import configmap, create, env_of, secret, set_cm_data, workload, writes

from gitops_reloader.hashing import configmap_hash, secret_hash
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for
from gitops_reloader.testing.receiver import HttpReceiver

pytestmark = pytest.mark.e2e

AUTO = {"reloader.stakater.com/auto": "true"}
NEW = {"v": "2"}
NO_HOME = {"HOME": "/nonexistent"}


def uses(name: str, ref: str = "configMapRef") -> dict:
    return {"name": "app", "image": "x", "envFrom": [{ref: {"name": name}}]}


@pytest.fixture
def receiver() -> Iterator[HttpReceiver]:
    with HttpReceiver() as r:
        yield r


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sample(app, name: str, labels: dict[str, str]) -> float:
    """A sample from the app's registry as /metrics would serve it (text exposition)."""
    wanted = name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
    for line in generate_latest(app.registry).decode().splitlines():
        if line.startswith(wanted + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{wanted} not exported")


# --- --webhook-url ----------------------------------------------------------------------


def test_webhook_url_posts_the_change_and_patches_nothing(server, api_client, receiver):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    for name in ("web", "api"):
        create(api_client, deployment(name, annotations=AUTO, containers=[uses("app-cfg")]))
    with running_controller(api_client, [f"--webhook-url={receiver.url}/hook"]) as app:
        before = {n: workload(server, "Deployment", n) for n in ("web", "api")}
        writes_before = writes(server, "deployments")
        set_cm_data(app, api_client, "app-cfg", NEW)
        posts = receiver.wait_for(2)
    assert {n: workload(server, "Deployment", n) for n in before} == before
    assert writes(server, "deployments") == writes_before
    assert len(posts) == 2 and {p.method for p in posts} == {"POST"} and {p.path for p in posts} == {"/hook"}
    assert sorted(w["name"] for p in posts for w in p.json["workloads"]) == ["api", "web"]
    body = posts[0].json
    assert body["resource"] == {"kind": "ConfigMap", "namespace": "ns", "name": "app-cfg"}
    assert body["namespace"] == "ns"
    assert body["hash"] == configmap_hash(NEW)[:12]
    assert body["workloads"][0]["kind"] == "Deployment" and body["workloads"][0]["namespace"] == "ns"
    assert body["deleted"] is False


def test_webhook_for_a_secret_carries_no_plain_hash(server, api_client, receiver):
    create(api_client, secret("creds", {"password": "old"}))
    create(api_client, deployment("web", annotations=AUTO, containers=[uses("creds", "secretRef")]))
    with running_controller(api_client, ["--webhook-url", receiver.url]) as app:
        CoreV1Api(api_client).patch_namespaced_secret("creds", "ns",
                                                      {"stringData": {"password": "secret-password"}})
        [post] = receiver.wait_for(1)
        settle(app)
    plain = secret_hash({"password": base64.b64encode(b"secret-password").decode()})
    assert plain == "9f77fb85ef2edde100d112a7175e27e1744dd5d0"
    assert post.json["resource"] == {"kind": "Secret", "namespace": "ns", "name": "creds"}
    assert len(post.json["hash"]) == 12
    assert plain[:12] not in post.text and plain not in post.text
    assert "secret-password" not in post.text
    assert env_of(workload(server, "Deployment", "web")) == {}


# --- alerts -----------------------------------------------------------------------------


def test_slack_alert_per_reload(server, api_client, receiver):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    for name in ("web", "api"):
        create(api_client, deployment(name, annotations=AUTO, containers=[uses("app-cfg")]))
    environ = {**NO_HOME, "ALERT_ON_RELOAD": "true", "ALERT_SINK": "slack",
               "ALERT_WEBHOOK_URL": receiver.url + "/services/T000/B000/XXX",
               "ALERT_ADDITIONAL_INFO": "prod-eu"}
    with running_controller(api_client, environ=environ) as app:
        set_cm_data(app, api_client, "app-cfg", NEW)
        posts = receiver.wait_for(2)
        time.sleep(0.2)  # nothing more arrives: one alert per reloaded workload
        assert len(receiver.requests) == 2
    assert all(env_of(workload(server, "Deployment", n)) for n in ("web", "api"))
    texts = sorted(p.json["text"] for p in posts)
    assert [set(p.json) for p in posts] == [{"text"}, {"text"}]
    assert all(p.path == "/services/T000/B000/XXX" for p in posts)
    assert all(t.startswith("prod-eu : Reloader detected changes in *app-cfg*") for t in texts)
    assert "reloaded *api* of type *Deployment*" in texts[0]
    assert "reloaded *web* of type *Deployment*" in texts[1]
    assert all(configmap_hash(NEW)[:12] in t for t in texts)


def test_alert_structured_posts_stakater_v2s_json_per_reload(server, api_client, receiver):
    """v2 command line: ``--alert-webhook-url`` turns alerts on, ``--alert-structured`` makes
    the raw sink post JSON; a Secret's alert names it and carries no hash."""
    create(api_client, secret("creds", {"password": "old"}))
    create(api_client, deployment("web", annotations=AUTO, containers=[uses("creds", "secretRef")]))
    flags = [f"--alert-webhook-url={receiver.url}/hook", "--alert-structured"]
    with running_controller(api_client, flags, environ=NO_HOME):
        CoreV1Api(api_client).patch_namespaced_secret("creds", "ns", {"stringData": {"password": "new"}})
        [post] = receiver.wait_for(1)
    document = post.json
    assert post.header("content-type") == "application/json"
    assert {k: v for k, v in document.items() if k != "timestamp"} == {
        "event": "reload", "workloadKind": "Deployment", "workloadName": "web",
        "workloadNamespace": "ns", "resourceKind": "Secret", "resourceName": "creds",
        "resourceNamespace": "ns"}
    assert document["timestamp"].endswith("Z")
    assert secret_hash({"password": base64.b64encode(b"new").decode()})[:12] not in post.text


def test_alert_for_a_secret_carries_no_hash(server, api_client, receiver):
    create(api_client, secret("creds", {"password": "old"}))
    create(api_client, deployment("web", annotations=AUTO, containers=[uses("creds", "secretRef")]))
    environ = {**NO_HOME, "ALERT_ON_RELOAD": "true", "ALERT_SINK": "slack", "ALERT_WEBHOOK_URL": receiver.url}
    with running_controller(api_client, environ=environ):
        CoreV1Api(api_client).patch_namespaced_secret("creds", "ns", {"stringData": {"password": "new"}})
        [post] = receiver.wait_for(1)
    plain = secret_hash({"password": base64.b64encode(b"new").decode()})
    assert "creds" in post.json["text"] and plain[:12] not in post.text and "hash" not in post.text


def test_failing_alert_receiver_never_blocks_reloads(server, api_client):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, deployment("web", annotations=AUTO, containers=[uses("app-cfg")]))
    environ = {**NO_HOME, "ALERT_ON_RELOAD": "true", "ALERT_SINK": "slack",
               "ALERT_WEBHOOK_URL": f"http://127.0.0.1:{closed_port()}/hook"}
    with running_controller(api_client, environ=environ) as app:
        started = time.monotonic()
        for value in ("2", "3", "4"):
            set_cm_data(app, api_client, "app-cfg", {"v": value})
            assert env_of(workload(server, "Deployment", "web"))["STAKATER_APP_CFG_CONFIGMAP"] == (
                configmap_hash({"v": value}))
        assert time.monotonic() - started < 3
        assert sample(app, "reloader_reload_executed_total", {"success": "true"}) == 3
        assert app.alerter is not None
        app.alerter.close(timeout=0.1)  # else shutdown gives the undeliverable alerts 5 s


# --- metrics ----------------------------------------------------------------------------


def test_reload_executed_counts_one_per_reloaded_workload(server, api_client):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    for name in ("a", "b", "c"):
        create(api_client, deployment(name, annotations=AUTO, containers=[uses("app-cfg")]))
    create(api_client, deployment("unrelated", annotations=AUTO))
    with running_controller(api_client) as app:
        assert sample(app, "reloader_reload_executed_total", {"success": "true"}) == 0
        assert sample(app, "reloader_reload_executed_total", {"success": "false"}) == 0
        set_cm_data(app, api_client, "app-cfg", NEW)
        wait_for(lambda: sample(app, "reloader_reload_executed_total", {"success": "true"}) == 3)
        set_cm_data(app, api_client, "app-cfg", {"v": "3"})
        wait_for(lambda: sample(app, "reloader_reload_executed_total", {"success": "true"}) == 6)
        # A label-only change reloads nothing and counts nothing.
        CoreV1Api(api_client).patch_namespaced_config_map("app-cfg", "ns",
                                                          {"metadata": {"labels": {"x": "y"}}})
        settle(app)
        assert sample(app, "reloader_reload_executed_total", {"success": "true"}) == 6
        assert sample(app, "reloader_reload_executed_total", {"success": "false"}) == 0
