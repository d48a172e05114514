"""One working copy of one branch of a manifest repository: what sinks need from git.

:class:`Repository` is the only place in gitops-reloader that imports GitPython. It
offers sync, read, write, commit and push for the ``git`` sink, plus the few extras the
pull-request sink needs (its own branch, pushed with a lease). Guarantees:

- **Never damages the remote.** :meth:`Repository.push` has no force parameter; when the
  remote branch moved on it raises :class:`~gitops_reloader.errors.PushRejected`, and
  the caller syncs, re-applies its edit on the new tip and pushes again.
  :meth:`Repository.push_branch` force-pushes only *with a lease* and refuses the
  configured (base) branch.
- **Keeps secrets out.** Credentials travel in each git process's environment (see
  :func:`~gitops_reloader.gitops.auth.git_environment`), never in the remote URL or
  ``.git/config``. Every failure is raised as our own
  :class:`~gitops_reloader.errors.GitError` with a scrubbed message and *no* chained
  GitPython exception (its text holds command lines and stderr), so no token can leak
  through ``str()``, ``__cause__`` or ``__context__``.
- **Stays inside the work tree.** Paths given to :meth:`Repository.read`,
  :meth:`Repository.write` and :meth:`Repository.commit` are repository-relative POSIX
  paths; ``..``, absolute paths, ``.git`` and symlinks leading outside are refused.
- **Bounded.** Network commands are killed after ``timeout`` seconds.

Not thread-safe: a ``Repository`` owns its ``workdir``, and callers serialize work on
one repository (one worker per repository key). "Nothing to commit" is an outcome
(``None``), not an error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

import git  # GitPython: only in this module
import git.exc

from gitops_reloader.errors import (
    ConfigError,
    GitError,
    HostAuthError,
    HostError,
    HostKeyRefused,
    PushRejected,
    RemoteRefused,
    RepositoryUnusable,
    UnsafePath,
)
from gitops_reloader.gitops.auth import (
    CredentialFileError,
    GitAuth,
    TokenSource,
    display_url,
    git_environment,
    scrub,
    validate_auth,
)
from gitops_reloader.gitops.signing import Signer

__all__ = ["Author", "Repository", "remote_default_branch"]

_REMOTE = "origin"
_SHA = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
_PREFIX = re.compile(r"^[0-9a-f]{7,64}$")
# A push refused because the remote has commits we don't build on.
_REJECTED = re.compile(r"\[rejected\]|\(fetch first\)|\(non-fast-forward\)|\(stale info\)")
_REJECTED_LINE = re.compile(r"\[rejected\][^\n|']*")
# What git says when the credentials were missing or refused.
_AUTH_FAILED = re.compile(
    r"could not read (?:Username|Password)|Authentication failed|HTTP 40[13]|"
    r"Permission denied \(publickey|Host key verification failed",
    re.IGNORECASE,
)
# What hosts say when branch protection or a server hook declines a push (GitHub GH006,
# GitLab's pre-receive, Gitea's protected branch, Bitbucket's hooks).
_PUSH_DECLINED = re.compile(
    r"protected branch|pre-receive hook declined|GH0\d\d|GL-HOOK-ERR|hook declined", re.IGNORECASE)
_DEFAULT_TIMEOUT = 300.0
_CREDENTIALS_REFUSED = "the remote refused the credentials"
# ssh's words when StrictHostKeyChecking refuses a host (OpenSSH sshconnect.c).
_HOST_KEY_CHANGED = re.compile(r"Host key for (\S{1,300}) has changed")
_HOST_KEY_UNKNOWN = re.compile(r"No \S{1,40} host key is known for (\S{1,300}) and")


@dataclass(frozen=True, slots=True)
class Author:
    """Author and committer identity of the commits we make."""

    name: str = "gitops-reloader"
    email: str = "gitops-reloader@localhost"


class Repository:
    """A clone of ``branch`` of ``url`` in ``workdir``, authenticated with ``auth``.

    Typical use by the git sink::

        repo = Repository(url, branch="main", workdir=cache / "app", auth=auth)
        repo.sync()
        repo.write("apps/web/deploy.yaml", edited)
        if repo.commit("reload ns/Deployment/web: configmap ns/cfg changed", [path]):
            repo.push()  # PushRejected: sync(), re-apply the edit, commit, push again

    Callers must not run git in ``workdir`` themselves, nor share a ``workdir`` between
    two instances. ``sign=True`` signs commits (``git commit -S``) with the signing key
    configured for git in the environment; ``signer`` signs them with a mounted key
    instead (:class:`~gitops_reloader.gitops.signing.Signer`). ``token_source`` is asked
    for the token before each command (a rotated file, a GitHub App's installation token);
    a network command whose credentials are refused is run once more when it has a new
    one. ``author`` may be a function, called once at the first command (a GitHub App's
    bot identity, which takes an API call to learn). ``timeout`` (seconds, ``None``: unbounded)
    limits each fetch, push and ls-remote. The constructor does no I/O; it raises
    :class:`~gitops_reloader.errors.ConfigError` when ``auth`` does not fit ``url``
    (see :func:`~gitops_reloader.gitops.auth.validate_auth`) or ``branch`` is invalid.
    """

    def __init__(
        self,
        url: str,
        *,
        branch: str,
        workdir: Path,
        auth: GitAuth = GitAuth(),  # noqa: B008 - frozen, immutable default
        author: Author | Callable[[], Author] = Author(),
        sign: bool = False,
        timeout: float | None = _DEFAULT_TIMEOUT,
        token_source: TokenSource | None = None,
        signer: Signer | None = None,
    ) -> None:
        validate_auth(auth, url)
        _check_branch_name(branch, ConfigError)
        self.url = url
        self.branch = branch
        self.workdir = Path(workdir)
        self.auth = auth
        self._author_source = author if callable(author) else None
        self.author = author if isinstance(author, Author) else Author()
        self.sign = sign or signer is not None
        self.signer = signer
        self.timeout = timeout
        self._where = f"{display_url(url)} ({branch})"
        self._token_source = token_source
        self._env = self._environment()
        self._repo: git.Repo | None = None

    def __repr__(self) -> str:
        """Show the remote and branch, never credentials."""
        return f"Repository({self._where}, workdir={str(self.workdir)!r})"

    def _environment(self) -> dict[str, str]:
        """Everything that is the same for each command: the auth env (never persisted),
        identity, literal pathspecs (paths are data, not patterns), no pager/editor."""
        signing = self.signer.git_config() if self.signer is not None else ()
        return {
            **git_environment(self.auth, self.url, extra_config=(*_clone_config(self.workdir), *signing)),
            **(self.signer.environment() if self.signer is not None else {}),
            "GIT_AUTHOR_NAME": self.author.name,
            "GIT_AUTHOR_EMAIL": self.author.email,
            "GIT_COMMITTER_NAME": self.author.name,
            "GIT_COMMITTER_EMAIL": self.author.email,
            "GIT_LITERAL_PATHSPECS": "1",
            "GIT_PAGER": "cat",
            "GIT_EDITOR": "true",
        }

    def _current_env(self) -> dict[str, str]:
        """The environment with the credentials as they are now: the token source's token
        (rotated tokens are used at once), the author once known, the signing key as mounted."""
        try:
            token = self._token_source.current() if self._token_source is not None else self.auth.token
            if self._author_source is not None:
                self.author, self._author_source = self._author_source(), None
                self._env = self._environment()
            if self.signer is not None and self.signer.changed():
                self._env = self._environment()
        except CredentialFileError as exc:
            raise RepositoryUnusable(str(exc), repository=self._where, reason=exc.reason,
                                     path=exc.path) from None
        except HostAuthError as exc:
            raise RemoteRefused(f"{self._where}: {exc}", reason="CredentialsRefused") from None
        except HostError as exc:
            raise GitError(f"{self._where}: {exc}") from None
        if token != self.auth.token:
            self.auth = replace(self.auth, token=token)
            self._env = self._environment()
        return self._env

    # -- syncing ---------------------------------------------------------------------

    def sync(self) -> str:
        """Make the work tree exactly ``origin/<branch>``; return its commit sha.

        Clones on first use (``workdir`` missing or empty), fetches afterwards. Local
        commits, edits and untracked files are discarded: whatever was not pushed is
        gone, which is what a caller retrying after :class:`PushRejected` wants.
        """
        repo = self._open_or_init()
        remote_ref = f"refs/remotes/{_REMOTE}/{self.branch}"
        self._git(
            repo,
            "fetch",
            "--prune",
            "--no-tags",
            "--quiet",
            _REMOTE,
            f"+refs/heads/{self.branch}:{remote_ref}",
            network=True,
            action="fetch",
        )
        self._git(repo, "checkout", "--quiet", "--force", "-B", self.branch, remote_ref)
        self._git(repo, "reset", "--quiet", "--hard", remote_ref)
        self._git(repo, "clean", "-ffdxq")
        return self.head()

    def head(self) -> str:
        """The sha of the checked-out commit."""
        return self._git(self._require(), "rev-parse", "--verify", "HEAD^{commit}")

    def remote_head(self, branch: str) -> str | None:
        """The sha of ``branch`` on the remote now (``git ls-remote``), ``None`` if absent.

        Works before the first :meth:`sync`.
        """
        _check_branch_name(branch)
        ref = f"refs/heads/{branch}"
        out = self._git(
            None, "ls-remote", "--heads", "--", self.url, ref, network=True, action="ls-remote"
        )
        for line in out.splitlines():
            sha, _, name = line.partition("\t")
            if name.strip() == ref:
                return sha.strip()
        return None

    def remote_default_branch(self) -> str | None:
        """The branch the remote's ``HEAD`` points to (``git ls-remote --symref``), if any.

        Works before the first :meth:`sync`; ``None`` when the remote has no symbolic
        ``HEAD`` (an empty repository, or a server that does not advertise it).
        """
        out = self._git(None, "ls-remote", "--symref", "--", self.url, "HEAD", network=True,
                        action="ls-remote")
        for line in out.splitlines():
            target, _, name = line.partition("\t")
            if name.strip() == "HEAD" and target.startswith("ref: refs/heads/"):
                return target.removeprefix("ref: refs/heads/").strip() or None
        return None

    # -- reading -----------------------------------------------------------------------

    def changed_paths(self, old_sha: str, new_sha: str) -> tuple[list[str], list[str]]:
        """Files changed from ``old_sha`` to ``new_sha``: ``(added_or_modified, deleted)``.

        Renames count as a deletion plus an addition. Both commits must be local
        (e.g. the heads returned by two :meth:`sync` calls); otherwise
        :class:`GitError`, and the caller falls back to a full :meth:`list_files`.
        """
        repo = self._require()
        for sha in (old_sha, new_sha):
            if not _SHA.match(sha):
                raise GitError(f"{self._where}: {sha!r} is not a commit sha")
        out = self._git(
            repo, "diff", "--name-status", "--no-renames", "-z", old_sha, new_sha, "--", raw=True
        )
        fields = out.split("\0")
        changed: list[str] = []
        deleted: list[str] = []
        for status, path in zip(fields[0::2], fields[1::2], strict=False):
            if not status:
                continue
            (deleted if status.startswith("D") else changed).append(path)
        return changed, deleted

    def list_files(self, suffixes: Sequence[str] = (".yaml", ".yml")) -> list[str]:
        """Files tracked in ``HEAD`` whose names end with one of ``suffixes``.

        Repository-relative POSIX paths, sorted; suffixes compare case-insensitively;
        an empty ``suffixes`` lists every file.
        """
        out = self._git(self._require(), "ls-tree", "-r", "-z", "--name-only", "HEAD", raw=True)
        wanted = tuple(s.lower() for s in suffixes)
        paths = [p for p in out.split("\0") if p]
        if wanted:
            paths = [p for p in paths if p.lower().endswith(wanted)]
        return sorted(paths)

    def read(self, path: str) -> bytes | None:
        """Content of ``path`` in the work tree (so after :meth:`write`), ``None`` if absent."""
        target = self._resolve(path)
        if target.is_symlink():
            # A tracked symlink may point anywhere; follow it only inside the work tree.
            self._inside(self._real(target, path), path)
        try:
            return target.read_bytes() if target.is_file() else None
        except OSError as exc:
            raise GitError(f"{self._where}: cannot read {path}: {exc.strerror}") from None

    def check_editable(self, path: str) -> None:
        """Raise :class:`UnsafePath` unless ``path`` can be edited where it is.

        It must be a clean relative path outside ``.git`` with no symlink on the way: not
        the file itself, not a directory above it. git commits a symlink as a link, so an
        edit through one would change another file than the one named (or fail to commit).
        """
        current = self.workdir
        for part in PurePosixPath(self._relative(path)).parts:
            current = current / part
            if current.is_symlink():
                shown = current.relative_to(self.workdir).as_posix()
                raise UnsafePath(f"{self._where}: {path} goes through the symlink {shown}; "
                                 "name the file it points to")

    # -- changing ----------------------------------------------------------------------

    def write(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` in the work tree, creating directories as needed.

        Raises :class:`GitError` for paths outside the repository (``..``, absolute,
        through a symlink), inside ``.git``, or onto a symlink.
        """
        target = self._resolve(path)
        if target.is_symlink():
            raise UnsafePath(f"{self._where}: refusing to write through symlink {path}")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        except OSError as exc:
            raise GitError(f"{self._where}: cannot write {path}: {exc.strerror}") from None

    def _stage(self, repo: git.Repo, message: str, paths: Sequence[str]) -> list[str] | None:
        """Stage exactly ``paths`` (deletions too); their clean relative paths, or ``None``
        when none of them differs from ``HEAD`` (nothing to commit)."""
        if not message.strip():
            raise GitError(f"{self._where}: empty commit message")
        clean = [self._relative(p) for p in paths]
        if not clean:
            return None
        self._git(repo, "add", "--all", "--", *clean)
        staged = self._git(repo, "diff", "--cached", "--name-only", "-z", "HEAD", "--", *clean)
        return clean if staged.strip("\0") else None

    def commit(self, message: str, paths: Sequence[str]) -> str | None:
        """Commit the current content of exactly ``paths``; return the new sha.

        Paths deleted from the work tree are committed as deletions. Returns ``None``
        when none of ``paths`` differs from ``HEAD``. Other changes in the work tree are
        neither staged nor committed.
        """
        repo = self._require()
        clean = self._stage(repo, message, paths)
        if clean is None:
            return None
        self._git(
            repo,
            "commit",
            "--quiet",
            "--no-verify",
            "--cleanup=whitespace",
            "-S" if self.sign else "--no-gpg-sign",
            "-m",
            message,
            "--only",
            "--",
            *clean,
        )
        return self.head()

    def push(self) -> None:
        """Push ``HEAD`` to ``<branch>`` on the remote as a fast-forward. Never forces.

        Raises :class:`PushRejected` when the remote branch has commits we don't have
        (sync, re-apply, commit and push again), :class:`GitError` for anything else
        (unreachable host, refused credentials, protected branch, ...).
        """
        repo = self._require()
        try:
            current = self._git(repo, "symbolic-ref", "--quiet", "--short", "HEAD")
        except GitError:
            current = ""  # detached HEAD
        if current != self.branch:
            raise GitError(
                f"{self._where}: HEAD is on {current or 'a detached commit'}, not "
                f"{self.branch}; sync() before committing for the branch"
            )
        # No "+" in the refspec and no --force: a non-fast-forward is refused.
        self._push(repo, [f"HEAD:refs/heads/{self.branch}"], action="push")

    def checkout_new_branch_from(self, base_sha: str, name: str) -> None:
        """Point local branch ``name`` at ``base_sha`` and check it out, discarding edits.

        For the pull-request sink, which rebuilds its own branch as one commit on the
        latest base. ``name`` must differ from the configured branch; :meth:`sync`
        returns to the configured branch.
        """
        repo = self._require()
        _check_branch_name(name)
        if name == self.branch:
            raise GitError(f"{self._where}: the PR branch must differ from {self.branch}")
        if not _SHA.match(base_sha):
            raise GitError(f"{self._where}: {base_sha!r} is not a commit sha")
        self._git(repo, "checkout", "--quiet", "--force", "-B", name, base_sha)
        self._git(repo, "clean", "-ffdxq")

    def push_branch(
        self, local_ref: str, remote_branch: str, *, expected_remote_sha: str | None
    ) -> None:
        """Force-push ``local_ref`` to ``remote_branch`` *with a lease*: PR branches only.

        The push succeeds only if the remote branch is at ``expected_remote_sha`` (or,
        for ``None``, does not exist yet), so a commit someone else added since is never
        overwritten: :class:`PushRejected` instead. Refuses the configured branch.
        """
        repo = self._require()
        _check_branch_name(remote_branch)
        if remote_branch == self.branch:
            raise GitError(f"{self._where}: refusing to force-push the base branch {self.branch}")
        if local_ref.startswith("-") or not local_ref.strip():
            raise GitError(f"{self._where}: invalid local ref {local_ref!r}")
        if expected_remote_sha is not None and not _SHA.match(expected_remote_sha):
            raise GitError(f"{self._where}: {expected_remote_sha!r} is not a commit sha")
        sha = self._git(repo, "rev-parse", "--verify", "--quiet", f"{local_ref}^{{commit}}")
        ref = f"refs/heads/{remote_branch}"
        lease = f"--force-with-lease={ref}:{expected_remote_sha or ''}"
        self._push(repo, [f"{sha}:{ref}"], lease=lease, action=f"push {remote_branch}")

    # -- internals ---------------------------------------------------------------------

    def _push(
        self, repo: git.Repo, refspecs: Sequence[str], *, action: str, lease: str | None = None
    ) -> None:
        args = ["push", "--porcelain", "--no-verify"]
        if lease:
            args.append(lease)
        args += [_REMOTE, *refspecs]
        try:
            self._git(repo, *args, network=True, action=action, translate=False)
        except git.exc.GitCommandError as exc:
            error = self._translate(exc, action)
            output = f"{_text(exc.stdout)}\n{_text(exc.stderr)}"
            if _REJECTED.search(output):
                # Build outside the handler: no GitPython exception in __context__.
                reason = _REJECTED_LINE.search(output)
                error = PushRejected(
                    f"{self._where}: push of {', '.join(refspecs)} rejected, the remote "
                    f"branch moved on ({reason.group(0) if reason else 'rejected'}); "
                    "sync and re-apply"
                )
        except (git.exc.GitError, OSError, ValueError) as exc:
            error = self._translate(exc, action)
        else:
            return
        raise error

    def _open_or_init(self) -> git.Repo:
        """Open the clone, or create it: ``init`` + remote (+ fetch in :meth:`sync`).

        Equivalent to ``clone --single-branch`` but every network step runs with the
        timeout and the per-command auth environment, and an interrupted first sync
        heals on the next one.
        """
        if self._repo is not None:
            return self._repo
        git_dir = self.workdir / ".git"
        if self.workdir.exists() and not git_dir.exists() and any(self.workdir.iterdir()):
            raise GitError(
                f"{self._where}: workdir {self.workdir} exists, is not empty and is "
                "not a git repository"
            )
        try:
            if git_dir.exists():
                repo = git.Repo(self.workdir)
            else:
                self.workdir.mkdir(parents=True, exist_ok=True)
                repo = git.Repo.init(self.workdir, initial_branch=self.branch)
        except (git.exc.GitError, OSError, ValueError) as exc:
            error = self._translate(exc, "open")
        else:
            self._ensure_remote(repo)
            # A lock left by a killed git process would block this repository forever;
            # nothing else uses this work tree (see the class docstring).
            (git_dir / "index.lock").unlink(missing_ok=True)
            self._repo = repo
            return repo
        raise error

    def _ensure_remote(self, repo: git.Repo) -> None:
        existing = self._git(repo, "remote")
        if _REMOTE not in existing.split():
            self._git(repo, "remote", "add", "--", _REMOTE, self.url)
        elif self._git(repo, "remote", "get-url", "--", _REMOTE) != self.url:
            self._git(repo, "remote", "set-url", "--", _REMOTE, self.url)

    def contains(self, ancestor: str, commit: str) -> bool | None:
        """Whether ``commit`` (hex, 7-40 digits) is ``ancestor`` or a descendant of it on the branch.

        On the branch: ``commit`` is also an ancestor of the fetched ``origin/<branch>``.
        ``None`` when ``commit`` is not in the clone (fetch, then ask again).
        """
        repo = self._require()
        if not (_PREFIX.match(commit) and _SHA.match(ancestor)):
            return False
        try:
            full = self._git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}",
                             translate=False)
        except git.exc.GitCommandError:
            return None
        branch = f"refs/remotes/{_REMOTE}/{self.branch}"
        return self._is_ancestor(repo, ancestor, full) and self._is_ancestor(repo, full, branch)

    def _is_ancestor(self, repo: git.Repo, ancestor: str, commit: str) -> bool:
        try:
            self._git(repo, "merge-base", "--is-ancestor", ancestor, commit, translate=False)
        except git.exc.GitCommandError as exc:
            if exc.status == 1:
                return False
            raise self._translate(exc, "merge-base") from None
        return True

    def last_change(self, path: str) -> tuple[str, int] | None:
        """The commit of the checked-out branch that last changed ``path``, and its commit time."""
        out = self._git(self._require(), "log", "-1", "--format=%H %ct", "--", self._relative(path))
        sha, _, when = out.partition(" ")
        return (sha, int(when)) if _SHA.match(sha) and when.isdigit() else None

    def _require(self) -> git.Repo:
        if self._repo is None:
            if not (self.workdir / ".git").exists():
                raise GitError(f"{self._where}: not cloned yet; call sync() first")
            return self._open_or_init()
        return self._repo

    def _git(
        self,
        repo: git.Repo | None,
        command: str,
        *args: str,
        network: bool = False,
        action: str = "",
        translate: bool = True,
        raw: bool = False,
    ) -> str:
        """Run ``git command args`` with our environment; its stdout, stripped unless ``raw``.

        Failures become :class:`GitError` (``translate=False`` lets ``_push`` inspect
        the GitPython error first).
        """
        runner = repo.git if repo is not None else git.Git()
        kwargs: dict[str, Any] = {"strip_newline_in_stdout": False}
        if network and self.timeout is not None:
            kwargs["kill_after_timeout"] = self.timeout
        for attempt in (1, 2):
            kwargs["env"] = self._current_env()
            try:
                out = runner.execute(["git", command, *args], **kwargs)
            except (git.exc.GitError, OSError, ValueError) as exc:
                error = self._translate(exc, action or command)
                if network and attempt == 1 and self._renewed(error):
                    continue
                if not translate:
                    raise
            else:
                text = _text(out)
                return text if raw else text.strip()
            raise error
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _renewed(self, error: GitError) -> bool:
        """Whether ``error`` is a refused token and the token source has another one to try
        (once): an expired or revoked token does not fail the command."""
        if not (isinstance(error, RemoteRefused) and error.reason == "CredentialsRefused"
                and self._token_source is not None and self.auth.token):
            return False
        try:
            return self._token_source.refused(self.auth.token)
        except (CredentialFileError, HostError):
            return False

    def _translate(self, exc: BaseException, action: str) -> GitError:
        """Our error for a GitPython/OS failure: scrubbed text, nothing chained."""
        if isinstance(exc, git.exc.GitCommandError):
            refused = self._host_key_refused(_text(exc.stderr), action)
            if refused is not None:
                return refused
            detail = self._summary(f"{_text(exc.stderr)}\n{_text(exc.stdout)}")
            status = f" (exit {exc.status})" if exc.status is not None else ""
            message = f"{self._where}: git {action} failed{status}: {detail}"
            if detail.startswith(_CREDENTIALS_REFUSED):
                return RemoteRefused(message, reason="CredentialsRefused")
            if _PUSH_DECLINED.search(detail):
                return RemoteRefused(message, reason="PushDeclined")
            return GitError(message)
        return GitError(
            f"{self._where}: git {action} failed: {type(exc).__name__}: {self._summary(str(exc))}"
        )

    def _host_key_refused(self, stderr: str, action: str) -> HostKeyRefused | None:
        """:class:`HostKeyRefused` when ssh's strict host-key check refused the remote."""
        if "Host key verification failed" not in stderr:
            return None
        known_hosts = self.auth.known_hosts_path or "known_hosts"
        changed = _HOST_KEY_CHANGED.search(stderr)
        if changed is not None:
            return HostKeyRefused(
                f"{self._where}: git {action} failed: the SSH host key of {changed.group(1)} does not "
                f"match the one pinned in {known_hosts} (the server's key changed, or something "
                "is in between); refused. Update the known_hosts file only after checking the "
                "new key", reason="HostKeyChanged")
        unknown = _HOST_KEY_UNKNOWN.search(stderr)
        host = unknown.group(1) if unknown is not None else "the remote"
        return HostKeyRefused(
            f"{self._where}: git {action} failed: the SSH host key of {host} is not in {known_hosts}; "
            "refused (host keys are never accepted unseen). Add the host's key to the "
            "known_hosts file", reason="HostKeyUnknown")

    def _summary(self, text: str) -> str:
        """git's output as one scrubbed line, without hints and progress noise."""
        lines: list[str] = []
        for raw in text.splitlines():
            line = raw.strip()
            for prefix in ("stderr: '", "stdout: '"):
                line = line.removeprefix(prefix)
            line = line.removesuffix("'").strip()
            if not line or line == "Done" or line.startswith(("hint:", "To ")):
                continue
            lines.append(line)
        summary = " | ".join(lines)[-2000:] or "no output"
        if _AUTH_FAILED.search(summary):
            summary = f"{_CREDENTIALS_REFUSED} ({summary})"
        return scrub(summary, self.auth)

    def _relative(self, path: str) -> str:
        """Validate ``path`` and return it as a clean repository-relative POSIX path."""
        if "\\" in path or "\0" in path:
            raise UnsafePath(f"{self._where}: invalid path {path!r}")
        pure = PurePosixPath(path)
        if pure.is_absolute() or not pure.parts or ".." in pure.parts:
            raise UnsafePath(f"{self._where}: path {path!r} escapes the repository")
        if any(part.lower() == ".git" for part in pure.parts):
            raise UnsafePath(f"{self._where}: path {path!r} is inside .git")
        return pure.as_posix()

    def _resolve(self, path: str) -> Path:
        """The work-tree location of ``path``, which must stay inside the repository."""
        relative = self._relative(path)
        root = self.workdir.resolve()
        target = root / relative
        # Resolve symlinks in the parent directories: they must not lead outside.
        real_parent = self._real(target.parent, path)
        self._inside(real_parent, path)
        return real_parent / target.name

    def _real(self, location: Path, path: str) -> Path:
        """``location`` with every symlink resolved; a symlink loop is an :class:`UnsafePath`."""
        try:
            return location.resolve()
        except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
            raise UnsafePath(f"{self._where}: path {path!r} goes through a symlink loop") from None

    def _inside(self, real: Path, path: str) -> None:
        """Raise unless the resolved ``real`` is in the work tree and not in ``.git``."""
        root = self.workdir.resolve()
        if not real.is_relative_to(root) or any(
            part.lower() == ".git" for part in real.relative_to(root).parts
        ):
            raise UnsafePath(f"{self._where}: path {path!r} escapes the repository")


