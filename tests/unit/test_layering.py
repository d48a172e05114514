"""The import direction of DESIGN.md, checked on every module's imports (a test, not a hope)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "gitops_reloader"


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; relative imports resolved)."""
    tree = ast.parse(path.read_text())
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.rsplit(".", node.level)[0]
                found.add(f"{base}.{node.module}" if node.module else base)
            elif node.module:
                found.add(node.module)
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


def name_of(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


def uses(path: Path, prefix: str) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for name in imports_of(path))


PURE = ("gitops_reloader.model", "gitops_reloader.hashing", "gitops_reloader.policy",
        "gitops_reloader.index", "gitops_reloader.control.changes", "gitops_reloader.csi",
        "gitops_reloader.shard", "gitops_reloader.membership", "gitops_reloader.rollout.completion",
        "gitops_reloader.usedkeys", "gitops_reloader.rollout.follow", "gitops_reloader.rollout.census",
        "gitops_reloader.ledger", "gitops_reloader.backoff", "gitops_reloader.durations",
        "gitops_reloader.redaction", "gitops_reloader.documents")
IO_LIBRARIES = ("kubernetes", "git", "httpx", "ruamel", "urllib3")


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_import_no_io_library(module: str) -> None:
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    assert not [lib for lib in IO_LIBRARIES if uses(path, lib)]


def test_gitops_knows_nothing_of_the_controller() -> None:
    offenders = [name_of(p) for p in MODULES if name_of(p).startswith("gitops_reloader.gitops")
                 and (uses(p, "gitops_reloader.controller") or uses(p, "gitops_reloader.sinks"))]
    assert offenders == []


def test_only_demo_and_testing_import_the_testing_package() -> None:
    offenders = [name_of(p) for p in MODULES
                 if uses(p, "gitops_reloader.testing")
                 and not name_of(p).startswith("gitops_reloader.testing")
                 and name_of(p) != "gitops_reloader.demo"]
    assert offenders == []


@pytest.mark.parametrize(("library", "allowed"), [
    ("git", ("gitops_reloader.gitops.repo",)),
    ("ruamel", ("gitops_reloader.gitops.yamledit",)),
    ("re2", ("gitops_reloader.regex",)),
    ("jwt", ("gitops_reloader.gitops.hosts.githubapp", "gitops_reloader.testing")),
    ("httpx", ("gitops_reloader.gitops.hosts", "gitops_reloader.sinks.webhook",
               "gitops_reloader.observability.alerts", "gitops_reloader.testing")),
    ("kubernetes", ("gitops_reloader.kube", "gitops_reloader.app", "gitops_reloader.testing")),
])
def test_each_third_party_library_lives_in_its_adapter(library: str, allowed: tuple[str, ...]) -> None:
    offenders = [name_of(p) for p in MODULES if uses(p, library)
                 and not any(name_of(p) == a or name_of(p).startswith(a + ".") for a in allowed)]
    assert offenders == []


def test_a_sink_never_calls_back_into_the_controller() -> None:
    offenders = [name_of(p) for p in MODULES
                 if name_of(p).startswith("gitops_reloader.sinks")
                 and (uses(p, "gitops_reloader.controller") or uses(p, "gitops_reloader.control"))]
    assert offenders == []


def test_the_controllers_pieces_never_import_the_wiring() -> None:
    offenders = [name_of(p) for p in MODULES
                 if name_of(p).startswith("gitops_reloader.control.")
                 and uses(p, "gitops_reloader.controller")]
    assert offenders == []


@pytest.mark.parametrize(("lower", "upper"), [
    ("gitops_reloader.state", "gitops_reloader.control"),
    ("gitops_reloader.kube", "gitops_reloader.observability"),
    ("gitops_reloader.kube", "gitops_reloader.control"),
])
def test_imports_never_run_back_up_the_layers(lower: str, upper: str) -> None:
    """The record of what is owed (state/) does not reach into the controller's pieces, and the
    API layer (kube/) into logging or the controller: what both share lives below them."""
    offenders = [name_of(p) for p in MODULES if name_of(p).startswith(lower + ".") and uses(p, upper)]
    assert offenders == []
