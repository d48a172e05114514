"""The git sink's test setup, shared by the e2e tests that run the controller with a
``--git-config``: one manifest repository on the conftest ``githost``, a token file and a
cache directory per test (fixture ``git`` in conftest.py)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path

from reload_helpers import GIT_TOKEN

from gitops_reloader.testing.githost import GitHostServer

REPO = "manifests"
WINDOW = "--coalesce-window=1s"


class GitSetup:
    """The git config file, token file and cache directory of one test."""

    def __init__(self, tmp_path: Path, host: GitHostServer) -> None:
        self.tmp = tmp_path
        self.host = host
        self.cache_dir = tmp_path / "cache"
        self.config_path = tmp_path / "git-config.yaml"
        self.token_file = tmp_path / "token"
        self.token_file.write_text(GIT_TOKEN + "\n")

    def create(self, files: Mapping[str, str], *, name: str = REPO) -> str:
        return self.host.create_repo(name, dict(files))

    def configure(self, *, token_file: Path | None = None, extra: str = "") -> None:
        self.config_path.write_text(textwrap.dedent(f"""\
            defaultRepository: {REPO}
            repositories:
              - name: {REPO}
                url: {self.host.repo_url(REPO)}
                branch: main
                tokenFile: {token_file or self.token_file}
                username: bot
                author:
                  name: Reloader Bot
                  email: reloader@example.com
            """) + extra)

    def flags(self, *more: str) -> list[str]:
        return [f"--git-config={self.config_path}", f"--git-cache-dir={self.cache_dir}", WINDOW, *more]
