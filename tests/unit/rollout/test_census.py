"""The census behind ``gitops-reloader status``: pure, table-driven, every state and rule."""

from __future__ import annotations

import random

import pytest

from gitops_reloader.model import ObjectRef
from gitops_reloader.rollout.budget import Budget, Waiting, next_wave
from gitops_reloader.rollout.census import (
    FAILED_EVENT,
    HELD_EVENT,
    HIDDEN,
    NO_BUDGET_NOTE,
    Emission,
    Event,
    State,
    Workload,
    as_dict,
    assign_waves,
    census,
    entries_of,
    render_text,
    shown_change,
)
from gitops_reloader.rollout.completion import PROGRESS_DEADLINE_EXCEEDED, Phase, RolloutStatus
from gitops_reloader.rollout.marker import Marker

NOW = 10_000.0
CM = "ns/ConfigMap/cfg@aaaaaaaaaaaa"
CM2 = "ns/ConfigMap/other@bbbbbbbbbbbb"
SECRET = "ns/Secret/db@cccccccccccc"
ROLLING = RolloutStatus(Phase.PROGRESSING, "UpdatingReplicas", "0 of 1 updated replicas")
DONE = RolloutStatus(Phase.COMPLETE, "RolloutComplete", "rollout complete")
FAILED = RolloutStatus(Phase.FAILED, PROGRESS_DEADLINE_EXCEEDED, "exceeded its progress deadline")


def ref(name: str, ns: str = "ns") -> ObjectRef:
    return ObjectRef("Deployment", ns, name)


def started(name: str, status: RolloutStatus, *changes: str, at: int = 9_000, ns: str = "ns") -> Workload:
    return Workload(ref(name, ns), "env-vars", marker=Marker(at, frozenset(changes or (CM,))), status=status)


def pending(name: str, *changes: str, priority: int = 0, ns: str = "ns", gated: bool = True) -> Workload:
    return Workload(ref(name, ns), "env-vars", priority, pending=frozenset(changes or (CM,)), gated=gated)


ONE = Budget(1)


def take(workloads: list[Workload], *, budget: Budget = ONE, hold: bool = True, timeout: float = 600,
         events: tuple[Event, ...] = (), limit: int = 50, emissions: tuple[Emission, ...] = ()):
    return census(workloads, budget=budget, hold=hold, timeout=timeout, now=NOW, events=events,
                  emissions=emissions, limit=limit)


def lines(report, change: str = CM) -> list[tuple[str, str, int | None]]:
    found, = (c for c in report.changes if c.key == change)
    return [(e.workload.rsplit("/", 1)[1], e.state.value, e.wave) for e in found.workloads]


# --------------------------------------------------------------------------- states


def test_nothing_in_flight() -> None:
    report = take([Workload(ref("a"), "env-vars"), started("b", DONE)])
    assert report.changes == [] and report.commits == []
    assert report.totals == {s.value: 0 for s in State}
    assert report.budget["in_use"] == 0
    assert "no source change in flight" in render_text(report)


def test_rolling_uses_the_budget_and_a_completed_one_is_listed_beside_it() -> None:
    report = take([started("a", ROLLING, at=9_990), started("b", DONE, at=9_980)])
    assert lines(report) == [("a", "rolling", 0), ("b", "rolled", 0)]
    assert report.budget["in_use"] == 1 and report.budget["busiest_namespaces"] == {"ns": 1}
    rolling = report.changes[0].workloads[0]
    assert (rolling.since, rolling.reason) == (9_990, "UpdatingReplicas")
    assert report.changes[0].first_at == 9_980


def test_rolling_past_the_timeout_is_failed_since_the_deadline() -> None:
    report = take([started("a", ROLLING, at=9_000)], timeout=600)
    entry = report.changes[0].workloads[0]
    assert (entry.state, entry.reason, entry.since) == (State.FAILED, "RolloutTimeout", 9_600)
    assert report.budget["in_use"] == 0


def test_a_kind_failure_is_dated_by_the_controllers_event_after_the_write() -> None:
    events = (Event(ref("a"), FAILED_EVENT, 8_000),  # an older incident
              Event(ref("a"), FAILED_EVENT, 9_300), Event(ref("a"), FAILED_EVENT, 9_400))
    report = take([started("a", FAILED)], events=events)
    assert report.changes[0].workloads[0].since == 9_300
    assert take([started("a", FAILED)]).changes[0].workloads[0].since is None  # not announced


