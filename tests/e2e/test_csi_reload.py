"""Secrets Store CSI integration (``--enable-csi-integration``) against the API test server.

The CSI driver's part is played by the test: it creates SecretProviderClasses and, per
pod, a SecretProviderClassPodStatus, then bumps object versions with a PUT as the driver
does on rotation. Pods carry owner references to a ReplicaSet owned by the Deployment,
as the ReplicaSet controller writes them. Everything goes through the official client.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import pytest
from kubernetes.client import ApiClient
from reload_helpers import call, configmap, create, env_of, set_cm_data, workload, writes

from gitops_reloader.app import App
from gitops_reloader.hashing import configmap_hash
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.owners import OwnerResolver
from gitops_reloader.kube.store import object_key
from gitops_reloader.model import ObjectRef
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for

pytestmark = pytest.mark.e2e

CSI = "/apis/secrets-store.csi.x-k8s.io/v1/namespaces/ns"
ENV = "STAKATER_VAULT_DB_SECRETPROVIDERCLASS"
FLAGS = ["--enable-csi-integration"]
K_AUTO = "secretproviderclass.reloader.stakater.com/auto"
K_RELOAD = "secretproviderclass.reloader.stakater.com/reload"
K_EXCLUDE = "secretproviderclasses.exclude.reloader.stakater.com/reload"


def stakater_hash(spc: str, versions: dict[str, str]) -> str:
    """Stakater's GetSHAfromSecretProviderClassPodStatus, written out independently."""
    values = sorted([f"{i}={v}" for i, v in versions.items()] + [f"SecretProviderClassName={spc}"])
    return hashlib.sha1(";".join(values).encode()).hexdigest()


def csi_volume(spc: str) -> dict[str, Any]:
    return {"name": "secrets", "csi": {"driver": "secrets-store.csi.k8s.io", "readOnly": True,
                                       "volumeAttributes": {"secretProviderClass": spc}}}


def mounting(name: str, spc: str = "vault-db", *,
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
    mounts = [{"name": "secrets", "mountPath": "/mnt"}]
    container = {"name": "app", "image": "nginx", "volumeMounts": mounts}
    return deployment(name, annotations=annotations or {K_AUTO: "true"}, containers=[container],
                      volumes=[csi_volume(spc)])


def secret_provider_class(api_client: ApiClient, name: str,
                          annotations: dict[str, str] | None = None) -> None:
    call(api_client, "POST", f"{CSI}/secretproviderclasses", {
        "apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClass",
        "metadata": {"name": name, "namespace": "ns", "annotations": dict(annotations or {})},
        "spec": {"provider": "vault", "parameters": {"roleName": "app"}},
    })


def owner(kind: str, name: str, api_version: str = "apps/v1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}",
            "controller": True, "blockOwnerDeletion": True}


def pods_of(api_client: ApiClient, workload_name: str, count: int) -> list[str]:
    """A ReplicaSet owned by the Deployment and ``count`` pods owned by the ReplicaSet."""
    rs = f"{workload_name}-5d4f8"
    create(api_client, {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                        "metadata": {"name": rs, "namespace": "ns",
                                     "ownerReferences": [owner("Deployment", workload_name)]},
                        "spec": {"selector": {"matchLabels": {"app": workload_name}},
                                 "template": {"metadata": {"labels": {"app": workload_name}},
                                              "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}})
    names = [f"{rs}-{i}" for i in range(count)]
    for pod in names:
        call(api_client, "POST", "/api/v1/namespaces/ns/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": "ns", "labels": {"app": workload_name},
                         "ownerReferences": [owner("ReplicaSet", rs)]},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]},
        })
    return names


def status_name(pod: str, spc: str = "vault-db") -> str:
    return f"{pod}-ns-{spc}"


def pod_status(api_client: ApiClient, pod: str, versions: dict[str, str], spc: str = "vault-db") -> None:
    """What the driver creates after mounting ``spc`` into ``pod``."""
    call(api_client, "POST", f"{CSI}/secretproviderclasspodstatuses", {
        "apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClassPodStatus",
        "metadata": {"name": status_name(pod, spc), "namespace": "ns",
                     "labels": {"internal.secrets-store.csi.k8s.io/node-name": "node-1"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod,
                                          "uid": f"uid-{pod}"}]},
        "status": {"podName": pod, "secretProviderClassName": spc, "mounted": True,
                   "targetPath": f"/var/lib/kubelet/pods/{pod}/volumes/kubernetes.io~csi/secrets/mount",
                   "objects": [{"id": i, "version": v} for i, v in versions.items()]},
    })


