"""Azure DevOps pull requests: the host client against the PR host test server's Azure API.

Branches are pushed with plain git over smart HTTP; the client speaks api-version 7.1 to
the server's recorded answer shapes (``gitops_reloader/testing/prhost/azure.py``). The
sink's whole flow on Azure runs in ``test_pull_request_sink.py`` (parametrized over all
five hosts); the URL spellings are checked in ``tests/unit/gitops/test_aliases.py``.
"""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import httpx
import pytest
from reload_helpers import GIT_TOKEN

from gitops_reloader.errors import HostAuthError, HostError
from gitops_reloader.gitops.hosts import AzureDevOpsHost, RetryPolicy, host_for
from gitops_reloader.gitops.prpolicy import SourceEntry, WorkloadEntry, parse_entries, render_body
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.prhost import PrHost

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

TOKEN = GIT_TOKEN  # the PAT the git server and its Azure API accept (conftest's githost, prhost)
REPO = "fleet/app"  # project fleet, repository app
FAST = RetryPolicy(attempts=3, backoff=0.01, max_backoff=0.05)


@pytest.fixture
def server(githost: GitHostServer) -> GitHostServer:
    githost.create_repo(REPO, {"deploy.yaml": "kind: Deployment\nreplicas: 1\n"})
    return githost


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def azure(server: GitHostServer, prhost: PrHost, sleeps: list[float]) -> AzureDevOpsHost:
    host = host_for("azure", prhost.mount("azure"), TOKEN, retry=FAST, sleep=sleeps.append,
                    merge_strategy="squash", remove_source_branch=True)
    assert isinstance(host, AzureDevOpsHost)
    return host


