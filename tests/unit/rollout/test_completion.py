"""Completion rules per kind, table-driven from the status shapes the owning controllers write."""

from __future__ import annotations

from typing import Any

import pytest

from gitops_reloader.rollout.completion import (
    ROLLOUT_TIMEOUT,
    Phase,
    RolloutStatus,
    rollout_status,
    rule_for,
    with_deadline,
)

P, C, F = Phase.PROGRESSING, Phase.COMPLETE, Phase.FAILED


def obj(generation: int = 2, spec: dict[str, Any] | None = None,
        status: dict[str, Any] | None = None) -> dict:
    """An object as the API server returns it (zeros omitted from status, as the server does)."""
    out: dict[str, Any] = {"metadata": {"name": "web", "namespace": "shop", "generation": generation},
                           "spec": spec if spec is not None else {"replicas": 3}}
    if status is not None:
        out["status"] = status
    return out


def progressing(reason: str, message: str) -> dict[str, Any]:
    return {"type": "Progressing", "status": "True" if reason != "ProgressDeadlineExceeded" else "False",
            "reason": reason, "message": message,
            "lastUpdateTime": "2026-11-26T02:00:00Z", "lastTransitionTime": "2026-11-26T02:00:00Z"}


AVAILABLE = {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
             "message": "Deployment has minimum availability."}

DEPLOYMENT_CASES = [
    # observedGeneration lags the spec change: the controller has not seen the write yet, even
    # though the old status says everything is updated and available.
    ("observedGeneration lags", obj(2, status={
        "observedGeneration": 1, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3,
        "availableReplicas": 3, "conditions": [AVAILABLE, progressing("NewReplicaSetAvailable", "done")]}),
     P, "ObservedGenerationBehind"),
    ("new ReplicaSet scaling up", obj(2, status={
        "observedGeneration": 2, "replicas": 4, "updatedReplicas": 1, "readyReplicas": 3,
        "availableReplicas": 3, "unavailableReplicas": 1,
        "conditions": [AVAILABLE, progressing("ReplicaSetUpdated", 'ReplicaSet "web-6d4" is progressing.')]}),
     P, "UpdatingReplicas"),
    ("old replicas terminating", obj(2, status={
        "observedGeneration": 2, "replicas": 4, "updatedReplicas": 3, "readyReplicas": 4,
        "availableReplicas": 4, "conditions": [AVAILABLE]}),
     P, "OldReplicasPending"),
    ("updated but not yet available", obj(2, status={
        "observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 2,
        "availableReplicas": 2, "unavailableReplicas": 1, "conditions": [AVAILABLE]}),
     P, "AvailabilityPending"),
    ("complete", obj(2, status={
        "observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3,
        "availableReplicas": 3,
        "conditions": [AVAILABLE, progressing("NewReplicaSetAvailable",
                                              'ReplicaSet "web-6d4" has successfully progressed.')]}),
     C, "RolloutComplete"),
    ("progress deadline exceeded", obj(2, status={
        "observedGeneration": 2, "replicas": 4, "updatedReplicas": 1, "readyReplicas": 3,
        "availableReplicas": 3, "unavailableReplicas": 1,
        "conditions": [AVAILABLE, progressing("ProgressDeadlineExceeded",
                                              'ReplicaSet "web-6d4" has timed out progressing.')]}),
     F, "ProgressDeadlineExceeded"),
    ("scaled to zero (replicas omitted from status)", obj(2, spec={"replicas": 0},
                                                          status={"observedGeneration": 2}),
     C, "RolloutComplete"),
    ("replicas defaulted to one", obj(2, spec={}, status={"observedGeneration": 2, "replicas": 1,
                                                           "updatedReplicas": 1, "availableReplicas": 1}),
     C, "RolloutComplete"),
    ("no status yet", obj(1), P, "ObservedGenerationBehind"),
]


@pytest.mark.parametrize(("case", "deployment", "phase", "reason"), DEPLOYMENT_CASES,
                         ids=[c[0] for c in DEPLOYMENT_CASES])
@pytest.mark.parametrize("kind", [("apps", "Deployment"), ("apps.openshift.io", "DeploymentConfig")])
def test_deployment_like_kinds_follow_kubectl_rollout_status(
        kind: tuple[str, str], case: str, deployment: dict, phase: Phase, reason: str) -> None:
    status = rollout_status(*kind, deployment)
    assert (status.phase, status.reason) == (phase, reason), case


