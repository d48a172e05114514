"""The shared core of the PR host test server: state, faults, WSGI plumbing, git merges.

:class:`Core` keeps pull requests per bare repository of a
:class:`~gitops_reloader.testing.githost.GitHostServer`, logs every request, injects
faults, and hands each parsed request to ``_dispatch``; the host modules
(:mod:`.github`, :mod:`.gitlab`, :mod:`.gitea`, :mod:`.bitbucket`) answer it the way their
host does, and :class:`~gitops_reloader.testing.prhost.PrHost` puts them together. The
helpers at the bottom (error documents, paging, query rewriting) are what the host
modules share. All state is guarded by one lock; see the package docstring.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hmac
import http
import json
import os
import subprocess
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gitops_reloader.testing.githost import GitHostServer, WsgiApp

__all__ = ["BOT", "PR_HOST_KINDS", "Core", "PrRequest"]

PR_HOST_KINDS: Mapping[str, str] = {
    "github": "/api/v3",
    "gitlab": "/api/v4",
    "gitea": "/api/v1",
    "bitbucket": "/2.0",
    "azure": "/tfs/DefaultCollection",
}
"""Host kind → path prefix of its API on the git server."""

_MERGER = {
    "GIT_AUTHOR_NAME": "PR Host",
    "GIT_AUTHOR_EMAIL": "prhost@example.com",
    "GIT_COMMITTER_NAME": "PR Host",
    "GIT_COMMITTER_EMAIL": "prhost@example.com",
}
_MAX_BODY = 1024 * 1024
BOT = "gitops-reloader-bot"
"""The account the API token belongs to (the author of what the client posts)."""
_PAGE_CAPS = {"github": 100, "gitlab": 100, "gitea": 50, "bitbucket": 50, "azure": 1000}
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
    auth: str = ""
    """What kind of credential came with it — ``jwt``, ``app-token`` (an installation token),
    ``token``, or "" — never the credential itself."""


def _authorization(environ: Mapping[str, Any]) -> str:
    """The credential of the ``Authorization`` header, its scheme taken off ("": none)."""
    return str(environ.get("HTTP_AUTHORIZATION", "")).strip().partition(" ")[2].strip()


def _is_jwt(credential: str) -> bool:
    return credential.count(".") == 2


def _credential_kind(environ: Mapping[str, Any]) -> str:
    value = _authorization(environ)
    if not value:
        return "token" if environ.get("HTTP_PRIVATE_TOKEN") else ""
    if _is_jwt(value):
        return "jwt"
    return "app-token" if value.startswith("ghs_") else "token"


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
    checking: int = 0
    """Merge requests still answered "being checked" (Gitea 405, GitLab 405/422)."""
    options: dict[str, bool] = field(default_factory=dict)
    """GitLab's ``remove_source_branch`` / ``squash`` (Azure: ``completionOptions``) as last sent."""
    merge_strategy: str = ""
    """Azure DevOps: ``completionOptions.mergeStrategy`` of the auto-complete."""
    comments: list[_Comment] = field(default_factory=list)
    """Comments (GitLab: notes) on the pull request, oldest first."""


@dataclass
class _Comment:
    id: int
    body: str
    author: str
    created: str
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class _Scripted:
    """An answer given instead of the real one to the next matching request."""

    status: int
    body: Any
    headers: tuple[tuple[str, str], ...]
    method: str
    path: str
    kind: str

    def matches(self, kind: str, method: str, path: str) -> bool:
        return (not self.kind or self.kind == kind) and (not self.method or self.method == method) \
            and self.path in path


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


