"""Playing the Deployment controller in tests and benchmarks (no kube-controller-manager here).

:class:`DeploymentPlayer` watches the Deployments of one namespace through the official client
and, for every new ``generation``, writes the ``status`` subresource as the Deployment
controller would, in its order: first the generation observed with the new ReplicaSet coming
up (``Progressing`` ``ReplicaSetUpdated``, one old replica left), then — ``complete_after``
seconds after the spec change — the rollout complete (``NewReplicaSetAvailable``) or, for the
generations ``fails(name, generation)`` picks, ``fail_after`` seconds after it,
``Progressing=False`` with reason ``ProgressDeadlineExceeded``. It records, per Deployment,
each generation it saw start, and the peak number of rollouts under way at once as the watch
stream shows them, in the server's order: a spec change after the creation whose status is
not complete or failed by ``kubectl rollout status``'s rule yet.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import watch
from kubernetes.client import ApiClient, AppsV1Api
from kubernetes.client.rest import ApiException

from gitops_reloader.rollout.completion import Phase, rollout_status
from gitops_reloader.testing.background import BackgroundPlayer


def _conditions(progressing: tuple[str, str], available: str) -> list[dict[str, str]]:
    status, reason = progressing
    return [{"type": "Available", "status": available, "reason": "MinimumReplicasAvailable"},
            {"type": "Progressing", "status": status, "reason": reason}]


def status_rolling(generation: int, replicas: int = 1) -> dict[str, Any]:
    """The new ReplicaSet is up, an old replica is still there."""
    return {"observedGeneration": generation, "replicas": replicas + 1, "updatedReplicas": replicas,
            "readyReplicas": replicas, "availableReplicas": replicas, "unavailableReplicas": 1,
            "conditions": _conditions(("True", "ReplicaSetUpdated"), "True")}


def status_complete(generation: int, replicas: int = 1) -> dict[str, Any]:
    """What ``kubectl rollout status`` waits for."""
    return {"observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas,
            "readyReplicas": replicas, "availableReplicas": replicas,
            "conditions": _conditions(("True", "NewReplicaSetAvailable"), "True")}


def status_failed(generation: int, replicas: int = 1) -> dict[str, Any]:
    """The progress deadline passed with the new pods not available."""
    failed = status_rolling(generation, replicas)
    failed["conditions"] = _conditions(("False", "ProgressDeadlineExceeded"), "True")
    return failed


def follow_deployments(apps: AppsV1Api, namespace: str, stop: threading.Event,
                       on_object: Callable[[dict[str, Any], bool], None]) -> None:
    """List, then watch, the Deployments of ``namespace`` until ``stop`` is set, calling
    ``on_object(raw, listed)`` for each listed object and each ADDED/MODIFIED event (a 410 or an
    ERROR event lists again), as an informer would; on the caller's thread."""
    version = ""
    while not stop.is_set():
        try:
            if not version:
                listed = apps.list_namespaced_deployment(namespace)
                for item in listed.items:
                    on_object(apps.api_client.sanitize_for_serialization(item), True)
                version = listed.metadata.resource_version
            for event in watch.Watch().stream(apps.list_namespaced_deployment, namespace,
                                              resource_version=version, timeout_seconds=1,
                                              allow_watch_bookmarks=True):
                raw = event["raw_object"]
                if event["type"] == "ERROR":
                    version = ""  # 410 Gone: list again
                    break
                version = (raw.get("metadata") or {}).get("resourceVersion") or version
                if event["type"] in ("ADDED", "MODIFIED"):
                    on_object(raw, False)
                if stop.is_set():
                    break
        except ApiException as exc:
            if exc.status != 410:
                raise
            version = ""


