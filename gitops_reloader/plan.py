"""``gitops-reloader plan``: what one ConfigMap/Secret change would make the controller write.

Given a source (``--configmap NS/NAME`` or ``--secret NS/NAME``) and its new data
(``--from-literal KEY=VALUE`` / ``--from-file [KEY=]PATH``, replacing the whole data as
``kubectl create --dry-run | kubectl apply`` would; neither: "as if it changed", a
hypothetical hash), the command answers with the controller's own code, never a copy:

- the :class:`~gitops_reloader.controller.Controller` is built from the same flags as
  ``run`` and its caches synced (list and watch only, no workers), and
  :meth:`~gitops_reloader.controller.Controller.requests_for_change` picks the
  workloads (index candidates, :mod:`~gitops_reloader.policy`, sink choice);
- env-vars / annotations: the sinks' own ``edit_for`` and the kind adapter's
  strategic-merge body;
- git / pull-request: the sinks' :class:`~gitops_reloader.sinks.git.ManifestPlanner` on
  fresh clones in a temporary directory (deleted afterwards; nothing committed or
  pushed), ``git diff`` of the edited work tree, the commit message, and for pull
  requests the branch, title and body (against the base branch: an open pull request's
  earlier entries are not read).

With a rollout budget among the flags, each write the budget gates says the wave it would
start in (:func:`~gitops_reloader.rollout.census.assign_waves`, the waves' own order).

Contracts: **writes nothing** — no API write (the digest-key Secret is read, never
created), no push, no PR host call. **Secrets stay secret** — every Secret hash in the
output is replaced by ``<secret-hash>``; git diffs carry only keyed digests. **Exit code**
(as ``diff``): 0 nothing would be written, 1 something would, 2 bad flags or an error.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import hashlib
import json
import logging
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from gitops_reloader import usedkeys
from gitops_reloader.config import Config, load_config
from gitops_reloader.control.caches import source_transform
from gitops_reloader.control.evictor import PodFinder, restart_preview
from gitops_reloader.control.waves import gates
from gitops_reloader.control.writechecks import EVICTING_SINKS
from gitops_reloader.controller import Controller
from gitops_reloader.errors import ConfigError, KubeError, ReloaderError
from gitops_reloader.gitops import prpolicy
from gitops_reloader.gitops.digestkey import DigestKey, read_digest_key
from gitops_reloader.gitops.handle import RepositoryHandle
from gitops_reloader.gitops.locate import GIT_TARGET_ANNOTATION, Resolution
from gitops_reloader.hashing import every_key_changed
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.client import load_api_client
from gitops_reloader.kube.resources import CONFIGMAPS, SECRETS
from gitops_reloader.kube.workloads import WorkloadRecord, adapters_for
from gitops_reloader.model import (
    ObjectRef,
    OutcomeStatus,
    ReloadRequest,
    SinkName,
    SourceKind,
    SourceMeta,
    SourceRef,
)
from gitops_reloader.observability.logging import configure_logging
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.rollout.budget import Budget, Waiting, priority_of
from gitops_reloader.rollout.census import assign_waves
from gitops_reloader.rollout.eviction import EVICTION_ANNOTATION
from gitops_reloader.sinks import build_live_sinks
from gitops_reloader.sinks.annotations import AnnotationsSink, describe_annotation
from gitops_reloader.sinks.base import Sink
from gitops_reloader.sinks.envvars import EnvVarsSink
from gitops_reloader.sinks.eviction import EvictionSink
from gitops_reloader.sinks.git import EditPlan, GitSink, failure_reason
from gitops_reloader.sinks.gitwiring import build_git_sink, build_pull_request_sink
from gitops_reloader.sinks.pullrequest import PullRequestSink
from gitops_reloader.sinks.webhook import WebhookSink

__all__ = ["PlanArgs", "RepositoryPlan", "WorkloadPlan", "main", "new_source", "parse_args", "plan_change",
           "redact", "render", "render_json"]

log = logging.getLogger(__name__)

NOTHING, CHANGES, TROUBLE = 0, 1, 2
SECRET_MASK = "<secret-hash>"
MAX_DATA_BYTES = 1024 * 1024  # what the API server stores in one object
_PLACEHOLDER_KEY = DigestKey(b"gitops-reloader plan: no digest key yet")


@dataclass(frozen=True, slots=True)
class PlanArgs:
    """The source to change and its new data (None: "as if it changed")."""

    kind: SourceKind
    namespace: str
    name: str
    data: Mapping[str, bytes] | None
    output: str = "text"


@dataclass(slots=True)
class WorkloadPlan:
    """What one workload's sink would write."""

    key: str
    sink: str
    sources: list[str]
    status: str  # "would-write", "already-current", "skipped"
    detail: str = ""
    patch: Any = None
    wave: int | None = None
    """With a rollout budget: the wave this write would start in (1: first); None: not gated."""
    window: str = ""
    """Why this write would wait, from its maintenance window ("waiting for window W, opens at
    T (zone)"; an unknown window name holds it); "" when it would go ahead now."""
    restart: str = ""
    """The eviction that would follow the write ("evict 3 pods, one at a time, PDB db allows 1
    now"); "" when the write itself rolls the pods."""


