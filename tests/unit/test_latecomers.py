"""control/latecomers.py: which handled changes a workload heard of late was created before."""

from __future__ import annotations

from gitops_reloader.clock import FakeClock
from gitops_reloader.control.latecomers import HORIZON, RecentChanges
from gitops_reloader.model import SourceKind, SourceMeta, SourceRef


def meta(name: str, version: str) -> SourceMeta:
    return SourceMeta(SourceRef(SourceKind.CONFIGMAP, "ns", name), "ab" * 20, resource_version=version)


def test_a_workload_created_before_a_change_is_owed_it_and_one_created_after_is_not() -> None:
    recent = RecentChanges(FakeClock())
    recent.note(meta("app", "120"), None)
    assert [c.meta.ref.name for c in recent.made_after("119")] == ["app"]
    assert recent.made_after("120") == [] and recent.made_after("121") == []


def test_only_the_newest_change_of_a_source_is_kept() -> None:
    recent = RecentChanges(FakeClock())
    recent.note(meta("app", "120"), None)
    recent.note(meta("app", "130"), meta("app", "120"))
    [change] = recent.made_after("125")
    assert change.number == 130 and change.previous is not None and change.previous.resource_version == "120"
    assert len(recent) == 1


def test_changes_are_forgotten_after_the_horizon() -> None:
    clock = FakeClock()
    recent = RecentChanges(clock)
    recent.note(meta("old", "10"), None)
    clock.advance(HORIZON / 2)
    recent.note(meta("new", "20"), None)
    clock.advance(HORIZON / 2 + 1)
    assert [c.meta.ref.name for c in recent.made_after("1")] == ["new"]


def test_versions_that_are_not_numbers_order_nothing() -> None:
    recent = RecentChanges(FakeClock())
    recent.note(meta("app", "abc"), None)
    assert len(recent) == 0
    recent.note(meta("app", "5"), None)
    assert recent.made_after("") == [] and recent.made_after("x1") == []


def test_a_source_changed_again_is_kept_by_its_newest_change_time() -> None:
    clock = FakeClock()
    recent = RecentChanges(clock)
    recent.note(meta("a", "10"), None)
    recent.note(meta("b", "11"), None)
    clock.advance(HORIZON / 2)
    recent.note(meta("a", "12"), None)  # a's newest change: kept past b's horizon
    clock.advance(HORIZON / 2 + 1)
    assert [c.meta.ref.name for c in recent.made_after("1")] == ["a"]


def test_a_delete_is_ordered_by_its_own_version_and_remembered_as_one() -> None:
    recent = RecentChanges(FakeClock())
    recent.note(meta("app", "120"), meta("app", "120"), deleted=True, version="130")  # last written at 120
    [change] = recent.made_after("125")  # created after the last write, before the delete
    assert change.deleted and change.number == 130 and change.meta.resource_version == "120"
    assert recent.made_after("130") == []
