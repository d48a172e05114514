"""Encoding, decoding and sharding of the state store (gitops_reloader/state/codec.py)."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitops_reloader.hashing import secret_hash
from gitops_reloader.state.codec import (
    DIGEST_CHARS,
    MAX_SHARD_BYTES,
    MAX_SHARDS,
    ShardData,
    decode_shard,
    encode_shard,
    merge_shards,
    shard_count_for,
    shard_of,
    state_digest,
)

KEY = b"k" * 32
D1, D2, D3 = "a1" * 16, "b2" * 16, "c3" * 16


def shard(index: int, generation: int, count: int, sources=(), workloads=()) -> ShardData:
    return ShardData(index, encode_shard(generation=generation, count=count, sources=sources,
                                         workloads=workloads))


def test_digest_is_keyed_short_and_depends_on_key_id_and_hash() -> None:
    digest = state_digest(KEY, "ns/Secret/db", "abc")
    assert len(digest) == DIGEST_CHARS and int(digest, 16) >= 0
    assert digest == state_digest(KEY, "ns/Secret/db", "abc")
    assert digest != state_digest(b"x" * 32, "ns/Secret/db", "abc")
    assert digest != state_digest(KEY, "ns/Secret/other", "abc")  # equal data, other secret
    assert digest != state_digest(KEY, "ns/Secret/db", "abd")


def test_digest_is_never_the_plain_hash_of_secret_data() -> None:
    plain = secret_hash({"password": "aHVudGVyMg=="})
    digest = state_digest(KEY, "ns/Secret/db", plain)
    assert plain[:DIGEST_CHARS] != digest
    assert hashlib.sha256(plain.encode()).hexdigest()[:DIGEST_CHARS] != digest


def test_digest_refuses_an_empty_key() -> None:
    with pytest.raises(ValueError, match="non-empty key"):
        state_digest(b"", "ns/Secret/db", "abc")


def test_shard_of_is_stable_and_in_range() -> None:
    assert shard_of("s|ns/ConfigMap/a", 1) == 0
    assert shard_of("s|ns/ConfigMap/a", 7) == shard_of("s|ns/ConfigMap/a", 7)
    spread = {shard_of(f"s|ns/ConfigMap/c{i}", 8) for i in range(200)}
    assert spread == set(range(8))


def test_encode_then_decode_round_trips() -> None:
    data = encode_shard(generation=4, count=2,
                        sources=[("ns/Secret/db", D1), ("ns/ConfigMap/app", D2)],
                        workloads=[("ns/Deployment/web", {"ConfigMap/app": D2, "Secret/db": D1})])
    assert data["sources"].splitlines() == [f"ns/ConfigMap/app {D2}", f"ns/Secret/db {D1}"]
    snapshot, generation, count, invalid = decode_shard(data)
    assert (generation, count, invalid) == (4, 2, 0)
    assert snapshot.sources == {"ns/Secret/db": D1, "ns/ConfigMap/app": D2}
    assert snapshot.workloads == {"ns/Deployment/web": {"ConfigMap/app": D2, "Secret/db": D1}}


def test_equal_content_gives_equal_text_whatever_the_order() -> None:
    one = encode_shard(generation=1, count=1, sources=[("a/Secret/x", D1), ("a/Secret/y", D2)],
                       workloads=[])
    two = encode_shard(generation=1, count=1, sources=[("a/Secret/y", D2), ("a/Secret/x", D1)],
                       workloads=[])
    assert one == two


@pytest.mark.parametrize("line", [
    "ns/ConfigMap/app",                       # no digest
    f"ns/ConfigMap/app {D1[:-1]}",            # short digest
    f"ns/ConfigMap/app {D1.upper()}",         # not lower-case hex
    f"ns/Deployment/app {D1}",                # not a source kind
    f"ConfigMap/app {D1}",                    # no namespace
    f"ns/ConfigMap/a/b {D1}",                 # too many parts
    f"ns/ConfigMap/app {D1} extra",
])
def test_malformed_source_lines_are_skipped_and_counted(line: str) -> None:
    data = encode_shard(generation=1, count=1, sources=[("ns/Secret/ok", D1)], workloads=[])
    data["sources"] += line + "\n"
    snapshot, _, _, invalid = decode_shard(data)
    assert snapshot.sources == {"ns/Secret/ok": D1}
    assert invalid == 1


@pytest.mark.parametrize("line", [
    "ns/Deployment/web",                              # nothing emitted
    f"ns/Deployment/web ConfigMap/app:{D1}",          # no '='
    f"ns/Deployment/web Pod/app={D1}",                # not a source kind
    f"ns/Deployment/web ConfigMap/a/b={D1}",
    f"ns/Deployment/web ConfigMap/app={D1} Secret/db=zz",
    f"web ConfigMap/app={D1}",                        # not ns/Kind/name
])
def test_malformed_workload_lines_are_skipped_and_counted(line: str) -> None:
    data = encode_shard(generation=1, count=1, sources=[],
                        workloads=[("ns/Deployment/ok", {"Secret/db": D1})])
    data["workloads"] += line + "\n"
    snapshot, _, _, invalid = decode_shard(data)
    assert snapshot.workloads == {"ns/Deployment/ok": {"Secret/db": D1}}
    assert invalid == 1


@pytest.mark.parametrize("change", [
    {"format": "2"},
    {"generation": "x"},
    {"generation": "9" * 40},
    {"shards": "0"},
    {"shards": str(MAX_SHARDS + 1)},
    {"sources": "x" * (MAX_SHARD_BYTES + 2048)},
])
def test_unreadable_shard_reads_as_empty_with_one_mark(change: dict[str, str]) -> None:
    data = {**encode_shard(generation=1, count=1, sources=[("ns/Secret/db", D1)], workloads=[]),
            **change}
    snapshot, generation, count, invalid = decode_shard(data)
    assert (snapshot.sources, snapshot.workloads, generation, count, invalid) == ({}, {}, 0, 0, 1)


def test_merge_keeps_the_copy_from_the_newer_generation() -> None:
    # A count change moved ns/Secret/db from shard 0 to shard 2; the crash came before
    # shard 0 was rewritten, so both hold it.
    old = shard(0, 3, 2, sources=[("ns/Secret/db", D1), ("ns/Secret/keep", D3)])
    new = shard(2, 4, 3, sources=[("ns/Secret/db", D2)])
    for order in ([old, new], [new, old]):
        decoded = merge_shards(order)
        assert decoded.snapshot.sources == {"ns/Secret/db": D2, "ns/Secret/keep": D3}
        assert decoded.source_shards == {"ns/Secret/db": 2, "ns/Secret/keep": 0}  # where each was read
        assert (decoded.generation, decoded.count) == (4, 3)


def test_merge_counts_an_unreadable_shard_so_it_gets_rewritten() -> None:
    broken = ShardData(4, {"format": "nope"})
    decoded = merge_shards([shard(0, 1, 1, sources=[("ns/Secret/db", D1)]), broken])
    assert decoded.count == 5 and decoded.invalid == 1
    assert decoded.snapshot.sources == {"ns/Secret/db": D1}


def test_merge_of_nothing_is_empty() -> None:
    decoded = merge_shards([])
    assert (decoded.snapshot.sources, decoded.snapshot.workloads, decoded.count) == ({}, {}, 0)


@pytest.mark.parametrize(("total", "at_least", "expected"), [
    (0, 0, 1), (100, 1, 1), (512, 1, 1), (513, 1, 2), (5000, 1, 10), (100, 4, 4),
    (10**12, 1, MAX_SHARDS),
])
def test_shard_count_fills_shards_to_about_half(total: int, at_least: int, expected: int) -> None:
    assert shard_count_for(total, shard_bytes=1024, at_least=at_least) == expected


@given(st.text(max_size=2000))
def test_decoding_any_text_never_raises(text: str) -> None:
    data = {"format": "1", "generation": "1", "shards": "1", "sources": text, "workloads": text}
    snapshot, _, _, invalid = decode_shard(data)
    assert invalid >= 0 and all(len(d) == DIGEST_CHARS for d in snapshot.sources.values())
