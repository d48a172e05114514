"""``run --dry-run``: every sink decides as usual and writes nothing.

:func:`dry_run_sinks` wraps the sinks :mod:`gitops_reloader.app` built. Each wrapper asks
the real sink's own decision code and stops before its write:

* ``env-vars`` / ``annotations``: the sink's ``edit_for`` (the very patch it would send);
  no PATCH, no pause of a Deployment, no Job re-created;
* ``webhook``: the sink's ``payload``; no POST;
* ``eviction``: the sources it would record; no record, so nothing is evicted;
* ``git`` / ``pull-request``: the sink's ``preview_batch`` (resolve, sync the local
  clone, locate, edit in memory); no commit, push, pull request or refresh request.

Each returns ``would-apply`` where the real sink would have written, with a detail that
names the write (env var names, annotation source, file and branch, webhook endpoint):
never data or values. Batch sinks keep their ``group_key``, so coalescing and one batch
per repository behave as in a real run; ``recorded_hash`` is passed through for
``--sync-after-restart``. The controller turns ``would-apply`` into a log line, the
``dry_run_decisions_total`` metric and a ``WouldReload`` Event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from gitops_reloader.kube.workloads import WorkloadRecord
from gitops_reloader.model import Outcome, OutcomeStatus, ReloadRequest, SourceRef
from gitops_reloader.observability.alerts import safe_url
from gitops_reloader.sinks.annotations import AnnotationsSink, describe_annotation
from gitops_reloader.sinks.base import Sink
from gitops_reloader.sinks.envvars import EnvVarsSink, describe_env
from gitops_reloader.sinks.eviction import EvictionSink
from gitops_reloader.sinks.webhook import WebhookSink

__all__ = ["DryRunBatchSink", "DryRunLiveSink", "DryRunWebhookSink", "dry_run_sinks"]


class DryRunLiveSink:
    """``env-vars`` or ``annotations``: the edit the sink would patch, not patched."""

    def __init__(self, inner: EnvVarsSink | AnnotationsSink) -> None:
        self.inner = inner
        self.name: str = inner.name

    def recorded_hash(self, record: WorkloadRecord, ref: SourceRef, container: str | None) -> str | None:
        return self.inner.recorded_hash(record, ref, container)

    def emit(self, request: ReloadRequest) -> Outcome:
        edit = self.inner.edit_for(request)
        if not edit:
            return Outcome(OutcomeStatus.ALREADY_CURRENT, self.name)
        detail = describe_env(edit) if edit.set_env or edit.remove_env else describe_annotation(edit)
        return Outcome(OutcomeStatus.WOULD_APPLY, self.name, f"would patch {detail}")


class DryRunWebhookSink:
    """``webhook``: the document the sink would POST, not posted."""

    name: ClassVar[str] = WebhookSink.name

    def __init__(self, inner: WebhookSink, url: str) -> None:
        self.inner = inner
        self.target = safe_url(url)

    def close(self) -> None:
        self.inner.close()

    def emit(self, request: ReloadRequest) -> Outcome:
        if not request.items:
            return Outcome(OutcomeStatus.SKIPPED, self.name, "no changes")
        resource = self.inner.payload(request)["resource"]
        return Outcome(OutcomeStatus.WOULD_APPLY, self.name,
                       f"would POST {resource['kind'].lower()}/{resource['name']} to {self.target}")


class DryRunBatchSink:
    """``git`` or ``pull-request``: the sink's ``preview_batch`` instead of ``emit_batch``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name: str = inner.name

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()

    def group_key(self, record: Any) -> str:
        return str(self.inner.group_key(record))

    def emit(self, request: ReloadRequest) -> Outcome:
        return self.emit_batch([request])[0]

    def emit_batch(self, requests: Sequence[ReloadRequest]) -> list[Outcome]:
        return list(self.inner.preview_batch(requests))


def dry_run_sinks(sinks: Mapping[str, Sink], *, webhook_url: str = "") -> dict[str, Sink]:
    """The dry-run stand-in of every sink in ``sinks`` (a sink of unknown type is an error)."""
    out: dict[str, Sink] = {}
    for name, sink in sinks.items():
        if isinstance(sink, EnvVarsSink | AnnotationsSink):
            out[name] = DryRunLiveSink(sink)
        elif isinstance(sink, WebhookSink):
            out[name] = DryRunWebhookSink(sink, webhook_url)
        elif isinstance(sink, EvictionSink):
            out[name] = EvictionSink(sink.api, sink.adapters, dry_run=True)
        elif hasattr(sink, "preview_batch"):
            out[name] = DryRunBatchSink(sink)
        else:
            raise TypeError(f"sink {name!r} has no dry-run form")
    return out
