"""Fan-out: one ConfigMap used by N Deployments; time from the change until all are written.

    python bench/fanout.py            # N=500, median of 3 runs, default rate limits (--write-qps=200)
    python bench/fanout.py --quick    # N=500, 1 run

Default limits: --write-qps=200, --write-burst=300, --workers=4.
Last line: one JSON object with fanout_s, workloads, writes.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    DeploymentWatch,
    api_for,
    apiserver_process,
    configmap_body,
    controller_process,
    create_all,
    deployment_body,
    scenario_main,
    wait_ready,
)


def run_once(workloads: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, apiserver_process(Path(tmp)) as (_, kubeconfig):
        api = api_for(kubeconfig)
        create_all(api, [("/api/v1/namespaces/bench/configmaps", configmap_body("shared", {"v": "0"}))])
        create_all(api, [("/apis/apps/v1/namespaces/bench/deployments",
                          deployment_body(f"web-{i}", "shared")) for i in range(workloads)])
        with controller_process(kubeconfig, ["--coalesce-window=0"]) as (_, port):
            wait_ready(port)
            with DeploymentWatch(kubeconfig) as watch:
                started = time.perf_counter()
                api.request("PATCH", "/api/v1/namespaces/bench/configmaps/shared",
                            body={"data": {"v": "1"}}, content_type="application/merge-patch+json")
                finished = watch.wait_names(workloads, timeout=120)
    return {"fanout_s": round(finished - started, 3), "workloads": workloads, "writes": workloads}


def main() -> int:
    return scenario_main(__doc__ or "", "fanout.py", "fan-out: 1 ConfigMap used by 500 Deployments",
                         lambda quick: run_once(500))


if __name__ == "__main__":
    raise SystemExit(main())
