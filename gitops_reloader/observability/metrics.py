"""Prometheus metrics of the controller, on an injected :class:`CollectorRegistry`.

:class:`Metrics` owns every collector and offers one small method per fact
(``metrics.reload_executed(True, "ns")``) so callers never touch prometheus objects.

Names:

* Stakater's, kept byte-for-byte so existing dashboards and alerts keep working:
  ``reloader_reload_executed_total{success}`` (pre-set to 0 for ``"true"`` and ``"false"``,
  as Stakater does) and, only when ``count_by_namespace=True`` (Stakater's
  ``METRICS_COUNT_BY_NAMESPACE=enabled``), ``reloader_reload_executed_total_by_namespace``
  ``{namespace,success}``. prometheus_client would append ``_total`` to a counter of that
  name, so that one family is exposed as ``untyped`` by a small collector of its own.
* Ours, prefixed ``gitops_reloader_`` (see :class:`Metrics` for the list).

Label values are kinds, sink names, repository names from the configuration, verbs,
status codes and fixed reasons: never data, hashes, URLs or tokens. Callers must keep it
that way; a label value is public to whoever can scrape ``/metrics``.

Every method is thread-safe (prometheus_client's collectors are).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

PREFIX = "gitops_reloader_"

SINK_OUTCOMES = frozenset({"applied", "already-current", "skipped", "would-apply", "error"})
"""Allowed ``outcome`` label values of ``gitops_reloader_sink_outcomes_total``."""

WATCH_RESTART_REASONS = frozenset({"expired", "error", "closed"})
"""Allowed ``reason`` label values of ``gitops_reloader_watch_restarts_total``."""

ROLLOUT_FAILURE_REASONS = frozenset({"ProgressDeadlineExceeded", "Degraded", "RolloutTimeout",
                                     "ReplacementNotReady", "other"})
"""Allowed ``reason`` label values of ``gitops_reloader_rollouts_failed_total``."""

_WAVE_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0)

STATE_STORE_OPERATIONS = frozenset({"read", "write", "key"})
"""Allowed ``operation`` label values of ``gitops_reloader_state_store_errors_total``."""

_EMIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_ROLLOUT_BUCKETS = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0)


def _bool_label(value: bool) -> str:
    return "true" if value else "false"


class _ByNamespaceCollector(Collector):
    """Stakater's ``reloader_reload_executed_total_by_namespace``, under its exact name."""

    NAME = "reloader_reload_executed_total_by_namespace"
    HELP = "Counter of reloads executed by Reloader by namespace."

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], float] = {}

    def inc(self, namespace: str, success: bool) -> None:
        key = (namespace, _bool_label(success))
        with self._lock:
            self._counts[key] = self._counts.get(key, 0.0) + 1.0

    def describe(self) -> Iterable[Metric]:
        return [Metric(self.NAME, self.HELP, "unknown")]

    def collect(self) -> Iterable[Metric]:
        family = Metric(self.NAME, self.HELP, "unknown")
        with self._lock:
            items = sorted(self._counts.items())
        for (namespace, success), value in items:
            family.add_sample(self.NAME, {"namespace": namespace, "success": success}, value)
        return [family]


