"""Host clients against the PR host test server on a real git server, for every host kind.

Branches are pushed with plain ``git`` over smart HTTP; pull requests go through
:func:`gitops_reloader.gitops.hosts.host_for`; merges really move the base branch.
"""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx
import pytest

from gitops_reloader.errors import HostAuthError, HostError, HostRateLimited
from gitops_reloader.gitops.hosts import GitHost, RetryPolicy, host_for
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.prhost import PR_HOST_KINDS, PrHost

pytestmark = pytest.mark.e2e

TOKEN = "prhost-e2e-token-7f3a"
REPO = "org/app"
BRANCH = "gitops-reloader/web"
KINDS = tuple(PR_HOST_KINDS)
FAST = RetryPolicy(attempts=3, backoff=0.01, max_backoff=0.05)


@pytest.fixture
def githost(tmp_path: Path) -> Iterator[GitHostServer]:
    with GitHostServer(tmp_path / "srv", token=TOKEN) as server:
        server.create_repo(REPO, {"deploy.yaml": "kind: Deployment\nreplicas: 1\n"})
        yield server


@pytest.fixture
def prhost(githost: GitHostServer) -> PrHost:
    return PrHost(githost, page_size=2)


@pytest.fixture
def client_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "Bot",
        "GIT_AUTHOR_EMAIL": "bot@example.com",
        "GIT_COMMITTER_NAME": "Bot",
        "GIT_COMMITTER_EMAIL": "bot@example.com",
    })
    return env


@pytest.fixture
def push(githost: GitHostServer, client_env: dict[str, str], tmp_path: Path) -> _Pusher:
    return _Pusher(githost, client_env, tmp_path / "clones")


class _Pusher:
    """Pushes a branch with one commit on top of ``main``, the way the bot does."""

    def __init__(self, githost: GitHostServer, env: Mapping[str, str], root: Path) -> None:
        self._githost = githost
        self._env = dict(env)
        self._root = root
        self._count = 0
        credentials = base64.b64encode(f"bot:{TOKEN}".encode()).decode()
        self._header = f"http.extraHeader=Authorization: Basic {credentials}"

    def __call__(self, branch: str, files: Mapping[str, str]) -> str:
        self._count += 1
        wc = self._root / f"wc{self._count}"
        self._git("clone", "-q", self._githost.repo_url(REPO), str(wc))
        self._git("checkout", "-q", "-b", branch, cwd=wc)
        for name, text in files.items():
            (wc / name).write_text(text)
            self._git("add", name, cwd=wc)
        self._git("commit", "-q", "-m", f"reload via {branch}", cwd=wc)
        self._git("push", "-q", "origin", f"HEAD:refs/heads/{branch}", cwd=wc)
        return self._githost.branches(REPO)[branch]

    def _git(self, *args: str, cwd: Path | None = None) -> None:
        done = subprocess.run(
            ["git", "-c", self._header, *args], cwd=cwd, env=self._env,
            capture_output=True, text=True, timeout=60, check=False,
        )
        assert done.returncode == 0, done.stderr


def _host(prhost: PrHost, kind: str, token: str = TOKEN) -> GitHost:
    return host_for(kind, prhost.mount(kind), token, retry=FAST)


def _open(prhost: PrHost) -> list[dict[str, object]]:
    return [p for p in prhost.pulls(REPO) if p["state"] == "open"]


