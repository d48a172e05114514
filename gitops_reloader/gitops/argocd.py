"""Argo CD's own rules, as pure functions over raw Application and ``argocd-cm`` objects.

Each rule follows argo-cd (v3.x) and names the upstream function it mirrors:

- **Tracking** (``util/settings/settings.go`` ``GetTrackingMethod`` /
  ``GetAppInstanceLabelKey``; ``util/argo/resource_tracking.go`` ``GetAppName``):
  ``application.resourceTrackingMethod`` empty means ``annotation``; only the method
  ``label`` reads the instance label (``application.instanceLabelKey``, default
  ``app.kubernetes.io/instance``); ``annotation``, ``annotation+label`` and any other
  value read the ``argocd.argoproj.io/tracking-id`` annotation only.
- **Source precedence** (``pkg/apis/application/v1alpha1/types.go``
  ``ApplicationSpec.GetSources`` / ``HasMultipleSources`` / ``SourceHydrator.GetDrySource``):
  ``spec.sourceHydrator`` > non-empty ``spec.sources`` > ``spec.source``. For a
  hydrator the deployed manifests are written by Argo CD into the sync branch; what a
  person edits in git is the ``drySource``, so that is where we look.
- **Which sources carry manifests** (``reposerver/repository/repository.go``
  ``GenerateManifests``: "Skip this path for ref only sources"): in a multi-source
  Application a source with ``ref`` and no ``path`` (and no ``chart``) only provides
  ``$<ref>/…`` value files; a ``chart`` source comes from a chart repository.
- **Source type** (``ApplicationSource.ExplicitType`` then
  ``util/app/discovery/discovery.go`` ``AppType``): an explicit ``directory``,
  ``kustomize``, ``helm`` or ``plugin`` block decides; otherwise the Application's
  ``status.sourceType(s)``, which the controller fills from discovery; otherwise
  unknown (:func:`detect_source_type` decides from the directory's files, as
  ``AppType`` does: ``Chart.yaml`` → Helm, a kustomization file → Kustomize, else
  Directory).
- **Recursion** (``ApplicationSourceDirectory.Recurse``, default false): a Directory
  source deploys only the files directly inside its path.
- **Destination** (our tenancy rule, documented in ``docs/gitops-location.md``): an
  Application is followed for a workload only when ``spec.destination.namespace``
  equals the workload's namespace, or when it is empty, the workload carries a
  tracking id (which names the workload's own namespace) and the Application lives in
  Argo CD's own namespace.

- **Managed resources** (``ApplicationStatus.Resources``, ``ResourceStatus``): every
  object the Application manages, by group, kind, namespace and name.

Nothing here does I/O; :mod:`gitops_reloader.gitops.locate` reads the objects.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ARGOCD_CM",
    "DEFAULT_INSTANCE_LABEL",
    "KUSTOMIZATION_FILES",
    "TRACKING_METHODS",
    "AppSources",
    "GitSource",
    "SourceType",
    "Tracking",
    "ValuesFile",
    "application_sources",
    "combined_recurse",
    "destination_namespace",
    "detect_source_type",
    "status_lists",
    "tracking_from_configmap",
]

ARGOCD_CM = "argocd-cm"
DEFAULT_INSTANCE_LABEL = "app.kubernetes.io/instance"
TRACKING_METHODS = ("annotation", "label", "annotation+label")
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")


class SourceType(enum.StrEnum):
    """``ApplicationSourceType``."""

    DIRECTORY = "Directory"
    KUSTOMIZE = "Kustomize"
    HELM = "Helm"
    PLUGIN = "Plugin"


@dataclass(frozen=True, slots=True)
class Tracking:
    """How Argo CD marks the objects it applies."""

    method: str = "annotation"
    label_key: str = DEFAULT_INSTANCE_LABEL

    @property
    def uses_label(self) -> bool:
        """Only the ``label`` method identifies the Application by the instance label."""
        return self.method == "label"


@dataclass(frozen=True, slots=True)
class GitSource:
    """One source whose ``path`` holds manifests (not ref-only, not a chart repository)."""

    repo_url: str
    path: str
    revision: str
    field: str
    """Where it is in the Application (``spec.sources[1]``), for messages."""
    source_type: SourceType | None
    """``None``: not declared and not yet reported in the status (see :func:`detect_source_type`)."""
    recurse: bool
    value_files: tuple[str, ...] = ()
    """Helm ``valueFiles`` relative to ``path`` (``$ref/…`` ones are in :attr:`AppSources.values`)."""

    @property
    def recursive(self) -> bool | None:
        """Whether files in subdirectories are deployed; ``None`` until the type is known."""
        if self.source_type is None:
            return None
        return self.recurse if self.source_type is SourceType.DIRECTORY else True


@dataclass(frozen=True, slots=True)
class ValuesFile:
    """A ``$<ref>/<path>`` Helm value file: ``path`` in the ``ref`` source's repository."""

    repo_url: str
    revision: str
    path: str


