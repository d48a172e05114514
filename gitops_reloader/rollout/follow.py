"""From a pushed commit to a rolled workload: what the engine, the template and the rollout say, pure.

The git and pull-request sinks' emissions are followed into the cluster (the I/O is in
:mod:`gitops_reloader.control.follower`). This module reads the statuses and turns them into
one :class:`FollowState`:

- **The engine's report** (:class:`EngineReport`), read bounded from the object that
  deploys the workload:

  - Flux Kustomization: ``status.lastAppliedRevision`` (``<branch>@sha1:<commit>``; the
    older ``<branch>/<commit>`` too), ``status.lastAttemptedRevision`` with a ``Ready``
    condition ``False`` (its reason and message) for a failed apply, ``spec.suspend``.
  - Flux HelmRelease: helm-controller records the *chart version*, not the commit. With
    the chart's ``reconcileStrategy: Revision`` source-controller suffixes the version
    with the first 12 hex digits of the commit (``0.1.0+0123456789ab``): that suffix of
    the latest ``status.history`` entry (status ``deployed``) is the applied commit, of
    ``status.lastAttemptedRevision`` the attempted one. Without it (every commit is
    ``0.1.0``) the commit is the HelmChart's ``status.observedSourceArtifactRevision``,
    counted only while the HelmRelease's deployed chart version is the HelmChart's
    artifact. ``Ready`` ``False`` is a failed install/upgrade; ``spec.suspend``.
  - Flux retries a failed attempt by itself (kustomize-controller and helm-controller:
    ``finalizeStatus`` keeps ``Reconciling`` ``True`` with reason ``ProgressingWithRetry``
    and requeues after ``spec.retryInterval``) unless it marked the object ``Stalled``:
    such a failure is the engine *retrying* (:attr:`EngineReport.retrying`), as kstatus and
    the ``flux`` CLI read it, not the end.
  - Argo CD Application: ``status.sync.revision`` (``status.sync.revisions`` for several
    sources) while ``status.sync.status`` is ``Synced``; ``status.operationState.phase``
    ``Failed``/``Error`` is a failed sync (its ``message``; the revision from
    ``syncResult.revision`` or ``operation.sync.revision``); no
    ``spec.syncPolicy.automated`` (or ``automated.enabled: false``) is auto-sync off.

- **Status is input, not truth.** A revision counts only when the caller's ``counts``
  says so (the commit we pushed or a descendant of it on the branch, checked in the
  clone); the rollout is judged only once the live pod template carries the committed
  digest. A status alone never says ``ROLLED``.

:func:`decide` combines them; see its docstring for the order of the rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gitops_reloader.rollout.completion import Phase, RolloutStatus, condition, section, with_deadline

JSON = Mapping[str, Any]

MAX_FIELD = 1024
"""Longer status strings are read as absent (tenant-writable, bounded)."""
MAX_MESSAGE = 256
MAX_REVISIONS = 20

_COMMIT = re.compile(r"[0-9a-f]{7,40}")
_SUFFIX = re.compile(r"\+([0-9a-f]{12})$")


class Stage(StrEnum):
    """Where a followed emission stands; the last three end the follow-up."""

    WAITING_FOR_MERGE = "waiting-for-merge"
    PUSHED = "pushed"
    IN_TEMPLATE = "in-template"
    ROLLED = "rolled"
    FAILED = "failed"
    NOT_APPLIED = "not-applied"


class Reason(StrEnum):
    """Why an emission ended without a completed rollout (Event message, metric label)."""

    TARGET_NOT_RENDERED = "TargetNotRendered"
    SUSPENDED = "Suspended"
    SYNC_FAILED = "SyncFailed"
    AUTO_SYNC_OFF = "AutoSyncOff"
    TIMEOUT = "Timeout"


TERMINAL = frozenset({Stage.ROLLED, Stage.FAILED, Stage.NOT_APPLIED})


@dataclass(frozen=True, slots=True)
class EngineReport:
    """What a deploying engine says about the branch (every field already bounded).

    ``applied``: the commits it reports applied (hex, full or a prefix); ``attempted`` and
    ``failure``: the commit of a failed attempt and the failure's message; ``retrying``: the
    engine tries that attempt again by itself (Flux, not stalled); ``suspended``;
    ``auto_sync``: ``False`` when the engine applies commits only when someone asks.
    """

    engine: str
    applied: tuple[str, ...] = ()
    attempted: str | None = None
    failure: str | None = None
    retrying: bool = False
    suspended: bool = False
    auto_sync: bool = True


@dataclass(frozen=True, slots=True)
class FollowState:
    """One verdict: the stage, a reason when it ended badly, a short message for people."""

    stage: Stage
    reason: str = ""
    message: str = ""

    @property
    def done(self) -> bool:
        """Rolled, failed or not applied: nothing more to follow."""
        return self.stage in TERMINAL


# --------------------------------------------------------------------------- reading statuses


def _text(value: Any, limit: int = MAX_FIELD) -> str:
    return value if isinstance(value, str) and len(value) <= limit else ""


def _message(value: Any) -> str:
    return " ".join(str(value).split())[:MAX_MESSAGE] if isinstance(value, str) else ""


def _name(obj: JSON, kind: str) -> str:
    metadata = section(obj, "metadata")
    return f"{kind} {_text(metadata.get('namespace'), 253)}/{_text(metadata.get('name'), 253)}"


def _ready(obj: JSON) -> JSON:
    return condition(section(obj, "status"), "Ready", limit=MAX_REVISIONS) or {}


def commit_of_revision(revision: Any) -> str | None:
    """The commit of a Flux or Argo CD revision string, ``None`` when it names none.

    ``main@sha1:<40 hex>`` (Flux v1 APIs), ``main/<40 hex>`` (older Flux), ``sha1:<hex>``,
    or a bare commit (Argo CD).

    >>> commit_of_revision("main@sha1:" + "a" * 40) == "a" * 40
    True
    """
    text = _text(revision)
    tail = text.rsplit("@", 1)[-1].rsplit("/", 1)[-1]
    tail = tail.removeprefix("sha1:")
    return tail if _COMMIT.fullmatch(tail) else None


def chart_version_commit(version: Any) -> str | None:
    """The 12-hex commit prefix of a chart version built with ``reconcileStrategy: Revision``."""
    match = _SUFFIX.search(_text(version, 128))
    return match.group(1) if match else None


def _flux_failure(obj: JSON) -> str | None:
    ready = _ready(obj)
    if ready.get("status") != "False":
        return None
    reason = _text(ready.get("reason"), 64)
    if reason in ("Progressing", "DependencyNotReady", "ArtifactFailed", ""):
        return None  # not an apply of a revision: waiting, or the source is not ready
    return f"{reason}: {_message(ready.get('message'))}".rstrip(": ")


def _flux_retrying(obj: JSON) -> bool:
    """Flux tries again by itself: ``Reconciling`` ``True`` and not ``Stalled``."""
    status = section(obj, "status")
    reconciling = condition(status, "Reconciling", limit=MAX_REVISIONS) or {}
    stalled = condition(status, "Stalled", limit=MAX_REVISIONS) or {}
    return reconciling.get("status") == "True" and stalled.get("status") != "True"


def kustomization_report(obj: JSON) -> EngineReport:
    """A Flux Kustomization's report (``kustomize.toolkit.fluxcd.io/v1``)."""
    status = section(obj, "status")
    applied = commit_of_revision(status.get("lastAppliedRevision"))
    failure = _flux_failure(obj)
    return EngineReport(
        engine=_name(obj, "Kustomization"),
        applied=(applied,) if applied else (),
        attempted=commit_of_revision(status.get("lastAttemptedRevision")) if failure else None,
        failure=failure,
        retrying=bool(failure) and _flux_retrying(obj),
        suspended=section(obj, "spec").get("suspend") is True)


