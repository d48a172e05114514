"""Issue 12 end to end: each host answering as it really does, seen through the pull-request sink.

Every test changes a ConfigMap in the API test server and checks the pull request the
controller ends with on the PR host test server (:class:`~gitops_reloader.testing.prhost.PrHost`),
which gives the answer under test: a rate limit with or without headers, a renamed
repository, a capped page, a merge still being checked, a user without merge rights,
Basic auth, a duplicate answered with the open pull request. Waits the host asks for
are recorded by a sleeper injected into the wired host client, never slept.
Fixtures and helpers come from ``test_pull_request_sink``.
"""

from __future__ import annotations

import logging
import subprocess
import textwrap
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import test_pull_request_sink as sink_tests
from kubernetes.client import ApiClient
from reload_helpers import configmap, create
from test_pull_request_sink import (
    LABEL,
    NAME,
    REPO,
    TOKEN,
    PrSetup,
    events,
    manifest,
    metric,
    pr_controller,
    pr_workload,
    pulls,
    put_data,
    quiet,
    wait_event,
    wait_open_pull,
)

from gitops_reloader.gitops.hosts import BitbucketHost, GiteaHost, GitHubHost, GitLabHost, RetryPolicy
from gitops_reloader.gitops.prpolicy import BODY_LIMIT, parse_entries
from gitops_reloader.sinks.pullrequest import PullRequestSink
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import wait_for
from gitops_reloader.testing.prhost import PrHost

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

# The pull-request sink suite's setup (git server and PR host come from conftest).
setup = sink_tests.setup

def extra(setup: PrSetup, lines: str) -> None:
    """Append settings to the ``pullRequest`` block ``setup.configure()`` wrote (it comes last)."""
    settings = textwrap.indent(textwrap.dedent(lines), " " * 6)
    setup.config_path.write_text(setup.config_path.read_text() + settings)


def patient(sleeps: list[float]) -> Callable[[PullRequestSink], None]:
    """A sink hook: the host clients record the waits they would sleep and take up to an hour."""
    def hook(sink: PullRequestSink) -> None:
        for target in sink.targets.values():
            host: Any = target.host
            host.sleep = sleeps.append
            host.retry = RetryPolicy(max_wait=3600)
    return hook


def start(api_client: ApiClient, setup: PrSetup, *, files: dict[str, str] | None = None) -> None:
    """Repository with the ``web`` manifest, its ConfigMap and the Deployment on the pull-request sink."""
    setup.create(files or {"apps/web.yaml": manifest("web")})
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, pr_workload("web"))


# --------------------------------------------------------------------------- GitHub


@pytest.mark.parametrize("kind", ["github"])
@pytest.mark.parametrize(("status", "retry_after", "reset_in", "at_least"), [
    (403, 45.0, None, 45.0),
    (429, None, 90.0, 80.0),
    (403, None, None, 60.0),  # a secondary limit with neither header: at least a minute
])
def test_github_rate_limits_wait_as_told_and_never_read_as_a_refused_token(
        api_client: ApiClient, setup: PrSetup, prhost: PrHost, kind: str, status: int,
        retry_after: float | None, reset_in: float | None, at_least: float) -> None:
    start(api_client, setup)
    setup.configure()
    sleeps: list[float] = []
    with pr_controller(api_client, setup, sink_hook=patient(sleeps)) as (app, _):
        prhost.secondary_rate_limit(1, status=status, retry_after=retry_after, reset_in=reset_in)
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_open_pull(prhost)
        quiet(app)
        assert len(pulls(prhost)) == 1
        assert len(sleeps) == 1 and at_least <= sleeps[0] <= at_least + 15
        assert not [e for e in events(api_client, "web") if e.get("type") == "Warning"]
        assert metric(app, "pr_operations_total", host=kind, operation="create") == 1.0


