"""``gitops-reloader explain KIND/NAME -n NAMESPACE``: why a workload would (not) reload.

Contract: the answer comes from the code the controller runs, never a second copy of it —
the filters the controller's informers apply (``--namespaces``, ``--namespaces-to-ignore``,
``--namespace-selector``, ``--resource-label-selector``, ``--resources-to-ignore``,
``--ignored-workload-types``), :func:`gitops_reloader.policy.decide` per source,
:func:`gitops_reloader.controller.choose_sink`, the sinks' ``recorded_hash``, and for the
git and pull-request sinks :class:`~gitops_reloader.gitops.locate.Locator` on a fresh
clone in a temporary directory. It only reads: no write to the cluster or to git.

Flags: the same as ``run`` (so the same rules apply), plus ``-n/--namespace``,
``--output text|json`` and ``--source KIND/[NAMESPACE/]NAME`` (repeatable) to ask about
a source the workload neither references nor names. Exit code: 0 answered, 1 the
workload or the cluster could not be read, 2 bad usage.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from prometheus_client import CollectorRegistry

from gitops_reloader import policy, syncs, usedkeys
from gitops_reloader.config import Config, load_config
from gitops_reloader.control.brakes import parse_rate
from gitops_reloader.control.caches import source_transform
from gitops_reloader.control.evictor import PodFinder, restart_preview
from gitops_reloader.control.reconciler import choose_sink, written_record
from gitops_reloader.control.writechecks import EVICTING_SINKS, eviction_wanted
from gitops_reloader.csi import pod_status_record, spc_record
from gitops_reloader.durations import parse_duration
from gitops_reloader.errors import ConfigError, KubeError, KubeNotFound, ReloaderError
from gitops_reloader.gitops.argodiff import annotations_sink_drift
from gitops_reloader.gitops.auth import display_url
from gitops_reloader.hashing import env_var_name
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.resources import (
    CONFIGMAPS,
    NAMESPACES,
    SECRETPROVIDERCLASSES,
    SECRETPROVIDERCLASSPODSTATUSES,
    SECRETS,
    ResourceKind,
)
from gitops_reloader.kube.workloads import WorkloadAdapter, WorkloadRecord, adapters_for, rfc3339
from gitops_reloader.model import ReloadOn, ReloadRequest, SinkName, SourceKind
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.regex import RegexError, compile_linear
from gitops_reloader.rollout.budget import PRIORITY_ANNOTATION, parse_priority
from gitops_reloader.rollout.census import shown_change
from gitops_reloader.rollout.completion import Phase, with_deadline
from gitops_reloader.rollout.eviction import STRATEGY_ANNOTATION
from gitops_reloader.rollout.marker import MARKER_ANNOTATION, parse_marker
from gitops_reloader.shard import shard_of
from gitops_reloader.sinks import build_live_sinks
from gitops_reloader.sinks.pullrequest import PullRequestNotConfigured, require_pull_request_settings
from gitops_reloader.windows import choose_window

if TYPE_CHECKING:
    from gitops_reloader.gitops.gitconfig import GitConfig, RepositoryConfig

__all__ = ["Explanation", "SourceReport", "explain", "main", "render_text", "rule_text"]

RESOURCES: dict[SourceKind, ResourceKind] = {SourceKind.CONFIGMAP: CONFIGMAPS, SourceKind.SECRET: SECRETS,
                                             SourceKind.SECRETPROVIDERCLASS: SECRETPROVIDERCLASSES}
_PAGE = 500
USAGE = """usage: gitops-reloader explain KIND/NAME [-n NAMESPACE] [--output text|json]
                               [--source configmap|secret|secretproviderclass/[NAMESPACE/]NAME ...]
                               [run flags]

Why KIND/NAME would (or would not) reload on a change of each ConfigMap/Secret (and, with
--enable-csi-integration, SecretProviderClass) it references or names, through which sink,
and (git / pull-request sinks) which manifest would be edited. Pass the flags the
controller runs with (gitops-reloader run --help)."""
HIDDEN = "(secret: not shown)"
"""Printed instead of a Secret's hash; the comparison is still made and reported."""
_SHORT_NAMES = {"deploy": "Deployment", "ds": "DaemonSet", "sts": "StatefulSet", "cj": "CronJob",
                "ro": "Rollout", "dc": "DeploymentConfig"}
"""kubectl's short names for the workload kinds."""


