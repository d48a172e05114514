"""Start-up checks of one repository's mounts: credential files and the clone directory."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from gitops_reloader.errors import RepositoryUnusable
from gitops_reloader.gitops.auth import GitAuth
from gitops_reloader.gitops.gitconfig import RepositoryConfig
from gitops_reloader.gitops.preflight import check_api_token, check_repository, check_workdir

URL = "ssh://git@git.example.com:2222/org/app.git"


@pytest.fixture
def ssh_files(tmp_path: Path) -> tuple[Path, Path]:
    key = tmp_path / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-key-body\n")
    key.chmod(0o400)
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("[git.example.com]:2222 ssh-ed25519 AAAA\n")
    return key, known_hosts


def repo(key: Path | str, known_hosts: Path | str, url: str = URL) -> RepositoryConfig:
    return RepositoryConfig(name="app", url=url, ssh_key_file=str(key), known_hosts_file=str(known_hosts))


def test_good_files_and_a_clone_directory_to_be_created_pass(tmp_path: Path,
                                                             ssh_files: tuple[Path, Path]) -> None:
    key, known_hosts = ssh_files
    auth = check_repository(repo(key, known_hosts), tmp_path / "cache" / "deeper" / "app")
    assert auth == GitAuth(ssh_key_path=str(key), known_hosts_path=str(known_hosts))
    assert not (tmp_path / "cache").exists()  # checking creates nothing


def test_a_bad_credential_file_names_repository_reason_and_file(tmp_path: Path,
                                                                ssh_files: tuple[Path, Path]) -> None:
    key, _ = ssh_files
    missing = tmp_path / "no-known-hosts"
    with pytest.raises(RepositoryUnusable) as refused:
        check_repository(repo(key, missing), tmp_path / "cache" / "app")
    problem = refused.value
    assert (problem.repository, problem.reason, problem.path) == ("app", "KnownHostsMissing", str(missing))
    assert str(missing) in str(problem) and not problem.retryable
    assert problem.__cause__ is None and "secret-key-body" not in str(problem)


def test_credentials_that_do_not_fit_the_url_are_incomplete(tmp_path: Path) -> None:
    with pytest.raises(RepositoryUnusable) as refused:
        check_repository(RepositoryConfig(name="app", url=URL), tmp_path / "app")
    assert refused.value.reason == "CredentialsIncomplete"
    assert "known_hosts" in str(refused.value)


@pytest.mark.parametrize("where", ["clone", "cache"])
def test_a_file_where_the_clone_directory_belongs_is_not_writable(tmp_path: Path, where: str,
                                                                  ssh_files: tuple[Path, Path]) -> None:
    cache = tmp_path / "cache"
    if where == "clone":
        cache.mkdir()
        (cache / "app").write_text("not a directory")
        blocked = cache / "app"
    else:
        cache.write_text("not a directory")
        blocked = cache
    with pytest.raises(RepositoryUnusable) as refused:
        check_repository(repo(*ssh_files), cache / "app")
    assert (refused.value.reason, refused.value.path) == ("CacheNotWritable", str(blocked))
    assert "--git-cache-dir" in str(refused.value)


def test_an_existing_clone_directory_passes(tmp_path: Path) -> None:
    (tmp_path / "app" / ".git").mkdir(parents=True)
    check_workdir("app", tmp_path / "app")


def test_the_api_token_file_is_checked_as_part_of_pull_requests(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("glpat-unit-token\n")
    config = repo("k", "kh")
    assert check_api_token(config, str(token)) == "glpat-unit-token"
    with pytest.raises(RepositoryUnusable) as refused:
        check_api_token(config, str(tmp_path / "nope"))
    assert refused.value.reason == "TokenFileMissing" and str(refused.value).startswith("pullRequest: ")


def test_ssh_needs_a_user_database_entry_for_the_process_uid(tmp_path: Path, ssh_files: tuple[Path, Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenSSH exits with "No user exists for uid N" (OpenShift's random uids): said at start-up."""
    known = {entry.pw_uid for entry in pwd.getpwall()}
    unknown = next(uid for uid in range(1_000_000_000, 1_000_001_000) if uid not in known)
    monkeypatch.setattr(os, "getuid", lambda: unknown)
    with pytest.raises(RepositoryUnusable) as refused:
        check_repository(repo(*ssh_files), tmp_path / "app")
    assert refused.value.reason == "SshNoUser" and f"uid {unknown}" in str(refused.value)
    https = RepositoryConfig(name="app", url="https://git.example.com/org/app.git")
    assert check_repository(https, tmp_path / "app") == GitAuth()  # only ssh needs it
