"""Find the file and document in git that declares a live workload.

Two steps, so that the cheap one can run on an informer thread:

1. :meth:`Locator.resolve` reads only the workload and (through the API server) the
   Argo CD Application or Flux objects that deployed it, and returns a
   :class:`Resolution`: which configured repository, and an exact file or the
   directories to search. The git sink groups workloads by its ``repo_name``.
2. :meth:`Locator.locate` looks into the synced clone (a :class:`ManifestFiles`, in
   practice the repository's :class:`~gitops_reloader.gitops.scanindex.ScanIndex`) and
   returns a :class:`Location`: path and document index. Named files and ambiguous
   scan hits are confirmed with :func:`~gitops_reloader.gitops.yamledit.list_documents`
   on the file's current text (and the tenancy policy, below); a unique scan hit is
   returned unconfirmed (one parse of the file saved per workload) and the caller checks
   its edit instead
   (:func:`~gitops_reloader.gitops.scanindex.edit_confined`), locating again with
   ``confirm=True`` if the edit landed anywhere else.

Sources, in order (the first that applies wins):

- **Annotations** on the workload (metadata, else pod template):
  ``gitops-reloader.io/git-target: <file>#<yaml.path>`` (a Helm values file or
  kustomize patch: the hash goes into the map at that path),
  ``gitops-reloader.io/git-path: <file>``, ``gitops-reloader.io/git-repo: <name or URL>``
  (default: the default repository; alone, it scans that repository). The sources below
  are still looked up, only for what to refresh after the push (:meth:`Locator._deployer`:
  the Application, Kustomization or HelmRelease deploying the workload from that
  repository and branch).
- **Argo CD tracking id** (unless ``argocd-cm`` says ``label`` tracking): the
  ``argocd.argoproj.io/tracking-id`` annotation ``<app>:<group>/<kind>:<namespace>/<name>``
  (``<app>`` may be ``<appNamespace>_<appName>``; an id that describes another object
  is a copy and is ignored) → the Application, followed only if it deploys into the
  workload's namespace → its sources by Argo CD's precedence (``sourceHydrator``'s dry
  source > ``sources`` > ``source``; every non-ref, non-chart source is searched) →
  the configured repository writing the deployed branch (``HEAD``/empty: the remote's
  default branch) → the document under those paths (only directly in them for a
  non-recursive Directory source).
- **Flux Kustomization**: labels ``kustomize.toolkit.fluxcd.io/name|namespace`` → the
  Kustomization (``targetNamespace``, if set, must be the workload's) → its
  GitRepository's checkout (commit > name > semver > tag > branch, default ``master``;
  only a branch can take a commit) → ``spec.path`` joined securely to the root; the
  ``config.kubernetes.io/origin`` annotation's ``path:`` names the exact file when present.
- **Flux HelmRelease**: labels ``helm.toolkit.fluxcd.io/name|namespace`` → a refusal
  naming the chart's values file in git to use as ``git-target`` (Helm renders the
  workload: no document declares it); with a ``git-target``, its chart directory and
  ``valuesFiles`` are the deploying path and it is refreshed.
- **Argo CD instance label** (``application.instanceLabelKey``), only with ``label`` tracking.
- **Scan** of the default repository for the document with the same API group, kind,
  name and namespace (a document without a namespace matches too, as a second choice,
  when the tenancy policy says it deploys into the workload's namespace).

Every result passes the repository's tenancy policy
(:mod:`gitops_reloader.gitops.tenancy`): the namespace must be allowed to use the
repository (``git-repo`` included) and to write the file, the edited document must be
the workload's own (kind, name and namespace; a namespace-less document only where the
policy's ``documentNamespace`` or the Argo CD / Flux destination, ``deploy_namespace``,
is the workload's namespace), and a ``git-target`` file must be allowed for the
namespace: by a ``tenants`` entry, or without ``tenants`` by lying inside the path of
the Argo CD Application (or one of its ``$<ref>`` Helm value files) / Flux
Kustomization / HelmRelease (its chart or ``valuesFiles``) that deploys the workload.
Repository URLs match as Argo CD's ``git.SameURL`` decides
(:func:`~gitops_reloader.gitops.repourl.same_url`), against a repository's ``url`` and its
``aliases`` (:meth:`GitConfig.by_url`); whichever spelling found it, the repository's
own tenancy policy applies. A URL on the same host and path as a configured repository
but in another spelling is refused with the exact ``aliases:`` line to add. A refusal is a
:class:`~gitops_reloader.errors.PolicyDenied` whose message names only the workload's
own request (never another team's file contents).

Each Argo CD / Flux rule and its upstream source is in ``docs/gitops-location.md``; the
rules themselves are pure functions in :mod:`~gitops_reloader.gitops.argocd` and
:mod:`~gitops_reloader.gitops.flux`. An Application, Kustomization or HelmRelease that
does not exist here (Argo CD may run in another cluster) falls through to the next
source. Metadata that clearly points somewhere we cannot write — a repository not in
``--git-config``, a tag or commit instead of a branch, a Helm chart repository, an OCI
source, an Application or Kustomization deploying into another namespace — is a
:class:`~gitops_reloader.errors.ManifestNotFound` with the reason (never the source of
another namespace's Application): a commit elsewhere would not be deployed.
Operator-owned workloads (``ownerReferences`` to a custom resource) raise
:class:`OperatorOwned`.

No search ever leaves the Application's or Kustomization's path: a kustomize base
shared by several overlays is not edited behind their back (use ``git-target`` on the
overlay's patch instead). Ambiguous matches are refused, naming the files.

Messages name objects, repositories and paths, never file contents.
"""

from __future__ import annotations

import enum
import posixpath
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from gitops_reloader.clock import Clock, SystemClock
from gitops_reloader.errors import (
    AnnotationError,
    KubeError,
    KubeNotFound,
    ManifestNotFound,
    PolicyDenied,
    ReloaderError,
    YamlEditError,
)
from gitops_reloader.gitops.argocd import (
    ARGOCD_CM,
    DEFAULT_INSTANCE_LABEL,
    KUSTOMIZATION_FILES,
    AppSources,
    GitSource,
    SourceType,
    Tracking,
    application_sources,
    combined_recurse,
    destination_namespace,
    detect_source_type,
    status_lists,
    tracking_from_configmap,
)
from gitops_reloader.gitops.auth import display_url
from gitops_reloader.gitops.flux import (
    checkout,
    helm_chart_source,
    helm_deploy_namespace,
    inventory_lists,
    secure_join,
)
from gitops_reloader.gitops.gitconfig import GitConfig, RepositoryConfig
from gitops_reloader.gitops.refresh import RefreshKind, RefreshTarget
from gitops_reloader.gitops.remotehead import DefaultBranches
from gitops_reloader.gitops.scanindex import Candidates, DocRef, api_group
from gitops_reloader.gitops.tenancy import DocumentIdentity, may_edit, may_target, may_use, may_write
from gitops_reloader.gitops.yamledit import find_document, list_documents, parse_yaml_path
from gitops_reloader.kinds import kube_kind
from gitops_reloader.kube.resources import (
    APPLICATIONS,
    CONFIGMAPS,
    GITREPOSITORIES,
    HELMCHARTS,
    HELMRELEASES,
    KUSTOMIZATIONS,
    ResourceKind,
)

