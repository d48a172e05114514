"""What the controller owes each workload, why it waits, and when it is next due: one ledger.

An :class:`Entry` per workload key says

- what it **owes**: the sources whose data it must reach (:class:`PendingSource`, the newest
  change of each; a newer change of a source replaces the older one);
- why it **waits**, if it does: a :class:`Hold` — the coalescing window, a closed maintenance
  window, a storm brake, the rollout budget — each until a time (the budget: until a wave
  frees a slot), and a :class:`Failure` when its emission keeps failing (since when, how many
  attempts, its class, the next try);
- the **queue key** it is worked under (its own, or a batch sink's group: one commit per
  repository).

:func:`due` is the one rule for "due now, or when" for every reason. An entry leaves the
ledger only when what it owes is **discharged**: emitted and applied, found already current,
rolled by a sync, or no longer the workload's to reload (the workload or source is gone, the
policy says no). A failed emission, a hold, a crash between the two: the entry stays — so a
held or failing reload cannot be forgotten by the code path that held it, and there is no
"put it back" step to miss. :func:`encode` / :func:`decode` turn the ledger into the data of one
ConfigMap (:mod:`gitops_reloader.state.ledgerstore` writes it), bounded, so a restart or a new
leader continues every entry; reading it is bounded too (it is only ever *compared* again: a
reload is emitted only where the workload's data differs).

Pure: no I/O, no clock of its own (times are passed in: wall-clock seconds, so that they mean
the same after a restart). Thread-safe: every method is atomic under one lock; ``version``
grows with every change (the store writes when it moved).
"""

from __future__ import annotations

import enum
import json
import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gitops_reloader.model import SourceMeta, SourceRef

__all__ = ["LONG_WAITS", "MAX_RECORD_BYTES", "Entry", "Failure", "FailureClass", "Hold", "Ledger",
           "PendingSource", "Wait", "decode", "due", "encode"]

MAX_RECORD_BYTES = 512 * 1024
"""The encoded ledger's bound (a ConfigMap holds 1 MiB)."""
MAX_ERROR_CHARS = 300
MAX_DETAIL_CHARS = 120
MAX_OWED = 256
"""Sources read back per entry at most (a workload reads far fewer)."""
RECORD_KEY = "ledger.json"
LEGACY_KEY = "failures.json"
"""The failure record written before the ledger (read once, for an upgrade)."""


class FailureClass(enum.StrEnum):
    """How a failed emission is retried (:mod:`gitops_reloader.control.retrypolicy`)."""

    RACE = "race"
    TRANSIENT = "transient"
    NEEDS_PERSON = "needs-person"


class Wait(enum.StrEnum):
    """Why an entry waits (besides failing)."""

    COALESCING = "coalescing"
    """The coalescing window after a change (stretched for a source that keeps changing)."""
    WINDOW = "window"
    """A closed maintenance window."""
    BRAKE = "brake"
    """A storm brake: the workload's or the cluster's reload rate."""
    BUDGET = "budget"
    """The rollout budget: a wave frees a slot (no time of its own)."""
    PERSON = "needs-person"
    """An annotation a person must fix (a sink or window name that names none): asked again on
    any annotation change of the workload, and every ``--retry-max-delay``."""


LONG_WAITS = frozenset({Wait.WINDOW, Wait.BRAKE, Wait.PERSON})
"""Waits that a clock or a person ends (an idle controller may have them); an annotation change
of the workload asks each of them again."""


@dataclass(frozen=True, slots=True)
class PendingSource:
    """A changed source a workload owes a reload for (``deleted``: a delete to record)."""

    meta: SourceMeta
    deleted: bool = False
    resync: bool = False
    """A check (the slow resync, a restart): nothing is known to have changed."""
    detected: float | None = None
    """Monotonic time the change was seen (None: a check, not a change)."""
    baseline: int = 0
    """The workload's pod-template fingerprint when the source changed (0: unknown): a template
    that differs from it when the reload is due was changed after the change (a sync); one that
    returned to it was not (:mod:`gitops_reloader.syncs`)."""
    raced: bool = False
    """The source changed while the workload's pods were being replaced (this change or one it
    replaced): pods started meanwhile read data its record does not say, so the write restarts
    them even where the record already reads the target."""


