"""Pydantic JSON schema → structural openAPIV3Schema, node by node, and the installed Flux CRDs."""

from __future__ import annotations

from typing import Any

import pytest

from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.apiserver.crdimport import FLUX_KINDS, crd_document, structural
from gitops_reloader.testing.apiserver.crdschema import CrdSchemas, default_crd_paths
from gitops_reloader.testing.apiserver.resources import RESOURCES

DEFS: dict[str, Any] = {
    "Ref": {"type": "object", "properties": {"branch": {"type": "string"}}, "required": ["branch"]},
}


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        ({"type": "string", "title": "Url", "description": "d"}, {"type": "string"}),
        ({"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}, {"type": "string"}),
        (
            {"anyOf": [{"type": "string"}, {"type": "null"}], "default": "60s"},
            {"type": "string", "default": "60s"},
        ),
        ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"x-kubernetes-int-or-string": True}),
        (
            {"anyOf": [{"type": "integer"}, {"type": "object"}]},
            {"x-kubernetes-preserve-unknown-fields": True},
        ),
        ({"const": "v1", "type": "string"}, {"enum": ["v1"], "type": "string"}),
        ({"enum": ["a", "b"], "type": "string"}, {"enum": ["a", "b"], "type": "string"}),
        (
            {"type": "string", "pattern": "^x$", "minLength": 1, "maxLength": 9, "format": "date-time"},
            {"type": "string", "pattern": "^x$", "minLength": 1, "maxLength": 9, "format": "date-time"},
        ),
        ({"type": "string", "format": "uri-reference"}, {"type": "string"}),
        ({"type": "integer", "minimum": 0, "maximum": 9}, {"type": "integer", "minimum": 0, "maximum": 9}),
        (
            {"type": "integer", "exclusiveMinimum": 0},
            {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
        ),
        ({}, {"x-kubernetes-preserve-unknown-fields": True}),
        (
            {"type": "object", "additionalProperties": True},
            {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        ),
        (
            {"type": "object", "additionalProperties": {"type": "string"}},
            {"type": "object", "additionalProperties": {"type": "string"}},
        ),
        (
            {"type": "array", "items": {"$ref": "#/$defs/Ref"}, "maxItems": 2},
            {"type": "array", "maxItems": 2, "items": DEFS["Ref"]},
        ),
        ({"anyOf": [{"$ref": "#/$defs/Ref"}, {"type": "null"}], "default": None}, DEFS["Ref"]),
    ],
)
def test_structural_node(node: dict[str, Any], expected: dict[str, Any]) -> None:
    assert structural(node, DEFS) == expected


def test_self_referencing_definitions_stop_at_a_preserving_node() -> None:
    defs = {"Tree": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Tree"}}}}
    out = structural({"$ref": "#/$defs/Tree"}, defs)
    depth = 0
    while "properties" in out:
        out = out["properties"]["child"]
        depth += 1
    assert out == {"x-kubernetes-preserve-unknown-fields": True}
    assert depth > 10


def test_crd_document_serves_the_kind_with_status_and_keeps_type_meta() -> None:
    kind = FLUX_KINDS[0]
    model = {
        "type": "object",
        "properties": {
            "apiVersion": {"anyOf": [{"const": "x", "type": "string"}, {"type": "null"}]},
            "metadata": {"$ref": "#/$defs/ObjectMeta"},
            "spec": {"anyOf": [{"$ref": "#/$defs/Ref"}, {"type": "null"}], "default": None},
        },
        "$defs": {**DEFS, "ObjectMeta": {"type": "object", "properties": {"name": {"type": "string"}}}},
    }
    doc = crd_document(kind, model, "test")
    version = doc["spec"]["versions"][0]
    assert (doc["spec"]["group"], doc["spec"]["names"]["kind"], version["name"]) == (
        kind.group,
        kind.kind,
        kind.version,
    )
    assert version["subresources"] == {"status": {}}
    schema = version["schema"]["openAPIV3Schema"]
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert schema["properties"]["apiVersion"] == {"type": "string"}
    assert schema["properties"]["spec"] == DEFS["Ref"]
    assert doc["metadata"]["annotations"] == {"gitops-reloader.dev/schema-source": "test"}


def test_installed_flux_crds_require_what_upstream_requires() -> None:
    """``.ci/install-tools.sh`` writes the Flux CRDs; their required fields match Flux's."""
    schemas = CrdSchemas.load(default_crd_paths())
    required = {}
    for kind in FLUX_KINDS:
        crd = schemas.get(kind.group, kind.version, kind.kind)
        assert crd is not None, f"{kind.kind} CRD missing: run `bash .ci/install-tools.sh`"
        assert crd.status_subresource
        required[kind.kind] = sorted(crd.schema["properties"]["spec"].get("required", []))
    assert required == {
        "GitRepository": ["interval", "url"],
        "OCIRepository": ["interval", "url"],
        "Kustomization": ["interval", "prune", "sourceRef"],
        "HelmRelease": ["interval"],
    }


def test_served_custom_kinds_match_their_installed_crds() -> None:
    """Every installed CRD is served with the same status subresource (from the start, or
    once installed with ``serve_crd``), and every custom kind of the catalogue has one."""
    schemas = CrdSchemas.load(default_crd_paths())
    served = {(r.group, r.version, r.kind): r for r in RESOURCES if r.custom}
    server = ApiServer()  # not started: serve_crd changes only its catalogue
    for crd in schemas:
        rt = served.get((crd.group, crd.version, crd.kind))
        if rt is None:  # Knative, OpenKruise: served once the test installs the CRD (all versions)
            if server.registry.lookup(crd.group, crd.version, crd.plural) is None:
                server.serve_crd(f"{crd.plural}.{crd.group}")
            rt = server.registry.lookup(crd.group, crd.version, crd.plural)
            assert rt is not None and rt.custom, f"{crd.kind} has a CRD but is not served"
        assert (rt.plural, rt.status_subresource) == (crd.plural, crd.status_subresource)
    unchecked = sorted(k for g, v, k in served if schemas.get(g, v, k) is None)
    assert unchecked == [], "run `bash .ci/install-tools.sh`"
