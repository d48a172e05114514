"""The ledger alone: what is owed stays until discharged, one rule for when it is due, and its
record is bounded, tolerant and restorable (pure: no I/O, times passed in)."""

from __future__ import annotations

import json
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitops_reloader.ledger import (
    MAX_RECORD_BYTES,
    Entry,
    Failure,
    FailureClass,
    Hold,
    Ledger,
    PendingSource,
    Wait,
    decode,
    due,
    encode,
)
from gitops_reloader.model import SourceKind, SourceMeta, SourceRef, resource_version_number

REF = SourceRef(SourceKind.CONFIGMAP, "ns", "app")
OTHER = SourceRef(SourceKind.SECRET, "ns", "creds")
WEB = "ns/Deployment/web"


def change(ref: SourceRef = REF, version: str = "10", *, resync: bool = False,
           baseline: int = 0) -> PendingSource:
    return PendingSource(SourceMeta(ref, hash="ab" * 20, resource_version=version), resync=resync,
                         detected=None if resync else 1.0, baseline=baseline)


def fail(ledger: Ledger, key: str = WEB, *, now: float = 1000.0, delay: float = 2.0,
         failure: FailureClass = FailureClass.TRANSIENT, workloads: tuple[str, ...] | None = None) -> Failure:
    recorded = ledger.fail(key, workloads or (key,), sink="git", reason="GitError", failure=failure,
                           error="host down", now=now, delay=delay)
    assert recorded is not None
    return recorded


# --- what is owed ------------------------------------------------------------------


def test_owed_sources_keep_the_order_of_change_and_the_newest_change() -> None:
    ledger = Ledger()
    ledger.owe(WEB, {REF: change(version="10")})
    ledger.owe(WEB, {OTHER: change(OTHER, "11")})
    ledger.owe(WEB, {REF: change(version="12")})
    assert list(ledger.take(WEB)) == [OTHER, REF]
    assert ledger.take(WEB)[REF].meta.resource_version == "12"


def test_taking_leaves_the_entry_owed_until_it_is_discharged() -> None:
    ledger = Ledger()
    ledger.owe(WEB, {REF: change()})
    taken = ledger.take(WEB)
    assert ledger.keys() == {WEB} and ledger.sources() == {REF}  # in flight is still owed
    assert ledger.discharge(WEB, taken) is None
    assert ledger.keys() == set() and ledger.take(WEB) == {}


def test_a_change_that_arrives_in_flight_is_not_discharged_with_the_one_taken() -> None:
    ledger = Ledger()
    ledger.owe(WEB, {REF: change(version="10")})
    taken = ledger.take(WEB)
    ledger.owe(WEB, {REF: change(version="11")})  # a newer change while the emission runs
    ledger.discharge(WEB, taken)
    assert ledger.take(WEB)[REF].meta.resource_version == "11"


def test_a_check_never_replaces_a_change_and_keep_never_replaces_anything() -> None:
    ledger = Ledger()
    ledger.owe(WEB, {REF: change(version="10")})
    ledger.owe(WEB, {REF: change(version="11", resync=True)})
    assert not ledger.take(WEB)[REF].resync
    ledger.owe(WEB, {REF: change(version="12")}, keep=True)
    assert ledger.take(WEB)[REF].meta.resource_version == "10"


def test_discharging_the_last_source_returns_the_failure_it_had() -> None:
    ledger = Ledger()
    ledger.owe(WEB, {REF: change(), OTHER: change(OTHER)})
    failure = fail(ledger)
    assert ledger.discharge(WEB, {REF: ledger.take(WEB)[REF]}) is None  # one source still owed
    assert ledger.entry(WEB).failure == failure  # type: ignore[union-attr]
    assert ledger.discharge(WEB, ledger.take(WEB)) == failure
    assert ledger.counts() == {}