@dataclass(slots=True)
class RepositoryPlan:
    """One commit the git sink (or one branch the pull-request sink) would make."""

    sink: str
    repository: str
    branch: str
    base: str
    diff: str
    message: str
    workloads: list[str] = field(default_factory=list)
    title: str = ""
    body: str = ""


# --------------------------------------------------------------------------- arguments


def _source_arg(text: str) -> tuple[str, str]:
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAMESPACE/NAME")
    return namespace, name


def parse_args(argv: Sequence[str]) -> tuple[PlanArgs, list[str]]:
    """Split ``plan``'s own flags from the ``run`` flags (returned for :func:`load_config`)."""
    parser = argparse.ArgumentParser(prog="gitops-reloader plan", allow_abbrev=False, add_help=False)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--configmap", type=_source_arg)
    which.add_argument("--secret", type=_source_arg)
    parser.add_argument("--from-literal", action="append", default=[])
    parser.add_argument("--from-file", action="append", default=[])
    parser.add_argument("--output", "-o", choices=("text", "json"), default="text")
    try:
        ns, rest = parser.parse_known_args(list(argv))
    except SystemExit:
        raise ConfigError("invalid plan flags (see gitops-reloader plan --help)") from None
    if ns.configmap is None and ns.secret is None:
        raise ConfigError("plan needs --configmap NAMESPACE/NAME or --secret NAMESPACE/NAME")
    kind = SourceKind.CONFIGMAP if ns.configmap is not None else SourceKind.SECRET
    namespace, name = ns.configmap or ns.secret
    data: dict[str, bytes] | None = None
    if ns.from_literal or ns.from_file:
        data = {}
        for literal in ns.from_literal:
            key, sep, value = literal.partition("=")
            if not sep or not key:
                raise ConfigError(f"--from-literal {literal!r}: expected KEY=VALUE")
            data[key] = value.encode("utf-8")
        for spec in ns.from_file:
            key, sep, path = spec.partition("=")
            if not sep:
                key, path = Path(spec).name, spec
            try:
                data[key] = _read_bounded(Path(path))
            except OSError as exc:
                raise ConfigError(f"--from-file {spec!r}: {exc.strerror or exc}") from None
        if sum(len(v) for v in data.values()) > MAX_DATA_BYTES:
            raise ConfigError(f"new data is over {MAX_DATA_BYTES} bytes; the API server would refuse it")
    return PlanArgs(kind, namespace, name, data, ns.output), rest


def _read_bounded(path: Path) -> bytes:
    with path.open("rb") as handle:
        data = handle.read(MAX_DATA_BYTES + 1)
    if len(data) > MAX_DATA_BYTES:
        raise ConfigError(f"--from-file {path}: over {MAX_DATA_BYTES} bytes")
    return data


# --------------------------------------------------------------------------- the change (pure)


