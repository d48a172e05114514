"""Sources created or deleted while the controller was down, with ``--state-store configmap``.

``web-a`` uses ConfigMap ``cfg-a`` (reloaded once while the controller runs, so it carries
the env var a delete removes), ``web-s`` uses Secret ``new-s`` (absent at first), ``web-c``
uses ConfigMap ``cfg-c`` (never touched). While the controller is down ``new-s`` is created
and ``cfg-a`` deleted. Restarted with ``--reload-on-create --reload-on-delete``, ``web-s`` and
``web-a`` roll exactly once, as the live events would have rolled them; without those flags,
on a first start with a fresh store, and after the watched scope changed, nothing rolls. A
workload's ``generation`` counts its template changes, so "rolled once" is exact.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import ApiClient
from reload_helpers import call, configmap, create, env_of, secret, workload

from gitops_reloader.hashing import configmap_hash, secret_hash
from gitops_reloader.model import SourceKind, SourceRef
from gitops_reloader.state.codec import ShardData, merge_shards
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for

pytestmark = pytest.mark.e2e

STORE = ["--state-store=configmap", "--state-store-interval=100ms", "--sync-after-restart"]
DOWN_EVENTS = [*STORE, "--reload-on-create", "--reload-on-delete"]
ENV_A, ENV_S = "STAKATER_CFG_A_CONFIGMAP", "STAKATER_NEW_S_SECRET"
NAMES = ("web-a", "web-s", "web-c")


def uses(name: str, ref: dict[str, Any]) -> dict[str, Any]:
    return deployment(name, annotations={"reloader.stakater.com/auto": "true"},
                      containers=[{"name": "app", "image": "x", "envFrom": [ref]}])


@pytest.fixture
def objects(api_client: ApiClient) -> None:
    create(api_client, configmap("cfg-a", {"v": "1"}))
    create(api_client, configmap("cfg-c", {"v": "1"}))
    create(api_client, uses("web-a", {"configMapRef": {"name": "cfg-a"}}))
    create(api_client, uses("web-s", {"secretRef": {"name": "new-s", "optional": True}}))
    create(api_client, uses("web-c", {"configMapRef": {"name": "cfg-c"}}))


def generations(server: ApiServer) -> dict[str, int]:
    return {name: workload(server, "Deployment", name)["metadata"]["generation"] for name in NAMES}


def stored(api_client: ApiClient):
    items = call(api_client, "GET", "/api/v1/configmaps")["items"]
    return merge_shards([ShardData(int(s["metadata"]["name"].rsplit("-", 1)[1]), s["data"])
                         for s in items
                         if (s["metadata"].get("labels") or {}).get("gitops-reloader.io/state-store")])


def run_once(server: ApiServer, api_client: ApiClient, flags: list[str]) -> None:
    """A controller runs until its store covers its scope, reloads web-a once, and stops."""
    with running_controller(api_client, flags) as app:
        call(api_client, "PATCH", "/api/v1/namespaces/ns/configmaps/cfg-a", {"data": {"v": "2"}},
             "application/merge-patch+json")
        wait_for(lambda: env_of(workload(server, "Deployment", "web-a")).get(ENV_A)
                 == configmap_hash({"v": "2"}), timeout=10, message="web-a reloaded")
        settle(app)
        wait_for(lambda: (store := stored(api_client)).scope
                 and "ns/ConfigMap/cfg-a" in store.snapshot.sources,
                 timeout=10, message="store written under its scope")
    assert generations(server) == {"web-a": 2, "web-s": 1, "web-c": 1}


def while_down(api_client: ApiClient) -> None:
    create(api_client, secret("new-s", {"password": "hunter2"}))
    call(api_client, "DELETE", "/api/v1/namespaces/ns/configmaps/cfg-a")


@pytest.fixture
def first_run(server: ApiServer, api_client: ApiClient, objects: None) -> Iterator[None]:
    run_once(server, api_client, DOWN_EVENTS)
    yield


def test_created_and_deleted_while_down_reload_each_workload_once(
        server: ApiServer, api_client: ApiClient, first_run: None) -> None:
    while_down(api_client)
    with running_controller(api_client, DOWN_EVENTS) as app:
        settle(app)
        assert generations(server) == {"web-a": 3, "web-s": 2, "web-c": 1}
        assert ENV_A not in env_of(workload(server, "Deployment", "web-a"))  # as a live delete
        b64 = base64.b64encode(b"hunter2").decode()
        assert env_of(workload(server, "Deployment", "web-s"))[ENV_S] == secret_hash({"password": b64})
        reloads = app.registry.get_sample_value("reloader_reload_executed_total", {"success": "true"})
        assert reloads == 2
        assert app.controller.state.deleted_while_down() == (SourceRef(SourceKind.CONFIGMAP, "ns", "cfg-a"),)
        wait_for(lambda: "ns/Secret/new-s" in stored(api_client).snapshot.sources
                 and "ns/ConfigMap/cfg-a" not in stored(api_client).snapshot.sources,
                 timeout=10, message="store caught up")

    # A third start finds nothing to do: the store caught up with the second run's work.
    with running_controller(api_client, DOWN_EVENTS) as app:
        settle(app)
    assert generations(server) == {"web-a": 3, "web-s": 2, "web-c": 1}


def test_without_the_flags_nothing_reloads_and_entries_follow_quietly(
        server: ApiServer, api_client: ApiClient, first_run: None) -> None:
    while_down(api_client)
    with running_controller(api_client, STORE) as app:
        settle(app)
        wait_for(lambda: "ns/Secret/new-s" in stored(api_client).snapshot.sources
                 and "ns/ConfigMap/cfg-a" not in stored(api_client).snapshot.sources,
                 timeout=10, message="entries added and dropped")
    assert generations(server) == {"web-a": 2, "web-s": 1, "web-c": 1}


def test_first_start_with_a_fresh_store_reloads_nothing(
        server: ApiServer, api_client: ApiClient, objects: None) -> None:
    create(api_client, secret("new-s", {"password": "hunter2"}))
    assert stored(api_client).count == 0
    with running_controller(api_client, DOWN_EVENTS) as app:
        settle(app)
        wait_for(lambda: stored(api_client).scope, timeout=10, message="store written")
    assert generations(server) == {"web-a": 1, "web-s": 1, "web-c": 1}


def test_a_changed_scope_is_not_taken_for_creations_or_deletions(
        server: ApiServer, api_client: ApiClient, objects: None) -> None:
    """The store was written while Secrets were ignored: after the scope changed, neither
    the Secret nor the deleted ConfigMap can be told apart from the change of scope."""
    run_once(server, api_client, [*DOWN_EVENTS, "--resources-to-ignore=secrets"])
    scope_before = stored(api_client).scope
    while_down(api_client)
    with running_controller(api_client, DOWN_EVENTS) as app:
        settle(app)
        wait_for(lambda: stored(api_client).scope not in ("", scope_before), timeout=10,
                 message="store rewritten under the new scope")
    assert generations(server) == {"web-a": 2, "web-s": 1, "web-c": 1}
