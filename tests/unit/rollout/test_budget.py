"""The budget and holds: pure decisions, table-driven."""

from __future__ import annotations

import pytest

from gitops_reloader.model import ObjectRef
from gitops_reloader.rollout.budget import (
    MAX_PRIORITY,
    Budget,
    Waiting,
    free_slots,
    is_held,
    next_wave,
    parse_priority,
)


def w(name: str, ns: str = "a", priority: int = 0, changes: tuple[str, ...] = ("a/Secret/db@1",)) -> Waiting:
    return Waiting(ObjectRef("Deployment", ns, name), priority, frozenset(changes))


def names(entries: tuple[Waiting, ...]) -> list[str]:
    return [f"{e.ref.namespace}/{e.ref.name}" for e in entries]


@pytest.mark.parametrize(("budget", "rolling", "namespace", "expected"), [
    (Budget(), {}, "a", 1 << 30),
    (Budget(5), {"a": 2, "b": 2}, "a", 1),
    (Budget(5), {"a": 5}, "b", 0),
    (Budget(5), {"a": 7}, "b", 0),  # over (e.g. a smaller budget after a restart): none, never negative
    (Budget(0, 2), {"a": 2, "b": 1}, "a", 0),
    (Budget(0, 2), {"a": 2, "b": 1}, "b", 1),
    (Budget(10, 3), {"a": 1}, "a", 2),
    (Budget(3, 10), {"a": 1, "b": 1}, "c", 1),
])
def test_free_slots(budget: Budget, rolling: dict[str, int], namespace: str, expected: int) -> None:
    assert free_slots(budget, rolling, namespace) == expected


@pytest.mark.parametrize(("budget", "waiting", "rolling", "failed", "hold", "start", "held", "left"), [
    # the budget fills in order: namespace, then name
    (Budget(2), [w("c"), w("a"), w("b")], {}, set(), True, ["a/a", "a/b"], [], ["a/c"]),
    # rollouts under way count
    (Budget(2), [w("c"), w("a"), w("b")], {"a": 1}, set(), True, ["a/a"], [], ["a/b", "a/c"]),
    (Budget(2), [w("a")], {"x": 2}, set(), True, [], [], ["a/a"]),
    # priority first (higher first), then namespace and name
    (Budget(2), [w("a"), w("z", priority=10), w("m", ns="0", priority=-1)], {}, set(), True,
     ["a/z", "a/a"], [], ["0/m"]),
    # per-namespace limit does not stop other namespaces
    (Budget(0, 1), [w("a"), w("b"), w("c", ns="b")], {}, set(), True, ["a/a", "b/c"], [], ["a/b"]),
    (Budget(0, 1), [w("a"), w("c", ns="b")], {"a": 1}, set(), True, ["b/c"], [], ["a/a"]),
    # a failed change holds the reloads carrying it; other changes carry on and take the slot
    (Budget(1), [w("a"), w("b", changes=("a/Secret/other@2",))], {}, {"a/Secret/db@1"}, True,
     ["a/b"], ["a/a"], []),
    # one of several changes failed: held
    (Budget(5), [w("a", changes=("a/Secret/db@1", "a/ConfigMap/x@3"))], {}, {"a/ConfigMap/x@3"}, True,
     [], ["a/a"], []),
    # the source changed again (a new hash): not held
    (Budget(5), [w("a", changes=("a/Secret/db@2",))], {}, {"a/Secret/db@1"}, True, ["a/a"], [], []),
    # --hold-on-failed-rollout=false
    (Budget(5), [w("a")], {}, {"a/Secret/db@1"}, False, ["a/a"], [], []),
    # no budget: everything starts
    (Budget(), [w(str(i)) for i in range(3)], {"a": 100}, set(), True, ["a/0", "a/1", "a/2"], [], []),
])
def test_next_wave(budget: Budget, waiting: list[Waiting], rolling: dict[str, int], failed: set[str],
                   hold: bool, start: list[str], held: list[str], left: list[str]) -> None:
    wave = next_wave(budget, waiting, rolling, failed_changes=frozenset(failed), hold=hold)
    assert (names(wave.start), names(wave.held), sorted(names(wave.waiting))) == (start, held, left)


def test_next_wave_never_exceeds_the_budget() -> None:
    waiting = [w(f"d{i:03}", ns=f"n{i % 7}", priority=i % 3) for i in range(200)]
    for rolling_now in range(0, 12):
        wave = next_wave(Budget(10, 2), waiting, {"n0": rolling_now})
        per_ns: dict[str, int] = {"n0": rolling_now}
        for entry in wave.start:
            per_ns[entry.ref.namespace] = per_ns.get(entry.ref.namespace, 0) + 1
        assert sum(per_ns.values()) <= max(10, rolling_now)
        assert all(n <= 2 for ns, n in per_ns.items() if ns != "n0")


@pytest.mark.parametrize(("changes", "failed", "expected"), [
    ((), {"x"}, False),
    (("x",), set(), False),
    (("x", "y"), {"y"}, True),
    (("x",), {"y"}, False),
])
def test_is_held(changes: tuple[str, ...], failed: set[str], expected: bool) -> None:
    assert is_held(changes, frozenset(failed)) is expected


@pytest.mark.parametrize(("text", "expected"), [
    ("10", 10), (" -3 ", -3), ("+7", 7), ("0", 0), (str(MAX_PRIORITY), MAX_PRIORITY),
])
def test_parse_priority(text: str, expected: int) -> None:
    assert parse_priority(text) == expected


@pytest.mark.parametrize("text", ["", "high", "1.5", "1e3", "1_000", "٣", "+-1", str(MAX_PRIORITY + 1),
                                  "9" * 40, "0x10"])
def test_parse_priority_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_priority(text)


@pytest.mark.parametrize("seed", range(5))
def test_the_fast_path_picks_what_the_full_sort_picks(seed: int) -> None:
    import random

    rng = random.Random(seed)
    waiting = [w(f"d{rng.randrange(1000):03}-{i}", ns=f"n{rng.randrange(4)}", priority=rng.randrange(-2, 3))
               for i in range(100)]
    for rolling_now in (0, 3, 9, 10, 12):
        fast = next_wave(Budget(10), waiting, {"n1": rolling_now})
        full = next_wave(Budget(10, 10_000), waiting, {"n1": rolling_now})  # per-namespace: the sort
        assert names(fast.start) == names(full.start)
        assert sorted(names(fast.waiting)) == sorted(names(full.waiting))