class Metrics:
    """Every metric the controller exports, registered on ``registry``.

    Build exactly one per registry (a second one on the same registry raises
    ``ValueError: Duplicated timeseries``). Tests build their own ``CollectorRegistry``.

    Families (``gitops_reloader_`` prefix omitted):

    ========================================  =========================================
    ``sink_outcomes_total{sink,outcome}``     outcome: applied, already-current, skipped,
                                              would-apply (``--dry-run``), error
    ``dry_run_decisions_total{sink,namespace}`` ``--dry-run``: reloads decided, not written
    ``sink_errors_total{sink,reason}``        reason: a short fixed word (``not-found``...)
    ``emit_duration_seconds{sink}``           histogram of one ``Sink.emit`` call
    ``change_to_emit_seconds{sink}``          histogram: change detected → applied emission
    ``queue_depth``                           keys waiting in the work queue (callback)
    ``queue_retries_total``                   rate-limited re-adds
    ``api_errors_total{verb,resource,code}``  failed Kubernetes API calls
    ``api_writes_total{kind}``                rate-limited workload writes (live sinks)
    ``api_write_limit_qps``                   the ``--write-qps`` limit of those writes
    ``watch_restarts_total{resource,reason}`` reason: expired, error, closed
    ``changes_detected_total{kind}``          data changes seen (ConfigMap/Secret/SecretProviderClass)
    ``invalid_annotations_total{kind}``       malformed annotations skipped
    ``reloads_throttled_total{scope}``         workloads a storm brake held (workload or cluster)
    ``throttled_workloads``                   workloads a storm brake holds now
    ``source_backoffs_total{kind}``           changes of a source that keeps changing, held longer
    ``unused_key_changes_total{kind}``        workloads a change left alone: no key they use
                                              changed (``--reload-on=used-keys``)
    ``stale_env_vars_pruned_total``           ``STAKATER_*`` variables removed (``--prune-stale-env-vars``)
    ``git_commits_total{repo}``               commits pushed
    ``git_push_rejections_total{repo}``       non-fast-forward pushes, re-applied
    ``git_errors_total{repo,reason}``         other git failures
    ``git_repository_unusable{sink,repo,reason}`` 1: the repository failed its start-up checks
                                              (a mounted key, known_hosts or token file, the
                                              clone directory); /readyz fails with the reason
    ``pr_operations_total{host,operation}``   PR/MR API operations (open, update...)
    ``pr_foreign_commits_total{host}``        PRs given up: someone else committed to the branch
    ``alerts_total{sink,success}``            reload alerts sent or given up
    ``webhook_posts_total{success}``          POSTs of the ``webhook`` sink
    ``leader``                                1 while this replica holds the Lease
    ``informer_synced{resource}``             1 once the informer's cache has synced
    ``state_store_batches_total``             state-store batches written (every shard)
    ``state_store_errors_total{operation}``   state-store failures: read, write, key
    ``state_store_invalid_entries_total``     unreadable state-store lines skipped
    ``state_store_entries{kind}``             source / workload entries, and shards
    ``rollouts{state}``                       with a budget: queued, held, rolling now
    ``rollouts_failed_total{reason}``         ProgressDeadlineExceeded, Degraded, RolloutTimeout, other
    ``rollout_wave_seconds``                  histogram: first change → last rollout of the wave done
    ``pending_failures{sink,reason}``         emissions failing now and still pending (retried
                                              until they succeed; never dropped)
    ``failures_raised_total{sink}``           failures reported after ``--max-retries`` attempts
    ``failure_record_writes_total{success}``  writes of the ledger record ConfigMap
    ``failure_record_reads_total{success}``   reads of it (on becoming active; retried until read)
    ``ledger_record_skipped_total``           items of the record read back that were malformed
                                              or out of bounds (a hand edit): skipped, logged
    ``ledger_record_truncated``               entries the last write could not fit in the record
                                              (0 normally; the resync covers what it can)
    ``ledger_entries{why}``                   workloads owed a reload, by why they wait: due,
                                              coalescing, window, brake, budget, needs-person, failing
    ``resync_checks_failed_total{sink}``      checks of the slow resync that could not run (a host
                                              down): nothing was pending; the next pass checks again
    ``resync_passes_total``                   slow resync passes over every workload
    ``resync_repairs_total``                  workloads a resync found out of date and reloaded
    ``resync_duration_seconds``               the last resync pass's duration
    ``events_filtered_total{reason}``         Events kept back by the per-object spam filter
    ========================================  =========================================
    """

    def __init__(self, registry: CollectorRegistry, *, count_by_namespace: bool = False) -> None:
        self.registry = registry
        self._lock = threading.Lock()
        self._reloads = Counter(
            "reloader_reload_executed_total", "Counter of reloads executed by Reloader.",
            ["success"], registry=registry,
        )
        # Stakater exports both series from start-up; dashboards divide one by the other.
        self._reloads.labels(success="true").inc(0)
        self._reloads.labels(success="false").inc(0)
        self._by_namespace: _ByNamespaceCollector | None = None
        if count_by_namespace:
            self._by_namespace = _ByNamespaceCollector()
            registry.register(self._by_namespace)

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(PREFIX + name, doc, list(labels), registry=registry)

        def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(PREFIX + name, doc, list(labels), registry=registry)

        self._sink_outcomes = counter(
            "sink_outcomes_total", "Emissions by sink and outcome.", ("sink", "outcome"))
        self._sink_errors = counter(
            "sink_errors_total", "Failed emissions by sink and reason.", ("sink", "reason"))
        self._emit_duration = Histogram(
            PREFIX + "emit_duration_seconds", "Duration of one sink emission.", ["sink"],
            registry=registry, buckets=_EMIT_BUCKETS,
        )
        self._change_to_emit = Histogram(
            PREFIX + "change_to_emit_seconds",
            "Time from a detected ConfigMap/Secret change to its applied emission.", ["sink"],
            registry=registry, buckets=_EMIT_BUCKETS,
        )
        self._change_to_rollout = Histogram(
            PREFIX + "change_to_rollout_seconds",
            "Time from a ConfigMap/Secret change to the completed rollout of its git emission.", ["sink"],
            registry=registry, buckets=_ROLLOUT_BUCKETS,
        )
        self._follow_outcomes = counter(
            "git_follow_outcomes_total",
            "Git and pull-request emissions followed to their end, by outcome and reason.",
            ("sink", "outcome", "reason"))
        self._following = gauge("git_following", "Emissions of the git sinks being followed.", ("sink",))
        self._queue_depth = gauge("queue_depth", "Keys waiting in the work queue.")
        self._queue_retries = counter("queue_retries_total", "Rate-limited re-queues of a key.")
        self._api_errors = counter(
            "api_errors_total", "Failed Kubernetes API calls.", ("verb", "resource", "code"))
        self._api_writes = counter(
            "api_writes_total", "Workload writes made within the --write-qps limit.", ("kind",))
        self._api_write_limit = gauge("api_write_limit_qps", "The --write-qps limit.")
        self._watch_restarts = counter(
            "watch_restarts_total", "Watch streams restarted, by reason.", ("resource", "reason"))
        self._changes = counter(
            "changes_detected_total",
            "ConfigMap/Secret data (and SecretProviderClass version) changes detected.", ("kind",))
        self._invalid_annotations = counter(
            "invalid_annotations_total", "Malformed annotations skipped.", ("kind",))
        self._throttled = counter(
            "reloads_throttled_total", "Workloads held by a storm brake (once per hold).", ("scope",))
        self._throttled_now = gauge("throttled_workloads", "Workloads a storm brake holds now.")
        self._waiting_for_window = gauge(
            "waiting_for_window", "Workloads whose reload waits for its maintenance window.")
        self._source_backoffs = counter(
            "source_backoffs_total", "Changes whose coalescing was stretched: the source keeps changing.",
            ("kind",))
        self._synced = counter(
            "reloads_synced_total", "Source changes a later pod-template change (a sync) already rolled: "
            "recorded without a second rollout.", ("sink",))
        self._evictions = counter(
            "pod_evictions_total", "Eviction API calls for pods a reload restarts, by result "
            "(evicted, blocked: a PodDisruptionBudget said no, gone, error).", ("result",))
        self._evictions_done = counter(
            "evictions_completed_total",
            "Workloads whose pods all restarted through eviction after a reload.")
        self._unused_key_changes = counter(
            "unused_key_changes_total",
            "Workloads a change did not reload because no key they use changed.", ("kind",))
        self._pruned_env_vars = counter(
            "stale_env_vars_pruned_total", "Stale STAKATER_* variables removed with a reload.")
        self._git_commits = counter("git_commits_total", "Commits pushed.", ("repo",))
        self._git_push_rejections = counter(
            "git_push_rejections_total", "Pushes rejected because the remote moved on.", ("repo",))
        self._git_errors = counter("git_errors_total", "Failed git operations.", ("repo", "reason"))
        self._git_unusable = gauge(
            "git_repository_unusable", "1 while a configured repository failed its start-up checks.",
            ("sink", "repo", "reason"))
        self._pr_operations = counter(
            "pr_operations_total", "Pull/merge request API operations.", ("host", "operation"))
        self._pr_foreign = counter(
            "pr_foreign_commits_total",
            "Pull requests the controller stopped updating because their branch holds commits it did "
            "not make (counted once, when the notice is posted).", ("host",))
        self._alerts = counter(
            "alerts_total", "Reload alerts by sink and success.", ("sink", "success"))
        self._webhook_posts = counter(
            "webhook_posts_total", "POSTs made by the webhook sink.", ("success",))
        self._dry_run_decisions = counter(
            "dry_run_decisions_total", "Reloads decided but not written (--dry-run).",
            ("sink", "namespace"))
        self._leader = gauge("leader", "1 while this replica is the leader, else 0.")
        self._permissions_missing = gauge(
            "permissions_missing",
            "Permissions the configuration needs that the API server denied at start-up.", ("essential",))
        self._informer_synced = gauge(
            "informer_synced", "1 once the informer's cache has synced.", ("resource",))
        self._state_batches = counter(
            "state_store_batches_total", "State-store batches written (every shard).")
        self._state_errors = counter(
            "state_store_errors_total", "State-store failures by operation (read, write, key).",
            ("operation",))
        self._state_invalid = counter(
            "state_store_invalid_entries_total", "Unreadable state-store lines or shards skipped.")
        self._rollouts = gauge(
            "rollouts", "With a rollout budget: reloads queued, held by a failed rollout, rolling.",
            ("state",))
        self._rollouts_failed = counter(
            "rollouts_failed_total", "Rollouts started by the controller that failed, by reason.",
            ("reason",))
        for reason in sorted(ROLLOUT_FAILURE_REASONS):  # series exist from the start, for increase()
            self._rollouts_failed.labels(reason=reason)
        for state in ("queued", "held", "rolling"):
            self._rollouts.labels(state=state).set(0)
        self._wave_seconds = Histogram(
            PREFIX + "rollout_wave_seconds",
            "Time from the first change of a wave to the end of its last rollout (budget set).",
            registry=registry, buckets=_WAVE_BUCKETS,
        )
        self._pending_failures = gauge(
            "pending_failures", "Emissions failing now and still pending, by sink and reason.",
            ("sink", "reason"))
        self._pending_failure_labels: set[tuple[str, str]] = set()
        self._failures_raised = counter(
            "failures_raised_total", "Failing emissions reported after --max-retries attempts.", ("sink",))
        self._failure_record_writes = counter(
            "failure_record_writes_total", "Writes of the ledger record ConfigMap.", ("success",))
        self._failure_record_reads = counter(
            "failure_record_reads_total", "Reads of the ledger record ConfigMap.", ("success",))
        self._ledger_record_skipped = counter(
            "ledger_record_skipped_total", "Items of the ledger record read back that were malformed.")
        self._ledger_record_truncated = gauge(
            "ledger_record_truncated", "Entries the last write could not fit in the ledger record.")
        self._ledger_entries = gauge(
            "ledger_entries", "Workloads owed a reload, by why they wait.", ("why",))
        self._resync_checks_failed = counter(
            "resync_checks_failed_total", "Slow-resync checks that could not run.", ("sink",))
        self._resync_passes = counter("resync_passes_total", "Slow resync passes over every workload.")
        self._resync_repairs = counter(
            "resync_repairs_total", "Workloads a resync pass found out of date and queued.")
        self._resync_duration = gauge("resync_duration_seconds", "Duration of the last resync pass.")
        self._events_filtered = counter(
            "events_filtered_total", "Events kept back by the per-object spam filter.", ("reason",))
        self._state_entries = gauge(
            "state_store_entries", "State-store entries (kind source, workload) and shards (kind shard).",
            ("kind",))

    # Stakater-compatible

    def reload_executed(self, success: bool, namespace: str) -> None:
        """Count one workload reload (Stakater: N per change that reloads N workloads)."""
        self._reloads.labels(success=_bool_label(success)).inc()
        if self._by_namespace is not None:
            self._by_namespace.inc(namespace, success)

    # sinks

    def sink_outcome(self, sink: str, outcome: str) -> None:
        """Count one emission; ``outcome`` is an ``OutcomeStatus`` value or ``"error"``."""
        value = str(outcome)
        if value not in SINK_OUTCOMES:
            raise ValueError(f"unknown sink outcome {value!r}; use one of {sorted(SINK_OUTCOMES)}")
        self._sink_outcomes.labels(sink=str(sink), outcome=value).inc()

    def dry_run_decision(self, sink: str, namespace: str) -> None:
        """Count one reload ``--dry-run`` decided and did not write (namespace: the workload's)."""
        self._dry_run_decisions.labels(sink=str(sink), namespace=str(namespace)).inc()

    def sink_error(self, sink: str, reason: str) -> None:
        """Count one failed emission; ``reason`` is a short fixed word, never a message."""
        self._sink_errors.labels(sink=str(sink), reason=reason).inc()

    def observe_emit(self, sink: str, seconds: float) -> None:
        """Record how long one ``emit`` took."""
        self._emit_duration.labels(sink=str(sink)).observe(seconds)

    @contextmanager
    def time_emit(self, sink: str) -> Iterator[None]:
        """Time the ``with`` block into ``emit_duration_seconds`` (also when it raises)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.observe_emit(sink, time.perf_counter() - start)

    def observe_change_to_emit(self, sink: str, seconds: float) -> None:
        """Record the time from a change's detection to the emission that applied it."""
        self._change_to_emit.labels(sink=str(sink)).observe(max(seconds, 0.0))

    # failures, resync, Events

    def set_pending_failures(self, counts: dict[tuple[str, str], int]) -> None:
        """The failing emissions by (sink, reason); series no longer failing drop to 0."""
        with self._lock:
            for sink, reason in self._pending_failure_labels - set(counts):
                self._pending_failures.labels(sink=sink, reason=reason).set(0)
            for (sink, reason), count in counts.items():
                self._pending_failures.labels(sink=sink, reason=reason).set(count)
            self._pending_failure_labels |= set(counts)

    def failure_raised(self, sink: str) -> None:
        self._failures_raised.labels(sink=sink).inc()

    def failure_record_write(self, success: bool) -> None:
        self._failure_record_writes.labels(success=_bool_label(success)).inc()

    def failure_record_read(self, success: bool) -> None:
        self._failure_record_reads.labels(success=_bool_label(success)).inc()

    def ledger_record_skipped(self, count: int) -> None:
        self._ledger_record_skipped.inc(count)

    def set_ledger_record_truncated(self, count: int) -> None:
        self._ledger_record_truncated.set(count)

    def set_ledger_callback(self, counts: Callable[[], Mapping[str, int]]) -> None:
        """Read ``ledger_entries{why}`` from ``counts()`` at every scrape (every reason listed)."""
        for why in ("due", "coalescing", "window", "brake", "budget", "needs-person", "failing"):
            self._ledger_entries.labels(why=why).set_function(lambda why=why: float(counts().get(why, 0)))

    def resync_check_failed(self, sink: str) -> None:
        """A slow-resync check could not run (nothing was pending: no failure is recorded)."""
        self._resync_checks_failed.labels(sink=sink).inc()

    def resync_pass(self, seconds: float, repaired: int) -> None:
        self._resync_passes.inc()
        self._resync_repairs.inc(repaired)
        self._resync_duration.set(seconds)

    def event_filtered(self, reason: str) -> None:
        self._events_filtered.labels(reason=reason).inc()

    # work queue

    def set_queue_depth_callback(self, depth: Callable[[], float]) -> None:
        """Read ``queue_depth`` from ``depth()`` at every scrape."""
        self._queue_depth.set_function(depth)

    def queue_retry(self) -> None:
        """Count one rate-limited re-queue."""
        self._queue_retries.inc()

    # Kubernetes API

    def api_error(self, verb: str, resource: str, code: int | str) -> None:
        """Count one failed API call (``code``: HTTP status, or a word like ``network``)."""
        self._api_errors.labels(verb=verb, resource=resource, code=str(code)).inc()

    def api_write(self, kind: str) -> None:
        """Count one rate-limited workload write (``kind``: Deployment, ...)."""
        self._api_writes.labels(kind=kind).inc()

    def set_api_write_limit(self, qps: float) -> None:
        """Report the client-side write limit, so dashboards can draw rate against it."""
        self._api_write_limit.set(qps)

    def watch_restart(self, resource: str, reason: str) -> None:
        """Count one restarted watch; ``reason`` is expired, error or closed."""
        if reason not in WATCH_RESTART_REASONS:
            allowed = sorted(WATCH_RESTART_REASONS)
            raise ValueError(f"unknown watch restart reason {reason!r}; use one of {allowed}")
        self._watch_restarts.labels(resource=resource, reason=reason).inc()

    def change_detected(self, kind: str) -> None:
        """Count one change (``kind``: ConfigMap, Secret or SecretProviderClass)."""
        self._changes.labels(kind=str(kind)).inc()

    def invalid_annotation(self, kind: str) -> None:
        """Count one malformed annotation (``kind``: the object kind carrying it)."""
        self._invalid_annotations.labels(kind=str(kind)).inc()

    def set_hold_callbacks(self, waiting: Callable[[], float], throttled: Callable[[], float]) -> None:
        """Read ``waiting_for_window`` and ``throttled_workloads`` from the ledger at every scrape."""
        self._waiting_for_window.set_function(waiting)
        self._throttled_now.set_function(throttled)

    def source_backoff(self, kind: str) -> None:
        """A change of a source that keeps changing waited longer than the coalescing window."""
        self._source_backoffs.labels(kind=str(kind)).inc()

    def reload_synced(self, sink: str) -> None:
        """One workload's change was rolled by someone else's template change (one rollout per sync)."""
        self._synced.labels(sink=sink).inc()

    def pod_eviction(self, result: str) -> None:
        """One Eviction API call for a reload and its ``result``."""
        self._evictions.labels(result=result).inc()

    def eviction_completed(self) -> None:
        """Every pod of one workload restarted through eviction after a reload."""
        self._evictions_done.inc()

    def reload_throttled(self, scope: str) -> None:
        """A storm brake held a workload (``scope``: workload or cluster)."""
        self._throttled.labels(scope=scope).inc()

    def unused_key_change(self, kind: str) -> None:
        """Count one workload left alone by a change of keys it does not use (source ``kind``)."""
        self._unused_key_changes.labels(kind=str(kind)).inc()

    def env_vars_pruned(self, count: int) -> None:
        """Count stale ``STAKATER_*`` variables removed with a reload."""
        self._pruned_env_vars.inc(count)

    def set_informer_synced(self, resource: str, synced: bool) -> None:
        """Report whether ``resource``'s informer cache has synced."""
        self._informer_synced.labels(resource=resource).set(1 if synced else 0)

    def set_permissions_missing(self, essential: int, optional: int) -> None:
        """Report the start-up permission check: how many verbs are missing, by kind."""
        self._permissions_missing.labels(essential="true").set(essential)
        self._permissions_missing.labels(essential="false").set(optional)

    def set_leader(self, leader: bool) -> None:
        """Report whether this replica currently leads."""
        self._leader.set(1 if leader else 0)

    # state store

    def state_store_batch(self) -> None:
        """Count one state-store batch written."""
        self._state_batches.inc()

    def state_store_error(self, operation: str) -> None:
        """Count one state-store failure: ``read`` (load), ``write`` (a batch) or ``key`` (digest key)."""
        if operation not in STATE_STORE_OPERATIONS:
            raise ValueError(f"unknown state-store operation {operation!r}")
        self._state_errors.labels(operation=operation).inc()

    def state_store_invalid(self, count: int) -> None:
        """Count unreadable state-store lines skipped at load."""
        self._state_invalid.inc(count)

    def set_state_store_entries(self, sources: int, workloads: int, shards: int) -> None:
        """Report the stored state's size."""
        self._state_entries.labels(kind="source").set(sources)
        self._state_entries.labels(kind="workload").set(workloads)
        self._state_entries.labels(kind="shard").set(shards)

    # git and git hosts

    def git_commit(self, repo: str) -> None:
        """Count one pushed commit to ``repo`` (its name from the configuration)."""
        self._git_commits.labels(repo=repo).inc()

    def git_push_rejected(self, repo: str) -> None:
        """Count one rejected (non-fast-forward) push."""
        self._git_push_rejections.labels(repo=repo).inc()

    def git_error(self, repo: str, reason: str) -> None:
        """Count one failed git operation."""
        self._git_errors.labels(repo=repo, reason=reason).inc()

    def set_git_repository_unusable(self, sink: str, repo: str, reason: str, unusable: bool = True) -> None:
        """Report that ``sink`` can't use ``repo``: its check failed for ``reason`` (``unusable``
        False: it passes now)."""
        self._git_unusable.labels(sink=sink, repo=repo, reason=reason).set(1 if unusable else 0)

    def follow_outcome(self, sink: str, outcome: str, reason: str) -> None:
        """Count one followed emission's end (``rolled``, ``failed``, ``not-applied``) and reason."""
        self._follow_outcomes.labels(sink=sink, outcome=outcome, reason=reason).inc()

    def observe_change_to_rollout(self, sink: str, seconds: float) -> None:
        """Record the time from a source change to the completed rollout of its emission."""
        self._change_to_rollout.labels(sink=sink).observe(max(seconds, 0.0))

    def set_following(self, sink: str, count: int) -> None:
        """How many emissions of ``sink`` are being followed now."""
        self._following.labels(sink=sink).set(count)

    def pr_operation(self, host: str, operation: str) -> None:
        """Count one PR/MR API operation (``operation``: find, open, update, comment...)."""
        self._pr_operations.labels(host=host, operation=operation).inc()

    def pr_foreign_commits(self, host: str) -> None:
        """Count one pull request given up because someone else committed to its branch."""
        self._pr_foreign.labels(host=host).inc()

    # notifications

    def alert_sent(self, sink: str, success: bool) -> None:
        """Count one reload alert, delivered or given up."""
        self._alerts.labels(sink=sink, success=_bool_label(success)).inc()

    def webhook_post(self, success: bool) -> None:
        """Count one POST of the ``webhook`` sink."""
        self._webhook_posts.labels(success=_bool_label(success)).inc()

    # rollout waves

    def set_rollouts(self, *, queued: int, held: int, rolling: int) -> None:
        """The waves' state now: reloads waiting, held by a failed rollout, rolling."""
        self._rollouts.labels(state="queued").set(queued)
        self._rollouts.labels(state="held").set(held)
        self._rollouts.labels(state="rolling").set(rolling)

    def rollout_failed(self, reason: str) -> None:
        """Count a failed rollout; a reason outside :data:`ROLLOUT_FAILURE_REASONS` counts as other."""
        self._rollouts_failed.labels(reason=reason if reason in ROLLOUT_FAILURE_REASONS else "other").inc()

    def observe_wave(self, seconds: float) -> None:
        """A wave is done: from its first change to its last rollout's end."""
        self._wave_seconds.observe(max(seconds, 0.0))
