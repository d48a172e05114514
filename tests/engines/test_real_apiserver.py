"""The controller against a real kube-apiserver, with the real Deployment, StatefulSet and
disruption controllers (kube-controller-manager) and kwok as the kubelet (issue 41).

Nothing here is played by the project: the rollout, the pods, a PodDisruptionBudget's status
and the RBAC authorizer are Kubernetes' own, built from the Go module proxy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from controlplane import FAKE_NODE, ControlPlane
from fleet import events_of, ready_pods
from helm_tools import CHART_DIR, render, require_helm
from kubernetes.client import (
    ApiClient,
    AppsV1Api,
    CoreV1Api,
    PolicyV1Api,
    RbacAuthorizationV1Api,
)

from gitops_reloader.config import load_config
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.permissions import missing_permissions, required_permissions
from gitops_reloader.kube.workloads import adapters_for
from gitops_reloader.rollout.eviction import EVICTION_ANNOTATION, EvictionState, parse_record
from gitops_reloader.testing.harness import running_controller, wait_for

pytestmark = [pytest.mark.engines, pytest.mark.xdist_group("engines")]

TIMEOUT = 60.0
DISRUPTION_DELETION_TIMEOUT = 120.0
"""``pkg/controller/disruption`` ``DeletionTimeout``: how long a PodDisruptionBudget counts a
pod it let go as disrupted while a pod of that name exists and is not being deleted."""


def configmap(namespace: str, name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "data": data}


def pod_template(app: str, source: str) -> dict[str, Any]:
    """A pod template run by kwok's node, reading ``source`` through envFrom."""
    return {"metadata": {"labels": {"app": app}},
            "spec": {"nodeName": FAKE_NODE, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "app", "image": "registry.example/app:1",
                                     "envFrom": [{"configMapRef": {"name": source}}]}]}}


def test_real_apiserver_env_vars_reload_rolls_pods_through_the_real_deployment_controller(
        real_client: ApiClient, namespace: str) -> None:
    core, apps = CoreV1Api(real_client), AppsV1Api(real_client)
    core.create_namespaced_config_map(namespace, configmap(namespace, "web-config", {"mode": "a"}))
    apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "web", "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": pod_template("web", "web-config")}})
    wait_for(lambda: len(ready_pods(core, namespace, "web")) == 2, timeout=TIMEOUT,
             message="web's pods Ready")
    first = {p.metadata.name for p in ready_pods(core, namespace, "web")}
    with running_controller(real_client, [f"--namespaces={namespace}"]):
        core.patch_namespaced_config_map("web-config", namespace, {"data": {"mode": "b"}})

        def rolled() -> bool:
            pods = ready_pods(core, namespace, "web")
            return len(pods) == 2 and not first & {p.metadata.name for p in pods} and all(
                any(e.name == "STAKATER_WEB_CONFIG_CONFIGMAP" for e in (p.spec.containers[0].env or ()))
                for p in pods)
        wait_for(rolled, timeout=TIMEOUT, message="two new Ready pods with the reload's env var")
    sets = apps.list_namespaced_replica_set(namespace, label_selector="app=web").items
    assert sorted(rs.spec.replicas for rs in sets) == [0, 2]  # the real controller scaled the old one down

    def settled() -> bool:  # the status lags the pods: the old pod is counted until it is gone
        status = apps.read_namespaced_deployment("web", namespace).status
        return status.updated_replicas == status.ready_replicas == status.replicas == 2
    wait_for(settled, timeout=TIMEOUT, message="the Deployment's status: 2 updated, 2 ready, 2 in all")
    deployment = apps.read_namespaced_deployment("web", namespace)
    assert deployment.status.observed_generation == deployment.metadata.generation == 2


