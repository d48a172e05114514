"""``aliases:`` of a ``--git-config`` repository: validation, matching by Argo CD's rule, hints.

One remote in two spellings: ``flux bootstrap`` writes ``ssh://git@github.com/org/fleet``
while the config says ``https://github.com/org/fleet.git``. An alias is compared exactly
as ``url`` is (argo-cd ``git.SameURL``); the refusal of an unlisted spelling on the same
host and path names the ``aliases:`` line to add; tenancy is the repository's, whatever
spelling found it. The Locator runs on the fake API of ``test_locate`` (no network).
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from crd_objects import as_stored
from test_locate import FakeApi, Files, deploy, record

from gitops_reloader.errors import ConfigError, ManifestNotFound, PolicyDenied
from gitops_reloader.gitops.gitconfig import (
    MAX_ALIAS_CHARS,
    MAX_ALIASES,
    GitConfig,
    RepositoryConfig,
    alias_problem,
    parse_git_config,
)
from gitops_reloader.gitops.locate import (
    ARGOCD_TRACKING_ANNOTATION,
    FLUX_NAME_LABEL,
    FLUX_NAMESPACE_LABEL,
    GIT_REPO_ANNOTATION,
    Locator,
    Method,
)
from gitops_reloader.gitops.remotehead import DefaultBranches

HTTPS = "https://github.com/org/fleet.git"
SSH = "ssh://git@github.com/org/fleet"
SCP = "git@github.com:org/fleet.git"
CONFIG = textwrap.dedent(f"""\
    repositories:
      - name: fleet
        url: {HTTPS}
        aliases: [{SSH}]
      - name: fleet-prod
        url: https://github.com/org/fleet
        branch: prod
      - name: other
        url: https://github.com/org/other.git
    """)


def config_with(aliases: str, *, more: str = "") -> str:
    return (f"repositories:\n  - {{name: fleet, url: '{HTTPS}'}}\n"
            f"  - {{name: other, url: 'https://github.com/org/other', aliases: {aliases}}}\n" + more)


# --------------------------------------------------------------------------- matching


@pytest.mark.parametrize("url", [
    SSH, SCP, "SSH://GIT@GitHub.com/Org/Fleet.git", " git@github.com:org/fleet\n", HTTPS,
    "https://github.com/org/fleet"])
def test_every_spelling_of_the_remote_finds_every_branch_entry(url: str) -> None:
    config = parse_git_config(CONFIG)
    assert [r.name for r in config.by_url(url)] == ["fleet", "fleet-prod"]
    assert [r.name for r in config.by_url(url, branch="prod")] == ["fleet-prod"]


@pytest.mark.parametrize("url", [
    "ssh://git@github.com:22/org/fleet",        # a port, even the default one, is another URL
    "ssh://github.com/org/fleet",               # so is another user
    "ssh://git@github.com/org/fleet/",          # and a trailing slash
    "https://gitlab.com/org/fleet",
    "",
])
def test_an_alias_matches_by_the_same_rule_as_url_and_nothing_more(url: str) -> None:
    assert parse_git_config(CONFIG).by_url(url) == []


def test_aliases_are_shared_by_the_entries_of_one_remote_and_say_which_spelling_matched() -> None:
    config = parse_git_config(CONFIG)
    prod = config.get("fleet-prod")
    assert prod is not None and prod.aliases == ()
    assert config.aliases(prod) == (SSH,)
    assert config.spelling(prod, SCP) == SSH  # scp-like and ssh:// are one spelling for Argo CD
    assert config.spelling(prod, "HTTPS://github.com/org/fleet.git") == prod.url
    assert config.spelling(prod, "https://github.com/org/other") == ""


def test_a_repository_reference_by_alias_resolves_to_the_repository() -> None:
    config = parse_git_config(CONFIG)
    assert config.resolve(SCP) is config.get("fleet")
    assert config.resolve("other") is config.get("other")


def test_a_config_built_in_code_indexes_its_aliases_too() -> None:
    repo = RepositoryConfig(name="fleet", url=HTTPS, aliases=(SCP,))
    config = GitConfig(repositories=(repo,))
    assert config.by_url(SSH) == [repo]
    assert config == GitConfig(repositories=(repo,))


# --------------------------------------------------------------------------- validation


def test_listing_both_ssh_forms_and_the_url_itself_is_harmless() -> None:
    text = f"repositories:\n  - {{name: fleet, url: '{HTTPS}', aliases: ['{SSH}', '{SCP}', '{HTTPS}']}}\n"
    assert parse_git_config(text).repositories[0].aliases == (SSH, SCP, HTTPS)


def test_entries_of_one_remote_may_repeat_an_alias() -> None:
    text = (f"repositories:\n  - {{name: a, url: '{HTTPS}', aliases: ['{SSH}']}}\n"
            f"  - {{name: b, url: '{HTTPS}', branch: prod, aliases: ['{SCP}']}}\n")
    assert [r.name for r in parse_git_config(text).by_url(SSH)] == ["a", "b"]


@pytest.mark.parametrize(("text", "fields"), [
    # an alias naming another repository's url, in either order
    (config_with("['HTTPS://GitHub.com/org/fleet']"), ("repositories[1].aliases[0] (repository other)",
                                 "repositories[0].url (repository fleet)")),
    ("repositories:\n  - {name: a, url: 'https://h/a', aliases: ['https://h/b.git']}\n"
     "  - {name: b, url: 'https://h/b'}\n",
     ("repositories[0].aliases[0] (repository a)", "repositories[1].url (repository b)")),
    # two repositories listing the same alias
    (f"repositories:\n  - {{name: a, url: 'https://h/a', aliases: ['{SSH}']}}\n"
     f"  - {{name: b, url: 'https://h/b', aliases: ['https://h/c', '{SCP}']}}\n",
     ("repositories[1].aliases[1] (repository b)", "repositories[0].aliases[0] (repository a)")),
])
def test_an_alias_of_another_repository_is_a_start_up_error_naming_both(text: str,
                                                                      fields: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_git_config(text, source="/etc/git.yaml")
    message = str(caught.value)
    assert message.startswith("--git-config /etc/git.yaml: ")
    for field in fields:
        assert field in message
    assert "github.com" not in message and "h/b" not in message  # fields, never values


@pytest.mark.parametrize(("aliases", "problem"), [
    ("[ssh://git@github.com/org/other]", None),
    ("['git@github.com:org/other.git', 'https://github.com/org/other']", None),
    ("{url: x}", "must be a list of URLs"),
    ("[7]", "must be a string"),
    ("['']", "must not be empty"),
    ("['ssh://git@h/a b']", "whitespace"),
    ('["ssh://git@h/a\\tb"]', "whitespace"),
    ('["ssh://git@h/a\\x07b"]', "control characters"),
    ("['https://bot:ghp_s3cr3t@github.com/org/other']", "must not carry credentials"),
    ("['https://github.com/%zz']", "not a URL Argo CD can parse"),
    ("['https://[::1/org/other']", "not a URL Argo CD can parse"),
    (f"['https://h/{'a' * MAX_ALIAS_CHARS}']", f"longer than {MAX_ALIAS_CHARS} characters"),
    ("[" + ", ".join(f"'https://h/{i}'" for i in range(MAX_ALIASES + 1)) + "]",
     f"at most {MAX_ALIASES} aliases"),
])
def test_a_malformed_alias_is_an_error_naming_the_repository(aliases: str, problem: str | None) -> None:
    text = f"repositories:\n  - name: other\n    url: https://github.com/org/other\n    aliases: {aliases}\n"
    if problem is None:
        assert parse_git_config(text).repositories[0].aliases
        return
    with pytest.raises(ConfigError) as caught:
        parse_git_config(text)
    message = str(caught.value)
    assert problem in message and "repositories[0].aliases" in message and "(repository other)" in message
    assert "ghp_s3cr3t" not in message and caught.value.__cause__ is None


def test_alias_problem_bounds_the_text_before_parsing_it() -> None:
    assert alias_problem("x" * (MAX_ALIAS_CHARS * 1000)) == f"longer than {MAX_ALIAS_CHARS} characters"
    assert alias_problem("ssh://[" + ":" * (MAX_ALIAS_CHARS - 7)) == (
        "not a URL Argo CD can parse (see docs/gitops-location.md)")


# --------------------------------------------------------------------------- hints


@pytest.mark.parametrize("url", [
    SSH, SCP, "ssh://git@github.com:2222/Org/Fleet.git", "http://github.com/org/fleet/"])
def test_same_host_and_path_in_another_spelling_is_near_and_the_alias_line_is_exact(url: str) -> None:
    config = parse_git_config(f"repositories:\n  - {{name: fleet, url: '{HTTPS}'}}\n"
                              "  - {name: other, url: 'https://github.com/org/other'}\n")
    fleet = config.get("fleet")
    assert fleet is not None
    assert config.same_place(url) == [fleet]
    assert config.alias_line(fleet, url) == f'aliases: ["{url.strip()}"]'


def test_the_alias_line_keeps_the_aliases_already_listed_and_never_offers_credentials() -> None:
    config = parse_git_config(CONFIG)
    fleet = config.get("fleet")
    assert fleet is not None
    assert config.same_place(SCP) == []  # it matches: nothing to hint
    assert [r.name for r in config.same_place("ssh://git@github.com:22/org/fleet")] == ["fleet", "fleet-prod"]
    assert config.alias_line(fleet, "ssh://git@github.com:22/org/fleet") == (
        f'aliases: ["{SSH}", "ssh://git@github.com:22/org/fleet"]')
    assert config.alias_line(fleet, "https://bot:ghp_s3cr3t@github.com/org/fleet") == ""


def test_another_host_or_path_is_not_near() -> None:
    config = parse_git_config(CONFIG)
    assert config.same_place("ssh://git@gitlab.com/org/fleet") == []
    assert config.same_place("ssh://git@github.com/org/fleet-two") == []
    assert config.same_place("not a url") == []


# --------------------------------------------------------------------------- through the Locator


def application(url: str, namespace: str = "ns") -> dict[str, Any]:
    return as_stored({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "web", "namespace": "argocd"},
        "spec": {"project": "default", "source": {"repoURL": url, "path": "apps", "targetRevision": "main",
                                                  "directory": {"recurse": True}},
                 "destination": {"server": "https://kubernetes.default.svc", "namespace": namespace}}})


def flux(url: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {("kustomizations", "flux-system", "apps"): as_stored({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": "apps", "namespace": "flux-system"},
                "spec": {"interval": "10m", "prune": True, "force": False, "path": "./apps",
                         "sourceRef": {"kind": "GitRepository", "name": "fleet"}}}),
            ("gitrepositories", "flux-system", "fleet"): as_stored({
                "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
                "metadata": {"name": "fleet", "namespace": "flux-system"},
                "spec": {"interval": "1m", "timeout": "60s", "url": url, "ref": {"branch": "main"}}})}


ARGO = {ARGOCD_TRACKING_ANNOTATION: "web:apps/Deployment:ns/web"}
FLUX = {FLUX_NAME_LABEL: "apps", FLUX_NAMESPACE_LABEL: "flux-system"}
SOURCES = [("argocd", SCP), ("flux", SSH)]


def resolve(config: GitConfig, engine: str, url: str, namespace: str = "ns") -> Any:
    objects = ({("applications", "argocd", "web"): application(url, namespace)} if engine == "argocd"
               else flux(url))
    found = Locator(config, FakeApi(objects), default_branches=DefaultBranches(lookup=lambda repo: "main"))
    if engine == "argocd":
        return found, found.resolve(record(namespace=namespace, annotations={
            ARGOCD_TRACKING_ANNOTATION: f"web:apps/Deployment:{namespace}/web"}))
    return found, found.resolve(record(namespace=namespace, labels=FLUX))


@pytest.mark.parametrize(("engine", "url"), SOURCES)
def test_application_and_git_repository_in_another_spelling_find_the_repository(engine: str,
                                                                               url: str) -> None:
    _, found = resolve(parse_git_config(CONFIG), engine, url)
    assert (found.repo_name, found.method.value, found.source_url) == ("fleet", engine, url)


@pytest.mark.parametrize(("engine", "url"), SOURCES)
def test_without_the_alias_the_refusal_names_the_line_to_add(engine: str, url: str) -> None:
    config = parse_git_config(f"repositories:\n  - {{name: fleet, url: '{HTTPS}'}}\n")
    with pytest.raises(ManifestNotFound) as caught:
        resolve(config, engine, url)
    message = str(caught.value)
    assert f"deploys from {url}, which is not in --git-config" in message
    assert "repository fleet has the same host and path in another spelling" in message
    assert f'give repository fleet this line in --git-config: aliases: ["{url}"]' in message


def test_a_url_with_credentials_is_never_offered_as_an_alias_nor_echoed() -> None:
    config = parse_git_config(f"repositories:\n  - {{name: fleet, url: '{SSH}'}}\n")
    with pytest.raises(ManifestNotFound) as caught:
        resolve(config, "argocd", "https://bot:ghp_s3cr3t@github.com/org/fleet.git")
    message = str(caught.value)
    assert "ghp_s3cr3t" not in message and "aliases: [" not in message
    assert "its URL carries credentials, which an alias may not hold" in message


def test_a_url_too_long_to_be_an_alias_gets_no_hint() -> None:
    config = parse_git_config(f"repositories:\n  - {{name: fleet, url: '{HTTPS}'}}\n")
    long_url = SSH + "/" * MAX_ALIAS_CHARS
    assert config.same_place(long_url) == [] and config.same_place(long_url[:MAX_ALIAS_CHARS])
    with pytest.raises(ManifestNotFound) as caught:
        resolve(config, "flux", long_url)
    assert str(caught.value).endswith("which is not in --git-config")


def test_an_annotated_url_spelled_as_an_alias_names_the_repository() -> None:
    config = parse_git_config(CONFIG)
    annotations = {GIT_REPO_ANNOTATION: SCP, "gitops-reloader.io/git-path": "apps/web.yaml"}
    found = Locator(config, None).resolve(record(annotations=annotations))
    assert (found.repo_name, found.method, found.source_url) == ("fleet", Method.ANNOTATION, SCP)


TENANTS = textwrap.dedent(f"""\
    repositories:
      - name: fleet
        url: {HTTPS}
        aliases: [{SSH}]
        tenants:
          - {{namespaces: [team-a], paths: ["apps/team-a/**"]}}
    """)


@pytest.mark.parametrize(("engine", "url"), [*SOURCES, ("argocd", HTTPS)])
def test_tenancy_is_the_repositorys_whatever_spelling_found_it(engine: str, url: str) -> None:
    config = parse_git_config(TENANTS)
    files = Files({"apps/web.yaml": deploy("web", "team-a"), "apps/team-a/web.yaml": deploy("web", "team-b"),
                   "apps/team-a/api.yaml": deploy("api", "team-a")})
    denied = "tenancy policy of repository fleet does not let namespace"
    for namespace, name, reason in (("team-a", "web", f"{denied} team-a"),
                                    ("team-b", "web", "namespace team-b may not write to repository fleet"),
                                    ("team-a", "api", None)):
        locator, found = resolve(config, engine, url, namespace=namespace)
        assert found.repo_name == "fleet"
        workload = record(name, namespace=namespace)
        if reason is None:
            assert locator.locate(workload, found, files.index, confirm=True).path == "apps/team-a/api.yaml"
            continue
        with pytest.raises(PolicyDenied, match=reason):
            locator.locate(workload, found, files.index, confirm=True)


# -- Azure DevOps: every spelling Azure hands out, under Argo CD's SameURL rule --------------------

AZURE = textwrap.dedent("""\
    repositories:
      - name: fleet
        url: https://dev.azure.com/acme/fleet/_git/app
        aliases:
          - git@ssh.dev.azure.com:v3/acme/fleet/app       # the SSH clone URL (Flux bootstrap's)
          - https://acme@dev.azure.com/acme/fleet/_git/app  # the HTTPS clone URL Azure shows
          - https://acme.visualstudio.com/fleet/_git/app    # the organisation's old domain
        pullRequest: {host: azure, tokenFile: /t}
    """)


@pytest.mark.parametrize("url", [
    "https://dev.azure.com/acme/fleet/_git/app",
    "https://dev.azure.com/ACME/Fleet/_git/App.git",          # case and .git: Argo CD lower-cases, strips
    "git@ssh.dev.azure.com:v3/acme/fleet/app",
    "ssh://git@ssh.dev.azure.com/v3/acme/fleet/app",          # the same, as ssh://
    "https://acme@dev.azure.com/acme/fleet/_git/app",
    "https://acme.visualstudio.com/fleet/_git/app",
])
def test_azure_devops_spellings_find_the_repository_through_aliases(url: str) -> None:
    config = parse_git_config(AZURE)
    assert [r.name for r in config.by_url(url)] == ["fleet"]


def test_azure_devops_user_in_the_url_is_another_spelling_without_an_alias() -> None:
    # Argo CD's NormalizeGitURL keeps the user of an https URL: Azure's "acme@" form is another
    # repository for it, so it is found only when listed (as above), never guessed.
    without = "".join(line for line in AZURE.splitlines(keepends=True) if "acme@dev.azure.com" not in line)
    config = parse_git_config(without)
    assert config.by_url("https://acme@dev.azure.com/acme/fleet/_git/app") == []
    assert [r.name for r in config.by_url("git@ssh.dev.azure.com:v3/acme/fleet/app")] == ["fleet"]


@pytest.mark.parametrize(("url", "api_url", "repository"), [
    ("https://dev.azure.com/acme/fleet/_git/app", "https://dev.azure.com/acme", "fleet/app"),
    ("https://acme@dev.azure.com/acme/Fleet%20Ops/_git/app", "https://dev.azure.com/acme", "Fleet Ops/app"),
    ("git@ssh.dev.azure.com:v3/acme/fleet/app", "https://dev.azure.com/acme", "fleet/app"),
    ("acme@vs-ssh.visualstudio.com:v3/acme/fleet/app", "https://acme.visualstudio.com", "fleet/app"),
    ("https://acme.visualstudio.com/fleet/_git/app", "https://acme.visualstudio.com", "fleet/app"),
    ("https://dev.azure.com/acme/_git/fleet", "https://dev.azure.com/acme", "fleet/fleet"),
    ("https://tfs.acme.example/tfs/DefaultCollection/ops/_git/app",
     "https://tfs.acme.example/tfs/DefaultCollection", "ops/app"),
])
def test_azure_devops_pull_request_api_and_repository_come_from_the_url(
        url: str, api_url: str, repository: str) -> None:
    repo = parse_git_config(f"repositories:\n  - name: r\n    url: '{url}'\n"
                            "    pullRequest: {host: azure, tokenFile: /t}\n").repositories[0]
    assert repo.pull_request is not None
    assert (repo.pull_request.api_url, repo.pull_request.repository) == (api_url, repository)


def test_azure_devops_without_an_azure_url_needs_api_url_and_repository() -> None:
    text = ("repositories:\n  - name: r\n    url: https://git.example.com/o/r.git\n"
            "    pullRequest: {host: azure, tokenFile: /t}\n")
    with pytest.raises(ConfigError, match=r"pullRequest\.apiUrl: is required for azure"):
        parse_git_config(text)
    with pytest.raises(ConfigError, match="mergeStrategy: must be one of"):
        parse_git_config(AZURE.replace("tokenFile: /t}", "tokenFile: /t, mergeStrategy: octopus}"))
