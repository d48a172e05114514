"""When is a workload's rollout done, and when has it failed: one rule per kind, pure.

Each rule reads the object as the API server returns it (metadata, spec, status) and says
:class:`Phase` ``PROGRESSING``, ``COMPLETE`` or ``FAILED`` with a reason. The rules are
those of the tools people already trust:

- Deployment (and OpenShift DeploymentConfig, whose status has the same fields): what
  ``kubectl rollout status`` waits for (kubectl ``DeploymentStatusViewer``):
  observedGeneration caught up with generation, a ``Progressing`` condition with reason
  ``ProgressDeadlineExceeded`` is a failure, then updated = spec.replicas, no old
  replicas left (replicas = updated), available = updated.
- StatefulSet (kubectl ``StatefulSetStatusViewer``): observedGeneration caught up,
  ready = spec.replicas, then with a partition: updated >= replicas - partition; else
  updateRevision = currentRevision. ``OnDelete`` rolls no pod by itself: done at the write.
- DaemonSet (kubectl ``DaemonSetStatusViewer``): observedGeneration caught up, updated
  scheduled and available = desired. ``OnDelete``: done at the write.
- Argo Rollout: ``status.observedGeneration`` (a string) names the generation and
  ``status.phase`` is ``Healthy``; ``Degraded`` is a failure; ``Paused`` holds (reason
  :data:`PAUSED`) until it is resumed or the timeout.
- OpenKruise CloneSet (``apps.kruise.io/v1alpha1``, and ``v1beta1`` with the strategy's
  knobs under ``rollingUpdate``; the CloneSet controller's
  ``expectedUpdatedReplicas`` = replicas - partition): observedGeneration caught up (and not
  0, as ``kubectl-kruise rollout status``), a ``Progressing`` condition with reason
  ``ProgressDeadlineExceeded`` is a failure, then ``updatedReplicas`` and
  ``updatedReadyReplicas`` reach ``spec.replicas`` - ``spec.updateStrategy.partition``
  (an int, or a percentage of the replicas rounded up as OpenKruise's
  ``CalculatePartitionReplicas``) and no surplus pod (``maxSurge``) is left, as its own
  ``CloneSetAvailable`` asks ``replicas`` = ``spec.replicas``. ``OnDelete``: done at the write.
- OpenKruise Advanced StatefulSet: the StatefulSet rule (``rollingUpdate.partition`` is an
  int there too). Advanced DaemonSet: the DaemonSet rule with ``rollingUpdate.partition``
  (an int, or a percentage of ``desiredNumberScheduled`` rounded down, as its controller).
- Paused (CloneSet ``spec.updateStrategy.paused``, Advanced StatefulSet/DaemonSet
  ``spec.updateStrategy.rollingUpdate.paused``): a rollout not complete stays
  ``PROGRESSING`` with reason :data:`PAUSED`, like an Argo Rollout ``Paused``; its wave waits
  until someone resumes it, or fails it at the timeout.
- CronJob and Job: the write itself creates the new pods (a Job from the CronJob's
  template, a re-created Job), so the rollout counts as done at the write.
- Any other kind: observedGeneration caught up and a ``Ready`` (or ``Available``)
  condition ``True``; ``False`` with a reason naming a deadline is a failure. A kind with no
  controller writing its status stays ``PROGRESSING`` and fails at the timeout
  (:func:`with_deadline`), never blocking a budget forever.

``written_generation`` is the ``metadata.generation`` our write produced: an older object
(a cache that has not seen the write yet) is still ``PROGRESSING``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

JSON = Mapping[str, Any]


class Phase(StrEnum):
    """Where a rollout stands."""

    PROGRESSING = "progressing"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class RolloutStatus:
    """A rule's verdict: the phase, a one-word reason and a short message for people."""

    phase: Phase
    reason: str
    message: str = ""

    @property
    def done(self) -> bool:
        """Complete or failed: the rollout no longer counts as rolling."""
        return self.phase is not Phase.PROGRESSING


Rule = Callable[[JSON], RolloutStatus]

PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
ROLLOUT_TIMEOUT = "RolloutTimeout"
PAUSED = "Paused"
"""The reason of a rollout its owner paused (an Argo Rollout's phase, OpenKruise's ``paused``)."""
_PERCENT = re.compile(r"([0-9]{1,9})%")
_DECIMAL_PERCENT = re.compile(r"([0-9]{1,9}(?:\.[0-9]{1,9})?)%")


def section(obj: JSON, *keys: str) -> JSON:
    """The mapping at ``obj[keys[0]][keys[1]]...``; ``{}`` where a step is absent or not a mapping."""
    for key in keys:
        value = obj.get(key)
        obj = value if isinstance(value, Mapping) else {}
    return obj


def _int(mapping: JSON, key: str, default: int = 0) -> int:
    """An integer field; absent (the API server omits zeros), null or not an integer → ``default``."""
    value = mapping.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _generation(obj: JSON) -> int:
    return _int(section(obj, "metadata"), "generation")


def condition(status: JSON, kind: str, *, limit: int | None = None) -> JSON | None:
    """The first condition of type ``kind`` in ``status.conditions``, looking at most at
    ``limit`` entries (all when None)."""
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return None
    for entry in conditions[:limit]:
        if isinstance(entry, Mapping) and entry.get("type") == kind:
            return entry
    return None


def _progressing(reason: str, message: str) -> RolloutStatus:
    return RolloutStatus(Phase.PROGRESSING, reason, message)


_COMPLETE = RolloutStatus(Phase.COMPLETE, "RolloutComplete", "rollout complete")
_AT_WRITE = RolloutStatus(Phase.COMPLETE, "CompleteAtWrite", "the write itself starts the new pods")
_ON_DELETE = RolloutStatus(Phase.COMPLETE, "OnDelete",
                           "update strategy OnDelete: pods change only when deleted")


def _generation_behind(obj: JSON, status: JSON, *,
                       unobserved_is_behind: bool = False) -> RolloutStatus | None:
    """PROGRESSING while the controller has not observed the object's generation; with
    ``unobserved_is_behind`` (kubectl's StatefulSet rule) also while it observed none."""
    observed = _int(status, "observedGeneration")
    if observed < _generation(obj) or (unobserved_is_behind and observed == 0):
        return _progressing("ObservedGenerationBehind",
                            f"waiting for the controller to observe generation {_generation(obj)}")
    return None


def _on_delete_or_behind(obj: JSON, strategy: JSON, status: JSON, *,
                         unobserved_is_behind: bool = False) -> RolloutStatus | None:
    """The verdict every workload rule gives before looking at its pods: complete at the
    write for an OnDelete ``strategy``, else PROGRESSING while the generation is not observed
    (see :func:`_generation_behind`); None when neither applies."""
    if strategy.get("type") == "OnDelete":
        return _ON_DELETE
    return _generation_behind(obj, status, unobserved_is_behind=unobserved_is_behind)


def _deadline_exceeded(status: JSON) -> RolloutStatus | None:
    """FAILED when a ``Progressing`` condition says ``ProgressDeadlineExceeded``."""
    progressing = condition(status, "Progressing")
    if progressing is not None and progressing.get("reason") == PROGRESS_DEADLINE_EXCEEDED:
        return RolloutStatus(Phase.FAILED, PROGRESS_DEADLINE_EXCEEDED,
                             str(progressing.get("message") or "exceeded its progress deadline")[:256])
    return None


def deployment_rule(obj: JSON) -> RolloutStatus:
    """``kubectl rollout status`` for a Deployment (and a DeploymentConfig)."""
    status = section(obj, "status")
    behind = _generation_behind(obj, status)
    if behind is not None:
        return behind
    failed = _deadline_exceeded(status)
    if failed is not None:
        return failed
    wanted = _int(section(obj, "spec"), "replicas", 1)
    updated = _int(status, "updatedReplicas")
    if updated < wanted:
        return _progressing("UpdatingReplicas", f"{updated} of {wanted} updated replicas")
    if _int(status, "replicas") > updated:
        return _progressing("OldReplicasPending",
                            f"{_int(status, 'replicas') - updated} old replicas pending termination")
    available = _int(status, "availableReplicas")
    if available < updated:
        return _progressing("AvailabilityPending", f"{available} of {updated} updated replicas available")
    return _COMPLETE


