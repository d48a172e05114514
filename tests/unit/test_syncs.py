"""syncs.py: which template changes are a sync's, and the synced-sources annotation."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gitops_reloader import syncs
from gitops_reloader.model import CONFIG_HASH_KEY, LAST_RELOADED_FROM, SourceKind, SourceRef

CM = SourceRef(SourceKind.CONFIGMAP, "ns", "app-config")
SECRET = SourceRef(SourceKind.SECRET, "ns", "db")


def template(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "metadata": {"labels": {"app": "web"}, "annotations": {"owner": "team-a"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.26",
                                 "env": [{"name": "MODE", "value": "prod"}]}],
                 "initContainers": [{"name": "init", "image": "busybox"}]},
    }
    for path, value in changes.items():
        node = base
        *parents, leaf = path.split("__")
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[leaf] = value
    return base


def test_the_controllers_own_fields_leave_the_fingerprint_alone() -> None:
    before = template()
    after = copy.deepcopy(before)
    after["spec"]["containers"][0]["env"].append({"name": "STAKATER_APP_CONFIG_CONFIGMAP", "value": "ab"})
    after["spec"]["initContainers"][0]["env"] = [{"name": "STAKATER_DB_SECRET", "value": "cd"}]
    after["metadata"]["annotations"].update({LAST_RELOADED_FROM: "{}", CONFIG_HASH_KEY: "ef",
                                             syncs.RESTARTED_AT: "2026-11-28T00:00:00Z"})
    assert syncs.template_fingerprint(after) == syncs.template_fingerprint(before)


@pytest.mark.parametrize("change", [
    {"spec__containers__0__image": "nginx:1.27"},
    {"metadata__annotations": {"owner": "team-b"}},
    {"metadata__annotations": {"owner": "team-a", "kubectl.kubernetes.io/restartedAt": "now"}},
    {"spec__containers__0__env": [{"name": "MODE", "value": "dev"}]},
    {"spec__initContainers__0__image": "busybox:2"},
])
def test_anyone_elses_template_change_moves_the_fingerprint(change: dict[str, Any]) -> None:
    assert syncs.template_fingerprint(template(**change)) != syncs.template_fingerprint(template())


def test_no_template_has_no_fingerprint() -> None:
    assert syncs.template_fingerprint(None) == 0
    assert syncs.template_fingerprint({"spec": {}}) != 0


def test_the_baseline_is_the_template_before_a_change_written_after_the_source() -> None:
    change = syncs.TemplateChange(resource_version=120, before=111)
    assert change.baseline("110", current=222) == 111  # seen first, written later: the write order wins
    assert change.baseline("130", current=222) == 222  # written before the source changed
    assert change.baseline("120", current=222) == 222  # the same write cannot be both


def test_without_comparable_versions_the_template_seen_at_the_change_is_the_baseline() -> None:
    assert syncs.TemplateChange(None, before=111).baseline("110", current=222) == 222
    assert syncs.TemplateChange(120, before=111).baseline("not-a-number", current=222) == 222


@pytest.mark.parametrize(("baseline", "current", "rolled"), [
    (111, 222, True),  # a new template: new pods, a sync
    (111, 111, False),  # changed and changed back (rollout undo, self-heal): the old pods stay
    (0, 222, False),  # the baseline is unknown: never a sync
    (111, 0, False),
])
def test_pods_were_replaced_only_when_the_template_differs_from_the_baseline(
        baseline: int, current: int, rolled: bool) -> None:
    assert syncs.rolled_since(baseline, current) is rolled


def test_a_synced_entry_holds_while_the_sinks_record_is_the_one_it_was_made_with() -> None:
    text = syncs.with_synced({}, [(CM, "h1", "recorded-v0", 0)])
    assert text is not None and text.startswith("ConfigMap/app-config=h1@")
    annotations = {syncs.SYNCED_ANNOTATION: text}
    assert syncs.synced_hash(annotations, CM, "recorded-v0") == "h1"
    assert syncs.synced_hash(annotations, CM, "recorded-v2") is None  # the controller wrote since
    assert syncs.synced_hash(annotations, SECRET, "recorded-v0") is None
    assert syncs.synced_hash({}, CM, "recorded-v0") is None


def test_no_record_at_all_is_a_record_too() -> None:
    annotations = {syncs.SYNCED_ANNOTATION: syncs.with_synced({}, [(CM, "h1", None, 0)]) or ""}
    assert syncs.synced_hash(annotations, CM, None) == "h1"
    assert syncs.synced_hash(annotations, CM, "") == "h1"
    assert syncs.synced_hash(annotations, CM, "now-one") is None


def test_entries_are_added_replaced_and_dropped() -> None:
    first = {syncs.SYNCED_ANNOTATION: syncs.with_synced({}, [(CM, "h1", "a", 0)]) or ""}
    added = [(SECRET, "h2", "b", 0), (CM, "h3", "a", 0)]
    both = {syncs.SYNCED_ANNOTATION: syncs.with_synced(first, added) or ""}
    assert syncs.synced_hash(both, CM, "a") == "h3" and syncs.synced_hash(both, SECRET, "b") == "h2"
    assert syncs.with_snapshot(both, [], [SourceRef(SourceKind.CONFIGMAP, "ns", "other")]) == {}
    left = {syncs.SYNCED_ANNOTATION: syncs.with_snapshot(both, [], [CM])[syncs.SYNCED_ANNOTATION] or ""}
    assert syncs.synced_hash(left, SECRET, "b") == "h2" and syncs.synced_hash(left, CM, "a") is None
    assert syncs.with_snapshot(first, [], [CM]) == {syncs.SYNCED_ANNOTATION: None}  # the last one: removed


def test_a_sync_is_undone_when_the_template_is_back_at_the_one_before_it() -> None:
    annotations = {syncs.SYNCED_ANNOTATION: syncs.with_synced({}, [(CM, "h1", "rec", 0xABC)]) or ""}
    assert annotations[syncs.SYNCED_ANNOTATION].endswith("~abc")
    assert syncs.synced_hash(annotations, CM, "rec", fingerprint=0xDEF) == "h1"  # a later template
    assert syncs.synced_hash(annotations, CM, "rec", fingerprint=0xABC) is None  # rolled back
    assert syncs.undone(annotations, 0xABC) == ["ConfigMap/app-config"]
    assert syncs.undone(annotations, 0xDEF) == []
    assert syncs.parse("ConfigMap/x=h@r~notahex") == {"ConfigMap/x": ("h", "r", 0)}


def test_a_live_write_snapshots_what_its_pods_start_with_for_sources_it_does_not_record() -> None:
    written = syncs.with_snapshot({}, [(SECRET, "h2", None)], [CM])
    annotations = {syncs.SYNCED_ANNOTATION: written[syncs.SYNCED_ANNOTATION] or ""}
    assert syncs.synced_hash(annotations, SECRET, None) == "h2"  # no record of its own: the snapshot says
    assert syncs.synced_hash(annotations, CM, "h1") is None
    assert syncs.with_snapshot(annotations, [(SECRET, "h2", None)], [CM]) == {}  # unchanged: not written


@pytest.mark.parametrize("text", ["", "garbage", "=x@y", "ConfigMap/a=@y", "ConfigMap/a=h", ";;;",
                                  "x" * (syncs.MAX_TEXT + 1)])
def test_malformed_or_oversized_annotations_hold_nothing(text: str) -> None:
    assert syncs.parse(text) == {}


def test_parsing_is_bounded_in_entries() -> None:
    text = ";".join(f"ConfigMap/c{i}=h@r" for i in range(syncs.MAX_ENTRIES + 50))
    assert len(syncs.parse(text)) == syncs.MAX_ENTRIES


@given(st.text(max_size=300))
@example("0=0@0")  # an entry: the test unpacked two fields of three and failed only when one came
@example("ConfigMap/a=h@r~ff;Secret/b=h@r~zz")
def test_any_tenant_text_parses_without_error(text: str) -> None:
    for ident, (value, recorded, baseline) in syncs.parse(text).items():
        assert ident and value and recorded and 0 <= baseline < 16 ** 16


def test_a_restart_is_needed_only_when_the_pods_run_other_synced_data() -> None:
    assert syncs.needs_restart("h1", "h0")
    assert not syncs.needs_restart("h1", "h1")
    assert not syncs.needs_restart(None, "h0")
