"""Side by side on a real kube-apiserver: memory, CPU, change→write latency, API requests per
change and fan-out, for each reloader that is built here.

    python bench/side_by_side.py            # 2,000 Secrets, 2,000 ConfigMaps, 1,000 Deployments; 3 runs
    python bench/side_by_side.py --quick    # 500 / 500 / 250; 1 run

The engines tier's control plane (etcd, kube-apiserver and kube-controller-manager v1.37.2,
built by ``.ci/build-engines.sh``) runs with an audit log; the Deployments have
``replicas: 0`` (the real Deployment controller still writes their status and ReplicaSets, no
pod is run). Each reloader runs as its own process with a client certificate of its own, so the
audit log counts its requests alone. Measured per reloader:

- ready: seconds from start to its readiness (ours: ``/readyz``);
- steady and peak RSS (``VmRSS`` after the latency changes, ``VmHWM``);
- CPU to plateau: user + system seconds from start until ready;
- change→write latency: a ConfigMap changed, until its Deployment's MODIFIED event (20
  changes, p50 and p99);
- API requests per change: the audit log's requests by the reloader's user during those 20
  changes, divided by 20 (watch events it receives are not requests);
- fan-out: one ConfigMap read by 200 Deployments changed, until all 200 are written.

**Stakater Reloader is not in the table**: the Go module proxy refuses
``github.com/stakater/Reloader`` (403), so it cannot be built here (docs/real-engines.md).

Last line: one JSON object with the medians.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "engines")]

from controlplane import running_control_plane  # noqa: E402

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
    wait_ready,
)
from gitops_reloader.kube.api import MERGE  # noqa: E402
from gitops_reloader.kube.resources import CONFIGMAPS  # noqa: E402

CHANGES = 20
FANOUT = 200
USER = "gitops-reloader-bench"


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


def seed(api, secrets: int, configmaps: int, deployments: int) -> None:
    create_all(api, [("/api/v1/namespaces", {"metadata": {"name": "bench"}})])
    create_all(api, (("/api/v1/namespaces/bench/secrets",
                      {"metadata": {"name": f"s-{i}"}, "stringData": {"k": "x" * 256}})
                     for i in range(secrets)))
    create_all(api, (("/api/v1/namespaces/bench/configmaps", configmap_body(f"cfg-{i}", {"v": "1"}))
                     for i in range(configmaps)))
    create_all(api, [("/api/v1/namespaces/bench/configmaps", configmap_body("shared", {"v": "1"}))])
    bodies = [deployment_body(f"web-{i}", f"cfg-{i}") for i in range(deployments)]
    bodies += [deployment_body(f"fan-{i}", "shared") for i in range(FANOUT)]
    for body in bodies:
        body["spec"]["replicas"] = 0
    create_all(api, (("/apis/apps/v1/namespaces/bench/deployments", b) for b in bodies))


def run_once(quick: bool) -> dict[str, float]:
    secrets, configmaps, deployments = (500, 500, 250) if quick else (2000, 2000, 1000)
    with tempfile.TemporaryDirectory() as tmp, running_control_plane(Path(tmp) / "cp", audit=True) as plane:
        admin = api_for(plane.kubeconfig)
        seed(admin, secrets, configmaps, deployments)
        kubeconfig = plane.user_kubeconfig(USER)
        with controller_process(kubeconfig, ["--coalesce-window=0"]) as (proc, port):
            ready = wait_ready(port, timeout=300)
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
                            raise RuntimeError(f"web-{i} not written")
                        time.sleep(0.002)
                    written = next(t for n, t in watch.times[before:] if n == f"web-{i}")
                    latencies.append((written - changed) * 1000)
            time.sleep(1)  # the last writes' follow-up reads land in the log
            requests = audited_requests(plane.audit_log, mark, USER)
            print("requests during the changes:", dict(requests.most_common()), file=sys.stderr)
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


if __name__ == "__main__":
    sys.exit(scenario_main(__doc__, "side_by_side.py", "gitops-reloader on a real kube-apiserver v1.37.2",
                           run_once))
