"""Restart a workload's pods through the Eviction API, as its eviction record asks.

A reload of a workload whose template write rolls nothing writes an eviction record in the
workload's metadata (:mod:`gitops_reloader.rollout.eviction`). The :class:`Evictor` — one
thread, on the active instance — takes every workload whose record is not ``Done``, as the
informer shows it (so an instance that starts or takes over continues what the last one
left), and on each pass per workload:

1. reads the workload (one GET) and its pods (one LIST by its label selector, ``pods.selector``
   for a configured kind) and keeps the pods whose controller owner chain leads to it
   (``pods.ownerDepth`` levels, each intermediate owner read once per pass);
2. asks :func:`~gitops_reloader.rollout.eviction.next_step` what to evict: pods created before
   the change, a few at a time, those not Ready first; never while a pod is terminating or
   missing (fewer than the spec's count: :func:`~gitops_reloader.rollout.eviction.expected_pods`),
   nor a Ready one while a replacement is not Ready. A replacement not Ready
   ``--rollout-timeout`` after its creation stops the eviction (``ReplacementNotReady``; a
   ``RolloutFailed`` Warning Event, from the rollout waves under a budget);
3. evicts them (``policy/v1`` Eviction with the pod's uid as precondition: a replacement of the
   same name is never evicted by mistake; never a DELETE). A 429 — a PodDisruptionBudget that
   allows no disruption now — waits with backoff (``Retry-After`` when the server sends one)
   and, when it lasts, a ``ReloadBlockedByPDB`` Warning Event;
4. writes the progress into the record (a JSON patch that tests the record it read, so a newer
   reload's record is never overwritten) and, when every pod has restarted and is Ready,
   ``Done`` with a Normal ``EvictionComplete`` Event.

A pod with no owner that the selector matches is never evicted (nothing would re-create it)
unless annotated ``gitops-reloader.io/evict-bare-pod: "true"`` (then it is evicted, never
counted or waited for); an ``EvictionRefused`` Event names it once per change.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gitops_reloader.backoff import Backoff
from gitops_reloader.clock import Clock
from gitops_reloader.config import Rollouts
from gitops_reloader.errors import KubeError, KubeNotFound
from gitops_reloader.kube.api import FIELD_MANAGER, JSON_PATCH, KubeApi, field_manager
from gitops_reloader.kube.resources import PODDISRUPTIONBUDGETS, PODS, ResourceKind
from gitops_reloader.kube.workloads import WorkloadAdapter, WorkloadRecord
from gitops_reloader.model import ObjectRef
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.rollout.eviction import (
    AT_ONCE_ANNOTATION,
    EVICTION_ANNOTATION,
    EvictionRecord,
    EvictionState,
    PodView,
    Step,
    WorkloadPods,
    at_once,
    controller_reference,
    describe_restart,
    disruptions_allowed,
    expected_pods,
    is_old,
    next_step,
    owned,
    parse_record,
    pod_view,
    reference_names,
    selector_query,
)

log = logging.getLogger(__name__)

Report = Callable[[ObjectRef, str, str, str], None]
"""(workload, uid, reason, message): a log line and an Event on the workload."""

BLOCKED_EVENT_AFTER = 2
"""Consecutive refusals by a disruption budget after which ``ReloadBlockedByPDB`` is recorded."""
MAX_BACKOFF = 60.0
MAX_PODS = 5000
_ORDINAL_KINDS = frozenset({"StatefulSet", "StatefulSet.apps.kruise.io"})
_PATH_ESCAPED = EVICTION_ANNOTATION.replace("~", "~0").replace("/", "~1")


@dataclass(slots=True)
class _Episode:
    """What the evictor remembers of one workload's eviction between passes (never progress)."""

    not_before: float = 0.0
    backoffs: int = 0
    """Refusals backed off from in a row (the next wait doubles)."""
    refusals: int = 0
    announced: set[str] = field(default_factory=set)
    """Event keys already recorded for this eviction (blocked, bare pods)."""
    since: int = 0


