"""Which workloads are out of date when the controller starts or takes over.

With ``--sync-after-restart`` (or on an HA take-over, where the old leader may have died
with changes in its queue) each workload's recorded hash — the env var or annotation its
sink wrote — is compared with its sources' current hash. Only a workload whose recorded
hash differs is reloaded; one that never recorded a hash is left alone. A batch sink (git)
gets every tracked source as a resync and compares the manifest's digest itself.
A ``used-keys`` workload (:mod:`gitops_reloader.usedkeys`) is compared over its used keys:
a recorded value equal to that hash, or to the whole object's hash, is current, so a
change of a key it does not use is never pending.

With the state store (``--state-store``, loaded before this runs) the store also answers
for workloads without a marker — never reloaded, or stripped by a GitOps re-apply — by
the rule in :mod:`gitops_reloader.state.resync`: marker, else what the workload was last
given, else what the controller last finished handling for the source. A source created
while the controller was down reloads its workloads with ``--reload-on-create``, and one
deleted while it was down with ``--reload-on-delete`` (:func:`deleted_while_down`), as
live events would (a ``used-keys`` workload that last ran with none of its keys present is
left alone); both only when the store covered the caches' scope.
"""

from __future__ import annotations

from gitops_reloader import policy, usedkeys
from gitops_reloader.control.caches import Caches
from gitops_reloader.control.reconciler import Reconciler, view
from gitops_reloader.control.writtenat import DataWrittenAt
from gitops_reloader.index import ReferenceIndex
from gitops_reloader.kube.workloads import WorkloadRecord
from gitops_reloader.ledger import PendingSource
from gitops_reloader.model import ObjectRef, Source, SourceMeta, SourceRef
from gitops_reloader.state.keeper import StateKeeper


def out_of_date(caches: Caches, reconciler: Reconciler, state: StateKeeper | None = None,
                written: DataWrittenAt | None = None) -> dict[str, dict[SourceRef, PendingSource]]:
    """Workload key → the sources to reload it for, for every out-of-date workload (``written``:
    asked for a source the workload's own records do not name, :func:`written_since_rolled`)."""
    stale_by_workload: dict[str, dict[SourceRef, PendingSource]] = {}
    on_create = caches.config.behaviour.reload_on_create
    by_namespace = caches.sources_by_namespace()
    for record in caches.workloads():
        if not caches.namespace_allowed(record.ref.namespace):
            continue  # --namespace-selector / shard: its sources' changes are not ours either
        batch = getattr(reconciler.sink_for(record), "group_key", None) is not None
        stale: dict[SourceRef, PendingSource] = {}
        for meta, container in reconciler.tracked(record, by_namespace):
            if not meta.hash:
                continue  # not hashed (no start-up check was configured at list time)
            if batch:
                # A batch sink (git) compares the whole digest itself, and only where
                # the manifest already records one.
                stale[meta.ref] = PendingSource(meta, resync=True)
                continue
            recorded = reconciler.recorded_hash(record, meta, container)
            used = reconciler.source_hash(record, meta)
            key_level = reconciler.key_scope(record, meta.ref) is not None
            if state is not None:
                if state.out_of_date(record.ref, meta, recorded, on_create=on_create,
                                     used_key_hash=used if key_level else None):
                    stale[meta.ref] = PendingSource(meta)
            elif (recorded is not None and recorded not in {used, meta.hash}) or (
                    recorded is None and written is not None
                    and written_since_rolled(reconciler, record, meta, written)):
                stale[meta.ref] = PendingSource(meta)
        if stale:
            stale_by_workload[record.ref.key] = stale
    return stale_by_workload


def written_since_rolled(reconciler: Reconciler, record: WorkloadRecord, meta: SourceMeta,
                         written: DataWrittenAt) -> bool:
    """Whether ``meta``, a source ``record`` reads and its own records do not name, was written
    after the workload's pods last rolled for a reload: the annotations strategy records one source
    and when (``observedAt``), so a switch from Stakater Reloader (or from a version that kept no
    ``synced-sources``) leaves the others unrecorded. False whenever either time is unknown."""
    rolled = getattr(reconciler.sink_for(record), "rolled_at", None)
    since = rolled(record) if rolled is not None else None
    if since is None:
        return False
    at = written.at(meta.ref, meta.resource_version)
    return at is not None and at > since


def deleted_while_down(caches: Caches, index: ReferenceIndex, state: StateKeeper, reconciler: Reconciler,
                       ) -> dict[str, dict[SourceRef, PendingSource]]:
    """Workload key → the sources deleted while the controller was down that may reload
    it, as a live delete would (the workloads referencing them, and those with explicit
    lists in the namespace: the policy decides). Empty without ``--reload-on-delete``.

    Only the source's name is left of it: annotations it carried (``match``) are unknown,
    and so are its keys. A ``used-keys`` workload is judged by what it last ran with
    instead (:func:`ran_without_its_keys`), so a deletion removing none of its keys leaves
    it alone, as live.
    """
    if not caches.config.behaviour.reload_on_delete:
        return {}
    out: dict[str, dict[SourceRef, PendingSource]] = {}
    for ref in state.deleted_while_down():
        if not caches.namespace_allowed(ref.namespace):
            continue
        gone = SourceMeta(ref)
        for key in index.candidates(ref):
            record = caches.workload(ObjectRef.from_key(key))
            if record is not None and ran_without_its_keys(reconciler, state, record, gone):
                continue
            out.setdefault(key, {})[ref] = PendingSource(gone, deleted=True)
    return out


def ran_without_its_keys(reconciler: Reconciler, state: StateKeeper, record: WorkloadRecord,
                         gone: SourceMeta) -> bool:
    """Whether ``record``, a ``used-keys`` workload reading the deleted source ``gone`` key
    by key, last ran with none of those keys present (its marker, else what the store says
    it was last given, is the hash over its keys all absent): the deletion removes nothing
    it reads. False whenever that is not known."""
    keys = reconciler.key_scope(record, gone.ref)
    if keys is None:
        return False
    decision = policy.decide(view(record), gone, reconciler.options)
    recorded = reconciler.recorded_hash(record, gone, decision.container)
    return state.was_given(record.ref, gone.ref, recorded, usedkeys.source_hash(gone, keys))


def used_key_sources(caches: Caches, reconciler: Reconciler, record: WorkloadRecord) -> list[Source]:
    """The sources ``record`` uses key by key (``used-keys`` mode), with their used-key
    hashes: what the state store assumes the workload runs with when it has no entry yet."""
    out: list[Source] = []
    for kind, name, _ in record.refs.key_uses:
        ref = SourceRef(kind, record.ref.namespace, name)
        meta = caches.source(ref)
        if meta is not None and meta.hash and reconciler.key_scope(record, ref) is not None:
            out.append(Source(ref, reconciler.source_hash(record, meta)))
    return out
