"""GitAuth: built from files and validated once; environment and scrubbing are pure."""

from __future__ import annotations

import base64
import os
import shlex
import time
from pathlib import Path

import pytest

from gitops_reloader.errors import ConfigError
from gitops_reloader.gitops.auth import (
    SSH_CONNECT_TIMEOUT,
    CredentialFileError,
    GitAuth,
    Transport,
    display_url,
    git_auth_from_files,
    git_environment,
    scrub,
    transport_of,
    validate_auth,
)

TOKEN = "ghp_unitTestToken0123456789"


def write(path: Path, text: str, mode: int = 0o600) -> str:
    path.write_text(text)
    path.chmod(mode)
    return str(path)


def config_pairs(env: dict[str, str]) -> dict[str, str]:
    count = int(env["GIT_CONFIG_COUNT"])
    return {env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"] for i in range(count)}


# -- GitAuth ----------------------------------------------------------------------------


def test_gitauth_repr_hides_the_token() -> None:
    auth = GitAuth(username="bot", token=TOKEN)
    assert TOKEN not in repr(auth)
    assert "bot" in repr(auth)
    assert GitAuth().username == "git"


def test_gitauth_is_frozen() -> None:
    auth = GitAuth(token=TOKEN)
    with pytest.raises(AttributeError):
        auth.token = "other"  # type: ignore[misc]


# -- transports ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "transport"),
    [
        ("https://github.com/org/repo.git", Transport.HTTP),
        ("HTTP://127.0.0.1:8080/app.git", Transport.HTTP),
        ("ssh://git@github.com/org/repo.git", Transport.SSH),
        ("git@github.com:org/repo.git", Transport.SSH),
        ("github.com:org/repo.git", Transport.SSH),
        ("file:///srv/git/repo.git", Transport.LOCAL),
        ("/srv/git/repo.git", Transport.LOCAL),
        ("./dir:with/colon", Transport.LOCAL),
    ],
)
def test_transport_of(url: str, transport: Transport) -> None:
    assert transport_of(url) is transport


# -- git_auth_from_files -------------------------------------------------------------------


def test_token_file_is_read_and_stripped(tmp_path: Path) -> None:
    token_file = write(tmp_path / "token", f"  {TOKEN}\n")
    auth = git_auth_from_files(token_file=token_file, username="x-access-token")
    assert auth == GitAuth(username="x-access-token", token=TOKEN)


def test_username_defaults_to_git(tmp_path: Path) -> None:
    auth = git_auth_from_files(token_file=write(tmp_path / "token", TOKEN))
    assert auth.username == "git"


def test_no_files_mean_a_public_repository() -> None:
    assert git_auth_from_files() == GitAuth()
    assert git_auth_from_files(url="https://example.com/public.git") == GitAuth()


@pytest.mark.parametrize(
    ("content", "complaint"),
    [("", "empty"), ("  \n\t", "empty"), (f"{TOKEN}\nsecond", "more than one line")],
)
def test_bad_token_files_are_named_not_shown(tmp_path: Path, content: str, complaint: str) -> None:
    token_file = write(tmp_path / "token", content)
    with pytest.raises(ConfigError, match=complaint) as refused:
        git_auth_from_files(token_file=token_file)
    assert token_file in str(refused.value)
    assert TOKEN not in str(refused.value)


def test_missing_token_file_is_a_config_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    with pytest.raises(ConfigError, match="cannot read") as refused:
        git_auth_from_files(token_file=missing)
    assert missing in str(refused.value)
    assert refused.value.__cause__ is None


def test_ssh_needs_both_key_and_known_hosts(tmp_path: Path) -> None:
    key = write(tmp_path / "id", "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-key-body\n")
    known = write(tmp_path / "known_hosts", "github.com ssh-ed25519 AAAA\n", 0o644)
    with pytest.raises(ConfigError, match="known_hosts"):
        git_auth_from_files(ssh_key_file=key)
    with pytest.raises(ConfigError, match="SSH key"):
        git_auth_from_files(known_hosts_file=known)

    auth = git_auth_from_files(
        ssh_key_file=key, known_hosts_file=known, url="git@github.com:org/repo.git"
    )
    assert auth == GitAuth(ssh_key_path=key, known_hosts_path=known)