@dataclass(slots=True)
class SourceReport:
    """One ConfigMap/Secret as the controller sees it for this workload."""

    kind: str
    namespace: str
    name: str
    tracked: bool
    reason: str
    """A :class:`~gitops_reloader.policy.Reason` value, or a filter reason (``not-found``,
    ``resource-type-ignored``, ``namespace-not-watched``, ``namespace-ignored``,
    ``namespace-not-selected``, ``label-selector``)."""
    rule: str
    referenced: bool
    policy: str | None = None
    """What :func:`~gitops_reloader.policy.decide` alone says (a filter may stop it first)."""
    container: str | None = None
    env_var: str | None = None
    recorded_hash: str | None = None
    current_hash: str | None = None
    out_of_date: bool | None = None
    synced: bool = False
    """The recorded hash is the workload's ``gitops-reloader.io/synced-sources`` entry: one a sync
    brought, or what the controller's last write restarted the pods with (a source its sink's
    record does not name)."""
    invalid_annotations: list[str] = field(default_factory=list)
    keys: list[str] | None = None
    """The keys the workload reloads for in ``used-keys`` mode (None: the whole object);
    ``current_hash`` is then the hash over these keys."""


@dataclass(slots=True)
class Explanation:
    """Everything ``explain`` found out about one workload."""

    kind: str
    namespace: str
    name: str
    watched: bool
    note: str = ""
    sink: str | None = None
    sink_reason: str = ""
    reload_on: str = ""
    """``any-change`` or ``used-keys`` (flag, else annotation)."""
    pause: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=dict)
    """The maintenance window and the storm brake the workload's reloads go through."""
    rollout: dict[str, Any] = field(default_factory=dict)
    restart: str = ""
    """How a reload restarts its pods when the template write does not: the eviction it would do
    ("evict 3 pods, one at a time, PDB db allows 1 now"), or why none is done; "" otherwise."""
    sources: list[SourceReport] = field(default_factory=list)
    manifest: dict[str, Any] | None = None
    drift: str = ""
    """Where the real Argo CD would show this sink's live write as drift (an empty pod
    ``annotations: {}`` its last apply recorded); "" otherwise."""


# --- pure: words for the rules ------------------------------------------------------


def rule_text(decision: policy.Decision, kind: SourceKind, config: Config) -> str:
    """The rule behind ``decision`` in words, naming the annotation or flag."""
    keys = config.keys
    reload_key = policy.list_key(kind, keys)
    exclude_key = policy.exclude_key(kind, keys)
    texts = {
        policy.Reason.EXPLICIT: f"explicit list {reload_key}: entry {decision.matched_entry!r} matches",
        policy.Reason.SEARCH: f"search+match: workload {keys.search}=true, source {keys.match}=true",
        policy.Reason.AUTO: f"auto: {keys.auto}=true",
        policy.Reason.TYPED_AUTO: f"typed auto: {policy.typed_auto_key(kind, keys)}=true",
        policy.Reason.AUTO_RELOAD_ALL: "--auto-reload-all",
        policy.Reason.OTHER_NAMESPACE: "other namespace: a workload reloads only for sources "
                                       "in its own namespace",
        policy.Reason.IGNORED: f"ignored: the source has {keys.ignore}=true",
        policy.Reason.EXCLUDED: f"excluded: named in {exclude_key}",
        policy.Reason.NOT_REFERENCED: "not referenced: the pod template does not use it "
                                      "(only an explicit list entry works without a reference)",
        policy.Reason.AUTO_DISABLED: f"--auto-reload-all, but {keys.auto} or "
                                     f"{policy.typed_auto_key(kind, keys)} is set to a non-true value",
        policy.Reason.NOT_MATCHED: "not matched: the workload's reloader annotations select other sources",
        policy.Reason.NO_ANNOTATION: "no reloader annotation on the workload (and no --auto-reload-all)",
    }
    return texts[decision.reason]


def invalid_annotations(decision: policy.Decision) -> list[str]:
    """Each invalid reload-list entry with its parse error, and each oversized list."""
    out: list[str] = []
    for entry in decision.invalid_patterns:
        if len(entry) > policy.MAX_PATTERN_CHARS:
            out.append(f"entry {entry[:64]!r}... is longer than {policy.MAX_PATTERN_CHARS} characters")
            continue
        try:
            compile_linear(entry, capture=False)
            error = "invalid"
        except RegexError as exc:
            error = str(exc)
        out.append(f"entry {entry!r} skipped: {error}")
    out.extend(f"{key} is over {policy.MAX_LIST_BYTES} bytes or {policy.MAX_LIST_ENTRIES} entries; ignored"
               for key in decision.oversized)
    return out


def method_text(method: str) -> str:
    """The location rule (a :class:`~gitops_reloader.gitops.locate.Method` value) in words."""
    from gitops_reloader.gitops import locate

    return {
        locate.Method.TARGET: f"explicit: {locate.GIT_TARGET_ANNOTATION} annotation",
        locate.Method.ANNOTATION: f"explicit: {locate.GIT_PATH_ANNOTATION} annotation",
        locate.Method.ARGOCD: f"Argo CD: {locate.ARGOCD_TRACKING_ANNOTATION} (or instance label)"
                              " -> Application",
        locate.Method.FLUX: f"Flux: {locate.FLUX_NAME_LABEL} labels -> Kustomization -> GitRepository",
        locate.Method.SCAN: "scan: the repository searched for the workload's kind, name and namespace",
    }[locate.Method(method)]


