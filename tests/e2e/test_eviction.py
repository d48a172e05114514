"""Issue 34: pods a template write does not restart are restarted through the Eviction API.

The API test server serves ``pods/eviction`` with PodDisruptionBudgets as kube-apiserver does
(tests/e2e/test_apiserver_eviction.py); the test kubelet (:class:`PodPlayer`) plays the pods'
owners and the kubelet: an evicted pod is re-created through its owner (the same name for a
StatefulSet or an operator's resource) and reports Ready a moment later. No StatefulSet
controller runs: with ``updateStrategy: OnDelete`` it would create nothing by itself anyway.
Every test waits on what the cluster shows (pods, records, Events), never on a sleep.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient, CoreV1Api, PolicyV1Api
from reload_helpers import configmap, create
from test_git_sink import events, wait_event

from gitops_reloader.kube.api import MERGE, KubeApi
from gitops_reloader.rollout.eviction import EVICTION_ANNOTATION, EvictionState, parse_record
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.harness import running_controller, wait_for
from gitops_reloader.testing.pods import PodPlayer

pytestmark = pytest.mark.e2e

NS = "ns"
FAST = ["--eviction-interval=0.1s"]
POD_SPEC = {"containers": [{"name": "db", "image": "postgres:16",
                            "envFrom": [{"configMapRef": {"name": "db-config"}}]}]}


@pytest.fixture
def pods(api_client: ApiClient) -> Iterator[PodPlayer]:
    with PodPlayer(api_client, NS, ready_after=0.2) as player:
        yield player


def statefulset(api_client: ApiClient, pods: PodPlayer, name: str, replicas: int, *,
                annotations: dict[str, str] | None = None, strategy: str = "OnDelete",
                running: int | None = None) -> dict[str, Any]:
    """An ``apps/v1`` StatefulSet with ``replicas`` Ready pods (the first ``running`` of them
    only, when given), reloaded for ``db-config``."""
    template = {"metadata": {"labels": {"app": name}}, "spec": POD_SPEC}
    owner = create(api_client, {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": NS,
                     "annotations": {"reloader.stakater.com/auto": "true", **(annotations or {})}},
        "spec": {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                 "updateStrategy": {"type": strategy}, "template": template}})
    started = replicas if running is None else running
    pods.start(owner, started, template)
    wait_for(lambda: all(pods.ready(f"{name}-{i}") for i in range(started)), message=f"{name}'s pods Ready")
    return owner


def record_of(api_client: ApiClient, name: str, *, plural: str = "statefulsets", group: str = "apps/v1"):
    obj = KubeApi(api_client).request("GET", f"/apis/{group}/namespaces/{NS}/{plural}/{name}")
    return parse_record((obj["metadata"].get("annotations") or {}).get(EVICTION_ANNOTATION))


def done(api_client: ApiClient, name: str, **where: str) -> bool:
    record = record_of(api_client, name, **where)
    return record is not None and record.state is EvictionState.DONE


def change(api_client: ApiClient) -> None:
    CoreV1Api(api_client).patch_namespaced_config_map("db-config", NS, {"data": {"v": "2"}})


def test_an_on_delete_statefulset_has_each_pod_evicted_once_in_order_each_replacement_ready_first(
        api_client: ApiClient, pods: PodPlayer) -> None:
    create(api_client, configmap("db-config", {"v": "1"}))
    statefulset(api_client, pods, "db", 3)
    with running_controller(api_client, ["--eviction=on-delete", *FAST]) as app:
        change(api_client)
        wait_for(lambda: done(api_client, "db"), timeout=30, message="every pod evicted")
        wait_event(api_client, "db", "EvictionComplete")
        assert app.metrics.registry.get_sample_value("gitops_reloader_pod_evictions_total",
                                                     {"result": "evicted"}) == 3
    assert pods.deleted == ["db-2", "db-1", "db-0"]  # the StatefulSet controller's order
    assert pods.recreated == ["db-2", "db-1", "db-0"]
    record = record_of(api_client, "db")
    assert (record.pods, record.left) == (3, 0)


def budget(api_client: ApiClient, name: str, app: str, *, allowed: int) -> None:
    """A PodDisruptionBudget over ``app``'s pods, with the status the disruption controller writes."""
    policy = PolicyV1Api(api_client)
    policy.create_namespaced_pod_disruption_budget(NS, {
        "metadata": {"name": name},
        "spec": {"maxUnavailable": allowed, "selector": {"matchLabels": {"app": app}}}})
    allow(api_client, name, allowed)