class DeploymentPlayer(BackgroundPlayer):
    """The Deployment controller's status writes for one namespace, on a background thread."""

    def __init__(self, api_client: ApiClient, namespace: str = "ns", *, observe_after: float = 0.05,
                 complete_after: float = 0.5, fail_after: float | None = None,
                 fails: Callable[[str, int], bool] = lambda name, generation: False,
                 writers: int = 1) -> None:
        self.apps = AppsV1Api(api_client)
        self.namespace = namespace
        self.observe_after = observe_after
        self.complete_after = complete_after
        self.fails = fails
        self.fail_after = complete_after if fail_after is None else fail_after
        self.started: dict[str, list[int]] = {}
        """Per Deployment, each generation whose rollout the player saw start (after the first)."""
        self.order: list[str] = []
        """Deployments in the order their rollouts started."""
        self.rolling: set[str] = set()
        self.peak = 0
        self._seen: dict[str, int] = {}
        self._created: dict[str, int] = {}
        self._plan: list[tuple[float, int, str, int, str]] = []
        self._seq = 0
        self._writing = 0
        super().__init__([(self._watch, "player-watch"),
                          *((self._write, f"player-write-{i}") for i in range(writers))])

    def under_way(self) -> int:
        """Rollouts started and not complete or failed yet."""
        with self._lock:
            return len(self.rolling)

    def settled(self) -> bool:
        """Nothing under way and no status write left to make."""
        with self._lock:
            return not self.rolling and not self._plan and not self._writing

    # --- watching ----------------------------------------------------------------------

    def _watch(self) -> None:
        follow_deployments(self.apps, self.namespace, self._stop, self._object)

    def _object(self, raw: dict[str, Any], listed: bool) -> None:
        metadata = raw.get("metadata") or {}
        self._saw(metadata["name"], metadata.get("generation") or 0,
                  (raw.get("status") or {}).get("observedGeneration") or 0)
        if not listed:
            self._count(metadata["name"], raw)

    def _count(self, name: str, raw: dict[str, Any]) -> None:
        """Rollouts under way as the watch stream shows them (the server's order): a spec
        change after the creation whose status is not complete or failed yet."""
        generation = (raw.get("metadata") or {}).get("generation") or 0
        status = rollout_status("apps", "Deployment", raw)
        with self._lock:
            created = self._created.setdefault(name, generation)
            if generation > created and status.phase is Phase.PROGRESSING:
                self.rolling.add(name)
                self.peak = max(self.peak, len(self.rolling))
            else:
                self.rolling.discard(name)

    def _saw(self, name: str, generation: int, observed: int) -> None:
        with self._lock:
            if generation <= max(observed, self._seen.get(name, 0)):
                return
            first = name not in self._seen
            self._seen[name] = generation
            now = time.monotonic()
            if not first:  # the creation is no rollout: complete it at once
                self.started.setdefault(name, []).append(generation)
                self.order.append(name)
                self._push(now + self.observe_after, name, generation, "rolling")
            failing = not first and self.fails(name, generation)
            delay = 0.0 if first else self.fail_after if failing else self.complete_after
            self._push(now + delay, name, generation, "failed" if failing else "complete")
            self._lock.notify_all()

    def _push(self, at: float, name: str, generation: int, step: str) -> None:
        self._seq += 1
        heapq.heappush(self._plan, (at, self._seq, name, generation, step))

    # --- writing -----------------------------------------------------------------------

    def _write(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                while not self._stop.is_set() and (not self._plan or self._plan[0][0] > time.monotonic()):
                    self._lock.wait(self._plan[0][0] - time.monotonic() if self._plan else 0.5)
                if self._stop.is_set():
                    return
                _, _, name, generation, step = heapq.heappop(self._plan)
                if self._seen.get(name) != generation:
                    continue  # a newer spec change supersedes this one
                self._writing += 1
            body = {"rolling": status_rolling, "complete": status_complete,
                    "failed": status_failed}[step](generation)
            try:
                self.apps.patch_namespaced_deployment_status(name, self.namespace, {"status": body})
            except ApiException as exc:
                if exc.status != 404:
                    raise
            finally:
                with self._lock:
                    self._writing -= 1