def test_deadline_message_is_kept_short_and_named() -> None:
    deployment = obj(2, status={"observedGeneration": 2, "conditions": [progressing(
        "ProgressDeadlineExceeded", "x" * 5000)]})
    status = rollout_status("apps", "Deployment", deployment)
    assert status.phase is F and len(status.message) == 256


STS_ROLLING = {"replicas": 3, "updateStrategy": {"type": "RollingUpdate"}}
STATEFULSET_CASES = [
    ("generation lags", obj(3, STS_ROLLING, {"observedGeneration": 2, "replicas": 3, "readyReplicas": 3,
                                             "currentRevision": "db-5c9", "updateRevision": "db-5c9"}),
     P, "ObservedGenerationBehind"),
    ("pod not ready", obj(3, STS_ROLLING, {"observedGeneration": 3, "replicas": 3, "readyReplicas": 2,
                                           "currentReplicas": 2, "updatedReplicas": 1,
                                           "currentRevision": "db-5c9", "updateRevision": "db-7f1"}),
     P, "PodsNotReady"),
    ("revisions differ", obj(3, STS_ROLLING, {"observedGeneration": 3, "replicas": 3, "readyReplicas": 3,
                                              "currentReplicas": 1, "updatedReplicas": 2,
                                              "currentRevision": "db-5c9", "updateRevision": "db-7f1"}),
     P, "RevisionPending"),
    ("complete", obj(3, STS_ROLLING, {"observedGeneration": 3, "replicas": 3, "readyReplicas": 3,
                                      "currentReplicas": 3, "updatedReplicas": 3, "availableReplicas": 3,
                                      "currentRevision": "db-7f1", "updateRevision": "db-7f1"}),
     C, "RolloutComplete"),
    ("partition reached", obj(3, {"replicas": 3, "updateStrategy": {
        "type": "RollingUpdate", "rollingUpdate": {"partition": 2}}},
        {"observedGeneration": 3, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 1,
         "currentRevision": "db-5c9", "updateRevision": "db-7f1"}),
     C, "RolloutComplete"),
    ("partition not reached", obj(3, {"replicas": 3, "updateStrategy": {
        "type": "RollingUpdate", "rollingUpdate": {"partition": 1}}},
        {"observedGeneration": 3, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 1,
         "currentRevision": "db-5c9", "updateRevision": "db-7f1"}),
     P, "UpdatingReplicas"),
    ("OnDelete", obj(3, {"replicas": 3, "updateStrategy": {"type": "OnDelete"}}, {"observedGeneration": 2}),
     C, "OnDelete"),
]


@pytest.mark.parametrize(("case", "sts", "phase", "reason"), STATEFULSET_CASES,
                         ids=[c[0] for c in STATEFULSET_CASES])
def test_statefulset_follows_kubectl_rollout_status(case: str, sts: dict, phase: Phase, reason: str) -> None:
    status = rollout_status("apps", "StatefulSet", sts)
    assert (status.phase, status.reason) == (phase, reason), case


DS_SPEC = {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}}
DAEMONSET_CASES = [
    ("generation lags", obj(5, DS_SPEC, {"observedGeneration": 4, "desiredNumberScheduled": 3,
                                         "updatedNumberScheduled": 3, "numberAvailable": 3}),
     P, "ObservedGenerationBehind"),
    ("updating", obj(5, DS_SPEC, {"observedGeneration": 5, "desiredNumberScheduled": 3,
                                  "currentNumberScheduled": 3, "updatedNumberScheduled": 1,
                                  "numberAvailable": 2, "numberUnavailable": 1, "numberReady": 2}),
     P, "UpdatingPods"),
    ("updated, one unavailable", obj(5, DS_SPEC, {"observedGeneration": 5, "desiredNumberScheduled": 3,
                                                  "updatedNumberScheduled": 3, "numberAvailable": 2}),
     P, "AvailabilityPending"),
    ("complete", obj(5, DS_SPEC, {"observedGeneration": 5, "desiredNumberScheduled": 3,
                                  "currentNumberScheduled": 3, "updatedNumberScheduled": 3,
                                  "numberAvailable": 3, "numberReady": 3}),
     C, "RolloutComplete"),
    ("OnDelete", obj(5, {"updateStrategy": {"type": "OnDelete"}}, {}), C, "OnDelete"),
]


@pytest.mark.parametrize(("case", "ds", "phase", "reason"), DAEMONSET_CASES,
                         ids=[c[0] for c in DAEMONSET_CASES])
