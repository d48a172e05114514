"""Stakater-compatible alerts on reload: Slack, Microsoft Teams, Google Chat, raw webhook.

Configured as Stakater is, by environment (collected into ``Config.alerts``):

=========================  ===============================================================
``ALERT_ON_RELOAD``        ``true`` to send one alert per reloaded workload
``ALERT_SINK``             ``slack``, ``teams``, ``gchat`` or ``webhook`` (alias ``raw``);
                           case-insensitive; default ``webhook``
``ALERT_WEBHOOK_URL``      where to POST; required when enabled; treated as a secret
``ALERT_ADDITIONAL_INFO``  prefixed to every message as ``"<info> : <message>"``
``ALERT_WEBHOOK_PROXY``    optional HTTP(S) proxy for the POST
``ALERT_STRUCTURED``       ``true``: the raw webhook gets Stakater v2's JSON (below)
=========================  ===============================================================

Payloads: Slack and Google Chat ``{"text": message}``; Teams a MessageCard
``{"@type": "MessageCard", "@context": "http://schema.org/extensions", "text": message}``
(Stakater sends the bare ``{"text": ...}``, which Teams reads the same way); the raw
webhook gets the message as a ``text/plain`` body with Markdown ``*`` removed, exactly as
Stakater's raw sink posts it, so existing receivers keep parsing it. With
``ALERT_STRUCTURED`` (v2's ``--alert-structured``) the raw webhook gets v2's JSON instead:
``{"event": "reload", "workloadKind", "workloadName", "workloadNamespace", "resourceKind",
"resourceName", "resourceNamespace", "timestamp" (RFC 3339), "additional" (when set)}``.

:class:`Alerter` never blocks or raises into its caller: :meth:`Alerter.notify` puts the
message on a bounded queue and returns; one daemon thread posts, with a timeout and
retries (network errors, 408, 429 honouring ``Retry-After`` up to a cap, 5xx). A message
that can't be delivered is logged (naming the sink and the URL's scheme and host only,
never the path or query: Slack and Teams put the token in the path) and counted in
``gitops_reloader_alerts_total{success="false"}``. Redirects are not followed: a webhook
that redirects is misconfigured (Stakater: "incorrect token (redirection)").
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from gitops_reloader.backoff import exponential, floored, parse_retry_after
from gitops_reloader.errors import ConfigError
from gitops_reloader.observability.metrics import Metrics

log = logging.getLogger(__name__)

ALERT_SINKS = ("slack", "teams", "gchat", "webhook")
"""Canonical ``ALERT_SINK`` values; ``raw`` is accepted as an alias of ``webhook``."""

_TRUE = frozenset({"1", "t", "true", "y", "yes", "on"})


@dataclass(frozen=True, slots=True)
class AlertConfig:
    """Where and how reload alerts go. Build it with :func:`alert_config_from_env`."""

    enabled: bool = False
    sink: str = "webhook"
    """One of :data:`ALERT_SINKS`, lower case."""
    webhook_url: str = field(default="", repr=False)
    """Often carries a token (Slack, Teams, Google Chat): never log or print it."""
    additional_info: str = ""
    """Prefixed to every message, e.g. the cluster name."""
    proxy: str = field(default="", repr=False)
    structured: bool = False
    """Raw webhook only: Stakater v2's JSON document instead of the text line."""


@dataclass(frozen=True, slots=True)
class ReloadAlert:
    """One reloaded workload and the source that caused it (Stakater v2's ``AlertMessage``).

    ``hash_prefix`` is a short prefix of a ConfigMap hash (empty for Secrets), never data.
    """

    workload_kind: str
    workload_name: str
    workload_namespace: str
    resource_kind: str
    """``ConfigMap``, ``Secret`` or ``SecretProviderClass``."""
    resource_name: str
    resource_namespace: str
    timestamp: datetime
    stakater_type: str = ""
    """The source's Stakater type name (``CONFIGMAP``, ...) for the text message."""
    hash_prefix: str = ""

    @property
    def text(self) -> str:
        """Stakater v1's text for this reload."""
        return reload_message(workload=self.workload_name, kind=self.workload_kind,
                              source=self.resource_name, namespace=self.workload_namespace,
                              source_kind=self.stakater_type, hash_prefix=self.hash_prefix)

    def document(self, additional: str) -> dict[str, str]:
        """Stakater v2's structured raw-webhook JSON (``rawMessage``)."""
        doc = {
            "event": "reload",
            "workloadKind": self.workload_kind,
            "workloadName": self.workload_name,
            "workloadNamespace": self.workload_namespace,
            "resourceKind": self.resource_kind,
            "resourceName": self.resource_name,
            "resourceNamespace": self.resource_namespace,
            "timestamp": self.timestamp.isoformat(timespec="seconds").replace("+00:00", "Z"),
        }
        if additional:
            doc["additional"] = additional
        return doc


