"""Batching and shard planning of the state store (gitops_reloader/state/batch.py).

The "API" here is a dict of shard index → data, written by applying a batch's writes in
order; a crash is a batch applied only up to some write.
"""

from __future__ import annotations

import pytest

from gitops_reloader.state.batch import Batch, StateBatch
from gitops_reloader.state.codec import ShardData, merge_shards, shard_of

D = [f"{i:032x}" for i in range(1, 400)]


def digest(i: int) -> str:
    return D[i]


Stored = dict[int, dict[str, str]]


def apply(stored: Stored, batch: Batch, upto: int | None = None) -> Stored:
    out = dict(stored)
    for write in batch.writes[:upto]:
        out[write.index] = dict(write.data)
    return out


def read(stored: Stored):
    return merge_shards([ShardData(i, d) for i, d in stored.items()])


def fresh(shard_bytes: int = 4096) -> StateBatch:
    batch = StateBatch(shard_bytes=shard_bytes)
    batch.load(read({}))
    return batch


def test_a_burst_of_changes_is_one_batch_and_nothing_after_commit() -> None:
    state = fresh()
    for i in range(20):
        state.set_source(f"ns/ConfigMap/c{i}", digest(i))
    batch = state.prepare()
    assert batch is not None and len(batch.sources) == 20
    assert len(batch.writes) == 1  # 20 short lines fit one shard
    state.committed(batch)
    assert state.dirty() == 0 and state.prepare() is None


def test_setting_the_stored_value_again_is_not_a_change() -> None:
    state = fresh()
    state.set_source("ns/Secret/db", digest(1))
    stored = apply({}, batch := state.prepare())  # type: ignore[arg-type]
    state.committed(batch)
    state.set_source("ns/Secret/db", digest(2))
    state.set_source("ns/Secret/db", digest(1))  # back to what is stored
    assert state.dirty() == 0 and state.prepare() is None
    assert read(stored).snapshot.sources == {"ns/Secret/db": digest(1)}


def test_only_shards_holding_changed_entries_are_rewritten() -> None:
    state = fresh(shard_bytes=2048)
    for i in range(200):
        state.set_source(f"ns/ConfigMap/c{i}", digest(i))
    first = state.prepare()
    assert first is not None and first.count > 4
    stored = apply({}, first)
    state.committed(first)
    state.set_source("ns/ConfigMap/c7", digest(300))
    second = state.prepare()
    assert second is not None and len(second.writes) == 1
    stored = apply(stored, second)
    state.committed(second)
    sources = read(stored).snapshot.sources
    assert sources["ns/ConfigMap/c7"] == digest(300) and len(sources) == 200


def test_no_shard_exceeds_the_shard_size() -> None:
    state = fresh(shard_bytes=1024)
    for i in range(300):
        state.set_source(f"namespace-{i % 7}/Secret/some-rather-long-secret-name-{i}", digest(i))
    batch = state.prepare()
    assert batch is not None
    for write in batch.writes:
        assert len(write.data["sources"]) + len(write.data["workloads"]) <= 1024
    assert len(read(apply({}, batch)).snapshot.sources) == 300


def test_held_sources_wait_until_their_work_is_done() -> None:
    state = fresh()
    state.set_source("ns/ConfigMap/busy", digest(1))
    state.set_source("ns/ConfigMap/idle", digest(2))
    batch = state.prepare(held={"ns/ConfigMap/busy"})
    assert batch is not None and set(batch.sources) == {"ns/ConfigMap/idle"}
    state.committed(batch)
    assert state.dirty() == 1
    assert state.prepare(held={"ns/ConfigMap/busy"}) is None
    later = state.prepare()
    assert later is not None and later.sources == {"ns/ConfigMap/busy": digest(1)}


def test_a_failed_batch_is_written_again_with_a_newer_generation() -> None:
    state = fresh()
    state.set_source("ns/ConfigMap/a", digest(1))
    failed = state.prepare()
    assert failed is not None
    retry = state.prepare()
    assert retry is not None and retry.generation > failed.generation
    assert retry.sources == failed.sources


def test_a_change_during_a_write_stays_dirty_after_the_commit() -> None:
    state = fresh()
    state.set_source("ns/ConfigMap/a", digest(1))
    batch = state.prepare()
    assert batch is not None
    state.set_source("ns/ConfigMap/a", digest(2))  # arrives while the batch is on the wire
    state.committed(batch)
    assert state.stored_source("ns/ConfigMap/a") == digest(1)
    again = state.prepare()
    assert again is not None and again.sources == {"ns/ConfigMap/a": digest(2)}