def allow(api_client: ApiClient, name: str, allowed: int) -> None:
    """Play the disruption controller: the budget now allows ``allowed`` disruptions."""
    policy = PolicyV1Api(api_client)
    generation = int(policy.read_namespaced_pod_disruption_budget(name, NS).metadata.generation or 1)
    policy.patch_namespaced_pod_disruption_budget_status(name, NS, {"status": {
        "observedGeneration": generation, "disruptionsAllowed": allowed, "currentHealthy": 3,
        "desiredHealthy": 3 - allowed, "expectedPods": 3}})


def reasons(api_client: ApiClient, name: str) -> list[str]:
    return [e["reason"] for e in events(api_client, name)]


def test_a_budget_allowing_no_disruption_blocks_the_evict_with_an_event_and_raising_it_releases(
        api_client: ApiClient, pods: PodPlayer) -> None:
    create(api_client, configmap("db-config", {"v": "1"}))
    statefulset(api_client, pods, "db", 3)
    budget(api_client, "db-pdb", "db", allowed=0)
    with running_controller(api_client, ["--eviction=on-delete", *FAST]) as app:
        change(api_client)
        event = wait_event(api_client, "db", "ReloadBlockedByPDB")
        assert event["type"] == "Warning"
        assert "db-2" in event["message"] and "disruption budget" in event["message"]
        wait_for(lambda: (r := record_of(api_client, "db")) is not None and r.state is EvictionState.BLOCKED,
                 message="the record says blocked")
        assert pods.deleted == []
        assert app.metrics.registry.get_sample_value("gitops_reloader_pod_evictions_total",
                                                     {"result": "blocked"}) >= 2
        allow(api_client, "db-pdb", 10)  # maxUnavailable raised
        wait_for(lambda: done(api_client, "db"), timeout=30, message="released: every pod evicted")
    assert pods.deleted == ["db-2", "db-1", "db-0"]
    assert reasons(api_client, "db").count("ReloadBlockedByPDB") == 1


def test_a_pod_replaced_by_someone_else_since_the_change_is_not_evicted_again(
        api_client: ApiClient, pods: PodPlayer) -> None:
    create(api_client, configmap("db-config", {"v": "1"}))
    statefulset(api_client, pods, "db", 3)
    budget(api_client, "db-pdb", "db", allowed=0)
    with running_controller(api_client, ["--eviction=on-delete", *FAST]):
        change(api_client)
        wait_event(api_client, "db", "ReloadBlockedByPDB")
        # A node drain (someone else) replaces db-1 while the budget holds the controller back.
        CoreV1Api(api_client).delete_namespaced_pod("db-1", NS)
        wait_for(lambda: pods.recreated == ["db-1"] and pods.ready("db-1"), message="db-1 replaced")
        allow(api_client, "db-pdb", 10)
        wait_for(lambda: done(api_client, "db"), timeout=30, message="every old pod evicted")
    assert pods.deleted == ["db-1", "db-2", "db-0"]  # db-1 only by the drain


def test_a_restart_mid_evict_continues_without_evicting_a_pod_twice(
        api_client: ApiClient, pods: PodPlayer) -> None:
    create(api_client, configmap("db-config", {"v": "1"}))
    statefulset(api_client, pods, "db", 3)
    pods.hold_unready("db-1")  # its replacement stays unready: the eviction waits there
    with running_controller(api_client, ["--eviction=on-delete", *FAST]):
        change(api_client)
        wait_for(lambda: pods.recreated == ["db-2", "db-1"], timeout=30, message="two pods evicted")
        wait_for(lambda: (r := record_of(api_client, "db")) is not None and r.state is EvictionState.WAITING
                 and r.left == 1, message="waiting for db-1's replacement, one pod left")
    pods.release("db-1")
    with running_controller(api_client, ["--eviction=on-delete", *FAST]) as app:
        wait_for(lambda: done(api_client, "db"), timeout=30, message="the new instance finished it")
        assert app.metrics.registry.get_sample_value("gitops_reloader_pod_evictions_total",
                                                     {"result": "evicted"}) == 1
    assert pods.deleted == ["db-2", "db-1", "db-0"]


