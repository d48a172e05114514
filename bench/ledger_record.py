"""The ledger record at fleet scale: one change held by a window for every reader of a ConfigMap.

    python bench/ledger_record.py            # 50,000 Deployments, 1 run
    python bench/ledger_record.py --quick    # 5,000

The API test server runs as its own process, seeded with one ConfigMap and N Deployments reading
it, none ever reloaded (nothing recorded on them). The controller runs in this process with a
default maintenance window that is closed now; the ConfigMap changes and every Deployment owes
the change, held by the window. The controller stops (the record is written) and a second one
starts and reads it back. Measured: the record's bytes (and what one entry per workload, the
encoding before shared changes, would need), the second instance's start until every reader
is held again (caches synced, record read, readers found in the cluster), the restore step alone
(read, readers found, checked against the cluster), and the process's peak RSS.

Last line: one JSON object with the medians.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import apiserver_process, configmap_body, deployment_body, load_objects, scenario_main
from gitops_reloader import ledger
from gitops_reloader.app import App
from gitops_reloader.config import load_config
from gitops_reloader.control.restore import readers_of
from gitops_reloader.kube.client import load_api_client
from gitops_reloader.kube.resources import CONFIGMAPS
from gitops_reloader.ledger import RECORD_KEY, encode, read_record


def closed_window(path: Path) -> str:
    """A daily one-hour window twelve hours from now: closed for the whole run."""
    hour = (datetime.now(UTC).hour + 12) % 24
    path.write_text(f'windows:\n  - name: later\n    schedule: "0 {hour} * * *"\n    timeZone: UTC\n'
                    f"    duration: 1h\ndefault: later\n")
    return f"--reload-windows-config={path}"


def wait(predicate, timeout: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out")
        time.sleep(0.2)


def run_once(count: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, apiserver_process(Path(tmp)) as (url, kubeconfig):
        load_objects(url, "configmaps", [configmap_body("shared", {"v": "0"})])
        load_objects(url, "deployments", [deployment_body(f"web-{i:05}", "shared") for i in range(count)],
                     group="apps")
        flags = ["--kubeconfig", str(kubeconfig), "--permission-check=off", "--coalesce-window=0",
                 closed_window(Path(tmp) / "windows.yaml")]
        config = load_config(flags, environ={"HOME": tmp})
        api_client = load_api_client(str(kubeconfig))
        first = App(config, api_client=api_client, serve_http=False)
        first.start()
        try:
            first.controller.api.patch(CONFIGMAPS, "bench", "shared", {"data": {"v": "1"}})
            wait(lambda: first.controller.ledger.reasons() == {"window": count}, 1800)
            entries = first.controller.ledger.entries()
        finally:
            first.stop()
        stored = first.controller.api.get(CONFIGMAPS, "default", config.runtime.failure_record)
        record_bytes = len(stored["data"][RECORD_KEY].encode())
        shared_at, ledger.SHARE_AT = ledger.SHARE_AT, count + 1  # one entry per workload, unbounded
        per_workload = len(encode(entries, limit=1 << 40)[RECORD_KEY].encode())
        ledger.SHARE_AT = shared_at

        second = App(config, api_client=api_client, serve_http=False)
        started = time.perf_counter()
        second.start()
        try:
            wait(lambda: second.controller.ledger.reasons() == {"window": count}, 1800)
            held_again = time.perf_counter() - started
            controller = second.controller
            restore = time.perf_counter()
            record = read_record(stored["data"], now=time.time())
            readers = [e for change in record.shared for e in readers_of(
                change, caches=controller.caches, index=controller.index, monotonic=time.monotonic(),
                wall=time.time())]
            restore = time.perf_counter() - restore
        finally:
            second.stop()
    return {"readers": count, "record_bytes": record_bytes, "per_workload_record_bytes": per_workload,
            "readers_found_again": len(readers), "start_to_all_held_again_s": held_again,
            "restore_read_and_readers_ms": restore * 1000,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> int:
    return scenario_main(
        __doc__ or "", "ledger_record.py",
        "ledger record: one held change read by every Deployment (50,000; quick 5,000)",
        lambda quick: run_once(5000 if quick else 50_000),
    )


if __name__ == "__main__":
    raise SystemExit(main())