def statefulset_rule(obj: JSON) -> RolloutStatus:
    """``kubectl rollout status`` for a StatefulSet; OnDelete is done at the write."""
    spec = section(obj, "spec")
    strategy = section(spec, "updateStrategy")
    status = section(obj, "status")
    early = _on_delete_or_behind(obj, strategy, status, unobserved_is_behind=True)
    if early is not None:
        return early
    wanted = _int(spec, "replicas", 1)
    ready = _int(status, "readyReplicas")
    if ready < wanted:
        return _progressing("PodsNotReady", f"{ready} of {wanted} pods ready")
    partition = section(strategy, "rollingUpdate").get("partition")
    if isinstance(partition, int) and not isinstance(partition, bool):
        updated = _int(status, "updatedReplicas")
        if updated < wanted - partition:
            return _progressing("UpdatingReplicas",
                                f"{updated} of {wanted - partition} pods updated (partition {partition})")
        return _COMPLETE
    if status.get("updateRevision") != status.get("currentRevision"):
        return _progressing("RevisionPending",
                            f"{_int(status, 'updatedReplicas')} of {wanted} pods at the update revision")
    return _COMPLETE


def daemonset_rule(obj: JSON) -> RolloutStatus:
    """``kubectl rollout status`` for a DaemonSet; OnDelete is done at the write."""
    status = section(obj, "status")
    return (_on_delete_or_behind(obj, section(obj, "spec", "updateStrategy"), status)
            or _daemon_pods(status, 0))


def _daemon_pods(status: JSON, partition: int) -> RolloutStatus:
    """The DaemonSet rule once the generation is observed: ``desired - partition`` pods
    updated, every desired pod available."""
    desired = _int(status, "desiredNumberScheduled")
    updated = _int(status, "updatedNumberScheduled")
    if updated < desired - partition:
        kept = f" (partition {partition})" if partition else ""
        return _progressing("UpdatingPods",
                            f"{updated} of {desired - partition} updated pods scheduled{kept}")
    available = _int(status, "numberAvailable")
    if available < desired:
        return _progressing("AvailabilityPending", f"{available} of {desired} updated pods available")
    return _COMPLETE


