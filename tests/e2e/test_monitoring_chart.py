"""The chart's Grafana dashboard and PrometheusRule query only what the controller exports.

Both objects are rendered by the real helm binary (``helm lint --strict`` too). Every
PromQL expression — dashboard targets, the ``label_values`` variable query, alert rules —
is tokenized (``tests/promql_names.py``) and each metric name it selects is checked
against the ``# TYPE`` lines of a live ``/metrics`` scrape of a real controller process
(``gitops-reloader run`` on the API test server) that has just reloaded a Deployment.

The ConfigMap is validated strictly with kubernetes-validate. The PrometheusRule CRD
schema is not available offline, so its structure (the fields the Prometheus Operator's
CRD allows for groups and rules, duration syntax) is checked here instead.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import CoreV1Api
from processes import Cluster, Controller, running_cluster, stop_process
from reload_helpers import configmap, create, env_of

from gitops_reloader.hashing import configmap_hash
from gitops_reloader.testing.harness import deployment, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helm_tools import CHART_DIR, render, require_helm, run_helm, validate_object
from promql_names import (
    FUNCTIONS,
    balanced,
    called_names,
    exported_sample_names,
    label_values_metric,
    metric_names,
)

pytestmark = pytest.mark.e2e

ENABLED = {"reloader.grafanaDashboard.enabled": "true", "reloader.prometheusRule.enabled": "true"}
Obj = dict[str, Any]
DURATION = re.compile(r"^(0|([0-9]+(ms|s|m|h|d|w|y))+)$")
RULE_FIELDS = {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"}
GROUP_FIELDS = {"name", "interval", "rules", "limit", "partial_response_strategy",
                "query_offset", "labels"}


@pytest.fixture(scope="module")
def helm() -> Path:
    return require_helm()


@pytest.fixture(scope="module")
def helm_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("helm-home")


@pytest.fixture(scope="module")
def objects(helm: Path, helm_home: Path) -> list[Obj]:
    return render(helm, CHART_DIR, home=helm_home, set_values=ENABLED)


def dashboard_of(objects: list[Obj]) -> Obj:
    [cm] = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")]
    return cm


def rule_of(objects: list[Obj]) -> Obj:
    [rule] = [o for o in objects if o["kind"] == "PrometheusRule"]
    return rule


def panels(dashboard: Obj) -> Iterator[Obj]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def expressions(objects: list[Obj]) -> dict[str, str]:
    """Where → PromQL expression, for the dashboard and the rules."""
    found: dict[str, str] = {}
    dashboard = json.loads(dashboard_of(objects)["data"]["gitops-reloader.json"])
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            found[f"panel {panel['title']!r} {target['refId']}"] = target["expr"]
    for group in rule_of(objects)["spec"]["groups"]:
        for rule in group["rules"]:
            found[f"rule {rule['alert']}"] = rule["expr"]
    return found


def variable_metrics(objects: list[Obj]) -> dict[str, str]:
    dashboard = json.loads(dashboard_of(objects)["data"]["gitops-reloader.json"])
    found: dict[str, str] = {}
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            metric = label_values_metric(variable["query"]["query"])
            assert metric, f"variable {variable['name']}: not a label_values(metric, label) query"
            found[f"variable {variable['name']}"] = metric
    return found


# --------------------------------------------------------------------------- chart


@pytest.mark.parametrize("values", [{}, ENABLED])
def test_helm_lint_strict(helm: Path, helm_home: Path, values: dict[str, str]) -> None:
    args = ["lint", "--strict", str(CHART_DIR)]
    for key, value in values.items():
        args += ["--set", f"{key}={value}"]
    result = run_helm(helm, args, home=helm_home)
    assert result.returncode == 0, result.stdout + result.stderr


def test_both_are_off_by_default(helm: Path, helm_home: Path) -> None:
    kinds = {(o["kind"], o["metadata"]["name"]) for o in render(helm, CHART_DIR, home=helm_home)}
    assert not any(kind == "PrometheusRule" or name.endswith("-dashboard") for kind, name in kinds)


def test_dashboard_configmap_validates_and_carries_the_sidecar_label(objects: list[Obj]) -> None:
    cm = dashboard_of(objects)
    assert validate_object(cm) == []
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(cm["data"]["gitops-reloader.json"])
    assert dashboard["uid"] == "gitops-reloader"
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids))
    for panel in panels(dashboard):
        if panel["type"] != "row":
            assert panel["targets"] and panel["description"], panel["title"]


def test_prometheus_rule_structure(objects: list[Obj]) -> None:
    rule = rule_of(objects)
    assert validate_object(rule) == []  # shape only: monitoring.coreos.com has no offline schema
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(rule["spec"]) == {"groups"}
    alerts = []
    for group in rule["spec"]["groups"]:
        assert set(group) <= GROUP_FIELDS and group["name"] and group["rules"]
        for item in group["rules"]:
            assert set(item) <= RULE_FIELDS, item
            assert isinstance(item["expr"], str) and item["expr"].strip()
            assert DURATION.match(item["for"]), item["for"]
            assert all(isinstance(v, str) for v in item["labels"].values())
            assert all(isinstance(v, str) for v in item["annotations"].values())
            assert item["labels"]["severity"] in {"critical", "warning", "info"}
            alerts.append(item["alert"])
    assert alerts == ["GitopsReloaderReloadFailures", "GitopsReloaderEmissionBacklog",
                      "GitopsReloaderLeaderMissing", "GitopsReloaderGitPushFailing",
                      "GitopsReloaderGitRepositoryUnusable", "GitopsReloaderReloadStillFailing",
                      "GitopsReloaderGitChangeNotApplied",
                      "GitopsReloaderWatchRestartStorm",
                      "GitopsReloaderRolloutFailed", "GitopsReloaderReloadsHeld"]


def test_alert_values_reach_the_rules(helm: Path, helm_home: Path) -> None:
    objects = render(helm, CHART_DIR, home=helm_home, set_values={
        **ENABLED, "reloader.prometheusRule.alerts.gitPushFailing.for": "30m",
        "reloader.prometheusRule.alerts.leaderMissing.enabled": "false",
        "reloader.prometheusRule.jobSelector": "reloader",
        "reloader.prometheusRule.labels.release": "kube-prometheus-stack"})
    rule = rule_of(objects)
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    rules = {r["alert"]: r for r in rule["spec"]["groups"][0]["rules"]}
    assert "GitopsReloaderLeaderMissing" not in rules
    assert rules["GitopsReloaderGitPushFailing"]["for"] == "30m"
    assert all('job=~"reloader"' in r["expr"] for r in rules.values())


@pytest.mark.parametrize(("key", "value"), [
    ("reloader.prometheusRule.alerts.gitPushFailing.for", "fifteen"),
    ("reloader.prometheusRule.alerts.watchRestartStorm.window", "0"),
    ("reloader.prometheusRule.alerts.emissionBacklog.threshold", "-1"),
    ("reloader.grafanaDashboard.sidecarLabel", ""),
])
def test_schema_refuses_values_that_would_break_the_rules(
    helm: Path, helm_home: Path, key: str, value: str,
) -> None:
    args = ["template", "r", str(CHART_DIR), "--set", f"{key}={value}"]
    for name, flag in ENABLED.items():
        args += ["--set", f"{name}={flag}"]
    result = run_helm(helm, args, home=helm_home)
    assert result.returncode != 0
    assert "/" + key.replace(".", "/") in result.stderr, result.stderr


def test_expressions_are_well_formed(objects: list[Obj]) -> None:
    """No promtool offline: brackets and strings close, and every call is a PromQL function."""
    found = expressions(objects)
    assert [where for where, expr in found.items() if not balanced(expr)] == []
    unknown = {where: sorted(called_names(expr) - FUNCTIONS) for where, expr in found.items()}
    assert {where: names for where, names in unknown.items() if names} == {}


# --------------------------------------------------------------------------- live scrape


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path) as running:
        yield running


@pytest.fixture
def controller(cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Controller]:
    """A controller started after the ConfigMap and the Deployment exist: its caches hold
    both when it is ready, so the change that follows cannot overtake the Deployment's
    arrival in the cache (a Deployment the controller has not seen yet is not reloaded)."""
    create(cluster.api_client, configmap("cfg", {"v": "0"}))
    create(cluster.api_client, deployment(
        "web", annotations={"reloader.stakater.com/auto": "true"},
        containers=[{"name": "app", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]))
    monkeypatch.setenv("METRICS_COUNT_BY_NAMESPACE", "enabled")  # the by-namespace panel's family
    started = Controller(cluster, tmp_path / "controller.jsonl", flags=("--coalesce-window=0",))
    try:
        started.wait_ready(cluster.http)
        yield started
    finally:
        stop_process(started.proc)


def reload_one(cluster: Cluster) -> None:
    """A ConfigMap change that reloads the one Deployment through the env-vars sink."""
    CoreV1Api(cluster.api_client).patch_namespaced_config_map("cfg", "ns", {"data": {"v": "1"}})
    wait_for(lambda: env_of(cluster.deployment("web")) == {
        "STAKATER_CFG_CONFIGMAP": configmap_hash({"v": "1"})}, timeout=30, message="reloaded")


def test_every_queried_metric_is_exported_by_a_running_controller(
    objects: list[Obj], cluster: Cluster, controller: Controller,
) -> None:
    reload_one(cluster)
    wait_for(lambda: controller.sample(cluster.http, "gitops_reloader_change_to_emit_seconds_count"
                                       '{sink="env-vars"}') == 1, message="latency observed")
    exported = exported_sample_names(cluster.http.get(controller.metrics_url + "/metrics").text)
    queried = {where: metric_names(expr) for where, expr in expressions(objects).items()}
    queried.update({where: {metric} for where, metric in variable_metrics(objects).items()})
    missing = {where: sorted(names - exported.keys())
               for where, names in queried.items() if names - exported.keys()}
    assert missing == {}
    assert all(queried.values()), [where for where, names in queried.items() if not names]
    assert len(set().union(*queried.values())) >= 20


def test_new_series_count_a_reload(cluster: Cluster, controller: Controller) -> None:
    reload_one(cluster)
    wait_for(lambda: controller.sample(
        cluster.http, 'reloader_reload_executed_total_by_namespace{namespace="ns",success="true"}'
    ) == 1, message="reload counted by namespace")
    assert controller.metric(cluster.http, 'gitops_reloader_api_writes_total{kind="Deployment"}') == 1
    assert controller.metric(cluster.http, "gitops_reloader_api_write_limit_qps") == 200
    assert controller.metric(
        cluster.http, 'gitops_reloader_change_to_emit_seconds_count{sink="env-vars"}') == 1
