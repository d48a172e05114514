"""Key-level reload: the keys a pod spec uses (index.extract_refs), the per-key digests and
the used-key hash (hashing.py), and the mode and change rules (usedkeys.py)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from gitops_reloader.hashing import (
    KEYS_NOT_TRACKED,
    MAX_TRACKED_KEYS,
    configmap_hash,
    every_key_changed,
    key_digests,
    used_key_hash,
)
from gitops_reloader.index import extract_refs
from gitops_reloader.model import PodRefs, ReloadOn, SourceKind, SourceMeta, SourceRef
from gitops_reloader.usedkeys import key_scope, reload_on, source_hash, touched

CM, SECRET = SourceKind.CONFIGMAP, SourceKind.SECRET
KEY = "gitops-reloader.io/reload-on"


def pod(*containers: dict[str, Any], volumes: list[dict[str, Any]] | None = None,
        init: list[dict[str, Any]] | None = None, ephemeral: list[dict[str, Any]] | None = None,
        ) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers), "volumes": volumes or []}
    if init:
        spec["initContainers"] = init
    if ephemeral:
        spec["ephemeralContainers"] = ephemeral
    return spec


def key_env(field: str, name: str, key: str | None, **extra: Any) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": name, **extra}
    if key is not None:
        ref["key"] = key
    return {"name": "V", "valueFrom": {field: ref}}


def mount(volume: str, sub_path: str | None = None, expr: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": volume, "mountPath": "/m"}
    if sub_path is not None:
        out["subPath"] = sub_path
    if expr is not None:
        out["subPathExpr"] = expr
    return out


def items(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"key": k, "path": p} for k, p in pairs]


CM_VOL = {"name": "v", "configMap": {"name": "cfg"}}
CM_ITEMS = {"name": "v", "configMap": {"name": "cfg", "items": items(("a", "a.conf"), ("b", "dir/b"))}}
SECRET_ITEMS = {"name": "v", "secret": {"secretName": "cfg", "items": items(("tls.crt", "crt"))}}
PROJECTED_ITEMS = {"name": "v", "projected": {"sources": [
    {"configMap": {"name": "cfg", "items": items(("a", "a"))}},
    {"secret": {"name": "cfg", "items": items(("s", "s"))}},
    {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
]}}
PROJECTED_WHOLE = {"name": "v", "projected": {"sources": [{"configMap": {"name": "cfg"}}]}}


# (why, pod spec, expected ConfigMap "cfg" keys, expected Secret "cfg" keys); None = whole object
SHAPES: list[tuple[str, dict[str, Any], frozenset[str] | None, frozenset[str] | None]] = [
    ("configMapKeyRef", pod({"name": "c", "env": [key_env("configMapKeyRef", "cfg", "a")]}),
     frozenset({"a"}), None),
    ("secretKeyRef", pod({"name": "c", "env": [key_env("secretKeyRef", "cfg", "pw")]}),
     None, frozenset({"pw"})),
    ("two key refs union", pod({"name": "c", "env": [key_env("configMapKeyRef", "cfg", "a"),
                                                    key_env("configMapKeyRef", "cfg", "b")]}),
     frozenset({"a", "b"}), None),
    ("optional key ref still names its key",
     pod({"name": "c", "env": [key_env("configMapKeyRef", "cfg", "a", optional=True)]}),
     frozenset({"a"}), None),
    ("key ref without a key: whole object",
     pod({"name": "c", "env": [key_env("configMapKeyRef", "cfg", None)]}), None, None),
    ("envFrom: whole object",
     pod({"name": "c", "envFrom": [{"configMapRef": {"name": "cfg"}}]}), None, None),
    ("envFrom beats a key ref elsewhere",
     pod({"name": "c", "env": [key_env("configMapKeyRef", "cfg", "a")]},
         {"name": "d", "envFrom": [{"configMapRef": {"name": "cfg"}}]}), None, None),
    ("volume with items", pod({"name": "c", "volumeMounts": [mount("v")]}, volumes=[CM_ITEMS]),
     frozenset({"a", "b"}), None),
    ("unmounted volume with items", pod({"name": "c"}, volumes=[CM_ITEMS]), frozenset({"a", "b"}), None),
    ("secret volume with items", pod({"name": "c", "volumeMounts": [mount("v")]}, volumes=[SECRET_ITEMS]),
     None, frozenset({"tls.crt"})),
    ("projected sources with items",
     pod({"name": "c", "volumeMounts": [mount("v")]}, volumes=[PROJECTED_ITEMS]),
     frozenset({"a"}), frozenset({"s"})),
    ("projected source without items: whole object",
     pod({"name": "c", "volumeMounts": [mount("v")]}, volumes=[PROJECTED_WHOLE]), None, None),
    ("volume without items mounted whole", pod({"name": "c", "volumeMounts": [mount("v")]}, volumes=[CM_VOL]),
     None, None),
    ("volume without items, unmounted", pod({"name": "c"}, volumes=[CM_VOL]), None, None),
    ("subPath into a volume with items: the item it reaches",
     pod({"name": "c", "volumeMounts": [mount("v", "a.conf")]}, volumes=[CM_ITEMS]), frozenset({"a"}), None),
    ("subPath onto a directory of items",
     pod({"name": "c", "volumeMounts": [mount("v", "dir")]}, volumes=[CM_ITEMS]), frozenset({"b"}), None),
    ("subPath reaching no item: no key",
     pod({"name": "c", "volumeMounts": [mount("v", "nothing")]}, volumes=[CM_ITEMS]), frozenset(), None),
    ("subPath into a volume without items names the key",
     pod({"name": "c", "volumeMounts": [mount("v", "a")]}, volumes=[CM_VOL]), frozenset({"a"}), None),
    ("subPath below a key file: its first segment", pod({"name": "c", "volumeMounts": [mount("v", "/a/x/")]},
                                                         volumes=[CM_VOL]), frozenset({"a"}), None),
    ("one subPath mount and one whole mount: whole object",
     pod({"name": "c", "volumeMounts": [mount("v", "a")]}, {"name": "d", "volumeMounts": [mount("v")]},
         volumes=[CM_VOL]), None, None),
    ("subPathExpr: unknown, whole object",
     pod({"name": "c", "volumeMounts": [mount("v", expr="$(POD)")]}, volumes=[CM_VOL]), None, None),
    ("subPathExpr into items: every item",
     pod({"name": "c", "volumeMounts": [mount("v", expr="$(POD)")]}, volumes=[CM_ITEMS]),
     frozenset({"a", "b"}), None),
    ("init container key ref",
     pod({"name": "c"}, init=[{"name": "i", "env": [key_env("configMapKeyRef", "cfg", "a")]}]),
     frozenset({"a"}), None),
    ("init container subPath mount",
     pod({"name": "c"}, init=[{"name": "i", "volumeMounts": [mount("v", "b")]}], volumes=[CM_VOL]),
     frozenset({"b"}), None),
    ("ephemeral container envFrom makes a key-level source whole",
     pod({"name": "c", "env": [key_env("configMapKeyRef", "cfg", "a")]},
         ephemeral=[{"name": "debug", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]), None, None),
    ("ephemeral container key ref joins the keys",
     pod({"name": "c", "env": [key_env("configMapKeyRef", "cfg", "a")]},
         ephemeral=[{"name": "debug", "env": [key_env("configMapKeyRef", "cfg", "z")]}]),
     frozenset({"a", "z"}), None),
    ("key ref plus volume items union",
     pod({"name": "c", "env": [key_env("configMapKeyRef", "cfg", "z")], "volumeMounts": [mount("v")]},
         volumes=[CM_ITEMS]), frozenset({"a", "b", "z"}), None),
]


@pytest.mark.parametrize(("why", "spec", "cm_keys", "secret_keys"), SHAPES, ids=[s[0] for s in SHAPES])
def test_keys_used_for_every_reference_shape(why, spec, cm_keys, secret_keys) -> None:
    refs = extract_refs(spec)
    assert refs.used_keys(CM, "cfg") == cm_keys, why
    assert refs.used_keys(SECRET, "cfg") == secret_keys, why


def test_a_source_only_ephemeral_containers_use_is_no_reference() -> None:
    ephemeral = [{"name": "e", "env": [key_env("configMapKeyRef", "x", "a")]}]
    refs = extract_refs(pod({"name": "c"}, ephemeral=ephemeral))
    assert "x" not in refs.names(CM)
    assert refs.used_keys(CM, "x") is None


def test_equal_key_sets_are_shared_and_key_names_interned() -> None:
    one = extract_refs(pod({"name": "c", "env": [key_env("configMapKeyRef", "cfg", "a" + "b".lower())]}))
    two = extract_refs(pod({"name": "d", "env": [key_env("configMapKeyRef", "other", "ab")]}))
    assert one.used_keys(CM, "cfg") is two.used_keys(CM, "other")


def test_a_pod_without_key_references_keeps_the_empty_tuple() -> None:
    refs = extract_refs(pod({"name": "c", "envFrom": [{"configMapRef": {"name": "cfg"}}]}))
    assert refs.key_uses is PodRefs().key_uses == ()


@pytest.mark.parametrize("spec", [
    {"containers": [{"name": "c", "env": [{"valueFrom": {"configMapKeyRef": "x"}}]}]},
    {"containers": [{"name": "c", "volumeMounts": [None, {"name": 3}]}],
     "volumes": [{"configMap": {"items": 7}}]},
    {"volumes": [{"name": "v", "configMap": {"name": "cfg", "items": [{"path": "p"}, None]}}]},
    {"ephemeralContainers": "x", "containers": None},
])
def test_malformed_key_references_never_raise(spec) -> None:
    extract_refs(spec)


# --- per-key digests and the used-key hash ---------------------------------------------------

def cm(data: dict[str, str], binary: dict[str, str] | None = None) -> bytes:
    return key_digests(CM, {"data": data, "binaryData": binary or {}})


def test_the_used_key_hash_ignores_other_keys_and_insertion_order() -> None:
    base = cm({"a": "1", "b": "2"})
    assert used_key_hash(base, {"a"}) == used_key_hash(cm({"b": "changed", "a": "1"}), {"a"})
    assert used_key_hash(base, {"a"}) != used_key_hash(cm({"a": "2", "b": "2"}), {"a"})
    assert used_key_hash(base, ["a", "a"]) == used_key_hash(base, {"a"})


@pytest.mark.parametrize(("before", "after", "why"), [
    ({"b": "2"}, {"a": "1", "b": "2"}, "a used key appears (an optional reference)"),
    ({"a": "1", "b": "2"}, {"b": "2"}, "a used key disappears"),
    ({"a": ""}, {"a": " "}, "an empty value becomes a space"),
    ({"a": ""}, {}, "an empty value differs from an absent key"),
])
def test_the_used_key_hash_sees_keys_appear_disappear_and_change(before, after, why) -> None:
    assert used_key_hash(cm(before), {"a"}) != used_key_hash(cm(after), {"a"}), why


def test_data_and_binary_data_are_told_apart_and_both_count() -> None:
    assert used_key_hash(cm({"a": "QQ=="}), {"a"}) != used_key_hash(cm({}, {"a": "QQ=="}), {"a"})
    assert used_key_hash(cm({}, {"a": "QQ=="}), {"a"}) != used_key_hash(cm({}, {"a": "Qg=="}), {"a"})


def test_secret_digests_read_base64_text_and_string_data_alike() -> None:
    encoded = base64.b64encode(b"pw").decode()
    from_data = key_digests(SECRET, {"data": {"p": encoded}})
    from_string = key_digests(SECRET, {"stringData": {"p": "pw"}})
    assert from_data == from_string
    other = key_digests(SECRET, {"data": {"p": "cHg="}})
    assert used_key_hash(from_data, {"p"}) != used_key_hash(other, {"p"})


def test_digests_keep_sixteen_bytes_a_key_and_never_the_values() -> None:
    digests = cm({"password": "hunter2", "b": "x"})
    assert len(digests) == 32
    assert b"hunter2" not in digests and b"password" not in digests
    assert cm({}) == b""


def test_too_many_keys_are_not_tracked_and_fall_back_to_the_whole_object() -> None:
    many = {f"k{i}": "v" for i in range(MAX_TRACKED_KEYS + 1)}
    assert cm(many) == KEYS_NOT_TRACKED
    assert used_key_hash(KEYS_NOT_TRACKED, {"k1"}) is None
    meta = SourceMeta(SourceRef(CM, "ns", "cfg"), hash=configmap_hash(many),
                      key_digests=KEYS_NOT_TRACKED)
    assert source_hash(meta, frozenset({"k1"})) == meta.hash
    assert touched(meta, meta, frozenset({"k1"}))


def test_every_key_changed_changes_each_used_key_hash_and_keeps_the_keys() -> None:
    digests = cm({"a": "1", "b": "2"})
    changed = every_key_changed(digests)
    assert len(changed) == len(digests)
    for key in ("a", "b", "missing"):
        same = key == "missing"
        assert (used_key_hash(changed, {key}) == used_key_hash(digests, {key})) is same


# --- usedkeys: mode, scope, recorded value, touched ------------------------------------------

@pytest.mark.parametrize(("workload", "template", "default", "expected"), [
    ({}, {}, ReloadOn.ANY_CHANGE, (ReloadOn.ANY_CHANGE, None)),
    ({}, {}, ReloadOn.USED_KEYS, (ReloadOn.USED_KEYS, None)),
    ({KEY: "used-keys"}, {}, ReloadOn.ANY_CHANGE, (ReloadOn.USED_KEYS, None)),
    ({KEY: " any-change "}, {}, ReloadOn.USED_KEYS, (ReloadOn.ANY_CHANGE, None)),
    ({}, {KEY: "used-keys"}, ReloadOn.ANY_CHANGE, (ReloadOn.USED_KEYS, None)),
    ({KEY: "any-change"}, {KEY: "used-keys"}, ReloadOn.ANY_CHANGE, (ReloadOn.ANY_CHANGE, None)),
    ({KEY: "Used-Keys"}, {}, ReloadOn.ANY_CHANGE, (ReloadOn.ANY_CHANGE, "Used-Keys")),
    ({KEY: "x" * 100}, {}, ReloadOn.USED_KEYS, (ReloadOn.USED_KEYS, "x" * 64 + "…")),
])
def test_reload_on_reads_the_workload_else_the_template(workload, template, default, expected) -> None:
    assert reload_on(workload, template, KEY, default) == expected


def test_the_scope_is_the_used_keys_only_in_used_keys_mode() -> None:
    refs = extract_refs(pod({"name": "c", "env": [key_env("configMapKeyRef", "cfg", "a")],
                             "envFrom": [{"secretRef": {"name": "whole"}}]}))
    ref = SourceRef(CM, "ns", "cfg")
    assert key_scope(ReloadOn.USED_KEYS, refs, ref) == {"a"}
    assert key_scope(ReloadOn.ANY_CHANGE, refs, ref) is None
    assert key_scope(ReloadOn.USED_KEYS, refs, SourceRef(SECRET, "ns", "whole")) is None
    assert key_scope(ReloadOn.USED_KEYS, refs, SourceRef(CM, "ns", "listed-not-referenced")) is None


def meta(data: dict[str, str]) -> SourceMeta:
    return SourceMeta(SourceRef(CM, "ns", "cfg"), hash=configmap_hash(data), key_digests=cm(data))


def test_source_hash_is_stakaters_for_the_whole_object_and_the_used_key_hash_otherwise() -> None:
    current = meta({"a": "1", "b": "2"})
    assert source_hash(current, None) == configmap_hash({"a": "1", "b": "2"})
    assert source_hash(current, frozenset({"a"})) == used_key_hash(current.key_digests, {"a"})


@pytest.mark.parametrize(("before", "after", "keys", "expected"), [
    ({"a": "1", "b": "2"}, {"a": "1", "b": "3"}, frozenset({"a"}), False),
    ({"a": "1", "b": "2"}, {"a": "2", "b": "2"}, frozenset({"a"}), True),
    ({"b": "2"}, {"a": "1", "b": "2"}, frozenset({"a"}), True),
    ({"a": "1", "b": "2"}, {"a": "1", "b": "3"}, None, True),
    ({"a": "1"}, {"a": "1", "c": "new"}, frozenset({"a", "b"}), False),
])
def test_touched(before, after, keys, expected) -> None:
    assert touched(meta(before), meta(after), keys) is expected


def test_an_unknown_before_always_touches_and_a_creation_compares_with_nothing() -> None:
    after = meta({"a": "1"})
    assert touched(None, after, frozenset({"b"}))
    created = SourceMeta(after.ref)
    assert touched(created, after, frozenset({"a"}))
    assert not touched(created, after, frozenset({"b"}))


def test_a_deletion_is_every_key_disappearing() -> None:
    """``--reload-on-delete`` judges a deletion like a change to a source with no keys left."""
    before = meta({"a": "1", "b": "2"})
    gone = SourceMeta(before.ref)
    assert touched(before, gone, frozenset({"a"}))
    assert touched(before, gone, frozenset({"a", "c"}))
    assert not touched(before, gone, frozenset({"c"}))  # an optional key the source never had
    assert touched(before, gone, None)  # used whole
    untracked = SourceMeta(before.ref, hash=before.hash, key_digests=KEYS_NOT_TRACKED)
    assert touched(untracked, gone, frozenset({"c"}))  # no per-key digests: whole-object rule
