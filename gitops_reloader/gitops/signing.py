"""Sign the commits the controller makes with a key mounted from a Secret.

Two formats, as ``signingKey`` in ``--git-config`` chooses:

- ``ssh`` (the default): git's ``gpg.format=ssh`` with ``user.signingKey`` the private key
  file; git runs ``ssh-keygen -Y sign -n git``. GitHub and GitLab verify it once the
  public key is registered as a *signing* key.
- ``openpgp``: an armored secret key (``gpg --export-secret-keys --armor``) is imported
  into a keyring of our own, a ``GNUPGHOME`` made under ``$TMPDIR`` (short, so gpg-agent's
  socket path fits; the chart's ``/tmp`` is an emptyDir), with ``batch`` and
  ``pinentry-mode loopback``, so a passphrase-protected key fails at once instead of
  waiting for a prompt. ``user.signingKey`` is the imported key's fingerprint.

Everything is passed as per-process git configuration (``GIT_CONFIG_KEY_n``), never
written to a git config file, so it works as uid 65532 on a read-only root. The key's
content is never read here except by ``gpg --import``; errors name the file.

:meth:`Signer.check` makes a test signature at start (a bad or protected key is an
unusable repository, reported like a wrong deploy key); :meth:`Signer.changed` notices
the kubelet replacing the file and prepares the new key before the next commit.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from enum import StrEnum

from gitops_reloader.filewatch import identity
from gitops_reloader.gitops.auth import CredentialFileError, check_private_key_file

__all__ = ["Signer", "SigningFormat"]

log = logging.getLogger(__name__)

_TIMEOUT = 30.0
_PROBE = b"gitops-reloader signing check\n"


class SigningFormat(StrEnum):
    """How commits are signed."""

    SSH = "ssh"
    OPENPGP = "openpgp"



class Signer:
    """Signs one repository's commits with the key in ``key_file`` (``fmt``); thread-safe."""

    def __init__(self, key_file: str, fmt: SigningFormat = SigningFormat.SSH) -> None:
        self.key_file = key_file
        self.format = SigningFormat(fmt)
        self._lock = threading.Lock()
        self._identity: object = None
        self._home = ""
        self._signing_key = ""

    def __repr__(self) -> str:
        return f"Signer({self.format.value}, {self.key_file!r})"

    def check(self) -> None:
        """Prepare the key and make a test signature; :class:`CredentialFileError` if it can't sign."""
        with self._lock:
            self._prepare()

    def changed(self) -> bool:
        """Prepare the key again if its file was replaced since; whether it was."""
        with self._lock:
            if self._signing_key and identity(self.key_file) == self._identity:
                return False
            self._prepare()
            return True

    def git_config(self) -> list[tuple[str, str]]:
        """The git configuration that makes ``commit -S`` and ``commit-tree -S`` use the key."""
        with self._lock:
            return [("gpg.format", self.format.value), ("user.signingKey", self._signing_key)]

    def environment(self) -> dict[str, str]:
        """Environment variables git's signing program needs (OpenPGP: our ``GNUPGHOME``)."""
        with self._lock:
            return {"GNUPGHOME": self._home} if self._home else {}

    def close(self) -> None:
        """Stop the keyring's gpg-agent and remove the keyring (OpenPGP)."""
        with self._lock:
            self._drop_home()

    # -- internals ------------------------------------------------------------------------

    def _prepare(self) -> None:
        seen = identity(self.key_file)
        if self.format is SigningFormat.SSH:
            check_private_key_file(self.key_file, "signing key", "SigningKey")
            self._run(["ssh-keygen", "-Y", "sign", "-n", "git", "-f", self.key_file], {}, "sign with")
            self._signing_key = self.key_file
        else:
            self._import_openpgp()
        self._identity = seen

    def _import_openpgp(self) -> None:
        try:
            with open(self.key_file, "rb"):
                pass
        except OSError as exc:
            reason = "SigningKeyMissing" if isinstance(exc, FileNotFoundError) else "SigningKeyUnreadable"
            raise CredentialFileError(f"cannot read signing key file {self.key_file}: {exc.strerror}",
                                      reason=reason, path=self.key_file) from None
        self._drop_home()
        home = tempfile.mkdtemp(prefix="gitops-reloader-gpg-")
        with open(os.path.join(home, "gpg.conf"), "w", encoding="ascii") as conf:
            conf.write("batch\nno-tty\npinentry-mode loopback\n")
        with open(os.path.join(home, "gpg-agent.conf"), "w", encoding="ascii") as conf:
            conf.write("allow-loopback-pinentry\n")
        if not self._home:
            atexit.register(self.close)
        self._home = home
        env = {"GNUPGHOME": home}
        self._run(["gpg", "--import", self.key_file], env, "import")
        listing = self._run(["gpg", "--with-colons", "--list-secret-keys"], env, "list").decode()
        fingerprint = _first_secret_fingerprint(listing)
        if not fingerprint:
            raise CredentialFileError(f"signing key file {self.key_file} holds no OpenPGP secret key "
                                      "(export it with gpg --export-secret-keys --armor)",
                                      reason="SigningKeyInvalid", path=self.key_file)
        self._run(["gpg", "--local-user", fingerprint, "--detach-sign"], env, "sign with")
        self._signing_key = fingerprint

    def _drop_home(self) -> None:
        if not self._home:
            return
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env={**os.environ, "GNUPGHOME": self._home},
                       capture_output=True, timeout=_TIMEOUT, check=False)
        shutil.rmtree(self._home, ignore_errors=True)
        self._home = ""

    def _run(self, command: list[str], env: dict[str, str], what: str) -> bytes:
        """Run ``command`` on the probe text; :class:`CredentialFileError` naming the file if it fails."""
        try:
            done = subprocess.run(command, input=_PROBE, capture_output=True, timeout=_TIMEOUT,
                                  env={**os.environ, **env}, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CredentialFileError(f"cannot {what} signing key file {self.key_file}: "
                                      f"{command[0]}: {type(exc).__name__}", reason="SigningKeyInvalid",
                                      path=self.key_file) from None
        if done.returncode != 0:
            detail = " ".join(done.stderr.decode(errors="replace").split())[:200]
            raise CredentialFileError(
                f"cannot {what} signing key file {self.key_file} ({self.format.value}): "
                f"{detail or 'failed'}; "
                "the key must be an unencrypted private key (no passphrase)",
                reason="SigningKeyInvalid", path=self.key_file)
        return done.stdout


def _first_secret_fingerprint(listing: str) -> str:
    """The fingerprint of the first secret key in ``gpg --with-colons`` output."""
    in_secret = False
    for line in listing.splitlines():
        fields = line.split(":")
        if fields[0] == "sec":
            in_secret = True
        elif fields[0] == "fpr" and in_secret and len(fields) > 9:
            return fields[9]
    return ""
