"""Flux's own rules, as pure functions over raw GitRepository, Kustomization and HelmRelease objects.

Each rule follows fluxcd (source-controller ``api/v1``, ``fluxcd/pkg`` ``git``,
kustomize-controller, helm-controller ``api/v2``):

- **Checkout** (source-controller ``api/v1/gitrepository_types.go`` ``GitRepositoryRef``;
  ``fluxcd/pkg`` ``git/repository/options.go`` ``CheckoutStrategy``): ``commit`` >
  ``name`` > ``semver`` > ``tag`` > ``branch``; no ref field at all means branch
  ``master``. A ``commit`` combined with ``branch`` still checks out that commit.
  Only a branch (or a ``name`` of the form ``refs/heads/<branch>``) can take a commit.
- **Path** (kustomize-controller ``kustomization_controller.go``:
  ``securejoin.SecureJoin(tmpDir, obj.Spec.Path)``): ``spec.path`` is joined to the
  source root lexically, ``..`` stops at the root, a leading ``/`` means the root;
  ``apps/prod``, ``./apps/prod`` and ``/apps/prod`` are one directory.
- **Namespaces** (kustomize-controller ``spec.targetNamespace``; helm-controller
  ``spec.targetNamespace`` defaulting to the HelmRelease's namespace): the namespace
  namespace-less documents are applied to.
- **Inventory** (kustomize-controller ``status.inventory.entries[].id``, written by
  fluxcd/cli-utils ``ObjMetadata.String``): ``<namespace>_<name>_<group>_<kind>``, a ``:``
  in the name written ``__``; every object the Kustomization applied.
- **HelmRelease chart** (helm-controller ``HelmChartTemplateSpec``: ``chart`` is the
  chart's path in a GitRepository, ``valuesFiles`` relative to the source root, later
  files override earlier ones; or ``spec.chartRef`` to a HelmChart / OCIRepository).

Nothing here does I/O; :mod:`gitops_reloader.gitops.locate` reads the objects.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ChartSource",
    "Checkout",
    "checkout",
    "helm_chart_source",
    "helm_deploy_namespace",
    "inventory_lists",
    "secure_join",
]

_PRECEDENCE = ("commit", "name", "semver", "tag", "branch")


@dataclass(frozen=True, slots=True)
class Checkout:
    """What a GitRepository checks out: ``kind`` is one of commit, name, semver, tag, branch."""

    kind: str
    value: str

    @property
    def branch(self) -> str | None:
        """The branch a commit must land on, or ``None`` when the ref is pinned."""
        if self.kind == "branch":
            return self.value
        if self.kind == "name" and self.value.startswith("refs/heads/"):
            return self.value.removeprefix("refs/heads/")
        return None

    def __str__(self) -> str:
        return f"{self.kind} {self.value!r}"


@dataclass(frozen=True, slots=True)
class ChartSource:
    """Where a HelmRelease's chart comes from (``kind``/``namespace``/``name`` of the source)."""

    kind: str
    namespace: str
    name: str
    chart: str = ""
    """The chart's path in a GitRepository (``spec.chart.spec.chart``)."""
    values_files: tuple[str, ...] = ()
    via_helm_chart: bool = False
    """The HelmRelease's ``spec.chartRef`` names a HelmChart (read it for the rest)."""
    reconcile_strategy: str = "ChartVersion"
    """``ChartVersion`` (the default) or ``Revision``: when source-controller packages the chart again."""

    @property
    def rebuilds_on_commit(self) -> bool:
        """Whether a commit to the chart's files (values included) gives a new chart artifact.

        source-controller ``HelmChartSpec.ReconcileStrategy``: with ``ChartVersion`` a chart
        from a GitRepository is packaged again only when ``Chart.yaml``'s version changes.
        """
        return self.reconcile_strategy == "Revision"


def checkout(ref: Any) -> Checkout:
    """The reference a GitRepository's ``spec.ref`` checks out."""
    fields = ref if isinstance(ref, Mapping) else {}
    for kind in _PRECEDENCE:
        value = fields.get(kind)
        if isinstance(value, str) and value.strip():
            return Checkout(kind, value.strip())
    return Checkout("branch", "master")


def secure_join(path: str) -> str:
    """``spec.path`` as a repository-relative path (``""``: the root), never outside it."""
    parts: list[str] = []
    for part in path.replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return posixpath.join(*parts) if parts else ""


def helm_deploy_namespace(release: Mapping[str, Any], release_namespace: str) -> str:
    """The namespace a HelmRelease installs into (``spec.targetNamespace`` or its own)."""
    spec = release.get("spec")
    target = spec.get("targetNamespace") if isinstance(spec, Mapping) else None
    return str(target).strip() if isinstance(target, str) and target.strip() else release_namespace


def helm_chart_source(release: Mapping[str, Any], release_namespace: str) -> ChartSource | None:
    """The chart source of a HelmRelease (or of a HelmChart's spec with ``release_namespace``).

    ``None`` when the object names no source.
    """
    spec = release.get("spec") if isinstance(release.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    chart_ref = spec.get("chartRef")
    if isinstance(chart_ref, Mapping) and chart_ref.get("name"):
        kind = str(chart_ref.get("kind") or "")
        return ChartSource(kind, str(chart_ref.get("namespace") or release_namespace), str(chart_ref["name"]),
                           via_helm_chart=kind == "HelmChart")
    template = spec.get("chart")
    chart_spec = template.get("spec") if isinstance(template, Mapping) else None
    if not isinstance(chart_spec, Mapping):
        chart_spec = spec  # a HelmChart object: chart, sourceRef and valuesFiles are in its spec
    source_ref = chart_spec.get("sourceRef")
    if not isinstance(source_ref, Mapping) or not source_ref.get("name"):
        return None
    files = tuple(str(f) for f in chart_spec.get("valuesFiles") or () if isinstance(f, str) and f)
    namespace = str(source_ref.get("namespace") or release_namespace)
    strategy = str(chart_spec.get("reconcileStrategy") or "ChartVersion")
    return ChartSource(str(source_ref.get("kind") or ""), namespace, str(source_ref["name"]),
                       chart=str(chart_spec.get("chart") or ""), values_files=files,
                       reconcile_strategy=strategy)


def inventory_lists(kustomization: Mapping[str, Any], *, group: str, kind: str, namespace: str,
                    name: str) -> bool | None:
    """Whether the Kustomization's ``status.inventory`` lists the object; ``None`` without one."""
    status = kustomization.get("status")
    inventory = status.get("inventory") if isinstance(status, Mapping) else None
    entries = inventory.get("entries") if isinstance(inventory, Mapping) else None
    if not isinstance(entries, list):
        return None
    wanted = f"{namespace}_{name.replace(':', '__')}_{group}_{kind}"
    return any(isinstance(entry, Mapping) and entry.get("id") == wanted for entry in entries)
