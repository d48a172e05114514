"""The PromQL metric-name tokenizer and the scrape reader used by the monitoring chart test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# tests/ is not a package: make tests/promql_names.py importable from here.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from promql_names import (
    FUNCTIONS,
    balanced,
    called_names,
    exported_sample_names,
    label_values_metric,
    metric_names,
)


@pytest.mark.parametrize(("expr", "names"), [
    ("up", {"up"}),
    ('sum by (sink, outcome) (rate(a_total{job=~"$job"}[$__rate_interval]))', {"a_total"}),
    ("histogram_quantile(0.95, sum by (le) (rate(lat_seconds_bucket[5m])))", {"lat_seconds_bucket"}),
    ("(sum(leader) or vector(0)) < 1", {"leader"}),
    ('sum by (repo) (increase(err_total{reason="push"}[5m])) > 0 unless on (repo) '
     "sum by (repo) (increase(commits_total[5m])) > 0", {"err_total", "commits_total"}),
    ("a / ignoring (code) group_left (x, y) b", {"a", "b"}),
    ("rate(x[5m:1m] offset 1h) * 1e3 + 0x1f", {"x"}),
    ('count_values("value", build_info) > bool 0', {"build_info"}),
    ("max without (pod) (q) and on() r", {"q", "r"}),
    ('x{name="by (a) rate(b)"} + Inf', {"x"}),
    ("ns:recorded:rate5m > 3", {"ns:recorded:rate5m"}),
    ("avg_over_time(g[${__range}])", {"g"}),
    ("vector(1)", set()),
])
def test_metric_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


@pytest.mark.parametrize(("expr", "called"), [
    ("histogram_quantile(0.9, sum by (le) (rate(x_bucket[5m])))", {"histogram_quantile", "sum", "rate"}),
    ("a / on (x) group_left () b", set()),
    ('x{y="rate(z)"}', set()),
    ("histogram_quantil(0.9, x)", {"histogram_quantil"}),
])
def test_called_names(expr: str, called: set[str]) -> None:
    assert called_names(expr) == called


def test_function_table_knows_what_the_chart_uses() -> None:
    assert {"sum", "rate", "increase", "histogram_quantile", "vector", "max", "min"} <= FUNCTIONS
    assert "histogram_quantil" not in FUNCTIONS


@pytest.mark.parametrize(("expr", "ok"), [
    ('sum(rate(x{a="}"}[5m]))', True),
    ("sum(rate(x[5m])", False),
    ("sum(rate(x[5m)])", False),
    ('x{a="b}', False),
    ("avg_over_time(g[${__range}])", True),
    ("a)", False),
])
def test_balanced(expr: str, ok: bool) -> None:
    assert balanced(expr) is ok


@pytest.mark.parametrize(("query", "metric"), [
    ("label_values(gitops_reloader_leader, job)", "gitops_reloader_leader"),
    ('label_values(up{job="x"}, pod)', "up"),
    ("label_values(job)", None),
    ("query_result(up)", None),
])
def test_label_values_metric(query: str, metric: str | None) -> None:
    assert label_values_metric(query) == metric


def test_exported_names_follow_prometheus_client_naming() -> None:
    registry = CollectorRegistry()
    Counter("c_total", "c", ["x"], registry=registry)  # labels, no child yet: still typed
    Counter("plain", "p", registry=registry)
    Gauge("g", "g", registry=registry)
    Histogram("h_seconds", "h", registry=registry)
    names = exported_sample_names(generate_latest(registry).decode())
    assert {n for n, kind in names.items() if kind == "counter"} == {"c_total", "plain_total"}
    assert names["g"] == "gauge"
    assert {n for n, kind in names.items() if kind == "histogram"} == {
        "h_seconds_bucket", "h_seconds_sum", "h_seconds_count"}
    assert "h_seconds" not in names and "c" not in names and "plain" not in names