def pause_state(record: WorkloadRecord, config: Config) -> dict[str, Any]:
    """The Deployment's pause-period annotations and ``spec.paused``, as read from it."""
    if record.ref.kind != "Deployment":
        return {}
    keys = config.keys
    period = record.annotations.get(keys.pause_period)
    state: dict[str, Any] = {
        "paused": bool((record.raw.get("spec") or {}).get("paused")),
        "period": period,
        "paused_at": record.annotations.get(keys.paused_at),
    }
    if period is not None:
        try:
            state["period_seconds"] = parse_duration(period)
        except ValueError as exc:
            state["error"] = f"{keys.pause_period}: {exc}"
    return state


def timing_state(record: WorkloadRecord, config: Config, now: float,
                 namespace_window: str | None = None) -> dict[str, Any]:
    """When the workload may reload: its maintenance window (open now, or when it opens; chosen by
    its annotation, else ``namespace_window``, its namespace's) and, when its annotation sets one,
    its own storm brake (else the flag's applies, not repeated)."""
    state: dict[str, Any] = {}
    windows = config.runtime.reload_windows
    if windows.windows:
        try:
            window = choose_window(windows, record.annotations.get(config.keys.reload_window),
                                   namespace_window)
        except ConfigError as exc:
            state["window_error"] = str(exc)
        else:
            state["window"] = window.describe(now) if window is not None else "none"
    brake = record.annotations.get(config.keys.max_reloads)
    if brake is None:
        return state
    try:
        rate = parse_rate(brake)
        state["max_reloads"] = f"{rate} (annotation)" if rate is not None else "no limit (annotation)"
    except ValueError as exc:
        state["max_reloads"] = f"{config.runtime.max_reloads_per_workload} (annotation ignored: {exc})"
    return state


def rollout_state(record: WorkloadRecord, config: Config, now: float) -> dict[str, Any]:
    """With a rollout budget: the workload's priority and its last controlled rollout."""
    rollouts = config.rollouts
    if not rollouts.budgeted:
        return {}
    state: dict[str, Any] = {"priority": 0}
    raw = record.annotations.get(PRIORITY_ANNOTATION)
    if raw is not None:
        try:
            state["priority"] = parse_priority(raw)
        except ValueError as exc:
            state["error"] = f"{PRIORITY_ANNOTATION}: {exc}; priority 0"
    marker = parse_marker(record.annotations.get(MARKER_ANNOTATION))
    if marker is not None and record.rollout is not None:
        status = with_deadline(record.rollout, now - marker.at, rollouts.timeout)
        state.update(started_at=marker.at, changes=sorted(shown_change(c) for c in marker.changes),
                     phase=status.phase.value,
                     reason=status.reason, message=status.message,
                     holds=status.phase is Phase.FAILED and rollouts.hold_on_failure)
    return state


# --- I/O: reading the cluster and the repository --------------------------------------


def pending_state(api: KubeApi, config: Config, record: WorkloadRecord) -> dict[str, Any]:
    """With a rollout budget: the changes this workload has not been given yet — held by a
    failed rollout (which, since when) or waiting for the budget — from the census of its
    namespace (a source reloads only workloads of its own namespace, so the failed rollout
    that holds a change is there too)."""
    from gitops_reloader.rollout.census import State, entries_of
    from gitops_reloader.status import read_census

    report = read_census(api, config, namespace=record.ref.namespace, git=False)
    pending = [{"change": change, "state": entry.state.value, "wave": entry.wave, "since": entry.since,
                "held_by": list(entry.held_by), "reason": entry.reason, "message": entry.message}
               for change, entry in entries_of(record.ref, report)
               if entry.state in (State.HELD, State.WAITING)]
    return {"pending": pending, "in_use_in_namespace": report.budget["in_use"]}


def _find_adapter(kind: str, config: Config) -> tuple[WorkloadAdapter | None, WorkloadAdapter | None]:
    """(the enabled adapter for ``kind``, the adapter if every type were enabled)."""
    behaviour = config.behaviour
    # --is-openshift unset: ``run`` discovers the group; a DeploymentConfig we can read proves it.
    enabled = adapters_for(argo_rollouts=behaviour.is_argo_rollouts,
                           openshift=behaviour.is_openshift is not False,
                           ignored=config.filters.ignored_workload_types, kinds=behaviour.kinds)
    everything = adapters_for(argo_rollouts=True, openshift=True, kinds=behaviour.kinds)
    by_lower = {k.lower(): k for k in everything} | {k: v for k, v in _SHORT_NAMES.items()}
    for key, adapter in everything.items():  # clonesets.apps.kruise.io, and cloneset when unique
        by_lower.setdefault(f"{adapter.resource.plural}.{adapter.resource.group}", key)
        by_lower.setdefault(adapter.resource.kind.lower(), key)
    text = kind.lower()
    name = by_lower.get(text) or by_lower.get(text.removesuffix("s"))
    if name is None:
        return None, None
    return enabled.get(name), everything[name]


