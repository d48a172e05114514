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
field when the configuration file itself is invalid. The mounts of each repository —
credential files, the clone directory — are checked here too
(:mod:`gitops_reloader.gitops.preflight`), but a repository that fails is only reported:
an error log line naming the repository and the file, the
``git_repository_unusable{sink,repo,reason}`` gauge, and the sink's ``unusable`` map,
which the App turns into a failing ``/readyz`` with the reason and the sink into a
Warning Event on each workload that needs it. Every other repository, and every other
sink, keeps working. No network access happens here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import astuple, replace
from pathlib import Path
from typing import Any

from gitops_reloader.clock import Clock
from gitops_reloader.config import Config
from gitops_reloader.errors import ConfigError, RepositoryUnusable
from gitops_reloader.gitops.auth import CredentialFileError, TokenFile, TokenSource, Transport, transport_of
from gitops_reloader.gitops.digestkey import DigestKeyStore
from gitops_reloader.gitops.gitconfig import GitConfig, RepositoryConfig, load_git_config
from gitops_reloader.gitops.handle import RepositoryHandle
from gitops_reloader.gitops.hosts import GitHost, host_for
from gitops_reloader.gitops.hosts.githubapp import AppTokens, app_tokens
from gitops_reloader.gitops.locate import Locator
from gitops_reloader.gitops.prbranch import PullRequestRepository
from gitops_reloader.gitops.preflight import check_api_token, check_repository
from gitops_reloader.gitops.refresh import RefreshRequester
from gitops_reloader.gitops.repo import Author, Repository
from gitops_reloader.gitops.scanindex import ScanIndex
from gitops_reloader.gitops.signing import Signer, SigningFormat
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.events import EventRecorder
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.sinks.git import GitSink
from gitops_reloader.sinks.pullrequest import PullRequestSink

__all__ = [
    "PULL_REQUEST_CACHE",
    "Reopener",
    "build_git_sink",
    "build_pull_request_sink",
    "build_repository_handles",
    "git_cache",
    "open_repositories",
    "report_unusable",
]

log = logging.getLogger(__name__)

PULL_REQUEST_CACHE = ".pull-requests"
"""Sub-directory of ``--git-cache-dir`` for the pull-request sink's clones (no repository
name can start with a dot, so it never collides with a git-sink clone)."""


def build_repository_handles(git_config: GitConfig, cache_dir: str | Path, *,
                             repository_class: type[Repository] = Repository) -> dict[str, RepositoryHandle]:
    """One clone (under ``cache_dir/<name>``) and scan index per configured repository.

    ``repository_class`` is the clone's adapter (the pull-request sink passes
    :class:`~gitops_reloader.sinks.pullrequest.PullRequestRepository`). For one-shot
    commands (``explain``, benchmarks): the first repository that fails its start-up
    checks raises :class:`ConfigError`. The sinks use :func:`open_repositories`.
    """
    handles, unusable = open_repositories(git_config, cache_dir, repository_class=repository_class)
    if unusable:
        name, exc = next(iter(unusable.items()))
        raise ConfigError(f"--git-config repository {name}: {exc}")
    return handles


def open_repositories(git_config: GitConfig, cache_dir: str | Path, *,
                      repository_class: type[Repository] = Repository,
                      ) -> tuple[dict[str, RepositoryHandle], dict[str, RepositoryUnusable]]:
    """Handles of the repositories that pass their start-up checks, and why the others fail.

    Each repository's credential files and clone directory (``cache_dir/<name>``) are
    checked with :func:`~gitops_reloader.gitops.preflight.check_repository`; a failing
    one gets no handle, only its :class:`RepositoryUnusable` in the second map.
    """
    handles: dict[str, RepositoryHandle] = {}
    unusable: dict[str, RepositoryUnusable] = {}
    for repo_config in git_config.repositories:
        try:
            handles[repo_config.name] = open_repository(repo_config, cache_dir, repository_class)
        except RepositoryUnusable as exc:
            unusable[repo_config.name] = exc
    return handles, unusable


