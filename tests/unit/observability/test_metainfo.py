"""Stakater's reloader-meta-info ConfigMap, built from our configuration (pure part)."""

from __future__ import annotations

import json

import pytest

from gitops_reloader.config import MetaInfoTarget, load_config
from gitops_reloader.observability.metainfo import (
    build_info,
    meta_info_configmap,
    reloader_options,
)

# The JSON field names of Stakater's ReloaderOptions and BuildInfo, in declaration order,
# as read from stakater/Reloader pkg/common/common.go and pkg/common/metainfo.go.
STAKATER_OPTION_FIELDS = [
    "autoReloadAll", "configmapUpdateOnChangeAnnotation", "secretUpdateOnChangeAnnotation",
    "secretProviderClassUpdateOnChangeAnnotation", "reloaderAutoAnnotation",
    "ignoreResourceAnnotation", "configmapReloaderAutoAnnotation", "secretReloaderAutoAnnotation",
    "secretProviderClassReloaderAutoAnnotation", "configmapExcludeReloaderAnnotation",
    "secretExcludeReloaderAnnotation", "secretProviderClassExcludeReloaderAnnotation",
    "autoSearchAnnotation", "searchMatchAnnotation", "rolloutStrategyAnnotation",
    "pauseDeploymentAnnotation", "pauseDeploymentTimeAnnotation", "logFormat", "logLevel",
    "isArgoRollouts", "reloadStrategy", "reloadOnCreate", "reloadOnDelete", "syncAfterRestart",
    "enableHA", "enableCSIIntegration", "webhookUrl", "resourcesToIgnore", "workloadTypesToIgnore",
    "namespaceSelectors", "resourceSelectors", "namespacesToIgnore", "enablePProf", "pprofAddr",
]
STAKATER_BUILD_FIELDS = ["goVersion", "releaseVersion", "commitHash", "commitTime", "edition"]


def test_the_target_comes_from_stakaters_two_variables() -> None:
    assert load_config([], environ={}).meta_info is None
    assert load_config([], environ={"RELOADER_NAMESPACE": " "}).meta_info is None
    config = load_config([], environ={"RELOADER_NAMESPACE": "ops", "RELOADER_DEPLOYMENT_NAME": "reloader"})
    assert config.meta_info == MetaInfoTarget("ops", "reloader")


def test_the_configmap_has_stakaters_name_label_keys_and_field_names() -> None:
    config = load_config([], environ={})
    body = meta_info_configmap(config, MetaInfoTarget("ops", "reloader"))
    assert body["metadata"] == {"name": "reloader-meta-info", "namespace": "ops",
                                "labels": {"reloader.stakater.com/meta-info": "reloader"}}
    data = body["data"]
    assert list(data) == ["buildInfo", "reloaderOptions", "deploymentInfo"]
    assert list(json.loads(data["reloaderOptions"])) == STAKATER_OPTION_FIELDS
    assert list(json.loads(data["buildInfo"])) == STAKATER_BUILD_FIELDS
    assert json.loads(data["deploymentInfo"]) == {"name": "reloader", "namespace": "ops",
                                                  "creationTimestamp": None}
    assert " " not in data["deploymentInfo"]  # compact, as encoding/json writes it


def test_options_follow_the_flags() -> None:
    config = load_config([
        "--auto-reload-all", "--reload-strategy=annotations", "--reload-on-create=true",
        "--resources-to-ignore=secrets", "--ignored-workload-types=jobs,cronjobs",
        "--namespaces-to-ignore=kube-system", "--namespace-selector=team=a",
        "--auto-annotation=example.com/auto", "--log-format=json",
        "--enable-csi-integration", "--secretproviderclass-annotation=example.com/spc",
    ], environ={})
    options = reloader_options(config)
    assert options["autoReloadAll"] is True
    assert options["reloadStrategy"] == "annotations"
    assert options["reloadOnCreate"] is True
    assert options["resourcesToIgnore"] == ["secrets"]
    assert options["workloadTypesToIgnore"] == ["jobs", "cronjobs"]
    assert options["namespacesToIgnore"] == ["kube-system"]
    assert options["namespaceSelectors"] == ["team=a"]
    assert options["reloaderAutoAnnotation"] == "example.com/auto"
    assert options["logFormat"] == "json"
    assert options["enableCSIIntegration"] is True
    assert options["secretProviderClassUpdateOnChangeAnnotation"] == "example.com/spc"
    spc_auto = options["secretProviderClassReloaderAutoAnnotation"]
    assert spc_auto == "secretproviderclass.reloader.stakater.com/auto"


def test_build_info_names_this_release() -> None:
    info = build_info()
    assert info["releaseVersion"]
    assert info["goVersion"].startswith("python3.")
    assert info["commitTime"] == "0001-01-01T00:00:00Z"  # Go's zero time: unknown


@pytest.mark.parametrize(("url", "shown"), [
    ("", ""),
    ("https://hooks.example.com/services/T0/B0/s3cret", "https://hooks.example.com"),
    ("https://user:s3cret@hooks.example.com:8443/x?token=abc#f", "https://hooks.example.com:8443"),
])
def test_a_webhook_url_is_written_without_credentials(url: str, shown: str) -> None:
    config = load_config([f"--webhook-url={url}"] if url else [], environ={})
    text = meta_info_configmap(config, MetaInfoTarget("ops"))["data"]["reloaderOptions"]
    assert "s3cret" not in text and "token=abc" not in text
    assert json.loads(text)["webhookUrl"] == shown
