"""Stakater's reloader-meta-info ConfigMap on the API test server (issue 13)."""

from __future__ import annotations

import json

import pytest
from reload_helpers import call, configmap, create, env_of, set_cm_data, workload

from gitops_reloader.app import App
from gitops_reloader.config import load_config
from gitops_reloader.kube.permissions import required_permissions
from gitops_reloader.testing.apiserver.authz import rules_from_role
from gitops_reloader.testing.harness import deployment, running_controller

pytestmark = pytest.mark.e2e

NOT_OPENSHIFT = ["--is-openshift=false"]
META_ENV = {"HOME": "/nonexistent", "RELOADER_NAMESPACE": "ops", "RELOADER_DEPLOYMENT_NAME": "reloader"}
PATH = "/api/v1/namespaces/ops/configmaps/reloader-meta-info"


def test_start_up_publishes_then_updates_the_meta_info_configmap(api_client):
    with running_controller(api_client, NOT_OPENSHIFT, environ=META_ENV):
        first = call(api_client, "GET", PATH)
    assert first["metadata"]["labels"] == {"reloader.stakater.com/meta-info": "reloader"}
    assert json.loads(first["data"]["deploymentInfo"])["name"] == "reloader"
    assert json.loads(first["data"]["reloaderOptions"])["reloadStrategy"] == "env-vars"
    with running_controller(api_client, [*NOT_OPENSHIFT, "--reload-strategy=annotations"],
                            environ=META_ENV):
        second = call(api_client, "GET", PATH)
    assert json.loads(second["data"]["reloaderOptions"])["reloadStrategy"] == "annotations"
    assert second["metadata"]["uid"] == first["metadata"]["uid"]  # updated, not re-created


def test_no_configmap_without_reloader_namespace(api_client):
    with running_controller(api_client, NOT_OPENSHIFT):
        listed = call(api_client, "GET", "/api/v1/configmaps")
    assert [i for i in listed["items"] if i["metadata"]["name"] == "reloader-meta-info"] == []


def test_a_denied_meta_info_write_is_a_warning_and_reloads_go_on(server, api_client, caplog):
    config = load_config(["--coalesce-window=0", *NOT_OPENSHIFT], environ=META_ENV)
    probe = App(config, api_client=api_client, serve_http=False)
    needs = [n for n in required_permissions(config, probe.adapters) if n.essential]
    probe.stop()
    server.authorizer.restrict("sa", rules_from_role(
        [{"apiGroups": [n.group], "resources": [n.resource], "verbs": [n.verb]} for n in needs]))
    create(api_client, configmap("cfg", {"v": "1"}))
    create(api_client, deployment("web", annotations={"reloader.stakater.com/auto": "true"},
                                  containers=[{"name": "app", "image": "x",
                                               "envFrom": [{"configMapRef": {"name": "cfg"}}]}]))
    client = server.api_client(token="sa")
    try:
        with caplog.at_level("WARNING"), running_controller(client, NOT_OPENSHIFT, environ=META_ENV) as app:
            set_cm_data(app, api_client, "cfg", {"v": "2"})
            assert "STAKATER_CFG_CONFIGMAP" in env_of(workload(server, "Deployment", "web"))
    finally:
        client.close()
    messages = [r.getMessage() for r in caplog.records]
    assert any("cannot publish the Stakater meta-info ConfigMap" in m for m in messages)
    assert any("publish Stakater's meta-info ConfigMap" in m for m in messages)  # the start-up check
