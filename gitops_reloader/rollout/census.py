"""What is rolling, failed, held and waiting, per source change: a census of the cluster, pure.

``gitops-reloader status`` (and ``explain`` for one workload) read the cluster — each
workload's rollout marker (:mod:`~gitops_reloader.rollout.marker`) and its kind's verdict
(:mod:`~gitops_reloader.rollout.completion`), the source changes it has not been given yet,
the ``ReloadHeld`` / ``RolloutFailed`` Events the controller wrote, and the git sink's
commits with their stage — and hand them to :func:`census`, which decides, with the
budget's own rules (:func:`~gitops_reloader.rollout.budget.next_wave` semantics):

- **rolling**: a marker whose rollout is neither complete nor failed (``--rollout-timeout``
  applied to the marker's ``at``); these use the budget;
- **failed**: a marker whose rollout failed (the kind's failure or the timeout); with
  ``--hold-on-failed-rollout`` its changes hold every reload of them not started yet;
- **held**: a workload not given a change yet whose change a failed rollout carries —
  which workloads hold it and since when (the ``ReloadHeld`` Event on it, else the
  ``RolloutFailed`` Event of the failed one, else the marker's deadline for a timeout);
- **waiting**: a workload not given a change yet and not held, with the **wave** it would
  start in: waves after the one under way, each filling the whole budget, in the budget's
  order (priority, namespace, name); held reloads take no slot;
- **rolled**: a marker whose rollout completed (counted, listed only within the limit).

A change is listed while something of it is rolling, failed, held or waiting; changes whose
every rollout completed are history and left out. Output is bounded: at most ``limit``
workloads per change (the counts stay complete) and ``limit`` git commits.

A Secret's hash prefix in a change id is never shown (:func:`shown_change`); the grouping
uses the real id and :attr:`ChangeReport.first_at` tells two changes of one Secret apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from gitops_reloader.durations import format_duration
from gitops_reloader.model import ObjectRef
from gitops_reloader.rollout.budget import Budget, Waiting, is_held
from gitops_reloader.rollout.completion import ROLLOUT_TIMEOUT, Phase, RolloutStatus, with_deadline
from gitops_reloader.rollout.marker import Marker
from gitops_reloader.rollout.resume import in_flight

HIDDEN = "(secret: not shown)"
HELD_EVENT = "ReloadHeld"
FAILED_EVENT = "RolloutFailed"
DEFAULT_LIMIT = 50
NO_BUDGET_NOTE = ("workloads carry the controller's rollout marker but no budget flag was given: pass the "
                  "flags the controller runs with (--max-concurrent-rollouts, --rollout-timeout, "
                  "--hold-on-failed-rollout)")


class State(StrEnum):
    """Where one workload stands for one change (the order is the listing order)."""

    FAILED = "failed"
    HELD = "held"
    ROLLING = "rolling"
    WAITING = "waiting"
    ROLLED = "rolled"


_ORDER = {state: number for number, state in enumerate(State)}


@dataclass(frozen=True, slots=True)
class Workload:
    """One workload as read from the cluster.

    ``status``: its kind's verdict (no deadline applied) when it carries a ``marker``;
    ``pending``: the change ids (:func:`~gitops_reloader.rollout.marker.change_id`) of the
    source changes it tracks and has not been given yet; ``gated``: whether its sink waits
    for the budget (live sinks and the git sink's waves).
    """

    ref: ObjectRef
    sink: str = ""
    priority: int = 0
    marker: Marker | None = None
    status: RolloutStatus | None = None
    pending: frozenset[str] = frozenset()
    gated: bool = True


@dataclass(frozen=True, slots=True)
class Event:
    """A ``ReloadHeld`` or ``RolloutFailed`` Event the controller wrote (time: Unix seconds)."""

    ref: ObjectRef
    reason: str
    at: float
    message: str = ""


@dataclass(frozen=True, slots=True)
class Emission:
    """The git sink's last commit for one workload and where it stands
    (:class:`~gitops_reloader.rollout.follow.Stage` values)."""

    ref: ObjectRef
    repository: str
    commit: str
    stage: str
    reason: str = ""
    message: str = ""
    engine: str | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """One workload's line under one change."""

    workload: str
    state: State
    wave: int | None = None
    """0: started (rolling, failed, rolled); 1, 2, …: the future wave of a waiting reload."""
    since: int | None = None
    """Rolling/rolled: the write's second; failed: when it failed; held: when it was held."""
    reason: str = ""
    message: str = ""
    held_by: tuple[str, ...] = ()
    priority: int = 0


@dataclass(slots=True)
class ChangeReport:
    """One source change in flight."""

    change: str
    source: str
    first_at: int | None
    """The earliest write that carried it (None: nothing written yet)."""
    counts: dict[str, int] = field(default_factory=dict)
    workloads: list[Entry] = field(default_factory=list)
    left_out: int = 0
    key: str = field(default="", repr=False)
    """The change id itself (a Secret's hash prefix included): never printed."""


@dataclass(slots=True)
class CommitReport:
    """One git commit and the workloads it carries (one stage each)."""

    repository: str
    commit: str
    stages: dict[str, int] = field(default_factory=dict)
    workloads: list[dict[str, str | None]] = field(default_factory=list)
    left_out: int = 0


@dataclass(slots=True)
class Report:
    """The census: the budget in use, the changes in flight, the git commits followed, and
    the emissions failing (retried until they succeed)."""

    now: int
    budget: dict[str, object]
    totals: dict[str, int]
    changes: list[ChangeReport] = field(default_factory=list)
    commits: list[CommitReport] = field(default_factory=list)
    changes_left_out: int = 0
    commits_left_out: int = 0
    notes: list[str] = field(default_factory=list)
    failing: list[FailingReport] = field(default_factory=list)
    waiting_for_window: list[WindowReport] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class WindowReport:
    """A workload whose unrecorded source changes wait for its maintenance window."""

    workload: str
    window: str
    opens_at: int
    """Unix seconds."""
    time_zone: str
    opens_local: str
    """``2026-11-30 22:00``, in ``time_zone``."""


@dataclass(frozen=True, slots=True)
class FailingReport:
    """One emission failing and still pending, as the controller recorded it (the error is
    redacted as in the logs; times are Unix seconds)."""

    key: str
    workloads: list[str]
    sink: str
    reason: str
    failure: str
    since: int
    attempts: int
    next_try: int
    error: str
    raised: bool


def shown_change(change: str) -> str:
    """A change id as printed: a Secret's hash prefix is replaced by :data:`HIDDEN`."""
    source, _, digest = change.rpartition("@")
    parts = source.split("/")
    return f"{source}@{HIDDEN}" if len(parts) >= 3 and parts[1] == "Secret" and digest else change


def _source_of(change: str) -> str:
    return change.rpartition("@")[0] or change


def assign_waves(budget: Budget, waiting: Iterable[Waiting]) -> dict[ObjectRef, int]:
    """The wave (1, 2, …) each waiting reload starts in if every wave fills the budget and
    starts when the previous one is done; in the budget's order. Without a budget: all wave 1.

    The same result as calling :func:`~gitops_reloader.rollout.budget.next_wave` with nothing
    rolling, wave after wave, in one pass: each reload takes the earliest wave with room in
    the cluster and in its namespace.
    """
    ordered = sorted(waiting, key=lambda w: w.rank)
    if not budget.enabled:
        return {entry.ref: 1 for entry in ordered}
    waves: dict[ObjectRef, int] = {}
    in_wave: Counter[int] = Counter()
    in_namespace: Counter[tuple[str, int]] = Counter()
    namespace_from: dict[str, int] = {}  # per namespace: no room before this wave
    first_open = 1  # no room in the cluster before this wave

    def full(namespace: str, wave: int) -> bool:
        return (0 < budget.total <= in_wave[wave]) or (
            0 < budget.per_namespace <= in_namespace[namespace, wave])

    for entry in ordered:
        namespace = entry.ref.namespace
        wave = max(first_open, namespace_from.get(namespace, 1))
        while full(namespace, wave):
            wave += 1
        waves[entry.ref] = wave
        in_wave[wave] += 1
        in_namespace[namespace, wave] += 1
        start = namespace_from.get(namespace, 1)
        while 0 < budget.per_namespace <= in_namespace[namespace, start]:
            start += 1
        namespace_from[namespace] = start
        while 0 < budget.total <= in_wave[first_open]:
            first_open += 1
    return waves


@dataclass(frozen=True, slots=True)
class _Hold:
    """What holds one set of changes: the failed workloads, per change and in all."""

    names: tuple[str, ...]
    by_change: Mapping[str, tuple[str, ...]]
    earliest: int
    """The earliest failed write among them (an older Event is of another incident)."""
    announced: float | None
    """The earliest ``RolloutFailed`` Event of theirs after their write."""


def _hold(changes: frozenset[str], failed: Iterable[tuple[Workload, Marker, RolloutStatus]],
          by_event: Mapping[tuple[ObjectRef, str], list[Event]]) -> _Hold:
    culprits = [(w, m) for w, m, _ in failed if m.changes & changes]
    announced = [t for w, m in culprits
                 if (t := _first(by_event.get((w.ref, FAILED_EVENT), ()), m.at)) is not None]
    return _Hold(tuple(sorted(str(w.ref) for w, _ in culprits)),
                 {c: tuple(sorted(str(w.ref) for w, m in culprits if c in m.changes)) for c in changes},
                 min(m.at for _, m in culprits), min(announced, default=None))


def _first(events: Iterable[Event], not_before: float) -> float | None:
    times = [event.at for event in events if event.at >= not_before]
    return min(times) if times else None


def census(workloads: Iterable[Workload], *, budget: Budget, hold: bool, timeout: float, now: float,
           events: Iterable[Event] = (), emissions: Iterable[Emission] = (),
           limit: int = DEFAULT_LIMIT) -> Report:
    """The cluster's rollouts per source change (see the module docstring)."""
    workloads = list(workloads)
    by_event: dict[tuple[ObjectRef, str], list[Event]] = {}
    for event in events:
        by_event.setdefault((event.ref, event.reason), []).append(event)

    started: list[tuple[Workload, Marker, RolloutStatus]] = []
    for workload in workloads:
        if workload.marker is not None and workload.status is not None:
            verdict = with_deadline(workload.status, now - workload.marker.at, timeout)
            started.append((workload, workload.marker, verdict))
    failed = [(w, m, v) for w, m, v in started if v.phase is Phase.FAILED]
    failed_changes = frozenset(c for _, m, _ in failed for c in m.changes)
    rolling = Counter(w.ref.namespace for w, _, v in started if v.phase is Phase.PROGRESSING)

    entries: dict[str, list[Entry]] = {}
    first_at = in_flight(marker for _, marker, _ in started).first_at
    for workload, marker, verdict in started:
        state = {Phase.PROGRESSING: State.ROLLING, Phase.FAILED: State.FAILED}.get(verdict.phase,
                                                                                   State.ROLLED)
        since = marker.at
        if state is State.FAILED:
            announced = _first(by_event.get((workload.ref, FAILED_EVENT), ()), marker.at)
            deadline = marker.at + timeout if verdict.reason == ROLLOUT_TIMEOUT else None
            since = int(announced) if announced is not None else deadline
        for change in marker.changes:
            entries.setdefault(change, []).append(Entry(
                str(workload.ref), state, 0, since, verdict.reason if state is not State.ROLLED else "",
                verdict.message if state is not State.ROLLED else "", priority=workload.priority))

    queue = [Waiting(w.ref, w.priority, w.pending) for w in workloads if w.pending]
    held = [q for q in queue if hold and is_held(q.changes, failed_changes)]
    held_refs = {q.ref for q in held}
    gated = {w.ref for w in workloads if w.gated}
    waves = assign_waves(budget, (q for q in queue if q.ref not in held_refs and q.ref in gated))
    holds: dict[frozenset[str], _Hold] = {}  # the reloads of one change share the work
    for entry in held:
        hold_of = holds.get(entry.changes)
        if hold_of is None:
            hold_of = holds[entry.changes] = _hold(entry.changes, failed, by_event)
        since = _first(by_event.get((entry.ref, HELD_EVENT), ()), hold_of.earliest)
        if since is None:
            since = hold_of.announced
        for change in entry.changes:
            holders = hold_of.by_change[change]
            state = State.HELD if holders else State.WAITING
            entries.setdefault(change, []).append(Entry(
                str(entry.ref), state, None if holders else waves.get(entry.ref),
                int(since) if since is not None and holders else None,
                "HeldByFailedRollout" if holders else "WaitingForBudget",
                (f"held: the rollout of this change failed in {', '.join(holders[:5])}" if holders
                 else f"waiting: its other change is held by {', '.join(hold_of.names[:5])}"),
                holders[:limit], entry.priority))
    for entry in queue:
        if entry.ref in held_refs:
            continue
        wave = waves.get(entry.ref)
        reason, message = (("WaitingForBudget", f"waits for the budget: wave {wave}")
                           if budget.enabled and wave is not None
                           else ("NotWrittenYet", "not given this change yet"))
        for change in entry.changes:
            entries.setdefault(change, []).append(Entry(str(entry.ref), State.WAITING, wave, None,
                                                        reason, message, priority=entry.priority))

    changes: list[ChangeReport] = []
    for change, listed in entries.items():
        counts = Counter(e.state.value for e in listed)
        if not (counts[State.ROLLING] or counts[State.FAILED] or counts[State.HELD] or counts[State.WAITING]):
            continue  # history: every rollout of it completed
        listed.sort(key=lambda e: (_ORDER[e.state], 1 << 30 if e.wave is None else e.wave, -e.priority,
                                   e.workload))
        changes.append(ChangeReport(shown_change(change), _source_of(change), first_at.get(change),
                                    {s.value: counts[s.value] for s in State}, listed[:limit],
                                    max(0, len(listed) - limit), key=change))
    changes.sort(key=lambda c: (-c.counts[State.FAILED] - c.counts[State.HELD], c.first_at or now, c.change))

    totals = Counter(e.state.value for c in changes for e in entries[c.key])
    budget_view: dict[str, object] = {
        "max_concurrent": budget.total, "max_per_namespace": budget.per_namespace, "hold": hold,
        "in_use": sum(rolling.values()),
        "busiest_namespaces": dict(sorted(rolling.items(), key=lambda kv: (-kv[1], kv[0]))[:5]),
    }
    commits = _commits(emissions, limit)
    notes = [NO_BUDGET_NOTE] if started and not budget.enabled else []
    return Report(int(now), budget_view, {s.value: totals[s.value] for s in State},
                  changes[:limit], commits[:limit], max(0, len(changes) - limit),
                  max(0, len(commits) - limit), notes)


_STAGE_ORDER = ("failed", "not-applied", "pushed", "waiting-for-merge", "in-template", "rolled")


def _commits(emissions: Iterable[Emission], limit: int) -> list[CommitReport]:
    """The emissions grouped by (repository, commit), the ones needing attention first."""
    grouped: dict[tuple[str, str], list[Emission]] = {}
    for emission in emissions:
        grouped.setdefault((emission.repository, emission.commit), []).append(emission)

    def rank(stage: str) -> int:
        return _STAGE_ORDER.index(stage) if stage in _STAGE_ORDER else len(_STAGE_ORDER)

    out: list[CommitReport] = []
    for (repository, commit), items in grouped.items():
        items.sort(key=lambda e: (rank(e.stage), str(e.ref)))
        out.append(CommitReport(
            repository, commit, dict(Counter(e.stage for e in items)),
            [{"workload": str(e.ref), "stage": e.stage, "reason": e.reason, "message": e.message,
              "engine": e.engine} for e in items[:limit]], max(0, len(items) - limit)))
    out.sort(key=lambda c: (min(rank(s) for s in c.stages), c.repository, c.commit))
    return out


# --------------------------------------------------------------------------- text


def _when(seconds: int | None, now: int) -> str:
    return f"{max(0, now - seconds)}s ago" if seconds is not None else "time unknown"


def render_text(report: Report) -> str:
    """The census as terminal text: one block per change, one line per workload."""
    budget = report.budget
    limits = []
    if budget["max_concurrent"]:
        limits.append(f"{budget['in_use']} of {budget['max_concurrent']} in use")
    else:
        limits.append(f"{budget['in_use']} rolling, no cluster limit")
    if budget["max_per_namespace"]:
        limits.append(f"at most {budget['max_per_namespace']} per namespace")
    limits.append("holds on failed rollouts" if budget["hold"] else "no holds")
    totals = report.totals
    lines = [f"budget: {', '.join(limits)}",
             "workloads: " + ", ".join(f"{totals[s.value]} {s.value}" for s in State)]
    lines += [f"note: {note}" for note in report.notes]
    if report.failing:
        lines.append(f"failing: {len(report.failing)} emission(s) still pending, retried until they succeed")
        for entry in report.failing:
            lines.append("  " + _failing_line(entry, report.now))
    if report.waiting_for_window:
        lines.append(f"waiting for a maintenance window: {len(report.waiting_for_window)} workload(s)")
        for wait in report.waiting_for_window:
            lines.append(f"  {wait.workload}  waiting for window {wait.window}, opens at {wait.opens_local} "
                         f"({wait.time_zone}), in {format_duration(max(0, wait.opens_at - report.now))}")
    if not report.changes:
        lines.append("no source change in flight")
    for change in report.changes:
        counts = change.counts
        lines.append("")
        lines.append(f"change {change.change}: " + ", ".join(f"{counts[s.value]} {s.value}" for s in State
                                                            if counts[s.value]))
        for entry in change.workloads:
            lines.append("  " + _entry_line(entry, report.now))
        if change.left_out:
            lines.append(f"  … {change.left_out} more (raise --limit)")
    if report.changes_left_out:
        lines.append(f"… {report.changes_left_out} more changes (raise --limit)")
    for commit in report.commits:
        lines.append("")
        stages = ", ".join(f"{n} {s}" for s, n in sorted(commit.stages.items(),
                                                         key=lambda kv: _stage_rank(kv[0])))
        lines.append(f"git commit {commit.commit[:12]} ({commit.repository}): {stages}")
        for item in commit.workloads:
            why = f" [{item['reason']}]" if item["reason"] else ""
            engine = f" via {item['engine']}" if item["engine"] else ""
            lines.append(f"  {item['stage']:<12} {item['workload']}{why}{engine}"
                         + (f": {item['message']}" if item["message"] else ""))
        if commit.left_out:
            lines.append(f"  … {commit.left_out} more (raise --limit)")
    if report.commits_left_out:
        lines.append(f"… {report.commits_left_out} more commits (raise --limit)")
    return "\n".join(lines)


def _failing_line(entry: FailingReport, now: int) -> str:
    more = len(entry.workloads) - 3
    who = ", ".join(entry.workloads[:3]) + (f" (+{more})" if more > 0 else "")
    due = max(0, entry.next_try - now)
    raised = ", raised" if entry.raised else ""
    return (f"{who or entry.key}  {entry.sink} [{entry.reason}] failing since {_when(entry.since, now)}, "
            f"{entry.attempts} attempts{raised}, next try in {due}s: {entry.error}")


def _stage_rank(stage: str) -> int:
    return _STAGE_ORDER.index(stage) if stage in _STAGE_ORDER else len(_STAGE_ORDER)


def _entry_line(entry: Entry, now: int) -> str:
    head = f"{entry.state.value:<8} {entry.workload}"
    if entry.state is State.HELD:
        return f"{head}  held by {', '.join(entry.held_by[:5])} since {_when(entry.since, now)}"
    if entry.state is State.WAITING:
        wave = f"wave {entry.wave}" if entry.wave is not None else "no wave"
        return f"{head}  {wave}: {entry.message}" if entry.reason != "WaitingForBudget" else f"{head}  {wave}"
    if entry.state is State.FAILED:
        return f"{head}  [{entry.reason}] since {_when(entry.since, now)}: {entry.message}"
    if entry.state is State.ROLLING:
        return f"{head}  wave 0, started {_when(entry.since, now)}: {entry.reason} {entry.message}".rstrip()
    return f"{head}  started {_when(entry.since, now)}"


def entries_of(ref: ObjectRef, report: Report) -> list[tuple[str, Entry]]:
    """(change, entry) for every line of one workload in ``report`` (for ``explain``)."""
    key = str(ref)
    return [(c.change, e) for c in report.changes for e in c.workloads if e.workload == key]


def as_dict(report: Report) -> Mapping[str, object]:
    """The census as plain data (``--output json``); change ids as shown, never their key."""
    data = asdict(report)
    for change in data["changes"]:
        del change["key"]
    return data
