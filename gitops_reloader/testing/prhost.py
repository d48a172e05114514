"""Pull-request REST APIs shaped like GitHub, GitLab, Gitea and Bitbucket Cloud, for tests.

:class:`PrHost` keeps pull requests in memory and serves them as WSGI apps mounted on a
:class:`~gitops_reloader.testing.githost.GitHostServer`, so one server on 127.0.0.1
speaks both git's smart HTTP (for the bot's pushes) and a host's REST API (for its pull
requests), over the *same* bare repositories::

    with GitHostServer(tmp_path / "srv") as git_server:
        git_server.create_repo("org/app", {"deploy.yaml": "..."})
        hosts = PrHost(git_server)
        api_url = hosts.mount("github")            # f"{git_server.url}/api/v3"
        ...                                         # push a branch, call the API
        hosts.merge("org/app", 1)                   # really merges in the bare repo
        assert hosts.pulls("org/app")[0]["state"] == "merged"

What each API does like the real one (the subset the pull-request sink uses):

=============  ==========================================================================
all kinds      token auth (401 with the host's JSON error body); 404 for a repository
               that is not a bare repository of the git server; the head branch must
               exist in the bare repository (``refs/heads/<head>``); one open pull
               request per head/base (a duplicate is refused); list filters by
               head/base/state; paginated lists; updates of title/body/state; labels.
``github``     ``/api/v3``. ``Authorization: Bearer|token``. ``GET|POST
               /repos/{o}/{r}/pulls`` (``head=o:branch``, ``base``, ``state``
               open/closed/all, ``sort``, ``direction``, ``per_page``/``page`` with a
               ``Link`` header); ``GET|PATCH .../pulls/{n}``; ``PUT .../pulls/{n}/merge``;
               ``GET|POST .../issues/{n}/labels`` (unknown labels are created).
               Duplicate: 422 "A pull request already exists for o:branch."; missing
               head: 422 ``{"field": "head", "code": "invalid"}``.
``gitlab``     ``/api/v4``. ``PRIVATE-TOKEN`` or ``Authorization: Bearer``.
               ``/projects/:id/merge_requests`` with ``:id`` the URL-encoded path (or
               the numeric ``project_id`` it reported); ``source_branch``,
               ``target_branch``, ``state`` opened/closed/merged/all, ``order_by``,
               ``sort``, ``per_page``/``page`` with ``X-Next-Page``/``X-Total``;
               ``GET|PUT .../:iid`` (``labels``, ``add_labels``, ``remove_labels``,
               ``state_event``); ``PUT .../:iid/merge`` (``auto_merge`` /
               ``merge_when_pipeline_succeeds`` only records the wish). Labels are a
               comma-separated string. Duplicate: 409; missing source branch: 422.
``gitea``      ``/api/v1``. ``Authorization: token|Bearer``. ``GET|POST
               /repos/{o}/{r}/pulls`` (``state`` open/closed/all, ``page``/``limit``
               with ``X-Total-Count`` and ``Link``; no branch filter, as in Gitea);
               ``GET|PATCH .../pulls/{n}`` (PATCH answers 201, as Gitea does);
               ``POST .../pulls/{n}/merge`` (``merge_when_checks_succeed`` only records
               the wish); ``GET|POST .../labels``; ``GET|POST|PUT
               .../issues/{n}/labels``. Labels are numeric ids (unknown id: 422);
               create them with :meth:`PrHost.add_label`. Duplicate: 409; missing head
               branch: 404.
``bitbucket``  ``/2.0``. ``Authorization: Bearer``. ``GET|POST
               /repositories/{ws}/{slug}/pullrequests`` (``state`` repeatable, default
               OPEN; a BBQL subset in ``q``: ``field = "value"`` / ``!=`` / ``~``
               joined by ``AND``; ``sort``; ``pagelen``/``page`` in a ``values``/``next``
               envelope); ``GET|PUT .../{id}`` (PUT drops reviewers that are not
               re-sent, as Bitbucket does); ``POST .../{id}/decline``, ``.../{id}/merge``.
               No labels. Duplicate and missing source branch: 400.
=============  ==========================================================================

Faults are data: :meth:`PrHost.set_down` answers 503 to every API request,
:meth:`PrHost.fail_next` answers the next *n* requests with a status (and
``Retry-After``). :attr:`PrHost.requests` logs every API request (method, path, query,
status; never headers, so never a token).

All methods are thread-safe: one lock guards the state, and git commands on a bare
repository run under it. :meth:`PrHost.merge` really merges (fast-forward when possible,
else a merge commit made with ``git merge-tree``), so the bot's next sync sees the
change on the base branch.
"""

