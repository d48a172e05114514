"""The git and pull-request sinks over SSH, end to end (issue 27).

A real ``sshd`` on 127.0.0.1 (:class:`~gitops_reloader.testing.sshhost.SshGitHost`) serves
the bare repositories of the HTTP git host through ``git-shell``, with its own host key; the
controller reaches them with an SSH deploy key and a pinned ``known_hosts`` file, exactly as
the chart mounts them. Host keys are checked strictly: an unknown or changed host key is
refused, reported on the workload, and never accepted.
"""

from __future__ import annotations

import logging
import os
import pwd
import subprocess
import textwrap
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from git_setup import commits, deployment_manifest, race_first_push, wait_commits
from kubernetes.client import ApiClient
from reload_helpers import GIT_TOKEN, call, configmap, create, events, metric, quiet, wait_event

from gitops_reloader.app import App
from gitops_reloader.config import load_config
from gitops_reloader.sinks.git import GitSink
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import deployment, running_sink, wait_for
from gitops_reloader.testing.prhost import PrHost
from gitops_reloader.testing.sshhost import SshGitHost

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

REPO = "manifests"
CONTROLLER_NS = "gitops-system"
WINDOW = "--coalesce-window=1s"
SSH_WAIT = 30.0  # seconds to wait for commits: every fetch and push is an SSH session


class SshSetup:
    """The ``--git-config`` of one test: one repository reached over SSH with a deploy key."""

    def __init__(self, tmp_path: Path, githost: GitHostServer, ssh: SshGitHost) -> None:
        self.tmp = tmp_path
        self.githost = githost
        self.ssh = ssh
        self.cache_dir = tmp_path / "cache"
        self.config_path = tmp_path / "git-config.yaml"
        self.known_hosts = ssh.write_known_hosts(tmp_path / "known_hosts")
        self.key_file = ssh.client_key_path

    def configure(self, *, key_file: Path | None = None, known_hosts: Path | None = None,
                  extra: str = "") -> None:
        self.config_path.write_text(textwrap.dedent(f"""\
            defaultRepository: {REPO}
            repositories:
              - name: {REPO}
                url: {self.ssh.url(REPO)}
                branch: main
                sshKeyFile: {key_file or self.key_file}
                knownHostsFile: {known_hosts or self.known_hosts}
                author:
                  name: Reloader Bot
                  email: reloader@example.com
            """) + extra)

    def flags(self, *more: str) -> list[str]:
        return [f"--git-config={self.config_path}", f"--git-cache-dir={self.cache_dir}", WINDOW, *more]


@pytest.fixture
def setup(tmp_path: Path, githost: GitHostServer, sshgit: SshGitHost) -> SshSetup:
    return SshSetup(tmp_path, githost, sshgit)


@contextmanager
def controller(api_client: ApiClient, setup: SshSetup, *flags: str,
               sink_hook: Any = None) -> Iterator[tuple[App, GitSink]]:
    config = load_config(setup.flags(*flags),
                         environ={"HOME": os.environ["HOME"], "POD_NAMESPACE": CONTROLLER_NS})
    with running_sink(api_client, config, "git", GitSink, sink_hook) as running:
        yield running


def git_workload(name: str) -> dict[str, Any]:
    return deployment(name, annotations={"gitops-reloader.io/sink": "git",
                                         "configmap.reloader.stakater.com/reload": "app-config"})


def put_data(api_client: ApiClient, name: str, data: Mapping[str, str]) -> None:
    path = f"/api/v1/namespaces/ns/configmaps/{name}"
    current = call(api_client, "GET", path)
    current["data"] = dict(data)
    call(api_client, "PUT", path, current)


def has_hash(text: str) -> bool:
    return "gitops-reloader.io/config-hash:" in text


def private_key_material(setup: SshSetup) -> list[str]:
    """Lines of the deploy key's body: none may appear in any log or event."""
    lines = setup.key_file.read_text().splitlines()
    return [line for line in lines if line and not line.startswith("-----")]


# --------------------------------------------------------------------------- the git sink over SSH