class Core:
    """In-memory pull requests over the bare repositories of ``githost``: the state every API shares.

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
        self._scripted: list[_Scripted] = []
        self._log: list[PrRequest] = []
        self._mounted: set[str] = set()
        self._caps = dict(_PAGE_CAPS)
        self._checking = 0
        self._merge_denied = False
        self._gitlab_cancel_auto_merge = True
        self._basic_user = ""
        self._renamed: dict[str, tuple[str, str]] = {}
        self._org_labels: dict[str, dict[str, int]] = {}

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

    def add_org_label(self, org: str, name: str) -> int:
        """Create label ``name`` of organisation ``org`` (Gitea: valid on every repository
        ``org`` owns; an owner without one is a user, whose ``/orgs/...`` answers 404)."""
        with self._lock:
            labels = self._org_labels.setdefault(org, {})
            if name not in labels:
                self._ids += 1
                labels[name] = self._ids
            return labels[name]

    def set_reviewers(self, repo: str, number: int, reviewers: Sequence[str]) -> None:
        """Set the reviewers (account uuids) of pull request ``number``, as a human would."""
        with self._lock:
            self._pull_or_raise(repo, number).reviewers = list(reviewers)

    # -- inspection --------------------------------------------------------------------

    def pulls(self, repo: str) -> list[dict[str, Any]]:
        """Every pull request of ``repo``, oldest first, as plain dicts (copies).

        Keys: ``number``, ``state`` (``open``/``closed``/``merged``), ``head``, ``base``,
        ``title``, ``body``, ``labels``, ``merged``, ``auto_merge``, ``reviewers``,
        ``head_sha``, ``merge_sha``, ``remove_source_branch``, ``squash`` (GitLab),
        ``comments`` (the bodies, oldest first).
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
                    "remove_source_branch": p.options.get("remove_source_branch", False),
                    "squash": p.options.get("squash", False),
                    "merge_strategy": p.merge_strategy,
                    "delete_source_branch": p.options.get("deleteSourceBranch", False),
                    "comments": [c.body for c in p.comments if not c.deleted],
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

    def comment(self, repo: str, number: int, body: str, *, author: str = "reviewer") -> None:
        """Comment on pull request ``number`` as ``author``, a person on the host."""
        with self._lock:
            self._new_comment(self._pull_or_raise(repo, number), body, author=author)

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

    def answer_next(self, n: int, status: int, body: Any = None, *, headers: Mapping[str, str] | None = None,
                    method: str = "", path: str = "", kind: str = "") -> None:
        """Answer the next ``n`` requests to ``kind``'s API whose method is ``method`` and whose
        path contains ``path`` (each empty: any) with ``status``, the JSON ``body`` and
        ``headers``, instead of the real answer. Use it for answers a host gives that no
        state here produces (a stale or malformed list, a rate limit with these headers)."""
        with self._lock:
            scripted = _Scripted(status, body, tuple((headers or {}).items()), method.upper(), path, kind)
            self._scripted.extend([scripted] * n)

    def set_page_cap(self, kind: str, cap: int) -> None:
        """The most items one page of ``kind``'s lists holds, whatever the client asks
        (Gitea's ``[api] MAX_RESPONSE_ITEMS``, 50 by default; GitHub and GitLab 100)."""
        if cap < 1:
            raise ValueError("cap must be >= 1")
        with self._lock:
            self._caps[kind] = cap

    def set_checking(self, n: int) -> None:
        """New pull requests answer their first ``n`` merge requests "still checking": Gitea
        405 "Please try again later", GitLab 405 then 422 (no pipeline yet)."""
        with self._lock:
            self._checking = n

    def deny_merge(self, denied: bool) -> None:
        """While ``denied``, merging (or scheduling it) answers 401, as GitLab does to a user
        without merge rights on the target branch; cancelling an auto-merge answers 401 on
        GitLab and 403 on Gitea (a merge someone else scheduled, and no admin rights)."""
        with self._lock:
            self._merge_denied = denied

    def gitlab_without_cancel_auto_merge(self, absent: bool) -> None:
        """While ``absent``, GitLab answers 404 to ``POST .../cancel_auto_merge``, as servers
        older than MR !255702 do; ``.../cancel_merge_when_pipeline_succeeds`` still works."""
        with self._lock:
            self._gitlab_cancel_auto_merge = not absent

    def set_token(self, token: str) -> None:
        """Accept ``token`` from now on and refuse the old one (a revoked, rotated token)."""
        with self._lock:
            self._token = token

    def allow_basic(self, username: str) -> None:
        """Accept HTTP Basic ``username:token`` (Bitbucket app passwords, API tokens)."""
        with self._lock:
            self._basic_user = username

    def rename(self, old: str, new: str, *, elsewhere: str = "") -> None:
        """GitHub: requests for repository ``old`` answer 301 (GET) or 307 (other methods)
        pointing at ``new`` by id (``/repositories/{id}/...``), as after a rename or
        transfer; with ``elsewhere`` (an origin such as ``https://other.example``) the
        location is on that origin instead."""
        with self._lock:
            self._repo(new)
            self._renamed[old] = (new, elsewhere.rstrip("/"))

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
                    auth=_credential_kind(environ),
                )
            )
        raw_body = isinstance(response.body, bytes)  # an HTML page (Azure's sign-in), as it is
        if raw_body:
            payload = response.body
        else:
            payload = b"" if response.body is None else json.dumps(response.body).encode()
        headers = [("Content-Length", str(len(payload))), *response.headers]
        if response.body is not None and not raw_body:
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
        scripted = next((a for a in self._scripted if a.matches(kind, method, path)), None)
        if scripted is not None:
            self._scripted.remove(scripted)
            return _Resp(scripted.status, scripted.body, scripted.headers)
        try:
            body = _parse_body(raw, str(environ.get("CONTENT_TYPE", "")))
        except ValueError:
            body = None
        before = self._before_auth(kind, method, path, environ, body)
        if before is not None:
            return before
        if not self._authorized(kind, environ):
            return _unauthorized(kind)
        if body is None:
            return _Resp(400, _error(kind, 400, "Problems parsing JSON"))
        req = _Req(
            kind=kind,
            method=method,
            path=path,
            query=urllib.parse.parse_qs(query_string, keep_blank_values=True),
            body=body,
            api=self._githost.url + PR_HOST_KINDS[kind],
        )
        try:
            return self._dispatch(kind, req)
        except _Fail as fail:
            return fail.response

    def _dispatch(self, kind: str, req: _Req) -> _Resp:
        """Answer ``req`` with ``kind``'s API (the host modules implement it)."""
        raise NotImplementedError

    def _before_auth(self, kind: str, method: str, path: str, environ: Mapping[str, Any],
                     body: Any) -> _Resp | None:
        """An answer for endpoints with their own authentication (GitHub App's JWT); else ``None``."""
        return None

    def _token_valid(self, kind: str, token: str) -> bool:
        """Whether ``token`` is accepted besides the API token (GitHub App installation tokens)."""
        return False

    def _authorized(self, kind: str, environ: Mapping[str, Any]) -> bool:
        header = str(environ.get("HTTP_AUTHORIZATION", ""))
        scheme, _, value = header.strip().partition(" ")
        scheme = scheme.lower()
        if kind == "gitlab" and "HTTP_PRIVATE_TOKEN" in environ:
            return _same(str(environ["HTTP_PRIVATE_TOKEN"]), self._token)
        if scheme == "basic" and (kind == "azure" or (kind == "bitbucket" and self._basic_user)):
            try:
                user, _, secret = base64.b64decode(value.strip(), validate=True).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                return False
            # Azure: any user name (a PAT goes with an empty one); Bitbucket: the account's
            return (kind == "azure" or _same(user, self._basic_user)) and _same(secret, self._token)
        schemes = {
            "github": ("bearer", "token"),
            "gitlab": ("bearer",),
            "gitea": ("token", "bearer"),
            "bitbucket": ("bearer",),
            "azure": ("bearer",),
        }[kind]
        token = value.strip()
        return scheme in schemes and (_same(token, self._token) or self._token_valid(kind, token))

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
            checking=self._checking,
        )
        state.pulls.append(pull)
        return pull

    def _new_comment(self, pull: _Pull, body: str, *, author: str = BOT) -> _Comment:
        self._ids += 1
        comment = _Comment(id=self._ids, body=body, author=author, created=_now())
        pull.comments.append(comment)
        return comment

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

    def _no_commits_between(self, repo: str, base: str, head: str) -> bool:
        """Whether ``head`` has no commit that ``base`` lacks."""
        bare = self._githost.bare_path(repo)
        return _git(bare, "merge-base", "--is-ancestor", f"refs/heads/{head}", f"refs/heads/{base}",
                    check=False).returncode == 0

    def _check_branches(self, repo: str, head: str, base: str) -> tuple[bool, bool]:
        branches = self._branches(repo)
        return head in branches, base in branches

    def _cap(self, kind: str) -> int:
        return self._caps.get(kind, 100)

    def _page(self, items: Sequence[Any], page: int, per_page: int) -> tuple[list[Any], bool]:
        start = (page - 1) * per_page
        return list(items[start : start + per_page]), start + per_page < len(items)


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