def push(server: GitHostServer, tmp_path: Path, branch: str, replicas: int = 2) -> str:
    """A branch with one commit on ``main``, pushed as the bot does; its sha."""
    wc = tmp_path / f"wc-{branch.replace('/', '-')}-{replicas}"
    header = "Authorization: Basic " + base64.b64encode(f":{TOKEN}".encode()).decode()
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.com"}

    def git(*args: str, cwd: Path = wc) -> str:
        done = subprocess.run(["git", "-c", f"http.extraHeader={header}", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, check=True)
        return done.stdout.strip()

    git("clone", "-q", server.repo_url(REPO), str(wc), cwd=tmp_path)
    git("checkout", "-q", "-b", branch)
    (wc / "deploy.yaml").write_text(f"kind: Deployment\nreplicas: {replicas}\n")
    git("commit", "-qam", f"replicas {replicas}")
    git("push", "-q", "--force", "origin", f"HEAD:refs/heads/{branch}")
    return git("rev-parse", "HEAD")


def test_azure_devops_create_find_and_update_in_place(
        azure: AzureDevOpsHost, prhost: PrHost, server: GitHostServer, tmp_path: Path) -> None:
    sha = push(server, tmp_path, "gitops-reloader/web")
    pull = azure.create(REPO, head="gitops-reloader/web", base="main", title="reload web", body="first",
                        labels=["gitops-reloader"])
    assert (pull.state, pull.head, pull.base, pull.head_sha, pull.labels) == (
        "open", "gitops-reloader/web", "main", sha, ("gitops-reloader",))
    assert pull.url.endswith(f"/fleet/_git/app/pullrequest/{pull.number}")
    found = azure.find_open(REPO, head="gitops-reloader/web", base="main")
    assert found is not None and found.number == pull.number
    updated = azure.update(REPO, pull.number, title="reload web again", body="second", labels=["team-a"])
    assert (updated.title, updated.body) == ("reload web again", "second")
    assert set(updated.labels) == {"gitops-reloader", "team-a"}
    assert len(prhost.pulls(REPO)) == 1
    assert all("api-version=7.1" in r.query for r in prhost.requests)  # on every request


def test_azure_devops_duplicate_create_tf401179_updates_the_active_one(
        azure: AzureDevOpsHost, prhost: PrHost, server: GitHostServer, tmp_path: Path) -> None:
    push(server, tmp_path, "gitops-reloader/web")
    first = azure.create(REPO, head="gitops-reloader/web", base="main", title="t1", body="b1")
    again = azure.create(REPO, head="gitops-reloader/web", base="main", title="t2", body="b2")
    assert again.number == first.number and (again.title, again.body) == ("t2", "b2")
    assert [r.status for r in prhost.requests if r.method == "POST"] == [201, 409]


def test_azure_devops_find_latest_reads_completed_and_abandoned(
        azure: AzureDevOpsHost, prhost: PrHost, server: GitHostServer, tmp_path: Path) -> None:
    push(server, tmp_path, "gitops-reloader/web")
    pull = azure.create(REPO, head="gitops-reloader/web", base="main", title="t", body="b")
    prhost.merge(REPO, pull.number)
    latest = azure.find_latest(REPO, head="gitops-reloader/web", base="main")
    assert latest is not None and latest.state == "merged"
    assert azure.find_open(REPO, head="gitops-reloader/web", base="main") is None
    push(server, tmp_path, "gitops-reloader/web", replicas=3)
    second = azure.create(REPO, head="gitops-reloader/web", base="main", title="t", body="b")
    azure.close(REPO, second.number)
    latest = azure.find_latest(REPO, head="gitops-reloader/web", base="main")
    assert latest is not None and (latest.number, latest.state) == (second.number, "closed")
    assert prhost.pulls(REPO)[1]["state"] == "closed"  # abandoned


def test_azure_devops_pages_follow_the_continuation_token(
        azure: AzureDevOpsHost, prhost: PrHost, server: GitHostServer, tmp_path: Path) -> None:
    for replicas in range(2, 7):  # five pull requests on one branch, all abandoned but the last
        push(server, tmp_path, "gitops-reloader/web", replicas=replicas)
        pull = azure.create(REPO, head="gitops-reloader/web", base="main", title="t", body="b")
        if replicas < 6:
            azure.close(REPO, pull.number)
    prhost.set_page_cap("azure", 2)  # Azure cuts the page short and says where to go on
    prhost.clear_requests()
    latest = azure.find_latest(REPO, head="gitops-reloader/web", base="main")
    assert latest is not None and latest.number == 5
    queries = [r.query for r in prhost.requests]
    assert len(queries) == 3 and "continuationToken=2" in queries[1] and "continuationToken=4" in queries[2]


def test_azure_devops_comments_are_thread_comments_without_system_ones(
        azure: AzureDevOpsHost, prhost: PrHost, server: GitHostServer, tmp_path: Path) -> None:
    push(server, tmp_path, "gitops-reloader/web")
    pull = azure.create(REPO, head="gitops-reloader/web", base="main", title="t", body="b")
    azure.add_comment(REPO, pull.number, "held: waiting for the window")
    prhost.comment(REPO, pull.number, "LGTM", author="alice")
    assert azure.comments(REPO, pull.number) == ["held: waiting for the window", "LGTM"]
    threads = httpx.get(f"{prhost.mount('azure')}/fleet/_apis/git/repositories/app/pullRequests/{pull.number}"
                        "/threads?api-version=7.1", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    kinds = [t["comments"][0]["commentType"] for t in threads["value"]]
    assert kinds == ["system", "text", "text"]  # the system thread is left out above


def test_azure_devops_auto_complete_with_the_merge_strategy_and_cancel(
        azure: AzureDevOpsHost, prhost: PrHost, server: GitHostServer, tmp_path: Path) -> None:
    push(server, tmp_path, "gitops-reloader/web")
    pull = azure.create(REPO, head="gitops-reloader/web", base="main", title="t", body="b")
    assert azure.cancel_auto_merge(REPO, pull.number) is False  # nothing armed yet
    assert azure.enable_auto_merge(REPO, pull.number) is True
    state = prhost.pulls(REPO)[0]
    armed = (state["auto_merge"], state["merge_strategy"], state["delete_source_branch"])
    assert armed == (True, "squash", True)
    assert azure.cancel_auto_merge(REPO, pull.number) is True
    assert prhost.pulls(REPO)[0]["auto_merge"] is False
    azure.close(REPO, pull.number)
    assert azure.enable_auto_merge(REPO, pull.number) is False  # abandoned: nothing to complete


def test_azure_devops_sign_in_page_and_refused_token_are_auth_errors(
        azure: AzureDevOpsHost, prhost: PrHost) -> None:
    api = prhost.mount("azure")
    anonymous = httpx.get(f"{api}/fleet/_apis/git/repositories/app/pullrequests?api-version=7.1")
    assert anonymous.status_code == 203 and "Sign In" in anonymous.text  # as Azure answers
    prhost.answer_next(1, 203, b"<html><title>Azure DevOps Services | Sign In</title></html>",
                       headers={"Content-Type": "text/html"}, kind="azure")
    with pytest.raises(HostAuthError, match="203"):
        azure.find_open(REPO, head="x", base="main")
    wrong = host_for("azure", api, "not-the-pat", retry=FAST)
    with pytest.raises(HostAuthError, match="401") as refused:
        wrong.find_open(REPO, head="x", base="main")
    assert "not-the-pat" not in str(refused.value)
    missing_version = httpx.get(f"{api}/fleet/_apis/git/repositories/app/pullrequests",
                                headers={"Authorization": f"Bearer {TOKEN}"})
    assert missing_version.status_code == 400
    assert missing_version.json()["typeKey"] == "VssVersionNotSpecifiedException"


@pytest.mark.parametrize(("version", "status", "type_key"), [
    ("1.0", 400, "VssVersionOutOfRangeException"), ("7.0", 400, "VssVersionOutOfRangeException"),
    ("7.1", 200, None),
])
def test_azure_devops_server_serves_only_the_api_version_the_client_speaks(
        azure: AzureDevOpsHost, prhost: PrHost, version: str, status: int, type_key: str | None) -> None:
    """The test server models api-version 7.1, the one the client sends: another version is
    refused as Azure DevOps refuses one it does not serve, so a client that sent any other
    value would fail here instead of passing unnoticed."""
    api = prhost.mount("azure")
    answer = httpx.get(f"{api}/fleet/_apis/git/repositories/app/pullrequests?api-version={version}",
                       headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == status
    if type_key is not None:
        assert answer.json()["typeKey"] == type_key and "out of range" in answer.json()["message"]
    assert azure.find_open(REPO, head="x", base="main") is None  # the client's own version passes


def test_azure_devops_429_retry_after_is_honoured(
        azure: AzureDevOpsHost, prhost: PrHost, sleeps: list[float]) -> None:
    prhost.fail_next(1, 429, retry_after=7)
    assert azure.find_open(REPO, head="x", base="main") is None
    assert sleeps == [7.0]
    assert [r.status for r in prhost.requests] == [429, 200]


def test_azure_devops_descriptions_fit_its_4000_characters(
        azure: AzureDevOpsHost, prhost: PrHost, server: GitHostServer, tmp_path: Path) -> None:
    push(server, tmp_path, "gitops-reloader/all")
    source = (SourceEntry("ConfigMap", "team", "app-config"),)
    entries = [WorkloadEntry("Deployment", "team", f"web-{i:03d}", source, "2026-11-28T12:00:00Z", "ab" * 32)
               for i in range(300)]
    body = render_body(entries, branch="gitops-reloader/all", base="main", limit=azure.max_body)
    assert len(body) <= 4000 and parse_entries(body)  # the marker stays whole and parseable
    pull = azure.create(REPO, head="gitops-reloader/all", base="main", title="t", body=body)
    assert pull.body == body
    with pytest.raises(HostError) as too_long:
        azure.update(REPO, pull.number, title="t", body="x" * 4001)
    assert too_long.value.retryable is False
    assert [r.method for r in prhost.requests].count("PATCH") == 0  # refused before it was sent
