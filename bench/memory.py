"""Controller memory with a large payload: steady RSS, peak RSS during the initial list, time to ready.

The API test server holds S Secrets of 20 KB each, C ConfigMaps and D Deployments; the
controller (``gitops-reloader run``) starts in its own process and lists everything.
Peak RSS is the kernel's high-water mark (``VmHWM``); steady RSS is ``VmRSS`` a few
seconds after ready.

    python bench/memory.py            # 10,000 Secrets x 20 KB, 10,000 ConfigMaps, 2,000 Deployments
    python bench/memory.py --quick    # 2,000 Secrets, 2,000 ConfigMaps, 400 Deployments

Last line: one JSON object with steady_rss_mb, peak_rss_mb, ready_s, payload_mb.
"""

from __future__ import annotations

import base64
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    api_for,
    apiserver_process,
    configmap_body,
    controller_process,
    create_all,
    deployment_body,
    scenario_main,
    wait_ready,
)

SECRET_BYTES = 20 * 1024


def rss_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_once(secrets: int, configmaps: int, deployments: int) -> dict[str, float]:
    payload = base64.b64encode(os.urandom(SECRET_BYTES)).decode()
    with tempfile.TemporaryDirectory() as tmp, apiserver_process(Path(tmp)) as (_, kubeconfig):
        api = api_for(kubeconfig)
        create_all(api, [("/api/v1/namespaces/bench/secrets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"s-{i}", "namespace": "bench"},
            "data": {"blob": payload[: len(payload) - 4] + f"{i:04d}"[-4:]}})
            for i in range(secrets)])
        create_all(api, [("/api/v1/namespaces/bench/configmaps",
                          configmap_body(f"cfg-{i}", {"v": str(i), "text": "x" * 512}))
                         for i in range(configmaps)])
        create_all(api, [("/apis/apps/v1/namespaces/bench/deployments",
                          deployment_body(f"web-{i}", f"cfg-{i}")) for i in range(deployments)])
        with controller_process(kubeconfig, []) as (proc, port):
            ready_s = wait_ready(port, timeout=300)
            time.sleep(3)
            steady = rss_mb(proc.pid, "VmRSS")
            peak = rss_mb(proc.pid, "VmHWM")
    return {"steady_rss_mb": round(steady, 1), "peak_rss_mb": round(peak, 1),
            "ready_s": round(ready_s, 2), "payload_mb": round(secrets * SECRET_BYTES / 2**20, 1)}


def main() -> int:
    return scenario_main(
        __doc__ or "", "memory.py",
        "memory: 20 KB Secrets, ConfigMaps, Deployments (10,000/10,000/2,000; quick 2,000/2,000/400)",
        lambda quick: run_once(*((2000, 2000, 400) if quick else (10_000, 10_000, 2000))),
    )


if __name__ == "__main__":
    raise SystemExit(main())
