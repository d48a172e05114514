"""ACCEPTANCE "GitOps sinks" for the ``git`` sink, end to end.

A real git server (``git http-backend`` over HTTP on 127.0.0.1, token auth) holds the
manifest repository; the API test server holds the cluster; the controller runs
in-process with the git sink injected before start. ConfigMaps and Secrets are changed
through the official client, and the repository's history is inspected on the server.
"""

from __future__ import annotations

import base64
import difflib
import logging
import re
import textwrap
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest
from git_setup import REPO, GitSetup, commits, race_first_push, wait_commits
from kubernetes.client import ApiClient
from reload_helpers import GIT_TOKEN, call, configmap, create, events, metric, secret

from gitops_reloader.app import App
from gitops_reloader.config import load_config
from gitops_reloader.gitops.locate import (
    ARGOCD_TRACKING_ANNOTATION,
    FLUX_NAME_LABEL,
    FLUX_NAMESPACE_LABEL,
    FLUX_ORIGIN_ANNOTATION,
    GIT_PATH_ANNOTATION,
    GIT_REPO_ANNOTATION,
    GIT_TARGET_ANNOTATION,
)
from gitops_reloader.gitops.refresh import ARGOCD_REFRESH_ANNOTATION, FLUX_REQUESTED_AT_ANNOTATION
from gitops_reloader.gitops.scanindex import Candidates, DocRef
from gitops_reloader.hashing import configmap_hash, key_digests, keyed_digest, secret_hash, used_key_hash
from gitops_reloader.model import SourceKind
from gitops_reloader.sinks.git import GitSink
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.apiserver.faults import Fault
from gitops_reloader.testing.githost import GitHostServer, Symlink
from gitops_reloader.testing.harness import deployment, running_sink, settle, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

TOKEN = GIT_TOKEN
CONTROLLER_NS = "gitops-system"
HASH_LINE = re.compile(r"^ +gitops-reloader\.io/config-hash: (\"?)[0-9a-f]{64}\1\r?\n?$")

WEB_FILE = "apps/web/web.yaml"
WEB_YAML = textwrap.dedent("""\
    # Web tier. Reviewed by the platform team; keep the comments.
    apiVersion: v1
    kind: Service
    metadata:
      name: web   # the public service
      namespace: ns
    spec:
      ports:
        - port: 80
    ---
    # The deployment itself
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: web
      namespace: ns
      annotations:
        team: "platform"     # quoted on purpose
    spec:
      replicas: 2
      selector:
        matchLabels: {app: web}
      template:
        metadata:
          labels:
            app: web
          annotations:
            prometheus.io/scrape: 'true'
        spec:
          containers:
            - name: app
              image: nginx:1.25    # pinned
              envFrom:
                - configMapRef: {name: app-config}
    ---
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: unrelated
    data:
      long: "a long value that a YAML dumper with the default width of eighty would wrap onto two lines"
    """)


def manifest(name: str, *, namespace: str | None = "ns", kind: str = "Deployment",
             api_version: str = "apps/v1", annotations: bool = True) -> str:
    """A small workload manifest, with or without pod-template annotations."""
    ns_line = f"  namespace: {namespace}\n" if namespace else ""
    template_annotations = "      annotations:\n        owner: team-a\n" if annotations else ""
    return (f"apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {name}\n{ns_line}"
            f"spec:\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n"
            f"      labels:\n        app: {name}\n{template_annotations}    spec:\n"
            f"      containers:\n        - name: app\n          image: nginx\n")


# --------------------------------------------------------------------------- fixtures






@contextmanager
def git_controller(api_client: ApiClient, setup: GitSetup, *flags: str,
                   sink_hook: Any = None, clock: Any = None) -> Iterator[tuple[App, GitSink]]:
    """Build the App (which wires the git sink), let ``sink_hook`` see the sink, run, stop."""
    config = load_config(setup.flags(*flags),
                         environ={"HOME": str(setup.tmp / "home"), "POD_NAMESPACE": CONTROLLER_NS})
    with running_sink(api_client, config, "git", GitSink, sink_hook, clock) as running:
        yield running


