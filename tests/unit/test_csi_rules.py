"""Secrets Store CSI: the pod-status hash, CSI volume references and the SecretProviderClass rules."""

from __future__ import annotations

import hashlib

import pytest

from gitops_reloader.config import AnnotationKeys
from gitops_reloader.hashing import env_var_name, spc_pod_status_hash
from gitops_reloader.index import ReferenceIndex, extract_refs
from gitops_reloader.model import ObjectRef, SourceKind, SourceMeta, SourceRef, WorkloadKey
from gitops_reloader.policy import (
    PolicyOptions,
    Reason,
    WorkloadView,
    decide,
    effective_annotations,
    has_explicit_lists,
)

SPC = SourceKind.SECRETPROVIDERCLASS
K = AnnotationKeys()


def go_reference_hash(status: dict) -> str:
    """Stakater's GetSHAfromSecretProviderClassPodStatus, line by line."""
    values = [f"{o['id']}={o['version']}" for o in status.get("objects") or []]
    values.append("SecretProviderClassName=" + status["secretProviderClassName"])
    return hashlib.sha1(";".join(sorted(values)).encode()).hexdigest()


# --------------------------------------------------------------------------- hash


def test_hash_of_stakater_test_fixture():
    """Stakater's testutil.GetSecretProviderClassPodStatus("ns", "my-spc", "v1") → ConvertResourceToSHA."""
    status = {"podName": "test123", "secretProviderClassName": "my-spc", "mounted": True,
              "targetPath": "/var/lib/kubelet/x", "objects": [{"id": "parameter1", "version": "v1"}]}
    expected = hashlib.sha1(b"SecretProviderClassName=my-spc;parameter1=v1").hexdigest()
    assert spc_pod_status_hash(status) == expected == go_reference_hash(status)


@pytest.mark.parametrize("objects", [
    [],
    [{"id": "b", "version": "1"}, {"id": "a", "version": "2"}],
    [{"id": "secret/data/db", "version": "7"}, {"id": "Z", "version": ""}, {"id": "a", "version": "x;y"}],
    [{"id": "dup", "version": "1"}, {"id": "dup", "version": "1"}],
])
def test_hash_matches_go_for_any_object_order(objects):
    status = {"secretProviderClassName": "vault-db", "objects": objects}
    assert spc_pod_status_hash(status) == go_reference_hash(status)
    assert spc_pod_status_hash({**status, "objects": list(reversed(objects))}) == go_reference_hash(status)


def test_hash_reads_only_ids_versions_and_class_name():
    base = {"secretProviderClassName": "c", "objects": [{"id": "a", "version": "1"}]}
    same = {**base, "podName": "other", "targetPath": "/t", "mounted": False}
    assert spc_pod_status_hash(same) == spc_pod_status_hash(base)
    bumped = {**base, "objects": [{"id": "a", "version": "2"}]}
    assert spc_pod_status_hash(bumped) != spc_pod_status_hash(base)
    assert spc_pod_status_hash({**base, "secretProviderClassName": "d"}) != spc_pod_status_hash(base)


@pytest.mark.parametrize("status", [None, {}, {"objects": None}, {"objects": "x"}, {"objects": [1, None]},
                                    {"objects": [{"id": None}]}])
def test_hash_of_malformed_status_is_deterministic(status):
    assert spc_pod_status_hash(status) == spc_pod_status_hash(status)
    assert len(spc_pod_status_hash(status)) == 40


def test_env_var_name_is_stakaters():
    assert env_var_name("vault-db.creds", SPC) == "STAKATER_VAULT_DB_CREDS_SECRETPROVIDERCLASS"
    assert SPC.kube_kind == "SecretProviderClass" and SPC.plural == "secretproviderclasses"


# --------------------------------------------------------------------------- references


def pod_spec(spc: str = "vault-db", mount: bool = True) -> dict:
    mounts = [{"name": "secrets", "mountPath": "/s"}] if mount else []
    container = {"name": "app", "volumeMounts": mounts}
    return {
        "containers": [{"name": "sidecar"}, container],
        "volumes": [{"name": "secrets", "csi": {"driver": "secrets-store.csi.k8s.io", "readOnly": True,
                                                "volumeAttributes": {"secretProviderClass": spc}}}],
    }


def test_csi_volume_is_a_reference_with_its_mounting_container():
    refs = extract_refs(pod_spec())
    assert refs.volume_spcs == {"vault-db": ("app",)}
    assert refs.names(SPC) == frozenset({"vault-db"})
    assert refs.names(SourceKind.SECRET) == frozenset()


@pytest.mark.parametrize("volume", [
    {"name": "v", "csi": None},
    {"name": "v", "csi": {"driver": "x"}},
    {"name": "v", "csi": {"volumeAttributes": None}},
    {"name": "v", "csi": {"volumeAttributes": {"secretProviderClass": 3}}},
    {"name": "v", "csi": {"volumeAttributes": {"secretProviderClass": ""}}},
    {"name": "v", "csi": []},
])
def test_malformed_csi_volumes_reference_nothing(volume):
    assert extract_refs({"containers": [{"name": "a"}], "volumes": [volume]}).volume_spcs == {}


