"""The ``pods/eviction`` subresource, as kube-apiserver serves it.

Read from ``pkg/registry/core/pod/storage/eviction.go`` (Kubernetes 1.31), rule for rule:

- the Eviction's ``metadata.name`` must be the pod's (400 otherwise);
- a pod that is ``Pending``, ``Succeeded``, ``Failed`` or already being deleted is deleted
  without looking at budgets;
- the PodDisruptionBudgets of the pod's namespace whose selector matches its labels (a budget
  without a selector matches nothing): more than one is a 500 Status ("This pod has more than
  one PodDisruptionBudget, which the eviction subresource does not support."); none, the pod
  is deleted;
- an unready pod is deleted without spending the budget when ``unhealthyPodEvictionPolicy``
  is ``AlwaysAllow``, or (``IfHealthyBudget``, the default) when ``currentHealthy >=
  desiredHealthy > 0``;
- otherwise the budget is checked and decremented: ``observedGeneration < generation`` is a
  429 with ``Retry-After: 10`` ("… is still being processed by the server."); a negative
  ``disruptionsAllowed`` or more than 2,000 ``disruptedPods`` a 403; ``disruptionsAllowed``
  0 a 429 "Cannot evict pod as it would violate the pod's disruption budget." with the cause
  "The disruption budget B needs N healthy pods and has M currently" and no Retry-After;
  else ``disruptionsAllowed`` goes down by one (at 0 the ``DisruptionAllowed`` condition turns
  False, ``InsufficientPods``) and the pod is recorded in ``disruptedPods``;
- the pod gets the ``DisruptionTarget`` condition (``EvictionByEvictionAPI``) and is deleted;
  the answer is ``201`` with a ``Success`` Status.

The budget's status is changed inside one store update (the real handler's conflict retry).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gitops_reloader.rollout.eviction import selector_query

from .resources import ResourceType
from .selectors import LabelSelector, SelectorError, parse_label_selector
from .status import ApiError, bad_request
from .storage import Store
from .strategy import now_rfc3339

MAX_DISRUPTED_PODS = 2000
BUDGET_CAUSE = "DisruptionBudget"
VIOLATES = "Cannot evict pod as it would violate the pod's disruption budget."


def budget_selector(selector: Mapping[str, Any] | None) -> LabelSelector | None:
    """A PodDisruptionBudget's ``spec.selector`` as a label selector (None: it selects nothing,
    as ``LabelSelectorAsSelector`` of a nil or invalid selector)."""
    query = selector_query(selector) if selector is not None else None
    if query is None:
        return None
    try:
        return parse_label_selector(query)
    except SelectorError:
        return None


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def _too_many(message: str, cause: str, retry_after: int) -> ApiError:
    details: dict[str, Any] = {"causes": [{"reason": BUDGET_CAUSE, "message": cause}]}
    headers: tuple[tuple[str, str], ...] = ()
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers = (("Retry-After", str(retry_after)),)
    return ApiError(429, message, details=details, headers=headers)


def _forbidden(budget: str, why: str) -> ApiError:
    return ApiError(403, f'poddisruptionbudget.policy "{budget}" is forbidden: {why}',
                    details={"name": budget, "group": "policy", "kind": "poddisruptionbudget"})


def check_and_decrement(pdb: dict[str, Any], pod: str) -> dict[str, Any]:
    """``pdb`` (a private copy) with one disruption spent on ``pod``; ApiError when it allows none."""
    name = pdb["metadata"]["name"]
    status = pdb.setdefault("status", {})
    if int(status.get("observedGeneration") or 0) < int(pdb["metadata"].get("generation") or 0):
        raise _too_many(VIOLATES, f"The disruption budget {name} is still being processed by the server.",
                        10)
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise _forbidden(name, "pdb disruptions allowed is negative")
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        raise _forbidden(name, "DisruptedPods map too big - too many evictions not confirmed by PDB "
                               "controller")
    if allowed == 0:
        desired, current = int(status.get("desiredHealthy") or 0), int(status.get("currentHealthy") or 0)
        raise _too_many(VIOLATES, f"The disruption budget {name} needs {desired} healthy pods and has "
                                  f"{current} currently", 0)
    status["disruptionsAllowed"] = allowed - 1
    if allowed - 1 == 0:
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "DisruptionAllowed"]
        conditions.append({"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
                           "message": "", "lastTransitionTime": now_rfc3339(),
                           "observedGeneration": status.get("observedGeneration") or 0})
        status["conditions"] = conditions
    status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod: now_rfc3339()}
    return pdb


def evict(store: Store, pods: ResourceType, budgets: ResourceType, namespace: str, name: str,
          eviction: Mapping[str, Any], *, manager: str, dry_run: bool = False) -> dict[str, Any]:
    """Serve ``POST .../pods/<name>/eviction``: the Status body to answer with (its ``code``: 201,
    or 500 for a pod under several budgets, which the real handler returns, not raises), or
    ApiError."""
    if (eviction.get("metadata") or {}).get("name") != name:
        raise bad_request("name in URL does not match name in Eviction object")
    pod = store.get(pods, namespace, name).load()
    phase = (pod.get("status") or {}).get("phase")
    if phase not in ("Pending", "Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp"):
        matching = [budget for budget in (rec.load() for rec in store.list_page(budgets, namespace).records)
                    if _selects(budget, pod)]
        if len(matching) > 1:
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "This pod has more than one PodDisruptionBudget, which the eviction "
                               "subresource does not support.", "code": 500}
        if matching and not _unready_may_go(pod, matching[0]):
            store.update(budgets, namespace, matching[0]["metadata"]["name"],
                         lambda current: check_and_decrement(current, name),
                         manager=manager, subresource="status", dry_run=dry_run)
    if not dry_run:
        store.update(pods, namespace, name, _disruption_target, manager=manager, subresource="status")
        store.delete(pods, namespace, name)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _selects(budget: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    selector = budget_selector((budget.get("spec") or {}).get("selector"))
    return selector is not None and selector.matches(pod["metadata"].get("labels"))


def _unready_may_go(pod: Mapping[str, Any], pdb: Mapping[str, Any]) -> bool:
    """An unready pod deleted without spending the budget (``unhealthyPodEvictionPolicy``)."""
    if _ready(pod):
        return False
    if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        return True
    status = pdb.get("status") or {}
    desired = int(status.get("desiredHealthy") or 0)
    return desired > 0 and int(status.get("currentHealthy") or 0) >= desired


def _disruption_target(pod: dict[str, Any]) -> dict[str, Any]:
    status = pod.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or () if c.get("type") != "DisruptionTarget"]
    conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                       "message": "Eviction API: evicting", "lastTransitionTime": now_rfc3339()})
    status["conditions"] = conditions
    return pod
