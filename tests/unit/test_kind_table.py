"""kinds.py: the workload-kind rows, the --workload-kinds-config parser and the schema path check."""

from __future__ import annotations

import pytest

from gitops_reloader.errors import ConfigError
from gitops_reloader.gitops.locate import (
    ARGOCD_TRACKING_ANNOTATION,
    ObjectIdentity,
    parse_tracking_id,
    workload_identity,
)
from gitops_reloader.kinds import (
    BUILTIN_KINDS,
    KindSpec,
    kube_kind,
    parse_kinds_config,
    template_path_problem,
)
from gitops_reloader.kube.workloads import WorkloadAdapter, adapters_for

WORKER = """\
kinds:
  - group: example.com
    version: v1
    kind: Worker
    plural: workers
    podTemplatePath: spec.podTemplate
"""


def test_a_config_entry_becomes_a_row_keyed_kind_dot_group():
    [spec] = parse_kinds_config(WORKER, source="kinds.yaml")
    assert spec == KindSpec("example.com", "v1", "Worker", "workers", ("spec", "podTemplate"),
                            source="kinds.yaml entry 1 (Worker)")
    assert (spec.key, spec.resource_name, spec.api_version, spec.rolls) == (
        "Worker.example.com", "workers.example.com", "example.com/v1", True)


@pytest.mark.parametrize(("text", "message"), [
    ("kinds: {}", "kinds.yaml: must be a mapping with one key, kinds"),
    ("other: []", "kinds.yaml: must be a mapping with one key, kinds"),
    ("kinds: [1]", "kinds.yaml entry 1: must be a mapping"),
    ("kinds: [{kind: Worker}]", "kinds.yaml entry 1 (Worker): group must be an API group"),
    (WORKER.replace("example.com", "Example"), "entry 1 (Worker): group must be an API group"),
    (WORKER.replace("v1", "1"), "entry 1 (Worker): version must be an API version"),
    (WORKER.replace("kind: Worker", "kind: worker"), "entry 1 (worker): kind must be a kind such as Worker"),
    (WORKER.replace("plural: workers", "plural: Workers"), "entry 1 (Worker): plural must be the lower-case"),
    (WORKER.replace("spec.podTemplate", "spec..podTemplate"), "podTemplatePath 'spec..podTemplate' is not a"),
    (WORKER.replace("spec.podTemplate", "template"), "podTemplatePath 'template' must start at spec"),
    (WORKER.replace("spec.podTemplate", "spec.a.b.c.d.e.f.g.h.i.j"), "at most 10 fields"),
    (WORKER + "    rollsOnTemplateChange: maybe\n", "rollsOnTemplateChange must be true or false"),
    (WORKER + "    colour: blue\n", "unknown field(s) colour; known: group"),
    (WORKER + "    completesLike: Rollout\n", "kinds.yaml entry 1 (Worker): completesLike must be one of "
                                             "Deployment, StatefulSet, DaemonSet, Ready-condition, none, "
                                             "got 'Rollout'"),
    (WORKER + "    completesLike: deployment\n", "completesLike must be one of"),
    (WORKER + "    completesLike: ''\n", "completesLike must be one of"),
    (WORKER + "    completesLike: [Deployment]\n", "completesLike must be one of"),
    (WORKER + WORKER.removeprefix("kinds:\n"), "kinds.yaml entry 2 (Worker): Worker.example.com is already "
                                               "defined (kinds.yaml entry 1 (Worker))"),
    (WORKER.replace("example.com", "apps.kruise.io").replace("Worker", "CloneSet"),
     "CloneSet.apps.kruise.io is already defined (built-in)"),
    ("kinds: [", "kinds.yaml: not valid YAML"),
    ("x" * (256 * 1024 + 1), "larger than 262144 bytes"),
])
def test_a_bad_config_names_the_file_and_the_entry(text, message):
    with pytest.raises(ConfigError) as caught:
        parse_kinds_config(text, source="kinds.yaml")
    assert message in str(caught.value)


@pytest.mark.parametrize("name", ["Deployment", "StatefulSet", "DaemonSet", "Ready-condition", "none"])
def test_completes_like_is_read_and_names_the_adapters_rule(name):
    [spec] = parse_kinds_config(WORKER + f"    completesLike: {name}\n", source="f")
    assert spec.completes_like == name
    done_at_write = WorkloadAdapter(spec=spec).rollout_status({"metadata": {"generation": 1}})
    assert (done_at_write.reason == "CompleteAtWrite") == (name == "none")


def test_without_completes_like_a_kind_keeps_its_own_rule():
    [spec] = parse_kinds_config(WORKER, source="f")
    assert spec.completes_like == ""
    assert WorkloadAdapter(spec=spec).rollout_status({"metadata": {"generation": 1}}).reason == (
        "ObservedGenerationBehind")  # the Ready-condition rule: nothing observed yet
    assert all(not s.completes_like for s in BUILTIN_KINDS)  # OpenKruise rows: their own rules


