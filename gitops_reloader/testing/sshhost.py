"""A real git server over SSH, on 127.0.0.1, for tests: OpenSSH's ``sshd`` plus ``git-shell``.

:class:`SshGitHost` runs Debian's ``openssh-server`` (``/usr/sbin/sshd``) in the
foreground as the current user, on 127.0.0.1 and a free port, with everything of its
own in one directory: ``sshd_config``, a fresh ed25519 host key, an ``authorized_keys``
file holding the client's public key with a forced ``git-shell`` command, and the
client's key pair. It serves the bare repositories under ``root`` — pass the
:class:`~gitops_reloader.testing.githost.GitHostServer`'s ``root``, and one repository is
reachable both over HTTP and over SSH.

- **Who logs in**: sshd only authenticates an existing, unlocked account, and a test
  must not create system users; the clone URL therefore names the account sshd runs as
  (``root`` on CI machines). Its login shell runs the forced
  ``git-shell -c "$SSH_ORIGINAL_COMMAND"``: only ``git-upload-pack`` /
  ``git-receive-pack`` (and ``git-upload-archive``) run, on absolute repository paths.
- **Host keys**: :attr:`SshGitHost.known_hosts_line` is the ``known_hosts`` entry of the
  server (``[127.0.0.1]:PORT ssh-ed25519 ...``); :meth:`SshGitHost.write_known_hosts`
  writes it to a file. :meth:`SshGitHost.change_host_key` restarts the server on the same
  port with a new host key (the "REMOTE HOST IDENTIFICATION HAS CHANGED" case).
- **Privileges**: as root, sshd needs its privilege-separation directory
  ``/run/sshd`` (created when missing) and Debian's ``sshd`` user (the package creates
  it). Not as root, it runs with PAM on (see :meth:`SshGitHost._write_config`), and the
  account's login shell must run commands (not ``nologin``). ``StrictModes`` is off
  because the files live in a temporary directory under the world-writable ``/tmp``;
  passwords, forwarding and ttys are off.
- **Inspection**: :meth:`SshGitHost.sessions` counts the git commands sshd ran (forced
  command sessions), :meth:`SshGitHost.log_text` is sshd's own log.

Start with :meth:`SshGitHost.start` (or use it as a context manager) and stop it with
:meth:`SshGitHost.stop`, which signals the sshd process by its PID.

Example::

    with GitHostServer(tmp_path / "srv") as http, SshGitHost(http.root, tmp_path / "sshd") as ssh:
        http.create_repo("app", {"deploy.yaml": "kind: Deployment\\n"})
        ssh.write_known_hosts(tmp_path / "known_hosts")
        # GIT_SSH_COMMAND="ssh -i <ssh.client_key_path> -o UserKnownHostsFile=<known_hosts> ..."
        # git clone <ssh.url("app")>
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from gitops_reloader.testing.ports import free_port

__all__ = ["SshGitHost", "SshHostError"]

_REPO_NAME = re.compile(r"^[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*$")
_SESSION = re.compile(r"Starting session: forced-command")
_START_TIMEOUT = 15.0
_STOP_TIMEOUT = 5.0
_PORT_ATTEMPTS = 5


class SshHostError(RuntimeError):
    """sshd could not be set up or started (the message carries the tail of its log)."""


class SshGitHost:
    """sshd on ``host`` serving the bare repositories under ``root`` through git-shell.

    ``workdir`` (created) holds the server's configuration, keys and log. ``port`` 0
    picks a free port at :meth:`start`. Nothing runs until :meth:`start`.
    """

    def __init__(self, root: Path, workdir: Path, *, host: str = "127.0.0.1", port: int = 0,
                 sshd: str | None = None) -> None:
        self.root = Path(root).resolve()
        self.workdir = Path(workdir).resolve()
        self.host = host
        self.port = port
        self.user = pwd.getpwuid(os.getuid()).pw_name
        self.sshd = sshd or shutil.which("sshd") or "/usr/sbin/sshd"
        if not os.path.isabs(self.sshd) or not os.access(self.sshd, os.X_OK):
            raise SshHostError(f"sshd not found at {self.sshd}: install openssh-server")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.host_key_path = self.workdir / "ssh_host_ed25519_key"
        self.client_key_path = self.workdir / "id_ed25519"
        """The client's private key (mode 0600), authorized for git-shell on this server."""
        self.config_path = self.workdir / "sshd_config"
        self.log_path = self.workdir / "sshd.log"
        self._authorized_keys = self.workdir / "authorized_keys"
        self._pid_file = self.workdir / "sshd.pid"
        self._proc: subprocess.Popen[bytes] | None = None
        _keygen(self.host_key_path, comment="test-sshd-host")
        _keygen(self.client_key_path, comment="gitops-reloader-test-client")
        self.authorize(self.client_key_path.with_suffix(".pub").read_text())

    def authorize(self, public_key: str) -> None:
        """Accept only ``public_key`` (an OpenSSH public key line) from now on: a deploy key
        rotated on the host, the old one revoked. sshd reads the file at every connection."""
        # sshd runs the forced command with the account's shell; git-shell then refuses
        # anything but the git transfer commands.
        self._authorized_keys.write_text(
            'command="git-shell -c \\"$SSH_ORIGINAL_COMMAND\\"",'
            f"no-port-forwarding,no-X11-forwarding,no-agent-forwarding,no-pty {public_key.strip()}\n")

    # -- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> SshGitHost:
        """Start the server."""
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Stop the server."""
        self.stop()

    @property
    def pid(self) -> int | None:
        """The PID of the listening sshd, ``None`` when not running."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def start(self) -> None:
        """Start sshd and wait until it greets on its port; idempotent.

        With port 0, a free port is picked (and another one if sshd loses the race
        for it). Raises :class:`SshHostError` with sshd's log when it does not come up.
        """
        if self.pid is not None:
            return
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation
        fixed = self.port != 0
        for _ in range(1 if fixed else _PORT_ATTEMPTS):
            if not fixed:
                self.port = free_port(self.host)
            self._write_config()
            if self._launch():
                return
            if fixed or "Address already in use" not in self.log_text():
                break
        raise SshHostError(f"sshd did not start on {self.host}:{self.port}: {self.log_text()[-2000:]}")

    def stop(self) -> None:
        """Signal sshd (SIGTERM, then SIGKILL) by its PID and reap it; idempotent.

        Sessions already running end with their git command; no new one is accepted.
        """
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=_STOP_TIMEOUT)

    def change_host_key(self) -> None:
        """Restart on the same port with a newly generated host key (a changed host identity)."""
        self.stop()
        self.host_key_path.unlink()
        self.host_key_path.with_suffix(".pub").unlink()
        _keygen(self.host_key_path, comment="test-sshd-host-new")
        self.start()

    # -- what clients need -------------------------------------------------------------

    def url(self, repo: str) -> str:
        """``ssh://USER@127.0.0.1:PORT/<root>/<repo>.git``: the repository served by git-shell."""
        if not _REPO_NAME.match(repo) or ".." in repo.split("/"):
            raise ValueError(f"invalid repository name {repo!r}")
        if self.port == 0:
            raise SshHostError("the server is not started: no port yet")
        return f"ssh://{self.user}@{self.host}:{self.port}{self.root.as_posix()}/{repo}.git"

    @property
    def host_public_key(self) -> str:
        """The server's host key as ``ssh-ed25519 AAAA...`` (no comment)."""
        algorithm, key = self.host_key_path.with_suffix(".pub").read_text().split()[:2]
        return f"{algorithm} {key}"

    @property
    def known_hosts_line(self) -> str:
        """The ``known_hosts`` entry pinning this server: ``[127.0.0.1]:PORT ssh-ed25519 ...``."""
        if self.port == 0:
            raise SshHostError("the server is not started: no port yet")
        return f"[{self.host}]:{self.port} {self.host_public_key}"

    def write_known_hosts(self, path: Path, *, mode: int = 0o644) -> Path:
        """Write :attr:`known_hosts_line` (alone) to ``path``; return ``path``."""
        path = Path(path)
        path.write_text(self.known_hosts_line + "\n")
        path.chmod(mode)
        return path

    def ssh_command(self, known_hosts: Path) -> str:
        """A ``GIT_SSH_COMMAND`` for test helpers: this client key, ``known_hosts``, strict, batch."""
        return (f"ssh -F /dev/null -i {self.client_key_path} -o UserKnownHostsFile={known_hosts} "
                "-o StrictHostKeyChecking=yes -o IdentitiesOnly=yes -o BatchMode=yes")

    # -- inspection -------------------------------------------------------------------

    def log_text(self) -> str:
        """sshd's log so far (``LogLevel VERBOSE``)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def sessions(self) -> int:
        """How many git commands sshd has run (forced-command sessions), since the first start."""
        return len(_SESSION.findall(self.log_text()))

    # -- internals --------------------------------------------------------------------------

    def _write_config(self) -> None:
        self.config_path.write_text("\n".join([
            f"ListenAddress {self.host}",
            f"Port {self.port}",
            f"HostKey {self.host_key_path}",
            f"PidFile {self._pid_file}",
            f"AuthorizedKeysFile {self._authorized_keys}",
            "StrictModes no",
            # As root, no PAM (nothing of the machine's session stack runs). Not as root,
            # sshd can't read /etc/shadow and, without PAM, refuses accounts whose password
            # is locked (CI users often are); with PAM the key alone decides.
            f"UsePAM {'no' if os.geteuid() == 0 else 'yes'}",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            f"AllowUsers {self.user}",
            "AllowTcpForwarding no",
            "AllowAgentForwarding no",
            "X11Forwarding no",
            "PermitTTY no",
            "PrintMotd no",
            "AcceptEnv GIT_PROTOCOL",  # git's wire protocol v2 over ssh
            "LogLevel VERBOSE",
            "",
        ]))

    def _launch(self) -> bool:
        """Start sshd; True once it greets, False when it exited (its log says why)."""
        self._proc = subprocess.Popen(
            [self.sshd, "-D", "-E", str(self.log_path), "-f", str(self.config_path)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C"}, start_new_session=True)
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._proc = None
                return False
            if _greets(self.host, self.port):
                return True
            time.sleep(0.05)
        self.stop()
        return False


def _keygen(path: Path, *, comment: str) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL, capture_output=True)
    path.chmod(0o600)


def _greets(host: str, port: int) -> bool:
    """Whether an SSH server answers on ``host:port`` with its ``SSH-2.0-`` banner."""
    try:
        with socket.create_connection((host, port), timeout=1.0) as sock:
            return sock.recv(8).startswith(b"SSH-")
    except OSError:
        return False