def test_a_batch_group_hands_out_each_member_sorted_and_indexes_them() -> None:
    ledger = Ledger()
    for name in ("b", "a", "c"):
        ledger.owe(f"ns/Deployment/{name}", {REF: change()}, group="batch|repo")
    ledger.owe(WEB, {REF: change()})
    assert list(ledger.take_group("batch|repo")) == ["ns/Deployment/a", "ns/Deployment/b", "ns/Deployment/c"]
    assert ledger.members("batch|repo") == ["ns/Deployment/a", "ns/Deployment/b", "ns/Deployment/c"]
    assert ledger.queue_keys() == {"batch|repo", WEB}
    ledger.drop("ns/Deployment/a")
    assert ledger.members("batch|repo") == ["ns/Deployment/b", "ns/Deployment/c"]


def test_the_ledger_is_safe_across_threads() -> None:
    ledger = Ledger()

    def add(i: int) -> None:
        for j in range(200):
            key = f"ns/Deployment/w{j % 10}"
            ledger.owe(key, {SourceRef(SourceKind.CONFIGMAP, "ns", f"c{i}"): change()})
            ledger.discharge(key, ledger.take(key))

    threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(ledger.take(key) for key in sorted(ledger.keys()))
    assert all(ledger.members(k) for k in ledger.queue_keys())


def test_a_late_template_change_rebases_the_changes_made_after_it() -> None:
    ledger = Ledger()
    ledger.owe(WEB, {REF: change(version="20", baseline=111), OTHER: change(OTHER, "5", baseline=111)})
    ledger.rebase(WEB, 15, 222, resource_version_number)  # made at 15, delivered after both
    owed = ledger.take(WEB)
    assert owed[REF].baseline == 222  # changed after it: the template then was the new one
    assert owed[OTHER].baseline == 111


# --- why it waits and when it is due ----------------------------------------------------


@pytest.mark.parametrize(("entry", "expected"), [
    (Entry(WEB), 100.0),
    (Entry(WEB, hold=Hold(Wait.COALESCING, 102.0)), 102.0),
    (Entry(WEB, hold=Hold(Wait.WINDOW, 500.0, "nightly")), 500.0),
    (Entry(WEB, hold=Hold(Wait.BRAKE, 130.0, "workload")), 130.0),
    (Entry(WEB, hold=Hold(Wait.BUDGET, None)), None),
    (Entry(WEB, failure=Failure(WEB, "git", "GitError", FailureClass.TRANSIENT, 90, 3, 104.0, "")), 104.0),
    # a window outranks the next try of a failure; once it is open, the failure's time decides
    (Entry(WEB, hold=Hold(Wait.WINDOW, 500.0), failure=Failure(
        WEB, "git", "GitError", FailureClass.TRANSIENT, 90, 3, 104.0, "")), 500.0),
    (Entry(WEB, hold=Hold(Wait.COALESCING, 90.0), failure=Failure(
        WEB, "git", "GitError", FailureClass.TRANSIENT, 90, 3, 104.0, "")), 104.0),
])
def test_due_is_one_rule_for_every_reason(entry: Entry, expected: float | None) -> None:
    assert due(entry, 100.0) == expected


def test_ending_the_coalescing_window_keeps_a_newer_changes_window() -> None:
    ledger = Ledger()
    ledger.owe(WEB, {REF: change()}, hold=Hold(Wait.COALESCING, 102.0))
    ledger.end_coalescing(WEB, 101.0)  # a newer change's window, recorded after the run took the entry
    assert ledger.entry(WEB).hold == Hold(Wait.COALESCING, 102.0)  # type: ignore[union-attr]
    ledger.end_coalescing(WEB, 102.0)
    assert ledger.entry(WEB).hold is None  # type: ignore[union-attr]


