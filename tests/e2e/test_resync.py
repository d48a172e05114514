"""Issue 31, the slow resync: every workload compared with its sources from the caches.

``--resync-period`` (10 minutes by default; 300 ms here) repairs what a missed change left
out of date — a change made while no controller ran, a change whose event was lost — and
writes nothing when all is current. A pass reads the informers' caches only: the API test
server's request log shows no GET and no LIST while passes run.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from git_setup import GitSetup, commits, deployment_manifest, wait_commits
from kubernetes.client import ApiClient
from reload_helpers import configmap, create, env_of, events, metric, quiet, secret, workload
from test_git_sink import git_controller, git_workload, put_data
from test_pull_request_sink import REPO as PR_REPO
from test_pull_request_sink import PrSetup, pr_controller, pulls, wait_open_pull, web_reloads_on_app_config

from gitops_reloader.app import App
from gitops_reloader.hashing import configmap_hash, secret_hash
from gitops_reloader.ledger import PendingSource
from gitops_reloader.model import SourceKind, SourceRef
from gitops_reloader.testing.apiserver import ApiServer, Fault
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import (
    deployment,
    env_from_configmap,
    running_controller,
    settle,
    wait_for,
)
from gitops_reloader.testing.prhost import PrHost

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

RESYNC = "--resync-period=300ms"
ENV = "STAKATER_APP_CONFIG_CONFIGMAP"


def recorded_web(api_client: ApiClient, name: str = "web", data: dict[str, str] | None = None) -> None:
    """Deployment ``name`` on ConfigMap app-config, already recording the hash of ``data``."""
    container = {**env_from_configmap("app-config"),
                 "env": [{"name": ENV, "value": configmap_hash(data or {"url": "a"})}]}
    create(api_client, deployment(name, annotations={"reloader.stakater.com/auto": "true"},
                                  containers=[container]))


def passes(app: App) -> float:
    return metric(app, "resync_passes_total")


def wait_passes(app: App, count: int, timeout: float = 20.0) -> None:
    start = passes(app)
    wait_for(lambda: passes(app) >= start + count, timeout=timeout, message=f"{count} resync passes")


def test_resync_repairs_a_change_made_while_no_controller_ran(server: ApiServer,
                                                              api_client: ApiClient) -> None:
    create(api_client, configmap("app-config", {"url": "a"}))
    recorded_web(api_client)
    put_data(api_client, "ConfigMap", "app-config", {"url": "b"})  # nobody watching
    with running_controller(api_client, ["--resync-period=0"]) as app:  # Stakater's start: left alone
        settle(app)
        assert env_of(workload(server, "Deployment", "web"))[ENV] == configmap_hash({"url": "a"})
    with running_controller(api_client, [RESYNC]) as app:
        wait_for(lambda: env_of(workload(server, "Deployment", "web"))[ENV] == configmap_hash({"url": "b"}),
                 message="repaired by the resync")
        quiet(app)
        assert metric(app, "resync_repairs_total") == 1.0
        patches = server.request_counts().get(("patch", "deployments"), 0)
        wait_passes(app, 3)
        assert server.request_counts().get(("patch", "deployments"), 0) == patches  # once


def test_resync_repairs_a_change_whose_event_was_lost(server: ApiServer, api_client: ApiClient) -> None:
    """A change the controller saw but dropped before emitting (a bug, a crash between
    detection and write): the pending entry is gone, the workload still records the old hash."""
    create(api_client, configmap("app-config", {"url": "a"}))
    recorded_web(api_client)
    with running_controller(api_client, ["--resync-period=1s", "--coalesce-window=2s"]) as app:
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        ref = SourceRef(SourceKind.CONFIGMAP, "ns", "app-config")
        wait_for(lambda: ref in app.controller.ledger.owed("ns/Deployment/web"), message="pending")
        lost = app.controller.ledger.drop("ns/Deployment/web")  # the bug: dropped, never emitted
        assert lost is not None and isinstance(lost.owes[ref], PendingSource)
        wait_for(lambda: env_of(workload(server, "Deployment", "web"))[ENV] == configmap_hash({"url": "b"}),
                 timeout=15, message="repaired by the resync")
        quiet(app)


def test_resync_writes_nothing_when_all_is_current(
        server: ApiServer, api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    """Live workloads recording current hashes, a git workload whose manifest holds the current
    digest, one never reloaded: passes run, and nothing is written anywhere."""
    git.create({"apps/gitweb.yaml": deployment_manifest("gitweb")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    db = create(api_client, secret("db", {"password": "p"}))
    recorded_web(api_client)
    create(api_client, deployment("api", annotations={"reloader.stakater.com/auto": "true"}, containers=[{
        "name": "app", "image": "x", "envFrom": [{"secretRef": {"name": "db"}}],
        "env": [{"name": "STAKATER_DB_SECRET", "value": secret_hash(db["data"])}]}]))
    create(api_client, configmap("static", {"v": "1"}))
    create(api_client, deployment("never", annotations={"reloader.stakater.com/auto": "true"},
                                  containers=[env_from_configmap("static")]))
    create(api_client, git_workload("gitweb"))
    with git_controller(api_client, git, RESYNC) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})  # the git workload records it
        wait_commits(host, 2)
        wait_for(lambda: env_of(workload(server, "Deployment", "web"))[ENV] == configmap_hash({"url": "b"}),
                 message="live reload")
        quiet(app)
        server.reset_request_counts()
        before = (len(commits(host)), len(events(api_client, "web")), len(events(api_client, "gitweb")))
        wait_passes(app, 5)
        quiet(app)
        counts = server.request_counts()
        writes = {k: n for k, n in counts.items() if k[0] in ("patch", "update", "create", "delete")
                  and k[1] != "configmaps"}  # the failure record is not touched either: nothing failed
        assert writes == {}
        assert not any(k == ("update", "configmaps") or k == ("create", "configmaps") for k in counts)
        after = (len(commits(host)), len(events(api_client, "web")), len(events(api_client, "gitweb")))
        assert after == before
        assert metric(app, "resync_repairs_total") == 0.0
        assert "STAKATER_STATIC_CONFIGMAP" not in env_of(workload(server, "Deployment", "never"))


def test_resync_cost_is_read_from_the_caches_with_no_list_and_no_get(
        server: ApiServer, api_client: ApiClient) -> None:
    for i in range(40):
        create(api_client, configmap(f"cfg-{i}", {"v": "0"}))
        container = {**env_from_configmap(f"cfg-{i}"),
                     "env": [{"name": f"STAKATER_CFG_{i}_CONFIGMAP", "value": configmap_hash({"v": "0"})}]}
        create(api_client, deployment(f"web-{i}", annotations={"reloader.stakater.com/auto": "true"},
                                      containers=[container]))
    with running_controller(api_client, ["--resync-period=200ms"]) as app:
        settle(app)
        time.sleep(0.2)
        server.reset_request_counts()
        wait_passes(app, 10)
        counts = server.request_counts()
        reads = {k: n for k, n in counts.items() if k[0] in ("get", "list")}
        assert reads == {}, reads
        assert metric(app, "resync_duration_seconds") > 0.0
        assert metric(app, "resync_repairs_total") == 0.0


def test_resync_leaves_a_failing_emission_to_its_own_retry(server: ApiServer, api_client: ApiClient) -> None:
    """A workload whose emission is failing is out of date, but the resync does not pile a
    second attempt on its backoff: one attempt per retry, not one per pass as well."""
    create(api_client, configmap("app-config", {"url": "a"}))
    recorded_web(api_client)
    with running_controller(api_client, ["--resync-period=100ms", "--retry-max-delay=3s"]) as app:
        server.add_fault(Fault(verb="patch", resource="deployments", status=503, times=None))
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_for(lambda: app.controller.ledger.failures(), message="failing")
        wait_passes(app, 10)
        [(entry, _)] = app.controller.ledger.failures()
        attempts = server.request_counts().get(("patch", "deployments"), 0)
        assert attempts == entry.attempts <= 4  # the backoff's pace, not the resync's
        server.clear_faults()
        wait_for(lambda: env_of(workload(server, "Deployment", "web"))[ENV] == configmap_hash({"url": "b"}),
                 timeout=15, message="reloaded")


def test_resync_with_an_open_pull_request_writes_nothing(
        api_client: ApiClient, tmp_path: Path, githost: GitHostServer, prhost: PrHost) -> None:
    """A pull-request workload whose reload waits in an open pull request is out of date on the
    base branch; a resync pass hands it to its sink, which finds its own pull request already
    carrying the edit: no push, no API write, no second pull request — pass after pass."""
    setup = PrSetup(tmp_path, githost, prhost, "github")
    web_reloads_on_app_config(api_client, setup)
    with pr_controller(api_client, setup, RESYNC) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        pull = wait_open_pull(prhost)
        quiet(app)
        branch = githost.log(PR_REPO, pull["head"])
        prhost.clear_requests()
        wait_passes(app, 5)
        quiet(app)
        writes = [r for r in prhost.requests if r.method not in ("GET", "HEAD")]
        assert writes == []
        assert githost.log(PR_REPO, pull["head"]) == branch and len(pulls(prhost)) == 1