def alert_config_from_env(env: Mapping[str, str]) -> AlertConfig:
    """Read Stakater's ``ALERT_*`` variables from ``env`` (e.g. ``Config.alerts``).

    Raises :class:`ConfigError` for an unknown ``ALERT_SINK`` or for alerts enabled
    without ``ALERT_WEBHOOK_URL``. The error never contains the URL.
    """
    enabled = env.get("ALERT_ON_RELOAD", "").strip().lower() in _TRUE
    sink = env.get("ALERT_SINK", "").strip().lower() or "webhook"
    if sink == "raw":
        sink = "webhook"
    if sink not in ALERT_SINKS:
        raise ConfigError(f"invalid ALERT_SINK {sink!r}; use one of {', '.join(ALERT_SINKS)}")
    url = env.get("ALERT_WEBHOOK_URL", "").strip()
    if enabled and not url:
        raise ConfigError("ALERT_ON_RELOAD is true but ALERT_WEBHOOK_URL is not set")
    if url and not url.lower().startswith(("http://", "https://")):
        raise ConfigError("ALERT_WEBHOOK_URL must be an http:// or https:// URL")
    return AlertConfig(
        enabled=enabled,
        sink=sink,
        webhook_url=url,
        additional_info=env.get("ALERT_ADDITIONAL_INFO", "").strip(),
        proxy=env.get("ALERT_WEBHOOK_PROXY", "").strip(),
        structured=env.get("ALERT_STRUCTURED", "").strip().lower() in _TRUE,
    )


def reload_message(
    *,
    workload: str,
    kind: str,
    source: str,
    namespace: str,
    hash_prefix: str,
    source_kind: str = "",
) -> str:
    """Stakater's alert text for one reloaded workload, plus the hash prefix.

    ``workload``/``kind`` name the reloaded workload (``web``, ``Deployment``); ``source``
    is the ConfigMap/Secret name and ``source_kind`` its type (``CONFIGMAP``/``SECRET``).
    ``hash_prefix`` must be a short prefix (or a keyed digest for Secrets), never data.
    """
    text = f"Reloader detected changes in *{source}*"
    if source_kind:
        text += f" of type *{source_kind}*"
    text += (
        f" in namespace *{namespace}*. Hence reloaded *{workload}* of type *{kind}*"
        f" in namespace *{namespace}*"
    )
    if hash_prefix:
        text += f" (hash {hash_prefix})"
    return text


