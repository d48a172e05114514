"""``gitops-reloader run`` in the image, configured in-cluster exactly as a pod is.

The API test server serves HTTPS with a CA of the test's own and accepts only known bearer
tokens; the controller finds it through the ServiceAccount volume (token, ``ca.crt``,
``namespace``) and ``KUBERNETES_SERVICE_HOST``/``_PORT``, as in a pod. The git host
(HTTPS, the same CA) holds two repositories, one with a GitHub-shaped pull-request API. Git
tokens are files in Secret volumes with the chart's modes (0440, group fsGroup). The
container runs hardened (``containers.HARDENED``) on the host's network, so it reaches the
servers on 127.0.0.1. One ConfigMap change must reach a workload through each sink.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from cluster import GIT_TOKEN, SA_TOKEN, Cluster, wait_ready
from containers import HARDENED, running_container
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pod import KubeletSecretVolume, config_file, secret_volume, service_account
from tls_certs import make_tls_files

from gitops_reloader.hashing import configmap_hash
from gitops_reloader.testing.harness import deployment
from gitops_reloader.testing.ports import free_port

pytestmark = pytest.mark.container

CONTROLLER_NS = "gitops-system"
CONFIG_DIR = "/etc/gitops-reloader"
CA_IN_POD = "/etc/gitops-reloader-ca/ca.crt"
HASH_LINE = "gitops-reloader.io/config-hash: "


def manifest(name: str) -> str:
    return textwrap.dedent(f"""\
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: {name}
          namespace: ns
        spec:
          selector:
            matchLabels: {{app: {name}}}
          template:
            metadata:
              labels: {{app: {name}}}
            spec:
              containers:
                - name: app
                  image: nginx
        """)


def pod_options(cluster: Cluster, tmp_path: Path, git_config: str) -> list[str]:
    """The pod's volumes and environment, as the chart renders them for these repositories."""
    creds = tmp_path / "secrets"
    return [
        *HARDENED, "--network=host",
        *service_account(tmp_path / "serviceaccount", token=SA_TOKEN, ca_cert=cluster.tls.ca_cert,
                         namespace=CONTROLLER_NS, api_port=cluster.server.port),
        config_file(tmp_path / "git-config.yaml", git_config, f"{CONFIG_DIR}/git-config.yaml"),
        secret_volume(creds / "manifests", {"token": GIT_TOKEN}, f"{CONFIG_DIR}/credentials/manifests"),
        secret_volume(creds / "fleet", {"token": GIT_TOKEN}, f"{CONFIG_DIR}/credentials/fleet"),
        # the git host's CA, as a cluster with a private git host mounts it: git and httpx read
        # these variables (the API server's CA comes from the ServiceAccount volume)
        f"--volume={cluster.tls.ca_cert}:{CA_IN_POD}:ro",
        f"--env=GIT_SSL_CAINFO={CA_IN_POD}", f"--env=SSL_CERT_FILE={CA_IN_POD}",
        f"--env=POD_NAMESPACE={CONTROLLER_NS}", "--env=POD_NAME=gitops-reloader-5d9c7-x2x4q",
    ]


def test_in_cluster_pod_reloads_through_env_vars_annotations_git_and_pull_request(
        image: str, cluster: Cluster, tmp_path: Path) -> None:
    githost, prhost = cluster.githost, cluster.prhost
    githost.create_repo("manifests", {"apps/gitweb.yaml": manifest("gitweb")})
    githost.create_repo("org/fleet", {"apps/prweb.yaml": manifest("prweb")})
    api_url = prhost.mount("github")
    git_config = textwrap.dedent(f"""\
        repositories:
          - name: manifests
            url: {githost.repo_url("manifests")}
            branch: main
            tokenFile: {CONFIG_DIR}/credentials/manifests/token
          - name: fleet
            url: {githost.repo_url("org/fleet")}
            branch: main
            tokenFile: {CONFIG_DIR}/credentials/fleet/token
            pullRequest:
              host: github
              apiUrl: {api_url}
        """)
    reload_on = {"configmap.reloader.stakater.com/reload": "app-config"}
    cm_path = "/api/v1/namespaces/ns/configmaps"
    cluster.api.request("POST", cm_path, body={"metadata": {"name": "app-config"}, "data": {"url": "a"}})
    sink, repo = "gitops-reloader.io/sink", "gitops-reloader.io/git-repo"
    for name, own in (("envweb", {}), ("annoweb", {sink: "annotations"}),
                      ("gitweb", {sink: "git", repo: "manifests"}),
                      ("prweb", {sink: "pull-request", repo: "fleet"})):
        cluster.api.request("POST", "/apis/apps/v1/namespaces/ns/deployments",
                            body=deployment(name, annotations={**reload_on, **own}))
    port = free_port()
    args = ["run", f"--git-config={CONFIG_DIR}/git-config.yaml", "--git-cache-dir=/var/cache/gitops-reloader",
            "--coalesce-window=1s", f"--http-address=127.0.0.1:{port}", "--log-format=json"]

    with running_container(image, args, options=pod_options(cluster, tmp_path, git_config)) as pod:
        wait_ready(pod, port)
        cluster.api.request("PUT", f"{cm_path}/app-config",
                            body={**cluster.get(f"{cm_path}/app-config"), "data": {"url": "b"}})
        digest = configmap_hash({"url": "b"}, None)

        def env_value() -> str | None:
            container = cluster.deployment("envweb")["spec"]["template"]["spec"]["containers"][0]
            return {e["name"]: e.get("value") for e in container.get("env") or ()}.get(
                "STAKATER_APP_CONFIG_CONFIGMAP")

        assert pod.wait(env_value, timeout=60, message="env-vars sink") == digest
        annotations = pod.wait(
            lambda: cluster.deployment("annoweb")["spec"]["template"]["metadata"].get("annotations"),
            timeout=60, message="annotations sink")
        reloaded_from = annotations["reloader.stakater.com/last-reloaded-from"]
        assert f'"hash":"{digest}"' in reloaded_from.replace(" ", "")
        log = pod.wait(lambda: githost.log("manifests") if len(githost.log("manifests")) == 2 else None,
                       timeout=60, message="git sink commit")
        assert log[0][1] == "reload: gitweb (configmap/app-config changed)"
        assert HASH_LINE in (githost.read_file("manifests", "apps/gitweb.yaml") or b"").decode()
        pulls = pod.wait(lambda: prhost.pulls("org/fleet"), timeout=60, message="pull request")
        assert [(p["state"], p["base"]) for p in pulls] == [("open", "main")]
        proposed = githost.read_file("org/fleet", "apps/prweb.yaml", ref=pulls[0]["head"]) or b""
        assert HASH_LINE in proposed.decode()
        assert cluster.deployment("gitweb")["spec"]["template"]["metadata"].get("annotations") is None
        logs = pod.logs()
    assert GIT_TOKEN not in logs and SA_TOKEN not in logs
    assert githost.requests[("POST", "git-receive-pack")] >= 2


