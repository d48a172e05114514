"""ACCEPTANCE "Flags" and "Filters": what the controller watches, and how flags are read.

Filtered objects must not merely be ignored after arrival: the list/watch carries the
selector, so the controller's source cache never holds them.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from kubernetes.client import CoreV1Api
from reload_helpers import configmap, create, env_of, patch_source, secret, set_cm_data, workload, writes

from gitops_reloader import cli
from gitops_reloader.app import App
from gitops_reloader.config import FLAGS, TRUE_VALUES, Config, load_config
from gitops_reloader.errors import ConfigError
from gitops_reloader.hashing import configmap_hash
from gitops_reloader.model import SourceKind, SourceRef
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for

pytestmark = pytest.mark.e2e

AUTO = {"reloader.stakater.com/auto": "true"}
NEW = {"v": "2"}
NO_HOME = {"HOME": "/nonexistent"}


def uses(name: str, kind: str = "configMapRef") -> dict[str, Any]:
    return {"name": "app", "image": "x", "envFrom": [{kind: {"name": name}}]}


def pair(api_client, name: str, *, namespace: str = "ns", labels: dict[str, str] | None = None) -> None:
    """A ConfigMap ``<name>-cfg`` and a Deployment ``<name>`` that auto-reloads on it."""
    create(api_client, configmap(f"{name}-cfg", {"v": "1"}, namespace=namespace, labels=labels))
    create(api_client, deployment(name, namespace=namespace, annotations=AUTO,
                                  containers=[uses(f"{name}-cfg")]))


def env_name(name: str) -> str:
    return "STAKATER_" + name.upper().replace("-", "_") + "_CFG_CONFIGMAP"


def reloaded(server, name: str, namespace: str = "ns") -> bool:
    return env_of(workload(server, "Deployment", name, namespace)).get(env_name(name)) == configmap_hash(NEW)


def cached(app, name: str, namespace: str = "ns") -> bool:
    return app.controller.source(SourceRef(SourceKind.CONFIGMAP, namespace, f"{name}-cfg")) is not None


def change_all(app, server, api_client, names: list[tuple[str, str]], expect: str) -> None:
    """Change ``<name>-cfg`` in each (namespace, name); wait until ``expect`` has reloaded.

    The other changes were sent before the expected one, so once it has reloaded, the
    controller has had every chance to act on them too.
    """
    core = CoreV1Api(api_client)
    for namespace, name in names:
        core.patch_namespaced_config_map(f"{name}-cfg", namespace, {"data": NEW})
    ns, _, nm = expect.partition("/")
    wait_for(lambda: reloaded(server, nm, ns), message=f"{expect} reloaded")
    settle(app)


# --- resources to ignore ---------------------------------------------------------------


@pytest.mark.parametrize("flags", [["--resources-to-ignore=configMaps"],
                                   ["--resources-to-ignore", "configmaps"], ["--ignore-configmaps"]])
def test_resources_to_ignore_configmaps(server, api_client, flags):
    pair(api_client, "web")
    create(api_client, secret("creds", {"p": "1"}))
    create(api_client, deployment("sec", annotations=AUTO, containers=[uses("creds", "secretRef")]))
    with running_controller(api_client, flags) as app:
        before = workload(server, "Deployment", "web")
        patch_source(app, api_client, SourceKind.SECRET, "creds", {"stringData": {"p": "2"}})
        assert "STAKATER_CREDS_SECRET" in env_of(workload(server, "Deployment", "sec"))
        CoreV1Api(api_client).patch_namespaced_config_map("web-cfg", "ns", {"data": NEW})
        settle(app)
        assert SourceKind.CONFIGMAP not in app.controller.caches.source_informers
    assert workload(server, "Deployment", "web") == before
    counts = server.request_counts()
    assert not counts.get(("list", "configmaps")) and not counts.get(("watch", "configmaps"))


@pytest.mark.parametrize("flags", [["--resources-to-ignore=secrets"], ["--ignore-secrets=true"]])
def test_resources_to_ignore_secrets(server, api_client, flags):
    pair(api_client, "web")
    create(api_client, secret("creds", {"p": "1"}))
    create(api_client, deployment("sec", annotations=AUTO, containers=[uses("creds", "secretRef")]))
    with running_controller(api_client, flags) as app:
        before = workload(server, "Deployment", "sec")
        CoreV1Api(api_client).patch_namespaced_secret("creds", "ns", {"stringData": {"p": "2"}})
        set_cm_data(app, api_client, "web-cfg", NEW)
        wait_for(lambda: reloaded(server, "web"))
    assert workload(server, "Deployment", "sec") == before
    counts = server.request_counts()
    assert not counts.get(("list", "secrets")) and not counts.get(("watch", "secrets"))


# --- namespaces ------------------------------------------------------------------------


def test_namespaces_to_ignore_are_not_fetched_nor_reloaded(server, api_client):
    for namespace in ("ns", "skip", "also-skip"):
        pair(api_client, "web", namespace=namespace)
    with running_controller(api_client, ["--namespaces-to-ignore=skip, also-skip"]) as app:
        assert [n for n in ("ns", "skip", "also-skip") if cached(app, "web", n)] == ["ns"]
        assert {r.ref.namespace for r in app.controller.workloads()} == {"ns"}
        before = {n: workload(server, "Deployment", "web", n) for n in ("skip", "also-skip")}
        change_all(app, server, api_client, [("skip", "web"), ("also-skip", "web"), ("ns", "web")],
                   "ns/web")
    assert {n: workload(server, "Deployment", "web", n) for n in before} == before


def test_namespace_selector_watches_only_matching_namespaces(server, api_client):
    core = CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": "prod-a", "labels": {"env": "prod", "team": "a"}}})
    core.create_namespace({"metadata": {"name": "prod-b", "labels": {"env": "prod", "team": "b"}}})
    core.create_namespace({"metadata": {"name": "dev", "labels": {"env": "dev"}}})
    for namespace in ("prod-a", "prod-b", "dev"):
        pair(api_client, "web", namespace=namespace)
    with running_controller(api_client, ["--namespace-selector=env=prod,team notin (b)"]) as app:
        before = {n: workload(server, "Deployment", "web", n) for n in ("prod-b", "dev")}
        change_all(app, server, api_client, [("dev", "web"), ("prod-b", "web"), ("prod-a", "web")],
                   "prod-a/web")
        assert {n: workload(server, "Deployment", "web", n) for n in before} == before
        # A namespace labelled later joins.
        core.patch_namespace("dev", {"metadata": {"labels": {"env": "prod"}}})
        wait_for(lambda: app.controller.namespace_allowed("dev"), message="dev selected")
        core.patch_namespaced_config_map("web-cfg", "dev", {"data": {"v": "3"}})
        wait_for(lambda: env_of(workload(server, "Deployment", "web", "dev")).get(env_name("web"))
                 == configmap_hash({"v": "3"}), message="dev reloaded")
        # A namespace relabelled out of the selector leaves.
        core.patch_namespace("prod-a", {"metadata": {"labels": {"env": "dev"}}})
        wait_for(lambda: not app.controller.namespace_allowed("prod-a"), message="prod-a left")
        left = workload(server, "Deployment", "web", "prod-a")
        change_all(app, server, api_client, [("prod-a", "web"), ("dev", "web")], "dev/web")
        assert workload(server, "Deployment", "web", "prod-a") == left


def test_namespace_selector_quoted_as_stakaters_chart_emits_it_selects(server, api_client):
    """Stakater's chart renders ``--namespace-selector="env=test"``, quotes inside the argument:
    read as Stakater reads it (CSV), it selects ``env=test``."""
    CoreV1Api(api_client).create_namespace({"metadata": {"name": "tested", "labels": {"env": "test"}}})
    pair(api_client, "web", namespace="tested")
    with running_controller(api_client, ['--namespace-selector="env=test"']) as app:
        assert app.controller.namespace_allowed("tested") and not app.controller.namespace_allowed("ns")
        set_cm_data(app, api_client, "web-cfg", NEW, namespace="tested")
        wait_for(lambda: env_of(workload(server, "Deployment", "web", "tested")).get(env_name("web"))
                 == configmap_hash(NEW), message="reloaded in the selected namespace")


@pytest.mark.parametrize(("flag", "selector"), [
    ("--namespace-selector", "env in (a"), ("--resource-label-selector", "'reload=true'")])
def test_a_selector_the_api_server_refuses_stops_the_start_with_one_message(
        server, api_client, flag, selector):
    """A selector the API server cannot parse would fail every list and watch for ever: the
    start stops, naming the flag, the selector and the API server's answer."""
    app = App(load_config([f"{flag}={selector}"], environ=NO_HOME), api_client=api_client, serve_http=False)
    try:
        with pytest.raises(ConfigError) as caught:
            app.start()
    finally:
        app.stop()
    message = str(caught.value)
    assert message.startswith(f"{flag} {selector!r} is not a label selector the API server accepts")
    assert ": 400 " in message  # the API server's own words follow
    assert not [key for key in server.request_counts() if key[0] == "watch"]


