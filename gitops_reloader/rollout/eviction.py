"""Restarting pods that a template write does not restart: eviction, decided purely.

Some workloads roll nothing when their pod template changes — a StatefulSet, DaemonSet,
Advanced StatefulSet/DaemonSet or CloneSet with ``updateStrategy`` ``OnDelete``, a configured
kind with ``rollsOnTemplateChange: false`` — and an operator's custom resource may have no
template at all (its pods are the operator's). For those the controller restarts the pods
through the Eviction API, the way ``kubectl drain`` does: a few at a time, each replacement
Ready before the next, and never past a PodDisruptionBudget.

What the controller records, in the workload's **metadata** (it rolls nothing by itself),
in the same write as the reload::

    gitops-reloader.io/eviction: {"since":1764355200,"pods":3,"left":3,"state":"Evicting"}

``since`` is the write's wall-clock second: a pod created at or before it runs the old
data and is evicted once; a pod created later (a replacement, or one an operator or a node
drain replaced meanwhile) is never evicted for this change. Progress is derived from the
pods and this record, never from memory, so a restarted controller continues where the
last one stopped. ``pods`` is how many pods the workload should have (its spec's count:
:func:`expected_pods`); ``state`` and ``left`` are progress for people and for the rollout
budget (:func:`eviction_status`: ``ReplacementNotReady`` fails the rollout); ``sources``
(a kind with no pod template only) is what its pods run with, the record its reloads
compare with.

Annotations are tenant text: parsing is bounded and anything unexpected reads as no record;
only a record the controller's own field manager wrote counts (see the workload adapter).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from gitops_reloader.documents import value_at
from gitops_reloader.durations import parse_rfc3339
from gitops_reloader.rollout.completion import Phase, RolloutStatus, condition

EVICTION_ANNOTATION = "gitops-reloader.io/eviction"
STRATEGY_ANNOTATION = "gitops-reloader.io/restart-strategy"
"""On a workload: ``eviction`` restarts its pods through the Eviction API after the reload."""
AT_ONCE_ANNOTATION = "gitops-reloader.io/evictions-at-once"
"""On a workload: how many of its pods may be evicted together (default ``--evictions-at-once``)."""
BARE_POD_ANNOTATION = "gitops-reloader.io/evict-bare-pod"
"""On a Pod without an owner: ``"true"`` lets the controller evict it (nothing re-creates it)."""
EVICTION_STRATEGY = "eviction"
MAX_RECORD_CHARS = 8192
MAX_AT_ONCE = 100
_ORDINAL = re.compile(r"-([0-9]{1,9})$")


class EvictionMode(StrEnum):
    """``--eviction``: which workloads may restart by eviction."""

    OFF = "off"
    ANNOTATED = "annotated"
    """Workloads annotated ``restart-strategy: eviction`` (and kinds with no pod template)."""
    ON_DELETE = "on-delete"
    """Those, and every workload whose template write rolls nothing (``OnDelete``)."""


class EvictionState(StrEnum):
    """Where an eviction stands (the record's ``state``)."""

    EVICTING = "Evicting"
    WAITING = "WaitingForReplacement"
    BLOCKED = "BlockedByPDB"
    FAILED = "ReplacementNotReady"
    """A replacement was not Ready within ``--rollout-timeout``: nothing more is evicted."""
    DONE = "Done"


@dataclass(frozen=True, slots=True)
class EvictionRecord:
    """The controller's eviction record on a workload (see the module docstring)."""

    since: int
    pods: int = 0
    left: int = 0
    state: EvictionState = EvictionState.EVICTING
    sources: Mapping[str, str] = field(default_factory=dict)

    def encode(self) -> str:
        """The annotation value (compact JSON)."""
        doc: dict[str, Any] = {"since": self.since, "pods": self.pods, "left": self.left,
                               "state": self.state.value}
        if self.sources:
            doc["sources"] = dict(sorted(self.sources.items()))
        return json.dumps(doc, separators=(",", ":"))

    def progressed(self, *, pods: int, left: int, state: EvictionState) -> EvictionRecord:
        """The record with new progress; ``pods``: how many pods the workload should have (its
        spec's count, else the first count known)."""
        return replace(self, pods=pods, left=left, state=state)


def parse_record(text: Any) -> EvictionRecord | None:
    """The record in an annotation value; None when absent or not one the controller writes."""
    if not isinstance(text, str) or not text or len(text) > MAX_RECORD_CHARS:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    since, pods, left = doc.get("since"), doc.get("pods", 0), doc.get("left", 0)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (since, pods, left)):
        return None
    try:
        state = EvictionState(doc.get("state", EvictionState.EVICTING.value))
    except ValueError:
        return None
    sources = doc.get("sources") or {}
    if not isinstance(sources, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in sources.items()):
        return None
    return EvictionRecord(since, pods, left, state, sources)


