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

from gitops_reloader.testing.prhost.bitbucket import BitbucketApi
from gitops_reloader.testing.prhost.core import PR_HOST_KINDS, PrRequest, _Req, _Resp
from gitops_reloader.testing.prhost.gitea import GiteaApi
from gitops_reloader.testing.prhost.github import GitHubApi
from gitops_reloader.testing.prhost.gitlab import GitLabApi

__all__ = ["PR_HOST_KINDS", "PrHost", "PrRequest"]


class PrHost(GitHubApi, GitLabApi, GiteaApi, BitbucketApi):
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
        }[kind]
        return handler(req)
