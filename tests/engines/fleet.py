"""What the engines tier's tests deploy and read: the web Deployment as a manifest repository
holds it, its Ready pods, and the controller's flags for a repository on the git test server."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from controlplane import FAKE_NODE
from kubernetes.client import CoreV1Api

from gitops_reloader.testing.githost import GitHostServer

TOKEN = "engines-git-token"
"""The git test server's token (source-controller and Argo CD send it too)."""


def web_manifest(namespace: str, sink: str, *, replicas: str = "2", annotations: tuple[str, ...] = (),
                 pod_annotations: str = "team: platform") -> str:
    """The web Deployment as the repository holds it, reloaded through ``sink`` for web-config
    and run on kwok's node; ``annotations``: more workload annotation lines; ``replicas`` and
    ``pod_annotations``: YAML text (a chart puts template expressions there)."""
    lines = [
        "apiVersion: apps/v1", "kind: Deployment", "metadata:", "  name: web", f"  namespace: {namespace}",
        "  annotations:", f"    gitops-reloader.io/sink: {sink}",
        "    configmap.reloader.stakater.com/reload: web-config", *(f"    {a}" for a in annotations),
        "spec:", f"  replicas: {replicas}", "  selector:", "    matchLabels: {app: web}", "  template:",
        "    metadata:", "      labels: {app: web}", "      annotations:", f"        {pod_annotations}",
        "    spec:", f"      nodeName: {FAKE_NODE}", "      terminationGracePeriodSeconds: 0",
        "      containers:", "        - name: app", "          image: registry.example/web:1",
        "          envFrom:", "            - configMapRef: {name: web-config}"]
    return "\n".join(lines) + "\n"


def events_of(core: CoreV1Api, namespace: str, name: str, reason: str = "") -> list[Any]:
    """The Events on the object ``name`` in ``namespace`` (only those of ``reason``, if given)."""
    return [e for e in core.list_namespaced_event(namespace).items
            if e.involved_object.name == name and (not reason or e.reason == reason)]


def ready_pods(core: CoreV1Api, namespace: str, app: str = "web") -> list[Any]:
    """``app``'s pods that are Ready and not being deleted."""
    pods = core.list_namespaced_pod(namespace, label_selector=f"app={app}").items
    return [p for p in pods if p.metadata.deletion_timestamp is None
            and any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions or ()))]


def rolled(core: CoreV1Api, namespace: str, first: set[str]) -> list[Any]:
    """Two Ready web pods, none of them one of ``first`` (empty until then)."""
    pods = ready_pods(core, namespace)
    return pods if len(pods) == 2 and not first & {p.metadata.name for p in pods} else []


def controller_flags(tmp_path: Path, githost: GitHostServer, repo: str, namespace: str, *,
                     pull_request: str = "") -> list[str]:
    """The controller's flags: ``repo`` of the git test server in its git config
    (``pull_request``: that repository's ``pullRequest`` block), watching ``namespace`` only."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    config = tmp_path / "git.yaml"
    config.write_text(textwrap.dedent(f"""\
        repositories:
          - name: fleet
            url: {githost.repo_url(repo)}
            branch: main
            tokenFile: {token_file}
            author: {{name: Reloader Bot, email: reloader@example.com}}
        """) + pull_request)
    return [f"--git-config={config}", f"--git-cache-dir={tmp_path / 'cache'}", f"--namespaces={namespace}",
            "--coalesce-window=1s", "--git-follow-interval=1s"]
