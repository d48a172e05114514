"""What the ledger record held, made current again when an instance becomes active.

The record (:mod:`gitops_reloader.state.ledgerstore`) says what each workload owed when it was
last written. :func:`current_entry` turns one entry into what the workload owes *now*: each
source at its cached state (a deleted one only where the record owed its deletion), nothing for
a workload or source gone since, and nothing the cluster shows was already written — the record
may be one write behind the workloads: a live workload whose own record holds the source's data
(unless pods started while it changed), a git workload whose manifest holds its current digest.
Its failure is kept, and its hold as :func:`restored_hold` says. Reads the caches only.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace

from gitops_reloader import policy
from gitops_reloader.control.caches import Caches
from gitops_reloader.control.reconciler import Reconciler, view
from gitops_reloader.index import ReferenceIndex
from gitops_reloader.kube.workloads import WorkloadRecord
from gitops_reloader.ledger import RECHECK, Entry, Hold, PendingSource, SharedChange, Wait
from gitops_reloader.model import ObjectRef, SourceMeta, SourceRef

__all__ = ["current_entry", "readers_of", "restored_hold", "runs"]


def current_entry(entry: Entry, *, caches: Caches, reconciler: Reconciler, committed: Collection[str],
                  group_of: Callable[[WorkloadRecord], str | None], now: float) -> Entry | None:
    """``entry`` as owed now (None: nothing is left to emit); ``committed``: the git workloads
    whose manifest holds their current digest; ``now``: the monotonic time changes are seen at."""
    try:
        record = caches.workload(ObjectRef.from_key(entry.workload))
    except ValueError:
        return None
    if record is None or entry.workload in committed:
        return None
    owes: dict[SourceRef, PendingSource] = {}
    for ref, item in entry.owes.items():
        meta = caches.source(ref)
        if meta is not None and meta.hash and not item.raced and runs(reconciler, record, meta):
            continue  # written before the record caught up: the workload records it
        if meta is not None and meta.hash:
            detected = None if item.resync else item.detected if item.detected is not None else now
            owes[ref] = replace(item, meta=meta, deleted=False, detected=detected)
        elif item.deleted:
            owes[ref] = replace(item, detected=now)
    if not owes:
        return None
    return replace(entry, owes=owes, group=group_of(record) or "", hold=restored_hold(entry.hold))


def readers_of(change: SharedChange, *, caches: Caches, index: ReferenceIndex, monotonic: float,
               wall: float) -> list[Entry]:
    """The workloads that may owe ``change`` (recorded once for its many readers), as entries to
    put through :func:`current_entry`: each workload the reference index names for its sources
    (the policy decides when it is worked), unless it was created after the change was seen (its
    first pods read the new data). ``monotonic`` / ``wall``: now, on both clocks."""
    detected = monotonic - max(0.0, wall - change.seen) if change.seen else monotonic
    by_workload: dict[str, dict[SourceRef, PendingSource]] = {}
    for ref, item in change.owes.items():
        for key in index.candidates(ref):
            by_workload.setdefault(key, {})[ref] = replace(item, detected=None if item.resync else detected)
    out: list[Entry] = []
    for key, owes in sorted(by_workload.items()):
        record = caches.workload(ObjectRef.from_key(key))
        if record is not None and not (change.seen and record.created > change.seen + CLOCK_SKEW):
            out.append(Entry(key, owes, hold=change.hold))
    return out


CLOCK_SKEW = 60.0
"""How far the API server's clock (creation times) may be ahead of ours: a workload created this
close after a change is taken to have been there before it (reloaded once more, never missed)."""


def restored_hold(hold: Hold | None) -> Hold | None:
    """What a recorded hold is worth to the instance that reads it back: a coalescing window is
    over (the change is due now) and a budget wait is asked again (the waiting list lived in the
    instance before; the flags may have changed); a maintenance window is asked again at once,
    under the windows configured *now*, keeping what it announced; a storm brake keeps its time
    (the new instance's brake learns it: :meth:`~gitops_reloader.control.holds.Holds.restored`)."""
    if hold is None or hold.why in (Wait.COALESCING, Wait.BUDGET):
        return None
    if hold.why is Wait.BRAKE:
        return hold
    return replace(hold, until=RECHECK)


def runs(reconciler: Reconciler, record: WorkloadRecord, meta: SourceMeta) -> bool:
    """Whether ``record``'s own records say its pods run ``meta``'s current data."""
    decision = policy.decide(view(record), meta, reconciler.options)
    recorded = reconciler.recorded_hash(record, meta, decision.container)
    return recorded is not None and recorded in {reconciler.source_hash(record, meta), meta.hash}