def rotate(app: App, api_client: ApiClient, pod: str, versions: dict[str, str],
           spc: str = "vault-db") -> None:
    """The driver's rotation: PUT the pod status with new versions; wait until the controller
    has queued its workloads (it counts the change after queuing them)."""
    path = f"{CSI}/secretproviderclasspodstatuses/{status_name(pod, spc)}"
    current = call(api_client, "GET", path)
    current["status"]["objects"] = [{"id": i, "version": v} for i, v in versions.items()]
    seen = changes(app)
    call(api_client, "PUT", path, current)
    wait_for(lambda: changes(app) > seen, message=f"controller to handle the rotation of {pod}")


def changes(app: App) -> float:
    value = app.registry.get_sample_value("gitops_reloader_changes_detected_total",
                                          {"kind": "SecretProviderClass"})
    return value or 0.0


def deployment_patches(server: ApiServer) -> int:
    return writes(server, "deployments")


V1 = {"secret/data/db#password": "1", "secret/data/db#user": "1"}
V2 = {"secret/data/db#password": "2", "secret/data/db#user": "1"}


def test_version_bump_reloads_the_owning_deployment_once_with_stakaters_env_var(server, api_client):
    secret_provider_class(api_client, "vault-db")
    create(api_client, mounting("web"))
    create(api_client, mounting("idle"))  # mounts the class too, but none of its pods report
    (pod,) = pods_of(api_client, "web", 1)
    pods_of(api_client, "idle", 0)
    pod_status(api_client, pod, V1)
    with running_controller(api_client, FLAGS) as app:
        before = deployment_patches(server)
        rotate(app, api_client, pod, V2)
        wait_for(lambda: env_of(workload(server, "Deployment", "web")).get(ENV), message="web reloaded")
        settle(app)
        assert env_of(workload(server, "Deployment", "web"))[ENV] == stakater_hash("vault-db", V2)
        assert ENV not in env_of(workload(server, "Deployment", "idle"))
        assert deployment_patches(server) - before == 1


def test_annotations_strategy_records_the_class_in_last_reloaded_from(server, api_client):
    secret_provider_class(api_client, "vault-db")
    create(api_client, mounting("web"))
    (pod,) = pods_of(api_client, "web", 1)
    pod_status(api_client, pod, V1)
    key = "reloader.stakater.com/last-reloaded-from"
    with running_controller(api_client, [*FLAGS, "--reload-strategy=annotations"]) as app:
        rotate(app, api_client, pod, V2)

        def recorded() -> str | None:
            return (workload(server, "Deployment", "web")["spec"]["template"]["metadata"]
                    .get("annotations") or {}).get(key)

        value = json.loads(wait_for(recorded, message="last-reloaded-from"))
    assert {k: value[k] for k in ("type", "name", "namespace", "hash", "containerRefs")} == {
        "type": "SECRETPROVIDERCLASS", "name": "vault-db", "namespace": "ns",
        "hash": stakater_hash("vault-db", V2), "containerRefs": ["app"]}


def cached_env(app: App, name: str) -> dict[str, Any]:
    """The env of ``name`` as the controller's Deployment cache holds it."""
    for informer in app.controller.informers():
        if informer.kind.plural == "deployments" and (record := informer.store.get(object_key("ns", name))):
            return env_of(record.raw)
    return {}


