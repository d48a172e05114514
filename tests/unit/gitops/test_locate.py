"""Finding a workload's manifest: annotations, Argo CD tracking, Flux, scan (no network)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from crd_objects import as_stored

from gitops_reloader.errors import AnnotationError, KubeError, KubeNotFound, ManifestNotFound, YamlEditError
from gitops_reloader.gitops.gitconfig import GitConfig, parse_git_config
from gitops_reloader.gitops.locate import (
    ARGOCD_INSTANCE_LABEL,
    ARGOCD_TRACKING_ANNOTATION,
    FLUX_HELM_NAME_LABEL,
    FLUX_NAME_LABEL,
    FLUX_NAMESPACE_LABEL,
    FLUX_ORIGIN_ANNOTATION,
    GIT_PATH_ANNOTATION,
    GIT_REPO_ANNOTATION,
    GIT_TARGET_ANNOTATION,
    MAX_ORIGIN_CHARS,
    Location,
    Locator,
    Method,
    ObjectIdentity,
    OperatorOwned,
    TrackingId,
    clean_repo_path,
    parse_app_instance,
    parse_git_target,
    parse_origin_path,
    parse_tracking_id,
    workload_identity,
)
from gitops_reloader.gitops.refresh import RefreshKind, RefreshTarget
from gitops_reloader.gitops.remotehead import DefaultBranches
from gitops_reloader.gitops.repourl import normalize_git_url
from gitops_reloader.gitops.scanindex import ScanIndex
from gitops_reloader.kube.resources import ResourceKind
from gitops_reloader.kube.workloads import CronJobAdapter, RolloutAdapter, WorkloadAdapter

FLEET = "https://git.example.com/platform/fleet.git"
CONFIG = parse_git_config(f"""
defaultRepository: fleet
repositories:
  - name: fleet
    url: {FLEET}
  - name: fleet-staging
    url: https://git.example.com/platform/fleet
    branch: staging
  - name: apps
    url: git@git.example.com:team/apps.git
    sshKeyFile: /k
    knownHostsFile: /h
""")
# Trusts every namespace with every file, and deploys namespace-less documents into "ns"
# (tenancy itself is tested in test_tenancy.py and test_locate_tenancy.py).
TRUSTING = parse_git_config(f"""
defaultRepository: fleet
repositories:
  - name: fleet
    url: {FLEET}
    tenants: [{{namespaces: ["*"], paths: ["**"], documentNamespace: ns}}]
