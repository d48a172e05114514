"""Start-up permission check (issue 13) against the API test server's RBAC-shaped rules.

The rules below are Stakater Reloader's own ClusterRole (its Helm chart's
``clusterrole.yaml``, v1.x, default values): workloads can be listed and updated, never
watched, because Stakater lists them on each change. An image swap keeps that role.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kubernetes.client import ApiClient
from reload_helpers import configmap, create, env_of, set_cm_data, workload

from gitops_reloader.app import App
from gitops_reloader.config import load_config
from gitops_reloader.kube.permissions import PermissionsMissing, required_permissions
from gitops_reloader.testing.apiserver.authz import rules_from_role
from gitops_reloader.testing.harness import deployment, running_controller

pytestmark = pytest.mark.e2e

STAKATER_CLUSTERROLE = [
    {"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["list", "get", "watch"]},
    {
        "apiGroups": ["apps"],
        "resources": ["deployments", "daemonsets", "statefulsets"],
        "verbs": ["list", "get", "update", "patch"],
    },
    {"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["list", "get"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete", "list", "get"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]
HOME = {"HOME": "/nonexistent"}
NOT_OPENSHIFT = ["--is-openshift=false"]  # the test server also serves apps.openshift.io
TOKEN = "reloader-sa-token"


@pytest.fixture
def restricted(server) -> Iterator[Callable[[list[dict]], ApiClient]]:
    """An API client for the controller's service account, bound to the given rules;
    the test's own ``api_client`` stays unrestricted for setup."""
    clients: list[ApiClient] = []

    def bind(rules: list[dict]) -> ApiClient:
        server.authorizer.restrict(TOKEN, rules_from_role(rules))
        clients.append(server.api_client(token=TOKEN))
        return clients[-1]

    yield bind
    for client in clients:
        client.close()


def app_for(client: ApiClient, flags: list[str]) -> App:
    config = load_config(["--coalesce-window=0", *NOT_OPENSHIFT, *flags], environ=HOME)
    return App(config, api_client=client, serve_http=False)


WORKLOADS = ("deployments.apps", "daemonsets.apps", "statefulsets.apps", "cronjobs.batch", "jobs.batch")
WATCH_WORKLOADS = [
    {"apiGroups": ["apps"], "resources": ["deployments", "daemonsets", "statefulsets"], "verbs": ["watch"]},
    {"apiGroups": ["batch"], "resources": ["cronjobs", "jobs"], "verbs": ["watch"]},
]
NO_EVENTS = [r for r in STAKATER_CLUSTERROLE if r["resources"] != ["events"]]


def test_stakaters_clusterrole_stops_start_up_with_one_message(server, restricted):
    app = app_for(restricted(STAKATER_CLUSTERROLE), [])
    server.reset_request_counts()
    with pytest.raises(PermissionsMissing) as caught:
        app.start()
    app.stop()
    message = str(caught.value)
    for resource in WORKLOADS:
        assert f"watch {resource} cluster-wide (needed to watch " in message
    # 5 essential, and the failure record's 2 (optional: Stakater's role has no ConfigMap writes)
    assert message.startswith("7 permission(s) missing: ")
    assert 'update configmaps "gitops-reloader-failures" in namespace "default"' in message
    assert "Stakater's ClusterRole has no watch" in message
    # Nothing was listed or watched: no 403 backoff loop, no half-working informers.
    assert [key for key in server.request_counts() if key[0] in ("list", "watch")] == []
    assert app.registry.get_sample_value("gitops_reloader_permissions_missing", {"essential": "true"}) == 5


def test_warn_mode_names_what_will_not_work_and_starts(api_client, restricted, caplog):
    client = restricted([*NO_EVENTS, *WATCH_WORKLOADS])  # no Events: a sound degraded mode
    create(api_client, configmap("cfg", {"v": "1"}))
    flags = ["--permission-check=warn", *NOT_OPENSHIFT]
    with caplog.at_level("WARNING"), running_controller(client, flags) as app:
        assert app.controller.ready()
    warnings = [r.getMessage() for r in caplog.records if "permission(s) missing" in r.getMessage()]
    record = "(needed to keep the failure record, from which a restart continues what is failing)"
    assert warnings == ["3 permission(s) missing: create events cluster-wide (needed to record Events); "
                        f'create configmaps in namespace "default" {record}; '
                        f'update configmaps "gitops-reloader-failures" in namespace "default" {record}. '
                        "Starting anyway: the features named above will not work."]


def test_a_missing_event_grant_alone_never_stops_strict_mode(restricted):
    with running_controller(restricted([*NO_EVENTS, *WATCH_WORKLOADS]), NOT_OPENSHIFT) as app:
        assert app.controller.ready()


def test_granting_exactly_the_required_permissions_runs_and_reloads(server, api_client, restricted):
    """Only what required_permissions asks for: the controller starts, reloads, and no
    request it makes is refused."""
    config = load_config(["--coalesce-window=0", *NOT_OPENSHIFT], environ=HOME)
    probe = App(config, api_client=api_client, serve_http=False)
    needs = required_permissions(config, probe.adapters)
    probe.stop()
    client = restricted([{"apiGroups": [n.group], "resources": [n.resource], "verbs": [n.verb]}
                         for n in needs])
    create(api_client, configmap("cfg", {"v": "1"}))
    create(api_client, deployment("web", annotations={"reloader.stakater.com/auto": "true"},
                                  containers=[{"name": "app", "image": "x",
                                               "envFrom": [{"configMapRef": {"name": "cfg"}}]}]))
    with running_controller(client, NOT_OPENSHIFT) as app:
        set_cm_data(app, api_client, "cfg", {"v": "2"})
        assert "STAKATER_CFG_CONFIGMAP" in env_of(workload(server, "Deployment", "web"))
        missing = app.registry.get_sample_value("gitops_reloader_permissions_missing", {"essential": "true"})
        assert missing == 0
