"""Custom resources checked against their CRD's structural schema, as kube-apiserver does.

``CrdSchemas.load(paths)`` reads ``apiextensions.k8s.io/v1`` CustomResourceDefinition
documents (YAML or JSON, several per file, files or directories) and keeps each served
version's ``openAPIV3Schema``. ``CrdSchemas.admit(group, version, kind, name, obj)``
then does to a custom resource what the real server does on create, update and patch,
in the real server's order:

1. **prune**: fields the schema does not know are dropped, silently (not rejected),
   except under ``x-kubernetes-preserve-unknown-fields: true``; ``apiVersion``,
   ``kind`` and ``metadata`` at the root (and in ``x-kubernetes-embedded-resource``
   objects) are kept; ``null`` in a field that is not ``nullable`` is dropped;
2. **default**: a ``default`` fills a property that is absent after pruning;
3. **validate**: ``type`` (``integer`` is not ``number``: ``1.5`` is refused, ``1`` is a
   fine ``number``), ``x-kubernetes-int-or-string``, ``nullable``, ``required``,
   ``enum``, ``pattern``, ``format`` (the formats the apiserver checks: ``date-time``,
   ``date``, ``byte``, ``uuid``, ``ipv4``), string, number, array and map bounds.

Every violation becomes one cause of a single 422 ``Invalid`` Status, field paths in
the real server's notation (``spec.sources[1].repoURL``) and messages in its words
(``Required value``, ``Unsupported value: "x": supported values: "a", "b"``).

Not modelled: CEL rules (``x-kubernetes-validations``), list-type uniqueness
(``x-kubernetes-list-type: set|map``), validation ratcheting on update, ObjectMeta
pruning. Schemas come from trusted CRD files (their patterns run on Python's ``re``);
the walk recurses only as deep as the schema describes, so a hostile body cannot
drive it deeper than the CRD allows.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import os
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Final

import yaml

from .status import ApiError

__all__ = [
    "BUNDLED_CRDS", "CRDS_ENV", "Cause", "CrdSchemas", "CrdVersion", "default_crd_paths", "validation_error",
]

CRDS_ENV: Final = "GITOPS_RELOADER_TEST_CRDS"
"""Environment variable: CRD files or directories for the test server, ``os.pathsep``-separated."""

_ROOT_KEPT: Final = ("apiVersion", "kind", "metadata")
_GO_TYPE: Final = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
}
_IPV4: Final = re.compile(r"^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$")
_CRD_SUFFIXES: Final = (".yaml", ".yml", ".json")
_DATE_TIME: Final = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
"""RFC 3339 date-time, as the apiserver's ``date-time`` format checks it."""


@dataclass(frozen=True, slots=True)
class Cause:
    """One ``details.causes`` entry of a 422 Status."""

    reason: str
    field: str
    message: str


@dataclass(frozen=True, slots=True)
class CrdVersion:
    """One served version of a CRD: what the server needs to check its objects."""

    group: str
    version: str
    kind: str
    plural: str
    schema: Mapping[str, Any]
    status_subresource: bool
    source: str
    """The file the CRD came from, for error messages and docs."""


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return _GO_TYPE.get(type(value), type(value).__name__)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1``, ``1`` equals ``1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _format_ok(fmt: str, value: str) -> bool:
    try:
        if fmt == "date-time":
            if _DATE_TIME.match(value) is None:
                return False
            datetime.fromisoformat(value[:19])
        elif fmt == "date":
            date.fromisoformat(value)
        elif fmt == "byte":
            base64.b64decode(value, validate=True)
        elif fmt == "uuid":
            uuid.UUID(value)
        elif fmt == "ipv4":
            return _IPV4.match(value) is not None
    except (ValueError, binascii.Error):
        return False
    return True


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


