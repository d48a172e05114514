"""Argo CD's application-controller and repo-server, the real ones, against the real control plane.

One ``argocd`` binary serves every component, chosen by its name (``ARGOCD_BINARY_NAME``, as
its image's symlinks do); Debian's ``redis-server`` is its cache. The Application and
AppProject CRDs are the ones in Argo CD's module. What ``argocd-server`` would create at
start (the ``default`` AppProject) and what an install's manifests hold (``argocd-cm``,
``argocd-secret``, a repository Secret) is created here, as an install has them.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controlplane import ControlPlane, EngineMissing, Process, engine_binary, start_process
from flux import apply_crds
from kubernetes.client import ApiClient, ApiextensionsV1Api, CoreV1Api, CustomObjectsApi
from kubernetes.client.rest import ApiException

from gitops_reloader.testing.harness import wait_for
from gitops_reloader.testing.ports import free_port

NAMESPACE = "argocd"
GROUP, VERSION = "argoproj.io", "v1alpha1"


@dataclass
class ArgoCd:
    """The running components and where Argo CD keeps its TLS trust (``ARGOCD_TLS_DATA_PATH``)."""

    controller: Process
    repo_server: Process
    redis: Process
    tls_data: Path


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _create(call: Any, *args: Any) -> None:
    try:
        call(*args)
    except ApiException as exc:
        if exc.status != 409:
            raise


def _install(api: ApiClient, crds: Path, plane: ControlPlane) -> None:
    """The CRDs, the namespace, what an install's manifests hold, and the control plane as a
    cluster Secret (``argocd cluster add``: the controller runs outside the cluster, so
    ``kubernetes.default.svc`` is not there for it)."""
    apply_crds(ApiextensionsV1Api(api), crds)
    core, custom = CoreV1Api(api), CustomObjectsApi(api)
    _create(core.create_namespace, {"metadata": {"name": NAMESPACE}})
    labels = {"app.kubernetes.io/part-of": "argocd"}
    _create(core.create_namespaced_config_map, NAMESPACE, {
        "metadata": {"name": "argocd-cm", "labels": labels},
        "data": {"timeout.reconciliation": "10s", "application.resourceTrackingMethod": "annotation"}})
    _create(core.create_namespaced_config_map, NAMESPACE,
            {"metadata": {"name": "argocd-rbac-cm", "labels": labels}})
    _create(core.create_namespaced_secret, NAMESPACE, {
        "metadata": {"name": "argocd-secret", "labels": labels},
        "stringData": {"server.secretkey": "engines-tier-secret-key"}})
    pki = plane.directory / "pki"
    tls = {"caData": _b64(plane.ca_file), "certData": _b64(pki / "admin.crt"),
           "keyData": _b64(pki / "admin.key")}
    _create(core.create_namespaced_secret, NAMESPACE, {
        "metadata": {"name": "cluster-engines", "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
        "stringData": {"name": "engines", "server": plane.url,
                       "config": json.dumps({"tlsClientConfig": tls})}})
    _create(custom.create_namespaced_custom_object, GROUP, VERSION, NAMESPACE, "appprojects", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "AppProject", "metadata": {"name": "default"},
        "spec": {"sourceRepos": ["*"], "destinations": [{"server": "*", "namespace": "*"}],
                 "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]}})


@contextmanager
def running_argocd(plane: ControlPlane, directory: Path) -> Iterator[ArgoCd]:
    """redis-server, argocd-repo-server and argocd-application-controller; stopped by PID."""
    argocd = engine_binary("argocd", "argocd")
    redis = shutil.which("redis-server")
    if redis is None:
        raise EngineMissing("redis-server is not installed (Debian's redis-server package)")
    directory.mkdir(parents=True, exist_ok=True)
    tls_data = directory / "tls"
    tls_data.mkdir(exist_ok=True)
    with plane.api_client() as api:
        _install(api, argocd.parent / "crds.yaml", plane)
    redis_port, repo_port = free_port(), free_port()
    common = {"HOME": str(directory), "ARGOCD_TLS_DATA_PATH": str(tls_data), "ARGOCD_GPG_ENABLED": "false",
              "ARGOCD_SSH_DATA_PATH": str(directory / "ssh"),
              "ARGOCD_ASK_PASS_SOCK": str(directory / "askpass.sock"), "KUBECONFIG": str(plane.kubeconfig),
              # git asks `argocd` (as argocd-git-ask-pass) for credentials, found on PATH
              "PATH": f"{argocd.parent}{os.pathsep}{os.environ.get('PATH', '')}", "TMPDIR": str(directory)}
    with ExitStack() as stack:
        def run(name: str, argv: list[Any], env: dict[str, str]) -> Process:
            process = start_process(name, argv, directory, env=env)
            plane.processes[name] = process
            stack.callback(plane.processes.pop, name, None)
            stack.callback(process.stop)
            return process

        store = run("redis", [redis, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no"], {})
        repo = run("argocd-repo-server", [
            argocd, f"--port={repo_port}", f"--metrics-port={free_port()}", f"--redis=127.0.0.1:{redis_port}",
            "--disable-tls", "--loglevel=info"], {**common, "ARGOCD_BINARY_NAME": "argocd-repo-server"})
        controller = run("argocd-application-controller", [
            argocd, f"--kubeconfig={plane.kubeconfig}", f"--namespace={NAMESPACE}",
            f"--repo-server=127.0.0.1:{repo_port}", "--repo-server-plaintext",
            f"--redis=127.0.0.1:{redis_port}", f"--metrics-port={free_port()}", "--app-resync=10",
            "--status-processors=4", "--operation-processors=4", "--loglevel=info"],
            {**common, "ARGOCD_BINARY_NAME": "argocd-application-controller"})
        for process in (store, repo, controller):
            if process.popen.poll() is not None:
                raise RuntimeError(f"{process.name} exited:\n{process.tail()}")
        yield ArgoCd(controller, repo, store, tls_data)


def trust(argo: ArgoCd, ca_pem: str) -> None:
    """Argo CD trusts ``ca_pem`` for the git server on 127.0.0.1 (``argocd-tls-certs-cm``,
    as the repo-server's mounted directory holds it: one file per server name)."""
    (argo.tls_data / "127.0.0.1").write_text(ca_pem)


def repository(api: ApiClient, url: str, username: str, password: str) -> None:
    """A repository Secret, as ``argocd repo add`` writes it."""
    name = "repo-" + str(abs(hash(url)) % 10**8)
    _create(CoreV1Api(api).create_namespaced_secret, NAMESPACE, {
        "metadata": {"name": name, "labels": {"argocd.argoproj.io/secret-type": "repository"}},
        "stringData": {"type": "git", "url": url, "username": username, "password": password}})


def application(api: ApiClient, name: str, url: str, path: str, namespace: str, server: str, *,
                server_side_diff: bool = False) -> None:
    """An Application with automated sync and self-heal, deploying ``path`` into ``namespace``."""
    annotations = {"argocd.argoproj.io/compare-options": "ServerSideDiff=true"} if server_side_diff else {}
    CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "applications", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Application",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"project": "default",
                 "source": {"repoURL": url, "targetRevision": "main", "path": path},
                 "destination": {"server": server, "namespace": namespace},
                 "syncPolicy": {"automated": {"selfHeal": True, "prune": False}}}})


def app_status(api: ApiClient, name: str) -> dict[str, Any]:
    obj = CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "applications", name)
    return obj.get("status") or {}


def synced_and_healthy(api: ApiClient, name: str, revision: str | None = None) -> dict[str, Any] | None:
    """The Application's status when it is Synced (at ``revision``, when given) and Healthy."""
    status = app_status(api, name)
    sync, health = status.get("sync") or {}, status.get("health") or {}
    if sync.get("status") != "Synced" or health.get("status") != "Healthy":
        return None
    if revision is not None and sync.get("revision") != revision:
        return None
    return status


def wait_synced(api: ApiClient, name: str, revision: str | None = None, timeout: float = 120.0,
                ) -> dict[str, Any]:
    return wait_for(lambda: synced_and_healthy(api, name, revision), timeout=timeout,
                    message=f"Application {name} Synced and Healthy")
