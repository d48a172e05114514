"""Start-up checks of an SSH repository's mounts (issue 27): reported at start-up, per repository.

A key file ssh would refuse for its mode, a key or known_hosts file that is missing or that
the process user can't read, a clone directory it can't write: each is reported when the
controller starts — an error log line naming the repository and the file, the
``git_repository_unusable`` gauge, ``/readyz`` answering 503 with the reason — and a workload
that needs the repository gets a Warning Event, while live reloads and every other
repository keep working. The last test runs the controller as a process of an unprivileged
user (uid 65534 when the tests run as root), as the chart does.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient
from processes import ROOT, Cluster, running_cluster, stop_process
from reload_helpers import call, configmap, create

from gitops_reloader import cli
from gitops_reloader.app import App
from gitops_reloader.config import load_config
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import container_env, deployment, wait_for
from gitops_reloader.testing.sshhost import SshGitHost

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

CONTROLLER_NS = "gitops-system"
NOBODY = 65534


def manifest(name: str) -> str:
    return (f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: ns\n"
            f"spec:\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n"
            f"      labels: {{app: {name}}}\n    spec:\n      containers:\n        - name: app\n"
            f"          image: nginx\n")


def repository_block(name: str, url: str, key: Path, known_hosts: Path) -> str:
    return textwrap.indent(textwrap.dedent(f"""\
        - name: {name}
          url: {url}
          sshKeyFile: {key}
          knownHostsFile: {known_hosts}
        """), "  ")


def git_workload(name: str, repo: str) -> dict[str, Any]:
    return deployment(name, annotations={
        "gitops-reloader.io/sink": "git", "gitops-reloader.io/git-repo": repo,
        "configmap.reloader.stakater.com/reload": "app-config"})


def live_workload(name: str) -> dict[str, Any]:
    return deployment(name, annotations={"configmap.reloader.stakater.com/reload": "live-config"})


def put_data(api_client: ApiClient, name: str, data: dict[str, str]) -> None:
    path = f"/api/v1/namespaces/ns/configmaps/{name}"
    current = call(api_client, "GET", path)
    current["data"] = data
    call(api_client, "PUT", path, current)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.read().decode()


def event_with(api_client: ApiClient, name: str, reason: str) -> dict[str, Any] | None:
    items = call(api_client, "GET", "/api/v1/namespaces/ns/events").get("items") or []
    return next((e for e in items if (e.get("involvedObject") or {}).get("name") == name
                 and e.get("reason") == reason), None)


def live_reloaded(api_client: ApiClient, name: str) -> bool:
    body = call(api_client, "GET", f"/apis/apps/v1/namespaces/ns/deployments/{name}")
    return "STAKATER_LIVE_CONFIG_CONFIGMAP" in container_env(body)


def key_lines(key: Path) -> list[str]:
    return [line for line in key.read_text().splitlines() if line and not line.startswith("-----")]


# --------------------------------------------------------------------------- in process


@pytest.mark.parametrize("problem", ["key-mode", "key-missing", "known-hosts-missing"])
def test_a_bad_ssh_mount_is_reported_at_start_up_and_live_reloads_go_on(
        problem: str, tmp_path: Path, api_client: ApiClient, githost: GitHostServer, sshgit: SshGitHost,
        caplog: pytest.LogCaptureFixture) -> None:
    githost.create_repo("bad", {"web.yaml": manifest("web")})
    githost.create_repo("good", {"api.yaml": manifest("api")})
    key = tmp_path / "id_ed25519"
    shutil.copyfile(sshgit.client_key_path, key)
    key.chmod(0o600)
    known_hosts = sshgit.write_known_hosts(tmp_path / "known_hosts")
    bad_key, bad_known_hosts = key, known_hosts
    if problem == "key-mode":
        bad_key = tmp_path / "group-readable-key"
        shutil.copyfile(key, bad_key)
        bad_key.chmod(0o640)  # ours, readable by the group: ssh refuses it
        reason, file = "SshKeyPermissions", bad_key
    elif problem == "key-missing":
        bad_key = tmp_path / "no-such-key"
        reason, file = "SshKeyMissing", bad_key
    else:
        bad_known_hosts = tmp_path / "no-such-known-hosts"
        reason, file = "KnownHostsMissing", bad_known_hosts
    config_file = tmp_path / "git-config.yaml"
    config_file.write_text("repositories:\n"
                           + repository_block("bad", sshgit.url("bad"), bad_key, bad_known_hosts)
                           + repository_block("good", sshgit.url("good"), key, known_hosts))
    for name in ("app-config", "live-config"):
        create(api_client, configmap(name, {"v": "1"}))
    create(api_client, git_workload("web", "bad"))
    create(api_client, git_workload("api", "good"))
    create(api_client, live_workload("live"))
    caplog.set_level(logging.INFO)
    config = load_config([f"--git-config={config_file}", f"--git-cache-dir={tmp_path / 'cache'}",
                          "--coalesce-window=1s", "--http-address=127.0.0.1:0"],
                         environ={"HOME": os.environ["HOME"], "POD_NAMESPACE": CONTROLLER_NS})
    app = App(config, api_client=api_client)  # a bad repository no longer stops start-up
    app.start()
    try:
        readyz = f"http://127.0.0.1:{app.http_servers[0].port}/readyz"
        wait_for(app.controller.ready, timeout=20, message="caches synced")
        status, body = get(readyz)
        assert status == 503
        assert f"git sink: repository bad unusable ({reason})" in body and str(file) in body
        assert "repository good" not in body
        assert app.registry.get_sample_value("gitops_reloader_git_repository_unusable", {
            "sink": "git", "repo": "bad", "reason": reason}) == 1.0
        logged = [r for r in caplog.records if r.getMessage().startswith("git repository unusable")]
        assert [(r.repo, r.reason, r.file) for r in logged] == [("bad", reason, str(file))]  # type: ignore[attr-defined]

        put_data(api_client, "live-config", {"v": "2"})
        put_data(api_client, "app-config", {"v": "2"})
        wait_for(lambda: live_reloaded(api_client, "live"), timeout=30, message="the live reload")
        wait_for(lambda: len(githost.log("good")) == 2, timeout=30, message="the good repository's commit")
        event = wait_for(lambda: event_with(api_client, "web", "RepositoryUnusable"), timeout=30,
                         message="RepositoryUnusable event on web")
        assert event["type"] == "Warning"
        assert "repository bad" in event["message"] and str(file) in event["message"]
        assert len(githost.log("bad")) == 1
    finally:
        app.stop()
    for line in key_lines(key):
        assert line not in caplog.text and line not in body and line not in event["message"]


# --------------------------------------------------------------------------- as an unprivileged process


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory under /tmp every user may enter (pytest's tmp_path is private to its user)."""
    path = Path(tempfile.mkdtemp(prefix="gitops-reloader-mounts-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_process_user(path: Path, mode: int) -> Path:
    """Give ``path`` to the controller's user (uid 65534 when the tests run as root) with ``mode``."""
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
    path.chmod(mode)
    return path


def start_controller(cluster: Cluster, shared: Path, flags: list[str]) -> subprocess.Popen[bytes]:
    """``gitops-reloader run`` as its own process: as uid 65534 when the tests run as root."""
    home = shared / "read-only-home"
    home.mkdir(mode=0o555)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "ALERT_", "POD_", "GIT_"))}
    env.update({"HOME": str(home), "POD_NAMESPACE": CONTROLLER_NS, "GIT_CONFIG_NOSYSTEM": "1"})
    prefix = (["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
              if os.geteuid() == 0 else [])
    with (shared / "controller.log").open("w") as log:
        return subprocess.Popen(
            [*prefix, sys.executable, "-m", "gitops_reloader.cli", "run", "--kubeconfig", cluster.kubeconfig,
             "--http-address=127.0.0.1:0", "--log-format=json", *flags],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)


def log_records(shared: Path) -> list[dict[str, Any]]:
    lines = (shared / "controller.log").read_text().splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def test_mounts_the_process_user_cannot_use_are_reported_and_the_rest_works(
        shared_dir: Path, githost: GitHostServer, sshgit: SshGitHost) -> None:
    """Run as the chart runs it (not root): an SSH key it can't read and a clone directory it
    can't write are reported per repository; a third repository commits over SSH, and live
    reloads happen; ssh writes nothing under the read-only HOME."""
    for name in ("unreadable", "unwritable", "good"):
        githost.create_repo(name, {f"{name}.yaml": manifest(name)})
    key = shared_dir / "id_ed25519"
    shutil.copyfile(sshgit.client_key_path, key)
    as_process_user(key, 0o400)
    unreadable_key = shared_dir / "someone-elses-key"
    shutil.copyfile(sshgit.client_key_path, unreadable_key)
    unreadable_key.chmod(0o000 if os.geteuid() != 0 else 0o400)  # root's 0400 key: 65534 can't read it
    known_hosts = sshgit.write_known_hosts(shared_dir / "known_hosts")
    cache = shared_dir / "cache"
    cache.mkdir()
    as_process_user(cache, 0o755)
    (cache / "unwritable").mkdir(mode=0o555)  # e.g. left by another user, not group-writable
    config_file = shared_dir / "git-config.yaml"
    config_file.write_text("repositories:\n" + "".join(
        repository_block(name, sshgit.url(name), unreadable_key if name == "unreadable" else key, known_hosts)
        for name in ("unreadable", "unwritable", "good")))
    with running_cluster(shared_dir) as cluster:
        api_client = cluster.api_client
        for name in ("app-config", "live-config"):
            create(api_client, configmap(name, {"v": "1"}))
        for name in ("unreadable", "unwritable", "good"):
            create(api_client, git_workload(name, name))
        create(api_client, live_workload("live"))
        flags = [f"--git-config={config_file}", f"--git-cache-dir={cache}", "--coalesce-window=1s"]
        proc = start_controller(cluster, shared_dir, flags)
        try:
            def address() -> str:
                assert proc.poll() is None, (shared_dir / "controller.log").read_text()
                return next((r["address"] for r in log_records(shared_dir)
                             if r["msg"] == "http server listening"), "")

            base = "http://" + wait_for(address, timeout=60, message="the controller's http server")
            wait_for(lambda: "caches not synced" not in get(base + "/readyz")[1], timeout=60,
                     message="caches synced")
            status, body = get(base + "/readyz")
            assert status == 503, body
            assert "repository unreadable unusable (SshKeyUnreadable)" in body
            assert "repository unwritable unusable (CacheNotWritable)" in body
            assert str(unreadable_key) in body and str(cache / "unwritable") in body
            assert "repository good" not in body
            metrics = get(base + "/metrics")[1]
            for repo, reason in (("unreadable", "SshKeyUnreadable"), ("unwritable", "CacheNotWritable")):
                labels = f'reason="{reason}",repo="{repo}",sink="git"'
                sample = f"gitops_reloader_git_repository_unusable{{{labels}}}"
                assert f"{sample} 1.0" in metrics, metrics
            unusable = {(r["repo"], r["reason"], r["file"]) for r in log_records(shared_dir)
                        if r["msg"].startswith("git repository unusable")}
            assert unusable == {("unreadable", "SshKeyUnreadable", str(unreadable_key)),
                                ("unwritable", "CacheNotWritable", str(cache / "unwritable"))}

            put_data(api_client, "live-config", {"v": "2"})
            put_data(api_client, "app-config", {"v": "2"})
            wait_for(lambda: live_reloaded(api_client, "live"), timeout=60, message="the live reload")
            wait_for(lambda: len(githost.log("good")) == 2, timeout=60,
                     message="the good repository's commit")
            for name in ("unreadable", "unwritable"):
                event = wait_for(lambda name=name: event_with(api_client, name, "RepositoryUnusable"),
                                 timeout=30, message=f"RepositoryUnusable event on {name}")
                assert f"repository {name}" in event["message"]
                assert len(githost.log(name)) == 1
        finally:
            stop_process(proc)
    assert list((shared_dir / "read-only-home").iterdir()) == []
    text = (shared_dir / "controller.log").read_text()
    for line in key_lines(key):
        assert line not in text


def test_explain_names_the_unusable_repository_and_its_file(
        tmp_path: Path, api_client: ApiClient, server: ApiServer, githost: GitHostServer, sshgit: SshGitHost,
        capsys: pytest.CaptureFixture[str]) -> None:
    githost.create_repo("bad", {"web.yaml": manifest("web")})
    missing = tmp_path / "no-such-known-hosts"
    config_file = tmp_path / "git-config.yaml"
    block = repository_block("bad", sshgit.url("bad"), sshgit.client_key_path, missing)
    config_file.write_text("repositories:\n" + block)
    create(api_client, git_workload("web", "bad"))
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    code = cli.main(["explain", "deployment/web", "-n", "ns", "--kubeconfig", kubeconfig,
                     f"--git-config={config_file}", "--output", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    found = json.loads(out.out)["manifest"]
    assert found["repository"] == "bad"
    assert found["refused"].startswith(
        "repository bad is unusable (KnownHostsMissing): cannot read known_hosts")
    assert str(missing) in found["refused"]
    assert sshgit.sessions() == 0  # nothing was fetched