def _clone_config(workdir: Path) -> tuple[tuple[str, str], ...]:
    """git configuration for every command on the clone in ``workdir`` (environment only).

    ``safe.directory`` names exactly this clone: when the cache volume was filled by
    another uid (an earlier container's user, a root init container, a Kubernetes
    ``emptyDir`` or volume with an ``fsGroup``), git would otherwise refuse it as of
    "dubious ownership". It trusts only this one directory, which the controller owns
    by contract, never ``*``. Hooks are switched off (``core.hooksPath=/dev/null``): the
    controller never wants them, and a clone written by someone else must not run any.
    """
    return (("safe.directory", os.path.realpath(workdir)), ("core.hooksPath", os.devnull))


def _check_branch_name(name: str, error: type[Exception] = GitError) -> None:
    """Reject names git would not accept as a branch, or that look like options."""
    bad = (
        not name
        or name.startswith(("-", "/"))
        or name.endswith(("/", ".", ".lock"))
        or ".." in name
        or "//" in name
        or "@{" in name
        or any(ch in name for ch in " ~^:?*[\\\x7f")
        or any(ord(ch) < 32 for ch in name)
    )
    if bad:
        raise error(f"invalid branch name {name!r}")


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def remote_default_branch(url: str, *, auth: GitAuth = GitAuth(),  # noqa: B008 - frozen default
                          timeout: float | None = 10.0) -> str | None:
    """The default branch of the remote ``url`` (see :meth:`Repository.remote_default_branch`).

    Raises :class:`~gitops_reloader.errors.GitError` (scrubbed) when the remote can't be
    asked within ``timeout`` seconds.
    """
    probe = Repository(url, branch="main", workdir=Path("/nonexistent"), auth=auth, timeout=timeout)
    return probe.remote_default_branch()