def new_source(kind: SourceKind, current: Mapping[str, Any],
               data: Mapping[str, bytes] | None) -> dict[str, Any]:
    """The object as it would be after the change: ``data`` replaces all of its data.

    ConfigMap: UTF-8 values in ``data``, others in ``binaryData`` (base64); Secret: all
    in ``data`` (base64). ``data`` None ("as if it changed") returns ``current`` as is.
    """
    after = dict(current)
    if data is None:
        return after
    for drop in ("data", "binaryData", "stringData"):
        after.pop(drop, None)
    if kind is SourceKind.SECRET:
        after["data"] = {k: base64.b64encode(v).decode("ascii") for k, v in data.items()}
        return after
    text: dict[str, str] = {}
    binary: dict[str, str] = {}
    for key, value in data.items():
        try:
            text[key] = value.decode("utf-8")
        except UnicodeDecodeError:
            binary[key] = base64.b64encode(value).decode("ascii")
    after["data"] = text
    if binary:
        after["binaryData"] = binary
    return after


def changed_meta(kind: SourceKind, config: Config, before: Mapping[str, Any],
                 after: Mapping[str, Any], *, as_if: bool) -> tuple[SourceMeta, SourceMeta]:
    """(current, new) metas through the informers' own transform; ``as_if``: a made-up new hash."""
    transform = source_transform(kind, (config.keys.ignore, config.keys.match), lambda: True)
    old, new = transform(dict(before)), transform(dict(after))
    if as_if:
        made_up = hashlib.sha1(b"gitops-reloader plan\0" + old.hash.encode()).hexdigest()
        new = new.replace(hash=made_up, fingerprint=made_up if kind is SourceKind.SECRET else "",
                          key_digests=every_key_changed(new.key_digests))
    return old, new


def redact(text: str, secret_hashes: Sequence[str]) -> str:
    """``text`` with every Secret hash replaced by :data:`SECRET_MASK`."""
    for digest in secret_hashes:
        if digest:
            text = text.replace(digest, SECRET_MASK)
    return text


# --------------------------------------------------------------------------- sinks, without writing


def _sources(request: ReloadRequest) -> list[str]:
    return [str(item.source.ref) for item in request.items]


def live_plan(sink: Sink, request: ReloadRequest, controller: Controller) -> WorkloadPlan:
    """What the env-vars / annotations / webhook sink would send for ``request``."""
    key, sources = request.ref.key, _sources(request)
    record = request.workload
    if isinstance(sink, EnvVarsSink | AnnotationsSink):
        edit = sink.edit_for(request)
        if isinstance(sink, EnvVarsSink):
            detail = ", ".join(f"{c}: {n}={v}" for c, n, v in edit.set_env) or "env vars removed"
        else:
            detail = describe_annotation(edit) if edit else ""
        if not edit:
            return WorkloadPlan(key, sink.name, sources, "already-current", "the workload records this hash")
        adapter = controller.adapters[record.ref.kind]
        pause = sink.patcher.pause_patch(record, request.observed_at)
        if pause is not None and (record.raw.get("spec") or {}).get("paused") is True:
            pause = None  # an already paused Deployment keeps its pause (DeploymentAdapter.apply)
        body = adapter.strategic_body(edit, pause)
        where = f"PATCH {adapter.resource.plural} {record.ref.namespace}/{record.ref.name}"
        return WorkloadPlan(key, sink.name, sources, "would-write", f"{where}: {detail}", body)
    if isinstance(sink, WebhookSink):
        return WorkloadPlan(key, sink.name, sources, "would-write", "POST to the webhook URL",
                            sink.payload(request))
    if isinstance(sink, EvictionSink):
        outcome = EvictionSink(sink.api, sink.adapters, dry_run=True).emit(request)
        if outcome.status is not OutcomeStatus.WOULD_APPLY:
            return WorkloadPlan(key, sink.name, sources, "already-current", "the workload records this hash")
        return WorkloadPlan(key, sink.name, sources, "would-write",
                            f"PATCH metadata annotation {EVICTION_ANNOTATION}: {outcome.detail}")
    return WorkloadPlan(key, sink.name, sources, "skipped", "no plan for this sink")


def _git_diff(handle: RepositoryHandle, plan: EditPlan) -> str:
    for path in sorted(plan.changed):
        handle.repo.write(path, plan.texts[path].encode("utf-8"))
    result = subprocess.run(  # fixed argv, in our own temporary clone
        ["git", "-c", "core.quotepath=off", "diff", "--no-color", "--no-ext-diff"],
        cwd=handle.repo.workdir, capture_output=True, text=True, check=True)
    return result.stdout


