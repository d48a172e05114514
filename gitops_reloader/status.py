"""``gitops-reloader status``: what is rolling, failed, held and waiting, per source change.

Reads the cluster only — through a kubeconfig, so it works from a laptop while the
controller runs elsewhere — and writes nothing:

- the workloads and their sources, listed through the controller's own caches (built from
  the same flags as ``run``; no worker starts): each workload's rollout marker and its
  kind's verdict, and the source changes its sink has not recorded yet (the recorded hash
  differs from the current one, as ``--sync-after-restart`` compares them; a workload that
  never recorded one counts when its source's current change is in some marker);
- the ``ReloadHeld`` and ``RolloutFailed`` Events the controller wrote (when, for whom);
- the emissions failing and still pending, from the controller's failure record (a
  ConfigMap ``<lease name>-failures`` in its namespace): since when, attempts, next try,
  the last error (redacted as in the logs);
- with ``--git-config``: the git sinks' workloads, each located as the sink locates it in a
  fresh clone (temporary directory, deleted afterwards), the commit that last wrote its
  digest and that commit's stage by the git follow-up's own reading of the engine, the live
  template and the rollout (:meth:`~gitops_reloader.control.follower.Follower.explain`).

The decisions are :func:`gitops_reloader.rollout.census.census` (pure). Flags: the ``run``
flags plus ``-n NAMESPACE`` / ``-A`` (default: every namespace the flags watch),
``-o text|json`` and ``--limit N`` (workloads per change and commits listed; counts stay
complete). Exit code: 0 answered, 1 the cluster could not be read, 2 bad usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from gitops_reloader.config import Config, load_config
from gitops_reloader.control.waves import gates
from gitops_reloader.control.writechecks import LIVE_SINKS
from gitops_reloader.controller import Controller
from gitops_reloader.durations import parse_rfc3339
from gitops_reloader.errors import ConfigError, KubeError, ReloaderError
from gitops_reloader.kinds import kube_kind
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.events import COMPONENT
from gitops_reloader.kube.resources import EVENTS
from gitops_reloader.ledger import Failure, Ledger, Record
from gitops_reloader.model import ObjectRef, ReloadRequest, SinkName, Source
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.plan import read_only_controller
from gitops_reloader.rollout.budget import Budget, priority_of
from gitops_reloader.rollout.census import (
    DEFAULT_LIMIT,
    FAILED_EVENT,
    HELD_EVENT,
    Emission,
    Event,
    FailingReport,
    Report,
    WindowReport,
    Workload,
    as_dict,
    census,
    render_text,
)
from gitops_reloader.rollout.marker import MARKER_ANNOTATION, Marker, change_id, parse_marker
from gitops_reloader.state.ledgerstore import LedgerStore

__all__ = ["main", "read_census"]

_PAGE = 500
MAX_EVENT_PAGES = 20
"""At most this many pages of each Event reason are read (10,000 Events)."""
GIT_SINKS = frozenset({SinkName.GIT, SinkName.PULL_REQUEST})

USAGE = """usage: gitops-reloader status [-n NAMESPACE | -A] [-o text|json] [--limit N] [run flags]

What is rolling, failed, held and waiting, per source change, with each workload's wave,
the rollout budget in use and, with --git-config, each git commit's stage (pushed,
in-template, rolled, ...). Read from the cluster only; writes nothing. Pass the flags the
controller runs with (--max-concurrent-rollouts, --rollout-timeout, filters, --git-config)."""


def _scoped(config: Config, namespace: str | None) -> Config:
    """``config`` reading every source hash at the list (as ``--sync-after-restart`` does),
    narrowed to ``namespace`` when one is asked for."""
    behaviour = dataclasses.replace(config.behaviour, sync_after_restart=True)
    filters = config.filters
    if namespace is not None:
        if filters.namespaces and namespace not in filters.namespaces:
            raise ConfigError(f"namespace {namespace} is not in --namespaces: "
                              "the controller does not watch it")
        filters = dataclasses.replace(filters, namespaces=(namespace,))
    return dataclasses.replace(config, behaviour=behaviour, filters=filters)


def _workloads(controller: Controller) -> Iterator[Workload]:
    """Each cached workload: marker, verdict and the changes its (live) sink has not recorded."""
    reconciler = controller.reconciler
    records = controller.workloads()
    markers: dict[ObjectRef, Marker] = {}
    for record in records:
        marker = parse_marker(record.annotations.get(MARKER_ANNOTATION))
        if marker is not None:
            markers[record.ref] = marker
    in_flight = frozenset(c for marker in markers.values() for c in marker.changes)
    for record in records:
        sink = controller.sink_name(record) or ""
        pending: set[str] = set()
        if sink in LIVE_SINKS and controller.namespace_allowed(record.ref.namespace):
            for meta, container in reconciler.tracked(record):
                if not meta.hash:
                    continue
                used = reconciler.source_hash(record, meta)
                change = change_id(Source(meta.ref, used))
                recorded = reconciler.recorded_hash(record, meta, container)
                if recorded in (used, meta.hash) or (recorded is None and change not in in_flight):
                    continue
                pending.add(change)
        yield Workload(record.ref, sink, priority_of(record.annotations), markers.get(record.ref),
                       record.rollout, frozenset(pending),
                       gated=sink in LIVE_SINKS and gates(sink, record.ref))


def _events(api: KubeApi, namespace: str | None, refs: Iterable[ObjectRef]) -> Iterator[Event]:
    """The controller's ``ReloadHeld`` and ``RolloutFailed`` Events (bounded) on ``refs``.

    An Event names the object's own ``kind`` (``StatefulSet`` for the controller's
    ``StatefulSet.apps.kruise.io``): it is matched back to the workload's reference."""
    by_object = {(kube_kind(ref.kind), ref.namespace, ref.name): ref for ref in refs}
    for reason in (HELD_EVENT, FAILED_EVENT):
        token = ""
        for _ in range(MAX_EVENT_PAGES):
            page = api.list(EVENTS, namespace=namespace, field_selector=f"reason={reason}", limit=_PAGE,
                            continue_token=token)
            for item in page.get("items") or ():
                event = _event(item, reason)
                ref = by_object.get((event.ref.kind, event.ref.namespace, event.ref.name)) if event else None
                if event is not None and ref is not None:
                    yield dataclasses.replace(event, ref=ref)
            token = str((page.get("metadata") or {}).get("continue") or "")
            if not token:
                break


