"""What must hold once a schedule's faults stop and its windows open — read from the cluster.

The oracle never asks the controller what it did. It reads the pods, the Deployments' generations
and Events from the API server, and compares them with what the world itself wrote (each data
change's resourceVersion, its own template and scale changes):

- **delivered** — every pod of every workload started with the current data of every source
  it reads: the data each source had at the pod's resourceVersion (pods are never updated: it
  is when the pod was created) is the data it has now — so a pod started before the last
  change, when that change brought other data, is stale (one started before a change that was
  undone since runs the current data, and restarting it would be for nothing); and every
  Deployment runs only its template;
- **not twice** — the controller wrote a workload's template no more often than the data of its
  sources changed;
- **windows** — nothing was written to ``nightly`` while its window was closed;
- **brakes** — no two writes to ``braked`` closer than its period, whichever instance made them
  (a restart or a take-over lets nothing through early);
- **budget** — with a rollout budget, never more Deployments rolling at once for a template the
  controller wrote than it allows (read from the pods);
- **bounded Events** — at most :data:`MAX_EVENT_OBJECTS` Event objects per object and reason;
- **nothing failing** — the ledger record the controller wrote names no failure (what
  ``gitops-reloader status`` lists).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import pairwise

from gitops_reloader.errors import KubeNotFound
from gitops_reloader.kube.resources import CONFIGMAPS, EVENTS
from gitops_reloader.ledger import decode
from gitops_reloader.testing.schedules.world import BRAKE_PERIOD, NIGHT, NS, READS, World

__all__ = ["MAX_EVENT_OBJECTS", "Violation", "check"]

MAX_EVENT_OBJECTS = 12
"""client-go's correlator: ten distinct messages, then one aggregate (and one spare)."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One promise the cluster shows broken."""

    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.detail}"


def check(world: World, *, record_namespace: str = "default",
          record_name: str = "gitops-reloader-failures") -> list[Violation]:
    """Every violation the cluster shows (empty: the schedule passed)."""
    out: list[Violation] = []
    if not world.kubelet.converged():
        out.append(Violation("delivered", "the rollouts did not converge"))
    for name, reads in READS.items():
        if world.deployment(name) is None:
            continue
        stale = [f"{p['metadata']['name']} ({source}={started}, now {world.data[source]})"
                 for p in world.kubelet.pods(name) for source in sorted(reads)
                 if (started := world.value_at(source, int(p["metadata"]["resourceVersion"])))
                 != world.data[source]]
        if stale:
            out.append(Violation("delivered", f"{name}: pods started with data since changed: {stale}"))
        writes = world.writes.get(name, [])
        born = world.created.get(name, 0)
        changes = sum(1 for source in reads for rv, _ in world.changes[source] if rv > born)
        if len(writes) > changes:
            out.append(Violation("not twice", f"{name}: {len(writes)} template writes for {changes} "
                                              "data changes"))
    for when, _ in world.writes.get("nightly", []):
        if NIGHT.opens_in(when) > 0:
            out.append(Violation("windows", f"nightly written at {when:.0f}, its window closed"))
    braked = world.writes.get("braked", [])
    for (first, instance), (second, again) in pairwise(braked):
        if second - first < BRAKE_PERIOD:  # across restarts and take-overs too
            out.append(Violation("brakes", f"braked written {second - first:.0f}s apart by instances "
                                           f"{instance} and {again} (1 per {BRAKE_PERIOD:.0f}s)"))
    if world.variant.budget and world.peak_rolling > world.variant.budget:
        out.append(Violation("budget", f"{world.peak_rolling} reloads rolling at once "
                                       f"(--max-concurrent-rollouts={world.variant.budget})"))
    counted = Counter((e.get("involvedObject", {}).get("name"), e.get("reason"))
                      for e in world.api.list(EVENTS, namespace=NS, limit=5000).get("items") or [])
    out.extend(Violation("bounded Events", f"{obj} {reason}: {n} Event objects")
               for (obj, reason), n in counted.items() if n > MAX_EVENT_OBJECTS)
    try:
        data = world.api.get(CONFIGMAPS, record_namespace, record_name).get("data") or {}
    except KubeNotFound:
        data = {}
    failing = sorted(e.workload for e in decode(data) if e.failure is not None)
    if failing:
        out.append(Violation("nothing failing", f"the record lists {failing} as failing"))
    return out
