"""ACCEPTANCE "GitOps sinks" for the ``pull-request`` sink, end to end, on every host shape.

A real git server (``git http-backend`` on 127.0.0.1, token auth) holds the manifest
repository and serves a pull-request REST API shaped like GitHub, GitLab, Gitea or
Bitbucket Cloud (:class:`~gitops_reloader.testing.prhost.PrHost`) over the same bare
repositories, so merges really land on the base branch. The API test server holds the
cluster; the controller runs in-process with the pull-request sink injected before
start. Every test runs once per host shape.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import subprocess
import textwrap
import threading
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient
from prometheus_client import CollectorRegistry
from reload_helpers import GIT_TOKEN, call, configmap, create, events, metric, quiet, secret, wait_event

from gitops_reloader.app import App
from gitops_reloader.config import load_config
from gitops_reloader.gitops import prpolicy
from gitops_reloader.gitops.auth import GitAuth
from gitops_reloader.gitops.hosts import RetryPolicy
from gitops_reloader.gitops.prbranch import PullRequestRepository
from gitops_reloader.gitops.repo import Author
from gitops_reloader.hashing import secret_hash
from gitops_reloader.model import ObjectRef
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.sinks.gitwiring import build_pull_request_sink
from gitops_reloader.sinks.pullrequest import PullRequestSink
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import deployment, running_sink, wait_for
from gitops_reloader.testing.prhost import PR_HOST_KINDS, PrHost

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

TOKEN = GIT_TOKEN
REPO = "org/fleet"  # on the git server; the host's owner/name or project path
NAME = "fleet"  # in --git-config
CONTROLLER_NS = "gitops-system"
WINDOW = "--coalesce-window=1s"
LABEL = "gitops-reloader"


def workload_branch(name: str, namespace: str = "ns") -> str:
    """The pull-request branch of Deployment ``<namespace>/<name>`` into ``main``."""
    key = prpolicy.workload_branch_key(ObjectRef("Deployment", namespace, name))
    return prpolicy.branch_name("main", key)


WEB_BRANCH = workload_branch("web")
ALL_BRANCH = "gitops-reloader/main/all"
HASH = re.compile(r"gitops-reloader\.io/config-hash: \"?([0-9a-f]{64})")


def manifest(name: str, *, replicas: int = 1) -> str:
    """A small Deployment manifest with pod-template annotations and a comment."""
    return textwrap.dedent(f"""\
        # {name}: reviewed by the platform team
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: {name}
          namespace: ns
        spec:
          replicas: {replicas}
          selector:
            matchLabels: {{app: {name}}}
          template:
            metadata:
              labels:
                app: {name}
              annotations:
                owner: team-a
            spec:
              containers:
                - name: app
                  image: nginx:1.25
        """)


# --------------------------------------------------------------------------- fixtures




@pytest.fixture(params=sorted(PR_HOST_KINDS))
def kind(request: pytest.FixtureRequest) -> str:
    """The host shape: github, gitlab, gitea or bitbucket."""
    return str(request.param)






class PrSetup:
    """Repository, git config file, token file and cache directories of one test."""

    def __init__(self, tmp_path: Path, githost: GitHostServer, prhost: PrHost, kind: str) -> None:
        self.tmp = tmp_path
        self.githost = githost
        self.prhost = prhost
        self.kind = kind
        self.api_url = prhost.mount(kind)
        self.config_path = tmp_path / "git-config.yaml"
        self.token_file = tmp_path / "token"
        self.token_file.write_text(TOKEN + "\n")

    def create(self, files: Mapping[str, str]) -> None:
        self.githost.create_repo(REPO, dict(files))
        if self.kind == "gitea":  # Gitea labels are ids: the label must exist
            self.prhost.add_label(REPO, LABEL)

    def configure(self, *, api_token_file: Path | None = None, grouping: str = "",
                  author: str = "Reloader Bot", path: Path | None = None, auto_merge: bool = False) -> None:
        labels = "" if self.kind == "bitbucket" else f"      labels: [{LABEL}]\n"
        grouping_line = f"      grouping: {grouping}\n" if grouping else ""
        grouping_line += "      autoMerge: true\n" if auto_merge else ""
        api_token = f"      tokenFile: {api_token_file}\n" if api_token_file else ""
        if self.kind == "azure":  # the test git server's URLs are not Azure Repos URLs: name it
            api_token += f"      repository: {REPO}\n"
        (path or self.config_path).write_text(textwrap.dedent(f"""\
            repositories:
              - name: {NAME}
                url: {self.githost.repo_url(REPO)}
                branch: main
                tokenFile: {self.token_file}
                username: bot
                author:
                  name: {author}
                  email: reloader@example.com
                pullRequest:
                  host: {self.kind}
                  apiUrl: {self.api_url}
            """) + labels + grouping_line + api_token)

    def flags(self, cache: str, *more: str, config: Path | None = None) -> list[str]:
        return [f"--git-config={config or self.config_path}", f"--git-cache-dir={self.tmp / cache}", WINDOW,
                *more]


@pytest.fixture
def setup(tmp_path: Path, githost: GitHostServer, prhost: PrHost, kind: str) -> PrSetup:
    return PrSetup(tmp_path, githost, prhost, kind)


@contextmanager
def pr_controller(api_client: ApiClient, setup: PrSetup, *flags: str, cache: str = "cache",
                  config_file: Path | None = None,
                  sink_hook: Any = None) -> Iterator[tuple[App, PullRequestSink]]:
    """Build the App (which wires the pull-request sink), let ``sink_hook`` see it, run, stop."""
    config = load_config(setup.flags(cache, *flags, config=config_file),
                         environ={"HOME": str(setup.tmp / "home"), "POD_NAMESPACE": CONTROLLER_NS})
    with running_sink(api_client, config, "pull-request", PullRequestSink, sink_hook) as running:
        yield running  # stopping the app closes the sink's host clients


def pr_workload(name: str, *, sources: str = "app-config", secrets: str = "") -> dict[str, Any]:
    """A Deployment on the pull-request sink, reloading on the listed ConfigMaps/Secrets."""
    own = {"gitops-reloader.io/sink": "pull-request"}
    if sources:
        own["configmap.reloader.stakater.com/reload"] = sources
    if secrets:
        own["secret.reloader.stakater.com/reload"] = secrets
    return deployment(name, annotations=own)


def web_reloads_on_app_config(api_client: ApiClient, setup: PrSetup, **configure: Any) -> None:
    """The usual start: ``apps/web.yaml`` in the repository, the git config written (``configure``:
    its options), ConfigMap ``app-config`` and Deployment ``web`` reloading on it by pull request."""
    setup.create({"apps/web.yaml": manifest("web")})
    setup.configure(**configure)
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, pr_workload("web"))


def put_data(api_client: ApiClient, kind: str, name: str, data: Mapping[str, str]) -> None:
    """Replace a ConfigMap's or Secret's data (PUT), without waiting."""
    plural = "configmaps" if kind == "ConfigMap" else "secrets"
    path = f"/api/v1/namespaces/ns/{plural}/{name}"
    current = call(api_client, "GET", path)
    if kind == "Secret":
        current["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    else:
        current["data"] = dict(data)
    call(api_client, "PUT", path, current)


def pulls(prhost: PrHost) -> list[dict[str, Any]]:
    return prhost.pulls(REPO)


def open_pulls(prhost: PrHost) -> list[dict[str, Any]]:
    return [p for p in pulls(prhost) if p["state"] == "open"]


def wait_open_pull(prhost: PrHost, predicate: Any = None, *, timeout: float = 30.0) -> dict[str, Any]:
    """The one open pull request, once ``predicate(pull)`` holds."""
    def find() -> dict[str, Any] | None:
        found = open_pulls(prhost)
        assert len(found) <= 1, found
        if found and (predicate is None or predicate(found[0])):
            return found[0]
        return None

    return wait_for(find, timeout=timeout, message="the open pull request")


def file_at(githost: GitHostServer, path: str, ref: str = "main") -> str:
    data = githost.read_file(REPO, path, ref)
    assert data is not None, (path, ref)
    return data.decode()


def hash_value(text: str) -> str | None:
    match = HASH.search(text)
    return match.group(1) if match else None


def commits_ahead(githost: GitHostServer, branch: str) -> list[str]:
    """Subjects of the commits ``branch`` has on top of ``main``."""
    main = {sha for sha, _ in githost.log(REPO)}
    return [subject for sha, subject in githost.log(REPO, branch) if sha not in main]


def assert_no_secrets_in(text: str, *needles: str) -> None:
    for needle in needles:
        assert needle not in text


# --------------------------------------------------------------------------- open, update, merge, close


def test_first_change_opens_a_pull_request_and_a_second_updates_it(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost, kind: str) -> None:
    original = manifest("web")
    setup.create({"apps/web.yaml": original, "README.md": "# fleet\n"})
    setup.configure()
    create(api_client, configmap("app-config", {"url": "first-value"}))
    create(api_client, pr_workload("web"))
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "second-value"})
        pull = wait_open_pull(prhost)
        assert (pull["head"], pull["base"]) == (WEB_BRANCH, "main")
        assert pull["title"] == "Reload web (configmap/app-config changed)"
        assert WEB_BRANCH in githost.branches(REPO)
        assert [s for _, s in githost.log(REPO)] == ["initial"]  # the base is untouched
        assert file_at(githost, "apps/web.yaml") == original
        assert commits_ahead(githost, WEB_BRANCH) == ["reload: web (configmap/app-config changed)"]
        first = hash_value(file_at(githost, "apps/web.yaml", WEB_BRANCH))
        assert first is not None
        body = pull["body"]
        assert "`ns/Deployment/web`" in body and "ConfigMap `ns/app-config`" in body
        assert f"`{first[:12]}`" in body and first not in body  # the short keyed digest only
        assert "gitops-reloader.io/sink: pull-request" in body
        assert_no_secrets_in(body, "second-value", "first-value")
        quiet(app)
        assert len(pulls(prhost)) == 1
        if kind != "bitbucket":  # Bitbucket Cloud has no labels
            assert pulls(prhost)[0]["labels"] == [LABEL]
        assert metric(app, "pr_operations_total", host=kind, operation="create") == 1.0

        put_data(api_client, "ConfigMap", "app-config", {"url": "third-value"})
        updated = wait_open_pull(prhost, lambda p: first[:12] not in p["body"])
        assert updated["number"] == pull["number"]
        quiet(app)
        assert len(pulls(prhost)) == 1 and len(open_pulls(prhost)) == 1
        second = hash_value(file_at(githost, "apps/web.yaml", WEB_BRANCH))
        assert second not in (None, first) and f"`{second[:12]}`" in open_pulls(prhost)[0]["body"]
        assert len(commits_ahead(githost, WEB_BRANCH)) == 1  # rebuilt as one commit, not stacked
        assert [s for _, s in githost.log(REPO)] == ["initial"]
        assert metric(app, "pr_operations_total", host=kind, operation="update") == 1.0


def test_after_a_merge_the_next_change_opens_a_new_pull_request(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost) -> None:
    web_reloads_on_app_config(api_client, setup)
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        first = wait_open_pull(prhost)
        quiet(app)
        prhost.merge(REPO, first["number"])
        merged_hash = hash_value(file_at(githost, "apps/web.yaml"))
        assert merged_hash is not None

        put_data(api_client, "ConfigMap", "app-config", {"url": "c"})
        second = wait_open_pull(prhost)
        assert second["number"] != first["number"] and second["head"] == WEB_BRANCH
        quiet(app)
        assert [p["state"] for p in pulls(prhost)] == ["merged", "open"]
        on_branch = hash_value(file_at(githost, "apps/web.yaml", WEB_BRANCH))
        assert on_branch not in (None, merged_hash)
        assert len(commits_ahead(githost, WEB_BRANCH)) == 1  # on top of the merged base


def test_after_a_close_the_next_change_opens_a_new_pull_request(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost) -> None:
    web_reloads_on_app_config(api_client, setup)
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        first = wait_open_pull(prhost)
        quiet(app)
        prhost.close(REPO, first["number"])

        put_data(api_client, "ConfigMap", "app-config", {"url": "c"})
        second = wait_open_pull(prhost)
        quiet(app)
        assert second["number"] != first["number"]
        assert [p["state"] for p in pulls(prhost)] == ["closed", "open"]
        assert hash_value(file_at(githost, "apps/web.yaml")) is None  # nothing merged
        assert len(commits_ahead(githost, WEB_BRANCH)) == 1


def test_a_change_already_on_the_base_opens_no_pull_request(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost) -> None:
    web_reloads_on_app_config(api_client, setup)
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        first = wait_open_pull(prhost)
        quiet(app)
        prhost.merge(REPO, first["number"])
        branch_tip = githost.branches(REPO)[WEB_BRANCH]
        # Away and back within one coalescing window: the digest of "b" is on the base already.
        put_data(api_client, "ConfigMap", "app-config", {"url": "a"})
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_for(lambda: metric(app, "sink_outcomes_total", sink="pull-request", outcome="already-current"),
                 timeout=30, message="an already-current outcome")
        quiet(app)
        assert [p["state"] for p in pulls(prhost)] == ["merged"]
        assert githost.branches(REPO)[WEB_BRANCH] == branch_tip
        assert metric(app, "sink_outcomes_total", sink="pull-request", outcome="applied") == 1.0


# --------------------------------------------------------------------------- grouping per repository


def test_repository_grouping_accumulates_workloads_on_a_moving_base(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost) -> None:
    web = manifest("web")
    setup.create({"apps/web.yaml": web, "apps/worker.yaml": manifest("worker")})
    setup.configure(grouping="repository")
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, configmap("worker-config", {"queue": "a"}))
    create(api_client, pr_workload("web"))
    create(api_client, pr_workload("worker", sources="worker-config"))
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        first = wait_open_pull(prhost)
        assert first["head"] == ALL_BRANCH
        web_hash = hash_value(file_at(githost, "apps/web.yaml", ALL_BRANCH))
        quiet(app)
        # Someone changes the same file on the base while the pull request is open.
        scaled = web.replace("replicas: 1", "replicas: 3")
        githost.commit_directly(REPO, {"apps/web.yaml": scaled}, message="scale web")

        put_data(api_client, "ConfigMap", "worker-config", {"queue": "b"})
        pull = wait_open_pull(prhost, lambda p: "ns/Deployment/worker" in p["body"])
        quiet(app)
        assert pull["number"] == first["number"] and len(pulls(prhost)) == 1
        assert "ns/Deployment/web" in pull["body"]  # the earlier workload is still listed
        assert pull["title"] == "Reload web, worker (configmap/app-config, configmap/worker-config changed)"
        on_branch = file_at(githost, "apps/web.yaml", ALL_BRANCH)
        assert "replicas: 3" in on_branch  # the base's change is kept, not reverted
        assert hash_value(on_branch) == web_hash  # the earlier edit is carried over
        assert hash_value(file_at(githost, "apps/worker.yaml", ALL_BRANCH)) is not None
        assert len(commits_ahead(githost, ALL_BRANCH)) == 1  # one commit on the latest base
        assert githost.log(REPO, ALL_BRANCH)[1][1] == "scale web"


# --------------------------------------------------------------------------- races and failures


def test_two_controllers_racing_on_one_change_open_exactly_one_pull_request(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost) -> None:
    setup.create({"apps/web.yaml": manifest("web")})
    setup.configure()
    # Same digest key (both are "us", both seal), another name: the two commits differ, so one push loses.
    second_config = setup.tmp / "git-config-2.yaml"
    setup.configure(author="Reloader Bot (replica 2)", path=second_config)
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, pr_workload("web"))
    barrier = threading.Barrier(2, timeout=20)

    def push_together(sink: PullRequestSink) -> None:
        repo = sink.repository(NAME).repo
        assert isinstance(repo, PullRequestRepository)
        original = repo.push_branch
        calls: list[int] = []

        def push_branch(local_ref: str, remote_branch: str, *, expected_remote_sha: str | None) -> None:
            if not calls:  # both controllers push their first commit at the same moment
                calls.append(1)
                barrier.wait()
            original(local_ref, remote_branch, expected_remote_sha=expected_remote_sha)

        repo.push_branch = push_branch  # type: ignore[method-assign]

    with ExitStack() as stack:
        apps = [stack.enter_context(pr_controller(api_client, setup, cache=f"cache-{i}", config_file=config,
                                                  sink_hook=push_together))[0]
                for i, config in enumerate((setup.config_path, second_config))]
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        pull = wait_open_pull(prhost)
        for app in apps:
            quiet(app)
        assert len(pulls(prhost)) == 1 and pulls(prhost)[0]["number"] == pull["number"]
        assert sum(metric(app, "git_push_rejections_total", repo=NAME) for app in apps) == 1.0
        assert len(commits_ahead(githost, WEB_BRANCH)) == 1
        assert [s for _, s in githost.log(REPO)] == ["initial"]


def test_host_down_retries_then_opens_the_pull_request_and_never_shows_the_token(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost, kind: str,
        caplog: pytest.LogCaptureFixture) -> None:
    web_reloads_on_app_config(api_client, setup)
    caplog.set_level(logging.DEBUG)

    def quick_retries(sink: PullRequestSink) -> None:  # the host client's own retries: not the subject here
        for target in sink.targets.values():
            target.host.retry = RetryPolicy(attempts=3, backoff=0.01, max_backoff=0.05)  # type: ignore[attr-defined]

    with pr_controller(api_client, setup, sink_hook=quick_retries) as (app, _):
        prhost.set_down(True)
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        event = wait_event(api_client, "web", "ReloadFailed")
        assert event["type"] == "Warning" and "pull-request" in event["message"]
        wait_for(lambda: metric(app, "git_errors_total", repo=NAME, reason="host") >= 2, timeout=30,
                 message="a retry")
        assert metric(app, "queue_retries_total") >= 1
        assert pulls(prhost) == [] and WEB_BRANCH not in githost.branches(REPO)
        prhost.set_down(False)
        pull = wait_open_pull(prhost, timeout=60)
        assert hash_value(file_at(githost, "apps/web.yaml", WEB_BRANCH)) is not None
        assert f"`{hash_value(file_at(githost, 'apps/web.yaml', WEB_BRANCH))}"[:13] in pull["body"]
        quiet(app)
        assert metric(app, "pr_operations_total", host=kind, operation="create") == 1.0
        texts = [caplog.text, *(e.get("message", "") for e in events(api_client, "web"))]
        basic = base64.b64encode(f"bot:{TOKEN}".encode()).decode()
        for text in texts:
            assert TOKEN not in text and basic not in text


def test_a_refused_api_token_is_reported_without_the_token(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost,
        caplog: pytest.LogCaptureFixture) -> None:
    setup.create({"apps/web.yaml": manifest("web")})
    wrong = "glpat-wrongApiToken-0042"
    api_token = setup.tmp / "api-token"
    api_token.write_text(wrong)
    setup.configure(api_token_file=api_token)
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, pr_workload("web"))
    caplog.set_level(logging.DEBUG)
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        event = wait_event(api_client, "web", "HostAuthError")
        assert event["type"] == "Warning" and "token" in event["message"]
        quiet(app)
        assert pulls(prhost) == []
        for text in (caplog.text, *(e.get("message", "") for e in events(api_client, "web"))):
            assert wrong not in text and TOKEN not in text


def test_a_person_pushing_to_our_branch_stops_us_touching_it(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost, kind: str) -> None:
    web_reloads_on_app_config(api_client, setup)
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        pull = wait_open_pull(prhost)
        quiet(app)
        edited = file_at(githost, "apps/web.yaml", WEB_BRANCH).replace("replicas: 1", "replicas: 2")
        theirs = githost.commit_directly(REPO, {"apps/web.yaml": edited}, branch=WEB_BRANCH,
                                         message="review: two replicas")

        put_data(api_client, "ConfigMap", "app-config", {"url": "c"})
        event = wait_event(api_client, "web", "ForeignCommits")
        assert event["type"] == "Warning"
        assert WEB_BRANCH in event["message"] and "someone else" in event["message"]
        quiet(app)
        assert githost.branches(REPO)[WEB_BRANCH] == theirs  # no further push
        # Left open as it is; the reload went to a new pull request (test_pr_foreign_commits.py).
        [old, new] = open_pulls(prhost)
        assert old["number"] == pull["number"] and old["body"] == pull["body"]
        assert new["head"] == WEB_BRANCH + "-1" and len(pulls(prhost)) == 2
        assert metric(app, "pr_operations_total", host=kind, operation="skip") >= 1


def test_workloads_whose_readable_branch_keys_coincide_get_separate_pull_requests(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost) -> None:
    """Issue 10 item 7: ``x``/``deployment-y`` and ``x-deployment``/``y`` shared one branch."""
    pairs = (("x", "deployment-y"), ("x-deployment", "y"))
    setup.create({f"apps/{ns}.yaml": manifest(name).replace("namespace: ns", f"namespace: {ns}")
                  for ns, name in pairs})
    setup.configure()
    for ns, name in pairs:
        create(api_client, configmap("app-config", {"url": "a"}, namespace=ns))
        workload = pr_workload(name)
        workload["metadata"]["namespace"] = ns
        create(api_client, workload)
    with pr_controller(api_client, setup) as (app, _):
        for ns, _name in pairs:
            path = f"/api/v1/namespaces/{ns}/configmaps/app-config"
            current = call(api_client, "GET", path)
            current["data"] = {"url": "b"}
            call(api_client, "PUT", path, current)
        wait_for(lambda: len(open_pulls(prhost)) == 2 or None, timeout=60, message="two pull requests")
        quiet(app)
        heads = {p["head"] for p in open_pulls(prhost)}
        assert heads == {workload_branch(name, ns) for ns, name in pairs} and len(heads) == 2
        for (ns, name), (other, _) in zip(pairs, reversed(pairs), strict=True):
            branch = workload_branch(name, ns)
            assert hash_value(file_at(githost, f"apps/{ns}.yaml", branch)) is not None
            theirs = f"apps/{other}.yaml"
            assert file_at(githost, theirs, branch) == file_at(githost, theirs)  # untouched on this branch
            [pull] = [p for p in open_pulls(prhost) if p["head"] == branch]
            assert f"`{ns}/Deployment/{name}`" in pull["body"] and f"`{other}/" not in pull["body"]


SEAL = re.compile(r"Gitops-Reloader-Seal: ([0-9a-f]{64})")
CLUSTER_ROLE_BINDING = textwrap.dedent("""\
    apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRoleBinding
    metadata:
      name: backdoor
    roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
    subjects: [{kind: ServiceAccount, name: default, namespace: ns}]
    """)


def test_a_commit_with_our_e_mail_and_a_copied_seal_is_not_laundered(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost, kind: str) -> None:
    """Issue 10 item 6: a repository writer force-pushes a commit that claims to be ours.

    Same author and committer e-mail as the bot, the bot's commit message with the seal
    trailer of the bot's own commit copied in, an image change and a ClusterRoleBinding:
    the controller must refuse the branch (ForeignCommits), never re-commit that content
    under its name, and never merge it.
    """
    web_reloads_on_app_config(api_client, setup, auto_merge=True)
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        pull = wait_open_pull(prhost)
        quiet(app)
        history = githost.all_history_text(REPO)
        seal = SEAL.search(history)
        assert seal is not None  # the bot's own commit is sealed

        # The attacker: a repository writer with the bot's name and e-mail.
        attacker = PullRequestRepository(githost.repo_url(REPO), branch="main", workdir=setup.tmp / "mallory",
                                         auth=GitAuth(username="bot", token=TOKEN),
                                         author=Author("Reloader Bot", "reloader@example.com"))
        base = attacker.sync()
        tip = attacker.fetch_branch(WEB_BRANCH)
        attacker.checkout_new_branch_from(base, WEB_BRANCH)
        ours = file_at(githost, "apps/web.yaml", WEB_BRANCH)
        evil = ours.replace("image: nginx:1.25", "image: evil.example/miner:1")
        attacker.write("apps/web.yaml", evil.encode())
        attacker.write("cluster/backdoor.yaml", CLUSTER_ROLE_BINDING.encode())
        message = ("reload: web (configmap/app-config changed)\n\n"
                   "- ns/Deployment/web: ConfigMap ns/app-config\n\n"
                   f"Reloaded-by: gitops-reloader\nGitops-Reloader-Seal: {seal.group(1)}\n")
        forged = attacker.commit(message, ["apps/web.yaml", "cluster/backdoor.yaml"])
        attacker.push_branch(WEB_BRANCH, WEB_BRANCH, expected_remote_sha=tip)
        assert githost.branches(REPO)[WEB_BRANCH] == forged
        before = githost.branches(REPO)

        put_data(api_client, "ConfigMap", "app-config", {"url": "c"})
        event = wait_event(api_client, "web", "ForeignCommits")
        assert event["type"] == "Warning" and "seal" in event["message"]
        assert "reloader@example.com" not in event["message"]
        quiet(app)
        # Nothing pushed to their branch, and their content not re-committed under the bot's name:
        # the reload went to a new branch from the base (test_pr_foreign_commits.py).
        after = githost.branches(REPO)
        moved = after.pop(WEB_BRANCH + "-1")
        assert after == before
        assert "evil.example" not in file_at(githost, "apps/web.yaml", moved)
        assert githost.read_file(REPO, "cluster/backdoor.yaml", moved) is None
        main_text = file_at(githost, "apps/web.yaml")
        assert "evil.example" not in main_text and githost.read_file(REPO, "cluster/backdoor.yaml") is None
        [still] = [p for p in pulls(prhost) if p["head"] == WEB_BRANCH]
        assert still["number"] == pull["number"] and still["state"] == "open" and not still["merged"]
        assert still["body"] == pull["body"] and still["auto_merge"] is False
        assert metric(app, "pr_operations_total", host=kind, operation="skip") >= 1
        # Auto-merge was asked for the bot's own pull requests only: the first, and the new one.
        assert metric(app, "pr_operations_total", host=kind, operation="auto-merge") <= 2.0
        # The ClusterRoleBinding is in exactly one commit of the whole repository: the attacker's.
        assert [sha for sha, _ in githost.log(REPO, WEB_BRANCH)
                if githost.read_file(REPO, "cluster/backdoor.yaml", sha) is not None] == [forged]


def test_the_bot_commit_amended_under_its_own_seal_is_refused(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost) -> None:
    """Amending the bot's commit (same message and seal, other tree) is as foreign as any other commit."""
    setup.create({"apps/web.yaml": manifest("web"), "README.md": "# fleet\n"})
    setup.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, pr_workload("web"))
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_open_pull(prhost)
        quiet(app)
        attacker = PullRequestRepository(githost.repo_url(REPO), branch="main", workdir=setup.tmp / "mallory",
                                         auth=GitAuth(username="bot", token=TOKEN),
                                         author=Author("Reloader Bot", "reloader@example.com"))
        base = attacker.sync()
        tip = attacker.fetch_branch(WEB_BRANCH)
        assert tip is not None
        [mine] = attacker.commits_ahead(base, tip)
        assert len(mine.seals) == 1  # sealed, over the bot's tree and parent
        attacker.checkout_new_branch_from(base, WEB_BRANCH)
        attacker.write("apps/web.yaml", file_at(githost, "apps/web.yaml", WEB_BRANCH).replace(
            "replicas: 1", "replicas: 50").encode())
        message = f"reload: web\n\nGitops-Reloader-Seal: {mine.seals[0]}\n"
        forged = attacker.commit(message, ["apps/web.yaml"])
        attacker.push_branch(WEB_BRANCH, WEB_BRANCH, expected_remote_sha=tip)

        put_data(api_client, "ConfigMap", "app-config", {"url": "c"})
        wait_event(api_client, "web", "ForeignCommits")
        quiet(app)
        assert githost.branches(REPO)[WEB_BRANCH] == forged
        assert "replicas: 50" not in file_at(githost, "apps/web.yaml")


