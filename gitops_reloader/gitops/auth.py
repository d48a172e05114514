"""Credentials for git remotes, as plain data (like fluxcd/pkg's ``AuthOptions``).

:class:`GitAuth` is built and validated once, by :func:`git_auth_from_files` (from the
files a mounted Secret provides) and :func:`validate_auth` (against the remote URL),
then handed to :class:`~gitops_reloader.gitops.repo.Repository`, which never reads
Secrets itself.

Guarantees:

- The token never goes into a remote URL, ``.git/config`` or a command line: for HTTP(S)
  remotes :func:`git_environment` passes it as an ``Authorization`` header through
  git's ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` environment
  variables, which live only as long as the one git process they are given to.
- Git never prompts (``GIT_TERMINAL_PROMPT=0``, credential helpers switched off), so a
  wrong token fails fast instead of hanging a worker.
- Error messages name files, never their content; :func:`scrub` removes the token (and
  its base64 and URL-encoded forms) from any text before it reaches an exception or log.

Everything here is pure apart from :func:`git_auth_from_files` and :class:`TokenFile`
(a mounted token re-read whenever the kubelet replaces it), which read files.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import shlex
import stat
import threading
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from gitops_reloader.errors import ConfigError
from gitops_reloader.filewatch import identity
from gitops_reloader.regex import compile_linear

__all__ = [
    "SSH_CONNECT_TIMEOUT",
    "CredentialFileError",
    "GitAuth",
    "TokenFile",
    "TokenSource",
    "Transport",
    "check_private_key_file",
    "display_url",
    "git_auth_from_files",
    "git_environment",
    "scrub",
    "transport_of",
    "validate_auth",
]

log = logging.getLogger(__name__)

_REDACTED = "***"

SSH_CONNECT_TIMEOUT = 30
"""Seconds ssh waits for the TCP connection and the SSH handshake of a git remote."""

_SSH_OPTIONS = (
    "StrictHostKeyChecking=yes",  # unknown host key: refused; changed: refused
    "GlobalKnownHostsFile=/dev/null",  # only the given known_hosts pins hosts
    "UpdateHostKeys=no",  # never rewrite the known_hosts file
    "IdentitiesOnly=yes",  # only the given key, not an agent's or ~/.ssh's
    "BatchMode=yes",  # never prompt (passphrase, host key, password)
    f"ConnectTimeout={SSH_CONNECT_TIMEOUT}",
    "ServerAliveInterval=15",  # a connection that stops answering ...
    "ServerAliveCountMax=4",  # ... is dropped after a minute
)

# ``scheme://user:password@`` in a URL; the user part may be empty (``://:tok@``). RE2:
# :func:`scrub` runs it over git output, which quotes repository content (linear time).
_URL_CREDENTIALS = compile_linear(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)[^/@\s:]*:[^/@\s]*@")
# scp-like SSH address: ``user@host:path`` (no scheme, a colon before any slash).
_SCP_LIKE = re.compile(r"^(?:[^@/\s]+@)?[^:/\s]+:(?!//)")


class CredentialFileError(ConfigError):
    """A credential file is missing, unreadable, empty or has a mode ssh refuses.

    ``reason`` is a short CamelCase word for metrics and Events (``SshKeyPermissions``,
    ``KnownHostsMissing`` ...), ``path`` the file. The message names the file, never
    its content.
    """

    def __init__(self, message: str, *, reason: str, path: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.path = path


class Transport(StrEnum):
    """How git reaches a remote; decides which credentials apply."""

    HTTP = "http"
    """``http://`` or ``https://``: token as an HTTP Basic ``Authorization`` header."""
    SSH = "ssh"
    """``ssh://`` or scp-like ``git@host:org/repo.git``: private key plus known_hosts."""
    LOCAL = "local"
    """``file://`` or a local path: no credentials (tests, mirrors on a volume)."""


