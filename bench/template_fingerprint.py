"""One rollout per sync: what the pod-template fingerprint costs each workload informer event.

The workload informer's transform (``WorkloadAdapter.record``) now also digests the pod
template minus the controller's own fields (``syncs.template_fingerprint``), on every event,
status updates included. This times, in-process, the transform of a realistic Deployment
(3 containers with env lists, probes, resources, volumes, 12 template annotations): at a new
generation (the initial list, a spec change: the digest is computed), at the same generation
(a status update: the cached record's digest is kept), without any fingerprint, and the
fingerprint alone; and the bytes a record holds for it.

    python bench/template_fingerprint.py           # 20,000 transforms a run, 3 runs
    python bench/template_fingerprint.py --quick   # 2,000, 1 run

Last line: one JSON object with the medians.
"""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import scenario_main
from gitops_reloader import syncs
from gitops_reloader.kube import workloads
from gitops_reloader.kube.workloads import adapters_for


def container(name: str) -> dict[str, Any]:
    return {
        "name": name, "image": f"registry.example.com/team/{name}:1.27.3",
        "env": [{"name": f"VAR_{i}", "value": f"value-{i}"} for i in range(15)]
        + [{"name": "STAKATER_APP_CONFIG_CONFIGMAP", "value": "0" * 40}],
        "envFrom": [{"configMapRef": {"name": "app-config"}}],
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 10},
        "livenessProbe": {"httpGet": {"path": "/live", "port": 8080}, "periodSeconds": 10},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
    }


def deployment() -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"app": "web", "tier": "frontend"},
                     "annotations": {f"example.com/key-{i}": f"value-{i}" for i in range(12)}},
        "spec": {"containers": [container(n) for n in ("app", "sidecar", "proxy")],
                 "volumes": [{"name": "config", "configMap": {"name": "app-config"}}],
                 "serviceAccountName": "web", "terminationGracePeriodSeconds": 30},
    }
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "bench", "uid": "u-1", "resourceVersion": "1",
                         "generation": 4, "annotations": {"reloader.stakater.com/auto": "true"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template},
            "status": {"observedGeneration": 1, "replicas": 3}}


def timed(adapter: Any, count: int, previous: Any = None) -> float:
    """Microseconds per ``adapter.record`` of a fresh copy of the Deployment."""
    raws = [copy.deepcopy(deployment()) for _ in range(count)]
    start = time.perf_counter()
    for raw in raws:
        adapter.record(raw, previous)
    return (time.perf_counter() - start) / count * 1e6


def run_once(quick: bool) -> dict[str, float]:
    count = 2_000 if quick else 20_000
    adapter = adapters_for()["Deployment"]
    first = timed(adapter, count)  # the initial list, a spec change: the digest is computed
    cached = adapter.record(copy.deepcopy(deployment()))
    status_update = timed(adapter, count, cached)  # same uid and generation: the digest is kept
    original = workloads.template_fingerprint
    workloads.template_fingerprint = lambda template: 0  # type: ignore[assignment]
    try:
        without = timed(adapter, count)
    finally:
        workloads.template_fingerprint = original  # type: ignore[assignment]
    template = deployment()["spec"]["template"]
    start = time.perf_counter()
    for _ in range(count):
        syncs.template_fingerprint(template)
    alone = (time.perf_counter() - start) / count * 1e6
    return {"transform_us_without_fingerprint": without, "transform_us_new_generation": first,
            "transform_us_same_generation": status_update, "fingerprint_us": alone,
            "ratio_new_generation": first / without, "ratio_same_generation": status_update / without,
            "bytes_per_record": float(sys.getsizeof(2**63 - 1))}


if __name__ == "__main__":
    sys.exit(scenario_main(__doc__ or "", "template_fingerprint.py",
                           "pod-template fingerprint per workload event", run_once))
