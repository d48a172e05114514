"""API test server: Argo CD and Argo Rollouts objects against their installed CRD schemas.

Through the official client over HTTP: an Application without ``spec.destination`` and
``spec.project`` and a Rollout without ``spec`` are refused with the real server's 422
``Invalid`` Status; unknown fields are pruned while what our locate code reads
(``spec.sources``, ``spec.sourceHydrator.drySource``) is kept; Application has no status
subresource upstream, ApplicationSet and Rollout do.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from gitops_reloader.testing.apiserver import ApiServer

pytestmark = pytest.mark.e2e

GROUP, VERSION = "argoproj.io", "v1alpha1"
APPS = (GROUP, VERSION, "argocd", "applications")
APPSETS = (GROUP, VERSION, "argocd", "applicationsets")
ROLLOUTS = (GROUP, VERSION, "shop", "rollouts")
FLEET = "https://git.example.com/platform/fleet.git"


@pytest.fixture(autouse=True)
def argo_crds(server: ApiServer) -> None:
    for kind in ("Application", "ApplicationSet", "Rollout"):
        assert server.schemas.get(GROUP, VERSION, kind), (
            f"{kind} CRD missing: run `bash .ci/install-tools.sh`")


def application(name: str = "web", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "project": "default",
        "destination": {"server": "https://kubernetes.default.svc", "namespace": "shop"},
        "source": {"repoURL": FLEET, "path": "apps/web", "targetRevision": "main"},
    }
    body.update(spec)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Application",
        "metadata": {"name": name},
        "spec": body,
    }


def rollout(name: str = "web", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "replicas": 2,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
        },
        "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {"duration": "1m"}}]}},
    }
    body.update(spec)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Rollout", "metadata": {"name": name}, "spec": body}


def refusal(exc: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    assert exc.value.status == 422
    body: dict[str, Any] = json.loads(exc.value.body)
    return body


def test_application_without_destination_and_project_is_refused_like_the_real_server(
    custom: client.CustomObjectsApi,
) -> None:
    obj = application()
    del obj["spec"]["destination"], obj["spec"]["project"]
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(*APPS, obj)
    assert refusal(exc) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Application.argoproj.io "web" is invalid: '
        "[spec.destination: Required value, spec.project: Required value]",
        "reason": "Invalid",
        "details": {
            "name": "web",
            "group": "argoproj.io",
            "kind": "Application",
            "causes": [
                {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.destination"},
                {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.project"},
            ],
        },
        "code": 422,
    }
    assert custom.list_namespaced_custom_object(*APPS)["items"] == []


def test_application_source_needs_a_repo_url_and_fields_their_types(
    custom: client.CustomObjectsApi,
) -> None:
    obj = application(
        sources=[{"path": "apps/web"}, {"repoURL": FLEET, "ref": "values"}],
        syncPolicy={"automated": {"prune": "yes"}},
        revisionHistoryLimit=2.5,
    )
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(*APPS, obj)
    causes = sorted((c["field"], c["reason"]) for c in refusal(exc)["details"]["causes"])
    assert causes == [
        ("spec.revisionHistoryLimit", "FieldValueTypeInvalid"),  # an integer, read back from the validator
        ("spec.sources[0].repoURL", "FieldValueRequired"),
        ("spec.syncPolicy.automated.prune", "FieldValueTypeInvalid"),
    ]


def test_application_keeps_sources_and_hydrator_and_prunes_unknown_fields(
    custom: client.CustomObjectsApi,
) -> None:
    hydrator = {
        "drySource": {"repoURL": FLEET, "path": "dry/web", "targetRevision": "main"},
        "syncSource": {"targetBranch": "env/prod", "path": "hydrated/web"},
        "hydrateTo": {"targetBranch": "env/prod-next"},
    }
    sources = [
        {
            "repoURL": "https://charts.example.com",
            "chart": "web",
            "targetRevision": "1.2.0",
            "helm": {
                "valueFiles": ["$values/envs/prod/web.yaml"],
                "valuesObject": {"free": [1, {"form": "x"}]},
            },
        },
        {"repoURL": FLEET, "targetRevision": "main", "ref": "values"},
    ]
    obj = application(sources=sources, sourceHydrator=dict(hydrator, notInCrd=True), madeUp={"x": 1})
    obj["spec"]["destination"]["cluster"] = "typo-of-server"
    created = custom.create_namespaced_custom_object(*APPS, obj)
    assert created["spec"]["sourceHydrator"] == hydrator
    assert created["spec"]["sources"] == sources  # valuesObject keeps unknown fields, as upstream
    assert "madeUp" not in created["spec"]
    assert created["spec"]["destination"] == {"server": "https://kubernetes.default.svc", "namespace": "shop"}
    assert custom.get_namespaced_custom_object(*APPS, "web")["spec"] == created["spec"]


def test_application_status_is_written_with_the_object_it_has_no_status_subresource(
    custom: client.CustomObjectsApi,
) -> None:
    status = {"sync": {"status": "Synced", "revision": "abc"}, "sourceType": "Directory"}
    created = custom.create_namespaced_custom_object(*APPS, dict(application(), status=status))
    assert created["status"] == status
    with pytest.raises(ApiException) as exc:
        custom.patch_namespaced_custom_object(*APPS, "web", {"status": {"sync": {"status": None}}})
    assert [(c["field"], c["reason"]) for c in refusal(exc)["details"]["causes"]] == [
        ("status.sync.status", "FieldValueRequired")
    ]
    patched = custom.patch_namespaced_custom_object(*APPS, "web", {"status": {"sync": {"revision": "def"}}})
    assert patched["status"]["sync"] == {"status": "Synced", "revision": "def"}


def test_rollout_without_spec_or_with_wrong_types_is_refused(custom: client.CustomObjectsApi) -> None:
    bare = rollout()
    del bare["spec"]
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(*ROLLOUTS, bare)
    assert refusal(exc)["message"] == 'Rollout.argoproj.io "web" is invalid: spec: Required value'
    broken = rollout(replicas="2")
    broken["spec"]["template"]["spec"]["containers"][0].pop("name")
    broken["spec"]["strategy"]["canary"]["steps"][0]["setWeight"] = 12.5
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(*ROLLOUTS, broken)
    causes = sorted((c["field"], c["reason"]) for c in refusal(exc)["details"]["causes"])
    assert causes == [
        ("spec.replicas", "FieldValueTypeInvalid"),
        ("spec.strategy.canary.steps[0].setWeight", "FieldValueTypeInvalid"),
        ("spec.template.spec.containers[0].name", "FieldValueRequired"),
    ]


def test_rollout_prunes_unknown_fields_fills_defaults_and_has_a_status_subresource(
    custom: client.CustomObjectsApi,
) -> None:
    obj = rollout(surprise=True)
    container = obj["spec"]["template"]["spec"]["containers"][0]
    container["ports"] = [{"containerPort": 8080}]
    container["resources"] = {"limits": {"cpu": "500m", "memory": "128Mi"}}
    container["imagePullPolicyTypo"] = "Always"
    created = custom.create_namespaced_custom_object(*ROLLOUTS, obj)
    kept = created["spec"]["template"]["spec"]["containers"][0]
    assert "surprise" not in created["spec"]
    assert "imagePullPolicyTypo" not in kept
    assert kept["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]  # the CRD's default
    assert kept["resources"] == {"limits": {"cpu": "500m", "memory": "128Mi"}}
    status = {"phase": "Healthy", "replicas": 2}
    through_status = custom.patch_namespaced_custom_object_status(
        *ROLLOUTS, "web", {"spec": {"replicas": 5}, "status": status}
    )
    assert (through_status["spec"]["replicas"], through_status["status"]) == (2, status)


def test_application_set_requires_generators_and_template(custom: client.CustomObjectsApi) -> None:
    obj = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ApplicationSet",
        "metadata": {"name": "teams"},
        "spec": {"goTemplate": True},
    }
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(*APPSETS, obj)
    assert [c["field"] for c in refusal(exc)["details"]["causes"]] == ["spec.generators", "spec.template"]
    obj["spec"] |= {
        "generators": [{"list": {"elements": [{"team": "a", "free": {"form": 1}}]}}],
        "template": {
            "metadata": {"name": "{{.team}}-web"},
            "spec": {
                "project": "default",
                "destination": {"namespace": "{{.team}}"},
                "source": {"repoURL": FLEET, "path": "teams/{{.team}}"},
            },
        },
    }
    created = custom.create_namespaced_custom_object(*APPSETS, obj)
    assert created["spec"]["generators"] == obj["spec"]["generators"]
