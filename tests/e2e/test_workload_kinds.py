"""Issue 22: Knative Services, OpenKruise workloads and configured custom kinds, end to end.

Every object here is stored by the API test server through its CRD schema (Knative Serving
v1.10.1 rebuilt from npm ``@kubernetes-models/knative``, OpenKruise v1.9.0 written for the
server; docs/api-test-server.md), so a reload that wrote a field the CRD refuses fails the
write. The server serves those kinds only once a test installs the CRD (``serve_crd``), as
a cluster does. No Knative webhook runs: objects are created as it would leave them (it
names an unnamed container ``user-container``), and its revision-name rule
(``RevisionTemplateSpec.VerifyNameChange``) is checked on what the controller wrote.
"""

from __future__ import annotations

import json
import logging
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from git_setup import GitSetup
from kubernetes.client import ApiClient
from reload_helpers import call, configmap, create, set_cm_data
from test_git_sink import (
    file_at,
    git_controller,
    hash_value,
    line_diff,
    wait_commits,
    wait_event,
)
from test_plan import run_plan

from gitops_reloader import cli
from gitops_reloader.app import App
from gitops_reloader.config import load_config
from gitops_reloader.errors import ConfigError
from gitops_reloader.hashing import configmap_hash
from gitops_reloader.kinds import BUILTIN_KINDS, KindSpec
from gitops_reloader.kube.permissions import PermissionsMissing, required_permissions
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.apiserver.authz import rules_from_role
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import running_controller, settle, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

CM_ENV = "STAKATER_APP_CFG_CONFIGMAP"
AUTO = {"reloader.stakater.com/auto": "true"}
LAST = "reloader.stakater.com/last-reloaded-from"
DISCOVERY = "--kind-discovery-interval=100ms"


@dataclass(frozen=True)
class Kind:
    spec: KindSpec

    @property
    def id(self) -> str:
        return self.spec.key

    @property
    def api_version(self) -> str:
        """The version the bundled CRDs serve (OpenKruise v1.9.0: a CloneSet at v1alpha1, its
        row's fallback; master's v1beta1 is tested in test_kind_waves.py)."""
        versions = self.spec.fallback_versions
        return f"{self.spec.group}/{versions[0]}" if versions else self.spec.api_version

    def body(self, name: str, *, annotations: dict[str, str] | None = None,
             template_name: str | None = None) -> dict[str, Any]:
        """An object of the kind that uses ConfigMap app-cfg through envFrom."""
        container = {"name": "user-container" if self.spec.kind == "Service" else "app",
                     "image": "nginx", "envFrom": [{"configMapRef": {"name": "app-cfg"}}]}
        template: dict[str, Any] = {"metadata": {"labels": {"app": name}},
                                    "spec": {"containers": [container]}}
        if template_name:
            template["metadata"]["name"] = template_name
        spec: dict[str, Any] = {"template": template}
        if self.spec.group == "apps.kruise.io":
            spec["selector"] = {"matchLabels": {"app": name}}
            if self.spec.kind != "DaemonSet":
                spec["replicas"] = 1
            if self.spec.kind == "StatefulSet":
                spec["serviceName"] = name
        return {"apiVersion": self.api_version, "kind": self.spec.kind,
                "metadata": {"name": name, "namespace": "ns", "annotations": dict(annotations or {})},
                "spec": spec}

    def path(self, name: str | None = None) -> str:
        base = f"/apis/{self.api_version}/namespaces/ns/{self.spec.plural}"
        return f"{base}/{name}" if name else base

    def get(self, api_client: ApiClient, name: str) -> dict[str, Any]:
        return call(api_client, "GET", self.path(name))

    def template(self, api_client: ApiClient, name: str) -> dict[str, Any]:
        return self.get(api_client, name)["spec"]["template"]


KINDS = [Kind(spec) for spec in BUILTIN_KINDS]
OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
WORKER_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "workers.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"kind": "Worker", "listKind": "WorkerList", "plural": "workers",
                       "singular": "worker"},
             "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "required": ["podTemplate"], "properties": {
                                   "queue": {"type": "string"},
                                   "podTemplate": {"type": "object",
                                                   "properties": {"metadata": OPEN, "spec": OPEN}}}},
                               "status": OPEN}}}}]}}
