"""The pure parts of ``explain``: every policy reason has words, sink choice with its
reason, argument parsing, credentials never printed, text rendering."""

from __future__ import annotations

import pytest

from gitops_reloader import policy
from gitops_reloader.config import Behaviour, Config
from gitops_reloader.control.reconciler import choose_sink
from gitops_reloader.errors import ConfigError
from gitops_reloader.explain import (
    HIDDEN,
    Explanation,
    SourceReport,
    _find_adapter,
    _source_arg,
    _without_credentials,
    render_text,
    rule_text,
)
from gitops_reloader.kube.workloads import WorkloadRecord
from gitops_reloader.model import ObjectRef, PodRefs, SinkName, SourceKind


@pytest.mark.parametrize("reason", list(policy.Reason))
def test_every_policy_reason_has_its_own_words(reason: policy.Reason) -> None:
    text = rule_text(policy.Decision(False, reason, matched_entry="app-.*"), SourceKind.SECRET, Config())
    others = {rule_text(policy.Decision(False, r), SourceKind.SECRET, Config())
              for r in policy.Reason if r is not reason and r is not policy.Reason.EXPLICIT}
    assert text and text not in others


@pytest.mark.parametrize(("kind", "expected"), [
    (SourceKind.CONFIGMAP, "typed auto: configmap.reloader.stakater.com/auto=true"),
    (SourceKind.SECRET, "typed auto: secret.reloader.stakater.com/auto=true"),
])
def test_typed_auto_names_the_key_of_the_sources_type(kind: SourceKind, expected: str) -> None:
    assert rule_text(policy.Decision(True, policy.Reason.TYPED_AUTO), kind, Config()) == expected


def record(annotations: dict[str, str], template: dict[str, str] | None = None) -> WorkloadRecord:
    return WorkloadRecord(ObjectRef("Deployment", "ns", "web"), "uid", {}, annotations, template or {},
                          PodRefs(), True)


@pytest.mark.parametrize(("behaviour", "annotations", "template", "expected"), [
    (Behaviour(), {}, {}, (SinkName.ENV_VARS, "--reload-strategy")),
    (Behaviour(reload_strategy=SinkName.ANNOTATIONS), {}, {}, (SinkName.ANNOTATIONS, "--reload-strategy")),
    (Behaviour(default_sink=SinkName.GIT), {}, {}, (SinkName.GIT, "--default-sink")),
    (Behaviour(default_sink=SinkName.GIT), {"gitops-reloader.io/sink": "annotations"}, {},
     (SinkName.ANNOTATIONS, "annotation gitops-reloader.io/sink")),
    (Behaviour(), {}, {"gitops-reloader.io/sink": "pull-request"},
     (SinkName.PULL_REQUEST, "annotation gitops-reloader.io/sink")),
    (Behaviour(), {"gitops-reloader.io/sink": "gti"}, {},
     (None, "annotation gitops-reloader.io/sink='gti' names no known sink")),
    (Behaviour(webhook_url="http://127.0.0.1:1/h"), {"gitops-reloader.io/sink": "git"}, {},
     (SinkName.WEBHOOK, "--webhook-url is set")),
])
def test_choose_sink_says_why(behaviour: Behaviour, annotations: dict[str, str], template: dict[str, str],
                              expected: tuple[SinkName | None, str]) -> None:
    assert choose_sink(Config(behaviour=behaviour), record(annotations, template)) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("configmap/app", (SourceKind.CONFIGMAP, "ns", "app")),
    ("cm/other/app", (SourceKind.CONFIGMAP, "other", "app")),
    ("Secret/creds", (SourceKind.SECRET, "ns", "creds")),
])
def test_source_argument(text: str, expected: tuple[SourceKind, str, str]) -> None:
    assert _source_arg(text, "ns") == expected


@pytest.mark.parametrize("text", ["app", "pod/app", "configmap/", "configmap/a/b/c", "secret//x"])
def test_bad_source_argument_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="--source"):
        _source_arg(text, "ns")


@pytest.mark.parametrize(("kind", "expected"), [
    ("deploy", "Deployment"), ("deployments", "Deployment"), ("Deployment", "Deployment"),
    ("sts", "StatefulSet"), ("daemonset", "DaemonSet"), ("cronjobs", "CronJob"), ("job", "Job"),
    ("rollout", "Rollout"),
])
def test_workload_kind_names(kind: str, expected: str) -> None:
    _, adapter = _find_adapter(kind, Config())
    assert adapter is not None and adapter.kind == expected


def test_unknown_kind_and_ignored_type() -> None:
    assert _find_adapter("pod", Config()) == (None, None)
    enabled, anyway = _find_adapter("rollout", Config())  # not enabled without --is-argo-rollouts
    assert enabled is None and anyway is not None
    assert _find_adapter("dc", Config())[0] is not None  # --is-openshift unset: discovered by run
    no_openshift = Config(behaviour=Behaviour(is_openshift=False))
    assert _find_adapter("dc", no_openshift)[0] is None


@pytest.mark.parametrize(("url", "expected"), [
    ("https://bot:s3cret@git.example.com/fleet.git", "https://git.example.com/fleet.git"),
    ("https://git.example.com/fleet.git", "https://git.example.com/fleet.git"),
    ("ssh://git@git.example.com:22/fleet.git", "ssh://git.example.com:22/fleet.git"),
])
def test_urls_are_printed_without_credentials(url: str, expected: str) -> None:
    assert _without_credentials(url) == expected


def test_render_text_lines() -> None:
    result = Explanation("Deployment", "ns", "web", True, sink="env-vars", sink_reason="--reload-strategy",
                         pause={"paused": True, "period": None, "paused_at": None})
    result.sources = [
        SourceReport("Secret", "ns", "creds", True, "auto", "auto: reloader.stakater.com/auto=true", True,
                     container="app", env_var="STAKATER_CREDS_SECRET", recorded_hash=HIDDEN,
                     current_hash=HIDDEN, out_of_date=False),
        SourceReport("ConfigMap", "ns", "gone", False, "not-found", "ConfigMap ns/gone does not exist", True),
    ]
    result.manifest = {"repository": "fleet", "method": "scan", "rule": "scan: ...", "found_by": [],
                       "notes": ["no Argo CD tracking id"], "refused": "two documents match"}
    assert render_text(result).splitlines() == [
        "Deployment ns/web",
        "  sink: env-vars (--reload-strategy)",
        "  pause: no pause period; spec.paused is true",
        "  Secret ns/creds: tracked [auto]",
        "    rule: auto: reloader.stakater.com/auto=true",
        "    container: app, env STAKATER_CREDS_SECRET",
        "    hash: recorded (secret: not shown) = current: up to date",
        "  ConfigMap ns/gone: not tracked [not-found]",
        "    rule: ConfigMap ns/gone does not exist",
        "  manifest:",
        "    repository: fleet",
        "    rule: scan: ...",
        "    note: no Argo CD tracking id",
        "    REFUSED: two documents match",
    ]


def test_help_and_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    from gitops_reloader import cli

    assert cli.main(["explain", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: gitops-reloader explain KIND/NAME")
    assert cli.main(["explain", "web", "--kubeconfig", "/nonexistent"]) == 2
    assert capsys.readouterr().err.strip() == "gitops-reloader explain: expected KIND/NAME, got 'web'"
    assert cli.main(["explain", "deploy/web", "--no-such-flag"]) == 2
    assert "unknown arguments: --no-such-flag" in capsys.readouterr().err
