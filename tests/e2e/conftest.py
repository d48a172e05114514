"""Fixtures shared by the end-to-end tests: a fresh API test server per test with official
clients, and a git host on 127.0.0.1 (HTTP, and SSH through ``sshgit``) with the developer's
git configuration kept out."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from git_setup import GitSetup
from kubernetes.client import ApiClient, AppsV1Api, CoreV1Api, CustomObjectsApi
from reload_helpers import GIT_TOKEN

from gitops_reloader.observability.logging import JsonFormatter, TextFormatter
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.prhost import PrHost
from gitops_reloader.testing.sshhost import SshGitHost


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """A test that runs a CLI command (``status``, ``explain``) lets it configure logging as it
    does in a terminal: a handler on that test's captured stderr and the level ``warning``.
    Afterwards both go, so the next test's ``caplog`` sees INFO records and no handler writes
    to a closed stream."""
    root = logging.getLogger()
    level = root.level
    yield
    root.setLevel(level)
    for handler in list(root.handlers):
        if isinstance(handler.formatter, TextFormatter | JsonFormatter):
            root.removeHandler(handler)


@pytest.fixture
def server() -> Iterator[ApiServer]:
    with ApiServer() as srv:
        yield srv


@pytest.fixture
def api_client(server: ApiServer) -> Iterator[ApiClient]:
    client = server.api_client()
    yield client
    client.close()


@pytest.fixture
def core(api_client: ApiClient) -> CoreV1Api:
    return CoreV1Api(api_client)


@pytest.fixture
def apps(api_client: ApiClient) -> AppsV1Api:
    return AppsV1Api(api_client)


@pytest.fixture
def custom(api_client: ApiClient) -> CustomObjectsApi:
    return CustomObjectsApi(api_client)


@pytest.fixture
def githost(tmp_path: Path) -> Iterator[GitHostServer]:
    """A git host on 127.0.0.1 that accepts ``GIT_TOKEN`` (HTTP Basic), stopped after the test."""
    with GitHostServer(tmp_path / "srv", token=GIT_TOKEN) as host:
        yield host


@pytest.fixture
def sshgit(tmp_path: Path, githost: GitHostServer) -> Iterator[SshGitHost]:
    """sshd on 127.0.0.1 serving ``githost``'s bare repositories through git-shell (the
    same repository over HTTP and SSH), with its own host key and client key; stopped by
    PID after the test."""
    with SshGitHost(githost.root, tmp_path / "sshd") as ssh:
        yield ssh


@pytest.fixture
def host(githost: GitHostServer) -> GitHostServer:
    """``githost`` under the short name the repository and git-sink tests use."""
    return githost


@pytest.fixture
def git(tmp_path: Path, githost: GitHostServer) -> GitSetup:
    """The git sink's setup: repository, ``--git-config`` file, token file, cache directory."""
    return GitSetup(tmp_path, githost)


@pytest.fixture
def prhost(githost: GitHostServer) -> PrHost:
    """GitHub / GitLab / Gitea / Bitbucket REST shapes over the ``githost`` repositories."""
    return PrHost(githost)
