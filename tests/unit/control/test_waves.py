"""control.waves: park, grant, write, finish; holds announced once; unused grants go back."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from gitops_reloader.clock import FakeClock
from gitops_reloader.config import Rollouts
from gitops_reloader.control.waves import WAVES_KEY, Waves
from gitops_reloader.model import ObjectRef, Source, SourceKind, SourceRef
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.rollout.completion import PAUSED, Phase, RolloutStatus
from gitops_reloader.rollout.marker import MARKER_ANNOTATION

V1 = [Source(SourceRef(SourceKind.SECRET, "ns", "db"), "1" * 40)]
V2 = [Source(SourceRef(SourceKind.SECRET, "ns", "db"), "2" * 40)]
ROLLING = RolloutStatus(Phase.PROGRESSING, "UpdatingReplicas")
DONE = RolloutStatus(Phase.COMPLETE, "RolloutComplete")
FAILED = RolloutStatus(Phase.FAILED, "ProgressDeadlineExceeded", "too slow")


class Harness:
    def __init__(self, budget: int = 2, hold: bool = True, active: bool = True) -> None:
        self.clock = FakeClock()
        self.scheduled: list[str] = []
        self.warnings: list[tuple[str, str]] = []
        self.waves = Waves(Rollouts(max_concurrent=budget, timeout=60, hold_on_failure=hold),
                           clock=self.clock, metrics=Metrics(CollectorRegistry()),
                           schedule=lambda key, delay: self.scheduled.append(key),
                           warn=lambda ref, reason, message: self.warnings.append((ref.name, reason)))
        if active:
            self.waves.activate()

    def granted(self) -> list[str]:
        """Keys granted since last asked (scheduled workload keys)."""
        keys = [ObjectRef.from_key(k).name for k in self.scheduled if k != WAVES_KEY]
        self.scheduled.clear()
        return keys

    def next(self) -> list[str]:
        """Dispatch; the workloads granted."""
        self.waves.dispatch()
        return self.granted()

    def write(self, name: str, sources: list[Source], status: RolloutStatus = ROLLING) -> None:
        """The reconciler's second visit: admitted, written, seen by the informer."""
        ref = ObjectRef("Deployment", "ns", name)
        assert self.waves.admit(ref, {}, sources)
        marker = self.waves.marker(sources)
        self.waves.started(ref, marker)
        self.waves.release(ref)
        self.waves.observe(ref, {MARKER_ANNOTATION: marker.encode()}, status)

    def finish(self, name: str, sources: list[Source], status: RolloutStatus) -> None:
        marker = self.waves.marker(sources)
        self.waves.observe(ObjectRef("Deployment", "ns", name), {MARKER_ANNOTATION: marker.encode()}, status)


def park(h: Harness, names: list[str], sources: list[Source]) -> None:
    for name in names:
        assert not h.waves.admit(ObjectRef("Deployment", "ns", name), {}, sources)


def test_waves_of_two() -> None:
    h = Harness()
    park(h, ["a", "b", "c", "d"], V1)
    assert h.next() == ["a", "b"]
    h.write("a", V1)
    h.write("b", V1)
    assert h.next() == []  # two rolling
    h.finish("a", V1, DONE)
    assert h.next() == ["c"]


def test_an_unused_grant_goes_back() -> None:
    h = Harness(budget=1)
    park(h, ["a", "b"], V1)
    assert h.next() == ["a"]
    h.waves.release(ObjectRef("Deployment", "ns", "a"))  # nothing to write after all
    assert h.next() == ["b"]


def test_a_failure_holds_its_change_once_and_a_new_change_releases() -> None:
    h = Harness(budget=1)
    park(h, ["a", "b", "c"], V1)
    h.next()
    h.write("a", V1)
    h.finish("a", V1, FAILED)
    h.waves.dispatch()
    assert h.next() == []
    assert h.warnings == [("a", "RolloutFailed"), ("b", "ReloadHeld"), ("c", "ReloadHeld")]
    park(h, ["b"], V2)  # the Secret changed again: b's entry now carries the new change
    assert h.next() == ["b"]


