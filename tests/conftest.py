"""Fixtures every test tier shares."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests check what holds, never how fast: CI runs four workers on two cores, where
# Hypothesis' default 200 ms deadline per example failed a test at random.
settings.register_profile("gitops-reloader", deadline=None)
settings.load_profile("gitops-reloader")


@pytest.fixture
def isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the developer's global and system git configuration out of the test: a fresh
    HOME, no system config, no GIT_* variables. Modules that use git name it in
    ``pytestmark`` (``pytest.mark.usefixtures("isolated_git")``)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key in list(os.environ):
        if key.startswith("GIT_") and key != "GIT_CONFIG_NOSYSTEM":
            monkeypatch.delenv(key)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--dist loadgroup`` as pytest-xdist means it: a test marked ``xdist_group(name)`` gets
    ``@name`` at the end of its node id, which is how xdist's scheduler sends a group to one
    worker. xdist 3.8 sets ``item._nodeid``, which pytest 9.2 no longer reads (the id is
    ``item._id``): without this every group was spread over every worker (each starting its own
    engines and control plane)."""
    if not getattr(config.option, "loadgroup", False):  # set on xdist workers under --dist loadgroup
        return
    try:
        from _pytest.nodeid import NodeId  # pytest >= 9.2
    except ImportError:
        return  # an older pytest reads _nodeid, as xdist sets it

    for item in items:
        names = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                        for mark in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid.rpartition("]")[2]:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")  # type: ignore[attr-defined]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The ``stakater-e2e <implementation> <suite>: …`` lines of tests/engines/test_stakater_e2e.py, one per
    suite run (recorded as a property, so they come back from xdist workers too)."""
    lines = sorted({value for reports in terminalreporter.stats.values() for report in reports
                    for name, value in getattr(report, "user_properties", ()) if name == "stakater-e2e"})
    for line in lines:
        terminalreporter.write_line(line)