def eviction_status(annotations: Mapping[str, Any]) -> RolloutStatus | None:
    """The rollout verdict of a workload whose eviction is under way (None: none is, or it is
    done — then the kind's own rule says where the rollout stands)."""
    record = parse_record(annotations.get(EVICTION_ANNOTATION))
    if record is None or record.state is EvictionState.DONE:
        return None
    message = (f"{record.left} of {record.pods} pods left to evict" if record.pods
               else "waiting for the controller to evict the pods")
    if record.state is EvictionState.FAILED:
        return RolloutStatus(Phase.FAILED, record.state.value,
                             f"a replacement pod is not Ready within --rollout-timeout; {message}")
    return RolloutStatus(Phase.PROGRESSING, record.state.value, message)


def strategy_wanted(mode: EvictionMode, annotations: Mapping[str, str], *,
                    rolls_on_write: bool, has_template: bool) -> tuple[bool, str]:
    """Whether a workload restarts by eviction, and why (in words, for explain and Events).

    ``rolls_on_write``: a write of its pod template rolls its pods (not ``OnDelete``, the kind
    rolls); ``has_template``: it has a pod template at all (else its pods are an operator's).
    A workload whose write rolls its pods never adds an eviction: that would restart twice.
    """
    annotated = annotations.get(STRATEGY_ANNOTATION, "").strip().lower() == EVICTION_STRATEGY
    if has_template and rolls_on_write:
        return False, ("the template write rolls its pods" if annotated else "")
    if mode is EvictionMode.OFF:
        return False, ("--eviction=off" if annotated or not has_template else "")
    if annotated:
        return True, f"annotation {STRATEGY_ANNOTATION}={EVICTION_STRATEGY}"
    if not has_template:
        return True, "its kind has no pod template: its pods are restarted by eviction"
    if mode is EvictionMode.ON_DELETE:
        return True, "--eviction=on-delete: a template write rolls none of its pods"
    return False, ""


def at_once(annotations: Mapping[str, str], default: int) -> tuple[int, str | None]:
    """How many pods may be evicted together, and an invalid annotation value (to report)."""
    text = annotations.get(AT_ONCE_ANNOTATION)
    if text is None:
        return default, None
    value = text.strip()
    if value.isdigit() and 1 <= int(value) <= MAX_AT_ONCE:
        return int(value), None
    return default, text[:32]


# --- pods ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodView:
    """What eviction reads of one pod."""

    name: str
    uid: str
    created: float
    ready: bool
    terminating: bool
    owner_uid: str
    """The uid of its controller owner ("" for a bare pod)."""
    owner: tuple[str, str, str] = ("", "", "")
    """Its controller owner's (apiVersion, kind, name)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    bare_allowed: bool = False
    """A bare pod annotated ``evict-bare-pod: "true"``."""

    @property
    def ordinal(self) -> int | None:
        """A StatefulSet-style ordinal (``name-N``), if the name ends in one."""
        match = _ORDINAL.search(self.name)
        return int(match.group(1)) if match else None


def controller_reference(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``controller: true`` entry of ``obj``'s ``metadata.ownerReferences`` (None: none)."""
    refs = (obj.get("metadata") or {}).get("ownerReferences")
    return next((ref for ref in (refs if isinstance(refs, list) else ())
                 if isinstance(ref, Mapping) and ref.get("controller") is True), None)


def reference_names(ref: Mapping[str, Any]) -> tuple[str, str, str]:
    """(apiVersion, kind, name) of an owner reference."""
    return str(ref.get("apiVersion", "")), str(ref.get("kind", "")), str(ref.get("name", ""))


