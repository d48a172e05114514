"""The failure book and its ConfigMap encoding: bounded, tolerant, restorable."""

from __future__ import annotations

import json

from gitops_reloader.control.failures import MAX_RECORD_BYTES, FailureBook, decode, encode
from gitops_reloader.control.retrypolicy import FailureClass


def record(book: FailureBook, key: str = "shop/Deployment/web", *, now: float = 1000.0,
           failure: FailureClass = FailureClass.TRANSIENT):
    return book.record(key, sink="git", reason="GitError", failure=failure, error="host down",
                       workloads={key: ["ConfigMap/app"]}, now=now, delay=2.0)


def test_attempts_grow_and_the_first_failure_time_is_kept() -> None:
    book = FailureBook()
    first = record(book, now=1000.0)
    second = record(book, now=1010.0)
    assert (first.attempts, second.attempts) == (1, 2)
    assert second.since == 1000.0 and second.next_try == 1012.0
    assert book.counts() == {("git", "GitError"): 1}
    assert book.clear("shop/Deployment/web") == second
    assert book.clear("shop/Deployment/web") is None and book.counts() == {}


def test_person_failures_are_listed_for_an_immediate_retry() -> None:
    book = FailureBook()
    record(book, "a/Deployment/x", failure=FailureClass.NEEDS_PERSON)
    record(book, "a/Deployment/y")
    assert book.waiting_for_a_person() == ["a/Deployment/x"]
    assert book.workload_keys() == {"a/Deployment/x", "a/Deployment/y"}


def test_encode_then_decode_restores_every_entry() -> None:
    book = FailureBook()
    record(book, "a/Deployment/x")
    record(book, "batch|repo", failure=FailureClass.NEEDS_PERSON)
    book.mark_raised("batch|repo")
    restored = decode(encode(book.failing()))
    assert restored == book.failing()
    other = FailureBook()
    other.restore(restored)
    assert other.failing() == book.failing()


def test_encoding_stays_within_its_bound_and_counts_what_it_left_out() -> None:
    book = FailureBook()
    for i in range(6000):
        book.record(f"ns/Deployment/w{i:05d}", sink="env-vars", reason="ServerError",
                    failure=FailureClass.TRANSIENT, error="e" * 300,
                    workloads={f"ns/Deployment/w{i:05d}": [f"ConfigMap/c{j}" for j in range(5)]},
                    now=float(i), delay=1.0)
    data = encode(book.failing())
    text = data["failures.json"]
    assert len(text.encode()) <= MAX_RECORD_BYTES
    parsed = json.loads(text)
    kept = decode(data)
    assert kept[0].key == "ns/Deployment/w00000"  # the oldest are kept whole
    assert kept[0].workloads
    assert len(parsed["failures"]) + parsed["truncated"] == 6000


def test_decode_skips_what_is_malformed_and_never_raises() -> None:
    assert decode({}) == []
    assert decode({"failures.json": "{not json"}) == []
    assert decode({"failures.json": "x" * (3 * MAX_RECORD_BYTES)}) == []
    good = json.loads(encode([record(FailureBook())])["failures.json"])["failures"][0]
    items = [good, {"key": 1}, "text", {**good, "class": "bogus"}, {**good, "workloads": {"k": "notalist"}}]
    decoded = decode({"failures.json": json.dumps({"failures": items})})
    assert [f.key for f in decoded] == ["shop/Deployment/web", "shop/Deployment/web"]
    assert decoded[1].workloads == {}


def test_a_source_is_named_beside_its_workload_and_read_back() -> None:
    from gitops_reloader.model import SourceKind, SourceRef

    ref = SourceRef(SourceKind.SECRET, "shop", "db-creds")
    assert ref.local_id == "Secret/db-creds"
    assert SourceRef.from_local_id("shop", ref.local_id) == ref
    assert SourceRef.from_local_id("shop", "Pod/x") is None
    assert SourceRef.from_local_id("shop", "ConfigMap/") is None
