"""Engine statuses → a report, and the follow-up verdict, table-driven from the shapes the engines write."""

from __future__ import annotations

from typing import Any

import pytest

from gitops_reloader.rollout.completion import Phase, RolloutStatus
from gitops_reloader.rollout.follow import (
    EngineReport,
    Reason,
    Stage,
    application_report,
    chart_version_commit,
    commit_of_revision,
    decide,
    helmrelease_report,
    kustomization_report,
)

OURS = "a" * 40
LATER = "b" * 40
OLDER = "c" * 40
DESCENDANTS = {OURS, LATER, OURS[:12], LATER[:12]}


def counts(commit: str) -> bool:
    """The test's ancestry: OURS and LATER are the pushed commit or a descendant, OLDER is not."""
    return commit in DESCENDANTS


def ready(status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-11-26T02:00:00Z",
    }


def condition_of(kind: str, status: str, reason: str) -> dict[str, Any]:
    return {**ready(status, reason, "retrying after 2m0s"), "type": kind}


def kustomization(
    *, applied: str = "", attempted: str = "", condition: dict | None = None, suspend: bool | None = None,
    more: tuple[dict, ...] = (),
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "interval": "5m",
        "path": "./apps",
        "prune": True,
        "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
    }
    if suspend is not None:
        spec["suspend"] = suspend
    status: dict[str, Any] = {"observedGeneration": 1,
                              "conditions": ([condition] if condition else []) + list(more)}
    if applied:
        status["lastAppliedRevision"] = applied
    if attempted:
        status["lastAttemptedRevision"] = attempted
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "flux-system"},
        "spec": spec,
        "status": status,
    }


@pytest.mark.parametrize(
    ("revision", "commit"),
    [
        (f"main@sha1:{OURS}", OURS),
        (f"main/{OURS}", OURS),
        (f"sha1:{OURS}", OURS),
        (OURS, OURS),
        (f"refs/heads/release/v1@sha1:{OURS}", OURS),
        ("latest@sha256:" + "d" * 64, None),
        ("main@sha1:not-hex", None),
        ("", None),
        (None, None),
        (42, None),
        ("main@sha1:" + "a" * 2000, None),
    ],
)
def test_commit_of_revision(revision: Any, commit: str | None) -> None:
    assert commit_of_revision(revision) == commit


@pytest.mark.parametrize(
    ("version", "commit"),
    [
        ("0.1.0+aaaaaaaaaaaa", "a" * 12),
        ("0.1.0", None),
        ("0.1.0+build.1", None),
        ("0.1.0+aaaaaaaaaaaaa", None),
        (None, None),
    ],
)
def test_chart_version_commit(version: Any, commit: str | None) -> None:
    assert chart_version_commit(version) == commit


KUSTOMIZATION_CASES = [
    (
        "applied",
        kustomization(
            applied=f"main@sha1:{OURS}",
            attempted=f"main@sha1:{OURS}",
            condition=ready("True", "ReconciliationSucceeded", f"Applied revision: main@sha1:{OURS}"),
        ),
        EngineReport("Kustomization flux-system/apps", applied=(OURS,)),
    ),
    (
        "failed apply",
        kustomization(
            applied=f"main@sha1:{OLDER}",
            attempted=f"main@sha1:{OURS}",
            condition=ready("False", "ReconciliationFailed", "Deployment/ns/web dry-run failed: invalid"),
        ),
        EngineReport(
            "Kustomization flux-system/apps",
            applied=(OLDER,),
            attempted=OURS,
            failure="ReconciliationFailed: Deployment/ns/web dry-run failed: invalid",
        ),
    ),
    (
        "progressing is no failure",
        kustomization(
            applied=f"main@sha1:{OLDER}",
            attempted=f"main@sha1:{OURS}",
            condition=ready("False", "Progressing", "reconciling"),
        ),
        EngineReport("Kustomization flux-system/apps", applied=(OLDER,)),
    ),
    (
        "suspended",
        kustomization(applied=f"main@sha1:{OLDER}", suspend=True),
        EngineReport("Kustomization flux-system/apps", applied=(OLDER,), suspended=True),
    ),
    (
        "failed apply Flux retries (kustomize-controller's finalizeStatus)",
        kustomization(
            applied=f"main@sha1:{OLDER}",
            attempted=f"main@sha1:{OURS}",
            condition=ready("False", "BuildFailed", "kustomize build failed"),
            more=(condition_of("Reconciling", "True", "ProgressingWithRetry"),),
        ),
        EngineReport("Kustomization flux-system/apps", applied=(OLDER,), attempted=OURS,
                     failure="BuildFailed: kustomize build failed", retrying=True),
    ),
    (
        "failed apply Flux stalled on",
        kustomization(
            applied=f"main@sha1:{OLDER}",
            attempted=f"main@sha1:{OURS}",
            condition=ready("False", "InvalidCELExpression", "bad expression"),
            more=(condition_of("Reconciling", "True", "ProgressingWithRetry"),
                  condition_of("Stalled", "True", "InvalidCELExpression")),
        ),
        EngineReport("Kustomization flux-system/apps", applied=(OLDER,), attempted=OURS,
                     failure="InvalidCELExpression: bad expression"),
    ),
    ("nothing yet", kustomization(), EngineReport("Kustomization flux-system/apps")),
]


