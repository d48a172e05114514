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

__all__ = ["LONG_WAITS", "MAX_DETAIL_CHARS", "MAX_RECORD_BYTES", "Entry", "Failure", "FailureClass", "Hold",
           "Ledger", "PendingSource", "Record", "SharedChange", "Wait", "decode", "due", "encode",
           "encode_counted", "read_record"]

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
        self._failing: set[str] = set()
        """The workload keys whose entry has a failure (the gauge is read after every run of a
        queue key: it must not walk a fan-out of 50,000 entries each time)."""
        self.version = 0

    def _put(self, entry: Entry) -> None:
        """Store ``entry`` and index it under its queue key (the lock held)."""
        old = self._entries.get(entry.workload)
        if old is not None and old.queue_key != entry.queue_key:
            self._unindex(old)
        self._entries[entry.workload] = entry
        self._queued.setdefault(entry.queue_key, set()).add(entry.workload)
        if entry.failure is not None:
            self._failing.add(entry.workload)
        else:
            self._failing.discard(entry.workload)
        self.version += 1

    def _remove(self, key: str) -> Entry | None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._unindex(entry)
            self._failing.discard(key)
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
            for entry in [self._entries[k] for k in self._failing]:
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
            for key in sorted(self._failing):
                entry = self._entries[key]
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

SHARE_AT = 8
"""This many readers or more owing the same change with the same wait are recorded once."""
MAX_AHEAD = 8 * 24 * 3600.0
"""A recorded time further ahead than this is capped (a week's brake, a weekly window, a day more)."""
LATEST_TIME = 4_102_444_800.0
"""2100-01-01: the cap of a time read without a clock."""
MAX_ATTEMPTS = 1_000_000
MAX_KEY_CHARS = 400


@dataclass(frozen=True, slots=True)
class SharedChange:
    """A change many readers owe alike (same sources at the same versions, same wait), recorded
    once: which readers still owe it is read from the cluster when it is restored
    (:func:`gitops_reloader.control.restore.readers_of`), so the record grows with what changed,
    not with how many read it."""

    owes: Mapping[SourceRef, PendingSource]
    hold: Hold | None
    readers: int
    seen: float = 0.0
    """Wall-clock seconds the oldest of these changes was seen (0: unknown)."""


@dataclass(frozen=True, slots=True)
class Record:
    """What one ledger record holds, read back."""

    entries: list[Entry]
    shared: list[SharedChange] = field(default_factory=list)
    skipped: int = 0
    """Items that could not be read (malformed, out of bounds): logged and counted by the store."""
    truncated: int = 0
    """Entries the writer could not fit (it said so when it wrote)."""