# --------------------------------------------------------------------------- secrets


def test_secret_change_puts_only_a_keyed_digest_in_history_and_pull_request(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost,
        caplog: pytest.LogCaptureFixture) -> None:
    setup.create({"apps/db.yaml": manifest("db-client")})
    setup.configure()
    value = "hunter2-correct-horse"
    create(api_client, secret("db", {"password": "first-value"}))
    create(api_client, pr_workload("db-client", sources="", secrets="db"))
    caplog.set_level(logging.DEBUG)
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "Secret", "db", {"password": value})
        pull = wait_open_pull(prhost)
        quiet(app)
        encoded = base64.b64encode(value.encode()).decode()
        plain = secret_hash({"password": encoded})
        written = hash_value(file_at(githost, "apps/db.yaml", workload_branch("db-client")))
        assert written not in (None, plain)
        assert "secret/db" in pull["title"] and "Secret `ns/db`" in pull["body"]
        history = githost.all_history_text(REPO)
        bodies = "\n".join(p["title"] + "\n" + p["body"] for p in pulls(prhost))
        for text in (history, bodies, caplog.text):
            for needle in (value, encoded, plain, plain[:12]):
                assert needle not in text


# --------------------------------------------------------------------------- the branch repository


def hashed(value: str, *, x: int = 1) -> str:
    """A small manifest fragment with a config-hash line between two other lines."""
    pads = "".join(f"  pad{i}: 0\n" for i in range(5))
    return f"x: {x}\n{pads}annotations:\n  gitops-reloader.io/config-hash: \"{value}\"\n"


