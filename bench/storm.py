"""One Secret rewritten every second for ten minutes, read by 50 workloads: brakes on vs off.

A simulated clock drives the controller's own brake logic (``control/brakes.py``: the
per-workload window, the cluster window, the per-source backoff) through a model of its work
queue (a key scheduled twice keeps the earlier time, a held key comes back when its brake
allows, a newer change replaces the pending one). Nothing is slept; the figures are exact for
that model. Printed per sink family: live (one template write per workload reload) and git
(one commit per repository emission, every workload in it).

    python bench/storm.py [--workloads 50] [--seconds 600]
"""

from __future__ import annotations

import argparse
import heapq
import statistics
from dataclasses import dataclass

from gitops_reloader.control.brakes import Rate, SourceBackoff, StormBrakes

COALESCE = 2.0
SOURCE = "Secret/ns/token"


@dataclass
class Result:
    rollouts: list[int]
    writes: int
    commits: int
    api_requests: int
    final_applied: bool
    settled_after: float


def simulate(workloads: int, seconds: int, *, brakes_on: bool, batch: bool) -> Result:
    """Run the loop through the model; ``batch``: one repository key (git sink), else one key each."""
    backoff = SourceBackoff(cap=300.0) if brakes_on else None
    brakes = StormBrakes(Rate(6, 600.0) if brakes_on else None, None)
    names = [f"ns/Deployment/w{i}" for i in range(workloads)]
    keys = ["batch|repo"] if batch else names
    due: dict[str, float] = {}
    heap: list[tuple[float, str]] = []
    pending: dict[str, int] = {}  # workload → version of the data waiting
    applied = dict.fromkeys(names, 0)
    rollouts = dict.fromkeys(names, 0)
    commits = writes = 0
    last_event = 0.0

    def schedule(key: str, at: float) -> None:
        if key in due and due[key] <= at:
            return  # the earlier time wins, as in the delaying queue
        due[key] = at
        heapq.heappush(heap, (at, key))

    def members(key: str) -> list[str]:
        return names if batch else [key]

    changes = [float(s) for s in range(seconds)]
    version = 0
    while changes or heap:
        if changes and (not heap or changes[0] <= heap[0][0]):
            now = changes.pop(0)
            version += 1
            delay = backoff.delay(SOURCE, COALESCE, now) if backoff else COALESCE
            for name in names:
                pending[name] = version
            for key in keys:
                schedule(key, now + delay)
            continue
        now, key = heapq.heappop(heap)
        if due.get(key) != now:
            continue  # superseded by an earlier schedule
        del due[key]
        emitted = []
        for name in members(key):
            if name not in pending:
                continue
            rate = brakes.per_workload
            wait, _ = brakes.admit(name, rate, now)  # reserves the slot when it may reload
            if wait > 0:
                schedule(key, now + wait)
                continue
            applied[name] = pending.pop(name)
            rollouts[name] += 1
            emitted.append(name)
        if emitted:
            last_event = now
            if batch:
                commits += 1
            else:
                writes += len(emitted)
    return Result(rollouts=list(rollouts.values()), writes=writes, commits=commits,
                  api_requests=writes if not batch else 0,
                  final_applied=all(v == version for v in applied.values()),
                  settled_after=last_event - (seconds - 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=50)
    parser.add_argument("--seconds", type=int, default=600)
    args = parser.parse_args()
    print(f"one Secret rewritten every second for {args.seconds} s, read by {args.workloads} workloads; "
          f"--coalesce-window={COALESCE:g}s; brakes on: --max-reloads-per-workload=6/10m, "
          "--source-backoff-cap=5m\n")
    columns = ("sink", "brakes", "changes", "rollouts/workload (median)", "template writes", "commits",
               "workload API writes", "latest applied", "last emission after the last change")
    print(" | ".join(columns))
    for batch, sink in ((False, "live"), (True, "git")):
        for on in (False, True):
            r = simulate(args.workloads, args.seconds, brakes_on=on, batch=batch)
            row = (sink, "on" if on else "off", args.seconds, f"{statistics.median(r.rollouts):g}",
                   r.writes, r.commits, r.api_requests, "yes" if r.final_applied else "NO",
                   f"{r.settled_after:.0f} s")
            print(" | ".join(str(cell) for cell in row))


if __name__ == "__main__":
    main()
