"""Flags and environment → one validated, frozen :class:`Config`.

Flag names are Stakater Reloader's wherever Stakater has the flag, so a Deployment's
``args:`` keep working unchanged. Every boolean flag accepts ``--flag``, ``--flag=true``,
``--flag=false`` and ``--flag true``; every other flag accepts ``--flag=value`` and
``--flag value``. This is the only module that reads ``os.environ``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from gitops_reloader.control.brakes import Rate, parse_rate
from gitops_reloader.durations import parse_duration
from gitops_reloader.errors import ConfigError
from gitops_reloader.kinds import BUILTIN_KINDS, KindSpec, load_kinds_config
from gitops_reloader.labelselectors import stakater_selector
from gitops_reloader.model import ReloadOn, SinkName
from gitops_reloader.rollout.eviction import MAX_AT_ONCE, EvictionMode
from gitops_reloader.shard import Shard
from gitops_reloader.windows import WindowSet, load_windows

TRUE_VALUES = frozenset({"1", "t", "true", "y", "yes", "on"})
FALSE_VALUES = frozenset({"0", "f", "false", "n", "no", "off"})


def parse_bool(text: str) -> bool:
    """Parse a boolean the way Go's ``strconv.ParseBool`` (and pflag) does, plus yes/no."""
    lowered = text.strip().lower()
    if lowered in TRUE_VALUES:
        return True
    if lowered in FALSE_VALUES:
        return False
    raise ValueError(f"not a boolean: {text!r}")


IGNORABLE_KINDS: Final = tuple(spec.resource_name for spec in BUILTIN_KINDS)
"""``--ignored-workload-types`` entries for the built-in kinds found through discovery."""


