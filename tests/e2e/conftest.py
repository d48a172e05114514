"""Fixtures for end-to-end tests: a fresh API test server per test, official clients."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes.client import ApiClient, AppsV1Api, CoreV1Api

from gitops_reloader.testing.apiserver import ApiServer


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
