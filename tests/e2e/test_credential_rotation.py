"""Credentials rotated in their mounted Secret take effect without a restart (issue 33, in part).

The files live in a directory laid out as the kubelet lays out a Secret volume: a timestamped
directory per version, ``..data`` swapped atomically to the new one, each file a link through
``..data``. The test then revokes the old credential on the server: the next push, or the next
pull-request call, must already use the new one — nothing fails, nothing is restarted. A
repository whose mounts fail their checks at start-up becomes usable as soon as they pass.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from git_setup import REPO, GitSetup, commits, deployment_manifest, wait_commits
from kubernetes.client import ApiClient
from reload_helpers import configmap, create, events, metric, quiet
from test_git_sink import git_controller, git_workload, put_data
from test_git_ssh import SshSetup
from test_git_ssh import controller as ssh_controller
from test_git_ssh import git_workload as ssh_workload
from test_git_ssh import put_data as ssh_put_data
from test_outages import swap_data, wait_attempts
from test_pull_request_sink import PrSetup, pr_controller, pulls, wait_open_pull, web_reloads_on_app_config

from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import wait_for
from gitops_reloader.testing.prhost import PrHost
from gitops_reloader.testing.sshhost import SshGitHost

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

NEW_TOKEN = "rotated-token-0002"


def token_volume(tmp_path: Path, token: str) -> Path:
    """A Secret volume holding ``token`` as ``token``; returns the file's path (a link)."""
    volume = tmp_path / "git-credentials"
    volume.mkdir()
    swap_data(volume, "token", token + "\n", "1")
    return volume / "token"


def test_credential_rotation_of_the_git_token_is_used_for_the_next_push(
        api_client: ApiClient, git: GitSetup, host: GitHostServer, tmp_path: Path) -> None:
    token = token_volume(tmp_path, host.token)
    git.create({"apps/web.yaml": deployment_manifest("web")})
    git.configure(token_file=token)
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    with git_controller(api_client, git) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        swap_data(token.parent, "token", NEW_TOKEN + "\n", "2")  # the kubelet swaps the Secret
        host.token = NEW_TOKEN  # and the old token is revoked on the host
        put_data(api_client, "ConfigMap", "app-config", {"url": "c"})
        wait_commits(host, 3)
        quiet(app)
        assert app.controller.ledger.failures() == []  # no attempt failed
        assert not [e for e in events(api_client, "web") if e["type"] == "Warning"]
        assert metric(app, "queue_retries_total") == 0.0


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_credential_rotation_of_the_pull_request_api_token(
        api_client: ApiClient, tmp_path: Path, githost: GitHostServer, prhost: PrHost, kind: str) -> None:
    """The API token (its own file here) rotates while a pull request is open: the update of
    that pull request uses the new token at once."""
    setup = PrSetup(tmp_path, githost, prhost, kind)
    api_token = token_volume(tmp_path, githost.token)
    web_reloads_on_app_config(api_client, setup, api_token_file=api_token)
    with pr_controller(api_client, setup) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        first = wait_open_pull(prhost)
        quiet(app)
        swap_data(api_token.parent, "token", NEW_TOKEN + "\n", "2")
        prhost.set_token(NEW_TOKEN)  # the old API token is revoked
        put_data(api_client, "ConfigMap", "app-config", {"url": "c"})
        wait_for(lambda: prhost.requests and prhost.requests[-1].status < 300
                 and any(r.method in ("PATCH", "PUT") for r in prhost.requests[-5:]),
                 message="the pull request updated")
        quiet(app)
        assert [p["number"] for p in pulls(prhost)] == [first["number"]]  # updated in place
        assert not [r for r in prhost.requests if r.status == 401]
        assert app.controller.ledger.failures() == []


