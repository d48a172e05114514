"""The state store's ConfigMap I/O (state/shards.py, state/keeper.py) against the API test server.

No controller here: a :class:`StateKeeper` is fed source records directly and writes real
ConfigMaps through the official client, so batching, retries, conflicts and hostile stored
text are seen at the HTTP level.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes.client import ApiClient
from prometheus_client import CollectorRegistry

from gitops_reloader.errors import KubeError
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.model import ObjectRef, Source, SourceKind, SourceMeta, SourceRef
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.state.keeper import StateKeeper
from gitops_reloader.state.shards import STORE_LABEL, ConfigMapShards
from gitops_reloader.testing.apiserver import ApiServer, Fault

pytestmark = pytest.mark.e2e

KEY = b"k" * 32
NAME = "state"


class Store:
    """A keeper over real ConfigMaps, with its own metrics registry."""

    def __init__(self, api_client: ApiClient, *, shard_bytes: int = 1024, read_only: bool = False,
                 key: Callable[[], bytes] = lambda: KEY) -> None:
        self.registry = CollectorRegistry()
        self.api = KubeApi(api_client)
        self.keeper = StateKeeper(ConfigMapShards(self.api, namespace="default", name=NAME), key,
                                  metrics=Metrics(self.registry), shard_bytes=shard_bytes,
                                  read_only=read_only)

    def load(self, sources: list[SourceRef] | None = None, workloads: list[ObjectRef] | None = None) -> bool:
        everything = sources if sources is not None else [ref(i) for i in range(1000)]
        return self.keeper.load(sources=lambda: everything, workloads=lambda: workloads or [])

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value("gitops_reloader_" + name, labels) or 0.0


def ref(i: int) -> SourceRef:
    return SourceRef(SourceKind.CONFIGMAP, "ns", f"config-{i}")


def meta(i: int, data_hash: str) -> SourceMeta:
    return SourceMeta(ref=ref(i), hash=data_hash)


def writes(server: ApiServer) -> dict[str, int]:
    counts = server.request_counts()
    return {verb: counts.get((verb, "configmaps"), 0) for verb in ("create", "update")}


def test_a_burst_is_one_batch_of_shard_writes_read_back_by_the_next_instance(
        server: ApiServer, api_client: ApiClient) -> None:
    store = Store(api_client)
    assert store.load()
    for i in range(100):
        store.keeper.observe(meta(i, f"hash-{i}"))
    store.keeper.emitted(ObjectRef("Deployment", "ns", "web"), [Source(ref(1), "hash-1")])
    server.reset_request_counts()
    assert store.keeper.flush()
    first = writes(server)
    shards = store.keeper.batch.sizes()[2]
    assert shards > 3 and first == {"create": shards, "update": 0}  # one write per shard
    # One changed source: one shard rewritten.
    server.reset_request_counts()
    store.keeper.observe(meta(7, "hash-7-new"))
    assert store.keeper.flush()
    assert writes(server) == {"create": 0, "update": 1}
    assert store.keeper.flush()
    assert writes(server) == {"create": 0, "update": 1}  # nothing new: nothing written

    after = Store(api_client)
    assert after.load(workloads=[ObjectRef("Deployment", "ns", "web")])
    assert after.keeper.batch.stored_source(str(ref(7))) == after.keeper.digest(ref(7), "hash-7-new")
    assert after.keeper.batch.stored_source(str(ref(99))) == after.keeper.digest(ref(99), "hash-99")
    assert after.keeper.batch.stored_workload("ns/Deployment/web") == {
        "ConfigMap/config-1": after.keeper.digest(ref(1), "hash-1")}
    assert after.metric("state_store_entries", kind="source") == 100


def test_a_failed_write_is_counted_and_retried_with_the_next_batch(
        server: ApiServer, api_client: ApiClient) -> None:
    store = Store(api_client)
    assert store.load()
    store.keeper.observe(meta(1, "a"))
    assert store.keeper.flush()
    store.keeper.observe(meta(1, "b"))
    server.add_fault(Fault("update", "configmaps", 500, namespace="default"))
    assert not store.keeper.flush()
    assert store.metric("state_store_errors_total", operation="write") == 1
    assert store.keeper.batch.dirty() == 1
    assert store.keeper.flush()
    assert store.keeper.batch.dirty() == 0
    assert store.metric("state_store_batches_total") == 2
    check = Store(api_client)
    assert check.load()
    assert check.keeper.batch.stored_source(str(ref(1))) == check.keeper.digest(ref(1), "b")


def test_unreadable_stored_lines_are_skipped_counted_and_rewritten(
        server: ApiServer, api_client: ApiClient) -> None:
    store = Store(api_client, shard_bytes=64 * 1024)
    assert store.load()
    store.keeper.observe(meta(1, "a"))
    assert store.keeper.flush()
    api = KubeApi(api_client)
    from gitops_reloader.kube.resources import CONFIGMAPS

    shard = api.get(CONFIGMAPS, "default", f"{NAME}-0")
    shard["data"]["sources"] += "ns/ConfigMap/evil not-a-digest\n" + "x" * 5000 + "\n"
    api.update(CONFIGMAPS, "default", f"{NAME}-0", shard)

    again = Store(api_client, shard_bytes=64 * 1024)
    assert again.load()
    assert again.metric("state_store_invalid_entries_total") == 2
    assert again.keeper.batch.stored_source(str(ref(1))) == again.keeper.digest(ref(1), "a")
    again.keeper.observe(meta(2, "b"))
    assert again.keeper.flush()
    text = api.get(CONFIGMAPS, "default", f"{NAME}-0")["data"]["sources"]
    assert "evil" not in text and "xxxx" not in text


def test_a_stale_version_is_reread_and_the_shard_replaced(server: ApiServer, api_client: ApiClient) -> None:
    store = Store(api_client, shard_bytes=64 * 1024)
    assert store.load()
    store.keeper.observe(meta(1, "a"))
    assert store.keeper.flush()
    from gitops_reloader.kube.resources import CONFIGMAPS

    api = KubeApi(api_client)
    shard = api.get(CONFIGMAPS, "default", f"{NAME}-0")
    shard["metadata"].setdefault("annotations", {})["touched"] = "by someone else"
    api.update(CONFIGMAPS, "default", f"{NAME}-0", shard)  # our resourceVersion is stale now
    server.reset_request_counts()
    store.keeper.observe(meta(1, "b"))
    assert store.keeper.flush()
    assert writes(server)["update"] == 2  # 409, then the write on the current version
    check = Store(api_client, shard_bytes=64 * 1024)
    assert check.load()
    assert check.keeper.batch.stored_source(str(ref(1))) == check.keeper.digest(ref(1), "b")


def test_entries_of_objects_gone_while_down_are_dropped(server: ApiServer, api_client: ApiClient) -> None:
    store = Store(api_client, shard_bytes=64 * 1024)
    assert store.load()
    for i in range(3):
        store.keeper.observe(meta(i, "a"))
    store.keeper.emitted(ObjectRef("Deployment", "ns", "gone"), [Source(ref(0), "a")])
    assert store.keeper.flush()
    later = Store(api_client, shard_bytes=64 * 1024)
    assert later.load(sources=[ref(0), ref(1)], workloads=[])
    assert later.keeper.flush()
    check = Store(api_client, shard_bytes=64 * 1024)
    assert check.load()
    assert check.keeper.batch.sizes()[:2] == (2, 0)


def test_read_only_and_unloaded_keepers_never_write(server: ApiServer, api_client: ApiClient) -> None:
    dry = Store(api_client, read_only=True)
    assert dry.load()
    dry.keeper.observe(meta(1, "a"))
    dry.keeper.start(held=frozenset)
    assert dry.keeper.flush()
    dry.keeper.stop()
    assert writes(server) == {"create": 0, "update": 0}


def test_own_shards_and_sources_without_a_hash_are_not_recorded(
        server: ApiServer, api_client: ApiClient) -> None:
    store = Store(api_client)
    assert store.load()
    own = SourceMeta(ref=SourceRef(SourceKind.CONFIGMAP, "default", f"{NAME}-0"), hash="h",
                     labels={STORE_LABEL: NAME})
    store.keeper.observe(own)
    store.keeper.observe(meta(1, ""))
    assert store.keeper.batch.dirty() == 0


def test_an_unreadable_store_is_read_again_before_anything_is_written(
        server: ApiServer, api_client: ApiClient) -> None:
    first = Store(api_client, shard_bytes=64 * 1024)
    assert first.load()
    first.keeper.emitted(ObjectRef("Deployment", "ns", "web"), [Source(ref(0), "a")])
    assert first.keeper.flush()
    second = Store(api_client, shard_bytes=64 * 1024)
    server.add_fault(Fault("list", "configmaps", 500, namespace="default"))
    assert not second.load(workloads=[ObjectRef("Deployment", "ns", "web")])
    second.keeper.observe(meta(1, "b"))
    assert second.keeper.flush()  # loads first, so the workload entry survives the write
    check = Store(api_client, shard_bytes=64 * 1024)
    assert check.load(workloads=[ObjectRef("Deployment", "ns", "web")])
    assert check.keeper.batch.sizes()[:2] == (1, 1)


def test_sources_seen_while_the_digest_key_is_unavailable_are_recorded_later(
        server: ApiServer, api_client: ApiClient) -> None:
    down = [True]

    def key() -> bytes:
        if down[0]:
            raise KubeError("GET secrets: connection refused", status=0)
        return KEY

    store = Store(api_client, key=key)
    store.keeper.observe(meta(1, "old"))  # an informer thread: must not raise
    store.keeper.observe(meta(1, "new"))
    assert store.metric("state_store_errors_total", operation="key") == 1  # counted once
    assert not store.load()  # the key is needed to load
    assert store.metric("state_store_errors_total", operation="read") == 1
    assert not store.keeper.flush()
    assert writes(server) == {"create": 0, "update": 0}
    down[0] = False
    assert store.keeper.flush()  # loads, digests what waited, writes
    check = Store(api_client)
    assert check.load()
    assert check.keeper.batch.stored_source(str(ref(1))) == check.keeper.digest(ref(1), "new")


def test_secret_provider_classes_keep_the_marker_only_check(server: ApiServer, api_client: ApiClient) -> None:
    """CSI classes change through their pods' versions: not recorded, and an emission
    that carried one still records its ConfigMaps and Secrets (readable at load)."""
    store = Store(api_client, shard_bytes=64 * 1024)
    assert store.load()
    spc = SourceRef(SourceKind.SECRETPROVIDERCLASS, "ns", "vault")
    store.keeper.observe(SourceMeta(ref=spc, hash="h"))
    web = ObjectRef("Deployment", "ns", "web")
    store.keeper.emitted(web, [Source(spc, "h"), Source(ref(1), "a")])
    assert store.keeper.flush()
    check = Store(api_client, shard_bytes=64 * 1024)
    assert check.load(workloads=[web])
    assert check.metric("state_store_invalid_entries_total") == 0
    expected = {"ConfigMap/config-1": check.keeper.digest(ref(1), "a")}
    assert check.keeper.batch.stored_workload(web.key) == expected
    assert check.keeper.batch.stored_source(str(spc)) is None
    assert not check.keeper.out_of_date(web, SourceMeta(ref=spc, hash="new"), None)  # no marker: as today
    assert check.keeper.out_of_date(web, SourceMeta(ref=spc, hash="new"), "old")
