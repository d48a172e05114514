"""The cluster a schedule runs in: the API test server, the controller, its clock and the pods.

:class:`World` starts an API test server, creates two ConfigMaps and four Deployments that
read them — ``plain`` (``env-vars``), ``two`` (both sources, ``annotations``: its single record
names one), ``nightly`` (a maintenance window open 10 minutes in every 20) and ``braked`` (one
reload per 2 minutes) — runs the controller in-process on a :class:`FakeClock`, and applies
each :class:`~.steps.Step`. After every step it waits until the controller has nothing it could
do before the clock moves, notes the controller's template writes with the time they were made,
and ticks the rollouts (:class:`~.kubelet.TickedRollouts`). What it records of its *own* writes
— each data change's resourceVersion, each template or scale change it made — is what the
oracle (:mod:`.oracle`) judges the cluster against; nothing the controller recorded is trusted.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitops_reloader.app import App
from gitops_reloader.clock import FakeClock
from gitops_reloader.config import load_config
from gitops_reloader.errors import KubeNotFound
from gitops_reloader.kube.api import FIELD_MANAGER, STRATEGIC, KubeApi
from gitops_reloader.kube.resources import CONFIGMAPS, DEPLOYMENTS
from gitops_reloader.ledger import RECORD_KEY
from gitops_reloader.testing.apiserver import ApiServer, Fault
from gitops_reloader.testing.apiserver.strategy import use_clock
from gitops_reloader.testing.schedules.kubelet import TickedRollouts
from gitops_reloader.testing.schedules.steps import IMAGES, SOURCES, Step, Variant
from gitops_reloader.windows import ReloadWindow

__all__ = ["NIGHT", "READS", "World"]

log = logging.getLogger(__name__)

NS = "ns"
NIGHT = ReloadWindow("night", "*/20 * * * *", "UTC", 600.0)
WINDOWS = f"""windows:
  - name: {NIGHT.name}
    schedule: "{NIGHT.schedule}"
    timeZone: {NIGHT.time_zone}
    duration: 10m
"""
BRAKE_PERIOD = 120.0
READS: Mapping[str, frozenset[str]] = {
    "plain": frozenset({"a"}), "two": frozenset({"a", "b"}), "nightly": frozenset({"b"}),
    "braked": frozenset({"a"}), "spare": frozenset({"a", "b"}),
}
"""Which sources each workload reads (``spare`` exists only while a step created it)."""
_ANNOTATIONS: Mapping[str, Mapping[str, str]] = {
    "two": {"gitops-reloader.io/sink": "annotations"},
    "nightly": {"gitops-reloader.io/reload-window": NIGHT.name},
    "braked": {"gitops-reloader.io/max-reloads": f"1/{int(BRAKE_PERIOD)}s"},
}
BASE_FLAGS = ("--coalesce-window=2s", "--retry-max-delay=30s", "--resync-period=0",
              "--source-backoff-cap=0", "--max-reloads-per-workload=0", "--workers=2")
SETTLE_SECONDS = 30.0
RECORD = "gitops-reloader-failures"
"""The ledger record's ConfigMap (namespace ``default``)."""


