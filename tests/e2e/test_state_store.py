"""``--state-store configmap`` end to end on the API test server (issue #13).

Three sources and three workloads: ``web-a`` (ConfigMap ``cfg-a``, reloaded once while the
controller runs, so it carries a marker), ``web-b`` (Secret ``db-b``, never reloaded: no
marker at all) and ``web-c`` (ConfigMap ``cfg-c``, never touched). The controller stops,
``cfg-a`` and ``db-b`` change, and it starts again with ``--sync-after-restart``: with the
store exactly ``web-a`` and ``web-b`` roll, once each; without it ``web-b`` is missed.
A workload's ``generation`` counts its template changes, so "rolled once" is exact.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import ApiClient
from reload_helpers import call, configmap, create, env_of, secret, workload

from gitops_reloader.hashing import configmap_hash, secret_hash
from gitops_reloader.model import ObjectRef, SourceKind
from gitops_reloader.state.codec import ShardData, merge_shards, state_digest
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for

pytestmark = pytest.mark.e2e

STORE = ["--state-store=configmap", "--state-store-interval=100ms", "--sync-after-restart"]
PASSWORD_V1, PASSWORD_V2 = "hunter2", "hunter3"
ENV_A, ENV_B = "STAKATER_CFG_A_CONFIGMAP", "STAKATER_DB_B_SECRET"


def uses(name: str, ref: dict[str, Any]) -> dict[str, Any]:
    return deployment(name, annotations={"reloader.stakater.com/auto": "true"},
                      containers=[{"name": "app", "image": "x", "envFrom": [ref]}])


@pytest.fixture
def objects(api_client: ApiClient) -> None:
    create(api_client, configmap("cfg-a", {"v": "1"}))
    create(api_client, secret("db-b", {"password": PASSWORD_V1}))
    create(api_client, configmap("cfg-c", {"v": "1"}))
    create(api_client, uses("web-a", {"configMapRef": {"name": "cfg-a"}}))
    create(api_client, uses("web-b", {"secretRef": {"name": "db-b"}}))
    create(api_client, uses("web-c", {"configMapRef": {"name": "cfg-c"}}))


def generations(server: ApiServer) -> dict[str, int]:
    return {name: workload(server, "Deployment", name)["metadata"]["generation"]
            for name in ("web-a", "web-b", "web-c")}


def all_configmaps(api_client: ApiClient) -> list[dict[str, Any]]:
    return call(api_client, "GET", "/api/v1/configmaps")["items"]


def shards(api_client: ApiClient) -> list[dict[str, Any]]:
    return [obj for obj in all_configmaps(api_client)
            if (obj["metadata"].get("labels") or {}).get("gitops-reloader.io/state-store")]


def stored(api_client: ApiClient):
    return merge_shards([ShardData(int(s["metadata"]["name"].rsplit("-", 1)[1]), s["data"])
                         for s in shards(api_client)])


def digest_key(server: ApiServer) -> bytes:
    key = server.get_object("secrets", "default", "gitops-reloader-digest-key")
    assert key is not None
    return base64.b64decode(key["data"]["digest-key"])


def change(api_client: ApiClient, kind: SourceKind, name: str, data: dict[str, str]) -> None:
    if kind is SourceKind.SECRET:
        data = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    call(api_client, "PATCH", f"/api/v1/namespaces/ns/{kind.plural}/{name}", {"data": data},
         "application/merge-patch+json")


@pytest.fixture
def first_run(server: ApiServer, api_client: ApiClient, objects: None) -> Iterator[None]:
    """A controller with the store runs, reloads web-a once, and stops cleanly."""
    with running_controller(api_client, STORE) as app:
        change(api_client, SourceKind.CONFIGMAP, "cfg-a", {"v": "2"})
        wait_for(lambda: env_of(workload(server, "Deployment", "web-a")).get(ENV_A)
                 == configmap_hash({"v": "2"}), timeout=10, message="web-a reloaded")
        settle(app)
        wait_for(lambda: len(stored(api_client).snapshot.sources) >= 3, timeout=10, message="store written")
    yield


def test_restart_reloads_exactly_what_changed_while_down_markers_or_not(
        server: ApiServer, api_client: ApiClient, first_run: None) -> None:
    before = generations(server)
    assert before == {"web-a": 2, "web-b": 1, "web-c": 1}
    assert ENV_B not in env_of(workload(server, "Deployment", "web-b"))  # never reloaded
    change(api_client, SourceKind.CONFIGMAP, "cfg-a", {"v": "3"})
    change(api_client, SourceKind.SECRET, "db-b", {"password": PASSWORD_V2})

    with running_controller(api_client, STORE) as app:
        settle(app)
        assert generations(server) == {"web-a": 3, "web-b": 2, "web-c": 1}
        assert env_of(workload(server, "Deployment", "web-a"))[ENV_A] == configmap_hash({"v": "3"})
        b64 = base64.b64encode(PASSWORD_V2.encode()).decode()
        assert env_of(workload(server, "Deployment", "web-b"))[ENV_B] == secret_hash({"password": b64})
        reloads = app.registry.get_sample_value("reloader_reload_executed_total", {"success": "true"})
        assert reloads == 2

    # A third start finds nothing to do: the store caught up with the second run's work.
    with running_controller(api_client, STORE) as app:
        settle(app)
    assert generations(server) == {"web-a": 3, "web-b": 2, "web-c": 1}


def test_without_the_store_the_never_reloaded_workload_is_missed(
        server: ApiServer, api_client: ApiClient, first_run: None) -> None:
    """Today's behaviour, kept when the store is off (the documented trade-off)."""
    change(api_client, SourceKind.CONFIGMAP, "cfg-a", {"v": "3"})
    change(api_client, SourceKind.SECRET, "db-b", {"password": PASSWORD_V2})
    with running_controller(api_client, ["--sync-after-restart"]) as app:
        settle(app)
    assert generations(server) == {"web-a": 3, "web-b": 1, "web-c": 1}


