"""``cancel_auto_merge`` of every host client against the answers the real APIs give (respx).

GitLab: ``POST .../cancel_auto_merge`` (201 with the merge request, 409 when nothing is
armed), and on a GitLab without it (404) ``POST .../cancel_merge_when_pipeline_succeeds``,
which answers 201 both ways and says which in the body. Gitea/Forgejo: ``DELETE
.../pulls/{n}/merge`` (204, 404 nothing scheduled, 403, 423). GitHub and Bitbucket: no
request at all, ``False``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import respx

from gitops_reloader.errors import HostAuthError, HostError
from gitops_reloader.gitops.hosts import GitHost, host_for

TOKEN = "glpat-cAnCeL-t0ken-0987654321"
GITLAB = "https://gitlab.example.com/api/v4"
GITEA = "https://gitea.example.com/api/v1"
MR = "/projects/g%2Fapp/merge_requests/3"
NEW = MR + "/cancel_auto_merge"
OLD = MR + "/cancel_merge_when_pipeline_succeeds"
PULL_MERGE = "/repos/org/app/pulls/5/merge"
CANT = "Can't cancel the automatic merge"


def merge_request(**changes: Any) -> dict[str, Any]:
    """A merge request document as GitLab returns it."""
    return {"iid": 3, "id": 903, "state": "opened", "title": "t", "description": "d",
            "source_branch": "bot/web", "target_branch": "main", "sha": "c" * 40,
            "merge_when_pipeline_succeeds": False, **changes}


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False, assert_all_mocked=True) as mock:
        yield mock


def host(kind: str, url: str = "") -> GitHost:
    return host_for(kind, url, TOKEN, sleep=lambda _: None)


# -- GitLab, the new endpoint ---------------------------------------------------------------------


def test_gitlab_cancels_with_the_new_endpoint_and_never_asks_the_old_one(router: respx.MockRouter) -> None:
    new = router.post(GITLAB + NEW).respond(201, json=merge_request())
    old = router.post(GITLAB + OLD).respond(201, json={"status": "success"})
    assert host("gitlab", GITLAB).cancel_auto_merge("g/app", 3) is True
    assert new.call_count == 1 and old.call_count == 0
    assert new.calls.last.request.headers["PRIVATE-TOKEN"] == TOKEN


@pytest.mark.parametrize(("status", "message"), [
    (409, CANT),  # nothing armed: "does not go through"
    (405, "405 Method Not Allowed"),  # merged or closed already
])
def test_gitlab_new_endpoint_refusals_mean_nothing_armed(
        router: respx.MockRouter, status: int, message: str, caplog: pytest.LogCaptureFixture) -> None:
    router.post(GITLAB + NEW).respond(status, json={"message": message})
    old = router.post(GITLAB + OLD)
    caplog.set_level(logging.INFO)
    assert host("gitlab", GITLAB).cancel_auto_merge("g/app", 3) is False
    assert old.call_count == 0
    assert "no automatic merge to cancel" in caplog.text


# -- GitLab, older servers: the deprecated endpoint -------------------------------------------------


@pytest.mark.parametrize(("body", "expected"), [
    ({"status": "success"}, True),
    ({"message": CANT, "status": "error", "http_status": 406}, False),  # a refusal sent with 201
    (merge_request(), True),  # a server that renders the merge request as its docs say
])
def test_older_gitlab_falls_back_and_reads_the_answer_from_the_body(
        router: respx.MockRouter, body: dict[str, Any], expected: bool) -> None:
    new = router.post(GITLAB + NEW).respond(404, json={"error": "404 Not Found"})
    old = router.post(GITLAB + OLD).respond(201, json=body)
    assert host("gitlab", GITLAB).cancel_auto_merge("g/app", 3) is expected
    assert new.call_count == 1 and old.call_count == 1


def test_older_gitlab_405_means_merged_or_closed(router: respx.MockRouter) -> None:
    router.post(GITLAB + NEW).respond(404, json={"error": "404 Not Found"})
    router.post(GITLAB + OLD).respond(405, json={"message": "405 Method Not Allowed"})
    assert host("gitlab", GITLAB).cancel_auto_merge("g/app", 3) is False


@pytest.mark.parametrize("body", [{"message": "hm"}, ["success"]])
def test_older_gitlab_201_without_a_status_is_an_error_not_a_guess(
        router: respx.MockRouter, body: Any) -> None:
    router.post(GITLAB + NEW).respond(404, json={"error": "404 Not Found"})
    router.post(GITLAB + OLD).respond(201, json=body)
    with pytest.raises(HostError, match="cancelling the automatic merge of g/app!3"):
        host("gitlab", GITLAB).cancel_auto_merge("g/app", 3)


def test_gitlab_unknown_merge_request_on_both_endpoints_is_not_found(router: respx.MockRouter) -> None:
    router.post(GITLAB + NEW).respond(404, json={"message": "404 Not found"})
    router.post(GITLAB + OLD).respond(404, json={"message": "404 Not found"})
    with pytest.raises(HostAuthError, match="merge request !3 does not exist"):
        host("gitlab", GITLAB).cancel_auto_merge("g/app", 3)


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("status", [401, 403])
def test_gitlab_no_rights_is_an_auth_error_that_says_what_is_missing(
        router: respx.MockRouter, legacy: bool, status: int) -> None:
    refused = {"message": f"{status} Unauthorized {TOKEN}"}
    if legacy:
        router.post(GITLAB + NEW).respond(404, json={"error": "404 Not Found"})
        router.post(GITLAB + OLD).respond(status, json=refused)
    else:
        router.post(GITLAB + NEW).respond(status, json=refused)
    with pytest.raises(HostAuthError) as raised:
        host("gitlab", GITLAB).cancel_auto_merge("g/app", 3)
    text = str(raised.value)
    assert "not allowed to cancel the automatic merge of g/app!3" in text and "merge rights" in text
    assert TOKEN not in text


def test_gitlab_server_errors_are_retried_then_retryable(router: respx.MockRouter) -> None:
    route = router.post(GITLAB + NEW).respond(502, json={"message": "502 Bad Gateway"})
    with pytest.raises(HostError) as raised:
        host("gitlab", GITLAB).cancel_auto_merge("g/app", 3)
    assert raised.value.retryable and route.call_count == 3


# -- Gitea / Forgejo -------------------------------------------------------------------------------


def test_gitea_cancels_the_scheduled_merge(router: respx.MockRouter) -> None:
    route = router.delete(GITEA + PULL_MERGE).respond(204)
    assert host("gitea", GITEA).cancel_auto_merge("org/app", 5) is True
    assert route.calls.last.request.headers["Authorization"] == f"token {TOKEN}"


def test_gitea_404_means_nothing_scheduled(router: respx.MockRouter) -> None:
    router.delete(GITEA + PULL_MERGE).respond(404, json={"message": "The target couldn't be found."})
    assert host("gitea", GITEA).cancel_auto_merge("org/app", 5) is False


def test_gitea_403_is_an_auth_error_naming_the_scheduler(router: respx.MockRouter) -> None:
    router.delete(GITEA + PULL_MERGE).respond(
        403, json={"message": "user has no permission to cancel the scheduled auto merge"})
    with pytest.raises(HostAuthError, match="someone else scheduled it"):
        host("gitea", GITEA).cancel_auto_merge("org/app", 5)


def test_gitea_423_locked_is_a_clear_error(router: respx.MockRouter) -> None:
    router.delete(GITEA + PULL_MERGE).respond(423, json={"message": "repository is archived"})
    with pytest.raises(HostError, match="423") as raised:
        host("gitea", GITEA).cancel_auto_merge("org/app", 5)
    assert "repository is archived" in str(raised.value)


# -- hosts without an auto-merge we use ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["github", "bitbucket"])
def test_github_and_bitbucket_send_nothing_and_answer_false(router: respx.MockRouter, kind: str) -> None:
    assert host(kind).cancel_auto_merge("org/app", 7) is False
    assert router.calls.call_count == 0