@dataclass(frozen=True, slots=True)
class Hold:
    """Why an entry waits now, until when (wall-clock seconds; None: until an event)."""

    why: Wait
    until: float | None
    detail: str = ""
    """What to say (a window's name, a brake's scope); never tenant text longer than a name."""
    quiet: bool = False
    """A check waiting (nothing known to have changed): not announced, not counted."""


@dataclass(frozen=True, slots=True)
class Failure:
    """One failing emission (times are wall-clock Unix seconds)."""

    key: str
    """The queue key that failed: the workload's, or its batch group's (one commit)."""
    sink: str
    reason: str
    failure: FailureClass
    since: float
    attempts: int
    next_try: float
    error: str
    raised: bool = False
    """``--max-retries`` attempts were reached and reported."""


@dataclass(frozen=True, slots=True)
class Entry:
    """What one workload is owed and why it waits."""

    workload: str
    owes: Mapping[SourceRef, PendingSource] = field(default_factory=dict)
    group: str = ""
    """The queue key it is worked under ("" : its own key)."""
    hold: Hold | None = None
    failure: Failure | None = None

    @property
    def queue_key(self) -> str:
        return self.group or self.workload

    @property
    def check_only(self) -> bool:
        """Whether everything it owes is a check (the resync's): nothing known to have changed."""
        return bool(self.owes) and all(p.resync for p in self.owes.values())


def due(entry: Entry, now: float) -> float | None:
    """When ``entry`` is due (wall-clock seconds; ``now`` or earlier: now), None: on an event.

    A hold decides while it lasts (a window or a brake outranks the next try of a failure:
    trying before it opens would only be held again); then a failure's next try; else now.
    """
    if entry.hold is not None:
        if entry.hold.until is None:
            return None
        if entry.hold.until > now or entry.failure is None:
            return entry.hold.until
    if entry.failure is not None:
        return entry.failure.next_try
    return now