def git_workload(name: str, *, sources: str = "app-config", secrets: str = "",
                 annotations: Mapping[str, str] | None = None, labels: Mapping[str, str] | None = None,
                 namespace: str = "ns") -> dict[str, Any]:
    """A Deployment on the git sink, reloading on the listed ConfigMaps/Secrets."""
    own = {"gitops-reloader.io/sink": "git"}
    if sources:
        own["configmap.reloader.stakater.com/reload"] = sources
    if secrets:
        own["secret.reloader.stakater.com/reload"] = secrets
    own.update(annotations or {})
    body = deployment(name, namespace=namespace, annotations=own)
    if labels:
        body["metadata"]["labels"] = dict(labels)
    return body


def put_data(api_client: ApiClient, kind: str, name: str, data: Mapping[str, str],
             namespace: str = "ns") -> None:
    """Replace a ConfigMap's or Secret's data (PUT), without waiting."""
    plural = "configmaps" if kind == "ConfigMap" else "secrets"
    path = f"/api/v1/namespaces/{namespace}/{plural}/{name}"
    current = call(api_client, "GET", path)
    if kind == "Secret":
        current["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    else:
        current["data"] = dict(data)
    call(api_client, "PUT", path, current)


def assert_no_new_commit(app: App, host: GitHostServer, count: int, *, wait: float = 2.0) -> None:
    """Nothing more is committed: the controller is idle and the history stays put."""
    settle(app, timeout=20)
    time.sleep(wait)
    settle(app, timeout=20)
    assert len(commits(host)) == count, [s for _, s in commits(host)]


def file_at(host: GitHostServer, path: str, ref: str = "main") -> str:
    data = host.read_file(REPO, path, ref)
    assert data is not None, path
    return data.decode()


def line_diff(before: str, after: str) -> tuple[list[str], list[str]]:
    """(removed lines, added lines) between two texts, line endings kept."""
    removed: list[str] = []
    added: list[str] = []
    for line in difflib.ndiff(before.splitlines(keepends=True), after.splitlines(keepends=True)):
        if line.startswith("- "):
            removed.append(line[2:])
        elif line.startswith("+ "):
            added.append(line[2:])
    return removed, added


def wait_event(api_client: ApiClient, name: str, reason: str, *, namespace: str = "ns",
               timeout: float = 20.0) -> dict[str, Any]:
    def find() -> dict[str, Any] | None:
        for event in events(api_client, name, namespace):
            if event.get("reason") == reason:
                return event
        return None

    return wait_for(find, timeout=timeout, message=f"{reason} event on {name}")


def digest_key_secret(api_client: ApiClient) -> bytes:
    """The digest-key Secret in the controller's namespace, with a known key (returned)."""
    key = bytes(range(32))
    create(api_client, {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "gitops-reloader-digest-key", "namespace": CONTROLLER_NS},
        "data": {"digest-key": base64.b64encode(key).decode()}})
    return key


def hash_value(text: str) -> str | None:
    match = re.search(r"gitops-reloader\.io/config-hash: \"?([0-9a-f]{64})", text)
    return match.group(1) if match else None


# --------------------------------------------------------------------------- one commit, one line


def test_configmap_change_commits_only_the_config_hash_line(server: ApiServer, api_client: ApiClient,
                                                            git: GitSetup, host: GitHostServer) -> None:
    git.create({WEB_FILE: WEB_YAML, "README.md": "# manifests\n"})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    with git_controller(api_client, git) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        log = wait_commits(host, 2)
        after = file_at(host, WEB_FILE)
        removed, added = line_diff(WEB_YAML, after)
        assert removed == []
        assert len(added) == 1 and HASH_LINE.match(added[0]), added
        # Inserted under spec.template.metadata.annotations, after the existing entry.
        assert "        prometheus.io/scrape: 'true'\n" + added[0] in after
        assert log[0][1] == "reload: web (configmap/app-config changed)"
        full = host.all_history_text(REPO)
        assert "Author:     Reloader Bot <reloader@example.com>" in full
        assert "ns/Deployment/web in apps/web/web.yaml: ConfigMap ns/app-config" in full
        assert_no_new_commit(app, host, 2)

        put_data(api_client, "ConfigMap", "app-config", {"url": "c"})
        wait_commits(host, 3)
        again = file_at(host, WEB_FILE)
        removed, added = line_diff(after, again)
        assert len(removed) == 1 and len(added) == 1
        assert HASH_LINE.match(removed[0]) and HASH_LINE.match(added[0])
        assert hash_value(after) != hash_value(again)
        # The commit is on the server a moment before the push returns and is counted.
        wait_for(lambda: metric(app, "git_commits_total", repo=REPO) == 2.0, message="2 commits counted")
        # The live workload is never patched by the git sink.
        live = call(api_client, "GET", "/apis/apps/v1/namespaces/ns/deployments/web")
        assert "gitops-reloader.io/config-hash" not in str(live)