__all__ = [
    "ARGOCD_INSTANCE_LABEL",
    "ARGOCD_TRACKING_ANNOTATION",
    "FLUX_HELM_NAMESPACE_LABEL",
    "FLUX_HELM_NAME_LABEL",
    "FLUX_NAMESPACE_LABEL",
    "FLUX_NAME_LABEL",
    "FLUX_ORIGIN_ANNOTATION",
    "GIT_PATH_ANNOTATION",
    "GIT_REPO_ANNOTATION",
    "GIT_TARGET_ANNOTATION",
    "Location",
    "Locator",
    "ManifestFiles",
    "Method",
    "ObjectIdentity",
    "OperatorOwned",
    "Resolution",
    "TrackingId",
    "clean_repo_path",
    "parse_app_instance",
    "parse_git_target",
    "parse_origin_path",
    "parse_tracking_id",
    "workload_identity",
]

GIT_REPO_ANNOTATION = "gitops-reloader.io/git-repo"
GIT_PATH_ANNOTATION = "gitops-reloader.io/git-path"
GIT_TARGET_ANNOTATION = "gitops-reloader.io/git-target"
ARGOCD_TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id"
ARGOCD_INSTANCE_LABEL = "app.kubernetes.io/instance"
FLUX_NAME_LABEL = "kustomize.toolkit.fluxcd.io/name"
FLUX_NAMESPACE_LABEL = "kustomize.toolkit.fluxcd.io/namespace"
FLUX_ORIGIN_ANNOTATION = "config.kubernetes.io/origin"
FLUX_HELM_NAME_LABEL = "helm.toolkit.fluxcd.io/name"
FLUX_HELM_NAMESPACE_LABEL = "helm.toolkit.fluxcd.io/namespace"

_CORE_GROUPS = frozenset({"", "apps", "batch"})
_KIND_GROUPS = {
    "Deployment": "apps",
    "DaemonSet": "apps",
    "StatefulSet": "apps",
    "ReplicaSet": "apps",
    "Job": "batch",
    "CronJob": "batch",
    "Rollout": "argoproj.io",
    "DeploymentConfig": "apps.openshift.io",
}
MAX_ORIGIN_CHARS = 4096
"""A longer ``config.kubernetes.io/origin`` value is read as absent (tenant text, bounded)."""
_MAX_LISTED = 5
_CHART_VERSION = ("its chart's reconcileStrategy is ChartVersion: source-controller repackages it only when "
                  "the chart's version changes, so set spec.chart.spec.reconcileStrategy: Revision for a "
                  "commit to its values to be deployed")
_FLAT = "Argo CD deploys only the files directly in a Directory source's path (directory.recurse is false)"


class OperatorOwned(ManifestNotFound):
    """The workload is owned by a custom resource; its operator writes it, not git."""


class Method(enum.StrEnum):
    """How the manifest was found."""

    TARGET = "git-target"
    ANNOTATION = "git-path"
    ARGOCD = "argocd"
    FLUX = "flux"
    SCAN = "scan"


@dataclass(frozen=True, slots=True)
class ObjectIdentity:
    """API group, kind, namespace and name of a live object."""

    group: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"


@dataclass(frozen=True, slots=True)
class TrackingId:
    """A parsed ``argocd.argoproj.io/tracking-id``."""

    app_name: str
    app_namespace: str | None
    group: str
    kind: str
    namespace: str
    name: str

    def describes(self, identity: ObjectIdentity) -> bool:
        """Whether the id was written for this object (else it was copied onto it)."""
        return (self.group, self.kind, self.namespace, self.name) == (
            identity.group, identity.kind, identity.namespace, identity.name)


@dataclass(frozen=True, slots=True)
class Resolution:
    """Where to look, decided without reading the repository.

    ``path`` is an exact file (``git-path``, ``git-target``, Flux origin); otherwise
    ``search_dirs`` are searched (``""``: the whole repository). ``refresh`` names the
    Argo CD / Flux objects to poke after a push; ``notes`` say why earlier sources did
    not apply, and ``hint`` what the user may do, both for error messages.
    ``deploy_namespace`` is where the Argo CD destination / Flux ``targetNamespace``
    deploys namespace-less documents (``None``: unknown).
    """

    repo_name: str
    method: Method
    path: str | None = None
    yaml_path: tuple[str | int, ...] | None = None
    search_dirs: tuple[str, ...] = ("",)
    refresh: tuple[RefreshTarget, ...] = ()
    notes: tuple[str, ...] = ()
    hint: str = ""
    recurse: bool | None = True
    """Whether files in subdirectories of ``search_dirs`` count: ``False`` for an Argo CD
    Directory source without ``directory.recurse``; ``None`` until the source type is
    known (:meth:`Locator.locate` detects it from the directory's files, as Argo CD does)."""
    deploy_namespace: str | None = None
    """The namespace the Argo CD destination / Flux ``targetNamespace`` deploys
    namespace-less documents into (``None``: unknown, only documents naming one match)."""
    source_url: str = ""
    """The URL that found the repository, as the Application, GitRepository or ``git-repo``
    annotation spells it (its ``url`` or one of its ``aliases``); ``""`` for a name or the default."""


@dataclass(frozen=True, slots=True)
class Location:
    """The document to edit: in ``repo_name`` at ``path``, document ``doc_index``.

    ``yaml_path`` is ``None`` for a workload manifest (the hash goes into the pod
    template's annotations) and the map to write into for a ``git-target``.

    ``confirmed`` is ``False`` when the document index comes from the scan index alone
    (libyaml's numbering) without a reference parse of the file: the caller must check
    its edit (:func:`~gitops_reloader.gitops.scanindex.edit_confined`) and otherwise
    locate again with ``confirm=True``.
    """

    repo_name: str
    path: str
    doc_index: int
    yaml_path: tuple[str | int, ...] | None
    method: Method
    refresh: tuple[RefreshTarget, ...] = ()
    confirmed: bool = True

    def __str__(self) -> str:
        return f"{self.repo_name}:{self.path}"


class ManifestFiles(Protocol):
    """What :meth:`Locator.locate` reads from a synced clone (a ``ScanIndex``)."""

    def read(self, path: str) -> bytes | None: ...

    def lookup(self, *, group: str, kind: str, namespace: str, name: str,
               under: Sequence[str] = ()) -> Candidates: ...

    def unparsable_under(self, under: Sequence[str] = ()) -> dict[str, str]: ...


class ObjectReader(Protocol):
    """What :class:`Locator` needs of the API (:class:`~gitops_reloader.kube.api.KubeApi`)."""

    def get(self, kind: ResourceKind, namespace: str | None, name: str) -> dict[str, Any]: ...


# --------------------------------------------------------------------------- parsing