def _names(api: KubeApi, resource: ResourceKind, namespace: str | None, label_selector: str) -> set[str]:
    """The names of every object of ``resource`` the selector lists (all pages)."""
    names: set[str] = set()
    token = ""
    while True:
        page = api.list(resource, namespace=namespace, label_selector=label_selector,
                        limit=_PAGE, continue_token=token)
        names.update(str((item.get("metadata") or {}).get("name")) for item in page.get("items") or [])
        token = str((page.get("metadata") or {}).get("continue") or "")
        if not token:
            return names


def _filtered(api: KubeApi, config: Config, kind: SourceKind, namespace: str,
              name: str) -> tuple[str, str] | None:
    """Why the controller's informers never see this source (None: they do)."""
    filters = config.filters
    if (filters.ignore_configmaps and kind is SourceKind.CONFIGMAP) or (
            filters.ignore_secrets and kind is SourceKind.SECRET):
        return "resource-type-ignored", f"resource type ignored: --resources-to-ignore ({kind.plural})"
    if kind is SourceKind.SECRETPROVIDERCLASS and not config.behaviour.enable_csi_integration:
        return "csi-integration-off", "SecretProviderClass changes reload only with --enable-csi-integration"
    if filters.namespaces and namespace not in filters.namespaces:
        return "namespace-not-watched", f"namespace {namespace} is not in --namespaces"
    if namespace in filters.namespaces_to_ignore:
        return "namespace-ignored", f"namespace {namespace} is in --namespaces-to-ignore"
    if not filters.shard.owns(namespace):
        shard = filters.shard
        owner = shard_of(namespace, shard.count)
        return "namespace-other-shard", (f"namespace {namespace} belongs to shard {owner} of {shard.count}, "
                                         f"this is --shard-index {shard.index}")
    selector = filters.namespace_selector
    if selector and namespace not in _names(api, NAMESPACES, None, selector):
        why = f"namespace {namespace} is not selected by --namespace-selector {selector!r}"
        return "namespace-not-selected", why
    labels = filters.resource_label_selector
    if labels and kind is not SourceKind.SECRETPROVIDERCLASS and name not in _names(
            api, RESOURCES[kind], namespace, labels):
        return "label-selector", f"labels do not match --resource-label-selector {labels!r}"
    return None


def _latest_spc_hash(api: KubeApi, namespace: str, name: str) -> str:
    """The hash the most recently written pod status of class ``name`` reports ("" if none)."""
    latest: tuple[int, str] = (-1, "")
    token = ""
    while True:
        page = api.list(SECRETPROVIDERCLASSPODSTATUSES, namespace=namespace, limit=_PAGE,
                        continue_token=token)
        for item in page.get("items") or []:
            status = pod_status_record(item)
            version = str((item.get("metadata") or {}).get("resourceVersion") or "0")
            if status.spc == name and version.isdigit() and int(version) > latest[0]:
                latest = (int(version), status.hash)
        token = str((page.get("metadata") or {}).get("continue") or "")
        if not token:
            return latest[1]


def _type_ignored(config: Config, kind: SourceKind, raw: Mapping[str, Any]) -> tuple[str, str] | None:
    """A Secret whose ``type`` the informers exclude with ``--ignore-secret-types``."""
    secret_type = str(raw.get("type") or "")
    if kind is SourceKind.SECRET and secret_type in config.filters.ignore_secret_types:
        return "secret-type-ignored", f"Secret type {secret_type} is in --ignore-secret-types"
    return None


def _candidates(api: KubeApi, record: WorkloadRecord, view: policy.WorkloadView, config: Config,
                extra: Sequence[tuple[SourceKind, str, str]]) -> list[tuple[SourceKind, str, str, bool]]:
    """(kind, namespace, name, listed-only) of every source worth explaining."""
    namespace = record.ref.namespace
    out: dict[tuple[SourceKind, str, str], bool] = {}
    explicit = policy.has_explicit_lists(view, config.keys)
    annotations = policy.effective_annotations(view, config.keys)
    excludes = (config.keys.configmaps_exclude, config.keys.secrets_exclude)
    for kind in SourceKind:
        for name in sorted(record.refs.names(kind)):
            out[(kind, namespace, name)] = False
        if kind is SourceKind.SECRETPROVIDERCLASS and not config.behaviour.enable_csi_integration:
            continue  # referenced ones are reported (not watched); nothing is listed
        if explicit or any(annotations.get(key) for key in excludes):
            try:
                names = _names(api, RESOURCES[kind], namespace, "")
            except KubeNotFound:  # the CSI API is not served
                names = set()
            for name in sorted(names):
                out.setdefault((kind, namespace, name), True)
    for item in extra:
        out[item] = False
    return [(*key, listed) for key, listed in out.items()]


def _shown_hash(kind: SourceKind, value: str) -> str:
    """A ConfigMap's hash as is; a Secret's is never printed (it derives from secret data)."""
    return HIDDEN if kind is SourceKind.SECRET and value else value


