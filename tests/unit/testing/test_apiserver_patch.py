"""The API test server's patch engines: RFC 6902, RFC 7386 and strategic merge."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gitops_reloader.testing.apiserver.patch import (
    SERVICE_SCHEMA,
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)


def _deployment(env: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "labels": {"app": "web", "tier": "front"}},
        "spec": {
            "replicas": 2,
            "template": {
                "metadata": {"annotations": {"a": "1"}},
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "app:1",
                            "env": env
                            if env is not None
                            else [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                            "volumeMounts": [
                                {"name": "cfg", "mountPath": "/etc/cfg"},
                                {"name": "data", "mountPath": "/data"},
                            ],
                            "ports": [{"containerPort": 80, "name": "http"}],
                        },
                        {"name": "sidecar", "image": "side:1"},
                    ],
                    "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}],
                    "tolerations": [{"key": "a", "operator": "Exists"}],
                },
            },
        },
    }


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = doc["spec"]["template"]["spec"]["containers"]
    return result


# --------------------------------------------------------------------------- JSON patch


def test_json_patch_add_replace_remove() -> None:
    doc = {"a": {"b": 1}, "l": [1, 2]}
    out = apply_json_patch(
        doc,
        [
            {"op": "add", "path": "/a/c", "value": 2},
            {"op": "replace", "path": "/a/b", "value": 10},
            {"op": "add", "path": "/l/-", "value": 3},
            {"op": "add", "path": "/l/0", "value": 0},
            {"op": "remove", "path": "/l/1"},
        ],
    )
    assert out == {"a": {"b": 10, "c": 2}, "l": [0, 2, 3]}


def test_json_patch_move_copy_test() -> None:
    doc = {"a": {"x": [1]}, "b": {}}
    out = apply_json_patch(
        doc,
        [
            {"op": "test", "path": "/a/x", "value": [1]},
            {"op": "copy", "from": "/a/x", "path": "/b/y"},
            {"op": "move", "from": "/a", "path": "/c"},
        ],
    )
    assert out == {"b": {"y": [1]}, "c": {"x": [1]}}
    out["b"]["y"].append(2)
    assert out["c"]["x"] == [1], "copy must not alias"


def test_json_patch_pointer_escapes() -> None:
    doc = {"metadata": {"annotations": {"example.com/a~b": "old"}}}
    out = apply_json_patch(
        doc,
        [{"op": "replace", "path": "/metadata/annotations/example.com~1a~0b", "value": "new"}],
    )
    assert out["metadata"]["annotations"] == {"example.com/a~b": "new"}


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "remove", "path": "/missing"}],
        [{"op": "add", "path": "/no/such/parent", "value": 1}],
        [{"op": "test", "path": "/a", "value": 2}],
        [{"op": "add", "path": "/l/5", "value": 1}],
    ],
)
def test_json_patch_that_does_not_apply_is_422(ops: list[dict[str, Any]]) -> None:
    with pytest.raises(PatchError) as err:
        apply_json_patch({"a": 1, "l": []}, ops)
    assert err.value.status == 422


@pytest.mark.parametrize(
    "ops",
    [{"op": "add"}, [{"op": "frobnicate", "path": "/a"}], [{"op": "add", "path": "a", "value": 1}]],
)
def test_malformed_json_patch_is_400(ops: Any) -> None:
    with pytest.raises(PatchError) as err:
        apply_json_patch({"a": 1}, ops)
    assert err.value.status == 400


# --------------------------------------------------------------------------- merge patch


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [  # RFC 7386 appendix A
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_rfc7386_examples(target: Any, patch: Any, expected: Any) -> None:
    assert apply_merge_patch(copy.deepcopy(target), patch) == expected


def test_merge_patch_replaces_lists() -> None:
    doc = _deployment()
    out = apply_merge_patch(doc, {"spec": {"template": {"spec": {"containers": [{"name": "x"}]}}}})
    assert _containers(out) == [{"name": "x"}]


# --------------------------------------------------------------------------- strategic


def test_strategic_merges_containers_by_name() -> None:
    out = apply_strategic_merge_patch(
        _deployment(),
        {"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "side:2"}]}}}},
    )
    containers = _containers(out)
    assert [c["name"] for c in containers] == ["app", "sidecar"]
    assert containers[1] == {"name": "sidecar", "image": "side:2"}
    assert containers[0]["image"] == "app:1"


def test_strategic_new_env_entry_goes_first_and_existing_order_is_kept() -> None:
    patch = {
        "spec": {
            "template": {"spec": {"containers": [{"name": "app", "env": [{"name": "NEW", "value": "x"}]}]}}
        }
    }
    out = apply_strategic_merge_patch(_deployment(), patch)
    assert [e["name"] for e in _containers(out)[0]["env"]] == ["NEW", "A", "B"]


def test_strategic_several_new_entries_keep_patch_order_ahead_of_existing() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "env": [
                                {"name": "Y", "value": "y"},
                                {"name": "B", "value": "22"},
                                {"name": "X", "value": "x"},
                            ],
                        }
                    ]
                }
            }
        }
    }
    out = apply_strategic_merge_patch(_deployment(), patch)
    env = _containers(out)[0]["env"]
    assert [e["name"] for e in env] == ["Y", "X", "A", "B"]
    assert env[3] == {"name": "B", "value": "22"}


def test_strategic_updates_env_entry_in_place() -> None:
    patch = {
        "spec": {
            "template": {"spec": {"containers": [{"name": "app", "env": [{"name": "A", "value": "9"}]}]}}
        }
    }
    env = _containers(apply_strategic_merge_patch(_deployment(), patch))[0]["env"]
    assert env == [{"name": "A", "value": "9"}, {"name": "B", "value": "2"}]


def test_strategic_volume_mounts_merge_by_mount_path() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "volumeMounts": [
                                {"name": "cfg2", "mountPath": "/etc/cfg", "readOnly": True},
                                {"name": "tmp", "mountPath": "/tmp"},
                            ],
                        }
                    ]
                }
            }
        }
    }
    mounts = _containers(apply_strategic_merge_patch(_deployment(), patch))[0]["volumeMounts"]
    assert mounts == [
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "cfg2", "mountPath": "/etc/cfg", "readOnly": True},
        {"name": "data", "mountPath": "/data"},
    ]


def test_strategic_patch_delete_directive_removes_keyed_entry() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "app", "env": [{"$patch": "delete", "name": "A"}]},
                        {"$patch": "delete", "name": "sidecar"},
                    ]
                }
            }
        }
    }
    out = apply_strategic_merge_patch(_deployment(), patch)
    assert [c["name"] for c in _containers(out)] == ["app"]
    assert _containers(out)[0]["env"] == [{"name": "B", "value": "2"}]


def test_strategic_null_removes_map_key() -> None:
    out = apply_strategic_merge_patch(
        _deployment(),
        {"metadata": {"labels": {"tier": None}}, "spec": {"template": {"metadata": None}}},
    )
    assert out["metadata"]["labels"] == {"app": "web"}
    assert "metadata" not in out["spec"]["template"]


def test_strategic_replace_directive_on_map_and_list() -> None:
    patch = {
        "metadata": {"labels": {"$patch": "replace", "only": "this"}},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "app", "env": [{"$patch": "replace"}, {"name": "Z", "value": "z"}]}
                    ]
                }
            }
        },
    }
    out = apply_strategic_merge_patch(_deployment(), patch)
    assert out["metadata"]["labels"] == {"only": "this"}
    assert _containers(out)[0]["env"] == [{"name": "Z", "value": "z"}]


def test_strategic_patch_delete_on_map_removes_it() -> None:
    out = apply_strategic_merge_patch(
        _deployment(), {"spec": {"template": {"metadata": {"$patch": "delete"}}}}
    )
    assert "metadata" not in out["spec"]["template"]


def test_strategic_lists_without_merge_key_are_replaced() -> None:
    patch = {"spec": {"template": {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}}}}
    out = apply_strategic_merge_patch(_deployment(), patch)
    assert out["spec"]["template"]["spec"]["tolerations"] == [{"key": "b", "operator": "Exists"}]


def test_strategic_ports_merge_by_container_port() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "app", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}
            }
        }
    }
    ports = _containers(apply_strategic_merge_patch(_deployment(), patch))[0]["ports"]
    assert ports == [{"containerPort": 80, "name": "http", "protocol": "TCP"}]


def test_strategic_service_ports_merge_by_port() -> None:
    svc = {"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}}
    out = apply_strategic_merge_patch(
        svc, {"spec": {"ports": [{"port": 443, "name": "https"}]}}, SERVICE_SCHEMA
    )
    assert out["spec"]["ports"] == [{"port": 80, "targetPort": 8080}, {"port": 443, "name": "https"}]


def test_strategic_set_element_order_is_accepted() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
                    "containers": [{"name": "app", "image": "app:2"}],
                }
            }
        }
    }
    out = apply_strategic_merge_patch(_deployment(), patch)
    assert "$setElementOrder/containers" not in out["spec"]["template"]["spec"]
    assert _containers(out)[0]["image"] == "app:2"


def test_strategic_retain_keys_and_delete_from_primitive_list() -> None:
    doc = {
        "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
        "metadata": {"finalizers": ["a", "b", "c"]},
    }
    patch = {
        "spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}},
        "metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]},
    }
    out = apply_strategic_merge_patch(doc, patch)
    assert out["spec"]["strategy"] == {"type": "Recreate"}
    assert out["metadata"]["finalizers"] == ["a", "c"]


def test_strategic_finalizers_merge_as_a_set() -> None:
    out = apply_strategic_merge_patch(
        {"metadata": {"finalizers": ["a"]}}, {"metadata": {"finalizers": ["a", "b"]}}
    )
    assert out["metadata"]["finalizers"] == ["b", "a"]


def test_strategic_new_keyed_list_where_none_existed() -> None:
    out = apply_strategic_merge_patch(
        {"spec": {}},
        {
            "spec": {
                "volumes": [
                    {"name": "v", "secret": {"secretName": "s"}},
                    {"$patch": "delete", "name": "gone"},
                ]
            }
        },
    )
    assert out["spec"]["volumes"] == [{"name": "v", "secret": {"secretName": "s"}}]


def test_strategic_entry_without_merge_key_is_rejected() -> None:
    with pytest.raises(PatchError) as err:
        apply_strategic_merge_patch(
            _deployment(), {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}
        )
    assert err.value.status == 422


def test_strategic_patch_must_be_an_object() -> None:
    with pytest.raises(PatchError) as err:
        apply_strategic_merge_patch({}, [{"op": "add"}])
    assert err.value.status == 400