def test_ssh_key_errors_never_show_the_key(tmp_path: Path) -> None:
    known = write(tmp_path / "known_hosts", "host ssh-ed25519 AAAA\n")
    empty_known = write(tmp_path / "empty_known_hosts", "")
    key = write(tmp_path / "id", "secret-key-body")

    with pytest.raises(ConfigError, match="empty") as empty:
        git_auth_from_files(ssh_key_file=key, known_hosts_file=empty_known)
    with pytest.raises(ConfigError, match="cannot read") as missing:
        git_auth_from_files(ssh_key_file=str(tmp_path / "nope"), known_hosts_file=known)
    for error in (empty, missing):
        assert "secret-key-body" not in str(error.value)


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_ssh_key_readable_by_others_is_refused_like_ssh_does(tmp_path: Path) -> None:
    known = write(tmp_path / "known_hosts", "host ssh-ed25519 AAAA\n")
    key = write(tmp_path / "id", "secret-key-body", mode=0o644)
    with pytest.raises(ConfigError, match="0644") as refused:
        git_auth_from_files(ssh_key_file=key, known_hosts_file=known)
    assert "defaultMode" in str(refused.value)
    assert "secret-key-body" not in str(refused.value)


@pytest.mark.parametrize(
    ("which", "mode", "reason"),
    [
        ("key", None, "SshKeyMissing"),
        ("key", 0o640, "SshKeyPermissions"),
        ("empty-key", 0o600, "SshKeyInvalid"),
        ("known_hosts", None, "KnownHostsMissing"),
        ("empty-known_hosts", 0o644, "KnownHostsEmpty"),
        ("token", None, "TokenFileMissing"),
        ("empty-token", 0o600, "TokenFileInvalid"),
    ],
)
def test_credential_file_errors_say_which_file_and_why(tmp_path: Path, which: str, mode: int | None,
                                                       reason: str) -> None:
    """A reason word for metrics and Events, the path; still a ConfigError for callers."""
    files = {"ssh_key_file": write(tmp_path / "key", "secret-key-body"),
             "known_hosts_file": write(tmp_path / "known_hosts", "host ssh-ed25519 AAAA\n", 0o644)}
    name = which.removeprefix("empty-")
    bad = tmp_path / f"bad-{name}"
    if mode is not None:
        write(bad, "" if which.startswith("empty-") else "secret-key-body", mode)
    argument = {"key": "ssh_key_file", "known_hosts": "known_hosts_file", "token": "token_file"}[name]
    if name == "token":
        files = {}
    files[argument] = str(bad)
    with pytest.raises(CredentialFileError) as refused:
        git_auth_from_files(**files)
    assert isinstance(refused.value, ConfigError)
    assert (refused.value.reason, refused.value.path) == (reason, str(bad))
    assert str(bad) in str(refused.value) and "secret-key-body" not in str(refused.value)


def test_files_are_validated_against_the_url(tmp_path: Path) -> None:
    token_file = write(tmp_path / "token", TOKEN)
    with pytest.raises(ConfigError, match="SSH"):
        git_auth_from_files(token_file=token_file, url="ssh://git@example.com/org/repo.git")


# -- validate_auth -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("auth", "url"),
    [
        (GitAuth(token=TOKEN), "https://example.com/org/repo.git"),
        (GitAuth(), "https://example.com/public.git"),
        (GitAuth(ssh_key_path="/k", known_hosts_path="/kh"), "git@example.com:o/r.git"),
        (GitAuth(), "file:///srv/repo.git"),
    ],
)
def test_valid_combinations(auth: GitAuth, url: str) -> None:
    validate_auth(auth, url)


@pytest.mark.parametrize(
    ("auth", "url", "complaint"),
    [
        (GitAuth(ssh_key_path="/k", known_hosts_path="/kh"), "https://h/o/r.git", "only an SSH"),
        (GitAuth(token=TOKEN), "ssh://git@h/o/r.git", "SSH"),
        (GitAuth(ssh_key_path="/k"), "git@h:o/r.git", "known_hosts"),
        (GitAuth(), f"https://bot:{TOKEN}@h/o/r.git", "contains credentials"),
    ],
)
def test_invalid_combinations(auth: GitAuth, url: str, complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint) as refused:
        validate_auth(auth, url)
    assert TOKEN not in str(refused.value)


# -- git_environment ---------------------------------------------------------------------------


def test_https_token_goes_into_a_header_scoped_to_the_origin() -> None:
    auth = GitAuth(username="bot", token=TOKEN)
    env = git_environment(auth, "https://git.example.com:8443/org/repo.git")

    assert env["GIT_TERMINAL_PROMPT"] == "0"
    expected = base64.b64encode(f"bot:{TOKEN}".encode()).decode()
    assert config_pairs(env) == {
        "credential.helper": "",
        "http.https://git.example.com:8443/.extraHeader": f"Authorization: Basic {expected}",
    }
    for key, value in env.items():
        if not key.startswith("GIT_CONFIG_VALUE_"):
            assert TOKEN not in value and expected not in value, key
    assert "GIT_SSH_COMMAND" not in env