def safe_url(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: nothing of its path, query or credentials."""
    try:
        parsed = httpx.URL(url)
    except Exception:
        return "<invalid url>"
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}"


_STOP = object()
_CARD_CONTEXT = "http://schema.org/extensions"


class Alerter:
    """Post reload alerts in the background.

    Construct once at start-up; call :meth:`notify` from any thread; call :meth:`close`
    at shutdown. With ``config.enabled`` false every call is a no-op and no thread runs.
    Callers must not rely on delivery: alerts are best effort and dropped when the
    queue (``max_queue`` messages) is full or after ``retries`` failed attempts.
    """

    def __init__(
        self,
        config: AlertConfig,
        *,
        client: httpx.Client | None = None,
        metrics: Metrics | None = None,
        retries: int = 3,
        timeout: float = 5.0,
        backoff: float = 0.5,
        max_backoff: float = 10.0,
        max_retry_after: float = 30.0,
        max_queue: int = 1000,
    ) -> None:
        self.config = config
        self._metrics = metrics
        self._retries = max(0, retries)
        self._timeout = timeout
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._max_retry_after = max_retry_after
        self._owns_client = client is None
        self._client = client
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max_queue)
        self._lock = threading.Lock()
        self._abort = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False

    def notify(self, message: str | ReloadAlert) -> None:
        """Queue ``message`` for delivery and return at once; never raises."""
        if not self.config.enabled:
            return
        try:
            with self._lock:
                if self._closed:
                    log.debug("alert dropped: alerter closed", extra={"sink": self.config.sink})
                    return
                self._ensure_thread()
            self._queue.put_nowait(message)
        except queue.Full:
            log.warning("alert dropped: queue full", extra={"sink": self.config.sink})
            self._count(False)
        except Exception:  # a broken alert path must never break a reload
            log.exception("alert dropped", extra={"sink": self.config.sink})

    def close(self, timeout: float = 5.0) -> bool:
        """Deliver what is queued for up to ``timeout`` seconds, then stop.

        Returns True when everything queued was attempted in time; otherwise the rest
        is dropped (the thread is a daemon and stops at its next wait).
        """
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(_STOP)
            thread.join(timeout)
            if thread.is_alive():
                self._abort.set()
                thread.join(min(1.0, self._timeout))
        finished = thread is None or not thread.is_alive()
        if finished and self._owns_client and self._client is not None:
            self._client.close()
        return finished and not self._abort.is_set()

    def payload(self, message: str | ReloadAlert) -> tuple[dict[str, Any] | None, str]:
        """The request for ``message``: a JSON body, or ``None`` and a plain text body."""
        info = self.config.additional_info
        sink = self.config.sink
        if isinstance(message, ReloadAlert):
            if sink == "webhook" and self.config.structured:
                return message.document(info), ""
            message = message.text
        text = f"{info} : {message}" if info else message
        if sink == "teams":
            return {"@type": "MessageCard", "@context": _CARD_CONTEXT, "text": text}, ""
        if sink in ("slack", "gchat"):
            return {"text": text}, ""
        return None, text.replace("*", "")

    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="alerter", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        if self._client is None:
            # Built here, not in notify(): loading the TLS context takes a noticeable while.
            try:
                self._client = httpx.Client(
                    timeout=self._timeout, follow_redirects=False,
                    proxy=self.config.proxy or None,
                    headers={"User-Agent": "gitops-reloader"},
                )
            except Exception:
                log.exception("alerts disabled: cannot build the HTTP client",
                              extra={"sink": self.config.sink})
                self._abort.set()
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if self._abort.is_set():
                self._count(False)
                continue
            try:
                assert isinstance(item, str | ReloadAlert)
                ok = self._deliver(item)
            except Exception:  # keep the thread alive whatever happens
                log.exception("alert failed", extra={"sink": self.config.sink})
                ok = False
            self._count(ok)

    def _deliver(self, message: str | ReloadAlert) -> bool:
        assert self._client is not None
        body, text = self.payload(message)
        where = safe_url(self.config.webhook_url)
        reason = ""
        for attempt in range(self._retries + 1):
            delay = exponential(self._backoff, attempt + 1, self._max_backoff)
            try:
                if body is not None:
                    response = self._client.post(
                        self.config.webhook_url, json=body, timeout=self._timeout)
                else:
                    response = self._client.post(
                        self.config.webhook_url, content=text.encode(), timeout=self._timeout,
                        headers={"Content-Type": "text/plain; charset=utf-8"},
                    )
            except httpx.HTTPError as exc:
                reason = type(exc).__name__
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return True
                reason = f"status {status}"
                if status == 429:
                    after = parse_retry_after(response.headers.get("Retry-After"), now=time.time())
                    delay = floored(delay, after, self._max_retry_after)
                elif status != 408 and status < 500:
                    break  # 3xx/4xx: retrying won't help
            if attempt < self._retries:
                log.debug("alert attempt failed, retrying", extra={
                    "sink": self.config.sink, "reason": reason, "target": where, "delay": delay})
                if self._abort.wait(delay):
                    break
        log.warning("alert not delivered",
                    extra={"sink": self.config.sink, "reason": reason, "target": where})
        return False

    def _count(self, success: bool) -> None:
        if self._metrics is not None:
            self._metrics.alert_sent(self.config.sink, success)
