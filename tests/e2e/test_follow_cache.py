"""Issue 28: the git follow-up reads workloads from the controller's informer caches.

The API test server, the controller's real :class:`~gitops_reloader.control.caches.Caches`
and a :class:`~gitops_reloader.control.follower.Follower` reading them. A cache lags the
API server; here one is made to lag for certain by stopping its informer after it synced.
A verdict drawn from it that the commit was *not* applied is confirmed with one GET before
anything is reported; a verdict it can stand by costs no GET.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import ApiClient
from prometheus_client import CollectorRegistry
from reload_helpers import call

from gitops_reloader.config import load_config
from gitops_reloader.control.caches import Caches
from gitops_reloader.control.follower import Follower
from gitops_reloader.gitops.locate import FLUX_NAME_LABEL, FLUX_NAMESPACE_LABEL, Location, Method
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.workloads import adapters_for
from gitops_reloader.model import CONFIG_HASH_KEY, ObjectRef, ReloadRequest
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.rollout.follow import Stage
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.harness import wait_for
from gitops_reloader.testing.rollouts import status_rolling

pytestmark = pytest.mark.e2e

DIGEST = "d" * 64
REF = ObjectRef("Deployment", "ns", "web")
DEPLOYMENT = "/apis/apps/v1/namespaces/ns/deployments/web"


def deployment(template_annotations: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns",
                         "labels": {FLUX_NAME_LABEL: "web", FLUX_NAMESPACE_LABEL: "flux-system"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}, "annotations": template_annotations},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}}


@pytest.fixture
def suspended(api_client: ApiClient) -> None:
    """A suspended Kustomization flux-system/web deploying ns/web (the engine answers at once)."""
    for name in ("ns", "flux-system"):
        call(api_client, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": name}})
    call(api_client, "POST", "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations", {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "web", "namespace": "flux-system"},
        "spec": {"interval": "10m", "path": "./apps/web", "prune": True, "suspend": True,
                 "sourceRef": {"kind": "GitRepository", "name": "apps"}}})
    call(api_client, "POST", "/apis/apps/v1/namespaces/ns/deployments", deployment({"owner": "team-web"}))


@pytest.fixture
def frozen_cache(api_client: ApiClient, suspended: None) -> Iterator[Caches]:
    """The controller's caches, synced with ns/web as created, then no longer watching."""
    caches = Caches(load_config([]), KubeApi(api_client), adapters_for())
    caches.build(on_source=lambda event: None, on_workload=lambda event: None)
    informers = caches.workload_informers["Deployment"]
    for informer in informers:
        informer.start()
    assert wait_for(lambda: caches.workload(REF) is not None, timeout=20)
    for informer in informers:
        informer.stop()
    yield caches


@pytest.fixture
def follower(api_client: ApiClient, frozen_cache: Caches) -> Iterator[Follower]:
    follower = Follower(api=KubeApi(api_client), repositories={}, metrics=Metrics(CollectorRegistry()),
                        recorder=None, argocd_namespace="argocd", timeout=600.0, interval=3600.0,
                        workloads=frozen_cache)
    record = frozen_cache.workload(REF)
    assert record is not None
    follower.follow(ReloadRequest(REF, record, (), 0), Location("apps", "apps/web/deployment.yaml", 0, None,
                                                                Method.FLUX),
                    DIGEST, "c" * 40, sink="git")
    yield follower
    follower.stop()


def test_a_not_applied_verdict_from_a_lagging_cache_is_confirmed_with_one_get(
        server: ApiServer, api_client: ApiClient, follower: Follower) -> None:
    # The engine applied the digest before it was suspended; the frozen cache does not show it.
    call(api_client, "PATCH", DEPLOYMENT, {"spec": {"template": {"metadata": {"annotations": {
        CONFIG_HASH_KEY: DIGEST}}}}}, content_type="application/merge-patch+json")
    live = call(api_client, "GET", DEPLOYMENT)
    rolling = status_rolling(live["metadata"]["generation"], 2)
    call(api_client, "PATCH", DEPLOYMENT + "/status", {"status": rolling},
         content_type="application/merge-patch+json")
    server.reset_request_counts()
    follower.tick()
    entry = follower.state_of(REF)
    assert entry is not None and entry.state.stage is Stage.IN_TEMPLATE, entry  # not "Suspended"
    assert server.request_counts().get(("get", "deployments"), 0) == 1


def test_a_verdict_the_api_server_confirms_ends_the_follow_up(
        server: ApiServer, follower: Follower) -> None:
    server.reset_request_counts()
    follower.tick()
    entry = follower.state_of(REF)
    assert entry is not None and entry.state.stage is Stage.NOT_APPLIED, entry
    assert entry.state.reason == "Suspended"
    counts = server.request_counts()
    assert counts.get(("get", "deployments"), 0) == 1 and counts.get(("get", "kustomizations"), 0) == 1