def parse_tracking_id(value: str) -> TrackingId | None:
    """Parse ``<app>:<group>/<kind>:<namespace>/<name>``; ``None`` if malformed.

    >>> parse_tracking_id("team_web:apps/Deployment:prod/web").app_namespace
    'team'
    """
    parts = value.strip().split(":", 2)
    if len(parts) != 3:
        return None
    app, group_kind, ns_name = parts
    gk = group_kind.split("/")
    nn = ns_name.split("/")
    if len(gk) != 2 or len(nn) != 2 or not app or not gk[1] or not nn[1]:
        return None
    app_namespace, app_name = parse_app_instance(app)
    return TrackingId(app_name, app_namespace, gk[0], gk[1], nn[0], nn[1])


def parse_app_instance(value: str) -> tuple[str | None, str]:
    """``(app namespace | None, app name)`` of ``<appNamespace>_<appName>`` or ``<appName>``.

    Application names are DNS subdomains and never contain ``_``.
    """
    namespace, sep, name = value.strip().partition("_")
    return (namespace, name) if sep and namespace and name else (None, value.strip())


def parse_origin_path(value: str) -> str | None:
    """The ``path:`` of a ``config.kubernetes.io/origin`` annotation.

    ``None`` when absent, when the origin is a remote base (a ``repo:`` line): that file
    is not in the Kustomization's repository, or when the value is longer than
    :data:`MAX_ORIGIN_CHARS`. Line-based, linear in the value's length (no regex): the
    first line starting with ``path:`` gives the path, trimmed and unquoted.
    """
    if len(value) > MAX_ORIGIN_CHARS:
        return None
    lines = value.split("\n")
    if any(line.startswith("repo:") for line in lines):
        return None
    line = next((line for line in lines if line.startswith("path:")), None)
    if line is None:
        return None
    path = line.removeprefix("path:").strip()
    if len(path) >= 2 and path[0] == path[-1] and path[0] in "'\"":
        path = path[1:-1]
    return path or None


def clean_repo_path(path: str, *, what: str = "path") -> str:
    """A repository-relative POSIX path without ``./``; ``""`` is the repository root.

    Raises :class:`~gitops_reloader.errors.AnnotationError` for absolute paths and
    paths that leave the repository.
    """
    text = path.strip()
    if "\\" in text or "\0" in text:
        raise AnnotationError(f"{what} {text!r} is not a repository path")
    if text.startswith("/"):
        raise AnnotationError(f"{what} {text!r} must be relative to the repository root")
    clean = posixpath.normpath(text) if text else "."
    if clean == ".":
        return ""
    if clean == ".." or clean.startswith("../"):
        raise AnnotationError(f"{what} {text!r} leaves the repository")
    return clean


def parse_git_target(value: str) -> tuple[str, tuple[str | int, ...]]:
    """Split ``<file>#<yaml.path>`` (``charts/web/values.yaml#podAnnotations``)."""
    file_part, sep, path_part = value.strip().partition("#")
    if not sep or not file_part.strip():
        raise AnnotationError(
            f"{GIT_TARGET_ANNOTATION} must be '<file>#<yaml.path>', e.g. 'values.yaml#podAnnotations'")
    path = clean_repo_path(file_part, what=GIT_TARGET_ANNOTATION)
    if not path:
        raise AnnotationError(f"{GIT_TARGET_ANNOTATION} names no file")
    try:
        yaml_path = parse_yaml_path(path_part.strip())
    except YamlEditError as exc:
        raise AnnotationError(f"{GIT_TARGET_ANNOTATION}: {exc}") from None
    return path, yaml_path


def workload_identity(record: Any) -> ObjectIdentity:
    """Identity of a :class:`~gitops_reloader.kube.workloads.WorkloadRecord`."""
    raw = record.raw
    api_version = str(raw.get("apiVersion") or "")
    kind = kube_kind(record.ref.kind)
    group = api_group(api_version) if api_version else _KIND_GROUPS.get(kind, "")
    return ObjectIdentity(group, kind, record.ref.namespace, record.ref.name)


def _metadata(record: Any) -> Mapping[str, Any]:
    meta = record.raw.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _strings(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items() if v is not None}


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _listed(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:_MAX_LISTED])
    return shown + (f" and {len(paths) - _MAX_LISTED} more" if len(paths) > _MAX_LISTED else "")


# --------------------------------------------------------------------------- locator


@dataclass(frozen=True, slots=True)
class _Application:
    """An Argo CD Application followed for a workload (its destination checked)."""

    what: str
    sources: AppSources
    refresh: RefreshTarget
    deploy_namespace: str | None


