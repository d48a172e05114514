"""Reference extraction from pod specs and the reverse index over workloads."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from gitops_reloader.index import ReferenceIndex, extract_refs
from gitops_reloader.model import ContainerRefs, PodRefs, SourceKind, SourceRef, WorkloadKey

CM, SECRET = SourceKind.CONFIGMAP, SourceKind.SECRET


def container(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", **fields}


def env_cm(name: str) -> dict[str, Any]:
    return {"name": "V", "valueFrom": {"configMapKeyRef": {"name": name, "key": "k"}}}


def env_secret(name: str) -> dict[str, Any]:
    return {"name": "V", "valueFrom": {"secretKeyRef": {"name": name, "key": "k"}}}


# --- extract_refs: each way of referencing ------------------------------------------------


@pytest.mark.parametrize(
    ("spec_container", "kind", "name"),
    [
        (container("app", env=[env_cm("cfg")]), CM, "cfg"),
        (container("app", env=[env_secret("sec")]), SECRET, "sec"),
        (container("app", envFrom=[{"configMapRef": {"name": "cfg"}}]), CM, "cfg"),
        (container("app", envFrom=[{"secretRef": {"name": "sec"}}]), SECRET, "sec"),
        (container("app", envFrom=[{"prefix": "P_", "configMapRef": {"name": "cfg"}}]), CM, "cfg"),
    ],
)
@pytest.mark.parametrize("field", ["containers", "initContainers"])
def test_env_and_env_from_references(
    spec_container: dict[str, Any], kind: SourceKind, name: str, field: str
) -> None:
    refs = extract_refs({field: [spec_container]})
    (only,) = refs.containers
    assert only.name == "app"
    assert only.init is (field == "initContainers")
    assert only.uses(kind, name)
    other = SECRET if kind is CM else CM
    assert not only.uses(other, name)
    assert refs.names(kind) == {name}
    assert refs.names(other) == frozenset()


@pytest.mark.parametrize(
    ("volume", "kind", "name"),
    [
        ({"name": "v", "configMap": {"name": "cfg"}}, CM, "cfg"),
        ({"name": "v", "secret": {"secretName": "sec"}}, SECRET, "sec"),
        ({"name": "v", "projected": {"sources": [{"configMap": {"name": "cfg"}}]}}, CM, "cfg"),
        ({"name": "v", "projected": {"sources": [{"secret": {"name": "sec"}}]}}, SECRET, "sec"),
    ],
)
def test_volume_references_map_to_mounting_containers(
    volume: dict[str, Any], kind: SourceKind, name: str
) -> None:
    spec = {
        "containers": [
            container("a"),
            container("b", volumeMounts=[{"name": "v", "mountPath": "/etc/x"}]),
        ],
        "initContainers": [container("i", volumeMounts=[{"name": "v", "mountPath": "/x"}])],
        "volumes": [volume],
    }
    refs = extract_refs(spec)
    volumes = refs.volume_configmaps if kind is CM else refs.volume_secrets
    other = refs.volume_secrets if kind is CM else refs.volume_configmaps
    assert volumes == {name: ("b", "i")}
    assert other == {}
    assert refs.names(kind) == {name}
    # volume references are not folded into the per-container env references
    assert all(not c.uses(kind, name) for c in refs.containers)


def test_projected_volume_with_several_sources() -> None:
    spec = {
        "containers": [container("app", volumeMounts=[{"name": "all", "mountPath": "/p"}])],
        "volumes": [
            {
                "name": "all",
                "projected": {
                    "sources": [
                        {"configMap": {"name": "c1"}},
                        {"secret": {"name": "s1"}},
                        {"downwardAPI": {"items": []}},
                        {"serviceAccountToken": {"path": "t"}},
                        {"configMap": {"name": "c2", "optional": True}},
                    ]
                },
            }
        ],
    }
    refs = extract_refs(spec)
    assert refs.volume_configmaps == {"c1": ("app",), "c2": ("app",)}
    assert refs.volume_secrets == {"s1": ("app",)}


def test_secret_volume_uses_secret_name_not_name() -> None:
    refs = extract_refs({"volumes": [{"name": "v", "secret": {"name": "wrong"}}]})
    assert refs.volume_secrets == {}


def test_unmounted_volume_is_still_a_reference() -> None:
    refs = extract_refs(
        {"containers": [container("app")], "volumes": [{"name": "v", "configMap": {"name": "c"}}]}
    )
    assert refs.volume_configmaps == {"c": ()}
    assert refs.names(CM) == {"c"}


def test_same_source_in_two_volumes_unions_the_mounters_in_container_order() -> None:
    spec = {
        "containers": [
            container("a", volumeMounts=[{"name": "v2"}]),
            container("b", volumeMounts=[{"name": "v1"}, {"name": "v2"}]),
        ],
        "volumes": [
            {"name": "v1", "configMap": {"name": "c"}},
            {"name": "v2", "projected": {"sources": [{"configMap": {"name": "c"}}]}},
        ],
    }
    assert extract_refs(spec).volume_configmaps == {"c": ("a", "b")}


def test_containers_list_regular_first_then_init_in_spec_order() -> None:
    spec = {
        "initContainers": [container("i1"), container("i2")],
        "containers": [container("c1"), container("c2")],
    }
    refs = extract_refs(spec)
    assert [(c.name, c.init) for c in refs.containers] == [
        ("c1", False), ("c2", False), ("i1", True), ("i2", True)
    ]


def test_full_pod_spec() -> None:
    spec = {
        "initContainers": [container("migrate", env=[env_secret("db")])],
        "containers": [
            container(
                "web",
                env=[{"name": "PLAIN", "value": "x"}, env_cm("web-env")],
                envFrom=[{"secretRef": {"name": "web-secret"}}],
                volumeMounts=[{"name": "conf", "mountPath": "/conf"}],
            ),
            container("sidecar", envFrom=[{"configMapRef": {"name": "side"}}]),
        ],
        "volumes": [
            {"name": "conf", "configMap": {"name": "web-files"}},
            {"name": "tls", "secret": {"secretName": "tls"}},
            {"name": "tmp", "emptyDir": {}},
        ],
    }
    assert extract_refs(spec) == PodRefs(
        containers=(
            ContainerRefs("web", False, frozenset({"web-env"}), frozenset({"web-secret"})),
            ContainerRefs("sidecar", False, frozenset({"side"}), frozenset()),
            ContainerRefs("migrate", True, frozenset(), frozenset({"db"})),
        ),
        volume_configmaps={"web-files": ("web",)},
        volume_secrets={"tls": ()},
        key_uses=((SourceKind.CONFIGMAP, "web-env", frozenset({"k"})),
                  (SourceKind.SECRET, "db", frozenset({"k"}))),
    )


# --- extract_refs: malformed input never raises -------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        None,
        {},
        [],
        "spec",
        42,
        {"containers": None, "initContainers": None, "volumes": None},
        {"containers": "app"},
        {"containers": {"name": "app"}},
        {"containers": [None, 1, "x", [], {}]},
        {"containers": [{"name": None}, {"name": 3}, {"name": ""}]},
        {"containers": [{"name": "a", "env": None, "envFrom": None, "volumeMounts": None}]},
        {"containers": [{"name": "a", "env": "x", "envFrom": {"a": 1}, "volumeMounts": 3}]},
        {"containers": [{"name": "a", "env": [None, 1, {"valueFrom": None}]}]},
        {"containers": [{"name": "a", "env": [{"valueFrom": "x"}, {"valueFrom": []}]}]},
        {"containers": [{"name": "a", "env": [{"valueFrom": {"configMapKeyRef": None}}]}]},
        {"containers": [{"name": "a", "env": [{"valueFrom": {"configMapKeyRef": "cfg"}}]}]},
        {"containers": [{"name": "a", "env": [{"valueFrom": {"configMapKeyRef": {"name": 7}}}]}]},
        {"containers": [{"name": "a", "env": [{"valueFrom": {"secretKeyRef": {"name": ""}}}]}]},
        {"containers": [{"name": "a", "env": [{"valueFrom": {"secretKeyRef": {}}}]}]},
        {"containers": [{"name": "a", "envFrom": [None, {"configMapRef": None}]}]},
        {"containers": [{"name": "a", "envFrom": [{"secretRef": {"name": ["x"]}}]}]},
        {"containers": [{"name": "a", "volumeMounts": [None, {"name": None}, {"mountPath": "/"}]}]},
        {"volumes": "v"},
        {"volumes": [None, 1, {}]},
        {"volumes": [{"configMap": None}, {"secret": None}, {"projected": None}]},
        {"volumes": [{"name": "v", "configMap": {"name": None}}]},
        {"volumes": [{"name": "v", "configMap": "cfg"}]},
        {"volumes": [{"name": "v", "secret": {"secretName": {"a": 1}}}]},
        {"volumes": [{"name": "v", "projected": {"sources": None}}]},
        {"volumes": [{"name": "v", "projected": {"sources": [None, {"configMap": None}]}}]},
        {"volumes": [{"name": "v", "projected": "x"}]},
        {"volumes": [{"name": "v", "projected": {"sources": [{"secret": {"name": 1}}]}}]},
    ],
)
def test_malformed_specs_yield_no_references_and_never_raise(spec: Any) -> None:
    refs = extract_refs(spec)
    assert refs.names(CM) == frozenset()
    assert refs.names(SECRET) == frozenset()


def test_nameless_volume_still_references_but_nobody_mounts_it() -> None:
    spec = {
        "containers": [container("a", volumeMounts=[{"name": "v"}])],
        "volumes": [{"configMap": {"name": "c"}}],
    }
    assert extract_refs(spec).volume_configmaps == {"c": ()}


def test_nameless_container_is_skipped_but_others_are_kept() -> None:
    spec = {"containers": [{"env": [env_cm("x")]}, container("b", env=[env_cm("y")])]}
    refs = extract_refs(spec)
    assert [c.name for c in refs.containers] == ["b"]
    assert refs.names(CM) == {"y"}


def test_tuples_are_accepted_like_lists() -> None:
    refs = extract_refs({"containers": (container("a", env=(env_cm("c"),)),)})
    assert refs.names(CM) == {"c"}


# --- ReferenceIndex -----------------------------------------------------------------------


def key(ns: str, name: str, kind: str = "Deployment") -> WorkloadKey:
    return WorkloadKey(f"{ns}/{kind}/{name}")


def refs_using(cms: tuple[str, ...] = (), secrets: tuple[str, ...] = ()) -> PodRefs:
    return PodRefs(
        containers=(ContainerRefs("app", False, frozenset(cms), frozenset(secrets)),)
    )


def src(kind: SourceKind, ns: str, name: str) -> SourceRef:
    return SourceRef(kind, ns, name)


def test_lookup_finds_referencing_workloads_only() -> None:
    index = ReferenceIndex()
    index.update(key("ns", "a"), "ns", refs_using(cms=("cfg",)), explicit=False)
    index.update(key("ns", "b"), "ns", refs_using(cms=("cfg", "other")), explicit=False)
    index.update(key("ns", "c"), "ns", refs_using(secrets=("cfg",)), explicit=False)
    assert index.lookup(src(CM, "ns", "cfg")) == {key("ns", "a"), key("ns", "b")}
    assert index.lookup(src(CM, "ns", "other")) == {key("ns", "b")}
    assert index.lookup(src(SECRET, "ns", "cfg")) == {key("ns", "c")}
    assert index.lookup(src(CM, "ns", "missing")) == frozenset()
    assert len(index) == 3


def test_lookup_is_per_namespace() -> None:
    index = ReferenceIndex()
    index.update(key("ns", "a"), "ns", refs_using(cms=("cfg",)), explicit=False)
    index.update(key("other", "a"), "other", refs_using(cms=("cfg",)), explicit=False)
    assert index.lookup(src(CM, "ns", "cfg")) == {key("ns", "a")}
    assert index.lookup(src(CM, "other", "cfg")) == {key("other", "a")}
    assert index.lookup(src(CM, "third", "cfg")) == frozenset()


def test_volume_and_init_container_references_are_indexed() -> None:
    refs = PodRefs(
        containers=(ContainerRefs("init", True, frozenset({"from-init"})),),
        volume_configmaps={"from-volume": ()},
        volume_secrets={"tls": ("app",)},
    )
    index = ReferenceIndex()
    index.update(key("ns", "a"), "ns", refs, explicit=False)
    for ref in (src(CM, "ns", "from-init"), src(CM, "ns", "from-volume"), src(SECRET, "ns", "tls")):
        assert index.lookup(ref) == {key("ns", "a")}


def test_update_replaces_the_previous_entry() -> None:
    index = ReferenceIndex()
    k = key("ns", "a")
    index.update(k, "ns", refs_using(cms=("old",)), explicit=True)
    index.update(k, "ns", refs_using(cms=("new",)), explicit=False)
    assert index.lookup(src(CM, "ns", "old")) == frozenset()
    assert index.lookup(src(CM, "ns", "new")) == {k}
    assert index.explicit_in("ns") == frozenset()
    assert len(index) == 1


def test_update_can_make_a_workload_explicit() -> None:
    index = ReferenceIndex()
    k = key("ns", "a")
    index.update(k, "ns", PodRefs(), explicit=False)
    assert index.explicit_in("ns") == frozenset()
    index.update(k, "ns", PodRefs(), explicit=True)
    assert index.explicit_in("ns") == {k}


def test_explicit_in_is_per_namespace_and_needs_no_reference() -> None:
    index = ReferenceIndex()
    index.update(key("ns", "a"), "ns", PodRefs(), explicit=True)
    index.update(key("ns", "b"), "ns", refs_using(cms=("c",)), explicit=False)
    index.update(key("other", "c"), "other", PodRefs(), explicit=True)
    assert index.explicit_in("ns") == {key("ns", "a")}
    assert index.explicit_in("other") == {key("other", "c")}
    assert index.explicit_in("none") == frozenset()


def test_remove_forgets_references_and_explicit_flag() -> None:
    index = ReferenceIndex()
    k = key("ns", "a")
    index.update(k, "ns", refs_using(cms=("c",), secrets=("s",)), explicit=True)
    index.update(key("ns", "b"), "ns", refs_using(cms=("c",)), explicit=False)
    index.remove(k)
    assert index.lookup(src(CM, "ns", "c")) == {key("ns", "b")}
    assert index.lookup(src(SECRET, "ns", "s")) == frozenset()
    assert index.explicit_in("ns") == frozenset()
    assert k not in index
    assert len(index) == 1


def test_remove_unknown_key_is_a_no_op() -> None:
    index = ReferenceIndex()
    index.remove(key("ns", "ghost"))
    assert len(index) == 0


def test_empty_buckets_are_dropped_so_memory_follows_references() -> None:
    index = ReferenceIndex()
    for i in range(50):
        index.update(key("ns", f"w{i}"), "ns", refs_using(cms=(f"c{i}",)), explicit=True)
    for i in range(50):
        index.remove(key("ns", f"w{i}"))
    assert len(index) == 0
    assert index._by_source == {}
    assert index._explicit == {}


def test_a_source_shared_then_released_keeps_every_remaining_user() -> None:
    index = ReferenceIndex()
    cfg = src(CM, "ns", "cfg")
    a, b, c = key("ns", "a"), key("ns", "b"), key("ns", "c")
    index.update(a, "ns", refs_using(cms=("cfg",)), explicit=False)
    index.update(a, "ns", refs_using(cms=("cfg",)), explicit=False)  # same user again
    assert index.lookup(cfg) == {a}
    index.update(b, "ns", refs_using(cms=("cfg",)), explicit=False)
    index.update(c, "ns", refs_using(cms=("cfg",)), explicit=False)
    assert index.lookup(cfg) == {a, b, c}
    index.remove(b)
    assert index.lookup(cfg) == {a, c}
    index.update(a, "ns", refs_using(cms=("other",)), explicit=False)
    assert index.lookup(cfg) == {c}
    index.update(b, "ns", refs_using(cms=("cfg",)), explicit=False)
    assert index.lookup(cfg) == {b, c}
    index.remove(b)
    index.remove(c)
    assert index.lookup(cfg) == frozenset()
    assert cfg not in index._by_source


def test_results_are_snapshots() -> None:
    index = ReferenceIndex()
    index.update(key("ns", "a"), "ns", refs_using(cms=("c",)), explicit=True)
    found = index.lookup(src(CM, "ns", "c"))
    explicit = index.explicit_in("ns")
    index.remove(key("ns", "a"))
    assert found == {key("ns", "a")}
    assert explicit == {key("ns", "a")}


def test_contains() -> None:
    index = ReferenceIndex()
    index.update(key("ns", "a"), "ns", PodRefs(), explicit=False)
    assert key("ns", "a") in index
    assert key("ns", "b") not in index


def test_same_name_different_kinds_of_workload_are_distinct_keys() -> None:
    index = ReferenceIndex()
    index.update(key("ns", "web", "Deployment"), "ns", refs_using(cms=("c",)), explicit=False)
    index.update(key("ns", "web", "StatefulSet"), "ns", refs_using(cms=("c",)), explicit=False)
    assert len(index.lookup(src(CM, "ns", "c"))) == 2


def test_concurrent_updates_and_lookups_stay_consistent() -> None:
    index = ReferenceIndex()
    errors: list[BaseException] = []

    def writer(t: int) -> None:
        try:
            for i in range(200):
                k = key("ns", f"t{t}-{i % 10}")
                index.update(k, "ns", refs_using(cms=("shared", f"c{i}")), explicit=i % 2 == 0)
                if i % 3 == 0:
                    index.remove(k)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(500):
                index.lookup(src(CM, "ns", "shared"))
                index.explicit_in("ns")
                len(index)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    # every indexed workload references "shared"; nothing else is left behind
    assert index.lookup(src(CM, "ns", "shared")) == {
        k for k in (key("ns", f"t{t}-{j}") for t in range(4) for j in range(10)) if k in index
    }
    assert len(index) == len(index.lookup(src(CM, "ns", "shared")))


def test_candidates_are_the_referencing_workloads_and_the_explicit_ones_of_the_namespace() -> None:
    index = ReferenceIndex()
    index.update(key("ns", "user"), "ns", refs_using(cms=("cfg",)), explicit=False)
    index.update(key("ns", "lister"), "ns", PodRefs(), explicit=True)
    index.update(key("other", "lister"), "other", PodRefs(), explicit=True)
    index.update(key("ns", "bystander"), "ns", refs_using(cms=("else",)), explicit=False)
    assert index.candidates(src(CM, "ns", "cfg")) == {key("ns", "user"), key("ns", "lister")}
    assert index.candidates(src(SECRET, "ns", "cfg")) == {key("ns", "lister")}
    assert index.candidates(src(CM, "third", "cfg")) == frozenset()