from __future__ import annotations

import datetime as _dt
import hmac
import http
import json
import os
import re
import subprocess
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gitops_reloader.testing.githost import GitHostServer, WsgiApp

__all__ = ["PR_HOST_KINDS", "PrHost", "PrRequest"]

PR_HOST_KINDS: Mapping[str, str] = {
    "github": "/api/v3",
    "gitlab": "/api/v4",
    "gitea": "/api/v1",
    "bitbucket": "/2.0",
}
"""Host kind → path prefix of its API on the git server."""

_MERGER = {
    "GIT_AUTHOR_NAME": "PR Host",
    "GIT_AUTHOR_EMAIL": "prhost@example.com",
    "GIT_COMMITTER_NAME": "PR Host",
    "GIT_COMMITTER_EMAIL": "prhost@example.com",
}
_MAX_BODY = 1024 * 1024
_GH_DOCS = "https://docs.github.com/rest"


@dataclass(frozen=True, slots=True)
class PrRequest:
    """One API request as :class:`PrHost` saw it (no headers: no tokens)."""

    kind: str
    method: str
    path: str
    """Full path, mount prefix included, percent-decoded as WSGI hands it over."""
    query: str
    status: int


@dataclass
class _Pull:
    number: int
    global_id: int
    seq: int
    head: str
    base: str
    title: str
    body: str
    head_sha: str
    created: str
    updated: str
    state: str = "open"  # open | closed | merged
    labels: list[str] = field(default_factory=list)
    reviewers: list[str] = field(default_factory=list)
    close_source_branch: bool = False
    auto_merge: bool = False
    merge_sha: str = ""
    merged_at: str = ""
    closed_at: str = ""


@dataclass
class _Repo:
    name: str
    project_id: int
    pulls: list[_Pull] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)

    def pull(self, number: int) -> _Pull | None:
        return next((p for p in self.pulls if p.number == number), None)

    def open_for(self, head: str, base: str, *, besides: int = 0) -> _Pull | None:
        return next(
            (
                p
                for p in self.pulls
                if p.state == "open" and p.head == head and p.base == base and p.number != besides
            ),
            None,
        )


@dataclass(frozen=True, slots=True)
class _Req:
    kind: str
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    api: str  # absolute URL of the API root, for links

    def arg(self, name: str, default: str = "") -> str:
        values = self.query.get(name)
        return values[-1] if values else default

    def param(self, name: str, default: Any = None) -> Any:
        """A parameter from the JSON/form body, else from the query string."""
        if isinstance(self.body, dict) and name in self.body:
            return self.body[name]
        values = self.query.get(name)
        return values[-1] if values else default


@dataclass(frozen=True, slots=True)
class _Resp:
    status: int
    body: Any = None
    headers: tuple[tuple[str, str], ...] = ()


class _Fail(Exception):
    """Raised inside a handler: answer with ``response``."""

    def __init__(self, response: _Resp) -> None:
        super().__init__(response.status)
        self.response = response


