"""Argo CD and Flux location rules as upstream defines them, one table per rule (no network).

Objects are valid against the real CRD schemas: Applications have ``spec.project``,
``spec.destination`` and a source; Kustomizations ``interval``, ``prune`` and
``sourceRef``; GitRepositories ``interval`` and ``url``; HelmReleases ``interval`` and
a chart template or ``chartRef``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from crd_objects import as_stored
from test_locate import FakeApi, Files, argocd_cm, deploy, record

from gitops_reloader.errors import ConfigError, GitError, KubeError, ManifestNotFound
from gitops_reloader.gitops.argocd import (
    AppSources,
    GitSource,
    SourceType,
    Tracking,
    ValuesFile,
    application_sources,
    combined_recurse,
    destination_namespace,
    detect_source_type,
    status_lists,
    tracking_from_configmap,
)
from gitops_reloader.gitops.flux import (
    Checkout,
    checkout,
    helm_chart_source,
    helm_deploy_namespace,
    inventory_lists,
    secure_join,
)
from gitops_reloader.gitops.gitconfig import parse_git_config
from gitops_reloader.gitops.locate import (
    ARGOCD_TRACKING_ANNOTATION,
    FLUX_HELM_NAME_LABEL,
    FLUX_HELM_NAMESPACE_LABEL,
    FLUX_NAME_LABEL,
    FLUX_NAMESPACE_LABEL,
    GIT_TARGET_ANNOTATION,
    Locator,
    Method,
)
from gitops_reloader.gitops.refresh import RefreshKind, RefreshTarget, rfc3339nano
from gitops_reloader.gitops.remotehead import DefaultBranches
from gitops_reloader.gitops.repourl import normalize_git_url

FLEET = "https://git.example.com/platform/fleet.git"
VALUES = "https://git.example.com/platform/values.git"
OTHER = "https://git.example.com/team-b/secret-apps.git"
CONFIG = parse_git_config(f"""
defaultRepository: fleet
repositories:
  - {{name: fleet, url: '{FLEET}', branch: main}}
  - {{name: fleet-trunk, url: '{FLEET}', branch: trunk}}
  - {{name: values, url: '{VALUES}', branch: main}}
  - {{name: team-b, url: '{OTHER}', branch: main}}
