"""Ready, as Stakater's chart probes it (``/metrics``), means watching: a change made the moment
the probe first answers is reloaded.

Stakater's chart probes readiness on ``/metrics``; its own end-to-end suite installs the
reloader, waits for Ready, then creates a ConfigMap and a Deployment and changes the ConfigMap
within ~100 ms. ``/metrics`` used to answer as soon as the HTTP server listened, tens of
milliseconds before the informers had listed: a change made then was in the first list, never
an event, and never reloaded (the suite's scoped-namespace specs failed that way).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from processes import Cluster, Controller, running_cluster, stop_process
from reload_helpers import call, configmap, create, env_of

from gitops_reloader.hashing import configmap_hash
from gitops_reloader.testing.harness import deployment, env_from_configmap, wait_for

pytestmark = pytest.mark.e2e

AUTO = {"reloader.stakater.com/auto": "true"}
ENV = "STAKATER_APP_CONFIG_CONFIGMAP"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path) as running:
        yield running


def metrics_answer(cluster: Cluster, controller: Controller) -> bool:
    """Whether ``/metrics`` answers 200, as the kubelet's probe of Stakater's chart asks it."""
    address = next((r["address"] for r in controller.log() if r["msg"] == "http server listening"), "")
    if not address:
        return False
    try:
        return cluster.http.get(f"http://{address}/metrics").status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("namespaces", ["", "ns,scoped-a,scoped-b"], ids=["global", "scoped"])
def test_a_change_made_when_metrics_first_answers_is_reloaded(
        cluster: Cluster, tmp_path: Path, namespaces: str) -> None:
    flags = ("--coalesce-window=0", *([f"--namespaces={namespaces}"] if namespaces else ()))
    controller = Controller(cluster, tmp_path / "log.jsonl", flags)
    try:
        wait_for(lambda: controller.proc.poll() is None and metrics_answer(cluster, controller),
                 timeout=60, interval=0.002, message="/metrics answering")
        create(cluster.api_client, configmap("app-config", {"url": "v0"}))
        create(cluster.api_client, deployment("web", annotations=AUTO,
                                              containers=[env_from_configmap("app-config")]))
        call(cluster.api_client, "PUT", "/api/v1/namespaces/ns/configmaps/app-config",
             configmap("app-config", {"url": "v1"}))
        target = configmap_hash({"url": "v1"}, None)
        wait_for(lambda: env_of(cluster.deployment("web")).get(ENV) == target, timeout=15,
                 message=lambda: f"web reloaded (env: {env_of(cluster.deployment('web'))})")
    finally:
        assert stop_process(controller.proc) == 0
