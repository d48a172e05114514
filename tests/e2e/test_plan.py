"""``gitops-reloader plan`` end to end: the real CLI in a subprocess against the API test
server and a ``git http-backend`` remote.

What it must show (issue 14): the diff ``plan`` prints is the diff the git sink then
commits for the same change; ``plan`` writes nothing (the API server's request counts
hold no write verb, the remote no new commit or branch); the env-vars patch names the
container and variable; Secret data and hashes never appear; the exit code says whether
anything would be written.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import test_pull_request_sink as prs
from git_setup import REPO, GitSetup
from kubernetes.client import ApiClient
from reload_helpers import configmap, create, secret
from test_git_sink import (
    CONTROLLER_NS,
    commits,
    git_controller,
    git_workload,
    put_data,
    wait_commits,
)

from gitops_reloader.gitops.digestkey import DIGEST_KEY_FIELD
from gitops_reloader.hashing import secret_hash
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import deployment, env_from_secret
from gitops_reloader.testing.prhost import PrHost

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

READ_VERBS = {"get", "list", "watch"}
WHEN = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
API_FILE = "apps/api/api.yaml"
API_YAML = textwrap.dedent("""\
    # The API tier; comments and quoting are kept by every edit.
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: api
      namespace: ns
    spec:
      selector:
        matchLabels: {app: api}
      template:
        metadata:
          labels:
            app: api
          annotations:
            owner: 'team-a'   # quoted on purpose
        spec:
          containers:
            - name: app
              image: nginx:1.25
    """)


def run_plan(server: ApiServer, tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """``python -m gitops_reloader.cli plan`` with a kubeconfig for ``server``."""
    kubeconfig = tmp_path / "kubeconfig"
    server.write_kubeconfig(kubeconfig)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"HOME": str(tmp_path / "home"), "POD_NAMESPACE": CONTROLLER_NS, "GIT_CONFIG_NOSYSTEM": "1"})
    return subprocess.run(
        [sys.executable, "-m", "gitops_reloader.cli", "plan", f"--kubeconfig={kubeconfig}", *flags],
        capture_output=True, text=True, env=env, timeout=120, check=False)


def create_digest_key(api_client: ApiClient) -> None:
    """The digest-key Secret, as the first git write would create it (plan only reads it)."""
    create(api_client, {"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": "gitops-reloader-digest-key", "namespace": CONTROLLER_NS},
                        "data": {DIGEST_KEY_FIELD: base64.b64encode(b"k" * 32).decode()}})


def writes(server: ApiServer) -> dict[tuple[str, str], int]:
    return {k: n for k, n in server.request_counts().items() if k[0] not in READ_VERBS}


def section(stdout: str, heading: str) -> str:
    """The block printed under ``heading`` (4-space indented lines), indentation removed."""
    lines = stdout.split("\n")
    start = lines.index(heading) + 1
    out: list[str] = []
    for line in lines[start:]:
        if line and not line.startswith("    "):
            break
        out.append(line[4:])
    return "\n".join(out).rstrip("\n") + "\n"


def remote_show(githost: GitHostServer, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(githost.bare_path(REPO)), "show", "--no-color", *args],
                          capture_output=True, text=True, check=True).stdout


def test_plan_shows_the_diff_the_git_sink_then_commits_and_writes_nothing(
        api_client: ApiClient, server: ApiServer, git: GitSetup, host: GitHostServer,
        tmp_path: Path) -> None:
    git.create({API_FILE: API_YAML})
    git.configure()
    create(api_client, configmap("app-config", {"mode": "blue"}))
    create(api_client, git_workload("api"))
    create_digest_key(api_client)
    history, branches = commits(host), host.branches(REPO)
    server.reset_request_counts()

    result = run_plan(server, tmp_path, "--configmap", "ns/app-config", "--from-literal", "mode=green",
                      *git.flags())

    assert result.returncode == 1, result.stderr
    assert "ns/Deployment/api [git] would-write" in result.stdout
    assert writes(server) == {}, "plan wrote to the API server"
    assert commits(host) == history and host.branches(REPO) == branches, "plan touched the remote"
    planned_diff = section(result.stdout, "  diff:")
    planned_message = section(result.stdout, "  commit message:")
    assert f"+++ b/{API_FILE}" in planned_diff and "+        gitops-reloader.io/config-hash:" in planned_diff

    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"mode": "green"})
        wait_commits(host, len(history) + 1)

    assert remote_show(host, "--format=", "main") == planned_diff
    assert remote_show(host, "--no-patch", "--format=%B", "main").rstrip("\n") + "\n" == planned_message


def test_plan_shows_the_pull_request_the_sink_then_opens_and_calls_no_host(
        api_client: ApiClient, server: ApiServer, githost: GitHostServer, prhost: PrHost,
        tmp_path: Path) -> None:
    setup = prs.PrSetup(tmp_path, githost, prhost, "github")
    setup.create({"apps/web.yaml": prs.manifest("web")})
    setup.configure()
    create(api_client, configmap("app-config", {"mode": "blue"}))
    create(api_client, prs.pr_workload("web"))
    create_digest_key(api_client)
    branches = githost.branches(prs.REPO)
    server.reset_request_counts()

    result = run_plan(server, tmp_path, "--configmap", "ns/app-config", "--from-literal", "mode=green",
                      *setup.flags("plan-cache"))

    assert result.returncode == 1, result.stderr
    assert f"pull request on repository {prs.NAME}: {prs.WEB_BRANCH} into main" in result.stdout
    assert writes(server) == {} and githost.branches(prs.REPO) == branches
    assert prhost.requests == [] and prs.pulls(prhost) == []
    assert not (tmp_path / "plan-cache").exists(), "plan cloned into the controller's cache"
    planned_title = result.stdout.split("  title: ", 1)[1].split("\n", 1)[0]
    planned_body = section(result.stdout, "  body:")
    planned_diff = section(result.stdout, "  diff:")

    with prs.pr_controller(api_client, setup):
        prs.put_data(api_client, "ConfigMap", "app-config", {"mode": "green"})
        pull = prs.wait_open_pull(prhost)

    assert pull["head"] == prs.WEB_BRANCH and pull["title"] == planned_title
    assert WHEN.sub("<when>", pull["body"]).rstrip("\n") == WHEN.sub("<when>", planned_body).rstrip("\n")
    shown = subprocess.run(["git", "--git-dir", str(githost.bare_path(prs.REPO)), "show", "--no-color",
                            "--format=", prs.WEB_BRANCH], capture_output=True, text=True, check=True).stdout
    assert shown == planned_diff


def test_plan_of_an_unchanged_or_unused_source_says_nothing_would_happen(
        api_client: ApiClient, server: ApiServer, tmp_path: Path) -> None:
    create(api_client, configmap("app-config", {"mode": "blue"}))
    create(api_client, configmap("unused", {"x": "1"}))
    create(api_client, deployment("web", annotations={"reloader.stakater.com/auto": "true"},
                                  containers=[{"name": "app", "image": "nginx",
                                               "envFrom": [{"configMapRef": {"name": "app-config"}}]}]))

    same = run_plan(server, tmp_path, "--configmap", "ns/app-config", "--from-literal", "mode=blue")
    unused = run_plan(server, tmp_path, "--configmap", "ns/unused")  # as if it changed
    as_if = run_plan(server, tmp_path, "--configmap", "ns/app-config")
    as_json = run_plan(server, tmp_path, "--configmap", "ns/app-config", "--output", "json")

    assert same.returncode == 0 and "the new data equals the current data" in same.stdout, same.stderr
    assert unused.returncode == 0 and "no workload would be reloaded" in unused.stdout, unused.stderr
    assert as_if.returncode == 1 and "ns/Deployment/web [env-vars] would-write" in as_if.stdout, as_if.stderr
    assert "STAKATER_APP_CONFIG_CONFIGMAP" in as_if.stdout
    document = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and document["wouldWrite"] is True
    [web] = document["workloads"]
    assert (web["key"], web["sink"], web["status"]) == ("ns/Deployment/web", "env-vars", "would-write")
    [env] = web["patch"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env["name"] == "STAKATER_APP_CONFIG_CONFIGMAP" and len(env["value"]) == 40


def test_plan_for_a_secret_shows_the_env_patch_but_never_the_secret(
        api_client: ApiClient, server: ApiServer, tmp_path: Path) -> None:
    create(api_client, secret("db", {"password": "old-pass"}))
    create(api_client, deployment("api", annotations={"reloader.stakater.com/auto": "true"},
                                  containers=[env_from_secret("db")]))
    create(api_client, deployment("other", annotations={"reloader.stakater.com/auto": "true"}))
    server.reset_request_counts()

    result = run_plan(server, tmp_path, "--secret", "ns/db", "--from-literal", "password=n3w-s3cret")

    assert result.returncode == 1, result.stderr
    out = result.stdout + result.stderr
    assert "ns/Deployment/api [env-vars] would-write" in out
    assert "ns/Deployment/other" not in out
    assert '"name": "STAKATER_DB_SECRET"' in out and '"value": "<secret-hash>"' in out
    assert "PATCH deployments ns/api" in out
    for leaked in ("n3w-s3cret", "old-pass", secret_hash({"password": _b64("n3w-s3cret")}),
                   secret_hash({"password": _b64("old-pass")})):
        assert leaked not in out
    assert writes(server) == {}


def test_plan_refuses_bad_flags_with_exit_code_2(server: ApiServer, tmp_path: Path) -> None:
    missing = run_plan(server, tmp_path)
    malformed = run_plan(server, tmp_path, "--configmap", "no-namespace")
    literal = run_plan(server, tmp_path, "--secret", "ns/db", "--from-literal", "novalue")
    absent = run_plan(server, tmp_path, "--configmap", "ns/absent")

    assert missing.returncode == 2 and "--configmap NAMESPACE/NAME" in missing.stderr
    assert malformed.returncode == 2
    assert literal.returncode == 2 and "KEY=VALUE" in literal.stderr
    assert absent.returncode == 2 and "absent" in absent.stderr


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_plan_shows_the_annotation_patch_the_pause_and_the_webhook_payload(
        api_client: ApiClient, server: ApiServer, tmp_path: Path) -> None:
    create(api_client, configmap("app-config", {"mode": "blue"}))
    uses = [{"name": "app", "image": "nginx", "envFrom": [{"configMapRef": {"name": "app-config"}}]}]
    create(api_client, deployment("web", containers=uses, annotations={
        "reloader.stakater.com/auto": "true", "gitops-reloader.io/sink": "annotations",
        "deployment.reloader.stakater.com/pause-period": "5m"}))
    server.reset_request_counts()

    annotated = run_plan(server, tmp_path, "--configmap", "ns/app-config", "--from-literal", "mode=green")
    hooked = run_plan(server, tmp_path, "--configmap", "ns/app-config", "--from-literal", "mode=green",
                      "--webhook-url=http://127.0.0.1:9/never-called")

    assert annotated.returncode == 1, annotated.stderr
    assert "ns/Deployment/web [annotations] would-write" in annotated.stdout
    recorded = ('"reloader.stakater.com/last-reloaded-from": '
                '"{\\"type\\":\\"CONFIGMAP\\",\\"name\\":\\"app-config\\"')
    assert recorded in annotated.stdout
    assert '"paused": true' in annotated.stdout
    assert "deployment.reloader.stakater.com/paused-at" in annotated.stdout
    assert hooked.returncode == 1, hooked.stderr
    assert "ns/Deployment/web [webhook] would-write" in hooked.stdout
    assert '"webhook": "update successful"' in hooked.stdout and "POST to the webhook URL" in hooked.stdout
    assert writes(server) == {}


def test_plan_reports_a_git_workload_it_cannot_edit_and_a_missing_digest_key(
        api_client: ApiClient, server: ApiServer, git: GitSetup, host: GitHostServer,
        tmp_path: Path) -> None:
    git.create({API_FILE: API_YAML})
    git.configure()
    create(api_client, configmap("app-config", {"mode": "blue"}))
    create(api_client, git_workload("api"))
    create(api_client, git_workload("nowhere"))  # no manifest in the repository
    server.reset_request_counts()

    result = run_plan(server, tmp_path, "--configmap", "ns/app-config", "--from-literal", "mode=green",
                      *git.flags())

    assert result.returncode == 1, result.stderr
    assert "ns/Deployment/nowhere [git] skipped" in result.stdout
    assert "ManifestNotFound" in result.stdout.split("ns/Deployment/nowhere", 1)[1].split("\n\n", 1)[0]
    assert f"digest key Secret {CONTROLLER_NS}/gitops-reloader-digest-key does not exist" in result.stdout
    assert writes(server) == {}, "plan created the digest key"


def test_plan_reads_new_data_from_a_file_and_applies_the_run_filters(
        api_client: ApiClient, server: ApiServer, tmp_path: Path) -> None:
    create(api_client, configmap("app-config", {"app.conf": "x = 1\n"}))
    uses = [{"name": "app", "image": "nginx", "envFrom": [{"configMapRef": {"name": "app-config"}}]}]
    create(api_client, deployment("web", containers=uses, annotations={"reloader.stakater.com/auto": "true"}))
    same_file, new_file = tmp_path / "same", tmp_path / "new"
    same_file.write_text("x = 1\n")
    new_file.write_text("x = 2\n")

    source = ("--configmap", "ns/app-config", "--from-file")
    same = run_plan(server, tmp_path, *source, f"app.conf={same_file}")
    changed = run_plan(server, tmp_path, *source, f"app.conf={new_file}")
    filtered = run_plan(server, tmp_path, *source, f"app.conf={new_file}", "--namespaces=other")

    assert same.returncode == 0 and "equals the current data" in same.stdout, same.stderr
    assert changed.returncode == 1 and "ns/Deployment/web [env-vars] would-write" in changed.stdout
    assert filtered.returncode == 0, filtered.stderr
    assert "note: the controller does not watch this source" in filtered.stdout
    assert "no workload would be reloaded" in filtered.stdout
