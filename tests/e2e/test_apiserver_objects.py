"""API test server: objects through the official client (metadata, writes, patches, CRs)."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient, ApiException

from gitops_reloader.testing.apiserver import ApiServer

pytestmark = pytest.mark.e2e

NS = "default"


def deployment(name: str = "web", env: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "app:1",
                            "env": env or [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                            "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}],
                        },
                        {"name": "sidecar", "image": "side:1"},
                    ],
                    "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}],
                },
            },
        },
    }


def error_body(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
    return body


def raw_get(api_client: ApiClient, path: str) -> dict[str, Any]:
    method, url, headers, _body, _post = api_client.param_serialize("GET", path)
    resp = api_client.call_api(method, url, headers)
    resp.read()
    assert resp.status == 200
    data: dict[str, Any] = json.loads(resp.data)
    return data


# --------------------------------------------------------------------------- metadata


def test_resource_version_is_one_counter_across_kinds(
    server: ApiServer, core: client.CoreV1Api, apps: client.AppsV1Api, api_client: ApiClient
) -> None:
    start = server.resource_version()
    versions = [
        core.create_namespaced_config_map(NS, {"metadata": {"name": "c"}}).metadata.resource_version,
        core.create_namespaced_secret(NS, {"metadata": {"name": "s"}}).metadata.resource_version,
        apps.create_namespaced_deployment(NS, deployment()).metadata.resource_version,
        client.CoordinationV1Api(api_client)
        .create_namespaced_lease(NS, {"metadata": {"name": "l"}, "spec": {}})
        .metadata.resource_version,
        core.patch_namespaced_config_map("c", NS, {"data": {"a": "b"}}).metadata.resource_version,
        client.BatchV1Api(api_client)
        .create_namespaced_job(NS, {"metadata": {"name": "j"}, "spec": {"template": {}}})
        .metadata.resource_version,
    ]
    numbers = [int(v) for v in versions]
    assert numbers == sorted(numbers)
    assert len(set(numbers)) == len(numbers)
    assert numbers[0] > start
    assert server.resource_version() == numbers[-1]


def test_server_sets_metadata(api_client: ApiClient, core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map(
        "team-a", {"metadata": {"name": "cfg", "uid": "forged", "generation": 7}}
    )
    meta = created.metadata
    assert meta.namespace == "team-a"
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", meta.uid)
    assert meta.generation == 1
    raw = raw_get(api_client, "/api/v1/namespaces/team-a/configmaps/cfg")
    assert raw["kind"] == "ConfigMap"
    assert raw["apiVersion"] == "v1"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", raw["metadata"]["creationTimestamp"])
    assert raw["metadata"]["resourceVersion"] == meta.resource_version


def test_generate_name_appends_five_random_characters(core: client.CoreV1Api) -> None:
    first = core.create_namespaced_config_map(NS, {"metadata": {"generateName": "cfg-"}})
    second = core.create_namespaced_config_map(NS, {"metadata": {"generateName": "cfg-"}})
    assert re.fullmatch(r"cfg-[a-z0-9]{5}", first.metadata.name)
    assert first.metadata.name != second.metadata.name


def test_generation_bumps_only_on_spec_change(apps: client.AppsV1Api) -> None:
    created = apps.create_namespaced_deployment(NS, deployment())
    labelled = apps.patch_namespaced_deployment(
        "web", NS, {"metadata": {"labels": {"extra": "1"}, "annotations": {"a": "b"}}}
    )
    assert labelled.metadata.generation == 1
    assert int(labelled.metadata.resource_version) > int(created.metadata.resource_version)
    scaled = apps.patch_namespaced_deployment("web", NS, {"spec": {"replicas": 3}})
    assert scaled.metadata.generation == 2
    restarted = apps.patch_namespaced_deployment(
        "web",
        NS,
        {"spec": {"template": {"metadata": {"annotations": {"restartedAt": "now"}}}}},
    )
    assert restarted.metadata.generation == 3


def test_noop_update_and_patch_keep_resource_version(server: ApiServer, core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map(
        NS, {"metadata": {"name": "cfg", "labels": {"a": "1"}}, "data": {"k": "v"}}
    )
    rv = created.metadata.resource_version
    replaced = core.replace_namespaced_config_map("cfg", NS, created)
    patched = core.patch_namespaced_config_map("cfg", NS, {"data": {"k": "v"}})
    with_manager = core.patch_namespaced_config_map(
        "cfg", NS, {"metadata": {"labels": {"a": "1"}}}, field_manager="other"
    )
    assert replaced.metadata.resource_version == rv
    assert patched.metadata.resource_version == rv
    assert with_manager.metadata.resource_version == rv
    assert server.resource_version() == int(rv)


# --------------------------------------------------------------------------- conflicts


def test_stale_put_is_409_conflict(core: client.CoreV1Api) -> None:
    stale = core.create_namespaced_config_map(NS, {"metadata": {"name": "cfg"}, "data": {"k": "1"}})
    core.patch_namespaced_config_map("cfg", NS, {"data": {"k": "2"}})
    stale.data = {"k": "3"}
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("cfg", NS, stale)
    assert err.value.status == 409
    body = error_body(err.value)
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on configmaps "cfg": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    stale.metadata.resource_version = None
    assert core.replace_namespaced_config_map("cfg", NS, stale).data == {"k": "3"}


def test_stale_resource_version_in_patch_is_409(apps: client.AppsV1Api) -> None:
    created = apps.create_namespaced_deployment(NS, deployment())
    old_rv = created.metadata.resource_version
    apps.patch_namespaced_deployment("web", NS, {"spec": {"replicas": 2}})
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment(
            "web", NS, {"metadata": {"resourceVersion": old_rv}, "spec": {"replicas": 5}}
        )
    assert err.value.status == 409
    assert error_body(err.value)["details"] == {
        "name": "web",
        "group": "apps",
        "kind": "deployments",
    }
    current = apps.read_namespaced_deployment("web", NS).metadata.resource_version
    ok = apps.patch_namespaced_deployment(
        "web",
        NS,
        {"metadata": {"resourceVersion": current}, "spec": {"replicas": 5}},
        _content_type="application/merge-patch+json",
    )
    assert ok.spec.replicas == 5


def test_duplicate_create_is_409_already_exists(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(NS, {"metadata": {"name": "cfg"}})
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(NS, {"metadata": {"name": "cfg"}})
    assert err.value.status == 409
    body = error_body(err.value)
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'configmaps "cfg" already exists'


def test_missing_object_is_404_with_the_real_status_body(
    core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("x", NS)
    assert err.value.status == 404
    assert error_body(err.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps "x" not found',
        "reason": "NotFound",
        "details": {"name": "x", "kind": "configmaps"},
        "code": 404,
    }
    for call in (
        lambda: apps.patch_namespaced_deployment("gone", NS, {"spec": {}}),
        lambda: apps.delete_namespaced_deployment("gone", NS),
        lambda: apps.replace_namespaced_deployment("gone", NS, deployment("gone")),
    ):
        with pytest.raises(ApiException) as err:
            call()
        assert err.value.status == 404
        assert error_body(err.value)["message"] == 'deployments.apps "gone" not found'


def test_create_without_name_is_422(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(NS, {"data": {"a": "b"}})
    assert err.value.status == 422
    assert error_body(err.value)["reason"] == "Invalid"


# --------------------------------------------------------------------------- patches


def test_strategic_merge_patch_uses_pod_template_merge_keys(apps: client.AppsV1Api) -> None:
    apps.create_namespaced_deployment(NS, deployment())
    patched = apps.patch_namespaced_deployment(
        "web",
        NS,
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "app",
                                "env": [{"name": "NEW", "value": "x"}, {"name": "B", "value": "9"}],
                                "volumeMounts": [{"name": "cfg2", "mountPath": "/etc/cfg"}],
                            },
                            {"$patch": "delete", "name": "sidecar"},
                        ]
                    }
                }
            }
        },
    )
    containers = patched.spec.template.spec.containers
    assert [c.name for c in containers] == ["app"]
    assert [(e.name, e.value) for e in containers[0].env] == [("NEW", "x"), ("A", "1"), ("B", "9")]
    assert [(m.name, m.mount_path) for m in containers[0].volume_mounts] == [("cfg2", "/etc/cfg")]
    assert containers[0].image == "app:1"
    nulled = apps.patch_namespaced_deployment("web", NS, {"metadata": {"labels": {"app": None}}})
    assert nulled.metadata.labels is None


def test_json_patch_and_merge_patch(apps: client.AppsV1Api, core: client.CoreV1Api) -> None:
    apps.create_namespaced_deployment(NS, deployment())
    patched = apps.patch_namespaced_deployment(
        "web",
        NS,
        [
            {"op": "add", "path": "/spec/template/metadata/annotations", "value": {"r": "1"}},
            {"op": "replace", "path": "/spec/replicas", "value": 4},
        ],
    )
    assert patched.spec.replicas == 4
    assert patched.spec.template.metadata.annotations == {"r": "1"}
    merged = apps.patch_namespaced_deployment(
        "web",
        NS,
        {"spec": {"template": {"spec": {"containers": [{"name": "only", "image": "x"}]}}}},
        _content_type="application/merge-patch+json",
    )
    assert [c.name for c in merged.spec.template.spec.containers] == ["only"]
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment("web", NS, [{"op": "test", "path": "/spec/replicas", "value": 99}])
    assert err.value.status == 422
    core.create_namespaced_config_map(NS, {"metadata": {"name": "cfg"}})
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map(
            "cfg", NS, {"data": {}}, _content_type="application/apply-patch+yaml"
        )
    assert err.value.status == 415


def test_field_manager_is_recorded_in_managed_fields(apps: client.AppsV1Api) -> None:
    created = apps.create_namespaced_deployment(NS, deployment(), field_manager="creator")
    assert [(m.manager, m.operation) for m in created.metadata.managed_fields] == [("creator", "Update")]
    patched = apps.patch_namespaced_deployment(
        "web", NS, {"spec": {"replicas": 2}}, field_manager="gitops-reloader"
    )
    entries = {m.manager: m for m in patched.metadata.managed_fields}
    assert set(entries) == {"creator", "gitops-reloader"}
    entry = entries["gitops-reloader"]
    assert entry.operation == "Update"
    assert entry.api_version == "apps/v1"
    assert entry.fields_type == "FieldsV1"
    assert entry.time is not None


def test_status_subresource_is_separate_from_the_main_resource(apps: client.AppsV1Api) -> None:
    body = deployment()
    body["status"] = {"replicas": 9}
    created = apps.create_namespaced_deployment(NS, body)
    assert created.status.replicas is None
    status = apps.patch_namespaced_deployment_status(
        "web", NS, {"status": {"readyReplicas": 1, "observedGeneration": 1}, "spec": {"replicas": 7}}
    )
    assert status.status.ready_replicas == 1
    assert status.spec.replicas == 1
    assert status.metadata.generation == 1
    main = apps.patch_namespaced_deployment("web", NS, {"status": {"readyReplicas": 5}})
    assert main.status.ready_replicas == 1


# --------------------------------------------------------------------------- secrets


def test_secret_string_data_is_encoded_into_data(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_secret(
        NS,
        {
            "metadata": {"name": "s"},
            "data": {"a": base64.b64encode(b"1").decode()},
            "stringData": {"b": "two"},
        },
    )
    assert created.data == {"a": "MQ==", "b": base64.b64encode(b"two").decode()}
    assert created.string_data is None
    assert created.type == "Opaque"
    patched = core.patch_namespaced_secret("s", NS, {"stringData": {"a": "uno"}})
    assert base64.b64decode(patched.data["a"]) == b"uno"
    assert patched.string_data is None


def test_secret_with_invalid_base64_is_rejected(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        core.create_namespaced_secret(NS, {"metadata": {"name": "s"}, "data": {"a": "not base64!"}})
    assert err.value.status == 400
    assert "illegal base64 data" in error_body(err.value)["message"]
    core.create_namespaced_secret(NS, {"metadata": {"name": "s"}, "data": {"a": "MQ=="}})
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_secret("s", NS, {"data": {"a": "%%%"}})
    assert err.value.status == 400


# --------------------------------------------------------------------------- resources


def test_custom_resources_through_custom_objects_api(custom: client.CustomObjectsApi) -> None:
    rollout = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "ro"},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "a:1"}]}}},
    }
    created = custom.create_namespaced_custom_object("argoproj.io", "v1alpha1", NS, "rollouts", rollout)
    assert created["metadata"]["generation"] == 1
    patched = custom.patch_namespaced_custom_object(
        "argoproj.io",
        "v1alpha1",
        NS,
        "rollouts",
        "ro",
        {"spec": {"template": {"metadata": {"annotations": {"r": "1"}}}}},
    )
    assert patched["spec"]["template"]["metadata"]["annotations"] == {"r": "1"}
    assert patched["metadata"]["generation"] == 2
    custom.create_namespaced_custom_object(
        "argoproj.io",
        "v1alpha1",
        "argocd",
        "applications",
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": "app"},
            "spec": {
                "project": "default",
                "source": {"repoURL": "https://example.invalid/repo.git", "path": "apps"},
                "destination": {"server": "https://kubernetes.default.svc", "namespace": "apps"},
            },
        },
    )
    custom.create_namespaced_custom_object(
        "kustomize.toolkit.fluxcd.io",
        "v1",
        "flux-system",
        "kustomizations",
        {
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "apps"},
            "spec": {
                "interval": "10m",
                "path": "./apps",
                "prune": True,
                "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
            },
        },
    )
    listed = custom.list_cluster_custom_object("argoproj.io", "v1alpha1", "applications")
    assert listed["kind"] == "ApplicationList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["app"]
    assert listed["items"][0]["kind"] == "Application"
    ks = custom.get_namespaced_custom_object(
        "kustomize.toolkit.fluxcd.io", "v1", "flux-system", "kustomizations", "apps"
    )
    assert ks["spec"] == {
        "force": False,  # the CRD's default
        "interval": "10m",
        "path": "./apps",
        "prune": True,
        "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
    }
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object(
            "argoproj.io",
            "v1alpha1",
            NS,
            "rollouts",
            "ro",
            {"spec": {}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert err.value.status == 415


def test_discovery_documents(api_client: ApiClient) -> None:
    versions = client.CoreApi(api_client).get_api_versions()
    assert versions.versions == ["v1"]
    groups = {g.name for g in client.ApisApi(api_client).get_api_versions().groups}
    assert {
        "apps",
        "batch",
        "coordination.k8s.io",
        "argoproj.io",
        "apps.openshift.io",
        "kustomize.toolkit.fluxcd.io",
        "source.toolkit.fluxcd.io",
    } <= groups
    resources = client.AppsV1Api(api_client).get_api_resources()
    deploy = next(r for r in resources.resources if r.name == "deployments")
    assert deploy.kind == "Deployment"
    assert deploy.namespaced is True
    assert {"get", "list", "watch", "patch", "update"} <= set(deploy.verbs)
    core = {r.name: r for r in client.CoreV1Api(api_client).get_api_resources().resources}
    assert core["namespaces"].namespaced is False
    assert client.AppsApi(api_client).get_api_group().preferred_version.group_version == "apps/v1"
    version = client.VersionApi(api_client).get_code()
    assert (version.major, version.minor) == ("1", "36")


def test_disabled_groups_vanish_from_discovery_and_answer_404() -> None:
    with ApiServer(disabled_groups=frozenset({"apps.openshift.io"})) as srv:
        api = srv.api_client()
        try:
            groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
            assert "apps.openshift.io" not in groups
            assert "argoproj.io" in groups
            custom = client.CustomObjectsApi(api)
            with pytest.raises(ApiException) as err:
                custom.list_namespaced_custom_object("apps.openshift.io", "v1", NS, "deploymentconfigs")
            assert err.value.status == 404
            with pytest.raises(ApiException) as err:
                custom.get_api_resources("apps.openshift.io", "v1")
            assert err.value.status == 404
        finally:
            api.close()


def test_deployment_configs_are_served_with_strategic_merge(custom: client.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(
        "apps.openshift.io",
        "v1",
        NS,
        "deploymentconfigs",
        {
            "metadata": {"name": "dc"},
            "spec": {"template": {"spec": {"containers": [{"name": "a", "env": [{"name": "A"}]}]}}},
        },
    )
    patched = custom.patch_namespaced_custom_object(
        "apps.openshift.io",
        "v1",
        NS,
        "deploymentconfigs",
        "dc",
        {"spec": {"template": {"spec": {"containers": [{"name": "a", "env": [{"name": "B"}]}]}}}},
        _content_type="application/strategic-merge-patch+json",
    )
    env = patched["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "B"}, {"name": "A"}]


def test_namespaces_and_cascading_delete(server: ApiServer, core: client.CoreV1Api) -> None:
    names = {n.metadata.name for n in core.list_namespace().items}
    assert {"default", "kube-system"} <= names
    ns = core.create_namespace({"metadata": {"name": "team", "labels": {"team": "a"}}})
    assert ns.status.phase == "Active"
    assert [n.metadata.name for n in core.list_namespace(label_selector="team=a").items] == ["team"]
    core.create_namespaced_config_map("team", {"metadata": {"name": "cfg"}})
    core.delete_namespace("team")
    assert server.get_object("namespaces", None, "team") is None
    assert server.get_object("configmaps", "team", "cfg") is None


def test_delete_returns_success_and_removes_immediately(server: ApiServer, core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(NS, {"metadata": {"name": "cfg"}, "data": {"a": "b"}})
    obj = server.get_object("configmaps", NS, "cfg")
    assert obj is not None
    assert obj["data"] == {"a": "b"}
    obj["data"]["a"] = "mutated"
    assert server.get_object("configmaps", NS, "cfg")["data"] == {"a": "b"}  # type: ignore[index]
    status = core.delete_namespaced_config_map("cfg", NS)
    assert status["status"] == "Success"
    assert status["details"]["name"] == "cfg"
    assert server.get_object("configmaps", NS, "cfg") is None


def test_dry_run_does_not_persist(server: ApiServer, core: client.CoreV1Api) -> None:
    before = server.resource_version()
    core.create_namespaced_config_map(NS, {"metadata": {"name": "cfg"}}, dry_run="All")
    assert server.get_object("configmaps", NS, "cfg") is None
    assert server.resource_version() == before
