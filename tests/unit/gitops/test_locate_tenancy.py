"""The locator applies the tenancy policy: repository, file, document identity, git-target."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from crd_objects import as_stored

from gitops_reloader.errors import AnnotationError, KubeNotFound, ManifestNotFound, PolicyDenied
from gitops_reloader.gitops.gitconfig import parse_git_config
from gitops_reloader.gitops.locate import (
    ARGOCD_TRACKING_ANNOTATION,
    GIT_PATH_ANNOTATION,
    GIT_REPO_ANNOTATION,
    GIT_TARGET_ANNOTATION,
    Locator,
    Method,
    Resolution,
)
from gitops_reloader.gitops.scanindex import ScanIndex
from gitops_reloader.kube.resources import ResourceKind
from gitops_reloader.kube.workloads import WorkloadAdapter

SHARED_URL = "https://git.example.com/platform/shared.git"
CONFIG = parse_git_config(f"""
defaultRepository: shared
repositories:
  - name: shared
    url: {SHARED_URL}
    tenants:
      - namespaces: [team-a]
        paths: ["apps/team-a/**", "charts/team-a/values.yaml"]
        documentNamespace: team-a
      - namespaces: [team-b]
        paths: ["apps/team-b/**", "charts/team-b/values.yaml"]
  - name: platform
    url: https://git.example.com/platform/platform.git
    tenants: [{{namespaces: [kube-system], paths: ["**"]}}]
  - name: open
    url: https://git.example.com/platform/open.git
""")


class Files:
    """An in-memory clone indexed by a real ScanIndex."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.files = {p: c.encode() for p, c in files.items()}
        self.index = ScanIndex(self)
        self.index.refresh("0" * 40)

    def list_files(self, suffixes: Sequence[str] = (".yaml", ".yml")) -> list[str]:
        return sorted(p for p in self.files if p.endswith(tuple(suffixes)))

    def read(self, path: str) -> bytes | None:
        return self.files.get(path)

    def changed_paths(self, old_sha: str, new_sha: str) -> tuple[list[str], list[str]]:
        return [], []


class FakeApi:
    """Argo CD Applications by (namespace, name); anything else is not found."""

    def __init__(self, objects: Mapping[tuple[str, str, str], dict[str, Any]] | None = None) -> None:
        self.objects = dict(objects or {})

    def get(self, kind: ResourceKind, namespace: str | None, name: str) -> dict[str, Any]:
        key = (kind.plural, namespace or "", name)
        if key not in self.objects:
            raise KubeNotFound(f"{key} not found", status=404)
        return self.objects[key]


def record(namespace: str = "team-a", name: str = "web", *, annotations: Mapping[str, str] | None = None,
           labels: Mapping[str, str] | None = None) -> Any:
    return WorkloadAdapter().record({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                     "resourceVersion": "1", "annotations": dict(annotations or {}),
                     "labels": dict(labels or {})},
        "spec": {"template": {"metadata": {}, "spec": {"containers": [{"name": "app", "image": "x"}]}}}})


def deploy(name: str = "web", namespace: str | None = None) -> str:
    ns = f"  namespace: {namespace}\n" if namespace else ""
    return (f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n{ns}"
            "spec:\n  template:\n    spec:\n      containers: []\n")


TREE = Files({
    "apps/team-a/web.yaml": deploy(),                         # namespace-less, team-a by documentNamespace
    "apps/team-a/api.yaml": deploy("api", "team-a"),
    "apps/team-b/web.yaml": deploy(namespace="team-b"),
    "apps/team-b/api.yaml": deploy("api"),                    # namespace-less, no documentNamespace
    "apps/team-b/worker.yaml": deploy("worker", "team-a"),    # names team-a, but in team-b's files
    "charts/team-a/values.yaml": "podAnnotations: {}\n",
    "charts/team-b/values.yaml": "podAnnotations: {}\n",
})


def locate(rec: Any, api: FakeApi | None = None, files: Files = TREE, *, confirm: bool = False) -> Any:
    locator = Locator(CONFIG, api)
    return locator.locate(rec, locator.resolve(rec), files.index, confirm=confirm)


@pytest.mark.parametrize("confirm", [False, True])
@pytest.mark.parametrize(("namespace", "name", "path"), [
    ("team-a", "web", "apps/team-a/web.yaml"),
    ("team-a", "api", "apps/team-a/api.yaml"),
    ("team-b", "web", "apps/team-b/web.yaml"),
])
def test_each_tenant_finds_its_own_document(namespace: str, name: str, path: str, confirm: bool) -> None:
    assert locate(record(namespace, name), confirm=confirm).path == path