@pytest.mark.parametrize(("token", "other_ca", "says"), [
    ("sa-token-unknown-7d1e", False, "401 Unauthorized"),
    (SA_TOKEN, True, "CERTIFICATE_VERIFY_FAILED"),
])
def test_in_cluster_pod_that_cannot_authenticate_stops_with_a_clear_reason(
        image: str, cluster: Cluster, tmp_path: Path, token: str, other_ca: bool, says: str) -> None:
    """A token the API server does not know, or a ``ca.crt`` of another CA: the controller
    exits 1 with one error line saying why, and the token is not in it."""
    ca_cert = make_tls_files(tmp_path / "other-ca").ca_cert if other_ca else cluster.tls.ca_cert
    options = [*HARDENED, "--network=host",
               *service_account(tmp_path / "serviceaccount", token=token, ca_cert=ca_cert,
                                namespace=CONTROLLER_NS, api_port=cluster.server.port)]
    with running_container(image, ["run", f"--http-address=127.0.0.1:{free_port()}", "--log-format=json"],
                           options=options) as pod:
        code = pod.wait(pod.exit_code, timeout=90, message="the controller to stop")
        logs = pod.logs()
    errors = [json.loads(line) for line in logs.splitlines() if '"level": "error"' in line]
    assert code == 1, logs
    assert len(errors) == 1 and errors[0]["msg"].startswith("cannot start: ") and says in errors[0]["msg"]
    assert token not in logs


def test_credential_rotation_in_the_image_the_next_push_uses_the_swapped_token(
        image: str, cluster: Cluster, tmp_path: Path) -> None:
    """The git token's Secret rotates while the hardened pod runs: the kubelet swaps the
    volume's ``..data`` and the git host revokes the old token. The next push already uses
    the new token: no attempt fails, nothing restarts."""
    githost = cluster.githost
    githost.create_repo("manifests", {"apps/gitweb.yaml": manifest("gitweb")})
    git_config = textwrap.dedent(f"""\
        repositories:
          - name: manifests
            url: {githost.repo_url("manifests")}
            branch: main
            tokenFile: {CONFIG_DIR}/rotating/token
        """)
    token = KubeletSecretVolume(tmp_path / "rotating", {"token": GIT_TOKEN})
    cm_path = "/api/v1/namespaces/ns/configmaps"
    cluster.api.request("POST", cm_path, body={"metadata": {"name": "app-config"}, "data": {"url": "a"}})
    cluster.api.request("POST", "/apis/apps/v1/namespaces/ns/deployments", body=deployment(
        "gitweb", annotations={"configmap.reloader.stakater.com/reload": "app-config",
                               "gitops-reloader.io/sink": "git", "gitops-reloader.io/git-repo": "manifests"}))
    port = free_port()
    args = ["run", f"--git-config={CONFIG_DIR}/git-config.yaml", "--git-cache-dir=/var/cache/gitops-reloader",
            "--coalesce-window=1s", f"--http-address=127.0.0.1:{port}", "--log-format=json"]
    options = [*pod_options(cluster, tmp_path, git_config), token.volume(f"{CONFIG_DIR}/rotating")]

    def change(url: str) -> None:
        cluster.api.request("PUT", f"{cm_path}/app-config",
                            body={**cluster.get(f"{cm_path}/app-config"), "data": {"url": url}})

    rotated = "ghp_rotatedGitToken_51f0e2"
    with running_container(image, args, options=options) as pod:
        wait_ready(pod, port)
        change("b")
        pod.wait(lambda: len(githost.log("manifests")) == 2, timeout=60, message="the first commit")
        token.swap({"token": rotated})  # the kubelet publishes the rotated Secret
        githost.token = rotated  # and the old token stops working
        change("c")
        pod.wait(lambda: len(githost.log("manifests")) == 3, timeout=60,
                 message="a commit with the new token")
        logs = pod.logs()
    events = cluster.get("/api/v1/namespaces/ns/events")["items"]
    assert not [e for e in events if e["type"] == "Warning"], [e["message"] for e in events]
    assert "refused the credentials" not in logs and "emission failed" not in logs
    assert GIT_TOKEN not in logs and rotated not in logs