def scaled_int_or_percent(value: Any, total: int, *, round_up: bool, decimal: bool = False) -> int | None:
    """An int-or-string field as a count: an int as it is, ``"N%"`` as N % of ``total``
    rounded up or down, in floating point as upstream computes it (Kubernetes'
    ``GetScaledValueFromIntOrPercent``; with ``decimal``, OpenKruise's own, which also reads
    ``"0.5%"``). None for anything else; at most 9 digits either side of the point are read."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    pattern = _DECIMAL_PERCENT if decimal else _PERCENT
    match = pattern.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return None
    share = float(match.group(1)) * float(total) / 100
    return math.ceil(share) if round_up else math.floor(share)


def kruise_partition(value: Any, replicas: int) -> int | None:
    """The pods an OpenKruise partition keeps at the old revision (``CalculatePartitionReplicas``):
    absent is 0, a percentage is rounded up, a percentage under 100% leaves at least one of
    several pods to update, and the result lies between 0 and ``replicas``. None: not an
    int or a percentage."""
    if value is None:
        return 0
    partition = scaled_int_or_percent(value, replicas, round_up=True, decimal=True)
    if partition is None:
        return None
    if replicas > 1 and partition == replicas and isinstance(value, str) and value != "100%":
        partition = replicas - 1
    return max(min(partition, replicas), 0)


def _invalid_partition(field: str, value: Any) -> RolloutStatus:
    return _progressing("InvalidPartition",
                        f"{field} {str(value)[:32]!r} is neither an integer nor a percentage")


def _unless_paused(status: RolloutStatus, paused: Any) -> RolloutStatus:
    """``status``, or :data:`PAUSED` when the owner paused a rollout that is not complete
    (once the controller observed the write: before, nothing says the pause concerns it)."""
    if paused is True and status.phase is Phase.PROGRESSING and status.reason != "ObservedGenerationBehind":
        return _progressing(PAUSED, f"the update strategy is paused; {status.message}"[:256])
    return status


def cloneset_rule(obj: JSON) -> RolloutStatus:
    """An OpenKruise CloneSet: replicas - partition pods updated and ready; OnDelete is
    done at the write; a paused update strategy holds it. ``apps.kruise.io/v1beta1`` keeps
    ``partition``, ``paused`` and ``maxSurge`` under ``updateStrategy.rollingUpdate`` (its
    ``type`` is ``RollingUpdate`` or ``OnDelete``); ``v1alpha1`` directly in ``updateStrategy``."""
    spec = section(obj, "spec")
    strategy = section(spec, "updateStrategy")
    status = section(obj, "status")
    early = _on_delete_or_behind(obj, strategy, status, unobserved_is_behind=True)
    if early is not None:
        return early
    failed = _deadline_exceeded(status)
    if failed is not None:
        return failed
    beta = str(obj.get("apiVersion", "")).endswith("/v1beta1")
    knobs, where = ((section(strategy, "rollingUpdate"), "spec.updateStrategy.rollingUpdate") if beta
                    else (strategy, "spec.updateStrategy"))
    wanted = _int(spec, "replicas", 1)
    partition = kruise_partition(knobs.get("partition"), wanted)
    if partition is None:
        return _invalid_partition(f"{where}.partition", knobs.get("partition"))
    expected = wanted - partition
    kept = f" (partition {partition})" if partition else ""
    updated = _int(status, "updatedReplicas")
    ready = _int(status, "updatedReadyReplicas")
    if updated < expected:
        waiting = _progressing("UpdatingReplicas", f"{updated} of {expected} pods updated{kept}")
    elif ready < expected:
        waiting = _progressing("UpdatedPodsNotReady", f"{ready} of {expected} updated pods ready")
    elif _int(status, "replicas") > wanted:
        surplus = _int(status, "replicas") - wanted
        waiting = _progressing("OldReplicasPending", f"{surplus} surplus pods pending deletion (maxSurge)")
    else:
        return _COMPLETE
    return _unless_paused(waiting, knobs.get("paused"))


def advanced_statefulset_rule(obj: JSON) -> RolloutStatus:
    """An OpenKruise Advanced StatefulSet: the StatefulSet rule (its partition is an int);
    ``spec.updateStrategy.rollingUpdate.paused`` holds it."""
    paused = section(obj, "spec", "updateStrategy", "rollingUpdate").get("paused")
    return _unless_paused(statefulset_rule(obj), paused)


def advanced_daemonset_rule(obj: JSON) -> RolloutStatus:
    """An OpenKruise Advanced DaemonSet: the DaemonSet rule with ``rollingUpdate.partition``
    (a percentage of the desired pods rounded down, as its controller); ``paused`` holds it."""
    strategy = section(obj, "spec", "updateStrategy")
    status = section(obj, "status")
    early = _on_delete_or_behind(obj, strategy, status)
    if early is not None:
        return early
    rolling = section(strategy, "rollingUpdate")
    raw = rolling.get("partition")
    partition = 0 if raw is None else scaled_int_or_percent(raw, _int(status, "desiredNumberScheduled"),
                                                           round_up=False)
    if partition is None:
        return _invalid_partition("spec.updateStrategy.rollingUpdate.partition", raw)
    return _unless_paused(_daemon_pods(status, max(partition, 0)), rolling.get("paused"))


def argo_rollout_rule(obj: JSON) -> RolloutStatus:
    """An Argo Rollout: its own ``status.phase`` once it has observed the generation."""
    status = section(obj, "status")
    observed = status.get("observedGeneration")
    if str(observed) != str(_generation(obj)):
        return _progressing("ObservedGenerationBehind", "waiting for the rollout to be observed")
    phase = status.get("phase")
    message = str(status.get("message") or "")[:256]
    if phase == "Healthy":
        return _COMPLETE
    if phase == "Degraded":
        return RolloutStatus(Phase.FAILED, "Degraded", message or "rollout degraded")
    return _progressing(str(phase or "Unknown")[:64], message)


def at_write_rule(obj: JSON) -> RolloutStatus:
    """Jobs and CronJobs: the write creates the new pods; nothing is left to wait for."""
    return _AT_WRITE


def generic_rule(obj: JSON) -> RolloutStatus:
    """Any other kind: generation observed and a Ready/Available condition True."""
    status = section(obj, "status")
    behind = _generation_behind(obj, status, unobserved_is_behind=True)
    if behind is not None:
        return behind
    ready = condition(status, "Ready") or condition(status, "Available")
    if ready is None:
        return _progressing("NoReadyCondition", "no Ready or Available condition reported")
    state = ready.get("status")
    reason = str(ready.get("reason") or "")[:64]
    message = str(ready.get("message") or "")[:256]
    if state == "True":
        return _COMPLETE
    if state == "False" and "deadline" in reason.lower():
        return RolloutStatus(Phase.FAILED, reason, message)
    return _progressing(reason or "NotReady", message)


RULES: dict[tuple[str, str], Rule] = {
    ("apps", "Deployment"): deployment_rule,
    ("apps.openshift.io", "DeploymentConfig"): deployment_rule,
    ("apps", "StatefulSet"): statefulset_rule,
    ("apps", "DaemonSet"): daemonset_rule,
    ("argoproj.io", "Rollout"): argo_rollout_rule,
    ("batch", "Job"): at_write_rule,
    ("batch", "CronJob"): at_write_rule,
    ("apps.kruise.io", "CloneSet"): cloneset_rule,
    ("apps.kruise.io", "StatefulSet"): advanced_statefulset_rule,
    ("apps.kruise.io", "DaemonSet"): advanced_daemonset_rule,
}
"""Completion rule per (API group, kind); a kind not listed gets :func:`generic_rule`."""

COMPLETES_LIKE: dict[str, Rule] = {
    "Deployment": deployment_rule,
    "StatefulSet": statefulset_rule,
    "DaemonSet": daemonset_rule,
    "Ready-condition": generic_rule,
    "none": at_write_rule,
}
"""The rules a configured kind may name (``completesLike`` in ``--workload-kinds-config``):
its status reads like that core kind's, or a Ready condition, or ``none`` (done at the write)."""