@pytest.mark.parametrize(("namespace", "name", "annotations", "message"), [
    # a namespace no tenants entry names may not use the repository, by default or by git-repo
    ("team-c", "web", {}, "namespace team-c may not write to repository shared"),
    ("team-a", "web", {GIT_REPO_ANNOTATION: "platform"}, "may not write to repository platform"),
    ("team-a", "web", {GIT_REPO_ANNOTATION: "https://git.example.com/platform/platform"},
     "may not write to repository platform"),
    # git-path into the other tenant's files
    ("team-a", "web", {GIT_PATH_ANNOTATION: "apps/team-b/web.yaml"}, "may not write apps/team-b/web.yaml"),
    # git-target into the other tenant's values
    ("team-a", "web", {GIT_TARGET_ANNOTATION: "charts/team-b/values.yaml#podAnnotations"},
     "may not write charts/team-b/values.yaml"),
    # scan: the only document is namespace-less and nothing deploys it into team-b
    ("team-b", "api", {}, "does not let namespace team-b edit the 1 document"),
    # scan: a document naming team-a, but in a file team-a may not write
    ("team-a", "worker", {}, "does not let namespace team-a edit the 1 document"),
])
def test_cross_tenant_attempts_are_denied(namespace: str, name: str, annotations: dict[str, str],
                                          message: str) -> None:
    with pytest.raises(PolicyDenied, match=message) as caught:
        locate(record(namespace, name, annotations=annotations))
    assert caught.value.retryable is False
    assert isinstance(caught.value, ManifestNotFound)


def test_git_path_to_a_document_of_another_namespace_is_denied_without_its_content() -> None:
    files = Files({"apps/team-a/web.yaml": deploy(namespace="team-b")})
    with pytest.raises(PolicyDenied, match="declares another namespace than team-a") as caught:
        locate(record(annotations={GIT_PATH_ANNOTATION: "apps/team-a/web.yaml"}), files=files)
    assert "team-b" not in str(caught.value)


def test_git_path_to_a_namespace_less_document_needs_a_deploy_namespace() -> None:
    rec = record("team-b", "api", annotations={GIT_PATH_ANNOTATION: "apps/team-b/api.yaml"})
    with pytest.raises(PolicyDenied, match="has no namespace"):
        locate(rec)
    # The same document, when the Argo CD destination / Flux targetNamespace is team-b.
    resolution = Resolution("shared", Method.ANNOTATION, path="apps/team-b/api.yaml",
                            deploy_namespace="team-b")
    assert Locator(CONFIG, None).locate(rec, resolution, TREE.index).doc_index == 0


@pytest.mark.parametrize("confirm", [False, True])
def test_scan_takes_a_namespace_less_document_deployed_into_the_namespace(confirm: bool) -> None:
    rec = record("team-b", "api")
    resolution = Resolution("shared", Method.SCAN, search_dirs=("",), deploy_namespace="team-b")
    found = Locator(CONFIG, None).locate(rec, resolution, TREE.index, confirm=confirm)
    assert found.path == "apps/team-b/api.yaml"
    other = Resolution("shared", Method.SCAN, search_dirs=("",), deploy_namespace="team-a")
    with pytest.raises(PolicyDenied):
        Locator(CONFIG, None).locate(rec, other, TREE.index, confirm=confirm)


def test_the_own_namespace_wins_over_a_namespace_less_twin_in_the_same_file() -> None:
    files = Files({"apps/team-a/both.yaml": deploy() + "---\n" + deploy(namespace="team-a")})
    rec = record(annotations={GIT_PATH_ANNOTATION: "apps/team-a/both.yaml"})
    assert locate(rec, files=files).doc_index == 1


def test_own_git_target_is_allowed() -> None:
    found = locate(record(annotations={GIT_TARGET_ANNOTATION: "charts/team-a/values.yaml#podAnnotations"}))
    assert (found.path, found.yaml_path, found.method) == ("charts/team-a/values.yaml", ("podAnnotations",),
                                                            Method.TARGET)


def argo_app(path: str, url: str = "https://git.example.com/platform/open.git", *,
             listed: str = "") -> FakeApi:
    """Application ``web`` deploying ``path`` of ``url`` into team-a (``listed``: the namespace of
    the Deployment ``web`` its ``status.resources`` lists, none when empty)."""
    application: dict[str, Any] = {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "web", "namespace": "argocd"},
        "spec": {"project": "default", "source": {"repoURL": url, "path": path, "targetRevision": "main"},
                 "destination": {"namespace": "team-a"}}}
    if listed:
        application["status"] = {"resources": [{"group": "apps", "version": "v1", "kind": "Deployment",
                                                "namespace": listed, "name": "web"}]}
    return FakeApi({("applications", "argocd", "web"): as_stored(application)})


