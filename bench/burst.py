"""Burst: N Secrets changed at once, each used by one Deployment; none dropped, rate within the limit.

    python bench/burst.py            # N=3,000, median of 3 runs
    python bench/burst.py --quick    # N=1,000, 1 run

The controller runs with its default limits (--write-qps=200, --write-burst=300). The
highest number of Deployment writes seen in any one-second window must stay within
qps + burst.
Last line: one JSON object with burst_s, burst_dropped, max_writes_per_s, limit_per_s.
"""

from __future__ import annotations

import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    DeploymentWatch,
    api_for,
    apiserver_process,
    controller_process,
    create_all,
    scenario_main,
    wait_ready,
)

QPS, BURST = 200, 300


def secret_body(name: str, value: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "bench"},
            "stringData": {"password": value}}


def deployment_using_secret(name: str, secret: str) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "bench",
                         "annotations": {"reloader.stakater.com/auto": "true"}},
            "spec": {"selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "x",
                                         "envFrom": [{"secretRef": {"name": secret}}]}]}}}}


def run_once(count: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, apiserver_process(Path(tmp)) as (_, kubeconfig):
        api = api_for(kubeconfig)
        create_all(api, [("/api/v1/namespaces/bench/secrets", secret_body(f"s-{i}", "0"))
                         for i in range(count)])
        create_all(api, [("/apis/apps/v1/namespaces/bench/deployments",
                          deployment_using_secret(f"web-{i}", f"s-{i}")) for i in range(count)])
        with controller_process(kubeconfig, ["--coalesce-window=0"]) as (_, port):
            wait_ready(port, timeout=300)
            with DeploymentWatch(kubeconfig) as watch:
                started = time.perf_counter()
                with ThreadPoolExecutor(16) as pool:
                    list(pool.map(lambda i: api.request(
                        "PATCH", f"/api/v1/namespaces/bench/secrets/s-{i}",
                        body={"stringData": {"password": "1"}},
                        content_type="application/merge-patch+json"), range(count)))
                try:
                    finished = watch.wait_names(count, timeout=300)
                except RuntimeError:
                    finished = time.perf_counter()
                times = sorted(t for _, t in watch.times)
                reloaded = len({n for n, _ in watch.times})
    window_max = 0
    left = 0
    for right, moment in enumerate(times):
        while moment - times[left] >= 1.0:
            left += 1
        window_max = max(window_max, right - left + 1)
    return {"burst_s": round(finished - started, 3), "burst_dropped": count - reloaded,
            "max_writes_per_s": window_max, "limit_per_s": QPS + BURST}


def main() -> int:
    return scenario_main(
        __doc__ or "", "burst.py",
        "burst: Secrets changed at once (3,000; quick 1,000)",
        lambda quick: run_once(1000 if quick else 3000),
    )


if __name__ == "__main__":
    raise SystemExit(main())
