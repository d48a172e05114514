"""The Deployment controller and the kubelet for a schedule, one step at a time (I/O, no thread).

:class:`TickedRollouts` keeps real Pod objects in the API test server for every Deployment of
a namespace, as the Deployment controller's rolling update would: each :meth:`tick` adds one pod
of the template the Deployment holds now (its ``pod-template-hash`` label, a digest of the
template), and only when there are enough of those, removes one pod of another template. A
template changed and changed back before its rollout ended is back to the pods it still has —
the ones started *before* whatever changed meanwhile, exactly what the Deployment controller
keeps when it scales the old ReplicaSet up again. A pod's ``resourceVersion`` (pods are never
updated) is when it was created: the schedule checker's oracle compares it with the
resourceVersion of each data change.

Each tick also writes the Deployment's status as its controller does (``observedGeneration``,
``replicas``, ``updatedReplicas``, every pod Ready at once), so the controller sees a rollout
under way as it would in a cluster. Ticked by the checker after every step, so the rollouts
move with the schedule, not with a wall clock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from gitops_reloader.errors import KubeNotFound
from gitops_reloader.kube.api import MERGE, KubeApi
from gitops_reloader.kube.resources import DEPLOYMENTS, PODS
from gitops_reloader.testing.replicasets import pod_template_hash

__all__ = ["DEPLOYMENT_LABEL", "TickedRollouts"]

DEPLOYMENT_LABEL = "schedules.gitops-reloader.test/deployment"
HASH_LABEL = "pod-template-hash"


class TickedRollouts:
    """Rolling updates of one namespace's Deployments, a pod per Deployment per tick."""

    def __init__(self, api: KubeApi, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self._serial = 0

    def pods(self, deployment: str) -> list[dict[str, Any]]:
        """The pods the API server holds for ``deployment``, oldest first."""
        listed = self.api.list(PODS, namespace=self.namespace,
                               label_selector=f"{DEPLOYMENT_LABEL}={deployment}")
        return sorted(listed.get("items") or [], key=lambda p: int(p["metadata"]["resourceVersion"]))

    def tick(self) -> bool:
        """One rolling-update step for every Deployment; whether anything changed."""
        moved = False
        deployments = self.api.list(DEPLOYMENTS, namespace=self.namespace).get("items") or []
        names = set()
        for deployment in deployments:
            names.add(deployment["metadata"]["name"])
            moved = self._step(deployment) or moved
        return self._collect(names) or moved

    def collect(self) -> bool:
        """The garbage collector: the pods of Deployments gone are deleted (before a Deployment of
        the same name can be created again: its pods are never another's)."""
        return self._collect({d["metadata"]["name"] for d in
                              self.api.list(DEPLOYMENTS, namespace=self.namespace).get("items") or []})

    def _collect(self, names: set[str]) -> bool:
        moved = False
        for pod in self.api.list(PODS, namespace=self.namespace).get("items") or []:
            owner = (pod["metadata"].get("labels") or {}).get(DEPLOYMENT_LABEL)
            if owner is not None and owner not in names:  # its Deployment is gone: garbage-collected
                self._delete(pod)
                moved = True
        return moved

    def converged(self) -> bool:
        """Whether every Deployment runs exactly its replicas, all of its current template."""
        return not self.rolling()

    def rolling(self) -> set[str]:
        """The Deployments whose pods are not exactly their replicas of their current template."""
        out = set()
        for deployment in self.api.list(DEPLOYMENTS, namespace=self.namespace).get("items") or []:
            want, digest = _desired(deployment)
            pods = self.pods(deployment["metadata"]["name"])
            if len(pods) != want or any(_digest(p) != digest for p in pods):
                out.add(deployment["metadata"]["name"])
        return out

    def _step(self, deployment: Mapping[str, Any]) -> bool:
        name = deployment["metadata"]["name"]
        want, digest = _desired(deployment)
        pods = self.pods(name)
        current = [p for p in pods if _digest(p) == digest]
        others = [p for p in pods if _digest(p) != digest]
        moved = True
        if len(current) < want:
            current.append(self._create(name, digest, deployment))
        elif others:
            self._delete(others.pop(0))
        elif len(current) > want:
            self._delete(current.pop(0))
        else:
            moved = False
        self._report(deployment, len(current), len(current) + len(others))
        return moved

    def _report(self, deployment: Mapping[str, Any], updated: int, replicas: int) -> None:
        """The status the Deployment controller writes: every pod Ready at once."""
        metadata = deployment["metadata"]
        status = {"observedGeneration": metadata.get("generation", 1), "replicas": replicas,
                  "updatedReplicas": updated, "readyReplicas": replicas, "availableReplicas": replicas}
        if all(deployment.get("status", {}).get(k) == v for k, v in status.items()):
            return
        self.api.request("PATCH", DEPLOYMENTS.path(self.namespace, metadata["name"]) + "/status",
                         body={"status": status}, content_type=MERGE)

    def _create(self, deployment: str, digest: str, owner: Mapping[str, Any]) -> dict[str, Any]:
        self._serial += 1
        template = owner["spec"]["template"]
        labels = {**((template.get("metadata") or {}).get("labels") or {}),
                  DEPLOYMENT_LABEL: deployment, HASH_LABEL: digest}
        return self.api.create(PODS, self.namespace, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{deployment}-{digest[:5]}-{self._serial}", "namespace": self.namespace,
                         "labels": labels},
            "spec": template.get("spec") or {},
        })

    def _delete(self, pod: Mapping[str, Any]) -> None:
        with contextlib.suppress(KubeNotFound):  # gone already
            self.api.delete(PODS, self.namespace, pod["metadata"]["name"])


def _desired(deployment: Mapping[str, Any]) -> tuple[int, str]:
    spec = deployment.get("spec") or {}
    replicas = spec.get("replicas")
    return (1 if replicas is None else int(replicas)), pod_template_hash(spec.get("template") or {})


def _digest(pod: Mapping[str, Any]) -> str:
    return str((pod["metadata"].get("labels") or {}).get(HASH_LABEL, ""))