WORKER_CONFIG = """\
kinds:
  - group: example.com
    version: v1
    kind: Worker
    plural: workers
    podTemplatePath: {path}
    rollsOnTemplateChange: false
"""


@pytest.fixture
def all_kinds(server: ApiServer) -> ApiServer:
    """The server with every built-in kind's CRD installed."""
    for kind in KINDS:
        server.serve_crd(f"{kind.spec.plural}.{kind.spec.group}")
    return server


def env_of_template(template: dict[str, Any]) -> dict[str, Any]:
    [container] = template["spec"]["containers"]
    return {e["name"]: e.get("value") for e in container.get("env") or ()}


def writes(server: ApiServer, plural: str) -> int:
    counts = server.request_counts()
    return sum(counts.get((verb, plural), 0) for verb in ("patch", "update"))


def knative_accepts(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Knative's ``RevisionTemplateSpec.VerifyNameChange`` (pkg/apis/serving/v1): a template
    that names its revision must rename it whenever anything else in it changes."""
    name = (new.get("metadata") or {}).get("name", "")
    return not name or name != (old.get("metadata") or {}).get("name", "") or old == new


# --------------------------------------------------------------------------- live sinks


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.id)
def test_env_vars_reload_and_a_second_change_coalesces(all_kinds, api_client, kind):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, kind.body("web", annotations=AUTO))
    before = kind.template(api_client, "web")
    with running_controller(api_client, ["--coalesce-window=1s"]) as app:
        assert kind.id in app.controller.adapters
        path = "/api/v1/namespaces/ns/configmaps/app-cfg"
        for value in ("2", "3"):  # both inside one window
            current = call(api_client, "GET", path)
            call(api_client, "PUT", path, {**current, "data": {"v": value}})
        wait_for(lambda: env_of_template(kind.template(api_client, "web")).get(CM_ENV)
                 == configmap_hash({"v": "3"}), timeout=15, message="the env var with the last hash")
        settle(app)
    after = kind.template(api_client, "web")
    assert env_of_template(after) == {CM_ENV: configmap_hash({"v": "3"})}
    assert writes(all_kinds, kind.spec.plural) == 1
    assert after["spec"]["containers"][0]["envFrom"] == before["spec"]["containers"][0]["envFrom"]
    assert knative_accepts(before, after)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.id)
def test_annotations_sink_and_an_ignored_source(all_kinds, api_client, kind):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, configmap("quiet", {"v": "1"}, annotations={"reloader.stakater.com/ignore": "true"}))
    body = kind.body("web", annotations=AUTO)
    body["spec"]["template"]["spec"]["containers"][0]["envFrom"].append({"configMapRef": {"name": "quiet"}})
    create(api_client, body)
    with running_controller(api_client, ["--reload-strategy=annotations"]) as app:
        set_cm_data(app, api_client, "quiet", {"v": "2"})
        assert writes(all_kinds, kind.spec.plural) == 0  # ignored: not reloaded
        set_cm_data(app, api_client, "app-cfg", {"v": "2"})
        template = wait_for(lambda: (t := kind.template(api_client, "web"))["metadata"].get("annotations")
                            and t, message="the last-reloaded-from annotation")
    recorded = json.loads(template["metadata"]["annotations"][LAST])
    assert (recorded["name"], recorded["hash"]) == ("app-cfg", configmap_hash({"v": "2"}))
    assert env_of_template(template) == {}
    assert writes(all_kinds, kind.spec.plural) == 1


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.id)
def test_dry_run_reports_a_would_reload_and_writes_nothing(all_kinds, api_client, kind):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, kind.body("web", annotations=AUTO))
    with running_controller(api_client, ["--dry-run"]) as app:
        set_cm_data(app, api_client, "app-cfg", {"v": "2"})
        event = wait_event(api_client, "web", "WouldReload")
    assert event["involvedObject"]["kind"] == kind.spec.kind
    assert event["message"].startswith("dry run, env-vars sink: would patch env STAKATER_APP_CFG_CONFIGMAP")
    assert env_of_template(kind.template(api_client, "web")) == {}
    assert writes(all_kinds, kind.spec.plural) == 0


def test_knative_service_with_a_fixed_revision_name_is_refused_with_an_event(all_kinds, api_client):
    knative = KINDS[0]
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, knative.body("pinned", annotations=AUTO, template_name="pinned-v1"))
    create(api_client, knative.body("free", annotations=AUTO))
    with running_controller(api_client) as app:
        set_cm_data(app, api_client, "app-cfg", {"v": "2"})
        event = wait_event(api_client, "pinned", "FixedRevisionName")
        wait_for(lambda: CM_ENV in env_of_template(knative.template(api_client, "free")),
                 message="the other Service reloaded")
    assert event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "Service"
    assert "spec.template.metadata.name is fixed ('pinned-v1')" in event["message"]
    assert env_of_template(knative.template(api_client, "pinned")) == {}
    assert knative.template(api_client, "pinned")["metadata"]["name"] == "pinned-v1"
    assert writes(all_kinds, "services") == 1  # only "free"


def test_explain_and_plan_treat_a_knative_service_like_any_workload(all_kinds, api_client, tmp_path, capsys):
    knative = KINDS[0]
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, knative.body("pinned", annotations=AUTO, template_name="pinned-v1"))
    create(api_client, knative.body("free", annotations=AUTO))
    kubeconfig = str(all_kinds.write_kubeconfig(tmp_path / "kubeconfig"))
    answers = {}
    for name in ("free", "pinned"):
        code = cli.main(["explain", f"services.serving.knative.dev/{name}", "-n", "ns",
                         "--kubeconfig", kubeconfig, "--output", "json"])
        out = capsys.readouterr()
        assert code == 0, out.err
        answers[name] = json.loads(out.out)
    assert answers["free"]["kind"] == "Service.serving.knative.dev"
    [free_source] = answers["free"]["sources"]
    assert (free_source["name"], free_source["tracked"]) == ("app-cfg", True)
    assert answers["pinned"]["note"].startswith("every reload is refused (FixedRevisionName): ")
    all_kinds.reset_request_counts()
    result = run_plan(all_kinds, tmp_path, "--configmap", "ns/app-cfg")
    assert "ns/Service.serving.knative.dev/free [env-vars] would-write" in result.stdout, result.stderr
    assert "ns/Service.serving.knative.dev/pinned [env-vars] skipped" in result.stdout
    assert "FixedRevisionName: spec.template.metadata.name is fixed" in result.stdout
    assert not [k for k in all_kinds.request_counts() if k[0] in ("patch", "update", "create")]


# --------------------------------------------------------------------------- discovery


def test_a_kind_whose_crd_is_installed_later_is_picked_up_without_restart(server, api_client, caplog):
    caplog.set_level(logging.INFO, logger="gitops_reloader.kube.discovery")
    cloneset = KINDS[1]
    create(api_client, configmap("app-cfg", {"v": "1"}))
    with running_controller(api_client, [DISCOVERY]) as app:
        skipped = [r for r in caplog.records if r.getMessage().startswith("workload kind not served")]
        assert sorted(r.kind for r in skipped) == sorted(k.id for k in KINDS)  # one line each
        server.serve_crd("clonesets.apps.kruise.io")
        create(api_client, cloneset.body("web", annotations=AUTO))
        wait_for(lambda: cloneset.id in app.controller.caches.workload_informers, message="clonesets watched")
        wait_for(lambda: any(r.ref.kind == cloneset.id for r in app.controller.workloads()),
                 message="the CloneSet in the cache")
        set_cm_data(app, api_client, "app-cfg", {"v": "2"})
        wait_for(lambda: env_of_template(cloneset.template(api_client, "web")).get(CM_ENV)
                 == configmap_hash({"v": "2"}), message="the CloneSet reloaded")
    assert len([r for r in caplog.records if r.getMessage().startswith("workload kind not served")]) == 4


def test_built_in_kinds_can_be_left_alone(all_kinds, api_client):
    flag = "--ignored-workload-types=clonesets.apps.kruise.io,services.serving.knative.dev"
    with running_controller(api_client, [flag]) as app:
        assert {"StatefulSet.apps.kruise.io", "DaemonSet.apps.kruise.io"} <= set(app.controller.adapters)
        assert not {KINDS[0].id, KINDS[1].id} & set(app.controller.adapters)
    assert not [key for key in all_kinds.request_counts() if key[1] in ("clonesets", "services")]


# --------------------------------------------------------------------------- git sink


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.id)
def test_git_sink_commits_the_hash_into_the_kinds_template(all_kinds, api_client, git: GitSetup,
                                                           githost: GitHostServer, kind):
    setup, host = git, githost
    body = kind.body("web", annotations={**AUTO, "gitops-reloader.io/sink": "git"})
    manifest = json.loads(json.dumps(body))
    text = f"# {kind.id}\n" + _yaml(manifest)
    setup.create({"apps/web.yaml": text})
    setup.configure()
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, body)
    with git_controller(api_client, setup) as (app, _):
        set_cm_data(app, api_client, "app-cfg", {"v": "2"})
        log = wait_commits(host, 2)
        settle(app)
    after = file_at(host, "apps/web.yaml")
    assert log[0][1] == "reload: web (configmap/app-cfg changed)"
    removed, added = line_diff(text, after)
    assert removed == [] and added[0] == "      annotations:\n" and len(added) == 2
    template = yaml.safe_load(after)["spec"]["template"]
    assert template["metadata"]["annotations"] == {"gitops-reloader.io/config-hash": hash_value(after)}
    assert writes(all_kinds, kind.spec.plural) == 0  # git is the only writer


def _yaml(obj: dict[str, Any]) -> str:
    return yaml.safe_dump(obj, sort_keys=False)


# --------------------------------------------------------------------------- custom kinds


@pytest.fixture
def worker_config(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "kinds.yaml"
    path.write_text(WORKER_CONFIG.format(path="spec.podTemplate"))
    yield path


def worker(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Worker",
            "metadata": {"name": name, "namespace": "ns", "annotations": annotations},
            "spec": {"queue": "jobs", "podTemplate": {"metadata": {"labels": {"app": name}}, "spec": {
                "containers": [{"name": "app", "image": "worker", "envFrom": [
                    {"configMapRef": {"name": "app-cfg"}}]}]}}}}


def test_custom_kind_from_the_config_file_reloads_end_to_end(server, api_client, worker_config):
    server.serve_crd(WORKER_CRD)
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, worker("crunch", AUTO))
    with running_controller(api_client, [f"--workload-kinds-config={worker_config}"]) as app:
        assert "Worker.example.com" in app.controller.adapters
        set_cm_data(app, api_client, "app-cfg", {"v": "2"})
        url = "/apis/example.com/v1/namespaces/ns/workers/crunch"
        obj = wait_for(lambda: (w := call(api_client, "GET", url))
                       and w["spec"]["podTemplate"]["spec"]["containers"][0].get("env") and w,
                       message="the Worker's template env")
        event = wait_event(api_client, "crunch", "Reloaded")
    assert env_of_template(obj["spec"]["podTemplate"]) == {CM_ENV: configmap_hash({"v": "2"})}
    assert obj["spec"]["queue"] == "jobs"
    assert event["involvedObject"]["kind"] == "Worker"
    assert "does not roll on a template change" in event["message"]


def test_custom_kind_with_the_git_sink_edits_its_own_template_path(server, api_client, git: GitSetup,
                                                                   githost: GitHostServer, worker_config):
    server.serve_crd(WORKER_CRD)
    setup, host = git, githost
    body = worker("crunch", {**AUTO, "gitops-reloader.io/sink": "git"})
    setup.create({"workers/crunch.yaml": _yaml(body)})
    setup.configure()
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, body)
    with git_controller(api_client, setup, f"--workload-kinds-config={worker_config}") as (app, _):
        set_cm_data(app, api_client, "app-cfg", {"v": "2"})
        wait_commits(host, 2)
        settle(app)
    after = file_at(host, "workers/crunch.yaml")
    lines = after.splitlines()
    at = lines.index("  podTemplate:")
    assert lines[at + 1:at + 5] == ["    metadata:", "      labels:", "        app: crunch",
                                    "      annotations:"]
    assert lines[at + 5].startswith("        gitops-reloader.io/config-hash: ")


@pytest.mark.parametrize(("path", "served", "message"), [
    ("spec.template", True, "entry 1 (Worker): podTemplatePath spec.template: spec.template is not a field"),
    ("spec.queue", True,
     "entry 1 (Worker): podTemplatePath spec.queue: spec.queue is a string, not a pod template"),
    ("spec.podTemplate", False,
     "entry 1 (Worker): workers.example.com (example.com/v1 Worker) is not served"),
])
def test_a_bad_custom_kind_stops_start_up_naming_the_entry(server, api_client, tmp_path, path, served,
                                                           message):
    if served:
        server.serve_crd(WORKER_CRD)
    config_file = tmp_path / "kinds.yaml"
    config_file.write_text(WORKER_CONFIG.format(path=path))
    config = load_config([f"--workload-kinds-config={config_file}"], environ={"HOME": "/nonexistent"})
    assert f"{config_file} {message}" in start_error(config, api_client, ConfigError)


def start_error(config: Any, client: ApiClient, error: type[Exception]) -> str:
    """The message of the ``error`` that stops ``App.start``."""
    app = App(config, api_client=client, serve_http=False)
    try:
        with pytest.raises(error) as caught:
            app.start()
    finally:
        app.stop()
    return str(caught.value)


def test_a_malformed_kinds_file_is_a_config_error(tmp_path):
    bad = tmp_path / "kinds.yaml"
    bad.write_text(textwrap.dedent("""\
        kinds:
          - group: example.com
            version: v1
            kind: Worker
            plural: workers
            podTemplatePath: spec..template
        """))
    with pytest.raises(ConfigError,
                       match=r"entry 1 \(Worker\): podTemplatePath 'spec..template' is not a dotted"):
        load_config([f"--workload-kinds-config={bad}"], environ={"HOME": "/nonexistent"})


# --------------------------------------------------------------------------- permissions


def _grants(needs) -> list[dict[str, Any]]:
    return [{"apiGroups": [n.group], "resources": [n.resource], "verbs": [n.verb]} for n in needs]


@pytest.mark.parametrize("kind", [*KINDS, Kind(KindSpec("example.com", "v1", "Worker", "workers",
                                                        ("spec", "podTemplate")))], ids=lambda k: k.id)
def test_the_start_up_check_names_a_kinds_missing_grant(server, api_client, tmp_path, kind, worker_config):
    """Everything granted but the kind's patch: strict mode stops naming exactly that."""
    for other in KINDS:
        server.serve_crd(f"{other.spec.plural}.{other.spec.group}")
    server.serve_crd(WORKER_CRD)
    config = load_config(["--coalesce-window=0", "--is-openshift=false",
                          f"--workload-kinds-config={worker_config}"], environ={"HOME": "/nonexistent"})
    probe = App(config, api_client=api_client, serve_http=False)
    needs = [n for n in required_permissions(config, probe.adapters)
             if not (n.resource == kind.spec.plural and n.group == kind.spec.group and n.verb == "patch")]
    probe.stop()
    server.authorizer.restrict("sa", rules_from_role(_grants(needs)))
    client = server.api_client(token="sa")
    try:
        message = start_error(config, client, PermissionsMissing)
    finally:
        client.close()
    assert message.startswith(
        f"1 permission(s) missing: patch {kind.spec.plural}.{kind.spec.group} cluster-wide "
        f"(needed to reload {kind.spec.kind}s ({kind.spec.group}))")


def test_a_kind_served_later_is_checked_when_it_appears(server, api_client, caplog):
    config = load_config(["--coalesce-window=0", "--is-openshift=false", DISCOVERY],
                         environ={"HOME": "/nonexistent"})
    probe = App(config, api_client=api_client, serve_http=False)
    needs = required_permissions(config, {k: a for k, a in probe.adapters.items() if not a.discovered})
    probe.stop()
    server.authorizer.restrict("sa", rules_from_role(_grants(needs)))
    client = server.api_client(token="sa")
    try:
        flags = [DISCOVERY, "--is-openshift=false"]
        with caplog.at_level("WARNING"), running_controller(client, flags) as app:
            assert app.controller.ready()  # nothing of the CloneSet is needed before it exists
            server.serve_crd("clonesets.apps.kruise.io")
            wanted = "CloneSet.apps.kruise.io is served now"
            message = wait_for(lambda: next((m for r in caplog.records if wanted in (m := r.getMessage())),
                                            None), message="the permission warning")
    finally:
        client.close()
    assert message.startswith("3 permission(s) missing: list clonesets.apps.kruise.io cluster-wide (needed "
                              "to watch CloneSets (apps.kruise.io)); watch clonesets.apps.kruise.io")
