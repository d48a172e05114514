"""The controller's own marker on a workload it started rolling, written in the same write.

With a rollout budget, the live sinks add one workload annotation (``metadata``, not the pod
template, so it rolls nothing by itself) to the patch that starts the rollout::

    gitops-reloader.io/rollout: {"at":1764120000,"changes":["ns/Secret/db@3f2a9c81d0e4"]}

``at`` is the write's wall-clock second (the start of ``--rollout-timeout``); ``changes``
names the source changes the write carried out (a source and the first 12 hex characters
of its in-cluster hash, the value the env var already shows in full). Any instance that
lists the workload — after a restart, an HA take-over or a shard hand-over — reads from it
that this workload is rolling because of the controller, since when, and for which change.

Annotations are tenant text: parsing is bounded and anything unexpected reads as no marker.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from gitops_reloader.model import Source

MARKER_ANNOTATION = "gitops-reloader.io/rollout"
MAX_MARKER_CHARS = 4096
MAX_CHANGES = 64
_HASH_CHARS = 12


@dataclass(frozen=True, slots=True)
class Marker:
    """A rollout the controller started: when (Unix seconds) and for which source changes."""

    at: int
    changes: frozenset[str]

    def encode(self) -> str:
        """The annotation value (compact JSON, changes sorted, at most :data:`MAX_CHANGES`)."""
        return json.dumps({"at": self.at, "changes": sorted(self.changes)[:MAX_CHANGES]},
                          separators=(",", ":"))


def shows(seen: Marker, write: Marker) -> bool:
    """Whether a workload carrying marker ``seen`` shows the write that carried ``write``
    (that write, or a later one). Markers count whole seconds, so a marker of the same second
    shows the write only when it is the same marker: two changes a second apart in time but
    not on the clock stay apart (a rollout of the previous change is never taken for this one)."""
    return seen.at > write.at or seen == write


def change_id(source: Source) -> str:
    """One source change: ``<namespace>/<Kind>/<name>@<hash prefix>``."""
    return f"{source.ref}@{source.hash[:_HASH_CHARS]}"


def change_ids(sources: Iterable[Source]) -> frozenset[str]:
    """The change ids of these sources at their current hashes."""
    return frozenset(change_id(s) for s in sources)


def marker_for(sources: Iterable[Source], at: float) -> Marker:
    """The marker of a write that carries out these source changes at ``at``."""
    return Marker(int(at), change_ids(sources))


def parse_marker(value: str | None) -> Marker | None:
    """The marker in an annotation value; None when absent, too long or malformed."""
    if not value or len(value) > MAX_MARKER_CHARS:
        return None
    try:
        data = json.loads(value)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    at, changes = data.get("at"), data.get("changes")
    if not isinstance(at, int) or isinstance(at, bool) or at < 0 or not isinstance(changes, list):
        return None
    if len(changes) > MAX_CHANGES or not all(isinstance(c, str) and len(c) <= 512 for c in changes):
        return None
    return Marker(at, frozenset(changes))
