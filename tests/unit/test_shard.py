"""Namespace placement for --shard-index/--shard-count: stable, even, minimal on resize."""

from __future__ import annotations

from collections import Counter

import pytest

from gitops_reloader.config import load_config
from gitops_reloader.errors import ConfigError
from gitops_reloader.shard import Shard, jump_hash, shard_of

NAMES = [f"team-{i}-prod" for i in range(10_000)]
HOME = {"HOME": "/nonexistent"}


def test_jump_hash_range():
    """One bucket takes everything; key 0 always lands in bucket 0; results stay in range."""
    assert [jump_hash(key, 1) for key in (0, 1, 2**63)] == [0, 0, 0]
    assert jump_hash(0, 100) == 0
    assert all(0 <= jump_hash(k, 7) < 7 for k in range(0, 2**64, 2**58))


@pytest.mark.parametrize("count", [2, 3, 4, 8])
def test_placement_is_even(count):
    sizes = Counter(shard_of(name, count) for name in NAMES)
    assert set(sizes) == set(range(count))
    expected = len(NAMES) / count
    assert all(abs(size - expected) < 0.1 * expected for size in sizes.values())


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_growing_by_one_shard_moves_only_namespaces_to_the_new_shard(count):
    moved = [name for name in NAMES if shard_of(name, count) != shard_of(name, count + 1)]
    assert all(shard_of(name, count + 1) == count for name in moved)
    assert len(moved) < 1.2 * len(NAMES) / (count + 1)


def test_placement_is_stable_and_every_namespace_has_exactly_one_owner():
    assert shard_of("payments", 4) == shard_of("payments", 4)
    for name in NAMES[:500]:
        assert [Shard(i, 3).owns(name) for i in range(3)].count(True) == 1
    assert Shard().owns("anything") and not Shard().sharded


@pytest.mark.parametrize(("argv", "message"), [
    (["--shard-count=0"], "--shard-count"),
    (["--shard-count=2", "--shard-index=2"], "--shard-index: 2 is not below --shard-count 2"),
    (["--shard-index=-1"], "--shard-index"),
])
def test_invalid_shard_flags(argv, message):
    with pytest.raises(ConfigError, match=message):
        load_config(argv, environ=HOME)


def test_each_shard_has_its_own_lease():
    leases = {load_config(["--shard-count=2", f"--shard-index={i}"], environ=HOME).runtime.lease_name
              for i in range(2)}
    assert leases == {"gitops-reloader-shard-0", "gitops-reloader-shard-1"}
    assert load_config([], environ=HOME).runtime.lease_name == "gitops-reloader"
