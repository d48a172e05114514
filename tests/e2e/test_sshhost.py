"""The SSH git host test server: real sshd + git-shell over the HTTP host's bare repositories."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.sshhost import SshGitHost

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]


def git(env: Mapping[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, env=dict(env), capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def client_env(ssh: SshGitHost, known_hosts: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
                "GIT_SSH_COMMAND": ssh.ssh_command(known_hosts),
                "GIT_AUTHOR_NAME": "Tester", "GIT_AUTHOR_EMAIL": "tester@example.com",
                "GIT_COMMITTER_NAME": "Tester", "GIT_COMMITTER_EMAIL": "tester@example.com"})
    return env


def test_ssh_clone_and_push_reach_the_same_bare_repository_as_http(
        tmp_path: Path, githost: GitHostServer, sshgit: SshGitHost) -> None:
    githost.create_repo("app", {"deploy.yaml": "kind: Deployment\n"})
    env = client_env(sshgit, sshgit.write_known_hosts(tmp_path / "known_hosts"))
    url = sshgit.url("app")
    assert url.startswith(f"ssh://{sshgit.user}@127.0.0.1:{sshgit.port}/") and url.endswith("/app.git")
    clone = tmp_path / "clone"
    result = git(env, "clone", "--quiet", url, str(clone))
    assert result.returncode == 0, result.stderr
    assert (clone / "deploy.yaml").read_text() == "kind: Deployment\n"
    (clone / "deploy.yaml").write_text("kind: Deployment\nmetadata: {name: web}\n")
    assert git(env, "commit", "--quiet", "-am", "over ssh", cwd=clone).returncode == 0
    result = git(env, "push", "--quiet", "origin", "HEAD:main", cwd=clone)
    assert result.returncode == 0, result.stderr
    assert githost.log("app")[0][1] == "over ssh"  # the HTTP host's view of the same bare repository
    assert sshgit.sessions() == 2  # upload-pack, receive-pack


def test_git_shell_refuses_anything_but_git_commands(tmp_path: Path, sshgit: SshGitHost) -> None:
    known_hosts = sshgit.write_known_hosts(tmp_path / "known_hosts")
    command = [*sshgit.ssh_command(known_hosts).split(), "-p", str(sshgit.port), f"{sshgit.user}@127.0.0.1",
               "id"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode != 0
    assert "unrecognized command" in result.stderr
    assert "uid=" not in result.stdout


def test_unknown_and_changed_host_keys_are_refused(tmp_path: Path, githost: GitHostServer,
                                                   sshgit: SshGitHost) -> None:
    githost.create_repo("app", {"a": "1"})
    other = tmp_path / "other_known_hosts"
    other.write_text(f"[127.0.0.1]:1 {sshgit.host_public_key}\n")  # some other server only
    result = git(client_env(sshgit, other), "ls-remote", sshgit.url("app"))
    assert result.returncode != 0 and "Host key verification failed" in result.stderr
    assert "No ED25519 host key is known" in result.stderr

    known_hosts = sshgit.write_known_hosts(tmp_path / "known_hosts")
    port, pid = sshgit.port, sshgit.pid
    sshgit.change_host_key()
    assert sshgit.port == port and sshgit.pid != pid
    result = git(client_env(sshgit, known_hosts), "ls-remote", sshgit.url("app"))
    assert result.returncode != 0 and "REMOTE HOST IDENTIFICATION HAS CHANGED" in result.stderr
    assert known_hosts.read_text() != sshgit.known_hosts_line + "\n"  # never rewritten by ssh
    assert git(client_env(sshgit, sshgit.write_known_hosts(known_hosts)), "ls-remote",
               sshgit.url("app")).returncode == 0


def test_stop_ends_the_sshd_process(tmp_path: Path, githost: GitHostServer) -> None:
    ssh = SshGitHost(githost.root, tmp_path / "sshd")
    ssh.start()
    pid = ssh.pid
    assert pid is not None
    ssh.stop()
    assert ssh.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