def test_daemonset_follows_kubectl_rollout_status(case: str, ds: dict, phase: Phase, reason: str) -> None:
    status = rollout_status("apps", "DaemonSet", ds)
    assert (status.phase, status.reason) == (phase, reason), case


ROLLOUT_CASES = [
    ("generation lags", obj(4, status={"observedGeneration": "3", "phase": "Healthy"}),
     P, "ObservedGenerationBehind"),
    ("progressing", obj(4, status={"observedGeneration": "4", "phase": "Progressing",
                                   "message": "more replicas need to be updated"}), P, "Progressing"),
    ("paused", obj(4, status={"observedGeneration": "4", "phase": "Paused", "message": "CanaryPauseStep"}),
     P, "Paused"),
    ("healthy", obj(4, status={"observedGeneration": "4", "phase": "Healthy"}), C, "RolloutComplete"),
    ("degraded", obj(4, status={"observedGeneration": "4", "phase": "Degraded",
                                "message": "ProgressDeadlineExceeded: ReplicaSet timed out progressing."}),
     F, "Degraded"),
]


@pytest.mark.parametrize(("case", "rollout", "phase", "reason"), ROLLOUT_CASES,
                         ids=[c[0] for c in ROLLOUT_CASES])
def test_argo_rollout_follows_its_phase(case: str, rollout: dict, phase: Phase, reason: str) -> None:
    status = rollout_status("argoproj.io", "Rollout", rollout)
    assert (status.phase, status.reason) == (phase, reason), case


@pytest.mark.parametrize("kind", ["Job", "CronJob"])
def test_job_creating_kinds_are_done_at_the_write(kind: str) -> None:
    assert rollout_status("batch", kind, obj(1)).phase is C


GENERIC_CASES = [
    ("no controller writes status", obj(2), P, "ObservedGenerationBehind"),
    ("ready", obj(2, status={"observedGeneration": 2, "conditions": [
        {"type": "Ready", "status": "True", "reason": "Ready"}]}), C, "RolloutComplete"),
    ("not ready yet", obj(2, status={"observedGeneration": 2, "conditions": [
        {"type": "Ready", "status": "Unknown", "reason": "Deploying", "message": "Revision is deploying"}]}),
     P, "Deploying"),
    ("deadline", obj(2, status={"observedGeneration": 2, "conditions": [
        {"type": "Ready", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "timed out"}]}),
     F, "ProgressDeadlineExceeded"),
    ("available condition", obj(2, status={"observedGeneration": 2, "conditions": [
        {"type": "Available", "status": "True"}]}), C, "RolloutComplete"),
    ("no condition", obj(2, status={"observedGeneration": 2}), P, "NoReadyCondition"),
]


@pytest.mark.parametrize(("case", "thing", "phase", "reason"), GENERIC_CASES,
                         ids=[c[0] for c in GENERIC_CASES])
def test_other_kinds_use_the_generic_rule(case: str, thing: dict, phase: Phase, reason: str) -> None:
    status = rollout_status("example.com", "Worker", thing)
    assert (status.phase, status.reason) == (phase, reason), case


def test_a_view_from_before_the_write_is_progressing() -> None:
    complete = obj(2, status={"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3,
                              "availableReplicas": 3})
    assert rollout_status("apps", "Deployment", complete).phase is C
    assert rollout_status("apps", "Deployment", complete, written_generation=3).reason == "WriteNotSeen"


@pytest.mark.parametrize("hostile", [
    {"metadata": None, "spec": "x", "status": []},
    {"metadata": {"generation": "2"}, "status": {"observedGeneration": True, "conditions": "Ready"}},
    {"status": {"conditions": [None, 3, {"type": "Progressing", "reason": None}]}},
    {},
])
@pytest.mark.parametrize("kind", [("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "DaemonSet"),
                                  ("argoproj.io", "Rollout"), ("example.com", "Worker")])
def test_malformed_status_never_raises(kind: tuple[str, str], hostile: dict) -> None:
    assert isinstance(rollout_status(*kind, hostile), RolloutStatus)


def test_deadline_turns_only_progress_into_failure() -> None:
    waiting = rule_for("example.com", "Worker")(obj(2))
    assert with_deadline(waiting, 599, 600) == waiting
    failed = with_deadline(waiting, 600, 600)
    assert (failed.phase, failed.reason) == (F, ROLLOUT_TIMEOUT)
    assert "ObservedGenerationBehind" in failed.message
    complete = rollout_status("batch", "Job", obj())
    assert with_deadline(complete, 10_000, 600) is complete
    assert with_deadline(waiting, 10_000, 0) is waiting, "timeout 0 never fails"