def test_sync_after_restart_respects_the_namespace_selector(server, api_client):
    core = CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": "picked", "labels": {"env": "prod"}}})
    core.create_namespace({"metadata": {"name": "other"}})
    for namespace in ("picked", "other"):
        pair(api_client, "web", namespace=namespace)
    with running_controller(api_client) as app:
        for namespace in ("picked", "other"):
            set_cm_data(app, api_client, "web-cfg", NEW, namespace=namespace)
    for namespace in ("picked", "other"):  # both go stale while no controller runs
        core.patch_namespaced_config_map("web-cfg", namespace, {"data": {"v": "3"}})
    before = workload(server, "Deployment", "web", "other")
    with running_controller(api_client, ["--namespace-selector=env=prod", "--sync-after-restart"]) as app:
        settle(app)
    picked = env_of(workload(server, "Deployment", "web", "picked"))
    assert picked[env_name("web")] == configmap_hash({"v": "3"})
    assert workload(server, "Deployment", "web", "other") == before


@pytest.mark.parametrize(("flags", "environ"), [
    (["--namespaces=a,b"], NO_HOME),
    (["--namespaces", " a , b "], NO_HOME),
    ([], {**NO_HOME, "KUBERNETES_NAMESPACE": "a"}),
])
def test_watch_only_some_namespaces(server, api_client, flags, environ):
    for namespace in ("a", "b", "c"):
        pair(api_client, "web", namespace=namespace)
    watched = {"a", "b"} if flags else {"a"}
    with running_controller(api_client, flags, environ=environ) as app:
        assert {n for n in "abc" if cached(app, "web", n)} == watched
        assert {r.ref.namespace for r in app.controller.workloads()} == watched
        before = {n: workload(server, "Deployment", "web", n) for n in "abc" if n not in watched}
        change_all(app, server, api_client, [("c", "web"), ("b", "web"), ("a", "web")], "a/web")
        wait_for(lambda: all(reloaded(server, "web", n) for n in watched))
    assert {n: workload(server, "Deployment", "web", n) for n in before} == before