def git_plans(sink: GitSink | PullRequestSink, requests: Sequence[ReloadRequest],
              key: DigestKey) -> tuple[list[WorkloadPlan], list[RepositoryPlan]]:
    """The git or pull-request sink's edits on fresh clones: per workload, per commit/branch."""
    workloads: list[WorkloadPlan] = []
    groups: dict[tuple[str, str], list[tuple[int, ReloadRequest, Resolution]]] = {}
    for position, request in enumerate(requests):
        try:
            sink.planner.check_supported(request)
            resolution = sink.planner.resolve(request.workload)
        except ReloaderError as exc:  # permanent ones skip the workload, as in the sinks
            if exc.retryable:
                raise
            workloads.append(WorkloadPlan(request.ref.key, sink.name, _sources(request), "skipped",
                                          f"{failure_reason(exc)}: {exc}"))
            continue
        name = resolution.repo_name
        branch_key = ""
        if isinstance(sink, PullRequestSink):
            target = sink.targets.get(name)
            if target is None:
                workloads.append(WorkloadPlan(request.ref.key, sink.name, _sources(request), "skipped",
                                              f"repository {name} has no pullRequest settings"))
                continue
            branch_key = prpolicy.branch_key(request.ref, target.config.grouping or sink.default_grouping)
        if name not in sink.repositories:
            workloads.append(WorkloadPlan(request.ref.key, sink.name, _sources(request), "skipped",
                                          f"ManifestNotFound: repository {name} is not configured"))
            continue
        groups.setdefault((name, branch_key), []).append((position, request, resolution))
    repositories: list[RepositoryPlan] = []
    for (name, branch_key), items in groups.items():
        handle = sink.repositories[name]
        handle.sync()  # clones into the temporary cache on first use
        plan = sink.planner.plan(handle, items, key)
        for _, request, exc in plan.skipped:
            workloads.append(WorkloadPlan(request.ref.key, sink.name, _sources(request), "skipped",
                                          f"{failure_reason(exc)}: {exc}"))
        for position, outcome in plan.outcomes.items():
            request = next(r for p, r, _ in items if p == position)
            workloads.append(WorkloadPlan(request.ref.key, sink.name, _sources(request), outcome.status.value,
                                          outcome.detail))
        if not plan.changed:
            continue
        base = handle.config.branch
        entry = RepositoryPlan(sink.name, name, base, base, _git_diff(handle, plan), "",
                               [r.ref.key for _, r, _ in plan.applied])
        if isinstance(sink, PullRequestSink):
            entries = [prpolicy.entry_for(request, plan.values[position])
                       for position, request, _ in plan.applied]
            entry.branch = sink.branch_for(handle, branch_key)  # its newest generation
            entry.title = prpolicy.render_title(entries)
            entry.body = prpolicy.render_body(entries, branch=entry.branch, base=base)
            entry.message = sink.commit_message(handle, entries)
        else:
            entry.message = sink.commit_message(handle.config, plan)
        repositories.append(entry)
        for _, request, location in plan.applied:
            where = f"{entry.branch} into {base}" if entry.branch != base else base
            workloads.append(WorkloadPlan(request.ref.key, sink.name, _sources(request), "would-write",
                                          f"{location} ({where})"))
    return workloads, repositories


# --------------------------------------------------------------------------- waves


def waves_note(config: Config) -> str:
    """The budget the waves below assume, in words."""
    rollouts = config.rollouts
    limits = [f"{rollouts.max_concurrent} at once" if rollouts.max_concurrent else "",
              f"{rollouts.max_per_namespace} per namespace" if rollouts.max_per_namespace else ""]
    return (f"waves: a rollout budget of {' and '.join(x for x in limits if x)}; each wave starts when the "
            "previous one is done (rollouts under way now delay wave 1; gitops-reloader status shows them)")


def assign_plan_windows(controller: Controller, workloads: Sequence[WorkloadPlan],
                        records: Mapping[str, WorkloadRecord], now: float) -> None:
    """Set :attr:`WorkloadPlan.window` of every write its maintenance window would hold at ``now``."""
    if not controller.config.runtime.reload_windows.windows:
        return
    for plan in workloads:
        record = records.get(plan.key)
        if record is None or plan.status != "would-write":
            continue
        try:
            window = controller.caches.reload_window(record)
        except ConfigError as exc:
            plan.window = f"held: {exc} (the reload waits until the annotation names a window)"
            continue
        if window is not None and window.opens_in(now) > 0:
            plan.window = f"waiting for {window.describe(now)}"


