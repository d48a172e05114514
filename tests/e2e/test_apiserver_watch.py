"""API test server: lists (pagination, selectors) and watches (replay, bookmarks, 410, cuts)."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client import ApiClient, ApiException
from kubernetes.watch.watch import iter_resp_lines

from gitops_reloader.testing.apiserver import ApiServer

pytestmark = pytest.mark.e2e

NS = "default"


class Stream:
    """A raw watch response read line by line with the client's own line splitter."""

    def __init__(self, resp: Any) -> None:
        self.resp = resp
        self._lines = iter_resp_lines(resp)

    def next(self) -> dict[str, Any]:
        event: dict[str, Any] = json.loads(next(self._lines))
        return event

    def take(self, n: int) -> list[dict[str, Any]]:
        return [self.next() for _ in range(n)]

    def rest(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self._lines if line]

    def close(self) -> None:
        self.resp.close()
        self.resp.release_conn()


@pytest.fixture
def streams() -> Iterator[list[Stream]]:
    opened: list[Stream] = []
    yield opened
    for stream in opened:
        stream.close()


def open_watch(
    core: client.CoreV1Api, streams: list[Stream], namespace: str | None = NS, **params: Any
) -> Stream:
    params.setdefault("_request_timeout", 10)
    if namespace is None:
        resp = core.list_config_map_for_all_namespaces(watch=True, _preload_content=False, **params)
    else:
        resp = core.list_namespaced_config_map(namespace, watch=True, _preload_content=False, **params)
    stream = Stream(resp)
    streams.append(stream)
    return stream


def cm(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"metadata": meta, "data": data}


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


# --------------------------------------------------------------------------- lists


def test_pagination_with_limit_and_continue_has_no_duplicates_or_gaps(
    core: client.CoreV1Api,
) -> None:
    names = [f"cm-{i:02d}" for i in range(25)]
    for name in reversed(names):
        core.create_namespaced_config_map("pages", cm(name))
    core.create_namespaced_config_map("other", cm("elsewhere"))
    seen: list[str] = []
    first = core.list_namespaced_config_map("pages", limit=10)
    assert first.metadata.remaining_item_count == 15
    seen += [i.metadata.name for i in first.items]
    token = first.metadata._continue
    pages = 1
    while token:
        page = core.list_namespaced_config_map("pages", limit=10, _continue=token)
        assert page.metadata.resource_version == first.metadata.resource_version
        seen += [i.metadata.name for i in page.items]
        token = page.metadata._continue
        pages += 1
    assert pages == 3
    assert seen == names
    everywhere = core.list_config_map_for_all_namespaces(limit=20)
    rest = core.list_config_map_for_all_namespaces(limit=20, _continue=everywhere.metadata._continue)
    keys = [(i.metadata.namespace, i.metadata.name) for i in everywhere.items + rest.items]
    assert keys == sorted(keys)
    assert len(keys) == 26
    assert rest.metadata._continue is None


def test_list_metadata_like_the_real_server(server: ApiServer, api_client: ApiClient) -> None:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(NS, cm("a"))
    resp = core.list_namespaced_config_map(NS, _preload_content=False)
    body = json.loads(resp.data)
    assert body["kind"] == "ConfigMapList"
    assert body["apiVersion"] == "v1"
    assert body["metadata"] == {"resourceVersion": str(server.resource_version())}
    item = body["items"][0]
    assert "kind" not in item
    assert "apiVersion" not in item
    assert item["metadata"]["name"] == "a"