def test_a_bare_pod_the_selector_matches_is_never_evicted_and_an_event_says_why(
        api_client: ApiClient, pods: PodPlayer) -> None:
    create(api_client, configmap("db-config", {"v": "1"}))
    statefulset(api_client, pods, "db", 2)
    CoreV1Api(api_client).create_namespaced_pod(
        NS, {"metadata": {"name": "db-debug", "labels": {"app": "db"}}, "spec": POD_SPEC})
    with running_controller(api_client, ["--eviction=on-delete", *FAST]):
        change(api_client)
        event = wait_event(api_client, "db", "EvictionRefused")
        wait_for(lambda: done(api_client, "db"), timeout=30, message="the StatefulSet's own pods evicted")
    assert event["type"] == "Warning" and "db-debug" in event["message"] and "no owner" in event["message"]
    assert pods.deleted == ["db-1", "db-0"]
    assert CoreV1Api(api_client).read_namespaced_pod("db-debug", NS).metadata.name == "db-debug"


def test_evict_rollouts_count_in_the_budget_one_at_a_time(api_client: ApiClient, pods: PodPlayer) -> None:
    create(api_client, configmap("db-config", {"v": "1"}))
    statefulset(api_client, pods, "a", 2, annotations={"gitops-reloader.io/rollout-priority": "10"})
    statefulset(api_client, pods, "b", 2)
    pods.hold_unready("a-0")
    flags = ["--eviction=on-delete", *FAST, "--max-concurrent-rollouts=1", "--rollout-timeout=1h"]
    with running_controller(api_client, flags):
        change(api_client)
        wait_for(lambda: (r := record_of(api_client, "a")) is not None and r.state is EvictionState.WAITING
                 and pods.recreated == ["a-1", "a-0"], timeout=30, message="a evicting, its last pod unready")
        assert record_of(api_client, "b") is None, "b started while a's eviction used the budget"
        pods.release("a-0")
        wait_for(lambda: done(api_client, "a") and done(api_client, "b"), timeout=30, message="both done")
    assert pods.deleted == ["a-1", "a-0", "b-1", "b-0"]


def test_annotated_evict_strategy_on_a_rolling_workload_adds_no_restart(
        api_client: ApiClient, pods: PodPlayer) -> None:
    """A RollingUpdate StatefulSet's write rolls its pods: an eviction on top would restart twice."""
    create(api_client, configmap("db-config", {"v": "1"}))
    statefulset(api_client, pods, "web", 1, strategy="RollingUpdate",
                annotations={"gitops-reloader.io/restart-strategy": "eviction"})
    with running_controller(api_client, ["--eviction=annotated", *FAST]) as app:
        change(api_client)
        wait_event(api_client, "web", "Reloaded")
        wait_for(app.controller.idle, message="idle")
    assert record_of(api_client, "web") is None
    assert pods.deleted == []


OPEN_STATUS = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
CLUSTER_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "clusters.postgresql.cnpg.io"},
    "spec": {"group": "postgresql.cnpg.io", "scope": "Namespaced",
             "names": {"kind": "Cluster", "listKind": "ClusterList", "plural": "clusters",
                       "singular": "cluster"},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "required": ["instances"], "properties": {
                                   "instances": {"type": "integer", "minimum": 1},
                                   "imageName": {"type": "string"}}},
                               "status": OPEN_STATUS}}}}]}}
"""CloudNativePG's ``Cluster`` (``postgresql.cnpg.io/v1``), reduced to the fields the test uses: the
operator owns its pods directly (``cnpg.io/cluster=<name>``); there is no pod template to write."""
RABBIT_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "rabbitmqclusters.rabbitmq.com"},
    "spec": {"group": "rabbitmq.com", "scope": "Namespaced",
             "names": {"kind": "RabbitmqCluster", "listKind": "RabbitmqClusterList",
                       "plural": "rabbitmqclusters", "singular": "rabbitmqcluster"},
             "versions": [{"name": "v1beta1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
                               "status": OPEN_STATUS}}}}]}}
