"""Secrets Store CSI rotation: W Deployments x P pods each report new object versions.

    python bench/csi_rotation.py           # W=100, P=3, median of 3 runs
    python bench/csi_rotation.py --quick   # W=30, P=3, 1 run

Every pod's SecretProviderClassPodStatus is PUT with new versions, as the driver does on
rotation, all in one burst (the controller runs with its default 2 s coalescing window).
Reported: time from the first PUT until every Deployment is written, Deployment writes
(want exactly W: one per workload however many pods report), and the owner lookups the
controller made (pod and ReplicaSet GETs; each link is read once and cached).
Last line: one JSON object.
"""

from __future__ import annotations

import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    DeploymentWatch,
    api_for,
    apiserver_process,
    controller_process,
    create_all,
    reset_server_requests,
    scenario_main,
    server_requests,
    wait_ready,
)

NS = "bench"
CSI = f"/apis/secrets-store.csi.x-k8s.io/v1/namespaces/{NS}"


def _owner(kind: str, name: str, api_version: str = "apps/v1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}


def _pod_spec() -> dict[str, Any]:
    volume = {"driver": "secrets-store.csi.k8s.io", "volumeAttributes": {"secretProviderClass": "vault"}}
    return {"containers": [{"name": "app", "image": "nginx",
                            "volumeMounts": [{"name": "secrets", "mountPath": "/mnt"}]}],
            "volumes": [{"name": "secrets", "csi": volume}]}


def _objects(workloads: int, pods: int) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for w in range(workloads):
        name, rs = f"web-{w}", f"web-{w}-7f9c"
        labels = {"app": name}
        out.append((f"/apis/apps/v1/namespaces/{NS}/deployments", {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS,
                         "annotations": {"secretproviderclass.reloader.stakater.com/auto": "true"}},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
                                                                       "spec": _pod_spec()}},
        }))
        out.append((f"/apis/apps/v1/namespaces/{NS}/replicasets", {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": rs, "namespace": NS, "ownerReferences": [_owner("Deployment", name)]},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
                     "spec": {"containers": [{"name": "app", "image": "nginx"}]}}},
        }))
        for p in range(pods):
            out.append((f"/api/v1/namespaces/{NS}/pods", {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{rs}-{p}", "namespace": NS,
                             "ownerReferences": [_owner("ReplicaSet", rs)]},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            }))
    return out


def _status(pod: str, version: str) -> dict[str, Any]:
    return {"apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClassPodStatus",
            "metadata": {"name": f"{pod}-{NS}-vault", "namespace": NS},
            "status": {"podName": pod, "secretProviderClassName": "vault", "mounted": True,
                       "objects": [{"id": "secret/data/db", "version": version}]}}


def run_once(workloads: int, pods: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, apiserver_process(Path(tmp)) as (url, kubeconfig):
        api = api_for(kubeconfig)
        create_all(api, [(f"{CSI}/secretproviderclasses", {
            "apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClass",
            "metadata": {"name": "vault", "namespace": NS}, "spec": {"provider": "vault"}})])
        create_all(api, _objects(workloads, pods))
        names = [f"web-{w}-7f9c-{p}" for w in range(workloads) for p in range(pods)]
        create_all(api, [(f"{CSI}/secretproviderclasspodstatuses", _status(n, "1")) for n in names])
        with controller_process(kubeconfig, ["--enable-csi-integration"]) as (_, port):
            wait_ready(port)
            reset_server_requests(url)
            with DeploymentWatch(kubeconfig) as watch:
                started = time.perf_counter()

                def rotate(pod: str) -> None:
                    path = f"{CSI}/secretproviderclasspodstatuses/{pod}-{NS}-vault"
                    body = api.request("GET", path)
                    body["status"]["objects"] = [{"id": "secret/data/db", "version": "2"}]
                    api.request("PUT", path, body=body)

                with ThreadPoolExecutor(16) as pool:
                    list(pool.map(rotate, names))
                finished = watch.wait_names(workloads, timeout=300)
                time.sleep(3.0)  # a late duplicate write would land within the window
                writes = len(watch.times)
            counts = server_requests(url)
    return {"rotation_to_all_written_s": round(finished - started, 3), "workloads": workloads,
            "pod_statuses": len(names), "deployment_writes": writes,
            "pod_gets": counts.get(("get", "pods"), 0),
            "replicaset_gets": counts.get(("get", "replicasets"), 0)}


def main() -> int:
    return scenario_main(__doc__ or "", "csi_rotation.py",
                         "CSI rotation: every pod of W Deployments reports new versions",
                         lambda quick: run_once(30 if quick else 100, 3))


if __name__ == "__main__":
    raise SystemExit(main())
