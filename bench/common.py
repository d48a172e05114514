"""Shared pieces of the benchmarks: processes on 127.0.0.1, bulk object creation, stats.

Every process a benchmark starts is stopped by PID when the benchmark ends.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubernetes import config as kube_config
from kubernetes.client import ApiClient, Configuration

from gitops_reloader.kube.api import KubeApi
from gitops_reloader.testing.ports import free_port


@contextmanager
def apiserver_process(workdir: Path, *extra: str) -> Iterator[tuple[str, Path]]:
    """The API test server in its own process; yields (url, kubeconfig path)."""
    with apiserver_popen(workdir, *extra) as (_, url, kubeconfig):
        yield url, kubeconfig


@contextmanager
def apiserver_popen(workdir: Path, *extra: str) -> Iterator[tuple[subprocess.Popen[Any], str, Path]]:
    """The API test server in its own process; yields (process, url, kubeconfig path)."""
    kubeconfig = workdir / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitops_reloader.testing.apiserver", "--port", "0",
         "--kubeconfig", str(kubeconfig), *extra],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("READY "):
            raise RuntimeError(f"API test server did not start: {line!r}")
        yield proc, line.split()[1], kubeconfig
    finally:
        stop_process(proc)


def stop_process(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextmanager
def controller_process(kubeconfig: Path, flags: Sequence[str], *,
                       env: Mapping[str, str] | None = None) -> Iterator[tuple[subprocess.Popen[Any], int]]:
    """``gitops-reloader run`` in its own process; yields (process, metrics port) once ready."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitops_reloader.cli", "run", f"--kubeconfig={kubeconfig}",
         f"--http-address=127.0.0.1:{port}", "--log-level=warning", *flags],
        env={**os.environ, **(env or {})},
    )
    try:
        yield proc, port
    finally:
        stop_process(proc)


def wait_ready(port: int, timeout: float = 120.0) -> float:
    """Seconds until /readyz answers 200."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as response:
                if response.status == 200:
                    return time.monotonic() - start
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("controller did not become ready")


def api_for(kubeconfig: Path, pool: int = 32) -> KubeApi:
    configuration = Configuration()
    kube_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = pool
    return KubeApi(ApiClient(configuration))


def create_all(api: KubeApi, paths_and_bodies: Iterable[tuple[str, Mapping[str, Any]]],
               threads: int = 16) -> None:
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda pb: api.request("POST", pb[0], body=dict(pb[1])), paths_and_bodies))


def load_objects(url: str, resource: str, items: Iterable[Mapping[str, Any]], *, group: str = "",
                 version: str = "v1", chunk: int = 500) -> int:
    """Seed objects through the API test server's ``POST /_testing/load`` (no request per object)."""
    created = 0
    batch: list[Mapping[str, Any]] = []

    def send() -> int:
        body = json.dumps({"group": group, "version": version, "resource": resource,
                           "items": batch}).encode()
        request = urllib.request.Request(f"{url}/_testing/load", method="POST", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=600) as response:
            return int(json.load(response)["created"])

    for item in items:
        batch.append(item)
        if len(batch) == chunk:
            created += send()
            batch = []
    if batch:
        created += send()
    return created


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A process's ``VmRSS`` (or ``VmHWM``, the peak) from /proc, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def server_requests(url: str) -> dict[tuple[str, str], int]:
    with urllib.request.urlopen(f"{url}/_testing/requests", timeout=5) as response:
        data = json.load(response)
    return {(r["verb"], r["resource"]): r["count"] for r in data["requests"]}


def reset_server_requests(url: str) -> None:
    request = urllib.request.Request(f"{url}/_testing/reset-requests", method="POST", data=b"{}",
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=5).close()


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def print_table(title: str, rows: Sequence[tuple[str, str]], command: str) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"\n{title}\ncommand: {command}")
    print("-" * (width + 20))
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    print("-" * (width + 20))


def configmap_body(name: str, data: Mapping[str, str], namespace: str = "bench") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": dict(data)}


def deployment_body(name: str, configmap: str, namespace: str = "bench",
                    annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace,
                     "annotations": dict(annotations or {"reloader.stakater.com/auto": "true"})},
        "spec": {"selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "app", "image": "nginx",
                                     "envFrom": [{"configMapRef": {"name": configmap}}]}]}}},
    }


class DeploymentWatch:
    """Records when each Deployment in namespace ``bench`` is MODIFIED (a thread on a watch)."""

    def __init__(self, kubeconfig: Path) -> None:
        import threading

        from gitops_reloader.kube.resources import DEPLOYMENTS

        self._api = api_for(kubeconfig, pool=2)
        rv = str(self._api.list(DEPLOYMENTS, namespace="bench", limit=1)["metadata"]["resourceVersion"])
        self._stream = self._api.watch(DEPLOYMENTS, namespace="bench", resource_version=rv,
                                       timeout_seconds=900)
        self.times: list[tuple[str, float]] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> DeploymentWatch:
        self._thread.start()
        time.sleep(0.3)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stream.close()

    def _run(self) -> None:
        for event in self._stream:
            if event.get("type") == "MODIFIED":
                with self._cond:
                    self.times.append((event["object"]["metadata"]["name"], time.perf_counter()))
                    self._cond.notify_all()

    def wait_names(self, count: int, timeout: float) -> float:
        """Wait until ``count`` distinct Deployments were modified; return the last time."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len({n for n, _ in self.times}) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RuntimeError(f"only {len({n for n, _ in self.times})}/{count} written")
                self._cond.wait(remaining)
            return max(t for _, t in self.times)


def scenario_main(doc: str, script: str, title: str, run_once: Callable[[bool], dict[str, float]],
                  argv: Sequence[str] | None = None, options: Sequence[str] = ()) -> int:
    """The shared command line of a scenario: ``--quick``, ``--runs``; a table, then JSON.

    ``run_once(quick)`` returns one run's figures (``options``: the script's own flags, for the
    printed command); the medians over the runs are printed as
    a table (with the command line) and, on the last line, as one JSON object.
    """
    import argparse

    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smaller run that finishes in under a minute")
    parser.add_argument("--runs", type=int, default=0, help="runs to take the median of (default 3, quick 1)")
    args = parser.parse_args(argv)
    runs = args.runs or (1 if args.quick else 3)
    results = [run_once(args.quick) for _ in range(runs)]
    summary = {key: round(median([r[key] for r in results]), 3) for key in results[0]}
    command = " ".join([f"python bench/{script}", *options] + (["--quick"] if args.quick else []))
    print_table(f"{title} (median of {runs} run(s))", [(k, str(v)) for k, v in summary.items()], command)
    print(json.dumps(summary))
    return 0