def assign_plan_restarts(controller: Controller, api: KubeApi, workloads: Sequence[WorkloadPlan],
                         records: Mapping[str, WorkloadRecord]) -> None:
    """Set :attr:`WorkloadPlan.restart` of every write an eviction would follow (reads the
    workload, its pods and the namespace's PodDisruptionBudgets)."""
    finder = PodFinder(api)
    for plan in workloads:
        record = records.get(plan.key)
        if record is None or plan.status != "would-write":
            continue
        wanted, why = controller.reconciler.checks.evicts(record)
        if not wanted or plan.sink not in EVICTING_SINKS:
            continue
        adapter = controller.adapters[record.ref.kind]
        try:
            obj = api.get(adapter.resource, record.ref.namespace, record.ref.name)
            plan.restart = restart_preview(finder, adapter, obj, controller.config.rollouts.evictions_at_once)
        except KubeError as exc:
            plan.restart = f"evict its pods (not readable now: {exc.status or 'no answer'})"
        plan.restart += f" ({why})"


def assign_plan_waves(config: Config, workloads: Sequence[WorkloadPlan],
                      records: Mapping[str, WorkloadRecord]) -> None:
    """Set :attr:`WorkloadPlan.wave` of every write the budget gates (the waves' own order)."""
    budget = Budget(config.rollouts.max_concurrent, config.rollouts.max_per_namespace)
    queue: list[Waiting] = []
    for plan in workloads:
        record = records.get(plan.key)
        if plan.status != "would-write" or record is None or not gated(plan.sink, record):
            continue
        queue.append(Waiting(record.ref, priority_of(record.annotations)))
    waves = assign_waves(budget, queue)
    for plan in workloads:
        record = records.get(plan.key)
        if record is not None:
            plan.wave = waves.get(record.ref)


def gated(sink: str, record: WorkloadRecord) -> bool:
    """Whether the budget gates this write (:class:`~gitops_reloader.control.waves.Waves`'s rule;
    a git write through a ``git-target`` cannot carry the marker and is exempt)."""
    if sink == SinkName.GIT and GIT_TARGET_ANNOTATION in record.annotations:
        return False
    return gates(sink, record.ref)


# --------------------------------------------------------------------------- output


def render(source: str, change: str, workloads: Sequence[WorkloadPlan],
           repositories: Sequence[RepositoryPlan], notes: Sequence[str]) -> str:
    """The plan as terminal text."""
    lines = [f"{source}: {change}"]
    lines += [f"note: {n}" for n in notes]
    writing = [w for w in workloads if w.status == "would-write"]
    lines.append(f"{len(writing)} of {len(workloads)} workload(s) would be reloaded" if workloads
                 else "no workload would be reloaded")
    for plan in workloads:
        lines.append("")
        lines.append(f"{plan.key} [{plan.sink}] {plan.status}" + (f", wave {plan.wave}" if plan.wave else ""))
        lines.append(f"  sources: {', '.join(plan.sources)}")
        if plan.window:
            lines.append(f"  {plan.window}")
        if plan.restart:
            lines.append(f"  then: {plan.restart}")
        if plan.detail:
            lines.append(f"  {plan.detail}")
        if plan.patch is not None:
            lines.append(_indent(json.dumps(plan.patch, indent=2, sort_keys=True), "    "))
    for repo in repositories:
        lines.append("")
        if repo.sink == SinkName.PULL_REQUEST:
            lines.append(f"pull request on repository {repo.repository}: {repo.branch} into {repo.base}")
            lines.append(f"  title: {repo.title}")
            lines.append("  body:")
            lines.append(_indent(repo.body, "    "))
        else:
            lines.append(f"commit to repository {repo.repository} ({repo.branch}), nothing pushed")
        lines.append("  commit message:")
        lines.append(_indent(repo.message.rstrip("\n"), "    "))
        lines.append("  diff:")
        lines.append(_indent(repo.diff.rstrip("\n"), "    "))
    return "\n".join(lines) + "\n"


