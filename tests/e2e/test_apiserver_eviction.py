"""API test server (issue 34, in part): ``pods/eviction`` with PodDisruptionBudgets, as
kube-apiserver's ``eviction.go`` answers it, driven through the official client
(``CoreV1Api.create_namespaced_pod_eviction``, ``PolicyV1Api``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client import ApiClient, ApiException, CoreV1Api, PolicyV1Api

from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.resources import STATEFULSETS
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.apiserver.eviction import budget_selector
from gitops_reloader.testing.harness import wait_for
from gitops_reloader.testing.pods import PodPlayer
from gitops_reloader.testing.replicasets import REPLICASETS

pytestmark = pytest.mark.e2e

NS = "ns"


def pod(name: str, *, core: CoreV1Api, ready: bool = True, phase: str = "Running") -> None:
    core.create_namespaced_pod(NS, {"metadata": {"name": name, "labels": {"app": "db"}},
                                    "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}})
    core.patch_namespaced_pod_status(name, NS, {"status": {"phase": phase, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}})


def budget(policy: PolicyV1Api, name: str, *, allowed: int, desired: int = 2, current: int = 2,
           selector: dict[str, Any] | None = None, extra: dict[str, Any] | None = None,
           observed: int | None = None) -> None:
    policy.create_namespaced_pod_disruption_budget(NS, {
        "metadata": {"name": name},
        "spec": {"maxUnavailable": allowed, "selector": selector if selector is not None
                 else {"matchLabels": {"app": "db"}}, **(extra or {})}})
    generation = int(policy.read_namespaced_pod_disruption_budget(name, NS).metadata.generation or 1)
    policy.patch_namespaced_pod_disruption_budget_status(name, NS, {"status": {  # the disruption controller
        "observedGeneration": generation if observed is None else observed, "disruptionsAllowed": allowed,
        "currentHealthy": current, "desiredHealthy": desired, "expectedPods": current}})


def evict(core: CoreV1Api, name: str, body_name: str | None = None) -> Any:
    return core.create_namespaced_pod_eviction(name, NS, {
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": body_name or name, "namespace": NS}})


def refused(core: CoreV1Api, name: str) -> ApiException:
    with pytest.raises(ApiException) as caught:
        evict(core, name)
    return caught.value


@pytest.fixture
def policy(api_client: ApiClient) -> PolicyV1Api:
    return PolicyV1Api(api_client)


def test_evict_without_a_budget_deletes_the_pod_with_the_disruption_target_condition(
        server: ApiServer, core: CoreV1Api) -> None:
    pod("db-0", core=core)
    version = core.list_namespaced_pod(NS).metadata.resource_version
    answer = core.create_namespaced_pod_eviction("db-0", NS, {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "db-0"}}, _preload_content=False)
    assert server.get_object("pods", NS, "db-0") is None
    events = [(e["type"], e["raw_object"]) for e in watch.Watch().stream(
        core.list_namespaced_pod, NS, resource_version=version, timeout_seconds=1)]
    assert [kind for kind, _ in events] == ["MODIFIED", "DELETED"]
    [condition] = [c for c in events[0][1]["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert (condition["status"], condition["reason"]) == ("True", "EvictionByEvictionAPI")
    assert answer.status == 201
    assert json.loads(answer.data) == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                       "status": "Success", "code": 201}


def test_evict_spends_the_budget_and_records_the_pod(server: ApiServer, core: CoreV1Api,
                                                     policy: PolicyV1Api) -> None:
    pod("db-0", core=core)
    pod("db-1", core=core)
    budget(policy, "db", allowed=1)
    evict(core, "db-0")
    status = policy.read_namespaced_pod_disruption_budget("db", NS).status
    assert status.disruptions_allowed == 0 and "db-0" in status.disrupted_pods
    [condition] = [c for c in status.conditions if c.type == "DisruptionAllowed"]
    assert (condition.status, condition.reason) == ("False", "InsufficientPods")
    error = refused(core, "db-1")  # the budget is spent: the real answer, no Retry-After
    assert error.status == 429 and "Retry-After" not in (error.headers or {})
    body = json.loads(error.body)
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    cause = "The disruption budget db needs 2 healthy pods and has 2 currently"
    assert body["details"]["causes"] == [{"reason": "DisruptionBudget", "message": cause}]
    assert server.get_object("pods", NS, "db-1") is not None


def test_evict_waits_for_a_budget_the_controller_has_not_observed_yet(core: CoreV1Api,
                                                                      policy: PolicyV1Api) -> None:
    pod("db-0", core=core)
    budget(policy, "db", allowed=1, observed=0)
    error = refused(core, "db-0")
    assert error.status == 429 and error.headers["Retry-After"] == "10"
    body = json.loads(error.body)
    assert body["details"]["retryAfterSeconds"] == 10
    assert body["details"]["causes"][0]["message"] == ("The disruption budget db is still being processed "
                                                       "by the server.")


def test_evict_refuses_a_pod_under_two_budgets_and_a_negative_budget(core: CoreV1Api,
                                                                    policy: PolicyV1Api) -> None:
    pod("db-0", core=core)
    budget(policy, "a", allowed=1)
    budget(policy, "b", allowed=1, selector={"matchExpressions": [{"key": "app", "operator": "In",
                                                                   "values": ["db", "cache"]}]})
    error = refused(core, "db-0")
    assert error.status == 500
    assert json.loads(error.body)["message"] == ("This pod has more than one PodDisruptionBudget, which the "
                                                 "eviction subresource does not support.")
    policy.delete_namespaced_pod_disruption_budget("b", NS)
    policy.delete_namespaced_pod_disruption_budget("a", NS)
    budget(policy, "neg", allowed=-1)
    error = refused(core, "db-0")
    assert error.status == 403
    assert json.loads(error.body)["message"] == ('poddisruptionbudget.policy "neg" is forbidden: '
                                                 "pdb disruptions allowed is negative")


def test_evict_lets_unready_and_pending_pods_go_by_the_budgets_rules(
        server: ApiServer, core: CoreV1Api, policy: PolicyV1Api) -> None:
    pod("db-0", ready=False, core=core)
    pod("db-1", ready=False, core=core)
    pod("db-2", phase="Pending", ready=False, core=core)
    budget(policy, "db", allowed=0, desired=2, current=1)  # IfHealthyBudget: not healthy enough
    assert refused(core, "db-0").status == 429
    evict(core, "db-2")  # Pending: no budget consulted
    policy.patch_namespaced_pod_disruption_budget("db", NS,
                                                  {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}})
    policy.patch_namespaced_pod_disruption_budget_status("db", NS, {"status": {"observedGeneration": 2}})
    evict(core, "db-0")  # AlwaysAllow: an unready pod goes without spending the budget
    assert policy.read_namespaced_pod_disruption_budget("db", NS).status.disruptions_allowed == 0
    assert server.get_object("pods", NS, "db-0") is None and server.get_object("pods", NS, "db-2") is None


def test_evict_checks_the_name_and_the_pod(core: CoreV1Api) -> None:
    pod("db-0", core=core)
    with pytest.raises(ApiException) as caught:
        evict(core, "db-0", body_name="other")
    assert caught.value.status == 400
    assert json.loads(caught.value.body)["message"] == "name in URL does not match name in Eviction object"
    assert refused(core, "gone").status == 404


@pytest.mark.parametrize(("selector", "labels", "selected"), [
    ({"matchLabels": {"app": "db"}}, {"app": "db"}, True),
    ({}, {"app": "db"}, True),  # empty: every pod
    (None, {"app": "db"}, False),  # none: no pod
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"app": "db"}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"app": "db"}, True),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}, {"app": "db"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "Bogus"}]}, {"app": "db"}, False),
])
def test_evict_budget_selectors_follow_label_selector_as_selector(
        selector: dict[str, Any] | None, labels: dict[str, str], selected: bool) -> None:
    parsed = budget_selector(selector)
    assert (parsed is not None and parsed.matches(labels)) is selected


def test_evict_subresource_and_budgets_are_in_discovery(core: CoreV1Api, policy: PolicyV1Api) -> None:
    resources = {r.name: r for r in core.get_api_resources().resources}
    eviction = resources["pods/eviction"]
    assert (eviction.kind, eviction.group, eviction.version, eviction.verbs) == ("Eviction", "policy", "v1",
                                                                                 ["create"])
    budgets = {r.name: r for r in policy.get_api_resources().resources}
    assert budgets["poddisruptionbudgets"].short_names == ["pdb"]
    assert "poddisruptionbudgets/status" in budgets



def test_evict_then_the_owner_recreates_the_pod_which_becomes_ready(api_client: ApiClient, core: CoreV1Api,
                                                                    policy: PolicyV1Api) -> None:
    """The test kubelet (``testing/pods.py``): an evicted StatefulSet pod comes back under its
    name, a new uid and start time, Ready; a ReplicaSet's under a new name; a bare pod not at all."""
    api = KubeApi(api_client)
    template = {"metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}}
    web_template = {**template, "metadata": {"labels": {"app": "web"}}}
    sts = api.create(STATEFULSETS, NS, {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                 "template": template, "updateStrategy": {"type": "OnDelete"}}})
    rs = api.create(REPLICASETS, NS, {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-5d8f"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": web_template}})
    with PodPlayer(api_client) as kubelet:
        kubelet.start(sts, 2, template)
        [web] = kubelet.start(rs, 1, web_template)
        wait_for(lambda: all(kubelet.ready(n) for n in ("db-0", "db-1", web)), message="ready")
        before = core.read_namespaced_pod("db-0", NS)
        budget(policy, "db", allowed=1)
        evict(core, "db-0")
        wait_for(lambda: kubelet.ready("db-0"), message="db-0 back and Ready")
        after = core.read_namespaced_pod("db-0", NS)
        assert after.metadata.uid != before.metadata.uid
        assert after.status.start_time >= before.status.start_time
        assert after.metadata.owner_references[0].kind == "StatefulSet"
        evict(core, web)
        wait_for(lambda: len(kubelet.recreated) == 2, message="the ReplicaSet's replacement")
        assert kubelet.recreated[1].startswith("web-5d8f-") and kubelet.recreated[1] != web
        assert kubelet.deleted == ["db-0", web]