class Ledger:
    """Entries by workload key (thread-safe; see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, Entry] = {}
        self._queued: dict[str, set[str]] = {}
        """Queue key → the workload keys worked under it (an index of ``Entry.queue_key``)."""
        self.version = 0

    def _put(self, entry: Entry) -> None:
        """Store ``entry`` and index it under its queue key (the lock held)."""
        old = self._entries.get(entry.workload)
        if old is not None and old.queue_key != entry.queue_key:
            self._unindex(old)
        self._entries[entry.workload] = entry
        self._queued.setdefault(entry.queue_key, set()).add(entry.workload)
        self.version += 1

    def _remove(self, key: str) -> Entry | None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._unindex(entry)
            self.version += 1
        return entry

    def _unindex(self, entry: Entry) -> None:
        members = self._queued.get(entry.queue_key)
        if members is not None:
            members.discard(entry.workload)
            if not members:
                del self._queued[entry.queue_key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    # --- what is owed ----------------------------------------------------------------

    def owe(self, key: str, sources: Mapping[SourceRef, PendingSource], *, group: str = "",
            hold: Hold | None = None, keep: bool = False) -> None:
        """``key`` owes ``sources`` (a newer change of a source replaces the older one, unless
        ``keep``: then what is already owed stays, e.g. a restored or checked source); ``group``
        is the queue key it is worked under; ``hold`` (the new change's coalescing) replaces a
        coalescing hold, and makes a longer wait of another reason due no later than it."""
        if not sources:
            return
        with self._lock:
            entry = self._entries.get(key) or Entry(key)
            owes = dict(entry.owes)
            for ref, item in sources.items():
                if keep and ref in owes:
                    continue
                if ref in owes and not owes[ref].resync and item.resync:
                    continue  # a check never replaces a change
                replaced = owes.pop(ref, None)  # insertion order = order of change
                owes[ref] = replace(item, raced=True) if replaced is not None and replaced.raced else item
            self._put(replace(entry, owes=owes, group=group or entry.group, hold=_sooner(entry.hold, hold)))

    def take(self, key: str) -> dict[SourceRef, PendingSource]:
        """What workload ``key`` owes now (empty: nothing); the entry stays until discharged."""
        with self._lock:
            entry = self._entries.get(key)
            return dict(entry.owes) if entry is not None else {}

    def take_group(self, group: str) -> dict[str, dict[SourceRef, PendingSource]]:
        """What each workload worked under ``group`` owes, workload keys sorted."""
        with self._lock:
            return {key: dict(self._entries[key].owes) for key in sorted(self._queued.get(group, ()))}

    def discharge(self, key: str, taken: Mapping[SourceRef, PendingSource]) -> Failure | None:
        """``key`` no longer owes ``taken`` (emitted, current, synced, or not its to reload): they
        leave, unless a newer change replaced one meanwhile. When nothing is left the entry
        leaves the ledger; returns its failure then (it failed before and went through now)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            owes = {ref: item for ref, item in entry.owes.items() if taken.get(ref) is not item}
            if owes:
                if len(owes) != len(entry.owes):
                    self._put(replace(entry, owes=owes))
                return None
            self._remove(key)
            return entry.failure

    def drop(self, key: str) -> Entry | None:
        """Forget ``key`` entirely (the workload is gone); its entry as it was."""
        with self._lock:
            return self._remove(key)

    # --- why it waits ----------------------------------------------------------------

    def hold(self, key: str, hold: Hold | None) -> Hold | None:
        """Set (``None``: end) why ``key`` waits; returns the hold it had."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry.hold != hold:
                self._put(replace(entry, hold=hold))
            return entry.hold

    def end_coalescing(self, key: str, now: float) -> None:
        """``key``'s coalescing window is over if it ended by ``now`` (a newer change's window,
        recorded meanwhile, still runs: its change waits for it)."""
        with self._lock:
            entry = self._entries.get(key)
            hold = entry.hold if entry is not None else None
            if entry is not None and hold is not None and hold.why is Wait.COALESCING and (
                    hold.until is None or hold.until <= now):
                self._put(replace(entry, hold=None))

    def held(self, why: Wait | None = None) -> dict[str, Hold]:
        """Workload key → its hold (of reason ``why`` only, when given)."""
        with self._lock:
            return {k: e.hold for k, e in self._entries.items()
                    if e.hold is not None and (why is None or e.hold.why is why)}

    # --- failures --------------------------------------------------------------------

    def fail(self, queue_key: str, workloads: Iterable[str], *, sink: str, reason: str,
             failure: FailureClass, error: str, now: float, delay: float) -> Failure | None:
        """One more failed attempt of ``queue_key`` for ``workloads`` (those still owing); the
        failure as recorded on them (None: none owes anything any more)."""
        with self._lock:
            entries = [self._entries[w] for w in workloads if w in self._entries]
            if not entries:
                return None
            old = next((e.failure for e in entries if e.failure is not None and e.failure.key == queue_key),
                       None) or next((e.failure for e in entries if e.failure is not None), None)
            recorded = Failure(queue_key, sink, reason, failure, old.since if old else now,
                               (old.attempts if old else 0) + 1, _finite(now + delay, now),
                               error[:MAX_ERROR_CHARS], old.raised if old else False)
            for entry in entries:
                self._put(replace(entry, failure=recorded))
            return recorded

    def mark_raised(self, queue_key: str) -> None:
        with self._lock:
            for entry in list(self._entries.values()):
                if entry.failure is not None and entry.failure.key == queue_key and not entry.failure.raised:
                    self._put(replace(entry, failure=replace(entry.failure, raised=True)))

    def failure(self, queue_key: str) -> Failure | None:
        """The failure recorded under ``queue_key`` (a workload's or a group's), if any."""
        with self._lock:
            members = (self._entries[k] for k in self._queued.get(queue_key, ()))
            return next((e.failure for e in members if e.failure is not None and e.failure.key == queue_key),
                        None)

    def failures(self) -> list[tuple[Failure, list[str]]]:
        """Every failing emission with the workloads it holds back, oldest failure first."""
        with self._lock:
            by_key: dict[str, tuple[Failure, list[str]]] = {}
            for key, entry in sorted(self._entries.items()):
                if entry.failure is not None:
                    by_key.setdefault(entry.failure.key, (entry.failure, []))[1].append(key)
            return sorted(by_key.values(), key=lambda item: (item[0].since, item[0].key))

    def counts(self) -> dict[tuple[str, str], int]:
        """(sink, reason) → failing emissions, for the gauge."""
        out: dict[tuple[str, str], int] = {}
        for failure, _ in self.failures():
            out[(failure.sink, failure.reason)] = out.get((failure.sink, failure.reason), 0) + 1
        return out

    # --- reading ---------------------------------------------------------------------

    def reasons(self) -> dict[str, int]:
        """How many entries wait for each reason (its hold, else ``failing``, else ``due``)."""
        out: dict[str, int] = {}
        with self._lock:
            for entry in self._entries.values():
                why = entry.hold.why.value if entry.hold else "failing" if entry.failure else "due"
                out[why] = out.get(why, 0) + 1
        return out

    def entry(self, key: str) -> Entry | None:
        with self._lock:
            return self._entries.get(key)

    def entries(self) -> list[Entry]:
        """Every entry, in workload-key order (a snapshot)."""
        with self._lock:
            return [self._entries[k] for k in sorted(self._entries)]

    def keys(self) -> set[str]:
        """Every workload key that is owed something."""
        with self._lock:
            return set(self._entries)

    def owed(self, key: str) -> set[SourceRef]:
        """The sources workload ``key`` owes."""
        with self._lock:
            entry = self._entries.get(key)
            return set(entry.owes) if entry is not None else set()

    def members(self, queue_key: str) -> list[str]:
        """The workload keys worked under ``queue_key`` (itself, or a group's members)."""
        with self._lock:
            return sorted(self._queued.get(queue_key, ()))

    def sources(self) -> set[SourceRef]:
        """Every source some workload owes a reload for (the state store holds these back)."""
        with self._lock:
            return {ref for entry in self._entries.values() for ref in entry.owes}

    def due_of(self, queue_key: str, now: float) -> float | None:
        """When ``queue_key`` is next due: the earliest of its members (None: none is owed
        anything, or each waits for an event)."""
        with self._lock:
            times = [when for k in self._queued.get(queue_key, ())
                     if (when := due(self._entries[k], now)) is not None]
        return min(times) if times else None

    def queue_keys(self) -> set[str]:
        """Every queue key some workload is worked under."""
        with self._lock:
            return set(self._queued)

    def rebase(self, key: str, version: int, fingerprint: int,
               number: Callable[[str], int | None]) -> None:
        """A template change of ``key`` made at resourceVersion ``version`` arrived late: every
        owed source changed after it (by ``number(resourceVersion)``) had ``fingerprint`` as the
        template in effect when it changed."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            owes = {ref: (replace(item, baseline=fingerprint)
                          if (changed := number(item.meta.resource_version)) is not None and changed > version
                          else item)
                    for ref, item in entry.owes.items()}
            self._put(replace(entry, owes=owes))

    def restore(self, entries: Iterable[Entry]) -> int:
        """Entries an earlier instance recorded (on becoming active); ours win on a clash: a
        source we already owe keeps our newer change. Returns how many were restored."""
        restored = 0
        with self._lock:
            for entry in entries:
                if not entry.owes:
                    continue
                mine = self._entries.get(entry.workload)
                if mine is None:
                    self._put(entry)
                else:
                    self._put(replace(mine, owes={**entry.owes, **mine.owes},
                                      hold=_recorded_first(mine.hold, entry.hold),
                                      failure=mine.failure or entry.failure))
                restored += 1
        return restored


def _sooner(current: Hold | None, new: Hold | None) -> Hold | None:
    """The hold after a new change: a coalescing hold replaces no hold or another coalescing one;
    a longer wait of another reason keeps its reason (what was announced stays announced) but is
    looked at again when the new change is due (a ``reload-now``, a new budget entry)."""
    if new is None or current is None or current.why is Wait.COALESCING:
        return new or current
    if current.until is not None and new.until is not None and current.until <= new.until:
        return current
    return replace(current, until=new.until)


def _recorded_first(mine: Hold | None, recorded: Hold | None) -> Hold | None:
    """A recorded wait (a brake, a window) outranks the coalescing window a start-up check gave
    the same change: the change waited before the restart, and nothing is let through early."""
    if mine is None or (mine.why is Wait.COALESCING and recorded is not None):
        return recorded
    return mine


def _finite(value: float, fallback: float) -> float:
    return value if math.isfinite(value) else fallback


# --- the record ------------------------------------------------------------------------


def _owes_dict(entry: Entry) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for ref, item in entry.owes.items():
        fields: dict[str, Any] = {"v": item.meta.resource_version}
        if item.baseline:
            fields["fp"] = f"{item.baseline:x}"
        if item.deleted:
            fields["d"] = 1
        if item.resync:
            fields["r"] = 1
        if item.raced:
            fields["x"] = 1
        out[ref.local_id] = fields
    return out


def _as_dict(entry: Entry, *, whole: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"w": entry.workload, "owes": _owes_dict(entry) if whole else sorted(
        ref.local_id for ref in entry.owes)}
    if entry.group:
        out["q"] = entry.group
    if entry.hold is not None:
        hold: dict[str, Any] = {"why": entry.hold.why.value}
        if entry.hold.until is not None:
            hold["until"] = int(_finite(entry.hold.until, 0))
        if whole and entry.hold.detail:
            hold["detail"] = entry.hold.detail[:MAX_DETAIL_CHARS]
        if entry.hold.quiet:
            hold["quiet"] = 1
        out["hold"] = hold
    failure = entry.failure
    if failure is not None:
        out["fail"] = {"key": failure.key, "sink": failure.sink, "reason": failure.reason,
                       "class": failure.failure.value, "since": int(_finite(failure.since, 0)),
                       "attempts": failure.attempts, "next": int(_finite(failure.next_try, 0)),
                       "raised": failure.raised, **({"error": failure.error} if whole else {})}
    return out


def encode(entries: Iterable[Entry], *, limit: int = MAX_RECORD_BYTES) -> dict[str, str]:
    """ConfigMap data for ``entries``, within ``limit`` bytes: failing ones first (oldest
    first), then held ones, then the rest; whole while they fit, then only the sources' names,
    then counted as ``truncated`` (the start-up check and the slow resync repair what they can).
    A check of the slow resync owes nothing and is not recorded (the next pass checks again)."""
    ordered = sorted((e for e in entries if not e.check_only), key=lambda e: (
        e.failure is None, e.failure.since if e.failure else 0, e.hold is None, e.workload))
    items: list[dict[str, Any]] = []
    size, truncated = 64, 0
    for entry in ordered:
        for whole in (True, False):
            item = _as_dict(entry, whole=whole)
            cost = len(json.dumps(item, separators=(",", ":")).encode()) + 1
            if size + cost <= limit:
                items.append(item)
                size += cost
                break
        else:
            truncated += 1
    return {RECORD_KEY: json.dumps({"v": 2, "entries": items, "truncated": truncated}, separators=(",", ":"))}


def decode(data: Mapping[str, Any]) -> list[Entry]:
    """The entries in ConfigMap ``data`` (the ledger, or the failure record it replaced), each
    owed source as recorded (its name and resourceVersion: :meth:`Ledger.restore`'s caller puts
    its current state in). Anything malformed or oversized is skipped, entry by entry: the
    record is read as untrusted input."""
    text = data.get(RECORD_KEY)
    legacy = text is None
    if legacy:
        text = data.get(LEGACY_KEY)
    if not isinstance(text, str) or len(text) > 2 * MAX_RECORD_BYTES:
        return []
    try:
        parsed = json.loads(text)
    except ValueError:
        return []
    items = parsed.get("failures" if legacy else "entries") if isinstance(parsed, dict) else None
    out: list[Entry] = []
    for item in items if isinstance(items, list) else []:
        try:
            out.extend(_legacy_entries(item) if legacy else _entry(item))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return out


def _entry(item: Any) -> list[Entry]:
    workload = _text(item["w"])
    namespace = workload.split("/", 1)[0]
    raw = item.get("owes") or {}
    listed = raw if isinstance(raw, dict) else {name: {} for name in raw if isinstance(name, str)}
    owes = {}
    for local_id, fields in list(listed.items())[:MAX_OWED]:
        source = _pending(namespace, _text(local_id), fields if isinstance(fields, dict) else {})
        if source is not None:
            owes[source.meta.ref] = source
    hold = None
    if isinstance(item.get("hold"), dict):
        held = item["hold"]
        until = held.get("until")
        hold = Hold(Wait(held["why"]), float(until) if until is not None else None,
                    _text(held.get("detail", ""))[:MAX_DETAIL_CHARS], bool(held.get("quiet")))
    failure = _failure(item["fail"], workload) if isinstance(item.get("fail"), dict) else None
    return [Entry(workload, owes, _text(item.get("q", "")), hold, failure)] if owes else []


def _pending(namespace: str, local_id: str, fields: Mapping[str, Any]) -> PendingSource | None:
    ref = SourceRef.from_local_id(namespace, local_id)
    if ref is None:
        return None
    baseline = int(str(fields["fp"])[:16], 16) if fields.get("fp") else 0
    return PendingSource(SourceMeta(ref, resource_version=str(fields.get("v", ""))[:32]),
                         deleted=bool(fields.get("d")), resync=bool(fields.get("r")), baseline=baseline,
                         raced=bool(fields.get("x")))


def _failure(item: Mapping[str, Any], workload: str) -> Failure:
    since, next_try = float(item["since"]), float(item["next"])
    if not (math.isfinite(since) and math.isfinite(next_try)):
        raise ValueError("not a time")
    return Failure(
        key=_text(item.get("key", workload)), sink=_text(item["sink"])[:64],
        reason=_text(item["reason"])[:64],
        failure=FailureClass(item["class"]), since=since, attempts=int(item["attempts"]),
        next_try=next_try, error=_text(item.get("error", ""))[:MAX_ERROR_CHARS],
        raised=bool(item.get("raised", False)))


def _legacy_entries(item: Any) -> list[Entry]:
    """One failure of the record written before the ledger → an entry per workload it named."""
    failure = _failure(item, _text(item["key"]))
    out = []
    for workload, source_ids in (item.get("workloads") or {}).items():
        namespace = _text(workload).split("/", 1)[0]
        owes = {}
        for local_id in source_ids if isinstance(source_ids, list) else []:
            source = _pending(namespace, _text(local_id), {})
            if source is not None:
                owes[source.meta.ref] = source
        if owes:
            group = failure.key if failure.key != workload else ""
            out.append(Entry(workload, owes, group, None, failure))
    return out


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value