@dataclass(frozen=True, slots=True)
class GitAuth:
    """Credentials for one git remote.

    ``token`` is a password or access token for HTTP(S) remotes, sent with
    ``username`` as HTTP Basic auth (GitHub accepts any username with a token, GitLab
    wants ``oauth2`` or the token's user, Gitea the account name). ``ssh_key_path`` and
    ``known_hosts_path`` are files for SSH remotes; the key's content is never read
    here. An empty ``GitAuth()`` means a public repository.

    Build it with :func:`git_auth_from_files` rather than by hand, so that it is
    validated; never log it field by field (``repr`` already hides the token).
    """

    username: str = "git"
    token: str = field(default="", repr=False)
    ssh_key_path: str = ""
    known_hosts_path: str = ""


def transport_of(url: str) -> Transport:
    """Classify ``url`` as an HTTP(S), SSH or local remote.

    >>> transport_of("git@github.com:org/repo.git")
    <Transport.SSH: 'ssh'>
    """
    lowered = url.lower()
    if lowered.startswith(("http://", "https://")):
        return Transport.HTTP
    if lowered.startswith(("ssh://", "git+ssh://", "ssh+git://")):
        return Transport.SSH
    # git's own rule: without "://", a colon before the first slash means scp-like SSH.
    if "://" not in url and _SCP_LIKE.match(url):
        return Transport.SSH
    return Transport.LOCAL


