"""Signed commits with a mounted key: SSH and OpenPGP, verified by ``git verify-commit``.

The keys are made here with ``ssh-keygen`` and ``gpg`` (as a person would before putting
them in a Secret); each commit the controller's repository code makes — the git sink's
commits, the pull-request sink's sealed ``commit-tree`` commits, the commit re-made after
a push race — is verified against the public key alone (an allowed-signers file, a keyring
holding only the public key).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitops_reloader.errors import PushRejected, RepositoryUnusable
from gitops_reloader.gitops.auth import GitAuth
from gitops_reloader.gitops.gitconfig import parse_git_config
from gitops_reloader.gitops.prbranch import PullRequestRepository
from gitops_reloader.gitops.repo import Repository
from gitops_reloader.gitops.signing import Signer, SigningFormat
from gitops_reloader.sinks.gitwiring import open_repository
from gitops_reloader.testing.githost import GitHostServer
from tests.e2e.reload_helpers import GIT_TOKEN

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

REPO = "org/signed"
EMAIL = "gitops-reloader@example.com"


@pytest.fixture
def remote(githost: GitHostServer) -> str:
    return githost.create_repo(REPO, {"deploy.yaml": "kind: Deployment\nreplicas: 1\n"})


@pytest.fixture
def ssh_key(tmp_path: Path) -> Path:
    key = tmp_path / "keys" / "signing"
    key.parent.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", EMAIL, "-f", str(key)], check=True)
    key.chmod(0o400)
    return key


@pytest.fixture
def openpgp_key(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """An armored secret key file and a keyring (GNUPGHOME) holding only its public key."""
    maker = _gnupghome()
    env = {**os.environ, "GNUPGHOME": str(maker)}
    subprocess.run(["gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key",
                    f"Reloader Bot <{EMAIL}>", "ed25519", "sign", "never"], env=env, check=True,
                   capture_output=True)
    secret = tmp_path / "keys" / "signing.asc"
    secret.parent.mkdir(exist_ok=True)
    secret.write_bytes(subprocess.run(["gpg", "--batch", "--armor", "--export-secret-keys", EMAIL], env=env,
                                      check=True, capture_output=True).stdout)
    public = subprocess.run(["gpg", "--batch", "--armor", "--export", EMAIL], env=env, check=True,
                            capture_output=True).stdout
    verifier = _gnupghome()
    subprocess.run(["gpg", "--batch", "--import"], input=public, check=True, capture_output=True,
                   env={**os.environ, "GNUPGHOME": str(verifier)})
    yield secret, verifier
    for home in (maker, verifier):
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env={**os.environ, "GNUPGHOME": str(home)},
                       check=False, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def _gnupghome() -> Path:
    """A keyring under /tmp: gpg-agent's socket path must stay short (not pytest's deep path)."""
    return Path(tempfile.mkdtemp(prefix="gr-test-gpg-"))


def _repository(githost: GitHostServer, tmp_path: Path, signer: Signer, name: str = "wc",
                cls: type[Repository] = Repository) -> Repository:
    signer.check()
    return cls(githost.repo_url(REPO), branch="main", workdir=tmp_path / name,
               auth=GitAuth(username="bot", token=GIT_TOKEN), signer=signer)


def _edit(repo: Repository, replicas: int) -> str:
    repo.sync()
    repo.write("deploy.yaml", f"kind: Deployment\nreplicas: {replicas}\n".encode())
    sha = repo.commit(f"replicas {replicas}", ["deploy.yaml"])
    assert sha is not None
    return sha


def _verify_ssh(githost: GitHostServer, tmp_path: Path, key: Path, sha: str) -> str:
    signers = tmp_path / "allowed_signers"
    signers.write_text(f'{EMAIL} namespaces="git" {key.with_suffix(".pub").read_text().strip()}\n')
    return _verify(githost, sha, ["-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={signers}"], {})


def _verify(githost: GitHostServer, sha: str, config: list[str], env: dict[str, str]) -> str:
    command = ["git", *config, f"--git-dir={githost.bare_path(REPO)}", "verify-commit", "--raw", sha]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_signing_key_ssh_signs_every_commit(
        tmp_path: Path, githost: GitHostServer, remote: str, ssh_key: Path) -> None:
    repo = _repository(githost, tmp_path, Signer(str(ssh_key), SigningFormat.SSH))
    sha = _edit(repo, 2)
    repo.push()
    assert "Good \"git\" signature" in _verify_ssh(githost, tmp_path, ssh_key, sha)


def test_signing_key_openpgp_signs_every_commit(
        tmp_path: Path, githost: GitHostServer, remote: str, openpgp_key: tuple[Path, Path]) -> None:
    secret, verifier = openpgp_key
    signer = Signer(str(secret), SigningFormat.OPENPGP)
    try:
        repo = _repository(githost, tmp_path, signer)
        sha = _edit(repo, 3)
        repo.push()
        status = _verify(githost, sha, [], {"GNUPGHOME": str(verifier)})
        assert "GOODSIG" in status and EMAIL in status
    finally:
        signer.close()


def test_signing_key_push_race_rebuilt_commit_and_sealed_commit_stay_signed(
        tmp_path: Path, githost: GitHostServer, remote: str, ssh_key: Path) -> None:
    signer = Signer(str(ssh_key), SigningFormat.SSH)
    repo = _repository(githost, tmp_path, signer, cls=PullRequestRepository)
    _edit(repo, 4)
    githost.commit_directly(REPO, {"other.yaml": "kind: ConfigMap\n"}, message="a colleague's push")
    with pytest.raises(PushRejected):
        repo.push()
    sha = _edit(repo, 4)  # what the git sink does after a race: sync, re-apply, commit, push
    repo.push()
    assert githost.log(REPO)[0][0] == sha
    _verify_ssh(githost, tmp_path, ssh_key, sha)
    assert isinstance(repo, PullRequestRepository)
    repo.checkout_new_branch_from(sha, "gitops-reloader/web")
    repo.write("deploy.yaml", b"kind: Deployment\nreplicas: 5\n")
    sealed = repo.commit_sealed("replicas 5", ["deploy.yaml"],
                                seal=lambda tree, parents: "Gitops-Reloader-Seal: x")
    assert sealed is not None
    repo.push_branch(sealed, "gitops-reloader/web", expected_remote_sha=None)
    _verify_ssh(githost, tmp_path, ssh_key, sealed)


def test_signing_key_bad_or_protected_key_is_an_unusable_repository_at_start(
        tmp_path: Path, githost: GitHostServer, remote: str) -> None:
    garbage = tmp_path / "garbage"
    garbage.write_text("not a key\n")
    garbage.chmod(0o400)
    protected = tmp_path / "protected"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "a passphrase", "-f", str(protected)],
                   check=True)
    token = tmp_path / "token"
    token.write_text(GIT_TOKEN)
    cases = ((garbage, "ssh"), (protected, "ssh"), (tmp_path / "missing", "ssh"), (garbage, "openpgp"))
    for key, fmt in cases:
        config = parse_git_config(
            f"repositories:\n  - name: signed\n    url: {githost.repo_url(REPO)}\n    tokenFile: {token}\n"
            f"    signingKey: {{file: {key}, format: {fmt}}}\n")
        with pytest.raises(RepositoryUnusable) as unusable:
            open_repository(config.repositories[0], tmp_path / "cache")
        expected = "SigningKeyMissing" if key.name == "missing" else "SigningKeyInvalid"
        assert unusable.value.reason == expected, (key.name, fmt, str(unusable.value))
        assert str(key) in str(unusable.value)
        assert "PRIVATE KEY" not in str(unusable.value)
