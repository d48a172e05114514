"""The emissions that are failing, each until it succeeds: what ``status`` and a restart read.

:class:`FailureBook` keeps, per queue key (a workload, or a batch group of one repository),
one :class:`Failure`: since when it fails, how many attempts, when the next one is due, the
last error (redacted, short), its class and reason, and the workloads and sources waiting on
it. The controller records every failed attempt and clears the entry on success; nothing
here decides a delay (:mod:`.retrypolicy`) or does I/O (:mod:`.failurestore` writes the book
to a ConfigMap, so that a restart or a new leader continues what was failing).

:func:`encode` / :func:`decode` turn the book into ConfigMap data and back. Both are bounded:
the encoded record stays under :data:`MAX_RECORD_BYTES` (the oldest failures are kept whole;
past the bound only their keys are kept, and past that they are counted as ``truncated`` —
the slow resync still repairs those); a record read back larger than that, or not of the
expected shape, is ignored entry by entry, never trusted to crash the controller.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gitops_reloader.control.retrypolicy import FailureClass

__all__ = ["MAX_RECORD_BYTES", "Failure", "FailureBook", "decode", "encode"]

MAX_RECORD_BYTES = 512 * 1024
"""The encoded book's bound (a ConfigMap holds 1 MiB)."""
MAX_ERROR_CHARS = 300
RECORD_KEY = "failures.json"


@dataclass(frozen=True, slots=True)
class Failure:
    """One failing emission (times are wall-clock Unix seconds)."""

    key: str
    sink: str
    reason: str
    failure: FailureClass
    since: float
    attempts: int
    next_try: float
    error: str
    workloads: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Workload key → the sources (``ConfigMap/name``) its reload waits for."""
    raised: bool = False
    """``--max-retries`` attempts were reached and reported."""


class FailureBook:
    """Failing emissions by queue key (thread-safe); ``version`` grows with every change."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: dict[str, Failure] = {}
        self.version = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._failures)

    def record(self, key: str, *, sink: str, reason: str, failure: FailureClass, error: str,
               workloads: Mapping[str, Iterable[str]], now: float, delay: float) -> Failure:
        """One more failed attempt of ``key``; returns its entry after the attempt."""
        with self._lock:
            old = self._failures.get(key)
            entry = Failure(key, sink, reason, failure, old.since if old is not None else now,
                            (old.attempts if old is not None else 0) + 1, now + delay,
                            error[:MAX_ERROR_CHARS],
                            {k: tuple(v) for k, v in workloads.items()} or
                            (dict(old.workloads) if old is not None else {}),
                            old.raised if old is not None else False)
            self._failures[key] = entry
            self.version += 1
            return entry

    def mark_raised(self, key: str) -> None:
        with self._lock:
            entry = self._failures.get(key)
            if entry is not None and not entry.raised:
                self._failures[key] = replace(entry, raised=True)
                self.version += 1

    def clear(self, key: str) -> Failure | None:
        """``key`` succeeded (or has nothing left to emit): its entry, if it was failing."""
        with self._lock:
            entry = self._failures.pop(key, None)
            if entry is not None:
                self.version += 1
            return entry

    def get(self, key: str) -> Failure | None:
        with self._lock:
            return self._failures.get(key)

    def failing(self) -> list[Failure]:
        """Every entry, oldest failure first."""
        with self._lock:
            return sorted(self._failures.values(), key=lambda f: (f.since, f.key))

    def waiting_for_a_person(self) -> list[str]:
        """Keys whose failure only a person can fix (retried at once when an input changes)."""
        with self._lock:
            return [k for k, f in self._failures.items() if f.failure is FailureClass.NEEDS_PERSON]

    def workload_keys(self) -> set[str]:
        """Every workload some failing emission waits for."""
        with self._lock:
            return {w for f in self._failures.values() for w in f.workloads}

    def restore(self, failures: Iterable[Failure]) -> None:
        """Entries an earlier instance recorded (on becoming active); ours win on a clash."""
        with self._lock:
            for entry in failures:
                self._failures.setdefault(entry.key, entry)
            self.version += 1

    def counts(self) -> dict[tuple[str, str], int]:
        """(sink, reason) → failing emissions, for the gauge."""
        out: dict[tuple[str, str], int] = {}
        with self._lock:
            for entry in self._failures.values():
                out[(entry.sink, entry.reason)] = out.get((entry.sink, entry.reason), 0) + 1
        return out


def _as_dict(entry: Failure, *, whole: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"key": entry.key, "sink": entry.sink, "reason": entry.reason,
                           "class": entry.failure.value, "since": int(entry.since),
                           "attempts": entry.attempts, "next": int(entry.next_try), "raised": entry.raised}
    if whole:
        out["error"] = entry.error
        out["workloads"] = {k: list(v) for k, v in entry.workloads.items()}
    return out


def encode(failures: Iterable[Failure], *, limit: int = MAX_RECORD_BYTES) -> dict[str, str]:
    """ConfigMap data for ``failures`` (oldest first), within ``limit`` bytes."""
    entries: list[dict[str, Any]] = []
    size, truncated = 64, 0
    for entry in failures:
        for whole in (True, False):
            item = _as_dict(entry, whole=whole)
            cost = len(json.dumps(item, separators=(",", ":")).encode()) + 1
            if size + cost <= limit:
                entries.append(item)
                size += cost
                break
        else:
            truncated += 1
    return {RECORD_KEY: json.dumps({"failures": entries, "truncated": truncated}, separators=(",", ":"))}


def decode(data: Mapping[str, Any]) -> list[Failure]:
    """The failures in ConfigMap ``data``; anything malformed or oversized is skipped."""
    text = data.get(RECORD_KEY)
    if not isinstance(text, str) or len(text) > 2 * MAX_RECORD_BYTES:
        return []
    try:
        parsed = json.loads(text)
    except ValueError:
        return []
    items = parsed.get("failures") if isinstance(parsed, dict) else None
    out: list[Failure] = []
    for item in items if isinstance(items, list) else []:
        entry = _entry(item)
        if entry is not None:
            out.append(entry)
    return out


def _entry(item: Any) -> Failure | None:
    if not isinstance(item, dict):
        return None
    try:
        workloads = item.get("workloads") or {}
        return Failure(
            key=_text(item["key"]), sink=_text(item["sink"]), reason=_text(item["reason"]),
            failure=FailureClass(item["class"]), since=float(item["since"]),
            attempts=int(item["attempts"]), next_try=float(item["next"]),
            error=_text(item.get("error", ""))[:MAX_ERROR_CHARS],
            workloads={_text(k): tuple(_text(s) for s in v) for k, v in workloads.items()
                       if isinstance(v, list)},
            raised=bool(item.get("raised", False)))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value
