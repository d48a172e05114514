"""Issue 10, item 4: two tenants in one repository, end to end.

One manifest repository on a real ``git http-backend`` remote is shared by the
namespaces ``team-a`` and ``team-b`` through the ``tenants`` policy of
``--git-config``; a second repository belongs to ``kube-system`` only. In one batch
(one ConfigMap change per namespace), each tenant's own workloads are committed, and
every cross-tenant attempt — ``git-repo`` naming a repository the namespace may not
use, ``git-path`` and ``git-target`` into the other tenant's files, a namespace-less
document of the other tenant, a document of the workload's kind and name in another
namespace — is refused with a ``PolicyDenied`` Warning Event on the attempting
workload. The other tenant's files stay byte for byte what they were.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from git_setup import GitSetup
from kubernetes.client import ApiClient
from reload_helpers import GIT_TOKEN, call, configmap, create
from test_git_sink import (
    HASH_LINE,
    assert_no_new_commit,
    events,
    file_at,
    git_controller,
    git_workload,
    line_diff,
    put_data,
    wait_event,
)

from gitops_reloader.gitops.locate import (
    FLUX_NAME_LABEL,
    FLUX_NAMESPACE_LABEL,
    GIT_PATH_ANNOTATION,
    GIT_REPO_ANNOTATION,
    GIT_TARGET_ANNOTATION,
)
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

TOKEN = GIT_TOKEN
REPO = "manifests"
PLATFORM = "platform"
# A marker in every file of team-b: it must never show up in team-a's Events.
MARKER = "team-b-private-note-7f3a"


def deploy(name: str, namespace: str | None, owner: str) -> str:
    ns = f"  namespace: {namespace}\n" if namespace else ""
    return (f"# {owner}\n"
            f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n{ns}"
            f"spec:\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n"
            f"      labels:\n        app: {name}\n      annotations:\n        owner: {owner}\n    spec:\n"
            f"      containers:\n        - name: app\n          image: nginx\n")


TEAM_B_VALUES = f"# {MARKER}\nreplicaCount: 1\npodAnnotations:\n  owner: team-b\n"
FILES = {
    # team-a's own: a document naming the namespace, and a namespace-less one (documentNamespace)
    "apps/team-a/web.yaml": deploy("web", "team-a", "team-a"),
    "apps/team-a/app.yaml": deploy("app", None, "team-a"),
    # in team-a's directory, but declaring team-b's namespace
    "apps/team-a/cache.yaml": deploy("cache", "team-b", "team-a"),
    # in team-a's directory, namespace-less (team-a's by documentNamespace): bait for team-b
    "apps/team-a/frontend.yaml": deploy("frontend", None, "team-a"),
    # team-b's own
    "apps/team-b/web.yaml": deploy("web", "team-b", MARKER),
    # team-b's namespace-less document: its rule says nothing, so it is nobody's to guess
    "apps/team-b/api.yaml": deploy("api", None, MARKER),
    "charts/team-b/values.yaml": TEAM_B_VALUES,
}
PLATFORM_FILES = {"system/web.yaml": deploy("web", "team-a", "platform")}




@pytest.fixture
def git(tmp_path: Path, host: GitHostServer) -> GitSetup:
    setup = GitSetup(tmp_path, host)
    setup.token_file.write_text(TOKEN + "\n")
    return setup


def tenants_config(host: GitHostServer, token_file: Path) -> str:
    """The lines after the ``manifests`` entry: its tenants, then the ``platform`` repository."""
    return textwrap.indent(textwrap.dedent(f"""\
          tenants:
            - namespaces: [team-a]
              paths: ["apps/team-a/**", "charts/team-a/**"]
              documentNamespace: team-a
            - namespaces: [team-b]
              paths: ["apps/team-b/**", "charts/team-b/**"]
        - name: {PLATFORM}
          url: {host.repo_url(PLATFORM)}
          tokenFile: {token_file}
          username: bot
          tenants: [{{namespaces: [kube-system], paths: ["**"]}}]
        """), "  ")


def added_hash_only(before: str, after: str) -> bool:
    removed, added = line_diff(before, after)
    return removed == [] and len(added) == 1 and HASH_LINE.match(added[0]) is not None


def test_two_tenants_share_a_repository_and_cannot_reach_each_other(
        api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    git.create(FILES)
    git.create(PLATFORM_FILES, name=PLATFORM)
    git.configure(extra=tenants_config(host, git.token_file))
    for namespace in ("team-a", "team-b"):
        create(api_client, configmap("cfg", {"v": "1"}, namespace=namespace))
    legit = [("team-a", "web"), ("team-a", "app"), ("team-b", "web")]
    attacks = {
        ("team-a", "repo-hop"): {GIT_REPO_ANNOTATION: PLATFORM},
        ("team-a", "path-hop"): {GIT_PATH_ANNOTATION: "apps/team-b/web.yaml"},
        ("team-a", "target-hop"): {GIT_TARGET_ANNOTATION: "charts/team-b/values.yaml#podAnnotations"},
        ("team-a", "api"): {},        # scan: only team-b's namespace-less document declares it
        ("team-a", "cache"): {GIT_PATH_ANNOTATION: "apps/team-a/cache.yaml"},  # declares team-b
        ("team-b", "frontend"): {},   # scan: team-a's namespace-less document
        ("team-b", "cache"): {GIT_PATH_ANNOTATION: "apps/team-a/cache.yaml"},  # its own doc, team-a's file
    }
    for namespace, name in legit:
        create(api_client, git_workload(name, sources="cfg", namespace=namespace))
    for (namespace, name), attack in attacks.items():
        create(api_client, git_workload(name, sources="cfg", namespace=namespace, annotations=attack))

    with git_controller(api_client, git) as (app, _):
        put_data(api_client, "ConfigMap", "cfg", {"v": "2"}, namespace="team-a")
        put_data(api_client, "ConfigMap", "cfg", {"v": "2"}, namespace="team-b")

        # Every cross-tenant attempt is refused on the attempting workload, naming the policy.
        for namespace, name in attacks:
            event = wait_event(api_client, name, "PolicyDenied", namespace=namespace)
            assert event["type"] == "Warning"
            assert f"{namespace}/Deployment/{name}" in event["message"]
            assert MARKER not in event["message"]

        # The legitimate workloads of both tenants, in the same batches, are committed.
        def all_committed() -> bool:
            return all(added_hash_only(FILES[f"apps/{ns}/{name}.yaml"],
                                       file_at(host, f"apps/{ns}/{name}.yaml")) for ns, name in legit)

        wait_for(all_committed, timeout=30, message="the tenants' own workloads are committed")
        count = len(host.log(REPO))
        assert_no_new_commit(app, host, count)

        # Nothing else changed, byte for byte, in either repository.
        for path, text in FILES.items():
            if (path.split("/")[1], path.rsplit("/", 1)[-1].removesuffix(".yaml")) not in legit:
                assert host.read_file(REPO, path, "main") == text.encode(), path
        for path, text in PLATFORM_FILES.items():
            assert host.read_file(PLATFORM, path, "main") == text.encode(), path
        assert len(host.log(PLATFORM)) == 1

        # No workload was told anything of the other team's files.
        for namespace in ("team-a", "team-b"):
            for name in {n for ns, n in [*legit, *attacks] if ns == namespace}:
                for event in events(api_client, name, namespace):
                    assert MARKER not in str(event.get("message"))


def test_flux_labels_naming_another_tenants_kustomization_are_refused(
        api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    """A team-a workload labelled with team-b's Kustomization (``targetNamespace: team-b``).

    The labels are the tenant's to write, the Kustomization is not theirs: it deploys
    into team-b, so following it would edit team-b's file. Refused on the attempting
    workload, without naming the Kustomization's source, and team-b's file is untouched;
    team-b's own workload, deployed by that Kustomization, is committed.
    """
    git.create(FILES)
    git.configure(extra=tenants_config(host, git.token_file))
    call(api_client, "POST", "/apis/source.toolkit.fluxcd.io/v1/namespaces/flux-system/gitrepositories", {
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
        "metadata": {"name": "fleet", "namespace": "flux-system"},
        "spec": {"url": host.repo_url(REPO), "ref": {"branch": "main"}, "interval": "1m"}})
    call(api_client, "POST", "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations", {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "team-b", "namespace": "flux-system"},
        "spec": {"path": "./apps/team-b", "interval": "5m", "prune": True, "targetNamespace": "team-b",
                 "sourceRef": {"kind": "GitRepository", "name": "fleet"}}})
    flux_labels = {FLUX_NAME_LABEL: "team-b", FLUX_NAMESPACE_LABEL: "flux-system"}
    for namespace in ("team-a", "team-b"):
        create(api_client, configmap("cfg", {"v": "1"}, namespace=namespace))
        create(api_client, git_workload("web", sources="cfg", namespace=namespace, labels=flux_labels))

    with git_controller(api_client, git) as (app, _):
        put_data(api_client, "ConfigMap", "cfg", {"v": "2"}, namespace="team-a")
        put_data(api_client, "ConfigMap", "cfg", {"v": "2"}, namespace="team-b")
        event = wait_event(api_client, "web", "ManifestNotFound", namespace="team-a")
        assert event["type"] == "Warning"
        assert "team-a/Deployment/web" in event["message"]
        assert "applies into another namespace" in event["message"]
        for leak in (host.repo_url(REPO), "apps/team-b", MARKER):
            assert leak not in event["message"], event["message"]
        own = "apps/team-b/web.yaml"
        wait_for(lambda: added_hash_only(FILES[own], file_at(host, own)), timeout=30,
                 message="team-b's own workload is committed through its Kustomization")
        assert_no_new_commit(app, host, len(host.log(REPO)))
        for path, text in FILES.items():
            if path != "apps/team-b/web.yaml":
                assert host.read_file(REPO, path, "main") == text.encode(), path