def open_repository(repo_config: RepositoryConfig, cache_dir: str | Path,
                    repository_class: type[Repository] = Repository) -> RepositoryHandle:
    """The handle of one repository (clone under ``cache_dir/<name>``), once its start-up
    checks pass (:class:`RepositoryUnusable` otherwise). A token file is re-read whenever
    the kubelet replaces it (:class:`~gitops_reloader.gitops.auth.TokenFile`); a GitHub App
    mints installation tokens (:func:`~gitops_reloader.gitops.hosts.githubapp.app_tokens`) and,
    without a configured author, authors the commits as its bot; a signing key is
    prepared and test-signed here (:class:`~gitops_reloader.gitops.signing.Signer`)."""
    workdir = Path(cache_dir) / repo_config.name
    auth = check_repository(repo_config, workdir)
    app = _app_tokens(repo_config)
    token_source: TokenSource | None = TokenFile(repo_config.token_file, auth.token) \
        if repo_config.token_file else None
    author: Author | Callable[[], Author] = Author(repo_config.author.name, repo_config.author.email)
    if app is not None and transport_of(repo_config.url) is Transport.HTTP:
        auth, token_source = replace(auth, username="x-access-token"), app
    if app is not None and not repo_config.author_given:
        author = lambda: Author(*astuple(app.author()))  # noqa: E731 - resolved at the first command
    repository = repository_class(
        repo_config.url, branch=repo_config.branch, workdir=workdir, auth=auth, author=author,
        sign=repo_config.sign_commits, token_source=token_source, signer=_signer(repo_config))
    return RepositoryHandle(repo_config, repository, ScanIndex(repository, include=repo_config.paths))


def _app_tokens(repo_config: RepositoryConfig) -> AppTokens | None:
    """The repository's GitHub App tokens once the App's key file is readable (else unusable)."""
    if repo_config.github_app is None:
        return None
    app = app_tokens(repo_config.github_app)
    _usable(repo_config, app.check_key)
    return app


def _signer(repo_config: RepositoryConfig) -> Signer | None:
    """The repository's signer once its key makes a test signature (else unusable)."""
    if repo_config.signing_key is None:
        return None
    signer = Signer(repo_config.signing_key.file, SigningFormat(repo_config.signing_key.format))
    _usable(repo_config, signer.check)
    return signer


def _usable(repo_config: RepositoryConfig, check: Callable[[], None]) -> None:
    """Run a credential file's ``check``; a refused file makes the repository unusable."""
    try:
        check()
    except CredentialFileError as exc:
        raise RepositoryUnusable(str(exc), repository=repo_config.name, reason=exc.reason,
                                 path=exc.path) from None


def open_host(repo_config: RepositoryConfig) -> GitHost:
    """The pull-request host client of ``repo_config`` (its ``pullRequest`` block), once its API
    token file passes its checks (:class:`RepositoryUnusable` otherwise); the token is re-read
    whenever the file is replaced, or minted by the repository's GitHub App."""
    settings = repo_config.pull_request
    assert settings is not None
    token_source: TokenSource | None
    if settings.token_file:
        token = check_api_token(repo_config, settings.token_file)
        token_source = TokenFile(settings.token_file, token)
    else:
        token, token_source = "", _app_tokens(repo_config)
    try:
        return host_for(settings.host, settings.api_url, token, username=settings.username,
                        remove_source_branch=settings.remove_source_branch, squash=settings.squash,
                        merge_strategy=settings.merge_strategy, token_source=token_source)
    except ConfigError as exc:
        raise ConfigError(f"--git-config repository {repo_config.name}: pullRequest: {exc}") from None


def git_cache(config: Config, sink: GitSink | PullRequestSink) -> Path:
    """Where ``sink`` keeps its clones under ``--git-cache-dir``."""
    root = Path(config.gitops.cache_dir)
    return root / PULL_REQUEST_CACHE if isinstance(sink, PullRequestSink) else root


