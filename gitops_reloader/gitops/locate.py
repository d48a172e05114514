"""Find the file and document in git that declares a live workload.

Two steps, so that the cheap one can run on an informer thread:

1. :meth:`Locator.resolve` reads only the workload and (through the API server) the
   Argo CD Application or Flux objects that deployed it, and returns a
   :class:`Resolution`: which configured repository, and an exact file or the
   directories to search. The git sink groups workloads by its ``repo_name``.
2. :meth:`Locator.locate` looks into the synced clone (a :class:`ManifestFiles`, in
   practice the repository's :class:`~gitops_reloader.gitops.scanindex.ScanIndex`) and
   returns a :class:`Location`: path and document index. Named files and ambiguous
   scan hits are confirmed with :func:`~gitops_reloader.gitops.yamledit.find_document`
   on the file's current text; a unique scan hit is returned unconfirmed (one parse of
   the file saved per workload) and the caller checks its edit instead
   (:func:`~gitops_reloader.gitops.scanindex.edit_confined`), locating again with
   ``confirm=True`` if the edit landed anywhere else.

Sources, in order (the first that applies wins):

- **Annotations** on the workload (metadata, else pod template):
  ``gitops-reloader.io/git-target: <file>#<yaml.path>`` (a Helm values file or
  kustomize patch: the hash goes into the map at that path),
  ``gitops-reloader.io/git-path: <file>``, ``gitops-reloader.io/git-repo: <name or URL>``
  (default: the default repository; alone, it scans that repository).
- **Argo CD**: the ``argocd.argoproj.io/tracking-id`` annotation
  ``<app>:<group>/<kind>:<namespace>/<name>`` (``<app>`` may be
  ``<appNamespace>_<appName>``; an id that describes another object is a copy and is
  ignored), else the ``app.kubernetes.io/instance`` label → the Application →
  ``spec.source`` (or the first of ``spec.sources`` whose repository is configured)
  ``repoURL``/``path``/``targetRevision`` → the document under that path.
- **Flux**: labels ``kustomize.toolkit.fluxcd.io/name|namespace`` → the Kustomization's
  ``spec.path`` and ``spec.sourceRef`` → the GitRepository's ``spec.url`` and
  ``spec.ref.branch``; the ``config.kubernetes.io/origin`` annotation's ``path:`` names
  the exact file when present.
- **Scan** of the default repository for the document with the same API group, kind,
  name and namespace (a document without a namespace matches too, as a second choice).

An Application or Kustomization that does not exist here (Argo CD may run in another
cluster; Helm charts set ``app.kubernetes.io/instance`` too) falls through to the next
source. Metadata that clearly points somewhere we cannot write — a repository not in
``--git-config``, a tag or commit instead of a branch, a Helm chart repository, an OCI
source — is a :class:`~gitops_reloader.errors.ManifestNotFound` with the reason: a
commit elsewhere would not be deployed. Operator-owned workloads
(``ownerReferences`` to a custom resource) raise :class:`OperatorOwned`.

No search ever leaves the Application's or Kustomization's path: a kustomize base
shared by several overlays is not edited behind their back (use ``git-target`` on the
overlay's patch instead). Ambiguous matches are refused, naming the files.

Messages name objects, repositories and paths, never file contents.
"""

from __future__ import annotations

import enum
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gitops_reloader.errors import AnnotationError, KubeNotFound, ManifestNotFound, YamlEditError
from gitops_reloader.gitops.auth import display_url
from gitops_reloader.gitops.gitconfig import GitConfig, RepositoryConfig
from gitops_reloader.gitops.refresh import RefreshKind, RefreshTarget
from gitops_reloader.gitops.scanindex import Candidates, DocRef, api_group
from gitops_reloader.gitops.yamledit import find_document, parse_yaml_path
from gitops_reloader.kube.resources import APPLICATIONS, GITREPOSITORIES, KUSTOMIZATIONS, ResourceKind