@dataclass(slots=True)
class _Walk:
    """One admission: the causes found so far."""

    causes: list[Cause] = field(default_factory=list)

    def bad(self, reason: str, path: str, message: str) -> None:
        self.causes.append(Cause(reason, path, message))

    def value(self, value: Any, schema: Mapping[str, Any], path: str, *, root: bool = False) -> Any:
        """Prune, default and validate ``value`` against ``schema``; returns the kept value."""
        if value is None:
            if not schema.get("nullable"):
                want = schema.get("type", "object")
                self.bad(
                    "FieldValueTypeInvalid",
                    path,
                    f'Invalid value: "null": {path} in body must be of type {want}: "null"',
                )
            return value
        if not self._type_ok(value, schema, path):
            return value
        if isinstance(value, dict):
            value = self._object(value, schema, path, root=root)
        elif isinstance(value, list):
            self._array(value, schema, path)
        elif isinstance(value, str):
            self._string(value, schema, path)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self._number(value, schema, path)
        enum = schema.get("enum")
        if enum is not None and not any(_same(value, e) for e in enum):
            supported = ", ".join(_json(e) for e in enum)
            self.bad(
                "FieldValueNotSupported",
                path,
                f"Unsupported value: {_json(value)}: supported values: {supported}",
            )
        return value

    def _type_ok(self, value: Any, schema: Mapping[str, Any], path: str) -> bool:
        if schema.get("x-kubernetes-int-or-string"):
            if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
                return True
            want = "integer,string"
        else:
            want = schema.get("type")
            if not want:
                return True
            got = _type_name(value)
            if got == want or (want == "number" and got == "integer"):
                return True
        got = _type_name(value)
        self.bad(
            "FieldValueTypeInvalid",
            path,
            f'Invalid value: "{got}": {path} in body must be of type {want}: "{got}"',
        )
        return False

    def _object(
        self, obj: dict[str, Any], schema: Mapping[str, Any], path: str, *, root: bool
    ) -> dict[str, Any]:
        props: Mapping[str, Any] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        keep_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        kept_meta = root or bool(schema.get("x-kubernetes-embedded-resource"))
        out: dict[str, Any] = {}
        for key, item in obj.items():
            sub = props.get(key)
            if kept_meta and key in _ROOT_KEPT:
                out[key] = item  # type meta and ObjectMeta are the server's, never pruned here
            elif sub is not None:
                if item is None and not sub.get("nullable"):
                    continue  # null in a non-nullable field is pruned before defaulting
                out[key] = self.value(item, sub, _join(path, key))
            elif isinstance(extra, Mapping):
                out[key] = self.value(item, extra, _join(path, key))
            elif keep_unknown or extra is True:
                out[key] = item
        for key, sub in props.items():
            if key not in out and "default" in sub:
                out[key] = self.value(copy.deepcopy(sub["default"]), sub, _join(path, key))
        for key in schema.get("required") or ():
            if key not in out:
                self.bad("FieldValueRequired", _join(path, key), "Required value")
        count = len(out)
        if "maxProperties" in schema and count > schema["maxProperties"]:
            self.bad(
                "FieldValueTooMany",
                path,
                f"Too many: {count}: must have at most {schema['maxProperties']} items",
            )
        least = schema.get("minProperties")
        if least is not None and count < least:
            self.bad(
                "FieldValueInvalid",
                path,
                f"Invalid value: {count}: {path} in body should have at least {least} items",
            )
        return out

    def _array(self, items: list[Any], schema: Mapping[str, Any], path: str) -> None:
        sub = schema.get("items")
        if isinstance(sub, Mapping):
            for i, item in enumerate(items):
                items[i] = self.value(item, sub, f"{path}[{i}]")
        n = len(items)
        if "maxItems" in schema and n > schema["maxItems"]:
            self.bad(
                "FieldValueTooMany", path, f"Too many: {n}: must have at most {schema['maxItems']} items"
            )
        if "minItems" in schema and n < schema["minItems"]:
            self.bad(
                "FieldValueInvalid",
                path,
                f"Invalid value: {n}: {path} in body should have at least {schema['minItems']} items",
            )

    def _string(self, text: str, schema: Mapping[str, Any], path: str) -> None:
        shown = _json(text)
        if "maxLength" in schema and len(text) > schema["maxLength"]:
            self.bad("FieldValueTooLong", path, f"Too long: may not be more than {schema['maxLength']} bytes")
        if "minLength" in schema and len(text) < schema["minLength"]:
            self.bad(
                "FieldValueInvalid",
                path,
                f"Invalid value: {shown}: {path} in body should be at least {schema['minLength']} chars long",
            )
        pattern = schema.get("pattern")
        if pattern is not None and re.search(pattern, text) is None:
            self.bad(
                "FieldValueInvalid", path, f"Invalid value: {shown}: {path} in body should match '{pattern}'"
            )
        fmt = schema.get("format")
        if isinstance(fmt, str) and not _format_ok(fmt, text):
            self.bad(
                "FieldValueInvalid",
                path,
                f"Invalid value: {shown}: {path} in body must be of type {fmt}: {shown}",
            )

    def _number(self, number: float, schema: Mapping[str, Any], path: str) -> None:
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and (number <= low if schema.get("exclusiveMinimum") else number < low):
            rel = "greater than" if schema.get("exclusiveMinimum") else "greater than or equal to"
            self.bad(
                "FieldValueInvalid",
                path,
                f"Invalid value: {_json(number)}: {path} in body should be {rel} {low}",
            )
        if high is not None and (number >= high if schema.get("exclusiveMaximum") else number > high):
            rel = "less than" if schema.get("exclusiveMaximum") else "less than or equal to"
            self.bad(
                "FieldValueInvalid",
                path,
                f"Invalid value: {_json(number)}: {path} in body should be {rel} {high}",
            )