def test_emissions_merge_into_the_workload_entry() -> None:
    state = fresh()
    assert state.set_emitted("ns/Deployment/web", {"ConfigMap/app": digest(1)})
    assert state.set_emitted("ns/Deployment/web", {"Secret/db": digest(2)})
    assert state.set_emitted("ns/Deployment/web", {"ConfigMap/app": digest(3)})
    batch = state.prepare()
    assert batch is not None
    state.committed(batch)
    assert state.stored_workload("ns/Deployment/web") == {"ConfigMap/app": digest(3), "Secret/db": digest(2)}
    assert read(apply({}, batch)).snapshot.workloads == {
        "ns/Deployment/web": {"ConfigMap/app": digest(3), "Secret/db": digest(2)}}


def test_a_workload_entry_too_large_for_a_shard_is_refused() -> None:
    state = fresh()
    huge = {f"ConfigMap/c{i}": digest(i % 300) for i in range(20_000)}
    assert not state.set_emitted("ns/Deployment/web", huge)
    assert state.dirty() == 0


def test_load_keeps_stored_entries_and_values_recorded_before_it() -> None:
    state = fresh()
    state.set_source("ns/ConfigMap/a", digest(1))
    state.set_emitted("ns/Deployment/web", {"ConfigMap/a": digest(1)})
    batch = state.prepare()
    assert batch is not None
    stored = apply({}, batch)
    # A standby observes a newer value, then takes over and loads.
    standby = StateBatch(shard_bytes=4096)
    standby.set_source("ns/ConfigMap/a", digest(2))
    standby.load(read(stored))
    assert standby.stored_source("ns/ConfigMap/a") == digest(1)  # what the start-up check compares
    assert standby.stored_workload("ns/Deployment/web") == {"ConfigMap/a": digest(1)}
    assert standby.emitted("ns/Deployment/web") == {"ConfigMap/a": digest(1)}
    assert standby.dirty() == 1  # only the newer source value


def test_retain_drops_entries_of_objects_that_are_gone() -> None:
    state = fresh()
    for name in ("a", "b"):
        state.set_source(f"ns/ConfigMap/{name}", digest(1))
        state.set_emitted(f"ns/Deployment/{name}", {f"ConfigMap/{name}": digest(1)})
    batch = state.prepare()
    assert batch is not None
    state.committed(batch)
    assert state.retain_sources({"ns/ConfigMap/a"}) == 1
    assert state.retain_workloads({"ns/Deployment/b"}) == 1
    stored = apply(apply({}, batch), batch2 := state.prepare())  # type: ignore[arg-type]
    state.committed(batch2)
    snapshot = read(stored).snapshot
    assert snapshot.sources == {"ns/ConfigMap/a": digest(1)}
    assert set(snapshot.workloads) == {"ns/Deployment/b"}


def test_growing_count_writes_new_shards_first() -> None:
    state = fresh(shard_bytes=2048)
    state.set_source("ns/ConfigMap/c0", digest(0))
    first = state.prepare()
    assert first is not None and first.count == 1
    state.committed(first)
    for i in range(1, 150):
        state.set_source(f"ns/ConfigMap/c{i}", digest(i))
    grown = state.prepare()
    assert grown is not None and grown.count > 1
    order = [w.index for w in grown.writes]
    assert order[-1] == 0 and sorted(order) == list(range(grown.count))


@pytest.mark.parametrize("crash_after", range(0, 11))
def test_a_crash_anywhere_in_a_batch_loses_no_entry_and_never_goes_back(crash_after: int) -> None:
    """Each entry reads back as its old or its new value; moved entries are never lost."""
    state = fresh(shard_bytes=2048)
    for i in range(60):
        state.set_source(f"ns/ConfigMap/c{i}", digest(i))
    first = state.prepare()
    assert first is not None
    stored = apply({}, first)
    state.committed(first)
    old = read(stored).snapshot.sources
    for i in range(0, 200):  # changes 60 entries, adds 140: the count grows
        state.set_source(f"ns/ConfigMap/c{i}", digest(i + 100))
    batch = state.prepare()
    assert batch is not None and len(batch.writes) >= crash_after
    after = read(apply(stored, batch, upto=crash_after)).snapshot.sources
    for name, value in old.items():
        assert after.get(name) in (value, batch.sources[name]), name
    # The next controller loads what is there and finishes the job.
    survivor = StateBatch(shard_bytes=2048)
    crashed = apply(stored, batch, upto=crash_after)
    survivor.load(read(crashed))
    for i in range(0, 200):
        survivor.set_source(f"ns/ConfigMap/c{i}", digest(i + 100))
    repair = survivor.prepare()
    if repair is not None:
        crashed = apply(crashed, repair)
    final = read(crashed).snapshot.sources
    assert final == {f"ns/ConfigMap/c{i}": digest(i + 100) for i in range(200)}


def test_shard_size_is_validated() -> None:
    with pytest.raises(ValueError, match="shard size"):
        StateBatch(shard_bytes=10)


