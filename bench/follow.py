"""The git follow-up at scale: one follow round over N followed workloads.

    python bench/follow.py --workloads 5000          # 5,000 followed Deployments, 10 Kustomizations
    python bench/follow.py --workloads 500 --reads api

The API test server runs in its own process with N Deployments in namespace ``bench``,
each deployed by one of ``--engines`` Flux Kustomizations (``kustomize.toolkit.fluxcd.io``
labels) and carrying a committed digest in its pod template, its rollout under way (no
status yet: it stays ``in-template``, so every round reads everything). In this process:
the controller's workload informers (:class:`~gitops_reloader.control.caches.Caches`) and
a :class:`~gitops_reloader.control.follower.Follower` following every workload. Per mode,
``--rounds`` rounds of :meth:`Follower.tick` (the thread never ticks by itself): the
median wall and CPU seconds of one round (CPU: this process, not the API server) and the
GETs of one round from the API server's request counter (``/_testing/requests``).

Modes (``--reads``): ``cache`` reads workloads from the informer caches (what the
controller does); ``api`` reads each with a GET (what ``explain`` does, and what every
round did before issue 28). Then (tracemalloc) the bytes a Deployment's cached record
keeps with and without a digest in its template (the record keeps the rollout verdict of
a followed workload). Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client import CollectorRegistry

from bench.common import (
    api_for,
    apiserver_process,
    load_objects,
    print_table,
    reset_server_requests,
    server_requests,
)
from gitops_reloader.config import load_config
from gitops_reloader.control.caches import Caches
from gitops_reloader.control.follower import Follower
from gitops_reloader.gitops.locate import Location, Method
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.workloads import adapters_for
from gitops_reloader.model import CONFIG_HASH_KEY, ObjectRef, ReloadRequest
from gitops_reloader.observability.metrics import Metrics

DIGEST = "d" * 64
COMMIT = "c" * 40
FLUX = "kustomize.toolkit.fluxcd.io"


def deployment(index: int, engines: int, key: str = CONFIG_HASH_KEY) -> dict[str, Any]:
    labels = {"app": f"web-{index}"}
    template_annotations = {key: DIGEST}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": f"web-{index}", "namespace": "bench",
                     "labels": {f"{FLUX}/name": f"apps-{index % engines}",
                                f"{FLUX}/namespace": "flux-system"},
                     "annotations": {"gitops-reloader.io/sink": "git",
                                     "configmap.reloader.stakater.com/reload": "app-config"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels, "annotations": template_annotations},
            "spec": {"containers": [{"name": "app", "image": "nginx",
                                     "envFrom": [{"configMapRef": {"name": "app-config"}}]}]}}},
    }


def kustomization(index: int) -> dict[str, Any]:
    return {"apiVersion": f"{FLUX}/v1", "kind": "Kustomization",
            "metadata": {"name": f"apps-{index}", "namespace": "flux-system"},
            "spec": {"interval": "10m", "path": f"./apps/{index}", "prune": True,
                     "sourceRef": {"kind": "GitRepository", "name": "apps"}}}


def started_caches(api: KubeApi, count: int) -> Caches:
    """The controller's workload informers, synced (the Deployment informer holds ``count``)."""
    caches = Caches(load_config([]), api, adapters_for())
    caches.build(on_source=lambda event: None, on_workload=lambda event: None)
    for informer in caches.workload_informers["Deployment"]:
        informer.start()
        informer.wait_synced(300)
    deadline = time.monotonic() + 300
    while len(caches.workloads()) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    return caches


def follower_over(api: KubeApi, caches: Caches, count: int, *, cached: bool) -> Follower:
    follower = Follower(api=api, repositories={}, metrics=Metrics(CollectorRegistry()), recorder=None,
                        argocd_namespace="argocd", timeout=3600.0, interval=3600.0,
                        workloads=caches if cached else None)
    for index in range(count):
        record = caches.workload(ObjectRef("Deployment", "bench", f"web-{index}"))
        assert record is not None, f"web-{index} not cached"
        location = Location("apps", f"apps/web-{index}/deployment.yaml", 0, None, Method.SCAN)
        follower.follow(ReloadRequest(record.ref, record, (), 0), location, DIGEST, COMMIT, sink="git")
    return follower