""")
TRACKED = {ARGOCD_TRACKING_ANNOTATION: "web:apps/Deployment:ns/web"}


class Remote:
    """What ``git ls-remote --symref`` answers, per normalised URL; counts the questions."""

    def __init__(self, heads: Mapping[str, str]) -> None:
        self.heads = dict(heads)
        self.asked: list[str] = []

    def __call__(self, repo: Any) -> str | None:
        self.asked.append(repo.name)
        return self.heads.get(normalize_git_url(repo.url))


def app(*, source: Mapping[str, Any] | None = None, sources: list[Mapping[str, Any]] | None = None,
        hydrator: Mapping[str, Any] | None = None, destination: str = "ns",
        status: Mapping[str, Any] | None = None, namespace: str = "argocd") -> dict[str, Any]:
    spec: dict[str, Any] = {"project": "default", "destination": {
        "server": "https://kubernetes.default.svc", "namespace": destination}}
    if source is not None:
        spec["source"] = dict(source)
    if sources is not None:
        spec["sources"] = [dict(s) for s in sources]
    if hydrator is not None:
        spec["sourceHydrator"] = dict(hydrator)
    obj: dict[str, Any] = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
                           "metadata": {"name": "web", "namespace": namespace}, "spec": spec}
    if status is not None:
        obj["status"] = dict(status)
    return as_stored(obj)


def locator(objects: Mapping[tuple[str, str, str], dict[str, Any] | KubeError], *,
            remote: Remote | None = None) -> Locator:
    heads = remote or Remote({normalize_git_url(FLEET): "main", normalize_git_url(VALUES): "main",
                              normalize_git_url(OTHER): "main"})
    return Locator(CONFIG, FakeApi(objects), default_branches=DefaultBranches(lookup=heads))


def resolve_app(application: dict[str, Any], **kwargs: Any) -> Any:
    found = locator({("applications", "argocd", "web"): application}, **kwargs)
    return found.resolve(record(annotations=TRACKED))


# --------------------------------------------------------------------------- Argo CD: pure rules


@pytest.mark.parametrize(("data", "expected"), [
    (None, Tracking("annotation", "app.kubernetes.io/instance")),
    ({}, Tracking("annotation", "app.kubernetes.io/instance")),
    ({"application.resourceTrackingMethod": "label"}, Tracking("label", "app.kubernetes.io/instance")),
    ({"application.resourceTrackingMethod": "annotation+label",
      "application.instanceLabelKey": "argocd.argoproj.io/instance"},
     Tracking("annotation+label", "argocd.argoproj.io/instance")),
    ({"application.resourceTrackingMethod": "", "application.instanceLabelKey": ""},
     Tracking("annotation", "app.kubernetes.io/instance")),
])
def test_tracking_settings_from_argocd_cm(data: Any, expected: Tracking) -> None:
    assert tracking_from_configmap(data) == expected


@pytest.mark.parametrize(("method", "uses_label"), [
    ("annotation", False), ("label", True), ("annotation+label", False), ("something-new", False)])
def test_only_the_label_method_identifies_by_label(method: str, uses_label: bool) -> None:
    assert Tracking(method).uses_label is uses_label


def git(path: str, field: str = "spec.source", revision: str = "", source_type: SourceType | None = None,
        recurse: bool = False, repo: str = FLEET, value_files: tuple[str, ...] = ()) -> GitSource:
    return GitSource(repo, path, revision, field, source_type, recurse, value_files)


@pytest.mark.parametrize(("application", "expected"), [
    # source only
    (app(source={"repoURL": FLEET, "path": "apps/web", "targetRevision": "main"}),
     AppSources("spec.source", (git("apps/web", revision="main"),))),
    # non-empty sources win over source
    (app(source={"repoURL": FLEET, "path": "old"}, sources=[{"repoURL": FLEET, "path": "new"}]),
     AppSources("spec.sources", (git("new", "spec.sources[0]"),))),
    # empty sources: source counts
    (app(source={"repoURL": FLEET, "path": "only"}, sources=[]),
     AppSources("spec.source", (git("only"),))),
    # hydrator wins over everything; its dry source is what lives in git
    (app(source={"repoURL": FLEET, "path": "x"}, hydrator={
        "drySource": {"repoURL": FLEET, "path": "dry/web", "targetRevision": "HEAD"},
        "syncSource": {"targetBranch": "env/prod", "path": "hydrated/web"}}),
     AppSources("spec.sourceHydrator.drySource",
                (git("dry/web", "spec.sourceHydrator.drySource", revision="HEAD"),), hydrator=True)),
    # directory + ref-only source: the ref is a values provider, not searched
    (app(sources=[{"repoURL": FLEET, "path": "apps/web"}, {"repoURL": VALUES, "ref": "values"}]),
     AppSources("spec.sources", (git("apps/web", "spec.sources[0]"),))),
    # two directory sources: both searched
    (app(sources=[{"repoURL": FLEET, "path": "apps/web"}, {"repoURL": FLEET, "path": "apps/shared"}]),
     AppSources("spec.sources", (git("apps/web", "spec.sources[0]"), git("apps/shared", "spec.sources[1]")))),
    # a chart from a chart repository with $values files from a ref source
    (app(sources=[{"repoURL": "https://charts.example.com", "chart": "web", "targetRevision": "1.2.0",
                   "helm": {"valueFiles": ["$values/envs/prod/web.yaml", "inline.yaml"]}},
                  {"repoURL": VALUES, "targetRevision": "main", "ref": "values"}]),
     AppSources("spec.sources", charts=("web",), values=(ValuesFile(VALUES, "main", "envs/prod/web.yaml"),))),
    # a ref source that also has a path deploys that path
    (app(sources=[{"repoURL": FLEET, "path": "apps/web", "ref": "cfg"}]),
     AppSources("spec.sources", (git("apps/web", "spec.sources[0]"),))),
    # explicit type and recursion; status types fill in what is not declared
    (app(source={"repoURL": FLEET, "path": "a", "directory": {"recurse": True}}),
     AppSources("spec.source", (git("a", source_type=SourceType.DIRECTORY, recurse=True),))),
    (app(source={"repoURL": FLEET, "path": "a"}, status={"sourceType": "Kustomize"}),
     AppSources("spec.source", (git("a", source_type=SourceType.KUSTOMIZE),))),
    (app(sources=[{"repoURL": FLEET, "path": "a"}, {"repoURL": FLEET, "path": "b", "helm": {}}],
         status={"sourceTypes": ["Directory", "Helm"]}),
     AppSources("spec.sources", (git("a", "spec.sources[0]", source_type=SourceType.DIRECTORY),
                                 git("b", "spec.sources[1]", source_type=SourceType.HELM)))),
    (app(source={"repoURL": "https://charts.example.com", "chart": "web", "targetRevision": "1.0.0"}),
     AppSources("spec.source", charts=("web",))),
])
def test_application_sources_follow_argocd_precedence(application: dict[str, Any],
                                                      expected: AppSources) -> None:
    assert application_sources(application) == expected


@pytest.mark.parametrize(("sources", "expected"), [
    ([git("a", source_type=SourceType.DIRECTORY)], False),                       # recurse defaults to false
    ([git("a", source_type=SourceType.DIRECTORY, recurse=True)], True),
    ([git("a", source_type=SourceType.KUSTOMIZE)], True),                        # kustomize decides itself
    ([git("a", source_type=SourceType.HELM)], True),
    ([git("a")], None),                                                          # unknown: detect from files
    ([git("a", source_type=SourceType.KUSTOMIZE), git("b", source_type=SourceType.DIRECTORY)], False),
    ([git("a", source_type=SourceType.KUSTOMIZE), git("b")], None),
])
def test_recursion_is_decided_on_the_safe_side(sources: list[GitSource], expected: bool | None) -> None:
    assert combined_recurse(sources) is expected


@pytest.mark.parametrize(("files", "expected"), [
    ([], SourceType.DIRECTORY), (["kustomization.yaml"], SourceType.KUSTOMIZE),
    (["kustomization.yml"], SourceType.KUSTOMIZE), (["Kustomization"], SourceType.KUSTOMIZE),
    (["Chart.yaml"], SourceType.HELM), (["Chart.yaml", "kustomization.yaml"], SourceType.KUSTOMIZE),
])
def test_source_type_is_detected_as_argocd_app_type_does(files: list[str], expected: SourceType) -> None:
    assert detect_source_type(files) is expected


@pytest.mark.parametrize(("destination", "app_ns", "workload_ns", "by_id", "expected"), [
    ("ns", "argocd", "ns", True, (True, "ns")),
    ("ns", "team-a", "ns", False, (True, "ns")),
    ("other", "argocd", "ns", True, (False, "other")),
    ("", "argocd", "ns", True, (True, None)),          # empty: the tracking id's namespace is the workload's
    ("", "argocd", "ns", False, (False, None)),         # empty and only a label: refused
    ("", "team-a", "ns", True, (False, None)),          # empty, app outside Argo CD's namespace: refused
])
def test_destination_namespace_rule(destination: str, app_ns: str, workload_ns: str, by_id: bool,
                                    expected: tuple[bool, str | None]) -> None:
    assert destination_namespace(app(destination=destination), app_namespace=app_ns,
                                 workload_namespace=workload_ns, tracked_by_id=by_id,
                                 argocd_namespace="argocd") == expected


# --------------------------------------------------------------------------- Argo CD: through the Locator


@pytest.mark.parametrize(("repo_url", "found"), [
    ("HTTPS://GIT.Example.com/Platform/Fleet", "fleet"),      # git.SameURL: the whole URL is case-blind
    (" https://git.example.com/platform/fleet.git\n", "fleet"),
    ("https://git.example.com/platform/fleet/", None),        # ... but a trailing slash is another URL
    ("git@git.example.com:platform/fleet.git", None),         # ... and so is another transport
])
def test_application_repo_urls_match_as_argocd_matches_them(repo_url: str, found: str | None) -> None:
    application = app(source={"repoURL": repo_url, "path": "apps/web", "targetRevision": "main"})
    if found is not None:
        assert resolve_app(application).repo_name == found
        return
    with pytest.raises(ManifestNotFound, match=r"not in --git-config.*repository fleet has the same host "
                                               r"and path in another spelling"):
        resolve_app(application)


def test_multi_source_directory_and_ref_searches_the_directory() -> None:
    res = resolve_app(app(sources=[{"repoURL": FLEET, "path": "apps/web", "targetRevision": "main"},
                                   {"repoURL": VALUES, "targetRevision": "main", "ref": "values"}]))
    assert (res.repo_name, res.search_dirs, res.method) == ("fleet", ("apps/web",), Method.ARGOCD)


def test_multi_source_two_directories_are_both_searched() -> None:
    application = app(sources=[{"repoURL": FLEET, "path": "apps/web", "targetRevision": "main"},
                               {"repoURL": FLEET, "path": "apps/sidecars", "targetRevision": "main"}])
    found = locator({("applications", "argocd", "web"): application})
    res = found.resolve(record(annotations=TRACKED))
    assert res.search_dirs == ("apps/web", "apps/sidecars")
    files = Files({"apps/web/svc.yaml": deploy("svc", kind="Service"),
                   "apps/sidecars/web.yaml": deploy("web")})
    assert found.locate(record(annotations=TRACKED), res, files.index).path == "apps/sidecars/web.yaml"


def test_multi_source_chart_with_values_offers_the_values_file_as_target() -> None:
    application = app(sources=[
        {"repoURL": "https://charts.example.com", "chart": "web", "targetRevision": "1.2.0",
         "helm": {"valueFiles": ["$values/envs/prod/web.yaml"]}},
        {"repoURL": VALUES, "targetRevision": "main", "ref": "values"}])
    with pytest.raises(ManifestNotFound) as caught:
        resolve_app(application)
    message = str(caught.value)
    assert "Helm chart 'web'" in message
    assert f"{GIT_TARGET_ANNOTATION} to its values file, e.g. 'envs/prod/web.yaml#podAnnotations'" in message
    assert "with gitops-reloader.io/git-repo: 'values'" in message


def test_hydrator_application_searches_the_dry_source_and_asks_for_hydration() -> None:
    res = resolve_app(app(hydrator={
        "drySource": {"repoURL": FLEET, "path": "dry/web", "targetRevision": "main"},
        "syncSource": {"targetBranch": "env/prod", "path": "hydrated/web"}}))
    assert (res.repo_name, res.search_dirs) == ("fleet", ("dry/web",))
    assert res.refresh == (RefreshTarget(RefreshKind.ARGOCD_APPLICATION, "argocd", "web", hydrate=True),)


@pytest.mark.parametrize(("revision", "head", "expected"), [
    ("HEAD", "trunk", "fleet-trunk"),  # two entries for one URL: the remote's default branch wins
    ("", "trunk", "fleet-trunk"),
    ("HEAD", "main", "fleet"),
    ("refs/heads/trunk", "main", "fleet-trunk"),
])
def test_head_is_the_remotes_default_branch(revision: str, head: str, expected: str) -> None:
    remote = Remote({normalize_git_url(FLEET): head})
    res = resolve_app(app(source={"repoURL": FLEET, "path": "a", "targetRevision": revision}), remote=remote)
    assert res.repo_name == expected
    assert remote.asked == ([] if revision.startswith("refs/") else ["fleet"])


def test_head_of_a_branch_we_do_not_write_is_refused() -> None:
    remote = Remote({normalize_git_url(FLEET): "develop"})
    with pytest.raises(ManifestNotFound, match="deploys the default branch 'develop'"):
        resolve_app(app(source={"repoURL": FLEET, "path": "a", "targetRevision": "HEAD"}), remote=remote)


def test_the_default_branch_is_cached_and_failures_are_retryable() -> None:
    remote = Remote({normalize_git_url(FLEET): "main"})
    branches = DefaultBranches(lookup=remote)
    repo = CONFIG.get("fleet")
    assert repo is not None
    assert branches.branch(repo) == branches.branch(CONFIG.get("fleet-trunk") or repo) == "main"
    assert remote.asked == ["fleet"]  # one question per remote URL within the TTL

    def broken(_: Any) -> str | None:
        raise GitError("connection refused")

    with pytest.raises(GitError, match="default branch") as caught:
        DefaultBranches(lookup=broken).branch(repo)
    assert caught.value.retryable


def test_non_recursive_directory_ignores_a_match_in_a_subdirectory() -> None:
    application = app(source={"repoURL": FLEET, "path": "apps", "targetRevision": "main", "directory": {}})
    found = locator({("applications", "argocd", "web"): application})
    res = found.resolve(record(annotations=TRACKED))
    assert res.recurse is False
    with pytest.raises(ManifestNotFound, match=r"under fleet:apps/.*directory\.recurse is false"):
        found.locate(record(annotations=TRACKED), res, Files({"apps/old/web.yaml": deploy("web")}).index)
    direct = Files({"apps/web.yaml": deploy("web"), "apps/old/web.yaml": deploy("web")})
    assert found.locate(record(annotations=TRACKED), res, direct.index).path == "apps/web.yaml"


def test_unknown_source_type_is_detected_from_the_directory() -> None:
    application = app(source={"repoURL": FLEET, "path": "apps", "targetRevision": "main"})
    found = locator({("applications", "argocd", "web"): application})
    res = found.resolve(record(annotations=TRACKED))
    assert res.recurse is None
    plain = Files({"apps/nested/web.yaml": deploy("web")})
    with pytest.raises(ManifestNotFound):
        found.locate(record(annotations=TRACKED), res, plain.index)
    kustomized = Files({"apps/kustomization.yaml": "resources: [nested/web.yaml]\n",
                        "apps/nested/web.yaml": deploy("web")})
    assert found.locate(record(annotations=TRACKED), res, kustomized.index).path == "apps/nested/web.yaml"


def test_custom_instance_label_key_from_argocd_cm() -> None:
    application = app(source={"repoURL": FLEET, "path": "a", "targetRevision": "main"})
    objects = {("applications", "argocd", "web"): application,
               **argocd_cm(**{"application.resourceTrackingMethod": "label",
                              "application.instanceLabelKey": "argocd.argoproj.io/instance"})}
    helm_only = record(labels={"app.kubernetes.io/instance": "web"})
    assert locator(objects).resolve(helm_only).method is Method.SCAN
    res = locator(objects).resolve(record(labels={"argocd.argoproj.io/instance": "web"}))
    assert (res.method, res.search_dirs) == (Method.ARGOCD, ("a",))


def test_git_config_tracking_applies_only_when_argocd_cm_is_unreadable() -> None:
    config = parse_git_config(f"argocd: {{trackingMethod: label, instanceLabelKey: example.com/app}}\n"
                              f"repositories:\n  - {{name: fleet, url: '{FLEET}'}}\n")
    application = app(source={"repoURL": FLEET, "path": "a", "targetRevision": "main"})
    rec = record(labels={"example.com/app": "web"})
    remote = DefaultBranches(lookup=Remote({}))
    assert Locator(config, FakeApi({("applications", "argocd", "web"): application}),
                   default_branches=remote).resolve(rec).method is Method.ARGOCD
    with_cm = FakeApi({("applications", "argocd", "web"): application, **argocd_cm()})
    assert Locator(config, with_cm, default_branches=remote).resolve(rec).method is Method.SCAN


def test_forbidden_argocd_cm_falls_back_and_a_broken_one_delays_only_argocd_workloads() -> None:
    config = parse_git_config(f"argocd: {{trackingMethod: label}}\n"
                              f"repositories:\n  - {{name: fleet, url: '{FLEET}'}}\n")
    application = app(source={"repoURL": FLEET, "path": "a", "targetRevision": "main"})
    cm = ("configmaps", "argocd", "argocd-cm")
    remote = DefaultBranches(lookup=Remote({}))
    forbidden = FakeApi({("applications", "argocd", "web"): application, cm: KubeError("no", status=403)})
    rec = record(labels={"app.kubernetes.io/instance": "web"})
    assert Locator(config, forbidden, default_branches=remote).resolve(rec).method is Method.ARGOCD
    broken = FakeApi({cm: KubeError("etcd timeout", status=500)})
    assert Locator(config, broken, default_branches=remote).resolve(record(labels={})).method is Method.SCAN
    with pytest.raises(KubeError) as caught:
        Locator(config, broken, default_branches=remote).resolve(rec)
    assert caught.value.retryable


def test_flux_labels_win_over_a_generic_instance_label_even_with_label_tracking() -> None:
    objects = {**flux(ref={"branch": "main"}), **argocd_cm(**{"application.resourceTrackingMethod": "label"}),
               ("applications", "argocd", "web"): app(source={"repoURL": FLEET, "path": "argo"})}
    rec = record(labels={**FLUX_LABELS, "app.kubernetes.io/instance": "web"})
    assert locator(objects).resolve(rec).method is Method.FLUX


def test_an_application_deploying_elsewhere_is_refused_without_revealing_its_source() -> None:
    application = app(source={"repoURL": OTHER, "path": "team-b/payments", "targetRevision": "main"},
                      destination="team-b")
    with pytest.raises(ManifestNotFound) as caught:
        resolve_app(application)
    message = str(caught.value)
    assert "Argo CD Application argocd/web does not deploy into namespace ns" in message
    for secret in ("secret-apps", "team-b/payments", "git.example.com", "team-b"):
        assert secret not in message


def test_empty_destination_needs_a_tracking_id_in_argocds_namespace() -> None:
    application = app(source={"repoURL": FLEET, "path": "a", "targetRevision": "main"}, destination="")
    assert resolve_app(application).deploy_namespace is None
    elsewhere = locator({("applications", "team-b", "web"): application})
    with pytest.raises(ManifestNotFound, match="does not deploy into namespace ns"):
        elsewhere.resolve(record(annotations={
            ARGOCD_TRACKING_ANNOTATION: "team-b_web:apps/Deployment:ns/web"}))


def test_deploy_namespace_is_the_destination() -> None:
    res = resolve_app(app(source={"repoURL": FLEET, "path": "a", "targetRevision": "main"}))
    assert res.deploy_namespace == "ns"


# --------------------------------------------------------------------------- Flux: pure rules


@pytest.mark.parametrize(("ref", "expected", "branch"), [
    (None, Checkout("branch", "master"), "master"),
    ({}, Checkout("branch", "master"), "master"),
    ({"branch": "main"}, Checkout("branch", "main"), "main"),
    ({"branch": "main", "tag": "v1.0.0"}, Checkout("tag", "v1.0.0"), None),
    ({"branch": "main", "commit": "a" * 40}, Checkout("commit", "a" * 40), None),
    ({"tag": "v1.0.0", "semver": ">=1.0.0"}, Checkout("semver", ">=1.0.0"), None),
    ({"semver": ">=1.0.0", "name": "refs/heads/main"}, Checkout("name", "refs/heads/main"), "main"),
    ({"name": "refs/tags/v1", "branch": "main"}, Checkout("name", "refs/tags/v1"), None),
    ({"name": "refs/pull/420/head"}, Checkout("name", "refs/pull/420/head"), None),
    ({"commit": "b" * 40, "name": "refs/heads/main"}, Checkout("commit", "b" * 40), None),
])
def test_flux_checkout_precedence(ref: Any, expected: Checkout, branch: str | None) -> None:
    assert checkout(ref) == expected
    assert checkout(ref).branch == branch


@pytest.mark.parametrize(("path", "expected"), [
    ("apps/prod", "apps/prod"), ("./apps/prod", "apps/prod"), ("/apps/prod", "apps/prod"),
    ("", ""), ("./", ""), ("/", ""), ("apps//prod/", "apps/prod"), ("../../apps/prod", "apps/prod"),
    ("apps/../../etc", "etc"), ("a/./b/../c", "a/c"),
])
def test_kustomization_path_is_joined_securely(path: str, expected: str) -> None:
    assert secure_join(path) == expected


WEB = {"group": "apps", "kind": "Deployment", "namespace": "ns", "name": "web"}


@pytest.mark.parametrize(("status", "listed"), [
    (None, None), ({}, None), ({"inventory": {"entries": []}}, False),
    ({"inventory": {"entries": [{"id": "ns_web_apps_Deployment", "v": "v1"}]}}, True),
    ({"inventory": {"entries": [{"id": "ns_web_apps_StatefulSet", "v": "v1"},
                                {"id": "other_web_apps_Deployment", "v": "v1"}]}}, False),
    ({"inventory": {"entries": ["ns_web_apps_Deployment"]}}, False),
])
def test_kustomization_inventory_lists_objects_by_cli_utils_id(status: Any, listed: bool | None) -> None:
    kustomization: dict[str, Any] = {"spec": {}} if status is None else {"status": status}
    assert inventory_lists(kustomization, **WEB) is listed


def test_inventory_ids_write_a_colon_in_the_name_as_two_underscores() -> None:
    status = {"inventory": {"entries": [{"id": "_system__admin_rbac.authorization.k8s.io_ClusterRole"}]}}
    assert inventory_lists({"status": status}, group="rbac.authorization.k8s.io", kind="ClusterRole",
                           namespace="", name="system:admin")


@pytest.mark.parametrize(("resources", "listed"), [
    (None, None), ([], None),
    ([{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "ns", "name": "web"}], True),
    ([{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "ns", "name": "api"},
      {"version": "v1", "kind": "Service", "namespace": "ns", "name": "web"}], False),
])
def test_application_status_resources_list_managed_objects(resources: Any, listed: bool | None) -> None:
    application: dict[str, Any] = {"status": {"resources": resources}} if resources is not None else {}
    assert status_lists(application, **WEB) is listed


FLEET_REF = {"kind": "GitRepository", "name": "fleet", "namespace": "flux-system"}


def helm_release(*, chart: Mapping[str, Any] | None = None, chart_ref: Mapping[str, Any] | None = None,
                 values: Mapping[str, Any] | None = None, target_namespace: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"interval": "10m"}
    if chart is not None:
        spec["chart"] = {"spec": dict(chart)}
    if chart_ref is not None:
        spec["chartRef"] = dict(chart_ref)
    if values is not None:
        spec["values"] = dict(values)
    if target_namespace:
        spec["targetNamespace"] = target_namespace
    return {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "web", "namespace": "ns"}, "spec": spec}


def test_helm_release_chart_sources_and_namespaces() -> None:
    git_chart = helm_release(chart={"chart": "./charts/web", "sourceRef": FLEET_REF,
                                    "valuesFiles": ["charts/web/values.yaml", "envs/prod.yaml"]})
    source = helm_chart_source(git_chart, "ns")
    assert source is not None
    assert (source.kind, source.namespace, source.name, source.chart, source.values_files) == (
        "GitRepository", "flux-system", "fleet", "./charts/web", ("charts/web/values.yaml", "envs/prod.yaml"))
    by_ref = helm_chart_source(helm_release(chart_ref={"kind": "HelmChart", "name": "web-chart"}), "ns")
    assert by_ref is not None and by_ref.via_helm_chart and by_ref.namespace == "ns"
    assert helm_chart_source(helm_release(), "ns") is None
    assert helm_deploy_namespace(helm_release(), "ns") == "ns"
    assert helm_deploy_namespace(helm_release(target_namespace="web"), "ns") == "web"


# --------------------------------------------------------------------------- Flux: through the Locator

FLUX_LABELS = {FLUX_NAME_LABEL: "apps", FLUX_NAMESPACE_LABEL: "flux-system"}


def flux(*, path: str | None = "./clusters/prod", ref: Mapping[str, str] | None = None,
         target_namespace: str = "") -> dict[tuple[str, str, str], dict[str, Any]]:
    kustomization: dict[str, Any] = {"interval": "10m", "prune": True,
                                     "sourceRef": {"kind": "GitRepository", "name": "fleet"}}
    if path is not None:
        kustomization["path"] = path
    if target_namespace:
        kustomization["targetNamespace"] = target_namespace
    git_repository: dict[str, Any] = {"interval": "1m", "url": FLEET}
    if ref is not None:
        git_repository["ref"] = dict(ref)
    return {("kustomizations", "flux-system", "apps"): {
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": "apps", "namespace": "flux-system"}, "spec": kustomization},
            ("gitrepositories", "flux-system", "fleet"): {
                "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
                "metadata": {"name": "fleet", "namespace": "flux-system"}, "spec": git_repository}}


MASTER_CONFIG = parse_git_config(f"repositories:\n  - {{name: fleet, url: '{FLEET}', branch: master}}\n"
                                 f"  - {{name: fleet-main, url: '{FLEET}', branch: main}}\n")


@pytest.mark.parametrize(("ref", "expected"), [
    (None, "fleet"),                      # no ref: master
    ({"branch": "main"}, "fleet-main"),
    ({"name": "refs/heads/master"}, "fleet"),
])
def test_flux_branch_selects_the_configured_entry(ref: Mapping[str, str] | None, expected: str) -> None:
    found = Locator(MASTER_CONFIG, FakeApi(flux(ref=ref)),
                    default_branches=DefaultBranches(lookup=Remote({})))
    assert found.resolve(record(labels=FLUX_LABELS)).repo_name == expected


@pytest.mark.parametrize(("ref", "match"), [
    ({"branch": "main", "tag": "v1.0.0"}, r"checks out tag 'v1\.0\.0' \(spec\.ref\.tag\), not a branch"),
    ({"branch": "main", "commit": "c" * 40}, r"checks out commit 'c{40}' \(spec\.ref\.commit\)"),
    ({"semver": "1.x"}, r"checks out semver '1\.x'"),
    ({"name": "refs/tags/v2"}, r"checks out name 'refs/tags/v2'"),
])
def test_flux_refs_that_are_not_branches_are_refused_with_what_to_do(ref: Mapping[str, str],
                                                                    match: str) -> None:
    with pytest.raises(ManifestNotFound, match=match) as caught:
        locator(flux(ref=ref)).resolve(record(labels=FLUX_LABELS))
    assert "Make the GitRepository follow a branch" in str(caught.value)


@pytest.mark.parametrize("path", ["apps/prod", "./apps/prod", "/apps/prod"])
def test_kustomization_paths_are_one_directory(path: str) -> None:
    res = locator(flux(path=path, ref={"branch": "main"})).resolve(record(labels=FLUX_LABELS))
    assert res.search_dirs == ("apps/prod",)


def test_kustomization_without_path_is_the_source_root() -> None:
    res = locator(flux(path=None, ref={"branch": "main"})).resolve(record(labels=FLUX_LABELS))
    assert res.search_dirs == ("",)


def test_kustomization_target_namespace_must_be_the_workloads() -> None:
    res = locator(flux(ref={"branch": "main"}, target_namespace="ns")).resolve(record(labels=FLUX_LABELS))
    assert res.deploy_namespace == "ns"
    with pytest.raises(ManifestNotFound, match="applies into another namespace") as caught:
        locator(flux(ref={"branch": "main"}, target_namespace="team-b")).resolve(record(labels=FLUX_LABELS))
    assert "clusters/prod" not in str(caught.value)
    assert "git.example.com" not in str(caught.value)


HELM_LABELS = {FLUX_HELM_NAME_LABEL: "web", FLUX_HELM_NAMESPACE_LABEL: "ns"}


def test_helm_release_from_a_git_chart_offers_the_charts_values_file() -> None:
    release = helm_release(chart={"chart": "./charts/web", "sourceRef": FLEET_REF})
    objects = {**flux(ref={"branch": "main"}), ("helmreleases", "ns", "web"): release}
    with pytest.raises(ManifestNotFound, match=r"e\.g\. 'charts/web/values\.yaml#podAnnotations'"):
        locator(objects).resolve(record(labels=HELM_LABELS))


@pytest.mark.parametrize(("strategy", "warned"), [(None, True), ("ChartVersion", True), ("Revision", False)])
def test_helm_release_hint_says_when_a_values_commit_would_not_repackage_the_chart(strategy: str | None,
                                                                                   warned: bool) -> None:
    chart: dict[str, Any] = {"chart": "./charts/web", "sourceRef": FLEET_REF}
    if strategy:
        chart["reconcileStrategy"] = strategy
    assert helm_chart_source(helm_release(chart=chart), "ns").rebuilds_on_commit is not warned
    objects = {**flux(ref={"branch": "main"}), ("helmreleases", "ns", "web"): helm_release(chart=chart)}
    with pytest.raises(ManifestNotFound) as caught:
        locator(objects).resolve(record(labels=HELM_LABELS))
    assert ("reconcileStrategy: Revision" in str(caught.value)) is warned


def test_helm_release_values_files_name_the_last_one() -> None:
    release = helm_release(chart={"chart": "charts/web", "sourceRef": FLEET_REF,
                                  "valuesFiles": ["charts/web/values.yaml", "./envs/prod.yaml"]})
    objects = {**flux(ref={"branch": "main"}), ("helmreleases", "ns", "web"): release}
    with pytest.raises(ManifestNotFound, match=r"'envs/prod\.yaml#podAnnotations'"):
        locator(objects).resolve(record(labels=HELM_LABELS))


def test_helm_release_through_a_helm_chart_reference() -> None:
    chart = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmChart",
             "metadata": {"name": "web-chart", "namespace": "flux-system"},
             "spec": {"interval": "10m", "chart": "charts/web",
                      "sourceRef": {"kind": "GitRepository", "name": "fleet"}}}
    release = helm_release(chart_ref={"kind": "HelmChart", "name": "web-chart", "namespace": "flux-system"})
    objects = {**flux(ref={"branch": "main"}), ("helmreleases", "ns", "web"): release,
               ("helmcharts", "flux-system", "web-chart"): chart}
    with pytest.raises(ManifestNotFound, match=r"'charts/web/values\.yaml#podAnnotations'"):
        locator(objects).resolve(record(labels=HELM_LABELS))


@pytest.mark.parametrize(("release", "match"), [
    (helm_release(chart={"chart": "web", "sourceRef": {"kind": "HelmRepository", "name": "bitnami"}},
                  values={"replicas": 2}),
     r"comes from HelmRepository.*values are inline.*spec\.values\.podAnnotations"),
    (helm_release(chart_ref={"kind": "OCIRepository", "name": "web"}),
     r"comes from OCIRepository.*sets no values"),
    (helm_release(chart={"chart": "web", "sourceRef": {"kind": "HelmRepository", "name": "x"}},
                  target_namespace="team-b"), r"installs into another namespace"),
])
def test_helm_releases_without_a_git_values_file_are_refused_clearly(release: dict[str, Any],
                                                                     match: str) -> None:
    with pytest.raises(ManifestNotFound, match=match):
        locator({("helmreleases", "ns", "web"): release}).resolve(record(labels=HELM_LABELS))


def test_a_helm_release_we_may_not_read_is_refused_naming_the_permission() -> None:
    forbidden = locator({("helmreleases", "ns", "web"): KubeError("forbidden", status=403)})
    with pytest.raises(ManifestNotFound, match=r"may not read \(grant get on helmreleases"):
        forbidden.resolve(record(labels=HELM_LABELS))
    chart_forbidden = locator({
        ("helmreleases", "ns", "web"): helm_release(chart_ref={"kind": "HelmChart", "name": "c"}),
        ("helmcharts", "ns", "c"): KubeError("no", status=403)})
    with pytest.raises(ManifestNotFound, match=r"grant get on helmcharts"):
        chart_forbidden.resolve(record(labels=HELM_LABELS))
    with pytest.raises(KubeError):
        busy = locator({("helmreleases", "ns", "web"): KubeError("busy", status=503)})
        busy.resolve(record(labels=HELM_LABELS))


def test_helm_rendered_workload_is_never_scanned_for() -> None:
    release = helm_release(chart={"chart": "web", "sourceRef": {"kind": "HelmRepository", "name": "x"}})
    found = locator({("helmreleases", "ns", "web"): release})
    with pytest.raises(ManifestNotFound):
        found.resolve(record(labels={**HELM_LABELS, "app.kubernetes.io/instance": "web"}))


# --------------------------------------------------------------------------- refresh timestamps


@pytest.mark.parametrize(("nanos", "expected"), [
    (1_700_000_000_000_000_000, "2023-11-14T22:13:20Z"),
    (1_700_000_000_000_000_001, "2023-11-14T22:13:20.000000001Z"),
    (1_700_000_000_500_000_000, "2023-11-14T22:13:20.5Z"),
])
def test_rfc3339nano_is_gos_format(nanos: int, expected: str) -> None:
    assert rfc3339nano(nanos) == expected


# --------------------------------------------------------------------------- --git-config argocd block


def test_git_config_argocd_block() -> None:
    config = parse_git_config(
        "argocd:\n  trackingMethod: annotation+label\n  instanceLabelKey: example.com/app\n")
    assert (config.argocd_tracking_method, config.argocd_instance_label_key) == (
        "annotation+label", "example.com/app")
    empty = parse_git_config("{}")
    assert (empty.argocd_tracking_method, empty.argocd_instance_label_key) == ("", "")


@pytest.mark.parametrize(("text", "match"), [
    ("argocd: {trackingMethod: labels}", r"argocd\.trackingMethod: must be one of"),
    ("argocd: {instanceLabelKey: 'bad key!'}", r"argocd\.instanceLabelKey: not a valid label key"),
    ("argocd: {trackingmethod: label}", "trackingmethod"),
    ("argocd: label", r"argocd: must be a map"),
])
def test_git_config_argocd_block_is_validated(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_git_config(text)


@pytest.mark.parametrize("forbidden", [("applications", "argocd", "web"),
                                       ("kustomizations", "flux-system", "apps"),
                                       ("gitrepositories", "flux-system", "fleet")])
def test_argo_cd_and_flux_objects_we_may_not_read_are_refused_not_retried(
        forbidden: tuple[str, str, str]) -> None:
    """The chart grants these reads only in the configured namespaces: a 403 is the answer again."""
    objects: dict[tuple[str, str, str], Any] = {
        **flux(ref={"branch": "main"}),
        ("applications", "argocd", "web"): app(source={"repoURL": FLEET, "path": "apps",
                                                       "targetRevision": "main"})}
    objects[forbidden] = KubeError("forbidden", status=403)
    rec = record(annotations=TRACKED) if forbidden[0] == "applications" else record(labels=FLUX_LABELS)
    with pytest.raises(ManifestNotFound, match=r"may not read it \(grant get on " + forbidden[0]) as caught:
        locator(objects).resolve(rec)
    assert not caught.value.retryable
    objects[forbidden] = KubeError("busy", status=503)
    with pytest.raises(KubeError) as busy:
        locator(objects).resolve(rec)
    assert busy.value.retryable
