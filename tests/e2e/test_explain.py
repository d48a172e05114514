"""``gitops-reloader explain``, end to end: the CLI reads the API test server through a
kubeconfig (found as ``run`` finds it) and prints the rule behind each decision.

One case per reason, positive and negative, each asserting the printed rule.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from reload_helpers import call, configmap, create, secret

from gitops_reloader import cli
from gitops_reloader.hashing import configmap_hash, secret_hash
from gitops_reloader.testing.harness import deployment

pytestmark = pytest.mark.e2e

AUTO = {"reloader.stakater.com/auto": "true"}


def env_from(*names: str, kind: str = "configMapRef") -> dict[str, Any]:
    return {"name": "app", "image": "x", "envFrom": [{kind: {"name": n}} for n in names]}


def explain(capsys: Any, kubeconfig: str, *args: str) -> dict[str, Any]:
    """Run ``gitops-reloader explain ... --output json`` in process; the parsed answer."""
    code = cli.main(["explain", *args, "--kubeconfig", kubeconfig, "--output", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def source(result: dict[str, Any], name: str) -> dict[str, Any]:
    found = [s for s in result["sources"] if s["name"] == name]
    assert len(found) == 1, result["sources"]
    return found[0]


@dataclass(frozen=True)
class Case:
    """Objects to create, flags, and what explain must say about source ``name``."""

    id: str
    objects: Callable[[], list[dict[str, Any]]]
    tracked: bool
    reason: str
    rule: str
    flags: tuple[str, ...] = ()
    name: str = "cfg"
    workload: str = "Deployment/web"
    extra: tuple[str, ...] = field(default=())


def web(annotations: dict[str, str] | None = None, *names: str, **kw: Any) -> dict[str, Any]:
    return deployment("web", annotations=annotations or {}, containers=[env_from(*(names or ("cfg",)))], **kw)


def cm(name: str = "cfg", **kw: Any) -> dict[str, Any]:
    return configmap(name, {"k": "v"}, **kw)


CASES = [
    Case("auto", lambda: [cm(), web(AUTO)], True, "auto", "auto: reloader.stakater.com/auto=true"),
    Case("typed-auto", lambda: [cm(), web({"configmap.reloader.stakater.com/auto": "true"})],
         True, "typed-auto", "typed auto: configmap.reloader.stakater.com/auto=true"),
    Case("explicit", lambda: [cm("app-settings"), deployment("web", annotations={
        "configmap.reloader.stakater.com/reload": "other, app-.*"})],
        True, "explicit", "explicit list configmap.reloader.stakater.com/reload: entry 'app-.*' matches",
        name="app-settings"),
    Case("search", lambda: [cm(annotations={"reloader.stakater.com/match": "true"}),
                            web({"reloader.stakater.com/search": "true"})],
         True, "search", "search+match: workload reloader.stakater.com/search=true"),
    Case("auto-reload-all", lambda: [cm(), web()], True, "auto-reload-all", "--auto-reload-all",
         flags=("--auto-reload-all",)),
    Case("ignored", lambda: [cm(annotations={"reloader.stakater.com/ignore": "true"}), web(AUTO)],
         False, "ignored", "ignored: the source has reloader.stakater.com/ignore=true"),
    Case("excluded", lambda: [cm(), web({**AUTO, "configmaps.exclude.reloader.stakater.com/reload": "cfg"})],
         False, "excluded", "excluded: named in configmaps.exclude.reloader.stakater.com/reload"),
    Case("not-referenced", lambda: [cm(), cm("unused"),
                                     web(AUTO)],
         False, "not-referenced", "not referenced: the pod template does not use it",
         name="unused", extra=("--source", "configmap/unused")),
    Case("other-namespace", lambda: [cm(), cm("shared", namespace="elsewhere"), web(AUTO)],
         False, "other-namespace", "other namespace: a workload reloads only for sources in its own",
         name="shared", extra=("--source", "configmap/elsewhere/shared")),
    Case("no-annotation", lambda: [cm(), web()], False, "no-annotation", "no reloader annotation"),
    Case("not-matched", lambda: [cm(), web({"secret.reloader.stakater.com/auto": "true"})],
         False, "not-matched", "not matched"),
    Case("auto-disabled", lambda: [cm(), web({"reloader.stakater.com/auto": "false"})],
         False, "auto-disabled", "--auto-reload-all, but", flags=("--auto-reload-all",)),
    Case("not-found", lambda: [web(AUTO)], False, "not-found", "ConfigMap ns/cfg does not exist"),
    Case("resource-type-ignored", lambda: [cm(), web(AUTO)], False, "resource-type-ignored",
         "resource type ignored: --resources-to-ignore (configmaps)",
         flags=("--resources-to-ignore", "configMaps")),
    Case("label-selector-on-a-named-source", lambda: [cm("app-settings"), deployment("web", annotations={
        "configmap.reloader.stakater.com/reload": "app-.*"})], False, "label-selector",
         "labels do not match --resource-label-selector 'team=a'", name="app-settings",
         flags=("--resource-label-selector", "team=a")),
    Case("namespace-not-watched", lambda: [cm(), web(AUTO)], False, "namespace-not-watched",
         "namespace ns is not in --namespaces", flags=("--namespaces", "team-a")),
    Case("namespace-ignored", lambda: [cm(), web(AUTO)], False, "namespace-ignored",
         "namespace ns is in --namespaces-to-ignore", flags=("--namespaces-to-ignore", "ns")),
    Case("namespace-not-selected", lambda: [cm(), web(AUTO)], False, "namespace-not-selected",
         "namespace ns is not selected by --namespace-selector 'reload=yes'",
         flags=("--namespace-selector", "reload=yes")),
    Case("label-selector", lambda: [cm(labels={"team": "b"}), web(AUTO)], False, "label-selector",
         "labels do not match --resource-label-selector 'team=a'",
         flags=("--resource-label-selector", "team=a")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_explain_names_the_rule(case: Case, server: Any, api_client: Any, tmp_path: Any, capsys: Any) -> None:
    for body in case.objects():
        create(api_client, body)
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    result = explain(capsys, kubeconfig, case.workload, "-n", "ns", *case.flags, *case.extra)
    found = source(result, case.name)
    assert (found["tracked"], found["reason"]) == (case.tracked, case.reason)
    assert case.rule in found["rule"]


def test_workload_type_ignored(server: Any, api_client: Any, tmp_path: Any, capsys: Any) -> None:
    create(api_client, cm())
    job = deployment("nightly", annotations=AUTO, containers=[env_from("cfg")], kind="Job",
                     api_version="batch/v1")
    create(api_client, job)
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    result = explain(capsys, kubeconfig, "job/nightly", "-n", "ns", "--ignored-workload-types", "jobs")
    assert result["watched"] is False
    assert result["note"] == "workload type ignored: --ignored-workload-types excludes Jobs"
    cfg = source(result, "cfg")
    assert (cfg["tracked"], cfg["reason"]) == (False, "workload-not-watched")


def test_invalid_annotation_shows_the_parse_error(server: Any, api_client: Any, tmp_path: Any,
                                                  capsys: Any) -> None:
    create(api_client, cm("app-settings"))
    create(api_client, cm("unrelated"))
    create(api_client, deployment("web", annotations={
        "configmap.reloader.stakater.com/reload": "(unclosed, app-settings"}))
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    result = explain(capsys, kubeconfig, "Deployment/web", "-n", "ns")
    assert [s["name"] for s in result["sources"]] == ["app-settings"]  # not every ConfigMap in ns
    found = source(result, "app-settings")
    assert (found["tracked"], found["reason"]) == (True, "explicit")
    assert len(found["invalid_annotations"]) == 1
    assert found["invalid_annotations"][0].startswith("entry '(unclosed' skipped: ")
    assert "missing" in found["invalid_annotations"][0]  # RE2's own message


def test_sink_container_and_hashes(server: Any, api_client: Any, tmp_path: Any, capsys: Any) -> None:
    """Container that carries the env var; recorded vs current hash; sink and why."""
    create(api_client, cm("cfg"))
    create(api_client, secret("creds", {"p": "q"}))
    current = configmap_hash({"k": "v"})
    recorded_secret = secret_hash({"p": base64.b64encode(b"q").decode()})
    sidecar = {"name": "sidecar", "image": "x", "envFrom": [{"secretRef": {"name": "creds"}}],
               "env": [{"name": "STAKATER_CREDS_SECRET", "value": recorded_secret}]}
    main = {"name": "main", "image": "x",
            "env": [{"name": "STAKATER_CFG_CONFIGMAP", "value": "0" * 40}],
            "volumeMounts": [{"name": "conf", "mountPath": "/c"}]}
    create(api_client, deployment("web", annotations=AUTO, containers=[sidecar, main],
                                  volumes=[{"name": "conf", "configMap": {"name": "cfg"}}]))
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    code = cli.main(["explain", "deploy/web", "-n", "ns", "--kubeconfig", kubeconfig])
    text = capsys.readouterr().out
    assert code == 0 and recorded_secret[:12] not in text
    assert "    hash: recorded (secret: not shown) = current: up to date" in text
    result = explain(capsys, kubeconfig, "deploy/web", "-n", "ns")
    assert (result["sink"], result["sink_reason"]) == ("env-vars", "--reload-strategy")
    cfg, creds = source(result, "cfg"), source(result, "creds")
    assert (cfg["container"], cfg["env_var"]) == ("main", "STAKATER_CFG_CONFIGMAP")
    assert (cfg["recorded_hash"], cfg["current_hash"], cfg["out_of_date"]) == ("0" * 40, current, True)
    # A Secret's hashes are compared but never printed.
    assert (creds["container"], creds["out_of_date"]) == ("sidecar", False)
    assert creds["recorded_hash"] == creds["current_hash"] == "(secret: not shown)"
    assert recorded_secret not in json.dumps(result)

    result = explain(capsys, kubeconfig, "deploy/web", "-n", "ns", "--default-sink", "annotations")
    assert (result["sink"], result["sink_reason"]) == ("annotations", "--default-sink")
    call(api_client, "PATCH", "/apis/apps/v1/namespaces/ns/deployments/web",
         {"metadata": {"annotations": {"gitops-reloader.io/sink": "webhook-typo"}}},
         "application/merge-patch+json")
    result = explain(capsys, kubeconfig, "deploy/web", "-n", "ns")
    assert result["sink"] is None
    assert result["sink_reason"] == "annotation gitops-reloader.io/sink='webhook-typo' names no known sink"


def test_pause_state(server: Any, api_client: Any, tmp_path: Any, capsys: Any) -> None:
    create(api_client, cm())
    create(api_client, web({**AUTO, "deployment.reloader.stakater.com/pause-period": "5m",
                            "deployment.reloader.stakater.com/paused-at": "2026-01-02T03:04:05Z"}))
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    pause = explain(capsys, kubeconfig, "Deployment/web", "-n", "ns")["pause"]
    assert pause == {"paused": False, "period": "5m", "paused_at": "2026-01-02T03:04:05Z",
                     "period_seconds": 300.0}


def test_text_output_and_kubeconfig_discovery(server: Any, api_client: Any, tmp_path: Any) -> None:
    """The real entry point in a subprocess; KUBECONFIG found as ``run`` finds it."""
    create(api_client, cm())
    create(api_client, web(AUTO))
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    env = {**os.environ, "KUBECONFIG": kubeconfig, "HOME": str(tmp_path)}
    command = [sys.executable, "-m", "gitops_reloader.cli", "explain"]
    done = subprocess.run([*command, "deployment/web", "-n", "ns"],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:5] == [
        "Deployment ns/web",
        "  sink: env-vars (--reload-strategy)",
        "  pause: no pause period",
        "  ConfigMap ns/cfg: tracked [auto]",
        "    rule: auto: reloader.stakater.com/auto=true",
    ]
    missing = subprocess.run([*command, "deployment/nope", "-n", "ns"],
                             env=env, capture_output=True, text=True, timeout=60, check=False)
    assert (missing.returncode, missing.stderr.strip()) == (
        1, "gitops-reloader explain: deployment ns/nope not found")


def test_explain_says_where_argocd_shows_the_annotations_sink_as_drift(
        server: Any, api_client: Any, tmp_path: Any, capsys: Any) -> None:
    """Argo CD's client-side apply recorded an empty pod ``annotations: {}``: the real Argo CD
    then shows the annotations sink's reload as OutOfSync (tests/engines), and explain says so;
    not for the env-vars sink, nor once the manifest drops the empty map."""
    create(api_client, cm())
    manifest = web(AUTO)
    manifest["spec"]["template"]["metadata"]["annotations"] = {}
    tracked = {**AUTO, "argocd.argoproj.io/tracking-id": "web:apps/Deployment:ns/web",
               "kubectl.kubernetes.io/last-applied-configuration": json.dumps(manifest)}
    create(api_client, web(tracked))
    annotations_sink = ("deploy/web", "-n", "ns", "--reload-strategy", "annotations")
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    result = explain(capsys, kubeconfig, *annotations_sink)
    assert result["sink"] == "annotations"
    assert result["drift"].startswith("Argo CD manages it (argocd.argoproj.io/tracking-id): its last "
                                      "apply set the pod template's annotations to an empty map")
    code = cli.main(["explain", *annotations_sink, "--kubeconfig", kubeconfig])
    assert code == 0 and "  drift: Argo CD manages it" in capsys.readouterr().out
    assert explain(capsys, kubeconfig, "deploy/web", "-n", "ns")["drift"] == ""  # env-vars
    del manifest["spec"]["template"]["metadata"]["annotations"]
    tracked_key = "kubectl.kubernetes.io/last-applied-configuration"
    call(api_client, "PATCH", "/apis/apps/v1/namespaces/ns/deployments/web",
         {"metadata": {"annotations": {tracked_key: json.dumps(manifest)}}}, "application/merge-patch+json")
    assert explain(capsys, kubeconfig, *annotations_sink)["drift"] == ""
