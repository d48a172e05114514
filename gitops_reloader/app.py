"""Assemble the running controller from a :class:`Config`: client, metrics, HTTP, sinks, HA."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Mapping
from datetime import UTC, datetime

from kubernetes.client import ApiClient
from prometheus_client import CollectorRegistry

from gitops_reloader.clock import Clock, SystemClock
from gitops_reloader.config import Config
from gitops_reloader.control.follower import build_follower
from gitops_reloader.controller import Controller
from gitops_reloader.errors import ConfigError, KubeError
from gitops_reloader.filewatch import FileWatch
from gitops_reloader.gitops.digestkey import DigestKeyStore
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.client import load_api_client
from gitops_reloader.kube.discovery import check_configured_kinds, unserved_kinds
from gitops_reloader.kube.events import EventRecorder
from gitops_reloader.kube.leader import LeaderElector
from gitops_reloader.kube.permissions import (
    PermissionsMissing,
    describe,
    missing_permissions,
    required_permissions,
    workload_needs,
)
from gitops_reloader.kube.resources import CONFIGMAPS, NAMESPACES
from gitops_reloader.kube.workloads import WorkloadAdapter, adapters_for
from gitops_reloader.model import ObjectRef, Outcome, ReloadRequest, SourceKind
from gitops_reloader.observability.alerts import Alerter, ReloadAlert, alert_config_from_env
from gitops_reloader.observability.http import HttpServer
from gitops_reloader.observability.metainfo import publish_meta_info
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.sinks import build_live_sinks
from gitops_reloader.sinks.dryrun import dry_run_sinks
from gitops_reloader.sinks.gitwiring import (
    Reopener,
    build_git_sink,
    build_pull_request_sink,
    credential_files,
    git_cache,
)
from gitops_reloader.state.keeper import StateKeeper
from gitops_reloader.state.ledgerstore import LedgerStore
from gitops_reloader.state.resync import store_scope
from gitops_reloader.state.shards import ConfigMapShards

log = logging.getLogger(__name__)

UNUSABLE_RECHECK_SECONDS = 60.0
"""How often a repository whose mounts failed their checks is checked again even though no
credential file changed (a clone directory made writable, a passwd entry added)."""


class App:
    """Everything ``gitops-reloader run`` starts, with injectable collaborators."""

    def __init__(
        self,
        config: Config,
        *,
        api_client: ApiClient | None = None,
        registry: CollectorRegistry | None = None,
        clock: Clock | None = None,
        serve_http: bool = True,
        identity: str = "",
    ) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.api = KubeApi(api_client or load_api_client(config.runtime.kubeconfig))
        self.registry = registry or CollectorRegistry()
        self.metrics = Metrics(self.registry,
                               count_by_namespace=config.metrics_count_by_namespace)
        self.recorder = EventRecorder(self.api, clock=self.clock, on_filtered=self.metrics.event_filtered)
        behaviour = config.behaviour
        openshift = behaviour.is_openshift
        if openshift is None:
            openshift = self.api.discover_group("apps.openshift.io")
        self.adapters = adapters_for(
            argo_rollouts=behaviour.is_argo_rollouts, openshift=openshift,
            ignored=config.filters.ignored_workload_types, kinds=behaviour.kinds,
        )
        sinks = build_live_sinks(config, self.api, self.adapters, metrics=self.metrics)
        git_sink = build_git_sink(config, self.api, self.metrics, self.recorder, clock=self.clock)
        if git_sink is not None:
            sinks[git_sink.name] = git_sink
        pr_sink = build_pull_request_sink(config, self.api, self.metrics, self.recorder, clock=self.clock)
        if pr_sink is not None:
            sinks[pr_sink.name] = pr_sink
        self.git_sinks = [sink for sink in (git_sink, pr_sink) if sink is not None]
        self.reopeners = [Reopener(sink, git_cache(config, sink), self.metrics) for sink in self.git_sinks]
        if config.runtime.dry_run:
            sinks = dry_run_sinks(sinks, webhook_url=config.behaviour.webhook_url)
            log.info("dry run: reloads are decided and reported as WouldReload events; "
                     "nothing is written to workloads or git")
        alert_config = alert_config_from_env(config.alerts)
        self.alerter = (Alerter(alert_config, metrics=self.metrics)
                        if alert_config.enabled else None)
        runtime = config.runtime
        self.controller = Controller(
            config, self.api, sinks=sinks, metrics=self.metrics, recorder=self.recorder,
            adapters=self.adapters, clock=self.clock,
            listeners=[self._alert] if self.alerter is not None else [],
            state=build_state_keeper(config, self.api, self.metrics),
            ledger_store=lambda ledger: LedgerStore(
                self.api, ledger, namespace=runtime.lease_namespace, name=runtime.failure_record,
                metrics=self.metrics, read_only=runtime.dry_run, clock=self.clock,
                warn=lambda ref, reason, text: self.recorder.warning(ref, reason, text, api_version="v1")),
            alert=self.alerter.notify if self.alerter is not None else None,
        )
        self.file_watch = FileWatch(
            [*credential_files(git_sink), *credential_files(pr_sink)], self._credentials_changed,
            recheck_every=UNUSABLE_RECHECK_SECONDS if self.git_sinks else None)
        """Tokens, SSH keys and known_hosts files (the kubelet swaps them on rotation): an
        unusable repository is checked again, and a failure only a person can fix (a host key,
        refused credentials) is tried again, as soon as they change — no restart."""
        for git in (git_sink, pr_sink):
            if git is not None:  # the git sinks hand their commits to a follower reading the caches
                git.follower = build_follower(
                    config, self.api, repositories=git.repositories,
                    argocd_namespace=git.git_config.argocd_namespace, workloads=self.controller.caches,
                    adapters=self.adapters, metrics=self.metrics, recorder=self.recorder, clock=self.clock)
        addresses = [a for a in (config.runtime.http_address, config.runtime.health_address) if a]
        self.http_servers = ([HttpServer(address, registry=self.registry, ready=self.controller.ready,
                                         problems=lambda: self.readiness_problems)
                              for address in addresses] if serve_http else [])
        for flag in config.inert_flags:
            log.warning("flag accepted for Stakater compatibility but has no effect here: %s "
                        "(docs/migrating-from-stakater.md)", flag)
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}"
        self._stop = threading.Event()
        self.elector: LeaderElector | None = None
        self._election: threading.Thread | None = None
        self._lost_leadership = threading.Event()

    @property
    def readiness_problems(self) -> tuple[str, ...]:
        """Why ``/readyz`` fails although the caches synced: repositories whose mounts fail
        their checks now (files named, never their content). Everything else keeps running."""
        return tuple(f"{sink.name} sink: repository {name} unusable ({exc.reason}): {exc}"
                     for sink in self.git_sinks for name, exc in list(sink.unusable.items()))

    def _credentials_changed(self, paths: list[str]) -> None:
        """Credential files changed (or the slow re-check is due): reopen what was unusable,
        say so on the workloads waiting for it, and retry what waits for a person."""
        reopened = [f"{reopener.sink.name} sink: repository {name}"
                    for reopener in self.reopeners for name in reopener.reopen()]
        if reopened:  # once per waiting workload (a held entry does not name its repository)
            waiting = {key for failure, workloads in self.controller.ledger.failures()
                       if failure.reason == "RepositoryUnusable" for key in workloads}
            for key in sorted(waiting):
                self.recorder.normal(ObjectRef.from_key(key), "RepositoryUsable",
                                     f"{', '.join(reopened)}: passes its checks now; the reload is retried")
        if paths or reopened:
            self.controller.retry_waiting_for_a_person(
                "repository usable again" if reopened else "mounted credential files changed")

    def _alert(self, request: ReloadRequest, outcome: Outcome) -> None:
        """Stakater's alert on reload; Secrets get no hash at all."""
        assert self.alerter is not None
        now = datetime.fromtimestamp(self.clock.now(), UTC)
        for item in request.items:
            source = item.source.ref
            self.alerter.notify(ReloadAlert(
                workload_kind=request.ref.kind, workload_name=request.ref.name,
                workload_namespace=request.ref.namespace, resource_kind=source.kind.kube_kind,
                resource_name=source.name, resource_namespace=source.namespace, timestamp=now,
                stakater_type=source.kind.value,
                hash_prefix=item.source.hash[:12] if source.kind is SourceKind.CONFIGMAP else "",
            ))

    def start(self) -> None:
        """Start serving; returns when caches are synced (and, without HA, workers run).

        Raises :class:`PermissionsMissing` before any informer starts when
        ``--permission-check=strict`` and an essential permission is denied, and
        :class:`ConfigError` when a ``--workload-kinds-config`` kind is not served or has
        no pod template at its path. Discovered kinds not served yet are checked when
        they appear.
        """
        check_selectors(self.api, self.config)
        check_configured_kinds(self.api, self.adapters)
        pending = unserved_kinds(self.api, self.adapters)
        self.check_permissions({k: a for k, a in self.adapters.items() if k not in pending})
        self.controller.kind_listeners.append(self._kind_served)
        publish_meta_info(self.api, self.config)
        for server in self.http_servers:
            server.start()
        self.file_watch.start()
        runtime = self.config.runtime
        if not runtime.enable_ha:
            self.metrics.set_leader(True)
            self.controller.start(pending=pending)
            return
        self.controller.start(activate=False, pending=pending)
        self.elector = LeaderElector(self.api, namespace=runtime.lease_namespace,
                                     name=runtime.lease_name, identity=self.identity,
                                     clock=self.clock, **self._lease_timing())
        self._election = threading.Thread(target=self.elector.run, name="leader-election", daemon=True,
                                          args=(self._became_leader, self._lost, self._stop))
        self._election.start()

    def check_permissions(self, adapters: Mapping[str, WorkloadAdapter]) -> None:
        """Ask the API server for every verb the configuration needs with the workload
        kinds ``adapters``; report all gaps at once."""
        mode = self.config.runtime.permission_check
        if mode == "off":
            return
        try:
            missing = missing_permissions(self.api, required_permissions(self.config, adapters))
        except KubeError as exc:
            log.warning("cannot check permissions (SelfSubjectAccessReview failed): %s", exc)
            return
        essential = [need for need in missing if need.essential]
        self.metrics.set_permissions_missing(len(essential), len(missing) - len(essential))
        if not missing:
            return
        message = describe(missing)
        if essential and mode == "strict":
            raise PermissionsMissing(message + " Stopping (--permission-check=warn starts anyway, "
                                               "with the features named above not working).")
        log.warning("%s Starting anyway: the features named above will not work.", message)

    def _kind_served(self, kind: str, adapter: WorkloadAdapter) -> None:
        """A discovered kind appeared after start-up: say what it lacks (it is watched anyway)."""
        if self.config.runtime.permission_check == "off":
            return
        try:
            missing = missing_permissions(self.api, workload_needs(self.config, kind, adapter))
        except KubeError as exc:
            log.warning("cannot check permissions (SelfSubjectAccessReview failed): %s", exc)
            return
        if missing:
            log.warning("%s %s is served now but will not work until granted.", describe(missing), kind)

    def _lease_timing(self) -> dict[str, float]:
        runtime = self.config.runtime
        duration = runtime.lease_duration
        return {"lease_duration": duration,
                "renew_deadline": runtime.renew_deadline or duration * 2 / 3,
                "retry_period": runtime.retry_period or max(duration / 7.5, 0.1)}

    def _became_leader(self) -> None:
        self.metrics.set_leader(True)
        # The old leader may have died with changes queued: reload what is out of date.
        self.controller.activate(resync=True)

    def _lost(self) -> None:
        # As client-go's users do: a replica that lost the lease exits and restarts clean.
        if self.controller.state is not None:
            self.controller.state.abandon()  # the new leader owns the state store now
        if self.controller.ledger_store is not None:
            self.controller.ledger_store.abandon()  # and the ledger record
        self.metrics.set_leader(False)
        self._lost_leadership.set()
        self._stop.set()

    def wait(self) -> int:
        """Block until stopped; 1 if leadership was lost, else 0."""
        self._stop.wait()
        return 1 if self._lost_leadership.is_set() else 0

    def stop(self) -> None:
        self._stop.set()
        self.file_watch.stop()
        self.controller.stop()
        if self.elector is not None and self._election is not None and self.config.runtime.release_on_cancel:
            self._election.join(timeout=self.config.runtime.lease_duration)  # no renewal in flight
            self.elector.release()  # only if the Lease still names us
        for sink in self.controller.sinks.values():
            close = getattr(sink, "close", None)  # sinks holding HTTP clients
            if close is not None:
                close()
        self.recorder.close()
        if self.alerter is not None:
            self.alerter.close()
        for server in self.http_servers:
            server.stop()


