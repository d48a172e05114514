"""The exception tree of gitops-reloader.

::

    ReloaderError                 root; ``retryable`` says whether trying again can help
    ├── ConfigError               bad flag, env or config file (start-up, permanent)
    ├── AnnotationError           malformed annotation on an object (permanent)
    ├── KubeError                 an API call failed (retryable unless a subclass says no)
    │   ├── KubeConflict          409: stale resourceVersion or duplicate (retryable)
    │   ├── KubeNotFound          404 (permanent)
    │   ├── KubeGone              410: watch history expired, relist (retryable)
    │   └── KubeThrottled         429 (retryable, ``retry_after``)
    ├── GitError                  a git operation failed (retryable)
    │   ├── PushRejected          the remote moved on: re-apply on the new tip (retryable)
    │   ├── HostKeyRefused        ssh refused the remote's host key: unknown or changed (retryable)
    │   ├── RemoteRefused         the remote refused the credentials or the push (protected
    │   │                         branch): retried slowly, at once when the credentials change
    │   ├── RepositoryUnusable    a mounted credential or the clone directory failed the start-up
    │   │                         checks (held; checked again when its files change)
    │   ├── ManifestNotFound      no manifest for the workload (permanent)
    │   │   ├── PolicyDenied      the tenancy policy refuses the write (permanent)
    │   │   └── UnsafePath        the path escapes the clone, is in .git or goes through a symlink
    │   └── YamlEditError         the file can't be edited safely (permanent)
    └── HostError                 a git host's REST API failed (retryable)
        ├── HostAuthError         401/403/404 on the API: fix the token (permanent)
        └── HostRateLimited       429 / rate-limit headers (retryable, ``retry_after``)

Messages name the object (``ns/Kind/name``, repository, path) and never carry secret
values or tokens. Foreign exceptions are translated at their adapter and chained with
``raise ... from exc``.
"""

from __future__ import annotations


class ReloaderError(Exception):
    """Root of every error this package raises on purpose."""

    retryable: bool = False

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ConfigError(ReloaderError):
    """A flag, environment variable or config file is invalid."""


class AnnotationError(ReloaderError):
    """An annotation on an object is malformed (e.g. an invalid regex)."""


class KubeError(ReloaderError):
    """A Kubernetes API call failed."""

    retryable = True

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, retry_after=retry_after)
        self.status = status


class KubeConflict(KubeError):
    """409: the object changed since it was read, or it already exists."""


class KubeNotFound(KubeError):
    """404: the object (or its kind) does not exist."""

    retryable = False


class KubeGone(KubeError):
    """410: the requested resourceVersion is older than the server's history."""


class KubeThrottled(KubeError):
    """429: the API server asks us to slow down."""


class GitError(ReloaderError):
    """A git operation (clone, fetch, commit, push) failed."""

    retryable = True


class PushRejected(GitError):
    """The remote branch moved on; fetch, re-apply the edit on the new tip, push again."""


class HostKeyRefused(GitError):
    """ssh refused the remote's host key: not in the known_hosts file, or different from it.

    Retryable like any unreachable remote (the mounted known_hosts file may be fixed in
    place), but never by accepting the key. ``reason`` is ``HostKeyUnknown`` or
    ``HostKeyChanged`` (a metric label).
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class RemoteRefused(GitError):
    """The remote refused us: the credentials (``CredentialsRefused``) or the push itself,
    e.g. branch protection or a pre-receive hook (``PushDeclined``). ``reason`` names which.

    Retryable, but nothing changes until a person acts: retried slowly, and at once when a
    credential file or ``--git-config`` changes.
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class RepositoryUnusable(GitError):
    """A configured repository can't be used: a start-up check of its mounts failed.

    ``repository`` is its name in ``--git-config``, ``reason`` a short CamelCase word
    (``SshKeyPermissions``, ``KnownHostsMissing``, ``CacheNotWritable`` ...) for metrics
    and Events, ``path`` the file or directory concerned. The message names the file,
    never its content. Permanent: the checks run once, at start-up.
    """

    retryable = False

    def __init__(self, message: str, *, repository: str, reason: str, path: str) -> None:
        super().__init__(message)
        self.repository = repository
        self.reason = reason
        self.path = path


class ManifestNotFound(GitError):
    """No manifest for the workload could be found in the repository."""

    retryable = False


class PolicyDenied(ManifestNotFound):
    """The repository's tenancy policy does not let this workload write there.

    Raised for a repository the namespace may not use, a file outside the paths its
    namespace may write, or a document that is not the workload's own (see
    :mod:`gitops_reloader.gitops.tenancy`). Permanent and per workload.
    """


class UnsafePath(ManifestNotFound):
    """A repository path escapes the work tree, lies in ``.git`` or goes through a symlink.

    Permanent and per workload: the path comes from an annotation or from the
    repository's content, and trying again reads the same path.
    """


class YamlEditError(GitError):
    """The manifest can't be parsed or edited without damaging it."""

    retryable = False


class HostError(ReloaderError):
    """A git host's REST API call failed."""

    retryable = True


class HostAuthError(HostError):
    """The host refused the token (401/403) or does not show the repository (404)."""

    retryable = False


class HostRateLimited(HostError):
    """The host rate-limited us; ``retry_after`` seconds if it said."""
