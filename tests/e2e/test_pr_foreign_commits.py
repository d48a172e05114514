"""Issue 28: a pull request whose branch someone else committed to is given up, and the reload moves on.

End to end on every host shape (GitHub, GitLab, Gitea, Bitbucket Cloud) of the PR host test
server: the controller opens its pull request, a person pushes a commit to its branch (an
image swap and a ClusterRoleBinding), and the next change finds the commit is not sealed by
the controller. The old pull request then carries one notice comment and the
``gitops-reloader/foreign-commits`` label (Bitbucket: the comment only), the workload a
Warning Event, and the reload a new pull request from ``<branch>-1``. Nothing is
force-pushed: the old branch's tip and reflog end with the person's commit. A second change,
and a restart, update the new pull request: no third one, no second comment. Fixtures and
helpers come from ``test_pull_request_sink``.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import test_pull_request_sink as sink_tests
from kubernetes.client import ApiClient
from reload_helpers import configmap, create
from test_pull_request_sink import (
    ALL_BRANCH,
    CLUSTER_ROLE_BINDING,
    REPO,
    WEB_BRANCH,
    PrSetup,
    commits_ahead,
    events,
    file_at,
    hash_value,
    manifest,
    metric,
    open_pulls,
    pr_controller,
    pr_workload,
    pulls,
    put_data,
    quiet,
    web_reloads_on_app_config,
)

from gitops_reloader.app import App
from gitops_reloader.gitops import prpolicy
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import wait_for
from gitops_reloader.testing.prhost import PrHost

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

setup = sink_tests.setup
kind = sink_tests.kind

NEXT_BRANCH = WEB_BRANCH + "-1"
NOTICE = "gitops-reloader no longer updates this pull request"


def pull_on(prhost: PrHost, branch: str) -> dict[str, Any] | None:
    """The newest pull request from ``branch`` (never more than one open)."""
    found = [p for p in pulls(prhost) if p["head"] == branch]
    assert len([p for p in found if p["state"] == "open"]) <= 1, found
    return found[-1] if found else None


def wait_pull_on(prhost: PrHost, branch: str, predicate: Any = None) -> dict[str, Any]:
    def find() -> dict[str, Any] | None:
        pull = pull_on(prhost, branch)
        return pull if pull is not None and pull["state"] == "open" and (
            predicate is None or predicate(pull)) else None

    return wait_for(find, timeout=30, message=f"an open pull request from {branch}")


def change_and_wait_pull(api_client: ApiClient, app: App, prhost: PrHost, url: str, branch: str,
                         predicate: Any = None) -> dict[str, Any]:
    """Set ``app-config``'s url; the open pull request from ``branch`` it leads to (once
    ``predicate(pull)`` holds), returned when the controller is quiet again."""
    put_data(api_client, "ConfigMap", "app-config", {"url": url})
    pull = wait_pull_on(prhost, branch, predicate)
    quiet(app)
    return pull


def reflog(githost: GitHostServer, branch: str) -> list[str]:
    """New shas of ``branch``'s reflog in the bare repository, oldest first."""
    out = subprocess.run(["git", f"--git-dir={githost.bare_path(REPO)}", "reflog", "show", "--format=%H",
                          f"refs/heads/{branch}", "--"], capture_output=True, text=True, check=True).stdout
    return list(reversed(out.split()))


def keep_reflogs(githost: GitHostServer) -> None:
    """Bare repositories keep no reflog by default: log every update of every ref from now on."""
    subprocess.run(["git", f"--git-dir={githost.bare_path(REPO)}", "config", "core.logAllRefUpdates",
                    "always"], check=True)


def push_foreign_commit(githost: GitHostServer) -> str:
    """A person's commit on the ``web`` pull-request branch: another image and a backdoor."""
    ours = file_at(githost, "apps/web.yaml", WEB_BRANCH)
    return githost.commit_directly(REPO, {
        "apps/web.yaml": ours.replace("image: nginx:1.25", "image: evil.example/miner:1"),
        "cluster/backdoor.yaml": CLUSTER_ROLE_BINDING,
    }, branch=WEB_BRANCH, message="review: use our mirror")