def pod_view(raw: Mapping[str, Any]) -> PodView | None:
    """The view of a pod as the API server returns it (None: no name or creation time)."""
    metadata = raw.get("metadata") or {}
    created = parse_rfc3339(metadata.get("creationTimestamp"))
    name = metadata.get("name")
    if created is None or not isinstance(name, str):
        return None
    owner = controller_reference(raw)
    ready = condition(raw.get("status") or {}, "Ready")
    annotations = metadata.get("annotations") or {}
    labels = metadata.get("labels") or {}
    return PodView(name=name, uid=str(metadata.get("uid", "")), created=created,
                   ready=ready is not None and ready.get("status") == "True",
                   terminating=bool(metadata.get("deletionTimestamp")),
                   owner_uid=str(owner.get("uid", "")) if owner else "",
                   owner=reference_names(owner) if owner else ("", "", ""),
                   labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {},
                   bare_allowed=isinstance(annotations, Mapping)
                   and str(annotations.get(BARE_POD_ANNOTATION, "")).lower() == "true")


def is_old(pod: PodView, since: int) -> bool:
    """Whether ``pod`` was created at or before the write's second (it runs the old data).
    A pod of that very second counts as old: the clock says no more, and a restart too many
    is better than a pod left on old data."""
    return pod.created < since + 1


@dataclass(frozen=True, slots=True)
class Step:
    """What to do next for one workload's eviction."""

    evict: tuple[PodView, ...] = ()
    old: int = 0
    """Pods still to evict (created before the change, not being deleted)."""
    state: EvictionState = EvictionState.EVICTING
    reason: str = ""
    """Why nothing is evicted now (a waiting or failed step)."""

    @property
    def done(self) -> bool:
        return self.state is EvictionState.DONE


def next_step(pods: Sequence[PodView], since: int, *, at_once: int, expected: int,
              by_ordinal: bool, now: float, timeout: float = 0.0,
              bare: Sequence[PodView] = ()) -> Step:
    """The next pods to evict of a workload whose change was written at ``since``.

    ``pods``: the workload's own pods; ``expected``: how many it should have (its spec's
    replicas: a replacement not created yet is a missing pod); ``bare``: pods with no owner
    annotated ``evict-bare-pod`` — evicted, never counted or waited for (nothing re-creates
    them). Nothing is evicted while a pod is being deleted or missing, nor before the clock
    has left the write's second (a replacement is never taken for an old pod). Old pods that
    are not Ready go first, even while a replacement is still starting: they serve nothing,
    and a crash-looping pod is the one that needs the new data. An old Ready pod goes only
    once every replacement is Ready. A replacement not Ready ``timeout`` seconds (> 0) after
    it was created fails the eviction: nothing more is evicted for this change. The order
    is the StatefulSet controller's (highest ordinal first) with ``by_ordinal``, else oldest first.
    """
    live = [p for p in pods if not p.terminating]
    old = [p for p in live if is_old(p, since)]
    old_bare = [p for p in bare if is_old(p, since) and not p.terminating]
    left = len(old) + len(old_bare)
    starting = sorted((p for p in live if not is_old(p, since) and not p.ready), key=lambda p: p.created)
    if timeout > 0 and starting and now - starting[0].created >= timeout:
        late = starting[0]
        return Step(old=left, state=EvictionState.FAILED,
                    reason=f"pod {late.name} not Ready {now - late.created:.0f}s after it was created "
                           f"(--rollout-timeout {timeout:.0f}s)")
    terminating = sorted(p.name for p in pods if p.terminating)
    if terminating:
        return Step(old=left, state=EvictionState.WAITING, reason=f"pod {terminating[0]} is terminating")
    if len(live) < expected:
        return Step(old=left, state=EvictionState.WAITING,
                    reason=f"{len(live)} of {expected} pods exist: waiting for the missing one")
    if not left and not starting:
        return Step(state=EvictionState.DONE)
    if now < since + 1 and left:
        return Step(old=left, reason="waiting for the clock to leave the write's second")
    broken = _in_order([p for p in old if not p.ready], by_ordinal)
    if broken:
        return Step(evict=tuple(broken[:at_once]), old=left)
    if starting:
        return Step(old=left, state=EvictionState.WAITING, reason=f"pod {starting[0].name} is not Ready")
    return Step(evict=tuple((_in_order(old, by_ordinal) + _in_order(old_bare, False))[:at_once]), old=left)


def _in_order(pods: list[PodView], by_ordinal: bool) -> list[PodView]:
    """``pods`` in eviction order: highest ordinal first with ``by_ordinal``, else oldest first."""
    if by_ordinal:
        return sorted(pods, key=lambda p: (-(p.ordinal if p.ordinal is not None else -1), p.name))
    return sorted(pods, key=lambda p: (p.created, p.name))


