"""The pure parts of ``gitops-reloader plan``: flags, the changed object, the metas, redaction, text."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from gitops_reloader.config import load_config
from gitops_reloader.errors import ConfigError
from gitops_reloader.hashing import configmap_hash, secret_hash
from gitops_reloader.model import SourceKind
from gitops_reloader.plan import (
    MAX_DATA_BYTES,
    SECRET_MASK,
    RepositoryPlan,
    WorkloadPlan,
    assign_plan_waves,
    changed_meta,
    gated,
    new_source,
    parse_args,
    redact,
    render,
    render_json,
    waves_note,
)

CM = {"apiVersion": "v1", "kind": "ConfigMap",
      "metadata": {"name": "app", "namespace": "ns", "annotations": {"reloader.stakater.com/match": "true"}},
      "data": {"mode": "blue"}}


@pytest.mark.parametrize(("argv", "kind", "data", "rest"), [
    (["--configmap", "ns/app"], SourceKind.CONFIGMAP, None, []),
    (["--secret", "ns/db", "--from-literal", "a=1", "--from-literal", "b=x=y"], SourceKind.SECRET,
     {"a": b"1", "b": b"x=y"}, []),
    (["--configmap", "ns/app", "--namespaces=ns", "--from-literal=k="], SourceKind.CONFIGMAP, {"k": b""},
     ["--namespaces=ns"]),
])
def test_parse_args_splits_plan_flags_from_run_flags(argv: list[str], kind: SourceKind,
                                                     data: dict[str, bytes] | None, rest: list[str]) -> None:
    args, remaining = parse_args(argv)
    assert (args.kind, args.namespace, args.data, remaining) == (kind, argv[1].split("/")[0], data, rest)


def test_from_file_keys_by_basename_or_explicit_key(tmp_path: Path) -> None:
    (tmp_path / "app.conf").write_bytes(b"x = 1\n")
    args, _ = parse_args(["--configmap", "ns/app", "--from-file", str(tmp_path / "app.conf"),
                          "--from-file", f"other={tmp_path / 'app.conf'}"])
    assert args.data == {"app.conf": b"x = 1\n", "other": b"x = 1\n"}


@pytest.mark.parametrize(("argv", "message"), [
    ([], "--configmap NAMESPACE/NAME"),
    (["--configmap", "app"], "invalid plan flags"),
    (["--configmap", "ns/a/b"], "invalid plan flags"),
    (["--configmap", "ns/a", "--secret", "ns/b"], "invalid plan flags"),
    (["--secret", "ns/db", "--from-literal", "novalue"], "KEY=VALUE"),
    (["--secret", "ns/db", "--from-literal", "=v"], "KEY=VALUE"),
    (["--secret", "ns/db", "--from-file", "/nonexistent/x"], "--from-file"),
])
def test_parse_args_refuses_bad_flags(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("-", r"\-")):
        parse_args(argv)


def test_new_data_over_the_api_servers_limit_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * (MAX_DATA_BYTES + 1))
    with pytest.raises(ConfigError, match="over"):
        parse_args(["--configmap", "ns/app", "--from-file", str(big)])


@pytest.mark.parametrize(("kind", "data", "expected"), [
    (SourceKind.CONFIGMAP, {"a": b"1"}, {"data": {"a": "1"}}),
    (SourceKind.CONFIGMAP, {"a": b"1", "bin": b"\xff\x00"},
     {"data": {"a": "1"}, "binaryData": {"bin": base64.b64encode(b"\xff\x00").decode()}}),
    (SourceKind.SECRET, {"p": b"s3"}, {"data": {"p": base64.b64encode(b"s3").decode()}}),
])
def test_new_source_replaces_all_data(kind: SourceKind, data: dict[str, bytes],
                                      expected: dict[str, object]) -> None:
    current = {**CM, "binaryData": {"old": "AA=="}, "stringData": {"x": "y"}}
    after = new_source(kind, current, data)
    assert {k: v for k, v in after.items() if k in ("data", "binaryData", "stringData")} == expected
    assert after["metadata"] == CM["metadata"] and current["data"] == {"mode": "blue"}


def test_changed_meta_hashes_as_the_informer_does_and_keeps_the_annotations() -> None:
    config = load_config([], environ={})
    after = new_source(SourceKind.CONFIGMAP, CM, {"mode": b"g"})
    old, new = changed_meta(SourceKind.CONFIGMAP, config, CM, after, as_if=False)
    assert old.hash == configmap_hash({"mode": "blue"}) and new.hash == configmap_hash({"mode": "g"})
    assert new.annotations == {"reloader.stakater.com/match": "true"}


def test_as_if_changed_is_a_different_stable_hash() -> None:
    config = load_config([], environ={})
    secret = {"kind": "Secret", "metadata": {"name": "db", "namespace": "ns"}, "data": {"p": "czM="}}
    old, new = changed_meta(SourceKind.SECRET, config, secret, secret, as_if=True)
    again = changed_meta(SourceKind.SECRET, config, secret, secret, as_if=True)[1]
    assert old.hash == secret_hash({"p": "czM="}) and len(new.hash) == 40
    assert new.hash != old.hash and new.change_key != old.change_key and new == again


def test_redact_masks_every_secret_hash() -> None:
    assert redact("a=h1 b=h2 c=h1", ["h1", "h2", ""]) == f"a={SECRET_MASK} b={SECRET_MASK} c={SECRET_MASK}"


def test_render_lists_workloads_and_repositories() -> None:
    text = render("ConfigMap ns/app", "data changes (1 key(s))",
                  [WorkloadPlan("ns/Deployment/web", "env-vars", ["ns/ConfigMap/app"], "would-write", "PATCH",
                                {"spec": {}}),
                   WorkloadPlan("ns/Deployment/api", "git", ["ns/ConfigMap/app"], "already-current")],
                  [RepositoryPlan("git", "manifests", "main", "main", "diff --git a/x b/x\n",
                                  "reload: web\n")],
                  ["a note"])
    assert text.splitlines()[:3] == ["ConfigMap ns/app: data changes (1 key(s))", "note: a note",
                                     "1 of 2 workload(s) would be reloaded"]
    assert "ns/Deployment/web [env-vars] would-write" in text and "    diff --git a/x b/x" in text
    assert "commit to repository manifests (main), nothing pushed" in text


def test_render_json_holds_the_same_plan() -> None:
    workload = WorkloadPlan("ns/Deployment/web", "git", ["ns/ConfigMap/app"], "would-write", "here")
    repo = RepositoryPlan("pull-request", "manifests", "gitops-reloader/main/ns-deployment-web", "main",
                          "diff", "msg", ["ns/Deployment/web"], "Reload web", "body")
    document = json.loads(render_json("ConfigMap ns/app", "data changes", [workload], [repo], ["n"]))
    assert document["wouldWrite"] is True and document["notes"] == ["n"]
    assert document["workloads"][0]["status"] == "would-write"
    assert document["repositories"][0]["branch"] == "gitops-reloader/main/ns-deployment-web"
    assert json.loads(render_json("x", "none", [], [], []))["wouldWrite"] is False


def test_output_flag() -> None:
    assert parse_args(["--configmap", "ns/a", "-o", "json"])[0].output == "json"
    with pytest.raises(ConfigError):
        parse_args(["--configmap", "ns/a", "--output", "yaml"])


def workload_record(kind: str, name: str, namespace: str = "ns", annotations: dict[str, str] | None = None):
    from gitops_reloader.kube.workloads import adapters_for

    adapter = adapters_for(argo_rollouts=False, openshift=False)[kind]
    group = "batch/v1" if kind in ("Job", "CronJob") else "apps/v1"
    template = {"spec": {"containers": [{"name": "app", "image": "x"}]}}
    spec = {"jobTemplate": {"spec": {"template": template}}} if kind == "CronJob" else {"template": template}
    metadata = {"name": name, "namespace": namespace, "annotations": annotations or {}}
    return adapter.record({"apiVersion": group, "kind": kind, "spec": spec, "metadata": metadata})


@pytest.mark.parametrize(("sink", "kind", "annotations", "expected"), [
    ("env-vars", "Deployment", {}, True),
    ("annotations", "StatefulSet", {}, True),
    ("git", "Deployment", {}, True),
    ("git", "Deployment", {"gitops-reloader.io/git-target": "values.yaml#podAnnotations"}, False),
    ("pull-request", "Deployment", {}, False),
    ("webhook", "Deployment", {}, False),
    ("env-vars", "CronJob", {}, False),
])
def test_which_writes_the_budget_gates(sink: str, kind: str, annotations: dict[str, str],
                                      expected: bool) -> None:
    assert gated(sink, workload_record(kind, "w", annotations=annotations)) is expected


def test_waves_follow_priority_and_the_per_namespace_budget() -> None:
    config = load_config(["--max-concurrent-rollouts=2", "--max-concurrent-rollouts-per-namespace=1"])
    records = {r.ref.key: r for r in (
        workload_record("Deployment", "a"), workload_record("Deployment", "b"),
        workload_record("Deployment", "c", annotations={"gitops-reloader.io/rollout-priority": "9"}),
        workload_record("Deployment", "d", "other"), workload_record("CronJob", "job"),
        workload_record("Deployment", "bad", annotations={"gitops-reloader.io/rollout-priority": "high"}),
        workload_record("Deployment", "current"))}
    plans = [WorkloadPlan(key, "env-vars", [], "already-current" if key.endswith("/current")
                          else "would-write") for key in records]
    assign_plan_waves(config, plans, records)
    assert {p.key.rsplit("/", 1)[1]: p.wave for p in plans} == {
        "c": 1, "d": 1, "a": 2, "b": 3, "bad": 4, "job": None, "current": None}
    assert "waves: a rollout budget of 2 at once and 1 per namespace" in waves_note(config)
    text = render("Secret ns/db", "as if", plans, [], [])
    assert "ns/Deployment/b [env-vars] would-write, wave 3" in text
    assert "ns/CronJob/job [env-vars] would-write\n" in text