OPEN_URL = "https://git.example.com/platform/open.git"


def flux_objects(url: str = SHARED_URL, *, target_namespace: str = "",
                 inventory: Sequence[str] | None = None) -> dict[tuple[str, str, str], Any]:
    """A Kustomization ``apps`` (path ``charts``) from GitRepository ``fleet`` at ``url``, branch main.

    ``inventory``: the ids kustomize-controller lists in ``status.inventory`` (``None``: no status).
    """
    spec: dict[str, Any] = {"interval": "10m", "prune": True, "force": False, "path": "./charts",
                            "sourceRef": {"kind": "GitRepository", "name": "fleet"}}
    if target_namespace:
        spec["targetNamespace"] = target_namespace
    kustomization: dict[str, Any] = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "flux-system"}, "spec": spec}
    if inventory is not None:
        kustomization["status"] = {"inventory": {"entries": [{"id": i, "v": "v1"} for i in inventory]}}
    return {("kustomizations", "flux-system", "apps"): as_stored(kustomization),
            ("gitrepositories", "flux-system", "fleet"): as_stored({
                "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
                "metadata": {"name": "fleet", "namespace": "flux-system"},
                "spec": {"interval": "1m", "timeout": "60s", "url": url, "ref": {"branch": "main"}}})}


def helm_objects(*, values_files: Sequence[str] = ()) -> dict[tuple[str, str, str], Any]:
    """HelmRelease ``web`` in team-a: chart ``charts/web`` of GitRepository ``fleet`` (repository open)."""
    source = {"kind": "GitRepository", "name": "fleet", "namespace": "flux-system"}
    chart: dict[str, Any] = {"chart": "./charts/web", "reconcileStrategy": "Revision", "version": "*",
                             "sourceRef": source}
    if values_files:
        chart["valuesFiles"] = list(values_files)
    objects = flux_objects(OPEN_URL)
    objects[("helmreleases", "team-a", "web")] = as_stored({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "web", "namespace": "team-a"},
        "spec": {"interval": "10m", "chart": {"spec": chart}}})
    return objects


FLUX_LABELS = {"kustomize.toolkit.fluxcd.io/name": "apps",
               "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}
HELM_LABELS = {"helm.toolkit.fluxcd.io/name": "web", "helm.toolkit.fluxcd.io/namespace": "team-a"}
TRACKED = {ARGOCD_TRACKING_ANNOTATION: "web:apps/Deployment:team-a/web"}
COPIED = {ARGOCD_TRACKING_ANNOTATION: "web:apps/Deployment:team-b/web"}  # describes another object
GIT_REPO = "flux-system/GitRepository/fleet"
LISTED, ELSEWHERE = "team-a_web_apps_Deployment", "team-b_web_apps_Deployment"  # Flux inventory ids


def argo_chart_with_git_values() -> FakeApi:
    """Application ``web``: a chart from a chart repository, its values in the open repository."""
    return FakeApi({("applications", "argocd", "web"): as_stored({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "web", "namespace": "argocd"},
        "spec": {"project": "default", "destination": {"namespace": "team-a"}, "sources": [
            {"repoURL": "https://charts.example.com", "chart": "web", "targetRevision": "1.2.0",
             "helm": {"valueFiles": ["$values/envs/prod/web.yaml"]}},
            {"repoURL": OPEN_URL, "targetRevision": "main", "ref": "values"}]}})})


HELM_RELEASE = FakeApi(helm_objects(values_files=["envs/prod/web.yaml"]))


@pytest.mark.parametrize(("target", "api", "allowed"), [
    # without tenants, a git-target must lie inside the Argo CD Application's path
    ("charts/web/values.yaml", argo_app("charts/web"), True),
    ("charts/other/values.yaml", argo_app("charts/web"), False),
    ("charts/web/values.yaml", None, False),
    ("charts/web/values.yaml", FakeApi(), False),
    # ... of this repository
    ("charts/web/values.yaml", argo_app("charts/web", SHARED_URL), False),
    ("charts/web/values.yaml", argo_app("charts/web", listed="team-a"), True),
    ("charts/web/values.yaml", argo_app("charts/web", listed="team-b"), False),  # not its deployer
    # ... or a HelmRelease's chart directory and valuesFiles
    ("charts/web/values.yaml", HELM_RELEASE, True),
    ("charts/web/templates/deploy.yaml", HELM_RELEASE, True),
    ("envs/prod/web.yaml", HELM_RELEASE, True),
    ("envs/prod/api.yaml", HELM_RELEASE, False),
    ("charts/webx/values.yaml", HELM_RELEASE, False),
    # ... or an Application's $ref value files
    ("envs/prod/web.yaml", argo_chart_with_git_values(), True),
    ("envs/prod/api.yaml", argo_chart_with_git_values(), False),
])
def test_git_target_without_tenants_stays_in_the_deploying_path(target: str, api: FakeApi | None,
                                                               allowed: bool) -> None:
    rec = record(labels=HELM_LABELS, annotations={
        GIT_REPO_ANNOTATION: "open", GIT_TARGET_ANNOTATION: f"{target}#podAnnotations", **TRACKED})
    files = Files({target: "podAnnotations: {}\n"})
    if allowed:
        assert locate(rec, api, files).path == target
    else:
        with pytest.raises(PolicyDenied, match="no tenants policy"):
            locate(rec, api, files)


