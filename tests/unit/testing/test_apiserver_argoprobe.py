"""The validator probe: integer types and formats read back from a compiled validator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gitops_reloader.testing.apiserver.argoprobe import (
    PROBE_NUMBER,
    PROBE_STRING,
    probe_object,
    refine,
    validator_errors,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "properties": {
                "limit": {"type": "number"},
                "mode": {"type": "string", "enum": ["sync", "create-only"]},
                "maxUpdate": {"x-kubernetes-int-or-string": True},
                "valuesObject": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "history": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"id": {"type": "number"}, "deployedAt": {"type": "string"}},
                    },
                },
                "dry": {"type": "boolean"},
            },
        },
    },
}

PROBE = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Application",
    "metadata": {"name": PROBE_STRING},
    "spec": {
        "limit": PROBE_NUMBER,
        "mode": "sync",
        "maxUpdate": 1,
        "labels": {"k": PROBE_STRING},
        "history": [{"id": PROBE_NUMBER, "deployedAt": PROBE_STRING}],
        "dry": True,
    },
}

# What ajv (allErrors) reports for PROBE when history[].id is an int64 and deployedAt a date-time.
ERRORS = [
    {"instancePath": "/spec/history/0/id", "keyword": "type", "params": {"type": "integer"}},
    {"instancePath": "/spec/history/0/id", "keyword": "format", "params": {"format": "int64"}},
    {"instancePath": "/spec/history/0/deployedAt", "keyword": "format", "params": {"format": "date-time"}},
    {"instancePath": "/spec/labels/k", "keyword": "pattern", "params": {"pattern": "^[a-z]+$"}},
    {"instancePath": "/spec/valuesObject", "keyword": "required", "params": {"missingProperty": "x"}},
    {"instancePath": "/spec/nowhere/0", "keyword": "type", "params": {"type": "integer"}},
]


def test_probe_fills_every_known_field_with_a_lax_value() -> None:
    assert probe_object(SCHEMA, "argoproj.io/v1alpha1", "Application") == PROBE


def test_refine_makes_the_named_fields_as_strict_as_the_validator() -> None:
    refined, changed = refine(SCHEMA, ERRORS)
    spec = refined["properties"]["spec"]["properties"]
    assert spec["history"]["items"]["properties"] == {
        "id": {"type": "integer"},
        "deployedAt": {"type": "string", "format": "date-time"},
    }
    assert spec["labels"]["additionalProperties"] == {"type": "string", "pattern": "^[a-z]+$"}
    assert spec["limit"] == {"type": "number"}  # the validator did not complain: stays a number
    assert changed == [
        "/spec/history/0/id: type integer",
        "/spec/history/0/deployedAt: format date-time",
        "/spec/labels/k: pattern ^[a-z]+$",
    ]
    assert SCHEMA["properties"]["spec"]["properties"]["history"]["items"]["properties"]["id"] == {
        "type": "number"
    }


def test_validator_errors_runs_the_compiled_module_with_node(tmp_path: Path) -> None:
    module = tmp_path / "_schemas" / "Validator.js"
    module.parent.mkdir()
    module.write_text(
        "function validate(data) {\n"
        "  validate.errors = [];\n"
        "  if (data.spec.history[0].id % 1) validate.errors.push("
        '{instancePath: "/spec/history/0/id", keyword: "type", params: {type: "integer"}});\n'
        "  return validate.errors.length === 0;\n"
        "}\n"
        "module.exports = {validate};\n"
    )
    assert validator_errors(module, PROBE) == [ERRORS[0]]
    module.write_text("throw new Error('broken module')\n")
    with pytest.raises(RuntimeError, match="broken module"):
        validator_errors(module, PROBE)


def test_validator_errors_says_when_node_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="node not found"):
        validator_errors(tmp_path / "v.js", PROBE)
