"""Fixtures every test tier shares."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


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
