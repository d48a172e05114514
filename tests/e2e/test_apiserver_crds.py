"""API test server: custom resources against the installed Flux CRD schemas, Secret field selectors.

Through the official client over HTTP, as a controller sees it: a schema-invalid
Kustomization is refused with the real server's 422 ``Invalid`` Status, unknown fields
are pruned, defaults filled, and the status subresource keeps spec and status apart.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiException
from kubernetes.watch.watch import iter_resp_lines

from gitops_reloader.testing.apiserver import ApiServer

pytestmark = pytest.mark.e2e

NS = "flux-system"
KS = ("kustomize.toolkit.fluxcd.io", "v1", NS, "kustomizations")


@pytest.fixture(autouse=True)
def flux_crds(server: ApiServer) -> None:
    assert server.schemas.get("kustomize.toolkit.fluxcd.io", "v1", "Kustomization"), (
        "Flux CRDs missing: run `bash .ci/install-tools.sh`"
    )


def kustomization(name: str = "apps", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "interval": "10m",
        "path": "./apps",
        "prune": True,
        "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
    }
    body.update(spec)
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name},
        "spec": body,
    }


def refusal(exc: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    assert exc.value.status == 422
    body: dict[str, Any] = json.loads(exc.value.body)
    return body


def test_kustomization_without_required_fields_is_refused_like_the_real_server(
    custom: client.CustomObjectsApi,
) -> None:
    obj = kustomization()
    del obj["spec"]["prune"], obj["spec"]["sourceRef"]
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(*KS, obj)
    assert refusal(exc) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Kustomization.kustomize.toolkit.fluxcd.io "apps" is invalid: '
        "[spec.prune: Required value, spec.sourceRef: Required value]",
        "reason": "Invalid",
        "details": {
            "name": "apps",
            "group": "kustomize.toolkit.fluxcd.io",
            "kind": "Kustomization",
            "causes": [
                {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.prune"},
                {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.sourceRef"},
            ],
        },
        "code": 422,
    }
    assert custom.list_namespaced_custom_object(*KS)["items"] == []


def test_wrong_types_and_enums_are_refused(custom: client.CustomObjectsApi) -> None:
    obj = kustomization(prune="yes", deletionPolicy="Keep", interval="ten minutes")
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(*KS, obj)
    fields = sorted((c["field"], c["reason"]) for c in refusal(exc)["details"]["causes"])
    assert fields == [
        ("spec.deletionPolicy", "FieldValueNotSupported"),
        ("spec.interval", "FieldValueInvalid"),
        ("spec.prune", "FieldValueTypeInvalid"),
    ]


def test_unknown_fields_are_pruned_and_defaults_filled(custom: client.CustomObjectsApi) -> None:
    obj = kustomization(unknownField="x")
    obj["spec"]["sourceRef"]["extra"] = 1
    obj["topLevelJunk"] = True
    created = custom.create_namespaced_custom_object(*KS, obj)
    assert "unknownField" not in created["spec"]
    assert created["spec"]["sourceRef"] == {"kind": "GitRepository", "name": "flux-system"}
    assert "topLevelJunk" not in created
    assert created["spec"]["force"] is False  # the CRD's default
    stored = custom.get_namespaced_custom_object(*KS, "apps")
    assert stored["spec"] == created["spec"]


def test_patch_that_breaks_the_schema_is_refused_and_changes_nothing(custom: client.CustomObjectsApi) -> None:
    created = custom.create_namespaced_custom_object(*KS, kustomization())
    with pytest.raises(ApiException) as exc:
        custom.patch_namespaced_custom_object(*KS, "apps", {"spec": {"prune": None, "timeout": 5}})
    causes = refusal(exc)["details"]["causes"]
    assert [(c["field"], c["reason"]) for c in causes] == [
        ("spec.timeout", "FieldValueTypeInvalid"),
        ("spec.prune", "FieldValueRequired"),
    ]
    after = custom.get_namespaced_custom_object(*KS, "apps")
    assert after["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_patch_adding_only_unknown_fields_is_a_no_op(custom: client.CustomObjectsApi) -> None:
    created = custom.create_namespaced_custom_object(*KS, kustomization())
    patched = custom.patch_namespaced_custom_object(*KS, "apps", {"spec": {"notInSchema": "x"}})
    assert patched["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert patched["metadata"]["generation"] == 1


def test_status_subresource_keeps_spec_and_status_apart(custom: client.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(*KS, kustomization())
    status = {"observedGeneration": 1, "lastAppliedRevision": "main@sha1:abc"}
    through_status = custom.patch_namespaced_custom_object_status(
        *KS, "apps", {"spec": {"path": "./other"}, "status": status}
    )
    assert through_status["status"] == status
    assert through_status["spec"]["path"] == "./apps"
    main = custom.patch_namespaced_custom_object(
        *KS, "apps", {"spec": {"path": "./other"}, "status": {"observedGeneration": 9}}
    )
    assert main["spec"]["path"] == "./other"
    assert main["status"] == status
    assert main["metadata"]["generation"] == 2


def test_git_repository_and_helm_release_are_validated_too(custom: client.CustomObjectsApi) -> None:
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(
            "source.toolkit.fluxcd.io",
            "v1",
            NS,
            "gitrepositories",
            {
                "apiVersion": "source.toolkit.fluxcd.io/v1",
                "kind": "GitRepository",
                "metadata": {"name": "r"},
                "spec": {},
            },
        )
    assert [c["field"] for c in refusal(exc)["details"]["causes"]] == ["spec.interval", "spec.url"]
    release = custom.create_namespaced_custom_object(
        "helm.toolkit.fluxcd.io",
        "v2",
        NS,
        "helmreleases",
        {
            "apiVersion": "helm.toolkit.fluxcd.io/v2",
            "kind": "HelmRelease",
            "metadata": {"name": "web"},
            "spec": {
                "interval": "5m",
                "chart": {
                    "spec": {"chart": "./charts/web", "sourceRef": {"kind": "GitRepository", "name": "r"}}
                },
                "values": {"free": {"form": [1, "two"]}},
            },
        },
    )
    assert release["spec"]["values"] == {"free": {"form": [1, "two"]}}


# ---------------------------------------------------------------- Secret ``type`` field selector


def secret(name: str, kind: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "type": kind, "stringData": {"k": "v"}}


def test_secret_type_field_selector_in_lists(core: client.CoreV1Api) -> None:
    core.create_namespaced_secret("default", secret("app", "Opaque"))
    core.create_namespaced_secret("default", secret("sh.helm.release.v1.web.v1", "helm.sh/release.v1"))
    core.create_namespaced_secret(
        "default", secret("tls", "kubernetes.io/tls") | {"data": {"tls.crt": "", "tls.key": ""}}
    )
    core.create_namespaced_secret("other", secret("app", "Opaque"))

    def names(**kw: Any) -> list[str]:
        items = core.list_secret_for_all_namespaces(**kw).items
        return [f"{s.metadata.namespace}/{s.metadata.name}" for s in items]

    assert names(field_selector="type!=helm.sh/release.v1") == ["default/app", "default/tls", "other/app"]
    assert names(field_selector="type=helm.sh/release.v1") == ["default/sh.helm.release.v1.web.v1"]
    assert names(field_selector="type!=helm.sh/release.v1,metadata.namespace=other") == ["other/app"]
    assert names(field_selector="type==Opaque,metadata.name=app") == ["default/app", "other/app"]
    assert names(field_selector="type!=helm.sh/release.v1,type!=kubernetes.io/tls") == [
        "default/app",
        "other/app",
    ]
    with pytest.raises(ApiException) as exc:
        core.list_secret_for_all_namespaces(field_selector="data.k=v")
    assert exc.value.status == 400
    assert json.loads(exc.value.body)["message"] == "field label not supported: data.k"


def test_secret_type_field_selector_in_watches(core: client.CoreV1Api) -> None:
    rv = core.list_namespaced_secret("default").metadata.resource_version
    resp = core.list_namespaced_secret(
        "default",
        watch=True,
        resource_version=rv,
        field_selector="type!=helm.sh/release.v1",
        timeout_seconds=5,
        _preload_content=False,
        _request_timeout=10,
    )
    try:
        core.create_namespaced_secret("default", secret("sh.helm.release.v1.web.v1", "helm.sh/release.v1"))
        core.create_namespaced_secret("default", secret("app", "Opaque"))
        lines = iter_resp_lines(resp)
        first = json.loads(next(lines))
    finally:
        resp.close()
        resp.release_conn()
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "app")
