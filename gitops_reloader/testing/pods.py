"""Playing the kubelet and the pods' owners in tests (no kubelet or controllers here).

:class:`PodPlayer` keeps the pods of one namespace the way their owners and the kubelet would:

- :meth:`PodPlayer.start` creates a workload's pods as its controller does — a StatefulSet's
  (or an operator's custom resource's) ``<owner>-<ordinal>``, a ReplicaSet's
  ``<owner>-<random>`` — each with a controller ``ownerReference``, the owner's pod labels and
  ``controller-revision-hash``, then marks it ``Running`` with ``startTime`` and ``Ready``
  ``ready_after`` seconds later, as the kubelet reports a started container.
- A pod deleted (an eviction, ``kubectl delete``) is re-created through its owner: the same
  name for a StatefulSet or a custom resource (stable identity), a new name for a ReplicaSet;
  ready again after ``ready_after``. Names passed to :meth:`PodPlayer.hold_unready` stay
  unready when re-created (a replacement that never becomes Ready); :meth:`PodPlayer.crash_loop`
  turns a running pod into one in ``CrashLoopBackOff`` (its replacement starts normally).

It records the order in which pods were deleted and re-created (``deleted``, ``recreated``),
read by tests as ``kubectl get pods -w`` would show it. Runs on its own thread over a watch.
"""

from __future__ import annotations

import heapq
import secrets
import time
from typing import Any

from kubernetes import watch
from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.rest import ApiException

from gitops_reloader.kube.workloads import rfc3339
from gitops_reloader.testing.background import BackgroundPlayer


