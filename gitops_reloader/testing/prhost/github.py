"""GitHub's REST API (``/api/v3``) for the PR host test server.

As GitHub answers: ``Authorization: Bearer|token``; ``GET|POST /repos/{o}/{r}/pulls``
(``head=o:branch``, ``base``, ``state``, ``sort``, ``direction``, ``per_page`` up to the
page cap, ``page``, ``Link: rel="next"``); ``GET|PATCH .../pulls/{n}``; ``PUT
.../pulls/{n}/merge``; ``GET|POST .../issues/{n}/labels`` (unknown labels are created);
``GET|POST .../issues/{n}/comments`` (``per_page`` up to 100, ``page``, ``Link``; a missing
or empty ``body`` is 422 ``missing_field``, one over 65,536 characters 422 too long).
Bodies over 65,536 characters: 422 "body is too long (maximum is 65536 characters)".
Duplicate: 422 "A pull request already exists for o:branch."; a head without commits
over the base: 422 "No commits between base and head"; missing head: 422 ``invalid``.
A renamed repository (:meth:`Core.rename`) answers 301 for GET and 307 otherwise with
``Location`` ``/repositories/{id}/...`` (served too), or on another origin.
"""

from __future__ import annotations

import re
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from gitops_reloader.testing.prhost.core import (
    _GH_DOCS,
    PR_HOST_KINDS,
    Core,
    _Comment,
    _error,
    _int_arg,
    _Pull,
    _Repo,
    _Req,
    _Resp,
    _seconds,
    _with_query,
)

__all__ = ["GITHUB_BODY_LIMIT", "GitHubApi"]

GITHUB_BODY_LIMIT = 65_536
"""Longest pull request body GitHub stores, in characters."""


