"""The tracker: rollouts under way or failed, from markers and verdicts, with the timeout."""

from __future__ import annotations

from gitops_reloader.model import ObjectRef
from gitops_reloader.rollout.completion import Phase, RolloutStatus
from gitops_reloader.rollout.marker import Marker
from gitops_reloader.rollout.tracker import Rollout, Tracker

REF = ObjectRef("Deployment", "shop", "web")
OTHER = ObjectRef("Deployment", "shop", "api")
ROLLING = RolloutStatus(Phase.PROGRESSING, "UpdatingReplicas")
DONE = RolloutStatus(Phase.COMPLETE, "RolloutComplete")
DEADLINE = RolloutStatus(Phase.FAILED, "ProgressDeadlineExceeded", "too slow")
MARK = Marker(1000, frozenset({"shop/Secret/db@1"}))


def tracker(timeout: float = 600) -> tuple[Tracker, list[Rollout]]:
    heard: list[Rollout] = []
    t = Tracker(timeout=timeout)
    t.subscribe(heard.append)
    return t, heard


def test_begun_counts_until_the_cache_shows_the_write_and_the_rollout_completes() -> None:
    t, heard = tracker()
    t.begin(REF, MARK)
    assert t.rolling_by_namespace(1001) == {"shop": 1}
    t.observe(REF, Marker(900, MARK.changes), DONE, 1001)  # an older marker: our write not seen yet
    assert t.rolling_by_namespace(1001) == {"shop": 1} and heard == []
    t.observe(REF, MARK, ROLLING, 1002)
    assert t.rolling_by_namespace(1002) == {"shop": 1}
    t.observe(REF, MARK, DONE, 1003)
    assert t.rolling_by_namespace(1003) == {} and [r.status.phase for r in heard] == [Phase.COMPLETE]
    assert t.rollouts(1003) == []  # complete ones are not kept


def test_state_comes_from_the_cluster_after_a_restart() -> None:
    t, heard = tracker()
    t.observe(REF, MARK, ROLLING, 1010)
    t.observe(OTHER, MARK, DONE, 1010)  # complete and never tracked: nothing to say
    t.observe(ObjectRef("Deployment", "x", "plain"), None, None, 1010)
    assert t.rolling_by_namespace(1010) == {"shop": 1} and heard == []


def test_failure_is_announced_once_and_healing_ends_it() -> None:
    t, heard = tracker()
    t.observe(REF, MARK, ROLLING, 1001)
    t.observe(REF, MARK, DEADLINE, 1002)
    t.observe(REF, MARK, DEADLINE, 1003)
    assert [r.ref for r in t.failed(1003)] == [REF] and t.rolling_by_namespace(1003) == {}
    t.observe(REF, MARK, DONE, 1004)
    assert t.failed(1004) == []
    assert [r.status.reason for r in heard] == ["ProgressDeadlineExceeded", "RolloutComplete"]


def test_a_rollout_that_never_progresses_fails_at_the_timeout() -> None:
    t, heard = tracker(timeout=60)
    t.begin(REF, MARK)  # e.g. a kind whose controller never writes status
    assert t.next_deadline() == 1060
    t.poll(1059)
    assert heard == [] and t.rolling_by_namespace(1059) == {"shop": 1}
    t.poll(1060)
    t.poll(1061)
    assert [r.status.reason for r in heard] == ["RolloutTimeout"]
    assert t.rolling_by_namespace(1061) == {} and t.status(REF, 1061).phase is Phase.FAILED


def test_forget() -> None:
    t, _ = tracker()
    t.begin(REF, MARK)
    t.observe(OTHER, MARK, ROLLING, 1001)
    t.forget(REF)
    t.forget(OTHER)
    assert t.rollouts(1002) == [] and t.next_deadline() is None


def test_the_informer_quicker_than_the_writer() -> None:
    t, heard = tracker()
    t.observe(REF, MARK, ROLLING, 1001)  # the watch event arrives before begin() is called
    t.begin(REF, MARK)
    t.observe(REF, MARK, DONE, 1002)
    assert t.rollouts(1002) == [] and [r.status.phase for r in heard] == [Phase.COMPLETE]



