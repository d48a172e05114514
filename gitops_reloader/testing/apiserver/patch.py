"""The three PATCH flavours kube-apiserver accepts for JSON objects.

* ``apply_json_patch``: RFC 6902 (``application/json-patch+json``): add, remove,
  replace, move, copy, test, with RFC 6901 pointers (``~0``/``~1`` escapes, ``-``).
* ``apply_merge_patch``: RFC 7386 (``application/merge-patch+json``): maps merge,
  ``null`` deletes, anything else (lists included) replaces.
* ``apply_strategic_merge_patch``: Kubernetes' strategic merge patch
  (``application/strategic-merge-patch+json``). Lists named in a ``MergeSchema``
  merge by key (``containers`` by ``name``, ``volumeMounts`` by ``mountPath``, …);
  other lists are replaced. Directives: ``{"$patch": "delete", <key>: …}`` removes a
  keyed entry, ``$patch: replace`` replaces a map or list, ``$patch: delete`` on a map
  removes it, ``null`` removes a map key, ``$retainKeys`` keeps only the listed keys,
  ``$deleteFromPrimitiveList/<field>`` removes values from a primitive list;
  ``$setElementOrder/<field>`` is accepted and ignored.

  Ordering copies kube-apiserver v1.36 as observed: entries of a keyed list that the
  patch adds come **first**, in patch order, ahead of the existing entries, whose
  order is kept; entries the patch updates stay where they are. Values added to a
  merged primitive list (``finalizers``) follow the same rule.

All functions are pure. They may mutate and return the ``doc`` they are given (the
caller passes a private copy) but never keep references to their arguments. Errors
raise ``PatchError`` carrying the HTTP status the real server answers (422 for a
patch that does not apply, 400 for a malformed one).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "POD_TEMPLATE_SCHEMA",
    "SERVICE_SCHEMA",
    "MergeSchema",
    "PatchError",
    "apply_json_patch",
    "apply_merge_patch",
    "apply_strategic_merge_patch",
]


class PatchError(ValueError):
    """A patch is malformed (``status`` 400) or cannot be applied (``status`` 422)."""

    def __init__(self, message: str, *, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


# --------------------------------------------------------------------------- RFC 6902


def _parse_pointer(pointer: Any) -> list[str]:
    if not isinstance(pointer, str):
        raise PatchError(f"invalid JSON pointer: {pointer!r}", status=400)
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"JSON pointer must start with '/': {pointer!r}", status=400)
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/")]


def _list_index(container: list[Any], token: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"invalid array index: {token!r}")
    idx = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if idx > limit:
        raise PatchError(f"array index out of bounds: {idx}")
    return idx


def _resolve(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for tok in tokens:
        if isinstance(cur, dict):
            if tok not in cur:
                raise PatchError(f"doc is missing path: /{'/'.join(tokens)}")
            cur = cur[tok]
        elif isinstance(cur, list):
            cur = cur[_list_index(cur, tok, allow_end=False)]
        else:
            raise PatchError(f"doc is missing path: /{'/'.join(tokens)}")
    return cur


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _resolve(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_list_index(parent, last, allow_end=True), value)
    else:
        raise PatchError(f"add operation does not apply: doc is missing path: /{'/'.join(tokens)}")
    return doc


def _remove(doc: Any, tokens: list[str]) -> tuple[Any, Any]:
    if not tokens:
        raise PatchError("remove operation does not apply to the whole document")
    parent = _resolve(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"remove operation does not apply: doc is missing key: /{'/'.join(tokens)}")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_list_index(parent, last, allow_end=False))
    raise PatchError(f"remove operation does not apply: doc is missing path: /{'/'.join(tokens)}")


def apply_json_patch(doc: Any, operations: Any) -> Any:
    """Apply an RFC 6902 JSON patch (a list of operations) to ``doc``."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations", status=400)
    for op in operations:
        if not isinstance(op, dict) or not isinstance(op.get("op"), str):
            raise PatchError(f"invalid JSON patch operation: {op!r}", status=400)
        kind = op["op"]
        path = _parse_pointer(op.get("path"))
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"{kind} operation requires a value", status=400)
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            if path:
                doc, _ = _remove(doc, path)
                if isinstance(_resolve(doc, path[:-1]), list) and path[-1] == "-":
                    raise PatchError("replace operation does not apply: invalid index '-'")
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind in ("move", "copy"):
            source = _parse_pointer(op.get("from"))
            if kind == "move":
                if path[: len(source)] == source and len(path) > len(source):
                    raise PatchError("move operation cannot move a value into one of its children")
                doc, value = _remove(doc, source)
            else:
                value = copy.deepcopy(_resolve(doc, source))
            doc = _add(doc, path, value)
        elif kind == "test":
            if _resolve(doc, path) != op["value"]:
                raise PatchError(f"testing value /{'/'.join(path)} failed")
        else:
            raise PatchError(f"unexpected JSON patch operation: {kind!r}", status=400)
    return doc


# --------------------------------------------------------------------------- RFC 7386