def test_label_selectors_support_every_operator(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map(NS, cm("web", {"app": "web", "tier": "front", "n": "3"}))
    core.create_namespaced_config_map(NS, cm("api", {"app": "api", "tier": "back", "n": "5"}))
    core.create_namespaced_config_map(NS, cm("bare"))

    def names(selector: str) -> list[str]:
        return [i.metadata.name for i in core.list_namespaced_config_map(NS, label_selector=selector).items]

    assert names("app=web") == ["web"]
    assert names("app==api") == ["api"]
    assert names("app!=web") == ["api", "bare"]
    assert names("app in (web,api)") == ["api", "web"]
    assert names("app notin (web)") == ["api", "bare"]
    assert names("tier") == ["api", "web"]
    assert names("!tier") == ["bare"]
    assert names("app=web,tier=front") == ["web"]
    assert names("app=web,tier=back") == []
    assert names("n>4") == ["api"]
    with pytest.raises(ApiException) as err:
        names("app in (web")
    assert err.value.status == 400
    assert json.loads(err.value.body)["reason"] == "BadRequest"


def test_field_selectors_on_name_and_namespace(core: client.CoreV1Api) -> None:
    for ns in ("a", "b"):
        core.create_namespaced_config_map(ns, cm("one"))
        core.create_namespaced_config_map(ns, cm("two"))

    def keys(selector: str) -> list[tuple[str, str]]:
        items = core.list_config_map_for_all_namespaces(field_selector=selector).items
        return [(i.metadata.namespace, i.metadata.name) for i in items]

    assert keys("metadata.name=one") == [("a", "one"), ("b", "one")]
    assert keys("metadata.namespace==b") == [("b", "one"), ("b", "two")]
    assert keys("metadata.namespace=a,metadata.name!=one") == [("a", "two")]
    names = core.list_namespaced_config_map("a", field_selector="metadata.name=two").items
    assert [i.metadata.name for i in names] == ["two"]
    with pytest.raises(ApiException) as err:
        keys("spec.unknown=x")
    assert err.value.status == 400
    assert "field label not supported" in json.loads(err.value.body)["message"]


def test_large_secrets_list_in_pages(core: client.CoreV1Api) -> None:
    payload = base64.b64encode(b"x" * 15_000).decode()  # about 20 KB encoded
    for i in range(120):
        core.create_namespaced_secret("big", {"metadata": {"name": f"s-{i:04d}"}, "data": {"k": payload}})
    seen = 0
    token = None
    while True:
        page = core.list_namespaced_secret("big", limit=50, _continue=token)
        seen += len(page.items)
        assert all(s.data["k"] == payload for s in page.items)
        token = page.metadata._continue
        if not token:
            break
    assert seen == 120


# --------------------------------------------------------------------------- watches


def test_watch_from_list_version_gets_only_newer_events(
    core: client.CoreV1Api, streams: list[Stream]
) -> None:
    core.create_namespaced_config_map(NS, cm("a", k="1"))
    core.create_namespaced_config_map(NS, cm("b"))
    rv = core.list_namespaced_config_map(NS).metadata.resource_version
    core.patch_namespaced_config_map("a", NS, {"data": {"k": "2"}})
    core.create_namespaced_config_map(NS, cm("c"))
    core.delete_namespaced_config_map("b", NS)
    events = open_watch(core, streams, resource_version=rv).take(3)
    assert summary(events) == [("MODIFIED", "a"), ("ADDED", "c"), ("DELETED", "b")]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions)
    assert versions[0] > int(rv)
    assert events[0]["object"]["data"] == {"k": "2"}
    assert events[0]["object"]["kind"] == "ConfigMap"


def test_watch_without_version_starts_with_current_objects_then_live(
    core: client.CoreV1Api, streams: list[Stream]
) -> None:
    core.create_namespaced_config_map(NS, cm("b"))
    core.create_namespaced_config_map(NS, cm("a"))
    core.create_namespaced_config_map("elsewhere", cm("z"))
    stream = open_watch(core, streams)
    assert summary(stream.take(2)) == [("ADDED", "a"), ("ADDED", "b")]
    started = time.monotonic()
    core.patch_namespaced_config_map("a", NS, {"data": {"x": "y"}})
    core.create_namespaced_config_map("elsewhere", cm("ignored"))
    core.delete_namespaced_config_map("b", NS)
    assert summary(stream.take(2)) == [("MODIFIED", "a"), ("DELETED", "b")]
    assert time.monotonic() - started < 2


def test_watch_across_all_namespaces(core: client.CoreV1Api, streams: list[Stream]) -> None:
    rv = str(core.list_config_map_for_all_namespaces().metadata.resource_version)
    core.create_namespaced_config_map("one", cm("a"))
    core.create_namespaced_config_map("two", cm("a"))
    events = open_watch(core, streams, namespace=None, resource_version=rv).take(2)
    assert [e["object"]["metadata"]["namespace"] for e in events] == ["one", "two"]