class Locator:
    """Resolves and locates manifests for the configured repositories. Thread-safe.

    ``api`` may be ``None`` (no Argo CD / Flux lookups); ``argocd_namespace`` (default:
    the git config's ``argocdNamespace``) is where Applications and ``argocd-cm`` live
    unless the tracking id names another namespace. The only state is two caches: the
    tracking settings read from ``argocd-cm`` (``settings_ttl`` seconds) and the remotes'
    default branches (``default_branches``, see :mod:`~gitops_reloader.gitops.remotehead`).
    """

    def __init__(self, git_config: GitConfig, api: ObjectReader | None, *,
                 argocd_namespace: str | None = None, default_branches: DefaultBranches | None = None,
                 clock: Clock | None = None, settings_ttl: float = 60.0) -> None:
        self.git_config = git_config
        self.api = api
        self.argocd_namespace = argocd_namespace or git_config.argocd_namespace
        self.clock = clock or SystemClock()
        self.default_branches = default_branches or DefaultBranches(clock=self.clock)
        self.settings_ttl = settings_ttl
        self._lock = threading.Lock()
        self._tracking_cache: tuple[float, Tracking] | None = None

    # -- step 1: which repository, which file or directory ------------------------

    def resolve(self, record: Any) -> Resolution:
        """Decide the repository and where in it to look (API reads only, no git).

        Raises :class:`OperatorOwned`, :class:`~gitops_reloader.errors.ManifestNotFound`
        (permanent), :class:`~gitops_reloader.errors.AnnotationError` (a malformed
        annotation) or :class:`~gitops_reloader.errors.KubeError` (retryable).
        """
        identity = workload_identity(record)
        self._check_owner(record, identity)
        annotations = self._annotations(record)
        target = annotations.get(GIT_TARGET_ANNOTATION, "").strip()
        path = annotations.get(GIT_PATH_ANNOTATION, "").strip()
        repo_ref = annotations.get(GIT_REPO_ANNOTATION, "").strip()
        if target or path or repo_ref:
            repo = self._annotated_repo(repo_ref, identity)
            spelled = repo_ref if repo_ref and self.git_config.get(repo_ref) is None else ""
            if target:
                file, yaml_path = parse_git_target(target)
                self._check_allowed(repo, file, identity)
                deployer = self._deployer(record, identity, repo)
                self._check_target(repo, file, identity, deployer)
                return Resolution(repo.name, Method.TARGET, path=file, yaml_path=yaml_path,
                                  refresh=_refresh_of(deployer), source_url=spelled)
            if path:
                file = clean_repo_path(path, what=GIT_PATH_ANNOTATION)
                if not file:
                    raise AnnotationError(f"{GIT_PATH_ANNOTATION} names no file")
                self._check_allowed(repo, file, identity)
                return Resolution(repo.name, Method.ANNOTATION, path=file, source_url=spelled,
                                  refresh=_refresh_of(self._deployer(record, identity, repo)))
            return Resolution(repo.name, Method.SCAN, search_dirs=repo.paths or ("",), source_url=spelled,
                              refresh=_refresh_of(self._deployer(record, identity, repo)))
        notes: list[str] = []
        # Argo CD's tracking id > Flux's own labels > a HelmRelease > Argo CD's instance label
        # (only with the label tracking method: Helm sets app.kubernetes.io/instance too).
        found = self._from_argocd(record, identity, notes, by_label=False) or self._from_flux(
            record, identity, notes)
        if found is None:
            self._from_helm_release(record, identity, notes)
            found = self._from_argocd(record, identity, notes, by_label=True)
        if found is not None:
            return found
        default = self.git_config.default
        if default is None:
            raise ManifestNotFound(
                f"{identity}: no manifest location: no {GIT_PATH_ANNOTATION}/{GIT_TARGET_ANNOTATION} "
                "annotation, no usable Argo CD or Flux metadata, and no defaultRepository to scan"
                + _notes(notes))
        return Resolution(default.name, Method.SCAN, search_dirs=default.paths or ("",),
                          notes=tuple(notes))

    def _annotations(self, record: Any) -> dict[str, str]:
        keys = (GIT_TARGET_ANNOTATION, GIT_PATH_ANNOTATION, GIT_REPO_ANNOTATION)
        own = dict(record.annotations)
        source = own if any(k in own for k in keys) else dict(record.template_annotations)
        return {k: str(source[k]) for k in keys if k in source}

    def _check_owner(self, record: Any, identity: ObjectIdentity) -> None:
        for owner in _metadata(record).get("ownerReferences") or ():
            if not isinstance(owner, Mapping):
                continue
            group = api_group(str(owner.get("apiVersion") or ""))
            if group not in _CORE_GROUPS:
                raise OperatorOwned(
                    f"{identity} is owned by {owner.get('kind')} {owner.get('name')} "
                    f"({owner.get('apiVersion')}): its operator writes this workload, so there is "
                    "no manifest of ours to edit; reload it through its custom resource instead")

    def _annotated_repo(self, reference: str, identity: ObjectIdentity) -> RepositoryConfig:
        if reference:
            repo = self.git_config.resolve(reference)
            if repo is None:
                usable = [r.name for r in self.git_config.repositories if may_use(r, identity.namespace)]
                raise AnnotationError(
                    f"{identity}: {GIT_REPO_ANNOTATION} names no repository of --git-config "
                    f"(known: {', '.join(usable) or 'none'})")
        else:
            default = self.git_config.default
            if default is None:
                raise AnnotationError(
                    f"{identity}: set {GIT_REPO_ANNOTATION}: there is no defaultRepository in --git-config")
            repo = default
        _check_usable(repo, identity)
        return repo

    @staticmethod
    def _check_allowed(repo: RepositoryConfig, path: str, identity: ObjectIdentity) -> None:
        if not repo.allows(path):
            raise ManifestNotFound(
                f"{identity}: {path} is outside the paths configured for repository {repo.name}")
        decision = may_write(repo, identity.namespace, path)
        if not decision:
            raise PolicyDenied(f"{identity}: {decision.reason}")

    def _deployer(self, record: Any, identity: ObjectIdentity, repo: RepositoryConfig) -> Resolution | None:
        """The Argo CD Application, Flux Kustomization or HelmRelease deploying the workload from ``repo``.

        Found the way :meth:`resolve` finds them, from the workload's own tracking metadata
        and Flux labels, with the same namespace checks — never from a name an annotation
        gives; ``search_dirs`` is what it renders from ``repo`` (an Application's source
        directories and ``$<ref>`` value files, a HelmRelease's chart and ``valuesFiles``).
        ``None`` when none does, when the first that applies is refused, or when it deploys
        nothing from that repository and branch: its refresh would not see the commit.
        """
        lookups = (lambda: self._argocd_deployer(record, identity, repo, by_label=False),
                   lambda: self._from_flux(record, identity, [], proven=True),
                   lambda: self._helm_release(record, identity, []),
                   lambda: self._argocd_deployer(record, identity, repo, by_label=True))
        for lookup in lookups:
            try:
                found = lookup()
            except ManifestNotFound:
                return None  # e.g. a Helm chart from a chart repository: no path in git
            if found is not None:
                return found if found.repo_name == repo.name else None
        return None

    @staticmethod
    def _check_target(repo: RepositoryConfig, path: str, identity: ObjectIdentity,
                      deployer: Resolution | None) -> None:
        """A ``git-target`` file must be allowed for the namespace (see the module docstring)."""
        scope = deployer.search_dirs if deployer is not None and not repo.tenants else None
        decision = may_target(repo, identity.namespace, path, scope)
        if not decision:
            raise PolicyDenied(f"{identity}: {decision.reason}")

    # -- Argo CD and Flux (rules in gitops/argocd.py and gitops/flux.py) ---------------

    def _tracking(self) -> Tracking:
        """Tracking method and label key: ``argocd-cm`` when readable, else ``--git-config``."""
        now = self.clock.monotonic()
        with self._lock:
            cached = self._tracking_cache
        if cached is not None and cached[0] > now:
            return cached[1]
        fallback = Tracking(self.git_config.argocd_tracking_method or "annotation",
                            self.git_config.argocd_instance_label_key or DEFAULT_INSTANCE_LABEL)
        tracking = fallback
        if self.api is not None:
            try:
                configmap = self.api.get(CONFIGMAPS, self.argocd_namespace, ARGOCD_CM)
            except KubeNotFound:
                pass  # Argo CD runs elsewhere: the git config (or Argo CD's default) applies
            except KubeError as exc:
                if exc.status not in (401, 403):
                    raise
            else:
                tracking = tracking_from_configmap(_map(configmap.get("data")))
        with self._lock:
            self._tracking_cache = (now + self.settings_ttl, tracking)
        return tracking

    def _repo_for(self, url: str, revision: str, what: str) -> RepositoryConfig:
        """The configured repository whose branch is the one deployed from ``url``.

        ``url`` matches as Argo CD's ``git.SameURL`` decides (:meth:`GitConfig.by_url`),
        for Argo CD and Flux sources alike.

        ``HEAD`` or empty means the remote's default branch (asked of the remote).
        """
        rev = revision.strip().removeprefix("refs/heads/")
        candidates = self.git_config.by_url(url)
        if not candidates:
            near = self.git_config.same_place(url)
            hint = _alias_hint(self.git_config, near[0], url) if near else ""
            raise ManifestNotFound(
                f"{what} deploys from {display_url(url)}, which is not in --git-config{hint}")
        described = f"revision {rev!r}"
        if rev in ("", "HEAD"):
            rev = self.default_branches.branch(candidates[0])
            described = f"the default branch {rev!r}"
        for repo in candidates:
            if repo.branch == rev:
                return repo
        branches = ", ".join(sorted({r.branch for r in candidates}))
        raise ManifestNotFound(
            f"{what} deploys {described} of {display_url(url)}, but --git-config writes to "
            f"branch {branches}: a commit there would not be deployed")

    def _argocd_app(self, record: Any, identity: ObjectIdentity, notes: list[str], *,
                    by_label: bool) -> tuple[str | None, str, bool] | None:
        """``(namespace, name, found by tracking id)`` of the Application, if tracked.

        ``argocd-cm`` is read (cached) only for a workload that carries a tracking id or
        labels, so that an unreadable ConfigMap never delays unrelated workloads.
        """
        meta = _metadata(record)
        if by_label:
            labels = _strings(meta.get("labels"))
            if not labels:
                return None
            tracking = self._tracking()
            label = labels.get(tracking.label_key, "").strip()
            if label and not tracking.uses_label:
                notes.append(f"label {tracking.label_key} ignored: Argo CD tracks by annotation here")
            return (*parse_app_instance(label), False) if label and tracking.uses_label else None
        value = _strings(meta.get("annotations")).get(ARGOCD_TRACKING_ANNOTATION)
        if not value or self._tracking().uses_label:
            return None
        parsed = parse_tracking_id(value)
        if parsed is None:
            notes.append(f"{ARGOCD_TRACKING_ANNOTATION} is malformed")
            return None
        if not parsed.describes(identity):
            notes.append(f"{ARGOCD_TRACKING_ANNOTATION} describes another object (copied); ignored")
            return None
        return parsed.app_namespace, parsed.app_name, True

    def _from_argocd(self, record: Any, identity: ObjectIdentity, notes: list[str], *,
                     by_label: bool) -> Resolution | None:
        app = self._argocd_application(record, identity, notes, by_label=by_label)
        return None if app is None else self._argocd_directories(app, identity, notes)

    def _argocd_application(self, record: Any, identity: ObjectIdentity, notes: list[str], *,
                            by_label: bool, proven: bool = False) -> _Application | None:
        """The Application tracking the workload, once its destination is the workload's namespace.

        ``proven``: also refused when its ``status.resources`` lists objects but not this one.
        """
        app = self._argocd_app(record, identity, notes, by_label=by_label)
        if app is None:
            return None
        if self.api is None:
            notes.append("Argo CD metadata present but no API access to read the Application")
            return None
        namespace, name = app[0] or self.argocd_namespace, app[1]
        what = f"Argo CD Application {namespace}/{name}"
        try:
            application = self.api.get(APPLICATIONS, namespace, name)
        except KubeNotFound:
            notes.append(f"{what} not found")
            return None
        except KubeError as exc:
            raise _forbidden(exc, identity, what, "applications.argoproj.io",
                             "reloader.git.argocdNamespace") from None
        allowed, deploy_namespace = destination_namespace(
            application, app_namespace=namespace, workload_namespace=identity.namespace,
            tracked_by_id=app[2], argocd_namespace=self.argocd_namespace)
        if not allowed:
            # Never name the other Application's source: it may be another team's.
            raise ManifestNotFound(
                f"{identity}: {what} does not deploy into namespace {identity.namespace} "
                "(spec.destination.namespace differs, or is empty without a tracking id naming this "
                "object in Argo CD's namespace): its files are not this workload's to edit")
        if proven:
            _check_listed(status_lists(application, group=identity.group, kind=identity.kind,
                                       namespace=identity.namespace, name=identity.name), identity, what,
                          "status.resources")
        sources = application_sources(application)
        refresh = RefreshTarget(RefreshKind.ARGOCD_APPLICATION, namespace, name, hydrate=sources.hydrator)
        return _Application(what, sources, refresh, deploy_namespace)

    def _argocd_directories(self, app: _Application, identity: ObjectIdentity,
                            notes: list[str]) -> Resolution:
        """Where the Application's manifests are: the directories of its sources in one repository."""
        sources, what, deploy_namespace = app.sources, app.what, app.deploy_namespace
        where = f"{identity}: {what}"
        hint = self._argocd_hint(sources, what)
        directories = [s for s in sources.directories if s.repo_url]
        if not directories:
            if sources.charts:
                raise ManifestNotFound(
                    f"{where} installs Helm chart {sources.charts[0]!r} from a chart repository; "
                    + (hint or f"set {GIT_TARGET_ANNOTATION} to a values file in git"))
            raise ManifestNotFound(f"{where} has no source with a repoURL" + (f"; {hint}" if hint else ""))
        matched: list[tuple[RepositoryConfig, GitSource]] = []
        refused: list[ManifestNotFound] = []
        for source in directories:
            try:
                matched.append((self._repo_for(source.repo_url, source.revision, where), source))
            except ManifestNotFound as exc:
                refused.append(exc)
        if not matched:
            raise ManifestNotFound(str(refused[0]) + (f"; {hint}" if hint else "")) from None
        if len({repo.name for repo, _ in matched}) > 1:
            raise ManifestNotFound(
                f"{where} deploys from several repositories of --git-config "
                f"({', '.join(sorted({repo.name for repo, _ in matched}))}); set {GIT_REPO_ANNOTATION} "
                f"and {GIT_PATH_ANNOTATION} to name the file")
        dirs = tuple(dict.fromkeys(_argocd_path(source, what) for _, source in matched))
        recurse = combined_recurse([source for _, source in matched])
        notes.extend(f"{source.field} skipped" for source in directories
                     if all(source is not s for _, s in matched))
        if recurse is False:
            notes.append(_FLAT)
        return Resolution(matched[0][0].name, Method.ARGOCD, search_dirs=dirs, refresh=(app.refresh,),
                          notes=tuple(notes), hint=hint, recurse=recurse, deploy_namespace=deploy_namespace,
                          source_url=matched[0][1].repo_url)

    def _argocd_deployer(self, record: Any, identity: ObjectIdentity, repo: RepositoryConfig, *,
                         by_label: bool) -> Resolution | None:
        """The Application deploying the workload, with what it renders from ``repo``.

        Its source directories there and its ``$<ref>/…`` Helm value files there (a chart
        from a chart repository with values in git has no directory, only those files).
        :class:`~gitops_reloader.errors.ManifestNotFound` when it renders nothing from ``repo``.
        """
        app = self._argocd_application(record, identity, [], by_label=by_label, proven=True)
        if app is None:
            return None
        try:
            found: Resolution | None = self._argocd_directories(app, identity, [])
        except ManifestNotFound:
            found = None
        dirs = found.search_dirs if found is not None and found.repo_name == repo.name else ()
        values = tuple(secure_join(v.path) for v in app.sources.values
                       if self._writes(repo, v.repo_url, v.revision))
        if not dirs and not values:
            raise ManifestNotFound(f"{identity}: {app.what} renders nothing from repository {repo.name}")
        return Resolution(repo.name, Method.ARGOCD, search_dirs=tuple(dict.fromkeys(dirs + values)),
                          refresh=(app.refresh,), deploy_namespace=app.deploy_namespace)

    def _writes(self, repo: RepositoryConfig, url: str, revision: str) -> bool:
        """Whether a commit to ``repo`` is what ``url`` at ``revision`` deploys."""
        try:
            return self._repo_for(url, revision, "").name == repo.name
        except ReloaderError:
            return False

    def _argocd_hint(self, sources: AppSources, what: str) -> str:
        """Which values file to name in ``git-target`` for a Helm-rendered workload."""
        offers: list[str] = []
        for values in sources.values:
            offers.append(self._target_offer(values.path, values.repo_url, values.revision))
        for source in sources.directories:
            if source.source_type is not SourceType.HELM and not source.value_files:
                continue
            base = _argocd_path(source, what)
            files = [f for f in source.value_files if not f.startswith("$")] or (
                [] if source.value_files else ["values.yaml"])
            for file in files:
                offers.append(self._target_offer(secure_join(posixpath.join(base, file)), source.repo_url,
                                                 source.revision))
        if not offers:
            return ""
        return (f"{what} renders a Helm chart: set {GIT_TARGET_ANNOTATION} to its values file, "
                f"e.g. {offers[-1]}")

    def _target_offer(self, path: str, url: str, revision: str) -> str:
        offer = f"'{path}#podAnnotations'"
        try:
            repo = self._repo_for(url, revision, "")
        except ReloaderError:
            return offer + f" (in {display_url(url)}, which --git-config can't write to)"
        default = self.git_config.default
        if default is None or default.name != repo.name:
            offer += f" with {GIT_REPO_ANNOTATION}: '{repo.name}'"
        return offer

    def _from_flux(self, record: Any, identity: ObjectIdentity, notes: list[str], *,
                   proven: bool = False) -> Resolution | None:
        """The Kustomization named by the Flux labels (``proven``: and listing the workload, if it lists)."""
        meta = _metadata(record)
        labels = _strings(meta.get("labels"))
        ks_name = labels.get(FLUX_NAME_LABEL, "").strip()
        if not ks_name:
            return None
        ks_namespace = labels.get(FLUX_NAMESPACE_LABEL, "").strip() or identity.namespace
        if self.api is None:
            notes.append("Flux labels present but no API access to read the Kustomization")
            return None
        what = f"Flux Kustomization {ks_namespace}/{ks_name}"
        try:
            kustomization = self.api.get(KUSTOMIZATIONS, ks_namespace, ks_name)
        except KubeNotFound:
            notes.append(f"{what} not found")
            return None
        except KubeError as exc:
            raise _forbidden(exc, identity, what, "kustomizations.kustomize.toolkit.fluxcd.io",
                             "reloader.git.fluxNamespaces") from None
        spec = _map(kustomization.get("spec"))
        target_namespace = str(spec.get("targetNamespace") or "").strip()
        if target_namespace and target_namespace != identity.namespace:
            raise ManifestNotFound(
                f"{identity}: {what} applies into another namespace (spec.targetNamespace): "
                "its files are not this workload's to edit")
        if proven:
            _check_listed(inventory_lists(kustomization, group=identity.group, kind=identity.kind,
                                          namespace=identity.namespace, name=identity.name), identity, what,
                          "status.inventory")
        source_ref = _map(spec.get("sourceRef"))
        source_kind = str(source_ref.get("kind") or "GitRepository")
        if source_kind != "GitRepository":
            raise ManifestNotFound(
                f"{identity}: {what} applies from a {source_kind}: there is no git repository to write to")
        src_namespace = str(source_ref.get("namespace") or ks_namespace)
        src_name = str(source_ref.get("name") or "")
        repo, url = self._flux_repository(src_namespace, src_name, f"{identity}: {what}")
        root = secure_join(str(spec.get("path") or ""))
        path: str | None = None
        origin = _strings(meta.get("annotations")).get(FLUX_ORIGIN_ANNOTATION)
        if origin:
            origin_path = parse_origin_path(origin)
            if origin_path:
                try:
                    path = clean_repo_path(posixpath.join(root, origin_path), what=FLUX_ORIGIN_ANNOTATION)
                except AnnotationError:
                    notes.append(f"{FLUX_ORIGIN_ANNOTATION} points outside the repository; ignored")
        refresh = (RefreshTarget(RefreshKind.FLUX_GITREPOSITORY, src_namespace, src_name),
                   RefreshTarget(RefreshKind.FLUX_KUSTOMIZATION, ks_namespace, ks_name))
        return Resolution(repo.name, Method.FLUX, path=path or None, search_dirs=(root,),
                          refresh=refresh, notes=tuple(notes), deploy_namespace=target_namespace or None,
                          source_url=url)

    def _flux_repository(self, namespace: str, name: str, where: str) -> tuple[RepositoryConfig, str]:
        """The configured repository and branch a GitRepository checks out (or a refusal), and its URL."""
        assert self.api is not None
        try:
            git_repository = self.api.get(GITREPOSITORIES, namespace, name)
        except KubeNotFound:
            raise ManifestNotFound(
                f"{where} uses GitRepository {namespace}/{name}, which does not exist") from None
        except KubeError as exc:
            raise _forbidden(exc, None, f"{where} uses GitRepository {namespace}/{name}",
                             "gitrepositories.source.toolkit.fluxcd.io",
                             "reloader.git.fluxNamespaces") from None
        spec = _map(git_repository.get("spec"))
        ref = checkout(spec.get("ref"))
        if ref.branch is None:
            raise ManifestNotFound(
                f"{where} uses GitRepository {namespace}/{name}, which checks out {ref} "
                f"(spec.ref.{ref.kind}), not a branch: a commit on any branch would not be deployed. "
                "Make the GitRepository follow "
                f"a branch, or set {GIT_REPO_ANNOTATION} and {GIT_PATH_ANNOTATION}/{GIT_TARGET_ANNOTATION} "
                "to a file deployed from a branch-tracking source")
        url = str(spec.get("url") or "")
        return self._repo_for(url, ref.branch, where), url

    def _from_helm_release(self, record: Any, identity: ObjectIdentity, notes: list[str]) -> None:
        """Refuse a workload rendered by a Flux HelmRelease, naming the values file to target."""
        found = self._helm_release(record, identity, notes)
        if found is not None:
            raise ManifestNotFound(found.hint)

    def _helm_release(self, record: Any, identity: ObjectIdentity, notes: list[str]) -> Resolution | None:
        """The chart in git of the Flux HelmRelease that renders the workload.

        ``search_dirs`` are the chart's directory and its ``valuesFiles`` (what a
        ``git-target`` may write without ``tenants``), ``refresh`` the GitRepository and
        the HelmRelease, ``hint`` the refusal for a workload without ``git-target`` (Helm
        renders it: no document in git declares it). ``None`` without a HelmRelease here;
        :class:`~gitops_reloader.errors.ManifestNotFound` when the chart is not in a git
        repository we can write, or the release installs into another namespace.
        """
        labels = _strings(_metadata(record).get("labels"))
        name = labels.get(FLUX_HELM_NAME_LABEL, "").strip()
        if not name:
            return None
        namespace = labels.get(FLUX_HELM_NAMESPACE_LABEL, "").strip() or identity.namespace
        what = f"Flux HelmRelease {namespace}/{name}"
        generic = (f"deployed by {what}: point {GIT_TARGET_ANNOTATION} at its values "
                   "(e.g. 'release.yaml#spec.values.podAnnotations')")
        if self.api is None:
            notes.append(generic)
            return None
        try:
            release = self.api.get(HELMRELEASES, namespace, name)
        except KubeNotFound:
            notes.append(f"{what} not found; {generic}")
            return None
        except KubeError as exc:
            if exc.status != 403:
                raise
            # Not a retry's business, and a scan could pick a same-named document Helm never renders.
            raise ManifestNotFound(
                f"{identity}: deployed by {what}, which gitops-reloader may not read (grant get on "
                f"helmreleases.helm.toolkit.fluxcd.io); {generic}") from None
        where = f"{identity}: deployed by {what}"
        if helm_deploy_namespace(release, namespace) != identity.namespace:
            raise ManifestNotFound(
                f"{where}, which installs into another namespace: not this workload's to edit")
        inline = (f"; its values are inline: set {GIT_TARGET_ANNOTATION} to the HelmRelease's own manifest, "
                  "e.g. 'release.yaml#spec.values.podAnnotations'"
                  if _map(_map(release.get("spec")).get("values")) else "")
        chart = helm_chart_source(release, namespace)
        if chart is not None and chart.via_helm_chart:
            try:
                helm_chart = self.api.get(HELMCHARTS, chart.namespace, chart.name)
                chart = helm_chart_source(helm_chart, chart.namespace)
            except KubeNotFound:
                raise ManifestNotFound(f"{where}, whose HelmChart does not exist{inline}") from None
            except KubeError as exc:
                if exc.status != 403:
                    raise
                raise ManifestNotFound(
                    f"{where}, whose HelmChart gitops-reloader may not read (grant get on "
                    f"helmcharts.source.toolkit.fluxcd.io){inline}") from None
        if chart is None or chart.kind != "GitRepository":
            kind = chart.kind if chart is not None else "no source"
            raise ManifestNotFound(
                f"{where}, whose chart comes from {kind}: the rendered manifest and the chart's values "
                f"are not in a git repository we can write{inline or ' (the HelmRelease sets no values)'}")
        file = (secure_join(chart.values_files[-1]) if chart.values_files
                else secure_join(posixpath.join(chart.chart, "values.yaml")))
        try:
            repo, url = self._flux_repository(chart.namespace, chart.name, where)
        except ManifestNotFound as exc:
            raise ManifestNotFound(f"{exc}{inline}") from None
        offer = f"'{file}#podAnnotations'"
        default = self.git_config.default
        if default is None or default.name != repo.name:
            offer += f" with {GIT_REPO_ANNOTATION}: '{repo.name}'"
        stale = "" if chart.rebuilds_on_commit else f"; {_CHART_VERSION}"
        hint = (f"{where}: Helm renders this workload, so no manifest in git declares it; set "
                f"{GIT_TARGET_ANNOTATION} to the chart's values file, e.g. {offer}{inline}{stale}")
        files = tuple(dict.fromkeys((secure_join(chart.chart), *map(secure_join, chart.values_files))))
        refresh = (RefreshTarget(RefreshKind.FLUX_GITREPOSITORY, chart.namespace, chart.name),
                   RefreshTarget(RefreshKind.FLUX_HELMRELEASE, namespace, name))
        return Resolution(repo.name, Method.FLUX, search_dirs=files, refresh=refresh, hint=hint,
                          deploy_namespace=identity.namespace, source_url=url)

    # -- step 2: the document in the synced clone ------------------------------------

    def locate(self, record: Any, resolution: Resolution, files: ManifestFiles, *,
               confirm: bool = False) -> Location:
        """The file and document to edit in the clone's current content.

        A unique scan hit is returned unconfirmed (``Location.confirmed`` False: one
        parse of the file saved; the edit is checked instead); ``confirm=True`` parses
        every candidate with the reference parser.

        Raises :class:`~gitops_reloader.errors.ManifestNotFound` (nothing, or more than
        one document, matches) or :class:`~gitops_reloader.errors.YamlEditError` (the
        named file can't be parsed).
        """
        identity = workload_identity(record)
        repo = self.git_config.get(resolution.repo_name)
        if repo is None:
            raise ManifestNotFound(f"{identity}: repository {resolution.repo_name} is not configured")
        _check_usable(repo, identity)
        if resolution.path is not None:
            found = self._in_file(identity, resolution, files, repo)
            if found is not None:
                return found
        if resolution.method in (Method.TARGET, Method.ANNOTATION):
            raise ManifestNotFound(f"{identity}: {repo.name}:{resolution.path} does not exist")
        if resolution.recurse is None:
            recurse = _detect_recurse(files, resolution.search_dirs)
            notes = resolution.notes if recurse else (*resolution.notes, _FLAT)
            resolution = replace(resolution, recurse=recurse, notes=notes)
        return self._search(identity, resolution, files, repo, confirm=confirm)

    def _in_file(self, identity: ObjectIdentity, resolution: Resolution,
                 files: ManifestFiles, repo: RepositoryConfig) -> Location | None:
        path = resolution.path
        assert path is not None
        writable = may_write(repo, identity.namespace, path)
        if not writable:
            if resolution.method is Method.FLUX:
                return None  # the origin names a file we may not write: search the Kustomization
            raise PolicyDenied(f"{identity}: {writable.reason}")
        text = _text(files, path)
        if text is None:
            return None  # missing: an error for annotations, a search for Flux origins
        if resolution.method is Method.TARGET:
            target_index = 0
            if "\n---" in text:  # a patch file with several documents: prefer this workload's
                found = find_document(text, kind=identity.kind, name=identity.name,
                                      namespace=identity.namespace, api_group=identity.group, path=path)
                target_index = found if found is not None else 0
            return Location(resolution.repo_name, path, target_index, resolution.yaml_path,
                            resolution.method, resolution.refresh)
        index, denial = _own_document(text, path, identity, repo, resolution)
        if index is not None:
            return Location(resolution.repo_name, path, index, None, resolution.method, resolution.refresh)
        if resolution.method is Method.ANNOTATION:
            if denial:
                raise PolicyDenied(f"{identity}: {denial}")
            raise ManifestNotFound(f"{identity}: {resolution.repo_name}:{path} declares no such object")
        return None  # a stale Flux origin: search the Kustomization's path

    def _search(self, identity: ObjectIdentity, resolution: Resolution, files: ManifestFiles,
                repo: RepositoryConfig, *, confirm: bool) -> Location:
        dirs = resolution.search_dirs or ("",)
        candidates = files.lookup(group=identity.group, kind=identity.kind, namespace=identity.namespace,
                                  name=identity.name, under=dirs)
        if resolution.recurse is False:
            candidates = _directly_in(candidates, dirs)
        exact = [r for r in candidates.exact if may_write(repo, identity.namespace, r.path)]
        loose_doc = DocumentIdentity(identity.kind, identity.name, None)
        loose = [r for r in candidates.loose if may_edit(
            repo, namespace=identity.namespace, kind=identity.kind, name=identity.name, path=r.path,
            document=loose_doc, deploy_namespace=resolution.deploy_namespace)]
        refused = len(candidates.exact) + len(candidates.loose) - len(exact) - len(loose)
        for tier in (exact, loose):
            if len(tier) == 1 and not confirm:
                ref = tier[0]
                return Location(repo.name, ref.path, ref.doc_index, None, resolution.method,
                                resolution.refresh, confirmed=False)
            confirmed = [found for found in (self._confirm(files, ref, identity, repo, resolution)
                                             for ref in tier) if found is not None]
            if len(confirmed) == 1:
                ref = confirmed[0]
                return Location(repo.name, ref.path, ref.doc_index, None, resolution.method,
                                resolution.refresh)
            if len(confirmed) > 1:
                raise ManifestNotFound(
                    f"{identity}: {len(confirmed)} documents in {repo.name} declare it "
                    f"({_listed([r.path for r in confirmed])}); set {GIT_PATH_ANNOTATION} to choose")
        where = ", ".join(f"{repo.name}:{d}/" if d else f"{repo.name}:/" for d in dirs)
        if refused:
            raise PolicyDenied(
                f"{identity}: the tenancy policy of repository {repo.name} does not let namespace "
                f"{identity.namespace} edit the {refused} document(s) under {where} that could "
                f"declare it (only documents with its own namespace, or namespace-less documents the "
                f"policy deploys into that namespace, in files the namespace may write)")
        message = f"{identity}: no document declares it under {where}"
        unparsable = files.unparsable_under(dirs)
        if unparsable:
            message += (f"; {len(unparsable)} YAML file(s) there could not be parsed "
                        f"({_listed(list(unparsable))})")
        if resolution.hint:
            message += f"; {resolution.hint}"
        else:
            message += f"; set {GIT_PATH_ANNOTATION} (or {GIT_TARGET_ANNOTATION}) to name the file"
        raise ManifestNotFound(message + _notes(list(resolution.notes)))

    @staticmethod
    def _confirm(files: ManifestFiles, ref: DocRef, identity: ObjectIdentity, repo: RepositoryConfig,
                 resolution: Resolution) -> DocRef | None:
        text = _text(files, ref.path)
        if text is None:
            return None
        index, _ = _own_document(text, ref.path, identity, repo, resolution)
        return None if index is None else DocRef(ref.path, index)