""")


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(("value", "expected"), [
    ("my-app:apps/Deployment:default/web",
     TrackingId("my-app", None, "apps", "Deployment", "default", "web")),
    ("my-app:/Service:default/svc", TrackingId("my-app", None, "", "Service", "default", "svc")),
    ("team-a_web:apps/Deployment:prod/web",
     TrackingId("web", "team-a", "apps", "Deployment", "prod", "web")),
    ("app:argoproj.io/Rollout:ns/r.v2", TrackingId("app", None, "argoproj.io", "Rollout", "ns", "r.v2")),
    ("app:rbac.authorization.k8s.io/ClusterRole:/reader",
     TrackingId("app", None, "rbac.authorization.k8s.io", "ClusterRole", "", "reader")),
])
def test_tracking_ids_are_parsed(value: str, expected: TrackingId) -> None:
    assert parse_tracking_id(value) == expected


@pytest.mark.parametrize("value", [
    "", "my-app", "my-app:apps/Deployment", "my-app:Deployment:ns/web", "my-app:apps/Deployment:web",
    ":apps/Deployment:ns/web", "a:apps/x/Deployment:ns/web", "a:apps/Deployment:ns/web/extra",
    "a:apps/:ns/web", "a:apps/Deployment:ns/",
])
def test_malformed_tracking_ids_are_rejected(value: str) -> None:
    assert parse_tracking_id(value) is None


def test_a_copied_tracking_id_does_not_describe_the_object() -> None:
    tid = parse_tracking_id("app:apps/Deployment:ns/web")
    assert tid is not None
    assert tid.describes(ObjectIdentity("apps", "Deployment", "ns", "web"))
    assert not tid.describes(ObjectIdentity("apps", "Deployment", "ns", "web-copy"))
    assert not tid.describes(ObjectIdentity("apps", "Deployment", "other", "web"))
    assert not tid.describes(ObjectIdentity("apps", "StatefulSet", "ns", "web"))
    assert not tid.describes(ObjectIdentity("argoproj.io", "Deployment", "ns", "web"))


def test_app_instance_values() -> None:
    assert parse_app_instance("web") == (None, "web")
    assert parse_app_instance("team-a_web") == ("team-a", "web")
    assert parse_app_instance("_web") == (None, "_web")


@pytest.mark.parametrize(("value", "expected"), [
    ("path: apps/web/deployment.yaml\n", "apps/web/deployment.yaml"),
    ("configuredIn: kustomization.yaml\nconfiguredBy:\n  kind: x\npath: base/web.yaml\n", "base/web.yaml"),
    ("path: 'quoted/web.yaml'", "quoted/web.yaml"),
    ("path: ../base/web.yaml\nref: main\n", "../base/web.yaml"),
    ("path: web.yaml\nrepo: https://github.com/org/remote-base\nref: v1\n", None),
    ("configuredIn: kustomization.yaml\n", None),
    ("path:\n", None),
    ("path:\t web.yaml \t\r\nref: main", "web.yaml"),
    ("  path: nested.yaml\n", None),  # only a top-level key counts
    ("path: first.yaml\npath: second.yaml\n", "first.yaml"),
    ('path: "a b.yaml"', "a b.yaml"),
    ("path: ''", None),
    ("ref: main\n  repo: indented\npath: web.yaml", "web.yaml"),
    ("path: web.yaml" + " " * (MAX_ORIGIN_CHARS - 14), "web.yaml"),
    ("path: web.yaml" + " " * (MAX_ORIGIN_CHARS - 13), None),  # over the cap: absent
], ids=lambda v: v if isinstance(v, str) and len(v) < 80 else None)
def test_origin_annotation_path(value: str, expected: str | None) -> None:
    assert parse_origin_path(value) == expected


@pytest.mark.parametrize("value", [
    "path:a" + " " * 32000 + "b",  # took Python's re ~7 s (lazy group, then trailing blanks)
    "path:" + " \t" * 16000 + "b",
    "path:\n" * 16000,
    "repo" * 16000,
], ids=["blank-run", "blank-tab-run", "many-lines", "no-newline"])
def test_origin_parsing_is_bounded_on_hostile_values(value: str) -> None:
    start = time.perf_counter()
    parse_origin_path(value)
    parse_origin_path(value[:MAX_ORIGIN_CHARS])
    assert time.perf_counter() - start < 0.1


@pytest.mark.parametrize(("path", "expected"), [
    ("./apps/web.yaml", "apps/web.yaml"), ("apps//web.yaml", "apps/web.yaml"), ("", ""), (".", ""),
    ("./", ""), ("a/b/../c.yaml", "a/c.yaml"),
])
def test_repository_paths_are_cleaned(path: str, expected: str) -> None:
    assert clean_repo_path(path) == expected


@pytest.mark.parametrize("path", ["/etc/passwd", "../x.yaml", "a/../../x.yaml", "a\\b.yaml"])
def test_paths_leaving_the_repository_are_refused(path: str) -> None:
    with pytest.raises(AnnotationError):
        clean_repo_path(path)


def test_git_target_is_file_and_yaml_path() -> None:
    assert parse_git_target("charts/web/values.yaml#podAnnotations") == (
        "charts/web/values.yaml", ("podAnnotations",))
    assert parse_git_target("./patch.yaml#spec.template.metadata.annotations") == (
        "patch.yaml", ("spec", "template", "metadata", "annotations"))
    assert parse_git_target("values.yaml#web.pods[0].annotations") == (
        "values.yaml", ("web", "pods", 0, "annotations"))
    for bad in ("values.yaml", "#podAnnotations", "values.yaml#a..b", "../v.yaml#a"):
        with pytest.raises(AnnotationError):
            parse_git_target(bad)


# --------------------------------------------------------------------------- fakes


class FakeApi:
    """Objects (or the error reading one raises) by (plural, namespace, name); counts reads."""

    def __init__(self, objects: Mapping[tuple[str, str, str], dict[str, Any] | KubeError] | None = None,
                 error: KubeError | None = None) -> None:
        self.objects = dict(objects or {})
        self.error = error
        self.reads: list[tuple[str, str, str]] = []

    def get(self, kind: ResourceKind, namespace: str | None, name: str) -> dict[str, Any]:
        key = (kind.plural, namespace or "", name)
        self.reads.append(key)
        if self.error is not None:
            raise self.error
        if key not in self.objects:
            raise KubeNotFound(f"{key} not found", status=404)
        found = self.objects[key]
        if isinstance(found, KubeError):
            raise found
        return found


class Files:
    """An in-memory clone, indexed by a real ScanIndex."""

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


def record(name: str = "web", *, namespace: str = "ns", kind: str = "Deployment",
           annotations: Mapping[str, str] | None = None, labels: Mapping[str, str] | None = None,
           template_annotations: Mapping[str, str] | None = None,
           owners: Sequence[Mapping[str, Any]] = (), api_version: str | None = "apps/v1") -> Any:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                                "resourceVersion": "7", "annotations": dict(annotations or {}),
                                "labels": dict(labels or {})}
    if owners:
        metadata["ownerReferences"] = list(owners)
    template = {"metadata": {"annotations": dict(template_annotations or {})},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]}}
    raw: dict[str, Any] = {"kind": kind, "metadata": metadata}
    if api_version:
        raw["apiVersion"] = api_version
    if kind == "CronJob":
        raw["spec"] = {"jobTemplate": {"spec": {"template": template}}}
        return CronJobAdapter().record(raw)
    raw["spec"] = {"template": template}
    adapter = RolloutAdapter() if kind == "Rollout" else WorkloadAdapter()
    return adapter.record(raw)


def deploy(name: str, namespace: str | None = "ns", kind: str = "Deployment") -> str:
    ns = f"  namespace: {namespace}\n" if namespace else ""
    return (f"apiVersion: apps/v1\nkind: {kind}\nmetadata:\n  name: {name}\n{ns}"
            "spec:\n  template:\n    spec:\n      containers: []\n")


def application(source: Mapping[str, Any] | None = None, *,
                sources: Sequence[Mapping[str, Any]] = (), destination: str = "ns",
                hydrator: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An Application valid against the CRD schema (project, destination, a source)."""
    spec: dict[str, Any] = {"project": "default",
                            "destination": {"server": "https://kubernetes.default.svc"}}
    if destination:
        spec["destination"]["namespace"] = destination
    if source is not None:
        spec["source"] = dict(source)
    if sources:
        spec["sources"] = [dict(s) for s in sources]
    if hydrator is not None:
        spec["sourceHydrator"] = dict(hydrator)
    return as_stored({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
                      "metadata": {"name": "app", "namespace": "argocd"}, "spec": spec})