def test_official_watch_client_streams_typed_objects(core: client.CoreV1Api) -> None:
    rv = core.list_namespaced_config_map(NS).metadata.resource_version
    core.create_namespaced_config_map(NS, cm("a"))
    core.patch_namespaced_config_map("a", NS, {"data": {"k": "v"}})
    w = watch.Watch()
    seen = []
    for event in w.stream(core.list_namespaced_config_map, NS, resource_version=rv):
        seen.append((event["type"], event["object"].metadata.name, event["object"].data))
        if len(seen) == 2:
            w.stop()
    assert seen == [("ADDED", "a", None), ("MODIFIED", "a", {"k": "v"})]
    assert w.resource_version == core.read_namespaced_config_map("a", NS).metadata.resource_version


def test_noop_write_produces_no_event(core: client.CoreV1Api, streams: list[Stream]) -> None:
    core.create_namespaced_config_map(NS, cm("a", k="1"))
    stream = open_watch(
        core, streams, resource_version=str(core.list_namespaced_config_map(NS).metadata.resource_version)
    )
    core.patch_namespaced_config_map("a", NS, {"data": {"k": "1"}})
    core.patch_namespaced_config_map("a", NS, {"data": {"k": "2"}})
    event = stream.next()
    assert (event["type"], event["object"]["data"]) == ("MODIFIED", {"k": "2"})


def test_label_selector_watch_sees_objects_enter_and_leave(
    core: client.CoreV1Api, streams: list[Stream]
) -> None:
    core.create_namespaced_config_map(NS, cm("a"))
    stream = open_watch(core, streams, label_selector="app=web", resource_version="1")
    core.patch_namespaced_config_map("a", NS, {"metadata": {"labels": {"app": "web"}}})
    core.patch_namespaced_config_map("a", NS, {"data": {"k": "v"}})
    left = core.patch_namespaced_config_map("a", NS, {"metadata": {"labels": {"app": "api"}}})
    core.patch_namespaced_config_map("a", NS, {"data": {"k": "w"}})
    core.create_namespaced_config_map(NS, cm("b", {"app": "web"}))
    events = stream.take(4)
    assert summary(events) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a"), ("ADDED", "b")]
    deleted = events[2]["object"]
    assert deleted["metadata"]["resourceVersion"] == left.metadata.resource_version
    assert deleted["metadata"]["labels"] == {"app": "web"}


def test_bookmarks_after_replay_and_periodically(
    server: ApiServer, core: client.CoreV1Api, streams: list[Stream]
) -> None:
    rv = core.list_namespaced_config_map(NS).metadata.resource_version
    stream = open_watch(core, streams, resource_version=rv, allow_watch_bookmarks=True)
    first = stream.next()
    assert first == {
        "type": "BOOKMARK",
        "object": {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": rv}},
    }
    created = core.create_namespaced_config_map(NS, cm("a"))
    assert stream.next()["type"] == "ADDED"
    later = stream.next()
    assert later["type"] == "BOOKMARK"
    assert int(later["object"]["metadata"]["resourceVersion"]) >= int(created.metadata.resource_version)
    assert stream.next()["type"] == "BOOKMARK"


def test_send_initial_events_ends_with_an_annotated_bookmark(
    core: client.CoreV1Api, streams: list[Stream]
) -> None:
    core.create_namespaced_config_map(NS, cm("a"))
    stream = open_watch(
        core,
        streams,
        send_initial_events=True,
        allow_watch_bookmarks=True,
        resource_version_match="NotOlderThan",
    )
    added, bookmark = stream.take(2)
    assert added["type"] == "ADDED"
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_watch_from_compacted_version_is_410_expired(
    server: ApiServer, core: client.CoreV1Api, streams: list[Stream]
) -> None:
    old = core.create_namespaced_config_map(NS, cm("a")).metadata.resource_version
    core.patch_namespaced_config_map("a", NS, {"data": {"k": "v"}})
    current = server.compact()
    stream = open_watch(core, streams, resource_version=old)
    events = stream.rest()
    assert events == [
        {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: {old} ({current})",
                "reason": "Expired",
                "code": 410,
            },
        }
    ]
    with pytest.raises(ApiException) as err:
        for _ in watch.Watch().stream(core.list_namespaced_config_map, NS, resource_version=old):
            pass
    assert err.value.status == 410
    fresh = open_watch(core, streams, resource_version=str(current))
    core.patch_namespaced_config_map("a", NS, {"data": {"k": "w"}})
    assert fresh.next()["type"] == "MODIFIED"