def _check_usable(repo: RepositoryConfig, identity: ObjectIdentity) -> None:
    decision = may_use(repo, identity.namespace)
    if not decision:
        raise PolicyDenied(f"{identity}: {decision.reason}")


def _own_document(text: str, path: str, identity: ObjectIdentity, repo: RepositoryConfig,
                  resolution: Resolution) -> tuple[int | None, str]:
    """The index of the workload's own document in ``text``, or ``None`` and why not.

    A document naming the workload's namespace wins; else the first namespace-less one
    the tenancy policy lets the workload edit. The reason (``""``: no candidate at all)
    is the policy's, for a document of the same kind and name that is not the workload's.
    """
    same = [info for info in list_documents(text, path=path)
            if (info.kind, info.name) == (identity.kind, identity.name)
            and api_group(info.api_version) == identity.group]
    for info in same:
        if info.namespace == identity.namespace:
            return info.index, ""
    denial = ""
    for info in same:
        decision = may_edit(repo, namespace=identity.namespace, kind=identity.kind, name=identity.name,
                            path=path, document=DocumentIdentity(info.kind, info.name, info.namespace),
                            deploy_namespace=resolution.deploy_namespace)
        if decision:
            return info.index, ""
        denial = denial or decision.reason
    return None, denial


def _text(files: ManifestFiles, path: str) -> str | None:
    data = files.read(path)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise YamlEditError(f"{path}: not UTF-8 text") from None


