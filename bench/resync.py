"""Resync: one slow-resync pass over 10,000 workloads, read from the informers' caches.

    python bench/resync.py            # 10,000 Deployments and ConfigMaps, 5 passes, 3 runs
    python bench/resync.py --quick    # 2,000, 1 run

The API test server runs as its own process, seeded with one ConfigMap per Deployment; each
Deployment records its ConfigMap's current hash in its ``STAKATER_*`` variable (all current,
as a resync finds a cluster almost always), except 10 per mille of them, which record an
old one (a missed change). The controller runs in this process with ``--resync-period=0``
(no pass of its own) and a coalescing window of an hour (what a pass queues stays pending,
unwritten); ``Controller.resync()`` is called on this thread, so its wall time and this
thread's CPU time are the pass's alone. The first pass finds the stale ones; the timed passes
after it skip them (already pending). API requests are counted on the server over the
timed passes: none is expected (a pass reads the caches).

Last line: one JSON object with the medians.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    apiserver_process,
    configmap_body,
    deployment_body,
    load_objects,
    reset_server_requests,
    scenario_main,
    server_requests,
)
from gitops_reloader.app import App
from gitops_reloader.config import load_config
from gitops_reloader.hashing import configmap_hash
from gitops_reloader.kube.client import load_api_client

PASSES = 5
STALE_PER_MILLE = 10


def workloads(count: int, stale_per_mille: int) -> tuple[list[dict], list[dict]]:
    configmaps, deployments = [], []
    current = configmap_hash({"v": "1"})
    for i in range(count):
        configmaps.append(configmap_body(f"cfg-{i}", {"v": "1"}))
        body = deployment_body(f"web-{i}", f"cfg-{i}")
        recorded = configmap_hash({"v": "0"}) if i % 1000 < stale_per_mille else current
        body["spec"]["template"]["spec"]["containers"][0]["env"] = [
            {"name": f"STAKATER_CFG_{i}_CONFIGMAP", "value": recorded}]
        deployments.append(body)
    return configmaps, deployments


def run_once(count: int, stale_per_mille: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, apiserver_process(Path(tmp)) as (url, kubeconfig):
        configmaps, deployments = workloads(count, stale_per_mille)
        load_objects(url, "configmaps", configmaps)
        load_objects(url, "deployments", deployments, group="apps")
        config = load_config(["--kubeconfig", str(kubeconfig), "--resync-period=0", "--coalesce-window=1h",
                              "--permission-check=off"], environ={"HOME": tmp})
        app = App(config, api_client=load_api_client(str(kubeconfig)), serve_http=False)
        app.start()
        try:
            found = app.controller.resync()  # the first pass finds the missed changes
            store = app.controller.ledger_store
            if store is not None:
                store.flush()  # what it found is recorded (the ledger's own write, not a pass's)
            reset_server_requests(url)
            walls, cpus = [], []
            for _ in range(PASSES):
                wall, cpu = time.perf_counter(), time.thread_time()
                app.controller.resync()
                cpus.append(time.thread_time() - cpu)
                walls.append(time.perf_counter() - wall)
            requests = server_requests(url)
        finally:
            app.stop()
    api = sum(n for (verb, _), n in requests.items() if verb not in ("watch",))
    return {"workloads": count, "pass_wall_ms": statistics.median(walls) * 1000,
            "pass_cpu_ms": statistics.median(cpus) * 1000,
            "per_workload_us": statistics.median(walls) / count * 1e6,
            "out_of_date_found_first_pass": found, "api_requests_during_passes": api}


def main() -> int:
    return scenario_main(
        __doc__ or "", "resync.py",
        "resync: one pass over every workload from the caches (10,000; quick 2,000)",
        lambda quick: run_once(2000 if quick else 10_000, STALE_PER_MILLE),
    )


if __name__ == "__main__":
    raise SystemExit(main())
