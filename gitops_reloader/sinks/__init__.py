"""Sinks by name. Each is built with its collaborators; see :mod:`.base` for the protocol."""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from gitops_reloader.config import Config
from gitops_reloader.hashing import keyed_digest
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.workloads import WorkloadAdapter
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.ratelimit import TokenBucket
from gitops_reloader.rollout.eviction import EvictionMode
from gitops_reloader.sinks.annotations import AnnotationsSink
from gitops_reloader.sinks.base import Sink
from gitops_reloader.sinks.envvars import EnvVarsSink
from gitops_reloader.sinks.eviction import EvictionSink
from gitops_reloader.sinks.live import LivePatcher
from gitops_reloader.sinks.webhook import WebhookSink

__all__ = ["Sink", "build_live_sinks"]


def build_live_sinks(
    config: Config,
    api: KubeApi,
    adapters: Mapping[str, WorkloadAdapter],
    *,
    metrics: Metrics,
) -> dict[str, Sink]:
    """The sinks that need only the API server: env-vars, annotations, webhook, and with
    ``--eviction`` the eviction sink of kinds with no pod template."""
    runtime = config.runtime
    patcher = LivePatcher(api, adapters, keys=config.keys, metrics=metrics,
                          limiter=TokenBucket(runtime.write_qps, runtime.write_burst))
    metrics.set_api_write_limit(runtime.write_qps)
    sinks: dict[str, Sink] = {
        EnvVarsSink.name: EnvVarsSink(patcher, prune=config.behaviour.prune_stale_env_vars),
        AnnotationsSink.name: AnnotationsSink(patcher),
    }
    if config.rollouts.eviction is not EvictionMode.OFF:
        sinks[EvictionSink.name] = EvictionSink(api, adapters)
    if config.behaviour.webhook_url:
        # Secrets: a digest keyed per process, never the plain SHA-1 of the data.
        key = secrets.token_bytes(32)
        sinks[WebhookSink.name] = WebhookSink(
            config.behaviour.webhook_url, metrics=metrics,
            secret_digest=lambda digest: keyed_digest(key, [("secret", digest)]),
        )
    return sinks
