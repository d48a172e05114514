"""Azure DevOps (Azure Repos) pull requests over the REST API, ``api-version=7.1``.

``api_url`` is the organisation (``https://dev.azure.com/{org}``, or
``https://{org}.visualstudio.com``) or, on Azure DevOps Server, the collection
(``https://server/tfs/DefaultCollection``); ``repo`` is ``project/repository``. A personal
access token (scopes *Code: Read & write*) goes as HTTP Basic with an empty user name, as
Microsoft documents; every request carries ``api-version=7.1``.

- Find: ``GET {project}/_apis/git/repositories/{repo}/pullrequests`` with
  ``searchCriteria.sourceRefName=refs/heads/{head}``, ``searchCriteria.targetRefName``,
  ``searchCriteria.status`` (``active``, or ``all``), ``$top``/``$skip``; answers are
  ``{"value": [...], "count": n}``. A list cut short with ``x-ms-continuationtoken`` is
  continued with ``continuationToken=`` (Azure's list APIs page so), else by ``$skip``.
- Create: ``POST .../pullrequests`` with ``sourceRefName``, ``targetRefName``, ``title``,
  ``description`` and ``labels`` (``[{"name": ...}]``, created as needed); a duplicate
  answers 409 ``TF401179`` ("An active pull request for the source and target branch already
  exists"), which we turn into find-and-update.
- Update: ``PATCH .../pullrequests/{id}`` (``title``, ``description``); close is
  ``{"status": "abandoned"}``. Labels: ``POST .../pullRequests/{id}/labels`` (``{"name"}``).
- Comments are threads: ``GET .../pullRequests/{id}/threads`` (each thread's comments,
  ``commentType`` ``text`` or ``system``, deleted ones flagged) and ``POST`` there with
  ``{"comments": [{"parentCommentId": 0, "content": ..., "commentType": 1}], "status": 1}``.
- Auto-merge is *auto-complete*: ``PATCH .../pullrequests/{id}`` with ``autoCompleteSetBy``
  (the pull request's creator: the token's user) and ``completionOptions`` (``mergeStrategy``
  from ``pullRequest.mergeStrategy``, ``deleteSourceBranch``); it is cancelled by setting
  ``autoCompleteSetBy`` to the empty id ``00000000-0000-0000-0000-000000000000``.
- Errors: a missing or refused token is answered **203** with the HTML sign-in page (not
  401) — a :class:`~gitops_reloader.errors.HostAuthError`, never a success; 401/403 carry
  ``TF400813``; 429 carries ``Retry-After`` (honoured by the shared core).
- Descriptions are at most 4,000 characters (``traits.max_body``): the sink
  renders its body within that.

``status`` ``active`` reads as ``"open"``, ``completed`` as ``"merged"``, ``abandoned`` as
``"closed"``. :attr:`PullRequest.number` is the ``pullRequestId``; ``head_sha`` is
``lastMergeSourceCommit.commitId``.
"""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx

from gitops_reloader.errors import HostAuthError, HostError
from gitops_reloader.gitops.auth import GitAuth
from gitops_reloader.gitops.hosts.base import (
    MAX_COMMENTS,
    HostTraits,
    NewPull,
    PullRequest,
    _RestHost,
    label_names,
    split_repo,
)

__all__ = ["API_VERSION", "MERGE_STRATEGIES", "AzureDevOpsHost"]

API_VERSION = "7.1"
MERGE_STRATEGIES = ("noFastForward", "squash", "rebase", "rebaseMerge")
"""``completionOptions.mergeStrategy`` values (``pullRequest.mergeStrategy``)."""
_NO_ONE = "00000000-0000-0000-0000-000000000000"
_PAGE = 100
_MAX_PAGES = 20
_HEADS = "refs/heads/"
_TRAITS = HostTraits(open_state="active", max_body=4_000,
                     scope_hint="the 'Code: Read & write' scope and Contribute to pull requests",
                     states={"active": "open", "completed": "merged", "abandoned": "closed"})