def test_credential_rotation_an_unusable_repository_becomes_usable_without_restart(
        api_client: ApiClient, tmp_path: Path, githost: GitHostServer, sshgit: SshGitHost) -> None:
    """known_hosts is missing at start-up: the repository is unusable (``/readyz`` says so, the
    gauge is 1) and a change to its workload is held. The Secret is fixed: within seconds the
    repository passes its checks, ``/readyz`` and the gauge recover, the waiting workload gets a
    RepositoryUsable Event, and the held change is committed once — no restart, no new change."""
    setup = SshSetup(tmp_path, githost, sshgit)
    volume = tmp_path / "ssh-credentials"
    volume.mkdir()
    swap_data(volume, "ssh-privatekey", setup.key_file.read_text(), "1", mode=0o400)
    githost.create_repo(REPO, {"apps/web.yaml": deployment_manifest("web")})
    setup.configure(key_file=volume / "ssh-privatekey", known_hosts=volume / "known_hosts")
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, ssh_workload("web"))
    with ssh_controller(api_client, setup) as (app, _):
        [problem] = app.readiness_problems
        assert "KnownHostsMissing" in problem
        assert metric(app, "git_repository_unusable", sink="git", repo=REPO, reason="KnownHostsMissing") == 1
        ssh_put_data(api_client, "app-config", {"url": "b"})
        entry = wait_attempts(app, 1)
        assert (entry.reason, entry.failure.value) == ("RepositoryUnusable", "needs-person")
        (volume / "..2").mkdir()  # the next version holds both files before ..data moves
        (volume / "..2" / "known_hosts").write_text(sshgit.known_hosts_line + "\n")
        swap_data(volume, "ssh-privatekey", setup.key_file.read_text(), "2", mode=0o400)
        (volume / "known_hosts").symlink_to("..data/known_hosts")  # the Secret now has the key
        wait_commits(githost, 2, timeout=30)
        quiet(app)
        assert app.readiness_problems == ()
        assert metric(app, "git_repository_unusable", sink="git", repo=REPO, reason="KnownHostsMissing") == 0
        usable = wait_for(lambda: [e for e in events(api_client, "web") if e["reason"] == "RepositoryUsable"],
                          message="a RepositoryUsable Event")
        assert usable[0]["type"] == "Normal" and REPO in usable[0]["message"]
        assert len(commits(githost)) == 2 and app.controller.ledger.failures() == []


def test_credential_rotation_of_the_ssh_deploy_key_is_used_for_the_next_push(
        api_client: ApiClient, tmp_path: Path, githost: GitHostServer, sshgit: SshGitHost) -> None:
    """The deploy key is rotated: the Secret gets a new key and the host accepts only the new
    one. ssh reads the key at every connection, so the next push already uses it."""
    setup = SshSetup(tmp_path, githost, sshgit)
    volume = tmp_path / "ssh-credentials"
    volume.mkdir()
    swap_data(volume, "ssh-privatekey", setup.key_file.read_text(), "1", mode=0o400)
    githost.create_repo(REPO, {"apps/web.yaml": deployment_manifest("web")})
    setup.configure(key_file=volume / "ssh-privatekey")
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, ssh_workload("web"))
    new_key = tmp_path / "new_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(new_key)], check=True)
    with ssh_controller(api_client, setup) as (app, _):
        ssh_put_data(api_client, "app-config", {"url": "b"})
        wait_commits(githost, 2)
        swap_data(volume, "ssh-privatekey", new_key.read_text(), "2", mode=0o400)
        sshgit.authorize(new_key.with_suffix(".pub").read_text())  # the old key is revoked
        ssh_put_data(api_client, "app-config", {"url": "c"})
        wait_commits(githost, 3)
        quiet(app)
        assert app.controller.ledger.failures() == []
        assert metric(app, "queue_retries_total") == 0.0


def test_credential_rotation_of_the_signing_key_signs_the_next_commit_with_the_new_key(
        api_client: ApiClient, git: GitSetup, host: GitHostServer, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    for name in ("old", "new"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / name)], check=True)
    volume = tmp_path / "signing"
    volume.mkdir()
    swap_data(volume, "signing-key", (keys / "old").read_text(), "1", mode=0o400)
    git.create({"apps/web.yaml": deployment_manifest("web")})
    git.configure(extra=f"    signingKey: {{file: {volume / 'signing-key'}}}\n")
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    with git_controller(api_client, git) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        swap_data(volume, "signing-key", (keys / "new").read_text(), "2", mode=0o400)
        put_data(api_client, "ConfigMap", "app-config", {"url": "c"})
        wait_commits(host, 3)
        quiet(app)
    newest, older = (sha for sha, _ in commits(host)[:2])
    assert _signed_by(host, keys / "new", newest) and _signed_by(host, keys / "old", older)
    assert not _signed_by(host, keys / "old", newest)


def _signed_by(host: GitHostServer, key: Path, sha: str) -> bool:
    signers = key.with_suffix(".signers")
    signers.write_text(f'* namespaces="git" {key.with_suffix(".pub").read_text().strip()}\n')
    command = ["git", "-c", f"gpg.ssh.allowedSignersFile={signers}", f"--git-dir={host.bare_path(REPO)}",
               "verify-commit", sha]
    done = subprocess.run(command, capture_output=True, text=True)
    return done.returncode == 0