def test_annotations_map_is_created_when_missing(api_client: ApiClient, git: GitSetup,
                                                 host: GitHostServer) -> None:
    original = manifest("web", annotations=False)
    git.create({"web.yaml": original})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        removed, added = line_diff(original, file_at(host, "web.yaml"))
        assert removed == []
        assert added[0] == "      annotations:\n" and HASH_LINE.match(added[1]) and len(added) == 2


def test_several_sources_and_workloads_in_one_window_give_one_commit(
        api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    git.create({"apps/web.yaml": manifest("web"), "apps/worker.yaml": manifest("worker"),
                "apps/api.yaml": manifest("api")})
    git.configure()
    for name in ("app-config", "feature-flags"):
        create(api_client, configmap(name, {"v": "1"}))
    create(api_client, secret("db", {"password": "one"}))
    create(api_client, git_workload("web", sources="app-config,feature-flags"))
    create(api_client, git_workload("worker", sources="app-config", secrets="db"))
    create(api_client, git_workload("api", sources="feature-flags"))
    with git_controller(api_client, git) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"v": "2"})
        put_data(api_client, "ConfigMap", "feature-flags", {"v": "2"})
        put_data(api_client, "Secret", "db", {"password": "two"})
        log = wait_commits(host, 2)
        assert_no_new_commit(app, host, 2)
        subject = log[0][1]
        assert subject.startswith("reload: ") and all(w in subject for w in ("web", "worker", "api"))
        for path in ("apps/web.yaml", "apps/worker.yaml", "apps/api.yaml"):
            assert hash_value(file_at(host, path)) is not None, path
        assert metric(app, "git_commits_total", repo=REPO) == 1.0
        assert metric(app, "change_to_emit_seconds_count", sink="git") == 3.0  # one per workload


def test_restart_and_relist_with_nothing_changed_make_no_commit(
        server: ApiServer, api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    git.create({WEB_FILE: WEB_YAML})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
    # A new controller over the same cache directory, then a relist after a compaction.
    with git_controller(api_client, git, "--sync-after-restart") as (app, _):
        assert_no_new_commit(app, host, 2)
        # Move the global resourceVersion past every informer's, so the compaction forces a relist.
        call(api_client, "POST", "/apis/coordination.k8s.io/v1/namespaces/ns/leases",
             {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "bump"}})
        server.restart(compact=True)
        wait_for(lambda: metric(app, "watch_restarts_total", resource="configmaps", reason="expired") > 0,
                 timeout=15, message="configmaps relisted after the compaction")
        assert_no_new_commit(app, host, 2, wait=3.0)
        # Still alive: a real change is committed.
        put_data(api_client, "ConfigMap", "app-config", {"url": "c"})
        wait_commits(host, 3)


# --------------------------------------------------------------------------- push races