def _argocd_path(source: GitSource, what: str) -> str:
    """The source's ``path`` relative to the repository root (a leading ``/`` is the root)."""
    try:
        return clean_repo_path(source.path.lstrip("/"), what=f"{what} {source.field}.path")
    except AnnotationError as exc:
        raise ManifestNotFound(str(exc)) from None


def _detect_recurse(files: ManifestFiles, dirs: Sequence[str]) -> bool:
    """Argo CD's ``AppType`` for each searched directory: recursive unless a Directory source."""
    for directory in dirs:
        names = [name for name in (*KUSTOMIZATION_FILES, "Chart.yaml")
                 if files.read(posixpath.join(directory, name)) is not None]
        if detect_source_type(names) is SourceType.DIRECTORY:
            return False
    return True


def _forbidden(exc: KubeError, identity: ObjectIdentity | None, what: str, resource: str,
               chart_value: str) -> ReloaderError:
    """A 403 reading an Argo CD / Flux object is permanent for the workload; anything else is ``exc``.

    The chart grants these reads only in the namespaces it is told about, so a tracking id
    or label naming an object elsewhere is answered 403: retrying reads the same answer.
    """
    if exc.status != 403:
        return exc
    prefix = f"{identity}: " if identity is not None else ""
    return ManifestNotFound(f"{prefix}{what}: gitops-reloader may not read it (grant get on {resource} "
                            f"in that namespace, with the Helm chart: {chart_value})")