def _source_report(api: KubeApi, config: Config, record: WorkloadRecord, view: policy.WorkloadView,
                   sinks: Mapping[str, Any], sink: str | None,
                   kind: SourceKind, namespace: str, name: str) -> SourceReport:
    referenced = namespace == record.ref.namespace and name in record.refs.names(kind)
    report = SourceReport(kind.kube_kind, namespace, name, False, "", "", referenced)
    try:
        raw = api.get(RESOURCES[kind], namespace, name)
    except KubeNotFound:
        report.reason, report.rule = "not-found", f"{kind.kube_kind} {namespace}/{name} does not exist"
        return report
    keys = (config.keys.ignore, config.keys.match)
    if kind is SourceKind.SECRETPROVIDERCLASS:
        enabled = config.behaviour.enable_csi_integration
        meta = spc_record(raw, keys).replace(hash=_latest_spc_hash(api, namespace, name) if enabled else "")
    else:
        meta = source_transform(kind, keys, lambda: True)(raw)
    mode, _ = usedkeys.reload_on(record.annotations, record.template_annotations, config.keys.reload_on,
                                 config.behaviour.reload_on)
    scope = usedkeys.key_scope(mode, record.refs, meta.ref) if referenced else None
    report.keys = sorted(scope) if scope is not None else None
    data_hash = usedkeys.source_hash(meta, scope)
    report.current_hash = _shown_hash(kind, data_hash)
    decision = policy.decide(view, meta, policy.PolicyOptions(config.keys, config.behaviour.auto_reload_all))
    report.policy = decision.reason.value
    report.invalid_annotations = invalid_annotations(decision)
    filtered = _filtered(api, config, kind, namespace, name) or _type_ignored(config, kind, raw)
    if filtered is not None:
        report.reason, report.rule = filtered
        return report
    report.tracked, report.reason, report.rule = decision.reload, decision.reason.value, rule_text(
        decision, kind, config)
    if decision.reload:
        report.container = decision.container
        if sink == SinkName.ENV_VARS:
            report.env_var = env_var_name(name, kind)
        recorder = getattr(sinks.get(sink or ""), "recorded_hash", None)
        written = written_record(recorder, record, meta.ref, decision.container)
        recorded, report.synced = syncs.runs_with(record.annotations, meta.ref, written, recorder is not None,
                                                  record.template_fingerprint)
        if recorded is not None:
            report.recorded_hash = _shown_hash(kind, recorded)
            report.out_of_date = recorded not in {data_hash, meta.hash}
    return report


def _namespace_window(api: KubeApi, config: Config, namespace: str) -> str | None:
    """The namespace's ``reload-window`` annotation (None: none, no window configured, or the
    namespace cannot be read)."""
    if not config.runtime.reload_windows.windows:
        return None
    try:
        raw = api.get(NAMESPACES, None, namespace)
    except ReloaderError:
        return None
    return ((raw.get("metadata") or {}).get("annotations") or {}).get(config.keys.reload_window) or None