@dataclass(frozen=True, slots=True)
class AppSources:
    """The sources that matter for finding a manifest, in Argo CD's precedence."""

    field: str
    """``spec.sourceHydrator.drySource``, ``spec.sources`` or ``spec.source`` (``""``: none)."""
    directories: tuple[GitSource, ...] = ()
    charts: tuple[str, ...] = ()
    """Charts installed from a chart repository (or OCI), by name."""
    values: tuple[ValuesFile, ...] = ()
    hydrator: bool = False


def tracking_from_configmap(data: Mapping[str, Any] | None) -> Tracking:
    """The tracking settings in ``argocd-cm``'s ``data`` (empty values: Argo CD's defaults)."""
    values = data if isinstance(data, Mapping) else {}
    method = str(values.get("application.resourceTrackingMethod") or "").strip() or "annotation"
    key = str(values.get("application.instanceLabelKey") or "").strip() or DEFAULT_INSTANCE_LABEL
    return Tracking(method, key)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _explicit_type(source: Mapping[str, Any]) -> SourceType | None:
    declared = [t for key, t in (("kustomize", SourceType.KUSTOMIZE), ("helm", SourceType.HELM),
                                 ("directory", SourceType.DIRECTORY), ("plugin", SourceType.PLUGIN))
                if isinstance(source.get(key), Mapping)]
    return declared[0] if len(declared) == 1 else None


def _status_type(value: Any) -> SourceType | None:
    try:
        return SourceType(str(value))
    except ValueError:
        return None


def _git_source(source: Mapping[str, Any], field: str, status_type: Any) -> GitSource:
    source_type = _explicit_type(source) or _status_type(status_type)
    helm = _map(source.get("helm"))
    value_files = tuple(str(f) for f in helm.get("valueFiles") or () if isinstance(f, str))
    return GitSource(
        repo_url=str(source.get("repoURL") or ""),
        path=str(source.get("path") or ""),
        revision=str(source.get("targetRevision") or ""),
        field=field,
        source_type=source_type,
        recurse=_map(source.get("directory")).get("recurse") is True,
        value_files=value_files,
    )