def _directly_in(candidates: Candidates, dirs: Sequence[str]) -> Candidates:
    """Only the candidates whose file lies directly in one of ``dirs`` (no subdirectory)."""
    wanted = {d.strip("/") for d in dirs}

    def keep(refs: Sequence[DocRef]) -> tuple[DocRef, ...]:
        return tuple(r for r in refs if posixpath.dirname(r.path) in wanted)

    return Candidates(keep(candidates.exact), keep(candidates.loose))


def _check_listed(listed: bool | None, identity: ObjectIdentity, what: str, field: str) -> None:
    """Refuse an Argo CD / Flux object whose status lists what it applied, but not the workload.

    Labels and tracking ids sit on the workload, where whoever applies it can write them;
    the engine's own list is the proof that it deploys this workload (``None``: no list yet).
    """
    if listed is False:
        raise ManifestNotFound(f"{identity}: {what} does not list it in {field}: it does not deploy it")


def _refresh_of(deployer: Resolution | None) -> tuple[RefreshTarget, ...]:
    return deployer.refresh if deployer is not None else ()


def _alias_hint(git_config: GitConfig, repo: RepositoryConfig, url: str) -> str:
    """What to add to ``repo`` in ``--git-config`` so that ``url`` finds it: the exact line."""
    line = git_config.alias_line(repo, url)
    if line:
        add = f"if it is the same repository, give repository {repo.name} this line in --git-config: {line}"
    elif display_url(url) != url:
        add = ("its URL carries credentials, which an alias may not hold: take them out of the URL (Argo CD "
               f"and Flux read them from a Secret), then list it in the aliases of repository {repo.name}")
    else:
        add = f"if it is the same repository, list this URL in the aliases of repository {repo.name}"
    return (f"; repository {repo.name} has the same host and path in another spelling (repository URLs "
            "compare as Argo CD compares them: only case, a trailing .git and the scp-like SSH form may "
            f"differ); {add}")


def _notes(notes: Sequence[str]) -> str:
    return f" ({'; '.join(notes)})" if notes else ""