def test_a_foreign_commit_gets_the_old_pull_request_a_notice_and_the_reload_a_new_one(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost, kind: str) -> None:
    web_reloads_on_app_config(api_client, setup)
    keep_reflogs(githost)
    with pr_controller(api_client, setup) as (app, _):
        old = change_and_wait_pull(api_client, app, prhost, "b", WEB_BRANCH)
        theirs = push_foreign_commit(githost)

        new = change_and_wait_pull(api_client, app, prhost, "c", NEXT_BRANCH)
        # The old pull request: open, untouched, one notice naming the commit and the new branch.
        still = pull_on(prhost, WEB_BRANCH)
        assert still is not None and still["state"] == "open" and not still["merged"]
        assert (still["title"], still["body"]) == (old["title"], old["body"])
        [notice] = still["comments"]
        assert NOTICE in notice and theirs[:12] in notice and f"`{NEXT_BRANCH}`" in notice
        assert "<!-- gitops-reloader:foreign-commits=" in notice
        if kind == "bitbucket":  # Bitbucket Cloud has no labels: the comment says it all
            assert still["labels"] == []
        else:
            assert prpolicy.FOREIGN_LABEL in still["labels"]
        # Nothing force-pushed: the old branch ends with the person's commit, in its tip and its reflog.
        assert githost.branches(REPO)[WEB_BRANCH] == theirs
        assert reflog(githost, WEB_BRANCH)[-1] == theirs
        assert file_at(githost, "apps/web.yaml") == manifest("web")  # the base is untouched
        # The reload: a new pull request, one sealed commit on the base, none of their content.
        assert new["number"] != old["number"] and new["base"] == "main"
        assert commits_ahead(githost, NEXT_BRANCH) == ["reload: web (configmap/app-config changed)"]
        moved = file_at(githost, "apps/web.yaml", NEXT_BRANCH)
        assert hash_value(moved) is not None and "evil.example" not in moved
        assert githost.read_file(REPO, "cluster/backdoor.yaml", NEXT_BRANCH) is None
        [event] = [e for e in events(api_client, "web") if e.get("reason") == "ForeignCommits"]
        assert event["type"] == "Warning" and WEB_BRANCH in event["message"]
        assert NEXT_BRANCH in event["message"] and f"#{old['number']}" in event["message"]
        assert metric(app, "pr_foreign_commits_total", host=kind) == 1.0
        assert metric(app, "pr_operations_total", host=kind, operation="comment") == 1.0

        # The next change updates the new pull request: no third, no second notice.
        before = new["body"]
        change_and_wait_pull(api_client, app, prhost, "d", NEXT_BRANCH, lambda p: p["body"] != before)
        assert len(pulls(prhost)) == 2 and len(open_pulls(prhost)) == 2
        assert len(pull_on(prhost, WEB_BRANCH)["comments"]) == 1  # type: ignore[index]
        assert githost.branches(REPO)[WEB_BRANCH] == theirs and reflog(githost, WEB_BRANCH)[-1] == theirs
        assert metric(app, "pr_foreign_commits_total", host=kind) == 1.0

    # A restart (another clone, nothing remembered) finds the same new pull request.
    with pr_controller(api_client, setup, cache="restarted") as (app, _):
        before = pull_on(prhost, NEXT_BRANCH)["body"]  # type: ignore[index]
        change_and_wait_pull(api_client, app, prhost, "e", NEXT_BRANCH, lambda p: p["body"] != before)
        assert len(pulls(prhost)) == 2
        assert len(pull_on(prhost, WEB_BRANCH)["comments"]) == 1  # type: ignore[index]
        assert githost.branches(REPO)[WEB_BRANCH] == theirs
        assert metric(app, "pr_foreign_commits_total", host=kind) == 0.0