def test_three_pods_reporting_within_the_window_reload_once(server, api_client):
    secret_provider_class(api_client, "vault-db")
    create(api_client, mounting("web"))
    pods = pods_of(api_client, "web", 3)
    for pod in pods:
        pod_status(api_client, pod, V1)
    with running_controller(api_client, [*FLAGS, "--coalesce-window=1s"]) as app:
        before = deployment_patches(server)
        for pod in pods:
            rotate(app, api_client, pod, V2)
        wait_for(lambda: env_of(workload(server, "Deployment", "web")).get(ENV), message="web reloaded")
        settle(app)
        assert env_of(workload(server, "Deployment", "web"))[ENV] == stakater_hash("vault-db", V2)
        assert deployment_patches(server) - before == 1


def test_pods_reporting_one_after_another_reload_once(server, api_client):
    """The driver rotates each pod's mount on its own schedule: the first report reloads,
    the later ones find the workload already carrying that hash."""
    secret_provider_class(api_client, "vault-db")
    create(api_client, mounting("web"))
    first, *others = pods_of(api_client, "web", 3)
    for pod in (first, *others):
        pod_status(api_client, pod, V1)
    expected = stakater_hash("vault-db", V2)
    with running_controller(api_client, FLAGS) as app:
        before = deployment_patches(server)
        rotate(app, api_client, first, V2)
        wait_for(lambda: cached_env(app, "web").get(ENV) == expected, message="reload in the cache")
        for pod in others:
            rotate(app, api_client, pod, V2)
        settle(app)
        assert deployment_patches(server) - before == 1


def test_explicit_list_reloads_and_a_later_rotation_reloads_again(server, api_client):
    secret_provider_class(api_client, "vault-db")
    create(api_client, mounting("web", annotations={K_RELOAD: "vault-.*"}))
    (pod,) = pods_of(api_client, "web", 1)
    pod_status(api_client, pod, V1)
    v3 = {**V2, "secret/data/db#user": "3"}
    with running_controller(api_client, FLAGS) as app:
        for versions in (V2, v3):
            rotate(app, api_client, pod, versions)
            wait_for(lambda v=versions: env_of(workload(server, "Deployment", "web")).get(ENV)
                     == stakater_hash("vault-db", v), message="web reloaded")


def test_ignore_on_the_class_and_exclude_on_the_workload_block_the_reload(server, api_client):
    secret_provider_class(api_client, "vault-db")
    secret_provider_class(api_client, "ignored", {"reloader.stakater.com/ignore": "true"})
    create(api_client, mounting("canary"))
    create(api_client, mounting("uses-ignored", "ignored"))
    create(api_client, mounting("excluding", annotations={"reloader.stakater.com/auto": "true",
                                                          K_EXCLUDE: "other, vault-db"}))
    (canary,) = pods_of(api_client, "canary", 1)
    (ignoring,) = pods_of(api_client, "uses-ignored", 1)
    (excluding,) = pods_of(api_client, "excluding", 1)
    pod_status(api_client, canary, V1)
    pod_status(api_client, ignoring, V1, spc="ignored")
    pod_status(api_client, excluding, V1)
    with running_controller(api_client, FLAGS) as app:
        before = deployment_patches(server)
        rotate(app, api_client, ignoring, V2, spc="ignored")
        rotate(app, api_client, excluding, V2)
        rotate(app, api_client, canary, V2)  # handled after the two above, on the same thread
        wait_for(lambda: env_of(workload(server, "Deployment", "canary")).get(ENV), message="canary reloaded")
        settle(app)
        ignored_env = env_of(workload(server, "Deployment", "uses-ignored"))
        assert "STAKATER_IGNORED_SECRETPROVIDERCLASS" not in ignored_env
        assert ENV not in env_of(workload(server, "Deployment", "excluding"))
        assert deployment_patches(server) - before == 1


