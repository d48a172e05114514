"""What kube-apiserver does to an object on create and update, as pure functions.

``prepare_create`` and ``prepare_update`` play the role of the real server's REST
strategies: they validate the incoming body, fill the server-owned metadata (``uid``,
``creationTimestamp``, ``generation``, ``managedFields``), reset or keep ``status``
around the status subresource, encode Secret ``stringData`` into base64 ``data`` and
reject invalid base64. ``prepare_update`` returns ``None`` for a no-op, so the store
can skip the write exactly as the real server does (no new resourceVersion, no event).

Guarantees: ``generation`` starts at 1 and grows by one whenever anything but
``metadata`` (and ``status``, for kinds with a status subresource) changes;
``resourceVersion`` is never set here (the store owns the counter). Functions never
keep references to their arguments and only mutate the ``new`` body they are given.
"""

from __future__ import annotations

import base64
import binascii
import re
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

from .crdschema import CrdSchemas
from .resources import ResourceType
from .status import bad_request, conflict, invalid

__all__ = [
    "check_delete_preconditions",
    "now_rfc3339",
    "order_object",
    "prepare_create",
    "prepare_update",
    "random_suffix",
]

_DNS1123_SUBDOMAIN: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SERVER_METADATA: Final = (
    "uid",
    "creationTimestamp",
    "generation",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)
_SUFFIX_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"


_clock: Callable[[], float] = time.time
"""Where the server's timestamps come from (a schedule's fake clock: :func:`use_clock`)."""


def use_clock(clock: Callable[[], float] | None) -> None:
    """Stamp every time the server writes (creation, managedFields) from ``clock`` (Unix seconds;
    None: the real time), so that a controller on a fake clock compares like with like."""
    global _clock
    _clock = clock or time.time


