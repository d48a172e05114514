"""Bitbucket Cloud pull requests over the REST API (``/2.0``).

``api_url`` is ``https://api.bitbucket.org/2.0``; ``repo`` is ``workspace/slug``. Two
ways to authenticate, chosen in ``--git-config``:

- an access token (repository, project or workspace) in ``Authorization: Bearer``
  (no ``pullRequest.username``);
- HTTP Basic with ``pullRequest.username`` and an app password or an Atlassian API
  token (whose username is the account's e-mail address) as the token.

Either needs the ``pullrequest:write`` scope (which implies ``repository:write``, what
the push of the branch needs).
- Find: ``GET /repositories/{ws}/{slug}/pullrequests`` with a BBQL filter
  ``q=source.branch.name="b" AND destination.branch.name="base" AND state="OPEN"``;
  results come in a ``{"values": [...], "next": url}`` envelope, followed for at most
  :data:`MAX_PAGES` pages and only on the API's own origin (the token never goes
  elsewhere). Listing every state needs ``state=`` repeated: by default Bitbucket lists
  open pull requests only.
- Create: ``POST .../pullrequests`` with ``source.branch.name`` and
  ``destination.branch.name``. For a source branch that already has an open pull
  request into the same destination, Bitbucket Cloud answers with that pull request
  (same ``id``) rather than an error; its title and description are then set with an
  update when they differ from what was sent. An older answer, 400 "There is already
  an open pull request for this source branch", is turned into find-and-update too.
- Update: ``PUT .../pullrequests/{id}`` drops every field not sent, reviewers included,
  so :meth:`BitbucketHost.update` reads the pull request first and sends its reviewers
  (and ``close_source_branch``) back.
- Close: ``POST .../pullrequests/{id}/decline``.
- Comments: ``GET .../pullrequests/{id}/comments`` (``values``/``next``, deleted ones
  left out) and ``POST`` there with ``{"content": {"raw": ...}}`` (201).
- Bitbucket Cloud has no labels (ignored; :meth:`BitbucketHost.add_labels` is ``False``)
  and no auto-merge in its API (``False``).
- List items carry no ``reviewers`` (only the single pull request does) and commit
  hashes are 12 characters (``source.commit.hash``): :attr:`PullRequest.head_sha` is
  that short hash, a prefix of the full one.
- A 429 rarely carries ``Retry-After``; without it the wait is at least a minute
  (``traits.rate_limit_floor``), since the limits are per hour.

``DECLINED`` and ``SUPERSEDED`` read as ``"closed"``.
"""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx

from gitops_reloader.errors import HostError
from gitops_reloader.gitops.auth import GitAuth
from gitops_reloader.gitops.hosts.base import (
    MAX_COMMENTS,
    HostTraits,
    NewPull,
    PullRequest,
    _RestHost,
    split_repo,
)

__all__ = ["MAX_PAGES", "BitbucketHost"]

MAX_PAGES = 20
"""Pages of 50 read when listing pull requests."""
_PAGELEN = 50
_COMMENT_PAGELEN = 100
_TRAITS = HostTraits(open_state="OPEN", any_state="ALL", scope_hint="the 'pullrequest:write' scope",
                     default_api_url="https://api.bitbucket.org/2.0", rate_limit_floor=60.0,
                     states={"OPEN": "open", "MERGED": "merged", "DECLINED": "closed",
                             "SUPERSEDED": "closed"})


