"""``helm`` for Stakater's end-to-end suite on a control plane whose node is kwok's.

Stakater's suite (test/e2e/utils/helm.go) installs the reloader with ``helm upgrade --install
<release> <its chart> --namespace <ns> --set k=v … --wait`` and removes it with ``helm uninstall
<release> --namespace <ns>``; ``helm`` is found on ``PATH``. kwok runs no containers, so this
stand-in does what a kubelet would do with the chart's one container, on the host:

* renders the chart with the real ``helm template`` and the suite's ``--set`` values — the
  project's own chart (``STAKATER_HELM_CHART=ours``) or the chart the suite names (``theirs``:
  Stakater's, as a team that only swaps the image runs it);
* applies what it rendered (the Deployment under the name the suite waits for,
  ``<release>-reloader``; kwok makes its pod Running and Ready);
* starts the container's command and args (its image's entrypoint, ``STAKATER_HELM_ENTRYPOINT``, a
  JSON list, when the chart gives args only) with the container's environment (``fieldRef`` and
  literal values; a ``resourceFieldRef`` is left out) and ``KUBECONFIG``, as a host process;
* waits, for ``--wait``, for the container's readiness probe to answer 200 on 127.0.0.1 (where
  the binary lets an environment variable, ``STAKATER_HELM_PORT_ENV``, choose its address, on a
  free port of its own, as its pod's network namespace would give it; Stakater's binary binds
  :9090 whatever it is told, so its runs take turns);
* on ``uninstall`` stops the process (SIGTERM, by PID) and deletes what it applied.

What it does not cover: the chart's RBAC (the process runs with the cluster's admin kubeconfig,
not as the pod's ServiceAccount), the image, probes other than the first readiness answer.
State (PID, objects) is kept in ``STAKATER_HELM_STATE``; the process's output in
``<state>/<release>.log``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

READY_TIMEOUT = 120.0
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "Namespace", "CustomResourceDefinition",
                  "PriorityClass", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="helm")
    commands = parser.add_subparsers(dest="command", required=True)
    install = commands.add_parser("upgrade")
    install.add_argument("--install", action="store_true")
    install.add_argument("release")
    install.add_argument("chart")
    install.add_argument("--namespace", "-n", default="default")
    install.add_argument("--create-namespace", action="store_true")
    install.add_argument("--reset-values", action="store_true")
    install.add_argument("--set", action="append", default=[])
    install.add_argument("--wait", action="store_true")
    install.add_argument("--timeout", default="120s")
    remove = commands.add_parser("uninstall")
    remove.add_argument("release")
    remove.add_argument("--namespace", "-n", default="default")
    remove.add_argument("--ignore-not-found", action="store_true")
    remove.add_argument("--wait", action="store_true")
    args = parser.parse_args(argv)
    state = Path(os.environ["STAKATER_HELM_STATE"])
    state.mkdir(parents=True, exist_ok=True)
    if args.command == "uninstall":
        return uninstall(state, args.release)
    uninstall(state, args.release)
    return upgrade_install(state, args.release, args.chart, args.namespace, args.set, wait=args.wait)


def kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", *args], input=stdin, text=True, capture_output=True, check=False)


def render(release: str, chart: str, namespace: str, values: list[str]) -> list[dict[str, Any]]:
    """The chart rendered by the real helm with the suite's values."""
    if os.environ.get("STAKATER_HELM_CHART", "ours") == "ours":
        chart = os.environ["STAKATER_HELM_OURS"]
    command = [os.environ["STAKATER_HELM_REAL"], "template", release, chart, "--namespace", namespace]
    for value in values:
        command += ["--set", value]
    rendered = subprocess.run(command, text=True, capture_output=True, check=False)
    if rendered.returncode != 0:
        raise SystemExit(f"helm template failed: {rendered.stderr}")
    return [doc for doc in YAML(typ="safe").load_all(rendered.stdout) if isinstance(doc, dict)]


def upgrade_install(state: Path, release: str, chart: str, namespace: str, values: list[str], *,
                    wait: bool) -> int:
    objects = render(release, chart, namespace, values)
    [deployment] = [o for o in objects if o.get("kind") == "Deployment"]
    deployment["metadata"]["name"] = f"{release}-reloader"  # what the suite waits for
    for item in objects:  # helm puts a release's namespaced objects in --namespace unless told otherwise
        if item.get("kind") not in CLUSTER_SCOPED:
            item["metadata"].setdefault("namespace", namespace)
    kubectl("create", "namespace", namespace)
    applied = kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in objects))
    if applied.returncode != 0:
        print(applied.stderr, file=sys.stderr)
        return 1
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    argv = container.get("command") or json.loads(os.environ["STAKATER_HELM_ENTRYPOINT"])
    argv = [*argv, *(container.get("args") or [])]
    env = {**os.environ, "KUBECONFIG": os.environ["KUBECONFIG"],
           **container_env(container, namespace, f"{release}-reloader-host")}
    port = None
    if os.environ.get("STAKATER_HELM_PORT_ENV"):  # the pod's own network namespace, on the host
        port = free_port()
        env[os.environ["STAKATER_HELM_PORT_ENV"]] = f"127.0.0.1:{port}"
    log = state / f"{release}.log"
    with log.open("ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=env, start_new_session=True)
    (state / f"{release}.json").write_text(json.dumps({
        "pid": process.pid, "namespace": namespace, "argv": argv,
        "objects": [[o["kind"], o["metadata"]["name"], o["metadata"].get("namespace", "")]
                    for o in objects]}))
    if wait and not ready(container, process, port):
        print(f"{release}: not ready after {READY_TIMEOUT:.0f}s; its log: {log}", file=sys.stderr)
        return 1
    return 0


def container_env(container: dict[str, Any], namespace: str, pod: str) -> dict[str, str]:
    """The container's environment as a kubelet would give it, where a host process can have it."""
    fields = {"metadata.namespace": namespace, "metadata.name": pod}
    env: dict[str, str] = {}
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = str(item["value"])
        elif (path := ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")) in fields:
            env[item["name"]] = fields[path]
    return env


def ready(container: dict[str, Any], process: subprocess.Popen[bytes], port: int | None) -> bool:
    """Whether the readiness probe (an ``httpGet`` on a named or numbered port, or ``port``
    where the process was moved to one of its own) answered 200."""
    probe = (container.get("readinessProbe") or {}).get("httpGet") or {"path": "/metrics", "port": "http"}
    port = port or probe["port"]
    if not isinstance(port, int):
        port = next(p["containerPort"] for p in container.get("ports") or [] if p.get("name") == port)
    url = f"http://127.0.0.1:{port}{probe.get('path', '/')}"
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def uninstall(state: Path, release: str) -> int:
    record = state / f"{release}.json"
    if not record.exists():
        return 0
    installed = json.loads(record.read_text())
    stop(installed["pid"])
    for kind, name, namespace in installed["objects"]:
        scope = ["--namespace", namespace] if namespace else []
        kubectl("delete", kind, name, *scope, "--ignore-not-found", "--wait=false")
    record.unlink()
    return 0


def stop(pid: int) -> None:
    """SIGTERM, then SIGKILL after 20 s, by PID (and its process group)."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:  # not our child: poll its existence
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.1)
    os.killpg(pid, signal.SIGKILL)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
