"""Helpers for the chart and examples tests: find helm, render a chart, validate objects.

The helm binary is looked up in this order: the ``HELM_BIN`` environment variable,
``.tools/bin/helm`` in the repository root (what ``.ci/install-tools.sh`` installs),
then ``helm`` on ``PATH``. A missing helm is a test *failure* with instructions, never
a skip: CI must not go green without having rendered the chart.

Every helm call runs with ``HELM_CACHE_HOME``, ``HELM_CONFIG_HOME`` and
``HELM_DATA_HOME`` pointed at a private directory, so nothing on the machine (repos,
plugins, registry logins) changes the result and nothing is written to ``$HOME``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
CHART_DIR = REPO_ROOT / "helm" / "gitops-reloader"
EXAMPLES_DIR = REPO_ROOT / "examples"
INSTALL_HINT = "run `bash .ci/install-tools.sh` (installs .tools/bin/helm) or set HELM_BIN"

try:
    import kubernetes_validate
except ImportError as exc:  # a collection error that says what to do, not a skip
    raise ImportError(
        "kubernetes-validate is not installed: run `bash .ci/install-tools.sh`"
    ) from exc

# Kubernetes versions every rendered object is validated against: the oldest the chart
# supports (Chart.yaml kubeVersion) and the newest kubernetes-validate has schemas for.
OLDEST_KUBERNETES = "1.25.0"
KUBERNETES_VERSIONS = (OLDEST_KUBERNETES, kubernetes_validate.utils.latest_version())

# API groups of custom resources. kubernetes-validate ships schemas for the built-in
# Kubernetes API only, so objects of these groups (PodMonitor, Application, ...) are
# not schema-validated; only their basic shape is checked. Any other group must have
# a schema: a typo in a built-in apiVersion fails instead of being skipped.
CRD_GROUPS = frozenset({
    "monitoring.coreos.com",        # ServiceMonitor, PodMonitor (Prometheus Operator)
    "argoproj.io",                  # Application (Argo CD), Rollout (Argo Rollouts)
    "kustomize.toolkit.fluxcd.io",  # Kustomization (Flux)
    "source.toolkit.fluxcd.io",     # GitRepository (Flux)
    "helm.toolkit.fluxcd.io",       # HelmRelease (Flux)
    "external-secrets.io",          # ExternalSecret, SecretStore (External Secrets)
    "apps.openshift.io",            # DeploymentConfig (OpenShift)
    "serving.knative.dev",          # Service (Knative Serving)
    "apps.kruise.io",               # CloneSet, Advanced StatefulSet / DaemonSet (OpenKruise)
    "workers.acme.example.com",     # Worker (examples/knative-service: an in-house kind)
})


def find_helm() -> Path | None:
    """The helm binary to use, or None when there is none."""
    explicit = os.environ.get("HELM_BIN", "").strip()
    if explicit:
        path = Path(explicit)
        return path if path.is_file() and os.access(path, os.X_OK) else None
    local = REPO_ROOT / ".tools" / "bin" / "helm"
    if local.is_file() and os.access(local, os.X_OK):
        return local
    found = shutil.which("helm")
    return Path(found) if found else None


def require_helm() -> Path:
    """The helm binary; fails the calling test (never skips) when helm is missing."""
    helm = find_helm()
    if helm is None:
        where = f"HELM_BIN={os.environ['HELM_BIN']!r} is not an executable file; " \
            if os.environ.get("HELM_BIN", "").strip() else ""
        pytest.fail(f"helm not found: {where}{INSTALL_HINT}", pytrace=False)
    return helm


def helm_env(home: Path) -> dict[str, str]:
    """The environment for helm: the process's, with every HELM_*_HOME under ``home``."""
    env = dict(os.environ)
    for name in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        directory = home / name.lower()
        directory.mkdir(parents=True, exist_ok=True)
        env[name] = str(directory)
    return env


def run_helm(helm: Path, args: Sequence[str], *, home: Path) -> subprocess.CompletedProcess[str]:
    """Run helm with ``args``; the caller checks ``returncode``, stdout and stderr."""
    return subprocess.run(
        [str(helm), *args], env=helm_env(home), capture_output=True, text=True,
        timeout=120, check=False,
    )


def render(
    helm: Path,
    chart: Path,
    *,
    home: Path,
    values_files: Iterable[Path] = (),
    set_values: Mapping[str, str] | None = None,
    release: str = "reloader",
    namespace: str = "ops",
) -> list[dict[str, Any]]:
    """``helm template`` a chart and return its objects; fails the test on any error."""
    args = ["template", release, str(chart), "--namespace", namespace]
    for path in values_files:
        args += ["--values", str(path)]
    for key, value in (set_values or {}).items():
        args += ["--set", f"{key}={value}"]
    result = run_helm(helm, args, home=home)
    if result.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} failed:\n{result.stderr}", pytrace=False)
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def group_of(obj: Mapping[str, Any]) -> str:
    """The API group of an object (``""`` for the core group)."""
    api_version = str(obj.get("apiVersion", ""))
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{obj.get('apiVersion')}/{obj.get('kind')} {meta.get('namespace', '')}/{meta.get('name')}"


def validate_object(obj: Mapping[str, Any]) -> list[str]:
    """Strictly validate ``obj`` against every version in KUBERNETES_VERSIONS.

    Returns the problems found (empty when valid). Objects of a CRD group only get a
    shape check (apiVersion, kind, metadata.name), see CRD_GROUPS.
    """
    problems: list[str] = []
    if not isinstance(obj, Mapping) or not obj.get("apiVersion") or not obj.get("kind"):
        return [f"not a Kubernetes object (apiVersion and kind are required): {obj!r:.200}"]
    if not (obj.get("metadata") or {}).get("name") and not (obj.get("metadata") or {}).get(
        "generateName"
    ):
        problems.append(f"{describe(obj)}: metadata.name is missing")
    if group_of(obj) in CRD_GROUPS:
        return problems
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(dict(obj), version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(part) for part in exc.path)
            problems.append(f"{describe(obj)} (Kubernetes {version}): {path}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            problems.append(
                f"{describe(obj)}: {exc.message} (a custom resource? add its group to CRD_GROUPS)"
            )
    return problems