def _without_credentials(url: str) -> str:
    """``url`` without any ``user:password@`` part (the git config may hold one)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _matched(git_config: GitConfig, repo: RepositoryConfig, source_url: str) -> str:
    """Which spelling of ``repo`` the Application / GitRepository / annotation URL matched."""
    spelling = git_config.spelling(repo, source_url)
    which = f"alias {spelling}" if spelling and spelling != repo.url else "url"
    return f"{display_url(source_url.strip())} (as its {which})"


def _manifest(api: KubeApi, config: Config, record: WorkloadRecord, sink: SinkName) -> dict[str, Any]:
    """Where the git / pull-request sink would write, found as the sink finds it."""
    from gitops_reloader.gitops.gitconfig import load_git_config
    from gitops_reloader.gitops.locate import Locator
    from gitops_reloader.sinks.git import ManifestPlanner
    from gitops_reloader.sinks.gitwiring import open_repositories

    if not config.gitops.config_file:
        return {"refused": "no --git-config: the git and pull-request sinks are not configured"}
    git_config = load_git_config(config.gitops.config_file)
    locator = Locator(git_config, api)
    try:
        resolution = locator.resolve(record)
    except ReloaderError as exc:
        return {"refused": str(exc)}
    out: dict[str, Any] = {"repository": resolution.repo_name, "method": resolution.method.value,
                           "rule": method_text(resolution.method),
                           "found_by": [str(t) for t in resolution.refresh], "notes": list(resolution.notes)}
    repo_config = git_config.get(resolution.repo_name)
    if repo_config is not None:
        out.update(url=_without_credentials(repo_config.url), branch=repo_config.branch,
                   aliases=list(git_config.aliases(repo_config)))
        if resolution.source_url:
            out["matched"] = _matched(git_config, repo_config, resolution.source_url)
        if sink is SinkName.PULL_REQUEST:
            try:
                require_pull_request_settings(git_config, record.ref, repo_config.name)
            except PullRequestNotConfigured as exc:
                out["refused"] = str(exc)
    with tempfile.TemporaryDirectory(prefix="gitops-reloader-explain-") as cache:
        handles, unusable = open_repositories(git_config, cache)
        if resolution.repo_name in unusable:  # the start-up checks of its mounts (key, known_hosts, token)
            problem = unusable[resolution.repo_name]
            return {**out, "refused": f"repository {resolution.repo_name} is unusable ({problem.reason}): "
                                      f"{problem}"}
        handle = handles.get(resolution.repo_name)
        if handle is None:
            return {**out, "refused": f"repository {resolution.repo_name} is not configured"}
        request = ReloadRequest(record.ref, record, (), 0)
        try:
            handle.sync()
            location = locator.locate(record, resolution, handle.index, confirm=True)
            ManifestPlanner.check_location(handle, request, location)
            value = ManifestPlanner.committed_value(handle, request, location)
            out["emission"] = _last_emission(api, config, git_config.argocd_namespace, handles, request,
                                             location, value, sink)
        except ReloaderError as exc:
            return {**out, "refused": str(exc)}
    out.update(path=location.path, document=location.doc_index,
               yaml_path=list(location.yaml_path) if location.yaml_path is not None else None)
    return out


def _last_emission(api: KubeApi, config: Config, argocd_namespace: str, handles: Mapping[str, Any],
                   request: ReloadRequest, location: Any, value: str | None,
                   sink: SinkName) -> dict[str, Any] | None:
    """Where the value committed at ``location`` stands: the follow-up's verdict, read once."""
    from gitops_reloader.control.follower import Follower

    if not value:
        return None
    follower = Follower(api=api, repositories=handles, metrics=Metrics(CollectorRegistry()), recorder=None,
                        argocd_namespace=argocd_namespace, timeout=config.gitops.apply_timeout,
                        interval=config.gitops.follow_interval)
    try:
        entry = follower.explain(request, location, value, sink=sink.value)
    except ReloaderError as exc:
        return {"error": str(exc)}
    if entry is None:
        return None
    return {"commit": entry.commit, "stage": entry.state.stage.value, "reason": entry.state.reason,
            "message": entry.state.message,
            "engine": f"{entry.engine.resource.kind} {entry.engine.namespace}/{entry.engine.name}"
            if entry.engine else None}


def restart_state(api: KubeApi, config: Config, adapter: WorkloadAdapter, raw: Mapping[str, Any],
                  record: WorkloadRecord, sink: str | None) -> str:
    """How the workload's pods restart when its template write does not roll them (eviction)."""
    wanted, why = eviction_wanted(config, record)
    if not wanted:
        if why == "--eviction=off":
            return ("its pods restart only through eviction, and --eviction=off: a reload restarts none"
                    if not record.template_path else f"{STRATEGY_ANNOTATION} is set, but --eviction=off: "
                    "the write restarts no pod")
        if why:
            return f"{STRATEGY_ANNOTATION} ignored: {why}"
        return ("" if record.rolls_on_write else
                "the template write restarts no pod (OnDelete); --eviction=on-delete would evict them")
    if sink not in EVICTING_SINKS:
        return (f"eviction wanted ({why}), but it follows live writes only: the {sink} sink's change "
                "restarts no pod")
    try:
        preview = restart_preview(PodFinder(api), adapter, raw, config.rollouts.evictions_at_once)
    except KubeError as exc:
        preview = f"pods not readable ({exc.status or 'no answer'})"
    return f"{preview} ({why})"