# --- resource label selector -----------------------------------------------------------

LABELS = {"x": {"app": "x"}, "y": {"app": "y"}, "none": {}}


@pytest.mark.parametrize(("selector", "selected"), [
    ("app=x", {"x"}),
    ("app==x", {"x"}),
    ("app!=x", {"y", "none"}),
    ("app in (x, y)", {"x", "y"}),
    ("app notin (x)", {"y", "none"}),
    ("!app", {"none"}),
    ("app", {"x", "y"}),
])
def test_resource_label_selector_operators(server, api_client, selector, selected):
    for name, labels in LABELS.items():
        pair(api_client, name, labels=labels)
    with running_controller(api_client, [f"--resource-label-selector={selector}"]) as app:
        assert {n for n in LABELS if cached(app, n)} == selected  # the others were never fetched
        before = {n: workload(server, "Deployment", n) for n in LABELS if n not in selected}
        last = sorted(selected)[-1]
        order = [("ns", n) for n in LABELS if n != last] + [("ns", last)]
        change_all(app, server, api_client, order, f"ns/{last}")
        wait_for(lambda: all(reloaded(server, n) for n in selected))
    assert {n: workload(server, "Deployment", n) for n in before} == before


def test_resource_label_selector_applies_to_secrets(server, api_client):
    picked = secret("picked", {"p": "1"})
    picked["metadata"]["labels"] = {"reload": "yes"}
    create(api_client, picked)
    create(api_client, secret("skipped", {"p": "1"}))
    both = [{"name": "app", "image": "x", "envFrom": [{"secretRef": {"name": "picked"}},
                                                      {"secretRef": {"name": "skipped"}}]}]
    create(api_client, deployment("web", annotations=AUTO, containers=both))
    with running_controller(api_client, ["--resource-label-selector", "reload=yes"]) as app:
        assert app.controller.source(SourceRef(SourceKind.SECRET, "ns", "skipped")) is None
        assert app.controller.source(SourceRef(SourceKind.SECRET, "ns", "picked")) is not None
        core = CoreV1Api(api_client)
        core.patch_namespaced_secret("skipped", "ns", {"stringData": {"p": "2"}})
        core.patch_namespaced_secret("picked", "ns", {"stringData": {"p": "2"}})
        wait_for(lambda: "STAKATER_PICKED_SECRET" in env_of(workload(server, "Deployment", "web")))
        settle(app)
    assert set(env_of(workload(server, "Deployment", "web"))) == {"STAKATER_PICKED_SECRET"}