def test_index_finds_workloads_by_secret_provider_class():
    index = ReferenceIndex()
    index.update(WorkloadKey("ns/Deployment/web"), "ns", extract_refs(pod_spec()), explicit=False)
    assert index.lookup(SourceRef(SPC, "ns", "vault-db")) == {"ns/Deployment/web"}
    assert index.lookup(SourceRef(SourceKind.SECRET, "ns", "vault-db")) == frozenset()


# --------------------------------------------------------------------------- policy


def view(annotations: dict | None = None, template: dict | None = None, *, spc: str = "vault-db",
         mount: bool = True) -> WorkloadView:
    return WorkloadView(ObjectRef("Deployment", "ns", "web"), annotations or {}, template or {},
                        extract_refs(pod_spec(spc, mount)))


def source(name: str = "vault-db", annotations: dict | None = None, namespace: str = "ns") -> SourceMeta:
    return SourceMeta(SourceRef(SPC, namespace, name), "h", annotations=annotations or {})


OPTS = PolicyOptions(keys=K)


@pytest.mark.parametrize(("annotations", "reason"), [
    ({K.spc_auto: "true"}, Reason.TYPED_AUTO),
    ({K.auto: "true"}, Reason.AUTO),
    ({K.spc_reload: "vault-.*"}, Reason.EXPLICIT),
    ({K.spc_reload: "other"}, Reason.NOT_MATCHED),
    ({K.configmap_auto: "true"}, Reason.NOT_MATCHED),
    ({K.secret_auto: "true"}, Reason.NOT_MATCHED),
    ({K.spc_auto: "true", K.spcs_exclude: "x, vault-db"}, Reason.EXCLUDED),
    ({K.auto: "true", K.spcs_exclude: "vault-db"}, Reason.EXCLUDED),
    ({K.auto: "true", K.secrets_exclude: "vault-db"}, Reason.AUTO),
    ({}, Reason.NO_ANNOTATION),
])
def test_secret_provider_class_rules(annotations, reason):
    assert decide(view(annotations), source(), OPTS).reason is reason


def test_ignore_on_the_secret_provider_class_wins():
    decision = decide(view({K.spc_reload: "vault-db"}), source(annotations={K.ignore: "true"}), OPTS)
    assert decision == decide(view({K.auto: "true"}), source(annotations={K.ignore: "true"}), OPTS)
    assert decision.reason is Reason.IGNORED and not decision.reload


def test_env_var_goes_to_the_container_that_mounts_the_csi_volume():
    assert decide(view({K.auto: "true"}), source(), OPTS).container == "app"
    assert decide(view({K.spc_reload: "vault-db"}, mount=False), source(), OPTS).container == "sidecar"


def test_auto_needs_the_csi_volume():
    assert decide(view({K.spc_auto: "true"}, spc="other"), source(), OPTS).reason is Reason.NOT_REFERENCED
    assert decide(view({K.spc_reload: "vault-db"}, spc="other"), source(), OPTS).reason is Reason.EXPLICIT


def test_auto_reload_all_covers_mounted_classes():
    options = PolicyOptions(keys=K, auto_reload_all=True)
    assert decide(view(), source(), options).reason is Reason.AUTO_RELOAD_ALL
    assert decide(view({K.spc_auto: "false"}), source(), options).reason is Reason.AUTO_DISABLED


def test_other_namespace_never_reloads():
    assert decide(view({K.auto: "true"}), source(namespace="other"), OPTS).reason is Reason.OTHER_NAMESPACE


def test_class_keys_on_the_workload_select_metadata_for_classes_only():
    """Stakater reads the changed type's keys: an SPC key in metadata does not hide a
    ConfigMap key in the pod template, but does for SecretProviderClass decisions."""
    w = view({K.spc_auto: "true"}, {K.configmap_auto: "true"})
    assert effective_annotations(w, K, SPC) == {K.spc_auto: "true"}
    assert effective_annotations(w, K, SourceKind.CONFIGMAP) == {K.configmap_auto: "true"}
    assert decide(w, source(), OPTS).reason is Reason.TYPED_AUTO
    template_only = view({}, {K.spc_auto: "true"})
    assert decide(template_only, source(), OPTS).reason is Reason.TYPED_AUTO


def test_class_reload_list_marks_the_workload_explicit():
    assert has_explicit_lists(view({K.spc_reload: "vault-db"}), K)
    assert has_explicit_lists(view({}, {K.spc_reload: "vault-db"}), K)
    assert not has_explicit_lists(view({K.spc_auto: "true"}), K)


def test_overridden_keys_are_read():
    keys = AnnotationKeys(spc_auto="a.io/spca", spc_reload="a.io/spc", spcs_exclude="a.io/spcx")
    options = PolicyOptions(keys=keys)
    assert decide(view({"a.io/spca": "true"}), source(), options).reason is Reason.TYPED_AUTO
    assert decide(view({"a.io/spc": "vault-db"}), source(), options).reason is Reason.EXPLICIT
    excluded = view({"a.io/spca": "true", "a.io/spcx": "vault-db"})
    assert decide(excluded, source(), options).reason is Reason.EXCLUDED
    assert decide(view({K.spc_auto: "true"}), source(), options).reason is Reason.NO_ANNOTATION