def _owes_dict(owes: Mapping[SourceRef, PendingSource]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for ref, item in owes.items():
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


def _hold_dict(hold: Hold, *, whole: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"why": hold.why.value}
    if hold.until is not None:
        out["until"] = int(_finite(hold.until, 0))
    if whole and hold.detail:
        out["detail"] = hold.detail[:MAX_DETAIL_CHARS]
    if hold.quiet:
        out["quiet"] = 1
    return out


def _as_dict(entry: Entry, *, whole: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"w": entry.workload, "owes": _owes_dict(entry.owes) if whole else sorted(
        ref.local_id for ref in entry.owes)}
    if entry.group:
        out["q"] = entry.group
    if entry.hold is not None:
        out["hold"] = _hold_dict(entry.hold, whole=whole)
    failure = entry.failure
    if failure is not None:
        out["fail"] = {"key": failure.key, "sink": failure.sink, "reason": failure.reason,
                       "class": failure.failure.value, "since": int(_finite(failure.since, 0)),
                       "attempts": failure.attempts, "next": int(_finite(failure.next_try, 0)),
                       "raised": failure.raised, **({"error": failure.error} if whole else {})}
    return out


def _share(entries: Iterable[Entry]) -> tuple[list[list[Entry]], list[Entry]]:
    """Entries owing the same change with the same wait (no failure, no group, no race or
    delete: nothing of their own to keep), in groups of :data:`SHARE_AT` or more; the rest."""
    groups: dict[Any, list[Entry]] = {}
    single: list[Entry] = []
    for entry in entries:
        if entry.failure is not None or entry.group or any(p.deleted or p.raced for p in entry.owes.values()):
            single.append(entry)
            continue
        hold = entry.hold
        wait = None if hold is None else (hold.why, int(_finite(hold.until or 0, 0)), hold.detail, hold.quiet)
        key = (frozenset((ref, p.meta.resource_version, p.resync) for ref, p in entry.owes.items()), wait)
        groups.setdefault(key, []).append(entry)
    shared = [members for members in groups.values() if len(members) >= SHARE_AT]
    single.extend(e for members in groups.values() if len(members) < SHARE_AT for e in members)
    return shared, single


def _shared_dict(members: list[Entry], wall_of: Callable[[float], float] | None) -> dict[str, Any]:
    first = members[0]
    detected = [p.detected for e in members for p in e.owes.values() if p.detected is not None]
    owes = {ref: replace(p, baseline=0) for ref, p in first.owes.items()}
    out: dict[str, Any] = {"ns": next(iter(owes)).namespace, "owes": _owes_dict(owes), "n": len(members)}
    if first.hold is not None:
        out["hold"] = _hold_dict(first.hold, whole=True)
    if wall_of is not None and detected:
        out["t"] = int(_finite(wall_of(min(detected)), 0))
    return out


def encode(entries: Iterable[Entry], *, limit: int = MAX_RECORD_BYTES,
           wall_of: Callable[[float], float] | None = None) -> dict[str, str]:
    """ConfigMap data for ``entries`` (:func:`encode_counted`'s, without the count)."""
    return encode_counted(entries, limit=limit, wall_of=wall_of)[0]


def encode_counted(entries: Iterable[Entry], *, limit: int = MAX_RECORD_BYTES,
                   wall_of: Callable[[float], float] | None = None) -> tuple[dict[str, str], int]:
    """ConfigMap data for ``entries``, within ``limit`` bytes, and how many entries it could
    not hold (:attr:`Record.truncated`). A change owed alike by
    :data:`SHARE_AT` readers or more is one item (:class:`SharedChange`; ``wall_of`` turns a
    monotonic time into wall-clock seconds, for when it was seen); the other entries follow,
    failing ones first (oldest first), then held ones, then the rest — whole while they fit, then
    only the sources' names, then counted as ``truncated`` (:attr:`Record.truncated`: the store
    says so). A check of the slow resync owes nothing and is not recorded."""
    shared, single = _share(e for e in entries if not e.check_only)
    ordered = sorted(single, key=lambda e: (
        e.failure is None, e.failure.since if e.failure else 0, e.hold is None, e.workload))
    size, truncated = 64, 0
    changes: list[dict[str, Any]] = []
    for members in shared:
        item = _shared_dict(members, wall_of)
        cost = len(json.dumps(item, separators=(",", ":")).encode()) + 1
        if size + cost <= limit:
            changes.append(item)
            size += cost
        else:
            truncated += len(members)
    items: list[dict[str, Any]] = []
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
    record: dict[str, Any] = {"v": 3, "entries": items, "truncated": truncated}
    if changes:
        record["shared"] = changes
    return {RECORD_KEY: json.dumps(record, separators=(",", ":"))}, truncated


def decode(data: Mapping[str, Any], *, now: float | None = None) -> list[Entry]:
    """The entries in ConfigMap ``data`` (:func:`read_record`'s, without the shared changes)."""
    return read_record(data, now=now).entries


def read_record(data: Mapping[str, Any], *, now: float | None = None) -> Record:
    """What ConfigMap ``data`` holds (the ledger, or the failure record it replaced), each owed
    source as recorded (its name and resourceVersion: the restore puts its current state in).

    The record is untrusted input (people edit ConfigMaps): nothing here raises. A value that is
    not what it should be (``1e999``, an integer of 400 digits, a string, a list) is replaced by a
    safe default — a hold or a retry asked again now, a failure counted from now — so what an
    entry owes is never lost for a bad time; an entry whose workload or sources cannot be read is
    skipped. Both are counted in :attr:`Record.skipped`. Every time is capped at ``now`` plus
    :data:`MAX_AHEAD` (a hold far ahead ends then, not never), every count and text is bounded."""
    reader = _Reader(now)
    try:
        return reader.read(data)
    except Exception:  # e.g. RecursionError from a deeply nested document
        return Record([], skipped=reader.repaired + 1)


class _Reader:
    """One read of a record: its clock, its bound, and what it had to repair or skip."""

    def __init__(self, now: float | None) -> None:
        self.now = 0.0 if now is None else now
        self.horizon = LATEST_TIME if now is None else now + MAX_AHEAD
        self.repaired = 0

    def read(self, data: Mapping[str, Any]) -> Record:
        text = data.get(RECORD_KEY)
        legacy = text is None
        if legacy:
            text = data.get(LEGACY_KEY)
        if text is None:
            return Record([])
        if not isinstance(text, str) or len(text) > 2 * MAX_RECORD_BYTES:
            return Record([], skipped=1)
        try:
            parsed = json.loads(text)
        except ValueError:
            return Record([], skipped=1)
        if not isinstance(parsed, dict):
            return Record([], skipped=1)
        entries: list[Entry] = []
        shared: list[SharedChange] = []
        for name, read, out in (("failures" if legacy else "entries", self.legacy if legacy else self.entry,
                                 entries), ("shared", self.shared, shared)):
            items = parsed.get(name)
            if items is not None and not isinstance(items, list):
                self.repaired += 1
                continue
            for item in items or ():
                try:
                    out.extend(read(item))  # type: ignore[operator]
                except Exception:  # an entry whose workload or sources cannot be read: skipped
                    self.repaired += 1
        truncated = int(self.number(parsed.get("truncated", 0), 0, MAX_ATTEMPTS, 0))
        return Record(entries, shared, self.repaired, truncated)

    def entry(self, item: Any) -> list[Entry]:
        workload = _key(item["w"])
        owes = _owes(workload.split("/", 1)[0], item.get("owes") or {})
        if not owes:
            raise ValueError("owes nothing")
        group = item.get("q", "")
        if not isinstance(group, str) or len(group) > MAX_KEY_CHARS:
            group = self.fix("")
        return [Entry(workload, owes, group, self.hold(item.get("hold")),
                      self.failure(item.get("fail"), workload))]

    def shared(self, item: Any) -> list[SharedChange]:
        owes = _owes(_key(item["ns"]), item["owes"])
        if not owes:
            raise ValueError("owes nothing")
        readers = int(self.number(item.get("n", 0), 0, MAX_ATTEMPTS, 0))
        return [SharedChange(owes, self.hold(item.get("hold")), readers,
                             self.number(item.get("t", 0), 0, self.horizon, 0))]

    def legacy(self, item: Any) -> list[Entry]:
        """One failure of the record written before the ledger → an entry per workload it named."""
        failure = self.failure(item, _key(item["key"]))
        out = []
        for workload, source_ids in (item.get("workloads") or {}).items():
            key = _key(workload)
            owes = _owes(key.split("/", 1)[0], source_ids if isinstance(source_ids, list) else [])
            if owes:
                group = failure.key if failure is not None and failure.key != key else ""
                out.append(Entry(key, owes, group, None, failure))
        return out

    def hold(self, raw: Any) -> Hold | None:
        """A recorded hold; a malformed one is no hold (due now), a bad time is asked again now."""
        if raw is None:
            return None
        try:
            why = Wait(raw["why"])
        except (TypeError, KeyError, ValueError):
            return self.fix(None)
        until = raw.get("until")
        if until is not None:
            until = self.number(until, 0, self.horizon, RECHECK)
        elif why is not Wait.BUDGET:
            until = RECHECK  # only the budget waits for an event: anything else is asked again now
        detail = raw.get("detail", "")
        return Hold(why, until, detail[:MAX_DETAIL_CHARS] if isinstance(detail, str) else self.fix(""),
                    bool(raw.get("quiet")))

    def failure(self, raw: Any, workload: str) -> Failure | None:
        """A recorded failure; a malformed one is none (the next try finds out again), a bad time
        or count is replaced: since now, the next try now, one attempt."""
        if raw is None:
            return None
        try:
            kind = FailureClass(raw["class"])
            sink, reason = _text(raw["sink"])[:64], _text(raw["reason"])[:64]
        except (TypeError, KeyError, ValueError):
            return self.fix(None)
        key = raw.get("key", workload)
        error = raw.get("error", "")
        return Failure(
            key=key if isinstance(key, str) and 0 < len(key) <= MAX_KEY_CHARS else self.fix(workload),
            sink=sink, reason=reason, failure=kind,
            since=self.number(raw.get("since"), 0, self.horizon, self.now),
            attempts=int(self.number(raw.get("attempts"), 0, MAX_ATTEMPTS, 1)),
            next_try=self.number(raw.get("next"), 0, self.horizon, RECHECK),
            error=error[:MAX_ERROR_CHARS] if isinstance(error, str) else self.fix(""),
            raised=bool(raw.get("raised", False)))

    def number(self, value: Any, low: float, high: float, default: float) -> float:
        """A JSON number as a float within [low, high] (capped); ``default`` (counted) for anything
        else: a bool, a string, an integer too large for a float, infinity, NaN."""
        if isinstance(value, bool) or not isinstance(value, int | float) or (
                isinstance(value, int) and not -(10 ** 18) < value < 10 ** 18) or not math.isfinite(value):
            return self.fix(default)
        return min(max(float(value), low), high)

    def fix(self, default: Any) -> Any:
        """``default`` in place of a value that could not be read as written (counted)."""
        self.repaired += 1
        return default


RECHECK = 0.0
"""A time that makes a hold or a retry due at once (its reason is asked again)."""


def _owes(namespace: str, raw: Any) -> dict[SourceRef, PendingSource]:
    listed = raw if isinstance(raw, dict) else {name: {} for name in raw if isinstance(name, str)}
    owes = {}
    for local_id, fields in list(listed.items())[:MAX_OWED]:
        source = _pending(namespace, _text(local_id), fields if isinstance(fields, dict) else {})
        if source is not None:
            owes[source.meta.ref] = source
    return owes


def _pending(namespace: str, local_id: str, fields: Mapping[str, Any]) -> PendingSource | None:
    ref = SourceRef.from_local_id(namespace, local_id[:MAX_KEY_CHARS])
    if ref is None:
        return None
    try:
        baseline = int(str(fields["fp"])[:16], 16) if fields.get("fp") else 0
    except ValueError:
        baseline = 0  # unknown: never taken for a sync
    return PendingSource(SourceMeta(ref, resource_version=str(fields.get("v", ""))[:32]),
                         deleted=bool(fields.get("d")), resync=bool(fields.get("r")), baseline=baseline,
                         raced=bool(fields.get("x")))


def _key(value: Any) -> str:
    """A queue or workload key: text of bounded length."""
    text = _text(value)
    if not text or len(text) > MAX_KEY_CHARS:
        raise ValueError("not a key")
    return text


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value
