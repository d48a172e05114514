"""Helm release Secrets (``type: helm.sh/release.v1``) never cross the network.

Issue 15: they are most of a big cluster's Secret bytes and no workload uses them, so the
secrets list/watch carries ``type!=helm.sh/release.v1`` (the API test server logs every
list/watch query, as kube-apiserver's audit log would) and the controller never caches
or acts on them; ``--ignore-secret-types=`` watches every type again.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from kubernetes.client import CoreV1Api
from reload_helpers import create, env_of, patch_source, secret, workload

from gitops_reloader.hashing import env_var_name
from gitops_reloader.model import SourceKind, SourceRef
from gitops_reloader.testing.harness import deployment, running_controller

pytestmark = pytest.mark.e2e

AUTO = {"reloader.stakater.com/auto": "true"}
RELEASE = "sh.helm.release.v1.web.v1"


def release_secret(payload: str) -> dict[str, Any]:
    """A Helm 3 release record as Helm writes it (labels owner/name/status/version)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {"name": RELEASE, "namespace": "ns",
                         "labels": {"owner": "helm", "name": "web", "status": "deployed", "version": "1"}},
            "data": {"release": base64.b64encode(payload.encode()).decode()}}


def uses_secret(name: str) -> dict[str, Any]:
    return {"name": "app", "image": "x", "envFrom": [{"secretRef": {"name": name}}]}


def setup(api_client) -> None:
    create(api_client, release_secret("H4sI-release-1"))
    create(api_client, secret("creds", {"p": "1"}))
    # A workload referencing the release Secret would be absurd; it proves nothing reaches us.
    create(api_client, deployment("helm-user", annotations=AUTO, containers=[uses_secret(RELEASE)]))
    create(api_client, deployment("web", annotations=AUTO, containers=[uses_secret("creds")]))


def test_release_secrets_are_excluded_by_the_list_and_watch(server, api_client):
    setup(api_client)
    with running_controller(api_client, ["--namespaces-to-ignore=skip"]) as app:
        queries = server.list_queries("secrets")
        assert {q.verb for q in queries} == {"list", "watch"}
        assert {q.field_selector for q in queries} == {"metadata.namespace!=skip,type!=helm.sh/release.v1"}
        assert app.controller.source(SourceRef(SourceKind.SECRET, "ns", RELEASE)) is None
        assert app.controller.source(SourceRef(SourceKind.SECRET, "ns", "creds")) is not None
        before = workload(server, "Deployment", "helm-user")
        # Helm upgrades the release record, then a real change lands; once the real one has
        # reloaded ``web``, the controller has had every chance to act on the first.
        CoreV1Api(api_client).patch_namespaced_secret(
            RELEASE, "ns", {"data": {"release": base64.b64encode(b"H4sI-release-2").decode()}})
        patch_source(app, api_client, SourceKind.SECRET, "creds", {"stringData": {"p": "2"}})
        assert "STAKATER_CREDS_SECRET" in env_of(workload(server, "Deployment", "web"))
        assert workload(server, "Deployment", "helm-user") == before
        assert app.controller.source(SourceRef(SourceKind.SECRET, "ns", RELEASE)) is None


def test_empty_ignore_secret_types_watches_release_secrets_again(server, api_client):
    setup(api_client)
    with running_controller(api_client, ["--ignore-secret-types="]) as app:
        assert {q.field_selector for q in server.list_queries("secrets")} == {""}
        assert app.controller.source(SourceRef(SourceKind.SECRET, "ns", RELEASE)) is not None
        patch_source(app, api_client, SourceKind.SECRET, RELEASE,
                     {"data": {"release": base64.b64encode(b"H4sI-release-2").decode()}})
        assert env_var_name(RELEASE, SourceKind.SECRET) in env_of(workload(server, "Deployment", "helm-user"))