# -- the sink's whole conversation ------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_create_find_duplicate_update_merge(
    prhost: PrHost, githost: GitHostServer, push: _Pusher, kind: str
) -> None:
    if kind == "gitea":
        prhost.add_label(REPO, "gitops-reloader")
    host = _host(prhost, kind)
    head_sha = push(BRANCH, {"deploy.yaml": "kind: Deployment\nreplicas: 2\n"})
    assert host.find_open(REPO, head=BRANCH, base="main") is None
    assert host.find_latest(REPO, head=BRANCH, base="main") is None

    created = host.create(REPO, head=BRANCH, base="main", title="Reload web", body="cfg changed",
                          labels=["gitops-reloader"])
    assert (created.state, created.head, created.base) == ("open", BRANCH, "main")
    assert head_sha.startswith(created.head_sha) and len(created.head_sha) >= 12  # Bitbucket: 12 digits
    assert created.url.startswith(githost.url)
    assert host.find_open(REPO, head=BRANCH, base="main") == created

    again = host.create(REPO, head=BRANCH, base="main", title="Reload web (2)", body="cfg changed twice",
                        labels=["gitops-reloader"])
    assert again.number == created.number and again.title == "Reload web (2)"
    assert len(_open(prhost)) == 1

    updated = host.update(
        REPO, created.number, title="Reload web (3)", body="third", labels=["gitops-reloader"]
    )
    assert (updated.title, updated.body) == ("Reload web (3)", "third")
    [pull] = prhost.pulls(REPO)
    assert (pull["title"], pull["body"]) == ("Reload web (3)", "third")
    assert pull["labels"] == ([] if kind == "bitbucket" else ["gitops-reloader"])

    tip = prhost.merge(REPO, created.number)
    assert tip == head_sha  # main had not moved on: fast-forward
    assert githost.read_file(REPO, "deploy.yaml") == b"kind: Deployment\nreplicas: 2\n"
    assert host.find_open(REPO, head=BRANCH, base="main") is None
    latest = host.find_latest(REPO, head=BRANCH, base="main")
    assert latest is not None and (latest.number, latest.state) == (created.number, "merged")


@pytest.mark.parametrize("kind", KINDS)
def test_close_then_a_new_pull_request_for_the_same_branch(
    prhost: PrHost, push: _Pusher, kind: str
) -> None:
    host = _host(prhost, kind)
    push(BRANCH, {"deploy.yaml": "replicas: 3\n"})
    first = host.create(REPO, head=BRANCH, base="main", title="t", body="b")

    host.close(REPO, first.number)

    assert host.find_open(REPO, head=BRANCH, base="main") is None
    latest = host.find_latest(REPO, head=BRANCH, base="main")
    assert latest is not None and (latest.number, latest.state) == (first.number, "closed")
    second = host.create(REPO, head=BRANCH, base="main", title="t", body="b")
    assert second.number != first.number and second.state == "open"
    assert host.find_latest(REPO, head=BRANCH, base="main") == second


@pytest.mark.parametrize("kind", KINDS)
def test_pull_requests_beyond_the_first_page_are_found(
    prhost: PrHost, githost: GitHostServer, push: _Pusher, kind: str
) -> None:
    host = _host(prhost, kind)
    for i in range(5):  # the server pages by 2
        githost.commit_directly(REPO, {"deploy.yaml": f"replicas: {10 + i}\n"}, branch=f"other/{i}")
        host.create(REPO, head=f"other/{i}", base="main", title=f"other {i}", body="")
    push(BRANCH, {"deploy.yaml": "replicas: 4\n"})
    mine = host.create(REPO, head=BRANCH, base="main", title="mine", body="")
    host.close(REPO, mine.number)
    newer = host.create(REPO, head=BRANCH, base="main", title="mine again", body="")

    assert host.find_open(REPO, head="other/0", base="main") is not None  # the oldest: the last page
    found = host.find_latest(REPO, head=BRANCH, base="main")
    assert found is not None and found.number == newer.number


@pytest.mark.parametrize("kind", KINDS)
def test_concurrent_creates_leave_one_open_pull_request(prhost: PrHost, push: _Pusher, kind: str) -> None:
    push(BRANCH, {"deploy.yaml": "replicas: 5\n"})
    numbers: list[int] = []
    errors: list[BaseException] = []

    def create(i: int) -> None:
        try:
            host = _host(prhost, kind)
            numbers.append(host.create(REPO, head=BRANCH, base="main", title=f"t{i}", body="b").number)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert len(set(numbers)) == 1 and len(numbers) == 6
    assert len(_open(prhost)) == 1


