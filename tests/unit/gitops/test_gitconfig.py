"""The ``--git-config`` file: parsing, defaults, URL matching, and errors that name fields only."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gitops_reloader.errors import ConfigError
from gitops_reloader.gitops.gitconfig import (
    DEFAULT_COMMIT_MESSAGE,
    CommitAuthor,
    GitHubAppConfig,
    SigningKeyConfig,
    host_and_path,
    load_git_config,
    parse_git_config,
)

FULL = textwrap.dedent("""\
    defaultRepository: fleet
    commitMessage: "chore(reload): {workloads} [{sources}]"
    argocdNamespace: gitops
    repositories:
      - name: fleet
        url: https://git.example.com/platform/fleet.git
        branch: production
        tokenFile: /etc/git/fleet-token
        username: reloader-bot
        author: {name: Reloader Bot, email: bot@example.com}
        paths: [clusters/prod/, ./apps]
      - name: charts
        url: git@git.example.com:platform/charts.git
        sshKeyFile: /etc/git/id_ed25519
        knownHostsFile: /etc/git/known_hosts
        commitMessage: "bump {count} chart values in {repository}"
    """)


def test_full_config_is_parsed_into_frozen_values() -> None:
    config = parse_git_config(FULL)
    fleet, charts = config.repositories
    assert config.default_repository == "fleet" and config.default is fleet
    assert config.argocd_namespace == "gitops"
    assert (fleet.url, fleet.branch, fleet.token_file, fleet.username) == (
        "https://git.example.com/platform/fleet.git", "production", "/etc/git/fleet-token", "reloader-bot")
    assert fleet.author == CommitAuthor("Reloader Bot", "bot@example.com")
    assert fleet.paths == ("clusters/prod", "apps")
    assert fleet.commit_message == "chore(reload): {workloads} [{sources}]"
    assert charts.branch == "main"
    assert (charts.ssh_key_file, charts.known_hosts_file) == ("/etc/git/id_ed25519", "/etc/git/known_hosts")
    assert charts.commit_message == "bump {count} chart values in {repository}"
    assert charts.author == CommitAuthor()
    with pytest.raises(AttributeError):
        fleet.branch = "x"  # type: ignore[misc]


def test_a_single_repository_is_the_default_and_defaults_apply() -> None:
    config = parse_git_config("repositories:\n  - name: only\n    url: https://h/o/r\n")
    assert config.default_repository == "only"
    repo = config.repositories[0]
    assert (repo.branch, repo.paths, repo.commit_message) == ("main", (), DEFAULT_COMMIT_MESSAGE)
    assert config.argocd_namespace == "argocd"


def test_empty_file_means_no_repositories() -> None:
    config = parse_git_config("")
    assert config.repositories == () and config.default is None


def test_several_repositories_without_default_have_none() -> None:
    config = parse_git_config("repositories:\n  - {name: a, url: https://h/a}\n  - {name: b, url: https://h/b}\n")
    assert config.default_repository is None


@pytest.mark.parametrize(("url", "expected"), [
    ("https://GitHub.com/Org/App.git", "github.com/Org/App"),
    ("https://github.com/Org/App/", "github.com/Org/App"),
    ("http://user@github.com/Org/App", "github.com/Org/App"),
    ("ssh://git@github.com/Org/App.git", "github.com/Org/App"),
    ("git@github.com:Org/App.git", "github.com/Org/App"),
    ("https://github.com:443/Org/App", "github.com/Org/App"),
    ("http://127.0.0.1:8080/manifests.git", "127.0.0.1:8080/manifests"),
    ("/srv/git/app.git", "/srv/git/app"),
])
def test_host_and_path_of_a_remote(url: str, expected: str) -> None:
    assert host_and_path(url) == expected


def test_lookup_by_url_and_branch_and_by_name() -> None:
    config = parse_git_config(FULL)
    assert [r.name for r in config.by_url("https://git.example.com/platform/fleet")] == ["fleet"]
    assert [r.name for r in config.by_url("HTTPS://Git.Example.com/Platform/Fleet.git")] == ["fleet"]
    assert [r.name for r in config.by_url("ssh://git@git.example.com/platform/charts")] == ["charts"]
    assert config.by_url("https://git.example.com/platform/fleet", branch="main") == []
    assert config.by_url("https://git.example.com:8443/platform/fleet") == []
    assert config.resolve("charts") is config.repositories[1]
    assert config.resolve("https://git.example.com/platform/fleet.git") is config.repositories[0]
    assert config.resolve("nope") is None


def test_another_transport_is_another_repository_as_for_argocd() -> None:
    config = parse_git_config(FULL)
    assert config.resolve("git@git.example.com:platform/fleet.git") is None
    assert config.by_url("https://git.example.com/platform/charts") == []
    assert [r.name for r in config.same_place("git@git.example.com:platform/fleet.git")] == ["fleet"]
    assert config.same_place("https://git.example.com/platform/fleet") == []


def test_paths_limit_what_may_be_edited() -> None:
    fleet = parse_git_config(FULL).repositories[0]
    assert fleet.allows("clusters/prod/web.yaml") and fleet.allows("apps/x/y.yaml")
    assert not fleet.allows("clusters/production/web.yaml")
    assert not fleet.allows("README.md")


def test_same_url_twice_with_different_branches_is_allowed() -> None:
    config = parse_git_config(textwrap.dedent("""\
        repositories:
          - {name: prod, url: https://h/o/fleet, branch: prod}
          - {name: staging, url: https://h/o/fleet.git, branch: staging}
        """))
    assert [r.name for r in config.by_url("https://h/o/fleet", branch="staging")] == ["staging"]


@pytest.mark.parametrize(("text", "field"), [
    ("repositories: {}", "repositories"),
    ("- a\n- b\n", "the document"),
    ("repositories:\n  - url: https://h/o/r\n", "repositories[0].name"),
    ("repositories:\n  - name: Bad_Name\n    url: https://h/o/r\n", "repositories[0].name"),
    ("repositories:\n  - name: a\n", "repositories[0].url"),
    ("repositories:\n  - name: a\n    url: 7\n", "repositories[0].url"),
    ("repositories:\n  - name: a\n    url: https://h/o/r\n    branch: 'a..b'\n", "repositories[0].branch"),
    ("repositories:\n  - {name: a, url: 'https://h/a'}\n  - {name: a, url: 'https://h/b'}\n",
     "repositories[1].name"),
    ("repositories:\n  - {name: a, url: 'https://h/a'}\n  - {name: b, url: 'https://h/a.git'}\n",
     "repositories[1]"),
    ("defaultRepository: b\nrepositories:\n  - {name: a, url: 'https://h/a'}\n", "defaultRepository"),
    ("repositories:\n  - {name: a, url: 'https://h/a', tokenFile: /t, sshKeyFile: /k}\n",
     "repositories[0]"),
    ("repositories:\n  - {name: a, url: 'https://h/a', author: {email: nobody}}\n",
     "repositories[0].author.email"),
    ("repositories:\n  - {name: a, url: 'https://h/a', paths: ['../up']}\n", "repositories[0].paths[0]"),
    ("repositories:\n  - {name: a, url: 'https://h/a', paths: '/abs'}\n", "repositories[0].paths"),
    ("commitMessage: 'reload {data}'\nrepositories: []\n", "commitMessage"),
    ("commitMessage: 'reload {workloads'\nrepositories: []\n", "commitMessage"),
    ("repositories:\n  - {name: a, url: 'https://h/a', tokenfile: /t}\n", "repositories[0].tokenfile"),
    ("repository: []\n", "repository"),
    ("repositories: [\n", "line"),
])
def test_invalid_configs_name_the_field(text: str, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_git_config(text, source="/etc/gitops-reloader/git.yaml")
    message = str(info.value)
    assert message.startswith("--git-config /etc/gitops-reloader/git.yaml: ")
    assert field in message


def test_errors_never_echo_values_from_the_file() -> None:
    secret_like = "ghp_s3cr3tValueThatMustNotLeak"
    for text in (
        f"repositories:\n  - name: a\n    url: https://h/a\n    token: {secret_like}\n",
        f"repositories:\n  - name: a\n    url: https://h/a\n    branch: '{secret_like}..x'\n",
        f"repositories:\n  - name: a\n    url: 'https://h/a {secret_like}'\n",
        f"repositories: [{secret_like}\n",
    ):
        with pytest.raises(ConfigError) as info:
            parse_git_config(text)
        assert secret_like not in str(info.value)
        assert info.value.__cause__ is None


def test_load_reads_the_file_and_names_it_when_missing(tmp_path: Path) -> None:
    path = tmp_path / "git.yaml"
    path.write_text("repositories:\n  - {name: a, url: 'https://h/a'}\n")
    assert load_git_config(str(path)).default_repository == "a"
    with pytest.raises(ConfigError, match=r"--git-config .*missing\.yaml: cannot read the file"):
        load_git_config(str(tmp_path / "missing.yaml"))


def test_sign_commits_is_off_unless_asked_and_must_be_a_boolean() -> None:
    text = "repositories:\n  - name: a\n    url: https://git.example.com/o/a.git\n"
    assert parse_git_config(text).repositories[0].sign_commits is False
    assert parse_git_config(text + "    signCommits: true\n").repositories[0].sign_commits is True
    with pytest.raises(ConfigError, match=r"repositories\[0\]\.signCommits"):
        parse_git_config(text + "    signCommits: sometimes\n")


def test_signing_key_implies_signing_and_names_its_format() -> None:
    text = "repositories:\n  - name: a\n    url: https://git.example.com/o/a.git\n"
    repo = parse_git_config(text + "    signingKey: {file: /k/signing}\n").repositories[0]
    assert repo.sign_commits is True and repo.signing_key == SigningKeyConfig("/k/signing", "ssh")
    repo = parse_git_config(text + "    signingKey: {file: /k/s.asc, format: openpgp}\n").repositories[0]
    assert repo.signing_key == SigningKeyConfig("/k/s.asc", "openpgp")
    for bad, field in (("{format: ssh}", "signingKey.file"),
                       ("{file: /k, format: x509}", "signingKey.format"),
                       ("{file: /k, passphrase: x}", "signingKey.passphrase")):
        with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
            parse_git_config(text + f"    signingKey: {bad}\n")


def test_github_app_config_replaces_the_token_and_serves_the_pull_request_api() -> None:
    text = ("repositories:\n  - name: a\n    url: https://github.com/o/a.git\n"
            "    githubApp: {appId: 123, privateKeyFile: /k/app.pem}\n")
    repo = parse_git_config(text + "    pullRequest: {host: github}\n").repositories[0]
    assert repo.github_app == GitHubAppConfig("123", "/k/app.pem", "https://api.github.com", 0, "o/a")
    assert repo.pull_request is not None and repo.pull_request.token_file == ""
    assert repo.author_given is False
    ghes = parse_git_config(text.replace("github.com", "ghe.example.com")
                            .replace("/k/app.pem}", "/k/app.pem, installationId: 9, appId: Iv23liAbc}"))
    assert ghes.repositories[0].github_app == GitHubAppConfig(
        "Iv23liAbc", "/k/app.pem", "https://ghe.example.com/api/v3", 9, "o/a")


@pytest.mark.parametrize(("extra", "field"), [
    ("    githubApp: {privateKeyFile: /k}\n", "githubApp.appId"),
    ("    githubApp: {appId: 0, privateKeyFile: /k}\n", "githubApp.appId"),
    ("    githubApp: {appId: 1}\n", "githubApp.privateKeyFile"),
    ("    githubApp: {appId: 1, privateKeyFile: /k, installationId: -3}\n", "githubApp.installationId"),
    ("    githubApp: {appId: 1, privateKeyFile: /k, token: x}\n", "githubApp.token"),
    ("    tokenFile: /t\n    githubApp: {appId: 1, privateKeyFile: /k}\n", "tokenFile or githubApp"),
    ("    githubApp: {appId: 1, privateKeyFile: /k}\n    pullRequest: {host: gitlab, repository: o/a}\n",
     "pullRequest.host"),
])
def test_github_app_config_errors_name_the_field(extra: str, field: str) -> None:
    text = "repositories:\n  - name: a\n    url: https://github.com/o/a.git\n" + extra
    with pytest.raises(ConfigError) as info:
        parse_git_config(text)
    assert field in str(info.value)


@pytest.mark.parametrize(("extra", "expected"), [
    ("", ("podAnnotations", "annotations")),
    ("    annotationKeys: [podAnnotations]\n", ("podAnnotations",)),
    ("    annotationKeys: [extraPodAnnotations, 'a.b/c', extraPodAnnotations]\n",
     ("extraPodAnnotations", "a.b/c")),
])
def test_annotation_keys_default_and_override(extra: str, expected: tuple[str, ...]) -> None:
    text = "repositories:\n  - name: a\n    url: https://git.example.com/o/a.git\n" + extra
    assert parse_git_config(text).repositories[0].annotation_keys == expected


@pytest.mark.parametrize("value", ["[]", "podAnnotations", "['']", "['pod annotations']", "[1]", "[{a: b}]"])
def test_invalid_annotation_keys_name_the_field(value: str) -> None:
    text = ("repositories:\n  - name: a\n    url: https://git.example.com/o/a.git\n"
            f"    annotationKeys: {value}\n")
    with pytest.raises(ConfigError, match=r"repositories\[0\]\.annotationKeys"):
        parse_git_config(text)


def test_a_config_over_one_mebibyte_is_refused_before_parsing() -> None:
    with pytest.raises(ConfigError, match=r"--git-config <git-config>: larger than 1048576 characters"):
        parse_git_config("# " + "x" * 1024 * 1024)
