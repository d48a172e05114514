"""The API test server and the git host over HTTPS, and the API test server's token check,
as the controller meets them in a pod (tests/container run it against both)."""

from __future__ import annotations

import os
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from tls_certs import TlsFiles, make_tls_files

from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.githost import GitHostServer

pytestmark = pytest.mark.e2e

SA_TOKEN = "sa-token-7f3c"


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    return make_tls_files(tmp_path / "tls")


@pytest.fixture
def https_server(tls: TlsFiles) -> Iterator[ApiServer]:
    with ApiServer(tls=tls.server_context()) as srv:
        srv.authorizer.authenticate([srv.token, SA_TOKEN])
        yield srv


def official_client(server: ApiServer, *, token: str, ca: Path | None) -> client.ApiClient:
    cfg = client.Configuration(host=server.url)
    cfg.proxy = None
    cfg.ssl_ca_cert = str(ca) if ca else None
    cfg.api_key = {"authorization": f"Bearer {token}"}
    cfg.retries = False
    return client.ApiClient(cfg)


def test_official_client_verifies_the_certificate_and_watches_over_tls(https_server: ApiServer,
                                                                        tls: TlsFiles) -> None:
    assert https_server.url.startswith("https://127.0.0.1:")
    with official_client(https_server, token=SA_TOKEN, ca=tls.ca_cert) as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_config_map("ns", {"metadata": {"name": "app"}, "data": {"k": "v"}})
        listed = core.list_namespaced_config_map("ns")
        events = watch.Watch().stream(core.list_namespaced_config_map, "ns",
                                      resource_version=listed.metadata.resource_version, timeout_seconds=5)
        core.patch_namespaced_config_map("app", "ns", {"data": {"k": "w"}})
        event = next(events)
        assert (event["type"], event["object"].data) == ("MODIFIED", {"k": "w"})


def test_unknown_or_missing_token_gets_401(https_server: ApiServer, tls: TlsFiles) -> None:
    for token in ("not-a-known-token", ""):
        with official_client(https_server, token=token, ca=tls.ca_cert) as api:
            with pytest.raises(ApiException) as failed:
                client.CoreV1Api(api).list_namespace()
            assert failed.value.status == 401
            assert '"reason":"Unauthorized"' in failed.value.body.replace(" ", "")


def test_a_client_without_the_ca_is_refused(https_server: ApiServer, tls: TlsFiles) -> None:
    with (official_client(https_server, token=SA_TOKEN, ca=None) as api,
          pytest.raises(ApiException) as failed):
        client.CoreV1Api(api).list_namespace()
    assert "CERTIFICATE_VERIFY_FAILED" in str(failed.value)
    # that connection only: the server goes on serving
    answer = httpx.get(https_server.url + "/version", verify=ssl.create_default_context(cafile=tls.ca_cert),
                       headers={"Authorization": f"Bearer {SA_TOKEN}"})
    assert answer.json()["gitVersion"] == "v1.36.0"


def test_git_clones_and_pushes_over_https_with_the_ca(tmp_path: Path, tls: TlsFiles) -> None:
    with GitHostServer(tmp_path / "srv", token="tok", tls=tls.server_context()) as host:
        url = host.create_repo("app", {"a.txt": "one\n"})
        assert url.startswith("https://127.0.0.1:")
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(HOME=str(tmp_path), GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0",
                   GIT_SSL_CAINFO=str(tls.ca_cert))
        header = ["-c", "http.extraHeader=Authorization: Bearer tok"]
        work = tmp_path / "work"
        subprocess.run(["git", *header, "clone", "-q", url, str(work)], env=env, check=True)
        (work / "a.txt").write_text("two\n")
        for args in (["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam", "two"],
                     [*header, "push", "-q", "origin", "main"]):
            subprocess.run(["git", *args], cwd=work, env=env, check=True)
        assert host.log("app")[0][1] == "two"
        env["GIT_SSL_CAINFO"] = "/etc/ssl/certs/ca-certificates.crt"  # not our CA
        refused = subprocess.run(["git", *header, "ls-remote", url], env=env, capture_output=True,
                                 text=True, check=False)
        assert refused.returncode != 0
        assert "certificate" in refused.stderr.lower()