def _deployed_chart_version(status: JSON) -> str:
    history = status.get("history")
    latest = history[0] if isinstance(history, list) and history else None
    if isinstance(latest, Mapping) and latest.get("status") == "deployed":
        return _text(latest.get("chartVersion"), 128)
    return ""


def helmrelease_report(release: JSON, chart: JSON | None = None) -> EngineReport:
    """A Flux HelmRelease's report (``helm.toolkit.fluxcd.io/v2``); ``chart`` its HelmChart, if read.

    The commit comes from the chart version's ``+<12 hex>`` suffix (``reconcileStrategy:
    Revision``), else from the HelmChart's ``status.observedSourceArtifactRevision`` while
    the release's deployed version is the HelmChart's artifact.
    """
    status = section(release, "status")
    deployed = _deployed_chart_version(status)
    applied = chart_version_commit(deployed)
    if applied is None and deployed and chart is not None:
        chart_status = section(chart, "status")
        if _text(section(chart_status, "artifact").get("revision"), 128) == deployed:
            applied = commit_of_revision(chart_status.get("observedSourceArtifactRevision"))
    failure = _flux_failure(release)
    return EngineReport(
        engine=_name(release, "HelmRelease"),
        applied=(applied,) if applied else (),
        attempted=chart_version_commit(status.get("lastAttemptedRevision")) if failure else None,
        failure=failure,
        retrying=bool(failure) and _flux_retrying(release),
        suspended=section(release, "spec").get("suspend") is True)