@pytest.mark.parametrize("kind", ["github"])
def test_github_renamed_repository_is_followed_and_logged_once(
        api_client: ApiClient, setup: PrSetup, prhost: PrHost, kind: str,
        caplog: pytest.LogCaptureFixture) -> None:
    start(api_client, setup)
    setup.configure()
    extra(setup, "repository: org/old-fleet\n")
    prhost.rename("org/old-fleet", REPO)
    caplog.set_level(logging.INFO)
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_open_pull(prhost)
        quiet(app)
        assert pulls(prhost)[0]["labels"] == [LABEL]  # the labels POST was redirected (307) too
        moved = [r for r in caplog.records if "repository moved" in r.getMessage()]
        assert len(moved) == 1
        statuses = {r.status for r in prhost.requests}
        assert {301, 307} <= statuses
        assert TOKEN not in caplog.text


@pytest.mark.parametrize("kind", ["github"])
def test_github_repository_moved_to_another_origin_is_a_clear_permanent_error(
        api_client: ApiClient, setup: PrSetup, prhost: PrHost, kind: str) -> None:
    start(api_client, setup)
    setup.configure()
    extra(setup, "repository: org/old-fleet\n")
    prhost.rename("org/old-fleet", REPO, elsewhere="https://github.other.example")
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        event = wait_event(api_client, "web", "HostError")
        quiet(app)
        assert event["type"] == "Warning"
        assert "github.other.example" in event["message"] and "set pullRequest.repository" in event["message"]
        assert pulls(prhost) == []
        assert metric(app, "queue_retries_total") == 0  # permanent: not retried


@pytest.mark.parametrize("kind", ["github"])
def test_github_200_of_the_wrong_shape_is_retried_not_taken_for_no_pull_request(
        api_client: ApiClient, setup: PrSetup, prhost: PrHost, kind: str) -> None:
    start(api_client, setup)
    setup.configure()
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        first = wait_open_pull(prhost)
        quiet(app)
        # The list of pull requests comes back as an object once: that is not "no pull request".
        prhost.answer_next(1, 200, {"message": "ok"}, method="GET", path="/pulls")
        put_data(api_client, "ConfigMap", "app-config", {"url": "c"})
        wait_event(api_client, "web", "ReloadFailed")
        updated = wait_open_pull(prhost, lambda p: p["body"] != first["body"], timeout=60)
        quiet(app)
        assert updated["number"] == first["number"] and len(pulls(prhost)) == 1


# --------------------------------------------------------------------------- every host: 300 workloads


@pytest.mark.parametrize("kind", ["github", "gitlab", "gitea", "bitbucket"])
def test_300_workloads_grouped_per_repository_make_one_pull_request_within_every_limit(
        api_client: ApiClient, setup: PrSetup, prhost: PrHost, githost: GitHostServer, kind: str) -> None:
    count = 300
    names = [f"workload-with-a-rather-long-descriptive-name-{i:03d}" for i in range(count)]
    setup.create({f"apps/{name}.yaml": manifest(name) for name in names})
    setup.configure(grouping="repository")
    create(api_client, configmap("app-config", {"url": "a"}))
    for name in names:
        create(api_client, pr_workload(name))
    began = time.monotonic()
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_for(lambda: metric(app, "sink_outcomes_total", sink="pull-request", outcome="applied") >= count,
                 timeout=120, message="every workload applied")
        quiet(app)
        [pull] = pulls(prhost)
        body = pull["body"]
        limits = [h.traits.max_body for h in (GitHubHost, GitLabHost, GiteaHost, BitbucketHost)]
        assert len(body) <= BODY_LIMIT <= min(limits)
        assert "more | | | |" in body
        entries = parse_entries(body)
        assert 0 < len(entries) <= count and all(e.name in names for e in entries)
        assert not [e for e in events(api_client, names[0]) if e.get("type") == "Warning"]
    print(f"\n{kind}: {count} workloads -> 1 pull request, body {len(body)} characters, "
          f"{time.monotonic() - began:.1f}s")


# --------------------------------------------------------------------------- Gitea