def test_remote_moved_on_before_the_push_is_fetched_and_reapplied(
        api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    git.create({WEB_FILE: WEB_YAML, "README.md": "# manifests\n"})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    other: list[str] = []
    with git_controller(api_client, git, sink_hook=race_first_push(host, other)) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        log = wait_commits(host, 3)
        assert_no_new_commit(app, host, 3)
        assert [s for _, s in log] == ["reload: web (configmap/app-config changed)",
                                       "commit by someone else", "initial"]
        assert log[1][0] == other[0]  # their commit is kept, ours is on top: no force push
        assert file_at(host, "README.md").endswith("edited by a human\n")
        assert hash_value(file_at(host, WEB_FILE)) is not None
        assert metric(app, "git_push_rejections_total", repo=REPO) == 1.0


def test_commit_to_the_same_file_during_the_window_is_kept(
        api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    git.create({WEB_FILE: WEB_YAML})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    with git_controller(api_client, git) as (app, sink):
        with sink.repository(REPO).lock:  # the sink's clone is now behind the human's commit
            sink.repository(REPO).sync()
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        human = WEB_YAML.replace("  replicas: 2\n", "  replicas: 5\n")
        host.commit_directly(REPO, {WEB_FILE: human}, message="scale web to 5")  # within the window
        log = wait_commits(host, 3)
        assert_no_new_commit(app, host, 3)
        assert [s for _, s in log][1:] == ["scale web to 5", "initial"]
        removed, added = line_diff(human, file_at(host, WEB_FILE))
        assert removed == [] and len(added) == 1 and HASH_LINE.match(added[0])


# --------------------------------------------------------------------------- finding the manifest


def test_explicit_annotations_name_repository_and_file(api_client: ApiClient, git: GitSetup,
                                                       host: GitHostServer) -> None:
    decoy = manifest("web")
    git.create({"clusters/prod/web.yaml": manifest("web"), "clusters/staging/web.yaml": decoy})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web", annotations={
        GIT_REPO_ANNOTATION: host.repo_url(REPO).removesuffix(".git"),  # a URL naming the repository
        GIT_PATH_ANNOTATION: "./clusters/prod/web.yaml"}))
    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        assert hash_value(file_at(host, "clusters/prod/web.yaml")) is not None
        assert file_at(host, "clusters/staging/web.yaml") == decoy


def test_argocd_tracking_id_leads_to_the_application_path(api_client: ApiClient, git: GitSetup,
                                                          host: GitHostServer) -> None:
    copy = manifest("web")
    git.create({"apps/argo/web.yaml": manifest("web"), "apps/other/web.yaml": copy})
    git.configure()
    url = host.repo_url(REPO)
    call(api_client, "POST", "/apis/argoproj.io/v1alpha1/namespaces/team-a/applications", {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "web-app", "namespace": "team-a"},
        "spec": {"project": "default",
                 "source": {"repoURL": url, "path": "apps/argo", "targetRevision": "main"},
                 "destination": {"server": "https://kubernetes.default.svc", "namespace": "ns"}}})
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web", annotations={
        ARGOCD_TRACKING_ANNOTATION: "team-a_web-app:apps/Deployment:ns/web"}))
    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        assert hash_value(file_at(host, "apps/argo/web.yaml")) is not None
        assert file_at(host, "apps/other/web.yaml") == copy
        app_obj = wait_for(lambda: (call(api_client, "GET",
                                         "/apis/argoproj.io/v1alpha1/namespaces/team-a/applications/web-app")
                                    ["metadata"].get("annotations") or {}).get(ARGOCD_REFRESH_ANNOTATION))
        assert app_obj == "normal"


def test_flux_labels_lead_to_kustomization_and_git_repository(api_client: ApiClient, git: GitSetup,
                                                              host: GitHostServer) -> None:
    other = manifest("web")
    git.create({"clusters/prod/apps/web/deploy.yaml": manifest("web"), "clusters/dev/web.yaml": other})
    git.configure()
    flux = "/apis/source.toolkit.fluxcd.io/v1/namespaces/flux-system/gitrepositories"
    call(api_client, "POST", flux, {
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
        "metadata": {"name": "fleet", "namespace": "flux-system"},
        "spec": {"url": host.repo_url(REPO), "ref": {"branch": "main"}, "interval": "1m"}})
    call(api_client, "POST", "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations", {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "flux-system"},
        "spec": {"path": "./clusters/prod", "interval": "5m", "prune": True,
                 "sourceRef": {"kind": "GitRepository", "name": "fleet"}}})
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload(
        "web", labels={FLUX_NAME_LABEL: "apps", FLUX_NAMESPACE_LABEL: "flux-system"},
        annotations={FLUX_ORIGIN_ANNOTATION: "path: apps/web/deploy.yaml\n"}))
    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        assert hash_value(file_at(host, "clusters/prod/apps/web/deploy.yaml")) is not None
        assert file_at(host, "clusters/dev/web.yaml") == other
        for plural, version in (("gitrepositories", "source.toolkit.fluxcd.io/v1"),
                                ("kustomizations", "kustomize.toolkit.fluxcd.io/v1")):
            path = f"/apis/{version}/namespaces/flux-system/{plural}"
            name = "fleet" if plural == "gitrepositories" else "apps"
            wait_for(lambda p=path, n=name: (call(api_client, "GET", f"{p}/{n}")["metadata"]
                                             .get("annotations") or {}).get(FLUX_REQUESTED_AT_ANNOTATION),
                     message=f"requestedAt on {plural}")


