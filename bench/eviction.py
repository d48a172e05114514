"""Eviction: what one evictor pass costs a workload whose pods are being restarted.

While a workload's eviction waits for a replacement to become Ready, the evictor reads it
every ``--eviction-interval`` (2s): one GET of the workload, one LIST of its pods by label
selector, then the pure choice of the next pod. This times that pass against the API test
server (its own process, over HTTP) for a StatefulSet of 10, 100 and 1,000 pods, the last pod
not Ready (so the pass evicts nothing and writes nothing), and the pure part alone
(``pod_view`` of every pod + ``next_step``), and counts the API requests a pass makes.

    python bench/eviction.py           # 3 runs, 50 passes each size
    python bench/eviction.py --quick   # 1 run, 10 passes

Last line: one JSON object with the medians. Only workloads with an eviction under way are
read; the rest of the cluster costs nothing.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client import CollectorRegistry

from bench.common import (
    api_for,
    apiserver_process,
    load_objects,
    reset_server_requests,
    scenario_main,
    server_requests,
)
from gitops_reloader.clock import SystemClock
from gitops_reloader.config import Rollouts
from gitops_reloader.control.evictor import Evictor
from gitops_reloader.kube.api import MERGE
from gitops_reloader.kube.resources import PODS, STATEFULSETS
from gitops_reloader.kube.workloads import adapters_for, rfc3339
from gitops_reloader.model import ObjectRef
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.rollout.eviction import EVICTION_ANNOTATION, EvictionRecord, next_step, pod_view

SIZES = (10, 100, 1000)


def pods_of(name: str, uid: str, count: int, created: str) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"{name}-{i}", "namespace": "bench", "labels": {"app": name},
                          "creationTimestamp": created,
                          "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name,
                                               "uid": uid, "controller": True}]},
             "spec": {"containers": [{"name": "db", "image": "postgres:16"}]},
             "status": {"phase": "Running", "conditions": [
                 {"type": "Ready", "status": "False" if i == count - 1 else "True"}]}} for i in range(count)]


def run_once(quick: bool) -> dict[str, float]:
    passes = 10 if quick else 50
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, apiserver_process(Path(tmp)) as (url, kubeconfig):
        api = api_for(kubeconfig)
        api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "bench"}})
        adapters = adapters_for()
        since = int(time.time()) - 3600
        evictor = Evictor(api, adapters, Rollouts(), metrics=Metrics(CollectorRegistry()),
                          clock=SystemClock(), normal=lambda *a: None, warning=lambda *a: None)
        for size in SIZES:
            name = f"db{size}"
            created = api.create(STATEFULSETS, "bench", {
                "metadata": {"name": name},
                "spec": {"replicas": size, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                         "updateStrategy": {"type": "OnDelete"},
                         "template": {"metadata": {"labels": {"app": name}},
                                      "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}}}})
            record = EvictionRecord(since, pods=size).encode()
            api.patch(STATEFULSETS, "bench", name,
                      {"metadata": {"annotations": {EVICTION_ANNOTATION: record}}}, content_type=MERGE)
            load_objects(url, "pods", pods_of(name, created["metadata"]["uid"], size, rfc3339(since - 60)))
            ref = ObjectRef("StatefulSet", "bench", name)
            evictor._step(ref)  # the first pass records the progress (one PATCH); the rest only read
            reset_server_requests(url)
            start = time.perf_counter()
            for _ in range(passes):
                evictor._step(ref)  # the pass the evictor thread makes for this workload
            figures[f"pass_ms_{size}_pods"] = (time.perf_counter() - start) / passes * 1e3
            counts = server_requests(url)
            figures[f"requests_per_pass_{size}_pods"] = sum(counts.values()) / passes
            raw = api.list(PODS, namespace="bench", label_selector=f"app={name}", limit=5000)["items"]
            start = time.perf_counter()
            for _ in range(passes):
                views = [v for v in (pod_view(p) for p in raw) if v is not None]
                next_step(views, since, at_once=1, expected=size, by_ordinal=True, now=time.time())
            figures[f"pure_ms_{size}_pods"] = (time.perf_counter() - start) / passes * 1e3
    return figures


if __name__ == "__main__":
    sys.exit(scenario_main(__doc__ or "", "eviction.py", "one evictor pass over a waiting eviction",
                           run_once))