# --- boolean flags ----------------------------------------------------------------------

BOOLEAN_FIELDS = {
    "--auto-reload-all": ("behaviour", "auto_reload_all"),
    "--reload-on-create": ("behaviour", "reload_on_create"),
    "--reload-on-delete": ("behaviour", "reload_on_delete"),
    "--sync-after-restart": ("behaviour", "sync_after_restart"),
    "--ignore-configmaps": ("filters", "ignore_configmaps"),
    "--ignore-secrets": ("filters", "ignore_secrets"),
    "--is-Argo-Rollouts": ("behaviour", "is_argo_rollouts"),
    "--is-argo-rollouts": ("behaviour", "is_argo_rollouts"),
    "--is-openshift": ("behaviour", "is_openshift"),
    "--enable-ha": ("runtime", "enable_ha"),
    "--request-refresh": ("gitops", "request_refresh"),
    "--dry-run": ("runtime", "dry_run"),
    "--leader-election-release-on-cancel": ("runtime", "release_on_cancel"),
    "--alert-on-reload": ("alerts", "ALERT_ON_RELOAD"),
    "--alert-structured": ("alerts", "ALERT_STRUCTURED"),
    "--enable-csi-integration": ("behaviour", "enable_csi_integration"),
    "--prune-stale-env-vars": ("behaviour", "prune_stale_env_vars"),
    "--hold-on-failed-rollout": ("rollouts", "hold_on_failure"),
}
SPELLINGS = [
    (lambda f: [f], True),
    (lambda f: [f"{f}=true"], True),
    (lambda f: [f"{f}=True"], True),
    (lambda f: [f"{f}=1"], True),
    (lambda f: [f, "true"], True),
    (lambda f: [f"{f}=false"], False),
    (lambda f: [f, "false"], False),
    (lambda f: [f"{f}=0"], False),
]


def field(config: Config, flag: str) -> Any:
    group, name = BOOLEAN_FIELDS[flag]
    if group == "alerts":  # Stakater's ALERT_* settings stay text, read as its alerter reads them
        return config.alerts[name].lower() in TRUE_VALUES
    return getattr(getattr(config, group), name)


def test_every_boolean_flag_is_in_the_table():
    """Inert flags (accepted, no effect) are covered by tests/unit/test_stakater_flags.py."""
    assert {n for spec in FLAGS if spec.boolean and not spec.inert for n in spec.names} == set(BOOLEAN_FIELDS)


@pytest.mark.parametrize("flag", sorted(BOOLEAN_FIELDS))
@pytest.mark.parametrize(("spell", "expected"), SPELLINGS)
def test_every_boolean_flag_accepts_every_spelling(flag, spell, expected):
    assert field(load_config(spell(flag), environ=NO_HOME), flag) is expected


def test_a_boolean_flag_followed_by_another_flag_is_true():
    config = load_config(["--auto-reload-all", "--reload-on-create", "--namespaces", "a"], environ=NO_HOME)
    assert config.behaviour.auto_reload_all and config.behaviour.reload_on_create
    assert config.filters.namespaces == ("a",)


def test_value_flags_accept_both_forms():
    spaced = load_config(["--coalesce-window", "3s", "--workers", "2", "--namespaces-to-ignore", "a,b"],
                         environ=NO_HOME)
    joined = load_config(["--coalesce-window=3s", "--workers=2", "--namespaces-to-ignore=a,b"],
                         environ=NO_HOME)
    assert spaced == joined
    assert spaced.runtime.coalesce_window == 3.0 and spaced.runtime.workers == 2


@pytest.mark.parametrize("flags", [["--auto-reload-all"], ["--auto-reload-all=true"],
                                   ["--auto-reload-all", "true"]])
def test_auto_reload_all_spellings_take_effect(server, api_client, flags):
    create(api_client, configmap("web-cfg", {"v": "1"}))
    create(api_client, deployment("web", containers=[uses("web-cfg")]))
    with running_controller(api_client, flags) as app:
        set_cm_data(app, api_client, "web-cfg", NEW)
        wait_for(lambda: reloaded(server, "web"))


