"""The restart rule: which source changes were in flight, who still waits for one, and which
marker committed to git the cluster has not shown yet (docs/rollouts.md, "Restarts")."""

from __future__ import annotations

import pytest

from gitops_reloader.rollout.marker import Marker
from gitops_reloader.rollout.resume import in_flight, unseen, waits

DB = "shop/Secret/db@3f2a9c81d0e4"
CFG = "shop/ConfigMap/cfg@aaaaaaaaaaaa"


def test_in_flight_keeps_the_first_write_of_each_change_and_skips_workloads_without_a_marker() -> None:
    flight = in_flight([Marker(1005, frozenset({DB})), None, Marker(1000, frozenset({DB, CFG})),
                        Marker(1010, frozenset({CFG}))])
    assert flight.first_at == {DB: 1000, CFG: 1000}
    assert in_flight([None, None]).first_at == {}


def test_a_change_matches_only_at_the_hash_a_marker_names() -> None:
    flight = in_flight([Marker(1000, frozenset({DB}))])
    assert flight.match(["shop/Secret/db@000000000000", DB]) == DB  # the used-key or the whole hash
    assert flight.match(["shop/Secret/db@000000000000"]) is None  # the source moved on while down
    assert flight.match([]) is None


@pytest.mark.parametrize(("recorded", "created", "expected"), [
    ("old", None, True),        # records the value before the change: the rest of the wave
    ("new", None, False),       # already given the change (the first wave)
    ("whole", None, False),     # either accepted value is current (used-keys: the whole hash too)
    (None, 900, True),          # records nothing, existed before the change's first write
    (None, 1000, False),        # created in the second of the first write: may run the new data
    (None, 1100, False),        # created after it: runs the new data
    (None, None, False),        # unknown: start-up touches nothing that may be current
])
def test_who_still_waits(recorded: str | None, created: int | None, expected: bool) -> None:
    assert waits(recorded, {"new", "whole"}, created=created, started=1000) is expected


def test_a_marker_in_git_is_unseen_until_the_live_workload_carries_it_or_a_newer_one() -> None:
    committed = Marker(1000, frozenset({DB}))
    assert unseen(committed, None)
    assert unseen(committed, Marker(900, frozenset({CFG})))
    assert not unseen(committed, committed)
    assert not unseen(committed, Marker(1100, frozenset({CFG})))
    assert not unseen(None, None)
    # Markers count whole seconds: the previous change's marker of the same second is not this one.
    assert unseen(committed, Marker(committed.at, frozenset({"ns/ConfigMap/other@1"})))
