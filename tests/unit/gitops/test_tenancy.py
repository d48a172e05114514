"""Tenancy decisions (pure) and the ``tenants`` field of ``--git-config``, table-driven."""

from __future__ import annotations

import pytest

from gitops_reloader.errors import ConfigError
from gitops_reloader.gitops.gitconfig import RepositoryConfig, parse_git_config
from gitops_reloader.gitops.tenancy import DocumentIdentity, may_edit, may_target, may_use, may_write

SHARED = parse_git_config("""
repositories:
  - name: fleet
    url: https://git.example.com/platform/fleet.git
    tenants:
      - namespaces: [team-a, "team-a-*"]
        paths: ["apps/team-a/**", "charts/team-a/values*.yaml"]
        documentNamespace: team-a
      - namespaces: [team-b]
        paths: ["apps/team-b/**"]
      - namespaces: [team-b]
        paths: ["apps/team-b/base/**"]
        documentNamespace: team-b
  - name: open
    url: https://git.example.com/platform/open.git
""")
FLEET = SHARED.get("fleet")
OPEN = SHARED.get("open")
assert FLEET is not None and OPEN is not None


def repo(name: str) -> RepositoryConfig:
    return FLEET if name == "fleet" else OPEN  # type: ignore[return-value]


@pytest.mark.parametrize(("name", "namespace", "allowed"), [
    ("fleet", "team-a", True),
    ("fleet", "team-a-dev", True),
    ("fleet", "team-b", True),
    ("fleet", "team-c", False),
    ("fleet", "team-ab", False),
    ("open", "team-c", True),
])
def test_may_use(name: str, namespace: str, allowed: bool) -> None:
    decision = may_use(repo(name), namespace)
    assert bool(decision) is allowed
    assert allowed or (namespace in decision.reason and name in decision.reason)


@pytest.mark.parametrize(("name", "namespace", "path", "allowed"), [
    ("fleet", "team-a", "apps/team-a/web.yaml", True),
    ("fleet", "team-a-dev", "apps/team-a/dev/web.yaml", True),
    ("fleet", "team-a", "charts/team-a/values-prod.yaml", True),
    ("fleet", "team-a", "charts/team-a/Chart.yaml", False),
    ("fleet", "team-a", "apps/team-b/web.yaml", False),
    ("fleet", "team-b", "apps/team-a/web.yaml", False),
    ("fleet", "team-c", "apps/team-a/web.yaml", False),
    ("fleet", "team-a", "apps/team-a/../team-b/web.yaml", False),
    ("fleet", "team-a", "/apps/team-a/web.yaml", False),
    ("open", "anyone", "apps/team-b/web.yaml", True),
    ("open", "anyone", "apps/./web.yaml", False),
])
def test_may_write(name: str, namespace: str, path: str, allowed: bool) -> None:
    assert bool(may_write(repo(name), namespace, path)) is allowed


@pytest.mark.parametrize(("name", "namespace", "path", "document", "deploy_namespace", "allowed"), [
    # exact identity
    ("fleet", "team-a", "apps/team-a/web.yaml", ("Deployment", "web", "team-a"), None, True),
    ("fleet", "team-a", "apps/team-a/web.yaml", ("Deployment", "web", "team-b"), None, False),
    ("fleet", "team-a", "apps/team-a/web.yaml", ("Deployment", "api", "team-a"), None, False),
    ("fleet", "team-a", "apps/team-a/web.yaml", ("StatefulSet", "web", "team-a"), None, False),
    ("open", "team-a", "apps/web.yaml", ("Deployment", "web", "team-b"), None, False),
    # the path policy comes first, even for a document naming the namespace
    ("fleet", "team-a", "apps/team-b/web.yaml", ("Deployment", "web", "team-a"), None, False),
    # namespace-less documents: documentNamespace of an entry covering the file decides
    ("fleet", "team-a", "apps/team-a/web.yaml", ("Deployment", "web", None), None, True),
    ("fleet", "team-a-dev", "apps/team-a/web.yaml", ("Deployment", "web", None), None, False),
    ("fleet", "team-a-dev", "apps/team-a/web.yaml", ("Deployment", "web", None), "team-a-dev", False),
    ("fleet", "team-b", "apps/team-b/base/web.yaml", ("Deployment", "web", None), None, True),
    # ... else the Argo CD destination / Flux targetNamespace
    ("fleet", "team-b", "apps/team-b/web.yaml", ("Deployment", "web", None), None, False),
    ("fleet", "team-b", "apps/team-b/web.yaml", ("Deployment", "web", None), "team-b", True),
    ("fleet", "team-b", "apps/team-b/web.yaml", ("Deployment", "web", None), "team-a", False),
    ("open", "team-a", "apps/web.yaml", ("Deployment", "web", None), None, False),
    ("open", "team-a", "apps/web.yaml", ("Deployment", "web", None), "team-a", True),
])
def test_may_edit(name: str, namespace: str, path: str, document: tuple[str, str, str | None],
                  deploy_namespace: str | None, allowed: bool) -> None:
    decision = may_edit(repo(name), namespace=namespace, kind="Deployment", name="web", path=path,
                        document=DocumentIdentity(*document), deploy_namespace=deploy_namespace)
    assert bool(decision) is allowed
    if not allowed:
        assert decision.reason
        # The reason names the workload's own data, never the other tenant's namespace.
        other = document[2]
        assert other is None or other == namespace or other not in decision.reason


