"""Side by side on a real kube-apiserver: gitops-reloader and Stakater Reloader, each on the same
control plane and objects: memory, CPU, change→write latency, API requests per change and
fan-out, with the ratio of each figure (gitops-reloader / Stakater).

    python bench/side_by_side.py               # 2,000 Secrets, 2,000 ConfigMaps, 1,000 Deployments; 3 runs
    python bench/side_by_side.py --scale big   # 5,000 Secrets of 20 KiB, 5,000 ConfigMaps, 1,000 Deployments
    python bench/side_by_side.py --quick       # 500 / 500 / 250; 1 run

The engines tier's control plane (etcd, kube-apiserver and kube-controller-manager v1.37.2,
built by ``.ci/build-engines.sh``) runs with an audit log; the Deployments have
``replicas: 0`` (the real Deployment controller still writes their status and ReplicaSets, no
pod is run); 200 more Deployments read one shared ConfigMap. Each reloader gets a control plane
of its own, seeded alike, and runs as its own process with a client certificate of its own, so
the audit log counts its requests alone. Stakater Reloader is the binary ``.ci/build-engines.sh``
builds from ``../shared/anchors`` (v1.4.21 + 10 commits), run with no flags (env-vars strategy,
every namespace), as its chart runs it by default. Measured per reloader:

- ready: seconds from start to its readiness (ours: ``/readyz``; Stakater: ``/metrics``, its
  chart's readiness probe);
- steady and peak RSS (``VmRSS`` after the latency changes, ``VmHWM``);
- CPU to ready: user + system seconds from start until ready;
- change→write latency: a ConfigMap changed, until its Deployment's MODIFIED event on a watch
  (20 changes, p50 and p99);
- API requests per change: the audit log's requests by the reloader's user during those 20
  changes, divided by 20 (watch events it receives are not requests);
- fan-out: one ConfigMap read by 200 Deployments changed, until all 200 are written.

Last line: one JSON object with the medians.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "engines")]

from controlplane import ENGINE_CACHE, running_control_plane  # noqa: E402

from bench.common import (  # noqa: E402
    DeploymentWatch,
    api_for,
    configmap_body,
    controller_process,
    create_all,
    deployment_body,
    percentile,
    rss_mb,
    scenario_main,
    stop_process,
    wait_ready,
)
from gitops_reloader.kube.api import MERGE  # noqa: E402
from gitops_reloader.kube.resources import CONFIGMAPS  # noqa: E402

CHANGES = 20
FANOUT = 200
USER = "reloader-bench"
STAKATER = ENGINE_CACHE / "stakater" / "reloader"
STAKATER_PORT = 9090  # fixed in Stakater's binary
SCALES = {  # secrets, secret size, configmaps, deployments
    "quick": (500, 256, 500, 250),
    "default": (2000, 256, 2000, 1000),
    "big": (5000, 20 * 1024, 5000, 1000),
}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (``/proc/<pid>/stat``, clock ticks of 1/100 s)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


def audited_requests(log: Path, start: int, user: str) -> Counter[str]:
    """Requests by ``user`` in the audit log after byte ``start``, by verb and resource."""
    counts: Counter[str] = Counter()
    with log.open("rb") as lines:
        lines.seek(start)
        for line in lines:
            event = json.loads(line)
            if event.get("stage") == "ResponseComplete" and event["user"]["username"] == user:
                target = event.get("objectRef") or {}
                counts[f"{event['verb']} {target.get('resource', '?')}"] += 1
    return counts


def seed(api, secrets: int, secret_size: int, configmaps: int, deployments: int) -> None:
    create_all(api, [("/api/v1/namespaces", {"metadata": {"name": "bench"}})])
    create_all(api, (("/api/v1/namespaces/bench/secrets",
                      {"metadata": {"name": f"s-{i}"}, "stringData": {"k": f"{i:08}" * (secret_size // 8)}})
                     for i in range(secrets)))
    create_all(api, (("/api/v1/namespaces/bench/configmaps", configmap_body(f"cfg-{i}", {"v": "1"}))
                     for i in range(configmaps)))
    create_all(api, [("/api/v1/namespaces/bench/configmaps", configmap_body("shared", {"v": "1"}))])
    bodies = [deployment_body(f"web-{i}", f"cfg-{i}") for i in range(deployments)]
    bodies += [deployment_body(f"fan-{i}", "shared") for i in range(FANOUT)]
    for body in bodies:
        body["spec"]["replicas"] = 0
    create_all(api, (("/apis/apps/v1/namespaces/bench/deployments", b) for b in bodies))


@contextmanager
def ours(kubeconfig: Path) -> Iterator[tuple[subprocess.Popen[Any], Callable[[], float]]]:
    with controller_process(kubeconfig, ["--coalesce-window=0"]) as (proc, port):
        yield proc, lambda: wait_ready(port, timeout=300)


@contextmanager
def stakater(kubeconfig: Path) -> Iterator[tuple[subprocess.Popen[Any], Callable[[], float]]]:
    proc = subprocess.Popen([str(STAKATER), "--log-level=warning"],
                            env={**os.environ, "KUBECONFIG": str(kubeconfig)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc, lambda: wait_answering(f"http://127.0.0.1:{STAKATER_PORT}/metrics", proc)
    finally:
        stop_process(proc)


def wait_answering(url: str, proc: subprocess.Popen[Any], timeout: float = 300.0) -> float:
    """Seconds until ``url`` answers 200 (the process must stay up)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"the process exited ({proc.returncode}) before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return time.monotonic() - start
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer")


