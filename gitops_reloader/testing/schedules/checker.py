"""Run schedules, judge them by the oracle, and shrink a failing one to a minimal schedule.

:func:`run` plays one schedule in a fresh :class:`~.world.World`: its steps, then the *end* —
faults stop, the clock moves a minute at a time (windows open, brakes release, retries come due)
and the rollouts tick, until nothing is owed and every Deployment runs its template, or
:data:`END_MINUTES` have passed — and asks :func:`~.oracle.check`. :func:`shrink` takes a failing
schedule and removes steps (delta debugging, as Hypothesis shrinks a rule-based state machine's
run) while it still fails. :func:`explore` runs seeds until a budget of schedules or seconds is
spent and returns the failures, each with its seed, its shrunk steps and how to replay it.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gitops_reloader.testing.schedules.oracle import Violation, check
from gitops_reloader.testing.schedules.steps import Step, Variant, generate
from gitops_reloader.testing.schedules.world import World

__all__ = ["BUDGET", "DEFAULT", "END_MINUTES", "STATE_STORE", "UNFLUSHED", "VARIANTS", "Result", "explore",
           "report", "run", "shrink"]

log = logging.getLogger(__name__)

END_MINUTES = 45
"""How long (on the schedule's clock) the end may take: two windows and many brake periods."""
DEFAULT = Variant("default")
STATE_STORE = Variant("state-store", ("--state-store=configmap", "--sync-after-restart"))
"""The state store and the start-up check on every restart and take-over, besides the ledger."""
UNFLUSHED = Variant("unflushed", ("--state-store=configmap", "--sync-after-restart"), unflushed_crashes=True)
"""Kills land before the ledger record caught up (a SIGKILL within two seconds of a change): only
what the cluster and the state store show survives. Two limits are known and documented
(docs/architecture.md, "The ledger"): pods started while a source held other data during a
rollout (the change undone since) are not known to be stale; a workload created shortly before
the kill may be restarted once for nothing. Run from the command line, not in CI."""
BUDGET = Variant("budget", ("--max-concurrent-rollouts=1", "--sync-after-restart"), budget=1)
"""A rollout budget of one (reloads park, are granted as rollouts end, across restarts and
take-overs) and the start-up check; the oracle checks no two reloads ever rolled at once."""
VARIANTS = {v.name: v for v in (DEFAULT, STATE_STORE, BUDGET, UNFLUSHED)}


@dataclass(slots=True)
class Result:
    """One schedule's run."""

    seed: int | None
    variant: Variant
    steps: list[Step]
    violations: list[Violation] = field(default_factory=list)
    seconds: float = 0.0
    shrunk: list[Step] | None = None
    error: str = ""
    """An exception the run raised (the controller did not settle, a step failed)."""

    @property
    def failed(self) -> bool:
        return bool(self.violations or self.error)


def run(steps: Sequence[Step], variant: Variant, *, seed: int | None = None) -> Result:
    """Play ``steps`` in a fresh world and judge the cluster."""
    started = time.monotonic()
    result = Result(seed, variant, list(steps))
    with tempfile.TemporaryDirectory(prefix="schedule-") as workdir:
        try:
            with World(variant, Path(workdir)) as world:
                for step in steps:
                    world.apply(step)
                _end(world)
                result.violations = check(world)
        except Exception as exc:  # a step or the end failed: a finding too
            result.error = f"{type(exc).__name__}: {exc}"
    result.seconds = time.monotonic() - started
    return result


def _end(world: World) -> None:
    """Faults stop; the clock moves until nothing is owed and the rollouts converged."""
    world.server.clear_faults()
    assert world.app is not None
    for _ in range(END_MINUTES):
        world.advance(60.0)
        world.observe()
        while world.kubelet.tick():
            pass
        world.observe()
        if not world.app.controller.ledger.keys() and world.kubelet.converged():
            break
    store = world.app.controller.ledger_store
    if store is not None:
        store.flush()  # what `status` reads is written within its interval; the oracle reads it now


def shrink(steps: Sequence[Step], variant: Variant, *,
           fails: Callable[[Sequence[Step]], bool] | None = None, budget: int = 60) -> list[Step]:
    """A smaller schedule that still fails (ddmin over the steps; at most ``budget`` replays)."""
    still = fails or (lambda candidate: run(candidate, variant).failed)
    current = list(steps)
    chunks = 2
    replays = 0
    while len(current) >= 2 and replays < budget:
        size = max(1, len(current) // chunks)
        for start in range(0, len(current), size):
            candidate = current[:start] + current[start + size:]
            replays += 1
            if candidate and still(candidate):
                current = candidate
                chunks = max(chunks - 1, 2)
                break
            if replays >= budget:
                break
        else:
            if size == 1:
                break
            chunks = min(len(current), chunks * 2)
    return current


def explore(seeds: Iterable[int], variant: Variant, *, seconds: float | None = None,
            shrink_failures: bool = True, stop_at_first: bool = False) -> tuple[int, list[Result]]:
    """Run the schedules of ``seeds`` (until ``seconds`` are spent, or the first failure);
    how many ran, and the failures."""
    started = time.monotonic()
    ran, failures = 0, []
    for seed in seeds:
        if seconds is not None and time.monotonic() - started > seconds:
            break
        result = run(generate(seed), variant, seed=seed)
        ran += 1
        if result.failed:
            if shrink_failures:
                result.shrunk = shrink(result.steps, variant)
            log.error("schedule failed", extra={"seed": seed, "variant": variant.name})
            failures.append(result)
            if stop_at_first:
                break
    return ran, failures


def report(result: Result) -> str:
    """What a failure says: its seed (which replays it), what broke, and the steps (shrunk)."""
    lines = [f"schedule seed {result.seed} ({result.variant.name}) failed in {result.seconds:.1f}s:"]
    lines += [f"  - {v}" for v in result.violations]
    if result.error:
        lines.append(f"  - error: {result.error}")
    steps = result.shrunk if result.shrunk is not None else result.steps
    lines.append(f"  steps{' (shrunk)' if result.shrunk is not None else ''}:")
    lines += [f"    {i + 1}. {s}" for i, s in enumerate(steps)]
    lines.append(f"  replay: python -m gitops_reloader.testing.schedules --seed {result.seed} "
                 f"--variant {result.variant.name}")
    return "\n".join(lines)