def argocd_cm(**data: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The ``argocd-cm`` ConfigMap in the ``argocd`` namespace."""
    return {("configmaps", "argocd", "argocd-cm"): {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "argocd-cm", "namespace": "argocd"},
        "data": dict(data)}}


LABEL_TRACKING = argocd_cm(**{"application.resourceTrackingMethod": "label"})
REMOTE_HEADS = {"https://git.example.com/platform/fleet": "main", "git@git.example.com/team/apps": "main"}


def remote_heads(repo: Any) -> str | None:
    """The remotes' default branches, as ls-remote --symref would report them."""
    return REMOTE_HEADS.get(normalize_git_url(repo.url))


def locator(api: FakeApi | None = None, config: GitConfig = CONFIG) -> Locator:
    return Locator(config, api, default_branches=DefaultBranches(lookup=remote_heads))


# --------------------------------------------------------------------------- identity and owners


def test_identity_uses_the_api_version_or_the_kind_table() -> None:
    assert workload_identity(record()) == ObjectIdentity("apps", "Deployment", "ns", "web")
    assert workload_identity(record(kind="Rollout", api_version=None)).group == "argoproj.io"
    assert workload_identity(record(kind="CronJob", api_version=None)).group == "batch"


def test_operator_owned_workloads_are_refused() -> None:
    owned = record(owners=[{"apiVersion": "postgres-operator.crunchydata.com/v1beta1",
                            "kind": "PostgresCluster", "name": "db", "controller": True}])
    with pytest.raises(OperatorOwned, match="PostgresCluster db"):
        locator().resolve(owned)
    # Built-in owners (a Job of a CronJob, a ReplicaSet of a Deployment) are not operators.
    job_owned = record(owners=[{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly"}])
    assert locator().resolve(job_owned).method is Method.SCAN


# --------------------------------------------------------------------------- annotations


def test_git_path_with_default_repository() -> None:
    res = locator().resolve(record(annotations={GIT_PATH_ANNOTATION: "./apps/web.yaml"}))
    assert (res.repo_name, res.method, res.path) == ("fleet", Method.ANNOTATION, "apps/web.yaml")


@pytest.mark.parametrize("reference", [
    "apps", "ssh://git@git.example.com/team/apps", "git@git.example.com:team/apps"])
def test_git_repo_by_name_or_url(reference: str) -> None:
    rec = record(annotations={GIT_REPO_ANNOTATION: reference, GIT_PATH_ANNOTATION: "w.yaml"})
    res = locator().resolve(rec)
    assert res.repo_name == "apps"


def test_git_repo_alone_scans_that_repository() -> None:
    res = locator().resolve(record(annotations={GIT_REPO_ANNOTATION: "apps"}))
    assert (res.repo_name, res.method, res.path) == ("apps", Method.SCAN, None)


def test_unknown_repository_is_a_clear_annotation_error() -> None:
    with pytest.raises(AnnotationError, match="known: fleet, fleet-staging, apps"):
        locator().resolve(record(annotations={GIT_REPO_ANNOTATION: "nope", GIT_PATH_ANNOTATION: "w.yaml"}))


def test_git_target_wins_and_carries_the_yaml_path() -> None:
    res = locator(config=TRUSTING).resolve(record(annotations={
        GIT_TARGET_ANNOTATION: "charts/web/values.yaml#podAnnotations", GIT_PATH_ANNOTATION: "ignored.yaml"}))
    assert (res.method, res.path, res.yaml_path) == (
        Method.TARGET, "charts/web/values.yaml", ("podAnnotations",))


def test_annotations_are_read_from_the_pod_template_as_a_fallback() -> None:
    res = locator().resolve(record(template_annotations={GIT_PATH_ANNOTATION: "apps/web.yaml"}))
    assert res.path == "apps/web.yaml"


def test_annotations_beat_argocd_metadata() -> None:
    # Argo CD metadata is still read, only to find the Application to refresh (none here).
    tracked = {GIT_PATH_ANNOTATION: "web.yaml", ARGOCD_TRACKING_ANNOTATION: "a:apps/Deployment:ns/web"}
    res = locator(FakeApi()).resolve(record(annotations=tracked))
    assert (res.method, res.path, res.refresh) == (Method.ANNOTATION, "web.yaml", ())


def test_paths_outside_the_configured_paths_are_refused() -> None:
    config = parse_git_config("repositories:\n  - {name: r, url: 'https://h/r', paths: [apps]}\n")
    with pytest.raises(ManifestNotFound, match="outside the paths"):
        locator(config=config).resolve(record(annotations={GIT_PATH_ANNOTATION: "infra/web.yaml"}))


# --------------------------------------------------------------------------- Argo CD


def test_tracking_id_reads_the_application_in_the_argocd_namespace() -> None:
    api = FakeApi({("applications", "argocd", "web-app"): application(
        {"repoURL": "https://git.example.com/platform/fleet", "path": "./apps/web",
         "targetRevision": "HEAD"})})
    rec = record(annotations={ARGOCD_TRACKING_ANNOTATION: "web-app:apps/Deployment:ns/web"})
    res = locator(api).resolve(rec)
    assert (res.repo_name, res.method, res.search_dirs) == ("fleet", Method.ARGOCD, ("apps/web",))
    assert res.refresh == (RefreshTarget(RefreshKind.ARGOCD_APPLICATION, "argocd", "web-app"),)


def test_tracking_id_with_app_namespace_and_revision_picks_the_branch() -> None:
    api = FakeApi({("applications", "team-a", "web"): application(
        {"repoURL": FLEET, "path": "apps", "targetRevision": "staging"})})
    rec = record(annotations={ARGOCD_TRACKING_ANNOTATION: "team-a_web:apps/Deployment:ns/web"})
    res = locator(api).resolve(rec)
    assert res.repo_name == "fleet-staging"
    assert res.refresh[0].namespace == "team-a"


def test_argocd_namespace_comes_from_the_git_config() -> None:
    config = parse_git_config(
        f"argocdNamespace: gitops\nrepositories:\n  - {{name: fleet, url: '{FLEET}'}}\n")
    api = FakeApi({("applications", "gitops", "web-app"): application({"repoURL": FLEET, "path": "a"})})
    rec = record(annotations={ARGOCD_TRACKING_ANNOTATION: "web-app:apps/Deployment:ns/web"})
    res = Locator(config, api, default_branches=DefaultBranches(lookup=remote_heads)).resolve(rec)
    assert res.method is Method.ARGOCD
    assert ("configmaps", "gitops", "argocd-cm") in api.reads


def test_with_label_tracking_the_label_is_used_and_the_annotation_is_not() -> None:
    # resource_tracking.go GetAppName: the label method reads only the instance label.
    api = FakeApi({("applications", "argocd", "real-app"): application({"repoURL": FLEET, "path": "real"}),
                   **LABEL_TRACKING})
    rec = record(annotations={ARGOCD_TRACKING_ANNOTATION: "other-app:apps/Deployment:ns/web"},
                 labels={ARGOCD_INSTANCE_LABEL: "real-app"})
    res = locator(api).resolve(rec)
    assert res.search_dirs == ("real",)
    assert ("applications", "argocd", "other-app") not in api.reads


def test_with_annotation_tracking_a_generic_instance_label_is_ignored() -> None:
    # Helm sets app.kubernetes.io/instance on everything: by default (annotation) it means nothing.
    api = FakeApi({("applications", "argocd", "web"): application({"repoURL": FLEET, "path": "x"})})
    res = locator(api).resolve(record(labels={ARGOCD_INSTANCE_LABEL: "web"}))
    assert res.method is Method.SCAN
    assert ("applications", "argocd", "web") not in api.reads
    assert any("tracks by annotation" in note for note in res.notes)


def test_a_copied_tracking_id_falls_back_to_the_scan() -> None:
    api = FakeApi()
    rec = record(annotations={ARGOCD_TRACKING_ANNOTATION: "app:apps/Deployment:ns/copy"})
    res = locator(api).resolve(rec)
    assert res.method is Method.SCAN
    assert [r for r in api.reads if r[0] == "applications"] == []
    assert any("copied" in note for note in res.notes)


def test_missing_application_falls_through_to_the_scan() -> None:
    rec = record(annotations={ARGOCD_TRACKING_ANNOTATION: "gone:apps/Deployment:ns/web"})
    res = locator(FakeApi()).resolve(rec)
    assert res.method is Method.SCAN
    assert res.notes == ("Argo CD Application argocd/gone not found",)


def test_api_errors_other_than_not_found_propagate() -> None:
    with pytest.raises(KubeError):
        locator(FakeApi(error=KubeError("boom", status=500))).resolve(
            record(annotations={ARGOCD_TRACKING_ANNOTATION: "web:apps/Deployment:ns/web"}))


@pytest.mark.parametrize(("source", "match"), [
    ({"repoURL": "https://elsewhere.example.com/x.git", "path": "a"}, "not in --git-config"),
    ({"repoURL": FLEET, "path": "a", "targetRevision": "v1.2.3"}, "revision 'v1.2.3'"),
    ({"repoURL": "https://charts.example.com", "chart": "web", "targetRevision": "1.0.0"},
     "Helm chart 'web'"),
])
def test_applications_we_cannot_write_for_are_refused(source: dict[str, Any], match: str) -> None:
    api = FakeApi({("applications", "argocd", "web"): application(source)})
    with pytest.raises(ManifestNotFound, match=match):
        locator(api).resolve(record(annotations={ARGOCD_TRACKING_ANNOTATION: "web:apps/Deployment:ns/web"}))


def test_multi_source_application_uses_the_configured_git_source() -> None:
    api = FakeApi({("applications", "argocd", "web"): application(sources=[
        {"repoURL": "https://charts.example.com", "chart": "web", "targetRevision": "1.0.0"},
        {"repoURL": FLEET, "ref": "values"},
        {"repoURL": "git@git.example.com:team/apps.git", "path": "web/overlays/prod"},
    ])})
    res = locator(api).resolve(record(annotations={ARGOCD_TRACKING_ANNOTATION: "web:apps/Deployment:ns/web"}))
    assert (res.repo_name, res.search_dirs) == ("apps", ("web/overlays/prod",))


# --------------------------------------------------------------------------- Flux


def flux_objects(*, path: str = "./clusters/prod", ref: Mapping[str, str] | None = None,
                 source_kind: str = "GitRepository") -> dict[tuple[str, str, str], dict[str, Any]]:
    return {
        ("kustomizations", "flux-system", "apps"): {"spec": {
            "interval": "10m", "prune": True, "path": path,
            "sourceRef": {"kind": source_kind, "name": "fleet"}}},
        ("gitrepositories", "flux-system", "fleet"): {"spec": {
            "interval": "1m", "url": FLEET,
            "ref": dict(ref if ref is not None else {"branch": "main"})}},
    }


FLUX_LABELS = {FLUX_NAME_LABEL: "apps", FLUX_NAMESPACE_LABEL: "flux-system"}


def test_flux_labels_lead_to_kustomization_path_and_git_repository() -> None:
    res = locator(FakeApi(flux_objects())).resolve(record(labels=FLUX_LABELS))
    assert (res.repo_name, res.method, res.path, res.search_dirs) == (
        "fleet", Method.FLUX, None, ("clusters/prod",))
    assert res.refresh == (RefreshTarget(RefreshKind.FLUX_GITREPOSITORY, "flux-system", "fleet"),
                           RefreshTarget(RefreshKind.FLUX_KUSTOMIZATION, "flux-system", "apps"))


def test_flux_origin_annotation_names_the_file() -> None:
    rec = record(labels=FLUX_LABELS, annotations={FLUX_ORIGIN_ANNOTATION: "path: apps/web/deploy.yaml\n"})
    res = locator(FakeApi(flux_objects())).resolve(rec)
    assert res.path == "clusters/prod/apps/web/deploy.yaml"
    base = record(labels=FLUX_LABELS, annotations={FLUX_ORIGIN_ANNOTATION: "path: ../base/web.yaml\n"})
    assert locator(FakeApi(flux_objects())).resolve(base).path == "clusters/base/web.yaml"


def test_flux_branch_selects_the_repository_entry() -> None:
    res = locator(FakeApi(flux_objects(ref={"branch": "staging"}))).resolve(record(labels=FLUX_LABELS))
    assert res.repo_name == "fleet-staging"


@pytest.mark.parametrize(("objects", "match"), [
    (flux_objects(ref={"tag": "v1.0.0"}), r"checks out tag 'v1\.0\.0' \(spec\.ref\.tag\), not a branch"),
    (flux_objects(source_kind="OCIRepository"), "applies from a OCIRepository"),
    ({("kustomizations", "flux-system", "apps"): {"spec": {
        "interval": "1m", "prune": True, "sourceRef": {"kind": "GitRepository", "name": "gone"}}}},
     "does not exist"),
])
def test_flux_sources_we_cannot_write_to_are_refused(objects: dict[tuple[str, str, str], dict[str, Any]],
                                                     match: str) -> None:
    with pytest.raises(ManifestNotFound, match=match):
        locator(FakeApi(objects)).resolve(record(labels=FLUX_LABELS))


def test_missing_kustomization_falls_through_and_helm_release_gets_a_hint() -> None:
    res = locator(FakeApi()).resolve(record(labels={**FLUX_LABELS, FLUX_HELM_NAME_LABEL: "web"}))
    assert res.method is Method.SCAN
    assert any("HelmRelease" in n for n in res.notes)


def test_nothing_to_go_on_without_a_default_repository() -> None:
    config = parse_git_config("repositories:\n  - {name: a, url: 'https://h/a'}\n  - {name: b, url: 'https://h/b'}\n")
    with pytest.raises(ManifestNotFound, match="no defaultRepository"):
        Locator(config, FakeApi()).resolve(record())


# --------------------------------------------------------------------------- locate in the clone


def test_scan_prefers_the_document_naming_the_namespace() -> None:
    files = Files({"a.yaml": deploy("web", namespace=None), "b.yaml": deploy("web"),
                   "c.yaml": deploy("web", namespace="other")})
    loc = locator().locate(record(), locator().resolve(record()), files.index)
    assert (loc.path, loc.doc_index, loc.yaml_path) == ("b.yaml", 0, None)


def test_scan_falls_back_to_a_document_without_namespace() -> None:
    files = Files({"multi.yaml": deploy("svc", kind="Service") + "---\n" + deploy("web", namespace=None)})
    loc = locator(config=TRUSTING).locate(record(), locator(config=TRUSTING).resolve(record()), files.index)
    assert (loc.path, loc.doc_index, loc.method) == ("multi.yaml", 1, Method.SCAN)


def test_ambiguous_matches_are_refused_naming_the_files() -> None:
    files = Files({"dev/web.yaml": deploy("web", namespace=None),
                   "prod/web.yaml": deploy("web", namespace=None)})
    with pytest.raises(ManifestNotFound, match=r"2 documents .*dev/web\.yaml, prod/web\.yaml.*git-path"):
        locator(config=TRUSTING).locate(record(), locator(config=TRUSTING).resolve(record()), files.index)


def test_argocd_search_stays_inside_the_application_path() -> None:
    files = Files({"apps/argo/web.yaml": deploy("web", namespace=None), "base/web.yaml": deploy("web")})
    api = FakeApi({("applications", "argocd", "a"): application(
        {"repoURL": FLEET, "path": "apps/argo", "directory": {"recurse": True}})})
    rec = record(annotations={ARGOCD_TRACKING_ANNOTATION: "a:apps/Deployment:ns/web"})
    loc = locator(api).locate(rec, locator(api).resolve(rec), files.index)
    assert loc.path == "apps/argo/web.yaml" and loc.refresh[0].name == "a"
    only_base = Files({"base/web.yaml": deploy("web")})
    with pytest.raises(ManifestNotFound, match=r"under fleet:apps/argo/"):
        locator(api, TRUSTING).locate(rec, locator(api, TRUSTING).resolve(rec), only_base.index)


def test_helm_source_without_target_gets_a_hint() -> None:
    api = FakeApi({("applications", "argocd", "a"): application(
        {"repoURL": FLEET, "path": "charts/web", "helm": {"valueFiles": ["values.yaml"]}})})
    rec = record(annotations={ARGOCD_TRACKING_ANNOTATION: "a:apps/Deployment:ns/web"})
    with pytest.raises(ManifestNotFound, match="git-target"):
        locator(api).locate(rec, locator(api).resolve(rec), Files({"charts/web/values.yaml": "x: 1\n"}).index)


def test_a_stale_flux_origin_falls_back_to_the_kustomization_path() -> None:
    rec = record(labels=FLUX_LABELS, annotations={FLUX_ORIGIN_ANNOTATION: "path: old/web.yaml\n"})
    files = Files({"clusters/prod/new/web.yaml": deploy("web")})
    found = locator(FakeApi(flux_objects()))
    loc = found.locate(rec, found.resolve(rec), files.index)
    assert loc.path == "clusters/prod/new/web.yaml"


def test_git_path_must_exist_and_declare_the_workload() -> None:
    rec = record(annotations={GIT_PATH_ANNOTATION: "web.yaml"})
    res = locator().resolve(rec)
    with pytest.raises(ManifestNotFound, match="does not exist"):
        locator().locate(rec, res, Files({}).index)
    with pytest.raises(ManifestNotFound, match="declares no such object"):
        locator().locate(rec, res, Files({"web.yaml": deploy("api")}).index)
    assert locator().locate(rec, res, Files({"web.yaml": deploy("web")}).index) == Location(
        "fleet", "web.yaml", 0, None, Method.ANNOTATION)


def test_unparsable_named_file_is_a_yaml_edit_error() -> None:
    rec = record(annotations={GIT_PATH_ANNOTATION: "web.yaml"})
    with pytest.raises(YamlEditError, match=r"web\.yaml"):
        locator().locate(rec, locator().resolve(rec), Files({"web.yaml": "kind: [\n"}).index)


def test_not_found_mentions_unparsable_files() -> None:
    files = Files({"apps/broken.yaml": "kind: Deployment\nmetadata: {name: [web\n"})
    with pytest.raises(ManifestNotFound, match=r"could not be parsed \(apps/broken\.yaml\)"):
        locator().locate(record(), locator().resolve(record()), files.index)


def test_target_in_a_multi_document_patch_file_picks_the_workloads_document() -> None:
    patches = deploy("api") + "---\n" + deploy("web")
    target = "overlays/prod/patches.yaml#spec.template.metadata.annotations"
    rec = record(annotations={GIT_TARGET_ANNOTATION: target})
    trusting = locator(config=TRUSTING)
    loc = trusting.locate(rec, trusting.resolve(rec), Files({"overlays/prod/patches.yaml": patches}).index)
    assert (loc.doc_index, loc.yaml_path) == (1, ("spec", "template", "metadata", "annotations"))
    values = trusting.locate(
        record(annotations={GIT_TARGET_ANNOTATION: "values.yaml#podAnnotations"}),
        trusting.resolve(record(annotations={GIT_TARGET_ANNOTATION: "values.yaml#podAnnotations"})),
        Files({"values.yaml": "podAnnotations: {}\n"}).index)
    assert (values.path, values.doc_index) == ("values.yaml", 0)


def test_cronjob_is_found_by_its_batch_group() -> None:
    rec = record("nightly", kind="CronJob", api_version="batch/v1")
    files = Files({"jobs.yaml": deploy("nightly", kind="CronJob").replace("apps/v1", "batch/v1")})
    assert locator().locate(rec, locator().resolve(rec), files.index).path == "jobs.yaml"


def test_a_unique_scan_hit_is_unconfirmed_and_confirm_parses_the_file() -> None:
    files = Files({"apps.yaml": deploy("api") + "---\n" + deploy("web")})
    res = locator().resolve(record())
    fast = locator().locate(record(), res, files.index)
    assert (fast.path, fast.doc_index, fast.confirmed) == ("apps.yaml", 1, False)
    # The file changed behind the index's back: the confirmed lookup reads the real content.
    files.files["apps.yaml"] = (deploy("web") + "---\n" + deploy("api")).encode()
    assert locator().locate(record(), res, files.index).doc_index == 1  # the (stale) hint
    sure = locator().locate(record(), res, files.index, confirm=True)
    assert (sure.doc_index, sure.confirmed) == (0, True)