def strip_marker(api_client: ApiClient, name: str) -> dict[str, Any]:
    """What a GitOps re-apply of the original manifest does: the env var is gone."""
    path = f"/apis/apps/v1/namespaces/ns/deployments/{name}"
    current = call(api_client, "GET", path)
    for container in current["spec"]["template"]["spec"]["containers"]:
        container.pop("env", None)
    return call(api_client, "PUT", path, current)


def test_a_reapply_that_strips_the_marker_neither_reloads_nor_loses_the_record(
        server: ApiServer, api_client: ApiClient, first_run: None) -> None:
    with running_controller(api_client, STORE) as app:
        stripped = strip_marker(api_client, "web-a")
        rv = stripped["metadata"]["resourceVersion"]
        web_a = ObjectRef("Deployment", "ns", "web-a")
        wait_for(lambda: (r := app.controller.workload(web_a)) is not None
                 and int(r.raw["metadata"]["resourceVersion"]) >= int(rv),
                 timeout=10, message="re-apply seen")
        settle(app)
        assert ENV_A not in env_of(workload(server, "Deployment", "web-a"))
    generation = workload(server, "Deployment", "web-a")["metadata"]["generation"]
    assert generation == 3  # created, reloaded, re-applied: the controller wrote nothing

    # Restarted with the marker gone: the store still knows what web-a was given.
    with running_controller(api_client, STORE) as app:
        settle(app)
    assert workload(server, "Deployment", "web-a")["metadata"]["generation"] == generation
    key = digest_key(server)
    assert stored(api_client).snapshot.workloads["ns/Deployment/web-a"] == {
        "ConfigMap/cfg-a": state_digest(key, "ns/ConfigMap/cfg-a", configmap_hash({"v": "2"}))}

    # ... and a change made while it was down still reloads it, marker or not.
    change(api_client, SourceKind.CONFIGMAP, "cfg-a", {"v": "4"})
    with running_controller(api_client, STORE) as app:
        settle(app)
    assert workload(server, "Deployment", "web-a")["metadata"]["generation"] == generation + 1


def test_no_plain_hash_of_secret_data_in_any_configmap(
        server: ApiServer, api_client: ApiClient, first_run: None) -> None:
    change(api_client, SourceKind.SECRET, "db-b", {"password": PASSWORD_V2})
    with running_controller(api_client, STORE) as app:
        settle(app)
    forbidden = set()
    for password in (PASSWORD_V1, PASSWORD_V2):
        b64 = base64.b64encode(password.encode()).decode()
        plain = secret_hash({"password": b64})
        forbidden |= {password, b64, plain, plain[:32],
                      hashlib.sha1(f"password={b64}".encode()).hexdigest(),  # the change fingerprint
                      hashlib.sha256(password.encode()).hexdigest()[:32]}
    every_value = " ".join(value for obj in all_configmaps(api_client)
                           for value in (obj.get("data") or {}).values())
    assert shards(api_client) and every_value
    assert not [f for f in forbidden if f in every_value]
    # What is there instead: the keyed digest of the Secret's current data.
    b64 = base64.b64encode(PASSWORD_V2.encode()).decode()
    expected = state_digest(digest_key(server), "ns/Secret/db-b", secret_hash({"password": b64}))
    assert stored(api_client).snapshot.sources["ns/Secret/db-b"] == expected


def test_the_store_s_own_writes_are_not_changes(server: ApiServer, api_client: ApiClient,
                                                first_run: None) -> None:
    with running_controller(api_client, STORE) as app:
        settle(app)
        change(api_client, SourceKind.CONFIGMAP, "cfg-c", {"v": "2"})
        wait_for(lambda: workload(server, "Deployment", "web-c")["metadata"]["generation"] == 2,
                 timeout=10, message="web-c reloaded")
        settle(app)
        batches = app.registry.get_sample_value("gitops_reloader_state_store_batches_total")
        wait_for(lambda: app.registry.get_sample_value("gitops_reloader_state_store_batches_total") > batches
                 or app.controller.state.batch.dirty() == 0, timeout=10, message="batch written")
        changes = app.registry.get_sample_value("gitops_reloader_changes_detected_total",
                                                {"kind": "ConfigMap"})
    assert changes == 1  # cfg-c only, not the shards rewritten after it
