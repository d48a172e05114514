"""ACCEPTANCE issue 14 ``run --dry-run``: every sink decides, nothing is written.

One change reaches workloads on all five sinks: env-vars, annotations, git and
pull-request in namespace ``ns`` (one controller), webhook in ``ns2`` (a second
controller with ``--webhook-url``: that flag sends every workload to the webhook). Both
run with ``--dry-run``. Each workload gets a ``WouldReload`` Event naming the write it
was spared, and ``dry_run_decisions_total`` counts them; the API test server's request
log shows no write but Events (and the test's own ConfigMap updates), the git remote
and the pull-request host are unchanged, and the webhook receiver got nothing.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from git_setup import deployment_manifest
from kubernetes.client import ApiClient
from prometheus_client import CollectorRegistry
from reload_helpers import GIT_TOKEN, call, configmap, create, wait_event

from gitops_reloader.app import App
from gitops_reloader.config import load_config
from gitops_reloader.gitops.digestkey import DigestKeyStore
from gitops_reloader.gitops.prpolicy import branch_name, workload_branch_key
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.workloads import WorkloadRecord, adapters_for
from gitops_reloader.model import ObjectRef, ReloadItem, ReloadRequest, Source, SourceKind, SourceRef
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.sinks import build_live_sinks
from gitops_reloader.sinks.annotations import LAST_RELOADED_FROM
from gitops_reloader.sinks.dryrun import dry_run_sinks
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import deployment, env_from_configmap, settle
from gitops_reloader.testing.prhost import PrHost
from gitops_reloader.testing.receiver import HttpReceiver

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

TOKEN = GIT_TOKEN
REPO = "org/fleet"
WRITES = {"create", "update", "patch", "delete", "deletecollection"}






@pytest.fixture
def receiver() -> Iterator[HttpReceiver]:
    with HttpReceiver() as hook:
        yield hook


def git_config(tmp_path: Path, githost: GitHostServer, api_url: str) -> Path:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    path = tmp_path / "git-config.yaml"
    path.write_text(textwrap.dedent(f"""\
        defaultRepository: fleet
        repositories:
          - name: fleet
            url: {githost.repo_url(REPO)}
            branch: main
            tokenFile: {token}
            username: bot
            author:
              name: Reloader Bot
              email: reloader@example.com
            pullRequest:
              host: github
              apiUrl: {api_url}
        """))
    return path


def workload(name: str, sink: str, *, namespace: str = "ns", **annotations: str) -> dict[str, Any]:
    """A Deployment using ConfigMap ``app-config`` through envFrom, on ``sink``."""
    own = {"reloader.stakater.com/auto": "true", "gitops-reloader.io/sink": sink, **annotations}
    return deployment(name, namespace=namespace, annotations=own,
                      containers=[env_from_configmap("app-config")])


def put_data(api_client: ApiClient, namespace: str, name: str, data: dict[str, str]) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/{name}"
    current = call(api_client, "GET", path)
    current["data"] = data
    call(api_client, "PUT", path, current)


def dry_run_app(api_client: ApiClient, tmp_path: Path, *flags: str) -> App:
    config = load_config(["--dry-run", "--coalesce-window=0.5s", *flags],
                         environ={"HOME": str(tmp_path / "home"), "POD_NAMESPACE": "gitops-system"})
    return App(config, api_client=api_client, serve_http=False)


def sample(app: App, name: str, **labels: str) -> float:
    return app.registry.get_sample_value(f"gitops_reloader_{name}", labels) or 0.0


def test_dry_run_reports_every_sink_and_writes_nothing(
        server: ApiServer, api_client: ApiClient, tmp_path: Path, githost: GitHostServer,
        receiver: HttpReceiver) -> None:
    prhost = PrHost(githost)
    config_file = git_config(tmp_path, githost, prhost.mount("github"))
    githost.create_repo(REPO, {f"apps/{name}.yaml": deployment_manifest(name, image="nginx:1.25", owner=None)
                               for name in ("git-web", "pr-web")})
    for namespace in ("ns", "ns2"):
        create(api_client, configmap("app-config", {"url": "a"}, namespace=namespace))
    create(api_client, workload("env-web", "env-vars",
                                **{"deployment.reloader.stakater.com/pause-period": "5m"}))
    create(api_client, workload("ann-web", "annotations"))
    create(api_client, workload("git-web", "git"))
    create(api_client, workload("pr-web", "pull-request"))
    create(api_client, workload("hook-web", "env-vars", namespace="ns2"))
    history, branches = githost.log(REPO), githost.branches(REPO)
    server.reset_request_counts()
    prhost.clear_requests()
    githost.requests.clear()

    cluster = dry_run_app(api_client, tmp_path, "--namespaces=ns", f"--git-config={config_file}",
                          f"--git-cache-dir={tmp_path / 'cache'}")
    hooks = dry_run_app(api_client, tmp_path, "--namespaces=ns2",
                        f"--webhook-url={receiver.url}/hook?token=s3cr3t")
    cluster.start()
    hooks.start()
    try:
        put_data(api_client, "ns", "app-config", {"url": "b"})
        put_data(api_client, "ns2", "app-config", {"url": "b"})
        details = {name: wait_event(api_client, name, "WouldReload", namespace=namespace)["message"]
                   for namespace, name in [("ns", "env-web"), ("ns", "ann-web"), ("ns", "git-web"),
                                           ("ns", "pr-web"), ("ns2", "hook-web")]}
        settle(cluster, timeout=30)
        settle(hooks, timeout=30)
    finally:
        cluster.stop()
        hooks.stop()

    assert details["env-web"] == "dry run, env-vars sink: would patch env STAKATER_APP_CONFIG_CONFIGMAP"
    assert details["ann-web"] == "dry run, annotations sink: would patch configmap/app-config"
    assert details["git-web"].startswith("dry run, git sink: would commit to ")
    assert "apps/git-web.yaml" in details["git-web"] and "(main)" in details["git-web"]
    branch = branch_name("main", workload_branch_key(ObjectRef("Deployment", "ns", "pr-web")))
    assert details["pr-web"] == (f"dry run, pull-request sink: would push {branch} and open a pull request: "
                                 "apps/pr-web.yaml into main")
    assert details["hook-web"].startswith("dry run, webhook sink: would POST configmap/app-config to http://")
    assert "s3cr3t" not in details["hook-web"]
    for sink in ("env-vars", "annotations", "git", "pull-request"):
        assert sample(cluster, "dry_run_decisions_total", sink=sink, namespace="ns") == 1.0, sink
    assert sample(hooks, "dry_run_decisions_total", sink="webhook", namespace="ns2") == 1.0
    for app in (cluster, hooks):
        assert app.registry.get_sample_value("reloader_reload_executed_total", {"success": "true"}) == 0.0

    # Zero writes: the cluster (but Events and the test's own two ConfigMap updates) ...
    writes = {key: count for key, count in server.request_counts().items()
              if key[0] in WRITES and key[1] != "events"}
    assert writes == {("update", "configmaps"): 2}
    for namespace, name in [("ns", "env-web"), ("ns", "ann-web"), ("ns", "git-web"), ("ns", "pr-web"),
                            ("ns2", "hook-web")]:
        live = call(api_client, "GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
        assert live["metadata"]["generation"] == 1, name
        assert not live["spec"].get("paused"), name
    # ... git and the pull-request host ...
    assert githost.log(REPO) == history and githost.branches(REPO) == branches
    assert not any(service == "git-receive-pack" for _, service in githost.requests)
    assert prhost.pulls(REPO) == []
    assert {r.method for r in prhost.requests} <= {"GET"}
    # ... and the webhook receiver.
    assert receiver.requests == []


# --------------------------------------------------------------------------- each sink's decision

CM = SourceRef(SourceKind.CONFIGMAP, "ns", "app-config")
DB = SourceRef(SourceKind.SECRET, "ns", "db")
ENV = "STAKATER_APP_CONFIG_CONFIGMAP"
RECORDED = '{"type":"CONFIGMAP","name":"app-config","namespace":"ns","hash":"h1"}'


def record(env: dict[str, str] | None = None, recorded: str = "") -> WorkloadRecord:
    app = {"name": "app", "image": "nginx", "envFrom": [{"configMapRef": {"name": "app-config"}}],
           "env": [{"name": k, "value": v} for k, v in (env or {}).items()]}
    body = deployment("web", containers=[app],
                      template_annotations={LAST_RELOADED_FROM: recorded} if recorded else None)
    return adapters_for()["Deployment"].record(body)


@pytest.mark.parametrize(("sink", "workload", "item", "status", "detail"), [
    ("env-vars", record(), ReloadItem(Source(CM, "h1"), "app"), "would-apply", f"would patch env {ENV}"),
    ("env-vars", record({ENV: "h1"}), ReloadItem(Source(CM, "h1"), "app"), "already-current", ""),
    ("env-vars", record({ENV: "h1"}), ReloadItem(Source(CM, "h1"), "app", deleted=True), "would-apply",
     f"would patch env {ENV}"),
    ("env-vars", record({ENV: "h1"}), ReloadItem(Source(CM, "h2"), "app"), "would-apply",
     f"would patch env {ENV}"),
    ("annotations", record(), ReloadItem(Source(CM, "h1"), "app"), "would-apply",
     "would patch configmap/app-config"),
    ("annotations", record(recorded=RECORDED), ReloadItem(Source(CM, "h1"), "app"), "already-current", ""),
    ("annotations", record(recorded=RECORDED), ReloadItem(Source(DB, "h9"), "app"), "would-apply",
     "would patch secret/db"),
    ("webhook", record(), ReloadItem(Source(DB, "h9"), "app"), "would-apply",
     "would POST secret/db to {url}"),
])
def test_each_sink_decides_as_it_would_write_and_sends_nothing(
        server: ApiServer, api_client: ApiClient, receiver: HttpReceiver, sink: str, workload: WorkloadRecord,
        item: ReloadItem, status: str, detail: str) -> None:
    config = load_config(["--dry-run", f"--webhook-url={receiver.url}/hook?token=s3cr3t"],
                         environ={"HOME": "/nonexistent"})
    api = KubeApi(api_client)
    sinks = dry_run_sinks(build_live_sinks(config, api, adapters_for(), metrics=Metrics(CollectorRegistry())),
                          webhook_url=config.behaviour.webhook_url)
    server.reset_request_counts()
    try:
        outcome = sinks[sink].emit(ReloadRequest(workload.ref, workload, (item,), 1_700_000_000))
    finally:
        close = getattr(sinks["webhook"], "close", None)
        assert close is not None
        close()
    assert (outcome.status.value, outcome.sink, outcome.detail) == (
        status, sink, detail.format(url=receiver.url))
    assert server.request_counts() == {}
    assert receiver.requests == []


def test_the_digest_key_is_read_but_never_created(server: ApiServer, api_client: ApiClient) -> None:
    api = KubeApi(api_client)
    stand_in = DigestKeyStore(api, namespace="gitops-system", name="key", create=False).get()
    assert len(stand_in.value) == 32
    assert {verb for verb, _ in server.request_counts()} == {"get"}
    real = DigestKeyStore(api, namespace="gitops-system", name="key").get()  # creates it
    assert DigestKeyStore(api, namespace="gitops-system", name="key", create=False).get() == real
    assert real != stand_in


def test_a_deployment_paused_by_a_real_run_is_left_paused(
        server: ApiServer, api_client: ApiClient, tmp_path: Path) -> None:
    body = deployment("paused-web", annotations={
        "deployment.reloader.stakater.com/pause-period": "1s",
        "deployment.reloader.stakater.com/paused-at": "2020-01-01T00:00:00Z"})
    body["spec"]["paused"] = True
    create(api_client, body)
    server.reset_request_counts()
    app = dry_run_app(api_client, tmp_path)
    app.start()
    try:
        settle(app, timeout=30)  # the overdue unpause is queued at once and handled
    finally:
        app.stop()
    live = call(api_client, "GET", "/apis/apps/v1/namespaces/ns/deployments/paused-web")
    assert live["spec"]["paused"] is True
    assert not {verb for verb, _ in server.request_counts()} & WRITES
