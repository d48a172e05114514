"""NamespaceMembership: a relabelled namespace's changes, decided by resourceVersion.

Two instances share one relabel at version ``M``: the releasing one (selected before) and
the acquiring one (selected after). Each receives the relabel and a ConfigMap change on
two separate streams, in either order; every combination is played out here.
"""

from __future__ import annotations

import itertools

import pytest

from gitops_reloader.membership import NamespaceMembership

M = 10
ORDERS = ("relabel-first", "change-first")


def acts(order: str, change_at: int, *, releasing: bool) -> int:
    """How often one instance acts on the change, given the order its streams deliver in."""
    membership: NamespaceMembership[str] = NamespaceMembership()
    if releasing:
        membership.join("ns", 3, initial=True)
    acted = 0
    steps = ("relabel", "change") if order == "relabel-first" else ("change", "relabel")
    for step in steps:
        if step == "change":
            acted += membership.owns("ns", change_at, "cfg", "the change")
        elif releasing:
            membership.leave("ns", M)
        else:
            acted += len(membership.join("ns", M))
    return acted


@pytest.mark.parametrize(("releasing_order", "acquiring_order"), list(itertools.product(ORDERS, ORDERS)))
def test_a_change_before_the_relabel_is_acted_on_once_by_the_releasing_instance(
        releasing_order: str, acquiring_order: str) -> None:
    assert acts(releasing_order, M - 5, releasing=True) == 1
    assert acts(acquiring_order, M - 5, releasing=False) == 0


@pytest.mark.parametrize(("releasing_order", "acquiring_order"), list(itertools.product(ORDERS, ORDERS)))
def test_a_change_after_the_relabel_is_never_lost(releasing_order: str, acquiring_order: str) -> None:
    acquiring = acts(acquiring_order, M + 5, releasing=False)
    releasing = acts(releasing_order, M + 5, releasing=True)
    assert acquiring == 1  # the new owner acts, whichever stream came first
    # The old owner too only when the change reached it before the relabel did.
    assert releasing == (1 if releasing_order == "change-first" else 0)


def test_namespaces_of_the_first_list_are_selected_since_forever() -> None:
    membership: NamespaceMembership[str] = NamespaceMembership()
    assert membership.join("ns", 100, initial=True) == []
    assert membership.selected("ns")
    assert membership.owns("ns", 50, "cfg", "older than the namespace's own version")


def test_a_change_older_than_the_join_is_not_ours_and_not_kept() -> None:
    membership: NamespaceMembership[str] = NamespaceMembership()
    membership.join("ns", M)
    assert not membership.owns("ns", M - 1, "cfg", "before")
    assert membership.owns("ns", M + 1, "cfg", "after")
    membership.leave("ns", M + 2)
    assert membership.join("ns", M - 5) == []  # nothing was kept from the member period


def test_declined_changes_replay_newest_per_source_oldest_first_only_after_the_join() -> None:
    membership: NamespaceMembership[str] = NamespaceMembership()
    for version, key, change in ((5, "a", "a@5"), (12, "b", "b@12"), (11, "a", "a@11"), (9, "c", "c@9")):
        assert not membership.owns("ns", version, key, change)
    assert not membership.owns("other", 13, "a", "other@13")
    assert membership.join("ns", M) == ["a@11", "b@12"]  # c@9 predates the join; a@5 replaced
    assert membership.join("other", 1) == ["other@13"]


def test_a_namespace_that_stays_selected_keeps_its_join_version() -> None:
    membership: NamespaceMembership[str] = NamespaceMembership()
    membership.join("ns", M)
    assert membership.join("ns", M + 10) == []
    assert membership.owns("ns", M + 5, "cfg", "between the two")


def test_late_changes_from_before_a_leave_stay_ours_until_the_namespace_rejoins() -> None:
    membership: NamespaceMembership[str] = NamespaceMembership()
    membership.join("ns", 1, initial=True)
    membership.leave("ns", M)
    assert not membership.selected("ns")
    assert membership.owns("ns", M - 1, "cfg", "late")
    assert not membership.owns("ns", M + 1, "cfg", "after the leave")
    assert membership.join("ns", M + 3) == []  # M+1 predates the rejoin
    assert membership.owns("ns", M + 4, "cfg", "member again")


def test_without_a_version_the_current_selection_decides() -> None:
    membership: NamespaceMembership[str] = NamespaceMembership()
    assert not membership.owns("ns", None, "cfg", "x")
    membership.join("ns", M)
    assert membership.owns("ns", None, "cfg", "x")
    membership.leave("ns", None)
    assert not membership.owns("ns", 1, "cfg", "no leave version: nothing is late")


def test_memory_is_bounded() -> None:
    membership: NamespaceMembership[int] = NamespaceMembership(remember=2)
    for version in range(1, 6):
        membership.owns("ns", version, f"cfg-{version}", version)
        membership.leave(f"gone-{version}", version + 1)
    assert membership.join("ns", 0) == [4, 5]  # the oldest were dropped
    assert not membership.owns("gone-1", 1, "cfg", 0)  # its leave version was dropped too
    assert membership.owns("gone-5", 5, "cfg", 0)


@pytest.mark.parametrize(("change_at", "still_ours"), [(M + 5, False), (M - 5, True), (None, True)])
def test_a_relabel_seen_before_the_write_withdraws_a_later_change(change_at: int | None,
                                                                   still_ours: bool) -> None:
    """The releasing instance accepted the change (it arrived first); the relabel then
    arrives inside the coalescing window: at write time the change is the acquirer's."""
    membership: NamespaceMembership[str] = NamespaceMembership()
    membership.join("ns", 3, initial=True)
    assert membership.owns("ns", change_at, "cfg", "the change")
    assert membership.still_owns("ns", change_at)
    membership.leave("ns", M)
    assert membership.still_owns("ns", change_at) is still_ours


def test_the_write_time_check_never_withdraws_a_selected_namespace() -> None:
    membership: NamespaceMembership[str] = NamespaceMembership()
    membership.join("ns", M)
    assert membership.still_owns("ns", M + 1)
    assert membership.still_owns("other", M + 1)  # never selected, never left: not ours to judge