@pytest.mark.parametrize("kind", ["gitea"])
def test_gitea_with_a_page_cap_of_30_finds_its_pull_request_among_40_open_ones(
        api_client: ApiClient, setup: PrSetup, prhost: PrHost, githost: GitHostServer, kind: str) -> None:
    start(api_client, setup)
    setup.configure()
    prhost.set_page_cap("gitea", 30)
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        ours = wait_open_pull(prhost)
        quiet(app)
        # People open 39 newer pull requests: ours is now on the second page of 30.
        bare = githost.bare_path(REPO)
        main = githost.branches(REPO)["main"]
        with httpx.Client(base_url=setup.api_url, headers={"Authorization": f"token {TOKEN}"}) as http:
            for i in range(39):
                subprocess.run(["git", f"--git-dir={bare}", "update-ref", f"refs/heads/feature-{i}", main],
                               check=True)
                http.post(f"/repos/{REPO}/pulls", json={"head": f"feature-{i}", "base": "main",
                                                        "title": f"feature {i}"}).raise_for_status()
        put_data(api_client, "ConfigMap", "app-config", {"url": "c"})
        wait_for(lambda: [p for p in pulls(prhost) if p["number"] == ours["number"]
                          and p["body"] != ours["body"]], timeout=30, message="our pull request updated")
        quiet(app)
        assert len(pulls(prhost)) == 40
        assert not [e for e in events(api_client, "web") if e.get("type") == "Warning"]
        assert metric(app, "pr_operations_total", host=kind, operation="update") == 1.0


@pytest.mark.parametrize("kind", ["gitea"])
def test_gitea_organisation_labels_are_valid_label_ids(
        api_client: ApiClient, setup: PrSetup, prhost: PrHost, githost: GitHostServer, kind: str) -> None:
    githost.create_repo(REPO, {"apps/web.yaml": manifest("web")})
    prhost.add_org_label("org", LABEL)  # defined once for the organisation, not in the repository
    setup.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, pr_workload("web"))
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_open_pull(prhost)
        quiet(app)
        assert pulls(prhost)[0]["labels"] == [LABEL]


@pytest.mark.parametrize("kind", ["gitea"])
@pytest.mark.parametrize("answer", ["checking", "already-scheduled"])
def test_gitea_auto_merge_is_asked_again_while_checking_and_already_scheduled_means_yes(
        api_client: ApiClient, setup: PrSetup, prhost: PrHost, kind: str, answer: str) -> None:
    start(api_client, setup)
    setup.configure()
    extra(setup, "autoMerge: true\n")
    sleeps: list[float] = []
    if answer == "checking":
        prhost.set_checking(2)  # 405 "Please try again later" twice, then 201
    else:
        prhost.answer_next(1, 409, {"message": "pull request is already scheduled to auto merge when checks "
                                               "succeed"}, method="POST", path="/merge")
    with pr_controller(api_client, setup, sink_hook=patient(sleeps)) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_open_pull(prhost)
        wait_for(lambda: metric(app, "pr_operations_total", host=kind, operation="auto-merge"), timeout=30,
                 message="auto-merge enabled")
        quiet(app)
        assert len(sleeps) == (2 if answer == "checking" else 0)
        merges = [r.status for r in prhost.requests if r.path.endswith("/merge")]
        assert merges == ([405, 405, 201] if answer == "checking" else [409])
        if answer == "checking":
            assert pulls(prhost)[0]["auto_merge"] is True


# --------------------------------------------------------------------------- GitLab


@pytest.mark.parametrize("kind", ["gitlab"])
def test_gitlab_auto_merge_before_the_pipeline_exists_is_asked_again_with_branch_options(
        api_client: ApiClient, setup: PrSetup, prhost: PrHost, kind: str) -> None:
    start(api_client, setup)
    setup.configure()
    extra(setup, "autoMerge: true\nremoveSourceBranch: true\nsquash: true\n")
    prhost.set_checking(3)  # 422, 405, 422 while mergeability is checked and no pipeline exists
    sleeps: list[float] = []
    with pr_controller(api_client, setup, sink_hook=patient(sleeps)) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_open_pull(prhost)
        wait_for(lambda: pulls(prhost)[0]["auto_merge"], timeout=30, message="auto-merge set")
        quiet(app)
        [pull] = pulls(prhost)
        assert (pull["remove_source_branch"], pull["squash"]) == (True, True)
        assert [r.status for r in prhost.requests if r.path.endswith("/merge")] == [422, 405, 422, 200]
        assert len(sleeps) == 3
        assert metric(app, "pr_operations_total", host=kind, operation="auto-merge") == 1.0


