"""Playing the Deployment controller's ReplicaSets in tests (no kube-controller-manager here).

:class:`ReplicaSetPlayer` watches the Deployments of one namespace through the official
client and does what the Deployment controller does with a pod template it has not seen:
it creates a ReplicaSet ``<deployment>-<pod-template-hash>`` owned by the Deployment (a
controller ``ownerReference``), labelled ``pod-template-hash``, annotated
``deployment.kubernetes.io/revision``. A template equal to an older ReplicaSet's (a rollback)
re-uses that ReplicaSet with the next revision, as the real controller does. The hash is a
stable digest of the template, not the controller's FNV-32a over its ``spew`` dump: tests
count ReplicaSets, they do not compare names with a real cluster's.

So "one rollout per sync" is read from the API server as users read it: ``kubectl get rs``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from kubernetes.client import ApiClient, AppsV1Api

from gitops_reloader.kube.api import MERGE, KubeApi
from gitops_reloader.kube.resources import ResourceKind
from gitops_reloader.testing.background import BackgroundPlayer
from gitops_reloader.testing.rollouts import follow_deployments

REVISION = "deployment.kubernetes.io/revision"
REPLICASETS = ResourceKind("apps", "v1", "replicasets", "ReplicaSet")


def pod_template_hash(template: dict[str, Any]) -> str:
    """A stable 10-character hash of a pod template (the real one is FNV-32a, also 10 chars)."""
    text = json.dumps(template, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


class ReplicaSetPlayer(BackgroundPlayer):
    """The Deployment controller's ReplicaSet writes for one namespace, on a background thread."""

    def __init__(self, api_client: ApiClient, namespace: str = "ns") -> None:
        self.apps = AppsV1Api(api_client)
        self.api = KubeApi(api_client)
        self.namespace = namespace
        self._revisions: dict[tuple[str, str], int] = {}
        """(deployment, pod-template-hash) → the revision its ReplicaSet carries now."""
        super().__init__([(self._watch, "replicaset-player")])

    def replicasets(self, deployment: str) -> list[dict[str, Any]]:
        """The ReplicaSets the API server holds for ``deployment`` (by owner), oldest first."""
        listed = self.api.list(REPLICASETS, namespace=self.namespace)
        owned = [rs for rs in listed["items"]
                 if any(o.get("kind") == "Deployment" and o.get("name") == deployment and o.get("controller")
                        for o in rs["metadata"].get("ownerReferences") or ())]
        return sorted(owned, key=lambda rs: int(rs["metadata"]["annotations"][REVISION]))

    def _watch(self) -> None:
        follow_deployments(self.apps, self.namespace, self._stop, lambda raw, listed: self._saw(raw))

    def _saw(self, deployment: dict[str, Any]) -> None:
        """A Deployment's current template: a new ReplicaSet, or an old one at a new revision."""
        metadata = deployment["metadata"]
        name = metadata["name"]
        template = deployment["spec"]["template"]
        digest = pod_template_hash(template)
        with self._lock:
            current = max((r for (d, _), r in self._revisions.items() if d == name), default=0)
            known = self._revisions.get((name, digest))
            if known is not None and known == current:
                return  # the template the newest ReplicaSet runs: nothing to do
            self._revisions[(name, digest)] = current + 1
            revision = current + 1
        rs_name = f"{name}-{digest}"
        if known is not None:  # a rollback: the old ReplicaSet becomes the newest
            self.api.patch(REPLICASETS, self.namespace, rs_name,
                           {"metadata": {"annotations": {REVISION: str(revision)}}}, content_type=MERGE)
            return
        labels = {**(template.get("metadata") or {}).get("labels", {}), "pod-template-hash": digest}
        self.api.create(REPLICASETS, self.namespace, {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": rs_name, "namespace": self.namespace, "labels": labels,
                         "annotations": {REVISION: str(revision)},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                                              "uid": metadata["uid"], "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"replicas": deployment["spec"].get("replicas", 1),
                     "selector": {"matchLabels": {**deployment["spec"]["selector"].get("matchLabels", {}),
                                                  "pod-template-hash": digest}},
                     "template": {**template, "metadata": {**(template.get("metadata") or {}),
                                                           "labels": labels}}},
        })
