"""kubernetes-models schemas (inline JSON and ts-json-schema-generator output) → Argo CRD documents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitops_reloader.testing.apiserver.argoimport import (
    ARGO_KINDS,
    UPSTREAM_ANNOTATION,
    argo_crd_document,
    inline_schema,
    main,
    structural,
    upstream_release,
)
from gitops_reloader.testing.apiserver.crdimport import SOURCE_ANNOTATION
from gitops_reloader.testing.apiserver.crdschema import CrdSchemas, default_crd_paths

PRESERVE = {"x-kubernetes-preserve-unknown-fields": True}
INT_OR_STRING = {"x-kubernetes-int-or-string": True}
QUANTITY = r"^(\+|-)?[0-9]+$"


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        # kubernetes-models' inline dialect: nullable everywhere, null branches, open objects
        ({"type": "string", "nullable": True, "description": "d"}, {"type": "string"}),
        ({"format": "int64", "type": "integer", "nullable": True}, {"type": "integer"}),
        ({"format": "date-time", "type": "string"}, {"format": "date-time", "type": "string"}),
        ({"default": "TCP", "type": "string", "nullable": True}, {"default": "TCP", "type": "string"}),
        ({"oneOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"type": "null"}]}, INT_OR_STRING),
        (
            {
                "oneOf": [
                    {"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": QUANTITY},
                    {"type": "null"},
                ]
            },
            {**INT_OR_STRING, "pattern": QUANTITY},
        ),
        ({"oneOf": [{}, {"type": "null"}]}, PRESERVE),
        ({"oneOf": [{"type": "string", "enum": ["a"]}, {"type": "null"}]}, {"type": "string", "enum": ["a"]}),
        ({"type": "object", "properties": {}, "nullable": True}, {"type": "object", **PRESERVE}),
        (
            {
                "type": "object",
                "properties": {},
                "additionalProperties": {"type": "string"},
                "nullable": True,
            },
            {"type": "object", "additionalProperties": {"type": "string"}},
        ),
        ({"$ref": "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta#"}, PRESERVE),
        # ts-json-schema-generator's dialect: const, type lists, additionalProperties false, any
        ({"const": "Application", "type": "string"}, {"enum": ["Application"], "type": "string"}),
        ({"type": ["number", "string"]}, INT_OR_STRING),
        ({"type": ["string", "null"]}, {"type": "string"}),
        ({}, PRESERVE),
        ({"type": "object", "additionalProperties": False}, {"type": "object", **PRESERVE}),
        (
            {"enum": ["create-only", "sync"], "type": "string"},
            {"enum": ["create-only", "sync"], "type": "string"},
        ),
        (
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {"repoURL": {"type": "string"}, "path": {"type": "string"}},
                "required": ["repoURL"],
            },
            {
                "type": "object",
                "properties": {"repoURL": {"type": "string"}, "path": {"type": "string"}},
                "required": ["repoURL"],
            },
        ),
        (
            {"type": "array", "items": {"type": "object", "additionalProperties": {"type": "boolean"}}},
            {"type": "array", "items": {"type": "object", "additionalProperties": {"type": "boolean"}}},
        ),
        ({"type": "array"}, {"type": "array", "items": PRESERVE}),
        ({"anyOf": [{"type": "boolean"}, {"type": "object"}]}, PRESERVE),
    ],
)
def test_structural_node(node: dict[str, Any], expected: dict[str, Any]) -> None:
    assert structural(node) == expected


def test_structural_stops_at_a_preserving_node_past_the_depth_limit() -> None:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(100):
        node = {"type": "object", "properties": {"child": node}}
    out = structural(node)
    depth = 0
    while "properties" in out:
        out = out["properties"]["child"]
        depth += 1
    assert out == PRESERVE
    assert 40 < depth < 100


def test_inline_schema_is_read_from_the_module_source() -> None:
    source = 'const schemaId = "x";\nconst schema = {\n    "type": "object",\n    "required": ["spec"]\n};\n'
    assert inline_schema(source) == {"type": "object", "required": ["spec"]}
    with pytest.raises(ValueError, match="not an inline-schema"):
        inline_schema('"use strict";let _validate=require("x")')


def test_a_package_of_several_projects_is_read_at_the_kinds_own_release() -> None:
    package = {"crd-generate": {"input": [
        "https://github.com/knative/serving/releases/download/knative-v1.10.1/serving-crds.yaml",
        "https://github.com/knative/eventing/releases/download/knative-v1.10.0/eventing-crds.yaml"]}}
    assert upstream_release(package, "knative/serving") == "v1.10.1"
    assert upstream_release(package, "knative/eventing") == "v1.10.0"
    with pytest.raises(ValueError, match="expected one upstream release"):
        upstream_release(package)


def test_upstream_release_is_the_one_named_by_the_crd_inputs() -> None:
    base = "https://raw.githubusercontent.com/argoproj/argo-cd"
    package = {
        "crd-generate": {"input": [f"{base}/v2.14.11/manifests/crds/{k}-crd.yaml" for k in ("a", "b")]}
    }
    assert upstream_release(package) == "v2.14.11"
    package["crd-generate"]["input"].append(f"{base}/v2.10.8/manifests/crds/c-crd.yaml")
    with pytest.raises(ValueError, match=r"\['v2.10.8', 'v2.14.11'\]"):
        upstream_release(package)
    with pytest.raises(ValueError, match=r"found \[\]"):
        upstream_release({"go-generate": {"input": ["github.com/argoproj/argo-cd/v3/pkg/apis"]}})


def test_crd_document_requires_what_upstream_requires_and_names_its_source() -> None:
    application = ARGO_KINDS[0]
    model = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": "argoproj.io/v1alpha1", "type": "string"},
            "kind": {"const": "Application", "type": "string"},
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "spec": {
                "type": "object",
                "properties": {"project": {"type": "string"}},
                "required": ["project"],
            },
        },
        "required": ["apiVersion", "kind", "metadata", "spec"],
    }
    doc = argo_crd_document(application, structural(model), "npm x@1", "argoproj/argo-cd v2.14.11")
    version = doc["spec"]["versions"][0]
    schema = version["schema"]["openAPIV3Schema"]
    assert schema["required"] == ["metadata", "spec"]
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert schema["properties"]["kind"] == {"type": "string"}
    assert version["subresources"] == {}  # Application has no status subresource upstream
    assert doc["metadata"] == {
        "name": "applications.argoproj.io",
        "annotations": {SOURCE_ANNOTATION: "npm x@1", UPSTREAM_ANNOTATION: "argoproj/argo-cd v2.14.11"},
    }
    assert (
        "required"
        not in argo_crd_document(application, {"type": "object", "required": ["kind"]}, "", "")["spec"][
            "versions"
        ][0]["schema"]["openAPIV3Schema"]
    )


def _package(root: Path, name: str, version: str, release: str) -> Path:
    pkg = root / name
    pkg.mkdir(parents=True)
    url = f"https://example.invalid/{release}/install.yaml"
    (pkg / "package.json").write_text(json.dumps({"version": version, "crd-generate": {"input": [url]}}))
    return pkg


def test_main_writes_one_loadable_crd_per_kind(tmp_path: Path) -> None:
    modules, declarations, out = tmp_path / "node_modules", tmp_path / "declarations", tmp_path / "out"
    argo_cd = _package(modules, "@kubernetes-models/argo-cd", "2.7.2", "v2.14.11")
    rollouts = _package(modules, "@kubernetes-models/argo-rollouts", "0.3.2", "v1.5.0")
    (rollouts / "argoproj.io" / "v1alpha1").mkdir(parents=True)
    rollout = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"paused": {}}}}}
    (rollouts / "argoproj.io/v1alpha1/Rollout.js").write_text(f"const schema = {json.dumps(rollout)};\n")
    declarations.mkdir()
    (argo_cd / "_schemas").mkdir()
    for kind in ("Application", "ApplicationSet"):
        spec = {"type": "object", "properties": {"limit": {"type": "number"}}}
        generated = {
            "$ref": f"#/definitions/I{kind}",
            "definitions": {f"I{kind}": {"type": "object", "properties": {"spec": spec}}},
        }
        (declarations / f"{kind}.json").write_text(json.dumps(generated))
        (argo_cd / f"_schemas/ArgoprojIoV1alpha1{kind}.js").write_text(
            "function validate(data) {\n"
            '  validate.errors = data.spec.limit % 1 ? [{instancePath: "/spec/limit", keyword: "type", '
            'params: {type: "integer"}}] : null;\n'
            "  return !validate.errors;\n"
            "}\nmodule.exports = {validate};\n"
        )
    argv = ["--out", str(out), "--node-modules", str(modules), "--declarations", str(declarations)]
    assert main([*argv, "--generator-version", "2.4.0"]) == 0
    schemas = CrdSchemas.load([out])
    assert sorted((c.kind, c.plural, c.status_subresource) for c in schemas) == [
        ("Application", "applications", False),
        ("ApplicationSet", "applicationsets", True),
        ("Rollout", "rollouts", True),
    ]
    doc = json.loads((out / "argoproj.io_rollouts.json").read_text())
    assert doc["metadata"]["annotations"] == {
        SOURCE_ANNOTATION: "reconstructed from npm @kubernetes-models/argo-rollouts@0.3.2 "
        "(inline JSON schema; generated by kubernetes-models from the argoproj/argo-rollouts v1.5.0 CRDs)",
        UPSTREAM_ANNOTATION: "argoproj/argo-rollouts v1.5.0",
    }
    assert (
        "ts-json-schema-generator@2.4.0"
        in json.loads((out / "argoproj.io_applications.json").read_text())["metadata"]["annotations"][
            SOURCE_ANNOTATION
        ]
    )


def test_installed_argo_crds_require_what_upstream_requires() -> None:
    """``.ci/install-tools.sh`` writes the Argo CRDs; required fields and releases as upstream."""
    schemas = CrdSchemas.load(default_crd_paths())
    found = {}
    for kind in ARGO_KINDS:
        crd = schemas.get(kind.group, kind.version, kind.kind)
        assert crd is not None, f"{kind.kind} CRD missing: run `bash .ci/install-tools.sh`"
        assert crd.status_subresource is kind.status_subresource
        found[kind.kind] = (
            sorted(crd.schema.get("required", [])),
            sorted(crd.schema["properties"]["spec"].get("required", [])),
        )
    assert found == {
        "Application": (["metadata", "spec"], ["destination", "project"]),
        "ApplicationSet": (["metadata", "spec"], ["generators", "template"]),
        "Rollout": (["spec"], []),
    }
    app = schemas.get("argoproj.io", "v1alpha1", "Application")
    assert app is not None
    hydrator = app.schema["properties"]["spec"]["properties"]["sourceHydrator"]
    assert sorted(hydrator["required"]) == ["drySource", "syncSource"]
    assert sorted(hydrator["properties"]["drySource"]["required"]) == ["path", "repoURL", "targetRevision"]
    assert app.schema["properties"]["spec"]["properties"]["sources"]["items"]["required"] == ["repoURL"]
    upstream = {}
    for path in sorted(
        Path(p) for root in default_crd_paths() for p in Path(root).rglob("argoproj.io_*.json")
    ):
        upstream[path.name] = json.loads(path.read_text())["metadata"]["annotations"][UPSTREAM_ANNOTATION]
    assert upstream == {
        "argoproj.io_applications.json": "argoproj/argo-cd v2.14.11",
        "argoproj.io_applicationsets.json": "argoproj/argo-cd v2.14.11",
        "argoproj.io_rollouts.json": "argoproj/argo-rollouts v1.5.0",
    }
