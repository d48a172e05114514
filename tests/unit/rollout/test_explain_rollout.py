"""``explain`` with a rollout budget: the workload's priority and its last controlled rollout."""

from __future__ import annotations

import pytest

from gitops_reloader.config import Config, Rollouts
from gitops_reloader.explain import HIDDEN, Explanation, render_text, rollout_state
from gitops_reloader.kube.workloads import WorkloadAdapter

BUDGET = Config(rollouts=Rollouts(max_concurrent=5, timeout=600, hold_on_failure=True))
MARKER = '{"at":1764120000,"changes":["shop/Secret/db@3f2a9c81d0e4"]}'


def record(annotations: dict[str, str], status: dict | None = None):
    raw = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "shop", "generation": 2, "annotations": annotations},
           "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "app"}]}}}}
    if status is not None:
        raw["status"] = status
    return WorkloadAdapter().record(raw)


FAILED = {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1,
          "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}


@pytest.mark.parametrize(("annotations", "status", "now", "expected"), [
    ({}, None, 0, {"priority": 0}),
    ({"gitops-reloader.io/rollout-priority": "7"}, None, 0, {"priority": 7}),
    ({"gitops-reloader.io/rollout": MARKER}, {"observedGeneration": 1}, 1764120010,
     {"phase": "progressing", "reason": "ObservedGenerationBehind", "holds": False}),
    ({"gitops-reloader.io/rollout": MARKER}, {"observedGeneration": 1}, 1764120600,
     {"phase": "failed", "reason": "RolloutTimeout", "holds": True}),
    ({"gitops-reloader.io/rollout": MARKER}, FAILED, 1764120010,
     {"phase": "failed", "reason": "ProgressDeadlineExceeded", "holds": True}),
])
def test_rollout_state(annotations: dict[str, str], status: dict | None, now: float, expected: dict) -> None:
    state = rollout_state(record(annotations, status), BUDGET, now)
    assert {k: state[k] for k in expected} == expected


def test_no_budget_no_rollout_lines_and_a_bad_priority_is_named() -> None:
    assert rollout_state(record({"gitops-reloader.io/rollout": MARKER}), Config(), 0) == {}
    annotations = {"gitops-reloader.io/rollout-priority": "high", "gitops-reloader.io/rollout": MARKER}
    state = rollout_state(record(annotations, FAILED), BUDGET, 1764120010)
    text = render_text(Explanation("Deployment", "shop", "web", watched=True, rollout=state))
    assert "rollout priority: 0 (gitops-reloader.io/rollout-priority: not an integer: 'high'" in text
    assert ("failed [ProgressDeadlineExceeded], started 2025-11-26T01:20:00Z "
            f"for shop/Secret/db@{HIDDEN}") in text  # a Secret's hash is never printed
    assert "3f2a9c81d0e4" not in text
    assert "are held" in text


def test_a_configmaps_change_is_shown() -> None:
    marker = '{"at":1764120000,"changes":["shop/ConfigMap/cfg@0123456789ab"]}'
    state = rollout_state(record({"gitops-reloader.io/rollout": marker}, FAILED), BUDGET, 1764120010)
    assert state["changes"] == ["shop/ConfigMap/cfg@0123456789ab"]


def test_held_and_waiting_changes_are_said_with_why() -> None:
    result = Explanation("Deployment", "shop", "web", watched=True, rollout={
        "priority": 0, "in_use_in_namespace": 1, "pending": [
            {"change": f"shop/Secret/db@{HIDDEN}", "state": "held", "wave": None, "since": 1764120000,
             "held_by": ["shop/Deployment/api"], "reason": "HeldByFailedRollout", "message": ""},
            {"change": "shop/ConfigMap/cfg@3f2a9c81d0e4", "state": "waiting", "wave": 3, "since": None,
             "held_by": [], "reason": "WaitingForBudget", "message": ""}]})
    text = render_text(result)
    assert (f"  HELD: shop/Secret/db@{HIDDEN} is held by the failed rollout of shop/Deployment/api since "
            "2025-11-26T01:20:00Z; a new change of the source, or that workload becoming healthy, "
            "releases it") in text
    assert ("  WAITING: shop/ConfigMap/cfg@3f2a9c81d0e4 waits for the rollout budget (1 rolling in this "
            "namespace, wave 3 in this namespace)") in text
