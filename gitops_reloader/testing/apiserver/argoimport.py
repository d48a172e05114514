"""Argo CD and Argo Rollouts CRD documents rebuilt from npm ``@kubernetes-models`` packages.

Why: the test server must validate Application, ApplicationSet and Rollout objects
against the real CRD schemas, and only package registries are reachable from CI. No
registry package ships Argo's CRD YAML verbatim; the ``@kubernetes-models`` packages on
npm are generated from it, and their ``package.json`` names the exact upstream CRD files
(``crd-generate.input``), so the upstream release is read from there, not guessed:

- ``@kubernetes-models/argo-cd@2.7.2`` (Argo CD v2.14.11 CRDs, the newest release with
  ``spec.sourceHydrator``) ships compiled validators and full TypeScript declarations;
  ``ts-json-schema-generator`` turns ``IApplication``/``IApplicationSet`` into JSON
  schema (``.ci/install-tools.sh`` runs it). The declarations keep properties, required
  fields, string enums, maps and int-or-string fields; ``integer`` (a ``number`` there)
  and formats are read back from the package's compiled validator (``argoprobe``). That
  validator checks nothing else (types, required fields, enums, formats: these CRDs have
  no bounds or patterns), so nothing it knows is lost.
- ``@kubernetes-models/argo-rollouts@0.3.2`` (Argo Rollouts v1.5.0 CRD) ships its JSON
  schema inline in ``argoproj.io/v1alpha1/Rollout.js``, read here as JSON: types,
  formats, patterns and defaults are all there.

Both dialects go through ``structural``. kubernetes-models marks every optional field
``nullable`` and drops the ``x-kubernetes-*`` extensions; the upstream CRDs have neither
``nullable`` there nor a ``type: object`` without properties that is not meant to keep
unknown fields worth keeping, so ``nullable`` is dropped (a ``null`` is pruned, as the
real server prunes it) and an object without properties keeps unknown fields
(``x-kubernetes-preserve-unknown-fields``, e.g. ``helm.valuesObject``, Rollout
``resources.limits``). The documents written say where they came from
(``metadata.annotations``); they are reconstructions, never passed off as upstream files.

``python -m gitops_reloader.testing.apiserver.argoimport --out DIR --node-modules DIR
--declarations DIR`` writes one CRD JSON document per kind. Standard library only; runs
``node`` for the validator probe.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .argoprobe import probe_object, refine, validator_errors
from .crdimport import APISERVER_FORMATS, KEPT_KEYWORDS, crd_envelope

__all__ = [
    "ARGO_KINDS",
    "KIND_SETS",
    "KNATIVE_KINDS",
    "UPSTREAM_ANNOTATION",
    "ArgoKind",
    "argo_crd_document",
    "inline_schema",
    "structural",
    "upstream_release",
]

UPSTREAM_ANNOTATION: Final = "gitops-reloader.dev/schema-upstream"
"""Annotation naming the upstream project and release the schema was generated from."""
TS_GENERATOR: Final = "ts-json-schema-generator"

_MAX_DEPTH: Final = 60
_PRESERVE: Final = {"x-kubernetes-preserve-unknown-fields": True}
_INT_OR_STRING: Final = (["integer", "string"], ["number", "string"])
_RELEASE: Final = re.compile(r"[/-](v\d+\.\d+\.\d+)/")
_INLINE: Final = "const schema = "


@dataclass(frozen=True, slots=True)
class ArgoKind:
    """One Argo kind: the npm package it comes from and how its CRD names it."""

    package: str
    upstream: str
    kind: str
    plural: str
    status_subresource: bool
    declarations: bool
    """``True``: read from TypeScript declarations; ``False``: from the inline JSON schema."""
    group: str = "argoproj.io"
    version: str = "v1alpha1"

    @property
    def module(self) -> str:
        """The package file that holds the kind (``.d.ts`` or ``.js``)."""
        return f"{self.group}/{self.version}/{self.kind}"

    @property
    def validator(self) -> str:
        """The package's compiled validator module (``_schemas/ArgoprojIoV1alpha1Application.js``)."""
        group = "".join(part.capitalize() for part in self.group.split("."))
        return f"_schemas/{group}{self.version.capitalize()}{self.kind}.js"


