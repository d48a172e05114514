"""How reload state is written into ConfigMap shards, and read back (pure: no I/O).

The state is two maps of text:

* **sources**: source id (``ns/ConfigMap/name``, ``ns/Secret/name``) → the keyed digest
  of the data the controller last finished handling;
* **workloads**: workload key (``ns/Kind/name``) → ``{"ConfigMap/name": digest, ...}``,
  what was last emitted for it.

A digest is :func:`state_digest`: HMAC-SHA256 under the digest key the git sink uses,
over the source id and its Stakater hash, cut to 128 bits. It says whether data changed
and nothing else: the state ConfigMaps may be readable by more people than the Secrets
are, so no plain hash of Secret data is ever written (DESIGN contract 2). The source id is
part of the message so that two Secrets with equal data do not show equal digests.

A shard is one ConfigMap's ``data``::

    format: "1"
    generation: "<n>"      batch number of the write that produced this shard
    shards: "<count>"      how many shards the writer spread the entries over
    scope: "<digest>"      what the writer watched (:func:`~.resync.store_scope`), if known
    sources: "<id> <digest>\\n..."
    workloads: "<workload key> <Kind>/<name>=<digest> ...\\n..."

Every entry lives in the shard :func:`shard_of` names for the current count. When the
count grows, a crash can leave an entry in two shards; :func:`merge_shards` keeps the copy
from the higher ``generation`` (the newer write), so a half-written batch never goes
back in time. The stored text is read as hostile: sizes are bounded, each line is parsed
by splitting (linear time), and a malformed line is skipped and counted, never fatal.

The store *covers* a scope only when every shard names the same one (a writer whose
scope changed rewrites them all): then a watched source missing from it was created
while nobody watched, and an entry missing from the caches was deleted.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "DIGEST_CHARS",
    "FORMAT",
    "MAX_SHARDS",
    "MAX_SHARD_BYTES",
    "Decoded",
    "ShardData",
    "Snapshot",
    "decode_shard",
    "encode_shard",
    "merge_shards",
    "shard_count_for",
    "shard_of",
    "source_line",
    "state_digest",
    "workload_line",
]

FORMAT = "1"
DIGEST_CHARS = 32
"""Hex characters kept of the HMAC (128 bits)."""
MAX_SHARDS = 256
"""Upper bound on shards (256 times the shard size is far more than any cluster needs)."""
MAX_SHARD_BYTES = 900 * 1024
"""A shard's text is never larger (a ConfigMap holds at most 1 MiB, metadata included)."""

_DIGEST = re.compile(f"[0-9a-f]{{{DIGEST_CHARS}}}")
_DOMAIN = b"gitops-reloader/state/v1\0"
_KINDS = frozenset({"ConfigMap", "Secret"})


def state_digest(key: bytes, source_id: str, data_hash: str) -> str:
    """The keyed digest stored for ``source_id`` whose Stakater hash is ``data_hash``.

    Without ``key`` (kept in a Secret) the value reveals nothing about the data and
    cannot be brute-forced, even for a short password. Raises :class:`ValueError` for
    an empty key.
    """
    if not key:
        raise ValueError("state_digest needs a non-empty key")
    message = _DOMAIN + f"{source_id}={data_hash}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()[:DIGEST_CHARS]


def shard_of(entry_key: str, count: int) -> int:
    """The shard (0-based) holding ``entry_key`` when there are ``count`` shards.

    Stable across processes and Python versions (SHA-1 of the key, not ``hash()``).
    """
    if count <= 1:
        return 0
    return int.from_bytes(hashlib.sha1(entry_key.encode()).digest()[:8], "big") % count


@dataclass(slots=True)
class Snapshot:
    """Entries by kind; ``workloads`` values map ``Kind/name`` of a source to its digest."""

    sources: dict[str, str] = field(default_factory=dict)
    workloads: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ShardData:
    """One stored shard: its index (from the ConfigMap name) and its ``data``."""

    index: int
    data: Mapping[str, str]


@dataclass(slots=True)
class Decoded:
    """What :func:`merge_shards` read: the entries, the shard each kept copy was found in,
    the highest generation, the shard count the writers used, how many lines or
    shards were unreadable, and the scope every shard names ("": none, or they differ)."""

    snapshot: Snapshot
    generation: int = 0
    count: int = 0
    invalid: int = 0
    source_shards: dict[str, int] = field(default_factory=dict)
    workload_shards: dict[str, int] = field(default_factory=dict)
    scope: str = ""


def source_line(source_id: str, digest: str) -> str:
    return f"{source_id} {digest}\n"


def workload_line(workload_key: str, emitted: Mapping[str, str]) -> str:
    parts = " ".join(f"{source}={digest}" for source, digest in sorted(emitted.items()))
    return f"{workload_key} {parts}\n"