def apply_merge_patch(doc: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch to ``doc``."""
    if not isinstance(patch, dict):
        return patch
    target: dict[str, Any] = doc if isinstance(doc, dict) else {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = apply_merge_patch(target.get(key), value)
    return target


# --------------------------------------------------------------------------- strategic


@dataclass(frozen=True, slots=True)
class MergeSchema:
    """Which lists merge, and how, in a strategic merge patch of one kind.

    Lists are identified by their field name only (a fair approximation for the
    kinds served here); a list not named here is replaced wholesale.
    """

    merge_keys: Mapping[str, str] = field(default_factory=dict)
    """Field name → merge key of lists of maps (``containers`` → ``name``)."""
    primitive_merge: frozenset[str] = frozenset()
    """Lists of scalars that merge as sets (``finalizers``)."""


_POD_KEYS: Final[dict[str, str]] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "topologySpreadConstraints": "topologyKey",
    "ownerReferences": "uid",
    "conditions": "type",
}

POD_TEMPLATE_SCHEMA: Final = MergeSchema(merge_keys=_POD_KEYS, primitive_merge=frozenset({"finalizers"}))
"""Merge keys of pods, pod templates and the workloads embedding them."""

SERVICE_SCHEMA: Final = MergeSchema(
    merge_keys={**_POD_KEYS, "ports": "port"}, primitive_merge=frozenset({"finalizers"})
)
"""Merge keys of Services (``spec.ports`` merge by ``port``)."""

_DELETE: Final = object()
_DIRECTIVE: Final = "$patch"
_RETAIN: Final = "$retainKeys"
_ORDER_PREFIX: Final = "$setElementOrder/"
_DELETE_PRIMITIVE_PREFIX: Final = "$deleteFromPrimitiveList/"


def apply_strategic_merge_patch(
    doc: dict[str, Any], patch: Any, schema: MergeSchema = POD_TEMPLATE_SCHEMA
) -> dict[str, Any]:
    """Apply a Kubernetes strategic merge patch to the object ``doc``."""
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object", status=400)
    if patch.get(_DIRECTIVE) == "delete":
        raise PatchError("$patch: delete is not allowed on the whole object")
    result = _merge_map(doc, patch, schema)
    assert isinstance(result, dict)
    return result


def _merge_map(orig: dict[str, Any], patch: dict[str, Any], schema: MergeSchema) -> Any:
    directive = patch.get(_DIRECTIVE)
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _merge_map({}, {k: v for k, v in patch.items() if k != _DIRECTIVE}, schema)
    if directive is not None and directive != "merge":
        raise PatchError(f"unknown patch type: {directive!r} in map")
    retain = patch.get(_RETAIN)
    if retain is not None and not isinstance(retain, list):
        raise PatchError("$retainKeys must be a list")
    for key, value in patch.items():
        if key in (_DIRECTIVE, _RETAIN) or key.startswith(_ORDER_PREFIX):
            continue
        if key.startswith(_DELETE_PRIMITIVE_PREFIX):
            name = key[len(_DELETE_PRIMITIVE_PREFIX) :]
            current = orig.get(name)
            if isinstance(current, list) and isinstance(value, list):
                orig[name] = [v for v in current if v not in value]
            continue
        if value is None:
            orig.pop(key, None)
            continue
        current = orig.get(key)
        if isinstance(value, dict):
            merged = _merge_map(current if isinstance(current, dict) else {}, value, schema)
            if merged is _DELETE:
                orig.pop(key, None)
            else:
                orig[key] = merged
        elif isinstance(value, list):
            orig[key] = _merge_list(key, current if isinstance(current, list) else [], value, schema)
        else:
            orig[key] = value
    if retain is not None:
        keep = set(retain)
        for key in [k for k in orig if k not in keep]:
            del orig[key]
    return orig


def _clean(value: Any, schema: MergeSchema) -> Any:
    """A patch value placed where nothing existed: directives resolved against empty."""
    if isinstance(value, dict):
        merged = _merge_map({}, value, schema)
        return {} if merged is _DELETE else merged
    return value


def _merge_list(name: str, orig: list[Any], patch: list[Any], schema: MergeSchema) -> list[Any]:
    replace = any(isinstance(p, dict) and p.get(_DIRECTIVE) == "replace" for p in patch)
    if replace:
        return [
            _clean(p, schema) for p in patch if not (isinstance(p, dict) and p.get(_DIRECTIVE) == "replace")
        ]
    if name in schema.primitive_merge:
        added = [v for v in dict.fromkeys(patch) if v not in orig]
        return added + orig
    key = schema.merge_keys.get(name)
    if key is None:
        return [_clean(p, schema) for p in patch]
    result: list[Any] = list(orig)
    positions: dict[Any, int] = {}
    for i, item in enumerate(result):
        if isinstance(item, dict) and key in item:
            positions.setdefault(_hashable(item[key]), i)
    new_items: list[dict[str, Any]] = []
    new_positions: dict[Any, int] = {}
    deleted: set[Any] = set()
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(f"{name}: expected a map in a list merged by {key!r}, got {item!r}")
        directive = item.get(_DIRECTIVE)
        if key not in item:
            raise PatchError(f"map: {item!r} does not contain declared merge key: {key}")
        ident = _hashable(item[key])
        if directive == "delete":
            deleted.add(ident)
            if ident in new_positions:
                new_items.pop(new_positions.pop(ident))
                new_positions = {_hashable(it[key]): i for i, it in enumerate(new_items)}
            continue
        if directive not in (None, "merge", "replace"):
            raise PatchError(f"unknown patch type: {directive!r} in list {name}")
        if ident in positions and ident not in deleted:
            merged = _merge_map(result[positions[ident]], item, schema)
            if merged is not _DELETE:
                result[positions[ident]] = merged
        elif ident in new_positions:
            _merge_map(new_items[new_positions[ident]], item, schema)
        else:
            new_positions[ident] = len(new_items)
            new_items.append(_clean(item, schema))
    kept = [
        item
        for item in result
        if not (isinstance(item, dict) and key in item and _hashable(item[key]) in deleted)
    ]
    return new_items + kept


def _hashable(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return value