def render_json(source: str, change: str, workloads: Sequence[WorkloadPlan],
                repositories: Sequence[RepositoryPlan], notes: Sequence[str]) -> str:
    """The plan as one JSON document (``--output json``), for scripts."""
    return json.dumps({
        "source": source, "change": change, "notes": list(notes),
        "wouldWrite": any(w.status == "would-write" for w in workloads),
        "workloads": [dataclasses.asdict(w) for w in workloads],
        "repositories": [dataclasses.asdict(r) for r in repositories],
    }, indent=2, sort_keys=True) + "\n"


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else line for line in text.split("\n"))


# --------------------------------------------------------------------------- wiring


def key_notes(controller: Controller, meta: SourceMeta, previous: SourceMeta) -> list[str]:
    """Each ``used-keys`` workload using ``meta`` key by key, the keys it uses and whether the
    change ``previous`` → ``meta`` touches them."""
    notes: list[str] = []
    for key in sorted(controller.index.lookup(meta.ref)):
        record = controller.workload(ObjectRef.from_key(key))
        scope = controller.reconciler.key_scope(record, meta.ref) if record is not None else None
        if scope is None:
            continue
        verdict = ("touches them" if usedkeys.touched(previous, meta, scope)
                   else "touches none of them: not reloaded")
        notes.append(f"{key} uses keys {', '.join(sorted(scope)) or '(none)'} of {meta.ref} "
                     f"(used-keys); the change {verdict}")
    return notes


def read_only_controller(config: Config, api: KubeApi, metrics: Metrics,
                         sinks: Mapping[str, Sink] | None = None) -> Controller:
    """A controller over ``config``'s caches with no recorder, for commands that write nothing
    (``plan``, ``status``): the live sinks, plus ``sinks`` where given; never activated."""
    behaviour = config.behaviour
    openshift = behaviour.is_openshift
    if openshift is None:
        openshift = api.discover_group("apps.openshift.io")
    adapters = adapters_for(argo_rollouts=behaviour.is_argo_rollouts, openshift=openshift,
                            ignored=config.filters.ignored_workload_types, kinds=behaviour.kinds)
    all_sinks = dict(build_live_sinks(config, api, adapters, metrics=metrics))
    all_sinks.update(sinks or {})
    return Controller(config, api, sinks=all_sinks, metrics=metrics, recorder=None, adapters=adapters)


def _git_sinks(config: Config, api: KubeApi, metrics: Metrics, cache: str) -> dict[str, Sink]:
    scratch = dataclasses.replace(config, gitops=dataclasses.replace(config.gitops, cache_dir=cache))
    out: dict[str, Sink] = {}
    for build in (build_git_sink, build_pull_request_sink):
        sink = build(scratch, api, metrics, None)
        if sink is not None:
            out[sink.name] = sink
    return out


def _closing(sinks: Mapping[str, Sink]) -> Iterator[Any]:
    for sink in sinks.values():
        close = getattr(sink, "close", None)
        if close is not None:
            yield close