def test_a_new_change_replaces_a_coalescing_hold_and_brings_a_window_forward_keeping_its_reason() -> None:
    ledger = Ledger()
    ledger.owe(WEB, {REF: change()}, hold=Hold(Wait.COALESCING, 102.0))
    ledger.owe(WEB, {REF: change()}, hold=Hold(Wait.COALESCING, 104.0))
    assert ledger.entry(WEB).hold == Hold(Wait.COALESCING, 104.0)  # type: ignore[union-attr]
    ledger.hold(WEB, Hold(Wait.WINDOW, 900.0, "nightly"))
    assert ledger.due_of(WEB, 100.0) == 900.0
    ledger.owe(WEB, {OTHER: change(OTHER)}, hold=Hold(Wait.COALESCING, 106.0))  # looked at again then
    assert ledger.entry(WEB).hold == Hold(Wait.WINDOW, 106.0, "nightly")  # type: ignore[union-attr]
    assert ledger.reasons() == {"window": 1}
    ledger.hold(WEB, Hold(Wait.BUDGET, None))
    ledger.owe(WEB, {REF: change()}, hold=Hold(Wait.COALESCING, 108.0))
    assert ledger.due_of(WEB, 100.0) == 108.0


def test_a_group_is_due_when_its_earliest_member_is() -> None:
    ledger = Ledger()
    ledger.owe("ns/Deployment/a", {REF: change()}, group="batch|r", hold=Hold(Wait.WINDOW, 900.0))
    ledger.owe("ns/Deployment/b", {REF: change()}, group="batch|r", hold=Hold(Wait.COALESCING, 102.0))
    ledger.owe("ns/Deployment/c", {REF: change()}, group="batch|q", hold=Hold(Wait.BUDGET, None))
    assert ledger.due_of("batch|r", 100.0) == 102.0
    assert ledger.due_of("batch|q", 100.0) is None
    assert ledger.due_of("batch|none", 100.0) is None


# --- failures ------------------------------------------------------------------------


def test_attempts_grow_and_the_first_failure_time_is_kept() -> None:
    ledger = Ledger()
    ledger.owe(WEB, {REF: change()})
    first, second = fail(ledger, now=1000.0), fail(ledger, now=1010.0)
    assert (first.attempts, second.attempts) == (1, 2)
    assert second.since == 1000.0 and second.next_try == 1012.0
    assert ledger.counts() == {("git", "GitError"): 1}
    assert ledger.failure(WEB) == second


def test_a_group_failure_is_recorded_on_every_member_and_counted_once() -> None:
    ledger = Ledger()
    for name in ("a", "b"):
        ledger.owe(f"ns/Deployment/{name}", {REF: change()}, group="batch|repo")
    fail(ledger, "batch|repo", workloads=("ns/Deployment/a", "ns/Deployment/b"))
    ledger.mark_raised("batch|repo")
    [(failure, workloads)] = ledger.failures()
    assert failure.key == "batch|repo" and failure.raised
    assert workloads == ["ns/Deployment/a", "ns/Deployment/b"]
    assert ledger.counts() == {("git", "GitError"): 1}


def test_a_failure_of_nobody_owing_anything_is_not_recorded() -> None:
    assert Ledger().fail(WEB, [WEB], sink="git", reason="x", failure=FailureClass.TRANSIENT, error="",
                         now=1.0, delay=1.0) is None


def test_an_infinite_delay_never_makes_an_infinite_next_try() -> None:
    ledger = Ledger()
    ledger.owe(WEB, {REF: change()})
    failure = fail(ledger, delay=float("inf"))
    assert failure.next_try == 1000.0
    json.loads(encode(ledger.entries())["ledger.json"])  # encodes; no OverflowError


# --- the record ------------------------------------------------------------------------


def test_encode_then_decode_restores_every_entry_as_recorded() -> None:
    ledger = Ledger()
    ledger.owe(WEB, {REF: change(version="10", baseline=0xABC)}, hold=Hold(Wait.WINDOW, 900.0, "nightly"))
    ledger.owe("ns/Deployment/git", {OTHER: change(OTHER, "11")}, group="batch|repo")
    ledger.owe("ns/Deployment/check", {OTHER: change(OTHER, "11", resync=True)}, group="batch|repo")
    fail(ledger, "batch|repo", workloads=("ns/Deployment/git",), failure=FailureClass.NEEDS_PERSON)
    restored = {e.workload: e for e in decode(encode(ledger.entries()))}
    web, git = restored[WEB], restored["ns/Deployment/git"]
    assert web.hold == Hold(Wait.WINDOW, 900.0, "nightly")
    assert web.owes[REF].baseline == 0xABC and web.owes[REF].meta.resource_version == "10"
    assert git.group == "batch|repo" and not git.owes[OTHER].resync
    assert git.failure == ledger.failure("batch|repo")
    assert "ns/Deployment/check" not in restored  # a check owes nothing: not recorded
    other = Ledger()
    assert other.restore(restored.values()) == 2
    assert other.members("batch|repo") == ["ns/Deployment/git"]


