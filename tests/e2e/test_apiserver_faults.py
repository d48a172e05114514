"""API test server: scripted faults, request counting and the stand-alone process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client import ApiClient, ApiException
from kubernetes.watch.watch import iter_resp_lines

from gitops_reloader.testing.apiserver import ApiServer, Fault

pytestmark = pytest.mark.e2e

NS = "default"


@pytest.fixture
def apps(api_client: ApiClient) -> client.AppsV1Api:
    apps_api = client.AppsV1Api(api_client)
    apps_api.create_namespaced_deployment(
        NS,
        {
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "app", "image": "a"}]}},
            },
        },
    )
    return apps_api


def body_of(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
    return body


def test_conflict_once_then_success(server: ApiServer, apps: client.AppsV1Api) -> None:
    server.add_fault(Fault(verb="patch", resource="deployments", status=409, times=1))
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment("web", NS, {"spec": {"replicas": 2}})
    assert err.value.status == 409
    assert body_of(err.value)["reason"] == "Conflict"
    assert apps.patch_namespaced_deployment("web", NS, {"spec": {"replicas": 2}}).spec.replicas == 2


def test_too_many_requests_carries_retry_after(server: ApiServer, core: client.CoreV1Api) -> None:
    server.add_fault(Fault(verb="create", resource="configmaps", status=429))
    server.add_fault(Fault(verb="patch", resource="configmaps", status=429, retry_after=7))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}})
    assert err.value.status == 429
    assert err.value.headers["Retry-After"] == "1"
    assert body_of(err.value)["reason"] == "TooManyRequests"
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map("a", NS, {"data": {"k": "v"}})
    assert err.value.headers["Retry-After"] == "7"
    assert body_of(err.value)["details"]["retryAfterSeconds"] == 7


def test_client_retries_idempotent_reads_on_429_by_itself(server: ApiServer, core: client.CoreV1Api) -> None:
    # urllib3's default Retry honours Retry-After for GET/PUT/DELETE, as against a real server
    server.add_fault(Fault(verb="list", resource="configmaps", status=429, retry_after=0))
    core.list_namespaced_config_map(NS)
    assert server.request_counts()[("list", "configmaps")] == 2


def test_internal_error_and_gone_bodies(server: ApiServer, core: client.CoreV1Api) -> None:
    server.add_fault(Fault(verb="create", resource="configmaps", status=500))
    server.add_fault(Fault(verb="list", resource="configmaps", status=410))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}})
    assert err.value.status == 500
    assert body_of(err.value)["reason"] == "InternalError"
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(NS)
    assert err.value.status == 410
    assert body_of(err.value)["reason"] == "Expired"
    assert server.get_object("configmaps", NS, "a") is None


def test_latency_only_fault_delays_the_request(server: ApiServer, core: client.CoreV1Api) -> None:
    server.add_fault(Fault(verb="get", resource="namespaces", status=None, latency=0.3))
    started = time.monotonic()
    core.read_namespace("default")
    assert time.monotonic() - started >= 0.3
    started = time.monotonic()
    core.read_namespace("default")
    assert time.monotonic() - started < 0.3


def test_faults_match_namespace_name_and_wildcards_until_cleared(
    server: ApiServer, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}})
    core.create_namespaced_config_map(NS, {"metadata": {"name": "b"}})
    server.add_fault(Fault(verb="*", resource="*", status=503, times=None, name="b"))
    for _ in range(3):
        with pytest.raises(ApiException) as err:
            core.read_namespaced_config_map("b", NS)
        assert err.value.status == 503
    assert core.read_namespaced_config_map("a", NS).metadata.name == "a"
    server.add_fault(Fault(verb="get", resource="configmaps", status=404, namespace="other"))
    core.create_namespaced_config_map("other", {"metadata": {"name": "a"}})
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("a", "other")
    assert body_of(err.value)["message"] == 'configmaps "a" not found'
    server.clear_faults()
    assert core.read_namespaced_config_map("b", NS).metadata.name == "b"


def test_gone_fault_on_watch_is_an_error_event(server: ApiServer, core: client.CoreV1Api) -> None:
    server.add_fault(Fault(verb="watch", resource="configmaps", status=410))
    resp = core.list_namespaced_config_map(NS, watch=True, _preload_content=False)
    try:
        events = [json.loads(line) for line in iter_resp_lines(resp) if line]
    finally:
        resp.close()
        resp.release_conn()
    assert [(e["type"], e["object"]["code"]) for e in events] == [("ERROR", 410)]


def test_requests_are_counted_by_verb_and_resource(
    server: ApiServer, apps: client.AppsV1Api, core: client.CoreV1Api
) -> None:
    server.reset_request_counts()
    apps.read_namespaced_deployment("web", NS)
    apps.patch_namespaced_deployment("web", NS, {"spec": {"replicas": 3}})
    apps.patch_namespaced_deployment_status("web", NS, {"status": {"replicas": 3}})
    core.list_namespaced_config_map(NS)
    core.list_namespaced_config_map(NS)
    assert server.request_counts() == {
        ("get", "deployments"): 1,
        ("patch", "deployments"): 1,
        ("patch", "deployments/status"): 1,
        ("list", "configmaps"): 2,
    }
    assert server.requests[("list", "configmaps")] == 2


def _admin(url: str, action: str, body: dict[str, Any] | None = None, method: str = "POST") -> Any:
    data = None if method == "GET" else json.dumps(body or {}).encode()
    request = urllib.request.Request(f"{url}/_testing/{action}", data=data, method=method)
    with urllib.request.urlopen(request, timeout=5) as resp:
        return json.loads(resp.read())


def test_admin_endpoints_drive_a_server_in_another_process(server: ApiServer, core: client.CoreV1Api) -> None:
    core.list_namespaced_config_map(NS)
    assert _admin(server.url, "requests", method="GET") == {
        "requests": [{"verb": "list", "resource": "configmaps", "count": 1}]
    }
    assert _admin(server.url, "reset-requests") == {"ok": True}
    assert server.request_counts() == {}
    _admin(server.url, "faults", {"verb": "get", "resource": "configmaps", "status": 503, "times": None})
    for _ in range(2):
        with pytest.raises(ApiException):
            core.read_namespaced_config_map("a", NS)
    _admin(server.url, "faults", method="DELETE")
    assert server.faults.pending() == []
    _admin(server.url, "cut-watches-after", {"n": 3})
    assert server._cut_after == 3
    _admin(server.url, "cut-watches-after", {"n": 0})
    assert _admin(server.url, "cut-watches") == {"ok": True, "closed": 0}
    assert _admin(server.url, "compact") == {"ok": True, "resourceVersion": server.resource_version()}
    assert _admin(server.url, "restart", {"compact": False}) == {"ok": True}


def test_kubeconfig_works_with_the_official_loader(server: ApiServer, tmp_path: Any) -> None:
    path = server.write_kubeconfig(tmp_path / "kubeconfig")
    api = config.new_client_from_config(config_file=str(path))
    try:
        names = [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items]
        assert "default" in names
        assert api.configuration.host == server.url
    finally:
        api.close()


def test_stop_closes_kept_alive_connections() -> None:
    srv = ApiServer().start()
    api = srv.api_client()
    try:
        core = client.CoreV1Api(api)
        core.list_namespace()
        srv.stop()
        with pytest.raises(Exception):  # noqa: B017 - connection refused or reset, either is fine
            core.list_namespace(_request_timeout=2)
    finally:
        srv.stop()
        api.close()


@pytest.fixture
def process(tmp_path: Any) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gitops_reloader.testing.apiserver",
            "--port",
            "0",
            "--disable-group",
            "apps.openshift.io",
            "--kubeconfig",
            str(tmp_path / "kubeconfig"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("READY http://127.0.0.1:"), line
        yield proc, line.split()[1]
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()


def test_module_runs_as_a_separate_process_and_stops_on_sigterm(
    process: tuple[subprocess.Popen[str], str], tmp_path: Any
) -> None:
    proc, url = process
    api = config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"))
    try:
        core = client.CoreV1Api(api)
        core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}})
        assert [c.metadata.name for c in core.list_namespaced_config_map(NS).items] == ["a"]
        groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
        assert "apps.openshift.io" not in groups
        assert api.configuration.host == url
        assert _admin(url, "faults", {"verb": "get", "resource": "configmaps", "status": 500}) == {"ok": True}
        with pytest.raises(ApiException) as err:
            core.read_namespaced_config_map("a", NS)
        assert err.value.status == 500
    finally:
        api.close()
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(10) == 0


def test_fault_with_a_label_selector_hits_only_the_request_with_that_selector(server, core):
    server.add_fault(Fault("list", "namespaces", 503, times=None, label_selector="shard=b"))
    assert core.list_namespace(label_selector="shard=a").items == []
    assert core.list_namespace().items  # no selector: not matched either
    with pytest.raises(ApiException) as caught:
        core.list_namespace(label_selector="shard=b")
    assert caught.value.status == 503
    assert server.faults.pending()  # times=None: still armed
