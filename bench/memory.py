"""Controller memory with a large payload: steady RSS, peak RSS during the initial list, time to ready.

The API test server (its own process) holds S Secrets of 20 KB each, H Helm release
Secrets (``type: helm.sh/release.v1``) of 100 KB, C ConfigMaps and D Deployments, seeded
through its bulk-load path (``POST /_testing/load``). The controller (``gitops-reloader
run``) starts in its own process and lists everything. Peak RSS is the kernel's
high-water mark (``VmHWM``); steady RSS is ``VmRSS`` a few seconds after ready.
``bytes_per_object`` is (steady RSS - the floor) / tracked objects, the floor being the
steady RSS of the same controller against an empty server; Helm release Secrets are not
tracked (the default ``--ignore-secret-types`` field selector keeps them on the server,
and ``helm_bytes_skipped_mb`` is their JSON size as created).

    python bench/memory.py              # 10,000 Secrets x 20 KB, 10,000 ConfigMaps, 2,000 Deployments
    python bench/memory.py --quick      # 2,000 Secrets, 2,000 ConfigMaps, 400 Deployments
    python bench/memory.py --scale big  # 100,000 Secrets x 20 KB + 5,000 Helm releases x 100 KB,
                                        # 100,000 ConfigMaps, 20,000 Deployments (1 run)

Last line: one JSON object with steady_rss_mb, peak_rss_mb, ready_s, payload_mb,
bytes_per_object (and apiserver_rss_mb, helm_bytes_skipped_mb, floor_rss_mb).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    apiserver_popen,
    configmap_body,
    controller_process,
    deployment_body,
    load_objects,
    rss_mb,
    scenario_main,
    wait_ready,
)

SECRET_BYTES = 20 * 1024
HELM_BYTES = 100 * 1024
SETTLE_S = 3.0


@dataclass(frozen=True)
class Scale:
    secrets: int
    helm_releases: int
    configmaps: int
    deployments: int
    namespaces: int


SCALES = {
    "quick": Scale(2000, 0, 2000, 400, 1),
    "default": Scale(10_000, 0, 10_000, 2000, 1),
    "big": Scale(100_000, 5000, 100_000, 20_000, 20),
}


def _namespace(i: int, scale: Scale) -> str:
    return "bench" if scale.namespaces == 1 else f"bench-{i % scale.namespaces:02d}"


def _secrets(scale: Scale) -> Iterator[dict[str, Any]]:
    payload = base64.b64encode(os.urandom(SECRET_BYTES)).decode()
    for i in range(scale.secrets):
        yield {"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": f"s-{i}", "namespace": _namespace(i, scale),
                            "labels": {"app.kubernetes.io/name": f"svc-{i % 500}"}},
               "data": {"blob": payload[: len(payload) - 8] + f"{i:08d}"}}


def _helm_releases(scale: Scale, sizes: list[int]) -> Iterator[dict[str, Any]]:
    payload = base64.b64encode(os.urandom(HELM_BYTES)).decode()
    for i in range(scale.helm_releases):
        release, revision = f"rel-{i // 10}", i % 10 + 1
        item = {"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                "metadata": {"name": f"sh.helm.release.v1.{release}.v{revision}",
                             "namespace": _namespace(i, scale),
                             "labels": {"owner": "helm", "name": release, "status": "superseded",
                                        "version": str(revision)}},
                "data": {"release": payload[: len(payload) - 8] + f"{i:08d}"}}
        sizes.append(len(json.dumps(item)))
        yield item


def _configmaps(scale: Scale) -> Iterator[dict[str, Any]]:
    for i in range(scale.configmaps):
        yield configmap_body(f"cfg-{i}", {"v": str(i), "text": "x" * 512},
                             namespace=_namespace(i, scale))


def _deployments(scale: Scale) -> Iterator[dict[str, Any]]:
    for i in range(scale.deployments):
        yield deployment_body(f"web-{i}", f"cfg-{i}", namespace=_namespace(i, scale))


def _controller_rss(kubeconfig: Path) -> tuple[float, float, float]:
    """(ready seconds, steady RSS, peak RSS) of one controller run."""
    with controller_process(kubeconfig, []) as (proc, port):
        ready_s = wait_ready(port, timeout=600)
        time.sleep(SETTLE_S)
        return ready_s, rss_mb(proc.pid, "VmRSS"), rss_mb(proc.pid, "VmHWM")


def run_once(scale: Scale) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, \
            apiserver_popen(Path(tmp), "--history-size", "1000") as (server, url, kubeconfig):
        _, floor, _ = _controller_rss(kubeconfig)
        namespaces = sorted({_namespace(i, scale) for i in range(scale.namespaces)})
        load_objects(url, "namespaces", ({"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": ns}} for ns in namespaces))
        load_objects(url, "secrets", _secrets(scale), chunk=200)
        helm_sizes: list[int] = []
        load_objects(url, "secrets", _helm_releases(scale, helm_sizes), chunk=50)
        load_objects(url, "configmaps", _configmaps(scale), chunk=1000)
        load_objects(url, "deployments", _deployments(scale), group="apps", chunk=1000)
        apiserver_rss = rss_mb(server.pid, "VmRSS")
        ready_s, steady, peak = _controller_rss(kubeconfig)
    tracked = scale.secrets + scale.configmaps + scale.deployments
    return {"steady_rss_mb": round(steady, 1), "peak_rss_mb": round(peak, 1),
            "ready_s": round(ready_s, 2), "payload_mb": round(scale.secrets * SECRET_BYTES / 2**20, 1),
            "bytes_per_object": round((steady - floor) * 2**20 / tracked),
            "floor_rss_mb": round(floor, 1), "apiserver_rss_mb": round(apiserver_rss, 1),
            "helm_bytes_skipped_mb": round(sum(helm_sizes) / 2**20, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--scale", choices=("default", "big"), default="default")
    args, rest = parser.parse_known_args()
    if args.scale == "big":
        title = ("memory: 100,000 Secrets x 20 KB + 5,000 Helm releases x 100 KB, 100,000 ConfigMaps, "
                 "20,000 Deployments in 20 namespaces")
        return scenario_main(__doc__ or "", "memory.py", title,
                             lambda quick: run_once(SCALES["quick" if quick else "big"]),
                             argv=rest or ["--runs", "1"], options=["--scale", "big"])
    return scenario_main(
        __doc__ or "", "memory.py",
        "memory: 20 KB Secrets, ConfigMaps, Deployments (10,000/10,000/2,000; quick 2,000/2,000/400)",
        lambda quick: run_once(SCALES["quick" if quick else "default"]), argv=rest,
    )


if __name__ == "__main__":
    raise SystemExit(main())