@pytest.mark.parametrize(
    ("case", "obj", "report"), KUSTOMIZATION_CASES, ids=[c[0] for c in KUSTOMIZATION_CASES]
)
def test_kustomization_report(case: str, obj: dict, report: EngineReport) -> None:
    assert kustomization_report(obj) == report


def helmrelease(
    *, history: list[dict] | None = None, attempted: str = "0.1.0", condition: dict | None = None,
    more: tuple[dict, ...] = (),
) -> dict[str, Any]:
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {
            "interval": "5m",
            "chart": {
                "spec": {
                    "chart": "./charts/web",
                    "reconcileStrategy": "Revision",
                    "sourceRef": {"kind": "GitRepository", "name": "repo"},
                }
            },
        },
        "status": {
            "lastAttemptedRevision": attempted,
            "history": history or [],
            "conditions": ([condition] if condition else []) + list(more),
            "helmChart": "ns/ns-web",
        },
    }


def snapshot(version: str, status: str = "deployed") -> dict[str, Any]:
    return {
        "chartName": "web",
        "chartVersion": version,
        "status": status,
        "version": 2,
        "name": "web",
        "namespace": "ns",
        "digest": "sha256:x",
        "configDigest": "sha256:y",
        "firstDeployed": "2026-11-26T02:00:00Z",
        "lastDeployed": "2026-11-26T02:00:00Z",
    }


def helmchart(artifact: str, observed: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "ns-web", "namespace": "ns"},
        "status": {"artifact": {"revision": artifact}, "observedSourceArtifactRevision": observed},
    }


HELM_CASES = [
    (
        "revision strategy suffix",
        helmrelease(history=[snapshot(f"0.1.0+{OURS[:12]}")], attempted=f"0.1.0+{OURS[:12]}"),
        None,
        EngineReport("HelmRelease ns/web", applied=(OURS[:12],)),
    ),
    (
        "failed upgrade",
        helmrelease(
            history=[snapshot(f"0.1.0+{OURS[:12]}", "failed"), snapshot(f"0.1.0+{OLDER[:12]}", "superseded")],
            attempted=f"0.1.0+{OURS[:12]}",
            condition=ready("False", "UpgradeFailed", "timed out waiting"),
        ),
        None,
        EngineReport("HelmRelease ns/web", attempted=OURS[:12], failure="UpgradeFailed: timed out waiting"),
    ),
    (
        "failed upgrade helm-controller retries (remediation left)",
        helmrelease(
            history=[snapshot(f"0.1.0+{OURS[:12]}", "failed")],
            attempted=f"0.1.0+{OURS[:12]}",
            condition=ready("False", "UpgradeFailed", "timed out waiting"),
            more=(condition_of("Reconciling", "True", "ProgressingWithRetry"),),
        ),
        None,
        EngineReport("HelmRelease ns/web", attempted=OURS[:12], failure="UpgradeFailed: timed out waiting",
                     retrying=True),
    ),
    (
        "failed upgrade, retries exceeded (Stalled)",
        helmrelease(
            history=[snapshot(f"0.1.0+{OURS[:12]}", "failed")],
            attempted=f"0.1.0+{OURS[:12]}",
            condition=ready("False", "UpgradeFailed", "timed out waiting"),
            more=(condition_of("Stalled", "True", "RetriesExceeded"),),
        ),
        None,
        EngineReport("HelmRelease ns/web", attempted=OURS[:12], failure="UpgradeFailed: timed out waiting"),
    ),
    (
        "chart version only, HelmChart names the commit",
        helmrelease(history=[snapshot("0.1.0")]),
        helmchart("0.1.0", f"main@sha1:{OURS}"),
        EngineReport("HelmRelease ns/web", applied=(OURS,)),
    ),
    (
        "HelmChart built another version",
        helmrelease(history=[snapshot("0.1.0")]),
        helmchart("0.2.0", f"main@sha1:{OURS}"),
        EngineReport("HelmRelease ns/web"),
    ),
    (
        "chart version only, no HelmChart read",
        helmrelease(history=[snapshot("0.1.0")]),
        None,
        EngineReport("HelmRelease ns/web"),
    ),
]


