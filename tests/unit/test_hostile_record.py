"""The ledger record is untrusted input: people edit ConfigMaps by hand (issue 45, item 4).

Property-based: arbitrary JSON, and arbitrary mutations of records the controller really writes
(a value replaced by a huge integer, ``1e999``, a string, a nested document...), read back by
:func:`~gitops_reloader.ledger.read_record`: it never raises, every time it returns is finite and
capped, every count bounded, and what it skipped is counted.
"""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitops_reloader.ledger import (
    MAX_AHEAD,
    RECORD_KEY,
    Entry,
    FailureClass,
    Hold,
    Ledger,
    PendingSource,
    Wait,
    encode,
    read_record,
)
from gitops_reloader.model import SourceKind, SourceMeta, SourceRef

NOW = 1_700_000_000.0
EXAMPLES = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def real_record() -> dict[str, Any]:
    """A record as the controller writes it: single entries of every kind and a shared change."""
    ledger = Ledger()
    for i in range(10):  # one change read by ten, held by a window: recorded once
        ledger.owe(f"ns/Deployment/r{i}", {SourceRef(SourceKind.CONFIGMAP, "ns", "shared"): PendingSource(
            SourceMeta(SourceRef(SourceKind.CONFIGMAP, "ns", "shared"), resource_version="7"), detected=5.0)},
            hold=Hold(Wait.WINDOW, NOW + 3600, "early"))
    ref = SourceRef(SourceKind.SECRET, "ns", "creds")
    meta = SourceMeta(ref, resource_version="9")
    ledger.owe("ns/Deployment/web", {ref: PendingSource(meta, baseline=0xABC)},
               hold=Hold(Wait.BRAKE, NOW + 60, "workload"))
    ledger.owe("ns/Deployment/git", {ref: PendingSource(meta)}, group="batch|r")
    ledger.fail("batch|r", ["ns/Deployment/git"], sink="git", reason="GitError",
                failure=FailureClass.TRANSIENT, error="host down", now=NOW, delay=30)
    return json.loads(encode(ledger.entries(), wall_of=lambda mono: NOW - 10)[RECORD_KEY])


HOSTILE = st.one_of(
    st.integers(min_value=-(10 ** 400), max_value=10 ** 400),
    st.sampled_from([1e308, -1e308, 10 ** 400, -1, 0, True, None, "", "inf", "1e999", [], {}, "x" * 5000]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.recursive(st.none() | st.integers() | st.text(max_size=5),
                 lambda inner: st.lists(inner, max_size=3)
                 | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                 max_leaves=10),
)
"""What a hand edit may leave where a value was."""


def paths(document: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``document``."""
    out = [prefix]
    if isinstance(document, dict):
        for key, value in document.items():
            out.extend(paths(value, (*prefix, key)))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            out.extend(paths(value, (*prefix, index)))
    return out


def mutated(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = json.loads(json.dumps(document))
    target = copy
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return copy


def dumps(document: Any) -> str:
    """JSON as a hand edit may leave it: integers of any size, ``Infinity`` and ``NaN`` included."""
    return json.dumps(document, allow_nan=True)


def assert_bounded(entries: list[Entry]) -> None:
    for entry in entries:
        assert entry.workload and len(entry.workload) <= 400
        if entry.hold is not None and entry.hold.until is not None:
            assert math.isfinite(entry.hold.until) and 0 <= entry.hold.until <= NOW + MAX_AHEAD
        if entry.failure is not None:
            for when in (entry.failure.since, entry.failure.next_try):
                assert math.isfinite(when) and 0 <= when <= NOW + MAX_AHEAD
            assert 0 <= entry.failure.attempts <= 1_000_000


@EXAMPLES
@given(st.data())
def test_record_mutated_anywhere_is_read_without_raising_and_within_bounds(data: st.DataObject) -> None:
    record = real_record()
    path = data.draw(st.sampled_from(paths(record)))
    value = data.draw(HOSTILE)
    document = mutated(record, path, value)
    decoded = read_record({RECORD_KEY: dumps(document)}, now=NOW)
    assert_bounded(decoded.entries)
    for change in decoded.shared:
        assert 0 <= change.seen <= NOW + MAX_AHEAD and 0 <= change.readers <= 1_000_000
        if change.hold is not None and change.hold.until is not None:
            assert 0 <= change.hold.until <= NOW + MAX_AHEAD
    if isinstance(document, dict):  # every item is read back or counted as skipped: none in silence
        items = sum(len(document[k]) for k in ("entries", "shared") if isinstance(document.get(k), list))
        assert len(decoded.entries) + len(decoded.shared) + decoded.skipped >= items
    else:
        assert decoded.skipped == 1


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                max_size=4), max_leaves=20)


@EXAMPLES
@given(st.dictionaries(st.sampled_from(["ledger.json", "failures.json", "other"]), JSON.map(dumps)))
def test_record_of_arbitrary_json_is_read_without_raising(data: dict[str, str]) -> None:
    assert_bounded(read_record(data, now=NOW).entries)


def test_record_values_a_person_may_type_are_capped_or_skipped_and_counted() -> None:
    """The reviewer's cases: ``since`` of 400 digits, ``attempts: 1e999``, ``until: 1e999`` are
    each replaced by a safe default and counted — the entry and what it owes are kept — and an
    ``until`` years ahead is capped, not eternal."""
    record = real_record()
    entries = record["entries"]
    failing = next(e for e in entries if "fail" in e)
    braked = next(e for e in entries if e.get("hold", {}).get("why") == "brake")
    text = json.dumps({**record, "entries": [
        {**failing, "fail": {**failing["fail"], "since": 10 ** 400}},
        {**failing, "w": "ns/Deployment/b", "fail": {**failing["fail"], "attempts": 1e999}},
        {**braked, "w": "ns/Deployment/c", "hold": {**braked["hold"], "until": 1e999}},
        {**braked, "w": "ns/Deployment/d", "hold": {**braked["hold"], "until": NOW + 10 * 365 * 86400}},
        {**braked, "w": "ns/Deployment/e", "hold": {"why": "window"}},
    ]}, allow_nan=True)
    decoded = read_record({RECORD_KEY: text}, now=NOW)
    assert decoded.skipped == 3
    assert len(decoded.entries) == 5
    failing = {e.workload: e.failure for e in decoded.entries if e.failure is not None}
    assert failing["ns/Deployment/git"].since == NOW  # type: ignore[union-attr]  # counted from now
    assert failing["ns/Deployment/b"].attempts == 1  # type: ignore[union-attr]
    held = {e.workload: e.hold for e in decoded.entries}
    assert held["ns/Deployment/c"].until == 0.0  # type: ignore[union-attr]  # asked again now
    assert held["ns/Deployment/d"].until == NOW + MAX_AHEAD  # type: ignore[union-attr]
    assert held["ns/Deployment/e"].until == 0.0  # type: ignore[union-attr]  # no time: asked again now
    assert decoded.shared[0].readers == 10
