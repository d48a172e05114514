"""The state store's pure parts stay pure: no I/O library, no API access, no clock."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

STATE = Path(__file__).resolve().parents[3] / "gitops_reloader" / "state"
FORBIDDEN = ("kubernetes", "urllib3", "httpx", "git", "gitops_reloader.kube", "gitops_reloader.clock",
             "gitops_reloader.observability", "time", "os", "socket")


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("module", ["codec", "batch", "resync"])
def test_pure_state_modules_do_no_io(module: str) -> None:
    names = imported(STATE / f"{module}.py")
    assert names and not [n for n in names for f in FORBIDDEN if n == f or n.startswith(f + ".")]
