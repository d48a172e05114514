"""The ``webhook`` sink (Stakater's ``--webhook-url``): describe the change, touch nothing.

For each workload the sink POSTs one JSON document and returns ``APPLIED``::

    {
      "webhook": "update successful",            # the body Stakater posts, kept for receivers
      "kind": "reload",
      "namespace": "ns",                          # the workload's namespace
      "resource": {"kind": "ConfigMap", "namespace": "ns", "name": "app-cfg"},
      "hash": "3c9a892aeaed",                     # first 12 hex characters only
      "deleted": false,
      "workloads": [{"kind": "Deployment", "namespace": "ns", "name": "web"}],
      "changes": [{"resource": {...}, "hash": "3c9a892aeaed", "deleted": false}],
      "observedAt": 1700000000
    }

``resource``/``hash``/``deleted`` describe the latest change; ``changes`` lists every
change coalesced into this request, oldest first. Data is never sent. For Secrets pass
``secret_digest`` (the keyed digest of :mod:`gitops_reloader.hashing`) so what leaves
the cluster is not a prefix of a plain SHA-1 of secret data.

Errors follow the queue's retry contract (the sink itself never retries):
network errors, 408 and 5xx raise :class:`HostError` (retryable); 429 raises
:class:`HostRateLimited` with ``retry_after`` from ``Retry-After``; 401/403/404 raise
:class:`HostAuthError` (permanent); other 3xx/4xx a permanent :class:`ReloaderError`.
Messages name the endpoint as ``scheme://host[:port]`` only: webhook URLs often carry
their token in the path or query.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

import httpx

from gitops_reloader.backoff import parse_retry_after
from gitops_reloader.errors import HostAuthError, HostError, HostRateLimited, ReloaderError
from gitops_reloader.model import (
    ObjectRef,
    Outcome,
    OutcomeStatus,
    ReloadItem,
    ReloadRequest,
    SinkName,
    SourceKind,
)
from gitops_reloader.observability.alerts import safe_url
from gitops_reloader.observability.metrics import Metrics

HASH_PREFIX_LENGTH = 12


class WebhookSink:
    """POST a JSON description of each reload to ``url`` instead of reloading.

    Thread-safe as long as the injected ``httpx.Client`` is (it is). When no client is
    given the sink makes its own; call :meth:`close` to release it.
    """

    name: ClassVar[str] = SinkName.WEBHOOK.value

    def __init__(
        self,
        url: str,
        *,
        client: httpx.Client | None = None,
        timeout: float = 5.0,
        metrics: Metrics | None = None,
        secret_digest: Callable[[str], str] | None = None,
    ) -> None:
        self._url = url
        self._target = safe_url(url)
        self._owns_client = client is None
        self._client = client if client is not None else httpx.Client(
            timeout=timeout, follow_redirects=False, headers={"User-Agent": "gitops-reloader"})
        self._timeout = timeout
        self._metrics = metrics
        self._secret_digest = secret_digest

    def __repr__(self) -> str:
        return f"WebhookSink({self._target!r})"

    def close(self) -> None:
        """Close the HTTP client if this sink created it."""
        if self._owns_client:
            self._client.close()

    def emit(self, request: ReloadRequest) -> Outcome:
        """POST the description of ``request``; see the module docstring for errors."""
        if not request.items:
            return Outcome(OutcomeStatus.SKIPPED, self.name, "no changes")
        body = self.payload(request)
        try:
            response = self._client.post(self._url, json=body, timeout=self._timeout)
        except httpx.HTTPError as exc:
            self._count(False)
            raise HostError(
                f"webhook POST for {request.ref} to {self._target} failed: {type(exc).__name__}"
            ) from exc
        status = response.status_code
        if 200 <= status < 300:
            self._count(True)
            return Outcome(OutcomeStatus.APPLIED, self.name, f"posted to {self._target}")
        self._count(False)
        message = f"webhook POST for {request.ref} to {self._target} answered {status}"
        if status == 429:
            after = parse_retry_after(response.headers.get("Retry-After"), now=time.time())
            raise HostRateLimited(message, retry_after=after)
        if status >= 500 or status == 408:
            raise HostError(message)
        if status in (401, 403, 404):
            raise HostAuthError(message)
        raise ReloaderError(message)

    def payload(self, request: ReloadRequest) -> dict[str, Any]:
        """The JSON body for ``request`` (names, kinds and hash prefixes; never data)."""
        changes = [self._change(item) for item in request.items]
        latest = changes[-1]
        return {
            "webhook": "update successful",
            "kind": "reload",
            "namespace": request.ref.namespace,
            "resource": latest["resource"],
            "hash": latest["hash"],
            "deleted": latest["deleted"],
            "workloads": [_ref(request.ref)],
            "changes": changes,
            "observedAt": int(request.observed_at),
        }

    def _change(self, item: ReloadItem) -> dict[str, Any]:
        source = item.source
        digest = source.hash
        if source.ref.kind is SourceKind.SECRET and self._secret_digest is not None:
            digest = self._secret_digest(digest)
        return {
            "resource": {
                "kind": source.ref.kind.kube_kind,
                "namespace": source.ref.namespace,
                "name": source.ref.name,
            },
            "hash": digest[:HASH_PREFIX_LENGTH],
            "deleted": item.deleted,
        }

    def _count(self, success: bool) -> None:
        if self._metrics is not None:
            self._metrics.webhook_post(success)


def _ref(ref: ObjectRef) -> dict[str, str]:
    return {"kind": ref.kind, "namespace": ref.namespace, "name": ref.name}
