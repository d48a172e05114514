"""GitLab merge requests over the REST API (``/api/v4``).

``api_url`` is ``https://HOST/api/v4``; ``repo`` is the project's full path
(``group/sub/name``), sent URL-encoded as the project id (``group%2Fsub%2Fname``). The
token goes in the ``PRIVATE-TOKEN`` header and needs the ``api`` scope (and at least
Developer role on the project).

- Find: ``GET /projects/:id/merge_requests?source_branch=&target_branch=&state=opened``.
- Create: ``POST /projects/:id/merge_requests`` with ``labels`` as a comma-separated
  string (GitLab creates unknown labels); a duplicate answers 409 "Another open merge
  request already exists for this source branch", which we turn into find-and-update.
- Update/close: ``PUT /projects/:id/merge_requests/:iid`` (``add_labels``,
  ``state_event=close``).
- Comments are notes: ``GET /projects/:id/merge_requests/:iid/notes`` (``sort=asc``,
  ``order_by=created_at``, ``per_page``/``page`` with ``X-Next-Page``; system notes left
  out) and ``POST`` there with ``{"body": ...}`` (201).
- Auto-merge: ``PUT /projects/:id/merge_requests/:iid/merge`` with ``auto_merge`` (GitLab
  17.11+) and its deprecated spelling ``merge_when_pipeline_succeeds`` (older
  servers). Right after creation GitLab is still checking mergeability and the
  pipeline may not exist yet: it answers 405 or 422, so those are asked again with the
  backoff a few times before ``False``; 406 (conflicts) and 409 (head moved) mean
  ``False`` at once. 401/403 there mean the token's user may not merge into the target
  branch (a :class:`~gitops_reloader.errors.HostAuthError` that says so, not "token
  refused"). Without a pipeline, newer GitLab merges at once.
- Cancel auto-merge: ``POST /projects/:id/merge_requests/:iid/cancel_auto_merge`` (GitLab
  with MR !255702, 2026-09): 201 with the merge request when cancelled, 409 "Can't cancel
  the automatic merge" when nothing was armed. Older GitLab answers 404 there, so we fall
  back to ``POST .../cancel_merge_when_pipeline_succeeds``, which answers 201 either way
  and says which in its body: ``{"status": "success"}``, or ``{"status": "error",
  "message": "Can't cancel the automatic merge", "http_status": 406}``. 405 on either: the
  merge request is merged or closed (nothing to cancel). 401/403: the token's user may
  not cancel it (a :class:`~gitops_reloader.errors.HostAuthError`).
- Options: ``remove_source_branch`` and ``squash`` (``pullRequest.removeSourceBranch`` /
  ``squash`` in ``--git-config``) are sent on create and on every update.
- Descriptions are at most 1,048,576 characters.

:attr:`PullRequest.number` is the merge request's ``iid``. GitLab's ``locked`` state
(a merge in progress) reads as ``"open"``.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from gitops_reloader.errors import HostAuthError, HostError
from gitops_reloader.gitops.hosts.base import MAX_COMMENTS, HostTraits, NewPull, PullRequest, _RestHost

__all__ = ["GitLabHost"]

log = logging.getLogger(__name__)

_PAGE = 100
_TRAITS = HostTraits(open_state="opened", scope_hint="the 'api' scope and Developer role on the project",
                     max_body=1_048_576,
                     states={"opened": "open", "locked": "open", "closed": "closed", "merged": "merged"})
_CHECKING = (405, 422)  # mergeability or the pipeline not settled yet: ask again
_NOT_MERGEABLE = (406, 409, *_CHECKING)
_NO_RIGHTS = (401, 403)
_ANSWERS = (*_NOT_MERGEABLE, *_NO_RIGHTS)
_NOTHING_ARMED = (405, 409)  # merged/closed, or no automatic merge to cancel
_CANCEL_ANSWERS = (404, *_NOTHING_ARMED, *_NO_RIGHTS)


@dataclass(eq=False)
class GitLabHost(_RestHost):
    """:class:`~gitops_reloader.gitops.hosts.base.GitHost` for GitLab (project paths)."""

    kind: ClassVar[str] = "gitlab"
    traits: ClassVar[HostTraits] = _TRAITS

    remove_source_branch: bool = False
    """Ask GitLab to delete the bot's branch when the merge request is merged."""
    squash: bool = False
    """Ask GitLab to squash the merge request's commits on merge."""

    def _auth_headers(self) -> dict[str, str]:
        return {"PRIVATE-TOKEN": self.token}

    def _create(self, repo: str, new: NewPull) -> PullRequest:
        """Open a merge request (or update the one already open) with its labels."""
        payload: dict[str, Any] = {
            "source_branch": new.head,
            "target_branch": new.base,
            "title": new.title,
            "description": new.body,
            **self._options(),
        }
        if new.labels:
            payload["labels"] = ",".join(new.labels)
        response = self._request(
            "POST", self._mr_path(repo), repo=repo, json=payload, accept=(409,)
        )
        if response.status_code == 409:
            return self._adopt_existing(repo, new)
        return self._parse(_merge_request, self._json(response, repo), repo)

    def update(
        self, repo: str, number: int, *, title: str, body: str, labels: Sequence[str] = ()
    ) -> PullRequest:
        """Set title and description of ``!number``; add ``labels`` (others stay)."""
        self._check_body(repo, body)
        payload: dict[str, Any] = {"title": title, "description": body, **self._options()}
        if labels:
            payload["add_labels"] = ",".join(labels)
        response = self._request("PUT", f"{self._mr_path(repo)}/{number}", repo=repo, json=payload)
        return self._parse(_merge_request, self._json(response, repo), repo)

    def close(self, repo: str, number: int) -> None:
        """Close ``!number`` without merging."""
        self._request("PUT", f"{self._mr_path(repo)}/{number}", repo=repo, json={"state_event": "close"})

    def enable_auto_merge(self, repo: str, number: int) -> bool:
        """Set "auto-merge" (merge when the pipeline succeeds); ``False`` if GitLab refuses.

        Raises :class:`HostAuthError` when the token's user may not merge into the target.
        """
        path = f"{self._mr_path(repo)}/{number}/merge"
        payload = {"auto_merge": True, "merge_when_pipeline_succeeds": True, **self._options(merge=True)}
        response = self._poll_status(
            lambda: self._request("PUT", path, repo=repo, json=payload, accept=_ANSWERS),
            lambda r: r.status_code in _CHECKING,
            f"{repo}!{number} merge",
        )
        status = response.status_code
        if status in _NO_RIGHTS:
            raise HostAuthError(
                f"{self.kind}: not allowed to merge {repo}!{number} ({status} on PUT .../merge): the "
                "token's user needs merge rights on the target branch (Developer or Maintainer, as "
                f"the branch's protection allows){self._quote(response)}"
            )
        if status in _NOT_MERGEABLE:
            log.info(
                "auto-merge not available",
                extra={"host": self.kind, "repo": repo, "number": number, "status": status},
            )
            return False
        return True

    def cancel_auto_merge(self, repo: str, number: int) -> bool:
        """Cancel an armed auto-merge of ``!number``; ``False`` if none was armed (see the module).

        Raises :class:`HostAuthError` when the token's user may not cancel it.
        """
        path = f"{self._mr_path(repo)}/{number}"
        response = self._request("POST", path + "/cancel_auto_merge", repo=repo, accept=_CANCEL_ANSWERS)
        legacy = response.status_code == 404  # a GitLab older than the endpoint
        if legacy:
            response = self._request(
                "POST", path + "/cancel_merge_when_pipeline_succeeds", repo=repo,
                accept=(*_NOTHING_ARMED, *_NO_RIGHTS), not_found=f"or merge request !{number} does not exist")
        status = response.status_code
        if status in _NO_RIGHTS:
            raise HostAuthError(
                f"{self.kind}: not allowed to cancel the automatic merge of {repo}!{number} ({status}): "
                "the token's user needs merge rights on the target branch or to be the merge "
                f"request's author{self._quote(response)}"
            )
        if status in _NOTHING_ARMED:
            log.info("no automatic merge to cancel", extra={
                "host": self.kind, "repo": repo, "number": number, "status": status,
                "reason": self._host_message(response)})
            return False
        data = self._json(response, repo)
        if not isinstance(data, dict):
            raise HostError(f"{self.kind}: cancelling the automatic merge of {repo}!{number} answered "
                            f"{status} with a JSON {type(data).__name__}, not an object")
        if not legacy or "iid" in data or data.get("status") == "success":
            return True
        if data.get("status") == "error":  # a refusal sent with 201: the body says so
            log.info("no automatic merge to cancel", extra={
                "host": self.kind, "repo": repo, "number": number,
                "status": data.get("http_status"), "reason": self._host_message(response)})
            return False
        raise HostError(f"{self.kind}: cancelling the automatic merge of {repo}!{number} answered "
                        f"{status} without a status{self._quote(response)}")

    def comments(self, repo: str, number: int) -> list[str]:
        """Bodies of the notes on ``!number`` people or bots wrote, oldest first."""
        bodies: list[str] = []
        path = f"{self._mr_path(repo)}/{number}/notes"
        for page in range(1, MAX_COMMENTS // _PAGE + 1):
            response = self._request("GET", path, repo=repo, params={
                "sort": "asc", "order_by": "created_at", "per_page": _PAGE, "page": page})
            items = self._list(response, repo)
            bodies += [str(item.get("body") or "") for item in items
                       if isinstance(item, dict) and not item.get("system")]
            if not items or not response.headers.get("X-Next-Page", "").strip():
                break
        return bodies

    def add_comment(self, repo: str, number: int, body: str) -> None:
        """Add a note to ``!number``."""
        self._check_body(repo, body)
        self._request("POST", f"{self._mr_path(repo)}/{number}/notes", repo=repo, json={"body": body})

    def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> bool:
        """Add ``labels`` to ``!number`` (``add_labels``; GitLab creates the missing ones)."""
        if labels:
            self._request("PUT", f"{self._mr_path(repo)}/{number}", repo=repo,
                          json={"add_labels": ",".join(labels)})
        return True

    # -- internals -------------------------------------------------------------------------

    def _options(self, *, merge: bool = False) -> dict[str, bool]:
        """The optional merge settings, only those that are set (GitLab keeps its defaults)."""
        options: dict[str, bool] = {}
        if self.remove_source_branch:
            options["should_remove_source_branch" if merge else "remove_source_branch"] = True
        if self.squash:
            options["squash"] = True
        return options

    def _mr_path(self, repo: str) -> str:
        project = repo.strip("/")
        return f"/projects/{urllib.parse.quote(project, safe='')}/merge_requests"

    def _find(self, repo: str, *, head: str, base: str, state: str) -> PullRequest | None:
        params = {"source_branch": head, "target_branch": base, "state": state, "order_by": "created_at",
                  "sort": "desc", "per_page": _PAGE}
        return self._newest(repo, self._mr_path(repo), params, _merge_request, head=head, base=base)


def _merge_request(data: Any) -> PullRequest:
    return PullRequest(
        number=int(data["iid"]),
        url=str(data.get("web_url") or ""),
        state=_TRAITS.state(data["state"]),
        head=str(data["source_branch"]),
        base=str(data["target_branch"]),
        title=str(data.get("title") or ""),
        body=str(data.get("description") or ""),
        head_sha=str(data.get("sha") or ""),
        labels=tuple(str(item.get("name") if isinstance(item, dict) else item)
                     for item in data.get("labels") or () if item),
    )
