"""Stakater's ``reloader-meta-info`` ConfigMap: what runs, with which options, where.

Stakater Reloader (``pkg/common/metainfo.go``) writes, at start-up and when
``RELOADER_NAMESPACE`` is set, a ConfigMap ``reloader-meta-info`` labelled
``reloader.stakater.com/meta-info: reloader`` with three JSON documents: ``buildInfo``,
``reloaderOptions`` and ``deploymentInfo``. Tools and runbooks that read it keep working
after the swap: the same name, label, keys and JSON field names, filled from our
configuration. Two differences, both on purpose: ``buildInfo.goVersion`` names the Python
that runs us, and ``reloaderOptions.webhookUrl`` is only ``scheme://host[:port]``, as the
webhook sink logs it (tokens live in user info, path or query; the ConfigMap may be
readable by more people than the flag is).

:func:`meta_info_configmap` is pure; :func:`publish_meta_info` writes it (get → update,
else create, as Stakater does) and never stops the controller on failure.
"""

from __future__ import annotations

import json
import logging
import platform
from typing import Any

from gitops_reloader import __version__
from gitops_reloader.config import META_INFO_NAME, Config, MetaInfoTarget
from gitops_reloader.errors import KubeError, KubeNotFound
from gitops_reloader.kube.api import JSON, KubeApi
from gitops_reloader.kube.resources import CONFIGMAPS
from gitops_reloader.observability.alerts import safe_url

log = logging.getLogger(__name__)

META_INFO_LABEL = ("reloader.stakater.com/meta-info", "reloader")
_ZERO_TIME = "0001-01-01T00:00:00Z"
"""Go's zero ``time.Time`` as encoding/json writes it (Stakater's "unknown" build date)."""


def build_info() -> dict[str, Any]:
    """Stakater's ``BuildInfo`` JSON for this process."""
    return {"goVersion": f"python{platform.python_version()}", "releaseVersion": __version__,
            "commitHash": "unknown", "commitTime": _ZERO_TIME, "edition": "oss"}


def reloader_options(config: Config) -> dict[str, Any]:
    """Stakater's ``ReloaderOptions`` JSON, filled from our configuration."""
    keys, filters, behaviour, runtime = config.keys, config.filters, config.behaviour, config.runtime
    resources_ignored = [name for name, ignored in (("configmaps", filters.ignore_configmaps),
                                                    ("secrets", filters.ignore_secrets)) if ignored]
    return {
        "autoReloadAll": behaviour.auto_reload_all,
        "configmapUpdateOnChangeAnnotation": keys.configmap_reload,
        "secretUpdateOnChangeAnnotation": keys.secret_reload,
        "secretProviderClassUpdateOnChangeAnnotation": keys.spc_reload,
        "reloaderAutoAnnotation": keys.auto,
        "ignoreResourceAnnotation": keys.ignore,
        "configmapReloaderAutoAnnotation": keys.configmap_auto,
        "secretReloaderAutoAnnotation": keys.secret_auto,
        "secretProviderClassReloaderAutoAnnotation": keys.spc_auto,
        "configmapExcludeReloaderAnnotation": keys.configmaps_exclude,
        "secretExcludeReloaderAnnotation": keys.secrets_exclude,
        "secretProviderClassExcludeReloaderAnnotation": keys.spcs_exclude,
        "autoSearchAnnotation": keys.search,
        "searchMatchAnnotation": keys.match,
        "rolloutStrategyAnnotation": keys.rollout_strategy,
        "pauseDeploymentAnnotation": keys.pause_period,
        "pauseDeploymentTimeAnnotation": keys.paused_at,
        "logFormat": "json" if runtime.log_format == "json" else "",
        "logLevel": runtime.log_level,
        "isArgoRollouts": behaviour.is_argo_rollouts,
        "reloadStrategy": behaviour.reload_strategy.value,
        "reloadOnCreate": behaviour.reload_on_create,
        "reloadOnDelete": behaviour.reload_on_delete,
        "syncAfterRestart": behaviour.sync_after_restart,
        "enableHA": runtime.enable_ha,
        "enableCSIIntegration": behaviour.enable_csi_integration,
        "webhookUrl": safe_url(behaviour.webhook_url) if behaviour.webhook_url else "",
        "resourcesToIgnore": resources_ignored,
        "workloadTypesToIgnore": list(filters.ignored_workload_types),
        "namespaceSelectors": [filters.namespace_selector] if filters.namespace_selector else [],
        "resourceSelectors": ([filters.resource_label_selector]
                              if filters.resource_label_selector else []),
        "namespacesToIgnore": list(filters.namespaces_to_ignore),
        "enablePProf": False,
        "pprofAddr": "",
    }


def meta_info_configmap(config: Config, target: MetaInfoTarget) -> JSON:
    """The ConfigMap Stakater's ``MetaInfo.ToConfigMap`` builds, for ``target``."""
    # encoding/json on an ObjectMeta: empty strings omitted, the zero Time written as null.
    deployment: dict[str, Any] = {"name": target.deployment_name, "namespace": target.namespace,
                                  "creationTimestamp": None}
    if not target.deployment_name:
        del deployment["name"]
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": META_INFO_NAME, "namespace": target.namespace,
                     "labels": {META_INFO_LABEL[0]: META_INFO_LABEL[1]}},
        "data": {
            "buildInfo": _compact(build_info()),
            "reloaderOptions": _compact(reloader_options(config)),
            "deploymentInfo": _compact(deployment),
        },
    }


def publish_meta_info(api: KubeApi, config: Config) -> bool:
    """Write the meta-info ConfigMap if ``RELOADER_NAMESPACE`` asks for it; True if written.

    A failure (e.g. RBAC) is a warning naming the ConfigMap: the controller carries on.
    """
    target = config.meta_info
    if target is None:
        return False
    body = meta_info_configmap(config, target)
    where = f"{target.namespace}/ConfigMap/{META_INFO_NAME}"
    try:
        try:
            api.get(CONFIGMAPS, target.namespace, META_INFO_NAME)
        except KubeNotFound:
            api.create(CONFIGMAPS, target.namespace, body)
        else:  # unconditional, as Stakater: the newest starter's view wins
            api.update(CONFIGMAPS, target.namespace, META_INFO_NAME, body)
    except KubeError as exc:
        log.warning("cannot publish the Stakater meta-info ConfigMap: %s", exc, extra={"object": where})
        return False
    log.info("published the Stakater meta-info ConfigMap", extra={"object": where})
    return True


def _compact(document: dict[str, Any]) -> str:
    """JSON as Go's ``json.Marshal`` writes it: no spaces, keys in declaration order."""
    return json.dumps(document, separators=(",", ":"))