def check_selectors(api: KubeApi, config: Config) -> None:
    """:class:`ConfigError` when the API server refuses ``--namespace-selector`` or
    ``--resource-label-selector`` (asked with a one-item list): a selector it cannot parse would
    fail every list and watch, for ever. Any other answer (a denial, an outage) is for the
    informers to meet."""
    filters = config.filters
    namespace = filters.namespaces[0] if filters.namespaces else None
    for flag, kind, scope, selector in (
            ("--namespace-selector", NAMESPACES, None, filters.namespace_selector),
            ("--resource-label-selector", CONFIGMAPS, namespace, filters.resource_label_selector)):
        if not selector:
            continue
        try:
            api.list(kind, namespace=scope, label_selector=selector, limit=1)
        except KubeError as exc:
            if exc.status == 400:
                raise ConfigError(f"{flag} {selector!r} is not a label selector the API server "
                                  f"accepts: {exc}") from exc


def build_state_keeper(config: Config, api: KubeApi, metrics: Metrics) -> StateKeeper | None:
    """The ``--state-store configmap`` keeper (None without one).

    Its digests are keyed with the git sink's digest key (created on first use unless
    ``--dry-run``, which also never writes the store).
    """
    state = config.state
    if not state.enabled:
        return None
    dry_run = config.runtime.dry_run
    keys = DigestKeyStore(api, namespace=config.gitops.digest_key_namespace,
                          name=config.gitops.digest_key_secret, create=not dry_run)
    shards = ConfigMapShards(api, namespace=state.namespace, name=state.name)
    return StateKeeper(shards, lambda: keys.get().value, metrics=metrics, interval=state.interval,
                       shard_bytes=state.shard_bytes, read_only=dry_run,
                       scope=store_scope(config.filters))