def test_public_https_gets_no_header() -> None:
    env = git_environment(GitAuth(), "https://example.com/public.git")
    assert config_pairs(env) == {"credential.helper": ""}
    assert env["GIT_TERMINAL_PROMPT"] == "0"


def test_ssh_command_pins_key_and_known_hosts() -> None:
    auth = GitAuth(ssh_key_path="/etc/git secret/id", known_hosts_path="/etc/git/known_hosts")
    env = git_environment(auth, "git@github.com:org/repo.git")

    argv = shlex.split(env["GIT_SSH_COMMAND"])
    assert argv[:3] == ["ssh", "-i", "/etc/git secret/id"]
    options = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-o"]
    assert "UserKnownHostsFile=/etc/git/known_hosts" in options
    assert "StrictHostKeyChecking=yes" in options
    assert "IdentitiesOnly=yes" in options
    assert "BatchMode=yes" in options
    assert not any(key.endswith("extraHeader") for key in config_pairs(env))


def test_ssh_trusts_only_the_given_known_hosts_never_writes_it_and_never_hangs() -> None:
    auth = GitAuth(ssh_key_path="/k", known_hosts_path="/kh")
    argv = shlex.split(git_environment(auth, "ssh://git@h:2222/o/r.git")["GIT_SSH_COMMAND"])
    assert argv[argv.index("-F") + 1] == "/dev/null"  # no ssh_config can loosen the options
    options = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-o"]
    expected = ("GlobalKnownHostsFile=/dev/null", "UpdateHostKeys=no",
                f"ConnectTimeout={SSH_CONNECT_TIMEOUT}", "ServerAliveInterval=15", "ServerAliveCountMax=4")
    for option in expected:
        assert option in options
    strict = [o for o in options if o.startswith("StrictHostKeyChecking=")]
    assert strict == ["StrictHostKeyChecking=yes"]


def test_extra_config_comes_after_the_credentials_config() -> None:
    env = git_environment(GitAuth(), "ssh://git@h/o/r.git", extra_config=[("safe.directory", "/cache/app")])
    assert config_pairs(env) == {"credential.helper": "", "safe.directory": "/cache/app"}


def test_token_is_not_sent_to_ssh_remotes_nor_the_key_to_https() -> None:
    auth = GitAuth(token=TOKEN, ssh_key_path="/k", known_hosts_path="/kh")
    ssh_env = git_environment(auth, "ssh://git@h/o/r.git")
    https_env = git_environment(auth, "https://h/o/r.git")
    assert TOKEN not in "".join(ssh_env.values())
    assert all("extraheader" not in k.lower() for k in config_pairs(ssh_env))
    assert "GIT_SSH_COMMAND" not in https_env


# -- scrub -------------------------------------------------------------------------------------


def test_scrub_removes_the_token_in_every_form() -> None:
    auth = GitAuth(username="bot", token=TOKEN)
    basic = base64.b64encode(f"bot:{TOKEN}".encode()).decode()
    text = (
        f"token {TOKEN}; header Authorization: Basic {basic}; "
        f"unpadded {basic.rstrip('=')}; url https://bot:{TOKEN}@h/o/r.git"
    )
    cleaned = scrub(text, auth)
    assert TOKEN not in cleaned
    assert basic not in cleaned and basic.rstrip("=") not in cleaned
    assert "https://***@h/o/r.git" in cleaned
    assert "***" in cleaned


def test_scrub_removes_url_credentials_even_without_a_token() -> None:
    text = "fatal: unable to access 'https://user:hunter2@example.com/r.git/': 403"
    assert scrub(text, GitAuth()) == "fatal: unable to access 'https://***@example.com/r.git/': 403"


@pytest.mark.parametrize("text", ["a" * 64000, "a." * 32000, "a-b+" * 16000, "x://" * 16000],
                         ids=["letters", "dotted", "scheme-chars", "many-schemes"])
def test_scrub_is_linear_on_hostile_git_output(text: str) -> None:
    # git output quotes repository content; Python's re took 0.5 s on 16 KB of letters.
    start = time.perf_counter()
    assert scrub(text, GitAuth()) == text
    assert time.perf_counter() - start < 0.5


def test_scrub_url_encoded_token() -> None:
    auth = GitAuth(token="p@ss/word:1")
    assert scrub("x p%40ss%2Fword%3A1 y", auth) == "x *** y"


def test_scrub_leaves_other_text_alone() -> None:
    text = "error: failed to push some refs to 'https://example.com/o/r.git'"
    assert scrub(text, GitAuth(token=TOKEN)) == text
    assert scrub(text, GitAuth()) == text


def test_display_url_hides_credentials() -> None:
    assert display_url(f"https://bot:{TOKEN}@h/o.git") == "https://***@h/o.git"
    assert display_url("git@github.com:o/r.git") == "git@github.com:o/r.git"
