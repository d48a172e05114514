"""Shared steps for the reload end-to-end tests (create, change, observe)."""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Mapping
from typing import Any

from kubernetes.client import ApiClient

from gitops_reloader.app import App
from gitops_reloader.model import SourceKind
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.harness import settle, wait_for

GIT_TOKEN = "ghp_e2eGitHostToken_4b9d1f"
"""The token the e2e git host (conftest ``githost``) accepts; tests check it never leaks."""

PLURAL = {"Deployment": "deployments", "DaemonSet": "daemonsets", "StatefulSet": "statefulsets"}


def sha1_of(entries: list[str]) -> str:
    return hashlib.sha1(";".join(sorted(entries)).encode()).hexdigest()


def create(api_client: ApiClient, body: Mapping[str, Any]) -> dict[str, Any]:
    """Create any namespaced object through the official client (raw JSON POST)."""
    kind = body["kind"]
    namespace = body["metadata"]["namespace"]
    if kind == "ConfigMap":
        path = f"/api/v1/namespaces/{namespace}/configmaps"
    elif kind == "Secret":
        path = f"/api/v1/namespaces/{namespace}/secrets"
    else:
        group_version = body["apiVersion"]
        path = f"/apis/{group_version}/namespaces/{namespace}/{PLURAL.get(kind, kind.lower() + 's')}"
    return call(api_client, "POST", path, body)


def call(api_client: ApiClient, method: str, path: str, body: Any = None,
         content_type: str = "application/json") -> dict[str, Any]:
    from gitops_reloader.kube.api import KubeApi

    return KubeApi(api_client).request(method, path, body=body, content_type=content_type)


def configmap(name: str, data: Mapping[str, str], *, namespace: str = "ns",
              annotations: Mapping[str, str] | None = None,
              labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace,
                         "annotations": dict(annotations or {}), "labels": dict(labels or {})},
            "data": dict(data)}


def secret(name: str, data: Mapping[str, str], *, namespace: str = "ns",
           annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace,
                         "annotations": dict(annotations or {})},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def patch_source(app: App, api_client: ApiClient, kind: SourceKind, name: str,
                 body: Mapping[str, Any], *, namespace: str = "ns") -> None:
    """Merge-patch a ConfigMap/Secret, then wait until the controller has seen and handled it."""
    path = f"/api/v1/namespaces/{namespace}/{kind.plural}/{name}"
    result = call(api_client, "PATCH", path, dict(body), "application/merge-patch+json")
    rv = result["metadata"]["resourceVersion"]
    wait_for(lambda: app.controller.seen(kind, namespace, name, rv), timeout=10,
             message=f"controller to see {kind.plural}/{name}@{rv}")
    settle(app)


def set_cm_data(app: App, api_client: ApiClient, name: str, data: Mapping[str, str],
                namespace: str = "ns") -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/{name}"
    current = call(api_client, "GET", path)
    current["data"] = dict(data)
    result = call(api_client, "PUT", path, current)
    rv = result["metadata"]["resourceVersion"]
    wait_for(lambda: app.controller.seen(SourceKind.CONFIGMAP, namespace, name, rv)
             or int(rv) <= int(current["metadata"]["resourceVersion"]),
             timeout=10, message=f"controller to see configmaps/{name}")
    settle(app)


def workload(server: ApiServer, kind: str, name: str, namespace: str = "ns") -> dict[str, Any]:
    obj = server.get_object(PLURAL.get(kind, kind.lower() + "s"), namespace, name)
    assert obj is not None, f"{kind} {namespace}/{name} missing"
    return obj


def env_of(obj: Mapping[str, Any], container: str = "app") -> dict[str, Any]:
    for entry in obj["spec"]["template"]["spec"]["containers"]:
        if entry["name"] == container:
            return {e["name"]: e.get("value") for e in entry.get("env") or ()}
    raise KeyError(container)


def writes(server: ApiServer, resource: str) -> int:
    counts = server.request_counts()
    return sum(counts.get((verb, resource), 0) for verb in ("patch", "update", "create", "delete"))


def events(api_client: ApiClient, name: str, namespace: str = "ns") -> list[dict[str, Any]]:
    """The Events in ``namespace`` about the object called ``name``."""
    items = call(api_client, "GET", f"/api/v1/namespaces/{namespace}/events").get("items") or []
    return [e for e in items if (e.get("involvedObject") or {}).get("name") == name]


def wait_event(api_client: ApiClient, name: str, reason: str, *, namespace: str = "ns",
               timeout: float = 30.0) -> dict[str, Any]:
    """The first Event with ``reason`` about ``name``, once there is one."""
    def find() -> dict[str, Any] | None:
        return next((e for e in events(api_client, name, namespace) if e.get("reason") == reason), None)

    return wait_for(find, timeout=timeout, message=f"{reason} event on {namespace}/{name}")


def metric(app: App, name: str, **labels: str) -> float:
    """The app's ``gitops_reloader_<name>`` sample with ``labels`` (0 when absent)."""
    return app.registry.get_sample_value(f"gitops_reloader_{name}", labels) or 0.0


def quiet(app: App, *, wait: float = 1.5) -> None:
    """Let the controller finish everything it has (including retries)."""
    settle(app, timeout=30)
    time.sleep(wait)
    settle(app, timeout=30)