def test_branch_repository_seals_its_commit_and_carries_only_hash_lines_over_a_moving_base(
        tmp_path: Path, githost: GitHostServer) -> None:
    key = b"k" * 32
    names = ("merge", "clash", "plain", "gone")
    githost.create_repo(REPO, {**{f"{name}.yaml": hashed("a") for name in names},
                               "other.yaml": "image: nginx\n"})
    repo = PullRequestRepository(githost.repo_url(REPO), branch="main", workdir=tmp_path / "clone",
                                 auth=GitAuth(username="bot", token=TOKEN),
                                 author=Author("Reloader Bot", "reloader@example.com"))
    base = repo.sync()
    assert repo.fetch_branch(ALL_BRANCH) is None
    repo.checkout_new_branch_from(base, ALL_BRANCH)
    ours = {"merge.yaml": hashed("b"), "clash.yaml": hashed("b"), "plain.yaml": hashed("b"),
            "gone.yaml": hashed("b"), "other.yaml": "image: evil\n", "added.yaml": hashed("b")}
    for path, text in ours.items():
        repo.write(path, text.encode())
    tip_local = repo.commit_sealed("reload: all\n\nReloaded-by: gitops-reloader\n", sorted(ours),
                                   lambda tree, parents: prpolicy.seal_trailer(key, tree, parents))
    assert repo.commit_sealed("nothing", ["merge.yaml"], lambda tree, parents: "") is None  # no change
    repo.push_branch(ALL_BRANCH, ALL_BRANCH, expected_remote_sha=None)
    tip = repo.fetch_branch(ALL_BRANCH)
    assert tip == tip_local == githost.branches(REPO)[ALL_BRANCH]
    [mine] = repo.commits_ahead(base, tip)
    assert (mine.sha, mine.parents) == (tip, (base,)) and mine.tree == repo.tree(tip)
    assert prpolicy.branch_ownership([mine], key=key).ours
    assert not prpolicy.branch_ownership([mine], key=b"other-key" * 4).ours

    # The base moves on: another line of one file, the same line of another, a deletion.
    githost.commit_directly(REPO, {"merge.yaml": hashed("a", x=5), "clash.yaml": hashed("c"),
                                   "gone.yaml": None})
    new_base = repo.sync()
    repo.checkout_new_branch_from(new_base, ALL_BRANCH)
    carry = repo.carry_over(tip)
    assert sorted(carry.carried) == ["merge.yaml", "plain.yaml"]
    assert sorted(carry.conflicted) == ["clash.yaml", "gone.yaml"]
    assert sorted(carry.refused) == ["added.yaml", "other.yaml"]  # never whole files, only hash lines
    assert repo.read("merge.yaml") == hashed("b", x=5).encode()
    assert repo.read("plain.yaml") == hashed("b").encode()
    assert repo.read("clash.yaml") == hashed("c").encode() and repo.read("gone.yaml") is None  # the base's
    assert repo.read("other.yaml") == b"image: nginx\n" and repo.read("added.yaml") is None
    [theirs] = repo.commits_ahead(base, new_base)
    assert theirs.seals == () and not prpolicy.branch_ownership([theirs], key=key).ours
    assert repo.tree(tip) != repo.tree(new_base)


