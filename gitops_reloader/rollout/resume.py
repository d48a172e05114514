"""What a restarted instance continues, read from the cluster's and the repository's markers.

Pure: the inputs are the controller's rollout markers (:mod:`gitops_reloader.rollout.marker`)
as found on the live workloads and in the git manifests, and what each workload records;
the outputs say which source changes were in flight when the previous instance stopped,
whether a workload still waits for one of them, and whether a marker in git is a write the
cluster has not shown yet. Nothing here reads a clock, the API server or git.

**The rule** (``docs/rollouts.md``, "Restarts"): a source change is *in flight* when a marker
written by the controller names it at the source's current hash — the previous instance
started rolling it (its first wave carries the marker) and the source has not changed
since. Its remaining workloads are not a new reload: they are the rest of a reload already
begun, so a restarted instance finishes it **without** ``--sync-after-restart``. A change
made while no instance ran is named by no marker (or the source moved on from the hash a
marker names): it is left alone, as Stakater leaves it, unless ``--sync-after-restart``.

Anyone reading the same objects (a ``status`` command, an HA standby) gets the same answer:
nothing is kept only in the memory of the instance that wrote the markers.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from gitops_reloader.rollout.marker import Marker, shows


@dataclass(frozen=True, slots=True)
class InFlight:
    """The source changes some marker names, and when each was first written."""

    first_at: Mapping[str, int]
    """Change id (``<ns>/<Kind>/<name>@<hash prefix>``) → the earliest marker ``at`` naming it."""

    def match(self, change_ids: Iterable[str]) -> str | None:
        """The first of ``change_ids`` (a workload's view of one source change) in flight, else None."""
        return next((c for c in change_ids if c in self.first_at), None)


def in_flight(markers: Iterable[Marker | None]) -> InFlight:
    """The changes named by ``markers`` (None entries: workloads without a marker)."""
    first: dict[str, int] = {}
    for marker in markers:
        if marker is None:
            continue
        for change in marker.changes:
            first[change] = min(marker.at, first.get(change, marker.at))
    return InFlight(first)


def waits(recorded: str | None, accepted: Collection[str], *, created: int | None, started: int) -> bool:
    """Whether a workload still waits for an in-flight change first written at ``started``.

    ``recorded``: what the workload records for the source (a live sink's env var or
    annotation hash; the git sink's committed digest), None when it records nothing;
    ``accepted``: the values meaning "already given this change". A workload that records
    nothing is waiting only when it existed before the change's first write (``created``,
    Unix seconds; None: unknown, then it is left alone — start-up never touches a workload
    that may already run the new data).
    """
    if recorded is not None:
        return recorded not in accepted
    return created is not None and created < started


def unseen(in_git: Marker | None, live: Marker | None) -> bool:
    """Whether the marker committed in the workload's manifest is a write the cluster has not
    shown yet (the engine has not applied the commit): such a rollout counts against the
    budget from its commit, as it did for the instance that committed it."""
    return in_git is not None and (live is None or not shows(live, in_git))
