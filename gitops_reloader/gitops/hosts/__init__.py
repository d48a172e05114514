"""Git host clients for the pull-request sink: GitHub, GitLab, Gitea/Forgejo, Bitbucket Cloud,
Azure DevOps.

Build one with :func:`host_for` and use it only through the
:class:`~gitops_reloader.gitops.hosts.base.GitHost` protocol::

    host = host_for("gitlab", "https://gitlab.example.com/api/v4", token)
    pull = host.find_open("group/app", head="gitops-reloader/web", base="main")
    if pull is None:
        pull = host.create("group/app", head=..., base="main", title=..., body=...)

Each client takes an injected ``httpx.Client`` (tests pass one with
``httpx.MockTransport``, or point the client at the PR host test server); see
:mod:`gitops_reloader.gitops.hosts.base` for the retry, error and secrecy contract.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from gitops_reloader.errors import ConfigError
from gitops_reloader.gitops.auth import TokenSource
from gitops_reloader.gitops.hosts.azure import AzureDevOpsHost
from gitops_reloader.gitops.hosts.base import GitHost, PullRequest, PullRequestState, RetryPolicy
from gitops_reloader.gitops.hosts.bitbucket import BitbucketHost
from gitops_reloader.gitops.hosts.gitea import GiteaHost
from gitops_reloader.gitops.hosts.github import GitHubHost
from gitops_reloader.gitops.hosts.gitlab import GitLabHost

__all__ = [
    "HOST_KINDS",
    "AzureDevOpsHost",
    "BitbucketHost",
    "GitHost",
    "GitHubHost",
    "GitLabHost",
    "GiteaHost",
    "PullRequest",
    "PullRequestState",
    "RetryPolicy",
    "host_for",
]

_CLASSES: dict[str, type[GitHubHost | GitLabHost | GiteaHost | BitbucketHost | AzureDevOpsHost]] = {
    "github": GitHubHost,
    "gitlab": GitLabHost,
    "gitea": GiteaHost,
    "forgejo": GiteaHost,  # Forgejo keeps Gitea's API
    "bitbucket": BitbucketHost,
    "azure": AzureDevOpsHost,
}

HOST_KINDS = ("github", "gitlab", "gitea", "bitbucket", "azure")
"""The canonical host kinds (``forgejo`` is accepted as an alias of ``gitea``)."""


def host_for(
    kind: str,
    api_url: str,
    token: str,
    *,
    client: httpx.Client | None = None,
    timeout: float = 10.0,
    retry: RetryPolicy | None = None,
    sleep: Callable[[float], None] | None = None,
    username: str = "",
    remove_source_branch: bool = False,
    squash: bool = False,
    token_source: TokenSource | None = None,
    merge_strategy: str = "",
) -> GitHost:
    """A client for a ``kind`` host at ``api_url``, authenticating with ``token``.

    ``api_url`` may be empty for GitHub (``https://api.github.com``) and Bitbucket
    (``https://api.bitbucket.org/2.0``). Raises :class:`ConfigError` for an unknown
    kind, a malformed URL or an empty token; the message never contains the token.
    ``sleep`` replaces :func:`time.sleep` between retries (tests).

    Per-host options (a :class:`ConfigError` on another host): ``username`` makes
    Bitbucket use HTTP Basic ``username:token`` instead of Bearer;
    ``remove_source_branch`` and ``squash`` are GitLab merge request settings
    (``remove_source_branch`` is Azure DevOps' ``deleteSourceBranch`` too), ``merge_strategy``
    Azure DevOps' auto-complete merge strategy.
    ``token_source`` is where ``token`` came from (a mounted file, a GitHub App's
    installation tokens): a rotated token is used from the next request on.
    """
    normalized = kind.strip().lower()
    cls = _CLASSES.get(normalized)
    if cls is None:
        raise ConfigError(f"unknown git host kind {kind!r}; use one of {', '.join(HOST_KINDS)} (or forgejo)")
    common: dict[str, Any] = {
        "client": client, "timeout": timeout, "retry": retry or RetryPolicy(), "sleep": sleep or time.sleep,
        "token_source": token_source}
    if username and cls is not BitbucketHost:
        raise ConfigError(f"a username (HTTP Basic) is only used with bitbucket, not {normalized}")
    if squash and cls is not GitLabHost:
        raise ConfigError(f"squash is a GitLab setting, not {normalized}'s")
    if remove_source_branch and cls not in (GitLabHost, AzureDevOpsHost):
        raise ConfigError(f"removeSourceBranch is a GitLab and Azure DevOps setting, not {normalized}'s")
    if merge_strategy and cls is not AzureDevOpsHost:
        raise ConfigError(f"mergeStrategy is an Azure DevOps setting, not {normalized}'s")
    if cls is AzureDevOpsHost:
        return AzureDevOpsHost(api_url, token, merge_strategy=merge_strategy or "noFastForward",
                               delete_source_branch=remove_source_branch, **common)
    if cls is BitbucketHost:
        return BitbucketHost(api_url, token, username=username, **common)
    if cls is GitLabHost:
        return GitLabHost(api_url, token, remove_source_branch=remove_source_branch, squash=squash, **common)
    return cls(api_url, token, **common)