def test_held_names_the_failed_workload_and_the_time_of_its_held_event() -> None:
    workloads = [started("a", FAILED, at=9_000), pending("b"), pending("c")]
    events = (Event(ref("b"), HELD_EVENT, 8_500), Event(ref("b"), HELD_EVENT, 9_200),
              Event(ref("a"), FAILED_EVENT, 9_100))
    report = take(workloads, events=events)
    assert lines(report) == [("a", "failed", 0), ("b", "held", None), ("c", "held", None)]
    _, b, c = report.changes[0].workloads
    assert b.held_by == ("ns/Deployment/a",) and b.since == 9_200 and b.reason == "HeldByFailedRollout"
    assert c.since == 9_100  # no ReloadHeld Event yet: the failure's Event
    assert take([started("a", FAILED), pending("b")]).changes[0].workloads[1].since is None
    assert report.totals["held"] == 2 and report.totals["failed"] == 1


def test_without_holds_a_failed_change_waits_in_waves() -> None:
    report = take([started("a", FAILED), pending("b"), pending("c")], hold=False)
    assert lines(report) == [("a", "failed", 0), ("b", "waiting", 1), ("c", "waiting", 2)]
    assert report.changes[0].workloads[1].reason == "WaitingForBudget"


def test_holds_are_per_change_and_take_no_slot() -> None:
    workloads = [started("a", FAILED, SECRET), pending("b", SECRET), pending("c", CM), pending("d", CM)]
    report = take(workloads)
    assert lines(report, SECRET) == [("a", "failed", 0), ("b", "held", None)]
    assert lines(report, CM) == [("c", "waiting", 1), ("d", "waiting", 2)]
    assert [c.key for c in report.changes] == [SECRET, CM]  # trouble first


def test_a_reload_carrying_a_held_change_is_held_whole() -> None:
    report = take([started("a", FAILED, SECRET), pending("b", SECRET, CM2)])
    assert lines(report, SECRET)[1] == ("b", "held", None)
    other = report.changes[1].workloads[0]
    assert (other.state, other.wave, other.held_by) == (State.WAITING, None, ())
    assert "ns/Deployment/a" in other.message


def test_waiting_without_a_budget_is_one_wave_not_written_yet() -> None:
    report = take([pending("a"), pending("b")], budget=Budget())
    assert lines(report) == [("a", "waiting", 1), ("b", "waiting", 1)]
    assert report.changes[0].workloads[0].reason == "NotWrittenYet"


def test_a_sink_the_budget_does_not_gate_has_no_wave() -> None:
    report = take([pending("job", gated=False), pending("b")])
    assert lines(report) == [("b", "waiting", 1), ("job", "waiting", None)]
    assert report.changes[0].workloads[1].reason == "NotWrittenYet"


def test_priority_orders_the_waves() -> None:
    report = take([pending("a"), pending("b", priority=5), pending("c", priority=-1)], budget=Budget(1))
    assert lines(report) == [("b", "waiting", 1), ("a", "waiting", 2), ("c", "waiting", 3)]


# --------------------------------------------------------------------------- waves


def q(name: str, ns: str = "a", priority: int = 0) -> Waiting:
    return Waiting(ObjectRef("Deployment", ns, name), priority)


@pytest.mark.parametrize(("budget", "entries", "expected"), [
    (Budget(2), [q("1"), q("2"), q("3"), q("4"), q("5")], {"1": 1, "2": 1, "3": 2, "4": 2, "5": 3}),
    (Budget(0, 1), [q("1"), q("2"), q("3", "b")], {"1": 1, "2": 2, "3": 1}),
    (Budget(2, 1), [q("1"), q("2"), q("3", "b"), q("4", "c")], {"1": 1, "3": 1, "2": 2, "4": 2}),
    (Budget(), [q("1"), q("2", "b")], {"1": 1, "2": 1}),
    (Budget(3), [], {}),
])
def test_assign_waves(budget: Budget, entries: list[Waiting], expected: dict[str, int]) -> None:
    assert {r.name: wave for r, wave in assign_waves(budget, entries).items()} == expected


@pytest.mark.parametrize("seed", range(100))
def test_assign_waves_is_next_wave_repeated(seed: int) -> None:
    """One pass gives what the controller's own next_wave gives, wave after wave, from an empty cluster."""
    rng = random.Random(seed)
    budget = Budget(rng.choice([0, 1, 2, 3, 7]), rng.choice([0, 1, 2, 4]))
    if not budget.enabled:
        budget = Budget(2)
    entries = [q(f"w{i}", rng.choice("abcd"), rng.choice([0, 0, 1, 5, -3]))
               for i in range(rng.randint(0, 30))]
    expected: dict[ObjectRef, int] = {}
    remaining, wave = entries, 1
    while remaining:
        step = next_wave(budget, remaining, {})
        expected.update({e.ref: wave for e in step.start})
        remaining, wave = list(step.waiting), wave + 1
    assert assign_waves(budget, entries) == expected


