"""Gitea and Forgejo pull requests over the REST API (``/api/v1``).

``api_url`` is ``https://HOST/api/v1``; ``repo`` is ``owner/name``. The token goes in
``Authorization: token ...`` and needs ``write:repository`` (and ``write:issue`` for
labels).

- Find: ``GET /repos/{o}/{r}/pulls?state=open`` page by page (``page``/``limit``), with
  head and base matched here: the list endpoint has no branch filter on every version.
  The server caps ``limit`` at its ``[api] MAX_RESPONSE_ITEMS`` (50 by default, often
  lower), so a short page does not mean the last one: the next page is read while the
  answer has a ``Link: rel="next"`` or fewer items were seen than its
  ``X-Total-Count`` (without either header, until an empty page). At most
  :data:`MAX_PAGES` pages are read.
- Create: ``POST /repos/{o}/{r}/pulls`` with ``labels`` as numeric ids, looked up by
  name with ``GET /repos/{o}/{r}/labels`` and, for a repository an organisation owns,
  ``GET /orgs/{o}/labels`` (organisation labels are valid on its repositories; a
  repository label wins a name clash). Unknown names are skipped: Gitea does not create
  labels on the fly. A duplicate answers 409 "pull request already exists for
  these targets", which we turn into find-and-update. A missing head branch answers
  404, reported like a missing repository.
- Update/close: ``PATCH /repos/{o}/{r}/pulls/{index}``; labels are added with
  ``POST /repos/{o}/{r}/issues/{index}/labels``.
- Comments: ``GET /repos/{o}/{r}/issues/{index}/comments`` (all of them, no paging) and
  ``POST`` there with ``{"body": ...}`` (201). :meth:`GiteaHost.add_labels` creates a
  label the repository and its organisation lack (``POST /repos/{o}/{r}/labels`` with a
  ``name`` and a ``color``, both required) before adding it by id: Gitea answers 422
  for an unknown id.
- Auto-merge: ``POST /repos/{o}/{r}/pulls/{index}/merge`` with
  ``{"Do": "merge", "merge_when_checks_succeed": true}``. Gitea answers 201 when it
  scheduled the merge, 200 when it merged at once (no required checks), 409 "already
  scheduled" (yes, too), 405 "Please try again later" while it still checks a new pull
  request (asked again with the backoff a few times), other 405/409/422 when it cannot
  merge (``False``).
- Cancel auto-merge: ``DELETE /repos/{o}/{r}/pulls/{index}/merge`` ("cancel the scheduled
  auto merge"): 204 when cancelled, 404 when nothing is scheduled (or no such pull
  request: ``False`` either way), 403 when the token's user may not cancel a merge someone
  else scheduled (a :class:`~gitops_reloader.errors.HostAuthError`), 423 when the
  repository is locked (a :class:`~gitops_reloader.errors.HostError`).
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from gitops_reloader.errors import HostAuthError, HostError
from gitops_reloader.gitops.hosts.base import MAX_COMMENTS, HostTraits, NewPull, PullRequest, _GitHubShaped

__all__ = ["MAX_PAGES", "GiteaHost"]

log = logging.getLogger(__name__)

MAX_PAGES = 20
"""Pages of 50 read when listing pull requests or labels."""
_LIMIT = 50
_NOT_MERGEABLE = (405, 409, 422)
_TRY_LATER = "try again later"
_SCHEDULE = {"Do": "merge", "merge_when_checks_succeed": True}
_LABEL_COLOR = "#e11d21"


class GiteaHost(_GitHubShaped):
    """:class:`~gitops_reloader.gitops.hosts.base.GitHost` for Gitea and Forgejo."""

    kind: ClassVar[str] = "gitea"
    traits: ClassVar[HostTraits] = HostTraits(
        scope_hint="the 'write:repository' scope (and 'write:issue' for labels)")

    def _auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}

    def _create(self, repo: str, new: NewPull) -> PullRequest:
        """Open a pull request (or update the one already open) with the known labels."""
        payload: dict[str, Any] = {"head": new.head, "base": new.base, "title": new.title, "body": new.body}
        ids = self._label_ids(repo, new.labels)
        if ids:
            payload["labels"] = ids
        response = self._request(
            "POST",
            self._repo_path(repo) + "/pulls",
            repo=repo,
            json=payload,
            accept=(409,),
            not_found=f"or branch {new.head!r} or {new.base!r} does not exist",
        )
        if response.status_code == 409:
            return self._adopt_existing(repo, new)
        return self._pull(self._json(response, repo), repo)

    def _label(self, repo: str, pull: PullRequest, labels: Sequence[str]) -> PullRequest:
        """Add the known ``labels`` (by id) to ``pull``; ``pull`` as it was."""
        ids = self._label_ids(repo, labels)
        if ids:
            self._request("POST", f"{self._repo_path(repo)}/issues/{pull.number}/labels", repo=repo,
                          json={"labels": ids})
        return pull

    def enable_auto_merge(self, repo: str, number: int) -> bool:
        """Schedule "merge when checks succeed"; ``False`` if Gitea refuses."""
        path = f"{self._repo_path(repo)}/pulls/{number}/merge"
        response = self._poll_status(
            lambda: self._request("POST", path, repo=repo, json=_SCHEDULE, accept=_NOT_MERGEABLE),
            lambda r: r.status_code == 405 and _TRY_LATER in self._host_message(r).lower(),
            f"{repo}#{number} merge",
        )
        status = response.status_code
        if status == 409 and "scheduled" in self._host_message(response).lower():
            return True  # someone (or an earlier attempt of ours) scheduled it already
        if status in _NOT_MERGEABLE:
            log.info("auto-merge not available", extra={
                "host": self.kind, "repo": repo, "number": number, "status": status,
                "reason": self._host_message(response)})
            return False
        return True

    def cancel_auto_merge(self, repo: str, number: int) -> bool:
        """Cancel the scheduled merge of ``number``; ``False`` if none was scheduled."""
        path = f"{self._repo_path(repo)}/pulls/{number}/merge"
        response = self._request("DELETE", path, repo=repo, accept=(403, 404))
        if response.status_code == 403:
            raise HostAuthError(
                f"{self.kind}: not allowed to cancel the scheduled merge of {repo}#{number} (403): "
                "someone else scheduled it and the token's user is no repository admin"
                f"{self._quote(response)}"
            )
        if response.status_code == 404:
            log.info("no scheduled merge to cancel",
                     extra={"host": self.kind, "repo": repo, "number": number})
            return False
        return True

    def comments(self, repo: str, number: int) -> list[str]:
        """Bodies of the comments on ``number``, oldest first."""
        response = self._request("GET", f"{self._repo_path(repo)}/issues/{number}/comments", repo=repo)
        items = self._list(response, repo)[:MAX_COMMENTS]
        return [str(item.get("body") or "") for item in items if isinstance(item, dict)]

    def add_comment(self, repo: str, number: int, body: str) -> None:
        """Comment on ``number``."""
        self._check_body(repo, body)
        self._request("POST", f"{self._repo_path(repo)}/issues/{number}/comments", repo=repo,
                      json={"body": body})

    def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> bool:
        """Add ``labels`` to ``number``, creating in the repository those nobody has yet."""
        wanted = list(dict.fromkeys(labels))
        if not wanted:
            return True
        ids = self._label_map(repo, wanted)
        for name in wanted:
            if name not in ids:
                response = self._request("POST", self._repo_path(repo) + "/labels", repo=repo, json={
                    "name": name, "color": _LABEL_COLOR,
                    "description": "gitops-reloader: the branch holds commits it did not make"})
                created = self._json(response, repo)
                if not isinstance(created, dict) or not isinstance(created.get("id"), int):
                    raise HostError(f"{self.kind}: creating label {name!r} in {repo} answered without an id")
                ids[name] = created["id"]
        self._request("POST", f"{self._repo_path(repo)}/issues/{number}/labels", repo=repo,
                      json={"labels": [ids[name] for name in wanted]})
        return True

    # -- internals -------------------------------------------------------------------------

    def _pages(self, repo: str, path: str, params: dict[str, Any],
               *, missing_ok: bool = False) -> Iterator[Any]:
        """Every item of a ``page``/``limit`` list, up to :data:`MAX_PAGES` pages.

        ``missing_ok``: a 404 or 403 is an empty list (an owner that is a user has no
        organisation labels; a token without ``read:organization`` cannot read them).
        """
        seen = 0
        for page in range(1, MAX_PAGES + 1):
            response = self._request("GET", path, repo=repo, params={**params, "page": page, "limit": _LIMIT},
                                     accept=(403, 404) if missing_ok else ())
            if response.status_code == 403:
                log.info("organisation labels not readable; the token needs read:organization",
                         extra={"host": self.kind, "repo": repo, "path": path})
            if response.status_code in (403, 404):
                return
            data = self._list(response, repo)
            yield from data
            seen += len(data)
            if not _has_next(response, seen, len(data)):
                return
        log.warning("listing truncated", extra={"host": self.kind, "repo": repo, "path": path})

    def _find(self, repo: str, *, head: str, base: str, state: str) -> PullRequest | None:
        best: PullRequest | None = None
        for item in self._pages(repo, self._repo_path(repo) + "/pulls", {"state": state}):
            pull = self._pull(item, repo)
            if pull.head == head and pull.base == base and (best is None or pull.number > best.number):
                best = pull
        return best

    def _label_ids(self, repo: str, names: Sequence[str]) -> list[int]:
        """Ids of the ``names`` the repository (or its organisation) has; unknown ones are skipped."""
        if not names:
            return []
        known = self._label_map(repo, names)
        missing = [name for name in names if name not in known]
        if missing:
            log.info("labels unknown to the repository skipped", extra={
                "host": self.kind, "repo": repo, "labels": ",".join(missing)})
        return [known[name] for name in dict.fromkeys(names) if name in known]

    def _label_map(self, repo: str, names: Sequence[str]) -> dict[str, int]:
        """Name → id of the labels valid on ``repo``: its own, then (if some of ``names`` are
        still missing) its organisation's; a repository label wins a name clash."""
        known: dict[str, int] = {}
        org_path = f"/orgs/{urllib.parse.quote(self._owner(repo), safe='')}/labels"
        for items in (self._pages(repo, self._repo_path(repo) + "/labels", {}),
                      self._pages(repo, org_path, {}, missing_ok=True)):
            for item in items:
                if not isinstance(item, dict):
                    continue
                label_id, name = item.get("id"), item.get("name")
                if isinstance(label_id, int) and isinstance(name, str):
                    known.setdefault(name, label_id)
            if all(name in known for name in names):
                break  # no need to ask the organisation
        return known


def _has_next(response: Any, seen: int, got: int) -> bool:
    """Whether another page follows: ``Link: rel="next"``, else ``X-Total-Count``, else a non-empty page."""
    link = response.headers.get("Link")
    total = response.headers.get("X-Total-Count")
    if link is not None and 'rel="next"' in link:
        return True
    if total is not None and total.strip().isdigit():
        return seen < int(total) and got > 0
    if link is not None:
        return False  # a Link header without "next": this was the last page
    return got > 0
