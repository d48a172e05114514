"""Git host clients: request shapes, duplicate handling, retries and errors (httpx.MockTransport)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from gitops_reloader.errors import ConfigError, HostAuthError, HostError, HostRateLimited
from gitops_reloader.gitops.hosts import (
    BitbucketHost,
    GiteaHost,
    GitHost,
    GitHubHost,
    GitLabHost,
    PullRequest,
    RetryPolicy,
    host_for,
)

TOKEN = "ghp_sEcReT-t0ken-1234567890"
API = {
    "github": "https://api.github.com",
    "gitlab": "https://gitlab.example.com/api/v4",
    "gitea": "https://gitea.example.com/api/v1",
    "bitbucket": "https://api.bitbucket.org/2.0",
}
KINDS = tuple(API)

Reply = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


@dataclass
class Api:
    """A scripted host: replies per ``(method, raw path)``, consumed in order (the last repeats)."""

    routes: dict[tuple[str, str], list[Reply]] = field(default_factory=dict)
    seen: list[httpx.Request] = field(default_factory=list)

    def on(self, method: str, path: str, *replies: Reply) -> None:
        self.routes.setdefault((method, path), []).extend(replies)

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        path = request.url.raw_path.split(b"?")[0].decode()
        replies = self.routes.get((request.method, path))
        if not replies:
            return httpx.Response(599, json={"message": f"unscripted {request.method} {path}"})
        reply = replies.pop(0) if len(replies) > 1 else replies[0]
        if isinstance(reply, Exception):
            raise reply
        if callable(reply):
            return reply(request)
        return reply

    def calls(self) -> list[tuple[str, str]]:
        return [(r.method, r.url.raw_path.split(b"?")[0].decode()) for r in self.seen]

    def body(self, index: int) -> Any:
        return json.loads(self.seen[index].content)

    def params(self, index: int) -> dict[str, list[str]]:
        params = self.seen[index].url.params
        return {key: params.get_list(key) for key in params}


@pytest.fixture
def api() -> Api:
    return Api()


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(api: Api) -> Iterator[httpx.Client]:
    with httpx.Client(transport=httpx.MockTransport(api.handler)) as c:
        yield c


def make(kind: str, client: httpx.Client, sleeps: list[float], **kw: Any) -> GitHost:
    return host_for(kind, kw.pop("api_url", API[kind]), TOKEN, client=client, sleep=sleeps.append, **kw)


def ok(data: Any, status: int = 200, **headers: str) -> httpx.Response:
    return httpx.Response(status, json=data, headers=headers)


def gt_list(items: list[Any], total: int | None = None) -> httpx.Response:
    """A Gitea list page: Gitea always reports the total in ``X-Total-Count``."""
    return ok(items, **{"X-Total-Count": str(len(items) if total is None else total)})


# -- documents as each host returns them --------------------------------------------------


def gh_pull(number: int = 7, *, head: str = "bot/web", base: str = "main", state: str = "open",
            merged_at: str | None = None, title: str = "t", body: str = "b") -> dict[str, Any]:
    return {
        "number": number, "state": state, "title": title, "body": body, "merged_at": merged_at,
        "html_url": f"https://github.com/org/app/pull/{number}",
        "head": {"ref": head, "sha": "a" * 40, "label": f"org:{head}"},
        "base": {"ref": base, "sha": "b" * 40},
    }


def gl_mr(iid: int = 3, *, state: str = "opened", head: str = "bot/web", base: str = "main",
          title: str = "t") -> dict[str, Any]:
    return {
        "iid": iid, "id": 900 + iid, "state": state, "title": title, "description": "d",
        "source_branch": head, "target_branch": base, "sha": "c" * 40,
        "web_url": f"https://gitlab.example.com/group/sub/app/-/merge_requests/{iid}",
    }


def gt_pull(number: int = 5, *, head: str = "bot/web", base: str = "main", state: str = "open",
            merged: bool = False, title: str = "t") -> dict[str, Any]:
    return {
        "number": number, "state": state, "merged": merged, "title": title, "body": "b",
        "html_url": f"https://gitea.example.com/org/app/pulls/{number}",
        "head": {"ref": head, "sha": "d" * 40}, "base": {"ref": base},
    }


def bb_pull(number: int = 9, *, head: str = "bot/web", base: str = "main", state: str = "OPEN",
            reviewers: list[str] | None = None, title: str = "t") -> dict[str, Any]:
    return {
        "id": number, "state": state, "title": title, "description": "d",
        "source": {"branch": {"name": head}, "commit": {"hash": "e" * 12}},
        "destination": {"branch": {"name": base}},
        "reviewers": [{"uuid": u, "display_name": "R"} for u in reviewers or []],
        "close_source_branch": True,
        "links": {"html": {"href": f"https://bitbucket.org/org/app/pull-requests/{number}"}},
    }


# -- GitHub ---------------------------------------------------------------------------------


def test_github_find_open_filters_by_owner_branch_base_and_state(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("GET", "/repos/org/app/pulls", ok([gh_pull()]))
    pull = make("github", client, sleeps).find_open("org/app", head="bot/web", base="main")

    assert pull == PullRequest(7, "https://github.com/org/app/pull/7", "open", "bot/web", "main", "t", "b",
                               "a" * 40)
    request = api.seen[0]
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.headers["Accept"] == "application/vnd.github+json"
    assert request.headers["X-GitHub-Api-Version"] == "2022-11-28"
    assert api.params(0)["head"] == ["org:bot/web"]
    assert api.params(0)["base"] == ["main"]
    assert api.params(0)["state"] == ["open"]


def test_github_find_open_ignores_other_branches_a_lenient_server_returns(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("GET", "/repos/org/app/pulls", ok([gh_pull(1, head="other"), gh_pull(2, base="dev")]))
    assert make("github", client, sleeps).find_open("org/app", head="bot/web", base="main") is None


def test_github_enterprise_api_url_keeps_its_path(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("GET", "/api/v3/repos/org/app/pulls", ok([]))
    host = make("github", client, sleeps, api_url="https://ghe.example.com/api/v3/")
    assert host.find_open("org/app", head="b", base="main") is None
    assert str(api.seen[0].url).startswith("https://ghe.example.com/api/v3/repos/org/app/pulls?")


def test_github_create_posts_the_pull_then_its_labels(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("POST", "/repos/org/app/pulls", ok(gh_pull(title="T", body="B"), 201))
    api.on("POST", "/repos/org/app/issues/7/labels", ok([{"name": "gitops"}]))

    pull = make("github", client, sleeps).create(
        "org/app", head="bot/web", base="main", title="T", body="B", labels=["gitops", "auto"]
    )

    assert pull.number == 7 and pull.title == "T"
    assert api.body(0) == {"head": "bot/web", "base": "main", "title": "T", "body": "B", "draft": False}
    assert api.body(1) == {"labels": ["gitops", "auto"]}


def test_github_duplicate_422_finds_the_open_pull_and_updates_it(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    duplicate = {
        "message": "Validation Failed",
        "errors": [{"resource": "PullRequest", "code": "custom",
                    "message": "A pull request already exists for org:bot/web."}],
    }
    api.on("POST", "/repos/org/app/pulls", ok(duplicate, 422))
    api.on("GET", "/repos/org/app/pulls", ok([gh_pull(4, title="old")]))
    api.on("PATCH", "/repos/org/app/pulls/4", ok(gh_pull(4, title="new", body="nb")))
    api.on("POST", "/repos/org/app/issues/4/labels", ok([]))

    pull = make("github", client, sleeps).create(
        "org/app", head="bot/web", base="main", title="new", body="nb", labels=["gitops"]
    )

    assert (pull.number, pull.title, pull.body) == (4, "new", "nb")
    assert [m for m, _ in api.calls()] == ["POST", "GET", "PATCH", "POST"]
    assert api.body(2) == {"title": "new", "body": "nb"}


def test_github_other_422_is_a_permanent_host_error(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    invalid = {"message": "Validation Failed",
               "errors": [{"resource": "PullRequest", "field": "head", "code": "invalid"}]}
    api.on("POST", "/repos/org/app/pulls", ok(invalid, 422))
    with pytest.raises(HostError) as caught:
        make("github", client, sleeps).create("org/app", head="gone", base="main", title="t", body="b")
    assert not isinstance(caught.value, HostAuthError)
    assert caught.value.retryable is False
    assert "422" in str(caught.value) and "org/app" in str(caught.value)
    assert HostError.retryable is True  # the class default is untouched


def test_github_find_latest_reports_a_merged_pull(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("GET", "/repos/org/app/pulls", ok([
        gh_pull(3, state="closed"), gh_pull(8, state="closed", merged_at="2024-01-01T00:00:00Z")
    ]))
    pull = make("github", client, sleeps).find_latest("org/app", head="bot/web", base="main")
    assert pull is not None and (pull.number, pull.state) == (8, "merged")
    assert api.params(0)["state"] == ["all"]
    assert api.params(0)["direction"] == ["desc"]


def test_github_close_patches_state_and_auto_merge_is_not_offered(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("PATCH", "/repos/org/app/pulls/7", ok(gh_pull(state="closed")))
    host = make("github", client, sleeps)
    host.close("org/app", 7)
    assert api.body(0) == {"state": "closed"}
    assert host.enable_auto_merge("org/app", 7) is False
    assert len(api.seen) == 1  # no GraphQL attempt


def test_github_rate_limit_403_waits_for_the_reset(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    limited = httpx.Response(403, json={"message": "API rate limit exceeded"},
                             headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1005"})
    api.on("GET", "/repos/org/app/pulls", limited, ok([]))
    host = GitHubHost(API["github"], TOKEN, client=client, sleep=sleeps.append, clock=lambda: 1000.0)
    assert host.find_open("org/app", head="b", base="main") is None
    assert sleeps == [5.0]


# -- GitLab -----------------------------------------------------------------------------------


def test_gitlab_encodes_the_project_path_and_sends_private_token(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("GET", "/api/v4/projects/group%2Fsub%2Fapp/merge_requests", ok([gl_mr()]))
    pull = make("gitlab", client, sleeps).find_open("group/sub/app", head="bot/web", base="main")

    assert pull is not None and (pull.number, pull.state, pull.head_sha) == (3, "open", "c" * 40)
    request = api.seen[0]
    assert request.headers["PRIVATE-TOKEN"] == TOKEN
    assert "Authorization" not in request.headers
    assert api.params(0)["source_branch"] == ["bot/web"]
    assert api.params(0)["target_branch"] == ["main"]
    assert api.params(0)["state"] == ["opened"]


def test_gitlab_create_sends_labels_as_a_comma_string(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("POST", "/api/v4/projects/org%2Fapp/merge_requests", ok(gl_mr(), 201))
    make("gitlab", client, sleeps).create(
        "org/app", head="bot/web", base="main", title="T", body="B", labels=["gitops", "auto"]
    )
    assert api.body(0) == {
        "source_branch": "bot/web", "target_branch": "main", "title": "T", "description": "B",
        "labels": "gitops,auto",
    }


def test_gitlab_duplicate_409_finds_and_updates_adding_labels(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    conflict = {"message": ["Another open merge request already exists for this source branch: !3"]}
    api.on("POST", "/api/v4/projects/org%2Fapp/merge_requests", ok(conflict, 409))
    api.on("GET", "/api/v4/projects/org%2Fapp/merge_requests", ok([gl_mr(3)]))
    api.on("PUT", "/api/v4/projects/org%2Fapp/merge_requests/3", ok(gl_mr(3, title="new")))

    pull = make("gitlab", client, sleeps).create(
        "org/app", head="bot/web", base="main", title="new", body="B", labels=["gitops"]
    )

    assert (pull.number, pull.title) == (3, "new")
    assert api.body(2) == {"title": "new", "description": "B", "add_labels": "gitops"}


def test_gitlab_close_and_auto_merge(api: Api, client: httpx.Client, sleeps: list[float]) -> None:
    api.on("PUT", "/api/v4/projects/org%2Fapp/merge_requests/3", ok(gl_mr(3, state="closed")))
    api.on("PUT", "/api/v4/projects/org%2Fapp/merge_requests/3/merge", ok(gl_mr(3)),
           ok({"message": "405 Method Not Allowed"}, 405))
    host = make("gitlab", client, sleeps)

    host.close("org/app", 3)
    assert host.enable_auto_merge("org/app", 3) is True
    assert host.enable_auto_merge("org/app", 3) is False  # not mergeable now

    assert api.body(0) == {"state_event": "close"}
    assert api.body(1) == {"auto_merge": True, "merge_when_pipeline_succeeds": True}


@pytest.mark.parametrize(("state", "expected"), [("opened", "open"), ("locked", "open"),
                                                 ("closed", "closed"), ("merged", "merged")])
def test_gitlab_states_map_onto_three(
    api: Api, client: httpx.Client, sleeps: list[float], state: str, expected: str
) -> None:
    api.on("GET", "/api/v4/projects/org%2Fapp/merge_requests", ok([gl_mr(state=state)]))
    pull = make("gitlab", client, sleeps).find_latest("org/app", head="bot/web", base="main")
    assert pull is not None and pull.state == expected
    assert api.params(0)["state"] == ["all"]


# -- Gitea ------------------------------------------------------------------------------------


def test_gitea_looks_labels_up_as_ids_and_skips_unknown_names(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    repo_labels = [{"id": 11, "name": "gitops"}, {"id": 12, "name": "x"}]
    api.on("GET", "/api/v1/repos/org/app/labels", gt_list(repo_labels))
    org_labels = [{"id": 40, "name": "org-wide"}, {"id": 41, "name": "x"}]
    api.on("GET", "/api/v1/orgs/org/labels", gt_list(org_labels))
    api.on("POST", "/api/v1/repos/org/app/pulls", ok(gt_pull(), 201))

    pull = make("gitea", client, sleeps).create(
        "org/app", head="bot/web", base="main", title="T", body="B",
        labels=["gitops", "org-wide", "nope", "x"],
    )

    assert pull.number == 5
    assert api.seen[0].headers["Authorization"] == f"token {TOKEN}"
    # Organisation labels are valid ids on the organisation's repositories; the repository's win a clash.
    assert api.body(2) == {"head": "bot/web", "base": "main", "title": "T", "body": "B",
                           "labels": [11, 40, 12]}


def test_gitea_labels_of_a_user_owned_repository_skip_the_missing_organisation(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("GET", "/api/v1/repos/org/app/labels", gt_list([{"id": 11, "name": "gitops"}]))
    api.on("GET", "/api/v1/orgs/org/labels", ok({"message": "GetOrgByName"}, 404))
    api.on("POST", "/api/v1/repos/org/app/pulls", ok(gt_pull(), 201))

    make("gitea", client, sleeps).create("org/app", head="bot/web", base="main", title="T", body="B",
                                         labels=["gitops", "nope"])

    assert api.body(2)["labels"] == [11]


def test_gitea_find_open_reads_pages_and_matches_branches_itself(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    first = [gt_pull(100 + i, head=f"other-{i}") for i in range(50)]
    second = [gt_pull(5), gt_pull(6, base="dev")]
    api.on("GET", "/api/v1/repos/org/app/pulls", gt_list(first, 52), gt_list(second, 52))

    pull = make("gitea", client, sleeps).find_open("org/app", head="bot/web", base="main")

    assert pull is not None and pull.number == 5
    assert [api.params(i)["page"] for i in range(len(api.seen))] == [["1"], ["2"]]
    assert api.params(0)["state"] == ["open"] and api.params(0)["limit"] == ["50"]


def test_gitea_duplicate_409_finds_patches_and_adds_labels(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("GET", "/api/v1/repos/org/app/labels", ok([{"id": 11, "name": "gitops"}]))
    api.on("POST", "/api/v1/repos/org/app/pulls", ok({"message": "pull request already exists"}, 409))
    api.on("GET", "/api/v1/repos/org/app/pulls", ok([gt_pull(5)]))
    api.on("PATCH", "/api/v1/repos/org/app/pulls/5", ok(gt_pull(5, title="new"), 201))
    api.on("POST", "/api/v1/repos/org/app/issues/5/labels", ok([]))

    pull = make("gitea", client, sleeps).create(
        "org/app", head="bot/web", base="main", title="new", body="B", labels=["gitops"]
    )

    assert (pull.number, pull.title) == (5, "new")
    assert ("PATCH", "/api/v1/repos/org/app/pulls/5") in api.calls()
    assert api.body(len(api.seen) - 1) == {"labels": [11]}


def test_gitea_merged_state_and_auto_merge(api: Api, client: httpx.Client, sleeps: list[float]) -> None:
    api.on("GET", "/api/v1/repos/org/app/pulls", gt_list([gt_pull(5, state="closed", merged=True)]))
    api.on("POST", "/api/v1/repos/org/app/pulls/5/merge", httpx.Response(201))
    host = make("gitea", client, sleeps)

    latest = host.find_latest("org/app", head="bot/web", base="main")
    assert latest is not None and latest.state == "merged"
    assert host.enable_auto_merge("org/app", 5) is True
    assert api.body(1) == {"Do": "merge", "merge_when_checks_succeed": True}


def test_gitea_404_on_create_names_the_branch(api: Api, client: httpx.Client, sleeps: list[float]) -> None:
    api.on("POST", "/api/v1/repos/org/app/pulls", ok({"message": "The target couldn't be found."}, 404))
    with pytest.raises(HostAuthError, match="'gone'"):
        make("gitea", client, sleeps).create("org/app", head="gone", base="main", title="t", body="b")


# -- Bitbucket --------------------------------------------------------------------------------


def test_bitbucket_find_open_filters_with_bbql(api: Api, client: httpx.Client, sleeps: list[float]) -> None:
    api.on("GET", "/2.0/repositories/ws/app/pullrequests", ok({"values": [bb_pull()], "pagelen": 50}))
    pull = make("bitbucket", client, sleeps).find_open("ws/app", head='bot/we"b', base="main")

    assert pull is None  # the document's branch is bot/web
    assert api.seen[0].headers["Authorization"] == f"Bearer {TOKEN}"
    assert api.params(0)["q"] == [
        'source.branch.name="bot/we\\"b" AND destination.branch.name="main" AND state="OPEN"'
    ]


def test_bitbucket_find_latest_lists_every_state_newest_first(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("GET", "/2.0/repositories/ws/app/pullrequests",
           ok({"values": [bb_pull(2, state="DECLINED"), bb_pull(4, state="MERGED")]}))
    pull = make("bitbucket", client, sleeps).find_latest("ws/app", head="bot/web", base="main")
    assert pull is not None and (pull.number, pull.state, pull.head_sha) == (4, "merged", "e" * 12)
    assert api.params(0)["state"] == ["OPEN", "MERGED", "DECLINED", "SUPERSEDED"]
    assert api.params(0)["sort"] == ["-created_on"]


def test_bitbucket_create_and_duplicate_400_updates_keeping_reviewers(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    duplicate = {"type": "error",
                 "error": {"message": "There is already an open pull request for this source branch."}}
    api.on("POST", "/2.0/repositories/ws/app/pullrequests", ok(duplicate, 400))
    api.on("GET", "/2.0/repositories/ws/app/pullrequests", ok({"values": [bb_pull(9)]}))
    api.on("GET", "/2.0/repositories/ws/app/pullrequests/9", ok(bb_pull(9, reviewers=["{u1}", "{u2}"])))
    api.on("PUT", "/2.0/repositories/ws/app/pullrequests/9", ok(bb_pull(9, title="new")))

    pull = make("bitbucket", client, sleeps).create(
        "ws/app", head="bot/web", base="main", title="new", body="B", labels=["ignored"]
    )

    assert (pull.number, pull.title) == (9, "new")
    assert api.body(0) == {
        "title": "new", "description": "B", "source": {"branch": {"name": "bot/web"}},
        "destination": {"branch": {"name": "main"}}, "close_source_branch": False,
    }
    assert api.body(3) == {
        "title": "new", "description": "B", "reviewers": [{"uuid": "{u1}"}, {"uuid": "{u2}"}],
        "close_source_branch": True,
    }


def test_bitbucket_other_400_is_a_permanent_error(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    missing = {"type": "error", "error": {"message": "source: Branch not found: gone"}}
    api.on("POST", "/2.0/repositories/ws/app/pullrequests", ok(missing, 400))
    with pytest.raises(HostError, match="Branch not found") as caught:
        make("bitbucket", client, sleeps).create("ws/app", head="gone", base="main", title="t", body="b")
    assert caught.value.retryable is False


def test_bitbucket_follows_next_only_on_its_own_origin(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    page2 = "https://api.bitbucket.org/2.0/repositories/ws/app/pullrequests?page=2"
    api.on("GET", "/2.0/repositories/ws/app/pullrequests",
           ok({"values": [bb_pull(1, head="x")], "next": page2}),
           ok({"values": [bb_pull(2)], "next": "https://evil.example.com/steal?page=3"}))

    pull = make("bitbucket", client, sleeps).find_open("ws/app", head="bot/web", base="main")

    assert pull is not None and pull.number == 2
    assert [str(r.url.host) for r in api.seen] == ["api.bitbucket.org", "api.bitbucket.org"]
    assert str(api.seen[1].url) == page2


def test_bitbucket_close_declines_and_has_no_auto_merge(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("POST", "/2.0/repositories/ws/app/pullrequests/9/decline", ok(bb_pull(9, state="DECLINED")))
    host = make("bitbucket", client, sleeps)
    host.close("ws/app", 9)
    assert host.enable_auto_merge("ws/app", 9) is False
    assert api.calls() == [("POST", "/2.0/repositories/ws/app/pullrequests/9/decline")]


# -- errors, retries, secrecy: every kind ------------------------------------------------------

LIST_PATH = {
    "github": "/repos/org/app/pulls",
    "gitlab": "/api/v4/projects/org%2Fapp/merge_requests",
    "gitea": "/api/v1/repos/org/app/pulls",
    "bitbucket": "/2.0/repositories/org/app/pullrequests",
}
EMPTY: dict[str, Any] = {"github": [], "gitlab": [], "gitea": [], "bitbucket": {"values": []}}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("status", [401, 403])
def test_refused_token_is_an_auth_error_naming_the_scope(
    api: Api, client: httpx.Client, sleeps: list[float], kind: str, status: int
) -> None:
    api.on("GET", LIST_PATH[kind], ok({"message": "Bad credentials"}, status))
    with pytest.raises(HostAuthError) as caught:
        make(kind, client, sleeps).find_open("org/app", head="b", base="main")
    text = str(caught.value)
    assert f"({status})" in text and "org/app" in text and "needs" in text
    assert TOKEN not in text and TOKEN not in repr(caught.value)
    assert caught.value.retryable is False
    assert len(api.seen) == 1 and sleeps == []


@pytest.mark.parametrize("kind", KINDS)
def test_not_found_is_an_auth_error_naming_the_repository(
    api: Api, client: httpx.Client, sleeps: list[float], kind: str
) -> None:
    api.on("GET", LIST_PATH[kind], ok({"message": "Not Found"}, 404))
    with pytest.raises(HostAuthError, match="repository org/app not found or not visible"):
        make(kind, client, sleeps).find_open("org/app", head="b", base="main")


@pytest.mark.parametrize("kind", KINDS)
def test_429_with_retry_after_waits_then_succeeds(
    api: Api, client: httpx.Client, sleeps: list[float], kind: str
) -> None:
    api.on("GET", LIST_PATH[kind], ok({"message": "slow down"}, 429, **{"Retry-After": "2"}), ok(EMPTY[kind]))
    assert make(kind, client, sleeps).find_open("org/app", head="b", base="main") is None
    assert sleeps == [2.0]
    assert len(api.seen) == 2


@pytest.mark.parametrize("kind", KINDS)
def test_long_retry_after_raises_rate_limited_without_waiting(
    api: Api, client: httpx.Client, sleeps: list[float], kind: str
) -> None:
    api.on("GET", LIST_PATH[kind], ok({"message": "slow down"}, 429, **{"Retry-After": "120"}))
    with pytest.raises(HostRateLimited) as caught:
        make(kind, client, sleeps).find_open("org/app", head="b", base="main")
    assert caught.value.retry_after == 120.0 and caught.value.retryable is True
    assert sleeps == [] and len(api.seen) == 1


def test_429_every_time_raises_rate_limited_after_the_attempts(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("GET", LIST_PATH["gitea"], ok({}, 429, **{"Retry-After": "1"}))
    with pytest.raises(HostRateLimited) as caught:
        make("gitea", client, sleeps).find_open("org/app", head="b", base="main")
    assert caught.value.retry_after == 1.0
    assert sleeps == [1.0, 1.0] and len(api.seen) == 3


@pytest.mark.parametrize("kind", KINDS)
def test_server_errors_are_retried_with_backoff_then_raise(
    api: Api, client: httpx.Client, sleeps: list[float], kind: str
) -> None:
    api.on("GET", LIST_PATH[kind], ok({"message": "boom"}, 502))
    with pytest.raises(HostError) as caught:
        make(kind, client, sleeps).find_open("org/app", head="b", base="main")
    assert type(caught.value) is HostError and caught.value.retryable is True
    assert "after 3 attempts" in str(caught.value) and "502" in str(caught.value)
    assert sleeps == [0.5, 1.0] and len(api.seen) == 3


def test_a_503_then_success_is_transparent(api: Api, client: httpx.Client, sleeps: list[float]) -> None:
    api.on("GET", LIST_PATH["gitlab"], ok({}, 503), ok([gl_mr()]))
    pull = make("gitlab", client, sleeps).find_open("org/app", head="bot/web", base="main")
    assert pull is not None and sleeps == [0.5]


def test_network_errors_are_retried_then_translated(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("GET", LIST_PATH["github"], httpx.ConnectError("connection refused"))
    with pytest.raises(HostError, match="ConnectError") as caught:
        make("github", client, sleeps).find_open("org/app", head="b", base="main")
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
    assert len(api.seen) == 3


def test_retry_policy_is_configurable(api: Api, client: httpx.Client, sleeps: list[float]) -> None:
    api.on("GET", LIST_PATH["github"], ok({}, 500))
    host = make("github", client, sleeps, retry=RetryPolicy(attempts=5, backoff=1.0, max_backoff=3.0))
    with pytest.raises(HostError):
        host.find_open("org/app", head="b", base="main")
    assert sleeps == [1.0, 2.0, 3.0, 3.0]


@pytest.mark.parametrize("kind", KINDS)
def test_token_never_appears_in_errors_even_when_the_host_echoes_it(
    api: Api, client: httpx.Client, sleeps: list[float], kind: str
) -> None:
    echo = {"message": f"token {TOKEN} is not valid for ?access_token={TOKEN}"}
    api.on("GET", LIST_PATH[kind], ok(echo, 400))
    with pytest.raises(HostError) as caught:
        make(kind, client, sleeps).find_open("org/app", head="b", base="main")
    assert TOKEN not in str(caught.value) and TOKEN not in repr(caught.value)
    assert "***" in str(caught.value)
    assert "?" not in str(caught.value).split("(")[0]  # the path is quoted without its query


def test_a_body_that_is_not_json_is_a_host_error(api: Api, client: httpx.Client, sleeps: list[float]) -> None:
    api.on("GET", LIST_PATH["github"], httpx.Response(200, text="<html>proxy login</html>"))
    with pytest.raises(HostError, match="not JSON"):
        make("github", client, sleeps).find_open("org/app", head="b", base="main")


def test_a_malformed_pull_document_is_a_host_error(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("GET", LIST_PATH["github"], ok([{"number": 1}]))
    with pytest.raises(HostError, match="unexpected pull request document"):
        make("github", client, sleeps).find_open("org/app", head="b", base="main")


# -- construction -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_repr_shows_the_api_url_but_never_the_token(client: httpx.Client, kind: str) -> None:
    host = host_for(kind, API[kind], TOKEN, client=client)
    assert TOKEN not in repr(host) and API[kind] in repr(host)
    assert isinstance(host, GitHost)
    assert host.kind == kind


def test_host_for_kinds_aliases_and_default_urls(client: httpx.Client) -> None:
    assert isinstance(host_for("GitHub", "", TOKEN, client=client), GitHubHost)
    assert isinstance(host_for("gitlab", API["gitlab"], TOKEN, client=client), GitLabHost)
    assert isinstance(host_for("forgejo", API["gitea"], TOKEN, client=client), GiteaHost)
    bitbucket = host_for("bitbucket", "", TOKEN, client=client)
    assert isinstance(bitbucket, BitbucketHost)
    assert bitbucket.api_url == "https://api.bitbucket.org/2.0"
    github = host_for("github", "", TOKEN, client=client)
    assert isinstance(github, GitHubHost) and github.api_url == "https://api.github.com"


@pytest.mark.parametrize(
    ("kind", "url", "token", "message"),
    [
        ("gogs", API["github"], TOKEN, "unknown git host kind"),
        ("gitlab", "", TOKEN, "http:// or https://"),
        ("gitea", "ftp://gitea.example.com/api/v1", TOKEN, "http:// or https://"),
        ("gitea", f"https://me:{TOKEN}@gitea.example.com/api/v1", TOKEN, "must not carry credentials"),
        ("github", "https://api.github.com?x=1", TOKEN, "query"),
        ("github", "https://api.github.com", "", "token is empty"),
    ],
    ids=["kind", "no-url", "scheme", "credentials", "query", "no-token"],
)
def test_host_for_rejects_bad_configuration(
    client: httpx.Client, kind: str, url: str, token: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        host_for(kind, url, token, client=client)
    assert TOKEN not in str(caught.value)


@pytest.mark.parametrize("repo", ["app", "org/", "/app", "org/app/extra"])
def test_owner_name_hosts_reject_other_repository_names(
    api: Api, client: httpx.Client, sleeps: list[float], repo: str
) -> None:
    with pytest.raises(ConfigError, match="owner/name"):
        make("github", client, sleeps).find_open(repo, head="b", base="main")
    assert api.seen == []


def test_an_injected_client_stays_open_and_an_own_one_is_closed(client: httpx.Client) -> None:
    injected = GitHubHost(API["github"], TOKEN, client=client)
    injected.close_client()
    assert not client.is_closed
    with GitHubHost(API["github"], TOKEN) as own:
        made = own._http
    assert made.is_closed


def test_the_token_is_sent_per_request_not_set_on_the_client(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("GET", LIST_PATH["github"], ok([]))
    make("github", client, sleeps).find_open("org/app", head="b", base="main")
    assert "Authorization" not in client.headers
    assert api.seen[0].headers["Authorization"] == f"Bearer {TOKEN}"