class PodPlayer(BackgroundPlayer):
    """The kubelet and the pods' owners for one namespace, on background threads."""

    def __init__(self, api_client: ApiClient, namespace: str = "ns", *, ready_after: float = 0.2) -> None:
        self.core = CoreV1Api(api_client)
        self.namespace = namespace
        self.ready_after = ready_after
        self.deleted: list[str] = []
        """Pod names in the order their deletion was seen."""
        self.recreated: list[str] = []
        """Pod names in the order their replacement was created."""
        self._unready: set[str] = set()
        self._due: list[tuple[float, int, str, str]] = []  # (when, seq, pod, uid) to mark Ready
        self._seq = 0
        super().__init__([(self._watch, "pod-player-watch"), (self._kubelet, "pod-player-kubelet")])

    # --- what tests call ------------------------------------------------------------

    def start(self, owner: dict[str, Any], count: int, template: dict[str, Any], *,
              revision: str = "1", first: int = 0) -> list[str]:
        """Create ``count`` pods of ``owner`` (a workload or custom resource as the API server
        holds it) from pod ``template``, ordinals from ``first`` on; their names."""
        kind, name = owner["kind"], owner["metadata"]["name"]
        names = [f"{name}-{i}" if kind != "ReplicaSet" else f"{name}-{secrets.token_hex(3)}"
                 for i in range(first, first + count)]
        reference = {"apiVersion": owner["apiVersion"], "kind": kind, "name": name,
                     "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
        for pod in names:
            labels = {**(template.get("metadata") or {}).get("labels", {}),
                      "controller-revision-hash": f"{name}-{revision}"}
            self._create({"metadata": {"name": pod, "namespace": self.namespace, "labels": labels,
                                       "annotations": dict((template.get("metadata") or {}).get("annotations")
                                                           or {}),
                                       "ownerReferences": [reference]},
                          "spec": template["spec"]})
        return names

    def hold_unready(self, *names: str) -> None:
        """Keep these pods unready from their next creation on."""
        with self._lock:
            self._unready.update(names)

    def crash_loop(self, *names: str) -> None:
        """These pods, as they are now, crash and restart over and over (``CrashLoopBackOff``,
        not Ready), as a container does on bad configuration; a replacement starts normally."""
        for name in names:
            pod = self.core.read_namespaced_pod(name, self.namespace)
            self._report(name, pod.metadata.uid, ready=False, restarts=5)

    def release(self, *names: str) -> None:
        """Let these pods become Ready (now, if they exist)."""
        with self._lock:
            self._unready.difference_update(names)
        for name in names:
            try:
                uid = self.core.read_namespaced_pod(name, self.namespace).metadata.uid
            except ApiException:
                continue
            self._schedule(name, uid, 0.0)

    def ready(self, name: str) -> bool:
        """Whether pod ``name`` exists and reports Ready."""
        try:
            pod = self.core.read_namespaced_pod(name, self.namespace)
        except ApiException:
            return False
        return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or ()))

    # --- the owners: re-create what was deleted ---------------------------------------

    def _create(self, body: dict[str, Any]) -> None:
        created = self.core.create_namespaced_pod(self.namespace, body)
        self._schedule(created.metadata.name, created.metadata.uid, self.ready_after)

    def _watch(self) -> None:
        version = self.core.list_namespaced_pod(self.namespace).metadata.resource_version
        while not self._stop.is_set():
            try:
                for event in watch.Watch().stream(self.core.list_namespaced_pod, self.namespace,
                                                  resource_version=version, timeout_seconds=1):
                    raw = event["raw_object"]
                    if event["type"] == "ERROR":
                        version = self.core.list_namespaced_pod(self.namespace).metadata.resource_version
                        break
                    version = raw["metadata"].get("resourceVersion") or version
                    if event["type"] == "DELETED":
                        self._replace(raw)
                    if self._stop.is_set():
                        break
            except ApiException as exc:
                if exc.status != 410:
                    raise
                version = self.core.list_namespaced_pod(self.namespace).metadata.resource_version

    def _replace(self, pod: dict[str, Any]) -> None:
        """What the pod's owner does when one of its pods is gone: a new one."""
        metadata = pod["metadata"]
        owners = [o for o in metadata.get("ownerReferences") or () if o.get("controller")]
        self.deleted.append(metadata["name"])
        if not owners:
            return  # a bare pod: nothing re-creates it
        name = metadata["name"]
        if owners[0]["kind"] == "ReplicaSet":
            name = f"{owners[0]['name']}-{secrets.token_hex(3)}"
        self._create({"metadata": {"name": name, "namespace": self.namespace,
                                   "labels": metadata.get("labels") or {},
                                   "annotations": metadata.get("annotations") or {},
                                   "ownerReferences": metadata["ownerReferences"]},
                      "spec": pod["spec"]})
        self.recreated.append(name)

    # --- the kubelet: Running, then Ready ----------------------------------------------

    def _schedule(self, name: str, uid: str, delay: float) -> None:
        with self._lock:
            self._seq += 1
            heapq.heappush(self._due, (time.monotonic() + delay, self._seq, name, uid))
            self._lock.notify_all()

    def _kubelet(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                while not self._stop.is_set() and (not self._due or self._due[0][0] > time.monotonic()):
                    self._lock.wait(timeout=(self._due[0][0] - time.monotonic()) if self._due else 0.5)
                if self._stop.is_set():
                    return
                _, _, name, uid = heapq.heappop(self._due)
                unready = name in self._unready
            self._report(name, uid, ready=not unready)

    def _report(self, name: str, uid: str, *, ready: bool, restarts: int = 0) -> None:
        """The kubelet's status: Running since now, Ready or not; with ``restarts``, its
        container waits in ``CrashLoopBackOff`` after as many failed starts."""
        now = rfc3339(time.time())
        try:
            current = self.core.read_namespaced_pod(name, self.namespace)
            if current.metadata.uid != uid:
                return  # replaced meanwhile
            started = (rfc3339(current.status.start_time.timestamp())
                       if current.status and current.status.start_time else now)
            self.core.patch_namespaced_pod_status(name, self.namespace, {"status": {
                "phase": "Running", "startTime": started,
                "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                "lastTransitionTime": now}],
                "containerStatuses": [{"name": c.name, "ready": ready, "restartCount": restarts,
                                       "image": c.image, "imageID": "", "started": not restarts,
                                       "state": {"waiting": {
                                           "reason": "CrashLoopBackOff",
                                           "message": f"back-off 5m0s restarting failed container={c.name} "
                                                      f"pod={name}_{self.namespace}({uid})"}}
                                       if restarts else {"running": {"startedAt": started}}}
                                      for c in current.spec.containers]}})
        except ApiException as exc:
            if exc.status != 404:
                raise