def now_rfc3339() -> str:
    """The current UTC time as kube-apiserver formats it (second precision, ``Z``)."""
    return datetime.fromtimestamp(_clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def random_suffix(n: int = 5) -> str:
    """``generateName`` suffix: five characters from the real server's alphabet."""
    raw = uuid.uuid4().int
    out = []
    for _ in range(n):
        raw, idx = divmod(raw, len(_SUFFIX_ALPHABET))
        out.append(_SUFFIX_ALPHABET[idx])
    return "".join(out)


def order_object(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """The object with ``kind`` and ``apiVersion`` first (the store relies on it)."""
    ordered: dict[str, Any] = {"kind": rt.kind, "apiVersion": rt.group_version}
    meta = obj.get("metadata")
    ordered["metadata"] = meta if isinstance(meta, dict) else {}
    for key, value in obj.items():
        if key not in ("kind", "apiVersion", "metadata"):
            ordered[key] = value
    return ordered


def _drop_nulls(value: Any) -> Any:
    """Go decoding turns JSON nulls into absent fields; do the same."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _normalize_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """Every ObjectMeta field is ``omitempty``: drop empty ones."""
    return {k: v for k, v in meta.items() if v not in (None, "", {}, [])}


def _check_type_meta(rt: ResourceType, body: dict[str, Any]) -> None:
    api_version = body.get("apiVersion")
    if api_version not in (None, "") and api_version != rt.group_version:
        raise bad_request(
            f"the API version in the data ({api_version}) does not match the expected "
            f"API version ({rt.group_version})"
        )
    kind = body.get("kind")
    if kind not in (None, "") and kind != rt.kind:
        raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")


def _body_dict(body: Any, rt: ResourceType) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a '
            f"{rt.kind}: the body must be a JSON object"
        )
    meta = body.get("metadata", {})
    if meta is not None and not isinstance(meta, dict):
        raise bad_request("metadata must be an object")
    cleaned = _drop_nulls(body)
    assert isinstance(cleaned, dict)
    return cleaned


def _managed_entry(rt: ResourceType, manager: str, subresource: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": rt.group_version,
        "time": now_rfc3339(),
        "fieldsType": "FieldsV1",
        "fieldsV1": {},
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _record_manager(rt: ResourceType, meta: dict[str, Any], manager: str, subresource: str | None,
                    old_meta: dict[str, Any] | None = None) -> None:
    """The manager's ``Update`` entry, as kube-apiserver keeps it for the annotations: those this
    write added or changed become the manager's (``f:metadata.f:annotations.f:<key>``) and leave
    every other manager's set. Other fields are not tracked here (their sets stay empty)."""
    entries = [e for e in meta.get("managedFields") or [] if isinstance(e, dict)]
    before = (old_meta or {}).get("annotations") or {}
    changed = {k for k, v in (meta.get("annotations") or {}).items() if before.get(k) != v}
    fresh = _managed_entry(rt, manager, subresource)
    for i, e in enumerate(entries):
        if (
            e.get("manager") == manager
            and e.get("operation") == "Update"
            and e.get("apiVersion") == rt.group_version
            and e.get("subresource") == fresh.get("subresource")
        ):
            fresh["fieldsV1"] = e.get("fieldsV1") or {}
            entries[i] = fresh
            break
    else:
        entries.append(fresh)
    current = set(meta.get("annotations") or {})
    for e in entries:
        owned = ((e.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:annotations") or {}
        keep = {f: {} for f in owned if f[2:] in current and (e is fresh or f[2:] not in changed)}
        if e is fresh:
            keep.update({f"f:{k}": {} for k in sorted(changed)})
        if keep:
            e["fieldsV1"] = {**(e.get("fieldsV1") or {}), "f:metadata": {"f:annotations": keep}}
        elif owned:
            e["fieldsV1"] = {}
    meta["managedFields"] = entries


def _illegal_base64_at(text: str) -> int:
    for i, ch in enumerate(text):
        if not (ch.isascii() and (ch.isalnum() or ch in "+/=\r\n")):
            return i
    return len(text) - len(text) % 4 if len(text) % 4 else max(len(text) - 1, 0)


def _drop_empty_maps(body: dict[str, Any], *names: str) -> None:
    """``omitempty`` maps: an empty ``data`` is not stored, like the real server."""
    for name in names:
        if body.get(name) == {}:
            del body[name]


def _prepare_secret(body: dict[str, Any]) -> None:
    data = body.get("data")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise bad_request('Secret in version "v1" cannot be handled as a Secret: data must be a map')
    for key, value in data.items():
        if not isinstance(value, str):
            raise bad_request(
                f'Secret in version "v1" cannot be handled as a Secret: data[{key}]: expected a base64 string'
            )
        if "\n" in value or "\r" in value:
            value = value.replace("\r", "").replace("\n", "")
        try:
            binascii.a2b_base64(value, strict_mode=True)
        except (binascii.Error, ValueError):
            raise bad_request(
                'Secret in version "v1" cannot be handled as a Secret: illegal base64 data '
                f"at input byte {_illegal_base64_at(value)}"
            ) from None
    string_data = body.pop("stringData", None)
    if string_data is not None:
        if not isinstance(string_data, dict) or not all(isinstance(v, str) for v in string_data.values()):
            raise bad_request(
                'Secret in version "v1" cannot be handled as a Secret: stringData must be a map of strings'
            )
        for key, value in string_data.items():
            data[key] = base64.b64encode(value.encode()).decode()
    if data:
        body["data"] = data
    else:
        body.pop("data", None)
    body.setdefault("type", "Opaque")


def _initial_status(rt: ResourceType) -> dict[str, Any] | None:
    if rt.kind == "Namespace":
        return {"phase": "Active"}
    if rt.kind == "Pod":
        return {"phase": "Pending"}
    if rt.kind == "Service":
        return {"loadBalancer": {}}
    if rt.custom:
        return None
    return {}


def _validate_name(rt: ResourceType, name: str) -> None:
    pattern, what, limit = (
        (_DNS1123_LABEL, "RFC 1123 label", 63)
        if rt.kind == "Namespace"
        else (_DNS1123_SUBDOMAIN, "RFC 1123 subdomain", 253)
    )
    if len(name) > limit or not pattern.match(name):
        raise invalid(
            rt.kind,
            rt.group,
            name,
            "metadata.name",
            f'Invalid value: "{name}": a lowercase {what} must consist of lower case '
            "alphanumeric characters, '-' or '.', and must start and end with an "
            "alphanumeric character",
            "FieldValueInvalid",
        )


def prepare_create(
    rt: ResourceType,
    body: Any,
    namespace: str,
    *,
    manager: str,
    taken: Any = None,
    schemas: CrdSchemas | None = None,
) -> dict[str, Any]:
    """Validate a create body and return the object to store (without resourceVersion).

    ``taken`` is an optional ``Callable[[str], bool]`` telling whether a name exists, so
    ``generateName`` picks a free one. ``schemas`` prunes, defaults and validates custom
    resources whose CRD it holds (422 on a violation).
    """
    obj = _body_dict(body, rt)
    _check_type_meta(rt, obj)
    meta: dict[str, Any] = dict(obj.get("metadata") or {})
    if rt.namespaced:
        body_ns = meta.get("namespace")
        if body_ns and body_ns != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    name = meta.get("name")
    if not name:
        prefix = meta.get("generateName")
        if not prefix:
            raise invalid(
                rt.kind,
                rt.group,
                "",
                "metadata.name",
                "Required value: name or generateName is required",
                "FieldValueRequired",
            )
        for _ in range(8):
            name = f"{prefix}{random_suffix()}"
            if taken is None or not taken(name):
                break
        meta["name"] = name
    if not isinstance(name, str):
        raise bad_request("metadata.name must be a string")
    _validate_name(rt, name)
    for key in _SERVER_METADATA:
        meta.pop(key, None)
    meta["uid"] = str(uuid.uuid4())
    meta["generation"] = 1
    meta["creationTimestamp"] = now_rfc3339()
    meta = _normalize_metadata(meta)
    _record_manager(rt, meta, manager, None)
    obj["metadata"] = meta
    if rt.status_subresource:
        initial = _initial_status(rt)
        if initial is None:
            obj.pop("status", None)
        else:
            obj["status"] = initial
    if rt.kind == "Secret" and not rt.group:
        _prepare_secret(obj)
    if rt.kind == "ConfigMap" and not rt.group:
        _drop_empty_maps(obj, "data", "binaryData")
    if rt.kind == "Namespace":
        raw_spec = obj.get("spec")
        spec: dict[str, Any] = dict(raw_spec) if isinstance(raw_spec, dict) else {}
        spec.setdefault("finalizers", ["kubernetes"])
        obj["spec"] = spec
        labels = dict(meta.get("labels") or {})
        labels.setdefault("kubernetes.io/metadata.name", name)
        meta["labels"] = labels
    if schemas is not None and rt.custom:
        obj = schemas.admit(rt.group, rt.version, rt.kind, name, obj)
    return order_object(rt, obj)


def _content(obj: dict[str, Any], skip_status: bool) -> dict[str, Any]:
    skip = ("kind", "apiVersion", "metadata", "status") if skip_status else ("kind", "apiVersion", "metadata")
    return {k: v for k, v in obj.items() if k not in skip}


def _comparable_meta(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if k not in ("resourceVersion", "managedFields")}


def prepare_update(
    rt: ResourceType,
    old: dict[str, Any],
    new: Any,
    *,
    name: str,
    manager: str,
    subresource: str | None = None,
    schemas: CrdSchemas | None = None,
) -> dict[str, Any] | None:
    """Validate an update of ``old`` to ``new``; ``None`` means nothing changes.

    Raises 409 when ``new`` carries a ``resourceVersion`` or ``uid`` other than the
    stored one (optimistic concurrency), 400/422 for bodies the real server rejects.
    """
    obj = _body_dict(new, rt)
    _check_type_meta(rt, obj)
    old_meta: dict[str, Any] = old["metadata"]
    meta: dict[str, Any] = dict(obj.get("metadata") or {})
    body_name = meta.get("name")
    if body_name is not None and body_name != name:
        raise bad_request(f"the name of the object ({body_name}) does not match the name on the URL ({name})")
    if rt.namespaced:
        body_ns = meta.get("namespace")
        if body_ns and body_ns != old_meta.get("namespace"):
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
    rv = meta.get("resourceVersion")
    if rv not in (None, "") and str(rv) != old_meta["resourceVersion"]:
        raise conflict(rt.plural, rt.group, name)
    uid = meta.get("uid")
    if uid not in (None, "") and uid != old_meta.get("uid"):
        raise conflict(
            rt.plural,
            rt.group,
            name,
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old_meta.get('uid')}",
        )
    if subresource == "status":
        result = {k: v for k, v in old.items()}
        if "status" in obj:
            result["status"] = obj["status"]
        else:
            result.pop("status", None)
        meta = dict(old_meta)
    else:
        result = obj
        if rt.status_subresource:
            if "status" in old:
                result["status"] = old["status"]
            else:
                result.pop("status", None)
        for key in (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "generation",
            "deletionTimestamp",
        ):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        if "managedFields" not in meta and "managedFields" in old_meta:
            meta["managedFields"] = old_meta["managedFields"]
    meta.pop("resourceVersion", None)
    meta = _normalize_metadata(meta)
    result["metadata"] = meta
    if rt.kind == "Secret" and not rt.group:
        _prepare_secret(result)
    if rt.kind == "ConfigMap" and not rt.group:
        _drop_empty_maps(result, "data", "binaryData")
    if rt.kind in ("Secret", "ConfigMap") and not rt.group and old.get("immutable") is True:
        for field in ("data", "binaryData", "immutable"):
            if result.get(field) != old.get(field):
                raise invalid(
                    rt.kind,
                    rt.group,
                    name,
                    field,
                    "Forbidden: field is immutable when `immutable` is set",
                    "FieldValueForbidden",
                )
    if schemas is not None and rt.custom:
        result = schemas.admit(rt.group, rt.version, rt.kind, name, result)
        meta = result["metadata"]
    result = order_object(rt, result)
    if _content(result, rt.status_subresource) != _content(old, rt.status_subresource):
        meta["generation"] = int(old_meta.get("generation", 1)) + 1
    if _comparable_meta(meta) == _comparable_meta(old_meta) and _content(result, False) == _content(
        old, False
    ):
        return None
    _record_manager(rt, meta, manager, subresource, old_meta)
    return result


def check_delete_preconditions(rt: ResourceType, current: dict[str, Any], options: Any) -> None:
    """Honour ``DeleteOptions.preconditions`` (uid, resourceVersion): 409 on mismatch."""
    if not isinstance(options, dict):
        return
    pre = options.get("preconditions")
    if not isinstance(pre, dict):
        return
    meta = current["metadata"]
    name = meta["name"]
    uid = pre.get("uid")
    if uid and uid != meta.get("uid"):
        raise conflict(
            rt.plural,
            rt.group,
            name,
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta.get('uid')}",
        )
    rv = pre.get("resourceVersion")
    if rv and str(rv) != meta.get("resourceVersion"):
        raise conflict(
            rt.plural,
            rt.group,
            name,
            f"Precondition failed: ResourceVersion in precondition: {rv}, "
            f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
        )