def split_csv(text: str) -> tuple[str, ...]:
    """Split a comma list, trimming whitespace and dropping empty entries."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


@dataclass(frozen=True, slots=True)
class AnnotationKeys:
    """The annotation keys the policy reads (Stakater's defaults, each overridable)."""

    auto: str = "reloader.stakater.com/auto"
    configmap_auto: str = "configmap.reloader.stakater.com/auto"
    secret_auto: str = "secret.reloader.stakater.com/auto"
    configmap_reload: str = "configmap.reloader.stakater.com/reload"
    secret_reload: str = "secret.reloader.stakater.com/reload"
    search: str = "reloader.stakater.com/search"
    match: str = "reloader.stakater.com/match"
    ignore: str = "reloader.stakater.com/ignore"
    configmaps_exclude: str = "configmaps.exclude.reloader.stakater.com/reload"
    secrets_exclude: str = "secrets.exclude.reloader.stakater.com/reload"
    spc_auto: str = "secretproviderclass.reloader.stakater.com/auto"
    spc_reload: str = "secretproviderclass.reloader.stakater.com/reload"
    spcs_exclude: str = "secretproviderclasses.exclude.reloader.stakater.com/reload"
    pause_period: str = "deployment.reloader.stakater.com/pause-period"
    paused_at: str = "deployment.reloader.stakater.com/paused-at"
    rollout_strategy: str = "reloader.stakater.com/rollout-strategy"
    sink: str = "gitops-reloader.io/sink"
    reload_on: str = "gitops-reloader.io/reload-on"
    max_reloads: str = "gitops-reloader.io/max-reloads"
    reload_window: str = "gitops-reloader.io/reload-window"
    reload_now: str = "gitops-reloader.io/reload-now"
    """On a ConfigMap/Secret: let its change through closed maintenance windows (once per value)."""


HELM_RELEASE_SECRET_TYPE = "helm.sh/release.v1"
"""Helm 3 release records: up to ~1 MB each, never referenced by a workload."""


@dataclass(frozen=True, slots=True)
class Filters:
    """Which objects the controller watches at all."""

    namespaces: tuple[str, ...] = ()
    """Watch only these namespaces; empty means all."""
    namespaces_to_ignore: tuple[str, ...] = ()
    namespace_selector: str = ""
    resource_label_selector: str = ""
    ignore_configmaps: bool = False
    ignore_secrets: bool = False
    ignored_workload_types: tuple[str, ...] = ()
    """Lower-case plurals: ``jobs``, ``cronjobs``, and ``plural.group`` of a built-in kind
    found through discovery (``clonesets.apps.kruise.io``)."""
    ignore_secret_types: tuple[str, ...] = (HELM_RELEASE_SECRET_TYPE,)
    """Secret ``type`` values excluded server-side (field selector) from list and watch."""
    shard: Shard = field(default_factory=Shard)
    """``--shard-index``/``--shard-count``: the namespaces this instance owns (docs/scaling.md)."""


@dataclass(frozen=True, slots=True)
class Behaviour:
    """What a change does."""

    reload_strategy: SinkName = SinkName.ENV_VARS
    """Stakater's flag; also the default sink unless ``default_sink`` is set."""
    default_sink: SinkName | None = None
    auto_reload_all: bool = False
    reload_on_create: bool = False
    reload_on_delete: bool = False
    sync_after_restart: bool = False
    reload_on: ReloadOn = ReloadOn.ANY_CHANGE
    """``--reload-on``: any data change (Stakater) or only used keys (per workload:
    ``gitops-reloader.io/reload-on``; docs/rollouts.md)."""
    prune_stale_env_vars: bool = False
    """A reload also removes ``STAKATER_*`` variables of sources the container no longer uses."""
    webhook_url: str = ""
    is_argo_rollouts: bool = False
    is_openshift: bool | None = None
    """``None``: detect DeploymentConfig support through discovery."""
    enable_csi_integration: bool = False
    """Reload on Secrets Store CSI ``SecretProviderClassPodStatus`` changes (if the group is served)."""
    workload_kinds: tuple[KindSpec, ...] = ()
    """Kinds from ``--workload-kinds-config``: each must be served at start-up."""
    kind_discovery_interval: float = 30.0
    """How often a built-in kind whose API is not served yet is looked for again."""

    @property
    def kinds(self) -> tuple[KindSpec, ...]:
        """The rows of the workload-kind table beyond the core kinds: built-in, then configured."""
        return (*BUILTIN_KINDS, *self.workload_kinds)


DEFAULT_MAX_RELOADS: Final = Rate(6, 600.0)
"""``--max-reloads-per-workload``'s default: a rolling restart takes minutes (docs/rollouts.md)."""


@dataclass(frozen=True, slots=True)
class Runtime:
    """How the controller runs: queue, rate limits, HTTP endpoints, HA, logging."""

    coalesce_window: float = 2.0
    workers: int = 4
    write_qps: float = 200.0
    write_burst: int = 300
    max_retries: int = 12
    """Attempts after which a failing emission is *raised* (Event, alert, status); never dropped."""
    retry_base_delay: float = 1.0
    retry_max_delay: float = 300.0
    resync_period: float = 600.0
    """``--resync-period``: the slow comparison of every workload with its sources (0: off)."""
    max_reloads_per_workload: Rate | None = DEFAULT_MAX_RELOADS
    """``--max-reloads-per-workload``: past it a workload is held (latest data later); None: off."""
    cluster_reload_rate: Rate | None = None
    """``--cluster-reload-rate``: reloads the whole cluster takes per period; None: off."""
    source_backoff_cap: float = 300.0
    """``--source-backoff-cap``: longest stretched wait of a source that keeps changing (0: off)."""
    reload_windows: WindowSet = field(default_factory=WindowSet)
    """``--reload-windows-config``: the maintenance windows workloads may choose (and the default)."""
    http_address: str = ":9090"
    enable_ha: bool = False
    lease_name: str = "gitops-reloader"
    lease_namespace: str = ""
    lease_duration: float = 15.0
    renew_deadline: float | None = None
    """``None``: two thirds of ``lease_duration``."""
    retry_period: float | None = None
    """``None``: ``lease_duration / 7.5`` (at least 0.1 s)."""
    release_on_cancel: bool = False
    """On a clean stop, the leader hands the Lease back at once (client-go ``ReleaseOnCancel``)."""
    health_address: str = ""
    """A second listener for the probes (Stakater v2 ``--health-addr``); "" means none."""
    log_format: str = "text"
    log_level: str = "info"
    kubeconfig: str = ""
    dry_run: bool = False
    """Decide every reload as usual; write nothing but ``WouldReload`` Events."""
    permission_check: str = "strict"
    """At start-up: ``strict`` stops on a missing essential permission, ``warn`` logs, ``off``."""

    @property
    def failure_record(self) -> str:
        """The ConfigMap (in ``lease_namespace``) recording what is failing: ``<lease name>-failures``."""
        return f"{self.lease_name}-failures"


@dataclass(frozen=True, slots=True)
class GitOps:
    """Settings of the git and pull-request sinks."""

    config_file: str = ""
    """YAML file listing repositories, branches and credential files (``--git-config``)."""
    cache_dir: str = "/var/cache/gitops-reloader"
    digest_key_secret: str = "gitops-reloader-digest-key"
    """Name of the Secret (in the controller's namespace) holding the HMAC key."""
    digest_key_namespace: str = "default"
    pr_grouping: str = "workload"
    request_refresh: bool = True
    """After a push, or once a pull request is seen merged, ask Argo CD / Flux to reconcile now."""
    apply_timeout: float = 900.0
    """``--git-apply-timeout``: how long a pushed (or merged) emission may take to reach a
    completed rollout before it is reported ``NotApplied`` (``0``: follow-up off)."""
    follow_interval: float = 5.0
    """``--git-follow-interval``: seconds between two reads of a followed emission's statuses."""


@dataclass(frozen=True, slots=True)
class StateStore:
    """``--state-store``: reload state kept outside the workloads (docs/migrating-from-stakater.md)."""

    kind: str = "none"
    """``none`` (the workloads' markers are the only record) or ``configmap``."""
    name: str = "gitops-reloader-state"
    """Shard ConfigMaps are ``<name>-0``, ``<name>-1``, ... in ``namespace``."""
    namespace: str = "default"
    """The controller's namespace (as for the Lease and the digest key)."""
    interval: float = 5.0
    """Seconds between batch writes."""
    shard_bytes: int = 512 * 1024
    """Target size of one shard's text (a ConfigMap holds at most 1 MiB)."""

    @property
    def enabled(self) -> bool:
        return self.kind != "none"


MAX_ROLLOUT_BUDGET = 100_000
"""Upper bound of the rollout budget flags (a larger number is a typo, not a budget)."""


@dataclass(frozen=True, slots=True)
class Rollouts:
    """Waves: how many rollouts at once, when one has failed, and holds (docs/rollouts.md)."""

    max_concurrent: int = 0
    """``--max-concurrent-rollouts``: rollouts under way at once in the cluster (0: no limit)."""
    max_per_namespace: int = 0
    """``--max-concurrent-rollouts-per-namespace`` (0: no limit)."""
    timeout: float = 600.0
    """``--rollout-timeout``: a rollout not complete this long after its write has failed."""
    hold_on_failure: bool = False
    """``--hold-on-failed-rollout`` (on by default whenever a budget is set)."""
    eviction: EvictionMode = EvictionMode.OFF
    """``--eviction``: which workloads restart by eviction (docs/eviction.md)."""
    evictions_at_once: int = 1
    """``--evictions-at-once``: pods of one workload evicted together."""
    eviction_interval: float = 2.0
    """``--eviction-interval``: how often an eviction under way reads its pods."""

    @property
    def budgeted(self) -> bool:
        """Whether a budget is set: without one, reloads are exactly as they were."""
        return self.max_concurrent > 0 or self.max_per_namespace > 0


@dataclass(frozen=True, slots=True)
class Config:
    """The whole validated configuration, built once by :func:`load_config`."""

    keys: AnnotationKeys = field(default_factory=AnnotationKeys)
    filters: Filters = field(default_factory=Filters)
    behaviour: Behaviour = field(default_factory=Behaviour)
    runtime: Runtime = field(default_factory=Runtime)
    gitops: GitOps = field(default_factory=GitOps)
    state: StateStore = field(default_factory=StateStore)
    rollouts: Rollouts = field(default_factory=Rollouts)
    alerts: Mapping[str, str] = field(default_factory=dict)
    """ALERT_* environment variables (ALERT_ON_RELOAD, ALERT_SINK, ...)."""
    metrics_count_by_namespace: bool = False
    """Stakater's ``METRICS_COUNT_BY_NAMESPACE=enabled``: export reloads by namespace."""
    inert_flags: tuple[str, ...] = ()
    """Stakater flags that were set but do nothing here (logged once at start-up)."""
    meta_info: MetaInfoTarget | None = None
    """Where to publish Stakater's ``reloader-meta-info`` ConfigMap (``RELOADER_NAMESPACE``)."""


META_INFO_NAME = "reloader-meta-info"
"""Stakater's meta-info ConfigMap, written where ``RELOADER_NAMESPACE`` says."""


@dataclass(frozen=True, slots=True)
class MetaInfoTarget:
    """Stakater's ``RELOADER_NAMESPACE`` / ``RELOADER_DEPLOYMENT_NAME``."""

    namespace: str
    deployment_name: str = ""


@dataclass(frozen=True, slots=True)
class FlagSpec:
    """One command-line flag: its names, help text and default as the user writes it."""

    names: tuple[str, ...]
    help: str
    default: str
    boolean: bool = False
    stakater: bool = True
    """Stakater's flag (v1 or v2): bound to the environment as Stakater v2 binds it."""
    repeatable: bool = False
    """A Stakater string-slice flag: repeats are joined with commas."""
    inert: bool = False
    """Accepted for Stakater compatibility; setting it changes nothing here."""


FLAGS: tuple[FlagSpec, ...] = (
    FlagSpec(("--kubeconfig",), "Path to a kubeconfig; else KUBECONFIG, ~/.kube/config, in-cluster.", ""),
    FlagSpec(("--reload-strategy",), "Default sink: env-vars or annotations (per workload: gitops-reloader.io/sink).", "env-vars"),
    FlagSpec(("--default-sink",), "Sink for workloads without gitops-reloader.io/sink: env-vars, annotations, git, pull-request, webhook (default: --reload-strategy).", "", stakater=False),
    FlagSpec(("--auto-reload-all",), "Reload every workload that references a changed ConfigMap/Secret.", "false", True),
    FlagSpec(("--reload-on-create",), "Reload when a referenced ConfigMap/Secret is created.", "false", True),
    FlagSpec(("--reload-on-delete",), "Reload when a referenced ConfigMap/Secret is deleted.", "false", True),
    FlagSpec(("--sync-after-restart",), "At start-up, reload workloads whose recorded hash is out of date.", "false", True),
    FlagSpec(("--reload-on",), "any-change (Stakater) or used-keys: reload only when a key the workload uses changed (per workload: gitops-reloader.io/reload-on).", "any-change", stakater=False),
    FlagSpec(("--prune-stale-env-vars",), "A reload also removes, in the same patch, STAKATER_* variables of sources the container no longer references.", "false", True, stakater=False),
    FlagSpec(("--auto-annotation",), "Annotation: reload on any referenced ConfigMap/Secret.", "reloader.stakater.com/auto"),
    FlagSpec(("--configmap-auto-annotation",), "Annotation: reload on referenced ConfigMaps.", "configmap.reloader.stakater.com/auto"),
    FlagSpec(("--secret-auto-annotation",), "Annotation: reload on referenced Secrets.", "secret.reloader.stakater.com/auto"),
    FlagSpec(("--configmap-annotation",), "Annotation: comma list of ConfigMap name regexes.", "configmap.reloader.stakater.com/reload"),
    FlagSpec(("--secret-annotation",), "Annotation: comma list of Secret name regexes.", "secret.reloader.stakater.com/reload"),
    FlagSpec(("--auto-search-annotation",), "Annotation on a workload: reload on referenced sources that carry the match annotation.", "reloader.stakater.com/search"),
    FlagSpec(("--search-match-annotation",), "Annotation on a ConfigMap/Secret picked up by search.", "reloader.stakater.com/match"),
    FlagSpec(("--pause-deployment-annotation",), "Annotation: pause a Deployment for this period after a reload.", "deployment.reloader.stakater.com/pause-period"),
    FlagSpec(("--pause-deployment-time-annotation",), "Annotation where the pause start is recorded.", "deployment.reloader.stakater.com/paused-at"),
    FlagSpec(("--resources-to-ignore",), "configMaps or secrets: do not watch that type.", "", repeatable=True),
    FlagSpec(("--ignore-configmaps",), "Do not watch ConfigMaps (older Stakater spelling).", "false", True),
    FlagSpec(("--ignore-secrets",), "Do not watch Secrets (older Stakater spelling).", "false", True),
    FlagSpec(("--ignored-workload-types",), "Comma list of jobs, cronjobs and built-in kinds (services.serving.knative.dev, clonesets.apps.kruise.io, statefulsets.apps.kruise.io, daemonsets.apps.kruise.io) to leave alone.", "", repeatable=True),
    FlagSpec(("--workload-kinds-config",), "YAML file listing further workload kinds (group, version, kind, plural, podTemplatePath, rollsOnTemplateChange); docs/configuration.md.", "", stakater=False),
    FlagSpec(("--kind-discovery-interval",), "How often a built-in workload kind whose API is not served (Knative, OpenKruise) is looked for again.", "30s", stakater=False),
    FlagSpec(("--namespaces-to-ignore",), "Comma list of namespaces to ignore.", "", repeatable=True),
    FlagSpec(("--namespace-selector",), "Label selector: watch only namespaces that match.", "", repeatable=True),
    FlagSpec(("--resource-label-selector",), "Label selector: watch only ConfigMaps/Secrets that match.", "", repeatable=True),
    FlagSpec(("--namespaces",), "Comma list: watch only these namespaces (env KUBERNETES_NAMESPACE: one).", "", repeatable=True),
    FlagSpec(("--webhook-url",), "POST a JSON description of each change here instead of reloading.", ""),
    FlagSpec(("--is-Argo-Rollouts", "--is-argo-rollouts"), "Also reload Argo Rollouts.", "false", True),
    FlagSpec(("--is-openshift",), "Also reload DeploymentConfigs (default: detect through discovery).", "", True),
    FlagSpec(("--enable-ha",), "Leader election on a coordination.k8s.io Lease; standbys keep warm caches.", "false", True),
    FlagSpec(("--log-format",), "Log format: json or text.", "text"),
    FlagSpec(("--log-level",), "Log level: debug, info, warning, error.", "info"),
    FlagSpec(("--coalesce-window",), "Wait this long after a change to batch further changes per workload/repository.", "2s", stakater=False),
    FlagSpec(("--workers",), "Concurrent sink workers.", "4", stakater=False),
    FlagSpec(("--write-qps",), "Client-side limit on API writes per second (token bucket).", "200", stakater=False),
    FlagSpec(("--write-burst",), "Token-bucket burst for API writes.", "300", stakater=False),
    FlagSpec(("--max-retries",), "Attempts after which a failing emission is raised (Warning Event, alert, status); it stays pending and is retried until it succeeds, never dropped.", "12", stakater=False),
    FlagSpec(("--max-reloads-per-workload",), "Storm brake: at most COUNT reloads of one workload per PERIOD (COUNT/PERIOD; 0 turns it off); past it the workload is held and the latest data applied when the period allows. Annotation gitops-reloader.io/max-reloads overrides it per workload.", "6/10m", stakater=False),
    FlagSpec(("--cluster-reload-rate",), "Storm brake: at most COUNT reloads in the whole cluster per PERIOD (e.g. 120/1m; 0: no cap).", "0", stakater=False),
    FlagSpec(("--source-backoff-cap",), "Storm brake: a ConfigMap/Secret that keeps changing has its coalescing window doubled per change, up to this (0: off).", "5m", stakater=False),
    FlagSpec(("--reload-windows-config",), "YAML file naming maintenance windows (cron schedule, time zone, duration) and an optional default; a workload chooses one with gitops-reloader.io/reload-window and its reloads wait until the window is open.", "", stakater=False),
    FlagSpec(("--retry-max-delay",), "Cap of the exponential backoff between attempts of a failing emission, and the period at which a failure only a person can fix is tried again.", "5m", stakater=False),
    FlagSpec(("--resync-period",), "How often every workload is compared with its sources' current state from the caches, and whatever a missed change left out of date is reloaded (0: never).", "10m", stakater=False),
    FlagSpec(("--http-address",), "Address for /metrics, /live, /healthz, /readyz.", ":9090", stakater=False),
    FlagSpec(("--lease-name",), "Lease name for --enable-ha.", "gitops-reloader", stakater=False),
    FlagSpec(("--lease-duration",), "How long a standby waits for a silent leader before taking over.", "15s", stakater=False),
    FlagSpec(("--git-config",), "YAML file describing manifest repositories and their credentials (git / pull-request sinks).", "", stakater=False),
    FlagSpec(("--git-cache-dir",), "Directory for working clones (an emptyDir in the chart).", "/var/cache/gitops-reloader", stakater=False),
    FlagSpec(("--digest-key-secret",), "Secret holding the HMAC key for digests written to git (created if missing).", "gitops-reloader-digest-key", stakater=False),
    FlagSpec(("--pr-grouping",), "One pull request per workload or per repository.", "workload", stakater=False),
    FlagSpec(("--request-refresh",), "After a push, or once a pull request is seen merged, ask Argo CD / Flux "
             "to reconcile now.", "true", True, stakater=False),
    FlagSpec(("--git-apply-timeout",), "How long a pushed or merged git emission may take to be applied by Argo CD / Flux and rolled out before a NotApplied Event (0: do not follow emissions).", "15m", stakater=False),
    FlagSpec(("--git-follow-interval",), "Interval between two reads of the statuses of a followed git emission (engine, pod template, rollout).", "5s", stakater=False),
    FlagSpec(("--dry-run",), "Decide every reload as usual but write nothing to the cluster or git; record each as a WouldReload Event, a log line and a metric.", "false", True, stakater=False),
    FlagSpec(("--lease-namespace",), "Lease namespace for --enable-ha (default: POD_NAMESPACE or default).", "", stakater=False),
    # Stakater v1 and v2 flags accepted for a drop-in swap (docs/migrating-from-stakater.md).
    FlagSpec(("--ignore-annotation",), "Annotation on a ConfigMap/Secret: never reload for it.", "reloader.stakater.com/ignore"),
    FlagSpec(("--configmap-exclude-annotation",), "Annotation on a workload: ConfigMaps (comma list) that never reload it.", "configmaps.exclude.reloader.stakater.com/reload"),
    FlagSpec(("--secret-exclude-annotation",), "Annotation on a workload: Secrets (comma list) that never reload it.", "secrets.exclude.reloader.stakater.com/reload"),
    FlagSpec(("--metrics-addr",), "Stakater v2: address for /metrics (sets --http-address).", ""),
    FlagSpec(("--health-addr",), "Stakater v2: a second address serving /live, /healthz, /readyz (and /metrics).", ""),
    FlagSpec(("--leader-election-id",), "Stakater v2: Lease name (sets --lease-name).", ""),
    FlagSpec(("--leader-election-namespace",), "Stakater v2: Lease namespace (sets --lease-namespace).", ""),
    FlagSpec(("--leader-election-lease-duration",), "How long a standby waits for a silent leader (sets --lease-duration).", ""),
    FlagSpec(("--leader-election-renew-deadline",), "How long a leader retries renewing before it steps down (default 2/3 of the lease duration).", ""),
    FlagSpec(("--leader-election-retry-period",), "Interval between acquire/renew attempts (default lease duration / 7.5).", ""),
    FlagSpec(("--leader-election-release-on-cancel",), "On a clean stop, the leader releases the Lease so a standby takes over at once.", "false", True),
    FlagSpec(("--alert-on-reload",), "Send an alert per reloaded workload (env ALERT_ON_RELOAD).", "false", True),
    FlagSpec(("--alert-webhook-url",), "Where alerts are POSTed; setting it turns alerts on (env ALERT_WEBHOOK_URL).", ""),
    FlagSpec(("--alert-sink",), "Alert format: slack, teams, gchat, raw/webhook (env ALERT_SINK).", ""),
    FlagSpec(("--alert-proxy",), "HTTP(S) proxy for alerts (env ALERT_PROXY or ALERT_WEBHOOK_PROXY).", ""),
    FlagSpec(("--alert-additional-info",), "Text prefixed to every alert, e.g. the cluster name (env ALERT_ADDITIONAL_INFO).", ""),
    FlagSpec(("--alert-structured",), "Raw/webhook alerts as Stakater v2's structured JSON instead of text (env ALERT_STRUCTURED).", "false", True),
    FlagSpec(("--enable-pprof",), "Go pprof server: accepted, not applicable to this Python process (use py-spy).", "false", True, inert=True),
    FlagSpec(("--pprof-addr",), "Go pprof address: accepted, not applicable (see --enable-pprof).", ":6060", inert=True),
    FlagSpec(("--enable-csi-integration",), "Secrets Store CSI: reload when a pod's SecretProviderClassPodStatus reports new object versions (needs the secrets-store.csi.x-k8s.io/v1 API).", "false", True),
    FlagSpec(("--secretproviderclass-annotation",), "Annotation: comma list of SecretProviderClass name regexes.", "secretproviderclass.reloader.stakater.com/reload"),
    FlagSpec(("--secretproviderclass-auto-annotation",), "Annotation: reload on mounted SecretProviderClasses.", "secretproviderclass.reloader.stakater.com/auto"),
    FlagSpec(("--secretproviderclass-exclude-annotation",), "Annotation on a workload: SecretProviderClasses (comma list) that never reload it.", "secretproviderclasses.exclude.reloader.stakater.com/reload"),
    FlagSpec(("--permission-check",), "At start-up, ask the API server (SelfSubjectAccessReview) for every verb the configuration needs: strict stops on a missing one, warn only logs, off skips.", "strict", stakater=False),
    FlagSpec(("--shard-count",), "Split namespaces across this many instances by a consistent hash of their names (docs/scaling.md).", "1", stakater=False),
    FlagSpec(("--shard-index",), "Which of the --shard-count shards this instance is (0-based); its Lease gets a -shard-<index> suffix.", "0", stakater=False),
    FlagSpec(("--ignore-secret-types",), "Comma list of Secret types never listed or watched (a server-side field selector); empty watches all.", HELM_RELEASE_SECRET_TYPE, stakater=False),
    FlagSpec(("--state-store",), "Keep the last-seen keyed digest of every source and what each workload was last given outside the workloads: none or configmap (ConfigMaps in the controller's namespace; --sync-after-restart and HA take-over read it).", "none", stakater=False),
    FlagSpec(("--state-store-name",), "Name prefix of the state-store ConfigMaps (<name>-0, <name>-1, ...); with --shard-count, -shard-<index> is added.", "gitops-reloader-state", stakater=False),
    FlagSpec(("--state-store-interval",), "How often the state store writes its batch of changes.", "5s", stakater=False),
    FlagSpec(("--max-concurrent-rollouts",), "Live sinks: at most this many workloads rolling at once in the cluster, the rest wait in order of gitops-reloader.io/rollout-priority (0: no limit; docs/rollouts.md).", "0", stakater=False),
    FlagSpec(("--max-concurrent-rollouts-per-namespace",), "At most this many workloads rolling at once in one namespace (0: no limit).", "0", stakater=False),
    FlagSpec(("--rollout-timeout",), "With a budget: a rollout not complete this long after its write counts as failed; with --eviction, also a replacement pod not Ready this long after it was created.", "10m", stakater=False),
    FlagSpec(("--eviction",), "Restart through the Eviction API (one pod at a time, each replacement Ready first, PodDisruptionBudgets respected) the pods a template write does not restart: off; annotated (workloads annotated gitops-reloader.io/restart-strategy: eviction, and configured kinds with no pod template); on-delete (also every OnDelete workload). docs/eviction.md.", "off", stakater=False),
    FlagSpec(("--evictions-at-once",), "Pods of one workload evicted together (annotation gitops-reloader.io/evictions-at-once overrides it).", "1", stakater=False),
    FlagSpec(("--eviction-interval",), "How often an eviction under way reads its workload's pods.", "2s", stakater=False),
    FlagSpec(("--hold-on-failed-rollout",), "With a budget: a failed rollout holds the not-yet-started reloads of the same source change (default: on whenever a budget is set).", "", True, stakater=False),
    FlagSpec(("--state-store-shard-size",), "Target bytes of one state-store ConfigMap (1024 to 921600); more entries add shards.", "524288", stakater=False),
)


def _dest(spec: FlagSpec) -> str:
    return spec.names[0].lstrip("-").lower().replace("-", "_")


def env_names(spec: FlagSpec) -> tuple[str, ...]:
    """The environment variables that set ``spec`` when the flag is not given.

    Stakater's flags bind as Stakater v2 binds them (viper ``AutomaticEnv``: the flag name
    upper-cased, ``-`` → ``_``, e.g. ``RELOAD_STRATEGY``, ``IS_ARGO_ROLLOUTS``; plus the
    legacy ``ALERT_WEBHOOK_PROXY``); ours carry a ``GITOPS_RELOADER_`` prefix so generic
    names such as ``WORKERS`` are never picked up by accident. ``--kubeconfig`` reads
    ``KUBECONFIG`` as kubectl does (see :func:`load_config`).
    """
    if spec.names[0] == "--kubeconfig":
        return ()
    name = spec.names[0].lstrip("-").upper().replace("-", "_")
    if not spec.stakater:
        return (f"GITOPS_RELOADER_{name}",)
    return (name, "ALERT_WEBHOOK_PROXY") if name == "ALERT_PROXY" else (name,)


def build_parser(prog: str = "gitops-reloader run") -> argparse.ArgumentParser:
    """An argparse parser for every flag in :data:`FLAGS` (values kept as strings).

    Every default is ``None`` so :func:`load_config` can tell a given flag from the
    environment and the built-in default; help texts show the built-in default.
    """
    parser = argparse.ArgumentParser(prog=prog, allow_abbrev=False)
    for spec in FLAGS:
        env = " / ".join(f"${name}" for name in env_names(spec))
        shown = f"(default {spec.default if spec.boolean else repr(spec.default)}{'; env ' + env if env else ''})"
        if spec.boolean:
            parser.add_argument(*spec.names, dest=_dest(spec), nargs="?", const="true", default=None,
                                metavar="BOOL", help=f"{spec.help} {shown}")
        else:
            parser.add_argument(*spec.names, dest=_dest(spec), default=None,
                                action="append" if spec.repeatable else "store",
                                help=f"{spec.help}{' Repeatable.' if spec.repeatable else ''} {shown}")
    return parser


def _resolve(spec: FlagSpec, given: str | list[str] | None, env: Mapping[str, str]) -> tuple[str, bool]:
    """A flag's text: given on the command line > environment > built-in default.

    The boolean says whether the user set it (flag or environment).
    """
    if isinstance(given, list):
        return ",".join(given), True
    if given is not None:
        return given, True
    for name in env_names(spec):
        if name in env:
            return env[name], True
    return spec.default, False


def _flag(name: str, value: str, parse):  # type: ignore[no-untyped-def]
    try:
        return parse(value)
    except ValueError as exc:
        raise ConfigError(f"invalid value for --{name}: {exc}") from exc


def _positive_int(text: str) -> int:
    number = int(text)
    if number < 1:
        raise ValueError(f"must be at least 1, got {number}")
    return number


def _non_negative_int(text: str) -> int:
    number = int(text)
    if number < 0:
        raise ValueError(f"must be at least 0, got {number}")
    return number


def _positive_float(text: str) -> float:
    number = float(text)
    if number <= 0:
        raise ValueError(f"must be greater than 0, got {number}")
    return number


def _budget(text: str) -> int:
    number = _non_negative_int(text)
    if number > MAX_ROLLOUT_BUDGET:
        raise ValueError(f"must be at most {MAX_ROLLOUT_BUDGET}, got {number}")
    return number


def _positive_duration(text: str) -> float:
    seconds = parse_duration(text)
    if seconds <= 0:
        raise ValueError(f"must be greater than 0, got {text!r}")
    return seconds


_SHARD_SIZES = (1024, 900 * 1024)


def _shard_size(text: str) -> int:
    number = int(text)
    if not _SHARD_SIZES[0] <= number <= _SHARD_SIZES[1]:
        raise ValueError(f"must be between {_SHARD_SIZES[0]} and {_SHARD_SIZES[1]} bytes, got {number}")
    return number


_DNS_LABEL_CHARS = 58
"""A shard name adds ``-<index>`` (up to 4 characters) and must stay a 63-character label."""


def _dns_label_prefix(text: str) -> str:
    if (not text or len(text) > _DNS_LABEL_CHARS or not text[0].isalnum() or not text[-1].isalnum()
            or any(not (c.isdigit() or ("a" <= c <= "z") or c == "-") for c in text)):
        raise ValueError(f"{text[:80]!r} is not a lower-case DNS label of at most {_DNS_LABEL_CHARS} characters")
    return text


def _choice(*allowed: str):  # type: ignore[no-untyped-def]
    def parse(text: str) -> str:
        if text not in allowed:
            raise ValueError(f"{text!r} is not one of {', '.join(allowed)}")
        return text

    return parse


def _kubeconfig_path(flag: str, env: Mapping[str, str]) -> str:
    """As kubectl: --kubeconfig, else KUBECONFIG (first existing entry), else ~/.kube/config;
    "" means in-cluster."""
    if flag:
        if not os.path.isfile(flag):
            raise ConfigError(f"invalid value for --kubeconfig: no file {flag!r}")
        return flag
    for entry in env.get("KUBECONFIG", "").split(os.pathsep):
        if entry and os.path.isfile(entry):
            return entry
    home = env.get("HOME") or os.path.expanduser("~")
    default = os.path.join(home, ".kube", "config")
    return default if os.path.isfile(default) else ""


def load_config(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> Config:
    """Parse ``argv`` (flags only, no sub-command) and the environment into a Config.

    Raises :class:`ConfigError` naming the flag on any invalid value.
    """
    env = dict(os.environ if environ is None else environ)
    parser = build_parser()
    ns, extra = parser.parse_known_args(list(argv))
    if extra:
        raise ConfigError(f"unknown arguments: {' '.join(extra)}")
    given = vars(ns)
    raw: dict[str, str] = {}
    inert: list[str] = []
    for spec in FLAGS:
        raw[_dest(spec)], was_set = _resolve(spec, given[_dest(spec)], env)
        if spec.inert and was_set and raw[_dest(spec)] != spec.default:
            inert.append(f"{spec.names[0]}={raw[_dest(spec)]}")
    b = {spec: _flag(spec.names[0].lstrip("-"), raw[_dest(spec)], parse_bool)
         for spec in FLAGS if spec.boolean and spec.default}  # "" default: tri-state, read below
    flag_bool = {_dest(s): v for s, v in b.items()}

    resources_to_ignore = raw["resources_to_ignore"].strip()
    _flag("resources-to-ignore", resources_to_ignore.lower(), _choice("", "configmaps", "secrets"))
    ignored_types = split_csv(raw["ignored_workload_types"].lower())
    for kind in ignored_types:
        _flag("ignored-workload-types", kind, _choice("jobs", "cronjobs", *IGNORABLE_KINDS))
    kinds_file = raw["workload_kinds_config"].strip()

    namespaces = split_csv(raw["namespaces"])
    if not namespaces and env.get("KUBERNETES_NAMESPACE", "").strip():
        namespaces = (env["KUBERNETES_NAMESPACE"].strip(),)

    is_openshift_text = raw["is_openshift"].strip()
    is_openshift = None if not is_openshift_text else _flag("is-openshift", is_openshift_text, parse_bool)

    strategy = _flag("reload-strategy", raw["reload_strategy"], _choice("env-vars", "annotations"))
    log_format = _flag("log-format", raw["log_format"] or "text", _choice("text", "json"))
    log_level = _flag("log-level", raw["log_level"].lower(), _choice("debug", "info", "warning", "error"))

    keys = AnnotationKeys(
        auto=raw["auto_annotation"],
        configmap_auto=raw["configmap_auto_annotation"],
        secret_auto=raw["secret_auto_annotation"],
        configmap_reload=raw["configmap_annotation"],
        secret_reload=raw["secret_annotation"],
        search=raw["auto_search_annotation"],
        ignore=raw["ignore_annotation"],
        configmaps_exclude=raw["configmap_exclude_annotation"],
        secrets_exclude=raw["secret_exclude_annotation"],
        spc_auto=raw["secretproviderclass_auto_annotation"],
        spc_reload=raw["secretproviderclass_annotation"],
        spcs_exclude=raw["secretproviderclass_exclude_annotation"],
        match=raw["search_match_annotation"],
        pause_period=raw["pause_deployment_annotation"],
        paused_at=raw["pause_deployment_time_annotation"],
    )
    shard = Shard(_flag("shard-index", raw["shard_index"], _non_negative_int),
                  _flag("shard-count", raw["shard_count"], _positive_int))
    if shard.index >= shard.count:
        raise ConfigError(f"invalid value for --shard-index: {shard.index} is not below --shard-count {shard.count}")
    filters = Filters(
        namespaces=namespaces,
        namespaces_to_ignore=split_csv(raw["namespaces_to_ignore"]),
        namespace_selector=stakater_selector(raw["namespace_selector"]),
        resource_label_selector=stakater_selector(raw["resource_label_selector"]),
        ignore_configmaps=flag_bool["ignore_configmaps"] or resources_to_ignore.lower() == "configmaps",
        ignore_secrets=flag_bool["ignore_secrets"] or resources_to_ignore.lower() == "secrets",
        ignored_workload_types=ignored_types,
        ignore_secret_types=split_csv(raw["ignore_secret_types"]),
        shard=shard,
    )
    if filters.ignore_configmaps and filters.ignore_secrets:
        raise ConfigError("--resources-to-ignore/--ignore-*: ignoring both ConfigMaps and Secrets leaves nothing to watch")
    behaviour = Behaviour(
        reload_strategy=SinkName(strategy),
        default_sink=SinkName(_flag("default-sink", raw["default_sink"], _choice(*SinkName)))
        if raw["default_sink"] else None,
        auto_reload_all=flag_bool["auto_reload_all"],
        reload_on_create=flag_bool["reload_on_create"],
        reload_on_delete=flag_bool["reload_on_delete"],
        sync_after_restart=flag_bool["sync_after_restart"],
        reload_on=ReloadOn(_flag("reload-on", raw["reload_on"].strip(), _choice(*ReloadOn))),
        prune_stale_env_vars=flag_bool["prune_stale_env_vars"],
        webhook_url=raw["webhook_url"].strip(),
        is_argo_rollouts=flag_bool["is_argo_rollouts"],
        is_openshift=is_openshift,
        enable_csi_integration=flag_bool["enable_csi_integration"],
        workload_kinds=load_kinds_config(kinds_file) if kinds_file else (),
        kind_discovery_interval=_flag("kind-discovery-interval", raw["kind_discovery_interval"],
                                      _positive_duration),
    )
    http_address = raw["metrics_addr"] or raw["http_address"]
    runtime = Runtime(
        coalesce_window=_flag("coalesce-window", raw["coalesce_window"], parse_duration),
        workers=_flag("workers", raw["workers"], _positive_int),
        write_qps=_flag("write-qps", raw["write_qps"], _positive_float),
        write_burst=_flag("write-burst", raw["write_burst"], _positive_int),
        max_retries=_flag("max-retries", raw["max_retries"], _positive_int),
        retry_max_delay=_flag("retry-max-delay", raw["retry_max_delay"], _positive_duration),
        max_reloads_per_workload=_flag("max-reloads-per-workload", raw["max_reloads_per_workload"], parse_rate),
        cluster_reload_rate=_flag("cluster-reload-rate", raw["cluster_reload_rate"], parse_rate),
        source_backoff_cap=_flag("source-backoff-cap", raw["source_backoff_cap"], parse_duration),
        reload_windows=load_windows(raw["reload_windows_config"]) if raw["reload_windows_config"] else WindowSet(),
        resync_period=_flag("resync-period", raw["resync_period"], parse_duration),
        http_address=http_address,
        health_address=raw["health_addr"] if raw["health_addr"] not in ("", http_address) else "",
        enable_ha=flag_bool["enable_ha"],
        lease_name=(raw["leader_election_id"] or raw["lease_name"])
        + (f"-shard-{shard.index}" if shard.sharded else ""),
        lease_namespace=(raw["leader_election_namespace"] or raw["lease_namespace"]
                         or env.get("POD_NAMESPACE", "") or "default"),
        lease_duration=_flag("lease-duration", raw["leader_election_lease_duration"] or raw["lease_duration"],
                             parse_duration) or 15.0,
        renew_deadline=_optional_duration("leader-election-renew-deadline", raw),
        retry_period=_optional_duration("leader-election-retry-period", raw),
        release_on_cancel=flag_bool["leader_election_release_on_cancel"],
        log_format=log_format,
        log_level=log_level,
        kubeconfig=_kubeconfig_path(raw["kubeconfig"], env),
        dry_run=flag_bool["dry_run"],
        permission_check=_flag("permission-check", raw["permission_check"], _choice("strict", "warn", "off")),
    )
    gitops = GitOps(
        config_file=raw["git_config"].strip(),
        cache_dir=raw["git_cache_dir"],
        digest_key_secret=raw["digest_key_secret"],
        digest_key_namespace=runtime.lease_namespace,
        pr_grouping=_flag("pr-grouping", raw["pr_grouping"], _choice("workload", "repository")),
        request_refresh=flag_bool["request_refresh"],
        apply_timeout=_flag("git-apply-timeout", raw["git_apply_timeout"], parse_duration),
        follow_interval=_flag("git-follow-interval", raw["git_follow_interval"], _positive_duration),
    )
    state = StateStore(
        kind=_flag("state-store", raw["state_store"].strip().lower() or "none", _choice("none", "configmap")),
        # Each hash shard leads alone, so it keeps its own store, as it keeps its own Lease.
        name=_flag("state-store-name", raw["state_store_name"].strip()
                   + (f"-shard-{shard.index}" if shard.sharded else ""), _dns_label_prefix),
        namespace=runtime.lease_namespace,
        interval=_flag("state-store-interval", raw["state_store_interval"], _positive_duration),
        shard_bytes=_flag("state-store-shard-size", raw["state_store_shard_size"], _shard_size),
    )
    alerts = _alerts(env, raw, given)
    return Config(
        keys=keys, filters=filters, behaviour=behaviour, runtime=runtime, gitops=gitops, state=state,
        rollouts=_rollouts(raw),
        alerts=alerts,
        metrics_count_by_namespace=env.get("METRICS_COUNT_BY_NAMESPACE", "") == "enabled",
        inert_flags=tuple(inert),
        meta_info=(MetaInfoTarget(env["RELOADER_NAMESPACE"].strip(),
                                  env.get("RELOADER_DEPLOYMENT_NAME", "").strip())
                   if env.get("RELOADER_NAMESPACE", "").strip() else None),
    )


def _rollouts(raw: Mapping[str, str]) -> Rollouts:
    """The waves flags; ``--hold-on-failed-rollout`` unset means on whenever a budget is set."""
    total = _flag("max-concurrent-rollouts", raw["max_concurrent_rollouts"], _budget)
    per_namespace = _flag("max-concurrent-rollouts-per-namespace",
                          raw["max_concurrent_rollouts_per_namespace"], _budget)
    hold_text = raw["hold_on_failed_rollout"].strip()
    hold = (_flag("hold-on-failed-rollout", hold_text, parse_bool) if hold_text
            else total > 0 or per_namespace > 0)
    return Rollouts(max_concurrent=total, max_per_namespace=per_namespace,
                    timeout=_flag("rollout-timeout", raw["rollout_timeout"], _positive_duration),
                    hold_on_failure=hold,
                    eviction=_flag("eviction", raw["eviction"], _eviction_mode),
                    evictions_at_once=_flag("evictions-at-once", raw["evictions_at_once"], _at_once),
                    eviction_interval=_flag("eviction-interval", raw["eviction_interval"], _positive_duration))


def _eviction_mode(text: str) -> EvictionMode:
    try:
        return EvictionMode(text.strip().lower())
    except ValueError:
        raise ValueError(f"{text[:32]!r} is none of {', '.join(EvictionMode)}") from None


def _at_once(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_AT_ONCE:
        raise ValueError(f"must be from 1 to {MAX_AT_ONCE}")
    return value


def _optional_duration(name: str, raw: Mapping[str, str]) -> float | None:
    text = raw[name.replace("-", "_")].strip()
    return _flag(name, text, parse_duration) if text else None


_ALERT_FLAGS: Final = {
    "alert_on_reload": "ALERT_ON_RELOAD", "alert_webhook_url": "ALERT_WEBHOOK_URL",
    "alert_sink": "ALERT_SINK", "alert_proxy": "ALERT_WEBHOOK_PROXY",
    "alert_additional_info": "ALERT_ADDITIONAL_INFO", "alert_structured": "ALERT_STRUCTURED",
}


def _alerts(env: Mapping[str, str], raw: Mapping[str, str], given: Mapping[str, object]) -> dict[str, str]:
    """Stakater's ``ALERT_*`` variables, overridden by the v2 ``--alert-*`` flags.

    As v2 does, ``--alert-webhook-url`` on the command line turns alerting on by itself;
    the v1 environment keeps v1's rule (``ALERT_ON_RELOAD`` must say true).
    """
    alerts = {k: v for k, v in env.items() if k.startswith("ALERT_")}
    for dest, name in _ALERT_FLAGS.items():
        if given.get(dest) is not None or (raw[dest] and name not in alerts):  # e.g. v2's ALERT_PROXY
            alerts[name] = raw[dest]
    if given.get("alert_webhook_url") and given.get("alert_on_reload") is None:
        alerts["ALERT_ON_RELOAD"] = "true"
    return alerts


def namespace_windows(config: Config) -> bool:
    """Whether namespaces may choose a window by annotation: windows are configured and the
    controller watches every namespace (namespaces are cluster-scoped: a namespaced install's
    Role cannot grant reading them, so ``--namespaces`` leaves it to the workloads' annotations)."""
    return bool(config.runtime.reload_windows.windows) and not config.filters.namespaces
