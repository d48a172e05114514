"""Storm brakes (issue 32, in part): a source rewritten in a loop restarts its readers a bounded
number of times, nothing is dropped, and the latest data is what the workloads end with.

Each test runs the controller against the API test server with short brake periods (seconds
instead of the defaults' minutes), so the waits are real but brief; the data is changed
without waiting for the controller in between, as a loop would.
"""

from __future__ import annotations

import time

import pytest
from git_setup import REPO, GitSetup, commits, deployment_manifest
from kubernetes.client import ApiClient
from reload_helpers import call, configmap, create, env_of, events, metric, quiet, wait_event, workload
from test_git_sink import digest_key_secret, file_at, git_controller, git_workload, hash_value

from gitops_reloader.hashing import configmap_hash, keyed_digest
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import deployment, running_controller, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

ENV = "STAKATER_APP_CONFIG_CONFIGMAP"
RELOAD = {"configmap.reloader.stakater.com/reload": "app-config"}


def rewrite(api_client: ApiClient, value: str) -> None:
    """PUT new data into app-config without waiting for the controller (a loop would not)."""
    path = "/api/v1/namespaces/ns/configmaps/app-config"
    current = call(api_client, "GET", path)
    current["data"] = {"url": value}
    call(api_client, "PUT", path, current)


def template_writes(server: ApiServer, name: str) -> int:
    return int(workload(server, "Deployment", name)["metadata"].get("generation", 1)) - 1


def test_storm_brake_holds_a_workload_past_its_cap_and_applies_the_latest_data_after(
        server: ApiServer, api_client: ApiClient) -> None:
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations=RELOAD))
    create(api_client, deployment("tight", annotations={**RELOAD, "gitops-reloader.io/max-reloads": "1/1h"}))
    with running_controller(api_client, ["--max-reloads-per-workload=2/6s", "--source-backoff-cap=0"]) as app:
        for i in (1, 2):
            rewrite(api_client, f"v{i}")
            wait_for(lambda i=i: env_of(workload(server, "Deployment", "web")).get(ENV)
                     == configmap_hash({"url": f"v{i}"}, None), message=f"reload {i}")
        for i in (3, 4, 5):  # past the cap: held; each newer change replaces the waiting one
            rewrite(api_client, f"v{i}")
            time.sleep(0.3)
        event = wait_event(api_client, "web", "ReloadThrottled")
        assert event["type"] == "Warning" and "2/6s" in event["message"]
        assert metric(app, "throttled_workloads") >= 1
        assert template_writes(server, "web") == 2
        latest = configmap_hash({"url": "v5"}, None)
        wait_for(lambda: env_of(workload(server, "Deployment", "web")).get(ENV) == latest, timeout=15,
                 message="the latest data once the period allows")
        quiet(app)
        assert template_writes(server, "web") == 3  # v3 and v4 never written: only the latest
        assert metric(app, "reloads_throttled_total", scope="workload") >= 2  # web and tight
        assert env_of(workload(server, "Deployment", "tight")).get(ENV) == configmap_hash({"url": "v1"}, None)
        assert template_writes(server, "tight") == 1  # its annotation: 1 an hour; v5 waits, pending
        assert app.controller.ledger.owed("ns/Deployment/tight")  # v5 waits for it
        assert metric(app, "throttled_workloads") == 1


def test_storm_brake_source_backoff_bounds_a_loop_of_changes(
        server: ApiServer, api_client: ApiClient) -> None:
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations=RELOAD))
    flags = ["--coalesce-window=0.2s", "--source-backoff-cap=2s", "--max-reloads-per-workload=0"]
    with running_controller(api_client, flags) as app:
        for i in range(1, 31):  # a loop: 30 changes, one every 0.1 s
            rewrite(api_client, f"v{i}")
            time.sleep(0.1)
        latest = configmap_hash({"url": "v30"}, None)
        wait_for(lambda: env_of(workload(server, "Deployment", "web")).get(ENV) == latest, timeout=15,
                 message="the latest data")
        quiet(app)
        assert metric(app, "source_backoffs_total", kind="ConfigMap") > 0
        assert template_writes(server, "web") <= 12  # 30 changes: the first few at 0.2 s, then 2 s apart
        assert not [e for e in events(api_client, "web") if e["type"] == "Warning"]


def test_storm_brake_cluster_cap_spreads_reloads_and_loses_none(
        server: ApiServer, api_client: ApiClient) -> None:
    create(api_client, configmap("app-config", {"url": "v0"}))
    names = [f"web-{i}" for i in range(4)]
    for name in names:
        create(api_client, deployment(name, annotations=RELOAD))
    with running_controller(api_client, ["--cluster-reload-rate=2/4s", "--source-backoff-cap=0"]) as app:
        rewrite(api_client, "v1")
        latest = configmap_hash({"url": "v1"}, None)

        def reloaded() -> list[str]:
            return [n for n in names if env_of(workload(server, "Deployment", n)).get(ENV) == latest]

        wait_for(lambda: len(reloaded()) == 2, message="two reloads at once")
        held = [n for n in names if n not in reloaded()]
        assert len(held) == 2
        # the two held reloads are counted as their workers reach the brake, which may be
        # after the two admitted ones have already written their templates
        wait_for(lambda: metric(app, "reloads_throttled_total", scope="cluster") == 2,
                 message="two reloads throttled")
        for name in held:
            assert "the cluster reached 2/4s" in wait_event(api_client, name, "ReloadThrottled")["message"]
        wait_for(lambda: len(reloaded()) == 4, timeout=15, message="the other two once the cluster allows")
        quiet(app)
        assert all(template_writes(server, n) == 1 for n in names)


def test_storm_brake_git_sink_makes_one_commit_per_period_with_the_latest_data(
        api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    key = digest_key_secret(api_client)
    files = {f"apps/{n}/{n}.yaml": deployment_manifest(n) for n in ("web", "api")}
    git.create(files)
    git.configure()
    create(api_client, configmap("app-config", {"url": "v0"}))
    for name in ("web", "api"):
        create(api_client, git_workload(name))
    with git_controller(api_client, git, "--coalesce-window=0.3s", "--source-backoff-cap=3s",
                        "--max-reloads-per-workload=0") as (app, _):
        for i in range(1, 21):  # 20 changes in about 4 s
            rewrite(api_client, f"v{i}")
            time.sleep(0.2)
        expected = keyed_digest(key, [("ConfigMap/ns/app-config", configmap_hash({"url": "v20"}, None))])
        wait_for(lambda: all(hash_value(file_at(host, p)) == expected for p in files), timeout=20,
                 message="the latest data in git")
        quiet(app)
        made = len(commits(host)) - 1
        assert 1 <= made <= 8  # one commit per (stretched) period for the repository, both workloads in each
        assert metric(app, "source_backoffs_total", kind="ConfigMap") > 0
        assert metric(app, "git_commits_total", repo=REPO) == made