def test_in_cluster_github_app_opens_the_pull_request_with_signing_key_ssh_signed_commits(
        image: str, cluster: Cluster, tmp_path: Path) -> None:
    """No token anywhere: the App's key mints installation tokens for the push and the API, the
    commit is signed with the mounted SSH key (as uid 65532 on a read-only root) and authored
    by the App's bot."""
    githost, prhost = cluster.githost, cluster.prhost
    githost.create_repo("org/fleet", {"apps/prweb.yaml": manifest("prweb")})
    prhost.mount("github")
    app_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    prhost.register_github_app(777, app_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo), slug="fleet-reloader")
    keys = tmp_path / "keys"
    keys.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bot", "-f", str(keys / "sign")],
                   check=True)
    git_config = textwrap.dedent(f"""\
        repositories:
          - name: fleet
            url: {githost.repo_url("org/fleet")}
            githubApp: {{appId: 777, privateKeyFile: {CONFIG_DIR}/github-app/fleet/private-key.pem}}
            signingKey: {{file: {CONFIG_DIR}/signing/fleet/signing-key, format: ssh}}
            pullRequest: {{host: github}}
        """)
    pem = app_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption()).decode()
    signing_key = (keys / "sign").read_text()
    options = [o for o in pod_options(cluster, tmp_path, git_config) if "/credentials/" not in o]
    options += [secret_volume(tmp_path / "secrets" / "app", {"private-key.pem": pem},
                              f"{CONFIG_DIR}/github-app/fleet"),
                secret_volume(tmp_path / "secrets" / "sign", {"signing-key": signing_key},
                              f"{CONFIG_DIR}/signing/fleet")]
    cm_path = "/api/v1/namespaces/ns/configmaps"
    cluster.api.request("POST", cm_path, body={"metadata": {"name": "app-config"}, "data": {"url": "a"}})
    prweb = deployment("prweb", annotations={
        "configmap.reloader.stakater.com/reload": "app-config", "gitops-reloader.io/sink": "pull-request",
        "gitops-reloader.io/git-repo": "fleet"})
    cluster.api.request("POST", "/apis/apps/v1/namespaces/ns/deployments", body=prweb)
    port = free_port()
    args = ["run", f"--git-config={CONFIG_DIR}/git-config.yaml", "--git-cache-dir=/var/cache/gitops-reloader",
            "--coalesce-window=1s", f"--http-address=127.0.0.1:{port}", "--log-format=json"]

    with running_container(image, args, options=options) as pod:
        wait_ready(pod, port)
        cluster.api.request("PUT", f"{cm_path}/app-config",
                            body={**cluster.get(f"{cm_path}/app-config"), "data": {"url": "b"}})
        pulls = pod.wait(lambda: prhost.pulls("org/fleet"), timeout=60, message="pull request")
        logs = pod.logs()
    head = githost.branches("org/fleet")[pulls[0]["head"]]
    bare = githost.bare_path("org/fleet")
    shown = subprocess.run(["git", f"--git-dir={bare}", "show", "-s", "--format=%an <%ae>", head],
                           capture_output=True, text=True, check=True).stdout.strip()
    # The PR host is laid out as a GitHub Enterprise Server (https://127.0.0.1:PORT/api/v3): the
    # bot's noreply domain is that server's own.
    email = "190001+fleet-reloader[bot]@users.noreply.127.0.0.1"
    assert shown == f"fleet-reloader[bot] <{email}>"
    signers = tmp_path / "allowed_signers"
    signers.write_text(f'{email} namespaces="git" '
                       f'{(keys / "sign.pub").read_text().strip()}\n')
    verified = subprocess.run(["git", "-c", f"gpg.ssh.allowedSignersFile={signers}", f"--git-dir={bare}",
                               "verify-commit", head], capture_output=True, text=True)
    assert verified.returncode == 0 and 'Good "git" signature' in verified.stderr, verified.stderr
    assert prhost.app_token_exchanges >= 1
    for secret in (*pem.splitlines()[1:-1], *signing_key.splitlines()[1:-1]):
        assert secret not in logs
    assert "ghs_" not in logs and "Traceback" not in logs