@pytest.mark.parametrize("kind", ["gitlab"])
def test_gitlab_without_merge_rights_says_not_allowed_to_merge_and_keeps_the_merge_request(
        api_client: ApiClient, setup: PrSetup, prhost: PrHost, kind: str,
        caplog: pytest.LogCaptureFixture) -> None:
    start(api_client, setup)
    setup.configure()
    extra(setup, "autoMerge: true\n")
    prhost.deny_merge(True)
    caplog.set_level(logging.INFO)
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_open_pull(prhost)
        wait_for(lambda: metric(app, "git_errors_total", repo=NAME, reason="auto-merge"), timeout=30,
                 message="the auto-merge failure")
        quiet(app)
        [pull] = pulls(prhost)
        assert pull["state"] == "open" and pull["auto_merge"] is False
        errors = [str(getattr(r, "error", "")) for r in caplog.records if "auto-merge" in r.getMessage()]
        assert any("not allowed to merge" in e for e in errors)
        assert not any("token refused" in e for e in errors)
        assert metric(app, "sink_outcomes_total", sink="pull-request", outcome="applied") == 1.0


# --------------------------------------------------------------------------- Bitbucket


@pytest.mark.parametrize("kind", ["bitbucket"])
def test_bitbucket_basic_auth_with_username_and_app_password(
        api_client: ApiClient, setup: PrSetup, prhost: PrHost, kind: str,
        caplog: pytest.LogCaptureFixture) -> None:
    start(api_client, setup)
    setup.configure()
    extra(setup, "username: reloader@example.com\n")
    prhost.allow_basic("reloader@example.com")
    caplog.set_level(logging.DEBUG)
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_open_pull(prhost)
        quiet(app)
        assert metric(app, "pr_operations_total", host=kind, operation="create") == 1.0
        assert TOKEN not in caplog.text


@pytest.mark.parametrize("kind", ["bitbucket"])
def test_bitbucket_429_without_retry_after_waits_a_minute(
        api_client: ApiClient, setup: PrSetup, prhost: PrHost, kind: str) -> None:
    start(api_client, setup)
    setup.configure()
    sleeps: list[float] = []
    with pr_controller(api_client, setup, sink_hook=patient(sleeps)) as (app, _):
        prhost.fail_next(1, 429)  # no Retry-After, as Bitbucket Cloud answers
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_open_pull(prhost)
        quiet(app)
        assert sleeps == [60.0]


@pytest.mark.parametrize("kind", ["bitbucket"])
def test_bitbucket_create_answered_with_the_open_pull_request_updates_it_keeping_reviewers(
        api_client: ApiClient, setup: PrSetup, prhost: PrHost, kind: str) -> None:
    start(api_client, setup)
    setup.configure()
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        first = wait_open_pull(prhost)
        quiet(app)
        prhost.set_reviewers(REPO, first["number"], ["{reviewer-uuid}"])
        # A stale list: the sink sees no open pull request and creates; Bitbucket answers with the open one.
        prhost.answer_next(1, 200, {"pagelen": 50, "values": [], "page": 1, "size": 0}, method="GET",
                           path="/pullrequests")
        put_data(api_client, "ConfigMap", "app-config", {"url": "c"})
        updated = wait_open_pull(prhost, lambda p: p["body"] != first["body"])
        quiet(app)
        assert updated["number"] == first["number"] and len(pulls(prhost)) == 1
        assert updated["reviewers"] == ["{reviewer-uuid}"]
        assert len(updated["head_sha"]) == 40  # the server keeps full hashes; its answers show 12