def test_scan_finds_the_document_by_kind_name_and_namespace(api_client: ApiClient, git: GitSetup,
                                                            host: GitHostServer) -> None:
    elsewhere = manifest("web", namespace="other")
    statefulset = manifest("web", kind="StatefulSet")
    git.create({"a/web-other-ns.yaml": elsewhere, "b/web-sts.yaml": statefulset,
                "c/deep/dir/web.yml": manifest("web")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        assert hash_value(file_at(host, "c/deep/dir/web.yml")) is not None
        assert file_at(host, "a/web-other-ns.yaml") == elsewhere
        assert file_at(host, "b/web-sts.yaml") == statefulset


def test_a_wrong_scan_index_hint_never_edits_another_document(api_client: ApiClient, git: GitSetup,
                                                               host: GitHostServer) -> None:
    original = manifest("api") + "---\n" + manifest("web")
    git.create({"apps/both.yaml": original})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))

    def misnumber(sink: GitSink) -> None:
        index = sink.repository(REPO).index
        real = index.lookup

        def lookup(**kwargs: Any) -> Candidates:
            found = real(**kwargs)
            return Candidates(tuple(DocRef(r.path, 1 - r.doc_index) for r in found.exact), found.loose)

        index.lookup = lookup  # type: ignore[method-assign]

    with git_controller(api_client, git, sink_hook=misnumber):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        after = file_at(host, "apps/both.yaml")
        api_doc, web_doc = after.split("---\n")
        assert api_doc == manifest("api")
        removed, added = line_diff(manifest("web"), web_doc)
        assert removed == [] and len(added) == 1 and HASH_LINE.match(added[0])


def test_helm_values_file_as_target(api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    values = textwrap.dedent("""\
        # Values for the web chart.
        replicaCount: 2
        image:
          repository: nginx   # upstream
          tag: "1.25"
        podAnnotations:
          prometheus.io/scrape: "true"
        resources: {}
        """)
    git.create({"charts/web/values.yaml": values, "charts/web/templates/deploy.yaml":
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n"})
    # No Argo CD Application deploys it here: the tenancy policy must allow the values file.
    git.configure(extra="    tenants: [{namespaces: [ns], paths: ['charts/web/**']}]\n")
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web", annotations={
        GIT_TARGET_ANNOTATION: "charts/web/values.yaml#podAnnotations"}))
    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        after = file_at(host, "charts/web/values.yaml")
        removed, added = line_diff(values, after)
        assert removed == [] and len(added) == 1 and HASH_LINE.match(added[0])
        assert '  prometheus.io/scrape: "true"\n' + added[0] in after


# --------------------------------------------------------------------------- secrets