def one_mode(url: str, api: KubeApi, caches: Caches, count: int, rounds: int, *,
             cached: bool) -> dict[str, float]:
    follower = follower_over(api, caches, count, cached=cached)
    walls, cpus, workload_gets, engine_gets = [], [], [], []
    try:
        for _ in range(rounds):
            reset_server_requests(url)
            wall, cpu = time.perf_counter(), time.process_time()
            follower.tick()
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
            requests = server_requests(url)
            workload_gets.append(requests.get(("get", "deployments"), 0))
            engine_gets.append(requests.get(("get", "kustomizations"), 0))
        stages = {entry.state.stage.value if (entry := follower.state_of(
            ObjectRef("Deployment", "bench", f"web-{index}"))) else None for index in range(count)}
        assert stages == {"in-template"}, stages  # every workload read and judged each round
    finally:
        follower.stop()
    return {"round_wall_s": statistics.median(walls), "round_cpu_s": statistics.median(cpus),
            "workload_gets": statistics.median(workload_gets), "engine_gets": statistics.median(engine_gets)}


def record_bytes(engines: int) -> dict[str, float]:
    """Bytes one cached Deployment record keeps: a template annotation as long as the digest
    under another key, and the digest itself (the difference: the rollout verdict kept)."""
    adapter = adapters_for()["Deployment"]
    out: dict[str, float] = {}
    for label, key in (("record_bytes_plain", "example.com/other"),
                       ("record_bytes_followed", CONFIG_HASH_KEY)):
        bodies = [deployment(i, engines, key) for i in range(2000)]
        for body in bodies:
            body["status"] = {"observedGeneration": 1, "replicas": 3, "updatedReplicas": 2}
            body["metadata"].update(generation=1, uid=f"u-{id(body)}", resourceVersion="1")
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        records = [adapter.record(body) for body in bodies]
        del bodies
        gc.collect()
        out[label] = round((tracemalloc.get_traced_memory()[0] - before) / len(records))
        tracemalloc.stop()
        del records
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", type=int, default=5000)
    parser.add_argument("--engines", type=int, default=10, help="Kustomizations the workloads spread over")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reads", choices=("both", "cache", "api"), default="both")
    args = parser.parse_args()
    count = args.workloads
    with tempfile.TemporaryDirectory() as tmp, apiserver_process(Path(tmp)) as (url, kubeconfig):
        api = api_for(kubeconfig)
        load_objects(url, "namespaces", [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                                         for n in ("bench", "flux-system")])
        load_objects(url, "kustomizations", [kustomization(i) for i in range(args.engines)],
                     group=FLUX, version="v1")
        load_objects(url, "deployments", (deployment(i, args.engines) for i in range(count)),
                     group="apps", version="v1")
        caches = started_caches(api, count)
        rows: dict[str, float] = {"workloads": count, "engines": args.engines}
        try:
            for mode in (("cache", "api") if args.reads == "both" else (args.reads,)):
                figures = one_mode(url, api, caches, count, args.rounds, cached=mode == "cache")
                rows.update({f"{mode}_{key}": round(value, 4) for key, value in figures.items()})
        finally:
            for informer in caches.informers():
                informer.stop()
    rows.update(record_bytes(args.engines))
    command = (f"python bench/follow.py --workloads {count} --engines {args.engines} --rounds {args.rounds}"
               + (f" --reads {args.reads}" if args.reads != "both" else ""))
    print_table(f"git follow-up: one round over {count} followed workloads (median of {args.rounds})",
                [(k, str(v)) for k, v in rows.items()], command)
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
