"""Workload records: slim for strategic-merge kinds, whole where the write needs the object.

Every reader of ``record.raw`` (locating the manifest, the pause logic, the env-vars sink)
must see the same values from a slim record as from the whole object.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gitops_reloader.kube.workloads import SlimObject, adapters_for
from gitops_reloader.model import CONFIG_HASH_KEY, SourceKind
from gitops_reloader.rollout.completion import Phase
from gitops_reloader.sinks.envvars import container_env

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def deployment(kind: str = "Deployment", api_version: str = "apps/v1") -> dict[str, Any]:
    env = [{"name": "STAKATER_CFG_CONFIGMAP", "value": "abc"},
           {"name": "STAKATER_DB_SECRET", "valueFrom": {"secretKeyRef": {"name": "x", "key": "k"}}},
           {"name": "PLAIN", "value": "1"}]
    return {
        "apiVersion": api_version, "kind": kind,
        "metadata": {"name": "web", "namespace": "ns", "uid": "u-1", "resourceVersion": "42",
                     "generation": 3, "labels": {"app.kubernetes.io/instance": "web"},
                     "annotations": {"reloader.stakater.com/auto": "true", LAST_APPLIED: "{...}",
                                     "argocd.argoproj.io/tracking-id": "app:apps/Deployment:ns/web"},
                     "ownerReferences": [{"kind": "Thing", "name": "owner", "uid": "o-1"}],
                     "managedFields": [{"manager": "kubectl"}]},
        "spec": {"paused": True, "replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {
                     "metadata": {"labels": {"app": "web"},
                                  "annotations": {"reloader.stakater.com/last-reloaded-from": "{}"}},
                     "spec": {"containers": [{"name": "app", "image": "nginx", "env": env,
                                              "envFrom": [{"configMapRef": {"name": "cfg"}}]},
                                             {"name": "side", "image": "busybox"}],
                              "initContainers": [{"name": "init", "image": "busybox",
                                                  "env": [{"name": "STAKATER_I_CONFIGMAP",
                                                           "value": "i"}]}],
                              "volumes": [{"name": "v", "secret": {"secretName": "db"}}]}}},
        "status": {"replicas": 2},
    }


@pytest.fixture
def adapters() -> dict[str, Any]:
    return adapters_for(argo_rollouts=True)


@pytest.mark.parametrize("kind", ["Deployment", "DaemonSet", "StatefulSet"])
def test_strategic_merge_kinds_keep_a_slim_object(adapters: dict[str, Any], kind: str) -> None:
    record = adapters[kind].record(deployment(kind))
    assert isinstance(record.raw, SlimObject)


def test_a_slim_object_reads_as_the_whole_object_does_where_readers_look(adapters: dict[str, Any]) -> None:
    whole = deployment()
    adapter = adapters["Deployment"]
    record = adapter.record(copy.deepcopy(whole))
    raw = record.raw
    assert (raw["apiVersion"], raw["kind"]) == ("apps/v1", "Deployment")
    meta = raw["metadata"]
    for key in ("name", "namespace", "uid", "resourceVersion", "labels", "ownerReferences"):
        assert meta[key] == whole["metadata"][key]
    assert raw.get("spec", {}).get("paused") is True
    for container in ("app", "side", "init"):
        for name in ("STAKATER_CFG_CONFIGMAP", "STAKATER_DB_SECRET", "STAKATER_I_CONFIGMAP"):
            slim_env = container_env(record, adapter.pod_template(raw), container)
            whole_env = container_env(record, adapter.pod_template(whole), container)
            assert slim_env.get(name) == whole_env.get(name)
            assert (name in slim_env) == (name in whole_env)
    template = adapter.pod_template(raw)
    assert template["metadata"]["annotations"] == {"reloader.stakater.com/last-reloaded-from": "{}"}
    assert [c["name"] for c in template["spec"]["containers"]] == ["app", "side"]
    assert [c["name"] for c in template["spec"]["initContainers"]] == ["init"]


def test_kubectls_copy_of_the_manifest_is_not_kept(adapters: dict[str, Any]) -> None:
    record = adapters["Deployment"].record(deployment())
    assert LAST_APPLIED not in record.annotations
    assert LAST_APPLIED not in record.raw["metadata"]["annotations"]
    assert record.annotations["argocd.argoproj.io/tracking-id"] == "app:apps/Deployment:ns/web"


def test_references_and_template_facts_come_from_the_whole_object(adapters: dict[str, Any]) -> None:
    record = adapters["Deployment"].record(deployment())
    assert record.refs.names(SourceKind.CONFIGMAP) == {"cfg"}
    assert record.refs.names(SourceKind.SECRET) == {"db", "x"}
    assert record.has_template


def test_changing_what_a_slim_object_returns_changes_nothing(adapters: dict[str, Any]) -> None:
    record = adapters["Deployment"].record(deployment())
    record.raw["metadata"]["labels"]["app.kubernetes.io/instance"] = "other"
    record.raw["metadata"]["ownerReferences"][0]["name"] = "other"
    adapters["Deployment"].pod_template(record.raw)["metadata"]["annotations"]["x"] = "y"
    assert record.raw["metadata"]["labels"] == {"app.kubernetes.io/instance": "web"}
    assert record.raw["metadata"]["ownerReferences"][0]["name"] == "owner"
    assert "x" not in record.template_annotations


def test_a_workload_without_a_pause_has_no_spec_paused(adapters: dict[str, Any]) -> None:
    whole = deployment()
    del whole["spec"]["paused"]
    record = adapters["Deployment"].record(whole)
    assert (record.raw.get("spec") or {}).get("paused") is None


@pytest.mark.parametrize(("kind", "api_version"), [("Rollout", "argoproj.io/v1alpha1"),
                                                   ("Job", "batch/v1")])
def test_kinds_written_from_the_whole_object_keep_it(adapters: dict[str, Any], kind: str,
                                                     api_version: str) -> None:
    whole = deployment(kind, api_version)
    record = adapters[kind].record(copy.deepcopy(whole))
    assert isinstance(record.raw, dict)
    assert record.raw["spec"]["template"] == whole["spec"]["template"]
    assert "status" not in record.raw and "managedFields" not in record.raw["metadata"]


def test_a_cronjob_keeps_its_whole_job_template(adapters: dict[str, Any]) -> None:
    template = deployment()["spec"]["template"]
    whole = {"apiVersion": "batch/v1", "kind": "CronJob",
             "metadata": {"name": "nightly", "namespace": "ns", "uid": "c-1"},
             "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": template}}}}
    record = adapters["CronJob"].record(copy.deepcopy(whole))
    assert record.raw["spec"]["jobTemplate"] == whole["spec"]["jobTemplate"]


STS_STATUS = {"observedGeneration": 3, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3,
              "currentRevision": "db-7f1", "updateRevision": "db-7f1"}
DS_STATUS = {"observedGeneration": 3, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2,
             "numberAvailable": 2}
CS_STATUS = {"observedGeneration": 3, "replicas": 3, "readyReplicas": 3, "availableReplicas": 3,
             "updatedReplicas": 3, "updatedReadyReplicas": 3}


@pytest.mark.parametrize(("kind", "status"), [
    ("StatefulSet.apps.kruise.io", STS_STATUS), ("DaemonSet.apps.kruise.io", DS_STATUS),
    ("CloneSet.apps.kruise.io", CS_STATUS),
    ("StatefulSet", STS_STATUS), ("DaemonSet", DS_STATUS),
])
def test_a_marked_record_reads_its_rollout_by_its_kinds_rule(adapters: dict[str, Any], kind: str,
                                                              status: dict[str, Any]) -> None:
    """OpenKruise's Advanced StatefulSet/DaemonSet report the apps/v1 status fields, no Ready
    condition: they complete by their own rules (the StatefulSet/DaemonSet rule with OpenKruise's
    partition and paused), not by the generic rule, which would wait for --rollout-timeout and
    call them failed."""
    adapter = adapters[kind]
    group, version = adapter.resource.group, adapter.resource.version
    marker = {"gitops-reloader.io/rollout": '{"at":1,"changes":["ns/ConfigMap/c@a"]}'}
    raw = {"apiVersion": f"{group}/{version}" if group else version, "kind": adapter.resource.kind,
           "metadata": {"name": "db", "namespace": "ns", "generation": 3, "annotations": marker},
           "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "app", "image": "x"}]}}},
           "status": status}
    record = adapter.record(raw)
    assert record.rollout is not None and record.rollout.phase is Phase.COMPLETE, record.rollout


@pytest.mark.parametrize(("kind", "status", "phase"), [
    ("Deployment", {"observedGeneration": 3, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1},
     Phase.PROGRESSING),
    ("Deployment", {"observedGeneration": 3, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2},
     Phase.COMPLETE),
    ("StatefulSet", STS_STATUS, Phase.COMPLETE),
    ("StatefulSet.apps.kruise.io", STS_STATUS, Phase.COMPLETE),
])
def test_a_template_with_a_git_digest_keeps_its_rollout_verdict_not_its_status(
        adapters: dict[str, Any], kind: str, status: dict[str, Any], phase: Phase) -> None:
    """The git follow-up reads the rollout of a workload whose template carries the committed
    digest from the cache: the record keeps the kind's verdict, computed on arrival."""
    adapter = adapters[kind]
    group, version = adapter.resource.group, adapter.resource.version
    raw = {"apiVersion": f"{group}/{version}" if group else version, "kind": adapter.resource.kind,
           "metadata": {"name": "db", "namespace": "ns", "generation": 3},
           "spec": {"replicas": 2 if kind == "Deployment" else 3, "template": {
               "metadata": {"annotations": {CONFIG_HASH_KEY: "d1"}},
               "spec": {"containers": [{"name": "app", "image": "x"}]}}},
           "status": status}
    record = adapter.record(raw)
    assert record.rollout is not None and record.rollout.phase is phase, record.rollout
    assert record.template_annotations[CONFIG_HASH_KEY] == "d1"
    assert "status" not in record.raw


def test_a_workload_with_neither_marker_nor_digest_keeps_no_verdict(adapters: dict[str, Any]) -> None:
    record = adapters["Deployment"].record(deployment())
    assert record.rollout is None