def application_report(obj: JSON) -> EngineReport:
    """An Argo CD Application's report (``argoproj.io/v1alpha1``)."""
    status = section(obj, "status")
    sync = section(status, "sync")
    applied: list[str] = []
    if sync.get("status") == "Synced":
        revisions = sync.get("revisions")
        listed = revisions[:MAX_REVISIONS] if isinstance(revisions, list) else []
        for revision in [sync.get("revision"), *listed]:
            commit = commit_of_revision(revision)
            if commit:
                applied.append(commit)
    operation = section(status, "operationState")
    failure = attempted = None
    if operation.get("phase") in ("Failed", "Error"):
        failure = f"sync {operation.get('phase')}: {_message(operation.get('message'))}".rstrip(": ")
        attempted = (commit_of_revision(section(operation, "syncResult").get("revision"))
                     or commit_of_revision(section(operation, "operation", "sync").get("revision")))
    automated = section(obj, "spec", "syncPolicy").get("automated")
    auto_sync = isinstance(automated, Mapping) and automated.get("enabled") is not False
    return EngineReport(engine=_name(obj, "Application"), applied=tuple(applied), attempted=attempted,
                        failure=failure, auto_sync=auto_sync)


# --------------------------------------------------------------------------- the verdict


def decide(*, engine: EngineReport | None, counts: Callable[[str], bool], in_template: bool,
           rollout: RolloutStatus | None, elapsed: float, timeout: float, target: str,
           waiting_for_merge: bool = False) -> FollowState:
    """Where an emission stands, ``elapsed`` seconds after its push (or merge).

    In order: a pull request not merged yet is ``WAITING_FOR_MERGE`` (people decide: no
    timeout). Once the live template carries the digest, the rollout decides (``rollout``,
    from :mod:`~gitops_reloader.rollout.completion`; still progressing at ``timeout`` is a
    failure). Otherwise: a suspended engine, a failed attempt of a counted commit that the
    engine does not retry, or a counted commit reported applied (the target is not rendered
    into the pod template: said at once, not at the timeout) end it as ``NOT_APPLIED``; a
    failed attempt the engine retries waits, and is ``SyncFailed`` (its last message) at
    ``timeout``; else at ``timeout`` it is ``NOT_APPLIED`` with ``AutoSyncOff`` or ``Timeout``.
    ``counts(commit)`` says whether a reported commit is the pushed one or a descendant on the
    branch; ``target`` names the file (and YAML path) the digest was written to.
    """
    if waiting_for_merge:
        return FollowState(Stage.WAITING_FOR_MERGE, message=f"pull request open for {elapsed:.0f}s")
    if in_template:
        if rollout is None:
            return FollowState(Stage.IN_TEMPLATE, message="the digest is in the live pod template")
        verdict = with_deadline(rollout, elapsed, timeout)
        if verdict.phase is Phase.COMPLETE:
            return FollowState(Stage.ROLLED, message=verdict.message)
        if verdict.phase is Phase.FAILED:
            return FollowState(Stage.FAILED, verdict.reason, verdict.message)
        return FollowState(Stage.IN_TEMPLATE, message=f"rolling: {verdict.reason} {verdict.message}".strip())
    if engine is not None:
        if engine.suspended:
            return FollowState(Stage.NOT_APPLIED, Reason.SUSPENDED,
                               f"{engine.engine} is suspended: it applies no commit")
        if engine.failure and engine.attempted and counts(engine.attempted):
            failed = f"{engine.engine} failed to apply {engine.attempted[:12]}: {engine.failure}"
            if not engine.retrying:
                return FollowState(Stage.NOT_APPLIED, Reason.SYNC_FAILED, failed)
            if timeout > 0 and elapsed >= timeout:
                return FollowState(Stage.NOT_APPLIED, Reason.SYNC_FAILED,
                                   f"{failed} (retried by the engine for {timeout:.0f}s)")
            return FollowState(Stage.PUSHED, message=f"{failed}; the engine retries it")
        applied = next((commit for commit in engine.applied if counts(commit)), None)
        if applied is not None:
            return FollowState(Stage.NOT_APPLIED, Reason.TARGET_NOT_RENDERED,
                               f"{engine.engine} applied {applied[:12]} but the live pod template lacks the "
                               f"digest: {target} is not rendered into the pod template")
    if timeout > 0 and elapsed >= timeout:
        if engine is not None and not engine.auto_sync:
            return FollowState(Stage.NOT_APPLIED, Reason.AUTO_SYNC_OFF,
                               f"{engine.engine} has auto-sync off: nothing applied the commit "
                               f"within {timeout:.0f}s")
        what = (f"{engine.engine} did not apply the commit" if engine is not None
                else f"the digest of {target} did not reach the live pod template")
        return FollowState(Stage.NOT_APPLIED, Reason.TIMEOUT, f"{what} within {timeout:.0f}s")
    return FollowState(Stage.PUSHED, message="waiting for the engine to apply the commit")
