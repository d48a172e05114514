"""Gitea's (and Forgejo's) REST API (``/api/v1``) for the PR host test server.

As Gitea answers: ``Authorization: token|Bearer``; ``GET|POST /repos/{o}/{r}/pulls``
(``state``, ``page``/``limit`` capped at ``MAX_RESPONSE_ITEMS`` (:meth:`Core.set_page_cap`,
50 by default) with ``X-Total-Count`` and ``Link``; no branch filter); ``GET|PATCH
.../pulls/{n}`` (PATCH answers 201); ``POST .../pulls/{n}/merge``; ``GET|POST .../labels``;
``GET /orgs/{org}/labels`` (404 for an owner that is no organisation); ``GET|POST|PUT
.../issues/{n}/labels``; ``GET|POST .../issues/{n}/comments`` (the list is not paged; an
empty ``body`` is 422). Labels are numeric ids, the repository's own or its owning
organisation's (unknown id: 422 "label does not exist"); creating one needs a ``name`` and
a ``color`` (``#rrggbb``; 422 otherwise). Duplicate: 409; missing head branch: 404.

Merge scheduling (``merge_when_checks_succeed``) answers like Gitea's
``MergePullRequest``: 405 "Please try again later" while the new pull request is still
checked (:meth:`Core.set_checking`), 201 when scheduled, 409 when already scheduled.
``DELETE .../pulls/{n}/merge`` cancels the scheduled merge like ``CancelScheduledAutoMerge``:
204, 404 when none is scheduled, 403 "user has no permission to cancel the scheduled auto
merge" while :meth:`Core.deny_merge` (a 423 "locked" is scripted with
:meth:`Core.answer_next`).
"""

from __future__ import annotations

import re
from typing import Any

from gitops_reloader.testing.prhost.core import (
    Core,
    _Comment,
    _error,
    _Fail,
    _int_arg,
    _Pull,
    _Repo,
    _Req,
    _Resp,
    _truthy,
    _with_query,
)

__all__ = ["GiteaApi"]

_COLOR = re.compile(r"^#?[0-9a-fA-F]{6}$")


