"""OpenKruise's completion rules (CloneSet, Advanced StatefulSet, Advanced DaemonSet) and the
rules a configured kind names with ``completesLike``, table-driven from the status shapes the
OpenKruise v1.9.0 controllers write (``pkg/controller/cloneset/cloneset_status.go``:
``updatedReplicas``/``updatedReadyReplicas`` per revision, ``expectedUpdatedReplicas`` =
replicas - partition)."""

from __future__ import annotations

from typing import Any

import pytest

from gitops_reloader.rollout.completion import (
    COMPLETES_LIKE,
    PAUSED,
    Phase,
    RolloutStatus,
    at_write_rule,
    generic_rule,
    kruise_partition,
    rollout_status,
    scaled_int_or_percent,
)

P, C, F = Phase.PROGRESSING, Phase.COMPLETE, Phase.FAILED
KRUISE = "apps.kruise.io"
OK = "RolloutComplete"


def obj(generation: int, spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"metadata": {"name": "web", "namespace": "shop", "generation": generation},
                           "spec": spec}
    if status is not None:
        out["status"] = status
    return out


def cloneset(strategy: dict[str, Any] | None = None, replicas: int = 4) -> dict[str, Any]:
    return {"replicas": replicas, "updateStrategy": {"type": "ReCreate", **(strategy or {})}}


def cs_status(observed: int, updated: int, updated_ready: int, replicas: int = 4,
              **extra: Any) -> dict[str, Any]:
    return {"observedGeneration": observed, "replicas": replicas, "readyReplicas": replicas,
            "availableReplicas": replicas, "updatedReplicas": updated, "updatedReadyReplicas": updated_ready,
            "updateRevision": "web-7f1", "currentRevision": "web-5c9" if updated < replicas else "web-7f1",
            **extra}


DEADLINE = {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
            "message": "CloneSet web has timed out progressing."}

CLONESET_CASES = [
    # observedGeneration lags: the old status says every pod is updated and ready.
    ("generation lags", obj(3, cloneset(), cs_status(2, 4, 4)), P, "ObservedGenerationBehind"),
    ("generation never observed", obj(1, cloneset(), {"replicas": 4, "updatedReplicas": 4,
                                                      "updatedReadyReplicas": 4}),
     P, "ObservedGenerationBehind"),
    ("updating", obj(3, cloneset(), cs_status(3, 1, 1)), P, "UpdatingReplicas"),
    ("updated, not ready", obj(3, cloneset(), cs_status(3, 4, 3)), P, "UpdatedPodsNotReady"),
    ("complete", obj(3, cloneset(), cs_status(3, 4, 4)), C, OK),
    ("in place, complete", obj(3, cloneset({"type": "InPlaceIfPossible"}), cs_status(3, 4, 4)),
     C, OK),
    ("partition 2 (int) reached", obj(3, cloneset({"partition": 2}), cs_status(3, 2, 2)), C, OK),
    ("partition 2 (int) not reached", obj(3, cloneset({"partition": 2}), cs_status(3, 1, 1)),
     P, "UpdatingReplicas"),
    ("partition 50% reached", obj(3, cloneset({"partition": "50%"}), cs_status(3, 2, 2)), C, OK),
    ("partition 50% not ready", obj(3, cloneset({"partition": "50%"}), cs_status(3, 2, 1)),
     P, "UpdatedPodsNotReady"),
    # 3 of 4 rounds up to 3 kept: one pod to update
    ("partition 60% rounds up", obj(3, cloneset({"partition": "60%"}), cs_status(3, 1, 1)), C, OK),
    ("partition 100%: nothing to update", obj(3, cloneset({"partition": "100%"}), cs_status(3, 0, 0)),
     C, OK),
    ("partition 99%: one pod still updates", obj(3, cloneset({"partition": "99%"}), cs_status(3, 0, 0)),
     P, "UpdatingReplicas"),
    ("partition over replicas", obj(3, cloneset({"partition": 9}), cs_status(3, 0, 0)), C, OK),
    ("partition neither int nor percentage", obj(3, cloneset({"partition": "half"}), cs_status(3, 4, 4)),
     P, "InvalidPartition"),
    ("paused before any pod updated", obj(3, cloneset({"paused": True}), cs_status(3, 0, 0)), P, PAUSED),
    ("paused mid-way", obj(3, cloneset({"paused": True, "partition": "25%"}), cs_status(3, 1, 1)), P, PAUSED),
    ("paused, generation lags", obj(3, cloneset({"paused": True}), cs_status(2, 4, 4)),
     P, "ObservedGenerationBehind"),
    ("paused but already complete", obj(3, cloneset({"paused": True}), cs_status(3, 4, 4)), C, OK),
    ("maxSurge: a surplus pod not deleted yet",
     obj(3, cloneset({"maxSurge": 1}), cs_status(3, 4, 4, replicas=5)), P, "OldReplicasPending"),
    ("progress deadline exceeded", obj(3, cloneset(), cs_status(3, 1, 1, conditions=[DEADLINE])),
     F, "ProgressDeadlineExceeded"),
    ("OnDelete", obj(3, cloneset({"type": "OnDelete"}), cs_status(2, 0, 0)), C, "OnDelete"),
    ("replicas absent: 1", obj(3, {"updateStrategy": {}}, cs_status(3, 1, 1, replicas=1)), C, OK),
]