def display_url(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``: safe for messages."""
    return _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{_REDACTED}@", url)


def validate_auth(auth: GitAuth, url: str) -> None:
    """Check that ``auth`` is complete for ``url``; raise :class:`ConfigError` if not.

    - No URL may carry a password (``https://user:token@host/...``): tokens belong in a
      file, and a URL ends up in ``.git/config``, logs and error messages.
    - HTTP(S): a token, or nothing for a public repository. An SSH key alone is an
      error (it would be silently unused).
    - SSH: both a private key and a known_hosts file (host keys are always checked).
    """
    if _URL_CREDENTIALS.search(url):
        raise ConfigError(
            f"git URL {display_url(url)} contains credentials; "
            "remove them and provide the token through a token file"
        )
    transport = transport_of(url)
    if transport is Transport.HTTP and auth.ssh_key_path and not auth.token:
        raise ConfigError(
            f"git URL {url} is HTTP(S) but only an SSH key was given; "
            "provide a token file, or use an ssh:// URL"
        )
    if transport is Transport.SSH and not (auth.ssh_key_path and auth.known_hosts_path):
        raise ConfigError(
            f"git URL {url} is SSH: both an SSH private key file and a "
            "known_hosts file are required"
        )


def git_auth_from_files(
    *,
    token_file: str = "",
    username: str = "",
    ssh_key_file: str = "",
    known_hosts_file: str = "",
    url: str = "",
) -> GitAuth:
    """Build a validated :class:`GitAuth` from the files of a mounted Secret.

    ``token_file`` is read and stripped of surrounding whitespace; an empty or
    unreadable file is an error. ``ssh_key_file`` and ``known_hosts_file`` must both be
    given (or neither) and readable; the key must not be readable by others when it
    belongs to us, because ssh refuses such keys (mount the Secret with
    ``defaultMode: 0400``). ``username`` defaults to ``git``. When ``url`` is given,
    :func:`validate_auth` checks the result against it as well.

    Raises :class:`ConfigError` naming the offending file, never its content.
    """
    token = _read_token(token_file) if token_file else ""
    if bool(ssh_key_file) != bool(known_hosts_file):
        given, missing = (
            ("SSH key file", "known_hosts file")
            if ssh_key_file
            else ("known_hosts file", "SSH key file")
        )
        raise ConfigError(f"an {given} was given without a {missing}; SSH needs both")
    if ssh_key_file:
        _check_ssh_key(ssh_key_file)
        _check_known_hosts(known_hosts_file)
    auth = GitAuth(
        username=username.strip() or "git",
        token=token,
        ssh_key_path=ssh_key_file,
        known_hosts_path=known_hosts_file,
    )
    if url:
        validate_auth(auth, url)
    return auth


def git_environment(auth: GitAuth, url: str,
                    extra_config: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
    """Environment variables that make git authenticate to ``url`` with ``auth``.

    Merge them over the process environment for each git command that talks to the
    remote. For HTTP(S) with a token, the ``Authorization: Basic`` header is scoped to
    the remote's origin (``http.<scheme>://<host>[:port]/.extraHeader``), so it is not
    sent to any other host (submodules, redirects). Credential helpers are switched
    off so that a refused token fails instead of falling back to other stored
    credentials. For SSH, ``GIT_SSH_COMMAND`` pins the key and known_hosts and
    enforces strict host-key checking in batch mode: an unknown or changed host key
    is refused (never added), no prompt can hang, a connection that cannot be made
    fails after :data:`SSH_CONNECT_TIMEOUT` seconds and a silent one is dropped.
    ``extra_config`` adds more ``key=value`` pairs of git configuration for the same
    process (e.g. ``safe.directory``).
    """
    env: dict[str, str] = {"GIT_TERMINAL_PROMPT": "0"}
    config: list[tuple[str, str]] = [("credential.helper", "")]
    transport = transport_of(url)
    if transport is Transport.HTTP and auth.token:
        config.append((f"http.{_origin(url)}.extraHeader", _basic_header(auth)))
    elif transport is Transport.SSH and auth.ssh_key_path:
        # -F /dev/null: no ssh_config (the system's nor ~/.ssh/config) changes what
        # follows; only the given known_hosts file is trusted and nothing is ever
        # written to it (nor anywhere under HOME, which may be read-only).
        parts = ["ssh", "-i", auth.ssh_key_path, "-F", "/dev/null"]
        if auth.known_hosts_path:
            parts += ["-o", f"UserKnownHostsFile={auth.known_hosts_path}"]
        for option in _SSH_OPTIONS:
            parts += ["-o", option]
        env["GIT_SSH_COMMAND"] = shlex.join(parts)
    config.extend(extra_config)
    env["GIT_CONFIG_COUNT"] = str(len(config))
    for i, (key, value) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def scrub(text: str, auth: GitAuth) -> str:
    """Return ``text`` with every form of ``auth``'s token replaced by ``***``.

    Removes the token itself, its URL-encoded form, the base64 of ``user:token`` (and
    of ``:token`` and of the bare token, standard and URL-safe alphabets, with and
    without padding), and any ``user:password@`` in URLs, whatever the token.
    """
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{_REDACTED}@", text)
    if not auth.token:
        return text
    for secret in sorted(_secret_forms(auth), key=len, reverse=True):
        text = text.replace(secret, _REDACTED)
    return text


def _secret_forms(auth: GitAuth) -> set[str]:
    """Every spelling of the token that git, curl or a server might echo."""
    forms = {auth.token, urllib.parse.quote(auth.token, safe="")}
    for plain in (f"{auth.username}:{auth.token}", f":{auth.token}", auth.token):
        raw = plain.encode()
        for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
            text = encoded.decode("ascii")
            forms.add(text)
            forms.add(text.rstrip("="))
    forms.discard("")
    return forms


def _basic_header(auth: GitAuth) -> str:
    credentials = base64.b64encode(f"{auth.username}:{auth.token}".encode()).decode("ascii")
    return f"Authorization: Basic {credentials}"


def _origin(url: str) -> str:
    """``scheme://host[:port]/`` of an HTTP(S) URL, without any user info."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme.lower()}://{host}{port}/"


class TokenSource(Protocol):
    """Where a git remote's or host API's token comes from, asked before each use.

    :class:`TokenFile` (a mounted token) and
    :class:`~gitops_reloader.gitops.hosts.githubapp.AppTokens` (a GitHub App's installation
    tokens) are the two kinds.
    """

    def current(self) -> str:
        """The token to use now."""
        ...

    def refused(self, token: str) -> bool:
        """The remote refused ``token``: whether a retry (once) with :meth:`current` may succeed."""
        ...


class TokenFile:
    """A token file a Secret mounts, read again as soon as the kubelet replaces it.

    :meth:`current` compares the file's identity (``os.stat`` through the ``..data`` link:
    device, inode, size, modification time) with the one it last read — one ``stat`` per
    use, no content read — and reads the token again when it moved, so a rotated token is
    used from the next git command or API request on and never cached past a change. A
    replacement that is missing, empty or unreadable raises :class:`CredentialFileError`
    (naming the file) instead of falling back to the old token. Thread-safe.
    """

    def __init__(self, path: str, token: str = "") -> None:
        self.path = path
        self._lock = threading.Lock()
        self._identity = identity(path)
        self._token = token or _read_token(path)

    def __repr__(self) -> str:
        return f"TokenFile({self.path!r})"

    def current(self) -> str:
        """The token the file holds now."""
        now = identity(self.path)
        with self._lock:
            if now != self._identity:
                token = _read_token(self.path)
                self._token, self._identity = token, now
                log.info("token file changed; using the new token", extra={"file": self.path})
            return self._token

    def refused(self, token: str) -> bool:
        """Whether the file now holds another token than the refused ``token`` (a rotation the
        remote saw first): only then is a retry worth it."""
        return self.current() != token


def _read_token(path: str) -> str:
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise CredentialFileError(f"cannot read git token file {path}: {exc.strerror}",
                                  reason=_unreadable("TokenFile", exc), path=path) from None
    except UnicodeDecodeError:
        raise CredentialFileError(f"git token file {path} is not UTF-8 text",
                                  reason="TokenFileInvalid", path=path) from None
    if not token:
        raise CredentialFileError(f"git token file {path} is empty", reason="TokenFileInvalid", path=path)
    if any(ch in token for ch in "\r\n\0"):
        raise CredentialFileError(f"git token file {path} holds more than one line",
                                  reason="TokenFileInvalid", path=path)
    return token


def _unreadable(what: str, exc: OSError) -> str:
    """``<what>Missing`` for a file that does not exist, else ``<what>Unreadable``."""
    return f"{what}Missing" if isinstance(exc, FileNotFoundError) else f"{what}Unreadable"


def _check_ssh_key(path: str) -> None:
    check_private_key_file(path, "SSH key", "SshKey")


def check_private_key_file(path: str, what: str, reason: str) -> None:
    """``path`` is a readable, non-empty regular file that only its owner may read, as ssh
    and ssh-keygen demand of a private key; :class:`CredentialFileError` (``<reason>Missing``,
    ``Unreadable``, ``Invalid`` or ``Permissions``) naming it otherwise."""
    try:
        info = os.stat(path)
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise CredentialFileError(f"cannot read {what} file {path}: {exc.strerror}",
                                  reason=_unreadable(reason, exc), path=path) from None
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        raise CredentialFileError(f"{what} file {path} is not a non-empty regular file",
                                  reason=f"{reason}Invalid", path=path)
    # The same check ssh makes (sshkey_perm_ok): our own key must be private.
    if info.st_uid == os.getuid() and info.st_mode & 0o077:
        raise CredentialFileError(
            f"{what} file {path} is accessible by others (mode "
            f"{stat.S_IMODE(info.st_mode):04o}) and ssh would refuse it; "
            "mount it with defaultMode 0400 (or 0440 with the pod's fsGroup when the "
            "controller does not run as the file's owner)",
            reason=f"{reason}Permissions", path=path,
        )


def _check_known_hosts(path: str) -> None:
    try:
        size = os.stat(path).st_size
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise CredentialFileError(f"cannot read known_hosts file {path}: {exc.strerror}",
                                  reason=_unreadable("KnownHosts", exc), path=path) from None
    if size == 0:
        raise CredentialFileError(f"known_hosts file {path} is empty; host keys must be pinned",
                                  reason="KnownHostsEmpty", path=path)
