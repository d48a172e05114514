"""Git host clients against the answers real hosts give under load, after a rename, on big lists.

Each case scripts what the host's documentation (or source) says it answers and checks
what the client makes of it: rate limits with and without headers, redirects of moved
repositories, bodies over the limit, lists of the wrong shape, Gitea's page cap and
organisation labels, auto-merge while the host is still checking, GitLab's merge rights,
Bitbucket's auth forms and duplicate answers. Waits are recorded by the injected sleeper.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from test_hosts import API, TOKEN, Api, bb_pull, gh_pull, gl_mr, gt_list, gt_pull, make, ok

from gitops_reloader.errors import ConfigError, HostAuthError, HostError, HostRateLimited
from gitops_reloader.gitops.hosts import BitbucketHost, GitHubHost, RetryPolicy, host_for
from gitops_reloader.gitops.hosts.base import MAX_REDIRECTS
from gitops_reloader.gitops.prpolicy import BODY_LIMIT


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


SECONDARY = {"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try "
                        "again.", "documentation_url": "https://docs.github.com/rest/overview/rate-limits"}


# -- GitHub rate limits --------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "headers", "body", "wait"), [
    (403, {"retry-after": "7"}, SECONDARY, 7.0),
    (429, {"retry-after": "7"}, SECONDARY, 7.0),
    (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1020"}, {"message": "API rate limit exceeded"},
     20.0),
    (429, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1020"}, SECONDARY, 20.0),
    (403, {}, SECONDARY, 60.0),  # neither header: at least a minute
    (429, {}, SECONDARY, 60.0),
])
def test_github_rate_limits_are_waits_never_a_refused_token(
    api: Api, client: httpx.Client, sleeps: list[float], status: int, headers: dict[str, str],
    body: dict[str, Any], wait: float,
) -> None:
    api.on("GET", "/repos/org/app/pulls", ok(body, status, **headers), ok([gh_pull()]))
    patient = GitHubHost(API["github"], TOKEN, client=client, sleep=sleeps.append, clock=lambda: 1000.0,
                         retry=RetryPolicy(max_wait=600))
    assert patient.find_open("org/app", head="bot/web", base="main") is not None
    assert sleeps == [wait]

    # With the default policy a wait over 30 s is not slept: the work queue comes back later.
    sleeps.clear()
    api.routes.clear()
    api.on("GET", "/repos/org/app/pulls", ok(body, status, **headers), ok([gh_pull()]))
    host = GitHubHost(API["github"], TOKEN, client=client, sleep=sleeps.append, clock=lambda: 1000.0)
    if wait > host.retry.max_wait:
        with pytest.raises(HostRateLimited) as raised:
            host.find_open("org/app", head="bot/web", base="main")
        assert raised.value.retry_after == wait and raised.value.retryable and sleeps == []


def test_github_secondary_limit_without_headers_doubles_the_wait_on_each_retry(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("GET", "/repos/org/app/pulls", ok(SECONDARY, 403), ok(SECONDARY, 403), ok([]))
    host = GitHubHost(API["github"], TOKEN, client=client, sleep=sleeps.append,
                      retry=RetryPolicy(max_wait=600))
    assert host.find_open("org/app", head="bot/web", base="main") is None
    assert sleeps == [60.0, 120.0]


def test_github_plain_403_is_still_a_refused_token(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("GET", "/repos/org/app/pulls", ok({"message": "Resource not accessible by integration"}, 403))
    with pytest.raises(HostAuthError, match="token not allowed"):
        make("github", client, sleeps).find_open("org/app", head="b", base="main")
    assert sleeps == []


# -- redirects -----------------------------------------------------------------------------------


def test_a_renamed_repository_is_followed_on_the_same_origin_and_logged_once(
    api: Api, client: httpx.Client, sleeps: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    moved = "https://api.github.com/repositories/42/pulls"
    api.on("GET", "/repos/org/old/pulls", httpx.Response(301, headers={"Location": moved + "?state=open"}))
    api.on("GET", "/repositories/42/pulls", ok([gh_pull()]))
    api.on("POST", "/repos/org/old/pulls", httpx.Response(307, headers={"Location": moved}))
    api.on("POST", "/repositories/42/pulls", ok(gh_pull(8), 201))
    host = make("github", client, sleeps)
    caplog.set_level(logging.WARNING)

    for _ in range(2):
        assert host.find_open("org/old", head="bot/web", base="main") is not None
    created = host.create("org/old", head="bot/web", base="main", title="t", body="b")

    assert created.number == 8
    assert api.body(len(api.seen) - 1)["head"] == "bot/web"  # the 307 re-sent the body
    notes = [r for r in caplog.records if "moved" in r.getMessage()]
    assert [r.path for r in notes] == ["/repos/org/old/pulls"]  # type: ignore[attr-defined]
    assert TOKEN not in caplog.text


@pytest.mark.parametrize("location", [
    "https://evil.example.com/repos/org/new/pulls",
    "http://api.github.com/repos/org/new/pulls",
    "https://api.github.com:8443/repos/org/new/pulls",
    "",
])
def test_a_redirect_off_the_api_origin_is_a_permanent_clear_error(
    api: Api, client: httpx.Client, sleeps: list[float], location: str
) -> None:
    headers = {"Location": location} if location else {}
    api.on("GET", "/repos/org/old/pulls", httpx.Response(301, headers=headers))
    with pytest.raises(HostError) as raised:
        make("github", client, sleeps).find_open("org/old", head="b", base="main")
    assert not raised.value.retryable
    assert "set pullRequest.repository" in str(raised.value)
    assert [m for m, _ in api.calls()] == ["GET"]  # nothing sent to the other origin


def test_a_redirect_under_another_api_prefix_is_refused(client: httpx.Client, sleeps: list[float]) -> None:
    api = Api()
    with httpx.Client(transport=httpx.MockTransport(api.handler)) as own:
        api.on("GET", "/api/v1/repos/org/app/pulls",
               httpx.Response(301, headers={"Location": "https://gitea.example.com/other/repos/org/app/pulls"}))
        with pytest.raises(HostError, match="outside the API URL"):
            make("gitea", own, sleeps).find_open("org/app", head="b", base="main")


def test_a_redirect_loop_stops(api: Api, client: httpx.Client, sleeps: list[float]) -> None:
    api.on("GET", "/repos/org/a/pulls", httpx.Response(301, headers={"Location": "/repos/org/b/pulls"}))
    api.on("GET", "/repos/org/b/pulls", httpx.Response(301, headers={"Location": "/repos/org/a/pulls"}))
    with pytest.raises(HostError, match="redirects") as raised:
        make("github", client, sleeps).find_open("org/a", head="b", base="main")
    assert not raised.value.retryable and len(api.seen) == MAX_REDIRECTS + 1


# -- shapes and sizes ------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "path", "answer"), [
    ("github", "/repos/org/app/pulls", {"message": "ok"}),
    ("gitlab", "/api/v4/projects/org%2Fapp/merge_requests", {"data": []}),
    ("gitea", "/api/v1/repos/org/app/pulls", {"pulls": []}),
])
def test_a_200_of_the_wrong_shape_is_an_error_not_no_pull_request(
    api: Api, client: httpx.Client, sleeps: list[float], kind: str, path: str, answer: Any
) -> None:
    api.on("GET", path, ok(answer))
    with pytest.raises(HostError, match="not a list") as raised:
        make(kind, client, sleeps).find_open("org/app", head="b", base="main")
    assert raised.value.retryable


@pytest.mark.parametrize("kind", ["github", "gitlab", "gitea", "bitbucket"])
def test_a_body_over_the_host_limit_is_refused_before_it_is_sent(
    api: Api, client: httpx.Client, sleeps: list[float], kind: str
) -> None:
    host = make(kind, client, sleeps)
    assert host.max_body >= BODY_LIMIT  # type: ignore[attr-defined]  # render_body always fits
    with pytest.raises(HostError, match="characters") as raised:
        too_long = "x" * (host.max_body + 1)  # type: ignore[attr-defined]
        host.create("org/app", head="b", base="main", title="t", body=too_long)
    assert not raised.value.retryable and api.seen == []


# -- Gitea ------------------------------------------------------------------------------------------


def _gitea_pages(total: int, cap: int, *, link: bool,
                 count: bool) -> Callable[[httpx.Request], httpx.Response]:
    """A Gitea whose MAX_RESPONSE_ITEMS is ``cap``: pages of ``cap`` whatever ``limit`` asks."""
    pulls = [gt_pull(100 + i, head=f"other-{i}") for i in range(total - 1)] + [gt_pull(5)]

    def answer(request: httpx.Request) -> httpx.Response:
        page = int(request.url.params["page"])
        items = pulls[(page - 1) * cap: page * cap]
        headers = {"X-Total-Count": str(total)} if count else {}
        url = f"{API['gitea']}/repos/org/app/pulls"
        links = [f'<{url}?page={page + 1}>; rel="next"'] if page * cap < total else []
        links += [f'<{url}?page={page - 1}>; rel="prev"'] if page > 1 else []
        if link and links:
            headers["Link"] = ", ".join(links)
        return ok(items, **headers)

    return answer


@pytest.mark.parametrize(("link", "count"), [(True, True), (True, False), (False, True), (False, False)])
def test_gitea_with_a_page_cap_of_30_finds_the_40th_pull_request(
    api: Api, client: httpx.Client, sleeps: list[float], link: bool, count: bool
) -> None:
    api.on("GET", "/api/v1/repos/org/app/pulls", _gitea_pages(40, 30, link=link, count=count))
    pull = make("gitea", client, sleeps).find_open("org/app", head="bot/web", base="main")
    assert pull is not None and pull.number == 5
    pages = [api.params(i)["page"][0] for i in range(len(api.seen))]
    assert pages == (["1", "2"] if link or count else ["1", "2", "3"])  # headerless: until an empty page


def test_gitea_duplicate_on_a_capped_server_adopts_the_pull_request_on_page_two(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("POST", "/api/v1/repos/org/app/pulls", ok({"message": "pull request already exists"}, 409))
    api.on("GET", "/api/v1/repos/org/app/pulls", _gitea_pages(40, 30, link=True, count=True))
    api.on("PATCH", "/api/v1/repos/org/app/pulls/5", ok(gt_pull(5, title="T"), 201))
    pull = make("gitea", client, sleeps).create("org/app", head="bot/web", base="main", title="T", body="b")
    assert pull.number == 5


@pytest.mark.parametrize(("answers", "expected", "waits"), [
    ([httpx.Response(201)], True, 0),
    ([httpx.Response(200)], True, 0),  # no required checks: merged at once
    ([ok({"message": "Please try again later"}, 405), ok({"message": "Please try again later"}, 405),
      httpx.Response(201)], True, 2),
    ([ok({"message": "pull request is already scheduled to auto merge when checks succeed"}, 409)], True, 0),
    ([ok({"message": "merge failed because of conflict"}, 409)], False, 0),
    ([ok({"message": "The PR is not mergeable"}, 405)], False, 0),
    ([ok({"message": "Please try again later"}, 405)], False, 4),  # still checking after every try
])
def test_gitea_auto_merge_answers(
    api: Api, client: httpx.Client, sleeps: list[float], answers: list[httpx.Response], expected: bool,
    waits: int,
) -> None:
    api.on("POST", "/api/v1/repos/org/app/pulls/5/merge", *answers)
    assert make("gitea", client, sleeps).enable_auto_merge("org/app", 5) is expected
    assert len(sleeps) == waits


# -- GitLab -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
def test_gitlab_merge_refusal_means_not_allowed_to_merge(
    api: Api, client: httpx.Client, sleeps: list[float], status: int
) -> None:
    refused = ok({"message": "401 Unauthorized"}, status)
    api.on("PUT", "/api/v4/projects/g%2Fapp/merge_requests/3/merge", refused)
    with pytest.raises(HostAuthError) as raised:
        make("gitlab", client, sleeps).enable_auto_merge("g/app", 3)
    assert "not allowed to merge g/app!3" in str(raised.value) and "token refused" not in str(raised.value)


@pytest.mark.parametrize(("answers", "expected", "waits"), [
    ([ok({"message": "405 Method Not Allowed"}, 405), ok(gl_mr())], True, 1),  # no pipeline yet
    ([ok({"message": "Branch cannot be merged"}, 422), ok({"message": "405"}, 405), ok(gl_mr())], True, 2),
    ([ok({"message": "Branch cannot be merged"}, 406)], False, 0),
    ([ok({"message": "SHA does not match HEAD of source branch"}, 409)], False, 0),
    ([ok({"message": "405 Method Not Allowed"}, 405)], False, 4),
])
def test_gitlab_auto_merge_right_after_creation_is_asked_again(
    api: Api, client: httpx.Client, sleeps: list[float], answers: list[httpx.Response], expected: bool,
    waits: int,
) -> None:
    api.on("PUT", "/api/v4/projects/g%2Fapp/merge_requests/3/merge", *answers)
    assert make("gitlab", client, sleeps).enable_auto_merge("g/app", 3) is expected
    assert len(sleeps) == waits


def test_gitlab_remove_source_branch_and_squash_are_sent(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("POST", "/api/v4/projects/g%2Fapp/merge_requests", ok(gl_mr(), 201))
    api.on("PUT", "/api/v4/projects/g%2Fapp/merge_requests/3", ok(gl_mr()))
    api.on("PUT", "/api/v4/projects/g%2Fapp/merge_requests/3/merge", ok(gl_mr()))
    host = make("gitlab", client, sleeps, remove_source_branch=True, squash=True)
    host.create("g/app", head="bot/web", base="main", title="t", body="b")
    host.update("g/app", 3, title="t", body="b")
    host.enable_auto_merge("g/app", 3)
    assert api.body(0)["remove_source_branch"] is True and api.body(0)["squash"] is True
    assert api.body(1)["remove_source_branch"] is True and api.body(1)["squash"] is True
    assert api.body(2)["should_remove_source_branch"] is True and api.body(2)["squash"] is True
    plain = make("gitlab", client, sleeps)
    plain.update("g/app", 3, title="t", body="b")
    assert "squash" not in api.body(3) and "remove_source_branch" not in api.body(3)


def test_host_options_belong_to_their_host(client: httpx.Client) -> None:
    with pytest.raises(ConfigError, match="only used with bitbucket"):
        host_for("github", "", TOKEN, client=client, username="me")
    with pytest.raises(ConfigError, match="squash is a GitLab setting"):
        host_for("gitea", API["gitea"], TOKEN, client=client, squash=True)
    with pytest.raises(ConfigError, match="GitLab and Azure DevOps setting"):
        host_for("github", "", TOKEN, client=client, remove_source_branch=True)
    with pytest.raises(ConfigError, match="mergeStrategy is an Azure DevOps setting"):
        host_for("gitlab", API["gitlab"], TOKEN, client=client, merge_strategy="squash")


# -- Bitbucket --------------------------------------------------------------------------------------


def test_bitbucket_basic_auth_with_username_and_app_password(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    expected = base64.b64encode(f"me@x.io:{TOKEN}".encode()).decode()
    echo = ok({"type": "error", "error": {"message": f"bad credentials {expected}"}}, 400)
    api.on("GET", "/2.0/repositories/ws/app/pullrequests", ok({"values": []}), ok({"values": []}), echo)
    basic = make("bitbucket", client, sleeps, username="me@x.io")
    bearer = make("bitbucket", client, sleeps)
    assert basic.find_open("ws/app", head="b", base="main") is None
    bearer.find_open("ws/app", head="b", base="main")
    assert api.seen[0].headers["Authorization"] == f"Basic {expected}"
    assert api.seen[1].headers["Authorization"] == f"Bearer {TOKEN}"
    with pytest.raises(HostError) as raised:  # the host echoing the Basic credentials is scrubbed
        basic.find_open("ws/app", head="b", base="main")
    assert expected not in str(raised.value) and TOKEN not in str(raised.value)
    assert TOKEN not in repr(basic)


def test_bitbucket_429_without_retry_after_waits_a_minute_not_half_a_second(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    api.on("GET", "/2.0/repositories/ws/app/pullrequests", ok({"type": "error"}, 429), ok({"values": []}))
    with pytest.raises(HostRateLimited) as raised:
        make("bitbucket", client, sleeps).find_open("ws/app", head="b", base="main")
    assert raised.value.retry_after == 60.0 and sleeps == []
    patient = BitbucketHost(API["bitbucket"], TOKEN, client=client, sleep=sleeps.append,
                            retry=RetryPolicy(max_wait=600))
    api.routes.clear()
    api.on("GET", "/2.0/repositories/ws/app/pullrequests", ok({"type": "error"}, 429), ok({"values": []}))
    assert patient.find_open("ws/app", head="b", base="main") is None
    assert sleeps == [60.0]


def test_bitbucket_create_answered_with_the_open_pull_request_updates_it(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    # Bitbucket Cloud hands back the pull request already open for the branch, unchanged.
    old, new = bb_pull(9, title="old", reviewers=["{r}"]), bb_pull(9, title="new", reviewers=["{r}"])
    api.on("POST", "/2.0/repositories/ws/app/pullrequests", ok(old, 200))
    api.on("GET", "/2.0/repositories/ws/app/pullrequests/9", ok(old))
    api.on("PUT", "/2.0/repositories/ws/app/pullrequests/9", ok(new))
    host = make("bitbucket", client, sleeps)
    pull = host.create("ws/app", head="bot/web", base="main", title="new", body="d")
    assert (pull.number, pull.title) == (9, "new")
    assert api.body(2)["reviewers"] == [{"uuid": "{r}"}]


def test_bitbucket_list_items_without_reviewers_and_short_hashes(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    item = bb_pull(9)
    del item["reviewers"]
    api.on("GET", "/2.0/repositories/ws/app/pullrequests", ok({"values": [item]}))
    pull = make("bitbucket", client, sleeps).find_open("ws/app", head="bot/web", base="main")
    assert pull is not None and pull.head_sha == "e" * 12


def test_a_rate_limited_403_on_merge_is_a_wait_not_missing_merge_rights(
    api: Api, client: httpx.Client, sleeps: list[float]
) -> None:
    limited = ok({"message": "API rate limit exceeded"}, 403, **{"Retry-After": "3"})
    api.on("PUT", "/api/v4/projects/g%2Fapp/merge_requests/3/merge", limited, ok(gl_mr()))
    assert make("gitlab", client, sleeps).enable_auto_merge("g/app", 3) is True
    assert sleeps == [3.0]


@pytest.mark.parametrize("status", [403, 404])
def test_gitea_unreadable_organisation_labels_only_skip_those_labels(
    api: Api, client: httpx.Client, sleeps: list[float], status: int
) -> None:
    api.on("GET", "/api/v1/repos/org/app/labels", gt_list([{"id": 11, "name": "gitops"}]))
    api.on("GET", "/api/v1/orgs/org/labels", ok({"message": "token does not have required scope"}, status))
    api.on("POST", "/api/v1/repos/org/app/pulls", ok(gt_pull(), 201))
    make("gitea", client, sleeps).create("org/app", head="bot/web", base="main", title="T", body="B",
                                         labels=["gitops", "org-only"])
    assert api.body(2)["labels"] == [11]