def test_complete_before_the_writer_returns() -> None:
    """E.g. a StatefulSet with OnDelete or a kind with ``completesLike: none``: complete at the
    write, seen before begin(). begin() announces it (once): the waves' dispatcher hears the
    slot is free, or the next wave would wait for a wake-up at the timeout."""
    t, heard = tracker()
    t.observe(REF, MARK, DONE, 1001)
    assert heard == []  # nothing tracked it yet
    t.begin(REF, MARK)
    assert t.rollouts(1002) == [] and t.next_deadline() is None
    assert [(r.ref, r.status.phase) for r in heard] == [(REF, Phase.COMPLETE)]
    t.observe(REF, MARK, DONE, 1003)  # seen again: nothing new
    assert len(heard) == 1



def test_a_restored_write_counts_until_the_engine_applies_it_and_it_completes() -> None:
    """A marker committed to git by an earlier instance, the cluster not showing it yet."""
    t, heard = tracker(timeout=600)
    t.restore(REF, MARK, 1010)
    assert t.rolling_by_namespace(1010) == {"shop": 1} and t.next_deadline() == 1600
    t.observe(REF, Marker(900, MARK.changes), DONE, 1011)  # the live marker is the older wave's
    assert t.rolling_by_namespace(1011) == {"shop": 1}
    t.observe(REF, MARK, DONE, 1012)  # applied and rolled out
    assert t.rollouts(1012) == [] and [r.status.phase for r in heard] == [Phase.COMPLETE]


def test_a_restored_write_past_the_timeout_is_failed_without_a_second_announcement() -> None:
    t, heard = tracker(timeout=60)
    t.restore(REF, MARK, 1060)
    t.poll(1061)
    assert [r.status.reason for r in t.failed(1061)] == ["RolloutTimeout"]  # still holds its change
    assert heard == []


def test_a_restored_write_the_cache_already_shows_changes_nothing() -> None:
    t, heard = tracker()
    t.observe(REF, MARK, ROLLING, 1010)
    t.restore(REF, MARK, 1010)
    t.observe(REF, MARK, DONE, 1011)
    assert t.rollouts(1011) == [] and [r.status.phase for r in heard] == [Phase.COMPLETE]


def test_the_previous_change_in_the_same_second_is_not_taken_for_this_write() -> None:
    """Markers count whole seconds: a rollout of the previous change that completed (or is seen)
    in the second of the next write is not that write. Taking it for the write freed the slot at
    once and let a third rollout start under a budget of 2 (test_rollout_waves, under load)."""
    t, heard = tracker()
    previous = Marker(1000, frozenset({"shop/Secret/db@1"}))
    fix = Marker(1000, frozenset({"shop/Secret/db@2"}))
    t.begin(REF, previous)
    t.observe(REF, previous, DONE, 1000)
    assert [r.marker for r in heard] == [previous]
    t.begin(REF, fix)  # the next change, written in the same second
    assert t.rolling_by_namespace(1000) == {"shop": 1} and len(heard) == 1
    t.observe(REF, previous, DONE, 1000)  # a relist still showing the previous write
    assert t.rolling_by_namespace(1000) == {"shop": 1} and len(heard) == 1
    t.observe(REF, fix, ROLLING, 1001)
    t.observe(REF, fix, DONE, 1001)
    assert t.rolling_by_namespace(1001) == {} and [r.marker for r in heard] == [previous, fix]


def test_a_view_of_the_previous_change_in_the_same_second_does_not_hide_this_write() -> None:
    t, _ = tracker()
    previous = Marker(1000, frozenset({"shop/Secret/db@1"}))
    t.observe(REF, previous, ROLLING, 1000)  # under way when the next change is written
    t.begin(REF, Marker(1000, frozenset({"shop/Secret/db@2"})))
    t.observe(REF, previous, DONE, 1000)
    assert t.rolling_by_namespace(1000) == {"shop": 1}