def report_unusable(sink: str, unusable: Mapping[str, RepositoryUnusable], metrics: Metrics) -> None:
    """The start-up report of each repository ``sink`` can't use: an error log line, the gauge."""
    for name, exc in unusable.items():
        metrics.set_git_repository_unusable(sink, name, exc.reason)
        log.error("git repository unusable: its mounts failed the start-up checks; the %s sink holds "
                  "its reloads until they pass (checked again when a credential file changes, and "
                  "every minute)", sink, extra={
                      "sink": sink, "repo": name, "reason": exc.reason, "file": exc.path, "error": str(exc)})


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
    handles, unusable = open_repositories(git_config, gitops.cache_dir)
    report_unusable(GitSink.name, unusable, metrics)
    return GitSink(
        git_config=git_config,
        repositories=handles,
        unusable=unusable,
        locator=Locator(git_config, api, clock=clock),
        digest_key=digest_keys.get,
        metrics=metrics,
        recorder=recorder,
        refresher=RefreshRequester(api, clock=clock) if gitops.request_refresh else None,
        clock=clock,
    )


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
    handles, unusable = open_repositories(
        replace(git_config, repositories=with_pull_requests), Path(gitops.cache_dir) / PULL_REQUEST_CACHE,
        repository_class=PullRequestRepository)  # git_cache() of this sink
    hosts: dict[str, GitHost] = {}
    for repo_config in with_pull_requests:
        try:
            hosts[repo_config.name] = open_host(repo_config)
        except RepositoryUnusable as exc:
            unusable.setdefault(repo_config.name, exc)
            handles.pop(repo_config.name, None)
    report_unusable(PullRequestSink.name, unusable, metrics)
    digest_keys = DigestKeyStore(api, namespace=gitops.digest_key_namespace, name=gitops.digest_key_secret,
                                 create=not config.runtime.dry_run)
    return PullRequestSink(
        git_config=git_config,
        repositories=handles,
        unusable=unusable,
        hosts=hosts,
        locator=Locator(git_config, api, clock=clock),
        digest_key=digest_keys.get,
        metrics=metrics,
        recorder=recorder,
        clock=clock,
        default_grouping=gitops.pr_grouping,
    )



def credential_files(sink: Any) -> list[str]:
    """Every credential file a git sink's repositories name (tokens, SSH keys, known_hosts),
    usable or not: what a person (or a rotation) replaces, taking effect at the next attempt."""
    if sink is None:
        return []
    files: list[str] = []
    for repo in sink.git_config.repositories:
        files += [repo.token_file, repo.ssh_key_file, repo.known_hosts_file]
        if repo.pull_request is not None:
            files.append(repo.pull_request.token_file)
        if repo.github_app is not None:
            files.append(repo.github_app.private_key_file)
        if repo.signing_key is not None:
            files.append(repo.signing_key.file)
    return [f for f in files if f]


class Reopener:
    """Checks the repositories a sink could not use again, and hands it those that pass now.

    A repository whose mounted key, known_hosts or token file (or clone directory) failed its
    checks at start-up is not lost until a restart: :meth:`reopen` runs the same checks again
    (when a credential file changes, and on a slow period) and gives the sink a working handle
    (and, for pull requests, a host client) as soon as they pass; the gauge goes back to 0.
    """

    def __init__(self, sink: GitSink | PullRequestSink, cache_dir: str | Path, metrics: Metrics) -> None:
        self.sink = sink
        self.cache_dir = Path(cache_dir)
        self.metrics = metrics

    def reopen(self) -> list[str]:
        """The repositories that became usable in this check (the sink uses them already)."""
        reopened: list[str] = []
        for name, was in list(self.sink.unusable.items()):
            repo_config = self.sink.git_config.get(name)
            if repo_config is None:
                continue
            try:
                if isinstance(self.sink, PullRequestSink):
                    handle = open_repository(repo_config, self.cache_dir, PullRequestRepository)
                    self.sink.adopt(name, handle, open_host(repo_config))
                else:
                    self.sink.adopt(name, open_repository(repo_config, self.cache_dir))
            except RepositoryUnusable as exc:
                if exc.reason != was.reason:
                    self.metrics.set_git_repository_unusable(self.sink.name, name, was.reason, False)
                    self.metrics.set_git_repository_unusable(self.sink.name, name, exc.reason)
                self.sink.unusable[name] = exc
                continue
            self.metrics.set_git_repository_unusable(self.sink.name, name, was.reason, False)
            log.info("git repository usable again: its mounts pass the checks now", extra={
                "sink": self.sink.name, "repo": name, "was": was.reason})
            reopened.append(name)
        return reopened
