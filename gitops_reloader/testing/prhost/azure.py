"""Azure DevOps' Git pull request REST API (``api-version=7.1``) for the PR host test server.

Mounted at ``/tfs/DefaultCollection`` (Azure DevOps Server's layout; the cloud's is
``https://dev.azure.com/{org}``): the git server's repository ``org/app`` is project ``org``,
repository ``app``. As Microsoft's REST reference (Git → Pull Requests, Pull Request
Threads, Pull Request Labels) answers:

- Auth: HTTP Basic with any user name (the empty one included) and the token as password, or
  ``Bearer``. A request without credentials is answered **203** with the HTML sign-in page,
  as Azure does; a wrong token 401 ``TF400813``. Every request needs ``api-version``; without
  it 400 ``VssVersionNotSpecifiedException``. Path segments are matched case-insensitively.
- ``GET …/_apis/git/repositories/{repo}/pullrequests`` (``searchCriteria.status``
  ``active`` by default, ``completed``, ``abandoned``, ``all``;
  ``searchCriteria.sourceRefName``/``targetRefName``; ``$top``, ``$skip``; newest first):
  ``{"value": [...], "count": n}``. When ``$top`` exceeds the page cap
  (:meth:`Core.set_page_cap`) and more remain, the answer carries
  ``x-ms-continuationtoken``, taken back as ``continuationToken``.
- ``POST …/pullrequests``: 201 with the pull request; 409 ``TF401179`` for a second active
  one on the same branches; 400 ``TF401398`` for a missing branch; 400 for a description
  over 4,000 characters. ``labels`` (``[{"name"}]``) are created as given.
- ``GET|PATCH …/pullrequests/{id}``: ``title``, ``description``, ``status``
  (``abandoned``, ``active``), ``autoCompleteSetBy`` (the empty id clears it) and
  ``completionOptions``.
- ``GET|POST …/pullRequests/{id}/threads``: a thread per comment (a new one answers 200),
  after a system thread (``commentType: system``) every pull request has.
- ``GET|POST …/pullRequests/{id}/labels``: ``{"name"}`` → the tag definition.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

from gitops_reloader.testing.prhost.core import (
    BOT,
    PR_HOST_KINDS,
    Core,
    _Comment,
    _int_arg,
    _Pull,
    _Repo,
    _Req,
    _Resp,
)

__all__ = ["AZURE_BODY_LIMIT", "AzureApi"]

AZURE_BODY_LIMIT = 4_000
"""Longest pull request description Azure DevOps stores, in characters."""
SERVED_VERSION = "7.1"
"""The REST API version this server models (what the client says it speaks)."""
_NO_ONE = "00000000-0000-0000-0000-000000000000"
_HEADS = "refs/heads/"
_SIGN_IN = (b"<!DOCTYPE html><html><head><title>Azure DevOps Services | Sign In</title></head>"
            b"<body>Sign in to your account</body></html>")
_STATUS = {"open": "active", "merged": "completed", "closed": "abandoned"}


def _guid(*names: object) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(str(n) for n in names)))


def _az_error(message: str, type_key: str) -> dict[str, Any]:
    assembly = "Microsoft.TeamFoundation.Git.Server"
    return {"$id": "1", "innerException": None, "message": message,
            "typeName": f"{assembly}.{type_key}, {assembly}", "typeKey": type_key, "errorCode": 0,
            "eventId": 3000}


def _bad(status: int, message: str, type_key: str = "ArgumentException") -> _Resp:
    return _Resp(status, _az_error(message, type_key))


class AzureApi(Core):
    """The Azure DevOps API of the PR host test server, mixed into :class:`PrHost`."""

    _AZ = re.compile(
        r"^/(?P<project>[^/]+)/_apis/git/repositories/(?P<repo>[^/]+)/pullrequests"
        r"(?:/(?P<id>\d+)(?:/(?P<sub>threads|labels))?)?$", re.IGNORECASE)

    def _before_auth(self, kind: str, method: str, path: str, environ: Mapping[str, Any],
                     body: Any) -> _Resp | None:
        if kind != "azure":
            return super()._before_auth(kind, method, path, environ, body)
        header = str(environ.get("HTTP_AUTHORIZATION", "")).strip()
        if not header:
            return _Resp(203, _SIGN_IN, (("Content-Type", "text/html; charset=utf-8"),))
        if not self._authorized(kind, environ):
            return _Resp(401, _az_error("TF400813: The user '' is not authorized to access this resource.",
                                        "UnauthorizedRequestException"))
        versions = parse_qs(str(environ.get("QUERY_STRING", ""))).get("api-version") or []
        if not versions:
            return _bad(400, f'No api-version was supplied for the "{method}" request. The version must be '
                        'supplied either as part of the Accept header (e.g. "application/json; '
                        'api-version=1.0") or as a query parameter (e.g. "?api-version=1.0").',
                        "VssVersionNotSpecifiedException")
        if versions[-1] != SERVED_VERSION:
            return _bad(400, f"The requested REST API version of {versions[-1][:32]} is out of range for "
                        f"this server. The latest REST API version this server supports is {SERVED_VERSION}.",
                        "VssVersionOutOfRangeException")
        return None

    def _azure(self, req: _Req) -> _Resp:
        match = self._AZ.match(req.path)
        if match is None:
            return _bad(404, "The requested resource does not exist.", "ResourceNotFoundException")
        repo = f"{match['project']}/{match['repo']}"
        if not self._exists(repo):
            return _bad(404, f"TF401019: The Git repository with name or identifier {match['repo']} does not "
                        "exist or you do not have permissions for the operation you are attempting.",
                        "GitRepositoryNotFoundException")
        state = self._repo(repo)
        if match["id"] is None:
            if req.method == "GET":
                return self._azure_list(req, repo, state)
            if req.method == "POST":
                return self._azure_create(req, repo, state)
            return _Resp(405, _az_error("Method not allowed", "HttpMethodNotAllowed"))
        pull = state.pull(int(match["id"]))
        if pull is None:
            return _Resp(404, _az_error("TF401180: The requested pull request was not found.",
                                        "GitPullRequestNotFoundException"))
        sub = (match["sub"] or "").lower()
        if sub == "threads":
            return self._azure_threads(req, repo, pull)
        if sub == "labels":
            return self._azure_labels(req, repo, state, pull)
        if req.method == "GET":
            return _Resp(200, self._azure_pr(repo, pull))
        if req.method != "PATCH":
            return _Resp(405, _az_error("Method not allowed", "HttpMethodNotAllowed"))
        return self._azure_patch(req, repo, state, pull)

    def _azure_list(self, req: _Req, repo: str, state: _Repo) -> _Resp:
        wanted = req.arg("searchCriteria.status", "active").lower()
        if wanted not in ("active", "completed", "abandoned", "all", "notset"):
            return _bad(400, f"The value '{wanted}' is not valid for status.")
        pulls = [p for p in state.pulls if wanted in ("all", "notset") or _STATUS[p.state] == wanted]
        for key, attr in (("searchCriteria.sourceRefName", "head"), ("searchCriteria.targetRefName", "base")):
            if req.arg(key):
                pulls = [p for p in pulls if _HEADS + getattr(p, attr) == req.arg(key)]
        pulls.sort(key=lambda p: p.seq, reverse=True)
        top = _int_arg(req, "$top", self._page_size)
        start = int(req.arg("continuationToken") or req.arg("$skip") or 0)
        page = min(top, self._cap("azure"))
        items = pulls[start : start + page]
        headers: tuple[tuple[str, str], ...] = ()
        if page < top and start + page < len(pulls):
            headers = (("x-ms-continuationtoken", str(start + page)),)
        return _Resp(200, {"value": [self._azure_pr(repo, p) for p in items], "count": len(items)}, headers)

    def _azure_create(self, req: _Req, repo: str, state: _Repo) -> _Resp:
        body = req.body if isinstance(req.body, dict) else {}
        source, target = str(body.get("sourceRefName") or ""), str(body.get("targetRefName") or "")
        if not isinstance(body.get("title"), str) or not body["title"]:
            return _bad(400, "The title of the pull request cannot be empty.")
        head, base = source.removeprefix(_HEADS), target.removeprefix(_HEADS)
        has_head, has_base = self._check_branches(repo, head, base)
        if not (source.startswith(_HEADS) and target.startswith(_HEADS) and has_head and has_base):
            return _bad(400, "TF401398: The pull request cannot be activated because the source and/or the "
                        "target branch no longer exists, or the requested refs are not branches",
                        "InvalidArgumentValueException")
        if state.open_for(head, base) is not None:
            return _Resp(409, _az_error("TF401179: An active pull request for the source and target branch "
                                        "already exists.", "GitPullRequestExistsException"))
        description = body.get("description") if isinstance(body.get("description"), str) else ""
        if len(description) > AZURE_BODY_LIMIT:
            return _Resp(400, _too_long())
        pull = self._new_pull(state, head=head, base=base, title=body["title"], body=description)
        for label in body.get("labels") or ():
            if isinstance(label, dict) and isinstance(label.get("name"), str):
                self._label_id(state, label["name"])
                pull.labels.append(label["name"])
        return _Resp(201, self._azure_pr(repo, pull))

    def _azure_patch(self, req: _Req, repo: str, state: _Repo, pull: _Pull) -> _Resp:
        body = req.body if isinstance(req.body, dict) else {}
        status = body.get("status")
        if status not in (None, "active", "abandoned"):
            return _Resp(400, _az_error(f"Invalid status {status}.", "InvalidArgumentValueException"))
        if isinstance(body.get("description"), str) and len(body["description"]) > AZURE_BODY_LIMIT:
            return _Resp(400, _too_long())
        if status == "abandoned" and pull.state == "open":
            self._set_closed(pull)
        elif status == "active" and pull.state == "closed":
            self._reopen("azure", state, pull, _Resp(409, _az_error(
                "TF401179: An active pull request for the source and target branch already exists.",
                "GitPullRequestExistsException")))
        for key, attr in (("title", "title"), ("description", "body")):
            if isinstance(body.get(key), str):
                setattr(pull, attr, body[key])
        setter = body.get("autoCompleteSetBy")
        if isinstance(setter, dict):
            pull.auto_merge = setter.get("id") not in (None, "", _NO_ONE)
        if isinstance(body.get("completionOptions"), dict):
            pull.options = {k: v for k, v in body["completionOptions"].items() if isinstance(v, bool)}
            pull.merge_strategy = str(body["completionOptions"].get("mergeStrategy") or "")
        self._touch(pull)
        return _Resp(200, self._azure_pr(repo, pull))

    def _azure_threads(self, req: _Req, repo: str, pull: _Pull) -> _Resp:
        if req.method == "POST":
            comments = req.param("comments")
            first = comments[0] if isinstance(comments, list) and comments else None
            text = first.get("content") if isinstance(first, dict) else None
            if not isinstance(text, str) or not text:
                return _Resp(400, _az_error("The comment content cannot be empty.", "ArgumentException"))
            comment = self._new_comment(pull, text)
            self._touch(pull)
            return _Resp(200, self._azure_thread(req, repo, pull, comment))
        if req.method != "GET":
            return _Resp(405, _az_error("Method not allowed", "HttpMethodNotAllowed"))
        # Azure opens every pull request's threads with a system one (the ref update, the vote)
        created = _Comment(0, f"{BOT} created the pull request", "system", pull.created)
        threads = [self._azure_thread(req, repo, pull, c) for c in (created, *pull.comments)]
        return _Resp(200, {"value": threads, "count": len(threads)})

    def _azure_thread(self, req: _Req, repo: str, pull: _Pull, comment: _Comment) -> dict[str, Any]:
        system = comment.author == "system"
        return {
            "id": comment.id, "publishedDate": comment.created, "lastUpdatedDate": comment.created,
            "comments": [{"id": 1, "parentCommentId": 0, "author": {"displayName": comment.author,
                                                                     "id": _guid("user", comment.author)},
                          "content": comment.body, "publishedDate": comment.created,
                          "commentType": "system" if system else "text", "isDeleted": comment.deleted}],
            "status": "active" if not system else None, "threadContext": None, "isDeleted": comment.deleted,
            "properties": {},
            "_links": {"self": {"href": f"{req.api}/{repo.split('/')[0]}/_apis/git/repositories/"
                                         f"{repo.split('/')[1]}/pullRequests/{pull.number}/threads/{comment.id}"}},
        }

    def _azure_labels(self, req: _Req, repo: str, state: _Repo, pull: _Pull) -> _Resp:
        if req.method == "POST":
            name = req.param("name")
            if not isinstance(name, str) or not name.strip():
                return _Resp(400, _az_error("The label name cannot be empty.", "ArgumentException"))
            self._label_id(state, name)
            if name not in pull.labels:
                pull.labels.append(name)
            self._touch(pull)
            return _Resp(200, self._azure_label(req, repo, name))
        if req.method != "GET":
            return _Resp(405, _az_error("Method not allowed", "HttpMethodNotAllowed"))
        labels = [self._azure_label(req, repo, n) for n in pull.labels]
        return _Resp(200, {"value": labels, "count": len(labels)})

    def _azure_label(self, req: _Req, repo: str, name: str) -> dict[str, Any]:
        project = repo.split("/")[0]
        return {"id": _guid("label", repo, name), "name": name, "active": True,
                "url": f"{req.api}/{project}/_apis/wit/tags/{_guid('label', repo, name)}"}

    def _azure_pr(self, repo: str, pull: _Pull) -> dict[str, Any]:
        project, name = repo.split("/", 1)
        api = self._githost.url + PR_HOST_KINDS["azure"]
        repo_id = _guid("repo", repo)
        data: dict[str, Any] = {
            "repository": {
                "id": repo_id, "name": name, "url": f"{api}/{project}/_apis/git/repositories/{repo_id}",
                "project": {"id": _guid("project", project), "name": project, "state": "wellFormed",
                            "visibility": "private"},
                "webUrl": f"{api}/{project}/_git/{name}",
            },
            "pullRequestId": pull.number, "codeReviewId": pull.number, "status": _STATUS[pull.state],
            "createdBy": {"displayName": BOT, "id": _guid("user", BOT), "uniqueName": f"{BOT}@example.com"},
            "creationDate": pull.created, "title": pull.title, "description": pull.body,
            "sourceRefName": _HEADS + pull.head, "targetRefName": _HEADS + pull.base,
            "mergeStatus": "succeeded", "isDraft": False, "mergeId": _guid("merge", repo, pull.number),
            "lastMergeSourceCommit": {"commitId": self._head_sha(repo, pull)},
            "lastMergeTargetCommit": {"commitId": self._base_sha(repo, pull)},
            "reviewers": [], "supportsIterations": True,
            "labels": [{"id": _guid("label", repo, n), "name": n, "active": True} for n in pull.labels],
            "url": f"{api}/{project}/_apis/git/repositories/{repo_id}/pullRequests/{pull.number}",
        }
        if pull.closed_at:
            data["closedDate"] = pull.closed_at
        if pull.merge_sha:
            data["lastMergeCommit"] = {"commitId": pull.merge_sha}
        if pull.auto_merge:
            data["autoCompleteSetBy"] = {"displayName": BOT, "id": _guid("user", BOT)}
            strategy = pull.merge_strategy or "noFastForward"
            data["completionOptions"] = {"mergeStrategy": strategy, **pull.options}
        return data


def _too_long() -> dict[str, Any]:
    return _az_error(f"The pull request description is too long. The maximum length is {AZURE_BODY_LIMIT} "
                     "characters.", "InvalidArgumentValueException")