def test_the_failed_workload_healing_releases_the_hold() -> None:
    h = Harness(budget=1)
    park(h, ["a", "b"], V1)
    h.next()
    h.write("a", V1, FAILED)
    assert h.next() == []
    h.finish("a", V1, DONE)
    assert h.next() == ["b"]


def test_without_the_hold_a_failure_only_frees_its_slot() -> None:
    h = Harness(budget=1, hold=False)
    park(h, ["a", "b"], V1)
    h.next()
    h.write("a", V1, FAILED)
    assert h.next() == ["b"]
    assert ("b", "ReloadHeld") not in h.warnings


def test_a_bad_priority_is_reported_and_counts_as_zero() -> None:
    h = Harness(budget=1)
    h.waves.admit(ObjectRef("Deployment", "ns", "a"), {"gitops-reloader.io/rollout-priority": "high"}, V1)
    h.waves.admit(ObjectRef("Deployment", "ns", "z"), {"gitops-reloader.io/rollout-priority": "1"}, V1)
    assert h.next() == ["z"]
    assert h.warnings == [("a", "InvalidAnnotation")]


def test_failures_seen_before_activation_are_recorded_not_announced() -> None:
    """After a restart (initial list) or on an HA standby: the hold applies, no second Event."""
    h = Harness(budget=1, active=False)
    h.finish("a", V1, FAILED)
    park(h, ["b"], V1)
    assert h.next() == []
    assert h.warnings == [("b", "ReloadHeld")]


def test_a_paused_rollout_holds_its_slot_and_is_announced_once_per_rollout() -> None:
    """OpenKruise ``paused`` or an Argo Rollout ``Paused``: the rule says PROGRESSING with
    reason Paused; the slot stays taken (the wave waits) and one RolloutPaused says why."""
    paused = RolloutStatus(Phase.PROGRESSING, PAUSED, "the update strategy is paused; 0 of 2 pods updated")
    h = Harness(budget=1)
    park(h, ["a", "b"], V1)
    assert h.next() == ["a"]
    h.write("a", V1, paused)
    h.finish("a", V1, paused)  # the same rollout seen again: no second Event
    assert h.next() == []
    assert h.warnings == [("a", "RolloutPaused")]
    h.finish("a", V1, DONE)  # resumed and complete
    assert h.next() == ["b"]
    h.clock.advance(5)
    h.write("b", V1, paused)  # another rollout: its own Event
    assert h.warnings == [("a", "RolloutPaused"), ("b", "RolloutPaused")]


def test_a_pause_seen_before_activation_is_recorded_not_announced() -> None:
    """A restart's initial list (or an HA standby) shows a pause already announced."""
    paused = RolloutStatus(Phase.PROGRESSING, PAUSED, "paused")
    h = Harness(budget=1, active=False)
    park(h, ["a"], V1)
    assert h.next() == ["a"]
    h.write("a", V1, paused)
    h.waves.activate()
    h.finish("a", V1, paused)  # the same rollout, seen again once active
    assert h.warnings == []

def test_a_hold_announced_before_a_restart_is_not_announced_again() -> None:
    """The restart resumes b's reload while a's failure still holds the change: the earlier
    instance said ReloadHeld on b, this one does not; a new change still releases it."""
    h = Harness(budget=1, active=False)
    h.finish("a", V1, FAILED)
    h.waves.activate()
    h.waves.assume_announced("ns/Deployment/b", frozenset({"ns/Secret/db@111111111111"}))
    park(h, ["b", "c"], V1)
    assert h.next() == []
    assert h.warnings == [("c", "ReloadHeld")]
    park(h, ["b"], V2)
    assert h.next() == ["b"]
