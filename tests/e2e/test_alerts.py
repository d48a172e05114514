"""Reload alerts delivered over real HTTP to a recording receiver on 127.0.0.1."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from gitops_reloader.errors import ConfigError
from gitops_reloader.observability.alerts import (
    AlertConfig,
    Alerter,
    ReloadAlert,
    alert_config_from_env,
    reload_message,
)
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.testing.ports import free_port
from gitops_reloader.testing.receiver import HttpReceiver

pytestmark = pytest.mark.e2e

TOKEN = "T000/B000/XXXXsecretXXXX"


@pytest.fixture
def receiver() -> Iterator[HttpReceiver]:
    with HttpReceiver() as r:
        yield r


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def metrics(registry: CollectorRegistry) -> Metrics:
    return Metrics(registry)


def alerter(
    url: str,
    sink: str,
    metrics: Metrics,
    *,
    info: str = "",
    retries: int = 3,
    backoff: float = 0.01,
    max_queue: int = 1000,
    structured: bool = False,
) -> Alerter:
    config = AlertConfig(enabled=True, sink=sink, webhook_url=url, additional_info=info,
                         structured=structured)
    return Alerter(config, metrics=metrics, retries=retries, timeout=2.0, backoff=backoff,
                   max_queue=max_queue)


def sent(registry: CollectorRegistry, sink: str, success: bool) -> float:
    labels = {"sink": sink, "success": "true" if success else "false"}
    return registry.get_sample_value("gitops_reloader_alerts_total", labels) or 0.0


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


MESSAGE = reload_message(
    workload="web", kind="Deployment", source="app-cfg", source_kind="CONFIGMAP",
    namespace="ns", hash_prefix="3c9a892aeaed",
)


RELOAD = ReloadAlert(
    workload_kind="Deployment", workload_name="web", workload_namespace="ns",
    resource_kind="ConfigMap", resource_name="app-cfg", resource_namespace="ns",
    timestamp=datetime(2026, 11, 24, 7, 5, 9, tzinfo=UTC), stakater_type="CONFIGMAP",
    hash_prefix="3c9a892aeaed",
)


def test_structured_raw_webhook_gets_stakater_v2s_json(receiver: HttpReceiver, metrics: Metrics) -> None:
    """v2 ``--alert-structured``: ``rawMessage`` as JSON, additional info as its own field."""
    a = alerter(receiver.url + "/hook", "webhook", metrics, info="cluster: prod-eu", structured=True)
    a.notify(RELOAD)
    [request] = receiver.wait_for(1)
    assert a.close(5)
    assert request.header("content-type") == "application/json"
    assert request.json == {
        "event": "reload", "workloadKind": "Deployment", "workloadName": "web",
        "workloadNamespace": "ns", "resourceKind": "ConfigMap", "resourceName": "app-cfg",
        "resourceNamespace": "ns", "timestamp": "2026-11-24T07:05:09Z", "additional": "cluster: prod-eu",
    }


@pytest.mark.parametrize(("sink", "structured"), [("webhook", False), ("slack", True)])
def test_a_reload_alert_is_text_unless_the_raw_sink_is_structured(
    receiver: HttpReceiver, metrics: Metrics, sink: str, structured: bool,
) -> None:
    a = alerter(receiver.url + "/hook", sink, metrics, structured=structured)
    a.notify(RELOAD)
    [request] = receiver.wait_for(1)
    assert a.close(5)
    text = MESSAGE.replace("*", "") if sink == "webhook" else MESSAGE
    assert (request.body.decode() if sink == "webhook" else request.json["text"]) == text


def test_alert_structured_is_read_from_stakater_v2s_variable() -> None:
    env = {"ALERT_ON_RELOAD": "true", "ALERT_WEBHOOK_URL": "http://127.0.0.1:9/x"}
    assert alert_config_from_env({**env, "ALERT_STRUCTURED": "true"}).structured
    assert not alert_config_from_env(env).structured


def test_reload_message_reads_like_stakaters() -> None:
    assert MESSAGE == (
        "Reloader detected changes in *app-cfg* of type *CONFIGMAP* in namespace *ns*. "
        "Hence reloaded *web* of type *Deployment* in namespace *ns* (hash 3c9a892aeaed)"
    )


def test_slack_gets_a_text_payload(receiver: HttpReceiver, metrics: Metrics,
                                   registry: CollectorRegistry) -> None:
    a = alerter(receiver.url + "/services/" + TOKEN, "slack", metrics)
    a.notify(MESSAGE)
    [request] = receiver.wait_for(1)
    assert a.close(5)
    assert request.method == "POST"
    assert request.path == "/services/" + TOKEN
    assert request.header("content-type") == "application/json"
    assert request.json == {"text": MESSAGE}
    assert sent(registry, "slack", True) == 1.0


def test_teams_gets_a_message_card(receiver: HttpReceiver, metrics: Metrics) -> None:
    a = alerter(receiver.url + "/webhookb2/x", "teams", metrics)
    a.notify("hello")
    [request] = receiver.wait_for(1)
    a.close(5)
    assert request.json == {
        "@type": "MessageCard",
        "@context": "http://schema.org/extensions",
        "text": "hello",
    }


def test_google_chat_gets_a_text_payload(receiver: HttpReceiver, metrics: Metrics) -> None:
    a = alerter(receiver.url + "/v1/spaces/x/messages?key=k&token=t", "gchat", metrics)
    a.notify("hello")
    [request] = receiver.wait_for(1)
    a.close(5)
    assert request.json == {"text": "hello"}
    assert request.query == "key=k&token=t"


def test_raw_webhook_gets_plain_text_without_markdown_like_stakater(
    receiver: HttpReceiver, metrics: Metrics
) -> None:
    a = alerter(receiver.url + "/hook", "webhook", metrics, info="cluster: prod-eu")
    a.notify(MESSAGE)
    [request] = receiver.wait_for(1)
    a.close(5)
    assert request.header("content-type", "").startswith("text/plain")
    assert request.text == "cluster: prod-eu : " + MESSAGE.replace("*", "")
    assert request.json is None


@pytest.mark.parametrize("sink", ["slack", "teams", "gchat"])
def test_additional_info_is_prefixed_as_stakater_does(
    receiver: HttpReceiver, metrics: Metrics, sink: str
) -> None:
    a = alerter(receiver.url + "/hook", sink, metrics, info="cluster-a")
    a.notify("reloaded *web*")
    [request] = receiver.wait_for(1)
    a.close(5)
    assert request.json["text"] == "cluster-a : reloaded *web*"


def test_server_errors_are_retried_then_delivered(
    receiver: HttpReceiver, metrics: Metrics, registry: CollectorRegistry
) -> None:
    receiver.respond_with(500, times=2)
    a = alerter(receiver.url + "/hook", "slack", metrics, retries=3)
    a.notify("hello")
    requests = receiver.wait_for(3)
    assert a.close(5)
    assert [r.json for r in requests] == [{"text": "hello"}] * 3
    assert sent(registry, "slack", True) == 1.0
    assert sent(registry, "slack", False) == 0.0


def test_rate_limit_honours_retry_after(receiver: HttpReceiver, metrics: Metrics) -> None:
    receiver.respond_with(429, headers={"Retry-After": "0.3"})
    a = alerter(receiver.url + "/hook", "gchat", metrics, retries=1)
    started = time.monotonic()
    a.notify("hello")
    receiver.wait_for(2)
    assert time.monotonic() - started >= 0.3
    assert a.close(5)


def test_retries_are_given_up_and_counted_as_failure(
    receiver: HttpReceiver, metrics: Metrics, registry: CollectorRegistry
) -> None:
    receiver.respond_with(503, times=10)
    a = alerter(receiver.url + "/hook", "slack", metrics, retries=2)
    a.notify("hello")
    receiver.wait_for(3)
    a.close(5)
    assert len(receiver.requests) == 3
    assert sent(registry, "slack", False) == 1.0


def test_client_errors_are_not_retried(
    receiver: HttpReceiver, metrics: Metrics, registry: CollectorRegistry
) -> None:
    receiver.respond_with(404)
    a = alerter(receiver.url + "/hook", "slack", metrics, retries=3)
    a.notify("hello")
    receiver.wait_for(1)
    a.close(5)
    assert len(receiver.requests) == 1
    assert sent(registry, "slack", False) == 1.0


def test_redirects_are_not_followed(
    receiver: HttpReceiver, metrics: Metrics, registry: CollectorRegistry
) -> None:
    receiver.respond_with(302, headers={"Location": receiver.url + "/elsewhere"})
    a = alerter(receiver.url + "/hook", "slack", metrics)
    a.notify("hello")
    receiver.wait_for(1)
    a.close(5)
    assert [r.path for r in receiver.requests] == ["/hook"]
    assert sent(registry, "slack", False) == 1.0


def test_dropped_connection_is_retried(receiver: HttpReceiver, metrics: Metrics,
                                       registry: CollectorRegistry) -> None:
    receiver.respond_with(200, disconnect=True)
    a = alerter(receiver.url + "/hook", "slack", metrics, retries=2)
    a.notify("hello")
    receiver.wait_for(2)
    assert a.close(5)
    assert sent(registry, "slack", True) == 1.0


def test_receiver_down_never_blocks_notify_and_counts_failure(
    metrics: Metrics, registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"http://127.0.0.1:{free_port()}/services/{TOKEN}"
    a = alerter(url, "slack", metrics, retries=2)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="gitops_reloader.observability.alerts"):
        for _ in range(5):
            a.notify("hello")
        assert time.monotonic() - started < 0.5
        wait_until(lambda: sent(registry, "slack", False) == 5.0)
        a.close(5)
    assert caplog.records, "a failed alert is logged"
    logged = caplog.text + " ".join(str(r.__dict__) for r in caplog.records)
    assert TOKEN not in logged
    assert "/services" not in logged


def test_slow_receiver_does_not_block_notify(receiver: HttpReceiver, metrics: Metrics) -> None:
    receiver.respond_with(200, delay=1.0)
    a = alerter(receiver.url + "/hook", "slack", metrics)
    started = time.monotonic()
    a.notify("one")
    a.notify("two")
    assert time.monotonic() - started < 0.5
    receiver.wait_for(2, timeout=5)
    assert a.close(5)


def test_close_gives_up_after_its_timeout(receiver: HttpReceiver, metrics: Metrics) -> None:
    receiver.respond_with(500, times=100)
    a = alerter(receiver.url + "/hook", "slack", metrics, retries=50, backoff=0.5)
    a.notify("hello")
    receiver.wait_for(1)
    started = time.monotonic()
    assert a.close(0.2) is False
    assert time.monotonic() - started < 2.0


def test_full_queue_drops_and_counts(metrics: Metrics, registry: CollectorRegistry) -> None:
    url = f"http://127.0.0.1:{free_port()}/hook"
    a = alerter(url, "slack", metrics, retries=0, max_queue=1)
    for _ in range(50):
        a.notify("hello")
    a.close(5)
    assert sent(registry, "slack", False) == 50.0


def test_disabled_alerter_sends_nothing(receiver: HttpReceiver, metrics: Metrics) -> None:
    a = Alerter(AlertConfig(enabled=False, sink="slack", webhook_url=receiver.url), metrics=metrics)
    a.notify("hello")
    assert a.close(1)
    time.sleep(0.05)
    assert receiver.requests == []


def test_notify_after_close_is_dropped(receiver: HttpReceiver, metrics: Metrics) -> None:
    a = alerter(receiver.url + "/hook", "slack", metrics)
    a.close(1)
    a.notify("late")
    time.sleep(0.05)
    assert receiver.requests == []


# ALERT_* parsing


def test_env_parsing_reads_stakaters_variables() -> None:
    config = alert_config_from_env({
        "ALERT_ON_RELOAD": "true",
        "ALERT_SINK": " Slack ",
        "ALERT_WEBHOOK_URL": " https://hooks.slack.com/services/" + TOKEN + " ",
        "ALERT_ADDITIONAL_INFO": " prod-eu ",
    })
    assert config.enabled is True
    assert config.sink == "slack"
    assert config.webhook_url == "https://hooks.slack.com/services/" + TOKEN
    assert config.additional_info == "prod-eu"


def test_env_defaults_are_disabled_webhook() -> None:
    config = alert_config_from_env({})
    assert (config.enabled, config.sink, config.webhook_url) == (False, "webhook", "")


@pytest.mark.parametrize(("value", "sink"), [("TEAMS", "teams"), ("gchat", "gchat"),
                                             ("raw", "webhook"), ("", "webhook")])
def test_env_sink_is_case_insensitive_with_raw_alias(value: str, sink: str) -> None:
    env = {"ALERT_ON_RELOAD": "true", "ALERT_SINK": value, "ALERT_WEBHOOK_URL": "http://h/x"}
    assert alert_config_from_env(env).sink == sink


def test_env_unknown_sink_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="ALERT_SINK"):
        alert_config_from_env({"ALERT_SINK": "pager"})


def test_env_enabled_without_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="ALERT_WEBHOOK_URL"):
        alert_config_from_env({"ALERT_ON_RELOAD": "true"})


def test_env_error_and_repr_never_show_the_url() -> None:
    with pytest.raises(ConfigError) as err:
        alert_config_from_env({"ALERT_WEBHOOK_URL": "ftp://h/" + TOKEN})
    assert TOKEN not in str(err.value)
    config = AlertConfig(enabled=True, sink="slack", webhook_url="https://h/" + TOKEN)
    assert TOKEN not in repr(config)


@pytest.mark.parametrize("value", ["false", "", "no", "0"])
def test_env_alerts_off_for_non_true_values(value: str) -> None:
    assert alert_config_from_env({"ALERT_ON_RELOAD": value}).enabled is False
