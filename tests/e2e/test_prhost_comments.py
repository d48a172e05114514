"""Comments and labels on a pull request, as the four hosts answer them, raw and through the clients.

The pull-request sink comments on (and labels) a pull request whose branch someone else
committed to; these tests pin the endpoints it uses on the PR host test server —
GitHub's issue comments, GitLab's merge request notes, Gitea's issue comments with label
ids (422 for an unknown id, labels created with a name and a colour), Bitbucket Cloud's
``content.raw`` comments in a paged envelope — and the clients' reading of them.
"""

from __future__ import annotations

import httpx
import pytest
import test_prhost as prhost_tests
from test_prhost import BRANCH, KINDS, REPO, TOKEN, _host, _Pusher

from gitops_reloader.errors import HostError
from gitops_reloader.testing.prhost import PrHost

pytestmark = pytest.mark.e2e

githost = prhost_tests.githost
prhost = prhost_tests.prhost
client_env = prhost_tests.client_env
push = prhost_tests.push

LABEL = "gitops-reloader/foreign-commits"


def opened(prhost: PrHost, push: _Pusher, kind: str) -> int:
    """A pull request of ``kind`` on :data:`BRANCH`; its number."""
    push(BRANCH, {"deploy.yaml": "replicas: 3\n"})
    return _host(prhost, kind).create(REPO, head=BRANCH, base="main", title="t", body="b").number


@pytest.mark.parametrize("kind", KINDS)
def test_comments_are_posted_and_read_back_oldest_first(prhost: PrHost, push: _Pusher, kind: str) -> None:
    number = opened(prhost, push, kind)
    host = _host(prhost, kind)
    assert host.comments(REPO, number) == []
    prhost.comment(REPO, number, "looks odd")
    host.add_comment(REPO, number, "**notice**\n\n<!-- marker -->\n")
    assert host.comments(REPO, number) == ["looks odd", "**notice**\n\n<!-- marker -->\n"]
    assert prhost.pulls(REPO)[0]["comments"] == ["looks odd", "**notice**\n\n<!-- marker -->\n"]
    posts = [r.status for r in prhost.requests
             if r.method == "POST" and r.path.endswith(("/comments", "/notes", "/threads"))]
    assert posts == [200 if kind == "azure" else 201]  # Azure answers a new thread with 200


@pytest.mark.parametrize("kind", KINDS)
def test_comments_beyond_the_first_page_are_read(prhost: PrHost, push: _Pusher, kind: str) -> None:
    number = opened(prhost, push, kind)
    prhost.set_page_cap(kind, 2)  # Gitea lists comments unpaged; the others page
    for i in range(5):
        prhost.comment(REPO, number, f"c{i}")
    assert _host(prhost, kind).comments(REPO, number) == [f"c{i}" for i in range(5)]


@pytest.mark.parametrize("kind", ["github", "gitlab", "gitea"])
def test_labels_are_added_and_reported_on_the_pull_request(prhost: PrHost, push: _Pusher, kind: str) -> None:
    number = opened(prhost, push, kind)
    host = _host(prhost, kind)
    assert host.add_labels(REPO, number, [LABEL]) is True
    assert prhost.pulls(REPO)[0]["labels"] == [LABEL]
    found = host.find_open(REPO, head=BRANCH, base="main")
    assert found is not None and found.labels == (LABEL,)
    assert host.add_labels(REPO, number, [LABEL]) is True  # again: still one label
    assert prhost.pulls(REPO)[0]["labels"] == [LABEL]


def test_gitea_creates_a_missing_label_with_a_colour_before_adding_it_by_id(
        prhost: PrHost, push: _Pusher) -> None:
    number = opened(prhost, push, "gitea")
    prhost.clear_requests()
    assert _host(prhost, "gitea").add_labels(REPO, number, [LABEL]) is True
    calls = [(r.method, r.path.removeprefix("/api/v1/repos/org/app"), r.status) for r in prhost.requests]
    assert ("POST", "/labels", 201) in calls and ("POST", f"/issues/{number}/labels", 200) in calls
    prhost.clear_requests()
    assert _host(prhost, "gitea").add_labels(REPO, number, [LABEL]) is True  # known now: not created again
    assert not [r for r in prhost.requests if r.method == "POST" and r.path.endswith("/app/labels")]


def test_gitea_refuses_unknown_label_ids_and_labels_without_a_colour(prhost: PrHost, push: _Pusher) -> None:
    number = opened(prhost, push, "gitea")
    with httpx.Client(base_url=prhost.mount("gitea") + "/repos/org/app",
                      headers={"Authorization": f"token {TOKEN}"}) as http:
        unknown = http.post(f"/issues/{number}/labels", json={"labels": [4242]})
        assert unknown.status_code == 422 and "label does not exist" in unknown.json()["message"]
        colourless = http.post("/labels", json={"name": LABEL})
        assert colourless.status_code == 422 and "Color" in colourless.json()["message"]
        made = http.post("/labels", json={"name": LABEL, "color": "#e11d21"})
        assert made.status_code == 201 and isinstance(made.json()["id"], int)
        empty = http.post(f"/issues/{number}/comments", json={"body": ""})
        assert empty.status_code == 422


def test_bitbucket_has_no_labels_and_comments_in_content_raw(prhost: PrHost, push: _Pusher) -> None:
    number = opened(prhost, push, "bitbucket")
    host = _host(prhost, "bitbucket")
    assert host.add_labels(REPO, number, [LABEL]) is False
    assert not [r for r in prhost.requests if "label" in r.path]
    with httpx.Client(base_url=prhost.mount("bitbucket") + f"/repositories/org/app/pullrequests/{number}",
                      headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        made = http.post("/comments", json={"content": {"raw": "hello"}})
        assert made.status_code == 201 and made.json()["content"]["raw"] == "hello"
        assert http.post("/comments", json={"text": "hello"}).status_code == 400
        listed = http.get("/comments").json()
        assert [c["content"]["raw"] for c in listed["values"]] == ["hello"]


def test_github_and_gitlab_refuse_an_empty_comment(prhost: PrHost, push: _Pusher) -> None:
    number = opened(prhost, push, "github")
    with pytest.raises(HostError) as github:
        _host(prhost, "github").add_comment(REPO, number, "")
    assert "422" in str(github.value)
    with pytest.raises(HostError) as gitlab:
        _host(prhost, "gitlab").add_comment(REPO, number, "")
    assert "400" in str(gitlab.value)


@pytest.mark.parametrize("kind", KINDS)
def test_comments_on_a_missing_pull_request_are_a_404(prhost: PrHost, push: _Pusher, kind: str) -> None:
    opened(prhost, push, kind)
    with pytest.raises(HostError):
        _host(prhost, kind).comments(REPO, 99)


@pytest.mark.parametrize("kind", KINDS)
def test_a_comment_list_that_is_not_a_list_is_an_error_not_no_comments(
        prhost: PrHost, push: _Pusher, kind: str) -> None:
    number = opened(prhost, push, kind)
    prhost.answer_next(1, 200, {"values": "nope"} if kind != "bitbucket" else ["nope"],
                       method="GET", path={"gitlab": "/notes", "azure": "/threads"}.get(kind, "/comments"),
                       kind=kind)
    with pytest.raises(HostError):
        _host(prhost, kind).comments(REPO, number)