def _event(item: Mapping[str, Any], reason: str) -> Event | None:
    if (item.get("source") or {}).get("component") != COMPONENT \
            and item.get("reportingComponent") != COMPONENT:
        return None
    involved = item.get("involvedObject") or {}
    stamp = item.get("firstTimestamp") or item.get("eventTime") or (item.get("metadata") or {}).get(
        "creationTimestamp")
    at = parse_rfc3339(stamp)
    if at is None or not involved.get("kind") or not involved.get("name"):
        return None
    ref = ObjectRef(str(involved["kind"]), str(involved.get("namespace") or ""), str(involved["name"]))
    return Event(ref, reason, at, str(item.get("message") or "")[:1024])


def _emissions(api: KubeApi, config: Config, controller: Controller, notes: list[str]) -> Iterator[Emission]:
    """The git sinks' workloads: the commit that last wrote each one's digest and its stage.

    A repository that cannot be fetched is tried once and named in ``notes`` (its workloads
    are left out); a workload whose manifest cannot be located is left out (``explain``
    says why)."""
    from gitops_reloader.control.follower import Follower
    from gitops_reloader.gitops.gitconfig import load_git_config
    from gitops_reloader.gitops.locate import Locator
    from gitops_reloader.sinks.git import ManifestPlanner
    from gitops_reloader.sinks.gitwiring import build_repository_handles

    records = [r for r in controller.workloads() if controller.sink_name(r) in GIT_SINKS]
    if not records or not config.gitops.config_file:
        return
    git_config = load_git_config(config.gitops.config_file)
    locator = Locator(git_config, api)
    with tempfile.TemporaryDirectory(prefix="gitops-reloader-status-") as cache:
        handles = build_repository_handles(git_config, cache)
        # Workloads from the caches just listed (no GET each; a NotApplied verdict is confirmed
        # with one), and the controller's kind table, so configured kinds are judged by their rule.
        follower = Follower(api=api, repositories=handles, metrics=Metrics(CollectorRegistry()),
                            recorder=None, argocd_namespace=git_config.argocd_namespace,
                            timeout=config.gitops.apply_timeout, interval=config.gitops.follow_interval,
                            workloads=controller.caches, adapters=controller.adapters)
        synced: set[str] = set()
        unreadable: set[str] = set()
        for record in sorted(records, key=lambda r: r.ref.key):
            sink = controller.sink_name(record) or SinkName.GIT
            request = ReloadRequest(record.ref, record, (), 0)
            try:
                resolution = locator.resolve(record)
                handle = handles.get(resolution.repo_name)
                if handle is None or resolution.repo_name in unreadable:
                    continue
                if resolution.repo_name not in synced:
                    try:
                        handle.sync()
                    except ReloaderError as exc:
                        unreadable.add(resolution.repo_name)
                        notes.append(f"repository {resolution.repo_name} could not be read, its commits "
                                     f"are not shown: {str(exc)[:200]}")
                        continue
                    synced.add(resolution.repo_name)
                location = locator.locate(record, resolution, handle.index, confirm=True)
                value = ManifestPlanner.committed_value(handle, request, location)
                entry = follower.explain(request, location, value, sink=str(sink)) if value else None
            except ReloaderError:
                continue  # explain KIND/NAME says why this one cannot be located
            age = time.time() - entry.changed_at if entry is not None else 0.0
            if entry is None or (entry.state.done and age > config.gitops.apply_timeout):
                continue  # answered long ago: history
            engine = entry.engine
            yield Emission(record.ref, resolution.repo_name, entry.commit, entry.state.stage.value,
                           entry.state.reason, entry.state.message,
                           f"{engine.resource.kind} {engine.namespace}/{engine.name}" if engine else None)


