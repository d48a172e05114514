"""The Argo Rollouts controller's status, played: Stakater's suites wait for a Rollout's
``status.readyReplicas`` to reach ``spec.replicas`` before they change its ConfigMap.

The Rollouts controller is not built here (its module is not among the engines; the suites need
only the CRD to create Rollouts and the reloader to patch them), so this writes what the
controller would report once its pods are up: ``replicas``, ``updatedReplicas``,
``readyReplicas`` and ``availableReplicas`` equal to ``spec.replicas``, through the ``status``
subresource, for every Rollout the watch shows. No pods are made; what a reload writes (the
pod template's annotation or ``STAKATER_*`` variable, ``spec.restartAt``) is what the suites
check, and it is the reloader's write, not this one's.
"""

from __future__ import annotations

from typing import Any

from kubernetes import watch
from kubernetes.client import ApiClient, CustomObjectsApi
from kubernetes.client.rest import ApiException

from gitops_reloader.testing.background import BackgroundPlayer

GROUP, VERSION, PLURAL = "argoproj.io", "v1alpha1", "rollouts"


class RolloutStatusPlayer(BackgroundPlayer):
    """Marks every Rollout ready, cluster-wide, until stopped."""

    def __init__(self, api_client: ApiClient) -> None:
        super().__init__([(self._run, "rollout-status")])
        self._custom = CustomObjectsApi(api_client)

    def _run(self) -> None:
        stop = self._stop
        while not stop.is_set():
            stream = watch.Watch()
            try:
                for event in stream.stream(self._custom.list_cluster_custom_object, GROUP, VERSION, PLURAL,
                                           timeout_seconds=5):
                    if stop.is_set():
                        break
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._ready(event["object"])
            except ApiException:
                stop.wait(0.5)  # the CRD not installed yet, or a watch that expired: again
            finally:
                stream.stop()

    def _ready(self, rollout: dict[str, Any]) -> None:
        replicas = (rollout.get("spec") or {}).get("replicas", 1)
        status = rollout.get("status") or {}
        if status.get("readyReplicas") == replicas and status.get("replicas") == replicas:
            return
        metadata = rollout["metadata"]
        try:
            self._custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, metadata["namespace"], PLURAL, metadata["name"],
                {"status": {"replicas": replicas, "updatedReplicas": replicas, "readyReplicas": replicas,
                            "availableReplicas": replicas}})
        except ApiException as exc:
            if exc.status != 404:
                raise
