"""ChangeDetector alone: which deltas are changes."""

from __future__ import annotations

from gitops_reloader.control.changes import Change, ChangeDetector
from gitops_reloader.model import SourceKind, SourceMeta, SourceRef

REF = SourceRef(SourceKind.CONFIGMAP, "ns", "app")
OTHER = SourceRef(SourceKind.SECRET, "ns", "creds")


def meta(data_hash: str, ref: SourceRef = REF, rv: str = "1") -> SourceMeta:
    return SourceMeta(ref, data_hash, resource_version=rv)


def detector(*, create: bool = False, delete: bool = False, limit: int = 10_000) -> ChangeDetector:
    return ChangeDetector(reload_on_create=create, reload_on_delete=delete, limit=limit)


def test_an_update_is_a_change_only_when_the_data_differs() -> None:
    changes = detector()
    assert changes.changes(meta("a"), meta("a", rv="2")) == []  # metadata-only update
    assert changes.changes(meta("a"), meta("b", rv="2")) == [Change(meta("b", rv="2"))]


def test_a_change_carries_what_came_before_it_for_key_level_reload() -> None:
    changes = detector(create=True, delete=True)
    [update] = changes.changes(meta("a"), meta("b", rv="2"))
    assert update.previous == meta("a")
    gone = SourceRef(SourceKind.CONFIGMAP, "ns", "gone")
    [created] = changes.changes(None, meta("c", ref=gone))
    assert created.previous == SourceMeta(gone)  # nothing before a creation: every key appears
    [deleted] = changes.changes(meta("c", ref=gone), None)
    assert deleted.deleted and deleted.previous == meta("c", ref=gone)  # every key it had disappears
    [recreated] = changes.changes(None, meta("d", ref=gone))
    assert recreated.previous is None  # only a tombstone is left: unknown


def test_a_secret_change_is_seen_through_its_fingerprint_even_without_a_hash() -> None:
    old = SourceMeta(OTHER, "", fingerprint="f1")
    new = SourceMeta(OTHER, "", fingerprint="f2")
    assert detector().changes(old, new) == [Change(new)]
    assert detector().changes(old, SourceMeta(OTHER, "", fingerprint="f1", resource_version="9")) == []


def test_creations_and_deletions_count_only_when_asked() -> None:
    quiet = detector()
    assert quiet.changes(None, meta("a")) == []
    assert quiet.changes(meta("a"), None) == []
    loud = detector(create=True, delete=True)
    assert loud.changes(None, meta("a")) == [Change(meta("a"))]
    assert loud.changes(meta("a"), None) == [Change(meta("a"), deleted=True)]


def test_delete_then_recreate_is_a_change_only_with_other_data() -> None:
    changes = detector()
    changes.changes(meta("a"), None)
    assert changes.changes(None, meta("a", rv="5")) == []  # same data back: nothing to do
    changes.changes(meta("a", rv="5"), None)
    assert changes.changes(None, meta("b", rv="7")) == [Change(meta("b", rv="7"))]
    assert changes.changes(None, meta("c", rv="8")) == []  # the tombstone was used up


def test_tombstones_are_bounded_oldest_first() -> None:
    changes = detector(limit=2)
    refs = [SourceRef(SourceKind.CONFIGMAP, "ns", f"cm-{i}") for i in range(3)]
    for ref in refs:
        changes.changes(meta("a", ref), None)
    assert changes.changes(None, meta("b", refs[0])) == []  # evicted: looks like a creation
    assert changes.changes(None, meta("b", refs[2])) == [Change(meta("b", refs[2]))]
