"""Restarts: the cost of finding what was under way (``control/resume.py``) when an instance starts.

    python bench/restart_resume.py             # 5,000 Deployments on one Secret, 3 runs
    python bench/restart_resume.py --quick     # 1,000 Deployments, 1 run

The cluster (the API test server in its own process) holds one Secret and N Deployments using
it, as a controller killed in the middle of a wave leaves them: the first ``--wave`` carry the
rollout marker of the current Secret and record its hash, the others record the previous hash.
In this process the controller's caches are synced (``start(activate=False)``), then
:meth:`Resumer.run` is timed: the pass over the workloads that derives the changes in flight
and the workloads still waiting. Baseline: the same cluster without any marker (nothing in
flight: one pass over the markers). Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes import config as kube_config

from bench.common import apiserver_process, load_objects, print_table
from gitops_reloader.app import App
from gitops_reloader.config import load_config
from gitops_reloader.hashing import secret_hash
from gitops_reloader.rollout.marker import MARKER_ANNOTATION

OLD = {"password": "MA=="}
NEW = {"password": "MQ=="}


def deployment(name: str, recorded: str, marker: str | None) -> dict:
    labels = {"app": name}
    annotations = {"secret.reloader.stakater.com/auto": "true"}
    if marker is not None:
        annotations[MARKER_ANNOTATION] = marker
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "bench", "annotations": annotations},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "nginx",
                                         "envFrom": [{"secretRef": {"name": "db"}}],
                                         "env": [{"name": "STAKATER_DB_SECRET", "value": recorded}]}]}}}}


def run_once(workloads: int, wave: int, marked: bool) -> dict[str, float]:
    old, new = secret_hash(OLD), secret_hash(NEW)
    marker = json.dumps({"at": int(time.time()) - 5, "changes": [f"bench/Secret/db@{new[:12]}"]},
                        separators=(",", ":"))
    with tempfile.TemporaryDirectory() as tmp, apiserver_process(Path(tmp)) as (url, kubeconfig):
        load_objects(url, "secrets", [{"apiVersion": "v1", "kind": "Secret", "data": NEW,
                                       "metadata": {"name": "db", "namespace": "bench"}}])
        load_objects(url, "deployments", (
            deployment(f"web-{i:05}", new if i < wave else old, marker if marked and i < wave else None)
            for i in range(workloads)), group="apps")
        client = kube_config.new_client_from_config(config_file=str(kubeconfig))
        config = load_config(["--coalesce-window=0", "--max-concurrent-rollouts=50"],
                             environ={"HOME": tmp})
        app = App(config, api_client=client, serve_http=False)
        controller = app.controller
        controller.start(activate=False)
        try:
            began = time.perf_counter()
            resumed = controller.resumer.run()
            seconds = time.perf_counter() - began
        finally:
            controller.stop()
            client.close()
    return {"seconds": seconds, "waiting": float(len(resumed.pending)), "in_flight": float(resumed.in_flight)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=5000)
    parser.add_argument("--wave", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.workloads, args.runs = 1000, 1
    results: dict[str, dict[str, float]] = {}
    for label, marked in (("killed mid-wave", True), ("no marker (baseline)", False)):
        runs = [run_once(args.workloads, args.wave, marked) for _ in range(args.runs)]
        results[label] = {"seconds": statistics.median(r["seconds"] for r in runs),
                          "waiting": runs[0]["waiting"], "in_flight": runs[0]["in_flight"]}
    rows = [(f"{label}: Resumer.run (median of {args.runs})",
             f"{r['seconds'] * 1000:.0f} ms, {r['in_flight']:.0f} change(s) in flight, "
             f"{r['waiting']:.0f} workloads waiting") for label, r in results.items()]
    print_table(f"Restart: {args.workloads} Deployments on one Secret, the first {args.wave} rolled",
                rows, "python bench/restart_resume.py" + (" --quick" if args.quick else ""))
    print(json.dumps({"workloads": args.workloads, "wave": args.wave, **{
        label: r for label, r in results.items()}}))


if __name__ == "__main__":
    main()
