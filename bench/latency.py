"""Latency from a ConfigMap write to the workload write, and API requests per change.

N Deployments each use their own ConfigMap (N of each). The API test server and the
controller (``gitops-reloader run --coalesce-window=0``) each run in their own process.
One change at a time: the clock starts before the ConfigMap PUT and stops when this
process's watch on Deployments delivers the MODIFIED event of the matching Deployment.
Server-side request counters give writes and lists per change.

    python bench/latency.py            # 1,000 workloads, 1,000 changes, 3 runs
    python bench/latency.py --quick    # 1,000 workloads, 200 changes, 1 run (< 1 min)
    python bench/latency.py --workloads 20000 --runs 1   # the big scale's workload count

Objects are seeded through the API test server's bulk-load path (``POST /_testing/load``).

The last line is one JSON object: p50_ms, p95_ms, p99_ms, writes_per_change, lists_per_change.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    api_for,
    apiserver_process,
    configmap_body,
    controller_process,
    deployment_body,
    load_objects,
    median,
    percentile,
    print_table,
    reset_server_requests,
    server_requests,
    wait_ready,
)
from gitops_reloader.kube.resources import DEPLOYMENTS


def run_once(workloads: int, changes: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, apiserver_process(Path(tmp)) as (url, kubeconfig):
        api = api_for(kubeconfig)
        load_objects(url, "configmaps", (configmap_body(f"cfg-{i}", {"v": "0"}) for i in range(workloads)))
        load_objects(url, "deployments", (deployment_body(f"web-{i}", f"cfg-{i}") for i in range(workloads)),
                     group="apps")
        with controller_process(kubeconfig, ["--coalesce-window=0"]) as (_, port):
            wait_ready(port)
            arrivals: queue.Queue[tuple[str, float]] = queue.Queue()
            watch_api = api_for(kubeconfig, pool=2)
            start_rv = str(watch_api.list(DEPLOYMENTS, namespace="bench", limit=1)["metadata"]
                           ["resourceVersion"])
            stream = watch_api.watch(DEPLOYMENTS, namespace="bench", resource_version=start_rv,
                                     timeout_seconds=600)

            def watch() -> None:
                for event in stream:
                    if event.get("type") == "MODIFIED":
                        arrivals.put((event["object"]["metadata"]["name"], time.perf_counter()))

            threading.Thread(target=watch, daemon=True).start()
            time.sleep(0.5)
            reset_server_requests(url)
            latencies: list[float] = []
            for i in range(changes):
                index = i % workloads
                body = {"data": {"v": f"change-{i}"}}
                started = time.perf_counter()
                api.request("PATCH", f"/api/v1/namespaces/bench/configmaps/cfg-{index}", body=body,
                            content_type="application/merge-patch+json")
                while True:
                    name, arrived = arrivals.get(timeout=30)
                    if name == f"web-{index}":
                        latencies.append((arrived - started) * 1000)
                        break
            time.sleep(0.3)
            counts = server_requests(url)
            stream.close()
        writes = sum(n for (verb, res), n in counts.items()
                     if res == "deployments" and verb in ("patch", "update", "create", "delete"))
        lists = sum(n for (verb, _), n in counts.items() if verb == "list")
        by_verb = {f"{verb} {res}": round(n / changes, 3) for (verb, res), n in sorted(counts.items())}
        print("API requests per change, by verb and resource (the benchmark's own PATCH of the "
              "ConfigMap and its watch included):", json.dumps(by_verb))
        return {
            "p50_ms": percentile(latencies, 50), "p95_ms": percentile(latencies, 95),
            "p99_ms": percentile(latencies, 99),
            "writes_per_change": writes / changes, "lists_per_change": lists / changes,
        }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="one short run (< 1 minute)")
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=0, help="default 1000 (quick: 200)")
    parser.add_argument("--runs", type=int, default=0, help="default 3 (quick: 1)")
    args = parser.parse_args()
    changes = args.changes or (200 if args.quick else 1000)
    runs = args.runs or (1 if args.quick else 3)
    results = [run_once(args.workloads, changes) for _ in range(runs)]
    summary = {key: round(median([r[key] for r in results]), 3) for key in results[0]}
    print_table(
        f"change → workload write latency ({args.workloads} Deployments, {changes} changes, "
        f"median of {runs} run(s))",
        [(k, str(v)) for k, v in summary.items()],
        "python bench/latency.py" + (f" --workloads {args.workloads}" if args.workloads != 1000 else "")
        + (f" --runs {args.runs}" if args.runs else "") + (" --quick" if args.quick else ""),
    )
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