def test_history_overflow_expires_old_versions(streams: list[Stream]) -> None:
    with ApiServer(history_size=3) as srv:
        api = srv.api_client()
        try:
            core = client.CoreV1Api(api)
            versions = [core.create_namespaced_config_map(NS, cm("a")).metadata.resource_version]
            for i in range(4):
                versions.append(
                    core.patch_namespaced_config_map(
                        "a", NS, {"data": {"i": str(i)}}
                    ).metadata.resource_version
                )
            assert open_watch(core, streams, resource_version=versions[0]).next()["type"] == "ERROR"
            replay = open_watch(core, streams, resource_version=versions[1]).take(3)
            assert [e["object"]["data"]["i"] for e in replay] == ["1", "2", "3"]
        finally:
            api.close()


def test_timeout_seconds_ends_the_stream(core: client.CoreV1Api, streams: list[Stream]) -> None:
    started = time.monotonic()
    events = open_watch(core, streams, timeout_seconds=1, resource_version="1").rest()
    elapsed = time.monotonic() - started
    assert all(e["type"] == "ADDED" for e in events)
    assert 0.9 <= elapsed < 3


def test_cut_watches_ends_every_open_stream(
    server: ApiServer, core: client.CoreV1Api, streams: list[Stream]
) -> None:
    rv = str(server.resource_version())
    opened = [open_watch(core, streams, resource_version=rv) for _ in range(2)]
    results: list[list[dict[str, Any]]] = []
    threads = [threading.Thread(target=lambda s=s: results.append(s.rest())) for s in opened]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 2
    while server.watch_count() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.cut_watches() == 2
    for t in threads:
        t.join(3)
        assert not t.is_alive()
    assert results == [[], []]
    assert server.watch_count() == 0


def test_cut_watches_after_n_events(server: ApiServer, core: client.CoreV1Api, streams: list[Stream]) -> None:
    rv = str(server.resource_version())
    for name in ("a", "b", "c"):
        core.create_namespaced_config_map(NS, cm(name))
    server.cut_watches_after(2)
    assert summary(open_watch(core, streams, resource_version=rv).rest()) == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]
    server.cut_watches_after(0)
    assert len(open_watch(core, streams, resource_version=rv).take(3)) == 3


def test_restart_cuts_watches_compacts_and_keeps_data(
    server: ApiServer, core: client.CoreV1Api, streams: list[Stream]
) -> None:
    old = core.create_namespaced_config_map(NS, cm("a")).metadata.resource_version
    core.patch_namespaced_config_map("a", NS, {"data": {"k": "v"}})
    stream = open_watch(core, streams, resource_version=str(server.resource_version()))
    reader = threading.Thread(target=stream.rest)
    reader.start()
    deadline = time.monotonic() + 2
    while server.watch_count() < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.restart()
    reader.join(3)
    assert not reader.is_alive()
    assert core.read_namespaced_config_map("a", NS).data == {"k": "v"}
    assert open_watch(core, streams, resource_version=old).next()["type"] == "ERROR"


def test_concurrent_writers_each_event_once_in_version_order(
    server: ApiServer, core: client.CoreV1Api, streams: list[Stream]
) -> None:
    stream = open_watch(core, streams, resource_version=str(server.resource_version()))
    writers, writes = 8, 25

    def write(worker: int) -> None:
        api = server.api_client()
        try:
            mine = client.CoreV1Api(api)
            mine.create_namespaced_config_map(NS, cm(f"w{worker}"))
            for i in range(writes):
                mine.patch_namespaced_config_map(f"w{worker}", NS, {"data": {"i": str(i)}})
        finally:
            api.close()

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    events = stream.take(writers * (writes + 1))
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(set(versions))
    assert versions[-1] == server.resource_version()
    for worker in range(writers):
        mine = [
            e["object"].get("data", {}).get("i")
            for e in events
            if e["object"]["metadata"]["name"] == f"w{worker}"
        ]
        assert mine == [None, *[str(i) for i in range(writes)]]
