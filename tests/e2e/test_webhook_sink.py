"""The webhook sink against a real HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client import CollectorRegistry

from gitops_reloader.errors import HostAuthError, HostError, HostRateLimited, ReloaderError
from gitops_reloader.model import (
    ObjectRef,
    OutcomeStatus,
    ReloadItem,
    ReloadRequest,
    Source,
    SourceKind,
    SourceRef,
)
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.sinks.base import Sink
from gitops_reloader.sinks.webhook import WebhookSink
from gitops_reloader.testing.receiver import HttpReceiver

pytestmark = pytest.mark.e2e

CM_HASH = "3c9a892aeaedc759abc3df9884a37b8be5680382"
SECRET_HASH = "9f77fb85ef2edde100d112a7175e27e1744dd5d0"
TOKEN = "tok-9f8e7d6c5b4a"
WEB = ObjectRef("Deployment", "ns", "web")


def item(kind: SourceKind, name: str, digest: str, *, deleted: bool = False) -> ReloadItem:
    return ReloadItem(Source(SourceRef(kind, "ns", name), digest), "app", deleted)


def request(*items: ReloadItem) -> ReloadRequest:
    workload = {"kind": "Deployment", "metadata": {"name": "web", "namespace": "ns"}}
    return ReloadRequest(WEB, workload, tuple(items), observed_at=1_700_000_000)


CM_CHANGE = request(item(SourceKind.CONFIGMAP, "app-cfg", CM_HASH))


@pytest.fixture
def receiver() -> Iterator[HttpReceiver]:
    with HttpReceiver() as r:
        yield r


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client() as c:
        yield c


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def sink(receiver: HttpReceiver, client: httpx.Client, registry: CollectorRegistry) -> WebhookSink:
    return WebhookSink(receiver.url + f"/hooks/{TOKEN}?token={TOKEN}", client=client,
                       metrics=Metrics(registry), timeout=2.0)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def posts(registry: CollectorRegistry, *, success: bool) -> float | None:
    labels = {"success": "true" if success else "false"}
    return registry.get_sample_value("gitops_reloader_webhook_posts_total", labels)


def assert_no_token(err: BaseException) -> None:
    texts = [str(err), repr(err)]
    if err.__cause__ is not None:
        texts += [str(err.__cause__), repr(err.__cause__)]
    for text in texts:
        assert TOKEN not in text
        assert "/hooks" not in text


def test_satisfies_the_sink_protocol(sink: WebhookSink) -> None:
    as_sink: Sink = sink
    assert as_sink.name == "webhook"


def test_posts_the_change_description(sink: WebhookSink, receiver: HttpReceiver,
                                      registry: CollectorRegistry) -> None:
    outcome = sink.emit(CM_CHANGE)
    assert outcome.status is OutcomeStatus.APPLIED
    assert outcome.sink == "webhook"
    [posted] = receiver.requests
    assert posted.method == "POST"
    assert posted.path == f"/hooks/{TOKEN}"
    assert posted.header("content-type") == "application/json"
    assert posted.json == {
        "webhook": "update successful",
        "kind": "reload",
        "namespace": "ns",
        "resource": {"kind": "ConfigMap", "namespace": "ns", "name": "app-cfg"},
        "hash": CM_HASH[:12],
        "deleted": False,
        "workloads": [{"kind": "Deployment", "namespace": "ns", "name": "web"}],
        "changes": [{
            "resource": {"kind": "ConfigMap", "namespace": "ns", "name": "app-cfg"},
            "hash": CM_HASH[:12],
            "deleted": False,
        }],
        "observedAt": 1_700_000_000,
    }
    assert CM_HASH not in posted.text
    assert posts(registry, success=True) == 1


def test_several_changes_are_listed_latest_on_top(
    sink: WebhookSink, receiver: HttpReceiver
) -> None:
    sink.emit(request(
        item(SourceKind.CONFIGMAP, "app-cfg", CM_HASH),
        item(SourceKind.SECRET, "db", SECRET_HASH, deleted=True),
    ))
    [posted] = receiver.requests
    body = posted.json
    assert [c["resource"]["name"] for c in body["changes"]] == ["app-cfg", "db"]
    assert [c["resource"]["kind"] for c in body["changes"]] == ["ConfigMap", "Secret"]
    assert body["resource"] == {"kind": "Secret", "namespace": "ns", "name": "db"}
    assert body["hash"] == SECRET_HASH[:12]
    assert body["deleted"] is True
    assert SECRET_HASH not in posted.text


def test_secret_hashes_go_through_the_keyed_digest_when_given(
    receiver: HttpReceiver, client: httpx.Client
) -> None:
    sink = WebhookSink(receiver.url, client=client, secret_digest=lambda h: "k" * 40)
    sink.emit(request(item(SourceKind.CONFIGMAP, "app-cfg", CM_HASH),
                      item(SourceKind.SECRET, "db", SECRET_HASH)))
    body = receiver.requests[0].json
    assert [c["hash"] for c in body["changes"]] == [CM_HASH[:12], "k" * 12]


def test_request_without_changes_is_skipped(sink: WebhookSink, receiver: HttpReceiver) -> None:
    assert sink.emit(request()).status is OutcomeStatus.SKIPPED
    assert receiver.requests == []


@pytest.mark.parametrize("status", [500, 502, 503, 408])
def test_server_errors_raise_retryable_host_error(
    sink: WebhookSink, receiver: HttpReceiver, registry: CollectorRegistry, status: int
) -> None:
    receiver.respond_with(status)
    with pytest.raises(HostError) as err:
        sink.emit(CM_CHANGE)
    assert type(err.value) is HostError
    assert err.value.retryable is True
    assert str(status) in str(err.value)
    assert "ns/Deployment/web" in str(err.value)
    assert_no_token(err.value)
    assert posts(registry, success=False) == 1
    assert len(receiver.requests) == 1, "the sink never retries by itself"


def test_rate_limit_raises_host_rate_limited_with_retry_after(
    sink: WebhookSink, receiver: HttpReceiver
) -> None:
    receiver.respond_with(429, headers={"Retry-After": "7"})
    with pytest.raises(HostRateLimited) as err:
        sink.emit(CM_CHANGE)
    assert err.value.retryable is True
    assert err.value.retry_after == 7.0
    assert_no_token(err.value)


def test_rate_limit_without_retry_after_leaves_it_to_the_queue(
    sink: WebhookSink, receiver: HttpReceiver
) -> None:
    receiver.respond_with(429)
    with pytest.raises(HostRateLimited) as err:
        sink.emit(CM_CHANGE)
    assert err.value.retry_after is None


@pytest.mark.parametrize("status", [401, 403, 404])
def test_auth_and_not_found_raise_permanent_host_auth_error(
    sink: WebhookSink, receiver: HttpReceiver, status: int
) -> None:
    receiver.respond_with(status)
    with pytest.raises(HostAuthError) as err:
        sink.emit(CM_CHANGE)
    assert err.value.retryable is False
    assert_no_token(err.value)


@pytest.mark.parametrize("status", [400, 410, 422, 301])
def test_other_client_errors_are_permanent(sink: WebhookSink, receiver: HttpReceiver,
                                           status: int) -> None:
    receiver.respond_with(status, headers={"Location": "http://127.0.0.1:1/"})
    with pytest.raises(ReloaderError) as err:
        sink.emit(CM_CHANGE)
    assert not isinstance(err.value, HostError)
    assert err.value.retryable is False
    assert_no_token(err.value)
    assert len(receiver.requests) == 1, "redirects are not followed"


def test_unreachable_endpoint_raises_retryable_host_error(client: httpx.Client) -> None:
    url = f"http://bot:{TOKEN}@127.0.0.1:{closed_port()}/hooks/{TOKEN}?token={TOKEN}"
    sink = WebhookSink(url, client=client, timeout=2.0)
    with pytest.raises(HostError) as err:
        sink.emit(CM_CHANGE)
    assert err.value.retryable is True
    assert "http://127.0.0.1:" in str(err.value)
    assert_no_token(err.value)
    assert TOKEN not in repr(sink)


def test_dropped_connection_raises_retryable_host_error(sink: WebhookSink,
                                                        receiver: HttpReceiver) -> None:
    receiver.respond_with(200, disconnect=True)
    with pytest.raises(HostError) as err:
        sink.emit(CM_CHANGE)
    assert err.value.retryable is True
    assert_no_token(err.value)


def test_slow_endpoint_times_out_as_retryable(receiver: HttpReceiver, client: httpx.Client) -> None:
    receiver.respond_with(200, delay=1.0)
    sink = WebhookSink(receiver.url + "/hook", client=client, timeout=0.2)
    with pytest.raises(HostError) as err:
        sink.emit(CM_CHANGE)
    assert err.value.retryable is True
    assert "Timeout" in str(err.value)


def test_own_client_is_created_and_closed(receiver: HttpReceiver) -> None:
    sink = WebhookSink(receiver.url + "/hook")
    assert sink.emit(CM_CHANGE).status is OutcomeStatus.APPLIED
    sink.close()


def test_injected_client_is_used_and_left_open(receiver: HttpReceiver) -> None:
    with httpx.Client(headers={"X-Test": "1"}) as own:
        sink = WebhookSink(receiver.url + "/hook", client=own)
        sink.emit(CM_CHANGE)
        sink.close()
        assert not own.is_closed
    assert receiver.requests[0].header("x-test") == "1"