class PrHost:
    """In-memory pull requests over the bare repositories of ``githost``.

    ``token`` is the API token every request must carry (default: the git server's).
    ``page_size`` is the default page length of list endpoints (lower it to exercise
    pagination). Repositories are known by their git server name (``org/app``), which is
    the GitHub/Gitea ``owner/name``, the GitLab project path and the Bitbucket
    ``workspace/slug``. Numbers are per repository and shared by all kinds.
    """

    def __init__(self, githost: GitHostServer, *, token: str | None = None, page_size: int = 30) -> None:
        if page_size < 1:
            raise ValueError("page_size must be >= 1")
        self._githost = githost
        self._token = githost.token if token is None else token
        self._page_size = page_size
        self._lock = threading.RLock()
        self._repos: dict[str, _Repo] = {}
        self._ids = 0
        self._seq = 0
        self._down = False
        self._faults: list[tuple[int, float | None]] = []
        self._log: list[PrRequest] = []
        self._mounted: set[str] = set()

    def __repr__(self) -> str:
        """Name the git server, never the token."""
        return f"PrHost(url={self._githost.url!r}, mounted={sorted(self._mounted)!r})"

    # -- setup -------------------------------------------------------------------------

    def mount(self, kind: str) -> str:
        """Serve ``kind``'s API on the git server; return its ``api_url``. Idempotent."""
        if kind not in PR_HOST_KINDS:
            raise ValueError(f"unknown host kind {kind!r}; use one of {', '.join(PR_HOST_KINDS)}")
        prefix = PR_HOST_KINDS[kind]
        with self._lock:
            if kind not in self._mounted:
                self._githost.add_route(prefix, self._app_for(kind))
                self._mounted.add(kind)
        return self._githost.url + prefix

    def add_label(self, repo: str, name: str) -> int:
        """Create label ``name`` in ``repo`` (if missing) and return its numeric id."""
        with self._lock:
            return self._label_id(self._repo(repo), name)

    def set_reviewers(self, repo: str, number: int, reviewers: Sequence[str]) -> None:
        """Set the reviewers (account uuids) of pull request ``number``, as a human would."""
        with self._lock:
            self._pull_or_raise(repo, number).reviewers = list(reviewers)

    # -- inspection --------------------------------------------------------------------

    def pulls(self, repo: str) -> list[dict[str, Any]]:
        """Every pull request of ``repo``, oldest first, as plain dicts (copies).

        Keys: ``number``, ``state`` (``open``/``closed``/``merged``), ``head``, ``base``,
        ``title``, ``body``, ``labels``, ``merged``, ``auto_merge``, ``reviewers``,
        ``head_sha``, ``merge_sha``.
        """
        with self._lock:
            state = self._repos.get(repo)
            if state is None:
                return []
            return [
                {
                    "number": p.number,
                    "state": p.state,
                    "head": p.head,
                    "base": p.base,
                    "title": p.title,
                    "body": p.body,
                    "labels": list(p.labels),
                    "merged": p.state == "merged",
                    "auto_merge": p.auto_merge,
                    "reviewers": list(p.reviewers),
                    "head_sha": p.head_sha,
                    "merge_sha": p.merge_sha,
                }
                for p in sorted(state.pulls, key=lambda p: p.number)
            ]

    @property
    def requests(self) -> list[PrRequest]:
        """Every API request so far, oldest first (a copy)."""
        with self._lock:
            return list(self._log)

    def clear_requests(self) -> None:
        """Forget the request log."""
        with self._lock:
            self._log.clear()

    # -- acting as a human on the host ---------------------------------------------------

    def merge(self, repo: str, number: int, *, message: str | None = None) -> str:
        """Merge open pull request ``number`` in the bare repository; return the new base tip.

        Fast-forwards the base branch when it is an ancestor of the head, otherwise
        writes a merge commit. Raises :class:`ValueError` when the pull request is not
        open or a branch is missing, :class:`RuntimeError` on a merge conflict.
        """
        with self._lock:
            pull = self._pull_or_raise(repo, number)
            return self._merge(repo, pull, message)

    def close(self, repo: str, number: int) -> None:
        """Close open pull request ``number`` without merging."""
        with self._lock:
            pull = self._pull_or_raise(repo, number)
            if pull.state != "open":
                raise ValueError(f"pull request {repo}#{number} is {pull.state}")
            self._set_closed(pull)

    # -- faults ------------------------------------------------------------------------

    def set_down(self, down: bool) -> None:
        """While ``down``, answer ``503`` to every API request (git itself keeps working)."""
        with self._lock:
            self._down = down

    def fail_next(self, n: int, status: int = 500, *, retry_after: float | None = None) -> None:
        """Answer the next ``n`` API requests with ``status`` (and ``Retry-After`` if given).

        Calls queue up: ``fail_next(1, 429, retry_after=0); fail_next(1, 502)`` fails
        the next request with 429, the one after with 502.
        """
        if n < 0:
            raise ValueError("n must be >= 0")
        if not 400 <= status <= 599:
            raise ValueError("status must be a 4xx or 5xx code")
        with self._lock:
            self._faults.extend([(status, retry_after)] * n)

    # -- WSGI --------------------------------------------------------------------------

    def _app_for(self, kind: str) -> WsgiApp:
        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            return self._serve(kind, environ, start_response)

        return app

    def _serve(
        self, kind: str, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        path = str(environ.get("PATH_INFO", "")) or "/"
        query_string = str(environ.get("QUERY_STRING", ""))
        raw = _read_body(environ)
        with self._lock:
            response = self._handle(kind, environ, method, path, query_string, raw)
            self._log.append(
                PrRequest(
                    kind=kind,
                    method=method,
                    path=str(environ.get("SCRIPT_NAME", "")) + path,
                    query=query_string,
                    status=response.status,
                )
            )
        payload = b"" if response.body is None else json.dumps(response.body).encode()
        headers = [("Content-Length", str(len(payload))), *response.headers]
        if response.body is not None:
            headers.append(("Content-Type", "application/json; charset=utf-8"))
        phrase = http.HTTPStatus(response.status).phrase
        start_response(f"{response.status} {phrase}", headers)
        return [payload]

    def _handle(
        self,
        kind: str,
        environ: Mapping[str, Any],
        method: str,
        path: str,
        query_string: str,
        raw: bytes,
    ) -> _Resp:
        if self._down:
            return _Resp(503, _error(kind, 503, "service unavailable"))
        if self._faults:
            status, retry_after = self._faults.pop(0)
            extra = (("Retry-After", _seconds(retry_after)),) if retry_after is not None else ()
            message = "API rate limit exceeded" if status == 429 else "injected failure"
            return _Resp(status, _error(kind, status, message), extra)
        if not self._authorized(kind, environ):
            return _unauthorized(kind)
        try:
            body = _parse_body(raw, str(environ.get("CONTENT_TYPE", "")))
        except ValueError:
            return _Resp(400, _error(kind, 400, "Problems parsing JSON"))
        req = _Req(
            kind=kind,
            method=method,
            path=path,
            query=urllib.parse.parse_qs(query_string, keep_blank_values=True),
            body=body,
            api=self._githost.url + PR_HOST_KINDS[kind],
        )
        handler = {
            "github": self._github,
            "gitlab": self._gitlab,
            "gitea": self._gitea,
            "bitbucket": self._bitbucket,
        }[kind]
        try:
            return handler(req)
        except _Fail as fail:
            return fail.response

    def _authorized(self, kind: str, environ: Mapping[str, Any]) -> bool:
        header = str(environ.get("HTTP_AUTHORIZATION", ""))
        scheme, _, value = header.strip().partition(" ")
        scheme = scheme.lower()
        if kind == "gitlab" and "HTTP_PRIVATE_TOKEN" in environ:
            return _same(str(environ["HTTP_PRIVATE_TOKEN"]), self._token)
        schemes = {
            "github": ("bearer", "token"),
            "gitlab": ("bearer",),
            "gitea": ("token", "bearer"),
            "bitbucket": ("bearer",),
        }[kind]
        return scheme in schemes and _same(value.strip(), self._token)

    # -- state helpers (call with the lock held) -----------------------------------------

    def _exists(self, repo: str) -> bool:
        try:
            return self._githost.bare_path(repo).is_dir()
        except ValueError:
            return False

    def _repo(self, repo: str) -> _Repo:
        if not self._exists(repo):
            raise ValueError(f"no bare repository {repo!r} on the git server")
        state = self._repos.get(repo)
        if state is None:
            state = _Repo(name=repo, project_id=len(self._repos) + 1)
            self._repos[repo] = state
        return state

    def _repo_or_404(self, kind: str, repo: str) -> _Repo:
        if not self._exists(repo):
            raise _Fail(_not_found(kind, repo))
        return self._repo(repo)

    def _pull_or_raise(self, repo: str, number: int) -> _Pull:
        pull = self._repo(repo).pull(number)
        if pull is None:
            raise ValueError(f"no pull request {repo}#{number}")
        return pull

    def _pull_or_404(self, kind: str, state: _Repo, number: str) -> _Pull:
        pull = state.pull(int(number))
        if pull is None:
            message = {"gitlab": "404 Not found", "bitbucket": f"Pull request {number} not found"}
            raise _Fail(_Resp(404, _error(kind, 404, message.get(kind, "Not Found"))))
        return pull

    def _label_id(self, state: _Repo, name: str) -> int:
        if name not in state.labels:
            self._ids += 1
            state.labels[name] = self._ids
        return state.labels[name]

    def _branches(self, repo: str) -> dict[str, str]:
        return self._githost.branches(repo)

    def _new_pull(self, state: _Repo, *, head: str, base: str, title: str, body: str) -> _Pull:
        self._ids += 1
        self._seq += 1
        now = _now()
        pull = _Pull(
            number=max((p.number for p in state.pulls), default=0) + 1,
            global_id=self._ids,
            seq=self._seq,
            head=head,
            base=base,
            title=title,
            body=body,
            head_sha=self._branches(state.name).get(head, ""),
            created=now,
            updated=now,
        )
        state.pulls.append(pull)
        return pull

    def _head_sha(self, repo: str, pull: _Pull) -> str:
        if pull.state == "open":
            pull.head_sha = self._branches(repo).get(pull.head, pull.head_sha)
        return pull.head_sha

    def _base_sha(self, repo: str, pull: _Pull) -> str:
        return self._branches(repo).get(pull.base, "")

    def _touch(self, pull: _Pull) -> None:
        pull.updated = _now()

    def _set_closed(self, pull: _Pull) -> None:
        pull.state = "closed"
        pull.closed_at = _now()
        self._touch(pull)

    def _reopen(self, kind: str, state: _Repo, pull: _Pull, conflict: _Resp) -> None:
        if pull.state == "merged":
            raise _Fail(_Resp(422, _error(kind, 422, "the pull request is already merged")))
        if state.open_for(pull.head, pull.base, besides=pull.number) is not None:
            raise _Fail(conflict)
        pull.state = "open"
        pull.closed_at = ""
        self._touch(pull)

    def _merge(self, repo: str, pull: _Pull, message: str | None) -> str:
        if pull.state != "open":
            raise ValueError(f"pull request {repo}#{pull.number} is {pull.state}")
        bare = self._githost.bare_path(repo)
        branches = self._branches(repo)
        head_sha, base_sha = branches.get(pull.head), branches.get(pull.base)
        if head_sha is None or base_sha is None:
            raise ValueError(f"branch {pull.head if head_sha is None else pull.base} is missing in {repo}")
        if _git(bare, "merge-base", "--is-ancestor", base_sha, head_sha, check=False).returncode == 0:
            new = head_sha
        else:
            done = _git(bare, "merge-tree", "--write-tree", base_sha, head_sha, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"pull request {repo}#{pull.number} does not merge cleanly")
            tree = done.stdout.decode().splitlines()[0].strip()
            text = message or f"Merge pull request #{pull.number} from {pull.head}\n\n{pull.title}\n"
            new = _git(
                bare, "commit-tree", tree, "-p", base_sha, "-p", head_sha, "-F", "-", stdin=text.encode()
            ).stdout.decode().strip()
        _git(bare, "update-ref", "-m", f"merge #{pull.number}", f"refs/heads/{pull.base}", new, base_sha)
        pull.state = "merged"
        pull.head_sha = head_sha
        pull.merge_sha = new
        pull.merged_at = pull.closed_at = _now()
        self._touch(pull)
        return new

    def _check_branches(self, repo: str, head: str, base: str) -> tuple[bool, bool]:
        branches = self._branches(repo)
        return head in branches, base in branches

    def _page(self, items: Sequence[Any], page: int, per_page: int) -> tuple[list[Any], bool]:
        start = (page - 1) * per_page
        return list(items[start : start + per_page]), start + per_page < len(items)

    # -- GitHub --------------------------------------------------------------------------

    _GH = re.compile(
        r"^/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)/(?:"
        r"(?P<pulls>pulls)(?:/(?P<n>\d+)(?P<merge>/merge)?)?"
        r"|issues/(?P<issue>\d+)/labels)$"
    )

    def _github(self, req: _Req) -> _Resp:
        match = self._GH.match(req.path)
        if match is None:
            return _Resp(404, _error("github", 404, "Not Found"))
        repo = f"{match['owner']}/{match['name']}"
        state = self._repo_or_404("github", repo)
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
        for key in ("title", "body"):
            if isinstance(body.get(key), str):
                setattr(pull, key, body[key])
        self._touch(pull)
        return _Resp(200, self._github_pr(repo, pull, full=True))

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
        per_page = _int_arg(req, "per_page", self._page_size, maximum=100)
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

    # -- GitLab --------------------------------------------------------------------------

    _GL = re.compile(r"^/projects/(?P<project>.+?)/merge_requests(?:/(?P<iid>\d+)(?P<merge>/merge)?)?$")

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
        if match["merge"]:
            if req.method != "PUT":
                return _Resp(405, _error("gitlab", 405, "405 Method Not Allowed"))
            if pull.state != "open":
                return _Resp(405, _error("gitlab", 405, "405 Method Not Allowed"))
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
        if req.param("labels") is not None:
            pull.labels = []
            self._gitlab_add_labels(state, pull, req.param("labels"))
        if req.param("add_labels") is not None:
            self._gitlab_add_labels(state, pull, req.param("add_labels"))
        remove = _names(req.param("remove_labels"))
        pull.labels = [n for n in pull.labels if n not in remove]
        self._touch(pull)
        return _Resp(200, self._gitlab_mr(repo, pull))

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
        per_page = _int_arg(req, "per_page", self._page_size, maximum=100)
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
            "web_url": f"{self._githost.url}/{repo}/-/merge_requests/{pull.number}",
            "created_at": pull.created,
            "updated_at": pull.updated,
            "merged_at": pull.merged_at or None,
            "closed_at": pull.closed_at if pull.state == "closed" else None,
        }

    # -- Gitea ---------------------------------------------------------------------------

    _GT = re.compile(
        r"^/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)/(?:"
        r"(?P<pulls>pulls)(?:/(?P<n>\d+)(?P<merge>/merge)?)?"
        r"|(?P<labels>labels)"
        r"|issues/(?P<issue>\d+)/labels)$"
    )

    def _gitea(self, req: _Req) -> _Resp:
        match = self._GT.match(req.path)
        if match is None:
            return _Resp(404, _error("gitea", 404, "The target couldn't be found."))
        repo = f"{match['owner']}/{match['name']}"
        state = self._repo_or_404("gitea", repo)
        if match["labels"]:
            if req.method == "POST":
                name = req.param("name")
                if not isinstance(name, str) or not name:
                    return _Resp(422, _error("gitea", 422, "[Name]: Required"))
                return _Resp(201, {"id": self._label_id(state, name), "name": name, "color": "#00aabb"})
            items, _ = self._page(
                sorted(state.labels.items(), key=lambda kv: kv[1]),
                _int_arg(req, "page", 1),
                _int_arg(req, "limit", self._page_size, maximum=50),
            )
            return _Resp(200, [{"id": i, "name": n, "color": "#00aabb"} for n, i in items])
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
            return _Resp(200, [{"id": state.labels[n], "name": n} for n in pull.labels])
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
            if req.method != "POST":
                return _Resp(405, _error("gitea", 405, "Method Not Allowed"))
            if pull.state != "open":
                return _Resp(405, _error("gitea", 405, f"The PR is {pull.state}"))
            if _truthy(req.param("merge_when_checks_succeed")):
                pull.auto_merge = True
                self._touch(pull)
                return _Resp(200)
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

    def _gitea_labels(self, state: _Repo, value: Any) -> list[str]:
        """Label names for ids (or names, as newer Gitea accepts); 422 for unknown ones."""
        by_id = {i: n for n, i in state.labels.items()}
        names: list[str] = []
        for item in value if isinstance(value, list) else []:
            if isinstance(item, int) and item in by_id:
                names.append(by_id[item])
            elif isinstance(item, str) and item in state.labels:
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
        per_page = _int_arg(req, "limit", self._page_size, maximum=50)
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

    def _gitea_pr(self, repo: str, pull: _Pull) -> dict[str, Any]:
        state = self._repos[repo]
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
            "labels": [{"id": state.labels[n], "name": n, "color": "#00aabb"} for n in pull.labels],
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

    # -- Bitbucket -----------------------------------------------------------------------

    _BB = re.compile(
        r"^/repositories/(?P<ws>[^/]+)/(?P<slug>[^/]+)/pullrequests"
        r"(?:/(?P<id>\d+)(?:/(?P<action>decline|merge))?)?$"
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
        per_page = _int_arg(req, "pagelen", min(self._page_size, 50), maximum=50)
        page = _int_arg(req, "page", 1)
        items, more = self._page([doc for _, doc in rendered], page, per_page)
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
        head = _dig(body, "source", "branch", "name")
        if not isinstance(head, str) or not head:
            return _Resp(400, _bb_field_error("source", "This field is required."))
        base = _dig(body, "destination", "branch", "name")
        if not isinstance(base, str) or not base:
            base = self._default_branch(repo)
        has_head, has_base = self._check_branches(repo, head, base)
        if not has_head:
            return _Resp(400, _bb_field_error("source", f"Branch not found: {head}"))
        if not has_base:
            return _Resp(400, _bb_field_error("destination", f"Branch not found: {base}"))
        if state.open_for(head, base) is not None:
            return _Resp(
                400, _error("bitbucket", 400, "There is already an open pull request for this source branch.")
            )
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
                "commit": {"hash": self._head_sha(repo, pull)},
                "repository": {"full_name": repo},
            },
            "destination": {
                "branch": {"name": pull.base},
                "commit": {"hash": self._base_sha(repo, pull)},
                "repository": {"full_name": repo},
            },
            "reviewers": [{"type": "user", "uuid": uuid} for uuid in pull.reviewers],
            "close_source_branch": pull.close_source_branch,
            "merge_commit": {"hash": pull.merge_sha} if pull.merge_sha else None,
            "links": {
                "self": {"href": self_url},
                "html": {"href": f"{self._githost.url}/{repo}/pull-requests/{pull.number}"},
                "decline": {"href": f"{self_url}/decline"},
                "merge": {"href": f"{self_url}/merge"},
            },
            "created_on": pull.created,
            "updated_on": pull.updated,
        }


