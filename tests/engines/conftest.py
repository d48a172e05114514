"""Fixtures of the ``-m engines`` tier: a real control plane per test session (and worker).

Where the engines are not built (``.ci/build-engines.sh`` has not run, or Go is missing) every
test of the tier is skipped with one line saying why; with ``REQUIRE_ENGINE_TESTS=1`` (set by
``.ci/run``) that is a failure instead, so CI cannot go green without having run them.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TypeVar

import pytest
from controlplane import ControlPlane, EngineMissing, running_control_plane
from fleet import TOKEN
from kubernetes.client import ApiClient, CoreV1Api
from tls_certs import TlsFiles, make_tls_files

from gitops_reloader.testing.githost import GitHostServer

_numbers = itertools.count(1)
T = TypeVar("T")


def require(why: str) -> None:
    """Skip for ``why``, or fail under ``REQUIRE_ENGINE_TESTS=1``."""
    if os.environ.get("REQUIRE_ENGINE_TESTS") == "1":
        pytest.fail(f"REQUIRE_ENGINE_TESTS=1 but {why}")
    pytest.skip(why)


def started(starting: AbstractContextManager[T]) -> Iterator[T]:
    """What ``starting`` brings up, for a fixture to yield from; where its engine is not built,
    a skip (a failure under ``REQUIRE_ENGINE_TESTS=1``) naming it."""
    try:
        with starting as running:
            yield running
    except EngineMissing as why:
        require(str(why))


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver, kube-controller-manager and kwok (one fake node), for the session."""
    yield from started(running_control_plane(tmp_path_factory.mktemp("engines") / "cp", kwok=True))


@pytest.fixture
def real_client(control_plane: ControlPlane) -> Iterator[ApiClient]:
    client = control_plane.api_client()
    yield client
    client.close()


@pytest.fixture
def namespace(real_client: ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test (deleted after it: the real namespace controller empties it)."""
    words = re.sub(r"[^a-z0-9]+", "-", request.node.name.removeprefix("test_").lower())
    name = f"t{next(_numbers)}-{words[:40].strip('-')}-{os.getpid() % 10000}"
    core = CoreV1Api(real_client)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    return make_tls_files(tmp_path / "tls")


@pytest.fixture
def githost(tmp_path: Path, tls: TlsFiles, monkeypatch: pytest.MonkeyPatch) -> Iterator[GitHostServer]:
    """The git test server over HTTPS; the controller's git and httpx trust its CA (the engines
    are given it in their own ways)."""
    monkeypatch.setenv("GIT_SSL_CAINFO", str(tls.ca_cert))
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca_cert))
    with GitHostServer(tmp_path / "git", token=TOKEN, tls=tls.server_context()) as host:
        yield host

