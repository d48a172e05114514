"""syncs.py: which template changes are a sync's, and the synced-sources annotation."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
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


def test_a_template_change_is_after_a_source_change_by_resource_version_first() -> None:
    change = syncs.TemplateChange(resource_version=120, seen=5.0)
    assert change.after("110", detected=9.0)  # seen first, written later: the write order wins
    assert not change.after("130", detected=1.0)
    assert not change.after("120", detected=1.0)  # the same write cannot be both


def test_without_comparable_versions_the_order_seen_decides() -> None:
    assert syncs.TemplateChange(None, seen=5.0).after("110", detected=4.0)
    assert not syncs.TemplateChange(None, seen=5.0).after("110", detected=6.0)
    assert syncs.TemplateChange(120, seen=5.0).after("not-a-number", detected=4.0)
    assert not syncs.TemplateChange(120, seen=5.0).after("", detected=None)


def test_a_synced_entry_holds_while_the_sinks_record_is_the_one_it_was_made_with() -> None:
    text = syncs.with_synced({}, [(CM, "h1", "recorded-v0")])
    assert text is not None and text.startswith("ConfigMap/app-config=h1@")
    annotations = {syncs.SYNCED_ANNOTATION: text}
    assert syncs.synced_hash(annotations, CM, "recorded-v0") == "h1"
    assert syncs.synced_hash(annotations, CM, "recorded-v2") is None  # the controller wrote since
    assert syncs.synced_hash(annotations, SECRET, "recorded-v0") is None
    assert syncs.synced_hash({}, CM, "recorded-v0") is None


def test_no_record_at_all_is_a_record_too() -> None:
    annotations = {syncs.SYNCED_ANNOTATION: syncs.with_synced({}, [(CM, "h1", None)]) or ""}
    assert syncs.synced_hash(annotations, CM, None) == "h1"
    assert syncs.synced_hash(annotations, CM, "") == "h1"
    assert syncs.synced_hash(annotations, CM, "now-one") is None


def test_entries_are_added_replaced_and_dropped() -> None:
    first = {syncs.SYNCED_ANNOTATION: syncs.with_synced({}, [(CM, "h1", "a")]) or ""}
    both = {syncs.SYNCED_ANNOTATION: syncs.with_synced(first, [(SECRET, "h2", "b"), (CM, "h3", "a")]) or ""}
    assert syncs.synced_hash(both, CM, "a") == "h3" and syncs.synced_hash(both, SECRET, "b") == "h2"
    assert syncs.dropped(both, [SourceRef(SourceKind.CONFIGMAP, "ns", "other")]) == {}
    left = {syncs.SYNCED_ANNOTATION: syncs.dropped(both, [CM])[syncs.SYNCED_ANNOTATION] or ""}
    assert syncs.synced_hash(left, SECRET, "b") == "h2" and syncs.synced_hash(left, CM, "a") is None
    assert syncs.dropped(first, [CM]) == {syncs.SYNCED_ANNOTATION: None}  # the last one: removed


@pytest.mark.parametrize("text", ["", "garbage", "=x@y", "ConfigMap/a=@y", "ConfigMap/a=h", ";;;",
                                  "x" * (syncs.MAX_TEXT + 1)])
def test_malformed_or_oversized_annotations_hold_nothing(text: str) -> None:
    assert syncs.parse(text) == {}


def test_parsing_is_bounded_in_entries() -> None:
    text = ";".join(f"ConfigMap/c{i}=h@r" for i in range(syncs.MAX_ENTRIES + 50))
    assert len(syncs.parse(text)) == syncs.MAX_ENTRIES


@given(st.text(max_size=300))
def test_any_tenant_text_parses_without_error(text: str) -> None:
    for ident, (value, recorded) in syncs.parse(text).items():
        assert ident and value and recorded


def test_a_restart_is_needed_only_when_the_pods_run_other_synced_data() -> None:
    assert syncs.needs_restart("h1", "h0")
    assert not syncs.needs_restart("h1", "h1")
    assert not syncs.needs_restart(None, "h0")