@pytest.mark.parametrize(("case", "cs", "phase", "reason"), CLONESET_CASES,
                         ids=[c[0] for c in CLONESET_CASES])
def test_cloneset_completes_by_openkruises_rule(case: str, cs: dict, phase: Phase, reason: str) -> None:
    status = rollout_status(KRUISE, "CloneSet", cs)
    assert (status.phase, status.reason) == (phase, reason), (case, status)


def as_v1beta1(cs: dict[str, Any]) -> dict[str, Any]:
    """A v1alpha1 CloneSet as OpenKruise's conversion (``cloneset_conversion.go`` ConvertTo)
    presents it at ``v1beta1``: ``type`` OnDelete stays, the pod update types become
    ``RollingUpdate`` with ``rollingUpdate.podUpdatePolicy``, and the knobs move under it."""
    strategy = dict(cs["spec"]["updateStrategy"])
    kind = strategy.pop("type", "ReCreate")
    converted = ({"type": "OnDelete"} if kind == "OnDelete"
                 else {"type": "RollingUpdate", "rollingUpdate": {**strategy, "podUpdatePolicy": kind}})
    return {**cs, "apiVersion": "apps.kruise.io/v1beta1",
            "spec": {**cs["spec"], "updateStrategy": converted}}


@pytest.mark.parametrize(("case", "cs", "phase", "reason"), CLONESET_CASES,
                         ids=[c[0] for c in CLONESET_CASES])
def test_cloneset_v1beta1_completes_by_the_same_rule(case: str, cs: dict, phase: Phase, reason: str) -> None:
    status = rollout_status(KRUISE, "CloneSet", as_v1beta1(cs))
    assert (status.phase, status.reason) == (phase, reason), (case, status)


def test_cloneset_v1beta1_knobs_at_the_top_are_not_read() -> None:
    """At v1beta1 a top-level ``partition``/``paused`` is not OpenKruise's field: not read."""
    cs = {**obj(3, {"replicas": 4, "updateStrategy": {"type": "RollingUpdate", "partition": 4,
                                                        "paused": True}}, cs_status(3, 0, 0)),
          "apiVersion": "apps.kruise.io/v1beta1"}
    assert rollout_status(KRUISE, "CloneSet", cs).reason == "UpdatingReplicas"
    invalid = as_v1beta1(obj(3, cloneset({"partition": "half"}), cs_status(3, 4, 4)))
    message = rollout_status(KRUISE, "CloneSet", invalid).message
    assert message.startswith("spec.updateStrategy.rollingUpdate.partition 'half'")


def test_a_paused_clonesets_message_says_what_it_waits_for() -> None:
    status = rollout_status(KRUISE, "CloneSet", obj(3, cloneset({"paused": True, "partition": 1}),
                                                    cs_status(3, 1, 1)))
    assert status.message == "the update strategy is paused; 1 of 3 pods updated (partition 1)"


def asts(rolling: dict[str, Any] | None = None, replicas: int = 3) -> dict[str, Any]:
    return {"replicas": replicas, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling or {}}}