class World:
    """One schedule's cluster and controller (use as a context manager)."""

    def __init__(self, variant: Variant, workdir: Path) -> None:
        self.variant = variant
        self.workdir = workdir
        self.server = ApiServer().start()
        self.client = self.server.api_client()
        self.api = KubeApi(self.client)
        self.clock = FakeClock()
        self.kubelet = TickedRollouts(self.api, NS)
        self.app: App | None = None
        self.instance = 0
        self.data = dict.fromkeys(SOURCES, "v0")
        self.changes: dict[str, list[tuple[int, str]]] = {s: [] for s in SOURCES}
        """Source → (resourceVersion, new value) of each write that changed its data."""
        self.own: dict[str, int] = {}
        """Workload → the generations its own spec changes (template, replicas) added."""
        self.writes: dict[str, list[tuple[float, int]]] = {}
        """Workload → (clock time, instance) of each template write the controller made."""
        self.created: dict[str, int] = {}
        """Workload → the resourceVersion it was created at."""
        self._expected: dict[str, int] = {}
        """Informer (plural) → the resourceVersion it must have handled before the world settles."""
        self._last_writer: dict[str, str] = {}
        """Workload → who changed its template last: ``controller`` or ``own`` (a step of ours)."""
        self.peak_rolling = 0
        """The most Deployments seen rolling at once for a template the controller wrote."""

    # --- lifecycle ---------------------------------------------------------------------

    def __enter__(self) -> World:
        use_clock(self.clock.now)  # the server's timestamps (creation, managedFields) on our clock
        windows = self.workdir / "windows.yaml"
        windows.write_text(WINDOWS)
        self._flags = [*BASE_FLAGS, f"--reload-windows-config={windows}", *self.variant.flags]
        for source in SOURCES:
            self.api.create(CONFIGMAPS, NS, {"apiVersion": "v1", "kind": "ConfigMap",
                                             "metadata": {"name": source, "namespace": NS},
                                             "data": {"k": self.data[source]}})
        for name in ("plain", "two", "nightly", "braked"):
            self._create_workload(name)
        while self.kubelet.tick():
            pass
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.app is not None:
            self.app.stop()
            self.app = None
        self.client.close()
        self.server.stop()
        use_clock(None)

    def start(self, *, takeover: bool = False) -> None:
        """A new controller instance (``takeover``: as a standby that won the Lease from a leader
        that may have died with work queued)."""
        self.instance += 1
        config = load_config(self._flags, environ={"HOME": "/nonexistent"})
        app = App(config, api_client=self.client, serve_http=False, clock=self.clock)
        if takeover:
            app.controller.start(activate=False)
            app.controller.activate(resync=True)
        else:
            app.start()
        self.app = app
        self.settle()
        self.written()

    def stop(self) -> None:
        assert self.app is not None
        self.app.stop()
        self.app = None

    def crash(self, *, flushed: bool) -> None:
        """The controller killed: nothing more is written by it (``flushed``: its ledger record
        had caught up, as it does within two seconds)."""
        app = self.app
        assert app is not None
        controller = app.controller
        if flushed and controller.ledger_store is not None:
            controller.ledger_store.flush()
        if controller.ledger_store is not None:
            controller.ledger_store.abandon()
        if controller.state is not None:
            controller.state.abandon()
        app.stop()
        self.app = None

    # --- waiting ------------------------------------------------------------------------

    def settle(self, timeout: float = SETTLE_SECONDS) -> None:
        """Wait until the controller handled every write made so far and has nothing it could
        do before the clock moves."""
        assert self.app is not None
        controller = self.app.controller
        deadline = time.monotonic() + timeout
        while True:
            informers = {i.kind.plural: i for i in controller.informers()}
            caught_up = all(int(informers[plural].handled_version or 0) >= rv
                            for plural, rv in self._expected.items() if plural in informers)
            depth = controller.queue.depth()
            if caught_up and not depth["queued"] and not depth["processing"] and not controller.queue.due():
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"controller did not settle in {timeout}s: {depth}")
            time.sleep(0.005)

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        assert self.app is not None
        self.app.controller.queue.wake()
        self.settle()

    def observe(self) -> None:
        """Note the controller's template writes since the last look, then one rollout step."""
        for name in list(READS):
            deployment = self._get(name)
            if deployment is None:
                continue
            by_controller = int(deployment["metadata"].get("generation", 1)) - 1 - self.own.get(name, 0)
            made = self.writes.setdefault(name, [])
            if by_controller > len(made):
                self._last_writer[name] = "controller"
            made.extend([(self.clock.now(), self.instance)] * (by_controller - len(made)))
        reloading = {n for n in self.kubelet.rolling() if self._last_writer.get(n) == "controller"}
        self.peak_rolling = max(self.peak_rolling, len(reloading))
        self.kubelet.tick()

    # --- the steps ---------------------------------------------------------------------

    def apply(self, step: Step) -> None:
        """Do ``step``, wait for the controller, observe."""
        getattr(self, f"_{step.kind}")(*step.args)
        if self.app is not None:
            self.settle()
        self.observe()

    def _change(self, source: str, value: str) -> None:
        path = CONFIGMAPS.path(NS) + f"/{source}"
        current = self.api.request("GET", path)
        current["data"] = {"k": value}
        version = int(self.api.request("PUT", path, body=current)["metadata"]["resourceVersion"])
        if value != self.data[source]:
            self.changes[source].append((version, value))
        self.data[source] = value
        self._expected["configmaps"] = version

    def _crash_seen(self, source: str, value: str) -> None:
        self._change(source, value)
        self.settle()  # seen, its coalescing window not over: killed before anything is written
        self.crash(flushed=not self.variant.unflushed_crashes)
        self.start()

    def _wait(self, seconds: int) -> None:
        self.advance(float(seconds))
        self.written()  # the time passing is real time too: the records' batches went out

    def written(self) -> None:
        """What the controller's background writers write within seconds, written now: the
        ledger record and the state store's batch."""
        assert self.app is not None
        controller = self.app.controller
        if controller.ledger_store is not None:
            controller.ledger_store.flush()
        if controller.state is not None:
            controller.state.flush()

    def _template(self, name: str, image: str) -> None:
        self._spec(name, {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}})

    def _undo(self, name: str) -> None:
        deployment = self._get(name)
        if deployment is None:
            return
        image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        other = IMAGES[1] if image == IMAGES[0] else IMAGES[0]
        self._template(name, other)
        self._template(name, image)  # `kubectl rollout undo`, a self-heal: back at once

    def _scale(self, name: str, replicas: int) -> None:
        self._spec(name, {"spec": {"replicas": replicas}})

    def _restart(self) -> None:
        self.stop()
        self.start()

    def _crash(self) -> None:
        self.crash(flushed=not self.variant.unflushed_crashes)
        self.start()

    def _takeover(self) -> None:
        self.crash(flushed=not self.variant.unflushed_crashes)
        self.start(takeover=True)

    def _fault(self, status: int, retry_after: int | str | None, times: int | None) -> None:
        self.server.add_fault(Fault(verb="patch", resource="deployments", status=status,
                                    retry_after=retry_after, times=times, field_manager=FIELD_MANAGER))

    def _heal(self) -> None:
        self.server.clear_faults()

    def _relist(self) -> None:
        self.server.restart(compact=True)  # every watch cut, history compacted: the informers relist

    def _spare(self, action: str) -> None:
        if action == "recreate":  # deleted and created again under the same name, maybe while parked
            self._spare("delete")
            if self.app is not None:
                self.settle()
            action = "create"
        if action == "create" and self._get("spare") is None:
            self._create_workload("spare")
            if self.app is not None:  # it existed a batch interval before anything else happened
                self.settle()
                self.written()
        elif action == "delete" and self._get("spare") is not None:
            self.api.delete(DEPLOYMENTS, NS, "spare")
            self.kubelet.collect()
            self.writes.pop("spare", None)
            self.own.pop("spare", None)
            self.created.pop("spare", None)
            self._last_writer.pop("spare", None)
            self._expected["deployments"] = self._latest_version()

    def _edit(self, what: str) -> None:
        """A person edits one kind of value in the ledger record by hand, then the controller
        restarts and reads it (:data:`~.steps.EDITS`)."""
        if self.app is None:
            return
        self.written()
        try:
            stored = self.api.get(CONFIGMAPS, "default", RECORD)
        except KubeNotFound:
            return
        text = (stored.get("data") or {}).get(RECORD_KEY)
        if not text:
            return
        record = json.loads(text)
        for item in [*record.get("entries", []), *record.get("shared", [])]:
            _mangle(item, what)
        stored["data"] = {RECORD_KEY: json.dumps(record).replace('"@inf"', "1e999").replace(
            '"@huge"', "1" + "0" * 400)}
        self.api.update(CONFIGMAPS, "default", RECORD, stored)
        self._restart()

    # --- objects -------------------------------------------------------------------------

    def deployment(self, name: str) -> dict[str, Any] | None:
        return self._get(name)

    def value_at(self, source: str, version: int) -> str:
        """The data ``source`` had at resourceVersion ``version`` (what a pod created then read)."""
        value = "v0"
        for changed, new in self.changes[source]:
            if changed < version:
                value = new
        return value

    def _get(self, name: str) -> dict[str, Any] | None:
        try:
            return self.api.get(DEPLOYMENTS, NS, name)
        except KubeNotFound:
            return None

    def _create_workload(self, name: str) -> None:
        containers = [{"name": "app", "image": IMAGES[0],
                       "envFrom": [{"configMapRef": {"name": s}} for s in sorted(READS[name])]}]
        manager = [("fieldManager", "kubectl-create")]  # a person's create, never the controller's
        created = self.api.request("POST", DEPLOYMENTS.path(NS), query=manager, body={
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS,
                         "annotations": {"reloader.stakater.com/auto": "true", **_ANNOTATIONS.get(name, {})}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": containers}}},
        })
        version = int(created["metadata"]["resourceVersion"])
        self.created[name] = version
        self._expected["deployments"] = version

    def _latest_version(self) -> int:
        return int(self.api.list(DEPLOYMENTS, namespace=NS, limit=1)["metadata"]["resourceVersion"])

    def _spec(self, name: str, patch: Mapping[str, Any]) -> None:
        """A spec change by someone else (Argo CD's field manager); its generations are ours."""
        before = self._get(name)
        if before is None:
            return
        after = self.api.request("PATCH", DEPLOYMENTS.path(NS, name), body=patch, content_type=STRATEGIC,
                                 query=[("fieldManager", "argocd-controller")])
        self.own[name] = self.own.get(name, 0) + int(after["metadata"]["generation"]) - int(
            before["metadata"]["generation"])
        self._last_writer[name] = "own"
        self._expected["deployments"] = int(after["metadata"]["resourceVersion"])


def _mangle(item: dict[str, Any], what: str) -> None:
    """One kind of hand edit of a record item (``@inf``, ``@huge``: written as ``1e999`` and an
    integer of 400 digits, which JSON libraries will not write)."""
    hold, failure = item.get("hold"), item.get("fail")
    if what == "until" and isinstance(hold, dict):
        hold["until"] = "@inf"
    elif what == "why" and isinstance(hold, dict):
        hold["why"] = "bogus"
    elif what == "attempts" and isinstance(failure, dict):
        failure["attempts"] = "@inf"
    elif what == "since" and isinstance(failure, dict):
        failure["since"] = "@huge"
    elif what == "fingerprint" and isinstance(item.get("owes"), dict):
        for fields in item["owes"].values():
            if isinstance(fields, dict):
                fields["fp"] = "not-hex"