def rule_for(group: str, kind: str) -> Rule:
    """The completion rule of a kind."""
    return RULES.get((group, kind), generic_rule)


def rollout_status(group: str, kind: str, obj: JSON, *,
                   written_generation: int | None = None, rule: Rule | None = None) -> RolloutStatus:
    """Where the rollout of ``obj`` (of ``group``/``kind``) stands.

    ``written_generation``: the generation our write produced; an object older than that
    is a view from before the write, so the rollout is still progressing. ``rule``: the rule
    to read it by instead of its kind's (a configured kind's ``completesLike``).
    """
    if written_generation is not None and _generation(obj) < written_generation:
        return _progressing("WriteNotSeen", f"waiting to see generation {written_generation}")
    return (rule or rule_for(group, kind))(obj)


def with_deadline(status: RolloutStatus, elapsed_seconds: float, timeout_seconds: float) -> RolloutStatus:
    """``status``, turned into a failure once a rollout has progressed for ``timeout_seconds``."""
    if status.phase is Phase.PROGRESSING and timeout_seconds > 0 and elapsed_seconds >= timeout_seconds:
        detail = f" (last: {status.reason}{': ' + status.message if status.message else ''})"
        return RolloutStatus(Phase.FAILED, ROLLOUT_TIMEOUT,
                             f"not complete after {elapsed_seconds:.0f}s{detail}"[:256])
    return status