@dataclass(frozen=True, slots=True)
class WorkloadPods:
    """The pods a workload's selector matches, as eviction sorts them."""

    own: list[PodView] = field(default_factory=list)
    """Pods whose controller owner chain leads to the workload."""
    bare: list[PodView] = field(default_factory=list)
    """Pods with no owner annotated ``evict-bare-pod: "true"`` (evicted, never waited for)."""
    refused: list[PodView] = field(default_factory=list)
    """Pods with no owner and no such annotation (never evicted)."""


def owned(pods: Iterable[PodView], owner_uids: frozenset[str]) -> WorkloadPods:
    """``pods`` sorted into the workload's own (controller owner one of ``owner_uids``), bare
    pods allowed to go and bare pods that are not; pods of other owners are dropped."""
    found = WorkloadPods()
    for pod in pods:
        if pod.owner_uid and pod.owner_uid in owner_uids:
            found.own.append(pod)
        elif not pod.owner_uid:
            (found.bare if pod.bare_allowed else found.refused).append(pod)
    return found


def expected_pods(obj: Mapping[str, Any], *, replicas_path: Sequence[str] = ()) -> int | None:
    """How many pods a workload should have, from its spec: ``replicas_path`` (a configured
    kind's ``pods.replicasPath``), else ``spec.replicas``, else a DaemonSet's
    ``status.desiredNumberScheduled`` (None: the object says none of these)."""
    paths = (tuple(replicas_path),) if replicas_path else (("spec", "replicas"),
                                                          ("status", "desiredNumberScheduled"))
    for path in paths:
        value = value_at(obj, *path)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 1_000_000:
            return value
    return None


# --- label selectors and disruption budgets ------------------------------------------


def selector_query(selector: Mapping[str, Any] | None) -> str | None:
    """A ``metav1.LabelSelector`` as a ``labelSelector`` query (None: it selects nothing or is
    not one; "" selects everything, as an empty selector does)."""
    if not isinstance(selector, Mapping):
        return None
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, Mapping):
        return None
    terms = [f"{k}={v}" for k, v in sorted(labels.items())]
    for expr in selector.get("matchExpressions") or ():
        if not isinstance(expr, Mapping):
            return None
        key, operator, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if operator == "In":
            terms.append(f"{key} in ({','.join(values)})")
        elif operator == "NotIn":
            terms.append(f"{key} notin ({','.join(values)})")
        elif operator == "Exists":
            terms.append(str(key))
        elif operator == "DoesNotExist":
            terms.append(f"!{key}")
        else:
            return None
    return ",".join(terms)


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether a ``metav1.LabelSelector`` selects ``labels`` (a missing selector selects nothing)."""
    if not isinstance(selector, Mapping) or selector_query(selector) is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or ():
        key, operator, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if ((operator == "In" and labels.get(key) not in values)
                or (operator == "NotIn" and present and labels.get(key) in values)
                or (operator == "Exists" and not present) or (operator == "DoesNotExist" and present)):
            return False
    return True


def disruptions_allowed(budgets: Iterable[Mapping[str, Any]],
                        labels: Mapping[str, str]) -> tuple[str, int] | None:
    """(name, ``status.disruptionsAllowed``) of the PodDisruptionBudget that covers a pod with
    ``labels`` (None: no budget covers it)."""
    for budget in budgets:
        if selects((budget.get("spec") or {}).get("selector"), labels):
            allowed = (budget.get("status") or {}).get("disruptionsAllowed", 0)
            name = str((budget.get("metadata") or {}).get("name", ""))
            return name, allowed if isinstance(allowed, int) else 0
    return None


def describe_restart(old: int, count: int, budget: tuple[str, int] | str | None,
                     bare: Sequence[str] = ()) -> str:
    """What an eviction would do, for ``explain`` and ``plan``: "evict 3 pods, one at a time,
    PDB db allows 1 now". ``budget``: (name, disruptions allowed), None when no budget covers the
    pods, or why the budgets could not be read."""
    pace = "one at a time" if count == 1 else f"{count} at a time"
    if budget is None:
        allowed = "no PodDisruptionBudget covers them"
    elif isinstance(budget, str):
        allowed = budget
    else:
        allowed = f"PDB {budget[0]} allows {budget[1]} now"
    line = f"evict {old} pod{'' if old == 1 else 's'}, {pace}, {allowed}"
    if bare:
        line += f"; never evicted (no owner, nothing would re-create them): {', '.join(bare[:5])}"
    return line
