"""The PR host test server cancels auto-merge the way GitLab and Gitea do, raw and through the clients.

Raw HTTP checks the exact statuses and bodies (GitLab's deprecated endpoint refuses with a
201); the client checks see :meth:`GitHost.cancel_auto_merge` make sense of them, on a
current GitLab, an older one without ``cancel_auto_merge``, and Gitea.
"""

from __future__ import annotations

import httpx
import pytest
import test_prhost as prhost_tests
from test_prhost import BRANCH, REPO, TOKEN, _host, _Pusher

from gitops_reloader.errors import HostAuthError
from gitops_reloader.testing.prhost import PrHost

pytestmark = pytest.mark.e2e

githost = prhost_tests.githost
prhost = prhost_tests.prhost
client_env = prhost_tests.client_env
push = prhost_tests.push

CANT = "Can't cancel the automatic merge"


def armed(prhost: PrHost, push: _Pusher, kind: str) -> int:
    """A pull request of ``kind`` with its auto-merge armed; its number."""
    host = _host(prhost, kind)
    push(BRANCH, {"deploy.yaml": "replicas: 3\n"})
    pull = host.create(REPO, head=BRANCH, base="main", title="t", body="b")
    assert host.enable_auto_merge(REPO, pull.number) is True
    assert prhost.pulls(REPO)[0]["auto_merge"] is True
    return pull.number


def gitlab_http(prhost: PrHost) -> httpx.Client:
    return httpx.Client(base_url=prhost.mount("gitlab") + "/projects/org%2Fapp/merge_requests",
                        headers={"PRIVATE-TOKEN": TOKEN})


# -- raw answers --------------------------------------------------------------------------------


def test_gitlab_cancel_auto_merge_answers_201_with_the_merge_request_then_409(
        prhost: PrHost, push: _Pusher) -> None:
    number = armed(prhost, push, "gitlab")
    with gitlab_http(prhost) as http:
        first = http.post(f"/{number}/cancel_auto_merge")
        again = http.post(f"/{number}/cancel_auto_merge")
        wrong_method = http.put(f"/{number}/cancel_auto_merge")
    assert first.status_code == 201
    assert first.json()["iid"] == number and first.json()["merge_when_pipeline_succeeds"] is False
    assert again.status_code == 409 and again.json() == {"message": CANT}
    assert wrong_method.status_code == 405
    assert prhost.pulls(REPO)[0]["auto_merge"] is False


def test_gitlab_deprecated_endpoint_refuses_with_201_and_an_error_body(
        prhost: PrHost, push: _Pusher) -> None:
    number = armed(prhost, push, "gitlab")
    with gitlab_http(prhost) as http:
        first = http.post(f"/{number}/cancel_merge_when_pipeline_succeeds")
        again = http.post(f"/{number}/cancel_merge_when_pipeline_succeeds")
    assert (first.status_code, first.json()) == (201, {"status": "success"})
    refused = {"message": CANT, "status": "error", "http_status": 406}
    assert (again.status_code, again.json()) == (201, refused)


def test_an_older_gitlab_has_no_cancel_auto_merge_but_the_deprecated_endpoint(
        prhost: PrHost, push: _Pusher) -> None:
    number = armed(prhost, push, "gitlab")
    prhost.gitlab_without_cancel_auto_merge(True)
    with gitlab_http(prhost) as http:
        missing = http.post(f"/{number}/cancel_auto_merge")
        assert missing.status_code == 404 and prhost.pulls(REPO)[0]["auto_merge"] is True
        assert http.post(f"/{number}/cancel_merge_when_pipeline_succeeds").json() == {"status": "success"}
    assert prhost.pulls(REPO)[0]["auto_merge"] is False


@pytest.mark.parametrize("endpoint", ["cancel_auto_merge", "cancel_merge_when_pipeline_succeeds"])
def test_gitlab_cancel_405_when_closed_and_401_without_rights(
        prhost: PrHost, push: _Pusher, endpoint: str) -> None:
    number = armed(prhost, push, "gitlab")
    with gitlab_http(prhost) as http:
        prhost.deny_merge(True)
        assert http.post(f"/{number}/{endpoint}").status_code == 401
        prhost.deny_merge(False)
        prhost.close(REPO, number)
        assert http.post(f"/{number}/{endpoint}").status_code == 405
    assert prhost.pulls(REPO)[0]["auto_merge"] is True  # neither went through


def test_gitea_delete_merge_answers_204_then_404_and_403_without_rights(
        prhost: PrHost, push: _Pusher) -> None:
    number = armed(prhost, push, "gitea")
    with httpx.Client(base_url=prhost.mount("gitea") + "/repos/org/app/pulls",
                      headers={"Authorization": f"token {TOKEN}"}) as http:
        prhost.deny_merge(True)
        denied = http.delete(f"/{number}/merge")
        prhost.deny_merge(False)
        done = http.delete(f"/{number}/merge")
        again = http.delete(f"/{number}/merge")
    assert denied.status_code == 403 and "no permission" in denied.json()["message"]
    assert done.status_code == 204 and done.content == b""
    assert again.status_code == 404
    assert prhost.pulls(REPO)[0]["auto_merge"] is False


# -- through the host clients --------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "older"), [("gitlab", False), ("gitlab", True), ("gitea", False)])
def test_clients_cancel_once_and_then_find_nothing_armed(
        prhost: PrHost, push: _Pusher, kind: str, older: bool) -> None:
    number = armed(prhost, push, kind)
    prhost.gitlab_without_cancel_auto_merge(older)
    host = _host(prhost, kind)
    assert host.cancel_auto_merge(REPO, number) is True
    assert prhost.pulls(REPO)[0]["auto_merge"] is False
    assert host.cancel_auto_merge(REPO, number) is False
    paths = [r.path for r in prhost.requests if "cancel" in r.path]
    if kind == "gitlab":
        assert any(p.endswith("/cancel_merge_when_pipeline_succeeds") for p in paths) is older


@pytest.mark.parametrize("kind", ["gitlab", "gitea"])
def test_clients_report_a_refused_cancel_as_an_auth_error(prhost: PrHost, push: _Pusher, kind: str) -> None:
    number = armed(prhost, push, kind)
    prhost.deny_merge(True)
    with pytest.raises(HostAuthError, match="not allowed to cancel"):
        _host(prhost, kind).cancel_auto_merge(REPO, number)
    assert prhost.pulls(REPO)[0]["auto_merge"] is True
