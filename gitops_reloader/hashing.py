"""Stakater-compatible data hashes, env-var names, and the keyed digest written to git.

Everything here is a pure function of its arguments: no I/O, no clock, no global state.

**Stakater hash** (DESIGN contract 1). The SHA-1 hex digest of the entries ``key=value``,
sorted as whole byte strings (not by key) and joined with ``;``:

* ConfigMap ``data``: the value as UTF-8 text;
* ConfigMap ``binaryData``: the value as padded standard base64 text, which is exactly what
  the API returns in JSON, so it is used as is;
* Secret ``data``: the *decoded* bytes (the API returns base64; Stakater hashes
  ``string(v)`` of the Go ``[]byte``).

Labels, annotations and ``type`` are never hashed, so a metadata-only change gives the same
hash. Entries are sorted as bytes, which is Go's ``sort.Strings`` order.

A Secrets Store CSI ``SecretProviderClassPodStatus`` is hashed the same way over
``<objects[i].id>=<objects[i].version>`` for each object plus
``SecretProviderClassName=<status.secretProviderClassName>`` (Stakater's
``GetSHAfromSecretProviderClassPodStatus``, :func:`spc_pod_status_hash`): object ids
and versions, never secret values.

The hash is for in-cluster use only (env vars, pod-template annotations). It is a plain
SHA-1 of the data: for a Secret holding a short password it can be brute-forced, so it
must never leave the cluster. What goes to git is :func:`keyed_digest`.

>>> configmap_hash({"test.url": "www.stakater.com"})
'3c9a892aeaedc759abc3df9884a37b8be5680382'
>>> env_var_name("my.app.config", SourceKind.CONFIGMAP)
'STAKATER_MY_APP_CONFIG_CONFIGMAP'
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from typing import Any

from gitops_reloader.model import SourceKind

__all__ = [
    "DELETED_HASH",
    "EMPTY_HASH",
    "ENV_VAR_PREFIX",
    "KEYS_NOT_TRACKED",
    "MAX_TRACKED_KEYS",
    "configmap_hash",
    "env_var_name",
    "every_key_changed",
    "hash_object",
    "key_digests",
    "keyed_digest",
    "secret_hash",
    "spc_pod_status_hash",
    "stakater_hash",
    "used_key_hash",
]

ENV_VAR_PREFIX = "STAKATER_"
"""Prefix of the env var the ``env-vars`` sink writes (Stakater's ``EnvVarPrefix``)."""

EMPTY_HASH = "da39a3ee5e6b4b0d3255bfef95601890afd80709"
"""The hash of an object without data: SHA-1 of the empty string."""

DELETED_HASH = "aae45badef99284e4dae01d6046154ea9d99532f"
"""Stakater's delete marker, recorded by the ``annotations`` sink on ``--reload-on-delete``.

It is the SHA-1 of the ASCII string ``__RELOADER_EMPTY_DELETE_MARKER__`` (Stakater's
``testutil.GetSHAfromEmptyData``): deliberately distinct from :data:`EMPTY_HASH` so that
"deleted" and "emptied" stay different states.
"""

_SEPARATOR = b";"


def stakater_hash(entries: Iterable[bytes]) -> str:
    """SHA-1 hex of ``entries`` sorted as whole byte strings and joined with ``;``.

    The entries are already-formed ``key=value`` byte strings; insertion order never
    matters. No entries gives :data:`EMPTY_HASH`.
    """
    return hashlib.sha1(_SEPARATOR.join(sorted(entries))).hexdigest()


def _text(value: object) -> str:
    """A JSON string value as text; ``null`` (and other odd values) become deterministic text."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _decode_b64(text: str) -> bytes:
    """Decode a Secret ``data`` value (standard base64).

    A value that is not valid base64 cannot come from the API server; rather than fail
    the whole hash, its raw text bytes are hashed instead (deterministic, and still
    changes whenever the value changes).
    """
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return text.encode("utf-8", "surrogatepass")


def configmap_hash(
    data: Mapping[str, str] | None,
    binary_data: Mapping[str, str] | None = None,
) -> str:
    """The Stakater hash of a ConfigMap's ``data`` and ``binaryData``.

    ``binary_data`` values are the base64 text the API returns (padded standard
    alphabet); they are hashed as that text, not decoded.
    """
    entries = [f"{k}={_text(v)}".encode() for k, v in (data or {}).items()]
    entries += [f"{k}={_text(v)}".encode() for k, v in (binary_data or {}).items()]
    return stakater_hash(entries)


def secret_hash(data: Mapping[str, str] | None) -> str:
    """The Stakater hash of a Secret's ``data`` as the API returns it (base64 values).

    Each value is decoded and the entry is ``key=`` followed by the decoded bytes.
    """
    return stakater_hash(
        f"{k}=".encode() + _decode_b64(_text(v)) for k, v in (data or {}).items()
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def spc_pod_status_hash(status: Mapping[str, Any] | None) -> str:
    """The Stakater hash of a ``SecretProviderClassPodStatus``'s ``status``.

    Entries ``<id>=<version>`` for each of ``status.objects`` (duplicates kept, as Go
    appends them) and ``SecretProviderClassName=<status.secretProviderClassName>``; a
    missing or ``null`` field counts as "". Linear in the number of objects.

    >>> spc_pod_status_hash({"secretProviderClassName": "vault",
    ...                      "objects": [{"id": "secret/db", "version": "2"}]})
    'c3a8de5c98372a907b5aebf045caff67ed6d7065'
    """
    body = _mapping(status)
    objects = body.get("objects")
    entries = [f"{_text(o.get('id'))}={_text(o.get('version'))}".encode("utf-8", "surrogatepass")
               for o in (objects if isinstance(objects, list) else ()) if isinstance(o, Mapping)]
    entries.append(f"SecretProviderClassName={_text(body.get('secretProviderClassName'))}"
                   .encode("utf-8", "surrogatepass"))
    return stakater_hash(entries)


def hash_object(kind: SourceKind, obj: Mapping[str, Any]) -> str:
    """The Stakater hash of a raw API object (a ConfigMap or Secret as JSON).

    ConfigMap: ``data`` + ``binaryData``. Secret: ``data`` (base64, decoded) and, if
    present, ``stringData`` (plain text, hashed as UTF-8). ``stringData`` is write-only and
    never returned by the API server, but a manifest may carry it; as on the server, a
    ``stringData`` key overrides the same key in ``data``. Missing or malformed fields
    count as empty. ``metadata`` and ``type`` are never read.
    """
    if kind is SourceKind.CONFIGMAP:
        return configmap_hash(_mapping(obj.get("data")), _mapping(obj.get("binaryData")))
    decoded: dict[str, bytes] = {
        str(k): _decode_b64(_text(v)) for k, v in _mapping(obj.get("data")).items()
    }
    for k, v in _mapping(obj.get("stringData")).items():
        decoded[str(k)] = _text(v).encode()
    return stakater_hash(f"{k}=".encode() + v for k, v in decoded.items())


def _env_name_part(name: str) -> str:
    """Stakater's ``ConvertToEnvVarName``.

    Upper-case, keep ``[A-Z0-9]``, and replace every run of other characters by one
    ``_``. No ``_`` is written at the start (a run is only marked after a valid
    character), but a name that *ends* in a run keeps one trailing ``_``, exactly as
    Stakater does: ``cfg-`` → ``CFG_``. (Kubernetes names always end in an alphanumeric
    character, so this only matters for invalid names.) Characters are upper-cased one
    at a time, and one whose upper case is not a single ASCII letter or digit counts as
    "other", matching Go's byte-wise loop over ``strings.ToUpper``.
    """
    out: list[str] = []
    last_valid = False
    for ch in name:
        up = ch.upper()
        if len(up) == 1 and ("A" <= up <= "Z" or "0" <= up <= "9"):
            out.append(up)
            last_valid = True
        else:
            if last_valid:
                out.append("_")
            last_valid = False
    return "".join(out)


def env_var_name(name: str, kind: SourceKind) -> str:
    """The env var the ``env-vars`` sink writes for a source.

    ``STAKATER_`` + the converted name + ``_CONFIGMAP`` or ``_SECRET``:
    ``my-config`` → ``STAKATER_MY_CONFIG_CONFIGMAP``, Secret ``my-secret`` →
    ``STAKATER_MY_SECRET_SECRET``.
    """
    return f"{ENV_VAR_PREFIX}{_env_name_part(name)}_{kind.value}"


def keyed_digest(key: bytes, sources: Iterable[tuple[str, str]]) -> str:
    """HMAC-SHA256 hex over ``"<source id>=<hash>"`` lines, sorted, joined with ``\\n``.

    ``sources`` are ``(source id, stakater hash)`` pairs, the id like
    ``ConfigMap/ns/name``. Identical lines count once, so the digest depends only on the
    set of pairs. This is the value written to git (``gitops-reloader.io/config-hash``):
    without ``key``, which stays in the cluster, it reveals nothing about the data and
    cannot be brute-forced from a public repository, so it is safe to publish.

    Raises :class:`ValueError` for an empty key (an HMAC with a known key would be as weak
    as the plain hash).
    """
    if not key:
        raise ValueError("keyed_digest needs a non-empty key")
    lines = sorted({f"{source_id}={digest}" for source_id, digest in sources})
    return hmac.new(key, "\n".join(lines).encode(), hashlib.sha256).hexdigest()


def data_fingerprint(obj: Mapping[str, Any]) -> str:
    """A cheap digest that changes exactly when a Secret's data changes.

    The API server's base64 encoding is canonical, so equal base64 text means equal
    bytes; hashing the text skips decoding, which dominates start-up time with many
    large Secrets. Not Stakater-compatible and never written anywhere.
    """
    entries = [f"{k}={_text(v)}".encode() for k, v in _mapping(obj.get("data")).items()]
    entries += [f"{k}:{_text(v)}".encode() for k, v in _mapping(obj.get("stringData")).items()]
    return hashlib.sha1(b"\0".join(sorted(entries))).hexdigest()


# --- key-level reload (``--reload-on=used-keys``) ------------------------------------------

MAX_TRACKED_KEYS = 256
"""A source with more data keys than this keeps no per-key digests (whole-object reload)."""

KEYS_NOT_TRACKED = b"!"
"""``key_digests`` of a source with too many keys: key-level reload falls back to its hash."""

_ENTRY = 16
_HALF = 8


def _short(tag: bytes, text: str) -> bytes:
    """8 bytes of SHA-1 over ``tag`` + ``text`` (SHA-1: the fastest digest here, and 64
    bits are ample to tell two values of one key apart)."""
    return hashlib.sha1(tag + text.encode("utf-8", "surrogatepass")).digest()[:_HALF]


@functools.lru_cache(maxsize=4096)
def _key_name(key: str) -> bytes:
    """The digest of a key name (names repeat across objects: ``password``, ``tls.crt``)."""
    return _short(b"k", key)


def key_digests(kind: SourceKind, obj: Mapping[str, Any]) -> bytes:
    """Per-key digests of a raw ConfigMap/Secret: what key-level reload compares.

    One 16-byte entry per data key — an 8-byte digest of the key name and one of the value
    (ConfigMap ``data`` as text, ``binaryData`` as its base64 text, tagged apart; Secret
    ``data`` as its base64 text, which the API server writes canonically, so no value is
    decoded; a manifest's ``stringData`` is encoded the same way and wins, as on the
    server) — sorted and joined. The name digests let a used key be found without keeping
    names; 64-bit value digests are for change detection only, never written anywhere.
    ``b""``: no data; :data:`KEYS_NOT_TRACKED`: over :data:`MAX_TRACKED_KEYS` keys.
    """
    values: dict[str, bytes] = {}
    if kind is SourceKind.CONFIGMAP:
        for k, v in _mapping(obj.get("data")).items():
            values[str(k)] = _short(b"t", _text(v))
        for k, v in _mapping(obj.get("binaryData")).items():
            values[str(k)] = _short(b"b", _text(v))
    else:
        for k, v in _mapping(obj.get("data")).items():
            values[str(k)] = _short(b"s", _text(v))
        for k, v in _mapping(obj.get("stringData")).items():
            encoded = base64.b64encode(_text(v).encode("utf-8", "surrogatepass")).decode("ascii")
            values[str(k)] = _short(b"s", encoded)
    if len(values) > MAX_TRACKED_KEYS:
        return KEYS_NOT_TRACKED
    return b"".join(sorted(_key_name(k) + v for k, v in values.items()))


def _value_digest(digests: bytes, key: str) -> bytes | None:
    """The value digest of ``key`` in ``digests`` (None: no such key)."""
    wanted = _key_name(key)
    for start in range(0, len(digests) - _ENTRY + 1, _ENTRY):
        if digests[start:start + _HALF] == wanted:
            return digests[start + _HALF:start + _ENTRY]
    return None


def used_key_hash(digests: bytes, keys: Iterable[str]) -> str | None:
    """SHA-1 hex over the used ``keys`` only: what a ``used-keys`` workload records.

    Lines ``<key>=<value digest hex>`` (``<key>!`` for a key the source lacks, so a key
    appearing or disappearing changes it), sorted, after a fixed prefix; a change of any
    other key leaves it as it was. None when the source keeps no per-key digests
    (:data:`KEYS_NOT_TRACKED`): the caller uses the whole-object hash.
    """
    if digests == KEYS_NOT_TRACKED:
        return None
    lines = []
    for key in sorted(set(keys)):
        value = _value_digest(digests, key)
        lines.append(f"{key}!" if value is None else f"{key}={value.hex()}")
    return hashlib.sha1("\n".join(["gitops-reloader used-keys v1", *lines]).encode()).hexdigest()


def every_key_changed(digests: bytes) -> bytes:
    """``digests`` as if every value changed (``plan`` without new data), same keys."""
    if digests == KEYS_NOT_TRACKED:
        return digests
    entries = (digests[i:i + _ENTRY] for i in range(0, len(digests) - _ENTRY + 1, _ENTRY))
    return b"".join(sorted(e[:_HALF] + _short(b"plan", e[_HALF:].hex()) for e in entries))