class GitHubApi(Core):
    """The GitHub API of the PR host test server, mixed into :class:`PrHost`."""

    _GH = re.compile(
        r"^/(?:repos/(?P<owner>[^/]+)/(?P<name>[^/]+)|repositories/(?P<rid>\d+))/(?P<rest>(?:"
        r"(?P<pulls>pulls)(?:/(?P<n>\d+)(?P<merge>/merge)?)?"
        r"|issues/(?P<issue>\d+)/labels|issues/(?P<cissue>\d+)/comments))$"
    )

    def _github(self, req: _Req) -> _Resp:
        match = self._GH.match(req.path)
        if match is None:
            return _Resp(404, _error("github", 404, "Not Found"))
        if match["rid"] is not None:
            repo = next((r.name for r in self._repos.values() if r.project_id == int(match["rid"])), "-/-")
        else:
            repo = f"{match['owner']}/{match['name']}"
        if repo in self._renamed:
            return self._github_moved(req, repo, match["rest"])
        state = self._repo_or_404("github", repo)
        if match["cissue"]:
            return self._github_comments(req, repo, self._pull_or_404("github", state, match["cissue"]))
        if match["issue"]:
            pull = self._pull_or_404("github", state, match["issue"])
            if req.method == "POST":
                given = req.body.get("labels", []) if isinstance(req.body, dict) else req.body
                if not isinstance(given, list) or not all(isinstance(x, str) for x in given):
                    return _Resp(422, _gh_invalid("labels", "invalid"))
                for name in given:
                    self._label_id(state, name)
                    if name not in pull.labels:
                        pull.labels.append(name)
                self._touch(pull)
            elif req.method != "GET":
                return _Resp(405, _error("github", 405, "Method Not Allowed"))
            return _Resp(200, [{"id": state.labels[n], "name": n} for n in pull.labels])
        if match["n"] is None:
            if req.method == "GET":
                return self._github_list(req, repo, state)
            if req.method == "POST":
                return self._github_create(req, repo, state)
            return _Resp(405, _error("github", 405, "Method Not Allowed"))
        pull = self._pull_or_404("github", state, match["n"])
        if match["merge"]:
            if req.method == "GET":
                merged = pull.state == "merged"
                return _Resp(204) if merged else _Resp(404, _error("github", 404, "Not Found"))
            if req.method != "PUT":
                return _Resp(405, _error("github", 405, "Method Not Allowed"))
            if pull.state != "open":
                return _Resp(405, _error("github", 405, "Pull Request is not mergeable"))
            try:
                sha = self._merge(repo, pull, req.param("commit_message"))
            except (ValueError, RuntimeError):
                return _Resp(405, _error("github", 405, "Pull Request is not mergeable"))
            return _Resp(200, {"sha": sha, "merged": True, "message": "Pull Request successfully merged"})
        if req.method == "GET":
            return _Resp(200, self._github_pr(repo, pull, full=True))
        if req.method != "PATCH":
            return _Resp(405, _error("github", 405, "Method Not Allowed"))
        body = req.body if isinstance(req.body, dict) else {}
        new_state = body.get("state")
        if new_state not in (None, "open", "closed"):
            return _Resp(422, _gh_invalid("state", "invalid"))
        if new_state is not None and pull.state == "merged" and new_state != "closed":
            return _Resp(422, _gh_custom("state cannot be changed. The pull request is already merged."))
        if new_state == "closed" and pull.state == "open":
            self._set_closed(pull)
        elif new_state == "open" and pull.state == "closed":
            owner = repo.split("/")[0]
            self._reopen("github", state, pull, _Resp(422, _gh_duplicate(owner, pull.head)))
        if isinstance(body.get("body"), str) and len(body["body"]) > GITHUB_BODY_LIMIT:
            return _Resp(422, _gh_too_long())
        for key in ("title", "body"):
            if isinstance(body.get(key), str):
                setattr(pull, key, body[key])
        self._touch(pull)
        return _Resp(200, self._github_pr(repo, pull, full=True))

    def secondary_rate_limit(self, n: int, *, status: int = 403, retry_after: float | None = None,
                             reset_in: float | None = None, path: str = "") -> None:
        """Answer the next ``n`` GitHub requests (whose path contains ``path``) with GitHub's
        secondary rate limit: ``status`` 403 or 429 and its message, with ``retry-after``,
        with ``x-ratelimit-remaining: 0`` and a reset ``reset_in`` seconds from now, or
        (both ``None``) with neither header."""
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["retry-after"] = _seconds(retry_after)
        if reset_in is not None:
            headers.update({"x-ratelimit-remaining": "0",
                            "x-ratelimit-reset": str(int(time.time() + reset_in))})
        body = {"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you "
                           "try again.",
                "documentation_url": f"{_GH_DOCS}/overview/rate-limits-for-the-rest-api"}
        self.answer_next(n, status, body, headers=headers, path=path, kind="github")

    def _github_comments(self, req: _Req, repo: str, pull: _Pull) -> _Resp:
        if req.method == "POST":
            text = req.param("body")
            if not isinstance(text, str) or not text:
                return _Resp(422, _gh_invalid("body", "missing_field"))
            if len(text) > GITHUB_BODY_LIMIT:
                return _Resp(422, _gh_too_long())
            comment = self._new_comment(pull, text)
            self._touch(pull)
            return _Resp(201, self._github_comment(req, repo, pull, comment))
        if req.method != "GET":
            return _Resp(405, _error("github", 405, "Method Not Allowed"))
        per_page = _int_arg(req, "per_page", self._page_size, maximum=self._cap("github"))
        page = _int_arg(req, "page", 1)
        items, more = self._page(pull.comments, page, per_page)
        headers: tuple[tuple[str, str], ...] = ()
        if more:
            headers = (("Link", f'<{_with_query(req, page=page + 1)}>; rel="next"'),)
        return _Resp(200, [self._github_comment(req, repo, pull, c) for c in items], headers)

    def _github_comment(self, req: _Req, repo: str, pull: _Pull, comment: _Comment) -> dict[str, Any]:
        return {
            "id": comment.id,
            "url": f"{req.api}/repos/{repo}/issues/comments/{comment.id}",
            "html_url": f"{self._githost.url}/{repo}/pull/{pull.number}#issuecomment-{comment.id}",
            "issue_url": f"{req.api}/repos/{repo}/issues/{pull.number}",
            "body": comment.body,
            "user": {"login": comment.author, "type": "User"},
            "created_at": comment.created,
            "updated_at": comment.created,
            "author_association": "MEMBER",
        }

    def _github_moved(self, req: _Req, old: str, rest: str) -> _Resp:
        new, elsewhere = self._renamed[old]
        if elsewhere:
            location = f"{elsewhere}/repos/{new}/{rest}"
        else:
            location = f"{req.api}/repositories/{self._repo(new).project_id}/{rest}"
        query = urllib.parse.urlencode(req.query, doseq=True)
        status = 301 if req.method in ("GET", "HEAD") else 307
        message = "Moved Permanently" if status == 301 else "Temporary Redirect"
        return _Resp(status, {"message": message, "url": location, "documentation_url": _GH_DOCS},
                     (("Location", location + (f"?{query}" if query else "")),))

    def _github_list(self, req: _Req, repo: str, state: _Repo) -> _Resp:
        owner = repo.split("/")[0]
        wanted = req.arg("state", "open")
        if wanted not in ("open", "closed", "all"):
            return _Resp(422, _gh_invalid("state", "invalid"))
        pulls = [p for p in state.pulls if wanted == "all" or (p.state == "open") == (wanted == "open")]
        head = req.arg("head")
        if head:
            head_owner, sep, branch = head.partition(":")
            if not sep:
                head_owner, branch = owner, head
            pulls = [p for p in pulls if head_owner == owner and p.head == branch]
        if req.arg("base"):
            pulls = [p for p in pulls if p.base == req.arg("base")]
        sort = req.arg("sort", "created")
        key: Callable[[_Pull], Any] = (lambda p: p.updated) if sort in ("updated", "long-running") else (
            lambda p: p.seq
        )
        default_direction = "desc" if sort in ("created", "updated") else "asc"
        reverse = req.arg("direction", default_direction) == "desc"
        pulls.sort(key=key, reverse=reverse)
        per_page = _int_arg(req, "per_page", self._page_size, maximum=self._cap("github"))
        page = _int_arg(req, "page", 1)
        items, more = self._page(pulls, page, per_page)
        headers: tuple[tuple[str, str], ...] = ()
        if more:
            headers = (("Link", f'<{_with_query(req, page=page + 1)}>; rel="next"'),)
        return _Resp(200, [self._github_pr(repo, p, full=False) for p in items], headers)

    def _github_create(self, req: _Req, repo: str, state: _Repo) -> _Resp:
        body = req.body if isinstance(req.body, dict) else {}
        owner = repo.split("/")[0]
        for key in ("head", "base", "title"):
            if not isinstance(body.get(key), str) or not body[key]:
                return _Resp(422, _gh_invalid(key, "missing_field"))
        head = body["head"].partition(":")[2] if ":" in body["head"] else body["head"]
        base = body["base"]
        has_head, has_base = self._check_branches(repo, head, base)
        if not has_head or not has_base:
            return _Resp(422, _gh_invalid("head" if not has_head else "base", "invalid"))
        if state.open_for(head, base) is not None:
            return _Resp(422, _gh_duplicate(owner, head))
        if self._no_commits_between(repo, base, head):
            return _Resp(422, _gh_custom(f"No commits between {base} and {head}"))
        if isinstance(body.get("body"), str) and len(body["body"]) > GITHUB_BODY_LIMIT:
            return _Resp(422, _gh_too_long())
        text = body.get("body")
        pull = self._new_pull(
            state, head=head, base=base, title=body["title"], body=text if isinstance(text, str) else ""
        )
        return _Resp(201, self._github_pr(repo, pull, full=True))

    def _github_pr(self, repo: str, pull: _Pull, *, full: bool) -> dict[str, Any]:
        owner = repo.split("/")[0]
        api = self._githost.url + PR_HOST_KINDS["github"]
        data: dict[str, Any] = {
            "url": f"{api}/repos/{repo}/pulls/{pull.number}",
            "id": pull.global_id,
            "number": pull.number,
            "html_url": f"{self._githost.url}/{repo}/pull/{pull.number}",
            "state": "open" if pull.state == "open" else "closed",
            "title": pull.title,
            "body": pull.body,
            "labels": [{"id": self._repos[repo].labels.get(n), "name": n} for n in pull.labels],
            "draft": False,
            "created_at": pull.created,
            "updated_at": pull.updated,
            "closed_at": pull.closed_at or None,
            "merged_at": pull.merged_at or None,
            "merge_commit_sha": pull.merge_sha or None,
            "head": {"label": f"{owner}:{pull.head}", "ref": pull.head, "sha": self._head_sha(repo, pull)},
            "base": {"label": f"{owner}:{pull.base}", "ref": pull.base, "sha": self._base_sha(repo, pull)},
        }
        if full:  # GitHub reports "merged" on the single pull request only
            data["merged"] = pull.state == "merged"
        return data


def _gh_too_long() -> dict[str, Any]:
    return {
        "message": "Validation Failed",
        "errors": [{"resource": "Issue", "code": "custom", "field": "body",
                    "message": f"body is too long (maximum is {GITHUB_BODY_LIMIT} characters)"}],
        "documentation_url": _GH_DOCS,
        "status": "422",
    }


def _gh_invalid(field_name: str, code: str) -> dict[str, Any]:
    return {
        "message": "Validation Failed",
        "errors": [{"resource": "PullRequest", "field": field_name, "code": code}],
        "documentation_url": _GH_DOCS,
        "status": "422",
    }


def _gh_custom(message: str) -> dict[str, Any]:
    return {
        "message": "Validation Failed",
        "errors": [{"resource": "PullRequest", "code": "custom", "message": message}],
        "documentation_url": _GH_DOCS,
        "status": "422",
    }


def _gh_duplicate(owner: str, head: str) -> dict[str, Any]:
    return _gh_custom(f"A pull request already exists for {owner}:{head}.")