def test_git_sink_clones_fetches_and_pushes_over_ssh(api_client: ApiClient, setup: SshSetup,
                                                     githost: GitHostServer, sshgit: SshGitHost) -> None:
    githost.create_repo(REPO, {"apps/web.yaml": deployment_manifest("web")})
    setup.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    with controller(api_client, setup) as (app, _):
        put_data(api_client, "app-config", {"url": "b"})
        log = wait_commits(githost, 2, timeout=SSH_WAIT)
        assert log[0][1] == "reload: web (configmap/app-config changed)"
        assert has_hash(githost.read_file(REPO, "apps/web.yaml").decode())
        # A second change is fetched and pushed through the same clone.
        put_data(api_client, "app-config", {"url": "c"})
        wait_commits(githost, 3, timeout=SSH_WAIT)
        quiet(app)  # the commit is on the server a moment before the push returns and is counted
        assert len(commits(githost)) == 3
        assert metric(app, "git_commits_total", repo=REPO) == 2.0
    assert sshgit.sessions() >= 4  # fetch + push, twice: every network step went over SSH
    assert (setup.cache_dir / REPO / ".git").is_dir()


def test_ssh_never_writes_under_a_read_only_home(api_client: ApiClient, setup: SshSetup,
                                                 githost: GitHostServer, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "read-only-home"
    home.mkdir(mode=0o555)
    monkeypatch.setenv("HOME", str(home))  # git and ssh inherit it, as in the image
    account_ssh_dir = Path(pwd.getpwuid(os.getuid()).pw_dir, ".ssh")  # ssh's own idea of home
    had_account_ssh_dir = account_ssh_dir.exists()
    githost.create_repo(REPO, {"apps/web.yaml": deployment_manifest("web")})
    setup.configure()
    known_hosts_before = setup.known_hosts.read_bytes()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    with controller(api_client, setup):
        put_data(api_client, "app-config", {"url": "b"})
        wait_commits(githost, 2, timeout=SSH_WAIT)
    assert list(home.iterdir()) == []
    assert account_ssh_dir.exists() == had_account_ssh_dir
    assert setup.known_hosts.read_bytes() == known_hosts_before  # UpdateHostKeys=no, nothing added


def test_push_race_over_ssh_is_fetched_and_reapplied_without_force(
        api_client: ApiClient, setup: SshSetup, githost: GitHostServer) -> None:
    githost.create_repo(REPO, {"apps/web.yaml": deployment_manifest("web"), "README.md": "# manifests\n"})
    setup.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    other: list[str] = []
    with controller(api_client, setup, sink_hook=race_first_push(githost, other)) as (app, _):
        put_data(api_client, "app-config", {"url": "b"})
        log = wait_commits(githost, 3, timeout=SSH_WAIT)
        quiet(app)
        assert [s for _, s in commits(githost)] == ["reload: web (configmap/app-config changed)",
                                                     "commit by someone else", "initial"]
        assert log[1][0] == other[0]  # their commit kept, ours on top
        assert githost.read_file(REPO, "README.md") == b"# manifests\nedited by a human\n"
        assert has_hash(githost.read_file(REPO, "apps/web.yaml").decode())
        assert metric(app, "git_push_rejections_total", repo=REPO) == 1.0


@pytest.mark.parametrize("case", ["unknown", "changed"])
def test_unknown_or_changed_host_key_is_refused_and_reported(
        case: str, api_client: ApiClient, setup: SshSetup, githost: GitHostServer, sshgit: SshGitHost,
        caplog: pytest.LogCaptureFixture) -> None:
    githost.create_repo(REPO, {"apps/web.yaml": deployment_manifest("web")})
    if case == "unknown":  # known_hosts pins another server only
        setup.known_hosts.write_text(f"[127.0.0.1]:1 {sshgit.host_public_key}\n")
    else:  # the server's key is no longer the pinned one
        sshgit.change_host_key()
    pinned = setup.known_hosts.read_text()
    setup.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    caplog.set_level(logging.DEBUG)
    with controller(api_client, setup) as (app, _):
        put_data(api_client, "app-config", {"url": "b"})
        event = wait_event(api_client, "web", "ReloadFailed")
        reason = "HostKeyUnknown" if case == "unknown" else "HostKeyChanged"
        wait_for(lambda: metric(app, "git_errors_total", repo=REPO, reason=reason) >= 1, timeout=30,
                 message=f"git_errors_total{{reason={reason}}}")
    message = event["message"]
    assert event["type"] == "Warning"
    assert sshgit.url(REPO) in message and str(setup.known_hosts) in message
    assert f"[127.0.0.1]:{sshgit.port}" in message
    assert ("is not in" if case == "unknown" else "does not match") in message
    assert "refused the credentials" not in message
    assert any(r.getMessage() == "git sync failed" and getattr(r, "repo", "") == REPO for r in caplog.records)
    assert len(commits(githost)) == 1  # nothing fetched, nothing pushed
    assert sshgit.sessions() == 0  # never past the host key
    assert setup.known_hosts.read_text() == pinned  # never accepted, never rewritten
    for line in private_key_material(setup):
        assert line not in caplog.text and line not in message


def test_a_clone_owned_by_another_user_is_still_used(api_client: ApiClient, setup: SshSetup,
                                                     githost: GitHostServer,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache volume may hold a clone another uid made (an earlier container's user, a
    root init container, an fsGroup volume): git's "dubious ownership" check would refuse it;
    the controller trusts exactly its own clone directories (safe.directory) and nothing else."""
    githost.create_repo(REPO, {"apps/web.yaml": deployment_manifest("web")})
    setup.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    with controller(api_client, setup):
        put_data(api_client, "app-config", {"url": "b"})
        wait_commits(githost, 2, timeout=SSH_WAIT)
    clone = setup.cache_dir / REPO
    if os.geteuid() == 0:
        for path in (clone, *clone.rglob("*")):
            os.lchown(path, 65534, 65534)
    else:  # git's own switch for "owned by someone else" (setup.c ensure_valid_ownership)
        monkeypatch.setenv("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")
    refused = subprocess.run(["git", "-C", str(clone), "status"], capture_output=True, text=True,
                             stdin=subprocess.DEVNULL)
    assert refused.returncode != 0 and "dubious ownership" in refused.stderr  # plain git refuses it
    with controller(api_client, setup) as (app, _):
        put_data(api_client, "app-config", {"url": "c"})
        wait_commits(githost, 3, timeout=SSH_WAIT)
        quiet(app)
        assert metric(app, "git_errors_total", repo=REPO, reason="sync") == 0


# --------------------------------------------------------------------------- the pull-request sink over SSH

PR_REPO = "org/fleet"


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_pull_request_branch_is_pushed_over_ssh_and_the_pull_request_opened(
        kind: str, api_client: ApiClient, setup: SshSetup, githost: GitHostServer, sshgit: SshGitHost,
        prhost: PrHost, caplog: pytest.LogCaptureFixture) -> None:
    """git over SSH with the deploy key; the host's REST API with the token of ``pullRequest.tokenFile``
    (an SSH repository has no ``tokenFile`` of its own)."""
    githost.create_repo(PR_REPO, {"apps/web.yaml": deployment_manifest("web")})
    api_url = prhost.mount(kind)
    token_file = setup.tmp / "api-token"
    token_file.write_text(GIT_TOKEN + "\n")
    setup.config_path.write_text(textwrap.dedent(f"""\
        repositories:
          - name: fleet
            url: {sshgit.url(PR_REPO)}
            branch: main
            sshKeyFile: {setup.key_file}
            knownHostsFile: {setup.known_hosts}
            pullRequest:
              host: {kind}
              apiUrl: {api_url}
              tokenFile: {token_file}
              repository: {PR_REPO}
        """))
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, deployment("web", annotations={
        "gitops-reloader.io/sink": "pull-request", "configmap.reloader.stakater.com/reload": "app-config"}))
    caplog.set_level(logging.DEBUG)
    config = load_config(setup.flags(), environ={"HOME": os.environ["HOME"], "POD_NAMESPACE": CONTROLLER_NS})
    app = App(config, api_client=api_client, serve_http=False)
    app.start()
    try:
        put_data(api_client, "app-config", {"url": "b"})
        pull = wait_for(lambda: next((p for p in prhost.pulls(PR_REPO) if p["state"] == "open"), None),
                        timeout=30, message="the open pull request")
        quiet(app)
    finally:
        app.stop()
    assert pull["base"] == "main" and pull["head"] in githost.branches(PR_REPO)
    assert pull["head_sha"] == githost.branches(PR_REPO)[pull["head"]]  # the branch pushed over SSH
    assert has_hash(githost.read_file(PR_REPO, "apps/web.yaml", pull["head"]).decode())
    assert [s for _, s in githost.log(PR_REPO)] == ["initial"]  # the base is untouched
    assert len(prhost.pulls(PR_REPO)) == 1
    assert sshgit.sessions() >= 2  # fetch and push over SSH
    assert metric(app, "pr_operations_total", host=kind, operation="create") == 1.0
    events_text = str(events(api_client, "web"))
    for text in (caplog.text, events_text, pull["body"]):
        assert GIT_TOKEN not in text
        assert all(line not in text for line in private_key_material(setup))
