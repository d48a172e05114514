"""API test server: the benchmarks' bulk-load path and field selection on loaded objects."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from kubernetes.client import CoreV1Api

from gitops_reloader.testing.apiserver import ApiServer

pytestmark = pytest.mark.e2e


def load(server: ApiServer, spec: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(f"{server.url}/_testing/load", method="POST",
                                     data=json.dumps(spec).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def secret(name: str, namespace: str = "default", type_: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": name, "namespace": namespace},
                            "data": {"k": "dmFsdWU="}}
    if type_:
        body["type"] = type_
    return body


def test_loaded_objects_are_listed_with_server_set_metadata(server: ApiServer, core: CoreV1Api) -> None:
    items = [secret(f"s-{i}", namespace="ns-a" if i % 2 else "ns-b") for i in range(6)]
    assert load(server, {"resource": "secrets", "items": items}) == {"ok": True, "created": 6}
    listed = core.list_namespaced_secret("ns-a").items
    assert sorted(s.metadata.name for s in listed) == ["s-1", "s-3", "s-5"]
    assert all(s.metadata.uid and s.metadata.resource_version for s in listed)
    assert len({s.metadata.resource_version for s in core.list_secret_for_all_namespaces().items}) == 6


def test_a_type_field_selector_filters_loaded_secrets(server: ApiServer, core: CoreV1Api) -> None:
    load(server, {"resource": "secrets", "items": [
        secret("plain"), secret("release", type_="helm.sh/release.v1"),
        secret("tls", type_="kubernetes.io/tls")]})
    kept = core.list_namespaced_secret("default", field_selector="type!=helm.sh/release.v1").items
    assert sorted(s.metadata.name for s in kept) == ["plain", "tls"]
    only = core.list_namespaced_secret("default", field_selector="type=helm.sh/release.v1").items
    assert [s.metadata.name for s in only] == ["release"]


def test_a_patched_secret_is_selected_by_its_new_type(server: ApiServer, core: CoreV1Api) -> None:
    load(server, {"resource": "secrets", "items": [secret("s")]})
    core.delete_namespaced_secret("s", "default")
    core.create_namespaced_secret("default", secret("s", type_="helm.sh/release.v1"))
    kept = core.list_namespaced_secret("default", field_selector="type!=helm.sh/release.v1").items
    assert kept == []


def test_a_duplicate_stops_the_load_with_a_conflict(server: ApiServer, core: CoreV1Api) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        load(server, {"resource": "secrets", "items": [secret("a"), secret("a"), secret("b")]})
    caught.value.close()
    assert caught.value.code == 409
    assert [s.metadata.name for s in core.list_namespaced_secret("default").items] == ["a"]


@pytest.mark.parametrize("spec", [{"resource": "secrets"}, {"resource": "nothings", "items": []}, []])
def test_a_malformed_load_is_a_bad_request(server: ApiServer, spec: Any) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        load(server, spec)
    caught.value.close()
    assert caught.value.code == 400
