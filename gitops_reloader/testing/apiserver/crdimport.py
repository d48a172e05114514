"""Flux CRD documents rebuilt from the generated models of a PyPI package.

Why: the test server must validate Flux objects against Flux's real CRD schemas, and
only package registries are reachable from CI. No PyPI or npm package ships Flux's CRD
YAML verbatim; the closest faithful registry source is ``cloudcoil-models-fluxcd``
(PyPI), whose pydantic models are generated from the upstream CRDs of the Flux release
in their version number (``2.5.1.0`` is Flux v2.5.1). Their JSON schema keeps the
CRD's types, required fields, enums, patterns, length and number bounds, formats and
non-null defaults; ``structural`` turns it back into an ``openAPIV3Schema``.

Lost in that round trip, so not checked by the test server: defaults the generator
dropped (e.g. GitRepository ``spec.timeout: 60s``), CEL rules, descriptions. Schemas
are reconstructions and are labelled so in the documents written
(``metadata.annotations``), never passed off as the upstream files.

``python -m gitops_reloader.testing.apiserver.crdimport --out DIR`` imports the models
(which must be importable, e.g. ``PYTHONPATH=<pip --target dir>``) and writes one CRD
JSON document per kind; ``.ci/install-tools.sh`` runs it into ``.tools/crds/``.
This module needs only the standard library, so it runs beside any pydantic version.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

__all__ = [
    "APISERVER_FORMATS",
    "FLUX_KINDS",
    "KEPT_KEYWORDS",
    "SOURCE_ANNOTATION",
    "CrdNames",
    "FluxKind",
    "crd_document",
    "crd_envelope",
    "structural",
]

SOURCE_PACKAGE: Final = "cloudcoil-models-fluxcd"
SOURCE_ANNOTATION: Final = "gitops-reloader.dev/schema-source"
"""Annotation on every rebuilt CRD naming the registry package it came from."""
_MAX_DEPTH: Final = 40
KEPT_KEYWORDS: Final = (
    "enum",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
)
"""Validation keywords copied as they are into the structural schema."""
APISERVER_FORMATS: Final = frozenset({"date-time", "date", "byte", "uuid", "ipv4"})
"""The string formats kube-apiserver checks (``crdschema``); others are dropped."""


class CrdNames(Protocol):
    """How a CRD names its kind: what ``crd_envelope`` needs."""

    @property
    def kind(self) -> str: ...
    @property
    def group(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def plural(self) -> str: ...


@dataclass(frozen=True, slots=True)
class FluxKind:
    """One Flux kind: where its model lives and how its CRD names it."""

    module: str
    kind: str
    group: str
    version: str
    plural: str


_MODELS: Final = "cloudcoil.models.fluxcd"
FLUX_KINDS: Final[tuple[FluxKind, ...]] = (
    FluxKind(f"{_MODELS}.source.v1", "GitRepository", "source.toolkit.fluxcd.io", "v1", "gitrepositories"),
    FluxKind(
        f"{_MODELS}.source.v1beta2", "OCIRepository", "source.toolkit.fluxcd.io", "v1beta2", "ocirepositories"
    ),
    FluxKind(
        f"{_MODELS}.kustomize.v1", "Kustomization", "kustomize.toolkit.fluxcd.io", "v1", "kustomizations"
    ),
    FluxKind(f"{_MODELS}.helm.v2", "HelmRelease", "helm.toolkit.fluxcd.io", "v2", "helmreleases"),
)
"""The kinds taken from the package; every Flux CRD has a status subresource."""

_PRESERVE: Final = {"x-kubernetes-preserve-unknown-fields": True}


def _resolve(node: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return defs[ref.removeprefix("#/$defs/")]
    return node


def structural(node: Mapping[str, Any], defs: Mapping[str, Any], depth: int = 0) -> dict[str, Any]:
    """The structural ``openAPIV3Schema`` node for one pydantic JSON schema node.

    ``anyOf`` with ``null`` means "optional" (not ``nullable``: the CRDs omit absent
    fields); ``anyOf`` of integer and string is ``x-kubernetes-int-or-string``; an
    untyped node or a free-form map keeps unknown fields, like the CRD's
    ``x-kubernetes-preserve-unknown-fields``.
    """
    node = _resolve(node, defs)
    if depth > _MAX_DEPTH:
        return dict(_PRESERVE)
    variants = node.get("anyOf")
    if isinstance(variants, list):
        kept = [_resolve(v, defs) for v in variants if v.get("type") != "null"]
        types = sorted(str(v.get("type")) for v in kept)
        if len(kept) == 1:
            out = structural(kept[0], defs, depth)
        elif types == ["integer", "string"]:
            out = {"x-kubernetes-int-or-string": True}
        else:
            out = dict(_PRESERVE)
        if node.get("default") is not None:
            out["default"] = node["default"]
        return out
    kind = node.get("type")
    out: dict[str, Any] = {}
    if "const" in node:
        out["enum"] = [node["const"]]
    for key in KEPT_KEYWORDS:
        if key in node:
            out[key] = node[key]
    for key, flag in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(node.get(key), int | float) and not isinstance(node.get(key), bool):
            out[flag] = node[key]
            out[key] = True
    if node.get("format") in APISERVER_FORMATS:
        out["format"] = node["format"]
    if node.get("default") is not None:
        out["default"] = node["default"]
    if kind is None:
        out.update(_PRESERVE)
        return out
    out["type"] = kind
    if kind == "array":
        items = node.get("items")
        out["items"] = structural(items, defs, depth + 1) if isinstance(items, Mapping) else dict(_PRESERVE)
    elif kind == "object":
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if props:
            out["properties"] = {k: structural(v, defs, depth + 1) for k, v in props.items()}
            if node.get("required"):
                out["required"] = list(node["required"])
        elif isinstance(extra, Mapping) and extra:
            out["additionalProperties"] = structural(extra, defs, depth + 1)
        else:
            out.update(_PRESERVE)
    return out


def crd_envelope(
    names: CrdNames, schema: dict[str, Any], source: str, *, status_subresource: bool = True
) -> dict[str, Any]:
    """An ``apiextensions.k8s.io/v1`` CRD serving ``names`` with ``schema``.

    The root keeps type meta and ObjectMeta as every CRD does (``apiVersion``/``kind``
    strings, ``metadata`` an object), whatever the source said about them.
    """
    props = schema.setdefault("properties", {})
    props["apiVersion"] = {"type": "string"}
    props["kind"] = {"type": "string"}
    props["metadata"] = {"type": "object"}
    schema.pop("x-kubernetes-preserve-unknown-fields", None)
    version: dict[str, Any] = {
        "name": names.version,
        "served": True,
        "storage": True,
        "subresources": {"status": {}} if status_subresource else {},
        "schema": {"openAPIV3Schema": schema},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{names.plural}.{names.group}",
            "annotations": {SOURCE_ANNOTATION: source},
        },
        "spec": {
            "group": names.group,
            "names": {
                "kind": names.kind,
                "listKind": f"{names.kind}List",
                "plural": names.plural,
                "singular": names.kind.lower(),
            },
            "scope": "Namespaced",
            "versions": [version],
        },
    }


def crd_document(kind: FluxKind, model_schema: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The CRD serving Flux ``kind`` with the schema rebuilt from its pydantic model."""
    defs = model_schema.get("$defs") or {}
    return crd_envelope(kind, structural(model_schema, defs), source)


def main(argv: Sequence[str] | None = None) -> int:
    """Write one CRD JSON document per Flux kind into ``--out``."""
    parser = argparse.ArgumentParser(prog="python -m gitops_reloader.testing.apiserver.crdimport")
    parser.add_argument("--out", required=True, type=Path, help="directory for the CRD documents")
    parser.add_argument("--package-version", required=True, help=f"the installed {SOURCE_PACKAGE} version")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    source = (
        f"reconstructed from PyPI {SOURCE_PACKAGE}=={args.package_version} "
        "(pydantic models generated from the upstream Flux CRDs)"
    )
    for kind in FLUX_KINDS:
        model = getattr(importlib.import_module(kind.module), kind.kind)
        doc = crd_document(kind, model.model_json_schema(by_alias=True, mode="validation"), source)
        path = args.out / f"{kind.group}_{kind.plural}.json"
        path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