def encode_shard(*, generation: int, count: int, sources: Iterable[tuple[str, str]],
                 workloads: Iterable[tuple[str, Mapping[str, str]]], scope: str = "") -> dict[str, str]:
    """A shard's ``data`` (entries sorted, so equal content gives equal text)."""
    data = {
        "format": FORMAT,
        "generation": str(generation),
        "shards": str(count),
        "sources": "".join(source_line(k, v) for k, v in sorted(sources)),
        "workloads": "".join(workload_line(k, v) for k, v in sorted(workloads)),
    }
    if scope:
        data["scope"] = scope
    return data


def _object_id(text: str, *, kinds: frozenset[str] | None) -> bool:
    """``ns/Kind/name`` with three non-empty parts (and a source kind if ``kinds``)."""
    parts = text.split("/")
    return len(parts) == 3 and all(parts) and (kinds is None or parts[1] in kinds)


def _source_ref(text: str) -> bool:
    kind, _, name = text.partition("/")
    return kind in _KINDS and bool(name) and "/" not in name


def decode_shard(data: Mapping[str, str]) -> tuple[Snapshot, int, int, int]:
    """(entries, generation, count, invalid lines) of one shard; a wrong format or an
    oversized shard reads as empty with one invalid mark."""
    snapshot = Snapshot()
    sources_text = data.get("sources") or ""
    workloads_text = data.get("workloads") or ""
    if (data.get("format") != FORMAT
            or len(sources_text) + len(workloads_text) > MAX_SHARD_BYTES + 1024):
        return snapshot, 0, 0, 1
    generation = _small_int(data.get("generation"))
    count = _small_int(data.get("shards"))
    if generation is None or count is None or not 1 <= count <= MAX_SHARDS:
        return snapshot, 0, 0, 1
    invalid = 0
    for line in sources_text.splitlines():
        source_id, _, digest = line.partition(" ")
        if _object_id(source_id, kinds=_KINDS) and _DIGEST.fullmatch(digest):
            snapshot.sources[source_id] = digest
        elif line:
            invalid += 1
    for line in workloads_text.splitlines():
        workload_key, *parts = line.split(" ")
        emitted: dict[str, str] = {}
        for part in parts:
            source, _, digest = part.partition("=")
            if not (_source_ref(source) and _DIGEST.fullmatch(digest)):
                break
            emitted[source] = digest
        else:
            if _object_id(workload_key, kinds=None) and emitted:
                snapshot.workloads[workload_key] = emitted
                continue
        if line:
            invalid += 1
    return snapshot, generation, count, invalid


def _small_int(text: str | None) -> int | None:
    if text is None or not text.isdigit() or len(text) > 18:
        return None
    return int(text)


def merge_shards(shards: Sequence[ShardData]) -> Decoded:
    """All shards' entries as one snapshot; an entry found twice keeps the newer copy.

    "Newer" is the higher shard ``generation``; on a tie (impossible for one writer,
    which puts each entry in one shard per batch) the shard read last wins.
    """
    result = Decoded(Snapshot())
    origin_sources: dict[str, int] = {}
    origin_workloads: dict[str, int] = {}
    scopes = {scope if _DIGEST.fullmatch(scope := shard.data.get("scope") or "") else ""
              for shard in shards}
    result.scope = scopes.pop() if len(scopes) == 1 else ""
    for shard in sorted(shards, key=lambda s: s.index):
        snapshot, generation, count, invalid = decode_shard(shard.data)
        result.invalid += invalid
        result.generation = max(result.generation, generation)
        # A shard that exists counts even when unreadable: the next write replaces it.
        result.count = max(result.count, count, shard.index + 1)
        for key, digest in snapshot.sources.items():
            if origin_sources.get(key, -1) <= generation:
                origin_sources[key] = generation
                result.snapshot.sources[key] = digest
                result.source_shards[key] = shard.index
        for key, emitted in snapshot.workloads.items():
            if origin_workloads.get(key, -1) <= generation:
                origin_workloads[key] = generation
                result.snapshot.workloads[key] = emitted
                result.workload_shards[key] = shard.index
    if result.invalid or {shard.index for shard in shards} != set(range(result.count)):
        result.scope = ""  # entries may be missing: the store no longer covers its scope
    return result


def shard_count_for(total_bytes: int, *, shard_bytes: int, at_least: int) -> int:
    """Shards needed so that ``total_bytes`` fill each to about half of ``shard_bytes``.

    Half, so that a shard has room to grow (and the hash spreads entries unevenly)
    before the count must change; never fewer than ``at_least`` (counts only grow, so
    no shard is ever left behind with stale entries), never more than :data:`MAX_SHARDS`.
    """
    needed = math.ceil(total_bytes / max(shard_bytes // 2, 1))
    return min(max(needed, at_least, 1), MAX_SHARDS)