@pytest.mark.parametrize(("repo", "target", "labels", "annotations", "objects", "refresh"), [
    # the Kustomization / Application deploying the workload from this repository is refreshed
    ("shared", "charts/team-a/values.yaml", FLUX_LABELS, {}, flux_objects(),
     [GIT_REPO, "flux-system/Kustomization/apps"]),
    ("open", "charts/web/values.yaml", {}, TRACKED, argo_app("charts/web").objects,
     ["argocd/Application/web"]),
    ("shared", "charts/team-a/values.yaml", {}, TRACKED, argo_app("charts", SHARED_URL).objects,
     ["argocd/Application/web"]),
    # a HelmRelease whose chart is in the repository: its GitRepository and the release
    ("open", "charts/web/values.yaml", HELM_LABELS, {}, helm_objects(),
     [GIT_REPO, "team-a/HelmRelease/web"]),
    ("open", "envs/prod/web.yaml", HELM_LABELS, {}, helm_objects(values_files=["envs/prod/web.yaml"]),
     [GIT_REPO, "team-a/HelmRelease/web"]),
    # an Application installing a chart from a chart repository with its values in git
    ("open", "envs/prod/web.yaml", {}, TRACKED, argo_chart_with_git_values().objects,
     ["argocd/Application/web"]),
    # not this repository's deployer, not this workload's, or none: nothing to refresh
    ("shared", "charts/team-a/values.yaml", FLUX_LABELS, {}, flux_objects(inventory=[LISTED]),
     [GIT_REPO, "flux-system/Kustomization/apps"]),
    # labels on the workload name a Kustomization / Application whose own list does not hold it
    ("shared", "charts/team-a/values.yaml", FLUX_LABELS, {}, flux_objects(inventory=[ELSEWHERE]), []),
    ("shared", "charts/team-a/values.yaml", {}, TRACKED,
     argo_app("charts", SHARED_URL, listed="team-b").objects, []),
    ("shared", "charts/team-a/values.yaml", FLUX_LABELS, {}, flux_objects(OPEN_URL), []),
    ("shared", "charts/team-a/values.yaml", FLUX_LABELS, {}, flux_objects(target_namespace="team-b"), []),
    ("shared", "charts/team-a/values.yaml", {}, COPIED, argo_app("charts", SHARED_URL).objects, []),
    ("shared", "charts/team-a/values.yaml", {}, TRACKED, {}, []),
])
def test_a_git_target_refreshes_what_deploys_the_workload_from_that_repository(
        repo: str, target: str, labels: dict[str, str], annotations: dict[str, str],
        objects: dict[tuple[str, str, str], Any], refresh: list[str]) -> None:
    files = Files({target: "podAnnotations: {}\n"})
    own = {GIT_REPO_ANNOTATION: repo, GIT_TARGET_ANNOTATION: f"{target}#podAnnotations"}
    rec = record(labels=labels, annotations={**own, **annotations})
    found = locate(rec, FakeApi(objects), files)
    assert (found.path, found.method) == (target, Method.TARGET)
    assert [str(t) for t in found.refresh] == refresh


def test_a_destination_elsewhere_gives_an_application_no_refresh_even_when_its_name_is_typed() -> None:
    # team-b's Application deploys from the shared repository into team-b: a team-a workload
    # naming it in a tracking id (its own object) gets its commit, but never that refresh.
    api = argo_app("charts", SHARED_URL)
    api.objects[("applications", "argocd", "web")]["spec"]["destination"]["namespace"] = "team-b"
    rec = record(annotations={GIT_TARGET_ANNOTATION: "charts/team-a/values.yaml#podAnnotations", **TRACKED})
    found = locate(rec, api)
    assert found.path == "charts/team-a/values.yaml" and found.refresh == ()


def test_an_unknown_git_repo_lists_only_the_repositories_the_namespace_may_use() -> None:
    with pytest.raises(AnnotationError) as caught:
        locate(record(annotations={GIT_REPO_ANNOTATION: "nope"}))
    assert "known: shared, open" in str(caught.value) and "platform" not in str(caught.value)
