"""``gitops-reloader status`` on a big cluster: how long the census takes and how long its output is.

    python bench/status_census.py            # 5,000 Deployments over the API; census of 50,000 in process
    python bench/status_census.py --quick    # 1,000 and 10,000

1. In process, the pure :func:`~gitops_reloader.rollout.census.census` over N workloads on one
   Secret change (budget 50): 50 rolling, 1 failed, the rest held behind it (or, without holds,
   waiting in N/50 waves) — its time and the length of its text and JSON output (bounded by
   ``--limit``, default 50).
2. End to end, ``read_census`` (what ``gitops-reloader status`` runs) against the API test
   server in its own process holding M Deployments of which 50 carry a rolling marker, 1 a
   failed one and the rest a stale ``STAKATER_DB_SECRET``: wall time from the first list to
   the report, and the API requests it made.
Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import api_for, apiserver_process, load_objects, print_table, server_requests
from gitops_reloader.config import load_config
from gitops_reloader.hashing import secret_hash
from gitops_reloader.model import ObjectRef
from gitops_reloader.rollout.budget import Budget
from gitops_reloader.rollout.census import Workload, as_dict, census, render_text
from gitops_reloader.rollout.completion import PROGRESS_DEADLINE_EXCEEDED, Phase, RolloutStatus
from gitops_reloader.rollout.marker import Marker
from gitops_reloader.status import read_census

CHANGE = "bench/Secret/db@0123456789ab"
ROLLING = RolloutStatus(Phase.PROGRESSING, "UpdatingReplicas", "0 of 1 updated replicas")
FAILED = RolloutStatus(Phase.FAILED, PROGRESS_DEADLINE_EXCEEDED, "exceeded its progress deadline")


def fleet(count: int, now: float) -> list[Workload]:
    out = [Workload(ObjectRef("Deployment", "bench", "web-00000"), "env-vars",
                    marker=Marker(int(now) - 60, frozenset({CHANGE})), status=FAILED)]
    out += [Workload(ObjectRef("Deployment", "bench", f"web-{i:05}"), "env-vars",
                     marker=Marker(int(now) - 5, frozenset({CHANGE})), status=ROLLING) for i in range(1, 51)]
    out += [Workload(ObjectRef("Deployment", f"bench-{i % 20}", f"web-{i:05}"), "env-vars", i % 7,
                     pending=frozenset({CHANGE})) for i in range(51, count)]
    return out


def pure(count: int) -> dict[str, float]:
    now = time.time()
    workloads = fleet(count, now)
    results: dict[str, float] = {}
    for hold in (True, False):
        started = time.perf_counter()
        report = census(workloads, budget=Budget(50), hold=hold, timeout=600, now=now)
        elapsed = time.perf_counter() - started
        text, data = render_text(report), json.dumps(as_dict(report))
        label = "held" if hold else "waves"
        results |= {f"census_{label}_ms": round(elapsed * 1000, 1),
                    f"text_lines_{label}": len(text.splitlines()),
                    f"json_kb_{label}": round(len(data) / 1024, 1)}
    return results


def deployment(name: str, annotations: dict[str, str], env: str) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "bench",
                         "annotations": {"secret.reloader.stakater.com/auto": "true", **annotations}},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "nginx",
                                         "envFrom": [{"secretRef": {"name": "db"}}],
                                         "env": [{"name": "STAKATER_DB_SECRET", "value": env}]}]}}}}


def end_to_end(count: int) -> dict[str, float]:
    now = int(time.time())
    data = {"password": "MQ=="}
    current = secret_hash(data)
    marker = json.dumps({"at": now, "changes": [f"bench/Secret/db@{current[:12]}"]})
    failed_marker = json.dumps({"at": now - 60, "changes": [f"bench/Secret/db@{current[:12]}"]})
    failed_status = {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 1, "conditions": [
        {"type": "Progressing", "status": "False", "reason": PROGRESS_DEADLINE_EXCEEDED}]}
    items = [deployment("web-00000", {"gitops-reloader.io/rollout": failed_marker}, current)]
    items += [deployment(f"web-{i:05}", {"gitops-reloader.io/rollout": marker}, current)
              for i in range(1, 51)]
    items += [deployment(f"web-{i:05}", {}, "0" * 40) for i in range(51, count)]
    with tempfile.TemporaryDirectory() as tmp, apiserver_process(Path(tmp)) as (url, kubeconfig):
        load_objects(url, "namespaces", [{"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": "bench"}}])
        load_objects(url, "secrets", [{"apiVersion": "v1", "kind": "Secret", "data": data,
                                       "metadata": {"name": "db", "namespace": "bench"}}])
        load_objects(url, "deployments", items, group="apps")
        api = api_for(kubeconfig)
        api.request("PATCH", "/apis/apps/v1/namespaces/bench/deployments/web-00000/status",
                    body={"status": failed_status}, content_type="application/merge-patch+json")
        config = load_config(["--kubeconfig", str(kubeconfig), "--max-concurrent-rollouts=50"])
        before = sum(server_requests(url).values())
        started = time.perf_counter()
        report = read_census(api, config)
        elapsed = time.perf_counter() - started
        requests = sum(server_requests(url).values()) - before
    return {"read_census_s": round(elapsed, 2), "api_requests": requests,
            **report.totals}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    in_process, over_api = (10_000, 1_000) if args.quick else (50_000, 5_000)
    results = {"workloads_in_process": in_process, **pure(in_process),
               "deployments_over_api": over_api, **end_to_end(over_api)}
    command = "python bench/status_census.py" + (" --quick" if args.quick else "")
    print_table("gitops-reloader status: the census on a big cluster (budget 50, --limit 50)",
                [(k, str(v)) for k, v in results.items()], command)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