def explain(api: KubeApi, config: Config, kind: str, namespace: str, name: str, *,
            extra: Sequence[tuple[SourceKind, str, str]] = ()) -> Explanation:
    """Read the workload and its sources and explain each decision (reads only)."""
    adapter, any_adapter = _find_adapter(kind, config)
    if any_adapter is None:
        raise ConfigError(f"unknown workload kind {kind!r}")
    chosen = adapter or any_adapter
    if chosen.discovered:  # the version the server serves (a row's fallback, e.g. CloneSet v1alpha1)
        chosen.resource = chosen.served_resource(api) or chosen.resource
    raw = api.get(chosen.resource, namespace, name)
    fetched = copy.deepcopy(raw)  # the record trims it (managedFields: who wrote the eviction record)
    record = chosen.record(raw)
    result = Explanation(record.ref.kind, namespace, name, watched=adapter is not None)
    if adapter is None:
        result.note = f"workload type ignored: --ignored-workload-types excludes {record.ref.kind}s"
    elif config.filters.namespaces and namespace not in config.filters.namespaces:
        result.watched, result.note = False, f"namespace {namespace} is not in --namespaces"
    elif namespace in config.filters.namespaces_to_ignore:
        result.watched, result.note = False, f"namespace {namespace} is in --namespaces-to-ignore"
    elif refused := (adapter or any_adapter).refusal(record):
        result.watched, result.note = False, f"every reload is refused ({refused[0]}): {refused[1]}"
    adapters = {record.ref.kind: adapter or any_adapter}
    sinks = build_live_sinks(config, api, adapters, metrics=Metrics(CollectorRegistry()))
    sink, result.sink_reason = choose_sink(config, record)
    result.sink = str(sink) if sink is not None else None
    if sink is SinkName.ANNOTATIONS:
        result.drift = annotations_sink_drift(fetched, record.template_path if record.has_template else None)
    result.restart = restart_state(api, config, chosen, fetched, record, result.sink)
    result.pause = pause_state(record, config)
    result.timing = timing_state(record, config, time.time(), _namespace_window(api, config, namespace))
    mode, invalid = usedkeys.reload_on(record.annotations, record.template_annotations,
                                       config.keys.reload_on, config.behaviour.reload_on)
    result.reload_on = mode.value
    if invalid is not None:
        result.reload_on += f" (annotation {config.keys.reload_on}={invalid!r} names no mode: ignored)"
    result.rollout = rollout_state(record, config, time.time())
    if result.rollout and result.watched:
        result.rollout.update(pending_state(api, config, record))
    view = policy.WorkloadView(record.ref, record.annotations, record.template_annotations, record.refs)
    try:
        for source_kind, source_ns, source_name, listed in _candidates(api, record, view, config, extra):
            report = _source_report(api, config, record, view, sinks, sink,
                                    source_kind, source_ns, source_name)
            if listed and report.policy not in (policy.Reason.EXPLICIT, policy.Reason.EXCLUDED):
                continue  # in the namespace, neither referenced nor named: not worth a line
            if not result.watched and report.tracked:
                report.tracked, report.reason, report.rule = False, "workload-not-watched", result.note
            result.sources.append(report)
    finally:
        for built in sinks.values():
            close = getattr(built, "close", None)  # the webhook sink holds an HTTP client
            if close is not None:
                close()
    if sink in (SinkName.GIT, SinkName.PULL_REQUEST):
        result.manifest = _manifest(api, config, record, sink)
    return result


# --- output --------------------------------------------------------------------------


def _hash_line(report: SourceReport, sink: str | None) -> str:
    def short(value: str | None) -> str:
        return value if value == HIDDEN else (value or "")[:12]

    current = short(report.current_hash)
    if report.synced:
        state = "up to date" if not report.out_of_date else "out of date"
        return (f"hash: {short(report.recorded_hash)}, brought by a sync or the last write "
                f"({syncs.SYNCED_ANNOTATION}), current {current}: {state}")
    if sink not in (SinkName.ENV_VARS, SinkName.ANNOTATIONS):
        return f"hash: current {current} (the {sink or 'unknown'} sink keeps no per-source hash on it)"
    if report.recorded_hash is None:
        return f"hash: current {current}, nothing recorded yet (the next change reloads)"
    if report.out_of_date:
        return (f"hash: recorded {short(report.recorded_hash)}, current {current}: out of date\n"
                "      (reloaded by the next change, the slow resync (--resync-period) "
                "or a start with --sync-after-restart)")
    return f"hash: recorded {short(report.recorded_hash)} = current: up to date"


def _rollout_lines(rollout: Mapping[str, Any]) -> list[str]:
    if not rollout:
        return []
    lines = [f"  rollout priority: {rollout['priority']}"
             + (f" ({rollout['error']})" if rollout.get("error") else "")]
    if "phase" in rollout:
        lines.append(f"  last controlled rollout: {rollout['phase']} [{rollout['reason']}], started "
                     f"{rfc3339(rollout['started_at'])} for {', '.join(rollout['changes'])}")
        if rollout["holds"]:
            lines.append("    it failed: the not-yet-started reloads of the same change are held "
                         "until the source changes again or this workload becomes healthy")
    for item in rollout.get("pending") or ():
        since = f" since {rfc3339(item['since'])}" if item["since"] is not None else ""
        if item["state"] == "held":
            lines.append(f"  HELD: {item['change']} is held by the failed rollout of "
                         f"{', '.join(item['held_by'])}{since}; a new change of the source, or that "
                         "workload becoming healthy, releases it")
        else:
            wave = f", wave {item['wave']} in this namespace" if item["wave"] is not None else ""
            lines.append(f"  WAITING: {item['change']} waits for the rollout budget "
                         f"({rollout['in_use_in_namespace']} rolling in this namespace{wave})")
    return lines