def validation_error(kind: str, group: str, name: str, causes: list[Cause]) -> ApiError:
    """The 422 ``Invalid`` Status kube-apiserver answers for these causes."""
    parts = [f"{c.field}: {c.message}" for c in causes]
    summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details: dict[str, Any] = {"name": name, "group": group, "kind": kind}
    details["causes"] = [{"reason": c.reason, "message": c.message, "field": c.field} for c in causes]
    return ApiError(422, f'{kind}.{group} "{name}" is invalid: {summary}', details=details)


BUNDLED_CRDS: Final = Path(__file__).resolve().parent / "crds"
"""CRDs shipped with the package (no registry carries them): the Secrets Store CSI
driver's SecretProviderClass and SecretProviderClassPodStatus, written for this server
from the driver's v1 API types (types only, as upstream: no required fields or enums)."""


def default_crd_paths() -> list[Path]:
    """The bundled CRDs, plus ``$GITOPS_RELOADER_TEST_CRDS`` when set, else ``.tools/crds``."""
    configured = os.environ.get(CRDS_ENV)
    if configured is not None:
        return [BUNDLED_CRDS, *(Path(p) for p in configured.split(os.pathsep) if p)]
    return [BUNDLED_CRDS, Path(__file__).resolve().parents[3] / ".tools" / "crds"]


def _crd_versions(doc: Mapping[str, Any], source: str) -> Iterable[CrdVersion]:
    spec = doc.get("spec") or {}
    names = spec.get("names") or {}
    for ver in spec.get("versions") or ():
        schema = ((ver.get("schema") or {}).get("openAPIV3Schema")) or None
        if not ver.get("served", True) or schema is None:
            continue
        yield CrdVersion(
            group=spec.get("group", ""),
            version=ver["name"],
            kind=names.get("kind", ""),
            plural=names.get("plural", ""),
            schema=schema,
            status_subresource="status" in (ver.get("subresources") or {}),
            source=source,
        )


_Stamp = tuple[str, int, int]
_FILE_CACHE: dict[_Stamp, tuple[CrdVersion, ...]] = {}
_SAFE_LOADER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _file_versions(path: Path) -> tuple[CrdVersion, ...]:
    """The CRD versions in one file, parsed once per (path, mtime, size) per process."""
    stat = path.stat()
    stamp = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    cached = _FILE_CACHE.get(stamp)
    if cached is not None:
        return cached
    text = path.read_text(encoding="utf-8")
    docs = [json.loads(text)] if path.suffix == ".json" else list(yaml.load_all(text, Loader=_SAFE_LOADER))
    found = tuple(
        v
        for doc in docs
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
        for v in _crd_versions(doc, str(path))
    )
    _FILE_CACHE[stamp] = found
    return found


class CrdSchemas:
    """The CRD versions known to the server, by ``(group, version, kind)``; immutable."""

    def __init__(self, versions: Iterable[CrdVersion] = ()) -> None:
        self._by_gvk = {(v.group, v.version, v.kind): v for v in versions}

    @classmethod
    def load(cls, paths: Iterable[str | Path]) -> CrdSchemas:
        """Read every CRD document in the given files and directories (recursively)."""
        files: list[Path] = []
        for raw in paths:
            path = Path(raw)
            if path.is_dir():
                files.extend(sorted(p for p in path.rglob("*") if p.suffix in _CRD_SUFFIXES and p.is_file()))
            elif path.is_file():
                files.append(path)
        versions: list[CrdVersion] = []
        for path in files:
            versions.extend(_file_versions(path))
        return cls(versions)

    def with_crd(self, doc: Mapping[str, Any], source: str = "installed") -> CrdSchemas:
        """These schemas plus the served versions of one CRD document."""
        return CrdSchemas([*self._by_gvk.values(), *_crd_versions(doc, source)])

    def named(self, name: str) -> list[CrdVersion]:
        """The versions of the CRD called ``name`` (``clonesets.apps.kruise.io``)."""
        return [v for v in self._by_gvk.values() if f"{v.plural}.{v.group}" == name]

    def __len__(self) -> int:
        return len(self._by_gvk)

    def __iter__(self) -> Any:
        return iter(self._by_gvk.values())

    def get(self, group: str, version: str, kind: str) -> CrdVersion | None:
        """The served version, or ``None`` when no CRD describes it."""
        return self._by_gvk.get((group, version, kind))

    def admit(self, group: str, version: str, kind: str, name: str, obj: dict[str, Any]) -> dict[str, Any]:
        """The pruned and defaulted object, or a 422 ``ApiError`` listing every violation.

        Objects of kinds without a CRD here are returned unchanged.
        """
        crd = self.get(group, version, kind)
        if crd is None:
            return obj
        walk = _Walk()
        kept = walk.value(obj, crd.schema, "", root=True)
        if walk.causes:
            raise validation_error(kind, group, name, walk.causes)
        return kept
