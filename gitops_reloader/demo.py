"""``gitops-reloader demo``: the whole loop on this machine, nothing to install.

Starts the bundled Kubernetes API test server and a local git server (real
``git http-backend`` on 127.0.0.1 with token auth) holding a manifest repository. Creates
a ConfigMap and two Deployments that use it: ``web`` on the ``env-vars`` sink (Stakater's
default) and ``api`` on the ``git`` sink. Runs the controller, changes the ConfigMap, and
prints what changed: the env var patched into ``web``, and the commit pushed to the
repository for ``api`` (its diff touches only ``gitops-reloader.io/config-hash``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import (
    clients,
    container_env,
    deployment,
    env_from_configmap,
    running_controller,
    wait_for,
)

NAMESPACE = "demo"
MANIFEST = """\
# The api Deployment, as Argo CD / Flux apply it.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: demo
  annotations:
    reloader.stakater.com/auto: "true"
    gitops-reloader.io/sink: git            # reload by commit, not by live patch
spec:
  selector:
    matchLabels: {app: api}
  template:
    metadata:
      labels:
        app: api
    spec:
      containers:
        - name: app
          image: nginx:1.27   # pinned
          envFrom:
            - configMapRef:
                name: app-config
"""


def _print(title: str, body: Any = None) -> None:
    print(f"\n== {title}")
    if body is not None:
        print(body if isinstance(body, str) else json.dumps(body, indent=2, sort_keys=True))


def _spec(apps: Any, name: str) -> dict[str, Any]:
    raw = apps.api_client.sanitize_for_serialization(apps.read_namespaced_deployment(name, NAMESPACE))
    return dict(raw["spec"])


def _stakater_env(apps: Any) -> dict[str, Any] | None:
    env = container_env({"spec": _spec(apps, "web")})
    return env if "STAKATER_APP_CONFIG_CONFIGMAP" in env else None


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(prog="gitops-reloader demo", description=__doc__)
    parser.add_argument("--workdir", default="", help="keep the repositories and clones here")
    args = parser.parse_args(list(argv))
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="gitops-reloader-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    token_file = workdir / "git-token"
    git_config = workdir / "git-config.yaml"
    with ApiServer() as server, GitHostServer(workdir / "remote", token="demo-token") as githost:
        githost.create_repo("manifests", {"apps/api/deployment.yaml": MANIFEST})
        token_file.write_text("demo-token\n")
        git_config.write_text(
            "repositories:\n"
            "  - name: manifests\n"
            f"    url: {githost.repo_url('manifests')}\n"
            "    branch: main\n"
            f"    tokenFile: {token_file}\n"
        )
        api_client = server.api_client()
        core, apps = clients(api_client)
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        core.create_namespaced_config_map(NAMESPACE, {
            "metadata": {"name": "app-config"}, "data": {"greeting": "hello"},
        })
        apps.create_namespaced_deployment(NAMESPACE, deployment(
            "web", namespace=NAMESPACE, annotations={"reloader.stakater.com/auto": "true"},
            containers=[env_from_configmap("app-config")],
        ))
        apps.create_namespaced_deployment(NAMESPACE, deployment(
            "api", namespace=NAMESPACE,
            annotations={"reloader.stakater.com/auto": "true", "gitops-reloader.io/sink": "git"},
            containers=[env_from_configmap("app-config")],
        ))
        _print(f"API test server {server.url}; git server {githost.url}")
        print(f"created ConfigMap {NAMESPACE}/app-config, Deployment {NAMESPACE}/web (env-vars sink) "
              f"and Deployment {NAMESPACE}/api (git sink, manifest in manifests:apps/api/deployment.yaml)")
        flags = ["--log-level=warning", "--coalesce-window=1s", f"--git-config={git_config}",
                 f"--git-cache-dir={workdir / 'cache'}"]
        before_commits = len(githost.log("manifests"))
        with running_controller(api_client, flags, environ={"HOME": str(workdir)}):
            before = container_env({"spec": _spec(apps, "web")})
            core.patch_namespaced_config_map("app-config", NAMESPACE,
                                             {"data": {"greeting": "hello, world"}})
            _print("changed ConfigMap demo/app-config: greeting 'hello' → 'hello, world'")
            env = wait_for(lambda: _stakater_env(apps), timeout=20,
                           message="the web Deployment to be reloaded")
            _print("Deployment demo/web, container 'app' env (env-vars sink: live patch)",
                   {"before": before, "after": env})
            wait_for(lambda: len(githost.log("manifests")) > before_commits, timeout=30,
                     message="the git sink's commit")
        sha, subject = githost.log("manifests")[0]
        diff = subprocess.run(
            ["git", "--git-dir", str(githost.bare_path("manifests")), "show", "--format=commit %H%n"
             "Author: %an <%ae>%n%n    %s%n", sha],
            capture_output=True, text=True, check=True).stdout
        _print(f"commit pushed to manifests@main for Deployment demo/api (git sink): {subject}", diff)
    print(f"demo finished: live patch for web, commit {sha[:12]} for api. Files in {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
