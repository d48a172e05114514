"""Integer types, formats and patterns read back from a compiled kubernetes-models validator.

Why: TypeScript declarations say ``number`` for an ``integer`` field and ``string`` for a
``date-time`` one, but the package's compiled ajv validator (``_schemas/<Group><Version>
<Kind>.js``, built from the same upstream CRD) still checks them. ``probe_object`` fills
every field the declared schema knows with a value a plain ``number`` or ``string``
accepts (``0.5``, ``"probe"``); ``validator_errors`` runs that one object through the
validator with node (it reports all errors, not the first); ``refine`` makes each field an
error names (``instancePath``) as strict as the validator: ``type: integer``, an
apiserver-checked ``format``, a ``pattern``. Other errors (a ``required`` field under an
open object the probe leaves empty, ``int64`` formats the apiserver does not check) are
not schema facts the probe can read, and are ignored.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from .crdimport import APISERVER_FORMATS

__all__ = ["PROBE_NUMBER", "PROBE_STRING", "probe_object", "refine", "validator_errors"]

PROBE_NUMBER: Final = 0.5
PROBE_STRING: Final = "probe"
_NODE_TIMEOUT_S: Final = 120
_RUN_VALIDATOR: Final = (
    "const {validate} = require(process.argv[1]);"
    'validate(JSON.parse(require("fs").readFileSync(0, "utf8")));'
    "process.stdout.write(JSON.stringify(validate.errors || []));"
)


def _probe(node: Mapping[str, Any]) -> Any:
    """A value for ``node`` that only a lax ``number``/``string`` accepts; ``None``: leave out."""
    if "enum" in node:
        return node["enum"][0]
    if node.get("x-kubernetes-int-or-string"):
        return 1
    kind = node.get("type")
    if kind == "number":
        return PROBE_NUMBER
    if kind == "integer":
        return 1
    if kind == "string":
        return PROBE_STRING
    if kind == "boolean":
        return True
    if kind == "array":
        item = _probe(node.get("items") or {})
        return [] if item is None else [item]
    if kind == "object" and not node.get("x-kubernetes-preserve-unknown-fields"):
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            value = _probe(extra)
            return {} if value is None else {"k": value}
        props: Mapping[str, Any] = node.get("properties") or {}
        return {key: value for key, sub in props.items() if (value := _probe(sub)) is not None}
    return None


def probe_object(schema: Mapping[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """The probe for a root ``openAPIV3Schema``: every known field filled, type meta set."""
    probe = _probe({k: v for k, v in schema.items() if k != "x-kubernetes-preserve-unknown-fields"})
    body: dict[str, Any] = probe if isinstance(probe, dict) else {}
    body.update(apiVersion=api_version, kind=kind, metadata={"name": PROBE_STRING})
    return body


def _node_at(schema: dict[str, Any], pointer: str) -> dict[str, Any] | None:
    """The schema node a JSON pointer into the probe object leads to."""
    node = schema
    for raw in pointer.split("/")[1:] if pointer else ():
        segment = raw.replace("~1", "/").replace("~0", "~")
        props = node.get("properties") or {}
        if segment in props:
            node = props[segment]
        elif isinstance(node.get("items"), dict) and segment.isdigit():
            node = node["items"]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None
    return node


def refine(
    schema: Mapping[str, Any], errors: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, Any], list[str]]:
    """``schema`` made as strict as the validator's errors on the probe; and what changed."""
    out = copy.deepcopy(dict(schema))
    changed: list[str] = []
    for error in errors:
        path = str(error.get("instancePath", ""))
        node = _node_at(out, path)
        params = error.get("params") or {}
        keyword = error.get("keyword")
        if node is None:
            continue
        if keyword == "type" and params.get("type") == "integer" and node.get("type") == "number":
            node["type"] = "integer"
        elif (
            keyword == "format" and params.get("format") in APISERVER_FORMATS and node.get("type") == "string"
        ):
            node["format"] = params["format"]
        elif keyword == "pattern" and isinstance(params.get("pattern"), str) and node.get("type") == "string":
            node["pattern"] = params["pattern"]
        else:
            continue
        changed.append(f"{path or '/'}: {keyword} {node.get(str(keyword), node.get('type'))}")
    return out, changed


def validator_errors(module: Path, probe: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The errors the compiled validator ``module`` reports for ``probe`` (runs ``node``)."""
    try:
        done = subprocess.run(
            ["node", "-e", _RUN_VALIDATOR, str(module.resolve())],
            input=json.dumps(probe),
            capture_output=True,
            text=True,
            timeout=_NODE_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError as exc:
        raise RuntimeError(
            "node not found: the Argo CD schema refinement runs the package's validator"
        ) from exc
    if done.returncode != 0:
        raise RuntimeError(f"validator {module.name} failed: {done.stderr.strip()[-2000:]}")
    errors = json.loads(done.stdout)
    if not isinstance(errors, list):
        raise RuntimeError(f"validator {module.name} printed no error list")
    return errors