@pytest.mark.parametrize(("case", "release", "chart", "report"), HELM_CASES, ids=[c[0] for c in HELM_CASES])
def test_helmrelease_report(case: str, release: dict, chart: dict | None, report: EngineReport) -> None:
    assert helmrelease_report(release, chart) == report


def application(
    *, sync: dict | None = None, operation: dict | None = None, automated: dict | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "project": "default",
        "source": {"repoURL": "https://git/x", "path": "apps"},
        "destination": {"namespace": "ns"},
    }
    if automated is not None:
        spec["syncPolicy"] = {"automated": automated}
    status: dict[str, Any] = {}
    if sync is not None:
        status["sync"] = sync
    if operation is not None:
        status["operationState"] = operation
    return {"metadata": {"name": "web", "namespace": "argocd"}, "spec": spec, "status": status}


APP_CASES = [
    (
        "synced",
        application(sync={"status": "Synced", "revision": OURS}, automated={}),
        EngineReport("Application argocd/web", applied=(OURS,)),
    ),
    (
        "out of sync",
        application(sync={"status": "OutOfSync", "revision": OURS}, automated={"prune": True}),
        EngineReport("Application argocd/web"),
    ),
    (
        "several sources",
        application(sync={"status": "Synced", "revisions": ["1.2.3", OURS]}, automated={}),
        EngineReport("Application argocd/web", applied=(OURS,)),
    ),
    (
        "failed sync",
        application(
            sync={"status": "OutOfSync", "revision": OURS},
            automated={},
            operation={
                "phase": "Failed",
                "message": "one or more objects failed to apply",
                "syncResult": {"revision": OURS},
                "operation": {"sync": {"revision": OURS}},
            },
        ),
        EngineReport(
            "Application argocd/web",
            attempted=OURS,
            failure="sync Failed: one or more objects failed to apply",
        ),
    ),
    (
        "auto-sync off",
        application(sync={"status": "OutOfSync", "revision": OURS}),
        EngineReport("Application argocd/web", auto_sync=False),
    ),
    (
        "auto-sync disabled",
        application(sync={"status": "OutOfSync"}, automated={"enabled": False}),
        EngineReport("Application argocd/web", auto_sync=False),
    ),
]


@pytest.mark.parametrize(("case", "obj", "report"), APP_CASES, ids=[c[0] for c in APP_CASES])
def test_application_report(case: str, obj: dict, report: EngineReport) -> None:
    assert application_report(obj) == report


COMPLETE = RolloutStatus(Phase.COMPLETE, "RolloutComplete", "rollout complete")
ROLLING = RolloutStatus(Phase.PROGRESSING, "UpdatingReplicas", "1 of 2 updated replicas")
DEADLINE = RolloutStatus(Phase.FAILED, "ProgressDeadlineExceeded", "ReplicaSet web-1 has timed out")
K = "Kustomization flux-system/apps"
TARGET = "manifests:envs/prod/values.yaml#annotations"

APPLIED_OURS, APPLIED_OLDER = EngineReport(K, applied=(OURS,)), EngineReport(K, applied=(OLDER,))
RETRIED = EngineReport(K, applied=(OLDER,), attempted=OURS, failure="BuildFailed: x", retrying=True)
W, P, T, R, F, N = (Stage.WAITING_FOR_MERGE, Stage.PUSHED, Stage.IN_TEMPLATE, Stage.ROLLED, Stage.FAILED,
                    Stage.NOT_APPLIED)

