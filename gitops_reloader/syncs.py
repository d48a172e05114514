"""One rollout per sync, and what a workload's pods run with that its sink's record does not say.

Helm, Argo CD and Flux apply a changed ConfigMap and a changed Deployment in one sync,
ConfigMaps first. The Deployment's new pods read the new data, so writing the reload
into its template as well would roll it a second time. A change is **synced** when the
workload's pods were replaced after it: its pod template (without the controller's own
fields) differs from the one in effect when the source changed — the *baseline*, kept with
what the workload owes (:class:`~gitops_reloader.ledger.PendingSource`) and corrected by
resourceVersion when the two watches deliver out of order — and its kind restarts its pods on
a template change. A template changed and changed back (``kubectl rollout undo``, Argo CD's
self-heal reverting a manual edit) is back at the baseline: the Deployment controller keeps
the old ReplicaSet and its pods, so it is **not** a sync. Neither is a change of replicas, nor
a template change of an ``OnDelete`` kind (nothing restarts). The hash of a synced change is
recorded on the workload's *metadata*, which restarts nothing and which Argo CD and Flux
leave alone (a field neither manages, not drift):

``gitops-reloader.io/synced-sources: ConfigMap/app-config=<hash>@<recorded>;...``

``<recorded>`` is a short digest of what the workload's sink recorded for that source
when it was synced (its ``STAKATER_*`` variable, its annotation, or the git digest in
the template). The entry counts only while that record is unchanged: the controller's
next write for the source moves the record, and the entry lapses by itself — no clean-up
write is needed, and a git commit (which writes nothing live) invalidates it the same way.

The same annotation carries what a **live write** restarted the pods with for the sources the
sink's own record does not hold (:func:`with_snapshot`): a source never written (no
``STAKATER_*`` variable yet), or every source but the one the ``annotations`` sink's single
``last-reloaded-from`` names. So the start-up check and the slow resync know what the pods run
for *every* source they read, and a change to any of them missed while the controller was down
is repaired.

Pure functions only: the fingerprints the informer keeps, and the annotation's text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gitops_reloader.hashing import ENV_VAR_PREFIX
from gitops_reloader.model import CONFIG_HASH_KEY, LAST_RELOADED_FROM, SourceRef, resource_version_number

SYNCED_ANNOTATION = "gitops-reloader.io/synced-sources"
RESTARTED_AT = "gitops-reloader.io/restarted-at"
"""Pod-template annotation a live sink writes when the recorded value cannot change but the
pods must restart: a source returned to the value its record already holds, while the pods
run the data a sync brought (see :func:`needs_restart`)."""

OWN_TEMPLATE_ANNOTATIONS = frozenset({LAST_RELOADED_FROM, CONFIG_HASH_KEY, RESTARTED_AT})
"""Pod-template annotations only the controller writes (a change to them is not a sync)."""

MAX_TEXT = 8192
MAX_ENTRIES = 64
_RECORD_DIGEST = 12


def _own_env(entry: Any) -> bool:
    return isinstance(entry, Mapping) and str(entry.get("name", "")).startswith(ENV_VAR_PREFIX)


def foreign_template(template: Mapping[str, Any] | None) -> dict[str, Any]:
    """``template`` without what the controller writes into it (its ``STAKATER_*`` env
    entries and its own annotations): what a sync, a ``helm upgrade`` or ``kubectl apply``
    changes."""
    out = dict(template or {})
    metadata = dict(out.get("metadata") or {})
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items()
                   if k not in OWN_TEMPLATE_ANNOTATIONS}
    metadata["annotations"] = annotations
    out["metadata"] = metadata
    spec = dict(out.get("spec") or {})
    for field in ("containers", "initContainers"):
        containers = []
        for container in spec.get(field) or ():
            if isinstance(container, Mapping):
                container = {**container, "env": [e for e in container.get("env") or () if not _own_env(e)]}
            containers.append(container)
        spec[field] = containers
    out["spec"] = spec
    return out


def template_fingerprint(template: Mapping[str, Any] | None) -> int:
    """An 8-byte digest of the pod template minus the controller's own fields (0: none)."""
    if not template:
        return 0
    text = json.dumps(foreign_template(template), sort_keys=True, separators=(",", ":"), default=str)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") or 1


@dataclass(frozen=True, slots=True)
class TemplateChange:
    """A workload's last pod-template change by someone else, as the controller saw it."""

    resource_version: int | None
    before: int
    """The template's fingerprint before that change."""

    def baseline(self, source_version: str, current: int) -> int:
        """The fingerprint in effect when a source changed at resourceVersion ``source_version``,
        the template being ``current`` now: the one before this change when the change was
        written after the source's (one etcd orders every write, whatever order the watches
        deliver them in), else ``current``."""
        source = resource_version_number(source_version)
        if source is not None and self.resource_version is not None and self.resource_version > source:
            return self.before
        return current


def rolled_since(baseline: int, current: int) -> bool:
    """Whether a workload's pods were replaced since a change: its template (``current``) is not
    the one in effect then (``baseline``; 0: unknown, never a sync)."""
    return bool(baseline) and bool(current) and baseline != current


