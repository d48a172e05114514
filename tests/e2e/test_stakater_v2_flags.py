"""A Stakater v2 command line, unchanged, starts the controller as a real process.

Metrics on ``--metrics-addr``, probes also on ``--health-addr`` (v2's chart probes that
port), and the flags that do nothing here are named once in the log rather than refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from processes import Cluster, Controller, running_cluster, stop_process

from gitops_reloader.testing.harness import wait_for
from gitops_reloader.testing.ports import free_port

pytestmark = pytest.mark.e2e


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path) as running:
        yield running


def test_v2_command_line_starts_with_metrics_and_health_addresses(cluster, tmp_path):
    metrics, health = free_port(), free_port()
    controller = Controller(cluster, tmp_path / "log.jsonl", (
        f"--metrics-addr=127.0.0.1:{metrics}", f"--health-addr=127.0.0.1:{health}",
        "--reload-strategy=annotations", "--enable-pprof", "--pprof-addr=:6060",
        "--alert-structured=false", "--leader-election-id=reloader", "--namespace-selector=env=prod",
        "--namespace-selector=team=a"))
    try:
        for port in (metrics, health):
            wait_for(lambda port=port: _status(cluster, f"http://127.0.0.1:{port}/readyz") == 200,
                     timeout=15, message=f"/readyz on {port}")
        assert _status(cluster, f"http://127.0.0.1:{health}/live") == 200
        assert "reloader_reload_executed_total" in cluster.http.get(f"http://127.0.0.1:{metrics}/metrics").text
        listening = sorted(r["address"] for r in controller.log() if r["msg"] == "http server listening")
        assert listening == sorted([f"127.0.0.1:{metrics}", f"127.0.0.1:{health}"])
        inert = [r["msg"] for r in controller.log() if "has no effect here" in r["msg"]]
        # --alert-structured=false is the default: nothing to say about it.
        assert inert == [
            "flag accepted for Stakater compatibility but has no effect here: --enable-pprof=true "
            "(docs/migrating-from-stakater.md)",
        ]
    finally:
        assert stop_process(controller.proc) == 0


def _status(cluster: Cluster, url: str) -> int:
    try:
        return cluster.http.get(url).status_code
    except httpx.HTTPError:  # not listening yet
        return 0
