"""Leader election on a ``coordination.k8s.io/v1`` Lease (as client-go's leaderelection).

The holder renews ``renewTime`` every ``retry_period``; a candidate takes the Lease over
when it has not seen the record change for ``lease_duration`` (measured on its own
monotonic clock, so clock skew between nodes does not matter). Every write is a PUT with
the resourceVersion read, so two candidates can never both win: the loser gets a 409.
A leader that cannot renew within ``renew_deadline`` steps down (``on_stopped``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from gitops_reloader.clock import Clock, SystemClock
from gitops_reloader.errors import KubeError, KubeNotFound
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.resources import LEASES

log = logging.getLogger(__name__)


def _micro_time(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Run :meth:`run` in a thread; callbacks fire on that thread."""

    def __init__(
        self,
        api: KubeApi,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Clock | None = None,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock or SystemClock()
        self._observed: tuple[str, float] | None = None  # (record fingerprint, when seen)
        self.is_leader = False

    def run(self, on_started: Callable[[], None], on_stopped: Callable[[], None],
            stop: threading.Event) -> None:
        """Campaign until leader, then renew until stopped or the lease is lost."""
        while not stop.is_set():
            if self._try_acquire_or_renew():
                break
            stop.wait(self.retry_period)
        if stop.is_set():
            return
        self.is_leader = True
        log.info("became leader", extra={"lease": f"{self.namespace}/{self.name}",
                                         "identity": self.identity})
        on_started()
        last_renew = self.clock.monotonic()
        while not stop.wait(self.retry_period):
            if self._try_acquire_or_renew():
                last_renew = self.clock.monotonic()
            elif self.clock.monotonic() - last_renew > self.renew_deadline:
                log.error("lost leadership", extra={"lease": f"{self.namespace}/{self.name}"})
                self.is_leader = False
                on_stopped()
                return
        self.is_leader = False

    def release(self) -> bool:
        """Hand the Lease back if we hold it (client-go ``ReleaseOnCancel``): a standby
        takes over at its next retry instead of waiting out the lease duration."""
        try:
            lease = self.api.get(LEASES, self.namespace, self.name)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return False
            # As client-go: an empty holder, a one-second duration, times kept.
            lease["spec"] = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1}
            self.api.update(LEASES, self.namespace, self.name, lease)
        except KubeError as exc:
            log.warning("cannot release lease", extra={"lease": f"{self.namespace}/{self.name}",
                                                       "error": str(exc)})
            return False
        self.is_leader = False
        log.info("released lease", extra={"lease": f"{self.namespace}/{self.name}"})
        return True

    def _spec(self, previous: dict[str, Any] | None) -> dict[str, Any]:
        now = _micro_time(self.clock.now())
        spec = dict(previous or {})
        if spec.get("holderIdentity") != self.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if previous else 0)
        spec.update(holderIdentity=self.identity, renewTime=now,
                    leaseDurationSeconds=int(self.lease_duration))
        return spec

    def _try_acquire_or_renew(self) -> bool:
        try:
            lease = self.api.get(LEASES, self.namespace, self.name)
        except KubeNotFound:
            try:
                self.api.create(LEASES, self.namespace, {
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._spec(None),
                })
                return True
            except KubeError:
                return False
        except KubeError as exc:
            log.warning("cannot read lease", extra={"error": str(exc)})
            return False
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        fingerprint = f"{holder}|{spec.get('renewTime')}"
        now = self.clock.monotonic()
        if self._observed is None or self._observed[0] != fingerprint:
            self._observed = (fingerprint, now)
        expired = now - self._observed[1] > float(spec.get("leaseDurationSeconds")
                                                  or self.lease_duration)
        if holder and holder != self.identity and not expired:
            return False
        lease["spec"] = self._spec(spec)
        try:
            self.api.update(LEASES, self.namespace, self.name, lease)
        except KubeError:
            return False
        return True