def asts_status(observed: int, ready: int, updated: int, same_revision: bool = False) -> dict[str, Any]:
    return {"observedGeneration": observed, "replicas": 3, "readyReplicas": ready, "availableReplicas": ready,
            "currentReplicas": 3 - updated, "updatedReplicas": updated, "updatedReadyReplicas": updated,
            "currentRevision": "db-7f1" if same_revision else "db-5c9", "updateRevision": "db-7f1"}


ADVANCED_STATEFULSET_CASES = [
    ("generation lags", obj(4, asts(), asts_status(3, 3, 3, True)), P, "ObservedGenerationBehind"),
    ("pod not ready", obj(4, asts(), asts_status(4, 2, 1)), P, "PodsNotReady"),
    ("revisions differ", obj(4, {"replicas": 3, "updateStrategy": {"type": "RollingUpdate"}},
                             asts_status(4, 3, 2)), P, "RevisionPending"),
    ("complete", obj(4, {"replicas": 3, "updateStrategy": {"type": "RollingUpdate"}},
                     asts_status(4, 3, 3, True)), C, OK),
    ("partition reached", obj(4, asts({"partition": 2}), asts_status(4, 3, 1)), C, OK),
    ("partition not reached", obj(4, asts({"partition": 1}), asts_status(4, 3, 1)), P, "UpdatingReplicas"),
    ("paused", obj(4, asts({"paused": True, "partition": 0}), asts_status(4, 3, 0)), P, PAUSED),
    ("paused, generation lags", obj(4, asts({"paused": True}), asts_status(3, 3, 3, True)),
     P, "ObservedGenerationBehind"),
    ("paused but complete", obj(4, asts({"paused": True, "partition": 0}), asts_status(4, 3, 3, True)),
     C, OK),
    ("OnDelete", obj(4, {"replicas": 3, "updateStrategy": {"type": "OnDelete"}}, {}), C, "OnDelete"),
]


@pytest.mark.parametrize(("case", "sts", "phase", "reason"), ADVANCED_STATEFULSET_CASES,
                         ids=[c[0] for c in ADVANCED_STATEFULSET_CASES])
def test_advanced_statefulset_completes_like_a_statefulset_and_honours_paused(
        case: str, sts: dict, phase: Phase, reason: str) -> None:
    status = rollout_status(KRUISE, "StatefulSet", sts)
    assert (status.phase, status.reason) == (phase, reason), (case, status)


def ads(rolling: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"updateStrategy": {"type": "RollingUpdate",
                               "rollingUpdate": {"rollingUpdateType": "Standard", **(rolling or {})}}}


def ads_status(observed: int, updated: int, available: int = 4) -> dict[str, Any]:
    return {"observedGeneration": observed, "desiredNumberScheduled": 4, "currentNumberScheduled": 4,
            "numberMisscheduled": 0, "numberReady": available, "numberAvailable": available,
            "updatedNumberScheduled": updated}


ADVANCED_DAEMONSET_CASES = [
    ("generation lags", obj(6, ads(), ads_status(5, 4)), P, "ObservedGenerationBehind"),
    ("updating", obj(6, ads(), ads_status(6, 1)), P, "UpdatingPods"),
    ("updated, one unavailable", obj(6, ads(), ads_status(6, 4, 3)), P, "AvailabilityPending"),
    ("complete", obj(6, ads(), ads_status(6, 4)), C, OK),
    ("partition 3 (int) reached", obj(6, ads({"partition": 3}), ads_status(6, 1)), C, OK),
    ("partition 2 (int) not reached", obj(6, ads({"partition": 2}), ads_status(6, 1)), P, "UpdatingPods"),
    ("partition 50% reached", obj(6, ads({"partition": "50%"}), ads_status(6, 2)), C, OK),
    # 4 x 60% = 2.4 rounds down to 2 kept (the DaemonSet controller rounds down): 2 to update
    ("partition 60% rounds down", obj(6, ads({"partition": "60%"}), ads_status(6, 1)), P, "UpdatingPods"),
    ("partition 0.5% is not read (integers only)", obj(6, ads({"partition": "0.5%"}), ads_status(6, 4)),
     P, "InvalidPartition"),
    ("paused", obj(6, ads({"paused": True}), ads_status(6, 0)), P, PAUSED),
    ("paused but complete", obj(6, ads({"paused": True}), ads_status(6, 4)), C, OK),
    ("OnDelete", obj(6, {"updateStrategy": {"type": "OnDelete"}}, {}), C, "OnDelete"),
]