def render_text(result: Explanation) -> str:
    """The explanation as terminal text."""
    lines = [f"{result.kind} {result.namespace}/{result.name}"]
    if result.note:
        lines.append(f"  NOT WATCHED: {result.note}")
    lines.append(f"  sink: {result.sink or 'none'} ({result.sink_reason})")
    if result.drift:
        lines.append(f"  drift: {result.drift}")
    if result.restart:
        lines.append(f"  restart: {result.restart}")
    if result.reload_on and result.reload_on != ReloadOn.ANY_CHANGE:
        lines.append(f"  reload on: {result.reload_on}")
    pause = result.pause
    if pause:
        if pause.get("period") is None:
            lines.append(f"  pause: no pause period{'; spec.paused is true' if pause['paused'] else ''}")
        else:
            state = f"paused since {pause['paused_at']}" if pause.get("paused_at") else "not paused now"
            lines.append(f"  pause: period {pause['period']}, {state}"
                         + (f" ({pause['error']})" if pause.get("error") else ""))
    timing = result.timing
    if "window" in timing:
        lines.append(f"  maintenance window: {timing['window']}")
    if "window_error" in timing:
        lines.append(f"  maintenance window: {timing['window_error']}; reloads wait")
    if "max_reloads" in timing:
        lines.append(f"  storm brake: at most {timing['max_reloads']} reloads")
    lines.extend(_rollout_lines(result.rollout))
    if not result.sources:
        lines.append("  no ConfigMap or Secret referenced or named")
    for src in result.sources:
        verdict = "tracked" if src.tracked else "not tracked"
        lines.append(f"  {src.kind} {src.namespace}/{src.name}: {verdict} [{src.reason}]")
        lines.append(f"    rule: {src.rule}")
        if src.tracked:
            where = src.container or "none (the pod has no regular container)"
            lines.append(f"    container: {where}" + (f", env {src.env_var}" if src.env_var else ""))
            if src.keys is not None:
                lines.append(f"    keys: {', '.join(src.keys) or '(none)'} (used-keys: a change of "
                             "another key does not reload)")
            lines.append(f"    {_hash_line(src, result.sink)}")
        lines.extend(f"    invalid annotation: {text}" for text in src.invalid_annotations)
    if result.manifest is not None:
        found = result.manifest
        lines.append("  manifest:")
        for key in ("repository", "url", "aliases", "matched", "branch", "path", "document", "yaml_path",
                    "rule"):
            if key == "aliases":
                if found.get(key):
                    lines.append(f"    aliases: {', '.join(found[key])}")
            elif found.get(key) is not None:
                lines.append(f"    {key}: {found[key]}")
        if found.get("found_by"):
            lines.append(f"    via: {', '.join(found['found_by'])}")
        lines.extend(f"    note: {note}" for note in found.get("notes") or ())
        if found.get("refused"):
            lines.append(f"    REFUSED: {found['refused']}")
        emission = found.get("emission")
        if emission and emission.get("error"):
            lines.append(f"  last emission: unknown: {emission['error']}")
        elif emission:
            why = f" ({emission['reason']})" if emission["reason"] else ""
            lines.append(f"  last emission: commit {emission['commit'][:12]}: {emission['stage']}{why}")
            lines.append(f"    engine: {emission['engine'] or 'none found on the workload'}")
            if emission["message"]:
                lines.append(f"    {emission['message']}")
    return "\n".join(lines)


def _source_arg(text: str, namespace: str) -> tuple[SourceKind, str, str]:
    parts = text.split("/")
    kinds = {"configmap": SourceKind.CONFIGMAP, "cm": SourceKind.CONFIGMAP, "secret": SourceKind.SECRET,
             "secretproviderclass": SourceKind.SECRETPROVIDERCLASS}
    if len(parts) not in (2, 3) or parts[0].lower() not in kinds or not all(parts):
        raise ConfigError(f"--source {text!r}: expected "
                          "configmap|secret|secretproviderclass/[NAMESPACE/]NAME")
    return kinds[parts[0].lower()], parts[1] if len(parts) == 3 else namespace, parts[-1]


def main(argv: Sequence[str]) -> int:
    """``gitops-reloader explain KIND/NAME -n NAMESPACE [--output json] [run flags]``."""
    from gitops_reloader.kube.client import load_api_client

    if any(arg in ("-h", "--help") for arg in argv):
        print(USAGE)
        return 0
    parser = argparse.ArgumentParser(prog="gitops-reloader explain", allow_abbrev=False, add_help=False)
    parser.add_argument("workload")
    parser.add_argument("-n", "--namespace", default="default")
    parser.add_argument("--output", "-o", choices=("text", "json"), default="text")
    parser.add_argument("--source", action="append", default=[])
    args, rest = parser.parse_known_args(list(argv))
    kind, _, name = args.workload.partition("/")
    try:
        if not kind or not name:
            raise ConfigError(f"expected KIND/NAME, got {args.workload!r}")
        config = load_config(rest)
        extra = [_source_arg(text, args.namespace) for text in args.source]
        api = KubeApi(load_api_client(config.runtime.kubeconfig))
        result = explain(api, config, kind, args.namespace, name, extra=extra)
    except ConfigError as exc:
        print(f"gitops-reloader explain: {exc}", file=sys.stderr)
        return 2
    except KubeNotFound:
        print(f"gitops-reloader explain: {kind} {args.namespace}/{name} not found", file=sys.stderr)
        return 1
    except ReloaderError as exc:
        print(f"gitops-reloader explain: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(asdict(result), indent=2) if args.output == "json" else render_text(result))
    return 0