def source_id(ref: SourceRef) -> str:
    """``<Kind>/<name>``: the annotation lives on a workload of the source's namespace."""
    return f"{ref.kind.kube_kind}/{ref.name}"


def record_digest(recorded: str | None) -> str:
    """A short digest of what the sink recorded for a source ("-": nothing)."""
    if not recorded:
        return "-"
    return hashlib.blake2b(recorded.encode(), digest_size=_RECORD_DIGEST // 2).hexdigest()


Entry = tuple[str, str, int]
"""``(hash, record digest, baseline)``: what the pods run, the sink's record it holds for, and
for a sync the template fingerprint before it (0: none)."""


def parse(text: str | None) -> dict[str, Entry]:
    """The annotation's entries, ``source id → (hash, record digest, baseline)``; malformed text
    or entries are ignored (the annotation is on an object tenants can edit), and parsing is
    bounded (:data:`MAX_TEXT` characters, :data:`MAX_ENTRIES` entries)."""
    if not text or len(text) > MAX_TEXT:
        return {}
    out: dict[str, Entry] = {}
    for part in text.split(";")[:MAX_ENTRIES]:
        ident, eq, rest = part.partition("=")
        value, at, tail = rest.rpartition("@")
        recorded, tilde, base = tail.partition("~")
        baseline = int(base, 16) if tilde and 0 < len(base) <= 16 and _hex(base) else 0
        if eq and at and ident and value and recorded:
            out[ident.strip()] = (value, recorded, baseline)
    return out


def _hex(text: str) -> bool:
    return all(ch in "0123456789abcdef" for ch in text)


def render(entries: Mapping[str, Entry]) -> str | None:
    """The annotation's text (None: no entry left, the annotation is removed)."""
    kept = sorted(entries.items())[:MAX_ENTRIES]
    return ";".join(f"{ident}={value}@{recorded}" + (f"~{baseline:x}" if baseline else "")
                    for ident, (value, recorded, baseline) in kept) or None


def synced_hash(annotations: Mapping[str, str], ref: SourceRef, recorded: str | None,
                fingerprint: int = 0) -> str | None:
    """The hash a sync brought ``ref`` to, if the workload says so and its sink's record for
    ``ref`` is still ``recorded`` (the record it had when the sync was seen) and its template
    (``fingerprint``) is not back at the one before the sync (a rollback undoes the sync: the
    old ReplicaSet's pods come back); else None."""
    entry = parse(annotations.get(SYNCED_ANNOTATION)).get(source_id(ref))
    if entry is None or entry[1] != record_digest(recorded) or (entry[2] and entry[2] == fingerprint):
        return None
    return entry[0]


def undone(annotations: Mapping[str, str], fingerprint: int) -> list[str]:
    """The source ids (``Kind/name``) whose sync the template ``fingerprint`` undid: it is back
    at the template in effect before the sync."""
    return [ident for ident, (_, _, baseline) in parse(annotations.get(SYNCED_ANNOTATION)).items()
            if baseline and baseline == fingerprint]


def runs_with(annotations: Mapping[str, str], ref: SourceRef, written: str | None,
              own_record: bool, fingerprint: int = 0) -> tuple[str | None, bool]:
    """The hash a workload runs with for ``ref`` by its records, and whether a sync brought it:
    the ``synced-sources`` entry while it holds for ``written`` (what its sink wrote in the pod
    template) and the template ``fingerprint``, else ``written`` when that is the sink's own
    per-source record (``own_record``: a live sink; a git digest covers every source and names
    none). ``(None, False)``: unknown."""
    synced = synced_hash(annotations, ref, written, fingerprint)
    if synced is not None:
        return synced, True
    return (written if own_record else None), False


def with_synced(annotations: Mapping[str, str],
                synced: Iterable[tuple[SourceRef, str, str | None, int]]) -> str | None:
    """The annotation's new text: ``synced`` entries ``(ref, hash, recorded, baseline)`` added to
    (or replacing) those it holds."""
    entries = parse(annotations.get(SYNCED_ANNOTATION))
    for ref, value, recorded, baseline in synced:
        entries[source_id(ref)] = (value, record_digest(recorded), baseline)
    return render(entries)


def with_snapshot(annotations: Mapping[str, str], entries: Iterable[tuple[SourceRef, str, str | None]],
                  recorded: Iterable[SourceRef]) -> dict[str, str | None]:
    """The metadata annotation a live write sets (empty: unchanged): ``entries`` ``(ref, hash,
    record after the write)`` for the sources whose hash the sink's record will not hold, and
    no entry for the ``recorded`` ones (the write's own record says what their pods run)."""
    current = parse(annotations.get(SYNCED_ANNOTATION))
    updated = {k: v for k, v in current.items() if k not in {source_id(ref) for ref in recorded}}
    for ref, value, after in entries:
        updated[source_id(ref)] = (value, record_digest(after), 0)
    if updated == current:
        return {}
    return {SYNCED_ANNOTATION: render(updated)}


def needs_restart(synced: str | None, target: str) -> bool:
    """Whether the pods run data a sync brought (``synced``) other than ``target``: then the
    write must restart them even where the sink's record already reads ``target`` (a source
    returned to the data its record held before the sync)."""
    return synced is not None and synced != target
