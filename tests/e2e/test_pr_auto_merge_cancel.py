"""An auto-merge we armed is cancelled once someone else pushes to our pull-request branch.

End to end on the PR host test server, GitLab (current, and older without
``cancel_auto_merge``) and Gitea: the controller opens the pull request with
``autoMerge: true``, a person pushes a commit to its branch, the next change finds the
foreign commit, leaves the branch alone and cancels the auto-merge on the host, so the
foreign content is never merged on the controller's authority. A refused cancel is
reported on the workload, counted, retried on the next change, and never holds up the
other workloads. Fixtures and helpers come from ``test_pull_request_sink``.
"""

from __future__ import annotations

from typing import Any

import pytest
import test_pull_request_sink as sink_tests
from kubernetes.client import ApiClient
from reload_helpers import configmap, create
from test_pull_request_sink import (
    NAME,
    REPO,
    WEB_BRANCH,
    PrSetup,
    events,
    file_at,
    manifest,
    metric,
    pr_controller,
    pr_workload,
    pulls,
    put_data,
    quiet,
    wait_open_pull,
    workload_branch,
)

from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import wait_for
from gitops_reloader.testing.prhost import PrHost

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

setup = sink_tests.setup

API_BRANCH = workload_branch("api")
CANCELLED = "Its auto-merge was cancelled."
NOT_CANCELLED = "Its auto-merge could NOT be cancelled"


def wait_foreign_event(api_client: ApiClient, name: str, text: str) -> dict[str, Any]:
    """The ``ForeignCommits`` Event on ``name`` whose message contains ``text``."""
    def find() -> dict[str, Any] | None:
        return next((e for e in events(api_client, name)
                     if e.get("reason") == "ForeignCommits" and text in e.get("message", "")), None)

    return wait_for(find, timeout=30, message=f"ForeignCommits event on {name} saying {text!r}")


def pull_on(prhost: PrHost, branch: str) -> dict[str, Any]:
    [pull] = [p for p in pulls(prhost) if p["head"] == branch]
    return pull


def push_foreign_commit(githost: GitHostServer) -> str:
    """A person's commit on the ``web`` pull-request branch; its sha."""
    edited = file_at(githost, "apps/web.yaml", WEB_BRANCH).replace("replicas: 1", "replicas: 2")
    return githost.commit_directly(REPO, {"apps/web.yaml": edited}, branch=WEB_BRANCH,
                                   message="review: two replicas")


@pytest.mark.parametrize(("kind", "older"), [("gitlab", False), ("gitlab", True), ("gitea", False)])
def test_foreign_commits_cancel_our_armed_auto_merge_and_leave_the_branch_alone(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost,
        kind: str, older: bool) -> None:
    prhost.gitlab_without_cancel_auto_merge(older)
    setup.create({"apps/web.yaml": manifest("web")})
    setup.configure(auto_merge=True)
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, pr_workload("web"))
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        pull = wait_open_pull(prhost, lambda p: p["auto_merge"])
        quiet(app)
        theirs = push_foreign_commit(githost)

        put_data(api_client, "ConfigMap", "app-config", {"url": "c"})
        event = wait_foreign_event(api_client, "web", CANCELLED)
        quiet(app)
        assert event["type"] == "Warning" and WEB_BRANCH in event["message"]
        still = pull_on(prhost, WEB_BRANCH)
        assert still["number"] == pull["number"] and still["state"] == "open"
        assert still["auto_merge"] is False and still["body"] == pull["body"]
        assert githost.branches(REPO)[WEB_BRANCH] == theirs  # branch untouched
        assert metric(app, "pr_operations_total", host=kind, operation="cancel-auto-merge") == 1.0
        assert metric(app, "git_errors_total", repo=NAME, reason="cancel-auto-merge") == 0.0
        cancels = [r for r in prhost.requests if "cancel" in r.path]
        if kind == "gitlab":
            assert any(r.path.endswith("/cancel_merge_when_pipeline_succeeds") for r in cancels) is older
            assert all(r.method == "POST" for r in cancels)
        else:
            assert not cancels
            assert [(r.method, r.status) for r in prhost.requests
                    if r.method == "DELETE" and r.path.endswith("/merge")] == [("DELETE", 204)]

        # The reload went to a new pull request of ours (auto-merge armed there: its content is ours).
        new = pull_on(prhost, WEB_BRANCH + "-1")
        assert new["state"] == "open" and new["auto_merge"] is True
        # The next change updates that one: nothing cancelled twice, the old one left alone.
        put_data(api_client, "ConfigMap", "app-config", {"url": "d"})
        wait_for(lambda: pull_on(prhost, WEB_BRANCH + "-1")["body"] != new["body"], timeout=30,
                 message="the new pull request updated")
        quiet(app)
        assert metric(app, "pr_operations_total", host=kind, operation="cancel-auto-merge") == 1.0
        assert pull_on(prhost, WEB_BRANCH)["auto_merge"] is False and len(pulls(prhost)) == 2
        assert githost.branches(REPO)[WEB_BRANCH] == theirs


@pytest.mark.parametrize("kind", ["gitlab", "gitea"])
def test_a_refused_cancel_is_reported_retried_on_the_next_change_and_blocks_no_one(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost, kind: str) -> None:
    setup.create({"apps/web.yaml": manifest("web"), "apps/api.yaml": manifest("api")})
    setup.configure(auto_merge=True)
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, pr_workload("web"))
    create(api_client, pr_workload("api"))
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_for(lambda: len([p for p in pulls(prhost) if p["auto_merge"]]) == 2, timeout=30,
                 message="two pull requests with auto-merge armed")
        quiet(app)
        api_before = pull_on(prhost, API_BRANCH)
        theirs = push_foreign_commit(githost)

        prhost.deny_merge(True)  # the token's user may not cancel it
        put_data(api_client, "ConfigMap", "app-config", {"url": "c"})
        event = wait_foreign_event(api_client, "web", NOT_CANCELLED)
        wait_for(lambda: pull_on(prhost, API_BRANCH)["body"] != api_before["body"], timeout=30,
                 message="the api pull request updated")
        quiet(app)
        message = event["message"]
        assert "not allowed to cancel" in message and "tried again on the next change" in message
        assert sink_tests.TOKEN not in message
        assert pull_on(prhost, WEB_BRANCH)["auto_merge"] is True
        assert metric(app, "git_errors_total", repo=NAME, reason="cancel-auto-merge") == 1.0
        assert metric(app, "pr_operations_total", host=kind, operation="cancel-auto-merge") == 0.0
        assert githost.branches(REPO)[WEB_BRANCH] == theirs
        assert not [e for e in events(api_client, "api") if e.get("type") == "Warning"]

        prhost.deny_merge(False)  # the next change tries again, and gets through
        put_data(api_client, "ConfigMap", "app-config", {"url": "d"})
        wait_foreign_event(api_client, "web", CANCELLED)
        quiet(app)
        assert pull_on(prhost, WEB_BRANCH)["auto_merge"] is False
        assert pull_on(prhost, API_BRANCH)["auto_merge"] is True  # ours: untouched
        assert metric(app, "pr_operations_total", host=kind, operation="cancel-auto-merge") == 1.0
        assert githost.branches(REPO)[WEB_BRANCH] == theirs