def test_a_merge_commit_when_the_base_moved_on(prhost: PrHost, githost: GitHostServer, push: _Pusher) -> None:
    host = _host(prhost, "github")
    head_sha = push(BRANCH, {"deploy.yaml": "kind: Deployment\nreplicas: 6\n"})
    pull = host.create(REPO, head=BRANCH, base="main", title="t", body="b")
    base_sha = githost.commit_directly(REPO, {"other.yaml": "x: 1\n"})

    tip = prhost.merge(REPO, pull.number)

    assert tip not in (head_sha, base_sha)
    parents = subprocess.run(
        ["git", f"--git-dir={githost.bare_path(REPO)}", "rev-list", "--parents", "-n", "1", tip],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    assert parents[1:] == [base_sha, head_sha]
    assert githost.read_file(REPO, "deploy.yaml") == b"kind: Deployment\nreplicas: 6\n"
    assert githost.read_file(REPO, "other.yaml") == b"x: 1\n"
    assert prhost.pulls(REPO)[0]["merge_sha"] == tip


@pytest.mark.parametrize(("kind", "expected"), [("github", False), ("gitlab", True), ("gitea", True),
                                                ("bitbucket", False)])
def test_auto_merge_where_the_host_offers_it(
    prhost: PrHost, push: _Pusher, kind: str, expected: bool
) -> None:
    host = _host(prhost, kind)
    push(BRANCH, {"deploy.yaml": "replicas: 7\n"})
    pull = host.create(REPO, head=BRANCH, base="main", title="t", body="b")
    assert host.enable_auto_merge(REPO, pull.number) is expected
    assert prhost.pulls(REPO)[0]["auto_merge"] is expected
    prhost.close(REPO, pull.number)
    if expected:  # a closed pull request can't be scheduled: "not mergeable", not an error
        assert host.enable_auto_merge(REPO, pull.number) is False


def test_bitbucket_update_keeps_the_reviewers(prhost: PrHost, push: _Pusher) -> None:
    host = _host(prhost, "bitbucket")
    push(BRANCH, {"deploy.yaml": "replicas: 8\n"})
    pull = host.create(REPO, head=BRANCH, base="main", title="t", body="b")
    prhost.set_reviewers(REPO, pull.number, ["{alice}", "{bob}"])

    host.update(REPO, pull.number, title="t2", body="b2")

    assert prhost.pulls(REPO)[0]["reviewers"] == ["{alice}", "{bob}"]


def test_gitea_labels_go_by_id_and_unknown_names_are_skipped(prhost: PrHost, push: _Pusher) -> None:
    wanted = prhost.add_label(REPO, "gitops-reloader")
    prhost.add_label(REPO, "unrelated")
    host = _host(prhost, "gitea")
    push(BRANCH, {"deploy.yaml": "replicas: 9\n"})

    host.create(REPO, head=BRANCH, base="main", title="t", body="b", labels=["gitops-reloader", "no-such"])

    assert prhost.pulls(REPO)[0]["labels"] == ["gitops-reloader"]
    assert wanted == prhost.add_label(REPO, "gitops-reloader")  # idempotent


# -- refusals and faults ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_missing_head_branch_is_refused(prhost: PrHost, kind: str) -> None:
    host = _host(prhost, kind)
    with pytest.raises(HostError) as caught:
        host.create(REPO, head="never-pushed", base="main", title="t", body="b")
    if kind == "gitea":  # Gitea answers 404, like a missing repository
        assert isinstance(caught.value, HostAuthError) and "never-pushed" in str(caught.value)
    else:
        assert not isinstance(caught.value, HostAuthError) and caught.value.retryable is False
    assert prhost.pulls(REPO) == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_wrong_token_is_an_auth_error_that_does_not_leak(prhost: PrHost, kind: str) -> None:
    wrong = "wrong-token-9c1d"
    with pytest.raises(HostAuthError, match=r"\(401\)") as caught:
        _host(prhost, kind, token=wrong).find_open(REPO, head=BRANCH, base="main")
    assert wrong not in str(caught.value) and TOKEN not in str(caught.value)


@pytest.mark.parametrize("kind", KINDS)
def test_an_unknown_repository_is_an_auth_error_naming_it(prhost: PrHost, kind: str) -> None:
    with pytest.raises(HostAuthError, match="org/missing"):
        _host(prhost, kind).find_open("org/missing", head=BRANCH, base="main")


@pytest.mark.parametrize("kind", KINDS)
def test_host_down_is_a_retryable_host_error(prhost: PrHost, kind: str) -> None:
    host = _host(prhost, kind)
    prhost.set_down(True)
    with pytest.raises(HostError) as caught:
        host.find_open(REPO, head=BRANCH, base="main")
    assert type(caught.value) is HostError and caught.value.retryable
    assert "503" in str(caught.value)
    assert [r.status for r in prhost.requests] == [503, 503, 503]

    prhost.set_down(False)
    assert host.find_open(REPO, head=BRANCH, base="main") is None


@pytest.mark.parametrize("kind", KINDS)
def test_rate_limited_then_success(prhost: PrHost, push: _Pusher, kind: str) -> None:
    host = _host(prhost, kind)
    push(BRANCH, {"deploy.yaml": "replicas: 10\n"})
    prhost.fail_next(1, 429, retry_after=0)

    pull = host.create(REPO, head=BRANCH, base="main", title="t", body="b")

    assert pull.state == "open"
    assert [r.status for r in prhost.requests][:2] == [429, 201]
    assert len(_open(prhost)) == 1


def test_rate_limited_for_long_is_reported_with_retry_after(prhost: PrHost) -> None:
    prhost.fail_next(1, 429, retry_after=3600)
    with pytest.raises(HostRateLimited) as caught:
        _host(prhost, "gitlab").find_open(REPO, head=BRANCH, base="main")
    assert caught.value.retry_after == 3600
    assert len(prhost.requests) == 1


def test_server_errors_until_the_attempts_run_out(prhost: PrHost) -> None:
    prhost.fail_next(2, 502)
    assert _host(prhost, "gitea").find_open(REPO, head=BRANCH, base="main") is None  # third try works
    prhost.fail_next(3, 500)
    with pytest.raises(HostError, match="after 3 attempts"):
        _host(prhost, "gitea").find_open(REPO, head=BRANCH, base="main")


def test_a_stopped_server_is_a_host_error(prhost: PrHost, githost: GitHostServer) -> None:
    host = _host(prhost, "github")
    githost.stop()
    with pytest.raises(HostError, match="ConnectError"):
        host.find_open(REPO, head=BRANCH, base="main")


# -- the server's own wire behaviour ------------------------------------------------------------


def test_github_duplicate_and_auth_bodies_look_like_github(prhost: PrHost, push: _Pusher) -> None:
    api = prhost.mount("github")
    push(BRANCH, {"deploy.yaml": "replicas: 11\n"})
    auth = {"Authorization": f"Bearer {TOKEN}"}
    payload = {"head": BRANCH, "base": "main", "title": "t"}
    with httpx.Client(base_url=api) as http:
        assert http.post(f"/repos/{REPO}/pulls", json=payload, headers=auth).status_code == 201
        duplicate = http.post(f"/repos/{REPO}/pulls", json=payload, headers=auth)
        refused = http.get(f"/repos/{REPO}/pulls")
        unknown = http.get("/repos/org/nope/pulls", headers=auth)
    assert duplicate.status_code == 422
    assert duplicate.json()["message"] == "Validation Failed"
    assert duplicate.json()["errors"][0]["message"] == f"A pull request already exists for org:{BRANCH}."
    assert refused.status_code == 401 and refused.json()["message"] == "Bad credentials"
    assert unknown.status_code == 404 and unknown.json()["message"] == "Not Found"


@pytest.mark.parametrize(
    ("kind", "path", "headers"),
    [
        ("github", f"/repos/{REPO}/pulls", {"Authorization": "token " + TOKEN}),
        ("gitlab", "/projects/org%2Fapp/merge_requests", {"PRIVATE-TOKEN": TOKEN}),
        ("gitlab", "/projects/org%2Fapp/merge_requests", {"Authorization": "Bearer " + TOKEN}),
        ("gitea", f"/repos/{REPO}/pulls", {"Authorization": "token " + TOKEN}),
        ("bitbucket", f"/repositories/{REPO}/pullrequests", {"Authorization": "Bearer " + TOKEN}),
    ],
)
def test_each_kind_accepts_its_own_auth_header_and_answers_401_json_otherwise(
    prhost: PrHost, kind: str, path: str, headers: dict[str, str]
) -> None:
    with httpx.Client(base_url=prhost.mount(kind)) as http:
        assert http.get(path, headers=headers).status_code == 200
        refused = http.get(path, headers={"Authorization": "Basic Zm9vOmJhcg=="})
    assert refused.status_code == 401
    assert refused.headers["Content-Type"].startswith("application/json")
    assert refused.json()


def test_gitlab_answers_for_its_numeric_project_id(prhost: PrHost, push: _Pusher) -> None:
    api = prhost.mount("gitlab")
    push(BRANCH, {"deploy.yaml": "replicas: 12\n"})
    created = _host(prhost, "gitlab").create(REPO, head=BRANCH, base="main", title="t", body="b")
    with httpx.Client(base_url=api, headers={"PRIVATE-TOKEN": TOKEN}) as http:
        project_id = http.get(f"/projects/org%2Fapp/merge_requests/{created.number}").json()["project_id"]
        by_id = http.get(f"/projects/{project_id}/merge_requests", params={"state": "opened"})
    assert [mr["iid"] for mr in by_id.json()] == [created.number]
    assert by_id.headers["X-Total"] == "1"


def test_bitbucket_lists_in_a_values_envelope_with_next(prhost: PrHost, githost: GitHostServer) -> None:
    host = _host(prhost, "bitbucket")
    for i in range(3):
        githost.commit_directly(REPO, {"deploy.yaml": f"replicas: {20 + i}\n"}, branch=f"b{i}")
        host.create(REPO, head=f"b{i}", base="main", title=f"t{i}", body="")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=prhost.mount("bitbucket"), headers=auth) as http:
        first = http.get(f"/repositories/{REPO}/pullrequests").json()
        second = http.get(first["next"]).json()
        bad = http.get(f"/repositories/{REPO}/pullrequests", params={"q": 'state="OPEN" OR id=1'})
    assert [p["id"] for p in first["values"]] == [1, 2] and first["size"] == 3
    assert [p["id"] for p in second["values"]] == [3] and "next" not in second
    assert bad.status_code == 400


