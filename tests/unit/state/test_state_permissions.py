"""What --state-store adds to the start-up permission check (kube/permissions.py)."""

from __future__ import annotations

from gitops_reloader.config import load_config
from gitops_reloader.kube.permissions import required_permissions
from gitops_reloader.kube.workloads import adapters_for

ENV = {"HOME": "/nonexistent", "POD_NAMESPACE": "ops"}


def needs(argv: list[str]) -> set[tuple[str, str, str, str, str]]:
    config = load_config(argv, environ=ENV)
    return {(n.resource, n.verb, n.namespace, n.name, n.feature)
            for n in required_permissions(config, adapters_for())}


FEATURE = "keep reload state in ConfigMaps (--state-store)"


def test_state_store_needs_its_configmaps_and_the_digest_key_in_its_namespace() -> None:
    added = needs(["--state-store=configmap"]) - needs([])
    assert added == {
        ("configmaps", "list", "ops", "", FEATURE),
        ("configmaps", "get", "ops", "", FEATURE),
        ("configmaps", "create", "ops", "", FEATURE),
        ("configmaps", "update", "ops", "", FEATURE),
        ("secrets", "create", "ops", "", FEATURE),
        ("secrets", "get", "ops", "gitops-reloader-digest-key", FEATURE),
    }


def test_dry_run_state_store_only_reads() -> None:
    added = needs(["--state-store=configmap", "--dry-run"]) - needs(["--dry-run"])
    assert added == {
        ("configmaps", "list", "ops", "", FEATURE),
        ("secrets", "get", "ops", "gitops-reloader-digest-key", FEATURE),
    }


def test_no_state_store_needs_nothing_more() -> None:
    assert needs(["--state-store=none"]) == needs([])