def _error(kind: str, status: int, message: Any) -> dict[str, Any]:
    """The host's usual JSON error document."""
    if kind == "github":
        return {"message": message, "documentation_url": _GH_DOCS, "status": str(status)}
    if kind == "gitea":
        return {"message": message, "url": "/api/swagger"}
    if kind == "bitbucket":
        return {"type": "error", "error": {"message": message}}
    if kind == "azure":
        return {"$id": "1", "innerException": None, "message": message, "typeKey": "VssServiceException",
                "errorCode": 0, "eventId": 3000}
    return {"message": message}


def _unauthorized(kind: str) -> _Resp:
    message = {
        "github": "Bad credentials",
        "gitlab": "401 Unauthorized",
        "gitea": "invalid username, password or token",
        "bitbucket": "Access token expired or invalid.",
        "azure": "TF400813: The user '' is not authorized to access this resource.",
    }[kind]
    return _Resp(401, _error(kind, 401, message))


def _not_found(kind: str, repo: str) -> _Resp:
    message = {
        "github": "Not Found",
        "gitlab": "404 Project Not Found",
        "gitea": "The target couldn't be found.",
        "bitbucket": f"Repository {repo} not found",
        "azure": f"TF401019: The Git repository with name or identifier {repo} does not exist.",
    }[kind]
    return _Resp(404, _error(kind, 404, message))


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