def test_the_request_log_never_holds_the_token(prhost: PrHost) -> None:
    for kind in KINDS:
        _host(prhost, kind).find_open(REPO, head=BRANCH, base="main")
    assert {r.kind for r in prhost.requests} == set(KINDS)
    assert all(TOKEN not in repr(r) for r in prhost.requests)
    assert TOKEN not in repr(prhost)
    prhost.clear_requests()
    assert prhost.requests == []


def test_human_actions_refuse_impossible_transitions(prhost: PrHost, push: _Pusher) -> None:
    host = _host(prhost, "github")
    push(BRANCH, {"deploy.yaml": "replicas: 13\n"})
    pull = host.create(REPO, head=BRANCH, base="main", title="t", body="b")
    prhost.close(REPO, pull.number)
    with pytest.raises(ValueError, match="closed"):
        prhost.merge(REPO, pull.number)
    with pytest.raises(ValueError, match="closed"):
        prhost.close(REPO, pull.number)
    with pytest.raises(ValueError):
        prhost.mount("gogs")


# -- answers the real hosts give (issue 12) ------------------------------------------------------


def test_github_refuses_long_bodies_and_branches_without_commits(
    prhost: PrHost, githost: GitHostServer, push: _Pusher
) -> None:
    api = prhost.mount("github")
    push(BRANCH, {"deploy.yaml": "kind: Deployment\nreplicas: 2\n"})
    with httpx.Client(base_url=api, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        too_long = http.post(f"/repos/{REPO}/pulls", json={"head": BRANCH, "base": "main", "title": "t",
                                                          "body": "x" * 65_537})
        assert too_long.status_code == 422 and "maximum is 65536" in too_long.text
        fits = http.post(f"/repos/{REPO}/pulls", json={"head": BRANCH, "base": "main", "title": "t",
                                                      "body": "x" * 65_536})
        assert fits.status_code == 201
        patch = http.patch(f"/repos/{REPO}/pulls/1", json={"body": "y" * 65_537})
        assert patch.status_code == 422
        subprocess.run(["git", f"--git-dir={githost.bare_path(REPO)}", "update-ref", "refs/heads/behind",
                        "refs/heads/main"], check=True)
        none = http.post(f"/repos/{REPO}/pulls", json={"head": "behind", "base": "main", "title": "t"})
        assert none.status_code == 422 and "No commits between main and behind" in none.text


@pytest.mark.parametrize("kind", KINDS)
def test_page_caps_hold_whatever_the_client_asks(prhost: PrHost, push: _Pusher, kind: str) -> None:
    prhost.set_page_cap(kind, 3)
    host = _host(prhost, kind)
    for i in range(7):
        branch = f"feature-{i}"
        push(branch, {"deploy.yaml": f"kind: Deployment\nreplicas: {i + 3}\n"})
        host.create(REPO, head=branch, base="main", title=f"t{i}", body="b")
    prhost.clear_requests()
    # The oldest is on the last page of three: every client finds it (Gitea, without a branch
    # filter, by paging through; the others filter on the server).
    found = host.find_open(REPO, head="feature-0", base="main")
    assert found is not None and found.title == "t0"
    lists = [r for r in prhost.requests if r.method == "GET" and r.status == 200]
    assert len(lists) == (3 if kind == "gitea" else 1)