def test_secret_change_writes_only_a_keyed_digest(api_client: ApiClient, git: GitSetup, host: GitHostServer,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    git.create({"apps/db.yaml": manifest("db-client")})
    git.configure()
    value = "hunter2-correct-horse"
    create(api_client, secret("db", {"password": "first-value"}))
    create(api_client, git_workload("db-client", sources="", secrets="db"))
    caplog.set_level(logging.DEBUG)
    with git_controller(api_client, git) as (app, _):
        put_data(api_client, "Secret", "db", {"password": value})
        wait_commits(host, 2)
        settle(app)
        encoded = base64.b64encode(f"{value}".encode()).decode()
        plain = secret_hash({"password": encoded})
        history = host.all_history_text(REPO)
        for needle in (value, encoded, plain):
            assert needle not in history
            assert needle not in caplog.text
        assert hash_value(file_at(host, "apps/db.yaml")) not in (None, plain)
        assert "secret/db" in commits(host)[0][1]
        # The HMAC key was generated into a Secret in the controller's namespace.
        key_secret = call(api_client, "GET", f"/api/v1/namespaces/{CONTROLLER_NS}/secrets/"
                                             "gitops-reloader-digest-key")
        key_b64 = key_secret["data"]["digest-key"]
        assert len(base64.b64decode(key_b64)) == 32
        assert key_b64 not in caplog.text and key_b64 not in history


@pytest.mark.parametrize("race", [False, True], ids=["existing-key", "lost-create-race"])
def test_digest_is_keyed_with_the_cluster_secret(server: ApiServer, api_client: ApiClient, git: GitSetup,
                                                 host: GitHostServer, race: bool) -> None:
    git.create({"apps/web.yaml": manifest("web")})
    git.configure()
    key = digest_key_secret(api_client)
    if race:  # another replica created the Secret between our read and our create
        server.add_fault(Fault(verb="get", resource="secrets", status=404, times=1,
                               namespace=CONTROLLER_NS, name="gitops-reloader-digest-key"))
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        expected = keyed_digest(key, [("ConfigMap/ns/app-config", configmap_hash({"url": "b"}))])
        assert hash_value(file_at(host, "apps/web.yaml")) == expected
    stored = call(api_client, "GET", f"/api/v1/namespaces/{CONTROLLER_NS}/secrets/gitops-reloader-digest-key")
    assert base64.b64decode(stored["data"]["digest-key"]) == key  # never overwritten
    # The test's own create, plus the losing replica's create answered 409.
    assert server.request_counts().get(("create", "secrets"), 0) == (2 if race else 1)


# --------------------------------------------------------------------------- failures


def test_missing_manifest_warns_and_other_workloads_still_commit(
        api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    git.create({"apps/web.yaml": manifest("web")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    create(api_client, git_workload("ghost"))
    with git_controller(api_client, git) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        event = wait_event(api_client, "ghost", "ManifestNotFound")
        assert event["type"] == "Warning"
        assert "ns/Deployment/ghost" in event["message"]
        assert commits(host)[0][1] == "reload: web (configmap/app-config changed)"
        assert metric(app, "git_errors_total", repo=REPO, reason="ManifestNotFound") >= 1
        assert_no_new_commit(app, host, 2)


def test_unparsable_yaml_gives_a_warning_event(api_client: ApiClient, git: GitSetup,
                                               host: GitHostServer) -> None:
    broken = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: [broken\n"
    git.create({"apps/broken.yaml": broken, "apps/web.yaml": manifest("web")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("pinned", annotations={GIT_PATH_ANNOTATION: "apps/broken.yaml"}))
    create(api_client, git_workload("lost"))
    create(api_client, git_workload("web"))
    with git_controller(api_client, git) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        event = wait_event(api_client, "pinned", "ManifestUnparsable")
        assert "apps/broken.yaml" in event["message"] and "[broken" not in event["message"]
        lost = wait_event(api_client, "lost", "ManifestNotFound")
        assert "could not be parsed (apps/broken.yaml)" in lost["message"]
        assert file_at(host, "apps/broken.yaml") == broken
        assert_no_new_commit(app, host, 2)


def test_operator_owned_workload_is_skipped_with_an_event(api_client: ApiClient, git: GitSetup,
                                                          host: GitHostServer) -> None:
    git.create({"apps/web.yaml": manifest("web")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    body = git_workload("web")
    body["metadata"]["ownerReferences"] = [{
        "apiVersion": "example.com/v1", "kind": "WebApp", "name": "web", "uid": "1234", "controller": True}]
    create(api_client, body)
    with git_controller(api_client, git) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        event = wait_event(api_client, "web", "OperatorOwned")
        assert "WebApp web" in event["message"]
        assert_no_new_commit(app, host, 1)


def test_host_down_retries_with_backoff_and_nothing_is_lost(api_client: ApiClient, git: GitSetup,
                                                            host: GitHostServer) -> None:
    git.create({"apps/web.yaml": manifest("web")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    with git_controller(api_client, git) as (app, _):
        host.set_down(True)
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        event = wait_event(api_client, "web", "ReloadFailed")
        assert event["type"] == "Warning" and "git" in event["message"]
        wait_for(lambda: metric(app, "git_errors_total", repo=REPO, reason="sync") >= 2, timeout=20,
                 message="a retry")
        assert len(commits(host)) == 1
        host.set_down(False)
        wait_commits(host, 2, timeout=30)
        assert hash_value(file_at(host, "apps/web.yaml")) is not None
        assert metric(app, "queue_retries_total") >= 1


def test_remote_rejecting_pushes_for_a_while_then_the_commit_lands_once(api_client: ApiClient, git: GitSetup,
                                                                      host: GitHostServer) -> None:
    git.create({"apps/web.yaml": manifest("web")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    with git_controller(api_client, git) as (app, _):
        host.reject_pushes(3)
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2, timeout=60)
        settle(app, timeout=30)
        assert len(commits(host)) == 2  # exactly one new commit, nothing pushed twice
        assert hash_value(file_at(host, "apps/web.yaml")) is not None
        assert metric(app, "queue_retries_total") >= 1


def test_wrong_token_gives_a_clear_error_without_the_token(api_client: ApiClient, git: GitSetup,
                                                           host: GitHostServer,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    git.create({"apps/web.yaml": manifest("web")})
    wrong = "ghp_wrongTokenValue_0042"
    bad_file = git.tmp / "wrong-token"
    bad_file.write_text(wrong)
    git.configure(token_file=bad_file)
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    caplog.set_level(logging.DEBUG)
    with git_controller(api_client, git):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        event = wait_event(api_client, "web", "ReloadFailed")
        assert "refused the credentials" in event["message"]
        texts = [event["message"], caplog.text]
        for form in (wrong, base64.b64encode(f"bot:{wrong}".encode()).decode()):
            assert all(form not in text for text in texts)
        assert len(commits(host)) == 1


# --------------------------------------------------------------------------- failure isolation

VALUES = textwrap.dedent("""\
    # Values shared by two teams.
    replicaCount: 2
    securityContext:
      runAsNonRoot: true
    podAnnotations: {}
    """)


def test_one_workloads_unsafe_path_or_refused_target_never_blocks_the_batch(
        api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    """Issue 10 item 5: symlinked paths and refused targets are permanent and per workload."""
    files = {"apps/web.yaml": manifest("web"), "apps/real.yaml": manifest("linked"),
             "apps/viadir.yaml": manifest("viadir"),
             "apps/link.yaml": Symlink("real.yaml"), "teams/b": Symlink("../apps"), "values.yaml": VALUES}
    git.create(files)
    # The tenancy policy lets ns write everything here, so the git-target checks of the
    # editor itself (annotationKeys, no invented parents) are what refuse the bad targets.
    git.configure(extra="    tenants: [{namespaces: [ns], paths: ['**']}]\n")
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    bad = {"linked": {GIT_PATH_ANNOTATION: "apps/link.yaml"},
           "viadir": {GIT_PATH_ANNOTATION: "teams/b/viadir.yaml"},
           "escalate": {GIT_TARGET_ANNOTATION: "values.yaml#securityContext"},
           "invent": {GIT_TARGET_ANNOTATION: "values.yaml#controller.podAnnotations"}}
    for name, own in bad.items():
        create(api_client, git_workload(name, annotations=own))
    with git_controller(api_client, git, "--max-retries=100") as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        log = wait_commits(host, 2)
        assert log[0][1] == "reload: web (configmap/app-config changed)"
        reasons = {"linked": "UnsafeManifestPath", "viadir": "UnsafeManifestPath",
                   "escalate": "GitTargetRefused", "invent": "ManifestUnparsable"}
        own_text = {"linked": "apps/link.yaml", "viadir": "teams/b",
                    "escalate": "podAnnotations, annotations", "invent": "controller does not exist"}
        for name, reason in reasons.items():
            event = wait_event(api_client, name, reason)
            assert event["type"] == "Warning"
            assert own_text[name] in event["message"]
            others = [f"ns/Deployment/{other}" for other in [*bad, "web"] if other != name]
            others += [text for other, text in own_text.items() if other != name]
            assert not any(text in event["message"] for text in others), event["message"]
        assert_no_new_commit(app, host, 2)
        # Permanent: reported once, not retried with backoff until --max-retries.
        assert metric(app, "git_errors_total", repo=REPO, reason="UnsafeManifestPath") == 2.0
        assert metric(app, "git_errors_total", repo=REPO, reason="GitTargetRefused") == 1.0
        assert file_at(host, "values.yaml") == VALUES
        assert file_at(host, "apps/real.yaml") == manifest("linked")
        assert file_at(host, "apps/link.yaml") == "real.yaml"  # still the symlink


VAULT_YAML = textwrap.dedent("""\
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: vaulted
      namespace: ns
    spec:
      template:
        metadata:
          annotations:
            vault.hashicorp.com/agent-inject: "true"
            vault.hashicorp.com/agent-inject-template-db: |
              {{- with secret "database/creds/app" -}}
              postgres://{{ .Data.username }}:{{ .Data.password }}@db/app
              {{- end }}
        spec:
          containers:
            - name: app
              image: app:1
    """)


def test_vault_templates_are_content_but_helm_chart_templates_are_refused(
        api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    """Issue 11: {{ in a scalar is content; a chart's templates/ directory is never edited."""
    chart_template = manifest("charted")  # parses, but Helm renders it: not the deployed text
    git.create({"apps/vault.yaml": VAULT_YAML, "charts/web/Chart.yaml": "apiVersion: v2\nname: web\n",
                "charts/web/templates/deploy.yaml": chart_template})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("vaulted"))
    create(api_client, git_workload("charted", annotations={
        GIT_PATH_ANNOTATION: "charts/web/templates/deploy.yaml"}))
    with git_controller(api_client, git) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        wait_commits(host, 2)
        removed, added = line_diff(VAULT_YAML, file_at(host, "apps/vault.yaml"))
        assert removed == [] and len(added) == 1 and HASH_LINE.match(added[0])
        event = wait_event(api_client, "charted", "ManifestUnparsable")
        assert "template of the Helm chart in charts/web/" in event["message"]
        assert file_at(host, "charts/web/templates/deploy.yaml") == chart_template
        assert_no_new_commit(app, host, 2)


# --------------------------------------------------------------------------- key-level reload


def test_used_keys_digest_covers_the_used_keys_only(api_client: ApiClient, git: GitSetup,
                                                    host: GitHostServer) -> None:
    """--reload-on=used-keys: the committed digest is the keyed digest of the hash over the
    keys the workload reads; a change of another key commits nothing, and a restart with
    --sync-after-restart after such a change finds the manifest current."""
    git.create({"apps/web.yaml": manifest("web")})
    git.configure()
    key = digest_key_secret(api_client)
    create(api_client, configmap("app-config", {"url": "a", "other": "x"}))
    body = git_workload("web")
    body["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "URL", "valueFrom": {"configMapKeyRef": {"name": "app-config", "key": "url"}}}]
    create(api_client, body)
    flags = ("--reload-on=used-keys", "--sync-after-restart")

    def expected(data: dict[str, str]) -> str:
        used = used_key_hash(key_digests(SourceKind.CONFIGMAP, {"data": data}), {"url"})
        assert used is not None
        return keyed_digest(key, [("ConfigMap/ns/app-config", used)])

    with git_controller(api_client, git, *flags) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b", "other": "x"})
        wait_commits(host, 2)
        assert hash_value(file_at(host, "apps/web.yaml")) == expected({"url": "b", "other": "x"})
        assert hash_value(file_at(host, "apps/web.yaml")) != keyed_digest(
            key, [("ConfigMap/ns/app-config", configmap_hash({"url": "b", "other": "x"}))])
        put_data(api_client, "ConfigMap", "app-config", {"url": "b", "other": "y"})
        assert_no_new_commit(app, host, 2)
        assert metric(app, "unused_key_changes_total", kind="ConfigMap") == 1
    put_data(api_client, "ConfigMap", "app-config", {"url": "b", "other": "z"})
    with git_controller(api_client, git, *flags) as (app, _):
        assert_no_new_commit(app, host, 2)
