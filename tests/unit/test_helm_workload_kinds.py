"""The chart and the workload kinds (issue 22): RBAC per kind, nothing more, and the
``--workload-kinds-config`` file the controller reads agree with its start-up check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_tools import render, require_helm, run_helm

from gitops_reloader.config import load_config
from gitops_reloader.kube.permissions import required_permissions
from gitops_reloader.kube.workloads import adapters_for
from gitops_reloader.testing.apiserver.authz import rules_from_role

CHART_DIR = Path(__file__).resolve().parents[2] / "helm" / "gitops-reloader"
WORKER = {"group": "example.com", "version": "v1", "kind": "Worker", "plural": "workers",
          "podTemplatePath": "spec.podTemplate", "rollsOnTemplateChange": False}
BATCHER = {"group": "batch.acme.io", "version": "v1beta1", "kind": "Batcher", "plural": "batchers",
           "podTemplatePath": "spec.jobTemplate.spec.template", "completesLike": "none"}
KRUISE = ("clonesets", "statefulsets", "daemonsets")
WORKLOAD_VERBS = ["get", "list", "watch", "patch"]


@pytest.fixture(scope="module")
def helm() -> Path:
    return require_helm()


def rendered(helm: Path, tmp_path: Path, reloader: dict[str, Any]) -> list[dict[str, Any]]:
    values = tmp_path / "values.yaml"
    values.write_text(json.dumps({"reloader": reloader}))
    return render(helm, CHART_DIR, home=tmp_path / "helm-home", values_files=[values])


def rules_on(docs: list[dict[str, Any]], group: str) -> list[dict[str, Any]]:
    return [rule for doc in docs if doc["kind"] in ("ClusterRole", "Role")
            for rule in doc.get("rules") or () if group in rule["apiGroups"]]


def kinds_config_map(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [found] = [d for d in docs
               if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-workload-kinds")]
    return found


def controller(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    [c] = deployment["spec"]["template"]["spec"]["containers"]
    return c


def test_default_grants_the_built_in_kinds_and_reads_no_kinds_file(helm, tmp_path):
    docs = rendered(helm, tmp_path, {})
    assert rules_on(docs, "serving.knative.dev") == [
        {"apiGroups": ["serving.knative.dev"], "resources": ["services"], "verbs": WORKLOAD_VERBS}]
    assert rules_on(docs, "apps.kruise.io") == [
        {"apiGroups": ["apps.kruise.io"], "resources": [plural], "verbs": WORKLOAD_VERBS}
        for plural in KRUISE]
    args = controller(docs)["args"]
    assert not [a for a in args if a.startswith(("--workload-kinds-config", "--ignored-workload-types"))]
    assert not [d for d in docs if d["metadata"]["name"].endswith("-workload-kinds")]


def test_each_configured_kind_gets_exactly_its_grant_and_the_file(helm, tmp_path):
    docs = rendered(helm, tmp_path, {"workloadKinds": [WORKER, BATCHER], "openKruise": False,
                                     "knativeServices": False})
    assert rules_on(docs, "example.com") == [
        {"apiGroups": ["example.com"], "resources": ["workers"], "verbs": WORKLOAD_VERBS}]
    assert rules_on(docs, "batch.acme.io") == [
        {"apiGroups": ["batch.acme.io"], "resources": ["batchers"], "verbs": WORKLOAD_VERBS}]
    assert not rules_on(docs, "apps.kruise.io") and not rules_on(docs, "serving.knative.dev")
    c = controller(docs)
    flags = dict(a.split("=", 1) for a in c["args"][1:])
    assert flags["--ignored-workload-types"] == (
        "services.serving.knative.dev,clonesets.apps.kruise.io,statefulsets.apps.kruise.io,"
        "daemonsets.apps.kruise.io")
    path = flags["--workload-kinds-config"]
    [mount] = [m for m in c["volumeMounts"] if m["mountPath"] == path]
    config_map = kinds_config_map(docs)
    assert mount["readOnly"] and yaml.safe_load(config_map["data"][mount["subPath"]]) == {
        "kinds": [WORKER, BATCHER]}


def test_the_chart_grants_what_the_start_up_check_asks_for_every_kind(helm, tmp_path):
    docs = rendered(helm, tmp_path, {"workloadKinds": [WORKER, BATCHER]})
    c = controller(docs)
    config_map = kinds_config_map(docs)
    kinds_file = tmp_path / "workload-kinds.yaml"
    kinds_file.write_text(config_map["data"]["workload-kinds.yaml"])
    args = [f"--workload-kinds-config={kinds_file}" if a.startswith("--workload-kinds-config=") else a
            for a in c["args"][1:]]
    roles = [d for d in docs if d["kind"] == "Role"]
    config = load_config(args, environ={"HOME": "/nonexistent",
                                        "POD_NAMESPACE": roles[0]["metadata"]["namespace"]})
    adapters = adapters_for(ignored=config.filters.ignored_workload_types, kinds=config.behaviour.kinds)
    assert {"Worker.example.com", "Batcher.batch.acme.io", "CloneSet.apps.kruise.io"} <= set(adapters)
    assert not adapters["Worker.example.com"].rolls
    assert adapters["Batcher.batch.acme.io"].spec.completes_like == "none"  # completesLike passed through
    rules = rules_from_role([rule for d in docs if d["kind"] == "ClusterRole" for rule in d["rules"]])
    for role in roles:  # the release namespace: the failure record
        rules += rules_from_role(role["rules"], namespaces=[role["metadata"]["namespace"]])
    denied = [str(need) for need in required_permissions(config, adapters)
              if not any(rule.allows(need.verb, need.group, need.resource, need.namespace, need.name)
                         for rule in rules)]
    assert denied == []


@pytest.mark.parametrize(("field", "value"), [("podTemplatePath", "tmpl"), ("completesLike", "Rollout")])
def test_a_bad_entry_is_refused_by_the_values_schema(helm, tmp_path, field, value):
    values = tmp_path / "values.yaml"
    values.write_text(json.dumps({"reloader": {"workloadKinds": [{**WORKER, field: value}]}}))
    result = run_helm(helm, ["template", "r", str(CHART_DIR), "--values", str(values)], home=tmp_path / "h")
    assert result.returncode != 0 and field in result.stderr
