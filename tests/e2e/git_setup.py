"""The git sink's test setup, shared by the e2e tests that run the controller with a
``--git-config``: one manifest repository on the conftest ``githost``, a token file and a
cache directory per test (fixture ``git`` in conftest.py)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path

from reload_helpers import GIT_TOKEN

from gitops_reloader.sinks.git import GitSink
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import wait_for

REPO = "manifests"
WINDOW = "--coalesce-window=1s"


def commits(host: GitHostServer) -> list[tuple[str, str]]:
    """``(sha, subject)`` of the commits on ``REPO``'s main branch, newest first."""
    return host.log(REPO)


def wait_commits(host: GitHostServer, count: int, timeout: float = 20.0) -> list[tuple[str, str]]:
    """:func:`commits`, once there are at least ``count``."""
    return wait_for(lambda: len(commits(host)) >= count and commits(host), timeout=timeout,
                    message=f"{count} commits on {REPO}")


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


def deployment_manifest(name: str, *, image: str = "nginx", owner: str | None = "team-a") -> str:
    """Deployment ``ns/<name>`` as the manifest repository holds it; ``owner``, unless None, is
    a pod-template annotation (a reload's hash line goes into that mapping)."""
    annotations = f"      annotations:\n        owner: {owner}\n" if owner else ""
    return (f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: ns\n"
            f"spec:\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n"
            f"      labels:\n        app: {name}\n{annotations}    spec:\n"
            f"      containers:\n        - name: app\n          image: {image}\n")


def race_first_push(host: GitHostServer, theirs: list[str]) -> Callable[[GitSink], None]:
    """A ``sink_hook`` for a push race: someone else pushes a README edit to ``REPO`` between
    the sink's fetch and its first push; the sha of that commit is appended to ``theirs``."""
    def hook(sink: GitSink) -> None:
        repo = sink.repository(REPO).repo
        original = repo.push

        def push() -> None:
            if not theirs:  # someone else pushes between our fetch and our push
                theirs.append(host.commit_directly(REPO, {"README.md": "# manifests\nedited by a human\n"}))
            original()

        repo.push = push  # type: ignore[method-assign]

    return hook
