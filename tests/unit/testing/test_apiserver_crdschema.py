"""Structural-schema admission of custom resources, checked rule by rule like kube-apiserver.

The schema below is a test fixture written for these cases (it is not an upstream CRD):
each property exercises one rule of the apiserver's pruning, defaulting and validation.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gitops_reloader.testing.apiserver.crdschema import (
    BUNDLED_CRDS,
    CRDS_ENV,
    CrdSchemas,
    CrdVersion,
    default_crd_paths,
)
from gitops_reloader.testing.apiserver.status import ApiError

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["interval", "prune"],
            "properties": {
                "interval": {"type": "string", "pattern": "^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"},
                "prune": {"type": "boolean"},
                "force": {"type": "boolean", "default": False},
                "replicas": {"type": "integer", "minimum": 0, "maximum": 10},
                "weight": {"type": "number"},
                "maxSurge": {
                    "x-kubernetes-int-or-string": True,
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                },
                "policy": {"type": "string", "enum": ["Orphan", "Delete"]},
                "name": {"type": "string", "minLength": 1, "maxLength": 5},
                "when": {"type": "string", "format": "date-time"},
                "note": {"type": "string", "nullable": True},
                "values": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "sources": {
                    "type": "array",
                    "maxItems": 2,
                    "items": {
                        "type": "object",
                        "required": ["repoURL"],
                        "properties": {"repoURL": {"type": "string"}, "path": {"type": "string"}},
                    },
                },
                "template": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}},
                },
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}


def schemas() -> CrdSchemas:
    return CrdSchemas([CrdVersion("example.io", "v1", "Widget", "widgets", SCHEMA, True, "fixture")])


def widget(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"interval": "5m", "prune": True}
    base.update(spec)
    return {
        "apiVersion": "example.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": base,
    }


def admit(obj: dict[str, Any]) -> dict[str, Any]:
    return schemas().admit("example.io", "v1", "Widget", "w", copy.deepcopy(obj))


def causes(obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    with pytest.raises(ApiError) as info:
        admit(obj)
    assert info.value.code == 422
    return [(c["reason"], c["field"], c["message"]) for c in info.value.body["details"]["causes"]]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"replicas": 3}, {"replicas": 3}),
        ({"weight": 2}, {"weight": 2}),  # an integer is a fine number
        ({"weight": 0.5}, {"weight": 0.5}),
        ({"maxSurge": 1}, {"maxSurge": 1}),
        ({"maxSurge": "25%"}, {"maxSurge": "25%"}),
        ({"policy": "Delete"}, {"policy": "Delete"}),
        ({"when": "2026-01-02T03:04:05Z"}, {"when": "2026-01-02T03:04:05Z"}),
        ({"when": "2026-01-02T03:04:05.123+02:00"}, {"when": "2026-01-02T03:04:05.123+02:00"}),
        ({"note": None}, {"note": None}),  # nullable keeps null
        ({"replicas": None}, {}),  # null in a non-nullable field is pruned
        ({"values": {"any": {"deep": [1, "x"]}}}, {"values": {"any": {"deep": [1, "x"]}}}),
        ({"labels": {"a": "b"}}, {"labels": {"a": "b"}}),
        ({"unknown": 1, "sources": [{"repoURL": "u", "extra": 2}]}, {"sources": [{"repoURL": "u"}]}),
        (
            {
                "template": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "p"},
                    "spec": {"x": "y", "z": 1},
                }
            },
            {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": "y"}}},
        ),
    ],
)
def test_valid_objects_are_pruned_and_defaulted(spec: dict[str, Any], expected: dict[str, Any]) -> None:
    out = admit(widget(**spec))
    assert out["spec"] == {"interval": "5m", "prune": True, "force": False, **expected}
    assert out["metadata"] == {"name": "w", "namespace": "default"}
    assert (out["apiVersion"], out["kind"]) == ("example.io/v1", "Widget")


def test_unknown_top_level_fields_are_pruned_and_status_kept() -> None:
    obj = widget()
    obj["extra"] = {"a": 1}
    obj["status"] = {"phase": "Ready", "junk": True}
    out = admit(obj)
    assert "extra" not in out
    assert out["status"] == {"phase": "Ready"}


def test_explicit_default_value_is_not_overwritten() -> None:
    assert admit(widget(force=True))["spec"]["force"] is True


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"prune": "yes"},
            [
                (
                    "FieldValueTypeInvalid",
                    "spec.prune",
                    'Invalid value: "string": spec.prune in body must be of type boolean: "string"',
                )
            ],
        ),
        (
            {"replicas": 1.5},
            [
                (
                    "FieldValueTypeInvalid",
                    "spec.replicas",
                    'Invalid value: "number": spec.replicas in body must be of type integer: "number"',
                )
            ],
        ),
        (
            {"replicas": True},
            [
                (
                    "FieldValueTypeInvalid",
                    "spec.replicas",
                    'Invalid value: "boolean": spec.replicas in body must be of type integer: "boolean"',
                )
            ],
        ),
        (
            {"maxSurge": 1.5},
            [
                (
                    "FieldValueTypeInvalid",
                    "spec.maxSurge",
                    'Invalid value: "number": spec.maxSurge in body must be of type integer,string: "number"',
                )
            ],
        ),
        (
            {"policy": "Keep"},
            [
                (
                    "FieldValueNotSupported",
                    "spec.policy",
                    'Unsupported value: "Keep": supported values: "Orphan", "Delete"',
                )
            ],
        ),
        (
            {"interval": "5 minutes"},
            [
                (
                    "FieldValueInvalid",
                    "spec.interval",
                    'Invalid value: "5 minutes": spec.interval in body should match '
                    "'^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$'",
                )
            ],
        ),
        (
            {"replicas": 11},
            [
                (
                    "FieldValueInvalid",
                    "spec.replicas",
                    "Invalid value: 11: spec.replicas in body should be less than or equal to 10",
                )
            ],
        ),
        (
            {"replicas": -1},
            [
                (
                    "FieldValueInvalid",
                    "spec.replicas",
                    "Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
                )
            ],
        ),
        ({"name": "toolong"}, [("FieldValueTooLong", "spec.name", "Too long: may not be more than 5 bytes")]),
        (
            {"name": ""},
            [
                (
                    "FieldValueInvalid",
                    "spec.name",
                    'Invalid value: "": spec.name in body should be at least 1 chars long',
                )
            ],
        ),
        (
            {"when": "yesterday"},
            [
                (
                    "FieldValueInvalid",
                    "spec.when",
                    'Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday"',
                )
            ],
        ),
        (
            {"when": "2026-01-02"},
            [
                (
                    "FieldValueInvalid",
                    "spec.when",
                    'Invalid value: "2026-01-02": spec.when in body must be of type date-time: "2026-01-02"',
                )
            ],
        ),
        (
            {"labels": {"a": 1}},
            [
                (
                    "FieldValueTypeInvalid",
                    "spec.labels.a",
                    'Invalid value: "integer": spec.labels.a in body must be of type string: "integer"',
                )
            ],
        ),
        (
            {"sources": [{"repoURL": "a"}, {"path": "b"}]},
            [("FieldValueRequired", "spec.sources[1].repoURL", "Required value")],
        ),
        (
            {"sources": [{"repoURL": "a"}] * 3},
            [("FieldValueTooMany", "spec.sources", "Too many: 3: must have at most 2 items")],
        ),
    ],
)
def test_invalid_values_are_refused_with_the_real_causes(
    spec: dict[str, Any], expected: list[tuple[str, str, str]]
) -> None:
    assert causes(widget(**spec)) == expected


def test_missing_required_fields_are_all_reported_in_one_422() -> None:
    obj = widget()
    obj["spec"] = {"force": True}
    with pytest.raises(ApiError) as info:
        admit(obj)
    err = info.value
    assert err.code == 422
    assert err.body["message"] == (
        'Widget.example.io "w" is invalid: [spec.interval: Required value, spec.prune: Required value]'
    )
    assert err.body["details"] == {
        "name": "w",
        "group": "example.io",
        "kind": "Widget",
        "causes": [
            {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.interval"},
            {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.prune"},
        ],
    }


def test_missing_spec_is_required_at_the_root() -> None:
    obj = widget()
    del obj["spec"]
    assert causes(obj) == [("FieldValueRequired", "spec", "Required value")]


def test_kinds_without_a_crd_pass_unchanged() -> None:
    obj = {"metadata": {"name": "x"}, "anything": 1}
    assert schemas().admit("example.io", "v1", "Other", "x", obj) is obj


def test_load_reads_multi_document_yaml_and_json_directories(tmp_path: Path) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.io"},
        "spec": {
            "group": "example.io",
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": "Namespaced",
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": SCHEMA}},
                {
                    "name": "v2",
                    "served": True,
                    "storage": False,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": SCHEMA},
                },
                {"name": "v0", "served": False, "schema": {"openAPIV3Schema": SCHEMA}},
            ],
        },
    }
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "widgets.json").write_text(json.dumps(crd))
    (tmp_path / "other.yaml").write_text("kind: ConfigMap\napiVersion: v1\n---\n# only a comment\n")
    loaded = CrdSchemas.load([tmp_path, tmp_path / "missing.yaml"])
    assert sorted((v.version, v.status_subresource) for v in loaded) == [("v1", False), ("v2", True)]
    assert loaded.get("example.io", "v0", "Widget") is None


def test_default_paths_come_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(CRDS_ENV, f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    assert default_crd_paths() == [BUNDLED_CRDS, tmp_path / "a", tmp_path / "b"]
    monkeypatch.delenv(CRDS_ENV)
    assert default_crd_paths()[0] == BUNDLED_CRDS
    assert default_crd_paths()[1].parts[-2:] == (".tools", "crds")
