"""GitHub and GitHub Enterprise Server pull requests over the REST API.

``api_url`` is ``https://api.github.com`` or ``https://HOST/api/v3`` for Enterprise.
The token goes in ``Authorization: Bearer``; a classic token needs the ``repo`` scope,
a fine-grained one "Pull requests: write" (and "Issues: write" for labels).

- Find: ``GET /repos/{o}/{r}/pulls?head={o}:{branch}&base={base}&state=open``.
- Create: ``POST /repos/{o}/{r}/pulls``; a duplicate answers 422 "A pull request already
  exists for o:branch.", which we turn into find-and-update.
- Update/close: ``PATCH /repos/{o}/{r}/pulls/{n}``; labels are added with
  ``POST /repos/{o}/{r}/issues/{n}/labels`` (GitHub creates unknown labels).
- Comments (a pull request is an issue): ``GET /repos/{o}/{r}/issues/{n}/comments``
  (``per_page`` up to 100, ``page``, ``Link: rel="next"``) and ``POST`` there with
  ``{"body": ...}`` (201).
- Auto-merge exists only in the GraphQL API (``enablePullRequestAutoMerge``), which
  needs the pull request's node id, a repository with auto-merge allowed and branch
  protection: :meth:`GitHubHost.enable_auto_merge` does not attempt it and returns
  ``False``.

The head filter names the branch in the base repository's owner, so pull requests from
forks are never matched: the bot pushes its branch into the repository itself.

As GitHub answers (docs.github.com, "Rate limits for the REST API", "Troubleshooting"):

- A rate limit is a 403 or 429: with ``retry-after`` wait that long; with
  ``x-ratelimit-remaining: 0`` wait until ``x-ratelimit-reset`` (epoch seconds); a
  secondary limit with neither (the message says "secondary rate limit") waits at least
  a minute (``traits.rate_limit_floor``), doubling per further attempt. None of
  them is "token not allowed".
- A renamed or transferred repository answers 301 (GET) or 307 (other methods) with the
  new location on the API (``/repositories/{id}/...``): followed and logged once.
- Bodies are at most 65,536 characters (``traits.max_body``); "No commits
  between" (422) is a permanent error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

from gitops_reloader.gitops.hosts.base import (
    MAX_COMMENTS,
    HostTraits,
    NewPull,
    PullRequest,
    _GitHubShaped,
    github_pull_request,
    label_names,
)

__all__ = ["GitHubHost"]

_PAGE = 100


class GitHubHost(_GitHubShaped):
    """:class:`~gitops_reloader.gitops.hosts.base.GitHost` for GitHub (``owner/name`` repos)."""

    kind: ClassVar[str] = "github"
    traits: ClassVar[HostTraits] = HostTraits(
        scope_hint="the 'repo' scope (classic token) or 'Pull requests: write' and 'Issues: write' "
                   "(fine-grained)",
        default_api_url="https://api.github.com", rate_limit_floor=60.0, max_body=65_536)

    def _auth_headers(self) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        }

    def _create(self, repo: str, new: NewPull) -> PullRequest:
        """Open a pull request (or update the one already open) and add its labels."""
        path = self._repo_path(repo) + "/pulls"
        response = self._request(
            "POST",
            path,
            repo=repo,
            json={"head": new.head, "base": new.base, "title": new.title, "body": new.body, "draft": False},
            accept=(422,),
        )
        if response.status_code == 422:
            if _already_exists(self._json(response, repo)):
                return self._adopt_existing(repo, new)
            raise self._error_for(response, repo)
        pull = self._pull(self._json(response, repo), repo)
        return self._label(repo, pull, new.labels)

    def call(self, method: str, path: str, *, repo: str, json: Any = None, missing_ok: bool = False) -> Any:
        """One request to ``path`` under the API URL (the GitHub App endpoints); its JSON answer
        (``None`` for a 404 with ``missing_ok``)."""
        response = self._request(method, path, repo=repo, json=json, accept=(404,) if missing_ok else ())
        if response.status_code == 404:
            return None
        return self._json(response, repo)

    def enable_auto_merge(self, repo: str, number: int) -> bool:
        """Always ``False``: GitHub offers auto-merge only through GraphQL (see the module)."""
        return False

    def cancel_auto_merge(self, repo: str, number: int) -> bool:
        """Always ``False``: we never enable GitHub's auto-merge (GraphQL only)."""
        return False

    def comments(self, repo: str, number: int) -> list[str]:
        """Bodies of the comments on ``number``, oldest first (issue comments, page by page)."""
        bodies: list[str] = []
        path = f"{self._repo_path(repo)}/issues/{number}/comments"
        for page in range(1, MAX_COMMENTS // _PAGE + 1):
            response = self._request("GET", path, repo=repo, params={"per_page": _PAGE, "page": page})
            items = self._list(response, repo)
            bodies += [str(item.get("body") or "") for item in items if isinstance(item, dict)]
            if not items or 'rel="next"' not in response.headers.get("Link", ""):  # pages may be capped
                break
        return bodies

    def add_comment(self, repo: str, number: int, body: str) -> None:
        """Comment on ``number`` (``POST .../issues/{n}/comments``)."""
        self._check_body(repo, body)
        self._request("POST", f"{self._repo_path(repo)}/issues/{number}/comments", repo=repo,
                      json={"body": body})

    def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> bool:
        """Add ``labels`` to ``number`` (GitHub creates the missing ones)."""
        self._post_labels(repo, number, labels)
        return True

    # -- internals -------------------------------------------------------------------------

    def _find(self, repo: str, *, head: str, base: str, state: str) -> PullRequest | None:
        params = {"head": f"{self._owner(repo)}:{head}", "base": base, "state": state, "sort": "created",
                  "direction": "desc", "per_page": _PAGE}
        return self._newest(repo, self._repo_path(repo) + "/pulls", params, github_pull_request,
                            head=head, base=base)

    def _label(self, repo: str, pull: PullRequest, labels: Sequence[str]) -> PullRequest:
        """``pull`` after adding ``labels``, with the labels GitHub answers it now has."""
        if not labels:
            return pull
        return replace(pull, labels=self._post_labels(repo, pull.number, labels))

    def _post_labels(self, repo: str, number: int, labels: Sequence[str]) -> tuple[str, ...]:
        """``POST .../issues/{n}/labels``; the names of the issue's labels afterwards."""
        if not labels:
            return ()
        response = self._request(
            "POST",
            f"{self._repo_path(repo)}/issues/{number}/labels",
            repo=repo,
            json={"labels": list(labels)},
        )
        return label_names(self._list(response, repo))


def _already_exists(data: Any) -> bool:
    """Whether a 422 body is GitHub's "A pull request already exists for o:b."."""
    if not isinstance(data, dict):
        return False
    texts = [str(data.get("message", ""))]
    for error in data.get("errors") or ():
        texts.append(str(error.get("message", "")) if isinstance(error, dict) else str(error))
    return any("already exists" in text.lower() for text in texts)