def plan_change(args: PlanArgs, config: Config, api: KubeApi, out: Any) -> int:
    """Answer for one change; print the plan to ``out``; the exit code."""
    resource = CONFIGMAPS if args.kind is SourceKind.CONFIGMAP else SECRETS
    current = api.get(resource, args.namespace, args.name)
    after = new_source(args.kind, current, args.data)
    old, new = changed_meta(args.kind, config, current, after, as_if=args.data is None)
    ref = SourceRef(args.kind, args.namespace, args.name)
    secret_hashes = [old.hash, new.hash] if args.kind is SourceKind.SECRET else []
    label = f"{args.kind.kube_kind} {args.namespace}/{args.name}"
    write = render_json if args.output == "json" else render
    if old.change_key == new.change_key:
        out.write(write(label, "none: the new data equals the current data", [], [], []))
        return NOTHING
    change = ("as if its data changed (hypothetical hash)" if args.data is None
              else f"data changes ({len(args.data)} key(s))")
    metrics = Metrics(CollectorRegistry())
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gitops-reloader-plan-") as cache, ExitStack() as stack:
        git_sinks = _git_sinks(config, api, metrics, cache)
        for close in _closing(git_sinks):
            stack.callback(close)
        controller = read_only_controller(config, api, metrics, git_sinks)
        stack.callback(controller.stop)
        controller.start(activate=False)  # caches only: no worker, no write
        requests = controller.requests_for_change(new, previous=old)
        if args.kind is SourceKind.SECRET:  # used-keys hashes derive from secret data too
            secret_hashes += [item.source.hash for request in requests for item in request.items]
        notes += key_notes(controller, new, old)
        if controller.source(ref) is None:
            notes.append("the controller does not watch this source (namespace or label filters, "
                         "ignored resource type)")
        workloads: list[WorkloadPlan] = []
        repositories: list[RepositoryPlan] = []
        by_sink: dict[str, list[ReloadRequest]] = {}
        for request in requests:
            name = controller.sink_name(request.workload) or ""
            sink = controller.sinks.get(name)
            refusal = controller.adapters[request.ref.kind].refusal(request.workload)
            if refusal is not None:  # e.g. a Knative Service with a fixed revision name
                workloads.append(WorkloadPlan(request.ref.key, name or "unknown", _sources(request),
                                              "skipped", f"{refusal[0]}: {refusal[1]}"))
            elif sink is None:
                workloads.append(WorkloadPlan(request.ref.key, name or "unknown", _sources(request),
                                              "skipped", f"UnknownSink: {config.keys.sink} names no "
                                              "available sink"))
            elif isinstance(sink, GitSink | PullRequestSink):
                by_sink.setdefault(name, []).append(request)
            else:
                workloads.append(live_plan(sink, request, controller))
        if by_sink:
            gitops = config.gitops
            key = read_digest_key(api, namespace=gitops.digest_key_namespace, name=gitops.digest_key_secret)
            if key is None:
                notes.append(f"digest key Secret {gitops.digest_key_namespace}/{gitops.digest_key_secret} "
                             "does not exist yet (the first git write creates it): digests below use a "
                             "placeholder key, the lines they change are exact")
                key = _PLACEHOLDER_KEY
            for name, batch in by_sink.items():
                sink = controller.sinks[name]
                assert isinstance(sink, GitSink | PullRequestSink)
                more, repos = git_plans(sink, batch, key)
                workloads += more
                repositories += repos
    if config.rollouts.budgeted:
        notes.append(waves_note(config))
        assign_plan_waves(config, workloads, {r.ref.key: r.workload for r in requests})
    assign_plan_windows(controller, workloads, {r.ref.key: r.workload for r in requests}, time.time())
    assign_plan_restarts(controller, api, workloads, {r.ref.key: r.workload for r in requests})
    workloads.sort(key=lambda w: w.key)
    out.write(redact(write(label, change, workloads, repositories, notes), secret_hashes))
    return CHANGES if any(w.status == "would-write" for w in workloads) else NOTHING


USAGE = """usage: gitops-reloader plan (--configmap NS/NAME | --secret NS/NAME)
                            [--from-literal KEY=VALUE ...] [--from-file [KEY=]PATH ...]
                            [--output text|json] [run flags]

Print what the controller would write if the source's data changed: the workloads that
would reload, each sink's patch, git diff, commit message and pull request. The new data
replaces the source's data; without --from-literal/--from-file: "as if it changed".
Takes every flag of `run` (kubeconfig, --git-config, annotation names, filters).
Writes nothing. Exit code: 0 nothing would be written, 1 something would, 2 error.
"""


def main(argv: Sequence[str]) -> int:
    """``gitops-reloader plan``."""
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        return NOTHING
    try:
        args, rest = parse_args(argv)
        config = load_config(rest)
    except ConfigError as exc:
        print(f"gitops-reloader plan: {exc}", file=sys.stderr)
        return TROUBLE
    explicit_level = any(a.startswith("--log-level") for a in rest)
    configure_logging(fmt=config.runtime.log_format,
                      level=config.runtime.log_level if explicit_level else "warning")
    try:
        api = KubeApi(load_api_client(config.runtime.kubeconfig))
        return plan_change(args, config, api, sys.stdout)
    except ReloaderError as exc:
        print(f"gitops-reloader plan: {exc}", file=sys.stderr)
        return TROUBLE