@dataclass(eq=False)
class AzureDevOpsHost(_RestHost):
    """:class:`~gitops_reloader.gitops.hosts.base.GitHost` for Azure Repos (``project/repo``)."""

    kind: ClassVar[str] = "azure"
    traits: ClassVar[HostTraits] = _TRAITS

    merge_strategy: str = "noFastForward"
    """``completionOptions.mergeStrategy`` of auto-complete."""
    delete_source_branch: bool = False
    """``completionOptions.deleteSourceBranch`` of auto-complete."""

    def _auth_headers(self) -> dict[str, str]:
        pair = base64.b64encode(f":{self.token}".encode()).decode("ascii")
        return {"Authorization": f"Basic {pair}"}

    def _secret(self) -> GitAuth:
        return GitAuth(username="", token=self.token)

    def _request(self, method: str, path: str, *, repo: str, params: Mapping[str, Any] | None = None,
                 json: Any = None, accept: Sequence[int] = (), not_found: str = "",
                 url: str | None = None) -> httpx.Response:
        """The shared request core, with ``api-version`` on every request and the 203 sign-in
        page Azure answers for a missing or refused token turned into :class:`HostAuthError`."""
        response = super()._request(method, path, repo=repo, json=json, accept=accept, not_found=not_found,
                                    url=url, params={**(params or {}), "api-version": API_VERSION})
        if response.status_code == 203:
            raise HostAuthError(f"{self.kind}: token refused on {method} {response.request.url.path} for "
                                f"{repo} (203, Azure's sign-in page); it needs {self.traits.scope_hint}")
        return response

    def _create(self, repo: str, new: NewPull) -> PullRequest:
        """Open a pull request with its labels (or update the one already active)."""
        payload: dict[str, Any] = {
            "sourceRefName": _HEADS + new.head, "targetRefName": _HEADS + new.base,
            "title": new.title, "description": new.body, "isDraft": False,
        }
        if new.labels:
            payload["labels"] = [{"name": name} for name in new.labels]
        response = self._request("POST", self._pulls_path(repo), repo=repo, json=payload, accept=(409,))
        if response.status_code == 409:
            if "TF401179" in self._host_message(response):
                return self._adopt_existing(repo, new)
            raise self._error_for(response, repo)
        return self._parse(_pull_request, self._json(response, repo), repo)

    def update(self, repo: str, number: int, *, title: str, body: str,
               labels: Sequence[str] = ()) -> PullRequest:
        """Set title and description of ``number``; add ``labels``."""
        self._check_body(repo, body)
        pull = self._patch(repo, number, {"title": title, "description": body})
        if labels and not set(labels) <= set(pull.labels):
            self.add_labels(repo, number, labels)
            pull = self._parse(_pull_request, self._current(repo, number), repo)
        return pull

    def close(self, repo: str, number: int) -> None:
        """Abandon ``number``."""
        self._patch(repo, number, {"status": "abandoned"})

    def enable_auto_merge(self, repo: str, number: int) -> bool:
        """Set auto-complete, by the pull request's creator (the token's user), with the merge strategy."""
        current = self._current(repo, number)
        creator = (current.get("createdBy") or {}).get("id") if isinstance(current, dict) else None
        if not creator or current.get("status") != "active":
            return False
        self._patch(repo, number, {"autoCompleteSetBy": {"id": creator}, "completionOptions": {
            "mergeStrategy": self.merge_strategy, "deleteSourceBranch": self.delete_source_branch,
            "transitionWorkItems": False}})
        return True

    def cancel_auto_merge(self, repo: str, number: int) -> bool:
        """Clear auto-complete; ``False`` if none was set or the pull request is not active."""
        current = self._current(repo, number)
        armed = isinstance(current, dict) and bool(current.get("autoCompleteSetBy"))
        if not armed or current.get("status") != "active":
            return False
        self._patch(repo, number, {"autoCompleteSetBy": {"id": _NO_ONE}})
        return True

    def comments(self, repo: str, number: int) -> list[str]:
        """The text comments of every thread of ``number``, oldest first (system and deleted ones
        left out)."""
        response = self._request("GET", f"{self._pr_path(repo, number)}/threads", repo=repo)
        threads = self._values(response, repo, "thread list")
        found: list[tuple[str, int, str]] = []
        for thread in threads:
            if not isinstance(thread, dict) or thread.get("isDeleted"):
                continue
            for comment in thread.get("comments") or ():
                if isinstance(comment, dict) and comment.get("commentType") == "text" \
                        and not comment.get("isDeleted"):
                    found.append((str(comment.get("publishedDate") or ""), int(comment.get("id") or 0),
                                  str(comment.get("content") or "")))
        return [text for _, _, text in sorted(found)][:MAX_COMMENTS]

    def add_comment(self, repo: str, number: int, body: str) -> None:
        """Start a thread on ``number`` with ``body`` (Markdown)."""
        self._check_body(repo, body)
        self._request("POST", f"{self._pr_path(repo, number)}/threads", repo=repo, json={
            "comments": [{"parentCommentId": 0, "content": body, "commentType": 1}], "status": 1})

    def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> bool:
        """Add ``labels`` to ``number`` one by one (Azure creates the missing tags)."""
        for name in labels:
            self._request("POST", f"{self._pr_path(repo, number)}/labels", repo=repo, json={"name": name})
        return True

    # -- internals -------------------------------------------------------------------------

    def _repo_path(self, repo: str) -> str:
        project, name = (urllib.parse.quote(part, safe="") for part in split_repo(self.kind, repo))
        return f"/{project}/_apis/git/repositories/{name}"

    def _pulls_path(self, repo: str) -> str:
        return f"{self._repo_path(repo)}/pullrequests"

    def _pr_path(self, repo: str, number: int) -> str:
        """The path of pull request ``number``'s threads and labels (``.../pullRequests/{id}``)."""
        return f"{self._repo_path(repo)}/pullRequests/{number}"

    def _current(self, repo: str, number: int) -> Any:
        """Pull request ``number`` as Azure answers ``GET .../pullrequests/{id}`` (JSON)."""
        return self._json(self._request("GET", f"{self._pulls_path(repo)}/{number}", repo=repo), repo)

    def _patch(self, repo: str, number: int, fields: Mapping[str, Any]) -> PullRequest:
        response = self._request("PATCH", f"{self._pulls_path(repo)}/{number}", repo=repo, json=dict(fields))
        return self._parse(_pull_request, self._json(response, repo), repo)

    def _find(self, repo: str, *, head: str, base: str, state: str) -> PullRequest | None:
        params = {"searchCriteria.sourceRefName": _HEADS + head,
                  "searchCriteria.targetRefName": _HEADS + base, "searchCriteria.status": state}
        best: PullRequest | None = None
        for item in self._pages(repo, self._pulls_path(repo), params):
            pull = self._parse(_pull_request, item, repo)
            if pull.head == head and pull.base == base and (best is None or pull.number > best.number):
                best = pull
        return best

    def _pages(self, repo: str, path: str, params: Mapping[str, Any]) -> Iterator[Any]:
        """The ``value`` items of a list, page after page: ``x-ms-continuationtoken`` when Azure
        sends one, else ``$skip`` while pages come back full; at most :data:`_MAX_PAGES` pages."""
        token, skip = "", 0
        for _ in range(_MAX_PAGES):
            query = {**params, "$top": _PAGE}
            query.update({"continuationToken": token} if token else {"$skip": skip})
            response = self._request("GET", path, repo=repo, params=query)
            items = self._values(response, repo, "pull request list")
            yield from items
            token = response.headers.get("x-ms-continuationtoken", "").strip()
            if not token and len(items) < _PAGE:
                return
            skip += len(items)

    def _values(self, response: httpx.Response, repo: str, what: str) -> list[Any]:
        data = self._json(response, repo)
        values = data.get("value") if isinstance(data, dict) else None
        if not isinstance(values, list):
            raise HostError(f"{self.kind}: {what} for {repo} is not a {{\"value\": [...]}} object")
        return values


def _pull_request(data: Any) -> PullRequest:
    repository = data.get("repository") or {}
    web = ((data.get("_links") or {}).get("web") or {}).get("href")
    if not web and repository.get("webUrl"):
        web = f"{repository['webUrl']}/pullrequest/{data['pullRequestId']}"
    return PullRequest(
        number=int(data["pullRequestId"]),
        url=str(web or ""),
        state=_TRAITS.state(data["status"]),
        head=str(data["sourceRefName"]).removeprefix(_HEADS),
        base=str(data["targetRefName"]).removeprefix(_HEADS),
        title=str(data.get("title") or ""),
        body=str(data.get("description") or ""),
        head_sha=str((data.get("lastMergeSourceCommit") or {}).get("commitId") or ""),
        labels=label_names([label for label in data.get("labels") or () if isinstance(label, dict)
                            and label.get("active", True)]),
    )