def application_sources(application: Mapping[str, Any]) -> AppSources:
    """The Application's manifest sources, chart sources and ``$ref`` value files."""
    spec = _map(application.get("spec"))
    status = _map(application.get("status"))
    hydrator = _map(spec.get("sourceHydrator"))
    if hydrator:
        dry = _map(hydrator.get("drySource"))
        # The hydrator renders the dry source; its type is not reported in status.sourceType.
        return AppSources("spec.sourceHydrator.drySource",
                          directories=(_git_source(dry, "spec.sourceHydrator.drySource", None),),
                          hydrator=True)
    sources = [s for s in spec.get("sources") or () if isinstance(s, Mapping)]
    if sources:
        status_types = status.get("sourceTypes")
        types: Sequence[Any] = status_types if isinstance(status_types, list) else ()
        refs = {str(s["ref"]): s for s in sources if s.get("ref")}
        directories: list[GitSource] = []
        charts: list[str] = []
        values: list[ValuesFile] = []
        for i, source in enumerate(sources):
            status_type = types[i] if i < len(types) else None
            if source.get("chart"):
                charts.append(str(source["chart"]))
            elif source.get("path") or not source.get("ref"):  # not a ref-only values provider
                directories.append(_git_source(source, f"spec.sources[{i}]", status_type))
            for name in _map(source.get("helm")).get("valueFiles") or ():
                found = _ref_value_file(str(name), refs)
                if found is not None:
                    values.append(found)
        return AppSources("spec.sources", tuple(directories), tuple(charts), tuple(values))
    single = _map(spec.get("source"))
    if not single:
        return AppSources("")
    if single.get("chart"):
        return AppSources("spec.source", charts=(str(single["chart"]),))
    only = _git_source(single, "spec.source", status.get("sourceType"))
    return AppSources("spec.source", directories=(only,))


def _ref_value_file(name: str, refs: Mapping[str, Mapping[str, Any]]) -> ValuesFile | None:
    if not name.startswith("$"):
        return None
    ref, sep, path = name[1:].partition("/")
    source = refs.get(ref)
    if not sep or source is None:
        return None
    return ValuesFile(str(source.get("repoURL") or ""), str(source.get("targetRevision") or ""), path)


def combined_recurse(sources: Sequence[GitSource]) -> bool | None:
    """One recursion setting for several searched directories, on the safe side.

    ``False`` when any of them is a non-recursive Directory (a miss is refused, never
    edited elsewhere); ``None`` when any type is still unknown; else ``True``.
    """
    settings = [s.recursive for s in sources]
    if False in settings:
        return False
    return None if None in settings else True


def detect_source_type(files: Sequence[str]) -> SourceType:
    """``AppType``: the type of a source whose directory directly holds ``files`` (names)."""
    names = set(files)
    if any(name.endswith("Chart.yaml") for name in names):
        # discovery.go checks Chart.yaml first and kustomization files second, the later wins.
        return SourceType.KUSTOMIZE if names.intersection(KUSTOMIZATION_FILES) else SourceType.HELM
    if names.intersection(KUSTOMIZATION_FILES):
        return SourceType.KUSTOMIZE
    return SourceType.DIRECTORY


def destination_namespace(application: Mapping[str, Any], *, app_namespace: str, workload_namespace: str,
                          tracked_by_id: bool, argocd_namespace: str) -> tuple[bool, str | None]:
    """``(allowed, deploy namespace)`` of the Application for a workload.

    Allowed when ``spec.destination.namespace`` is the workload's namespace (it is then
    where namespace-less documents go), or when it is empty, the workload was found by
    a tracking id that names its own namespace, and the Application lives in Argo CD's
    own namespace (no deploy namespace: only documents naming the namespace match).
    """
    destination = _map(_map(application.get("spec")).get("destination"))
    namespace = str(destination.get("namespace") or "")
    if namespace:
        return namespace == workload_namespace, namespace
    return tracked_by_id and app_namespace == argocd_namespace, None


def status_lists(application: Mapping[str, Any], *, group: str, kind: str, namespace: str,
                 name: str) -> bool | None:
    """Whether the Application's ``status.resources`` lists the object; ``None`` when it lists none."""
    resources = _map(application.get("status")).get("resources")
    if not isinstance(resources, list) or not resources:
        return None
    wanted = (group, kind, namespace, name)
    return any(isinstance(r, Mapping) and (str(r.get("group") or ""), str(r.get("kind") or ""),
                                           str(r.get("namespace") or ""), str(r.get("name") or "")) == wanted
               for r in resources)
