"""After a restart or a take-over: is a workload out of date for one source? (pure)

Four records may say what a workload last saw, trusted in this order:

1. **the marker on the workload** (the ``env-vars`` sink's env var, the ``annotations``
   sink's ``last-reloaded-from``): written in the same API call as the reload itself, so
   it can never be ahead of or behind the rollout it describes;
2. **what the store says was last emitted** for this workload and source: covers a
   marker that a GitOps re-apply stripped (no reload for that alone, and the record
   stays) and sinks that leave no marker (webhook);
3. **what the store says the controller last finished handling** for the source: covers
   workloads that were never reloaded, so carry no marker and have no entry of their own;
4. nothing: the source is new to the store. It was **created while the controller was
   down** only when the store covered it (:func:`missed_while_down`); then, with
   ``--reload-on-create``, the workload reloads as a live create would. Otherwise (first
   start with the store, filters or shard changed, a namespace the store never held)
   nothing is known to be missed.

Sources the store covered that are gone now were **deleted while down**; with
``--reload-on-delete`` the controller reloads their workloads as a live delete would.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection

from gitops_reloader.config import Filters

__all__ = ["missed_while_down", "out_of_date", "out_of_date_over_keys", "store_scope"]


def out_of_date(*, current_hash: str, current_digest: str, marker: str | None,
                emitted: str | None, seen: str | None, created: bool = False) -> bool:
    """Whether the workload must reload for the source now.

    ``current_hash`` is the source's Stakater hash (compared with ``marker``, which holds
    a Stakater hash); ``current_digest`` its keyed state digest (compared with the
    store's ``emitted`` and ``seen`` digests). ``created``: the source was created while
    the controller was down and creations reload (used only when nothing else is known).
    """
    if marker is not None:
        return marker != current_hash
    if emitted is not None:
        return emitted != current_digest
    if seen is not None:
        return seen != current_digest
    return created


def out_of_date_over_keys(*, used_hash: str, used_digest: str, whole_hash: str, whole_digest: str,
                          marker: str | None, emitted: str | None, created: bool = False) -> bool:
    """:func:`out_of_date` for a workload that uses the source key by key (``used-keys``).

    The marker and the emitted entry are current when they hold the hash over the used
    keys (``used_hash``/``used_digest``) or the whole object's (``whole_*``: recorded
    before the workload switched modes, and as current). The source-level ``seen``
    digest covers every key, so it is never consulted: a change of a key the workload
    does not use must not count (the controller records a first entry per workload
    instead, ``StateKeeper.assume_current``).
    """
    return all(out_of_date(current_hash=data_hash, current_digest=digest, marker=marker, emitted=emitted,
                           seen=None, created=created)
               for data_hash, digest in ((used_hash, used_digest), (whole_hash, whole_digest)))


def store_scope(filters: Filters) -> str:
    """A digest of what decides which ConfigMaps/Secrets the caches hold.

    Namespaces, ignored namespaces, the label selector, ignored kinds and Secret types,
    and the shard. ``--namespace-selector`` is not part of it: the caches (and so the
    store) hold every namespace's sources and only act on the selected ones.
    """
    text = "\n".join([
        "v1",
        ",".join(sorted(filters.namespaces)),
        ",".join(sorted(filters.namespaces_to_ignore)),
        filters.resource_label_selector,
        f"configmaps={not filters.ignore_configmaps} secrets={not filters.ignore_secrets}",
        ",".join(sorted(filters.ignore_secret_types)),
        f"shard={filters.shard.index}/{filters.shard.count}",
    ])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _namespace(source_id: str) -> str:
    return source_id.partition("/")[0]


def missed_while_down(*, stored: Collection[str], current: Collection[str],
                      covered: bool) -> tuple[frozenset[str], frozenset[str]]:
    """(created, deleted) source ids while nobody watched.

    ``stored``: the store's source ids; ``current``: the ids the caches hold now;
    ``covered``: the store was written under the scope the caches have now. Without
    coverage nothing can be told apart from a change of scope: nothing is missed. A
    source counts as created only in a namespace the store already held a source of
    (a namespace created while down comes with its workloads, started with its data).
    """
    if not covered:
        return frozenset(), frozenset()
    stored_set, current_set = set(stored), set(current)
    known = {_namespace(s) for s in stored_set}
    created = frozenset(s for s in current_set if s not in stored_set and _namespace(s) in known)
    deleted = frozenset(s for s in stored_set if s not in current_set)
    return created, deleted
