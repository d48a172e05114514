"""No-op: label-only updates and identical re-applies of ConfigMaps and Secrets write nothing.

    python bench/noop.py            # 10,000 updates (5,000 label-only + 5,000 re-applies), 3 runs
    python bench/noop.py --quick    # 2,000 updates, 1 run

Last line: one JSON object with noop_writes, updates, lists.
"""

from __future__ import annotations

import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    api_for,
    apiserver_process,
    configmap_body,
    controller_process,
    create_all,
    deployment_body,
    reset_server_requests,
    scenario_main,
    server_requests,
    wait_ready,
)

OBJECTS = 500


def run_once(updates: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, apiserver_process(Path(tmp)) as (url, kubeconfig):
        api = api_for(kubeconfig)
        create_all(api, [("/api/v1/namespaces/bench/configmaps", configmap_body(f"cfg-{i}", {"v": "0"}))
                         for i in range(OBJECTS)])
        create_all(api, [("/api/v1/namespaces/bench/secrets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"s-{i}", "namespace": "bench"},
            "stringData": {"p": "0"}}) for i in range(OBJECTS)])
        create_all(api, [("/apis/apps/v1/namespaces/bench/deployments", deployment_body(
            f"web-{i}", f"cfg-{i}", annotations={"reloader.stakater.com/auto": "true",
                                                 "secret.reloader.stakater.com/reload": f"s-{i}"}))
            for i in range(OBJECTS)])
        with controller_process(kubeconfig, ["--coalesce-window=0"]) as (_, port):
            wait_ready(port)
            reset_server_requests(url)

            def touch(n: int) -> None:
                i = n % OBJECTS
                kind, name = ("configmaps", f"cfg-{i}") if n % 4 < 2 else ("secrets", f"s-{i}")
                if n % 2:  # label-only change
                    body = {"metadata": {"labels": {"touched": str(n)}}}
                else:  # identical data re-applied
                    body = {"data": {"v": "0"}} if kind == "configmaps" else {"stringData": {"p": "0"}}
                api.request("PATCH", f"/api/v1/namespaces/bench/{kind}/{name}", body=body,
                            content_type="application/merge-patch+json")

            with ThreadPoolExecutor(8) as pool:
                list(pool.map(touch, range(updates)))
            time.sleep(2)
            counts = server_requests(url)
    writes = sum(n for (verb, res), n in counts.items()
                 if res in ("deployments", "events") and verb in ("patch", "update", "create", "delete"))
    lists = sum(n for (verb, _), n in counts.items() if verb == "list")
    return {"noop_writes": writes, "updates": updates, "lists": lists}


def main() -> int:
    return scenario_main(
        __doc__ or "", "noop.py",
        "no-op: label-only updates and identical re-applies (10,000; quick 2,000)",
        lambda quick: run_once(2000 if quick else 10_000),
    )


if __name__ == "__main__":
    raise SystemExit(main())
