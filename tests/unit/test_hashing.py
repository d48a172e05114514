"""Stakater-compatible hashes, env-var names, keyed digest (ACCEPTANCE: Hashing and naming)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools

import pytest

from gitops_reloader.hashing import (
    DELETED_HASH,
    EMPTY_HASH,
    configmap_hash,
    env_var_name,
    hash_object,
    keyed_digest,
    secret_hash,
    stakater_hash,
)
from gitops_reloader.model import SourceKind

CM, SECRET = SourceKind.CONFIGMAP, SourceKind.SECRET


def b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


# --- golden vectors -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"test.url": "www.stakater.com"}, "3c9a892aeaedc759abc3df9884a37b8be5680382"),
        ({}, "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        (None, "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        ({"b": "2", "a": "1"}, "f83e99e324ba68ccc373a58ef1eb42f8ab88646a"),
        ({"a": "1", "b": "2"}, "f83e99e324ba68ccc373a58ef1eb42f8ab88646a"),
    ],
)
def test_configmap_golden_vectors(data: dict[str, str] | None, expected: str) -> None:
    assert configmap_hash(data) == expected
    assert hash_object(CM, {"data": data}) == expected


def test_configmap_hash_ignores_insertion_order_over_all_permutations() -> None:
    items = [("b", "2"), ("a", "1"), ("c", "3"), ("a.b", "4")]
    hashes = {configmap_hash(dict(p)) for p in itertools.permutations(items)}
    assert len(hashes) == 1


def test_empty_hash_constant_is_sha1_of_nothing() -> None:
    assert EMPTY_HASH == sha1(b"") == stakater_hash([])


def test_secret_golden_vector_decodes_base64_values() -> None:
    data = {"password": b64("secret-password")}
    assert secret_hash(data) == "9f77fb85ef2edde100d112a7175e27e1744dd5d0"
    assert hash_object(SECRET, {"data": data}) == "9f77fb85ef2edde100d112a7175e27e1744dd5d0"


@pytest.mark.parametrize(
    "extra",
    [
        {"metadata": {"labels": {"a": "b"}, "annotations": {"x": "y"}, "name": "n"}},
        {"type": "kubernetes.io/tls"},
        {"metadata": {"resourceVersion": "42"}, "type": "Opaque", "immutable": True},
    ],
)
def test_labels_annotations_and_type_never_change_the_hash(extra: dict[str, object]) -> None:
    secret = {"data": {"password": b64("secret-password")}}
    cm = {"data": {"test.url": "www.stakater.com"}}
    assert hash_object(SECRET, {**secret, **extra}) == hash_object(SECRET, secret)
    assert hash_object(CM, {**cm, **extra}) == hash_object(CM, cm)


def test_sort_is_over_whole_entries_not_keys() -> None:
    # By key, "a" < "a.b"; by entry, "a.b=2" < "a=1" because '.' (0x2e) < '=' (0x3d).
    data = {"a": "1", "a.b": "2"}
    by_entry = sha1(b"a.b=2;a=1")
    by_key = sha1(b"a=1;a.b=2")
    assert by_entry != by_key
    assert configmap_hash(data) == by_entry == "499daa6d70eb53ada0bb7346397120ffefcda5c3"


def test_sort_is_bytewise_like_go_sort_strings() -> None:
    # 'Z' (0x5a) < 'a' (0x61), and non-ASCII sorts after ASCII in UTF-8 byte order.
    data = {"a": "1", "Z": "2", "é": "3"}
    assert configmap_hash(data) == sha1("Z=2;a=1;é=3".encode())


def test_configmap_data_is_hashed_as_utf8_text() -> None:
    assert configmap_hash({"k": "héllo"}) == sha1("k=héllo".encode())


def test_binary_data_is_hashed_as_its_base64_text() -> None:
    blob = b"\x00\xff\x10binary"
    text = b64(blob)
    assert configmap_hash(None, {"bin": text}) == sha1(f"bin={text}".encode())
    assert hash_object(CM, {"binaryData": {"bin": text}}) == sha1(f"bin={text}".encode())


def test_data_and_binary_data_are_sorted_together() -> None:
    text = b64(b"\x01")
    expected = sha1(f"a=1;b={text};c=3".encode())
    assert configmap_hash({"c": "3", "a": "1"}, {"b": text}) == expected


def test_secret_hash_uses_decoded_bytes_even_when_not_utf8() -> None:
    raw = b"\xff\x00\xfe"
    assert secret_hash({"k": b64(raw)}) == sha1(b"k=" + raw)


def test_secret_and_configmap_with_same_plaintext_hash_the_same() -> None:
    assert secret_hash({"password": b64("x")}) == configmap_hash({"password": "x"})


def test_secret_string_data_is_hashed_as_utf8_and_overrides_data() -> None:
    obj = {"data": {"a": b64("1"), "b": b64("old")}, "stringData": {"b": "new", "c": "3"}}
    assert hash_object(SECRET, obj) == sha1(b"a=1;b=new;c=3")


def test_string_data_alone_equals_the_same_data_encoded() -> None:
    assert hash_object(SECRET, {"stringData": {"password": "secret-password"}}) == (
        "9f77fb85ef2edde100d112a7175e27e1744dd5d0"
    )


def test_configmap_ignores_string_data_and_secret_ignores_binary_data() -> None:
    assert hash_object(CM, {"stringData": {"a": "1"}}) == EMPTY_HASH
    assert hash_object(SECRET, {"binaryData": {"a": b64("1")}}) == EMPTY_HASH


@pytest.mark.parametrize(
    "obj",
    [
        {},
        {"data": None},
        {"data": "not-a-map"},
        {"data": [1, 2]},
        {"binaryData": None, "stringData": None},
    ],
)
@pytest.mark.parametrize("kind", [CM, SECRET])
def test_missing_or_malformed_data_counts_as_empty(
    kind: SourceKind, obj: dict[str, object]
) -> None:
    assert hash_object(kind, obj) == EMPTY_HASH


def test_null_value_hashes_like_empty_string() -> None:
    assert hash_object(CM, {"data": {"k": None}}) == sha1(b"k=")
    assert hash_object(SECRET, {"data": {"k": None}}) == sha1(b"k=")


def test_invalid_base64_in_secret_falls_back_to_raw_text_without_raising() -> None:
    assert secret_hash({"k": "not base64!"}) == sha1(b"k=not base64!")


def test_changing_any_value_changes_the_hash() -> None:
    assert configmap_hash({"a": "1"}) != configmap_hash({"a": "2"})
    assert secret_hash({"a": b64("1")}) != secret_hash({"a": b64("2")})


def test_deleted_hash_is_sha1_of_stakaters_delete_marker() -> None:
    assert DELETED_HASH == "aae45badef99284e4dae01d6046154ea9d99532f"
    assert sha1(b"__RELOADER_EMPTY_DELETE_MARKER__") == DELETED_HASH
    assert DELETED_HASH != EMPTY_HASH


# --- env var names --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "expected"),
    [
        ("my-config", CM, "STAKATER_MY_CONFIG_CONFIGMAP"),
        ("my.app.config", CM, "STAKATER_MY_APP_CONFIG_CONFIGMAP"),
        ("my-secret", SECRET, "STAKATER_MY_SECRET_SECRET"),
        ("app-cfg", CM, "STAKATER_APP_CFG_CONFIGMAP"),
        ("cfg", SECRET, "STAKATER_CFG_SECRET"),
        ("a--b..c", CM, "STAKATER_A_B_C_CONFIGMAP"),  # a run becomes one _
        ("a-.-b", CM, "STAKATER_A_B_CONFIGMAP"),
        ("-lead", CM, "STAKATER_LEAD_CONFIGMAP"),  # none at the start
        ("..lead", CM, "STAKATER_LEAD_CONFIGMAP"),
        ("trail-", CM, "STAKATER_TRAIL__CONFIGMAP"),  # Stakater keeps one trailing _
        ("Mixed-Case9", CM, "STAKATER_MIXED_CASE9_CONFIGMAP"),
        ("123", SECRET, "STAKATER_123_SECRET"),
        ("", CM, "STAKATER__CONFIGMAP"),
        ("a_b", CM, "STAKATER_A_B_CONFIGMAP"),
        ("é-x", CM, "STAKATER_X_CONFIGMAP"),  # non-ASCII counts as "other"
        ("straße", CM, "STAKATER_STRA_E_CONFIGMAP"),  # no multi-char upper-casing
    ],
)
def test_env_var_name(name: str, kind: SourceKind, expected: str) -> None:
    assert env_var_name(name, kind) == expected


# --- keyed digest ---------------------------------------------------------------------

KEY = b"cluster-held-key"


def test_keyed_digest_is_hmac_sha256_over_sorted_lines() -> None:
    sources = [("Secret/ns/db", "bbb"), ("ConfigMap/ns/app", "aaa")]
    expected = hmac.new(KEY, b"ConfigMap/ns/app=aaa\nSecret/ns/db=bbb", hashlib.sha256).hexdigest()
    assert keyed_digest(KEY, sources) == expected
    assert keyed_digest(KEY, reversed(sources)) == expected


def test_keyed_digest_counts_duplicates_once() -> None:
    one = [("ConfigMap/ns/app", "aaa")]
    assert keyed_digest(KEY, one * 3) == keyed_digest(KEY, one)


def test_keyed_digest_depends_on_key_hash_and_id() -> None:
    base = keyed_digest(KEY, [("ConfigMap/ns/app", "aaa")])
    assert keyed_digest(b"other", [("ConfigMap/ns/app", "aaa")]) != base
    assert keyed_digest(KEY, [("ConfigMap/ns/app", "aab")]) != base
    assert keyed_digest(KEY, [("ConfigMap/ns/app2", "aaa")]) != base


def test_keyed_digest_reveals_neither_data_nor_plain_hash() -> None:
    plain = secret_hash({"password": b64("hunter2")})
    digest = keyed_digest(KEY, [("Secret/ns/db", plain)])
    assert plain not in digest
    assert "hunter2" not in digest
    assert len(digest) == 64


def test_keyed_digest_of_nothing_is_stable() -> None:
    assert keyed_digest(KEY, []) == hmac.new(KEY, b"", hashlib.sha256).hexdigest()


def test_keyed_digest_refuses_an_empty_key() -> None:
    with pytest.raises(ValueError, match="non-empty key"):
        keyed_digest(b"", [("ConfigMap/ns/app", "aaa")])