class Evictor:
    """Evicts, workload by workload, the pods their eviction records name (thread-safe)."""

    def __init__(self, api: KubeApi, adapters: Mapping[str, WorkloadAdapter], settings: Rollouts, *,
                 metrics: Metrics, clock: Clock, normal: Report, warning: Report) -> None:
        self.api = api
        self.adapters = adapters
        self.settings = settings
        self.metrics = metrics
        self.clock = clock
        self.normal = normal
        self.warning = warning
        self._episodes: dict[ObjectRef, _Episode] = {}
        self.finder = PodFinder(api)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- what the controller calls ---------------------------------------------------

    def observe(self, record: WorkloadRecord) -> None:
        """A workload as the informer shows it: tracked while its eviction record is not Done."""
        if EVICTION_ANNOTATION not in record.annotations and record.ref not in self._episodes:
            return  # every workload event passes here: no lock for the many with nothing to do
        current = parse_record(record.annotations.get(EVICTION_ANNOTATION))
        if current is None or current.state is EvictionState.DONE:
            self.forget(record.ref)
            return
        with self._lock:
            episode = self._episodes.get(record.ref)
            if episode is not None and episode.since == current.since:
                return
            self._episodes[record.ref] = _Episode(since=current.since)
        self._wake.set()

    def forget(self, ref: ObjectRef) -> None:
        with self._lock:
            self._episodes.pop(ref, None)

    def tracking(self) -> list[ObjectRef]:
        """The workloads whose eviction is under way."""
        with self._lock:
            return sorted(self._episodes, key=lambda ref: ref.key)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="evictor", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # --- the loop --------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.settings.eviction_interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            self.run_once()

    def run_once(self) -> None:
        """One pass over the workloads whose turn it is."""
        now = self.clock.monotonic()
        with self._lock:
            due = [ref for ref, episode in self._episodes.items() if episode.not_before <= now]
        for ref in due:
            try:
                self._step(ref)
            except KubeError as exc:
                self.metrics.pod_eviction("error")
                log.warning("eviction pass failed; tried again", extra={"object": ref.key, "error": str(exc)})
                self._back_off(ref, None)
            except Exception:  # one workload's surprise must never stop the evictor for the others
                self.metrics.pod_eviction("error")
                log.exception("eviction pass failed unexpectedly; tried again", extra={"object": ref.key})
                self._back_off(ref, None)

    def _step(self, ref: ObjectRef) -> None:
        adapter = self.adapters.get(ref.kind)
        if adapter is None:
            self.forget(ref)
            return
        try:
            obj = self.api.get(adapter.resource, ref.namespace, ref.name)
        except KubeNotFound:
            self.forget(ref)
            return
        metadata = obj.get("metadata") or {}
        annotations = metadata.get("annotations") or {}
        text = annotations.get(EVICTION_ANNOTATION)
        current = trusted_record(metadata)
        if current is None or current.state is EvictionState.DONE:
            self.forget(ref)
            return
        uid = str(metadata.get("uid", ""))
        found = self.finder.pods(adapter, obj)
        self._refuse_bare(ref, uid, found.refused)
        count, invalid = at_once(annotations, self.settings.evictions_at_once)
        if invalid is not None and self._announce(
                ref, uid, "invalid-at-once", "InvalidAnnotation",
                f"{AT_ONCE_ANNOTATION}={invalid!r} is not 1 to 100; evicting {count} at once"):
            self.metrics.invalid_annotation(ref.kind)
        live = sum(1 for p in found.own if not p.terminating)
        spec = adapter.spec
        expected = expected_pods(obj, replicas_path=spec.replicas_path if spec is not None else ())
        if expected is None:
            expected = current.pods or live
        step = next_step(found.own, current.since, at_once=count, expected=expected,
                         by_ordinal=ref.kind in _ORDINAL_KINDS, now=self.clock.now(),
                         timeout=self.settings.timeout, bare=found.bare)
        if step.done:
            finished = current.progressed(pods=expected, left=0, state=EvictionState.DONE)
            self._write(adapter, ref, text, finished)
            self.forget(ref)
            self.metrics.eviction_completed()
            self.normal(ref, uid, "EvictionComplete",
                        f"every pod restarted through eviction ({finished.pods} pods) and is Ready")
            return
        if step.state is EvictionState.FAILED:
            self._failed(ref, uid, step)
        state = step.state
        evicted = 0
        for pod in step.evict:
            outcome = self._evict(ref, uid, pod)
            if outcome == "blocked":
                state = EvictionState.BLOCKED
                break
            if outcome == "failed":
                return  # backing off; the next pass reads everything again
            evicted += outcome == "evicted"
        if state is not EvictionState.BLOCKED:
            self._unblocked(ref)
        progressed = current.progressed(pods=expected, left=max(step.old - evicted, 0), state=state)
        if progressed != current:
            self._write(adapter, ref, text, progressed)

    def _failed(self, ref: ObjectRef, uid: str, step: Step) -> None:
        """A replacement not Ready within ``--rollout-timeout``: said once per eviction. Under a
        rollout budget the waves say it (the record's state fails the rollout they track)."""
        log.warning("eviction stopped: a replacement is not Ready",
                    extra={"object": ref.key, "why": step.reason})
        self._back_off(ref, None)  # read again, less often, until it is Ready or a new change comes
        if self.settings.budgeted:
            return
        if self._announce(ref, uid, "rollout-failed", "RolloutFailed",
                          f"rollout failed ({EvictionState.FAILED.value}): {step.reason}; no more pods are "
                          "evicted for this change until it is Ready or the source changes again"):
            self.metrics.rollout_failed(EvictionState.FAILED.value)

    def _refuse_bare(self, ref: ObjectRef, uid: str, bare: list[PodView]) -> None:
        if not bare:
            return
        names = ", ".join(sorted(p.name for p in bare)[:5])
        self._announce(ref, uid, "bare:" + names, "EvictionRefused",
                       f"pod(s) {names} match the workload's selector but have no owner: nothing would "
                       "re-create them, so they are not evicted (annotate a pod "
                       "gitops-reloader.io/evict-bare-pod: \"true\" to allow it)")

    # --- the Eviction API ------------------------------------------------------------

    def _evict(self, ref: ObjectRef, uid: str, pod: PodView) -> str:
        """Evict one pod: ``evicted``, ``gone`` (already replaced), ``blocked`` (a budget) or
        ``failed`` (any other refusal: a Warning Event once per status, then backoff)."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": pod.name, "namespace": ref.namespace},
                "deleteOptions": {"preconditions": {"uid": pod.uid}}}
        try:
            self.api.request("POST", PODS.path(ref.namespace, pod.name) + "/eviction", body=body)
        except KubeNotFound:
            self.metrics.pod_eviction("gone")
            return "gone"
        except KubeError as exc:
            if exc.status == 409:  # the uid precondition: the pod was replaced meanwhile
                self.metrics.pod_eviction("gone")
                return "gone"
            if exc.status != 429:
                self.metrics.pod_eviction("error")
                self._back_off(ref, exc.retry_after)
                self._announce(ref, uid, f"failed:{exc.status}", "EvictionFailed",
                               f"evicting pod {pod.name} failed ({str(exc)[-300:]}); tried again with "
                               "backoff")
                return "failed"
            self.metrics.pod_eviction("blocked")
            self._blocked(ref, uid, pod, exc)
            return "blocked"
        self.metrics.pod_eviction("evicted")
        log.info("pod evicted for a reload", extra={"object": ref.key, "pod": pod.name})
        return "evicted"

    def _blocked(self, ref: ObjectRef, uid: str, pod: PodView, exc: KubeError) -> None:
        with self._lock:
            episode = self._episodes.get(ref)
            if episode is None:
                return
            episode.refusals += 1
            refusals = episode.refusals
        self._back_off(ref, exc.retry_after)
        log.info("eviction refused by a disruption budget; waiting",
                 extra={"object": ref.key, "pod": pod.name, "refusals": refusals})
        if refusals >= BLOCKED_EVENT_AFTER:
            self._announce(ref, uid, "blocked", "ReloadBlockedByPDB",
                           f"evicting pod {pod.name} is refused by its PodDisruptionBudget "
                           f"({str(exc)[-200:]}); "
                           "the reload's restart waits and is tried again with backoff")

    def _unblocked(self, ref: ObjectRef) -> None:
        with self._lock:
            episode = self._episodes.get(ref)
            if episode is not None:
                episode.refusals, episode.backoffs = 0, 0
                episode.announced.discard("blocked")

    def _back_off(self, ref: ObjectRef, retry_after: float | None) -> None:
        with self._lock:
            episode = self._episodes.get(ref)
            if episode is None:
                return
            episode.backoffs += 1
            wait = Backoff(self.settings.eviction_interval, MAX_BACKOFF).delay(episode.backoffs,
                                                                              retry_after=retry_after)
            episode.not_before = self.clock.monotonic() + wait

    # --- the record and Events -------------------------------------------------------

    def _write(self, adapter: WorkloadAdapter, ref: ObjectRef, seen: str | None,
               record: EvictionRecord) -> None:
        """Write progress, unless the record changed since it was read (a newer reload's)."""
        path = f"/metadata/annotations/{_PATH_ESCAPED}"
        patch = [{"op": "test", "path": path, "value": seen},
                 {"op": "replace", "path": path, "value": record.encode()}]
        try:
            self.api.patch(adapter.resource, ref.namespace, ref.name, patch, content_type=JSON_PATCH)
        except KubeError as exc:
            if exc.status not in (409, 422):
                raise
            log.info("eviction record changed meanwhile; read again", extra={"object": ref.key})

    def _announce(self, ref: ObjectRef, uid: str, key: str, reason: str, message: str) -> bool:
        """A Warning Event recorded once per eviction episode and ``key``; whether it was recorded now."""
        with self._lock:
            episode = self._episodes.get(ref)
            if episode is None or key in episode.announced:
                return False
            episode.announced.add(key)
        self.warning(ref, uid, reason, message)
        return True


class PodFinder:
    """A workload's pods, as eviction sees them: by its selector, kept when its controller
    owner chain leads to the workload (intermediate owners read on demand; the resources of
    their kinds found through discovery and cached)."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self._plurals: dict[tuple[str, str], ResourceKind | None] = {}

    def pods(self, adapter: WorkloadAdapter, obj: Mapping[str, Any]) -> WorkloadPods:
        """The pods the workload's selector matches: its own, and bare ones (allowed to go or not)."""
        metadata = obj.get("metadata") or {}
        spec = adapter.spec
        if spec is not None and spec.pod_selector:
            selector: str | None = spec.pod_selector_for(str(metadata.get("name", "")))
        elif adapter.template_path:
            selector = selector_query((obj.get("spec") or {}).get("selector"))
        else:
            selector = ""
        if selector is None:
            return WorkloadPods()
        namespace = str(metadata.get("namespace", ""))
        views: list[PodView] = []
        token = ""
        while len(views) < MAX_PODS:
            page = self.api.list(PODS, namespace=namespace, label_selector=selector, limit=500,
                                 continue_token=token)
            views.extend(v for v in (pod_view(p) for p in page.get("items") or ()) if v is not None)
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                break
        depth = spec.owner_depth if spec is not None else 1
        owners = self._owner_uids(str(metadata.get("uid", "")), depth, views, namespace)
        found = owned(views, owners)
        if not selector:  # the namespace's pods: a bare pod there is not the workload's
            return WorkloadPods(own=found.own)
        return found

    def _owner_uids(self, uid: str, depth: int, pods: list[PodView], namespace: str) -> frozenset[str]:
        """The uids whose pods are the workload's: its own, and with ``depth`` > 1 those of the
        objects between it and its pods (read upward from each distinct owner of a pod, once)."""
        found = {uid}
        if depth > 1:
            owners = {p.owner_uid: p.owner for p in pods if p.owner_uid}
            found.update(owner_uid for owner_uid, owner in owners.items()
                         if self._reaches(owner, namespace, uid, depth - 1))
        return frozenset(found)

    def _reaches(self, owner: tuple[str, str, str], namespace: str, uid: str, steps: int) -> bool:
        """Whether the object ``owner`` names (apiVersion, kind, name) is owned, within ``steps``
        controller references, by the object ``uid``."""
        for _ in range(steps):
            api_version, kind, name = owner
            resource = self._resource(api_version, kind)
            if resource is None:
                return False
            try:
                obj = self.api.get(resource, namespace, name)
            except KubeNotFound:
                return False
            reference = controller_reference(obj)
            if reference is None:
                return False
            if reference.get("uid") == uid:
                return True
            owner = reference_names(reference)
        return False

    def _resource(self, api_version: str, kind: str) -> ResourceKind | None:
        """The resource of ``kind`` in ``api_version``, by discovery (cached)."""
        key = (api_version, kind)
        if key not in self._plurals:
            self._plurals[key] = self.api.resource_of(api_version, kind)
        return self._plurals[key]


def trusted_record(metadata: Mapping[str, Any]) -> EvictionRecord | None:
    """The eviction record in a workload's metadata as the API server returns it (with
    ``managedFields``), if the controller's own field manager wrote it; None otherwise."""
    if field_manager(metadata, EVICTION_ANNOTATION) != FIELD_MANAGER:
        return None
    return parse_record((metadata.get("annotations") or {}).get(EVICTION_ANNOTATION))


def restart_preview(finder: PodFinder, adapter: WorkloadAdapter, obj: Mapping[str, Any],
                    default_at_once: int) -> str:
    """What the eviction of ``obj``'s pods would do now (reads its pods and the namespace's
    PodDisruptionBudgets): :func:`~gitops_reloader.rollout.eviction.describe_restart`, prefixed
    with the state of an eviction under way."""
    metadata = obj.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    found = finder.pods(adapter, obj)
    live = [p for p in found.own + found.bare if not p.terminating]
    current = trusted_record(metadata)
    prefix, old = "", len(live)
    if current is not None and current.state is not EvictionState.DONE:
        prefix, old = f"under way ({current.state.value}): ", sum(1 for p in live if is_old(p, current.since))
    budget: tuple[str, int] | str | None = None
    if live:
        try:
            budgets = finder.api.list(PODDISRUPTIONBUDGETS, namespace=str(metadata.get("namespace", "")))
            budget = disruptions_allowed(budgets.get("items") or (), live[0].labels)
        except KubeError as exc:
            budget = f"PodDisruptionBudgets not readable ({exc.status or 'no answer'})"
    count, _ = at_once(annotations, default_at_once)
    return prefix + describe_restart(old, count, budget, [p.name for p in found.refused])