@pytest.mark.parametrize("kind", ["github", "gitea"])
def test_when_the_new_pull_request_is_merged_and_its_branch_deleted_the_notice_is_not_repeated(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost, kind: str) -> None:
    """GitHub's "delete head branches" after a merge takes ``<branch>-1`` away while the old pull
    request is still open: the next change comes back to it, finds its own notice and label on
    the host, and opens the next pull request from ``<branch>-1`` again without a word more."""
    web_reloads_on_app_config(api_client, setup)
    with pr_controller(api_client, setup) as (app, _):
        change_and_wait_pull(api_client, app, prhost, "b", WEB_BRANCH)
        theirs = push_foreign_commit(githost)
        first = change_and_wait_pull(api_client, app, prhost, "c", NEXT_BRANCH)
        prhost.merge(REPO, first["number"])
        subprocess.run(["git", f"--git-dir={githost.bare_path(REPO)}", "update-ref", "-d",
                        f"refs/heads/{NEXT_BRANCH}"], check=True)
        prhost.clear_requests()

        second = change_and_wait_pull(api_client, app, prhost, "d", NEXT_BRANCH)
        assert second["number"] not in (first["number"],)
        assert [p["state"] for p in pulls(prhost)] == ["open", "merged", "open"]
        old = pull_on(prhost, WEB_BRANCH)
        assert old is not None and len(old["comments"]) == 1
        assert old["labels"].count(prpolicy.FOREIGN_LABEL) == 1
        on_old = f"/issues/{old['number']}/"
        assert not [r for r in prhost.requests if on_old in r.path and r.method != "GET"]
        assert githost.branches(REPO)[WEB_BRANCH] == theirs
        assert metric(app, "pr_foreign_commits_total", host=kind) == 1.0


@pytest.mark.parametrize("kind", ["gitlab"])
def test_a_comment_someone_else_wrote_with_a_marker_does_not_pass_for_the_notice(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost, kind: str) -> None:
    web_reloads_on_app_config(api_client, setup)
    with pr_controller(api_client, setup) as (app, _):
        old = change_and_wait_pull(api_client, app, prhost, "b", WEB_BRANCH)
        forged = "<!-- gitops-reloader:foreign-commits=" + "0" * 64 + " -->"
        prhost.comment(REPO, old["number"], f"nothing to see here {forged}")
        push_foreign_commit(githost)
        change_and_wait_pull(api_client, app, prhost, "c", NEXT_BRANCH)
        comments = pull_on(prhost, WEB_BRANCH)["comments"]  # type: ignore[index]
        assert len(comments) == 2 and NOTICE in comments[1]
        assert metric(app, "pr_foreign_commits_total", host=kind) == 1.0