def test_unreadable_pod_falls_back_to_every_workload_using_the_class(server, api_client):
    """Stakater's own rule: the class changed, so every workload that uses it reloads."""
    secret_provider_class(api_client, "vault-db")
    create(api_client, mounting("web"))
    create(api_client, mounting("api"))
    pod_status(api_client, "gone-pod", V1)  # its pod was never created (or is already deleted)
    with running_controller(api_client, FLAGS) as app:
        rotate(app, api_client, "gone-pod", V2)
        for name in ("web", "api"):
            wait_for(lambda n=name: env_of(workload(server, "Deployment", n)).get(ENV)
                     == stakater_hash("vault-db", V2), message=f"{name} reloaded")


def test_flag_on_but_api_absent_warns_and_runs(api_client_without_csi, caplog):
    api_client, server = api_client_without_csi
    create(api_client, configmap("app-cfg", {"v": "1"}))
    container = {"name": "app", "image": "nginx", "envFrom": [{"configMapRef": {"name": "app-cfg"}}]}
    create(api_client, deployment("web", annotations={"reloader.stakater.com/auto": "true"},
                                  containers=[container]))
    with caplog.at_level(logging.WARNING), running_controller(api_client, FLAGS) as app:
        assert app.controller.ready()
        set_cm_data(app, api_client, "app-cfg", {"v": "2"})
        wait_for(lambda: env_of(workload(server, "Deployment", "web")).get("STAKATER_APP_CFG_CONFIGMAP")
                 == configmap_hash({"v": "2"}), message="ConfigMap reload still works")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("secrets-store.csi.x-k8s.io/v1" in w and "--enable-csi-integration" in w for w in warnings)
    assert not any(q.resource.startswith("secretproviderclass") for q in server.list_queries())


@pytest.fixture
def api_client_without_csi():
    with ApiServer(disabled_groups={"secrets-store.csi.x-k8s.io"}) as srv:
        client = srv.api_client()
        yield client, srv
        client.close()


def test_owner_resolver_follows_pod_to_deployment_and_caches_links(server, api_client):
    (pod,) = pods_of(api_client, "web", 1)
    call(api_client, "POST", "/api/v1/namespaces/ns/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare", "namespace": "ns"},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]}})
    resolver = OwnerResolver(KubeApi(api_client), capacity=2)
    chain = (ObjectRef("ReplicaSet", "ns", "web-5d4f8"), ObjectRef("Deployment", "ns", "web"))
    assert resolver.owners_of_pod("ns", pod) == chain
    gets = server.request_counts().get(("get", "pods"), 0)
    assert resolver.owners_of_pod("ns", pod) == chain
    assert server.request_counts().get(("get", "pods"), 0) == gets  # served from the cache
    assert resolver.owners_of_pod("ns", "bare") == ()
    assert resolver.owners_of_pod("ns", "missing") is None
    assert len(resolver) == 2  # bounded


def test_test_server_validates_pod_statuses_against_the_driver_crd(api_client):
    body = {"apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClassPodStatus",
            "metadata": {"name": "bad", "namespace": "ns"},
            "status": {"podName": "p", "objects": "not-a-list", "unknown": 1}}
    with pytest.raises(Exception) as refused:
        call(api_client, "POST", f"{CSI}/secretproviderclasspodstatuses", body)
    assert "status.objects" in str(refused.value)
    body["status"]["objects"] = [{"id": "a", "version": "1", "extra": "x"}]
    created = call(api_client, "POST", f"{CSI}/secretproviderclasspodstatuses", body)
    assert created["status"] == {"podName": "p", "objects": [{"id": "a", "version": "1"}]}  # pruned


