"""Deployments paused for a pause period (``deployment.reloader.stakater.com/pause-period``).

A reload of a Deployment with a pause period pauses it and records when; this module
schedules the unpause on the work queue (``unpause|<key>``) and, when it is due, patches
``spec.paused: false`` and drops the paused-at annotation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime

from gitops_reloader.clock import Clock
from gitops_reloader.config import Config
from gitops_reloader.control.caches import Caches
from gitops_reloader.durations import parse_duration
from gitops_reloader.kube.api import STRATEGIC, KubeApi
from gitops_reloader.kube.workloads import WorkloadAdapter, WorkloadRecord
from gitops_reloader.model import ObjectRef, WorkloadKey
from gitops_reloader.policy import shown_patterns
from gitops_reloader.queue import WorkQueue

log = logging.getLogger(__name__)

UNPAUSE_PREFIX = "unpause|"

Warn = Callable[[WorkloadRecord, str, str], None]
"""(workload, reason, message): a log line and a Warning Event."""


class PauseScheduler:
    """Times and performs the unpausing of Deployments we paused."""

    def __init__(self, config: Config, api: KubeApi, caches: Caches, queue: WorkQueue[str],
                 adapters: Mapping[str, WorkloadAdapter], clock: Clock, warn: Warn) -> None:
        self.config = config
        self.api = api
        self.caches = caches
        self.queue = queue
        self.adapters = adapters
        self.clock = clock
        self.warn = warn

    def pause_state(self, record: WorkloadRecord) -> tuple[float, float] | None:
        """(paused-at, period) when we paused this Deployment; None otherwise.

        A pause we cannot time (unreadable period or paused-at) is due at once: a Deployment
        must never stay paused because of an annotation we cannot read.
        """
        keys = self.config.keys
        if record.ref.kind != "Deployment":
            return None
        paused_at = record.annotations.get(keys.paused_at)
        period_text = record.annotations.get(keys.pause_period)
        if not paused_at or not period_text:
            return None
        try:
            started = datetime.fromisoformat(paused_at.replace("Z", "+00:00")).timestamp()
            period = parse_duration(period_text)
        except ValueError:
            self.warn(record, "InvalidPausePeriod",
                      f"cannot read {keys.pause_period}={shown_patterns((period_text,))} / "
                      f"{keys.paused_at}; unpausing")
            return 0.0, 0.0
        return started, period

    def schedule(self, record: WorkloadRecord) -> None:
        """Queue the unpause of ``record`` for when its pause period ends (if it is paused)."""
        state = self.pause_state(record)
        if state is None:
            return
        started, period = state
        self.queue.add_after(UNPAUSE_PREFIX + WorkloadKey(record.ref.key),
                             max(0.0, started + period - self.clock.now()))

    def schedule_all(self) -> None:
        """Queue the unpause of every cached Deployment we paused (on becoming active)."""
        for record in self.caches.workloads():
            self.schedule(record)

    def unpause(self, key: str) -> None:
        """Work-queue handler for ``unpause|<key>``: unpause now, or re-queue if not yet due."""
        ref = ObjectRef.from_key(key[len(UNPAUSE_PREFIX):])
        record = self.caches.workload(ref)
        state = self.pause_state(record) if record is not None else None
        if record is None or state is None:
            return
        started, period = state
        remaining = started + period - self.clock.now()
        if remaining > 0:
            self.queue.add_after(key, remaining)
            return
        if self.config.runtime.dry_run:
            log.info("would unpause after pause period (dry run)", extra={"object": ref.key})
            return
        body = {"spec": {"paused": False},
                "metadata": {"annotations": {self.config.keys.paused_at: None}}}
        self.api.patch(self.adapters["Deployment"].resource, ref.namespace, ref.name, body,
                       content_type=STRATEGIC)
        log.info("unpaused after pause period", extra={"object": ref.key})
