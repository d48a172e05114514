"""May this rollout start now, and is it held: pure decisions over the cluster's state.

The inputs are what the cluster says (how many rollouts are under way per namespace,
which source changes a failed rollout carried) plus the waiting reloads; the output is
which of them start now and which are held. Nothing here reads a clock or the network.

- **Budget**: at most ``total`` rollouts at once in the cluster and ``per_namespace`` in one
  namespace (``0``: no limit).
- **Order**: ``gitops-reloader.io/rollout-priority`` (higher first), then namespace, then
  name (then kind).
- **Hold** (``--hold-on-failed-rollout``): a waiting reload that carries out a source change
  whose rollout failed somewhere does not start; reloads for other changes go on.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gitops_reloader.model import ObjectRef

PRIORITY_ANNOTATION = "gitops-reloader.io/rollout-priority"
MAX_PRIORITY = 1_000_000_000
_MAX_PRIORITY_CHARS = 12


@dataclass(frozen=True, slots=True)
class Budget:
    """``--max-concurrent-rollouts`` and ``--max-concurrent-rollouts-per-namespace`` (0: none)."""

    total: int = 0
    per_namespace: int = 0

    @property
    def enabled(self) -> bool:
        return self.total > 0 or self.per_namespace > 0


@dataclass(frozen=True, slots=True)
class Waiting:
    """A reload waiting for its turn: which workload, its priority, the changes it carries."""

    ref: ObjectRef
    priority: int = 0
    changes: frozenset[str] = frozenset()

    @property
    def rank(self) -> tuple[int, str, str, str]:
        """Sort key: higher priority first, then namespace, name, kind."""
        return (-self.priority, self.ref.namespace, self.ref.name, self.ref.kind)


@dataclass(frozen=True, slots=True)
class Wave:
    """What :func:`next_wave` decided: start now, held by a failed change, still waiting."""

    start: tuple[Waiting, ...] = ()
    """In order."""
    held: tuple[Waiting, ...] = ()
    waiting: tuple[Waiting, ...] = ()
    """In no particular order (only counted)."""


def parse_priority(text: str) -> int:
    """A ``rollout-priority`` value: an integer within ±:data:`MAX_PRIORITY` (ValueError else)."""
    stripped = text.strip()
    digits = stripped[1:] if stripped[:1] in ("+", "-") else stripped
    if not digits.isascii() or not digits.isdigit() or len(stripped) > _MAX_PRIORITY_CHARS:
        raise ValueError(f"not an integer: {text[:40]!r}")
    number = int(stripped)
    if abs(number) > MAX_PRIORITY:
        raise ValueError(f"must be between -{MAX_PRIORITY} and {MAX_PRIORITY}, got {number}")
    return number


def priority_of(annotations: Mapping[str, str]) -> int:
    """The priority a workload waits with: its ``rollout-priority`` annotation, 0 when absent
    or malformed (the controller reports a malformed one and waits with 0 too)."""
    try:
        return parse_priority(str(annotations.get(PRIORITY_ANNOTATION, "0")))
    except ValueError:
        return 0


def is_held(changes: Iterable[str], failed_changes: frozenset[str]) -> bool:
    """Whether a reload carrying ``changes`` is held by a failed rollout of one of them."""
    return any(change in failed_changes for change in changes)


def free_slots(budget: Budget, rolling: Mapping[str, int], namespace: str) -> int:
    """How many more rollouts may start in ``namespace`` (a large number: no limit)."""
    unlimited = 1 << 30
    total = budget.total - sum(rolling.values()) if budget.total > 0 else unlimited
    local = budget.per_namespace - rolling.get(namespace, 0) if budget.per_namespace > 0 else unlimited
    return max(0, min(total, local))


def next_wave(budget: Budget, waiting: Iterable[Waiting], rolling: Mapping[str, int], *,
              failed_changes: frozenset[str] = frozenset(), hold: bool = True) -> Wave:
    """Which waiting reloads start now, given the rollouts under way per namespace.

    Held reloads never start and take no slot; a namespace at its own limit does not stop
    other namespaces; every started reload counts against the budget for the next one.
    Runs at every finished rollout, so the common cases (no hold, only a cluster budget)
    cost O(waiting) rather than a sort.
    """
    entries = list(waiting)
    holding = hold and bool(failed_changes)
    if not holding and budget.per_namespace <= 0:
        free = free_slots(budget, rolling, "")
        if free <= 0:
            return Wave(waiting=tuple(entries))
        start = heapq.nsmallest(free, entries, key=lambda w: w.rank)
        chosen = {id(entry) for entry in start}
        return Wave(start=tuple(start), waiting=tuple(e for e in entries if id(e) not in chosen))
    counts: Counter[str] = Counter({ns: n for ns, n in rolling.items() if n > 0})
    start: list[Waiting] = []
    held: list[Waiting] = []
    left: list[Waiting] = []
    for entry in sorted(entries, key=lambda w: w.rank):
        if hold and is_held(entry.changes, failed_changes):
            held.append(entry)
        elif free_slots(budget, counts, entry.ref.namespace) > 0:
            start.append(entry)
            counts[entry.ref.namespace] += 1
        else:
            left.append(entry)
    return Wave(tuple(start), tuple(held), tuple(left))