# --------------------------------------------------------------------------- bounds, secrets, git


def test_limit_bounds_workloads_and_changes_but_not_the_counts() -> None:
    workloads = [pending(f"w{i:02}") for i in range(7)]
    workloads += [pending(f"x{i}", f"ns/ConfigMap/z{i}@{i:012}") for i in range(4)]
    report = take(workloads, limit=3)
    first = next(c for c in report.changes if c.key == CM)
    assert len(first.workloads) == 3 and first.left_out == 4 and first.counts["waiting"] == 7
    assert len(report.changes) == 3 and report.changes_left_out == 2
    text = render_text(report)
    assert "  … 4 more (raise --limit)" in text and "… 2 more changes (raise --limit)" in text


@pytest.mark.parametrize(("change", "shown"), [
    (SECRET, f"ns/Secret/db@{HIDDEN}"),
    (CM, CM),
    ("ns/Secret/db", "ns/Secret/db"),
    ("garbage@x", "garbage@x"),
])
def test_shown_change_hides_a_secrets_hash(change: str, shown: str) -> None:
    assert shown_change(change) == shown


def test_a_secrets_hash_never_reaches_the_output() -> None:
    report = take([started("a", ROLLING, SECRET), pending("b", SECRET)])
    assert "cccccccccccc" not in render_text(report)
    assert "cccccccccccc" not in repr(as_dict(report))
    assert report.changes[0].change == f"ns/Secret/db@{HIDDEN}" and report.changes[0].source == "ns/Secret/db"


def test_emissions_are_grouped_per_commit_trouble_first_and_bounded() -> None:
    emissions = (Emission(ref("a"), "repo", "1" * 40, "rolled"),
                 Emission(ref("b"), "repo", "1" * 40, "in-template", message="rolling"),
                 Emission(ref("c"), "repo", "2" * 40, "not-applied", "Timeout", "nothing applied",
                          "Kustomization x/y"),
                 Emission(ref("d"), "repo", "3" * 40, "pushed"))
    report = take([], emissions=emissions, limit=2)
    assert [(c.commit[0], c.stages) for c in report.commits] == [
        ("2", {"not-applied": 1}), ("3", {"pushed": 1})]
    assert report.commits_left_out == 1
    text = render_text(report)
    assert f"git commit {'2' * 12} (repo): 1 not-applied" in text
    assert "  not-applied  ns/Deployment/c [Timeout] via Kustomization x/y: nothing applied" in text
    both = take([], emissions=emissions[:2], limit=1).commits[0]
    assert both.stages == {"rolled": 1, "in-template": 1} and both.left_out == 1
    assert both.workloads[0]["workload"] == "ns/Deployment/b"  # in-template before rolled


def test_text_and_entries_of() -> None:
    workloads = [started("a", FAILED, at=9_000), pending("b"), started("c", ROLLING, CM2, at=9_990),
                 pending("d", CM2)]
    events = (Event(ref("b"), HELD_EVENT, 9_950),)
    report = take(workloads, events=events, budget=Budget(2, 1))
    text = render_text(report).splitlines()
    assert text[0] == "budget: 1 of 2 in use, at most 1 per namespace, holds on failed rollouts"
    assert text[1] == "workloads: 1 failed, 1 held, 1 rolling, 1 waiting, 0 rolled"
    assert f"change {CM}: 1 failed, 1 held" in text
    assert "  held     ns/Deployment/b  held by ns/Deployment/a since 50s ago" in text
    assert "  failed   ns/Deployment/a  [ProgressDeadlineExceeded] since time unknown: " \
           "exceeded its progress deadline" in text
    assert ("  rolling  ns/Deployment/c  wave 0, started 10s ago: UpdatingReplicas 0 of 1 updated "
            "replicas") in text
    assert "  waiting  ns/Deployment/d  wave 1" in text
    assert [(c, e.state) for c, e in entries_of(ref("b"), report)] == [(CM, State.HELD)]
    assert entries_of(ref("zzz"), report) == []
    unlimited = render_text(take([started("a", ROLLING, at=9_990)], budget=Budget(), hold=False)).splitlines()
    assert unlimited[0] == "budget: 1 rolling, no cluster limit, no holds"


def test_markers_without_budget_flags_are_noted() -> None:
    report = take([started("a", ROLLING, at=9_990)], budget=Budget(), hold=False)
    assert report.notes == [NO_BUDGET_NOTE]
    assert f"note: {NO_BUDGET_NOTE}" in render_text(report).splitlines()
    assert take([started("a", ROLLING, at=9_990)]).notes == []
    assert take([pending("a")], budget=Budget()).notes == []