def test_sealed_commits_are_signed_when_the_repository_signs(tmp_path: Path, githost: GitHostServer) -> None:
    signing_key = tmp_path / "signing_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(signing_key)], check=True,
                   timeout=30)
    (Path(os.environ["HOME"]) / ".gitconfig").write_text(
        f"[gpg]\n\tformat = ssh\n[user]\n\tsigningkey = {signing_key}.pub\n")
    githost.create_repo(REPO, {"web.yaml": hashed("a")})
    repo = PullRequestRepository(githost.repo_url(REPO), branch="main", workdir=tmp_path / "clone",
                                 auth=GitAuth(username="bot", token=TOKEN),
                                 author=Author("Reloader Bot", "reloader@example.com"), sign=True)
    key = b"k" * 32
    base = repo.sync()
    repo.checkout_new_branch_from(base, ALL_BRANCH)
    repo.write("web.yaml", hashed("b").encode())
    sha = repo.commit_sealed("reload: web\n", ["web.yaml"],
                             lambda tree, parents: prpolicy.seal_trailer(key, tree, parents))
    assert sha is not None
    raw = subprocess.run(["git", "cat-file", "commit", sha], cwd=repo.workdir, capture_output=True,
                         text=True, check=True).stdout
    assert "-----BEGIN SSH SIGNATURE-----" in raw and "\nGitops-Reloader-Seal: " in raw
    [mine] = repo.commits_ahead(base, sha)
    assert prpolicy.branch_ownership([mine], key=key).ours  # the signature does not change tree or parents


