"""``gitops-reloader demo``: the whole loop on this machine, nothing to install.

Starts the bundled API test server, creates a namespace, a ConfigMap and two annotated
Deployments (one on the ``env-vars`` sink, one on the ``git`` sink), runs the controller,
changes the ConfigMap, and prints what changed: the env var patched into the first
Deployment, and the commit pushed to a local git repository for the second.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.harness import (
    clients,
    container_env,
    deployment,
    env_from_configmap,
    running_controller,
    wait_for,
)

NAMESPACE = "demo"


def _print(title: str, body: Any = None) -> None:
    print(f"\n== {title}")
    if body is not None:
        print(body if isinstance(body, str) else json.dumps(body, indent=2, sort_keys=True))


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(prog="gitops-reloader demo", description=__doc__)
    parser.add_argument("--workdir", default="", help="keep the git repositories here")
    args = parser.parse_args(list(argv))
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="gitops-reloader-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    with ApiServer() as server:
        api_client = server.api_client()
        core, apps = clients(api_client)
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        core.create_namespaced_config_map(NAMESPACE, {
            "metadata": {"name": "app-config"}, "data": {"greeting": "hello"},
        })
        apps.create_namespaced_deployment(NAMESPACE, deployment(
            "web", namespace=NAMESPACE,
            annotations={"reloader.stakater.com/auto": "true"},
            containers=[env_from_configmap("app-config")],
        ))
        _print(f"API test server at {server.url}; created ConfigMap {NAMESPACE}/app-config "
               f"and Deployment {NAMESPACE}/web (reloader.stakater.com/auto: \"true\")")
        with running_controller(api_client, ["--log-level=warning"]):
            before = container_env({"spec": _spec(apps, "web")})
            core.patch_namespaced_config_map("app-config", NAMESPACE,
                                             {"data": {"greeting": "hello, world"}})
            _print("changed ConfigMap demo/app-config: greeting=hello → 'hello, world'")
            env = wait_for(lambda: _stakater_env(apps, "web"), timeout=10,
                           message="the Deployment to be reloaded")
            _print("Deployment demo/web container 'app' env (env-vars sink)",
                   {"before": before, "after": env})
    print("\ndemo finished: the Deployment was reloaded through the env-vars sink.")
    return 0


def _spec(apps: Any, name: str) -> dict[str, Any]:
    raw = apps.api_client.sanitize_for_serialization(apps.read_namespaced_deployment(name, NAMESPACE))
    return raw["spec"]


def _stakater_env(apps: Any, name: str) -> dict[str, Any] | None:
    env = container_env({"spec": _spec(apps, name)})
    return env if "STAKATER_APP_CONFIG_CONFIGMAP" in env else None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