def test_a_revision_name_path_is_read():
    text = WORKER + "    revisionNamePath: spec.podTemplate.metadata.name\n"
    [spec] = parse_kinds_config(text, source="f")
    assert spec.revision_name_path == ("spec", "podTemplate", "metadata", "name")
    with pytest.raises(ConfigError, match=r"revisionNamePath 'metadata\.name' must start at spec"):
        parse_kinds_config(WORKER + "    revisionNamePath: metadata.name\n", source="f")


def test_an_empty_config_adds_no_kind():
    assert parse_kinds_config("", source="kinds.yaml") == ()


def test_rolls_is_read_and_the_core_kinds_keep_their_names():
    [spec] = parse_kinds_config(WORKER + "    rollsOnTemplateChange: false\n", source="f")
    assert not spec.rolls and not WorkloadAdapter(spec=spec).rolls
    assert [kube_kind(k) for k in ("StatefulSet.apps.kruise.io", "Deployment", "Worker.example.com")] == [
        "StatefulSet", "Deployment", "Worker"]


def test_the_table_keeps_apps_and_kruise_statefulsets_apart():
    adapters = adapters_for()
    assert adapters["StatefulSet"].resource.group == "apps"
    assert adapters["StatefulSet.apps.kruise.io"].resource.api_version == "apps.kruise.io/v1beta1"
    assert adapters["DaemonSet.apps.kruise.io"].resource.api_version == "apps.kruise.io/v1alpha1"
    cloneset = adapters["CloneSet.apps.kruise.io"]  # master's storage version first, v1.9's after
    assert cloneset.resource.api_version == "apps.kruise.io/v1beta1"
    assert cloneset.spec is not None and cloneset.spec.fallback_versions == ("v1alpha1",)
    assert adapters["Service.serving.knative.dev"].resource.api_version == "serving.knative.dev/v1"
    assert all(adapters[s.key].discovered for s in BUILTIN_KINDS)
    assert not adapters_for(ignored=["clonesets.apps.kruise.io"]).get("CloneSet.apps.kruise.io")


TEMPLATE = {"type": "object", "properties": {"metadata": {"type": "object"}, "spec": {"type": "object"}}}
OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


@pytest.mark.parametrize(("spec_schema", "path", "problem"), [
    ({"properties": {"podTemplate": TEMPLATE}}, ("spec", "podTemplate"), None),
    ({"properties": {"template": OPEN}}, ("spec", "template"), None),  # OpenKruise: schemaless
    ({"properties": {"jobTemplate": OPEN}}, ("spec", "jobTemplate", "spec", "template"), None),
    ({"properties": {"podTemplate": TEMPLATE}}, ("spec", "template"),
     "spec.template is not a field of the kind's schema"),
    ({"properties": {"queue": {"type": "string"}}}, ("spec", "queue"),
     "spec.queue is a string, not a pod template"),
    ({"properties": {"worker": {"type": "object", "properties": {"image": {"type": "string"}}}}},
     ("spec", "worker"), "spec.worker has no spec: not a pod template"),
    ({"type": "object"}, ("spec", "template"), "spec has no fields"),
])
def test_template_path_problem(spec_schema, path, problem):
    schema = {"type": "object", "properties": {"spec": {"type": "object", **spec_schema}}}
    assert template_path_problem(schema, path) == problem


def _service(template_name: str | None) -> dict:
    metadata = {"labels": {"app": "web"}, **({"name": template_name} if template_name else {})}
    return {"apiVersion": "serving.knative.dev/v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "7"},
            "spec": {"template": {"metadata": metadata,
                                  "spec": {"containers": [{"name": "user-container", "image": "x"}]}}}}


@pytest.mark.parametrize(("kind", "template_name", "refused"), [
    ("Service.serving.knative.dev", "web-v1", True),
    ("Service.serving.knative.dev", None, False),
    ("Service.serving.knative.dev", "", False),
    ("CloneSet.apps.kruise.io", "web-v1", False),  # a pod template's name is no revision name there
])
def test_only_a_fixed_knative_revision_name_refuses_a_write(kind, template_name, refused):
    adapter = adapters_for()[kind]
    record = adapter.record(_service(template_name))
    refusal = adapter.refusal(record)
    assert (refusal is not None) is refused
    if refusal is not None:
        assert refusal[0] == "FixedRevisionName"
        assert refusal[1].startswith("spec.template.metadata.name is fixed ('web-v1') and must change")
    assert record.template_path == ("spec", "template") and record.ref.kind == kind


def test_locate_sees_the_objects_own_kind_and_group():
    """Argo CD tracking ids, Flux origins and the scan compare group and kind of the object,
    never the controller's Kind.group key."""
    adapter = adapters_for()["StatefulSet.apps.kruise.io"]
    record = adapter.record({"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
                             "metadata": {"name": "db", "namespace": "ns", "annotations": {
                                 ARGOCD_TRACKING_ANNOTATION: "shop:apps.kruise.io/StatefulSet:ns/db"}},
                             "spec": {"template": {"spec": {"containers": [{"name": "db", "image": "x"}]}}}})
    identity = workload_identity(record)
    assert identity == ObjectIdentity("apps.kruise.io", "StatefulSet", "ns", "db")
    assert parse_tracking_id("shop:apps.kruise.io/StatefulSet:ns/db").describes(identity)
    assert not parse_tracking_id("shop:apps/StatefulSet:ns/db").describes(identity)
