"""The package's modules import each other without a circle (issue 28, "Structure").

Every module of ``gitops_reloader/`` is parsed with :mod:`ast`; every ``import`` and
``from … import`` counts, relative ones resolved, those under ``if TYPE_CHECKING:`` and
inside functions included (a circle a type checker or a late import hides is still one).
``from package import name`` names the submodule when ``name`` is one, else the package.
Importing a submodule runs its package's ``__init__`` first, so a package's ``__init__`` is
an edge of every import of one of its modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "gitops_reloader"
ROOT = PACKAGE.name


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def imports_in(source: str, name: str, *, is_package: bool = False) -> Iterator[str]:
    """The absolute names module ``name`` imports (``from a import b``: ``a.b`` and ``a``)."""
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            yield target
            yield from (f"{target}.{alias.name}" for alias in node.names)


def _with_packages(name: str) -> Iterator[str]:
    """``name`` and the package ``__init__`` modules importing it runs first."""
    parts = name.split(".")
    for end in range(1, len(parts) + 1):
        yield ".".join(parts[:end])


def graph() -> dict[str, set[str]]:
    """Module → the package-internal modules it imports (itself and its own packages excluded)."""
    edges: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        targets: set[str] = set()
        for imported in imports_in(path.read_text(), name, is_package=path.name == "__init__.py"):
            if imported == ROOT or imported.startswith(ROOT + "."):
                targets.update(m for m in _with_packages(imported) if m in MODULES)
        own_packages = set(_with_packages(name))
        edges[name] = {t for t in targets if t not in own_packages}
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), as one circle each.

    A group is shown as one circle through it (``a -> b -> a``), found by a search inside it.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return [_one_circle(group, edges) for group in sorted(groups)]


def _one_circle(group: list[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest path from the group's first module back to itself, inside the group."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(edges[node] & members):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    following.append(target)
        frontier = following
    return group  # unreachable: a strongly connected group has a circle through every member


def test_the_package_has_no_import_circle() -> None:
    found = [" -> ".join(circle) for circle in circles(graph())]
    assert found == [], "import circles:\n" + "\n".join(found)


def test_the_walk_finds_a_circle_and_names_it() -> None:
    edges = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}, "p.e": set()}
    assert circles(edges) == [["p.a", "p.b", "p.c", "p.a"]]


def test_the_walk_sees_relative_type_checking_and_late_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import sibling\n"
        "from ..other import thing\n"
        "if TYPE_CHECKING:\n"
        "    from p.typed import Hint\n"
        "def late():\n"
        "    import p.late.module\n"
    )
    found = set(imports_in(source, "p.sub.mod"))
    assert {"p.sub.sibling", "p.other", "p.other.thing", "p.typed", "p.late.module"} <= found
    assert set(imports_in("from .inner import x\n", "p.sub", is_package=True)) >= {"p.sub.inner"}


def test_the_graph_holds_the_package_and_only_the_package() -> None:
    edges = graph()
    assert f"{ROOT}.control.changes" in edges[f"{ROOT}.control.caches"]  # ``from .changes import``
    assert f"{ROOT}.control.follower" in edges[f"{ROOT}.app"]
    assert all(target in MODULES for targets in edges.values() for target in targets)
