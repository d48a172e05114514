"""required_permissions: every verb each configuration uses, with the feature that needs it."""

from __future__ import annotations

import pytest

from gitops_reloader.config import load_config
from gitops_reloader.kube.permissions import Need, describe, required_permissions
from gitops_reloader.kube.workloads import adapters_for

HOME = {"HOME": "/nonexistent"}


def needs(argv: list[str], **adapters: bool) -> set[tuple[str, str, str, str]]:
    """The needs with the core kinds (the discovered ones are asked only once served)."""
    config = load_config(argv, environ=HOME)
    found = required_permissions(
        config, adapters_for(ignored=config.filters.ignored_workload_types, kinds=(), **adapters)
    )
    return {(n.group, n.resource, n.verb, n.namespace) for n in found}


def test_default_configuration():
    assert needs([]) == {
        ("", "configmaps", "list", ""),
        ("", "configmaps", "watch", ""),
        ("", "secrets", "list", ""),
        ("", "secrets", "watch", ""),
        *{
            ("apps", kind, verb, "")
            for kind in ("deployments", "daemonsets", "statefulsets")
            for verb in ("list", "watch", "patch")
        },
        ("batch", "cronjobs", "list", ""),
        ("batch", "cronjobs", "watch", ""),
        ("batch", "jobs", "list", ""),
        ("batch", "jobs", "watch", ""),
        ("batch", "jobs", "create", ""),
        ("batch", "jobs", "delete", ""),
        ("", "events", "create", ""),
        ("", "configmaps", "create", "default"),  # the failure record, in the controller's namespace
        ("", "configmaps", "get", "default"),
        ("", "configmaps", "update", "default"),
    }


@pytest.mark.parametrize(
    ("argv", "adapters", "present", "absent"),
    [
        (
            ["--namespaces=a,b"],
            {},
            {("", "configmaps", "watch", "a"), ("apps", "deployments", "patch", "b")},
            {("", "configmaps", "watch", "")},
        ),
        (["--resources-to-ignore=secrets"], {}, set(), {("", "secrets", "watch", "")}),
        (["--namespace-selector=env=prod"], {}, {("", "namespaces", "watch", "")}, set()),
        (
            ["--enable-ha", "--lease-namespace=ops"],
            {},
            {("coordination.k8s.io", "leases", verb, "ops") for verb in ("get", "create", "update")},
            set(),
        ),
        (
            ["--ignored-workload-types=jobs,cronjobs"],
            {},
            set(),
            {("batch", "jobs", "create", ""), ("batch", "cronjobs", "watch", "")},
        ),
        (
            ["--ignored-workload-types=jobs"],
            {},
            {("batch", "jobs", "create", "")},
            {("batch", "jobs", "delete", "")},
        ),
        (
            [],
            {"argo_rollouts": True},
            {("argoproj.io", "rollouts", "watch", ""), ("argoproj.io", "rollouts", "patch", "")},
            set(),
        ),
        ([], {"openshift": True}, {("apps.openshift.io", "deploymentconfigs", "watch", "")}, set()),
    ],
)
def test_features_add_and_remove_needs(argv, adapters, present, absent):
    found = needs(argv, **adapters)
    assert present <= found
    assert not absent & found


def test_git_sinks_need_the_digest_key_secret(tmp_path):
    config_file = tmp_path / "git.yaml"
    config_file.write_text("repositories: []\n")
    found = needs([f"--git-config={config_file}", "--lease-namespace=ops"])
    assert {("", "secrets", "get", "ops"), ("", "secrets", "create", "ops")} <= found


def test_only_events_and_the_failure_record_are_optional():
    config = load_config([], environ=HOME)
    optional = [n for n in required_permissions(config, adapters_for()) if not n.essential]
    assert [(n.resource, n.verb, n.name) for n in optional] == [
        ("events", "create", ""), ("configmaps", "create", ""),
        ("configmaps", "get", "gitops-reloader-failures"),
        ("configmaps", "update", "gitops-reloader-failures")]
    dry_run = load_config(["--dry-run"], environ=HOME)
    optional = [n.resource for n in required_permissions(dry_run, adapters_for()) if not n.essential]
    assert optional == ["events"]


def test_describe_names_resource_verb_scope_and_feature():
    missing = [
        Need("apps", "deployments", "watch", "", "watch Deployments"),
        Need("", "events", "create", "ns", "record Events", essential=False),
    ]
    assert describe(missing) == (
        "2 permission(s) missing: watch deployments.apps cluster-wide (needed to watch Deployments); "
        'create events in namespace "ns" (needed to record Events). '
        "Stakater's ClusterRole has no watch on workloads: use this chart's ClusterRole "
        "(helm/gitops-reloader) or add the verbs above."
    )


def test_csi_integration_needs_the_driver_objects_and_owner_reads():
    csi = ("secrets-store.csi.x-k8s.io", "", "")
    assert not {n for n in needs([]) if n[0] == csi[0] or n[1] in ("pods", "replicasets")}
    found = needs(["--enable-csi-integration"], openshift=True)
    for resource in ("secretproviderclasspodstatuses", "secretproviderclasses"):
        assert {("secrets-store.csi.x-k8s.io", resource, verb, "") for verb in ("list", "watch")} <= found
    assert {("", "pods", "get", ""), ("apps", "replicasets", "get", ""), ("batch", "jobs", "get", ""),
            ("", "replicationcontrollers", "get", "")} <= found
    config = load_config(["--enable-csi-integration", "--namespaces=a"], environ=HOME)
    essential = {(n.resource, n.verb, n.namespace): n.essential
                 for n in required_permissions(config, adapters_for())}
    assert essential[("secretproviderclasspodstatuses", "watch", "a")] is True
    assert essential[("pods", "get", "a")] is False  # without it: Stakater's class-wide reloads
    assert ("replicationcontrollers", "get", "a") not in essential