def test_after_growth_the_next_batch_removes_the_moved_out_copies() -> None:
    state = fresh(shard_bytes=2048)
    for i in range(60):
        state.set_source(f"ns/ConfigMap/c{i}", digest(i))
    first = state.prepare()
    assert first is not None
    stored = apply({}, first)
    state.committed(first)
    for i in range(60, 200):
        state.set_source(f"ns/ConfigMap/c{i}", digest(i))
    grown = state.prepare()
    assert grown is not None and grown.count > first.count
    stored = apply(stored, grown)
    state.committed(grown)
    lines = sum(len(d["sources"].splitlines()) for d in stored.values())
    assert lines > 200  # copies of moved entries in the old shards
    cleanup = state.prepare()
    assert cleanup is not None and {w.index for w in cleanup.writes} == set(range(first.count))
    stored = apply(stored, cleanup)
    state.committed(cleanup)
    assert sum(len(d["sources"].splitlines()) for d in stored.values()) == 200
    assert len(read(stored).snapshot.sources) == 200
    assert state.prepare() is None
    for data in stored.values():
        assert len(data["sources"]) <= 2048


def test_a_crash_during_growth_then_more_crashes_never_lose_an_entry() -> None:
    """Crash mid-growth, load, then batches that each die part-way: every entry stays
    readable at a value it had, and the store finally equals what is known."""
    import random

    for seed in range(40):
        rng = random.Random(seed)
        state = fresh(shard_bytes=2048)
        known = {f"ns/ConfigMap/c{i}": digest(i) for i in range(50)}
        for name, value in known.items():
            state.set_source(name, value)
        first = state.prepare()
        assert first is not None
        stored = apply({}, first)
        state.committed(first)
        for i in range(50, 220):  # the count grows
            known[f"ns/ConfigMap/c{i}"] = digest(i)
            state.set_source(f"ns/ConfigMap/c{i}", digest(i))
        grown = state.prepare()
        assert grown is not None
        stored = apply(stored, grown, upto=rng.randrange(len(grown.writes) + 1))
        history = {name: {value} for name, value in known.items()}
        for _ in range(6):  # restart, change a few entries, die part-way through the batch
            survivor = StateBatch(shard_bytes=2048)
            survivor.load(read(stored))
            readable = read(stored).snapshot.sources
            for name in list(readable):
                assert readable[name] in history[name], (seed, name)
            for name in rng.sample(sorted(known), 5):
                known[name] = digest(rng.randrange(300, 399))
                history[name].add(known[name])
            for name, value in known.items():
                survivor.set_source(name, value)
            batch = survivor.prepare()
            if batch is not None:
                stored = apply(stored, batch, upto=rng.randrange(len(batch.writes) + 1))
        for name in first.sources:  # committed before the first crash: never lost since
            assert name in read(stored).snapshot.sources, (seed, name)
        final = StateBatch(shard_bytes=2048)
        final.load(read(stored))
        for name, value in known.items():
            final.set_source(name, value)
        for _ in range(3):
            batch = final.prepare()
            if batch is None:
                break
            stored = apply(stored, batch)
            final.committed(batch)
        assert read(stored).snapshot.sources == known, seed
        assert final.prepare() is None


def test_copies_found_at_load_stay_until_their_home_is_written() -> None:
    state = fresh(shard_bytes=2048)
    for i in range(50):
        state.set_source(f"ns/ConfigMap/c{i}", digest(i))
    first = state.prepare()
    assert first is not None
    stored = apply({}, first)
    state.committed(first)
    for i in range(50, 220):
        state.set_source(f"ns/ConfigMap/c{i}", digest(i))
    grown = state.prepare()
    assert grown is not None and grown.count > first.count
    old_shards = [n for n, w in enumerate(grown.writes) if w.index < first.count]
    # The crash came right after the old shards were rewritten (with their copies), before
    # any new shard: moved entries live only as copies now.
    only_old = Batch(grown.generation, grown.count, tuple(grown.writes[n] for n in old_shards),
                     grown.sources, grown.workloads, grown.copies)
    stored = apply(stored, only_old)
    survivor = StateBatch(shard_bytes=2048)
    survivor.load(read(stored))
    moved = {name for name in read(stored).snapshot.sources if name in first.sources}
    assert len(moved) == 50
    # Changes homed in the old shards: those shards are rewritten, so the batch must also
    # write the homes of their copies, and keep the copies until then.
    for i in range(50, 220):
        if shard_of(f"s|ns/ConfigMap/c{i}", grown.count) < first.count:
            survivor.set_source(f"ns/ConfigMap/c{i}", digest(333))
    batch = survivor.prepare()
    assert batch is not None
    for crash in range(len(batch.writes) + 1):
        readable = read(apply(stored, batch, upto=crash)).snapshot.sources
        assert all(name in readable for name in moved), crash
