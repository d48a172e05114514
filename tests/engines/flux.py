"""Flux's source-controller and kustomize-controller, the real ones, against the real control plane.

Their CRDs are the ones in their modules (``.ci/build-engines.sh`` copies them from the module
cache beside the binaries), applied as they are. Both run as host processes with the
control plane's kubeconfig, on free ports; source-controller serves its artifacts on
127.0.0.1 for kustomize-controller to download, as in a cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from controlplane import ControlPlane, Process, engine_binary, start_process, wait_ready
from kubernetes.client import ApiextensionsV1Api, CoreV1Api, CustomObjectsApi
from kubernetes.client.rest import ApiException

from gitops_reloader.testing.harness import wait_for
from gitops_reloader.testing.ports import free_port

RUNTIME_NAMESPACE = "flux-system"


@dataclass
class Flux:
    """The running controllers."""

    source: Process
    kustomize: Process


def apply_crds(api: ApiextensionsV1Api, path: Path) -> list[str]:
    """Create the CustomResourceDefinitions in ``path`` (skipping existing ones) and wait until
    each is Established; their names."""
    names = []
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc:
            continue
        names.append(doc["metadata"]["name"])
        try:
            api.create_custom_resource_definition(doc)
        except ApiException as exc:
            if exc.status != 409:
                raise

    def established() -> bool:
        for name in names:
            conditions = api.read_custom_resource_definition(name).status.conditions or ()
            if not any(c.type == "Established" and c.status == "True" for c in conditions):
                return False
        return True
    wait_for(established, timeout=30, message="Flux's CRDs established")
    return names


@contextmanager
def running_flux(plane: ControlPlane, directory: Path) -> Iterator[Flux]:
    """source-controller and kustomize-controller watching every namespace; stopped by PID."""
    source_bin = engine_binary("flux-source", "source-controller")
    kustomize_bin = engine_binary("flux-kustomize", "kustomize-controller")
    directory.mkdir(parents=True, exist_ok=True)
    with plane.api_client() as api:
        for crds in (source_bin.parent / "crds.yaml", kustomize_bin.parent / "crds.yaml"):
            apply_crds(ApiextensionsV1Api(api), crds)
        try:
            CoreV1Api(api).create_namespace({"metadata": {"name": RUNTIME_NAMESPACE}})
        except ApiException as exc:
            if exc.status != 409:
                raise
    # Each engine keeps its scratch space (kustomize-controller unpacks every artifact into a
    # kustomization-* directory) in its own directory, not in the machine's shared /tmp.
    (directory / "tmp").mkdir(exist_ok=True)
    env = {"KUBECONFIG": str(plane.kubeconfig), "RUNTIME_NAMESPACE": RUNTIME_NAMESPACE,
           "TMPDIR": str(directory / "tmp")}
    storage, source_health, kustomize_health = free_port(), free_port(), free_port()
    (directory / "artifacts").mkdir(exist_ok=True)
    with ExitStack() as stack:
        source = start_process("source-controller", [
            source_bin, f"--storage-path={directory / 'artifacts'}",
            f"--storage-addr=127.0.0.1:{storage}", f"--storage-adv-addr=127.0.0.1:{storage}",
            f"--metrics-addr=127.0.0.1:{free_port()}", f"--health-addr=127.0.0.1:{source_health}",
            "--watch-all-namespaces", "--log-level=info"], directory, env=env)
        stack.callback(source.stop)
        kustomize = start_process("kustomize-controller", [
            kustomize_bin, f"--metrics-addr=127.0.0.1:{free_port()}",
            f"--health-addr=127.0.0.1:{kustomize_health}", "--watch-all-namespaces", "--log-level=info"],
            directory, env=env)
        stack.callback(kustomize.stop)
        wait_ready(f"http://127.0.0.1:{source_health}/readyz", None, source, "source-controller")
        wait_ready(f"http://127.0.0.1:{kustomize_health}/readyz", None, kustomize, "kustomize-controller")
        plane.processes["source-controller"] = source
        plane.processes["kustomize-controller"] = kustomize
        try:
            yield Flux(source, kustomize)
        finally:
            plane.processes.pop("source-controller", None)
            plane.processes.pop("kustomize-controller", None)


def ready(api: CustomObjectsApi, group: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
    """The object when its ``Ready`` condition is True and it observed its generation (None otherwise)."""
    version = "v1"
    obj = api.get_namespaced_custom_object(group, version, namespace, plural, name)
    status = obj.get("status") or {}
    conditions = status.get("conditions") or ()
    if status.get("observedGeneration") != obj["metadata"].get("generation"):
        return None
    return obj if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions) else None