@pytest.mark.parametrize("kind", ["gitea"])
def test_a_grouped_pull_request_moves_on_with_our_earlier_edits_and_none_of_theirs(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost, kind: str) -> None:
    """With ``grouping: repository`` the old pull request held two workloads' edits; the new one
    keeps the edit of the one that did not change again (carried from our own sealed commit, found
    below the person's commit) and lists it, and takes nothing the person pushed."""
    setup.create({"apps/web.yaml": manifest("web"), "apps/api.yaml": manifest("api")})
    setup.configure(grouping="repository")
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, configmap("api-config", {"url": "a"}))
    create(api_client, pr_workload("web"))
    create(api_client, pr_workload("api", sources="api-config"))
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        put_data(api_client, "ConfigMap", "api-config", {"url": "b"})
        wait_pull_on(prhost, ALL_BRANCH, lambda p: "`ns/Deployment/api`" in p["body"]
                     and "`ns/Deployment/web`" in p["body"])
        quiet(app)
        api_digest = hash_value(file_at(githost, "apps/api.yaml", ALL_BRANCH))
        assert api_digest is not None
        ours = file_at(githost, "apps/web.yaml", ALL_BRANCH)
        api_before = file_at(githost, "apps/api.yaml", ALL_BRANCH)
        theirs = githost.commit_directly(REPO, {
            "apps/web.yaml": ours.replace("image: nginx:1.25", "image: evil.example/miner:1"),
            "apps/api.yaml": api_before.replace("replicas: 1", "replicas: 9"),
        }, branch=ALL_BRANCH, message="review: tweaks")

        new = change_and_wait_pull(api_client, app, prhost, "c", ALL_BRANCH + "-1")
        assert "`ns/Deployment/api`" in new["body"] and "`ns/Deployment/web`" in new["body"]
        api = file_at(githost, "apps/api.yaml", ALL_BRANCH + "-1")
        web = file_at(githost, "apps/web.yaml", ALL_BRANCH + "-1")
        assert hash_value(api) == api_digest and "replicas: 9" not in api
        assert hash_value(web) not in (None, hash_value(ours)) and "evil.example" not in web
        [subject] = commits_ahead(githost, ALL_BRANCH + "-1")  # one commit: ours, sealed
        assert subject.startswith("reload: ") and "web" in subject and "api" in subject
        assert githost.branches(REPO)[ALL_BRANCH] == theirs
        assert len(pull_on(prhost, ALL_BRANCH)["comments"]) == 1  # type: ignore[index]


@pytest.mark.parametrize("kind", ["github"])
def test_a_refused_comment_is_reported_and_the_reload_still_moves_on(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost, kind: str) -> None:
    """A token that may open pull requests but not comment (GitHub answers 403): logged and
    counted as ``git_errors_total{reason="foreign-notice"}``; the label is still added and the
    reload is not held up."""
    web_reloads_on_app_config(api_client, setup)
    with pr_controller(api_client, setup) as (app, _):
        change_and_wait_pull(api_client, app, prhost, "b", WEB_BRANCH)
        theirs = push_foreign_commit(githost)
        prhost.answer_next(1, 403, {"message": "Resource not accessible by personal access token"},
                           method="POST", path="/comments", kind="github")
        change_and_wait_pull(api_client, app, prhost, "c", NEXT_BRANCH)
        old = pull_on(prhost, WEB_BRANCH)
        assert old is not None and old["comments"] == [] and prpolicy.FOREIGN_LABEL in old["labels"]
        assert metric(app, "git_errors_total", repo=sink_tests.NAME, reason="foreign-notice") == 1.0
        assert metric(app, "pr_foreign_commits_total", host=kind) == 0.0
        assert githost.branches(REPO)[WEB_BRANCH] == theirs


def test_a_branch_with_our_name_but_not_our_commits_is_never_rewritten(
        api_client: ApiClient, setup: PrSetup, githost: GitHostServer, prhost: PrHost, kind: str) -> None:
    """Someone pushed a branch that happens to carry the pull-request branch's name, with no
    pull request (a person's experiment, another tool). It was rebuilt from the base before;
    now it is left exactly as it is, and the reload opens its pull request from the next name."""
    web_reloads_on_app_config(api_client, setup)
    keep_reflogs(githost)
    theirs = githost.commit_directly(REPO, {"notes.md": "my own work\n"}, branch=WEB_BRANCH,
                                     message="wip: not a reload")
    with pr_controller(api_client, setup) as (app, _):
        change_and_wait_pull(api_client, app, prhost, "b", NEXT_BRANCH)
        quiet(app)
    assert githost.branches(REPO)[WEB_BRANCH] == theirs  # never force-pushed
    assert reflog(githost, WEB_BRANCH)[-1] == theirs
    assert pull_on(prhost, WEB_BRANCH) is None
    assert [p["head"] for p in prhost.pulls(REPO)] == [NEXT_BRANCH]