_CD: Final = ("@kubernetes-models/argo-cd", "argoproj/argo-cd")
_ROLLOUTS: Final = ("@kubernetes-models/argo-rollouts", "argoproj/argo-rollouts")
ARGO_KINDS: Final[tuple[ArgoKind, ...]] = (
    ArgoKind(*_CD, "Application", "applications", status_subresource=False, declarations=True),
    ArgoKind(*_CD, "ApplicationSet", "applicationsets", status_subresource=True, declarations=True),
    ArgoKind(*_ROLLOUTS, "Rollout", "rollouts", status_subresource=True, declarations=False),
)
"""Subresources as upstream: Application has none, ApplicationSet and Rollout ``status``."""
KNATIVE_KINDS: Final[tuple[ArgoKind, ...]] = (
    ArgoKind("@kubernetes-models/knative", "knative/serving", "Service", "services", status_subresource=True,
             declarations=True, group="serving.knative.dev", version="v1"),
)
"""Knative Serving's Service, from the same kind of package (``--set knative``); the
package generates several projects' CRDs, so its release is read from the kind's own
``crd-generate.input`` entry (``knative/serving/releases/download/knative-v1.10.1``)."""
KIND_SETS: Final = {"argo": ARGO_KINDS, "knative": KNATIVE_KINDS}


def _without_null(branches: Sequence[Any]) -> list[Mapping[str, Any]]:
    return [b for b in branches if isinstance(b, Mapping) and b.get("type") != "null"]


def _types(kind: Any) -> list[str] | None:
    """The non-null JSON types of a node, sorted; ``None`` when it names none."""
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return sorted(str(t) for t in kind if t != "null")
    return None


def _checks(node: Mapping[str, Any]) -> dict[str, Any]:
    out = {key: node[key] for key in KEPT_KEYWORDS if key in node}
    if "const" in node:
        out["enum"] = [node["const"]]
    if node.get("format") in APISERVER_FORMATS:
        out["format"] = node["format"]
    if node.get("default") is not None:
        out["default"] = node["default"]
    return out


def structural(node: Mapping[str, Any], depth: int = 0) -> dict[str, Any]:
    """The structural ``openAPIV3Schema`` node for one kubernetes-models schema node.

    Reads both dialects: kubernetes-models' inline schema (``nullable``, ``oneOf`` with
    ``null``, ``anyOf`` integer/string) and ts-json-schema-generator's (``const``, type
    lists, ``additionalProperties: false``, ``{}`` for an open object).
    """
    if depth > _MAX_DEPTH:
        return dict(_PRESERVE)
    for key in ("oneOf", "anyOf"):
        branches = node.get(key)
        if isinstance(branches, list):
            kept = _without_null(branches)
            rest = {k: v for k, v in node.items() if k not in ("oneOf", "anyOf")}
            if len(kept) == 1:
                return structural({**kept[0], **rest}, depth)
            if sorted(str(b.get("type")) for b in kept) in _INT_OR_STRING:
                return {"x-kubernetes-int-or-string": True, **_checks(rest)}
            return dict(_PRESERVE)
    out = _checks(node)
    kinds = _types(node.get("type"))
    if kinds in _INT_OR_STRING:
        return {"x-kubernetes-int-or-string": True, **out}
    if kinds is None or len(kinds) != 1 or "$ref" in node:
        out.update(_PRESERVE)
        return out
    kind = out["type"] = kinds[0]
    if kind == "array":
        items = node.get("items")
        out["items"] = structural(items, depth + 1) if isinstance(items, Mapping) else dict(_PRESERVE)
    elif kind == "object":
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if props:
            out["properties"] = {k: structural(v, depth + 1) for k, v in props.items()}
            if node.get("required"):
                out["required"] = list(node["required"])
        elif isinstance(extra, Mapping) and extra:
            out["additionalProperties"] = structural(extra, depth + 1)
        else:
            out.update(_PRESERVE)
    return out


