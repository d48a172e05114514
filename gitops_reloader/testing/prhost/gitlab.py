"""GitLab's merge-request REST API (``/api/v4``) for the PR host test server.

As GitLab answers: ``PRIVATE-TOKEN`` or ``Authorization: Bearer``;
``/projects/:id/merge_requests`` with ``:id`` the URL-encoded path (or the numeric
``project_id`` it reported); ``source_branch``, ``target_branch``, ``state``, ``order_by``,
``sort``, ``per_page``/``page`` with ``X-Next-Page``/``X-Total``; ``GET|PUT .../:iid``
(``labels``, ``add_labels``, ``remove_labels``, ``state_event``, ``remove_source_branch``,
``squash``); ``GET|POST .../:iid/notes`` (``sort``, ``order_by``, ``per_page``/``page``
with ``X-Next-Page``; a missing ``body`` is 400 "body is missing"); ``PUT .../:iid/merge``
(``auto_merge`` / ``merge_when_pipeline_succeeds`` only
records the wish); ``POST .../:iid/cancel_auto_merge`` (201 with the merge request, 409
"Can't cancel the automatic merge" when none is armed; 404 on an older GitLab:
:meth:`Core.gitlab_without_cancel_auto_merge`) and ``POST
.../:iid/cancel_merge_when_pipeline_succeeds`` (201 ``{"status": "success"}``, or 201 with
``{"status": "error", "http_status": 406, ...}`` when none is armed); both answer 405
for a merge request that is not open and 401 without merge rights. Labels are a
comma-separated string. Duplicate: 409; missing source
branch: 422. While a new merge request is checked (:meth:`Core.set_checking`: no pipeline
yet) merging answers 405 and 422 in turn (the last one 422); a user without merge
rights (:meth:`Core.deny_merge`) gets 401.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gitops_reloader.testing.prhost.core import (
    Core,
    _Comment,
    _error,
    _int_arg,
    _names,
    _Pull,
    _Repo,
    _Req,
    _Resp,
    _truthy,
)

__all__ = ["GitLabApi"]

_CANT_CANCEL = "Can't cancel the automatic merge"


class GitLabApi(Core):
    """The GitLab API of the PR host test server, mixed into :class:`PrHost`."""

    _GL = re.compile(r"^/projects/(?P<project>.+?)/merge_requests(?:/(?P<iid>\d+)"
                     r"(?:(?P<merge>/merge)|(?P<notes>/notes)"
                     r"|/(?P<cancel>cancel_auto_merge|cancel_merge_when_pipeline_succeeds))?)?$")

    def _gitlab(self, req: _Req) -> _Resp:
        match = self._GL.match(req.path)
        if match is None:
            return _Resp(404, _error("gitlab", 404, "404 Not Found"))
        repo = self._gitlab_project(match["project"])
        state = self._repo_or_404("gitlab", repo)
        if match["iid"] is None:
            if req.method == "GET":
                return self._gitlab_list(req, repo, state)
            if req.method == "POST":
                return self._gitlab_create(req, repo, state)
            return _Resp(405, _error("gitlab", 405, "405 Method Not Allowed"))
        pull = self._pull_or_404("gitlab", state, match["iid"])
        if match["notes"]:
            return self._gitlab_notes(req, pull)
        if match["cancel"]:
            return self._gitlab_cancel(req, repo, pull, match["cancel"])
        if match["merge"]:
            if req.method != "PUT":
                return _Resp(405, _error("gitlab", 405, "405 Method Not Allowed"))
            if pull.state != "open":
                return _Resp(405, _error("gitlab", 405, "405 Method Not Allowed"))
            if self._merge_denied:
                return _Resp(401, _error("gitlab", 401, "401 Unauthorized"))
            if pull.checking > 0:
                pull.checking -= 1
                if pull.checking % 2:
                    return _Resp(405, _error("gitlab", 405, "405 Method Not Allowed"))
                return _Resp(422, _error("gitlab", 422, "Branch cannot be merged"))
            for key in ("should_remove_source_branch", "squash"):
                if req.param(key) is not None:
                    pull.options[key.removeprefix("should_")] = _truthy(req.param(key))
            if _truthy(req.param("auto_merge")) or _truthy(req.param("merge_when_pipeline_succeeds")):
                pull.auto_merge = True
                self._touch(pull)
                return _Resp(200, self._gitlab_mr(repo, pull))
            try:
                self._merge(repo, pull, req.param("merge_commit_message"))
            except (ValueError, RuntimeError):
                return _Resp(406, _error("gitlab", 406, "Branch cannot be merged"))
            return _Resp(200, self._gitlab_mr(repo, pull))
        if req.method == "GET":
            return _Resp(200, self._gitlab_mr(repo, pull))
        if req.method != "PUT":
            return _Resp(405, _error("gitlab", 405, "405 Method Not Allowed"))
        event = req.param("state_event")
        if event == "close" and pull.state == "open":
            self._set_closed(pull)
        elif event == "reopen" and pull.state == "closed":
            conflict = _Resp(409, _error("gitlab", 409, [_gl_duplicate_text(pull.number)]))
            self._reopen("gitlab", state, pull, conflict)
        elif event not in (None, "close", "reopen"):
            return _Resp(400, {"error": "state_event does not have a valid value"})
        title, description = req.param("title"), req.param("description")
        if isinstance(title, str):
            pull.title = title
        if isinstance(description, str):
            pull.body = description
        self._gitlab_options(req, pull)
        if req.param("labels") is not None:
            pull.labels = []
            self._gitlab_add_labels(state, pull, req.param("labels"))
        if req.param("add_labels") is not None:
            self._gitlab_add_labels(state, pull, req.param("add_labels"))
        remove = _names(req.param("remove_labels"))
        pull.labels = [n for n in pull.labels if n not in remove]
        self._touch(pull)
        return _Resp(200, self._gitlab_mr(repo, pull))

    def _gitlab_notes(self, req: _Req, pull: _Pull) -> _Resp:
        if req.method == "POST":
            text = req.param("body")
            if not isinstance(text, str) or not text:
                return _Resp(400, {"error": "body is missing"})
            note = self._new_comment(pull, text)
            self._touch(pull)
            return _Resp(201, _gitlab_note(pull, note))
        if req.method != "GET":
            return _Resp(405, _error("gitlab", 405, "405 Method Not Allowed"))
        notes = sorted(pull.comments, key=lambda c: c.id, reverse=req.arg("sort", "desc") != "asc")
        per_page = _int_arg(req, "per_page", 20, maximum=self._cap("gitlab"))
        page = _int_arg(req, "page", 1)
        items, more = self._page(notes, page, per_page)
        headers = (("X-Total", str(len(notes))), ("X-Page", str(page)),
                   ("X-Next-Page", str(page + 1) if more else ""))
        return _Resp(200, [_gitlab_note(pull, n) for n in items], headers)

    def _gitlab_cancel(self, req: _Req, repo: str, pull: _Pull, endpoint: str) -> _Resp:
        """Both ways GitLab cancels an auto-merge: the new endpoint, and the deprecated one
        that answers 201 even when it refuses (the body's ``status`` tells)."""
        new = endpoint == "cancel_auto_merge"
        if new and not self._gitlab_cancel_auto_merge:
            return _Resp(404, {"error": "404 Not Found"})
        if req.method != "POST" or pull.state != "open":
            return _Resp(405, _error("gitlab", 405, "405 Method Not Allowed"))
        if self._merge_denied:
            return _Resp(401, _error("gitlab", 401, "401 Unauthorized"))
        if not pull.auto_merge:
            if new:
                return _Resp(409, _error("gitlab", 409, _CANT_CANCEL))
            return _Resp(201, {"message": _CANT_CANCEL, "status": "error", "http_status": 406})
        pull.auto_merge = False
        self._touch(pull)
        return _Resp(201, self._gitlab_mr(repo, pull) if new else {"status": "success"})

    def _gitlab_options(self, req: _Req, pull: _Pull) -> None:
        for key in ("remove_source_branch", "squash"):
            if req.param(key) is not None:
                pull.options[key] = _truthy(req.param(key))

    def _gitlab_project(self, project: str) -> str:
        if project.isdigit():
            for state in self._repos.values():
                if state.project_id == int(project):
                    return state.name
        return project

    def _gitlab_add_labels(self, state: _Repo, pull: _Pull, value: Any) -> None:
        for name in _names(value):
            self._label_id(state, name)  # GitLab creates unknown labels
            if name not in pull.labels:
                pull.labels.append(name)

    def _gitlab_list(self, req: _Req, repo: str, state: _Repo) -> _Resp:
        wanted = req.arg("state", "all")
        mapping = {"opened": "open", "closed": "closed", "merged": "merged", "locked": "locked"}
        if wanted != "all" and wanted not in mapping:
            return _Resp(400, {"error": "state does not have a valid value"})
        pulls = [p for p in state.pulls if wanted == "all" or p.state == mapping[wanted]]
        if req.arg("source_branch"):
            pulls = [p for p in pulls if p.head == req.arg("source_branch")]
        if req.arg("target_branch"):
            pulls = [p for p in pulls if p.base == req.arg("target_branch")]
        key: Callable[[_Pull], Any] = (lambda p: p.updated) if req.arg("order_by") == "updated_at" else (
            lambda p: p.seq
        )
        pulls.sort(key=key, reverse=req.arg("sort", "desc") == "desc")
        per_page = _int_arg(req, "per_page", self._page_size, maximum=self._cap("gitlab"))
        page = _int_arg(req, "page", 1)
        items, more = self._page(pulls, page, per_page)
        total_pages = max(1, -(-len(pulls) // per_page))
        headers = (
            ("X-Page", str(page)),
            ("X-Per-Page", str(per_page)),
            ("X-Total", str(len(pulls))),
            ("X-Total-Pages", str(total_pages)),
            ("X-Next-Page", str(page + 1) if more else ""),
        )
        return _Resp(200, [self._gitlab_mr(repo, p) for p in items], headers)

    def _gitlab_create(self, req: _Req, repo: str, state: _Repo) -> _Resp:
        for key in ("source_branch", "target_branch", "title"):
            value = req.param(key)
            if not isinstance(value, str) or not value:
                return _Resp(400, {"error": f"{key} is missing"})
        head, base = req.param("source_branch"), req.param("target_branch")
        has_head, has_base = self._check_branches(repo, head, base)
        if not has_head or not has_base:
            which = "source_branch" if not has_head else "target_branch"
            return _Resp(422, {"message": {which: ["does not exist"]}})
        existing = state.open_for(head, base)
        if existing is not None:
            return _Resp(409, {"message": [_gl_duplicate_text(existing.number)]})
        description = req.param("description")
        pull = self._new_pull(
            state,
            head=head,
            base=base,
            title=req.param("title"),
            body=description if isinstance(description, str) else "",
        )
        self._gitlab_add_labels(state, pull, req.param("labels"))
        self._gitlab_options(req, pull)
        return _Resp(201, self._gitlab_mr(repo, pull))

    def _gitlab_mr(self, repo: str, pull: _Pull) -> dict[str, Any]:
        state = {"open": "opened", "closed": "closed", "merged": "merged"}[pull.state]
        return {
            "id": pull.global_id,
            "iid": pull.number,
            "project_id": self._repos[repo].project_id,
            "title": pull.title,
            "description": pull.body,
            "state": state,
            "source_branch": pull.head,
            "target_branch": pull.base,
            "sha": self._head_sha(repo, pull),
            "merge_commit_sha": pull.merge_sha or None,
            "labels": list(pull.labels),
            "merge_when_pipeline_succeeds": pull.auto_merge,
            "force_remove_source_branch": pull.options.get("remove_source_branch", False),
            "squash": pull.options.get("squash", False),
            "web_url": f"{self._githost.url}/{repo}/-/merge_requests/{pull.number}",
            "created_at": pull.created,
            "updated_at": pull.updated,
            "merged_at": pull.merged_at or None,
            "closed_at": pull.closed_at if pull.state == "closed" else None,
        }


def _gitlab_note(pull: _Pull, note: _Comment) -> dict[str, Any]:
    return {
        "id": note.id,
        "type": None,
        "body": note.body,
        "author": {"username": note.author},
        "created_at": note.created,
        "updated_at": note.created,
        "system": False,
        "noteable_id": pull.global_id,
        "noteable_type": "MergeRequest",
        "noteable_iid": pull.number,
        "resolvable": False,
    }


def _gl_duplicate_text(number: int) -> str:
    return f"Another open merge request already exists for this source branch: !{number}"