"""The RabbitMQ cluster operator's ``RabbitmqCluster``: it owns a StatefulSet ``<name>-server`` that
owns the pods (``app.kubernetes.io/name=<name>``), two owner references deep."""
OPERATOR_KINDS = """\
kinds:
  - group: postgresql.cnpg.io
    version: v1
    kind: Cluster
    plural: clusters
    pods:
      selector: cnpg.io/cluster={name}
    completesLike: Ready-condition
  - group: rabbitmq.com
    version: v1beta1
    kind: RabbitmqCluster
    plural: rabbitmqclusters
    pods:
      selector: app.kubernetes.io/name={name}
      ownerDepth: 2
"""


def test_an_operator_owned_resources_pods_are_restarted_through_evict(
        server: ApiServer, api_client: ApiClient, pods: PodPlayer, tmp_path: Path) -> None:
    server.serve_crd(CLUSTER_CRD)
    server.serve_crd(RABBIT_CRD)
    config = tmp_path / "kinds.yaml"
    config.write_text(OPERATOR_KINDS)
    create(api_client, configmap("db-config", {"v": "1"}))
    reload_for = {"configmap.reloader.stakater.com/reload": "db-config"}
    cluster = create(api_client, {"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
                                  "metadata": {"name": "pg", "namespace": NS, "annotations": reload_for},
                                  "spec": {"instances": 2}})
    pods.start(cluster, 2, {"metadata": {"labels": {"cnpg.io/cluster": "pg"}}, "spec": POD_SPEC})
    rabbit = create(api_client, {"apiVersion": "rabbitmq.com/v1beta1", "kind": "RabbitmqCluster",
                                 "metadata": {"name": "mq", "namespace": NS, "annotations": reload_for},
                                 "spec": {"replicas": 2}})
    server_set = create(api_client, {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "mq-server", "namespace": NS, "ownerReferences": [
            {"apiVersion": "rabbitmq.com/v1beta1", "kind": "RabbitmqCluster", "name": "mq",
             "uid": rabbit["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"replicas": 2, "serviceName": "mq",
                 "selector": {"matchLabels": {"app.kubernetes.io/name": "mq"}},
                 "template": {"metadata": {"labels": {"app.kubernetes.io/name": "mq"}}, "spec": POD_SPEC}}})
    pods.start(server_set, 2, {"metadata": {"labels": {"app.kubernetes.io/name": "mq"}}, "spec": POD_SPEC})
    wait_for(lambda: all(pods.ready(p) for p in ("pg-0", "pg-1", "mq-server-0", "mq-server-1")),
             message="operators' pods Ready")
    flags = ["--eviction=annotated", *FAST, f"--workload-kinds-config={config}"]
    with running_controller(api_client, flags) as app:
        change(api_client)
        for name, plural, group in (("pg", "clusters", "postgresql.cnpg.io/v1"),
                                    ("mq", "rabbitmqclusters", "rabbitmq.com/v1beta1")):
            wait_for(lambda n=name, p=plural, g=group: done(api_client, n, plural=p, group=g), timeout=30,
                     message=f"{name}'s pods evicted")
            record = record_of(api_client, name, plural=plural, group=group)
            assert list(record.sources) == ["ConfigMap/db-config"]
        assert sorted(pods.deleted) == ["mq-server-0", "mq-server-1", "pg-0", "pg-1"]
        wait_event(api_client, "pg", "Reloaded")
        # The record is what the next reload compares with: a re-applied identical ConfigMap
        # and the resync restart nothing.
        CoreV1Api(api_client).patch_namespaced_config_map("db-config", NS, {"data": {"v": "2"}})
        assert app.controller.resync() == 0
        wait_for(app.controller.idle, message="idle")
    assert len(pods.deleted) == 4


def test_a_kind_with_no_pod_template_is_not_reloaded_while_evict_is_off(
        server: ApiServer, api_client: ApiClient, tmp_path: Path) -> None:
    server.serve_crd(CLUSTER_CRD)
    config = tmp_path / "kinds.yaml"
    config.write_text(OPERATOR_KINDS.split("  - group: rabbitmq.com")[0])
    create(api_client, configmap("db-config", {"v": "1"}))
    create(api_client, {"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
                        "metadata": {"name": "pg", "namespace": NS,
                                     "annotations": {"configmap.reloader.stakater.com/reload": "db-config"}},
                        "spec": {"instances": 1}})
    with running_controller(api_client, [f"--workload-kinds-config={config}"]):
        change(api_client)
        event = wait_event(api_client, "pg", "EvictionDisabled")
    assert "--eviction=off" in event["message"]
    assert record_of(api_client, "pg", plural="clusters", group="postgresql.cnpg.io/v1") is None


def test_a_typed_evict_record_is_ignored(api_client: ApiClient, pods: PodPlayer) -> None:
    """A record someone else wrote (kubectl annotate, a manifest) evicts nothing."""
    create(api_client, configmap("db-config", {"v": "1"}))
    statefulset(api_client, pods, "db", 2)
    KubeApi(api_client).request(
        "PATCH", f"/apis/apps/v1/namespaces/{NS}/statefulsets/db", content_type=MERGE,
        body={"metadata": {"annotations": {EVICTION_ANNOTATION: json.dumps({"since": 4102444800})}}})
    with running_controller(api_client, ["--eviction=on-delete", *FAST]) as app:
        wait_for(app.controller.idle, message="idle")
        assert app.controller.evictor is not None and app.controller.evictor.tracking() == []
    assert pods.deleted == []


def test_explain_and_plan_say_how_many_pods_an_evict_restarts_and_what_the_budget_allows(
        server: ApiServer, api_client: ApiClient, pods: PodPlayer, tmp_path: Path) -> None:
    from test_plan import run_plan

    from gitops_reloader.config import load_config
    from gitops_reloader.explain import explain, render_text

    create(api_client, configmap("db-config", {"v": "1"}))
    statefulset(api_client, pods, "db", 3)
    budget(api_client, "db-pdb", "db", allowed=1)
    config = load_config(["--eviction=on-delete"], environ={"HOME": "/nonexistent"})
    text = render_text(explain(KubeApi(api_client), config, "StatefulSet", NS, "db"))
    assert ("restart: evict 3 pods, one at a time, PDB db-pdb allows 1 now "
            "(--eviction=on-delete: a template write rolls none of its pods)") in text
    off = render_text(explain(KubeApi(api_client), load_config([], environ={"HOME": "/nonexistent"}),
                              "StatefulSet", NS, "db"))
    assert "restart: the template write restarts no pod (OnDelete); --eviction=on-delete would evict" in off
    planned = run_plan(server, tmp_path, "--configmap=ns/db-config", "--from-literal=v=2",
                       "--eviction=on-delete", "--evictions-at-once=2")
    assert planned.returncode == 1, planned.stderr
    assert "then: evict 3 pods, 2 at a time, PDB db-pdb allows 1 now" in planned.stdout
    assert pods.deleted == []  # both only read


def test_an_evict_the_api_server_refuses_otherwise_gets_an_event_and_is_retried(
        api_client: ApiClient, pods: PodPlayer) -> None:
    """Two budgets over one pod: the API server answers 500 (the eviction subresource supports one)."""
    create(api_client, configmap("db-config", {"v": "1"}))
    statefulset(api_client, pods, "db", 2)
    budget(api_client, "db-pdb", "db", allowed=1)
    budget(api_client, "db-pdb-2", "db", allowed=1)
    with running_controller(api_client, ["--eviction=on-delete", *FAST]) as app:
        change(api_client)
        event = wait_event(api_client, "db", "EvictionFailed")
        assert "more than one PodDisruptionBudget" in event["message"]
        wait_for(lambda: (app.metrics.registry.get_sample_value("gitops_reloader_pod_evictions_total",
                                                                {"result": "error"}) or 0) >= 2,
                 message="tried again")
        PolicyV1Api(api_client).delete_namespaced_pod_disruption_budget("db-pdb-2", NS)
        allow(api_client, "db-pdb", 10)  # the disruption controller: room for both pods
        wait_for(lambda: done(api_client, "db"), timeout=30, message="evicted once one budget is left")
    assert pods.deleted == ["db-1", "db-0"]
    assert reasons(api_client, "db").count("EvictionFailed") == 1


# --- issue 40: eviction as real clusters behave --------------------------------------


def test_a_crash_looping_pod_is_evicted_first_when_its_config_is_fixed(
        api_client: ApiClient, pods: PodPlayer) -> None:
    """db-1 crash-loops on a bad ConfigMap; the fix must restart it first, not wait for it forever."""
    create(api_client, configmap("db-config", {"v": "1"}))
    statefulset(api_client, pods, "db", 3)
    pods.crash_loop("db-1")
    wait_for(lambda: not pods.ready("db-1"), message="db-1 crash-looping")
    with running_controller(api_client, ["--eviction=on-delete", *FAST]):
        change(api_client)
        wait_for(lambda: done(api_client, "db"), timeout=30, message="every pod evicted, db-1 first")
        wait_event(api_client, "db", "EvictionComplete")
    assert pods.deleted == ["db-1", "db-2", "db-0"]
    assert "RolloutFailed" not in reasons(api_client, "db")


def test_an_opted_in_bare_pod_is_evicted_and_the_evict_completes_without_waiting_for_it(
        api_client: ApiClient, pods: PodPlayer) -> None:
    create(api_client, configmap("db-config", {"v": "1"}))
    statefulset(api_client, pods, "db", 2)
    CoreV1Api(api_client).create_namespaced_pod(NS, {
        "metadata": {"name": "db-tool", "labels": {"app": "db"},
                     "annotations": {"gitops-reloader.io/evict-bare-pod": "true"}},
        "spec": POD_SPEC})
    pods.release("db-tool")  # the kubelet reports it Ready
    wait_for(lambda: pods.ready("db-tool"), message="the bare pod Ready")
    with running_controller(api_client, ["--eviction=on-delete", *FAST]):
        change(api_client)
        wait_for(lambda: done(api_client, "db"), timeout=30, message="done without the bare pod's return")
    assert sorted(pods.deleted) == ["db-0", "db-1", "db-tool"]
    assert pods.recreated == ["db-1", "db-0"]  # nothing re-creates the bare pod
    assert record_of(api_client, "db").pods == 2  # the spec's replicas, not the pods seen
    assert "EvictionRefused" not in reasons(api_client, "db")


def test_no_evict_while_a_pod_the_spec_asks_for_is_missing(api_client: ApiClient, pods: PodPlayer) -> None:
    """Three replicas, db-2 not (yet) created: the first pass must not take two for the count."""
    create(api_client, configmap("db-config", {"v": "1"}))
    owner = statefulset(api_client, pods, "db", 3, running=2)
    with running_controller(api_client, ["--eviction=on-delete", *FAST]):
        change(api_client)
        wait_for(lambda: (r := record_of(api_client, "db")) is not None and r.state is EvictionState.WAITING
                 and (r.pods, r.left) == (3, 2), timeout=30, message="waiting for the missing pod, 2 left")
        assert pods.deleted == []
        # The StatefulSet controller creates db-2, a second after the change: it runs the new
        # data (a pod of the change's own second would count as old and be restarted too).
        since = record_of(api_client, "db").since
        wait_for(lambda: time.time() >= since + 1.05, message="the change's second over")
        pods.start(owner, 1, owner["spec"]["template"], first=2)
        wait_for(lambda: done(api_client, "db"), timeout=30, message="the old pods evicted")
    assert pods.deleted == ["db-1", "db-0"]


def test_a_replacement_not_ready_within_the_rollout_timeout_fails_the_evict_with_an_event(
        api_client: ApiClient, pods: PodPlayer) -> None:
    create(api_client, configmap("db-config", {"v": "1"}))
    statefulset(api_client, pods, "db", 3)
    pods.hold_unready("db-2")  # its replacement never becomes Ready
    with running_controller(api_client, ["--eviction=on-delete", *FAST, "--rollout-timeout=2s"]) as app:
        change(api_client)
        event = wait_event(api_client, "db", "RolloutFailed")
        assert event["type"] == "Warning" and "db-2 not Ready" in event["message"]
        wait_for(lambda: (r := record_of(api_client, "db")) is not None and r.state is EvictionState.FAILED,
                 message="the record says failed")
        assert pods.deleted == ["db-2"]  # the rest of the change is not spread
        assert app.metrics.registry.get_sample_value("gitops_reloader_rollouts_failed_total",
                                                     {"reason": "ReplacementNotReady"}) == 1
        pods.release("db-2")  # it becomes Ready after all: the eviction goes on
        wait_for(lambda: done(api_client, "db"), timeout=30, message="the eviction finished")
    assert pods.deleted == ["db-2", "db-1", "db-0"]
    assert reasons(api_client, "db").count("RolloutFailed") == 1