def inline_schema(module_source: str) -> dict[str, Any]:
    """The ``const schema = {...}`` JSON object of a kubernetes-models ``<Kind>.js`` module."""
    start = module_source.find(_INLINE)
    if start < 0:
        raise ValueError(f"no {_INLINE!r} in the module: not an inline-schema kubernetes-models package")
    schema, _ = json.JSONDecoder().raw_decode(module_source, start + len(_INLINE))
    if not isinstance(schema, dict):
        raise ValueError("the inline schema is not a JSON object")
    return schema


def upstream_release(package_json: Mapping[str, Any], upstream: str = "") -> str:
    """The upstream release (``v2.14.11``) the package's CRD inputs were fetched at; with
    ``upstream`` (``knative/serving``) only the inputs from that project count, when some
    name it (a package generated from several projects' CRDs)."""
    inputs = (package_json.get("crd-generate") or {}).get("input") or []
    inputs = [url for url in inputs if upstream and f"/{upstream}/" in str(url)] or inputs
    releases = {m.group(1) for url in inputs if (m := _RELEASE.search(str(url)))}
    if len(releases) != 1:
        raise ValueError(f"expected one upstream release in crd-generate.input, found {sorted(releases)}")
    return releases.pop()


def argo_crd_document(
    kind: ArgoKind, schema: Mapping[str, Any], source: str, upstream: str
) -> dict[str, Any]:
    """The CRD serving ``kind`` with the structural ``schema``.

    The root requires what the upstream CRDs require: kubernetes-models adds ``apiVersion``
    and ``kind`` to it, which the real server fills from the URL, so those are dropped.
    """
    root = copy.deepcopy(dict(schema))
    root_required = [k for k in root.get("required", ()) if k not in ("apiVersion", "kind")]
    if root_required:
        root["required"] = root_required
    else:
        root.pop("required", None)
    doc = crd_envelope(kind, root, source, status_subresource=kind.status_subresource)
    doc["metadata"]["annotations"][UPSTREAM_ANNOTATION] = upstream
    return doc


def _declared_schema(path: Path, kind: ArgoKind) -> Mapping[str, Any]:
    """The kind's definition in a ts-json-schema-generator output file."""
    generated = json.loads(path.read_text(encoding="utf-8"))
    definition = (generated.get("definitions") or {}).get(f"I{kind.kind}")
    if not isinstance(definition, Mapping):
        raise ValueError(f"{path}: no definition I{kind.kind}")
    return definition


def main(argv: Sequence[str] | None = None) -> int:
    """Write one CRD JSON document per Argo kind into ``--out``."""
    parser = argparse.ArgumentParser(prog="python -m gitops_reloader.testing.apiserver.argoimport")
    parser.add_argument("--out", required=True, type=Path, help="directory for the CRD documents")
    parser.add_argument(
        "--node-modules", required=True, type=Path, help="node_modules with the @kubernetes-models packages"
    )
    parser.add_argument(
        "--declarations",
        required=True,
        type=Path,
        help=f"directory of {TS_GENERATOR} output: <Kind>.json per declaration-read kind",
    )
    parser.add_argument("--generator-version", required=True, help=f"the {TS_GENERATOR} version used")
    parser.add_argument("--set", choices=sorted(KIND_SETS), default="argo", help="which kinds to write")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for kind in KIND_SETS[args.set]:
        root = args.node_modules / kind.package
        package = json.loads((root / "package.json").read_text(encoding="utf-8"))
        upstream = f"{kind.upstream} {upstream_release(package, kind.upstream)}"
        if kind.declarations:
            schema = structural(_declared_schema(args.declarations / f"{kind.kind}.json", kind))
            probe = probe_object(schema, f"{kind.group}/{kind.version}", kind.kind)
            schema, changed = refine(schema, validator_errors(root / kind.validator, probe))
            how = (
                f"TypeScript declarations read with npm {TS_GENERATOR}@{args.generator_version}, "
                f"{len(changed)} integer types and formats from its compiled validator"
            )
        else:
            schema = structural(inline_schema((root / f"{kind.module}.js").read_text(encoding="utf-8")))
            how = "inline JSON schema"
        source = (
            f"reconstructed from npm {kind.package}@{package['version']} "
            f"({how}; generated by kubernetes-models from the {upstream} CRDs)"
        )
        doc = argo_crd_document(kind, schema, source, upstream)
        path = args.out / f"{kind.group}_{kind.plural}.json"
        path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {path} ({source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