@pytest.mark.parametrize(("case", "ds", "phase", "reason"), ADVANCED_DAEMONSET_CASES,
                         ids=[c[0] for c in ADVANCED_DAEMONSET_CASES])
def test_advanced_daemonset_completes_like_a_daemonset_with_partition_and_paused(
        case: str, ds: dict, phase: Phase, reason: str) -> None:
    status = rollout_status(KRUISE, "DaemonSet", ds)
    assert (status.phase, status.reason) == (phase, reason), (case, status)


# OpenKruise v1.9.0 pkg/util/tools_test.go TestCalculatePartitionReplicas, case for case.
@pytest.mark.parametrize(("replicas", "partition", "kept"), [
    (0, "99%", 0), (10, None, 0), (9, "99%", 8), (10, "90%", 9), (10, "1%", 1), (99, "99%", 98),
    (99, "100%", 99), (99, "0%", 0), (1, "100%", 1), (1, None, 0), (1, "1%", 1), (10, 5, 5),
    (10, 1, 1), (10, 0, 0), (10, 10, 10), (9, "99", None), (9, "0.01%", 1), (999, "99.99%", 998),
])
def test_kruise_partition_matches_calculate_partition_replicas(replicas: int, partition: Any,
                                                               kept: int | None) -> None:
    assert kruise_partition(partition, replicas) == kept


@pytest.mark.parametrize("value", ["", "%", "-5%", "5 %", "1e2%", "nan%", "1" * 10 + "%", "5.%", True, 2.5,
                                   "9" * 100_000 + "%"])
def test_a_hostile_partition_is_not_a_count(value: Any) -> None:
    assert scaled_int_or_percent(value, 10, round_up=True, decimal=True) is None


@pytest.mark.parametrize("hostile", [
    {"metadata": None, "spec": "x", "status": []},
    {"metadata": {"generation": "2"}, "spec": {"updateStrategy": {"paused": "yes", "partition": [1]}},
     "status": {"observedGeneration": True}},
    {"spec": {"updateStrategy": {"rollingUpdate": "x"}}, "status": {"conditions": [None, 3]}},
    {},
])
@pytest.mark.parametrize("kind", ["CloneSet", "StatefulSet", "DaemonSet"])
def test_malformed_kruise_objects_never_raise(kind: str, hostile: dict) -> None:
    assert isinstance(rollout_status(KRUISE, kind, hostile), RolloutStatus)


DEPLOYMENT_LIKE = obj(2, {"replicas": 2}, {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2,
                                           "availableReplicas": 2})


@pytest.mark.parametrize(("name", "thing", "phase", "reason"), [
    ("Deployment", DEPLOYMENT_LIKE, C, OK),
    ("Deployment", obj(3, {"replicas": 2}, DEPLOYMENT_LIKE["status"]), P, "ObservedGenerationBehind"),
    ("StatefulSet", obj(2, {"replicas": 1}, {"observedGeneration": 2, "readyReplicas": 1,
                                             "currentRevision": "a", "updateRevision": "b"}),
     P, "RevisionPending"),
    ("DaemonSet", obj(2, {}, {"observedGeneration": 2, "desiredNumberScheduled": 1,
                              "updatedNumberScheduled": 1, "numberAvailable": 1}), C, OK),
    ("Ready-condition", obj(2, {}, {"observedGeneration": 2,
                                    "conditions": [{"type": "Ready", "status": "True"}]}),
     C, OK),
    ("none", obj(2, {}), C, "CompleteAtWrite"),
])
def test_completes_like_names_a_rule(name: str, thing: dict, phase: Phase, reason: str) -> None:
    """A configured kind's ``completesLike``: read by the named rule, whatever its group and kind."""
    status = rollout_status("example.com", "Worker", thing, rule=COMPLETES_LIKE[name])
    assert (status.phase, status.reason) == (phase, reason)


def test_the_completes_like_names_are_the_documented_ones() -> None:
    assert list(COMPLETES_LIKE) == ["Deployment", "StatefulSet", "DaemonSet", "Ready-condition", "none"]
    assert COMPLETES_LIKE["Ready-condition"] is generic_rule and COMPLETES_LIKE["none"] is at_write_rule
