"""The default branch of a configured remote, asked of the remote and cached.

Argo CD deploys ``targetRevision: HEAD`` (or empty) from whatever the remote's
``HEAD`` points to (argo-cd ``util/git/client.go`` ``LsRemote``: ``HEAD`` is resolved
as a symbolic reference). :class:`DefaultBranches` answers that question for a
``--git-config`` repository with ``git ls-remote --symref <url> HEAD`` through
:func:`~gitops_reloader.gitops.repo.remote_default_branch`, with that repository's
credentials (built as the git sink builds them).

It runs on informer threads (the git sink resolves workloads there), so each answer is
cached for ``ttl`` seconds, a failure for ``error_ttl`` seconds (raised again from the
cache: :class:`~gitops_reloader.errors.GitError`, retryable), each ``ls-remote`` is
bounded by ``timeout`` seconds, and concurrent callers for one remote wait for a single
lookup. Thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from gitops_reloader.clock import Clock, SystemClock
from gitops_reloader.errors import ConfigError, GitError, HostError
from gitops_reloader.gitops.auth import Transport, display_url, git_auth_from_files, transport_of
from gitops_reloader.gitops.gitconfig import RepositoryConfig
from gitops_reloader.gitops.hosts.githubapp import app_tokens
from gitops_reloader.gitops.repo import remote_default_branch
from gitops_reloader.gitops.repourl import normalize_git_url_allow_invalid

__all__ = ["DefaultBranches", "ask_remote"]

Lookup = Callable[[RepositoryConfig], str | None]


def ask_remote(repo: RepositoryConfig, *, timeout: float = 10.0) -> str | None:
    """``ls-remote --symref`` the repository's URL with its configured credentials (a GitHub
    App's installation token over HTTPS)."""
    try:
        auth = git_auth_from_files(token_file=repo.token_file, username=repo.username,
                                   ssh_key_file=repo.ssh_key_file, known_hosts_file=repo.known_hosts_file,
                                   url=repo.url)
        if repo.github_app is not None and transport_of(repo.url) is Transport.HTTP:
            auth = replace(auth, username="x-access-token", token=app_tokens(repo.github_app).current())
    except (ConfigError, HostError) as exc:
        raise GitError(f"--git-config repository {repo.name}: {exc}") from None
    return remote_default_branch(repo.url, auth=auth, timeout=timeout)


class DefaultBranches:
    """Default branch per remote URL, cached; ``lookup`` does the asking (default: :func:`ask_remote`)."""

    def __init__(self, *, lookup: Lookup = ask_remote, clock: Clock | None = None,
                 ttl: float = 300.0, error_ttl: float = 30.0) -> None:
        self.lookup = lookup
        self.clock = clock or SystemClock()
        self.ttl = ttl
        self.error_ttl = error_ttl
        self._lock = threading.Lock()
        self._flights: dict[str, threading.Lock] = {}
        self._cache: dict[str, tuple[float, str | GitError]] = {}

    def branch(self, repo: RepositoryConfig) -> str:
        """The remote's default branch; :class:`GitError` when it can't be told."""
        key = normalize_git_url_allow_invalid(repo.url)
        with self._lock:
            flight = self._flights.setdefault(key, threading.Lock())
        with flight:
            now = self.clock.monotonic()
            with self._lock:
                cached = self._cache.get(key)
            if cached is None or cached[0] <= now:
                cached = self._ask(repo, now)
                with self._lock:
                    self._cache[key] = cached
        value = cached[1]
        if isinstance(value, GitError):
            raise GitError(str(value))
        return value

    def _ask(self, repo: RepositoryConfig, now: float) -> tuple[float, str | GitError]:
        try:
            found = self.lookup(repo)
        except GitError as exc:
            return now + self.error_ttl, GitError(
                f"cannot ask {display_url(repo.url)} for its default branch: {exc}")
        if not found:
            return now + self.error_ttl, GitError(
                f"{display_url(repo.url)} advertises no default branch (HEAD); "
                "set the Application's targetRevision to a branch")
        return now + self.ttl, found
