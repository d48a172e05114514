"""The servers a pod of the controller talks to, on 127.0.0.1, as the container tests use them.

The API test server serves HTTPS with a CA of the test's own and accepts only known bearer
tokens (the test's own and :data:`SA_TOKEN`, the ServiceAccount's); the git host serves
HTTPS with the same CA and a pull-request API on top. The test talks to the API server with
a client that verifies the certificate.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from containers import Container
from kubernetes import client
from tls_certs import TlsFiles, make_tls_files

from gitops_reloader.kube.api import KubeApi
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import wait_for
from gitops_reloader.testing.prhost import PrHost

SA_TOKEN = "sa-token-0c4f2e9a"
GIT_TOKEN = "ghp_containerGitToken_93ad1c"


@dataclass
class Cluster:
    """The servers of one test and a verifying client of the API test server."""

    tls: TlsFiles
    server: ApiServer
    githost: GitHostServer
    prhost: PrHost
    api: KubeApi

    def get(self, path: str) -> dict[str, Any]:
        return self.api.request("GET", path)

    def deployment(self, name: str) -> dict[str, Any]:
        return self.get(f"/apis/apps/v1/namespaces/ns/deployments/{name}")


@contextmanager
def running_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """The API test server and the git host over HTTPS; stopped on exit."""
    tls = make_tls_files(tmp_path / "tls")
    with (ApiServer(tls=tls.server_context()) as server,
          GitHostServer(tmp_path / "git", token=GIT_TOKEN, tls=tls.server_context()) as githost):
        server.authorizer.authenticate([server.token, SA_TOKEN])
        cfg = client.Configuration(host=server.url)
        cfg.proxy = None
        cfg.ssl_ca_cert = str(tls.ca_cert)
        cfg.api_key = {"authorization": f"Bearer {server.token}"}
        with client.ApiClient(cfg) as api_client:
            yield Cluster(tls, server, githost, PrHost(githost), KubeApi(api_client))


def wait_ready(pod: Container, port: int) -> None:
    """Until /readyz answers 200 (caches synced); fails at once with the log if the pod exits."""

    def ready() -> bool:
        assert pod.running(), pod.logs()
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    wait_for(ready, timeout=90, interval=0.2, message="/readyz of the controller in the container")