@dataclass(eq=False)
class BitbucketHost(_RestHost):
    """:class:`~gitops_reloader.gitops.hosts.base.GitHost` for Bitbucket Cloud."""

    kind: ClassVar[str] = "bitbucket"
    traits: ClassVar[HostTraits] = _TRAITS

    username: str = ""
    """Set: HTTP Basic ``username:token`` (app password, API token); empty: Bearer."""

    def _auth_headers(self) -> dict[str, str]:
        if self.username:
            pair = base64.b64encode(f"{self.username}:{self.token}".encode()).decode("ascii")
            return {"Authorization": f"Basic {pair}"}
        return {"Authorization": f"Bearer {self.token}"}

    def _secret(self) -> GitAuth:
        return GitAuth(username=self.username, token=self.token)

    def _create(self, repo: str, new: NewPull) -> PullRequest:
        """Open a pull request (or update the one already open); labels are ignored."""
        payload = {
            "title": new.title,
            "description": new.body,
            "source": {"branch": {"name": new.head}},
            "destination": {"branch": {"name": new.base}},
            "close_source_branch": False,
        }
        response = self._request("POST", self._pulls_path(repo), repo=repo, json=payload, accept=(400, 409))
        if response.status_code in (400, 409):
            if "already" in self._host_message(response).lower():
                return self._adopt_existing(repo, new)
            raise self._error_for(response, repo)
        pull = self._parse(_pull_request, self._json(response, repo), repo)
        if pull.state == "open" and (pull.title, pull.body) != (new.title, new.body):
            # Bitbucket handed back the pull request already open for this branch, unchanged.
            return self.update(repo, pull.number, title=new.title, body=new.body, labels=new.labels)
        return pull

    def update(
        self, repo: str, number: int, *, title: str, body: str, labels: Sequence[str] = ()
    ) -> PullRequest:
        """Set title and description of ``number``, keeping its reviewers; ``labels`` are ignored."""
        self._check_body(repo, body)
        path = f"{self._pulls_path(repo)}/{number}"
        current = self._json(self._request("GET", path, repo=repo), repo)
        reviewers = current.get("reviewers") if isinstance(current, dict) else None
        payload: dict[str, Any] = {
            "title": title,
            "description": body,
            # PUT drops what is not sent: keep the reviewers someone added.
            "reviewers": [
                {"uuid": r["uuid"]} for r in reviewers or () if isinstance(r, dict) and "uuid" in r
            ],
        }
        if isinstance(current, dict) and "close_source_branch" in current:
            payload["close_source_branch"] = bool(current["close_source_branch"])
        response = self._request("PUT", path, repo=repo, json=payload)
        return self._parse(_pull_request, self._json(response, repo), repo)

    def close(self, repo: str, number: int) -> None:
        """Decline ``number``."""
        self._request("POST", f"{self._pulls_path(repo)}/{number}/decline", repo=repo)

    def enable_auto_merge(self, repo: str, number: int) -> bool:
        """Always ``False``: Bitbucket Cloud's API has no auto-merge."""
        return False

    def cancel_auto_merge(self, repo: str, number: int) -> bool:
        """Always ``False``: Bitbucket Cloud's API has no auto-merge."""
        return False

    def comments(self, repo: str, number: int) -> list[str]:
        """Raw text of the comments on ``number`` that are not deleted, oldest first."""
        path = f"{self._pulls_path(repo)}/{number}/comments"
        items = self._pages(repo, path, {}, "comment list", pagelen=_COMMENT_PAGELEN,
                            pages=MAX_COMMENTS // _COMMENT_PAGELEN)
        return [str((item.get("content") or {}).get("raw") or "") for item in items
                if isinstance(item, dict) and not item.get("deleted")]

    def add_comment(self, repo: str, number: int, body: str) -> None:
        """Comment on ``number`` (Markdown in ``content.raw``)."""
        self._check_body(repo, body)
        self._request("POST", f"{self._pulls_path(repo)}/{number}/comments", repo=repo,
                      json={"content": {"raw": body}})

    def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> bool:
        """Always ``False``: Bitbucket Cloud has no labels."""
        return False

    # -- internals -------------------------------------------------------------------------

    def _pulls_path(self, repo: str) -> str:
        workspace, slug = split_repo(self.kind, repo)
        quoted = f"{urllib.parse.quote(workspace, safe='')}/{urllib.parse.quote(slug, safe='')}"
        return f"/repositories/{quoted}/pullrequests"

    def _find(self, repo: str, *, head: str, base: str, state: str) -> PullRequest | None:
        if state == _TRAITS.open_state:
            params: dict[str, Any] = {"q": f'{_branches(head, base)} AND state="OPEN"', "state": "OPEN"}
        else:
            params = {"q": _branches(head, base), "state": list(_TRAITS.states), "sort": "-created_on"}
        best: PullRequest | None = None
        for item in self._pages(repo, self._pulls_path(repo), params, "pull request list"):
            pull = self._parse(_pull_request, item, repo)
            if pull.head == head and pull.base == base and (best is None or pull.number > best.number):
                best = pull
        return best

    def _pages(self, repo: str, path: str, params: Mapping[str, Any], what: str, *,
               pagelen: int = _PAGELEN, pages: int = MAX_PAGES) -> Iterator[Any]:
        """The ``values`` of a paginated list, page after page (``next`` on the same origin)."""
        next_url: str | None = None
        for _ in range(pages):
            if next_url is None:
                response = self._request("GET", path, repo=repo, params={**params, "pagelen": pagelen})
            else:
                response = self._request("GET", path, repo=repo, url=next_url)
            data = self._json(response, repo)
            if not isinstance(data, dict):
                raise HostError(f"{self.kind}: {what} for {repo} is not a paginated object")
            yield from data.get("values") or ()
            next_url = self._same_origin(data.get("next"))
            if next_url is None:
                return

    def _same_origin(self, url: Any) -> str | None:
        """``url`` if it is on the API's own scheme, host and port; never send the token elsewhere."""
        if not isinstance(url, str) or not url:
            return None
        try:
            candidate, own = httpx.URL(url), httpx.URL(self.api_url)
        except httpx.InvalidURL:
            return None
        same = (candidate.scheme, candidate.host, candidate.port) == (own.scheme, own.host, own.port)
        return url if same and candidate.path.startswith(own.path) else None


def _bbql_string(value: str) -> str:
    """``value`` as a BBQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _branches(head: str, base: str) -> str:
    return f"source.branch.name={_bbql_string(head)} AND destination.branch.name={_bbql_string(base)}"


def _pull_request(data: Any) -> PullRequest:
    links = data.get("links") or {}
    html = links.get("html") or {}
    commit = data["source"].get("commit") or {}
    return PullRequest(
        number=int(data["id"]),
        url=str(html.get("href") or ""),
        state=_TRAITS.state(data["state"]),
        head=str(data["source"]["branch"]["name"]),
        base=str(data["destination"]["branch"]["name"]),
        title=str(data.get("title") or ""),
        body=str(data.get("description") or ""),
        head_sha=str(commit.get("hash") or ""),
    )
