"""Bitbucket Cloud's REST API (``/2.0``) for the PR host test server.

As Bitbucket Cloud answers: ``Authorization: Bearer`` (access tokens) or, once
:meth:`Core.allow_basic` names the user, HTTP Basic ``username:token`` (app passwords,
API tokens); ``GET|POST /repositories/{ws}/{slug}/pullrequests`` (``state`` repeatable,
default OPEN; a BBQL subset in ``q``: ``field = "value"`` / ``!=`` / ``~`` joined by
``AND``; ``sort``; ``pagelen`` up to the page cap, ``page`` in a ``values``/``next``
envelope); ``GET|PUT .../{id}`` (PUT drops reviewers that are not re-sent);
``POST .../{id}/decline``, ``.../{id}/merge``; ``GET|POST .../{id}/comments``
(``values``/``next`` envelope, ``pagelen`` up to 100; a comment without ``content.raw``
is 400). No labels. Commit hashes are 12
characters; list items carry no ``reviewers`` (only the single pull request does). A
second create for a source branch with an open pull request into the same destination
answers 200 with that pull request, unchanged; a missing source branch answers 400.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gitops_reloader.documents import value_at
from gitops_reloader.testing.prhost.core import (
    PR_HOST_KINDS,
    Core,
    _Comment,
    _error,
    _git,
    _int_arg,
    _Pull,
    _Repo,
    _Req,
    _Resp,
    _with_query,
)

__all__ = ["BitbucketApi"]

_SHORT = 12  # Bitbucket Cloud reports commit hashes with 12 hex digits


class BitbucketApi(Core):
    """The Bitbucket API of the PR host test server, mixed into :class:`PrHost`."""

    _BB = re.compile(
        r"^/repositories/(?P<ws>[^/]+)/(?P<slug>[^/]+)/pullrequests"
        r"(?:/(?P<id>\d+)(?:/(?P<action>decline|merge)|(?P<comments>/comments))?)?$"
    )
    _BB_STATES = {"open": "OPEN", "merged": "MERGED", "closed": "DECLINED"}

    def _bitbucket(self, req: _Req) -> _Resp:
        match = self._BB.match(req.path)
        if match is None:
            return _Resp(404, _error("bitbucket", 404, "Resource not found"))
        repo = f"{match['ws']}/{match['slug']}"
        state = self._repo_or_404("bitbucket", repo)
        if match["id"] is None:
            if req.method == "GET":
                return self._bitbucket_list(req, repo, state)
            if req.method == "POST":
                return self._bitbucket_create(req, repo, state)
            return _Resp(405, _error("bitbucket", 405, "Method not allowed"))
        pull = self._pull_or_404("bitbucket", state, match["id"])
        if match["comments"]:
            return self._bitbucket_comments(req, repo, pull)
        action = match["action"]
        if action is not None:
            if req.method != "POST":
                return _Resp(405, _error("bitbucket", 405, "Method not allowed"))
            if pull.state != "open":
                return _Resp(400, _error("bitbucket", 400, f"The pull request is {pull.state}"))
            if action == "decline":
                self._set_closed(pull)
            else:
                try:
                    self._merge(repo, pull, req.param("message"))
                except (ValueError, RuntimeError):
                    return _Resp(409, _error("bitbucket", 409, "Merge conflict"))
            return _Resp(200, self._bitbucket_pr(repo, pull))
        if req.method == "GET":
            return _Resp(200, self._bitbucket_pr(repo, pull))
        if req.method != "PUT":
            return _Resp(405, _error("bitbucket", 405, "Method not allowed"))
        body = req.body if isinstance(req.body, dict) else {}
        if isinstance(body.get("title"), str):
            pull.title = body["title"]
        if isinstance(body.get("description"), str):
            pull.body = body["description"]
        # Bitbucket replaces the pull request with what was sent: reviewers not re-sent are dropped.
        reviewers = body.get("reviewers")
        pull.reviewers = [
            str(r["uuid"]) for r in reviewers or () if isinstance(r, dict) and "uuid" in r
        ]
        pull.close_source_branch = bool(body.get("close_source_branch", False))
        self._touch(pull)
        return _Resp(200, self._bitbucket_pr(repo, pull))

    def _bitbucket_comments(self, req: _Req, repo: str, pull: _Pull) -> _Resp:
        if req.method == "POST":
            raw = value_at(req.body, "content", "raw")
            if not isinstance(raw, str) or not raw:
                return _Resp(400, _bb_field_error("content", "This field is required."))
            comment = self._new_comment(pull, raw)
            self._touch(pull)
            return _Resp(201, self._bitbucket_comment(req, repo, pull, comment))
        if req.method != "GET":
            return _Resp(405, _error("bitbucket", 405, "Method not allowed"))
        per_page = _int_arg(req, "pagelen", 10, maximum=100)
        page = _int_arg(req, "page", 1)
        items, more = self._page(pull.comments, page, per_page)
        envelope: dict[str, Any] = {"pagelen": per_page, "size": len(pull.comments), "page": page,
                                    "values": [self._bitbucket_comment(req, repo, pull, c) for c in items]}
        if more:
            envelope["next"] = _with_query(req, page=page + 1)
        return _Resp(200, envelope)

    def _bitbucket_comment(self, req: _Req, repo: str, pull: _Pull, comment: _Comment) -> dict[str, Any]:
        return {
            "type": "pullrequest_comment",
            "id": comment.id,
            "content": {"type": "rendered", "raw": comment.body, "markup": "markdown", "html": ""},
            "user": {"type": "user", "display_name": comment.author, "uuid": "{" + comment.author + "}"},
            "created_on": comment.created,
            "updated_on": comment.created,
            "deleted": comment.deleted,
            "pending": False,
            "pullrequest": {"type": "pullrequest", "id": pull.number},
            "links": {"self": {"href": f"{req.api}/repositories/{repo}/pullrequests/{pull.number}"
                                       f"/comments/{comment.id}"}},
        }

    def _bitbucket_list(self, req: _Req, repo: str, state: _Repo) -> _Resp:
        wanted = {s.upper() for s in req.query.get("state", [])} or {"OPEN"}
        rendered = [
            (p, self._bitbucket_pr(repo, p))
            for p in state.pulls
            if self._BB_STATES[p.state] in wanted
        ]
        query = req.arg("q")
        if query:
            try:
                terms = _bbql(query)
            except ValueError as exc:
                return _Resp(400, _error("bitbucket", 400, f"Invalid query: {exc}"))
            rendered = [(p, doc) for p, doc in rendered if all(_bbql_match(doc, t) for t in terms)]
        sort = req.arg("sort", "id")
        reverse = sort.startswith("-")
        key = sort.lstrip("-")
        if key not in ("id", "created_on", "updated_on"):
            return _Resp(400, _error("bitbucket", 400, f"Invalid sort field: {key}"))
        if key == "updated_on":
            rendered.sort(key=lambda item: item[0].updated, reverse=reverse)
        else:
            rendered.sort(key=lambda item: item[0].seq, reverse=reverse)
        cap = self._cap("bitbucket")
        per_page = _int_arg(req, "pagelen", min(self._page_size, cap), maximum=cap)
        page = _int_arg(req, "page", 1)
        # List items leave out the reviewers: only the single pull request carries them.
        docs = [{k: v for k, v in doc.items() if k != "reviewers"} for _, doc in rendered]
        items, more = self._page(docs, page, per_page)
        envelope: dict[str, Any] = {"pagelen": per_page, "size": len(rendered), "page": page, "values": items}
        if more:
            envelope["next"] = _with_query(req, page=page + 1)
        if page > 1:
            envelope["previous"] = _with_query(req, page=page - 1)
        return _Resp(200, envelope)

    def _bitbucket_create(self, req: _Req, repo: str, state: _Repo) -> _Resp:
        body = req.body if isinstance(req.body, dict) else {}
        title = body.get("title")
        if not isinstance(title, str) or not title:
            return _Resp(400, _bb_field_error("title", "This field is required."))
        head = value_at(body, "source", "branch", "name")
        if not isinstance(head, str) or not head:
            return _Resp(400, _bb_field_error("source", "This field is required."))
        base = value_at(body, "destination", "branch", "name")
        if not isinstance(base, str) or not base:
            base = self._default_branch(repo)
        has_head, has_base = self._check_branches(repo, head, base)
        if not has_head:
            return _Resp(400, _bb_field_error("source", f"Branch not found: {head}"))
        if not has_base:
            return _Resp(400, _bb_field_error("destination", f"Branch not found: {base}"))
        existing = state.open_for(head, base)
        if existing is not None:  # Bitbucket hands back the open pull request, unchanged
            return _Resp(200, self._bitbucket_pr(repo, existing))
        description = body.get("description")
        pull = self._new_pull(
            state, head=head, base=base, title=title, body=description if isinstance(description, str) else ""
        )
        reviewers = body.get("reviewers")
        pull.reviewers = [str(r["uuid"]) for r in reviewers or () if isinstance(r, dict) and "uuid" in r]
        pull.close_source_branch = bool(body.get("close_source_branch", False))
        return _Resp(201, self._bitbucket_pr(repo, pull))

    def _default_branch(self, repo: str) -> str:
        done = _git(self._githost.bare_path(repo), "symbolic-ref", "--short", "HEAD", check=False)
        return done.stdout.decode().strip() or "main"

    def _bitbucket_pr(self, repo: str, pull: _Pull) -> dict[str, Any]:
        api = self._githost.url + PR_HOST_KINDS["bitbucket"]
        self_url = f"{api}/repositories/{repo}/pullrequests/{pull.number}"
        return {
            "type": "pullrequest",
            "id": pull.number,
            "title": pull.title,
            "description": pull.body,
            "state": self._BB_STATES[pull.state],
            "source": {
                "branch": {"name": pull.head},
                "commit": {"hash": self._head_sha(repo, pull)[:_SHORT]},
                "repository": {"full_name": repo},
            },
            "destination": {
                "branch": {"name": pull.base},
                "commit": {"hash": self._base_sha(repo, pull)[:_SHORT]},
                "repository": {"full_name": repo},
            },
            "reviewers": [{"type": "user", "uuid": uuid} for uuid in pull.reviewers],
            "close_source_branch": pull.close_source_branch,
            "merge_commit": {"hash": pull.merge_sha[:_SHORT]} if pull.merge_sha else None,
            "links": {
                "self": {"href": self_url},
                "html": {"href": f"{self._githost.url}/{repo}/pull-requests/{pull.number}"},
                "decline": {"href": f"{self_url}/decline"},
                "merge": {"href": f"{self_url}/merge"},
            },
            "created_on": pull.created,
            "updated_on": pull.updated,
        }


def _bb_field_error(field_name: str, message: str) -> dict[str, Any]:
    error = {"message": f"{field_name}: {message}", "fields": {field_name: [message]}}
    return {"type": "error", "error": error}


_BBQL_TOKEN = re.compile(
    r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<op>!=|=|~)|(?P<word>[A-Za-z0-9_.\-{}]+))'
)


def _bbql(query: str) -> list[tuple[str, str, str]]:
    """Parse the BBQL subset ``field op value [AND field op value ...]``."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = query.strip()
    while pos < len(text):
        match = _BBQL_TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"unexpected text at {pos}")
        pos = match.end()
        kind = match.lastgroup or ""
        value = match.group(kind)
        if kind == "string":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        tokens.append((kind, value))
    terms: list[tuple[str, str, str]] = []
    index = 0
    while index < len(tokens):
        if len(tokens) - index < 3:
            raise ValueError("incomplete expression")
        (k1, name), (k2, op), (k3, value) = tokens[index : index + 3]
        if k1 != "word" or k2 != "op" or k3 not in ("string", "word"):
            raise ValueError("expected: field op value")
        terms.append((name, op, value))
        index += 3
        if index < len(tokens):
            kind, word = tokens[index]
            if kind != "word" or word.upper() != "AND":
                raise ValueError("only AND is supported")
            index += 1
            if index == len(tokens):
                raise ValueError("dangling AND")
    return terms


def _bbql_match(doc: Mapping[str, Any], term: tuple[str, str, str]) -> bool:
    name, op, value = term
    actual = value_at(doc, *name.split("."))
    text = "" if actual is None else str(actual)
    if op == "=":
        return text == value
    if op == "!=":
        return text != value
    return value.lower() in text.lower()
