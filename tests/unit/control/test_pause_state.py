"""PauseScheduler.pause_state alone: when a paused Deployment is due, and unreadable pauses."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from gitops_reloader.clock import FakeClock
from gitops_reloader.config import load_config
from gitops_reloader.control.pause import PauseScheduler
from gitops_reloader.kube.workloads import WorkloadRecord, adapters_for

PAUSE_PERIOD = "deployment.reloader.stakater.com/pause-period"
PAUSED_AT = "deployment.reloader.stakater.com/paused-at"


def scheduler(warnings: list[tuple[str, str]]) -> PauseScheduler:
    config = load_config([], environ={})
    return PauseScheduler(config, api=None, caches=None, queue=None,  # type: ignore[arg-type]
                          adapters=adapters_for(argo_rollouts=False, openshift=False, ignored=()),
                          clock=FakeClock(), warn=lambda _r, reason, msg: warnings.append((reason, msg)))


def record(kind: str, annotations: Mapping[str, str]) -> WorkloadRecord:
    adapter = adapters_for(argo_rollouts=False, openshift=False, ignored=())[kind]
    return adapter.record({
        "metadata": {"name": "web", "namespace": "ns", "annotations": dict(annotations),
                     "resourceVersion": "1", "uid": "u"},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "x"}]}}},
    })


def test_a_deployment_we_paused_is_due_at_paused_at_plus_period() -> None:
    warnings: list[tuple[str, str]] = []
    state = scheduler(warnings).pause_state(record("Deployment", {
        PAUSE_PERIOD: "5m", PAUSED_AT: "2026-01-01T00:00:00Z"}))
    assert state == (1767225600.0, 300.0)
    assert warnings == []


@pytest.mark.parametrize("annotations", [
    {},
    {PAUSE_PERIOD: "5m"},  # configured but never paused by us
    {PAUSED_AT: "2026-01-01T00:00:00Z"},
])
def test_nothing_to_unpause_without_both_annotations(annotations: dict[str, str]) -> None:
    assert scheduler([]).pause_state(record("Deployment", annotations)) is None


def test_only_deployments_are_paused() -> None:
    annotations = {PAUSE_PERIOD: "5m", PAUSED_AT: "2026-01-01T00:00:00Z"}
    assert scheduler([]).pause_state(record("StatefulSet", annotations)) is None


@pytest.mark.parametrize("period, paused_at", [("soon", "2026-01-01T00:00:00Z"), ("5m", "yesterday")])
def test_an_unreadable_pause_is_due_at_once_and_reported(period: str, paused_at: str) -> None:
    warnings: list[tuple[str, str]] = []
    state = scheduler(warnings).pause_state(record("Deployment", {PAUSE_PERIOD: period,
                                                                 PAUSED_AT: paused_at}))
    assert state == (0.0, 0.0)
    assert [reason for reason, _ in warnings] == ["InvalidPausePeriod"]
    assert PAUSE_PERIOD in warnings[0][1]
