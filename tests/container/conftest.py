"""Fixtures of the container tests: the image, built once per test session.

Where podman does not work, every container test is skipped with one line saying why;
with ``REQUIRE_CONTAINER_TESTS=1`` (set by ``.ci/run``, where podman works) that is a
failure instead, so CI cannot go green without having run them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster import Cluster, running_cluster
from containers import PodmanUnavailable, check_podman, find_or_build_image


@pytest.fixture(scope="session")
def image() -> str:
    """The controller image (see :func:`containers.find_or_build_image` for which one)."""
    try:
        check_podman()
    except PodmanUnavailable as why:
        if os.environ.get("REQUIRE_CONTAINER_TESTS") == "1":
            pytest.fail(f"REQUIRE_CONTAINER_TESTS=1 but {why}")
        pytest.skip(str(why))
    return find_or_build_image()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """The API test server and the git host over HTTPS (``cluster.running_cluster``)."""
    with running_cluster(tmp_path) as running:
        yield running
