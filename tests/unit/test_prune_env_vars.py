"""--prune-stale-env-vars: which STAKATER_* variables of a container are stale
(sinks/envvars.py stale_env_vars, a pure rule over the pod's references)."""

from __future__ import annotations

from typing import Any

import pytest

from gitops_reloader.index import extract_refs
from gitops_reloader.model import SourceKind
from gitops_reloader.sinks.envvars import kept_env_vars, stale_env_vars

SPEC: dict[str, Any] = {
    "containers": [
        {"name": "app", "envFrom": [{"configMapRef": {"name": "app-config"}}],
         "volumeMounts": [{"name": "tls", "mountPath": "/tls"}]},
        {"name": "side", "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "p"}}}]},
    ],
    "initContainers": [{"name": "init", "envFrom": [{"configMapRef": {"name": "init-only"}}]}],
    "volumes": [{"name": "tls", "secret": {"secretName": "tls.v2"}},
                {"name": "spc", "csi": {"volumeAttributes": {"secretProviderClass": "vault"}}}],
}
REFS = extract_refs(SPEC)


def test_a_container_keeps_the_variables_of_what_it_uses_and_of_what_lands_on_it() -> None:
    assert kept_env_vars(REFS, "app") == {
        "STAKATER_APP_CONFIG_CONFIGMAP", "STAKATER_TLS_V2_SECRET",
        "STAKATER_INIT_ONLY_CONFIGMAP",  # used by an init container only: its var goes to the first one
        "STAKATER_VAULT_SECRETPROVIDERCLASS",  # an unmounted CSI volume: the first container too
    }
    assert kept_env_vars(REFS, "side") == {"STAKATER_DB_SECRET"}


@pytest.mark.parametrize(("container", "env", "listed", "stale", "why"), [
    ("app", {"STAKATER_OLD_CONFIGMAP": "h"}, frozenset(), ["STAKATER_OLD_CONFIGMAP"], "renamed source"),
    ("app", {"STAKATER_TLS_V1_SECRET": "h", "STAKATER_TLS_V2_SECRET": "h"}, frozenset(),
     ["STAKATER_TLS_V1_SECRET"], "hash-suffixed Secret rotated"),
    ("app", {"STAKATER_GONE_SECRETPROVIDERCLASS": "h"}, frozenset(), ["STAKATER_GONE_SECRETPROVIDERCLASS"],
     "a SecretProviderClass no longer mounted"),
    ("side", {"STAKATER_APP_CONFIG_CONFIGMAP": "h"}, frozenset(), ["STAKATER_APP_CONFIG_CONFIGMAP"],
     "another container's source"),
    ("app", {"STAKATER_OLD_CONFIGMAP": None}, frozenset(), [], "set through valueFrom: not ours"),
    ("app", {"STAKATER_MODE": "x", "STAKATER_OLD_CONFIGMAPS": "x", "OLD_CONFIGMAP": "x"}, frozenset(), [],
     "no type suffix or no prefix: another variable"),
    ("app", {"STAKATER_OLD_CONFIGMAP": "h", "STAKATER_OLD_SECRET": "h"}, frozenset({SourceKind.CONFIGMAP}),
     ["STAKATER_OLD_SECRET"], "a ConfigMap reload list may name what the pod does not reference"),
    ("app", {"STAKATER_APP_CONFIG_CONFIGMAP": "h", "PLAIN": "v"}, frozenset(), [], "nothing stale"),
])
def test_stale_env_vars(container, env, listed, stale, why) -> None:
    assert stale_env_vars(REFS, container, env, listed=listed) == stale, why