def test_explain_reports_secret_provider_classes(server, api_client, tmp_path, capsys):
    from gitops_reloader import cli

    secret_provider_class(api_client, "vault-db")
    secret_provider_class(api_client, "ignored", {"reloader.stakater.com/ignore": "true"})
    container = {"name": "app", "image": "nginx", "volumeMounts": [{"name": "secrets", "mountPath": "/m"},
                                                                  {"name": "other", "mountPath": "/o"}]}
    volumes = [csi_volume("vault-db"), {**csi_volume("ignored"), "name": "other"}]
    create(api_client, deployment("web", annotations={K_AUTO: "true"}, containers=[container],
                                  volumes=volumes))
    (pod,) = pods_of(api_client, "web", 1)
    pod_status(api_client, pod, V2)
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))

    def explain(*flags: str) -> dict[str, dict[str, Any]]:
        assert cli.main(["explain", "deploy/web", "-n", "ns", "--kubeconfig", kubeconfig,
                         "--output", "json", *flags]) == 0
        return {s["name"]: s for s in json.loads(capsys.readouterr().out)["sources"]}

    off = explain()
    assert (off["vault-db"]["tracked"], off["vault-db"]["reason"]) == (False, "csi-integration-off")
    on = explain(*FLAGS)
    assert (on["vault-db"]["tracked"], on["vault-db"]["reason"]) == (True, "typed-auto")
    assert on["vault-db"]["env_var"] == ENV and on["vault-db"]["container"] == "app"
    assert on["vault-db"]["current_hash"] == stakater_hash("vault-db", V2)
    assert (on["ignored"]["tracked"], on["ignored"]["reason"]) == (False, "ignored")


def test_sync_after_restart_reloads_only_workloads_behind_the_latest_report(server, api_client):
    """A rotation while the controller was down: the workload whose env var records an older
    hash reloads at start; one never reloaded for the class does not, nor does anything on
    a second restart."""
    secret_provider_class(api_client, "vault-db")
    for name in ("behind", "never"):
        create(api_client, mounting(name))
    (pod,) = pods_of(api_client, "behind", 1)
    pod_status(api_client, pod, V1)
    with running_controller(api_client, FLAGS) as app:
        rotate(app, api_client, pod, V2)
        wait_for(lambda: cached_env(app, "behind").get(ENV) == stakater_hash("vault-db", V2),
                 message="behind reloaded")
        settle(app)
    v3 = {**V2, "secret/data/db#password": "3"}
    path = f"{CSI}/secretproviderclasspodstatuses/{status_name(pod)}"
    body = call(api_client, "GET", path)  # the driver rotates while the controller is down
    body["status"]["objects"] = [{"id": i, "version": v} for i, v in v3.items()]
    call(api_client, "PUT", path, body)
    before = deployment_patches(server)
    with running_controller(api_client, [*FLAGS, "--sync-after-restart"]) as app:
        wait_for(lambda: env_of(workload(server, "Deployment", "behind")).get(ENV)
                 == stakater_hash("vault-db", v3), message="behind caught up")
        settle(app)
        assert ENV not in env_of(workload(server, "Deployment", "never"))
        assert deployment_patches(server) - before == 1
    with running_controller(api_client, [*FLAGS, "--sync-after-restart"]) as app:
        settle(app)
    assert deployment_patches(server) - before == 1  # nothing behind any more


def test_csi_informers_follow_namespaces_and_the_resource_label_selector(server, api_client):
    """As in Stakater, --resource-label-selector filters the pod statuses; the classes are
    read whatever their labels (Stakater GETs them); both stay in --namespaces."""
    flags = [*FLAGS, "--namespaces=ns", "--resource-label-selector=team=a", "--namespaces-to-ignore=skip"]
    with running_controller(api_client, flags):
        for resource in ("secretproviderclasspodstatuses", "secretproviderclasses"):
            wait_for(lambda r=resource: {q.verb for q in server.list_queries(r)} == {"list", "watch"},
                     message=f"{resource} listed and watched")
        statuses = server.list_queries("secretproviderclasspodstatuses")
        classes = server.list_queries("secretproviderclasses")
    assert {q.verb for q in statuses} == {q.verb for q in classes} == {"list", "watch"}
    assert {(q.namespace, q.label_selector) for q in statuses} == {("ns", "team=a")}
    assert {(q.namespace, q.label_selector) for q in classes} == {("ns", "")}
    assert {q.field_selector for q in statuses + classes} == {"metadata.namespace!=skip"}