def read_census(api: KubeApi, config: Config, *, namespace: str | None = None, limit: int = DEFAULT_LIMIT,
                now: float | None = None, git: bool = True) -> Report:
    """Read the cluster (and, with ``git``, the repositories) once and take the census (reads only)."""
    scoped = _scoped(config, namespace)
    metrics = Metrics(CollectorRegistry())
    controller = read_only_controller(scoped, api, metrics)
    try:
        controller.start(activate=False)  # caches only: no worker, no write
        workloads = list(_workloads(controller))
        waiting = _window_waits(controller, workloads, time.time() if now is None else now)
        events = list(_events(api, namespace, (w.ref for w in workloads)))
        notes: list[str] = []
        emissions = list(_emissions(api, scoped, controller, notes)) if git else []
        failing = _failing(api, config, namespace)
    finally:
        controller.stop()
    rollouts = config.rollouts
    report = census(workloads, budget=Budget(rollouts.max_concurrent, rollouts.max_per_namespace),
                    hold=rollouts.hold_on_failure, timeout=rollouts.timeout,
                    now=time.time() if now is None else now, events=events, emissions=emissions, limit=limit)
    report.notes.extend(notes)
    report.failing.extend(failing)
    report.waiting_for_window.extend(waiting)
    return report


def _window_waits(controller: Controller, workloads: Sequence[Workload], now: float) -> list[WindowReport]:
    """The workloads with unrecorded changes whose maintenance window is closed at ``now``
    (live sinks, whose recorded hash tells; an unknown window name is left to the Event)."""
    if not controller.config.runtime.reload_windows.windows:
        return []
    pending = {w.ref for w in workloads if w.pending}
    out: list[WindowReport] = []
    for record in controller.workloads():
        if record.ref not in pending:
            continue
        try:
            window = controller.caches.reload_window(record)
        except ConfigError:
            continue
        opens = window.next_opening(now) if window is not None else None
        if window is None or opens is None:
            continue
        out.append(WindowReport(record.ref.key, window.name, int(opens.timestamp()), window.time_zone,
                                f"{opens:%Y-%m-%d %H:%M}"))
    return sorted(out, key=lambda w: (w.opens_at, w.workload))


def _failing(api: KubeApi, config: Config, namespace: str | None) -> list[FailingReport]:
    """The emissions the controller recorded as failing (its ledger record), in ``namespace``."""
    runtime = config.runtime
    store = LedgerStore(api, Ledger(), namespace=runtime.lease_namespace, name=runtime.failure_record,
                        metrics=Metrics(CollectorRegistry()), read_only=True)
    by_key: dict[str, tuple[Failure, list[str]]] = {}
    for entry in (store.read() or Record([])).entries:
        if entry.failure is not None and (namespace is None or entry.workload.startswith(f"{namespace}/")):
            by_key.setdefault(entry.failure.key, (entry.failure, []))[1].append(entry.workload)
    return [FailingReport(f.key, sorted(workloads), f.sink, f.reason, f.failure.value, int(f.since),
                          f.attempts, int(f.next_try), f.error, f.raised)
            for f, workloads in sorted(by_key.values(), key=lambda item: (item[0].since, item[0].key))]


def main(argv: Sequence[str]) -> int:
    """``gitops-reloader status [-n NAMESPACE | -A] [-o text|json] [--limit N] [run flags]``."""
    from gitops_reloader.kube.client import load_api_client
    from gitops_reloader.observability.logging import configure_logging

    if any(arg in ("-h", "--help") for arg in argv):
        print(USAGE)
        return 0
    parser = argparse.ArgumentParser(prog="gitops-reloader status", allow_abbrev=False, add_help=False)
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace")
    scope.add_argument("-A", "--all-namespaces", action="store_true")
    parser.add_argument("--output", "-o", choices=("text", "json"), default="text")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT)
    try:
        args, rest = parser.parse_known_args(list(argv))
        if args.limit < 1:
            raise ConfigError(f"--limit must be at least 1, got {args.limit}")
        config = load_config(rest)
    except SystemExit:
        print("gitops-reloader status: invalid flags (see gitops-reloader status --help)", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"gitops-reloader status: {exc}", file=sys.stderr)
        return 2
    explicit_level = any(a.startswith("--log-level") for a in rest)
    configure_logging(fmt=config.runtime.log_format,
                      level=config.runtime.log_level if explicit_level else "warning")
    try:
        api = KubeApi(load_api_client(config.runtime.kubeconfig))
        report = read_census(api, config, namespace=args.namespace, limit=args.limit)
    except ConfigError as exc:
        print(f"gitops-reloader status: {exc}", file=sys.stderr)
        return 2
    except (KubeError, ReloaderError) as exc:
        print(f"gitops-reloader status: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(as_dict(report), indent=2) if args.output == "json" else render_text(report))
    return 0
