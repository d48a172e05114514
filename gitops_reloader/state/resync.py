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
4. nothing: the source is new to the store (first start with it, or created while the
   controller was down), and nothing is known to be missed.
"""

from __future__ import annotations

__all__ = ["out_of_date"]


def out_of_date(*, current_hash: str, current_digest: str, marker: str | None,
                emitted: str | None, seen: str | None) -> bool:
    """Whether the workload must reload for the source now.

    ``current_hash`` is the source's Stakater hash (compared with ``marker``, which holds
    a Stakater hash); ``current_digest`` its keyed state digest (compared with the
    store's ``emitted`` and ``seen`` digests).
    """
    if marker is not None:
        return marker != current_hash
    if emitted is not None:
        return emitted != current_digest
    if seen is not None:
        return seen != current_digest
    return False
