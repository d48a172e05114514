"""Where the real Argo CD shows the annotations sink's write as drift (the rule behind
``explain``'s drift line; the behaviour itself is measured in tests/engines)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gitops_reloader.gitops.argodiff import (
    LAST_APPLIED_ANNOTATION,
    MAX_LAST_APPLIED_BYTES,
    annotations_sink_drift,
)

TRACKING = {"argocd.argoproj.io/tracking-id": "web:apps/Deployment:team-a/web"}
TEMPLATE = ("spec", "template")


def workload(applied: Any, *, annotations: dict[str, str] | None = None,
             labels: dict[str, str] | None = None) -> dict[str, Any]:
    recorded = dict(TRACKING if annotations is None else annotations)
    if applied is not None:
        recorded[LAST_APPLIED_ANNOTATION] = applied if isinstance(applied, str) else json.dumps(applied)
    return {"metadata": {"name": "web", "annotations": recorded, "labels": labels or {}},
            "spec": {"template": {"metadata": {"annotations": {"team": "a"}}}}}


def applied_with(pod_annotations: Any) -> dict[str, Any]:
    metadata = {"labels": {"app": "web"}}
    if pod_annotations is not None:
        metadata["annotations"] = pod_annotations
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"template": {"metadata": metadata, "spec": {"containers": []}}}}


def test_an_applied_empty_pod_annotations_map_on_an_argocd_workload_is_drift() -> None:
    said = annotations_sink_drift(workload(applied_with({})), TEMPLATE)
    assert said.startswith("Argo CD manages it (argocd.argoproj.io/tracking-id): ")
    assert "OutOfSync" in said and "annotations: {}" in said


def test_the_instance_label_alone_is_said_as_a_condition() -> None:
    said = annotations_sink_drift(workload(applied_with({}), annotations={},
                                           labels={"app.kubernetes.io/instance": "web"}), TEMPLATE)
    assert said.startswith("if Argo CD manages it (label app.kubernetes.io/instance): ")


@pytest.mark.parametrize("pod_annotations", [None, {"team": "a"}, [], "", 0])
def test_no_drift_unless_the_applied_map_is_empty(pod_annotations: Any) -> None:
    assert annotations_sink_drift(workload(applied_with(pod_annotations)), TEMPLATE) == ""


def test_no_drift_without_argocd_or_without_a_recorded_apply() -> None:
    assert annotations_sink_drift(workload(applied_with({}), annotations={}), TEMPLATE) == ""
    assert annotations_sink_drift(workload(None), TEMPLATE) == ""
    assert annotations_sink_drift(workload(applied_with({})), None) == ""  # no pod template


def test_the_kinds_own_template_path_is_read() -> None:
    raw = workload({"spec": {"workload": {"template": {"metadata": {"annotations": {}}}}}})
    assert annotations_sink_drift(raw, ("spec", "workload", "template"))
    assert annotations_sink_drift(raw, TEMPLATE) == ""


@pytest.mark.parametrize("text", [
    "{not json", "[" * 100_000 + "]" * 100_000, '{"a":' * 40_000 + "1" + "}" * 40_000,
    json.dumps({**applied_with({}), "pad": "x" * MAX_LAST_APPLIED_BYTES}),
], ids=["malformed", "deep-list", "deep-map", "over-the-annotation-limit"])
def test_a_typed_or_hostile_record_is_read_within_bounds(text: str) -> None:
    assert annotations_sink_drift(workload(text), TEMPLATE) == ""
