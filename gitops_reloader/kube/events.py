"""Kubernetes Events on the objects we act on (Normal for reloads, Warning for refusals).

Events are written from a background thread with a bounded buffer, so a slow or failing
API server never delays a reload. As client-go's ``recordToSink`` does, a write that got no
answer (a connection refused or cut) is tried again, up to :data:`MAX_TRIES` times, the first
wait drawn at random within ``retry_sleep`` so that a fleet does not knock all at once when
the API server returns; a write the server answered with an error is not retried; either way
the correlator keeps what it counted, so the next repeat still patches the same Event object
instead of starting a new one. An event that could not be written is logged and dropped (it is
a notification, not state). Before it is written each event passes client-go's
correlator (:mod:`.eventcorrelator`): a repeat of the same object, reason and message
patches the existing Event's ``count`` and ``lastTimestamp``, ten distinct messages of one
reason within ten minutes become one aggregate, and past 25 events per object (refilled
one per five minutes) nothing more is written. Messages pass the log's credential
redaction (:func:`~gitops_reloader.observability.logging.redact_text`) and must never
contain secret values.
"""

from __future__ import annotations

import logging
import queue
import random
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass

from gitops_reloader.clock import Clock, SystemClock
from gitops_reloader.errors import KubeError, KubeNotFound
from gitops_reloader.kinds import kube_kind
from gitops_reloader.kube.api import MERGE, KubeApi
from gitops_reloader.kube.eventcorrelator import Correlated, EventCorrelator, EventKey
from gitops_reloader.kube.resources import EVENTS
from gitops_reloader.kube.workloads import rfc3339
from gitops_reloader.model import ObjectRef
from gitops_reloader.redaction import redact_text

log = logging.getLogger(__name__)

COMPONENT = "gitops-reloader"
MAX_TRIES = 12
"""client-go's ``maxTriesPerEvent``."""
RETRY_SLEEP = 10.0
"""client-go's ``defaultSleepDuration`` between tries."""


@dataclass(frozen=True, slots=True)
class EventSpec:
    ref: ObjectRef
    api_version: str
    uid: str
    type: str
    reason: str
    message: str


class EventRecorder:
    """``normal()``/``warning()`` return at once; a daemon thread does the writes."""

    def __init__(self, api: KubeApi, *, clock: Clock | None = None, capacity: int = 10_000,
                 on_filtered: Callable[[str], None] | None = None, retry_sleep: float = RETRY_SLEEP) -> None:
        self.api = api
        self.clock = clock or SystemClock()
        self.correlator = EventCorrelator(self.clock)
        self.on_filtered = on_filtered
        """Called with the reason of each event the spam filter kept back (a metric)."""
        self.retry_sleep = retry_sleep
        self._closing = threading.Event()
        self._random = random.Random()
        self._queue: queue.Queue[EventSpec | None] = queue.Queue(maxsize=capacity)
        self._thread = threading.Thread(target=self._run, name="event-recorder", daemon=True)
        self._thread.start()

    def normal(self, ref: ObjectRef, reason: str, message: str, *, uid: str = "",
               api_version: str = "") -> None:
        self._put(EventSpec(ref, api_version, uid, "Normal", reason, message))

    def warning(self, ref: ObjectRef, reason: str, message: str, *, uid: str = "",
                api_version: str = "") -> None:
        self._put(EventSpec(ref, api_version, uid, "Warning", reason, message))

    def _put(self, spec: EventSpec) -> None:
        try:
            self._queue.put_nowait(spec)
        except queue.Full:
            log.warning("event buffer full, event dropped",
                        extra={"object": spec.ref.key, "reason": spec.reason})

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until buffered events are written (for tests and shutdown)."""
        done = threading.Event()
        deadline = self.clock.monotonic() + timeout
        while not self._queue.empty() and self.clock.monotonic() < deadline:
            done.wait(0.01)
        self._queue.join()

    def close(self) -> None:
        self._closing.set()  # a write waiting to be tried again gives up at once
        self._queue.put(None)
        self._thread.join(5.0)

    def _run(self) -> None:
        while True:
            spec = self._queue.get()
            try:
                if spec is None:
                    return
                self._write(spec)
            finally:
                self._queue.task_done()

    def _write(self, spec: EventSpec) -> None:
        kind = kube_kind(spec.ref.kind)
        message = redact_text(spec.message)[:1024]
        key = EventKey(spec.ref.namespace, kind, spec.ref.name, spec.uid, spec.type, spec.reason, message)
        decision = self.correlator.correlate(key, f"{spec.ref.name}.{secrets.token_hex(8)}")
        if decision.skip:
            log.debug("event filtered as spam (client-go's per-object limit)",
                      extra={"object": spec.ref.key, "reason": spec.reason})
            if self.on_filtered is not None:
                self.on_filtered(spec.reason)
            return
        for tries in range(1, MAX_TRIES + 1):
            try:
                self._send(spec, kind, decision)
                return
            except KubeError as exc:
                unanswered = not exc.status  # no answer at all: client-go tries again
                if not unanswered or tries == MAX_TRIES:
                    log.warning("cannot write event", extra={
                        "object": spec.ref.key, "reason": spec.reason, "error": str(exc), "tries": tries})
                    return
            wait = self.retry_sleep * (self._random.random() if tries == 1 else 1.0)
            if self._closing.wait(wait):
                return

    def _send(self, spec: EventSpec, kind: str, decision: Correlated) -> None:
        if decision.patch:
            try:
                self._patch(spec, decision)
                return
            except KubeNotFound:  # expired or deleted: write it anew, as client-go does
                pass
        self._create(spec, kind, decision)

    def _patch(self, spec: EventSpec, decision: Correlated) -> None:
        self.api.patch(EVENTS, spec.ref.namespace, decision.name, {
            "count": decision.count, "lastTimestamp": rfc3339(self.clock.now()),
            "message": decision.message}, content_type=MERGE)

    def _create(self, spec: EventSpec, kind: str, decision: Correlated) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": decision.name,
                "namespace": spec.ref.namespace,
            },
            "involvedObject": {
                "kind": kind, "namespace": spec.ref.namespace, "name": spec.ref.name,
                **({"uid": spec.uid} if spec.uid else {}),
                **({"apiVersion": spec.api_version} if spec.api_version else {}),
            },
            "reason": spec.reason,
            "message": decision.message,
            "type": spec.type,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "firstTimestamp": rfc3339(decision.first_timestamp),
            "lastTimestamp": rfc3339(self.clock.now()),
            "count": decision.count,
        }
        self.api.create(EVENTS, spec.ref.namespace, body)
