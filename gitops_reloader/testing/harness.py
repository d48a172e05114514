"""Run the controller in-process against the API test server (tests, demo, benchmarks)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from kubernetes.client import ApiClient, AppsV1Api, CoreV1Api

from gitops_reloader.app import App
from gitops_reloader.clock import Clock
from gitops_reloader.config import Config, load_config

SinkT = TypeVar("SinkT")


def wait_for(predicate: Callable[[], Any], *, timeout: float = 10.0, interval: float = 0.01,
             message: str | Callable[[], str] = "condition") -> Any:
    """Poll until ``predicate()`` is truthy; return its value or raise AssertionError
    (``message`` called then, when it is a callable: what was left, as it stood)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            said = message() if callable(message) else message
            raise AssertionError(f"timed out after {timeout}s waiting for {said}")
        time.sleep(interval)


@contextmanager
def running_controller(api_client: ApiClient, flags: Sequence[str] = (), *,
                       environ: Mapping[str, str] | None = None, **app_kwargs: Any) -> Iterator[App]:
    """Start an :class:`App` (no HTTP server, coalescing window 0 unless given) and stop it."""
    args = list(flags)
    if not any(a.startswith("--coalesce-window") for a in args):
        args.append("--coalesce-window=0")
    config = load_config(args, environ=dict(environ or {"HOME": "/nonexistent"}))
    app = App(config, api_client=api_client, serve_http=False, **app_kwargs)
    app.start()
    try:
        yield app
    finally:
        app.stop()


@contextmanager
def running_sink(api_client: ApiClient, config: Config, name: str, sink_type: type[SinkT],
                 sink_hook: Callable[[SinkT], Any] | None = None,
                 clock: Clock | None = None) -> Iterator[tuple[App, SinkT]]:
    """Build the App for ``config`` (on ``clock``), let ``sink_hook`` see its sink ``name`` (a
    ``sink_type``) before it starts, run it, and stop it (which closes the sinks)."""
    app = App(config, api_client=api_client, serve_http=False, clock=clock)
    sink = app.controller.sinks[name]
    assert isinstance(sink, sink_type)
    if sink_hook is not None:
        sink_hook(sink)
    app.start()
    try:
        yield app, sink
    finally:
        app.stop()


def settle(app: App, *, timeout: float = 10.0) -> None:
    """Wait until the controller has nothing pending, queued or in progress."""
    wait_for(app.controller.idle, timeout=timeout, message="controller idle")


def clients(api_client: ApiClient) -> tuple[CoreV1Api, AppsV1Api]:
    return CoreV1Api(api_client), AppsV1Api(api_client)


def deployment(name: str, *, namespace: str = "ns", annotations: Mapping[str, str] | None = None,
               template_annotations: Mapping[str, str] | None = None,
               containers: Sequence[Mapping[str, Any]] | None = None,
               init_containers: Sequence[Mapping[str, Any]] | None = None,
               volumes: Sequence[Mapping[str, Any]] | None = None,
               kind: str = "Deployment", api_version: str = "apps/v1") -> dict[str, Any]:
    """A minimal workload manifest (Deployment shape; DaemonSet/StatefulSet by ``kind``)."""
    labels = {"app": name}
    spec: dict[str, Any] = {
        "containers": list(containers or [{"name": "app", "image": "nginx"}]),
    }
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if volumes:
        spec["volumes"] = list(volumes)
    template: dict[str, Any] = {"metadata": {"labels": labels}, "spec": spec}
    if template_annotations:
        template["metadata"]["annotations"] = dict(template_annotations)
    body: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace,
                     "annotations": dict(annotations or {})},
        "spec": {"selector": {"matchLabels": labels}, "template": template},
    }
    if kind == "StatefulSet":
        body["spec"]["serviceName"] = name
    return body


def env_from_configmap(name: str) -> dict[str, Any]:
    return {"name": "app", "image": "nginx", "envFrom": [{"configMapRef": {"name": name}}]}


def env_from_secret(name: str) -> dict[str, Any]:
    return {"name": "app", "image": "nginx", "envFrom": [{"secretRef": {"name": name}}]}


def container_env(workload: Mapping[str, Any], container: str = "app") -> dict[str, Any]:
    """Env of one container of a workload returned by the API, as name → value."""
    template = workload["spec"]["template"]
    for entry in template["spec"].get("containers") or ():
        if entry["name"] == container:
            return {e["name"]: e.get("value") for e in entry.get("env") or ()}
    raise KeyError(container)