__all__ = [
    "ARGOCD_INSTANCE_LABEL",
    "ARGOCD_TRACKING_ANNOTATION",
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
    """

    repo_name: str
    method: Method
    path: str | None = None
    yaml_path: tuple[str | int, ...] | None = None
    search_dirs: tuple[str, ...] = ("",)
    refresh: tuple[RefreshTarget, ...] = ()
    notes: tuple[str, ...] = ()
    hint: str = ""


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
    kind = record.ref.kind
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


def _dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _listed(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:_MAX_LISTED])
    return shown + (f" and {len(paths) - _MAX_LISTED} more" if len(paths) > _MAX_LISTED else "")


# --------------------------------------------------------------------------- locator


class Locator:
    """Resolves and locates manifests for the configured repositories. Thread-safe (no state).

    ``api`` may be ``None`` (no Argo CD / Flux lookups); ``argocd_namespace`` (default:
    the git config's ``argocdNamespace``) is where Applications live unless the tracking
    id names another namespace.
    """

    def __init__(self, git_config: GitConfig, api: ObjectReader | None, *,
                 argocd_namespace: str | None = None) -> None:
        self.git_config = git_config
        self.api = api
        self.argocd_namespace = argocd_namespace or git_config.argocd_namespace

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
            if target:
                file, yaml_path = parse_git_target(target)
                self._check_allowed(repo, file, identity)
                return Resolution(repo.name, Method.TARGET, path=file, yaml_path=yaml_path)
            if path:
                file = clean_repo_path(path, what=GIT_PATH_ANNOTATION)
                if not file:
                    raise AnnotationError(f"{GIT_PATH_ANNOTATION} names no file")
                self._check_allowed(repo, file, identity)
                return Resolution(repo.name, Method.ANNOTATION, path=file)
            return Resolution(repo.name, Method.SCAN, search_dirs=repo.paths or ("",))
        notes: list[str] = []
        found = self._from_argocd(record, identity, notes) or self._from_flux(record, identity, notes)
        if found is not None:
            return found
        if _strings(_metadata(record).get("labels")).get(FLUX_HELM_NAME_LABEL):
            notes.append("deployed by a Flux HelmRelease: point gitops-reloader.io/git-target at its "
                         "values (e.g. 'release.yaml#spec.values.podAnnotations')")
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
                raise AnnotationError(
                    f"{identity}: {GIT_REPO_ANNOTATION} names no repository of --git-config "
                    f"(known: {', '.join(r.name for r in self.git_config.repositories) or 'none'})")
            return repo
        default = self.git_config.default
        if default is None:
            raise AnnotationError(
                f"{identity}: set {GIT_REPO_ANNOTATION}: there is no defaultRepository in --git-config")
        return default

    @staticmethod
    def _check_allowed(repo: RepositoryConfig, path: str, identity: ObjectIdentity) -> None:
        if not repo.allows(path):
            raise ManifestNotFound(
                f"{identity}: {path} is outside the paths configured for repository {repo.name}")

    def _repo_for(self, url: str, revision: str, what: str) -> RepositoryConfig:
        rev = revision.strip().removeprefix("refs/heads/")
        candidates = self.git_config.by_url(url)
        if not candidates:
            raise ManifestNotFound(f"{what} deploys from {display_url(url)}, which is not in --git-config")
        if rev in ("", "HEAD"):
            return candidates[0]
        for repo in candidates:
            if repo.branch == rev:
                return repo
        branches = ", ".join(sorted({r.branch for r in candidates}))
        raise ManifestNotFound(
            f"{what} deploys revision {rev!r} of {display_url(url)}, but --git-config writes to "
            f"branch {branches}: a commit there would not be deployed")

    def _from_argocd(self, record: Any, identity: ObjectIdentity, notes: list[str]) -> Resolution | None:
        meta = _metadata(record)
        app: tuple[str | None, str] | None = None
        tracking = _strings(meta.get("annotations")).get(ARGOCD_TRACKING_ANNOTATION)
        if tracking:
            parsed = parse_tracking_id(tracking)
            if parsed is None:
                notes.append(f"{ARGOCD_TRACKING_ANNOTATION} is malformed")
            elif not parsed.describes(identity):
                notes.append(f"{ARGOCD_TRACKING_ANNOTATION} describes another object (copied); ignored")
            else:
                app = (parsed.app_namespace, parsed.app_name)
        if app is None:
            label = _strings(meta.get("labels")).get(ARGOCD_INSTANCE_LABEL, "").strip()
            if label:
                app = parse_app_instance(label)
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
        source = self._argocd_source(application)
        if source is None:
            raise ManifestNotFound(f"{identity}: {what} has no source with a repoURL")
        url = str(source.get("repoURL") or "")
        if source.get("chart"):
            raise ManifestNotFound(
                f"{identity}: {what} installs Helm chart {source.get('chart')!r} from a chart "
                f"repository; set {GIT_TARGET_ANNOTATION} to a values file in git")
        repo = self._repo_for(url, str(source.get("targetRevision") or ""), f"{identity}: {what}")
        directory = clean_repo_path(str(source.get("path") or ""), what=f"{what} spec.source.path")
        hint = ""
        if isinstance(source.get("helm"), Mapping):
            hint = (f"{what} renders a Helm chart: set {GIT_TARGET_ANNOTATION} to its values file, "
                    "e.g. 'values.yaml#podAnnotations'")
        return Resolution(
            repo.name, Method.ARGOCD, search_dirs=(directory,),
            refresh=(RefreshTarget(RefreshKind.ARGOCD_APPLICATION, namespace, name),),
            notes=tuple(notes), hint=hint)

    def _argocd_source(self, application: Mapping[str, Any]) -> Mapping[str, Any] | None:
        spec = _map(application.get("spec"))
        single = spec.get("source")
        if isinstance(single, Mapping) and single.get("repoURL"):
            return single
        sources = [s for s in spec.get("sources") or () if isinstance(s, Mapping) and s.get("repoURL")]
        # Prefer a source we can write to that carries manifests (not only a values "ref").
        for source in sources:
            if self.git_config.by_url(str(source["repoURL"])) and not source.get("chart") and (
                    source.get("path") is not None or not source.get("ref")):
                return source
        return sources[0] if sources else None

    def _from_flux(self, record: Any, identity: ObjectIdentity, notes: list[str]) -> Resolution | None:
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
        spec = _map(kustomization.get("spec"))
        source_ref = _map(spec.get("sourceRef"))
        source_kind = str(source_ref.get("kind") or "GitRepository")
        if source_kind != "GitRepository":
            raise ManifestNotFound(
                f"{identity}: {what} applies from a {source_kind}: there is no git repository to write to")
        src_namespace = str(source_ref.get("namespace") or ks_namespace)
        src_name = str(source_ref.get("name") or "")
        try:
            git_repository = self.api.get(GITREPOSITORIES, src_namespace, src_name)
        except KubeNotFound:
            raise ManifestNotFound(
                f"{identity}: {what} uses GitRepository {src_namespace}/{src_name}, which does not exist"
            ) from None
        url = str(_dig(git_repository, "spec", "url") or "")
        ref = _map(_dig(git_repository, "spec", "ref"))
        branch = str(ref.get("branch") or "")
        if not branch and str(ref.get("name") or "").startswith("refs/heads/"):
            branch = str(ref["name"])
        pinned = [k for k in ("tag", "semver", "commit", "name") if ref.get(k)]
        if not branch and pinned:
            raise ManifestNotFound(
                f"{identity}: GitRepository {src_namespace}/{src_name} follows a {pinned[0]}, not a branch: "
                "a commit would not be deployed")
        repo = self._repo_for(url, branch, f"{identity}: {what}")
        root = clean_repo_path(str(spec.get("path") or ""), what=f"{what} spec.path")
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
                          refresh=refresh, notes=tuple(notes))

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
        if resolution.path is not None:
            found = self._in_file(identity, resolution, files)
            if found is not None:
                return found
        if resolution.method in (Method.TARGET, Method.ANNOTATION):
            raise ManifestNotFound(f"{identity}: {repo.name}:{resolution.path} does not exist")
        return self._search(identity, resolution, files, repo, confirm=confirm)

    def _in_file(self, identity: ObjectIdentity, resolution: Resolution,
                 files: ManifestFiles) -> Location | None:
        path = resolution.path
        assert path is not None
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
        index = find_document(text, kind=identity.kind, name=identity.name, namespace=identity.namespace,
                              api_group=identity.group, path=path)
        if index is not None:
            return Location(resolution.repo_name, path, index, None, resolution.method, resolution.refresh)
        if resolution.method is Method.ANNOTATION:
            raise ManifestNotFound(f"{identity}: {resolution.repo_name}:{path} declares no such object")
        return None  # a stale Flux origin: search the Kustomization's path

    def _search(self, identity: ObjectIdentity, resolution: Resolution, files: ManifestFiles,
                repo: RepositoryConfig, *, confirm: bool) -> Location:
        dirs = resolution.search_dirs or ("",)
        candidates = files.lookup(group=identity.group, kind=identity.kind, namespace=identity.namespace,
                                  name=identity.name, under=dirs)
        for tier in (candidates.exact, candidates.loose):
            if len(tier) == 1 and not confirm:
                ref = tier[0]
                return Location(repo.name, ref.path, ref.doc_index, None, resolution.method,
                                resolution.refresh, confirmed=False)
            confirmed = [ref for ref in (self._confirm(files, ref, identity) for ref in tier)
                         if ref is not None]
            if len(confirmed) == 1:
                ref = confirmed[0]
                return Location(repo.name, ref.path, ref.doc_index, None, resolution.method,
                                resolution.refresh)
            if len(confirmed) > 1:
                raise ManifestNotFound(
                    f"{identity}: {len(confirmed)} documents in {repo.name} declare it "
                    f"({_listed([r.path for r in confirmed])}); set {GIT_PATH_ANNOTATION} to choose")
        where = ", ".join(f"{repo.name}:{d}/" if d else f"{repo.name}:/" for d in dirs)
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
    def _confirm(files: ManifestFiles, ref: DocRef, identity: ObjectIdentity) -> DocRef | None:
        text = _text(files, ref.path)
        if text is None:
            return None
        index = find_document(text, kind=identity.kind, name=identity.name, namespace=identity.namespace,
                              api_group=identity.group, path=ref.path)
        return None if index is None else DocRef(ref.path, index)


def _text(files: ManifestFiles, path: str) -> str | None:
    data = files.read(path)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise YamlEditError(f"{path}: not UTF-8 text") from None


def _notes(notes: Sequence[str]) -> str:
    return f" ({'; '.join(notes)})" if notes else ""
