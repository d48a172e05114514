"""Real processes for end-to-end tests: the API test server and controllers, each in its own process.

Used by the HA and chaos tests. Every process is stopped by PID in teardown.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from kubernetes import config as kube_config
from kubernetes.client import ApiClient

from gitops_reloader.testing.harness import wait_for

ROOT = Path(__file__).resolve().parents[2]


def stop_process(proc: subprocess.Popen) -> int | None:
    """SIGTERM, then SIGKILL if it does not exit; by PID, only our own child."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode


@dataclass
class Cluster:
    url: str
    kubeconfig: str
    api_client: ApiClient
    http: httpx.Client

    def requests(self, verb: str, resource: str) -> int:
        counts = self.http.get(self.url + "/_testing/requests").json()["requests"]
        return sum(c["count"] for c in counts if (c["verb"], c["resource"]) == (verb, resource))

    def quiet(self, resource: str, *, for_seconds: float = 0.5) -> int:
        """Wait until no patch of ``resource`` arrived for ``for_seconds``; the patch count."""
        last = (self.requests("patch", resource), time.monotonic())
        while time.monotonic() - last[1] < for_seconds:
            time.sleep(0.05)
            count = self.requests("patch", resource)
            if count != last[0]:
                last = (count, time.monotonic())
        return last[0]

    def deployment(self, name: str) -> dict:
        response = self.http.get(self.url + f"/apis/apps/v1/namespaces/ns/deployments/{name}")
        response.raise_for_status()
        return response.json()


@contextmanager
def running_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """The API test server in its own process, with a client and a raw HTTP client."""
    kubeconfig = tmp_path / "kubeconfig"
    with (tmp_path / "apiserver.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gitops_reloader.testing.apiserver", "--port", "0",
             "--kubeconfig", str(kubeconfig)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("READY http://127.0.0.1:"), line
        url = line.split(" ", 1)[1]
        api_client = kube_config.new_client_from_config(config_file=str(kubeconfig))
        with httpx.Client(headers={"Authorization": "Bearer test-token"}) as http:
            yield Cluster(url, str(kubeconfig), api_client, http)
        api_client.close()
    finally:
        stop_process(proc)
        proc.stdout.close()


HA_FLAGS = ("--enable-ha", "--lease-duration=2s", "--coalesce-window=0", "--lease-namespace=default")


class Controller:
    """One ``gitops-reloader run --enable-ha`` process and its JSON log."""

    def __init__(self, cluster: Cluster, log_path: Path, flags: Sequence[str] = HA_FLAGS) -> None:
        self.log_path = log_path
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "ALERT_", "POD_"))}
        env["HOME"] = str(log_path.parent)
        with log_path.open("w") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gitops_reloader.cli", "run", "--kubeconfig", cluster.kubeconfig,
                 "--http-address=127.0.0.1:0", "--log-format=json", *flags],
                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)
        self.pid = self.proc.pid
        self.metrics_url = ""

    def log(self) -> list[dict]:
        lines = self.log_path.read_text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def wait_ready(self, http: httpx.Client) -> None:
        """Until /readyz answers 200: informer caches synced (also on a standby)."""

        def address() -> str:
            assert self.proc.poll() is None, self.log_path.read_text()
            return next((r["address"] for r in self.log() if r["msg"] == "http server listening"), "")

        self.metrics_url = "http://" + wait_for(address, timeout=60, message="http server")
        wait_for(lambda: http.get(self.metrics_url + "/readyz").status_code == 200, timeout=60,
                 message="caches synced")

    def sample(self, http: httpx.Client, name: str) -> float | None:
        """The value of one exported sample (``name`` with its labels); None while it is not
        exported yet (a labelled series appears with its first observation)."""
        for line in http.get(self.metrics_url + "/metrics").text.splitlines():
            if line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
        return None

    def metric(self, http: httpx.Client, name: str) -> float:
        """The value of one exported sample; AssertionError when it is not exported."""
        value = self.sample(http, name)
        if value is None:
            raise AssertionError(f"{name} not exported by pid {self.pid}")
        return value