# -- module helpers ---------------------------------------------------------------------


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _same(given: str, expected: str) -> bool:
    return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _read_body(environ: Mapping[str, Any]) -> bytes:
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length <= 0:
        return b""
    return bytes(environ["wsgi.input"].read(min(length, _MAX_BODY)))


def _parse_body(raw: bytes, content_type: str) -> Any:
    if not raw.strip():
        return {}
    if "application/x-www-form-urlencoded" in content_type:
        return {k: v[-1] for k, v in urllib.parse.parse_qs(raw.decode(), keep_blank_values=True).items()}
    return json.loads(raw)


def _int_arg(req: _Req, name: str, default: int, *, maximum: int | None = None) -> int:
    try:
        value = int(req.arg(name, str(default)))
    except ValueError:
        value = default
    value = max(1, value)
    return min(value, maximum) if maximum is not None else value


def _with_query(req: _Req, **changes: Any) -> str:
    query = {k: list(v) for k, v in req.query.items()}
    for key, value in changes.items():
        query[key] = [str(value)]
    return f"{req.api}{req.path}?{urllib.parse.urlencode(query, doseq=True)}"


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1", "yes"))


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [n.strip() for n in value.split(",") if n.strip()]
    if isinstance(value, list):
        return [str(n).strip() for n in value if str(n).strip()]
    return []


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _error(kind: str, status: int, message: Any) -> dict[str, Any]:
    """The host's usual JSON error document."""
    if kind == "github":
        return {"message": message, "documentation_url": _GH_DOCS, "status": str(status)}
    if kind == "gitea":
        return {"message": message, "url": "/api/swagger"}
    if kind == "bitbucket":
        return {"type": "error", "error": {"message": message}}
    return {"message": message}


