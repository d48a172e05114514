"""Start-up checks of what one configured repository needs from the pod.

A git repository is reached with files a Secret mounts (an SSH key and a known_hosts
file, or a token) and cloned into a directory of the cache volume. Each can be wrong
in ways that would otherwise only show at the first push, long after start-up: a key
with a mode ssh refuses, a file the process user cannot read, a missing known_hosts,
a cache directory the process user cannot write, a process uid ssh refuses to run as.
:func:`check_repository` finds them before any network access and raises
:class:`~gitops_reloader.errors.RepositoryUnusable` naming the repository, the file
and why — never the file's content — so that the controller can report the one
repository and keep everything else running.

Ownership of an existing clone is not a problem here: git's "dubious ownership" check
is answered per clone by :class:`~gitops_reloader.gitops.repo.Repository`
(``safe.directory`` scoped to its own directory), as long as the directory is writable.

Only ``stat``/``access``/``open`` calls and a user-database lookup: no git, no network.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from gitops_reloader.errors import ConfigError, RepositoryUnusable
from gitops_reloader.gitops.auth import (
    CredentialFileError,
    GitAuth,
    Transport,
    git_auth_from_files,
    transport_of,
)
from gitops_reloader.gitops.gitconfig import RepositoryConfig

__all__ = ["check_api_token", "check_repository", "check_ssh_user", "check_workdir"]


def check_repository(config: RepositoryConfig, workdir: Path) -> GitAuth:
    """The repository's validated credentials, once its files and ``workdir`` pass.

    Raises :class:`RepositoryUnusable` for the first problem found: credential files
    (:func:`~gitops_reloader.gitops.auth.git_auth_from_files`: missing, unreadable,
    empty, a key ssh would refuse for its mode), credentials that do not fit the URL,
    then the clone directory (:func:`check_workdir`).
    """
    try:
        auth = git_auth_from_files(
            token_file=config.token_file, username=config.username, ssh_key_file=config.ssh_key_file,
            known_hosts_file=config.known_hosts_file, url=config.url)
    except CredentialFileError as exc:
        raise RepositoryUnusable(str(exc), repository=config.name, reason=exc.reason, path=exc.path) from None
    except ConfigError as exc:
        raise RepositoryUnusable(str(exc), repository=config.name, reason="CredentialsIncomplete",
                                 path="") from None
    if transport_of(config.url) is Transport.SSH:
        check_ssh_user(config.name)
    check_workdir(config.name, workdir)
    return auth


def check_ssh_user(repository: str) -> None:
    """The process uid has an entry in the user database, without which ssh will not run.

    OpenSSH's client exits with "No user exists for uid N" otherwise: it happens when
    the pod runs with a uid the image does not know (OpenShift's random uids, a changed
    ``runAsUser``). Raises :class:`RepositoryUnusable` with reason ``SshNoUser``.
    """
    uid = os.getuid()
    try:
        pwd.getpwuid(uid)
    except KeyError:
        raise RepositoryUnusable(
            f"ssh will not run as uid {uid} for repository {repository}: the uid has no entry in the "
            "user database (/etc/passwd). Run the controller as a uid the image knows (the chart's "
            "runAsUser 65532) or give it a passwd entry",
            repository=repository, reason="SshNoUser", path="/etc/passwd") from None


def check_api_token(config: RepositoryConfig, token_file: str) -> str:
    """The git host API token of ``config``'s ``pullRequest`` block, read from ``token_file``.

    Raises :class:`RepositoryUnusable` (reason ``TokenFileMissing``, ``TokenFileUnreadable``
    or ``TokenFileInvalid``) naming the file.
    """
    try:
        return git_auth_from_files(token_file=token_file).token
    except CredentialFileError as exc:
        raise RepositoryUnusable(f"pullRequest: {exc}", repository=config.name, reason=exc.reason,
                                 path=exc.path) from None


def check_workdir(repository: str, workdir: Path) -> None:
    """``workdir`` (the clone) is a directory the process user can write, or can be created.

    An existing clone's ``.git`` must be writable too (every fetch writes objects and
    refs). Before the first clone, the nearest existing parent must be a writable
    directory. Raises :class:`RepositoryUnusable` with reason ``CacheNotWritable``.
    """
    workdir = Path(workdir)
    if workdir.exists():
        targets = [workdir] + ([workdir / ".git"] if (workdir / ".git").exists() else [])
    else:
        parent = workdir.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        targets = [parent]
    for target in targets:
        if not target.is_dir():
            raise RepositoryUnusable(
                f"git cache directory {target} is not a directory; the clone of repository "
                f"{repository} cannot be written (--git-cache-dir)",
                repository=repository, reason="CacheNotWritable", path=str(target))
        if not os.access(target, os.W_OK | os.X_OK):
            raise RepositoryUnusable(
                f"git cache directory {target} is not writable by the controller's user "
                f"(uid {os.getuid()}); the clone of repository {repository} cannot be written. "
                "Mount a writable volume at --git-cache-dir (the chart's emptyDir with the pod's fsGroup)",
                repository=repository, reason="CacheNotWritable", path=str(target))