RELOADERS = {"gitops-reloader": ours, "stakater": stakater}


def measure(name: str, scale: str) -> dict[str, float]:
    """One reloader on a control plane of its own, seeded at ``scale``."""
    secrets, secret_size, configmaps, deployments = SCALES[scale]
    with tempfile.TemporaryDirectory() as tmp, running_control_plane(Path(tmp) / "cp", audit=True) as plane:
        admin = api_for(plane.kubeconfig)
        seed(admin, secrets, secret_size, configmaps, deployments)
        kubeconfig = plane.user_kubeconfig(USER)
        with RELOADERS[name](kubeconfig) as (proc, wait):
            ready = wait()
            cpu_ready = cpu_seconds(proc.pid)
            time.sleep(2)  # the first status writes of the Deployment controller pass
            mark = plane.audit_log.stat().st_size
            latencies = []
            with DeploymentWatch(plane.kubeconfig) as watch:
                for i in range(CHANGES):
                    before = len(watch.times)
                    changed = time.perf_counter()
                    admin.patch(CONFIGMAPS, "bench", f"cfg-{i}", {"data": {"v": "2"}}, content_type=MERGE)
                    deadline = time.monotonic() + 30
                    while not any(n == f"web-{i}" for n, _ in watch.times[before:]):
                        if time.monotonic() > deadline:
                            raise RuntimeError(f"{name}: web-{i} not written")
                        time.sleep(0.002)
                    written = next(t for n, t in watch.times[before:] if n == f"web-{i}")
                    latencies.append((written - changed) * 1000)
            time.sleep(1)  # the last writes' follow-up reads land in the log
            requests = audited_requests(plane.audit_log, mark, USER)
            print(f"{name}: requests during the changes:", dict(requests.most_common()), file=sys.stderr)
            steady, peak = rss_mb(proc.pid), rss_mb(proc.pid, "VmHWM")
            with DeploymentWatch(plane.kubeconfig) as watch:
                changed = time.perf_counter()
                admin.patch(CONFIGMAPS, "bench", "shared", {"data": {"v": "2"}}, content_type=MERGE)
                fanout = watch.wait_names(FANOUT, timeout=300) - changed
    return {"ready_s": round(ready, 2), "cpu_to_ready_s": round(cpu_ready, 2),
            "steady_rss_mb": round(steady, 1), "peak_rss_mb": round(peak, 1),
            "latency_p50_ms": round(percentile(latencies, 50), 1),
            "latency_p99_ms": round(percentile(latencies, 99), 1),
            "requests_per_change": round(sum(requests.values()) / CHANGES, 2),
            "fanout_200_s": round(fanout, 2)}


def run_once(quick: bool, scale: str) -> dict[str, float]:
    """Both reloaders (Stakater only where it is built), and the ratio of each figure."""
    scale = "quick" if quick else scale
    names = [n for n in RELOADERS if n != "stakater" or STAKATER.exists()]
    figures = {name: measure(name, scale) for name in names}
    result = {f"{name}.{key}": value for name, each in figures.items() for key, value in each.items()}
    if "stakater" in figures:
        for key, value in figures["gitops-reloader"].items():
            theirs = figures["stakater"][key]
            result[f"ratio.{key}"] = round(value / theirs, 3) if theirs else float("nan")
    return result


if __name__ == "__main__":
    import argparse

    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--scale", choices=["default", "big"], default="default")
    chosen, rest = options.parse_known_args()
    sys.exit(scenario_main(__doc__, "side_by_side.py",
                           "gitops-reloader and Stakater Reloader on a real kube-apiserver v1.37.2 "
                           f"({chosen.scale})",
                           lambda quick: run_once(quick, chosen.scale), argv=rest,
                           options=[f"--scale={chosen.scale}"] if chosen.scale != "default" else []))
