"""SourceMeta keeps digests as bytes but reads exactly as the hex-text version did."""

from __future__ import annotations

import copy
import hashlib
import json
import pickle

import pytest

from gitops_reloader.control.caches import source_transform
from gitops_reloader.hashing import configmap_hash, data_fingerprint, key_digests, secret_hash
from gitops_reloader.model import EMPTY_MAP, SourceKind, SourceMeta, SourceRef, resource_version_number

REF = SourceRef(SourceKind.SECRET, "ns", "db")
HASH = "3c9a892aeaedc759abc3df9884a37b8be5680382"
FINGERPRINT = "da39a3ee5e6b4b0d3255bfef95601890afd80709"


def test_hash_and_fingerprint_read_back_as_the_hex_text_given() -> None:
    meta = SourceMeta(REF, HASH, annotations={"a": "b"}, resource_version="7", fingerprint=FINGERPRINT)
    assert (meta.hash, meta.fingerprint, meta.resource_version) == (HASH, FINGERPRINT, "7")
    assert meta.annotations == {"a": "b"}


def test_change_key_is_the_fingerprint_else_the_hash() -> None:
    assert SourceMeta(REF, HASH, fingerprint=FINGERPRINT).change_key == FINGERPRINT
    assert SourceMeta(REF, HASH).change_key == HASH
    assert SourceMeta(REF).change_key == ""


def test_an_uncomputed_hash_stays_empty_text() -> None:
    assert SourceMeta(REF, "", fingerprint=FINGERPRINT).hash == ""


def test_equal_contents_are_equal_and_hash_alike() -> None:
    one = SourceMeta(REF, HASH, annotations={"a": "b"}, resource_version="1")
    two = SourceMeta(REF, HASH, annotations={"a": "b"}, resource_version="1")
    assert one == two and hash(one) == hash(two)
    assert one != SourceMeta(REF, FINGERPRINT, annotations={"a": "b"}, resource_version="1")


def test_replace_changes_only_what_it_names() -> None:
    meta = SourceMeta(REF, HASH, annotations={"a": "b"}, resource_version="1", fingerprint=FINGERPRINT)
    moved = meta.replace(ref=SourceRef(SourceKind.SECRET, "other", "db"))
    assert moved.ref.namespace == "other"
    assert (moved.hash, moved.fingerprint, moved.annotations, moved.resource_version) == (
        HASH, FINGERPRINT, {"a": "b"}, "1")


def test_it_cannot_be_changed_in_place() -> None:
    meta = SourceMeta(REF, HASH)
    with pytest.raises(AttributeError):
        meta.ref = SourceRef(SourceKind.SECRET, "ns", "other")  # type: ignore[misc]


@pytest.mark.parametrize("text", ["not-hex", "ABCD", "abc", "h"])
def test_text_that_is_not_a_lower_case_hex_digest_reads_back_unchanged(text: str) -> None:
    meta = SourceMeta(REF, text, fingerprint=text)
    assert (meta.hash, meta.fingerprint, meta.change_key) == (text, text, text)


def test_transform_keeps_the_hashes_and_read_annotations_only() -> None:
    raw = {"metadata": {"name": "db", "namespace": "ns", "resourceVersion": "5",
                        "labels": {"app": "web"},
                        "annotations": {"reloader.stakater.com/match": "true", "other": "x"}},
           "data": {"password": "c2VjcmV0"}}
    meta = source_transform(SourceKind.SECRET, ("reloader.stakater.com/match",), lambda: True)(raw)
    assert meta.hash == secret_hash({"password": "c2VjcmV0"})
    assert meta.fingerprint == ""  # its per-key digests serve change detection
    assert meta.change_key == hashlib.sha1(key_digests(SourceKind.SECRET, raw)).hexdigest()
    empty = source_transform(SourceKind.SECRET, (), lambda: True)({**raw, "data": {}})
    assert empty.fingerprint == data_fingerprint({**raw, "data": {}})  # no keys: the fingerprint
    assert meta.annotations == {"reloader.stakater.com/match": "true"}
    assert (meta.ref, meta.resource_version) == (REF, "5")


def test_transform_keeps_only_the_labels_asked_for() -> None:
    raw = {"metadata": {"name": "cfg", "namespace": "ns",
                        "labels": {"gitops-reloader.io/state-store": "s", "app": "web"}}, "data": {}}
    kept = source_transform(SourceKind.CONFIGMAP, (), lambda: True,
                            label_keys=("gitops-reloader.io/state-store",))(raw)
    assert kept.labels == {"gitops-reloader.io/state-store": "s"}
    assert source_transform(SourceKind.CONFIGMAP, (), lambda: True)(raw).labels == {}


def test_transform_of_a_configmap_compares_its_stakater_hash() -> None:
    raw = {"metadata": {"name": "cfg", "namespace": "ns"}, "data": {"k": "v"}}
    meta = source_transform(SourceKind.CONFIGMAP, (), lambda: True)(raw)
    assert meta.change_key == meta.hash == configmap_hash({"k": "v"})
    assert meta.fingerprint == "" and meta.annotations == {}


def test_it_copies_and_pickles_as_an_equal_value() -> None:
    meta = SourceMeta(REF, HASH, annotations={"a": "b"}, resource_version="1", fingerprint=FINGERPRINT)
    assert copy.copy(meta) == copy.deepcopy(meta) == pickle.loads(pickle.dumps(meta)) == meta


def test_records_without_annotations_share_one_read_only_empty_map() -> None:
    one, two = SourceMeta(REF, HASH), SourceMeta(REF, HASH, {})
    assert one.annotations is two.annotations is EMPTY_MAP
    assert one.annotations == {} and json.dumps(one.annotations) == "{}"
    with pytest.raises(TypeError):
        EMPTY_MAP["k"] = "v"  # type: ignore[index]
    with pytest.raises(TypeError):
        EMPTY_MAP.update(k="v")  # type: ignore[attr-defined]
    assert copy.deepcopy(EMPTY_MAP) == {}


@pytest.mark.parametrize(("text", "number"), [
    ("42", 42), ("0", 0), ("", None), (None, None), (7, None), ("-3", None), ("1_000", None),
    (" 12", None), ("9" * 21, None),
])
def test_resource_versions_order_only_as_the_api_server_writes_them(text, number) -> None:
    assert resource_version_number(text) == number
