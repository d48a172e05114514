"""Rollout waves: 1,000 Deployments on one Secret, with a budget of 50 and with no budget.

    python bench/rollout_waves.py              # 1,000 Deployments, each rollout takes 1 s, 1 run
    python bench/rollout_waves.py --quick      # 200 Deployments, budget 10

The Deployment controller is played by ``gitops_reloader.testing.rollouts.DeploymentPlayer``
in this process (status subresource writes: generation observed 50 ms after the spec change,
complete ``--rollout-seconds`` after it). Per configuration: time from the Secret change until
every rollout is complete, the peak number of rollouts under way at once (from the watch
stream), the controller's CPU seconds over that time and its workload writes. Then, in this
process (tracemalloc), the bytes a Deployment's record and tracker entry keep: without the
controller's marker, with it after a complete rollout, and while rolling.
Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubernetes import config as kube_config

from bench.common import (
    api_for,
    apiserver_process,
    controller_process,
    create_all,
    print_table,
    server_requests,
    wait_ready,
)
from gitops_reloader.kube.workloads import DeploymentAdapter
from gitops_reloader.rollout.marker import MARKER_ANNOTATION, parse_marker
from gitops_reloader.rollout.tracker import Tracker
from gitops_reloader.testing.harness import wait_for
from gitops_reloader.testing.rollouts import DeploymentPlayer, status_complete, status_rolling

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def deployment(name: str) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "bench",
                         "annotations": {"secret.reloader.stakater.com/auto": "true"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "nginx",
                                         "envFrom": [{"secretRef": {"name": "db"}}]}]}}}}


def run_once(workloads: int, budget: int, rollout_seconds: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, apiserver_process(Path(tmp)) as (url, kubeconfig):
        api = api_for(kubeconfig)
        create_all(api, [("/api/v1/namespaces/bench/secrets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "bench"},
            "data": {"password": "MA=="}})])
        create_all(api, [("/apis/apps/v1/namespaces/bench/deployments", deployment(f"web-{i:04}"))
                         for i in range(workloads)])
        client = kube_config.new_client_from_config(config_file=str(kubeconfig))
        flags = ["--coalesce-window=0", f"--max-concurrent-rollouts={budget}"]
        with DeploymentPlayer(client, "bench", complete_after=rollout_seconds, writers=4) as player, \
                controller_process(kubeconfig, flags) as (proc, port):
            wait_ready(port)
            wait_for(player.settled, timeout=120, message="initial statuses written")
            patches_before = server_requests(url).get(("patch", "deployments"), 0)
            cpu_before = cpu_seconds(proc.pid)
            started = time.perf_counter()
            api.request("PATCH", "/api/v1/namespaces/bench/secrets/db", body={"data": {"password": "MQ=="}},
                        content_type="application/merge-patch+json")
            wait_for(lambda: len(player.started) == workloads and player.settled(), timeout=900,
                     interval=0.05, message="every rollout complete")
            elapsed = time.perf_counter() - started
            cpu = cpu_seconds(proc.pid) - cpu_before
            writes = server_requests(url).get(("patch", "deployments"), 0) - patches_before
        client.close()
    return {"done_s": round(elapsed, 2), "peak_rolling": player.peak, "controller_cpu_s": round(cpu, 2),
            "workload_patches": writes, "reloaded_once": int(all(g == [2] for g in player.started.values()))}


def bytes_per_workload(marked: bool, rolling: bool, count: int = 5000) -> float:
    """Bytes kept per Deployment (record + tracker entry) after the informer transform."""
    texts = []
    for i in range(count):
        raw = deployment(f"web-{i:05}")
        raw["metadata"].update(resourceVersion=str(1000 + i), generation=2,
                               uid=f"{i:08x}-5f1c-4bd1-9a57-0e3c1d2b4a6f")
        if marked:  # one wave of 50 writes per second, as under a budget of 50
            marker = {"at": 1764120000 + i // 50, "changes": ["bench/Secret/db@3f2a9c81d0e4"]}
            raw["metadata"]["annotations"][MARKER_ANNOTATION] = json.dumps(marker, separators=(",", ":"))
        raw["status"] = status_rolling(2) if rolling else status_complete(2)
        texts.append(json.dumps(raw))
    adapter, tracker, kept = DeploymentAdapter(), Tracker(timeout=600), []
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for text in texts:
        record = adapter.record(json.loads(text))
        kept.append(record)
        tracker.observe(record.ref, parse_marker(record.annotations.get(MARKER_ANNOTATION)), record.rollout,
                        1764120000)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return round((after - before) / count)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workloads", type=int, default=0)
    parser.add_argument("--budget", type=int, default=0)
    parser.add_argument("--rollout-seconds", type=float, default=1.0)
    args = parser.parse_args()
    workloads = args.workloads or (200 if args.quick else 1000)
    budget = args.budget or (10 if args.quick else 50)
    results: dict[str, dict[str, float]] = {
        f"budget {budget}": run_once(workloads, budget, args.rollout_seconds),
        "no budget": run_once(workloads, 0, args.rollout_seconds),
        "bytes per Deployment": {"no marker": bytes_per_workload(False, False),
                                 "marked, complete": bytes_per_workload(True, False),
                                 "marked, rolling": bytes_per_workload(True, True)}}
    command = f"python bench/rollout_waves.py --workloads {workloads} --budget {budget} " \
              f"--rollout-seconds {args.rollout_seconds}"
    rows = [(f"{name}: {key}", str(value))
            for name, figures in results.items() for key, value in figures.items()]
    print_table(f"rollout waves: {workloads} Deployments on one Secret, each rollout "
                f"{args.rollout_seconds} s", rows, command)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