class GiteaApi(Core):
    """The Gitea API of the PR host test server, mixed into :class:`PrHost`."""

    _GT = re.compile(
        r"^/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)/(?:"
        r"(?P<pulls>pulls)(?:/(?P<n>\d+)(?P<merge>/merge)?)?"
        r"|(?P<labels>labels)"
        r"|issues/(?P<issue>\d+)/labels|issues/(?P<cissue>\d+)/comments)$"
    )

    _GT_ORG = re.compile(r"^/orgs/(?P<org>[^/]+)/labels$")

    def _gitea(self, req: _Req) -> _Resp:
        org = self._GT_ORG.match(req.path)
        if org is not None:
            return self._gitea_org_labels(req, org["org"])
        match = self._GT.match(req.path)
        if match is None:
            return _Resp(404, _error("gitea", 404, "The target couldn't be found."))
        repo = f"{match['owner']}/{match['name']}"
        state = self._repo_or_404("gitea", repo)
        if match["labels"]:
            if req.method == "POST":
                name, color = req.param("name"), req.param("color")
                if not isinstance(name, str) or not name:
                    return _Resp(422, _error("gitea", 422, "[Name]: Required"))
                if not isinstance(color, str) or not _COLOR.match(color):
                    message = "[Color]: Required" if not color else "invalid color"
                    return _Resp(422, _error("gitea", 422, message))
                return _Resp(201, {"id": self._label_id(state, name), "name": name,
                                   "color": color.lstrip("#"), "description": req.param("description") or ""})
            return self._gitea_label_page(req, state.labels)
        if match["cissue"]:
            return self._gitea_comments(req, repo, self._pull_or_404("gitea", state, match["cissue"]))
        if match["issue"]:
            pull = self._pull_or_404("gitea", state, match["issue"])
            if req.method in ("POST", "PUT"):
                names = self._gitea_labels(state, req.param("labels"))
                if req.method == "PUT":
                    pull.labels = []
                pull.labels.extend(n for n in names if n not in pull.labels)
                self._touch(pull)
            elif req.method != "GET":
                return _Resp(405, _error("gitea", 405, "Method Not Allowed"))
            known = self._gitea_known(state)
            return _Resp(200, [{"id": known[n], "name": n} for n in pull.labels])
        if match["n"] is None:
            if req.method == "GET":
                return self._gitea_list(req, repo, state)
            if req.method == "POST":
                return self._gitea_create(req, repo, state)
            return _Resp(405, _error("gitea", 405, "Method Not Allowed"))
        pull = self._pull_or_404("gitea", state, match["n"])
        if match["merge"]:
            if req.method == "GET":
                return _Resp(204) if pull.state == "merged" else _Resp(404, _error("gitea", 404, "Not Found"))
            if req.method == "DELETE":
                return self._gitea_cancel_auto_merge(pull)
            if req.method != "POST":
                return _Resp(405, _error("gitea", 405, "Method Not Allowed"))
            if pull.state != "open":
                return _Resp(405, _error("gitea", 405, f"The PR is {pull.state}"))
            if pull.checking > 0:
                pull.checking -= 1
                return _Resp(405, _error("gitea", 405, "Please try again later"))
            if _truthy(req.param("merge_when_checks_succeed")):
                if pull.auto_merge:
                    message = "pull request is already scheduled to auto merge when checks succeed"
                    return _Resp(409, _error("gitea", 409, message))
                pull.auto_merge = True
                self._touch(pull)
                return _Resp(201)
            try:
                self._merge(repo, pull, req.param("MergeMessageField"))
            except (ValueError, RuntimeError):
                return _Resp(409, _error("gitea", 409, "merge conflict"))
            return _Resp(200)
        if req.method == "GET":
            return _Resp(200, self._gitea_pr(repo, pull))
        if req.method != "PATCH":
            return _Resp(405, _error("gitea", 405, "Method Not Allowed"))
        new_state = req.param("state")
        if new_state == "closed" and pull.state == "open":
            self._set_closed(pull)
        elif new_state == "open" and pull.state == "closed":
            conflict = _Resp(409, _error("gitea", 409, "pull request already exists"))
            self._reopen("gitea", state, pull, conflict)
        elif new_state not in (None, "open", "closed"):
            return _Resp(422, _error("gitea", 422, "invalid state"))
        for key in ("title", "body"):
            value = req.param(key)
            if isinstance(value, str):
                setattr(pull, key, value)
        if req.param("labels") is not None:
            pull.labels = self._gitea_labels(state, req.param("labels"))
        self._touch(pull)
        return _Resp(201, self._gitea_pr(repo, pull))

    def _gitea_comments(self, req: _Req, repo: str, pull: _Pull) -> _Resp:
        if req.method == "POST":
            text = req.param("body")
            if not isinstance(text, str) or not text:
                return _Resp(422, _error("gitea", 422, "[Body]: Required"))
            comment = self._new_comment(pull, text)
            self._touch(pull)
            return _Resp(201, self._gitea_comment(repo, pull, comment))
        if req.method != "GET":
            return _Resp(405, _error("gitea", 405, "Method Not Allowed"))
        return _Resp(200, [self._gitea_comment(repo, pull, c) for c in pull.comments])

    def _gitea_comment(self, repo: str, pull: _Pull, comment: _Comment) -> dict[str, Any]:
        html = f"{self._githost.url}/{repo}/pulls/{pull.number}"
        return {
            "id": comment.id,
            "html_url": f"{html}#issuecomment-{comment.id}",
            "pull_request_url": html,
            "issue_url": "",
            "user": {"login": comment.author},
            "body": comment.body,
            "created_at": comment.created,
            "updated_at": comment.created,
        }

    def _gitea_known(self, state: _Repo) -> dict[str, int]:
        """Label name → id valid on ``state``: the owner's organisation labels, then its own."""
        owner = state.name.split("/")[0]
        return {**self._org_labels.get(owner, {}), **state.labels}

    def _gitea_org_labels(self, req: _Req, org: str) -> _Resp:
        if org not in self._org_labels:
            return _Resp(404, _error("gitea", 404, "GetOrgByName"))
        if req.method != "GET":
            return _Resp(405, _error("gitea", 405, "Method Not Allowed"))
        return self._gitea_label_page(req, self._org_labels[org])

    def _gitea_label_page(self, req: _Req, labels: dict[str, int]) -> _Resp:
        ordered = sorted(labels.items(), key=lambda kv: kv[1])
        page = _int_arg(req, "page", 1)
        per_page = _int_arg(req, "limit", self._page_size, maximum=self._cap("gitea"))
        items, more = self._page(ordered, page, per_page)
        headers: tuple[tuple[str, str], ...] = (("X-Total-Count", str(len(ordered))),)
        if more:
            headers += (("Link", f'<{_with_query(req, page=page + 1)}>; rel="next"'),)
        return _Resp(200, [{"id": i, "name": n, "color": "#00aabb"} for n, i in items], headers)

    def _gitea_labels(self, state: _Repo, value: Any) -> list[str]:
        """Label names for ids (or names, as newer Gitea accepts); 422 for unknown ones."""
        known = self._gitea_known(state)
        by_id = {i: n for n, i in known.items()}
        names: list[str] = []
        for item in value if isinstance(value, list) else []:
            if isinstance(item, int) and item in by_id:
                names.append(by_id[item])
            elif isinstance(item, str) and item in known:
                names.append(item)
            else:
                raise _Fail(_Resp(422, _error("gitea", 422, f"label does not exist [id: {item}]")))
        return list(dict.fromkeys(names))

    def _gitea_list(self, req: _Req, repo: str, state: _Repo) -> _Resp:
        wanted = req.arg("state", "open")
        if wanted not in ("open", "closed", "all"):
            return _Resp(422, _error("gitea", 422, "invalid state"))
        pulls = [p for p in state.pulls if wanted == "all" or (p.state == "open") == (wanted == "open")]
        pulls.sort(key=lambda p: p.seq, reverse=True)  # newest first
        per_page = _int_arg(req, "limit", self._page_size, maximum=self._cap("gitea"))
        page = _int_arg(req, "page", 1)
        items, more = self._page(pulls, page, per_page)
        headers: tuple[tuple[str, str], ...] = (("X-Total-Count", str(len(pulls))),)
        if more:
            headers += (("Link", f'<{_with_query(req, page=page + 1)}>; rel="next"'),)
        return _Resp(200, [self._gitea_pr(repo, p) for p in items], headers)

    def _gitea_create(self, req: _Req, repo: str, state: _Repo) -> _Resp:
        for key in ("head", "base", "title"):
            value = req.param(key)
            if not isinstance(value, str) or not value:
                return _Resp(422, _error("gitea", 422, f"[{key.capitalize()}]: Required"))
        head, base = req.param("head"), req.param("base")
        has_head, has_base = self._check_branches(repo, head, base)
        if not has_head or not has_base:
            return _Resp(404, _error("gitea", 404, "The target couldn't be found."))
        existing = state.open_for(head, base)
        if existing is not None:
            message = (
                f"pull request already exists for these targets [id: {existing.global_id}, "
                f"issue_id: {existing.global_id}, head_repo_id: {state.project_id}, "
                f"base_repo_id: {state.project_id}, head_branch: {head}, base_branch: {base}]"
            )
            return _Resp(409, _error("gitea", 409, message))
        labels = self._gitea_labels(state, req.param("labels"))
        body = req.param("body")
        pull = self._new_pull(
            state, head=head, base=base, title=req.param("title"), body=body if isinstance(body, str) else ""
        )
        pull.labels = labels
        return _Resp(201, self._gitea_pr(repo, pull))

    def _gitea_cancel_auto_merge(self, pull: _Pull) -> _Resp:
        """Gitea's ``CancelScheduledAutoMerge``: 404 unless one is scheduled, 403 without rights."""
        if not pull.auto_merge:
            return _Resp(404, _error("gitea", 404, "The target couldn't be found."))
        if self._merge_denied:
            message = "user has no permission to cancel the scheduled auto merge"
            return _Resp(403, _error("gitea", 403, message))
        pull.auto_merge = False
        self._touch(pull)
        return _Resp(204)

    def _gitea_pr(self, repo: str, pull: _Pull) -> dict[str, Any]:
        state = self._repos[repo]
        known = self._gitea_known(state)
        html = f"{self._githost.url}/{repo}/pulls/{pull.number}"
        return {
            "id": pull.global_id,
            "number": pull.number,
            "url": html,
            "html_url": html,
            "title": pull.title,
            "body": pull.body,
            "state": "open" if pull.state == "open" else "closed",
            "merged": pull.state == "merged",
            "merged_at": pull.merged_at or None,
            "merge_commit_sha": pull.merge_sha or None,
            "mergeable": pull.state == "open",
            "labels": [{"id": known[n], "name": n, "color": "#00aabb"} for n in pull.labels],
            "head": {
                "label": pull.head,
                "ref": pull.head,
                "sha": self._head_sha(repo, pull),
                "repo_id": state.project_id,
            },
            "base": {
                "label": pull.base,
                "ref": pull.base,
                "sha": self._base_sha(repo, pull),
                "repo_id": state.project_id,
            },
            "created_at": pull.created,
            "updated_at": pull.updated,
            "closed_at": pull.closed_at or None,
        }
