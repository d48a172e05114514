"""Bad credential mounts, checked inside the image as the chart runs it (issue 27).

One hardened container (``containers.HARDENED``: uid 65532, read-only root, no capabilities,
no privilege gain), configured in-cluster through the ServiceAccount volume, with three SSH
repositories in ``--git-config``, each with one bad mount:

- ``keymode``: the deploy key is mode 0444 and belongs to the pod's user (what a projected
  volume or a CSI secrets driver gives with a wrong mode): ssh would refuse it;
- ``readonly``: its clone directory in the git cache is a read-only mount;
- ``nohosts``: its Secret has no ``known_hosts``.

Start-up must report each one (``/readyz`` 503 naming repository, reason and file, one error
log line each, the ``git_repository_unusable`` gauge), the git workloads of those
repositories get a ``RepositoryUnusable`` Warning Event, and the live env-vars sink still
reloads its Deployment. No SSH server is needed: an unusable repository is never contacted.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster import SA_TOKEN, Cluster
from containers import HARDENED, Container, running_container
from pod import RUN_AS_USER, config_file, secret_volume, service_account

from gitops_reloader.hashing import configmap_hash
from gitops_reloader.testing.harness import container_env, deployment
from gitops_reloader.testing.ports import free_port

pytestmark = pytest.mark.container

CONTROLLER_NS = "gitops-system"
CONFIG_DIR = "/etc/gitops-reloader"
CACHE_DIR = "/var/cache/gitops-reloader"
CM_PATH = "/api/v1/namespaces/ns/configmaps"


def credentials(name: str) -> str:
    return f"{CONFIG_DIR}/credentials/{name}"


EXPECTED = {  # repository: (reason, the file named)
    "keymode": ("SshKeyPermissions", f"{credentials('keymode')}/ssh-privatekey"),
    "readonly": ("CacheNotWritable", f"{CACHE_DIR}/readonly"),
    "nohosts": ("KnownHostsMissing", f"{credentials('nohosts')}/known_hosts"),
}


def client_key(directory: Path) -> tuple[str, str]:
    """A deploy key (private key text) and a known_hosts line (for a host key nobody serves)."""
    directory.mkdir()
    for name in ("client", "host"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name,
                        "-f", str(directory / name)], check=True)
    kind, key = (directory / "host.pub").read_text().split()[:2]
    return (directory / "client").read_text(), f"[127.0.0.1]:22 {kind} {key}\n"


def git_config(ssh_port: int) -> str:
    return "repositories:\n" + "".join(textwrap.indent(textwrap.dedent(f"""\
        - name: {name}
          url: ssh://git@127.0.0.1:{ssh_port}/srv/{name}.git
          branch: main
          sshKeyFile: {credentials(name)}/ssh-privatekey
          knownHostsFile: {credentials(name)}/known_hosts
        """), "  ") for name in EXPECTED)


def pod_options(cluster: Cluster, tmp_path: Path, key: str, known_hosts: str) -> list[str]:
    """The pod's volumes as the chart mounts them (Secrets 0440, group fsGroup), each repository
    with its one bad mount."""
    creds = tmp_path / "secrets"
    good = {"ssh-privatekey": key, "known_hosts": known_hosts}
    read_only_clone = tmp_path / "read-only-clone"
    read_only_clone.mkdir(mode=0o755)  # root's, and mounted read-only on top
    return [
        *HARDENED, "--network=host",
        *service_account(tmp_path / "serviceaccount", token=SA_TOKEN, ca_cert=cluster.tls.ca_cert,
                         namespace=CONTROLLER_NS, api_port=cluster.server.port),
        config_file(tmp_path / "git-config.yaml", git_config(free_port()), f"{CONFIG_DIR}/git-config.yaml"),
        secret_volume(creds / "keymode", good, credentials("keymode"), mode=0o444, owner=RUN_AS_USER),
        secret_volume(creds / "readonly", good, credentials("readonly")),
        f"--volume={read_only_clone}:{CACHE_DIR}/readonly:ro",
        secret_volume(creds / "nohosts", {"ssh-privatekey": key}, credentials("nohosts")),
        f"--env=POD_NAMESPACE={CONTROLLER_NS}", "--env=POD_NAME=gitops-reloader-5d9c7-x2x4q",
    ]


def synced_readyz(pod: Container, port: int) -> httpx.Response:
    """/readyz once the caches synced (its body no longer says they did not)."""

    def answer() -> httpx.Response | None:
        assert pod.running(), pod.logs()
        try:
            response = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2)
        except httpx.TransportError:
            return None
        return None if "caches not synced" in response.text else response

    result: httpx.Response = pod.wait(answer, timeout=90, message="/readyz after the caches synced")
    return result


def unusable_event(cluster: Cluster, name: str) -> dict[str, Any] | None:
    """The ``RepositoryUnusable`` Event of workload ``name``, once there is one."""
    events = cluster.get("/api/v1/namespaces/ns/events")["items"]
    return next((e for e in events if e["involvedObject"]["name"] == name
                 and e["reason"] == "RepositoryUnusable"), None)


def live_env(cluster: Cluster) -> str | None:
    return container_env(cluster.deployment("live")).get("STAKATER_APP_CONFIG_CONFIGMAP")


def test_bad_ssh_mounts_in_the_image_are_reported_per_repository_and_live_reloads_go_on(
        image: str, cluster: Cluster, tmp_path: Path) -> None:
    key, known_hosts = client_key(tmp_path / "keys")
    cluster.api.request("POST", CM_PATH, body={"metadata": {"name": "app-config"}, "data": {"url": "a"}})
    reload_on = {"configmap.reloader.stakater.com/reload": "app-config"}
    workloads = {"live": reload_on} | {f"web-{repo}": {**reload_on, "gitops-reloader.io/sink": "git",
                                                       "gitops-reloader.io/git-repo": repo}
                                       for repo in EXPECTED}
    for name, own in workloads.items():
        cluster.api.request("POST", "/apis/apps/v1/namespaces/ns/deployments",
                            body=deployment(name, annotations=own))
    port = free_port()
    args = ["run", f"--git-config={CONFIG_DIR}/git-config.yaml", f"--git-cache-dir={CACHE_DIR}",
            "--coalesce-window=1s", f"--http-address=127.0.0.1:{port}", "--log-format=json"]

    with running_container(image, args, options=pod_options(cluster, tmp_path, key, known_hosts)) as pod:
        readyz = synced_readyz(pod, port)
        # start-up's report first: a mount that passed its check fails here, not after a timeout
        assert readyz.status_code == 503, readyz.text
        lines = readyz.text.splitlines()
        assert len(lines) == len(EXPECTED), readyz.text
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        for repo, (reason, file) in EXPECTED.items():
            prefix = f"git sink: repository {repo} unusable ({reason}): "
            (line,) = [line for line in lines if line.startswith(prefix)]
            assert file in line, readyz.text
            labels = f'reason="{reason}",repo="{repo}",sink="git"'
            assert f"gitops_reloader_git_repository_unusable{{{labels}}} 1.0" in metrics, metrics

        cluster.api.request("PUT", f"{CM_PATH}/app-config",
                            body={**cluster.get(f"{CM_PATH}/app-config"), "data": {"url": "b"}})
        assert pod.wait(lambda: live_env(cluster), timeout=60, message="the env-vars reload") == \
            configmap_hash({"url": "b"}, None)
        events = {repo: pod.wait(lambda repo=repo: unusable_event(cluster, f"web-{repo}"), timeout=60,
                                 message=f"RepositoryUnusable on web-{repo}")
                  for repo in EXPECTED}
        assert pod.running()
        logs = pod.logs()

    for repo, (_, file) in EXPECTED.items():
        assert events[repo]["type"] == "Warning"
        message = events[repo]["message"]
        assert f"repository {repo}" in message and file in message, message
    records = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    unusable = [(r["repo"], r["reason"], r["file"]) for r in records
                if r["msg"].startswith("git repository unusable")]
    assert sorted(unusable) == sorted((repo, *why) for repo, why in EXPECTED.items()), logs
    assert "Traceback" not in logs
    shown = logs + json.dumps(events) + readyz.text
    assert SA_TOKEN not in shown
    for line in key.splitlines()[1:-1]:  # the key's body, line by line
        assert line not in shown