@pytest.mark.parametrize(("name", "namespace", "path", "scope", "allowed"), [
    # with tenants: the path policy alone
    ("fleet", "team-a", "charts/team-a/values.yaml", None, True),
    ("fleet", "team-a", "charts/team-b/values.yaml", ("",), False),
    ("fleet", "team-b", "charts/team-a/values.yaml", None, False),
    # without tenants: only inside the Argo CD / Flux path that deploys the workload
    ("open", "team-a", "charts/web/values.yaml", ("charts/web",), True),
    ("open", "team-a", "charts/web/values.yaml", ("charts/web/",), True),
    ("open", "team-a", "charts/webx/values.yaml", ("charts/web",), False),
    ("open", "team-a", "charts/other/values.yaml", ("charts/web",), False),
    ("open", "team-a", "values.yaml", ("",), True),
    ("open", "team-a", "charts/web/values.yaml", None, False),
])
def test_may_target(name: str, namespace: str, path: str, scope: tuple[str, ...] | None,
                    allowed: bool) -> None:
    decision = may_target(repo(name), namespace, path, scope)
    assert bool(decision) is allowed
    assert allowed or "tenants" in decision.reason


def test_tenants_are_parsed_into_rules() -> None:
    assert len(FLEET.tenants) == 3
    first = FLEET.tenants[0]
    assert [g.pattern for g in first.namespaces] == ["team-a", "team-a-*"]
    assert first.document_namespace == "team-a"
    assert FLEET.tenants[1].document_namespace is None
    assert OPEN.tenants == ()


def config_with(tenants: str) -> str:
    return f"repositories:\n  - name: r\n    url: https://h/r\n    tenants: {tenants}\n"


@pytest.mark.parametrize(("tenants", "field"), [
    ("[]", "repositories[0].tenants: must be a non-empty list"),
    ("{namespaces: [a]}", "repositories[0].tenants: must be a non-empty list"),
    ("[x]", "repositories[0].tenants[0]: must be a map"),
    ("[{namespaces: [a], paths: ['**'], other: 1}]", "unknown field repositories[0].tenants[0].other"),
    ("[{paths: ['**']}]", "repositories[0].tenants[0].namespaces: must be a non-empty list"),
    ("[{namespaces: [], paths: ['**']}]", "repositories[0].tenants[0].namespaces: must be a non-empty"),
    ("[{namespaces: [a]}]", "repositories[0].tenants[0].paths: must be a non-empty list"),
    ("[{namespaces: [Team_A], paths: ['**']}]", "repositories[0].tenants[0].namespaces[0]: a namespace"),
    ("[{namespaces: ['a/b'], paths: ['**']}]", "repositories[0].tenants[0].namespaces[0]: a namespace"),
    ("[{namespaces: [a], paths: ['../x/**']}]", "repositories[0].tenants[0].paths[0]: must be a relative"),
    ("[{namespaces: [a], paths: ['/x/**']}]", "repositories[0].tenants[0].paths[0]: must be a relative"),
    ("[{namespaces: [a], paths: ['x//y']}]", "repositories[0].tenants[0].paths[0]: must be a relative"),
    ("[{namespaces: [a], paths: ['x/a**']}]", "repositories[0].tenants[0].paths[0]: '**' must be a whole"),
    ("[{namespaces: [a], paths: [1]}]", "repositories[0].tenants[0].paths[0]: must be a string"),
    ("[{namespaces: [a], paths: ['**'], documentNamespace: 'B'}]",
     "repositories[0].tenants[0].documentNamespace: not a valid namespace name"),
])
def test_invalid_tenants_name_the_field(tenants: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_git_config(config_with(tenants), source="cfg.yaml")
    assert f"--git-config cfg.yaml: {field}" in str(caught.value)


def test_a_leading_dot_slash_in_a_path_pattern_is_dropped() -> None:
    config = parse_git_config(config_with("[{namespaces: [a], paths: ['./apps/**']}]"))
    r = config.get("r")
    assert r is not None and may_write(r, "a", "apps/web.yaml")
