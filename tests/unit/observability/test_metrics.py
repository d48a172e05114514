"""Metric names, label sets and values as a Prometheus scrape shows them."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

from gitops_reloader.model import OutcomeStatus
from gitops_reloader.observability.metrics import Metrics


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def metrics(registry: CollectorRegistry) -> Metrics:
    return Metrics(registry)


def scrape(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_reload_executed_total_counts_each_workload_with_stakater_name(
    registry: CollectorRegistry, metrics: Metrics
) -> None:
    metrics.reload_executed(True, "ns")
    metrics.reload_executed(True, "other")
    text = scrape(registry)
    assert 'reloader_reload_executed_total{success="true"} 2.0' in text
    assert 'reloader_reload_executed_total{success="false"} 0.0' in text
    assert "# TYPE reloader_reload_executed_total counter" in text


def test_failed_reload_counts_success_false(registry: CollectorRegistry, metrics: Metrics) -> None:
    metrics.reload_executed(False, "ns")
    assert value(registry, "reloader_reload_executed_total", success="false") == 1.0
    assert value(registry, "reloader_reload_executed_total", success="true") == 0.0


def test_both_success_series_exist_before_any_reload(
    registry: CollectorRegistry, metrics: Metrics
) -> None:
    text = scrape(registry)
    assert 'reloader_reload_executed_total{success="true"} 0.0' in text
    assert 'reloader_reload_executed_total{success="false"} 0.0' in text


def test_by_namespace_family_is_off_by_default(
    registry: CollectorRegistry, metrics: Metrics
) -> None:
    metrics.reload_executed(True, "ns")
    assert "by_namespace" not in scrape(registry)


def test_by_namespace_family_uses_stakaters_exact_name_when_enabled() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry, count_by_namespace=True)
    metrics.reload_executed(True, "ns")
    metrics.reload_executed(True, "ns")
    metrics.reload_executed(False, "kube-system")
    text = scrape(registry)
    assert 'reloader_reload_executed_total_by_namespace{namespace="ns",success="true"} 2.0' in text
    assert (
        'reloader_reload_executed_total_by_namespace{namespace="kube-system",success="false"} 1.0'
        in text
    )
    assert 'reloader_reload_executed_total{success="true"} 2.0' in text


def test_metrics_never_touch_the_global_registry(
    registry: CollectorRegistry, metrics: Metrics
) -> None:
    metrics.reload_executed(True, "ns")
    assert REGISTRY.get_sample_value("reloader_reload_executed_total", {"success": "true"}) is None


def test_two_metrics_on_separate_registries_are_independent() -> None:
    first, second = CollectorRegistry(), CollectorRegistry()
    Metrics(first).reload_executed(True, "ns")
    Metrics(second)
    assert value(first, "reloader_reload_executed_total", success="true") == 1.0
    assert value(second, "reloader_reload_executed_total", success="true") == 0.0


def test_second_metrics_on_the_same_registry_is_refused(
    registry: CollectorRegistry, metrics: Metrics
) -> None:
    with pytest.raises(ValueError, match="Duplicated"):
        Metrics(registry)


@pytest.mark.parametrize("outcome", [*(s.value for s in OutcomeStatus), "error"])
def test_sink_outcome_accepts_every_outcome(
    registry: CollectorRegistry, metrics: Metrics, outcome: str
) -> None:
    metrics.sink_outcome("git", outcome)
    labels = {"sink": "git", "outcome": outcome}
    assert registry.get_sample_value("gitops_reloader_sink_outcomes_total", labels) == 1.0


def test_sink_outcome_accepts_the_enum(registry: CollectorRegistry, metrics: Metrics) -> None:
    metrics.sink_outcome("env-vars", OutcomeStatus.ALREADY_CURRENT)
    assert value(
        registry, "gitops_reloader_sink_outcomes_total", sink="env-vars", outcome="already-current"
    ) == 1.0


def test_sink_outcome_rejects_unknown_outcome(metrics: Metrics) -> None:
    with pytest.raises(ValueError, match="unknown sink outcome"):
        metrics.sink_outcome("git", "exploded")


def test_watch_restart_rejects_unknown_reason(metrics: Metrics) -> None:
    with pytest.raises(ValueError, match="unknown watch restart reason"):
        metrics.watch_restart("configmaps", "bored")


def test_every_family_carries_its_documented_labels(
    registry: CollectorRegistry, metrics: Metrics
) -> None:
    metrics.sink_error("git", "not-found")
    metrics.observe_emit("git", 0.2)
    metrics.queue_retry()
    metrics.api_error("patch", "deployments", 409)
    metrics.watch_restart("configmaps", "expired")
    metrics.change_detected("SECRET")
    metrics.invalid_annotation("Deployment")
    metrics.git_commit("infra")
    metrics.git_push_rejected("infra")
    metrics.git_error("infra", "fetch")
    metrics.pr_operation("github", "open")
    metrics.alert_sent("slack", True)
    metrics.webhook_post(False)
    metrics.set_leader(True)
    metrics.set_informer_synced("secrets", True)
    p = "gitops_reloader_"
    expected: list[tuple[str, dict[str, str]]] = [
        (p + "sink_errors_total", {"sink": "git", "reason": "not-found"}),
        (p + "emit_duration_seconds_count", {"sink": "git"}),
        (p + "queue_retries_total", {}),
        (p + "api_errors_total", {"verb": "patch", "resource": "deployments", "code": "409"}),
        (p + "watch_restarts_total", {"resource": "configmaps", "reason": "expired"}),
        (p + "changes_detected_total", {"kind": "SECRET"}),
        (p + "invalid_annotations_total", {"kind": "Deployment"}),
        (p + "git_commits_total", {"repo": "infra"}),
        (p + "git_push_rejections_total", {"repo": "infra"}),
        (p + "git_errors_total", {"repo": "infra", "reason": "fetch"}),
        (p + "pr_operations_total", {"host": "github", "operation": "open"}),
        (p + "alerts_total", {"sink": "slack", "success": "true"}),
        (p + "webhook_posts_total", {"success": "false"}),
        (p + "leader", {}),
        (p + "informer_synced", {"resource": "secrets"}),
    ]
    for name, labels in expected:
        assert registry.get_sample_value(name, labels) == 1.0, name


def test_emit_duration_is_a_histogram_observed_also_on_error(
    registry: CollectorRegistry, metrics: Metrics
) -> None:
    with pytest.raises(RuntimeError), metrics.time_emit("webhook"):
        raise RuntimeError("boom")
    assert value(registry, "gitops_reloader_emit_duration_seconds_count", sink="webhook") == 1.0
    assert "# TYPE gitops_reloader_emit_duration_seconds histogram" in scrape(registry)


def test_queue_depth_is_read_from_the_callback_at_scrape_time(
    registry: CollectorRegistry, metrics: Metrics
) -> None:
    depth = [3]
    metrics.set_queue_depth_callback(lambda: depth[0])
    assert value(registry, "gitops_reloader_queue_depth") == 3.0
    depth[0] = 7
    assert value(registry, "gitops_reloader_queue_depth") == 7.0


def test_leader_and_informer_gauges_go_back_to_zero(
    registry: CollectorRegistry, metrics: Metrics
) -> None:
    metrics.set_leader(True)
    metrics.set_leader(False)
    metrics.set_informer_synced("configmaps", True)
    metrics.set_informer_synced("configmaps", False)
    assert value(registry, "gitops_reloader_leader") == 0.0
    assert value(registry, "gitops_reloader_informer_synced", resource="configmaps") == 0.0


def test_change_to_emit_latency_is_a_histogram_by_sink(
    registry: CollectorRegistry, metrics: Metrics
) -> None:
    metrics.observe_change_to_emit("git", 3.0)
    metrics.observe_change_to_emit("git", -0.5)  # a clock step backwards counts as 0
    name = "gitops_reloader_change_to_emit_seconds"
    assert value(registry, name + "_count", sink="git") == 2.0
    assert value(registry, name + "_sum", sink="git") == 3.0
    assert value(registry, name + "_bucket", sink="git", le="0.005") == 1.0


def test_api_writes_and_their_limit(registry: CollectorRegistry, metrics: Metrics) -> None:
    metrics.api_write("Deployment")
    metrics.api_write("Deployment")
    metrics.set_api_write_limit(50.0)
    assert value(registry, "gitops_reloader_api_writes_total", kind="Deployment") == 2.0
    assert value(registry, "gitops_reloader_api_write_limit_qps") == 50.0
