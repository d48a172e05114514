"""Every package the code and the tests import is declared in pyproject.toml.

A package that arrives only through another one's dependencies (cryptography came with
kubernetes-validate's) breaks ``pip install -e '.[test]'`` the day that other package drops it.
Each third-party module imported anywhere under ``gitops_reloader/``, ``tests/`` and ``bench/``
must belong to a distribution named in ``dependencies`` or the ``test`` extra.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
TREES = ("gitops_reloader", "tests", "bench")


def imported_top_level(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def local_modules() -> set[str]:
    """The project's own packages and the test helper modules (tests/ is on pythonpath)."""
    local = {"gitops_reloader", "bench", "tests"}
    for tree in TREES:
        local.update(p.stem for p in (ROOT / tree).rglob("*.py"))
    return local


def declared() -> set[str]:
    project = PYPROJECT["project"]
    specs = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    return {canonicalize_name(Requirement(spec).name) for spec in specs}


def test_every_imported_package_is_declared() -> None:
    modules: set[str] = set()
    for tree in TREES:
        for path in (ROOT / tree).rglob("*.py"):
            modules |= imported_top_level(path)
    third_party = sorted(modules - set(sys.stdlib_module_names) - local_modules() - {"__future__"})
    owners = metadata.packages_distributions()
    undeclared = {module: owners.get(module, ["?"]) for module in third_party
                  if not {canonicalize_name(d) for d in owners.get(module, [])} & declared()}
    assert undeclared == {}, f"imported but not declared in pyproject.toml: {undeclared}"