def test_real_apiserver_evict_waits_on_a_real_disruption_budget_then_restarts_each_pod(
        real_client: ApiClient, namespace: str) -> None:
    """A PodDisruptionBudget whose status the real disruption controller computes: 0 allowed
    blocks the eviction (429 from the real Eviction API), one allowed lets it through; the
    real StatefulSet controller re-creates each pod and kwok makes it Ready."""
    core, apps, policy = CoreV1Api(real_client), AppsV1Api(real_client), PolicyV1Api(real_client)
    core.create_namespaced_config_map(namespace, configmap(namespace, "db-config", {"v": "1"}))
    apps.create_namespaced_stateful_set(namespace, {
        "metadata": {"name": "db", "annotations": {"reloader.stakater.com/auto": "true"}},
        "spec": {"replicas": 3, "serviceName": "db", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": {"app": "db"}}, "updateStrategy": {"type": "OnDelete"},
                 "template": pod_template("db", "db-config")}})
    policy.create_namespaced_pod_disruption_budget(namespace, {
        "metadata": {"name": "db-pdb"},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "db"}}}})
    wait_for(lambda: len(ready_pods(core, namespace, "db")) == 3, timeout=TIMEOUT, message="db's pods Ready")
    wait_for(lambda: (policy.read_namespaced_pod_disruption_budget("db-pdb", namespace).status.current_healthy
                      == 3), timeout=TIMEOUT, message="the disruption controller counted 3 healthy")
    before = {p.metadata.name: p.metadata.uid for p in ready_pods(core, namespace, "db")}
    with running_controller(real_client, [f"--namespaces={namespace}", "--eviction=on-delete",
                                          "--eviction-interval=0.2s"]):
        core.patch_namespaced_config_map("db-config", namespace, {"data": {"v": "2"}})
        wait_for(lambda: any(e.reason == "ReloadBlockedByPDB" for e in events_of(core, namespace, "db")),
                 timeout=TIMEOUT, message="ReloadBlockedByPDB")
        assert {p.metadata.uid for p in ready_pods(core, namespace, "db")} == set(before.values())
        policy.patch_namespaced_pod_disruption_budget("db-pdb", namespace, {"spec": {"minAvailable": 2}})

        def record() -> Any:
            annotations = apps.read_namespaced_stateful_set("db", namespace).metadata.annotations or {}
            return parse_record(annotations.get(EVICTION_ANNOTATION))
        # The real disruption controller keys its disruptedPods by pod name: a StatefulSet pod
        # re-created under the same name before it saw the deletion stays counted as disrupted
        # for its DeletionTimeout (2 minutes), and the budget allows nothing meanwhile.
        wait_for(lambda: (r := record()) is not None and r.state is EvictionState.DONE,
                 timeout=DISRUPTION_DELETION_TIMEOUT + TIMEOUT * 2, interval=0.2, message="every pod evicted")
    after = {p.metadata.name: p.metadata.uid for p in ready_pods(core, namespace, "db")}
    assert sorted(after) == ["db-0", "db-1", "db-2"]
    assert not set(after.values()) & set(before.values())  # each pod restarted once, by the real controllers
    assert any(e.reason == "EvictionComplete" for e in events_of(core, namespace, "db"))


def _apply_chart_rbac(rbac: RbacAuthorizationV1Api, core: CoreV1Api, docs: list[dict[str, Any]],
                      namespace: str) -> str:
    """The chart's ServiceAccount, (Cluster)Roles and bindings, created in the real cluster; the
    ServiceAccount's name."""
    account = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]["name"]
    core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    for doc in docs:
        kind, body = doc["kind"], {**doc, "metadata": {**doc["metadata"], "namespace": namespace}}
        for subject in body.get("subjects") or ():
            subject["namespace"] = namespace
        if kind == "ClusterRole":
            rbac.create_cluster_role({**doc, "metadata": {"name": f"{namespace}-{doc['metadata']['name']}"}})
        elif kind == "ClusterRoleBinding":
            body["metadata"] = {"name": f"{namespace}-{doc['metadata']['name']}"}
            body["roleRef"] = {**doc["roleRef"], "name": f"{namespace}-{doc['roleRef']['name']}"}
            rbac.create_cluster_role_binding(body)
        elif kind == "Role":
            rbac.create_namespaced_role(namespace, body)
        elif kind == "RoleBinding":
            rbac.create_namespaced_role_binding(namespace, body)
    return account


@pytest.mark.parametrize("values", [{}, {"reloader.eviction.mode": "on-delete",
                                         "reloader.stateStore": "configmap"}])
def test_real_apiserver_startup_permission_check_passes_with_the_charts_rbac_and_names_a_missing_verb(
        control_plane: ControlPlane, real_client: ApiClient, namespace: str, tmp_path: Path,
        values: dict[str, str]) -> None:
    """The chart's RBAC, applied to a real apiserver, gives its ServiceAccount every verb the
    start-up check asks for (SelfSubjectAccessReview answered by the real RBAC authorizer);
    with one rule taken out, the check names that verb."""
    helm = require_helm()
    docs = render(helm, CHART_DIR, home=tmp_path / "helm", namespace=namespace, set_values=values)
    core, rbac = CoreV1Api(real_client), RbacAuthorizationV1Api(real_client)
    account = _apply_chart_rbac(rbac, core, docs, namespace)
    token = core.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": 600}}).status.token
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "run"
    config = load_config(args[1:], environ={"POD_NAMESPACE": namespace, "HOME": str(tmp_path)})
    adapters = adapters_for(argo_rollouts=config.behaviour.is_argo_rollouts,
                            openshift=bool(config.behaviour.is_openshift),
                            ignored=config.filters.ignored_workload_types)
    needs = required_permissions(config, adapters)
    with control_plane.token_client(token) as as_account:
        assert missing_permissions(KubeApi(as_account), needs) == []
        cluster_role = next(d for d in docs if d["kind"] == "ClusterRole")["metadata"]["name"]
        role = rbac.read_cluster_role(f"{namespace}-{cluster_role}")
        for rule in role.rules:
            rule.resources = [r for r in rule.resources or () if r != "deployments"] or ["none"]
        rbac.replace_cluster_role(role.metadata.name, role)
        missing = wait_for(lambda: missing_permissions(KubeApi(as_account), needs), timeout=TIMEOUT,
                           message="the check sees the rule gone")
    assert {(n.group, n.resource) for n in missing} == {("apps", "deployments")}
    assert {n.verb for n in missing} >= {"list", "watch", "patch"}
