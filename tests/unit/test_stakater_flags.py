"""Every Stakater Reloader flag (v1 and v2) is accepted, with its effect, and bound to the
environment the way Stakater v2 binds it (viper AutomaticEnv: ``-`` → ``_``, upper case),
the command line beating the environment.

The flag lists are Stakater's own, read from stakater/Reloader ``internal/pkg/cmd``
(v1) and ``pkg/config/flags`` (v2, ``BindFlags``).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any

import pytest

from gitops_reloader import cli
from gitops_reloader.config import FLAGS, Config, env_names, load_config

V1_FLAGS = (
    "auto-reload-all",
    "auto-annotation",
    "configmap-auto-annotation",
    "secret-auto-annotation",
    "configmap-annotation",
    "secret-annotation",
    "auto-search-annotation",
    "search-match-annotation",
    "ignore-annotation",
    "pause-deployment-annotation",
    "pause-deployment-time-annotation",
    "log-format",
    "log-level",
    "webhook-url",
    "resources-to-ignore",
    "ignored-workload-types",
    "namespaces",
    "namespaces-to-ignore",
    "namespace-selector",
    "resource-label-selector",
    "is-Argo-Rollouts",
    "is-openshift",
    "reload-strategy",
    "reload-on-create",
    "reload-on-delete",
    "enable-ha",
    "leader-election-lease-duration",
    "leader-election-renew-deadline",
    "leader-election-retry-period",
    "sync-after-restart",
    "enable-pprof",
    "pprof-addr",
    "enable-csi-integration",
    "secretproviderclass-annotation",
    "secretproviderclass-auto-annotation",
)
V2_FLAGS = (
    "auto-reload-all",
    "reload-strategy",
    "is-Argo-Rollouts",
    "is-openshift",
    "enable-csi-integration",
    "reload-on-create",
    "reload-on-delete",
    "sync-after-restart",
    "enable-ha",
    "leader-election-id",
    "leader-election-namespace",
    "leader-election-lease-duration",
    "leader-election-renew-deadline",
    "leader-election-retry-period",
    "leader-election-release-on-cancel",
    "webhook-url",
    "resources-to-ignore",
    "ignored-workload-types",
    "namespaces-to-ignore",
    "namespace-selector",
    "resource-label-selector",
    "log-format",
    "log-level",
    "metrics-addr",
    "health-addr",
    "enable-pprof",
    "pprof-addr",
    "auto-annotation",
    "configmap-auto-annotation",
    "secret-auto-annotation",
    "configmap-annotation",
    "secret-annotation",
    "configmap-exclude-annotation",
    "secret-exclude-annotation",
    "secretproviderclass-auto-annotation",
    "secretproviderclass-annotation",
    "secretproviderclass-exclude-annotation",
    "auto-search-annotation",
    "search-match-annotation",
    "ignore-annotation",
    "pause-deployment-annotation",
    "pause-deployment-time-annotation",
    "namespaces",
    "alert-on-reload",
    "alert-webhook-url",
    "alert-sink",
    "alert-proxy",
    "alert-additional-info",
    "alert-structured",
)
ALL = sorted(set(V1_FLAGS) | set(V2_FLAGS))
BASE = {"HOME": "/nonexistent"}

# (flag and value, what it changes in Config, expected)
EFFECTS: list[tuple[str, Callable[[Config], Any], Any]] = [
    ("auto-reload-all=true", lambda c: c.behaviour.auto_reload_all, True),
    ("reload-strategy=annotations", lambda c: c.behaviour.reload_strategy.value, "annotations"),
    ("is-Argo-Rollouts=true", lambda c: c.behaviour.is_argo_rollouts, True),
    ("is-openshift=false", lambda c: c.behaviour.is_openshift, False),
    ("reload-on-create=true", lambda c: c.behaviour.reload_on_create, True),
    ("reload-on-delete=true", lambda c: c.behaviour.reload_on_delete, True),
    ("sync-after-restart=true", lambda c: c.behaviour.sync_after_restart, True),
    ("enable-ha=true", lambda c: c.runtime.enable_ha, True),
    ("leader-election-id=my-lease", lambda c: c.runtime.lease_name, "my-lease"),
    ("leader-election-namespace=ops", lambda c: c.runtime.lease_namespace, "ops"),
    ("leader-election-lease-duration=30s", lambda c: c.runtime.lease_duration, 30.0),
    ("leader-election-renew-deadline=20s", lambda c: c.runtime.renew_deadline, 20.0),
    ("leader-election-retry-period=3s", lambda c: c.runtime.retry_period, 3.0),
    ("leader-election-release-on-cancel=true", lambda c: c.runtime.release_on_cancel, True),
    ("webhook-url=http://127.0.0.1:1/hook", lambda c: c.behaviour.webhook_url, "http://127.0.0.1:1/hook"),
    ("resources-to-ignore=configMaps", lambda c: c.filters.ignore_configmaps, True),
    (
        "ignored-workload-types=jobs,cronjobs",
        lambda c: c.filters.ignored_workload_types,
        ("jobs", "cronjobs"),
    ),
    ("namespaces-to-ignore=a,b", lambda c: c.filters.namespaces_to_ignore, ("a", "b")),
    ("namespace-selector=env=prod", lambda c: c.filters.namespace_selector, "env=prod"),
    ("resource-label-selector=app=web", lambda c: c.filters.resource_label_selector, "app=web"),
    ("namespaces=a,b", lambda c: c.filters.namespaces, ("a", "b")),
    ("log-format=json", lambda c: c.runtime.log_format, "json"),
    ("log-level=debug", lambda c: c.runtime.log_level, "debug"),
    ("metrics-addr=:9191", lambda c: c.runtime.http_address, ":9191"),
    ("health-addr=:8081", lambda c: c.runtime.health_address, ":8081"),
    ("auto-annotation=a.io/auto", lambda c: c.keys.auto, "a.io/auto"),
    ("configmap-auto-annotation=a.io/cm", lambda c: c.keys.configmap_auto, "a.io/cm"),
    ("secret-auto-annotation=a.io/s", lambda c: c.keys.secret_auto, "a.io/s"),
    ("configmap-annotation=a.io/cmr", lambda c: c.keys.configmap_reload, "a.io/cmr"),
    ("secret-annotation=a.io/sr", lambda c: c.keys.secret_reload, "a.io/sr"),
    ("configmap-exclude-annotation=a.io/cmx", lambda c: c.keys.configmaps_exclude, "a.io/cmx"),
    ("secret-exclude-annotation=a.io/sx", lambda c: c.keys.secrets_exclude, "a.io/sx"),
    ("auto-search-annotation=a.io/search", lambda c: c.keys.search, "a.io/search"),
    ("search-match-annotation=a.io/match", lambda c: c.keys.match, "a.io/match"),
    ("ignore-annotation=a.io/ignore", lambda c: c.keys.ignore, "a.io/ignore"),
    ("pause-deployment-annotation=a.io/p", lambda c: c.keys.pause_period, "a.io/p"),
    ("pause-deployment-time-annotation=a.io/pt", lambda c: c.keys.paused_at, "a.io/pt"),
    ("alert-on-reload=true", lambda c: c.alerts.get("ALERT_ON_RELOAD"), "true"),
    (
        "alert-webhook-url=https://hooks.example/x",
        lambda c: (c.alerts.get("ALERT_WEBHOOK_URL"), c.alerts.get("ALERT_ON_RELOAD")),
        ("https://hooks.example/x", "true"),
    ),
    ("alert-sink=slack", lambda c: c.alerts.get("ALERT_SINK"), "slack"),
    (
        "alert-proxy=http://127.0.0.1:3128",
        lambda c: c.alerts.get("ALERT_WEBHOOK_PROXY"),
        "http://127.0.0.1:3128",
    ),
    ("alert-additional-info=prod-eu", lambda c: c.alerts.get("ALERT_ADDITIONAL_INFO"), "prod-eu"),
    ("alert-structured=true", lambda c: c.alerts.get("ALERT_STRUCTURED"), "true"),
    # Accepted so an image swap starts; they change nothing and are logged once at start-up.
    ("enable-pprof=true", lambda c: c.inert_flags, ("--enable-pprof=true",)),
    ("pprof-addr=:6061", lambda c: c.inert_flags, ("--pprof-addr=:6061",)),
    ("enable-csi-integration=true", lambda c: c.behaviour.enable_csi_integration, True),
    ("secretproviderclass-annotation=a.io/spc", lambda c: c.keys.spc_reload, "a.io/spc"),
    ("secretproviderclass-auto-annotation=a.io/spca", lambda c: c.keys.spc_auto, "a.io/spca"),
    ("secretproviderclass-exclude-annotation=a.io/spcx", lambda c: c.keys.spcs_exclude, "a.io/spcx"),
]


def test_the_effect_table_covers_every_stakater_flag():
    assert sorted({setting.partition("=")[0] for setting, _, _ in EFFECTS}) == ALL


@pytest.mark.parametrize(("setting", "read", "expected"), EFFECTS, ids=[e[0] for e in EFFECTS])
def test_flag_takes_effect(setting, read, expected):
    assert read(load_config([f"--{setting}"], environ=BASE)) == expected


@pytest.mark.parametrize(("setting", "read", "expected"), EFFECTS, ids=[e[0] for e in EFFECTS])
def test_environment_takes_effect_like_stakater_v2(setting, read, expected):
    """viper AutomaticEnv: ``--leader-election-id`` ← ``LEADER_ELECTION_ID``, and so on."""
    name, _, value = setting.partition("=")
    variable = name.upper().replace("-", "_")
    config = load_config([], environ={**BASE, variable: value})
    if name == "alert-webhook-url":  # v1's rule for the environment: ALERT_ON_RELOAD must say true
        assert config.alerts.get("ALERT_WEBHOOK_URL") == value
    elif name == "alert-proxy":  # v2 binds both ALERT_PROXY and the legacy ALERT_WEBHOOK_PROXY
        assert read(config) == expected
        assert read(load_config([], environ={**BASE, "ALERT_WEBHOOK_PROXY": value})) == expected
    elif name.startswith(("enable-pprof", "pprof-addr")):
        assert config.inert_flags == (f"--{setting}",)
    else:
        assert read(config) == expected


@pytest.mark.parametrize(
    ("argv", "env", "read", "expected"),
    [
        (
            ["--reload-strategy=env-vars"],
            {"RELOAD_STRATEGY": "annotations"},
            lambda c: c.behaviour.reload_strategy.value,
            "env-vars",
        ),
        (["--enable-ha=false"], {"ENABLE_HA": "true"}, lambda c: c.runtime.enable_ha, False),
        (
            ["--leader-election-id=flag"],
            {"LEADER_ELECTION_ID": "env"},
            lambda c: c.runtime.lease_name,
            "flag",
        ),
        (["--alert-sink=teams"], {"ALERT_SINK": "slack"}, lambda c: c.alerts["ALERT_SINK"], "teams"),
        (
            ["--coalesce-window=5s"],
            {"GITOPS_RELOADER_COALESCE_WINDOW": "9s"},
            lambda c: c.runtime.coalesce_window,
            5.0,
        ),
        ([], {"GITOPS_RELOADER_COALESCE_WINDOW": "9s"}, lambda c: c.runtime.coalesce_window, 9.0),
        ([], {"WORKERS": "9"}, lambda c: c.runtime.workers, 4),  # our flags never read bare names
    ],
)
def test_command_line_beats_environment(argv, env, read, expected):
    assert read(load_config(argv, environ={**BASE, **env})) == expected


@pytest.mark.parametrize(
    ("argv", "read", "expected"),
    [
        (
            ["--namespace-selector", "env=prod", "--namespace-selector", "team=a"],
            lambda c: c.filters.namespace_selector,
            "env=prod,team=a",
        ),
        (["--namespaces=a", "--namespaces", "b,c"], lambda c: c.filters.namespaces, ("a", "b", "c")),
        # Stakater's chart quotes the selector inside the argument; pflag reads each as CSV
        (['--namespace-selector="env=test"'], lambda c: c.filters.namespace_selector, "env=test"),
        (['--namespace-selector="env in (a,b)",team=x'], lambda c: c.filters.namespace_selector,
         "env in (a,b),team=x"),
        (["--namespace-selector=env:prod,team:*,tier=*"], lambda c: c.filters.namespace_selector,
         "env=prod,team,tier"),
        (["--resource-label-selector='reload=true'"], lambda c: c.filters.resource_label_selector,
         "'reload=true'"),  # single quotes are not CSV quotes: the API server refuses it at start
        (['--resource-label-selector="reload=true"'], lambda c: c.filters.resource_label_selector,
         "reload=true"),
        (
            ["--resource-label-selector=a=1", "--resource-label-selector=b=2"],
            lambda c: c.filters.resource_label_selector,
            "a=1,b=2",
        ),
        (["--resources-to-ignore=ConfigMaps"], lambda c: c.filters.ignore_configmaps, True),
        (["--metrics-addr=:9191", "--health-addr=:9191"], lambda c: c.runtime.health_address, ""),
        (["--enable-pprof=false"], lambda c: c.inert_flags, ()),
    ],
)
def test_slices_repeat_and_spellings(argv, read, expected):
    assert read(load_config(argv, environ=BASE)) == expected


def test_flags_alone_run_the_controller_as_stakaters_image_does(capsys):
    """Stakater's chart passes only args to the image (its entrypoint is the controller): with
    our image, ``gitops-reloader --reload-strategy=…`` is ``gitops-reloader run --reload-strategy=…``."""
    assert cli.main(["--reload-strategy=sideways"]) == 2
    assert "--reload-strategy" in capsys.readouterr().err


def test_every_flag_has_one_environment_name_and_kubeconfig_keeps_kubectls():
    names = [name for spec in FLAGS for name in env_names(spec)]
    assert len(names) == len(set(names))
    assert not [spec for spec in FLAGS if spec.names[0] == "--kubeconfig" and env_names(spec)]


def test_run_help_lists_every_stakater_flag():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    text = out.getvalue()
    assert [flag for flag in ALL if f"--{flag}" not in text] == []
    assert "$RELOAD_STRATEGY" in text and "$GITOPS_RELOADER_COALESCE_WINDOW" in text


def test_every_flag_the_controller_accepts_has_a_row_in_the_configuration_doc() -> None:
    """docs/configuration.md lists every flag (its table row starts with the flag's name)."""
    from pathlib import Path

    from gitops_reloader.config import FLAGS

    doc = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    rows = {line.split("|")[1] for line in doc.splitlines() if line.startswith("| `--")}
    missing = [name for spec in FLAGS for name in spec.names
               if not any(f"`{name}`" in row for row in rows)]
    assert missing == []