def test_restore_keeps_our_newer_changes() -> None:
    ledger = Ledger()
    ledger.owe(WEB, {REF: change(version="30")})
    earlier = {REF: change(version="10"), OTHER: change(OTHER, "9")}
    ledger.restore([Entry(WEB, earlier, hold=Hold(Wait.BRAKE, 5.0))])
    owed = ledger.take(WEB)
    assert owed[REF].meta.resource_version == "30" and OTHER in owed
    assert ledger.entry(WEB).hold == Hold(Wait.BRAKE, 5.0)  # type: ignore[union-attr]


def test_encoding_stays_within_its_bound_failing_entries_first() -> None:
    ledger = Ledger()
    for i in range(6000):
        key = f"ns/Deployment/w{i:05d}"
        ledger.owe(key, {SourceRef(SourceKind.CONFIGMAP, "ns", f"c{j}"): change() for j in range(5)})
        if i % 2:
            ledger.fail(key, [key], sink="env-vars", reason="ServerError", failure=FailureClass.TRANSIENT,
                        error="e" * 300, now=float(i), delay=1.0)
    data = encode(ledger.entries())
    text = data["ledger.json"]
    assert len(text.encode()) <= MAX_RECORD_BYTES
    parsed = json.loads(text)
    kept = decode(data)
    assert kept[0].workload == "ns/Deployment/w00001" and kept[0].failure is not None  # the oldest failure
    assert len(parsed["entries"]) + parsed["truncated"] + sum(c["n"] for c in parsed["shared"]) == 6000
    assert parsed["shared"][0]["n"] == 3000  # the same change owed alike: recorded once


def test_decode_skips_what_is_malformed_and_never_raises() -> None:
    ledger = Ledger()
    ledger.owe(WEB, {REF: change()})
    fail(ledger)
    good = json.loads(encode(ledger.entries())["ledger.json"])["entries"][0]
    items = [good, {"w": 1}, "text", {**good, "hold": {"why": "bogus"}}, {**good, "owes": {"Pod/x": {}}},
             {**good, "fail": {**good["fail"], "since": "inf"}}, {**good, "owes": "ConfigMap/app"}]
    decoded = decode({"ledger.json": json.dumps({"entries": items})})
    assert [e.workload for e in decoded] == [WEB] * 3  # a bad hold or time is repaired, not the entry lost
    assert decoded[1].hold is None and decoded[2].failure.since == 0.0  # type: ignore[union-attr]
    assert decode({}) == [] and decode({"ledger.json": "{not json"}) == []
    assert decode({"ledger.json": "x" * (3 * MAX_RECORD_BYTES)}) == []


def test_the_failure_record_written_before_the_ledger_is_read_as_entries() -> None:
    legacy = {"failures": [{"key": "batch|repo", "sink": "git", "reason": "GitError", "class": "transient",
                            "since": 900, "attempts": 4, "next": 1000, "raised": True, "error": "down",
                            "workloads": {WEB: ["ConfigMap/app"], "ns/Deployment/api": ["Secret/creds"]}}]}
    entries = {e.workload: e for e in decode({"failures.json": json.dumps(legacy)})}
    assert set(entries) == {WEB, "ns/Deployment/api"}
    assert entries[WEB].group == "batch|repo" and entries[WEB].failure.attempts == 4  # type: ignore[union-attr]
    assert list(entries["ns/Deployment/api"].owes) == [OTHER]


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                max_size=4), max_leaves=20)


@given(st.dictionaries(st.sampled_from(["ledger.json", "failures.json", "other"]), JSON.map(json.dumps)))
def test_decode_never_raises_on_any_json(data: dict[str, str]) -> None:
    decode(data)
