"""/metrics, /live, /healthz, /readyz over real HTTP on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from gitops_reloader.observability.http import HttpServer, parse_address
from gitops_reloader.observability.metrics import Metrics

pytestmark = pytest.mark.e2e


class Flag:
    def __init__(self, value: bool) -> None:
        self._value = value
        self._lock = threading.Lock()

    def set(self, value: bool) -> None:
        with self._lock:
            self._value = value

    def __call__(self) -> bool:
        with self._lock:
            return self._value


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode(), response.headers["Content-Type"]
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.read().decode(), err.headers["Content-Type"]


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def ready() -> Flag:
    return Flag(False)


@pytest.fixture
def healthy() -> Flag:
    return Flag(True)


@pytest.fixture
def server(registry: CollectorRegistry, ready: Flag, healthy: Flag) -> Iterator[HttpServer]:
    with HttpServer("127.0.0.1:0", registry=registry, ready=ready, healthy=healthy) as srv:
        yield srv


def base(server: HttpServer) -> str:
    return f"http://127.0.0.1:{server.port}"


def test_readyz_is_503_until_caches_sync_then_200(server: HttpServer, ready: Flag) -> None:
    status, body, _ = get(base(server) + "/readyz")
    assert (status, body) == (503, "caches not synced\n")
    ready.set(True)
    status, body, _ = get(base(server) + "/readyz")
    assert (status, body) == (200, "ok\n")


def test_readyz_names_each_problem_that_keeps_it_unready(registry: CollectorRegistry, ready: Flag) -> None:
    problems = ["git sink: repository app unusable (SshKeyPermissions): SSH key file /k is\naccessible"]
    with HttpServer("127.0.0.1:0", registry=registry, ready=ready, problems=lambda: problems) as srv:
        status, body, _ = get(base(srv) + "/readyz")
        assert (status, body.splitlines()) == (503, [
            "caches not synced",
            "git sink: repository app unusable (SshKeyPermissions): SSH key file /k is accessible"])
        ready.set(True)
        assert get(base(srv) + "/readyz")[:2] == (503, body.split("\n", 1)[1])  # synced, still unready
        problems.clear()
        assert get(base(srv) + "/readyz")[:2] == (200, "ok\n")
        assert get(base(srv) + "/live")[0] == 200  # liveness never depends on it


@pytest.mark.parametrize("path", ["/live", "/healthz"])
def test_liveness_answers_ok_while_healthy_and_500_when_not(
    server: HttpServer, healthy: Flag, path: str
) -> None:
    assert get(base(server) + path)[:2] == (200, "ok\n")
    healthy.set(False)
    assert get(base(server) + path)[0] == 500


def test_liveness_does_not_depend_on_readiness(server: HttpServer) -> None:
    assert get(base(server) + "/live")[0] == 200
    assert get(base(server) + "/readyz")[0] == 503


def test_metrics_serves_the_injected_registry_in_prometheus_text(
    server: HttpServer, registry: CollectorRegistry, ready: Flag
) -> None:
    ready.set(True)
    metrics = Metrics(registry)
    metrics.reload_executed(True, "ns")
    metrics.reload_executed(True, "ns")
    status, body, content_type = get(base(server) + "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain")
    assert 'reloader_reload_executed_total{success="true"} 2.0' in body
    assert "gitops_reloader_sink_outcomes_total" in body


def test_metrics_is_503_until_the_caches_first_sync_then_always_served(
    server: HttpServer, registry: CollectorRegistry, ready: Flag
) -> None:
    """Stakater's chart probes readiness on /metrics: Ready must mean the informers listed."""
    Metrics(registry).reload_executed(True, "ns")
    assert get(base(server) + "/metrics")[:2] == (503, "caches not synced\n")
    ready.set(True)
    assert get(base(server) + "/metrics")[0] == 200
    ready.set(False)  # a relist after an expired watch: scrapes go on
    status, body, _ = get(base(server) + "/metrics")
    assert status == 200 and 'reloader_reload_executed_total{success="true"} 1.0' in body
    assert get(base(server) + "/readyz")[0] == 503


def test_unknown_path_is_404(server: HttpServer) -> None:
    assert get(base(server) + "/nope")[0] == 404
    assert get(base(server) + "/")[0] == 404


def test_query_string_is_ignored(server: HttpServer) -> None:
    assert get(base(server) + "/live?verbose=1")[0] == 200


def test_probe_that_raises_answers_failure(registry: CollectorRegistry) -> None:
    def broken() -> bool:
        raise RuntimeError("boom")

    with HttpServer("127.0.0.1:0", registry=registry, ready=broken, healthy=broken) as srv:
        assert get(base(srv) + "/readyz")[0] == 503
        assert get(base(srv) + "/healthz")[0] == 500


def test_stop_frees_the_port(registry: CollectorRegistry) -> None:
    srv = HttpServer("127.0.0.1:0", registry=registry, ready=lambda: True)
    srv.start()
    port = srv.port
    srv.stop()
    srv.stop()  # idempotent
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


def test_busy_port_fails_at_start(server: HttpServer, registry: CollectorRegistry) -> None:
    other = HttpServer(f"127.0.0.1:{server.port}", registry=registry, ready=lambda: True)
    with pytest.raises(OSError):
        other.start()


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        (":9090", ("0.0.0.0", 9090)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("0.0.0.0:9090", ("0.0.0.0", 9090)),
        ("[::1]:8080", ("::1", 8080)),
    ],
)
def test_parse_address(address: str, expected: tuple[str, int]) -> None:
    assert parse_address(address) == expected


@pytest.mark.parametrize("address", ["9090", "host:http", ":70000"])
def test_parse_address_rejects_bad_input(address: str) -> None:
    with pytest.raises(ValueError):
        parse_address(address)
