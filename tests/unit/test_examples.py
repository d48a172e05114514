"""Everything under examples/ is valid: manifests, the charts they hold, our Helm values.

Rules for the files in examples/:

- ``gitops-reloader-values*.yaml``: values for ``helm/gitops-reloader``; rendered with
  the chart, every object validated.
- A directory with a ``Chart.yaml`` (an application chart that is a git target): linted
  and rendered with its own values; its files are not read as manifests.
- Every other ``*.yaml``: Kubernetes manifests; every document must validate strictly
  (custom resources get a shape check, see ``helm_tools.CRD_GROUPS``, and, where the API
  test server holds the kind's CRD schema, the same admission as the test server: no
  violation and no field a real server would prune).

On top of schema validity, the examples must be consistent with what the controller
reads: our annotation keys and sink names, repository names from the example's own
values, ``git-path``/``git-target`` files that exist in the example's ``repo/``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops_reloader.gitops.gitconfig import GitConfig, RepositoryConfig
from gitops_reloader.testing.apiserver.crdschema import CrdSchemas, default_crd_paths
from gitops_reloader.testing.apiserver.status import ApiError

# tests/ is not a package: make tests/helm_tools.py importable from here.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helm_tools import (
    CHART_DIR,
    EXAMPLES_DIR,
    render,
    require_helm,
    run_helm,
    validate_object,
)

EXPECTED_EXAMPLES = {
    "stakater-drop-in", "argocd-annotations-sink", "argocd-git-sink",
    "flux-pull-request-sink", "helm-values-target", "external-secrets-git", "github-pull-request",
    "knative-service",
}
SINKS = {"env-vars", "annotations", "git", "pull-request", "webhook"}
WORKLOAD_ANNOTATIONS = {
    "gitops-reloader.io/sink", "gitops-reloader.io/git-repo", "gitops-reloader.io/git-path",
    "gitops-reloader.io/git-target",
}
POD_TEMPLATE_ANNOTATIONS = {"gitops-reloader.io/config-hash"}
WORKLOAD_KINDS = {"Deployment", "DaemonSet", "StatefulSet", "Rollout", "DeploymentConfig"}
GROUP_WORKLOADS = {("serving.knative.dev", "Service"), ("workers.acme.example.com", "Worker")}
"""Workload kinds whose name alone is ambiguous (a core Service) or not built in: by group."""
VALUES_PATTERN = "gitops-reloader-values*.yaml"

Obj = dict[str, Any]


def chart_dirs() -> list[Path]:
    return sorted(path.parent for path in EXAMPLES_DIR.rglob("Chart.yaml"))


def in_chart(path: Path) -> bool:
    return any(chart in path.parents for chart in chart_dirs())


def values_files() -> list[Path]:
    return sorted(p for p in EXAMPLES_DIR.rglob(VALUES_PATTERN) if not in_chart(p))


def manifest_files() -> list[Path]:
    files = [*EXAMPLES_DIR.rglob("*.yaml"), *EXAMPLES_DIR.rglob("*.yml")]
    return sorted(p for p in files if not in_chart(p) and not p.match(VALUES_PATTERN))


def rel(path: Path) -> str:
    return str(path.relative_to(EXAMPLES_DIR))


def load_documents(path: Path) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def example_of(path: Path) -> Path:
    return EXAMPLES_DIR / path.relative_to(EXAMPLES_DIR).parts[0]


@pytest.fixture(scope="module")
def helm() -> Path:
    return require_helm()


@pytest.fixture(scope="module")
def helm_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("helm-home")


@pytest.fixture(scope="module")
def chart_objects(helm: Path, helm_home: Path) -> dict[Path, list[Obj]]:
    """Every example chart rendered with its own values: chart dir → objects."""
    return {chart: render(helm, chart, home=helm_home, release=chart.name, namespace=chart.name)
            for chart in chart_dirs()}


def workloads(docs: list[Obj]) -> Iterator[Obj]:
    return (doc for doc in docs if doc.get("kind") in WORKLOAD_KINDS
            or (str(doc.get("apiVersion", "")).rpartition("/")[0], doc.get("kind")) in GROUP_WORKLOADS)


def example_workloads(example: Path, chart_objects: dict[Path, list[Obj]]) -> list[Obj]:
    docs = [doc for path in manifest_files() if example_of(path) == example
            for doc in load_documents(path)]
    for chart, objs in chart_objects.items():
        if example_of(chart) == example:
            docs += objs
    return list(workloads(docs))


def example_repositories(example: Path) -> dict[str, Obj]:
    repos: dict[str, Obj] = {}
    for path in example.glob(VALUES_PATTERN):
        values = yaml.safe_load(path.read_text()) or {}
        for repo in values.get("reloader", {}).get("git", {}).get("repositories", []):
            repos[repo["name"]] = repo
    return repos


# --------------------------------------------------------------------------- layout


def test_expected_examples_exist() -> None:
    present = {path.name for path in EXAMPLES_DIR.iterdir() if path.is_dir()}
    assert present >= EXPECTED_EXAMPLES


@pytest.mark.parametrize("name", sorted(EXPECTED_EXAMPLES))
def test_example_has_readme_values_and_manifests(name: str) -> None:
    example = EXAMPLES_DIR / name
    readme = example / "README.md"
    assert readme.is_file() and readme.read_text().startswith("# ")
    assert "helm install" in readme.read_text() or "kubectl apply" in readme.read_text()
    assert list(example.glob(VALUES_PATTERN)), "no gitops-reloader-values.yaml"
    assert [p for p in manifest_files() if example_of(p) == example], "no manifests"


# --------------------------------------------------------------------------- validity


@pytest.mark.parametrize("path", manifest_files(), ids=rel)
def test_manifest_validates_strictly(path: Path) -> None:
    docs = load_documents(path)
    assert docs, "empty manifest file"
    problems = [problem for doc in docs for problem in validate_object(doc)]
    assert not problems, "\n".join(problems)


def pruned_paths(sent: Any, kept: Any, path: str = "") -> list[str]:
    """Where ``kept`` (the admitted object) lost a field that ``sent`` had."""
    if isinstance(sent, dict) and isinstance(kept, dict):
        return [p for key, value in sent.items()
                for p in ([f"{path}.{key}"] if key not in kept
                          else pruned_paths(value, kept[key], f"{path}.{key}"))]
    if isinstance(sent, list) and isinstance(kept, list):
        return [p for i, (a, b) in enumerate(zip(sent, kept, strict=True))
                for p in pruned_paths(a, b, f"{path}[{i}]")]
    return []


CRDS = CrdSchemas.load(default_crd_paths())


def crd_problems(doc: Obj) -> list[str]:
    """What the API test server would refuse or silently prune in ``doc``."""
    group, _, version = str(doc.get("apiVersion", "")).rpartition("/")
    name = (doc.get("metadata") or {}).get("name", "")
    try:
        kept = CRDS.admit(group, version, str(doc.get("kind")), name, json_copy(doc))
    except ApiError as exc:
        return [exc.body["message"]]
    return [f"{doc['kind']}/{name}: {p} would be pruned by the server" for p in pruned_paths(doc, kept)]


def json_copy(doc: Obj) -> Obj:
    return yaml.safe_load(yaml.safe_dump(doc))


@pytest.mark.parametrize("path", manifest_files(), ids=rel)
def test_custom_resources_validate_against_their_crd_schema(path: Path) -> None:
    problems = [problem for doc in load_documents(path) for problem in crd_problems(doc)]
    assert not problems, "\n".join(problems)


def test_flux_example_objects_are_checked_against_installed_crds() -> None:
    docs = load_documents(EXAMPLES_DIR / "flux-pull-request-sink" / "flux.yaml")
    checked = [doc["kind"] for doc in docs
               if CRDS.get(*doc["apiVersion"].split("/"), doc["kind"]) is not None]
    assert checked == ["GitRepository", "Kustomization"], "run `bash .ci/install-tools.sh`"
    broken = dict(docs[1], spec={k: v for k, v in docs[1]["spec"].items() if k != "prune"})
    assert crd_problems(broken) == [
        'Kustomization.kustomize.toolkit.fluxcd.io "payments" is invalid: spec.prune: Required value']


def test_argo_example_objects_are_checked_against_installed_crds() -> None:
    docs = [(path, doc) for path in manifest_files() for doc in load_documents(path)
            if str(doc.get("apiVersion", "")).startswith("argoproj.io/")]
    checked = sorted(rel(path) for path, doc in docs
                     if CRDS.get(*doc["apiVersion"].split("/"), doc["kind"]) is not None)
    assert checked == ["argocd-annotations-sink/application.yaml", "argocd-git-sink/application.yaml",
                       "helm-values-target/application.yaml"], "run `bash .ci/install-tools.sh`"
    app = docs[0][1]
    broken = dict(app, spec={k: v for k, v in app["spec"].items() if k not in ("destination", "project")})
    name = app["metadata"]["name"]
    assert crd_problems(broken) == [f'Application.argoproj.io "{name}" is invalid: '
                                    "[spec.destination: Required value, spec.project: Required value]"]
    typo = dict(app, spec=dict(app["spec"], syncPolicy={"automated": {"prune": True, "selfheal": True}}))
    assert crd_problems(typo) == [f"Application/{name}: .spec.syncPolicy.automated.selfheal would be pruned "
                                  "by the server"]


@pytest.mark.parametrize("path", values_files(), ids=rel)
def test_values_file_renders_and_validates(path: Path, helm: Path, helm_home: Path) -> None:
    lint = run_helm(helm, ["lint", "--strict", str(CHART_DIR), "--values", str(path)],
                    home=helm_home)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    docs = render(helm, CHART_DIR, home=helm_home, values_files=[path])
    problems = [problem for doc in docs for problem in validate_object(doc)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("chart", chart_dirs(), ids=rel)
def test_example_chart_lints_renders_and_validates(
    chart: Path, helm: Path, helm_home: Path, chart_objects: dict[Path, list[Obj]]
) -> None:
    lint = run_helm(helm, ["lint", "--strict", str(chart)], home=helm_home)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    docs = chart_objects[chart]
    assert docs
    problems = [problem for doc in docs for problem in validate_object(doc)]
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- consistency


@pytest.mark.parametrize("name", sorted(EXPECTED_EXAMPLES))
def test_our_annotations_are_known_and_resolvable(
    name: str, chart_objects: dict[Path, list[Obj]]
) -> None:
    example = EXAMPLES_DIR / name
    repos = example_repositories(example)
    found = example_workloads(example, chart_objects)
    assert found, "no workload in the example"
    for workload in found:
        label = f"{workload['kind']}/{workload['metadata']['name']}"
        annotations = workload["metadata"].get("annotations") or {}
        ours = {key for key in annotations if key.startswith("gitops-reloader.io/")}
        assert ours <= WORKLOAD_ANNOTATIONS, f"{label}: unknown {ours - WORKLOAD_ANNOTATIONS}"
        pod_template = workload["spec"].get("template") or workload["spec"]["podTemplate"]
        template = pod_template["metadata"].get("annotations") or {}
        ours_in_template = {key for key in template if key.startswith("gitops-reloader.io/")}
        assert ours_in_template <= POD_TEMPLATE_ANNOTATIONS, label
        sink = annotations.get("gitops-reloader.io/sink", "")
        assert not sink or sink in SINKS, f"{label}: unknown sink {sink!r}"
        if sink in ("git", "pull-request"):
            assert repos, f"{label}: sink {sink} but no repository in the values"
        if sink == "pull-request":
            assert any((r.get("pullRequest") or {}).get("enabled") for r in repos.values())
        repo_name = annotations.get("gitops-reloader.io/git-repo")
        if repo_name:
            assert repo_name in repos, f"{label}: git-repo {repo_name!r} not in the values"
        git_path = annotations.get("gitops-reloader.io/git-path")
        if git_path:
            target = example / "repo" / git_path
            assert target.is_file(), f"{label}: git-path {git_path} not under repo/"
            names = [d["metadata"]["name"] for d in load_documents(target)]
            assert workload["metadata"]["name"] in names
        git_target = annotations.get("gitops-reloader.io/git-target")
        if git_target:
            match = re.fullmatch(r"([^#]+)#([A-Za-z0-9_.\-/]+)", git_target)
            assert match, f"{label}: git-target must be path#yaml.path, got {git_target!r}"
            target = example / "repo" / match.group(1)
            assert target.is_file(), f"{label}: {match.group(1)} not under repo/"
            node: Any = yaml.safe_load(target.read_text())
            for key in match.group(2).split("."):
                assert isinstance(node, dict) and key in node, f"{label}: no {key} in target"
                node = node[key]
            assert isinstance(node, dict), f"{label}: the git-target must be a map"


def test_argo_tracking_ids_match_their_objects(chart_objects: dict[Path, list[Obj]]) -> None:
    for name in sorted(EXPECTED_EXAMPLES):
        for workload in example_workloads(EXAMPLES_DIR / name, chart_objects):
            tracking = (workload["metadata"].get("annotations") or {}).get(
                "argocd.argoproj.io/tracking-id")
            if not tracking:
                continue
            group = workload["apiVersion"].rsplit("/", 1)[0] if "/" in workload["apiVersion"] \
                else ""
            meta = workload["metadata"]
            assert tracking.split(":", 1)[1] == \
                f"{group}/{workload['kind']}:{meta['namespace']}/{meta['name']}"


def test_annotations_sink_example_tells_argo_cd_to_ignore_the_annotation() -> None:
    [app] = load_documents(EXAMPLES_DIR / "argocd-annotations-sink" / "application.yaml")
    assert app["kind"] == "Application"
    rules = app["spec"]["ignoreDifferences"]
    expressions = [expr for rule in rules for expr in rule.get("jqPathExpressions", [])]
    assert ('.spec.template.metadata.annotations."reloader.stakater.com/last-reloaded-from"'
            in expressions)
    assert "RespectIgnoreDifferences=true" in app["spec"]["syncPolicy"]["syncOptions"]
    values = yaml.safe_load(
        (EXAMPLES_DIR / "argocd-annotations-sink" / "gitops-reloader-values.yaml").read_text())
    assert values["reloader"]["reloadStrategy"] == "annotations"


def test_flux_example_points_at_the_configured_repository() -> None:
    example = EXAMPLES_DIR / "flux-pull-request-sink"
    docs = {doc["kind"]: doc for doc in load_documents(example / "flux.yaml")}
    source = docs["GitRepository"]
    kustomization = docs["Kustomization"]
    assert kustomization["spec"]["sourceRef"] == {"kind": "GitRepository",
                                                  "name": source["metadata"]["name"]}
    assert (example / "repo" / kustomization["spec"]["path"]).is_dir()
    repos = example_repositories(example)
    [repo] = repos.values()
    # flux bootstrap's ssh:// spelling, the controller's https:// url: one repository through its alias
    configured = RepositoryConfig(name=repo["name"], url=repo["url"], branch=repo["branch"],
                                  aliases=tuple(repo["aliases"]))
    config = GitConfig(repositories=(configured,))
    assert config.by_url(source["spec"]["url"], branch=source["spec"]["ref"]["branch"]) == [configured]
    assert repo["url"] != source["spec"]["url"]
    assert repo["pullRequest"]["host"] == "github"


@pytest.mark.parametrize("name", ["argocd-git-sink", "helm-values-target", "argocd-annotations-sink"])
def test_argo_applications_point_into_the_example_repo(name: str) -> None:
    example = EXAMPLES_DIR / name
    [app] = load_documents(example / "application.yaml")
    source = app["spec"]["source"]
    assert (example / "repo" / source["path"]).is_dir()
    for repo in example_repositories(example).values():
        assert repo["url"] == source["repoURL"]