@pytest.mark.parametrize("flags", [["--auto-reload-all=false"], ["--auto-reload-all", "false"],
                                   ["--reload-on-create=false"], ["--reload-on-create", "false"]])
def test_false_spellings_take_effect(server, api_client, flags):
    create(api_client, configmap("web-cfg", {"v": "1"}))
    create(api_client, deployment("web", containers=[uses("web-cfg")]))
    create(api_client, deployment("late", annotations=AUTO, containers=[uses("late-cfg")]))
    with running_controller(api_client, flags) as app:
        set_cm_data(app, api_client, "web-cfg", NEW)
        made = create(api_client, configmap("late-cfg", {"v": "1"}))
        wait_for(lambda: app.controller.seen(SourceKind.CONFIGMAP, "ns", "late-cfg",
                                             made["metadata"]["resourceVersion"]))
        settle(app)
    assert writes(server, "deployments") == 2  # only our creates


# --- invalid values ---------------------------------------------------------------------


@pytest.mark.parametrize(("args", "flag"), [
    (["--coalesce-window=abc"], "--coalesce-window"),
    (["--coalesce-window=-1s"], "--coalesce-window"),
    (["--lease-duration=soon"], "--lease-duration"),
    (["--workers=0"], "--workers"),
    (["--write-qps=fast"], "--write-qps"),
    (["--max-retries=-3"], "--max-retries"),
    (["--reload-on-create=maybe"], "--reload-on-create"),
    (["--is-openshift=perhaps"], "--is-openshift"),
    (["--reload-strategy=rolling"], "--reload-strategy"),
    (["--resources-to-ignore=pods"], "--resources-to-ignore"),
    (["--ignored-workload-types=jobs,pods"], "--ignored-workload-types"),
    (["--log-format=xml"], "--log-format"),
    (["--kubeconfig=/nonexistent/kubeconfig"], "--kubeconfig"),
])
def test_invalid_flag_values_fail_at_start_up_naming_the_flag(capsys, args, flag):
    assert cli.main(["run", *args]) == 2
    err = capsys.readouterr().err
    assert flag in err and err.count("\n") == 1


def test_unknown_flag_fails_at_start_up(capsys):
    assert cli.main(["run", "--reload-on-everything"]) == 2
    assert "--reload-on-everything" in capsys.readouterr().err


# --- kubeconfig resolution --------------------------------------------------------------


@pytest.fixture
def kubeconfigs(tmp_path):
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    files = {"flag": tmp_path / "flag.yaml", "env": tmp_path / "env.yaml",
             "home": home / ".kube" / "config"}
    for path in files.values():
        path.write_text("apiVersion: v1\nkind: Config\n")
    return home, {k: str(v) for k, v in files.items()}


def test_kubeconfig_flag_wins(kubeconfigs):
    home, files = kubeconfigs
    config = load_config([f"--kubeconfig={files['flag']}"],
                         environ={"HOME": str(home), "KUBECONFIG": files["env"]})
    assert config.runtime.kubeconfig == files["flag"]


def test_kubeconfig_env_is_next_first_existing_entry(kubeconfigs, tmp_path):
    home, files = kubeconfigs
    listed = os.pathsep.join([str(tmp_path / "missing.yaml"), files["env"], files["flag"]])
    config = load_config([], environ={"HOME": str(home), "KUBECONFIG": listed})
    assert config.runtime.kubeconfig == files["env"]


def test_kubeconfig_home_file_is_last(kubeconfigs):
    home, files = kubeconfigs
    assert load_config([], environ={"HOME": str(home)}).runtime.kubeconfig == files["home"]
    assert load_config([], environ={"HOME": str(home), "KUBECONFIG": ""}).runtime.kubeconfig == files["home"]


def test_no_kubeconfig_anywhere_means_in_cluster(tmp_path):
    assert load_config([], environ={"HOME": str(tmp_path)}).runtime.kubeconfig == ""


def test_missing_kubeconfig_flag_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="--kubeconfig"):
        load_config([f"--kubeconfig={tmp_path / 'nope'}"], environ={"HOME": str(tmp_path)})


def test_controller_reaches_the_cluster_through_kubeconfig_env(server, api_client, tmp_path):
    path = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    pair(api_client, "web")
    config = load_config(["--coalesce-window=0"], environ={"HOME": str(tmp_path), "KUBECONFIG": path})
    app = App(config, serve_http=False)
    app.start()
    try:
        set_cm_data(app, api_client, "web-cfg", NEW)
        wait_for(lambda: reloaded(server, "web"))
    finally:
        app.stop()