# --------------------------------------------------------------------------- wiring


def test_wiring_builds_no_sink_without_pull_requests_and_reports_a_bad_token_file(
        tmp_path: Path, githost: GitHostServer) -> None:
    metrics = Metrics(CollectorRegistry())
    api: Any = None  # nothing is read from the cluster while wiring
    config_file = tmp_path / "git-config.yaml"
    env = {"HOME": str(tmp_path / "home")}
    assert build_pull_request_sink(load_config([], environ=env), api, metrics, None) is None
    config_file.write_text(f"repositories:\n  - name: {NAME}\n    url: {githost.repo_url(REPO)}\n")
    flags = [f"--git-config={config_file}", f"--git-cache-dir={tmp_path / 'cache'}"]
    assert build_pull_request_sink(load_config(flags, environ=env), api, metrics, None) is None
    block = f"    pullRequest: {{host: gitea, tokenFile: {tmp_path}/nope}}\n"
    config_file.write_text(config_file.read_text() + block)
    # The repository is reported (issue 27: per repository, the controller keeps running), not fatal.
    sink = build_pull_request_sink(load_config(flags, environ=env), api, metrics, None)
    assert sink is not None and NAME not in sink.repositories
    problem = sink.unusable[NAME]
    assert problem.reason == "TokenFileMissing" and problem.path == f"{tmp_path}/nope"
    assert str(problem).startswith("pullRequest: cannot read git token file") and "nope" in str(problem)
    assert metrics.registry.get_sample_value("gitops_reloader_git_repository_unusable", {
        "sink": "pull-request", "repo": NAME, "reason": "TokenFileMissing"}) == 1.0
