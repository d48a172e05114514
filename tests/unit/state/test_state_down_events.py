"""What was created or deleted while the controller was down, and the scope a store covers
(gitops_reloader/state/resync.py, codec.py, batch.py)."""

from __future__ import annotations

import dataclasses

import pytest

from gitops_reloader.config import Filters
from gitops_reloader.shard import Shard
from gitops_reloader.state.batch import StateBatch
from gitops_reloader.state.codec import ShardData, encode_shard, merge_shards, shard_of
from gitops_reloader.state.resync import missed_while_down, store_scope

SCOPE, OTHER = "5c" * 16, "07" * 16
D1 = "d1" * 16


# --- missed_while_down -----------------------------------------------------------------

STORED = {"ns/ConfigMap/a", "ns/Secret/b", "other/ConfigMap/c"}


@pytest.mark.parametrize(("current", "created", "deleted", "why"), [
    (STORED, set(), set(), "nothing changed"),
    (STORED | {"ns/Secret/new"}, {"ns/Secret/new"}, set(), "created in a namespace the store held"),
    (STORED | {"fresh/Secret/new"}, set(), set(), "a namespace new to the store: its workloads are too"),
    (STORED - {"ns/Secret/b"}, set(), {"ns/Secret/b"}, "deleted"),
    (set(), set(), STORED, "everything deleted"),
    ({"ns/ConfigMap/a", "ns/ConfigMap/b"}, {"ns/ConfigMap/b"}, {"ns/Secret/b", "other/ConfigMap/c"},
     "same name, other kind: one created, one deleted"),
])
def test_missed_while_down_when_the_store_covers_the_scope(current, created, deleted, why) -> None:
    assert missed_while_down(stored=STORED, current=current, covered=True) == (created, deleted), why


@pytest.mark.parametrize("current", [STORED | {"ns/Secret/new"}, STORED - {"ns/Secret/b"}, set()])
def test_nothing_is_missed_when_the_store_does_not_cover_the_scope(current) -> None:
    assert missed_while_down(stored=STORED, current=current, covered=False) == (frozenset(), frozenset())


def test_an_empty_store_knows_no_namespace_so_nothing_is_created() -> None:
    assert missed_while_down(stored=(), current={"ns/Secret/new"}, covered=True) == (frozenset(), frozenset())


# --- store_scope -----------------------------------------------------------------------


@pytest.mark.parametrize("change", [
    {"namespaces": ("ns",)},
    {"namespaces_to_ignore": ("kube-system",)},
    {"resource_label_selector": "app=web"},
    {"ignore_configmaps": True},
    {"ignore_secrets": True},
    {"ignore_secret_types": ()},
    {"shard": Shard(index=1, count=2)},
    {"shard": Shard(index=0, count=2)},
])
def test_the_scope_changes_with_what_the_caches_hold(change) -> None:
    assert store_scope(dataclasses.replace(Filters(), **change)) != store_scope(Filters())


@pytest.mark.parametrize("change", [
    {"namespace_selector": "team=a"},  # the caches hold every namespace's sources anyway
    {"ignored_workload_types": ("jobs",)},
])
def test_the_scope_ignores_what_does_not_change_the_cached_sources(change) -> None:
    assert store_scope(dataclasses.replace(Filters(), **change)) == store_scope(Filters())


def test_the_scope_is_order_free_and_a_valid_stored_digest() -> None:
    one = store_scope(Filters(namespaces=("a", "b")))
    assert one == store_scope(Filters(namespaces=("b", "a")))
    assert len(one) == 32 and int(one, 16) >= 0


# --- the scope in the shards -----------------------------------------------------------


def shard(index: int, count: int, scope: str, generation: int = 1) -> ShardData:
    return ShardData(index, encode_shard(generation=generation, count=count,
                                         sources=[(f"ns/ConfigMap/c{index}", D1)], workloads=(),
                                         scope=scope))


def test_the_store_covers_a_scope_every_shard_names() -> None:
    assert merge_shards([shard(0, 2, SCOPE), shard(1, 2, SCOPE, generation=3)]).scope == SCOPE


@pytest.mark.parametrize(("shards", "why"), [
    ([], "no store yet"),
    ([shard(0, 2, SCOPE), shard(1, 2, OTHER)], "half rewritten under another scope"),
    ([shard(0, 2, SCOPE), shard(1, 2, "")], "a shard written before scopes were recorded"),
    ([shard(0, 3, SCOPE), shard(2, 3, SCOPE)], "a shard is missing: its entries are unknown"),
    ([shard(0, 1, "not-a-digest")], "a malformed scope"),
    ([shard(0, 2, SCOPE), ShardData(1, {**shard(1, 2, SCOPE).data, "sources": "junk\n"})],
     "an unreadable entry"),
])
def test_the_store_covers_no_scope(shards, why) -> None:
    assert merge_shards(shards).scope == "", why


# --- the scope in batches --------------------------------------------------------------


def loaded(stored: dict[int, dict[str, str]], scope: str) -> StateBatch:
    batch = StateBatch(shard_bytes=4096, scope=scope)
    batch.load(merge_shards([ShardData(i, d) for i, d in stored.items()]))
    return batch


def written(count: int, scope: str) -> dict[int, dict[str, str]]:
    """A store of ``count`` shards, each entry in its home shard (as a writer leaves it)."""
    homes: dict[int, list[tuple[str, str]]] = {i: [] for i in range(count)}
    for n in range(12):
        homes[shard_of(f"s|ns/ConfigMap/c{n}", count)].append((f"ns/ConfigMap/c{n}", D1))
    return {i: encode_shard(generation=1, count=count, sources=entries, workloads=(), scope=scope)
            for i, entries in homes.items()}


def test_a_new_store_is_written_with_its_scope_even_with_no_entries() -> None:
    state = loaded({}, SCOPE)
    batch = state.prepare()
    assert batch is not None and [w.data["scope"] for w in batch.writes] == [SCOPE]
    state.committed(batch)
    assert state.prepare() is None


def test_a_changed_scope_rewrites_every_shard_once() -> None:
    stored = written(3, OTHER)
    state = loaded(stored, SCOPE)
    assert state.dirty() == 0
    batch = state.prepare()
    assert batch is not None and sorted(w.index for w in batch.writes) == [0, 1, 2]
    for write in batch.writes:
        stored[write.index] = dict(write.data)
    state.committed(batch)
    assert merge_shards([ShardData(i, d) for i, d in stored.items()]).scope == SCOPE
    assert state.prepare() is None
    state.set_source("ns/ConfigMap/c0", "e" * 32)
    assert len(state.prepare().writes) == 1  # type: ignore[union-attr]  # back to touched shards only


def test_a_crash_while_rewriting_for_a_new_scope_covers_none_and_is_rewritten_again() -> None:
    stored = written(3, OTHER)
    state = loaded(stored, SCOPE)
    batch = state.prepare()
    assert batch is not None
    stored[batch.writes[0].index] = dict(batch.writes[0].data)  # then the crash
    after = loaded(stored, SCOPE)
    assert merge_shards([ShardData(i, d) for i, d in stored.items()]).scope == ""
    again = after.prepare()
    assert again is not None and len(again.writes) == 3


def test_a_store_already_under_its_scope_writes_nothing_more() -> None:
    state = loaded(written(2, SCOPE), SCOPE)
    assert state.prepare() is None


def test_without_a_scope_nothing_is_forced() -> None:
    assert loaded(written(2, OTHER), "").prepare() is not None  # shards name a scope, writer none
    assert loaded({i: {k: v for k, v in d.items() if k != "scope"} for i, d in written(2, "").items()},
                  "").prepare() is None
