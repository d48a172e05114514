"""The pure CSI pieces: what is kept of pod statuses and classes, the change rule, owner links."""

from __future__ import annotations

import pytest

from gitops_reloader.csi import LatestHashes, pod_status_record, spc_record, status_changed
from gitops_reloader.hashing import spc_pod_status_hash
from gitops_reloader.kube.owners import controller_owner
from gitops_reloader.model import SourceKind, SourceRef


def raw_status(versions: dict[str, str], *, spc: str = "vault-db", pod: str = "web-1") -> dict:
    return {"metadata": {"name": f"{pod}-ns-{spc}", "namespace": "ns", "resourceVersion": "7"},
            "status": {"podName": pod, "secretProviderClassName": spc, "mounted": True,
                       "targetPath": "/var/lib/kubelet/x",
                       "objects": [{"id": i, "version": v} for i, v in versions.items()]}}


def test_pod_status_keeps_names_and_hash_only():
    raw = raw_status({"a": "1"})
    record = pod_status_record(raw)
    names = (record.namespace, record.name, record.pod, record.spc)
    assert names == ("ns", "web-1-ns-vault-db", "web-1", "vault-db")
    assert record.hash == spc_pod_status_hash(raw["status"])
    assert record.resource_version == 7
    assert record.source == SourceRef(SourceKind.SECRETPROVIDERCLASS, "ns", "vault-db")


@pytest.mark.parametrize("raw", [{}, {"metadata": None, "status": None}, {"status": []},
                                 {"metadata": {"name": 3}, "status": {"podName": ["x"]}}])
def test_malformed_pod_status_gives_an_empty_record(raw):
    record = pod_status_record(raw)
    assert (record.pod, record.spc) == ("", "")
    assert not status_changed(record, record)


def test_change_rule_compares_hashes_only():
    v1, v2 = pod_status_record(raw_status({"a": "1"})), pod_status_record(raw_status({"a": "2"}))
    assert status_changed(v1, v2)
    assert not status_changed(v1, pod_status_record(raw_status({"a": "1"}, pod="other")))
    unnamed = pod_status_record({**raw_status({"a": "2"}), "status": {"objects": []}})
    assert not status_changed(v1, unnamed)  # no class named: nothing to reload for


def test_class_record_keeps_only_the_annotations_asked_for():
    raw = {"metadata": {"name": "vault-db", "namespace": "ns", "resourceVersion": "3",
                        "labels": {"team": "a"},
                        "annotations": {"reloader.stakater.com/ignore": "true", "other": "x"}},
           "spec": {"provider": "vault", "parameters": {"objects": "big"}}}
    meta = spc_record(raw, ("reloader.stakater.com/ignore", "reloader.stakater.com/match"))
    assert meta.ref == SourceRef(SourceKind.SECRETPROVIDERCLASS, "ns", "vault-db")
    assert (meta.hash, dict(meta.annotations), dict(meta.labels), meta.resource_version) == (
        "", {"reloader.stakater.com/ignore": "true"}, {"team": "a"}, "3")


def test_latest_hashes_keep_the_report_written_last():
    hashes = LatestHashes()
    ref = SourceRef(SourceKind.SECRETPROVIDERCLASS, "ns", "c")
    assert hashes.get(ref) == ""
    hashes.record(ref, "h2", 20)
    hashes.record(ref, "h1", 10)  # a stale pod listed after a fresh one
    assert (hashes.get(ref), len(hashes)) == ("h2", 1)
    hashes.record(ref, "h3", 30)
    assert hashes.get(ref) == "h3"
    hashes.forget(ref)
    assert (hashes.get(ref), len(hashes)) == ("", 0)


@pytest.mark.parametrize(("refs", "expected"), [
    ([{"kind": "ReplicaSet", "name": "web-1", "controller": True}], ("ReplicaSet", "web-1")),
    ([{"kind": "Node", "name": "n"}, {"kind": "StatefulSet", "name": "db", "controller": True}],
     ("StatefulSet", "db")),
    ([{"kind": "ReplicaSet", "name": "web-1"}], None),  # not the controller
    ([{"kind": "ReplicaSet", "name": "web-1", "controller": "true"}], None),
    ([{"kind": "", "name": "x", "controller": True}], None),
    ("not-a-list", None),
    (None, None),
    ([None, 3], None),
])
def test_controller_owner(refs, expected):
    assert controller_owner({"metadata": {"ownerReferences": refs}}) == expected
