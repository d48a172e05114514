"""What a write to a workload carries besides the reload, and whether it may be written at all.

:class:`WriteChecks` answers for the reconciler: is this workload restarted by eviction after
its write (``--eviction`` and its ``rollout-strategy`` annotation), which eviction record the
live write carries, and does the kind's adapter refuse any template change (a Knative Service
with a fixed revision name) — each refusal a metric and a Warning Event on the workload.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gitops_reloader.clock import Clock
from gitops_reloader.config import Config
from gitops_reloader.kube.workloads import WorkloadAdapter, WorkloadRecord
from gitops_reloader.model import SinkName
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.rollout.eviction import (
    EVICTION_ANNOTATION,
    EVICTION_STRATEGY,
    STRATEGY_ANNOTATION,
    EvictionRecord,
    strategy_wanted,
)
from gitops_reloader.sinks.eviction import EVICTION_SINK

__all__ = ["EVICTING_SINKS", "LIVE_SINKS", "WriteChecks", "eviction_wanted"]

LIVE_SINKS = frozenset({SinkName.ENV_VARS, SinkName.ANNOTATIONS})
"""The sinks whose write an eviction follows (a git commit reaches the cluster later)."""
EVICTING_SINKS = LIVE_SINKS | {EVICTION_SINK}
"""The sinks after whose write the evictor restarts the pods (the eviction sink's is the record alone)."""

Warn = Callable[[WorkloadRecord, str, str], None]


def eviction_wanted(config: Config, record: WorkloadRecord) -> tuple[bool, str]:
    """Whether ``record``'s pods are restarted by eviction after its write, and why
    (:func:`~gitops_reloader.rollout.eviction.strategy_wanted` for ``--eviction``)."""
    return strategy_wanted(config.rollouts.eviction, record.annotations,
                           rolls_on_write=record.rolls_on_write, has_template=bool(record.template_path))


class WriteChecks:
    """Eviction and refusals for the reconciler's writes."""

    def __init__(self, config: Config, adapters: Mapping[str, WorkloadAdapter], *, metrics: Metrics,
                 clock: Clock, warn: Warn) -> None:
        self.config = config
        self.adapters = adapters
        self.metrics = metrics
        self.clock = clock
        self.warn = warn

    def evicts(self, record: WorkloadRecord) -> tuple[bool, str]:
        """Whether this workload's pods are restarted by eviction after its write, and why."""
        return eviction_wanted(self.config, record)

    def eviction_record(self, record: WorkloadRecord, sink: str) -> dict[str, str]:
        """The eviction record a live write carries (the evictor restarts the pods from it), or
        nothing; a workload that asks for eviction where it cannot be done gets a Warning Event."""
        if sink == EVICTION_SINK:
            return {}  # the eviction sink writes the record itself
        wanted, why = self.evicts(record)
        if not wanted:
            if why == "--eviction=off" and STRATEGY_ANNOTATION in record.annotations:
                self.warn(record, "EvictionDisabled", f"{STRATEGY_ANNOTATION}={EVICTION_STRATEGY} is set, "
                          "but the controller runs with --eviction=off: the write restarts no pod")
            return {}
        if sink not in LIVE_SINKS:
            self.warn(record, "EvictionNotSupported", f"restart by eviction ({why}) follows a live write; "
                      f"the {sink} sink's change restarts no pod of this workload by itself")
            return {}
        return {EVICTION_ANNOTATION: EvictionRecord(since=int(self.clock.now())).encode()}

    def refused(self, record: WorkloadRecord, sink: str) -> bool:
        """Whether the kind's adapter refuses any template change to this workload (e.g. a
        Knative Service with a fixed revision name): then a Warning Event, nothing written."""
        adapter = self.adapters.get(record.ref.kind)
        refusal = adapter.refusal(record) if adapter is not None else None
        if refusal is None:
            return False
        reason, message = refusal
        self.metrics.sink_error(sink, reason)
        self.warn(record, reason, message)
        return True