def _unauthorized(kind: str) -> _Resp:
    message = {
        "github": "Bad credentials",
        "gitlab": "401 Unauthorized",
        "gitea": "invalid username, password or token",
        "bitbucket": "Access token expired or invalid.",
    }[kind]
    return _Resp(401, _error(kind, 401, message))


def _not_found(kind: str, repo: str) -> _Resp:
    message = {
        "github": "Not Found",
        "gitlab": "404 Project Not Found",
        "gitea": "The target couldn't be found.",
        "bitbucket": f"Repository {repo} not found",
    }[kind]
    return _Resp(404, _error(kind, 404, message))


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


def _gl_duplicate_text(number: int) -> str:
    return f"Another open merge request already exists for this source branch: !{number}"


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
    actual = _dig(doc, *name.split("."))
    text = "" if actual is None else str(actual)
    if op == "=":
        return text == value
    if op == "!=":
        return text != value
    return value.lower() in text.lower()


def _git(
    repo: os.PathLike[str] | str, *args: str, stdin: bytes | None = None, check: bool = True
) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C", **_MERGER})
    done = subprocess.run(
        ["git", f"--git-dir={repo}", *args], input=stdin, capture_output=True, env=env, check=False
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed: {done.stderr.decode(errors='replace').strip()}")
    return done