DECIDE_CASES = [
    # (case, engine, in_template, rollout, elapsed, waiting, stage, reason)
    ("pr open", None, False, None, 30.0, True, W, ""),
    ("pr open past the timeout: people decide", None, False, None, 9999.0, True, W, ""),
    ("pushed, engine has not applied", APPLIED_OLDER, False, None, 5.0, False, P, ""),
    ("in template, rolling", APPLIED_OURS, True, ROLLING, 5.0, False, T, ""),
    ("rolled", APPLIED_OURS, True, COMPLETE, 5.0, False, R, ""),
    ("a status alone never rolls", APPLIED_OURS, False, COMPLETE, 5.0, False, N, Reason.TARGET_NOT_RENDERED),
    ("a descendant applied, target not rendered", EngineReport(K, applied=(LATER,)), False, None, 5.0, False,
     N, Reason.TARGET_NOT_RENDERED),
    ("an older commit does not count", APPLIED_OLDER, False, None, 5.0, False, P, ""),
    ("rollout failed", APPLIED_OURS, True, DEADLINE, 5.0, False, F, "ProgressDeadlineExceeded"),
    ("rollout still going at the timeout", APPLIED_OURS, True, ROLLING, 100.0, False, F, "RolloutTimeout"),
    ("suspended", EngineReport(K, applied=(OLDER,), suspended=True), False, None, 1.0, False, N,
     Reason.SUSPENDED),
    ("failed apply of our commit", EngineReport(K, attempted=OURS, failure="ReconciliationFailed: x"), False,
     None, 1.0, False, N, Reason.SYNC_FAILED),
    ("failed apply the engine retries: followed on", RETRIED, False, None, 1.0, False, P, ""),
    ("failed apply the engine retries, at the timeout", RETRIED, False, None, 60.0, False, N,
     Reason.SYNC_FAILED),
    ("failed apply of an older commit is not ours", EngineReport(K, attempted=OLDER, failure="x"), False,
     None, 1.0, False, P, ""),
    ("timeout", APPLIED_OLDER, False, None, 60.0, False, N, Reason.TIMEOUT),
    ("timeout with auto-sync off", EngineReport("Application argocd/web", auto_sync=False), False, None, 60.0,
     False, N, Reason.AUTO_SYNC_OFF),
    ("no engine, waiting", None, False, None, 10.0, False, P, ""),
    ("no engine, in template and rolled", None, True, COMPLETE, 10.0, False, R, ""),
    ("no engine, timeout", None, False, None, 60.0, False, N, Reason.TIMEOUT),
]


@pytest.mark.parametrize(
    ("case", "engine", "in_template", "rollout", "elapsed", "waiting", "stage", "reason"),
    DECIDE_CASES,
    ids=[c[0] for c in DECIDE_CASES],
)
def test_decide(
    case: str,
    engine: EngineReport | None,
    in_template: bool,
    rollout: RolloutStatus | None,
    elapsed: float,
    waiting: bool,
    stage: Stage,
    reason: str,
) -> None:
    state = decide(
        engine=engine,
        counts=counts,
        in_template=in_template,
        rollout=rollout,
        elapsed=elapsed,
        timeout=60.0,
        target=TARGET,
        waiting_for_merge=waiting,
    )
    assert (state.stage, state.reason) == (stage, reason)
    assert state.done == (stage in (Stage.ROLLED, Stage.FAILED, Stage.NOT_APPLIED))


def test_target_not_rendered_names_the_target_and_the_engine() -> None:
    state = decide(
        engine=EngineReport(K, applied=(OURS,)),
        counts=counts,
        in_template=False,
        rollout=None,
        elapsed=1.0,
        timeout=60.0,
        target=TARGET,
    )
    assert TARGET in state.message and K in state.message and OURS[:12] in state.message


def test_tenant_written_status_is_bounded() -> None:
    huge = "x" * 100_000
    report = application_report(
        application(
            sync={"status": "Synced", "revisions": [huge] * 10_000},
            operation={"phase": "Failed", "message": huge},
            automated={},
        )
    )
    assert report.applied == () and report.failure is not None and len(report.failure) < 300


def test_a_failure_the_engine_retries_is_said_while_followed_and_named_at_the_timeout() -> None:
    waiting = decide(engine=RETRIED, counts=counts, in_template=False, rollout=None, elapsed=5.0,
                     timeout=60.0, target=TARGET)
    assert waiting.message == f"{K} failed to apply {OURS[:12]}: BuildFailed: x; the engine retries it"
    ended = decide(engine=RETRIED, counts=counts, in_template=False, rollout=None, elapsed=60.0, timeout=60.0,
                   target=TARGET)
    assert ended.message == f"{K} failed to apply {OURS[:12]}: BuildFailed: x (retried by the engine for 60s)"
