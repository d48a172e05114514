"""Which workload kinds the API server serves, and the kinds that appear later.

Three rules, one per kind of row in the adapter table (:mod:`.workloads`):

* core kinds are always watched;
* built-in kinds found through discovery (Knative Serving, OpenKruise): a kind whose API
  is not served is skipped with one log line and looked for again every
  ``--kind-discovery-interval`` by :class:`KindDiscovery`, which hands it to the caches
  when its CRD is installed: no restart;
* kinds from ``--workload-kinds-config`` must be served at start-up, with a pod template
  at the configured path where the published schema can tell
  (:func:`check_configured_kinds`): anything else stops start-up naming the entry.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from gitops_reloader.errors import ConfigError, KubeError
from gitops_reloader.kinds import template_path_problem
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.resources import ResourceKind
from gitops_reloader.kube.workloads import WorkloadAdapter

__all__ = ["KindDiscovery", "check_configured_kinds", "unserved_kinds"]

log = logging.getLogger(__name__)


def unserved_kinds(api: KubeApi, adapters: Mapping[str, WorkloadAdapter]) -> dict[str, WorkloadAdapter]:
    """The discovered kinds whose API is not served now, each reported in one log line."""
    pending: dict[str, WorkloadAdapter] = {}
    for key, adapter in adapters.items():
        if not adapter.discovered:
            continue
        served = adapter.served_resource(api)
        if served is None:
            log.info("workload kind not served, skipped until its CRD is installed",
                     extra={"kind": key, "resource": f"{adapter.resource.plural}.{adapter.resource.group}",
                            "apiVersion": adapter.resource.api_version})
            pending[key] = adapter
        elif served != adapter.resource:
            _use(key, adapter, served)
    return pending


def _use(key: str, adapter: WorkloadAdapter, served: ResourceKind) -> None:
    """Watch ``adapter``'s kind at ``served``, an older version its row falls back to."""
    log.info("workload kind served at an older version, watching that one",
             extra={"kind": key, "apiVersion": served.api_version, "preferred": adapter.resource.api_version})
    adapter.resource = served


def check_configured_kinds(api: KubeApi, adapters: Mapping[str, WorkloadAdapter]) -> None:
    """Raise :class:`ConfigError` naming the entry of a ``--workload-kinds-config`` kind that
    is not served, or whose pod template path its published schema does not have."""
    for adapter in adapters.values():
        spec = adapter.spec
        if spec is None or adapter.discovered:
            continue
        resource = adapter.resource
        if not api.serves(resource):
            raise ConfigError(f"{spec.source}: {resource.plural}.{resource.group} ({spec.api_version} "
                              f"{spec.kind}) is not served by the API server; install its CRD or remove "
                              "the entry")
        try:
            schema = api.openapi_schema(resource)
        except KubeError as exc:
            log.warning("cannot read the published schema; pod template path not checked",
                        extra={"kind": spec.key, "error": str(exc)})
            continue
        problem = (template_path_problem(schema, spec.template_path)
                   if schema is not None and spec.template_path else None)
        if problem is not None:
            raise ConfigError(f"{spec.source}: podTemplatePath {'.'.join(spec.template_path)}: {problem}")


class KindDiscovery:
    """Looks for the pending kinds every ``interval`` seconds; ``on_served(key, adapter)``
    is called once per kind, on this class's thread, when its API appears."""

    def __init__(self, api: KubeApi, pending: Mapping[str, WorkloadAdapter], *, interval: float,
                 on_served: Callable[[str, WorkloadAdapter], None]) -> None:
        self.api = api
        self.pending = dict(pending)
        self.interval = interval
        self.on_served = on_served
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.pending and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kind-discovery", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def poll(self) -> list[str]:
        """Look once; the kinds found served (and handed over) this time."""
        found: list[str] = []
        for key, adapter in list(self.pending.items()):
            try:
                served = adapter.served_resource(self.api)
            except KubeError as exc:
                log.warning("discovery failed, will retry", extra={"kind": key, "error": str(exc)})
                continue
            if served is not None:
                if served != adapter.resource:
                    _use(key, adapter, served)
                del self.pending[key]
                log.info("workload kind now served, watching it", extra={"kind": key})
                self.on_served(key, adapter)
                found.append(key)
        return found

    def _run(self) -> None:
        while self.pending and not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception:  # a bug must not end discovery silently
                log.exception("kind discovery error")
