"""Build the git sink from the validated :class:`~gitops_reloader.config.Config`.

:func:`build_git_sink` is what :mod:`gitops_reloader.app` calls: it reads
``--git-config``, builds and validates each repository's credentials from their files,
prepares one working clone per repository under ``--git-cache-dir/<name>`` (cloned on
first use, not here), and wires the locator, the digest key (the Secret named by
``--digest-key-secret``, read or created on first use) and, with ``--request-refresh``,
the Argo CD / Flux refresher. Without ``--git-config`` there is no git sink (``None``).

:func:`build_pull_request_sink` does the same for the pull-request sink: only the
repositories with a ``pullRequest`` block take part, each with its own clone under
``--git-cache-dir/.pull-requests/<name>`` (never shared with the git sink: the two sinks
check out different branches) and a git-host client built from the block's API URL and
token file. Without such a repository there is no pull-request sink (``None``).

With ``--dry-run`` the digest key Secret is read but never created (see
:class:`~gitops_reloader.gitops.digestkey.DigestKeyStore`).

Start-up fails with a :class:`~gitops_reloader.errors.ConfigError` naming the file or
field when the configuration or a credential file is unusable; no network access
happens here.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gitops_reloader.clock import Clock
from gitops_reloader.config import Config
from gitops_reloader.errors import ConfigError
from gitops_reloader.gitops.auth import git_auth_from_files
from gitops_reloader.gitops.digestkey import DigestKeyStore
from gitops_reloader.gitops.gitconfig import GitConfig, load_git_config
from gitops_reloader.gitops.hosts import GitHost, host_for
from gitops_reloader.gitops.locate import Locator
from gitops_reloader.gitops.prbranch import PullRequestRepository
from gitops_reloader.gitops.refresh import RefreshRequester
from gitops_reloader.gitops.repo import Author, Repository
from gitops_reloader.gitops.scanindex import ScanIndex
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.events import EventRecorder
from gitops_reloader.kube.workloads import adapters_for
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.sinks.follow import Follower
from gitops_reloader.sinks.git import GitSink, RepositoryHandle
from gitops_reloader.sinks.pullrequest import PullRequestSink

__all__ = ["PULL_REQUEST_CACHE", "build_git_sink", "build_pull_request_sink", "build_repository_handles"]

PULL_REQUEST_CACHE = ".pull-requests"
"""Sub-directory of ``--git-cache-dir`` for the pull-request sink's clones (no repository
name can start with a dot, so it never collides with a git-sink clone)."""


def build_repository_handles(git_config: GitConfig, cache_dir: str | Path, *,
                             repository_class: type[Repository] = Repository) -> dict[str, RepositoryHandle]:
    """One clone (under ``cache_dir/<name>``) and scan index per configured repository.

    ``repository_class`` is the clone's adapter (the pull-request sink passes
    :class:`~gitops_reloader.sinks.pullrequest.PullRequestRepository`).
    """
    root = Path(cache_dir)
    handles: dict[str, RepositoryHandle] = {}
    for repo_config in git_config.repositories:
        where = f"--git-config repository {repo_config.name}"
        try:
            auth = git_auth_from_files(
                token_file=repo_config.token_file, username=repo_config.username,
                ssh_key_file=repo_config.ssh_key_file, known_hosts_file=repo_config.known_hosts_file,
                url=repo_config.url)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        repository = repository_class(
            repo_config.url, branch=repo_config.branch, workdir=root / repo_config.name, auth=auth,
            author=Author(repo_config.author.name, repo_config.author.email),
            sign=repo_config.sign_commits)
        handles[repo_config.name] = RepositoryHandle(
            repo_config, repository, ScanIndex(repository, include=repo_config.paths))
    return handles


def build_git_sink(config: Config, api: KubeApi, metrics: Metrics, recorder: EventRecorder | None,
                   *, clock: Clock | None = None) -> GitSink | None:
    """The git sink for ``config``, or ``None`` when no ``--git-config`` is given."""
    gitops = config.gitops
    if not gitops.config_file:
        return None
    git_config = load_git_config(gitops.config_file)
    if not git_config.repositories:
        raise ConfigError(f"--git-config {gitops.config_file}: no repositories configured")
    digest_keys = DigestKeyStore(api, namespace=gitops.digest_key_namespace, name=gitops.digest_key_secret,
                                 create=not config.runtime.dry_run)
    sink = GitSink(
        git_config=git_config,
        repositories=build_repository_handles(git_config, gitops.cache_dir),
        locator=Locator(git_config, api, clock=clock),
        digest_key=digest_keys.get,
        metrics=metrics,
        recorder=recorder,
        refresher=RefreshRequester(api, clock=clock) if gitops.request_refresh else None,
        clock=clock,
    )
    sink.follower = _follower(config, api, git_config, sink.repositories, metrics, recorder, clock)
    return sink


def build_pull_request_sink(config: Config, api: KubeApi, metrics: Metrics, recorder: EventRecorder | None,
                            *, clock: Clock | None = None) -> PullRequestSink | None:
    """The pull-request sink for ``config``, or ``None`` when no repository has ``pullRequest``."""
    gitops = config.gitops
    if not gitops.config_file:
        return None
    git_config = load_git_config(gitops.config_file)
    with_pull_requests = tuple(r for r in git_config.repositories if r.pull_request is not None)
    if not with_pull_requests:
        return None
    hosts: dict[str, GitHost] = {}
    for repo_config in with_pull_requests:
        settings = repo_config.pull_request
        assert settings is not None
        where = f"--git-config repository {repo_config.name}: pullRequest"
        try:
            token = git_auth_from_files(token_file=settings.token_file).token
            hosts[repo_config.name] = host_for(
                settings.host, settings.api_url, token, username=settings.username,
                remove_source_branch=settings.remove_source_branch, squash=settings.squash)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    handles = build_repository_handles(
        replace(git_config, repositories=with_pull_requests), Path(gitops.cache_dir) / PULL_REQUEST_CACHE,
        repository_class=PullRequestRepository)
    digest_keys = DigestKeyStore(api, namespace=gitops.digest_key_namespace, name=gitops.digest_key_secret,
                                 create=not config.runtime.dry_run)
    sink = PullRequestSink(
        git_config=git_config,
        repositories=handles,
        hosts=hosts,
        locator=Locator(git_config, api, clock=clock),
        digest_key=digest_keys.get,
        metrics=metrics,
        recorder=recorder,
        clock=clock,
        default_grouping=gitops.pr_grouping,
    )
    sink.follower = _follower(config, api, git_config, sink.repositories, metrics, recorder, clock)
    return sink


def _follower(config: Config, api: KubeApi, git_config: GitConfig, handles: dict[str, RepositoryHandle],
              metrics: Metrics, recorder: EventRecorder | None, clock: Clock | None) -> Follower | None:
    """The follow-up of a git sink's emissions (``None``: ``--git-apply-timeout 0`` or ``--dry-run``)."""
    gitops = config.gitops
    if gitops.apply_timeout <= 0 or config.runtime.dry_run:
        return None
    return Follower(api=api, repositories=handles, metrics=metrics, recorder=recorder,
                    argocd_namespace=git_config.argocd_namespace, timeout=gitops.apply_timeout,
                    interval=gitops.follow_interval, clock=clock,
                    adapters=adapters_for(argo_rollouts=True, openshift=True, kinds=config.behaviour.kinds))
