"""Pull-request REST APIs shaped like GitHub, GitLab, Gitea, Bitbucket Cloud and Azure DevOps,
for tests.

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

What every API does like the real one: token auth (401 with the host's JSON error
body); 404 for a repository that is not a bare repository of the git server; the head
branch must exist in the bare repository; one open pull request per head/base; list
filters by head/base/state; pages no longer than the host's cap
(:meth:`PrHost.set_page_cap`: GitHub and GitLab 100, Gitea's ``MAX_RESPONSE_ITEMS`` 50,
Bitbucket 50); updates of title/body/state; labels. What each host does its own way is
in its module, one per host, next to the answers it gives:

- :mod:`.github` (``/api/v3``): 422 for duplicates, bodies over 65,536 characters and
  "No commits between"; 301/307 for a renamed repository (:meth:`PrHost.rename`);
  secondary rate limits (:meth:`PrHost.secondary_rate_limit`).
- :mod:`.githubapp` (``/api/v3``): GitHub App JWTs, installations and installation tokens
  that expire (:meth:`PrHost.register_github_app`, :meth:`PrHost.expire_app_tokens`), also
  accepted by git over HTTP.
- :mod:`.gitlab` (``/api/v4``): project ids or paths, 409 duplicates,
  ``remove_source_branch``/``squash``; merging answers 405/422 while the new merge
  request is checked (:meth:`PrHost.set_checking`) and 401 without merge rights
  (:meth:`PrHost.deny_merge`); auto-merge cancelled by ``cancel_auto_merge`` or, on an
  older GitLab (:meth:`PrHost.gitlab_without_cancel_auto_merge`), by
  ``cancel_merge_when_pipeline_succeeds``.
- :mod:`.gitea` (``/api/v1``): no branch filter, ``X-Total-Count`` and ``Link``, label
  ids of the repository or its organisation (:meth:`PrHost.add_org_label`), merge
  scheduling 201/405/409, cancelling it 204/404/403.
- :mod:`.azure` (``/tfs/DefaultCollection``): ``api-version`` required, 203 sign-in page
  without credentials, ``TF401179`` duplicates, ``$top``/``$skip`` and
  ``x-ms-continuationtoken`` paging, threads, labels, auto-complete.
- :mod:`.bitbucket` (``/2.0``): BBQL, ``values``/``next`` envelopes, Bearer or Basic
  (:meth:`PrHost.allow_basic`), 12-digit hashes, list items without reviewers, a
  duplicate create answered with the open pull request.

:mod:`.core` holds what they share: state, faults, the WSGI plumbing and real merges.

Faults are data: :meth:`PrHost.set_down` answers 503 to every API request,
:meth:`PrHost.fail_next` answers the next *n* requests with a status (and
``Retry-After``), :meth:`PrHost.answer_next` gives any scripted answer to the next
matching requests (a stale or malformed list, a rate limit with exactly these headers).
:attr:`PrHost.requests` logs every API request (method, path, query,
status; never headers, so never a token).

All methods are thread-safe: one lock guards the state, and git commands on a bare
repository run under it. :meth:`PrHost.merge` really merges (fast-forward when possible,
else a merge commit made with ``git merge-tree``), so the bot's next sync sees the
change on the base branch.
"""

from __future__ import annotations

from gitops_reloader.testing.prhost.azure import AzureApi
from gitops_reloader.testing.prhost.bitbucket import BitbucketApi
from gitops_reloader.testing.prhost.core import PR_HOST_KINDS, PrRequest, _Req, _Resp
from gitops_reloader.testing.prhost.gitea import GiteaApi
from gitops_reloader.testing.prhost.github import GitHubApi
from gitops_reloader.testing.prhost.githubapp import GitHubAppApi
from gitops_reloader.testing.prhost.gitlab import GitLabApi

__all__ = ["PR_HOST_KINDS", "PrHost", "PrRequest"]


class PrHost(GitHubAppApi, AzureApi, GitHubApi, GitLabApi, GiteaApi, BitbucketApi):
    """In-memory pull requests over the bare repositories of ``githost``, served per host kind.

    ``token`` is the API token every request must carry (default: the git server's).
    ``page_size`` is the default page length of list endpoints (lower it to exercise
    pagination). Repositories are known by their git server name (``org/app``), which is
    the GitHub/Gitea ``owner/name``, the GitLab project path and the Bitbucket
    ``workspace/slug``. Numbers are per repository and shared by all kinds. Each kind's
    behaviour lives in its own module (``prhost/github.py`` ...); the state, faults and
    WSGI plumbing in ``prhost/core.py``.
    """

    def _dispatch(self, kind: str, req: _Req) -> _Resp:
        handler = {
            "github": self._github,
            "gitlab": self._gitlab,
            "gitea": self._gitea,
            "bitbucket": self._bitbucket,
            "azure": self._azure,
        }[kind]
        return handler(req)
