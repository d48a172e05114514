"""Issue 39: the schedule checker — seeded random schedules judged by an oracle that reads the
cluster (gitops_reloader/testing/schedules). CI runs a fixed budget of seeds per variant; the
command line (``python -m gitops_reloader.testing.schedules --schedules N``) runs more.

A failure prints its seed (which replays it), what the cluster showed broken and the schedule
shrunk to its necessary steps.
"""

from __future__ import annotations

import os

import pytest

from gitops_reloader import ledger
from gitops_reloader.control import restore
from gitops_reloader.control.brakes import StormBrakes
from gitops_reloader.control.holds import Holds
from gitops_reloader.control.reconciler import Reconciler
from gitops_reloader.controller import Controller
from gitops_reloader.ledger import Wait
from gitops_reloader.model import ObjectRef
from gitops_reloader.testing.schedules import (
    BUDGET,
    DEFAULT,
    STATE_STORE,
    Result,
    Step,
    Variant,
    explore,
    generate,
    report,
    run,
    shrink,
)

pytestmark = pytest.mark.e2e

SCHEDULES = int(os.environ.get("SCHEDULES", "60"))
"""Seeds per variant and slice in CI (a few hundred in all, about a second each)."""


@pytest.mark.parametrize("first", [0, 1000])
def test_schedule_checker_default_config_forgets_nothing_owed(first: int) -> None:
    ran, failures = explore(range(first, first + SCHEDULES), DEFAULT)
    assert ran == SCHEDULES
    assert not failures, "\n\n".join(report(f) for f in failures)


def test_schedule_checker_state_store_and_start_up_check_forget_nothing_owed() -> None:
    ran, failures = explore(range(2000, 2000 + SCHEDULES), STATE_STORE)
    assert ran == SCHEDULES
    assert not failures, "\n\n".join(report(f) for f in failures)


def test_schedule_a_seed_is_its_schedule() -> None:
    assert generate(42) == generate(42)
    assert generate(42) != generate(43)
    assert all(isinstance(step, Step) and str(step) for step in generate(7))


def test_schedule_checker_finds_holds_forgotten_at_a_restart_and_shrinks_to_the_steps_that_matter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the ledger's restore taken out (holds kept in memory only, as before issue 39), the
    checker finds a schedule that loses a change across a restart, by itself, and shrinks it
    to a few steps that still fail when replayed."""
    monkeypatch.setattr(Controller, "_restore_ledger", lambda self, current: None)
    ran, failures = explore(range(0, 200), DEFAULT, shrink_failures=False, stop_at_first=True)
    assert failures, f"no failure in {ran} schedules"
    found = failures[0]
    assert any(v.rule == "delivered" for v in found.violations), report(found)
    shrunk = shrink(found.steps, DEFAULT)
    assert len(shrunk) <= len(found.steps)
    assert run(shrunk, DEFAULT).failed  # the shrunk schedule replays the failure
    assert any(step.kind in ("restart", "crash", "crash_seen", "takeover") for step in shrunk)
    assert run(generate(found.seed or 0), DEFAULT).failed  # and its seed replays it


def test_schedule_checker_finds_a_retry_after_that_parks_a_change_for_good(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``Retry-After`` read and used as it was before issue 39 (any float, ``inf`` included,
    replacing the backoff), the checker finds a change that never lands after the faults stop."""
    from gitops_reloader.control import retrypolicy
    from gitops_reloader.kube import api

    def as_sent(self: retrypolicy.RetrySchedule, failure: object, attempts: int, *,
                retry_after: float | None = None, spread: float = 0.0) -> float:
        return retry_after if retry_after is not None and retry_after > 0 else self.base

    monkeypatch.setattr(retrypolicy.RetrySchedule, "delay", as_sent)
    monkeypatch.setattr(api, "_retry_after", lambda headers: _float(headers.get("Retry-After")))
    ran, failures = explore(range(0, 300), DEFAULT, shrink_failures=False, stop_at_first=True)
    assert failures, f"no failure in {ran} schedules"
    assert failures[0].violations or failures[0].error, report(failures[0])


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


# --- issue 45: a world as big as a cluster's -------------------------------------------------------


def test_schedule_checker_budget_restarts_and_deletes_forget_nothing_owed() -> None:
    """A rollout budget of one, the start-up check, restarts, take-overs, workloads deleted and
    created again, hand edits of the record: every change reaches the pods, never two reloads
    roll at once, no brake is passed — judged from the pods."""
    ran, failures = explore(range(4000, 4000 + SCHEDULES), BUDGET)
    assert ran == SCHEDULES
    assert not failures, "\n\n".join(report(f) for f in failures)


def first_failure(variant: Variant, seeds: range) -> Result:
    ran, failures = explore(seeds, variant, shrink_failures=False, stop_at_first=True)
    assert failures, f"no failure in {ran} schedules"
    return failures[0]


def test_schedule_checker_finds_a_budget_slot_that_leaks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 1 reverted (a grant goes back only after an emission): a parked reload found synced
    when granted keeps the only slot, and every later reload waits for good."""
    monkeypatch.setattr(Reconciler, "sync", Reconciler._sync)
    found = first_failure(BUDGET, range(150, 250))  # from seed 0 the first is 183 (docs/benchmarks.md)
    assert any(v.rule == "delivered" for v in found.violations), report(found)


def test_schedule_checker_finds_a_parked_reload_forgotten_at_a_restart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 2 reverted (a recorded budget wait kept as it was, waiting for a grant the new
    instance never gives): the parked reload never lands."""
    monkeypatch.setattr(restore, "restored_hold",
                        lambda hold: hold if hold is not None and hold.why is not Wait.COALESCING else None)
    found = first_failure(BUDGET, range(0, 100))
    assert any(v.rule == "delivered" for v in found.violations), report(found)


def test_schedule_checker_finds_a_deleted_workload_still_owed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 3 reverted (a deleted workload's entry stays): the workload created again under its
    name is restarted for a change its first pods already read."""
    gone = Controller._gone

    def keeps_the_entry(self: Controller, ref: ObjectRef) -> None:
        entry = self.ledger.entry(ref.key)
        gone(self, ref)
        if entry is not None:
            self.ledger.restore([entry])

    monkeypatch.setattr(Controller, "_gone", keeps_the_entry)
    found = first_failure(BUDGET, range(150, 250))  # from seed 0 the first is 167 (docs/benchmarks.md)
    assert found.violations, report(found)


def test_schedule_checker_finds_a_brake_let_through_by_a_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 5 reverted (the start-up check's coalescing wins over a recorded brake; the new
    brake neither learns the recorded hold nor the last write): ``braked`` is written twice
    within its period across a restart or a take-over."""
    monkeypatch.setattr(ledger, "_recorded_first", lambda mine, recorded: mine or recorded)
    monkeypatch.setattr(Holds, "restored", lambda self, key, hold: None)
    monkeypatch.setattr(StormBrakes, "recall", lambda self, key, rate, at: None)
    found = first_failure(STATE_STORE, range(0, 100))
    assert any(v.rule == "brakes" for v in found.violations), report(found)
