"""The one small protocol every sink implements.

A sink receives its collaborators in ``__init__``, is handed one :class:`ReloadRequest`
per workload, and returns an :class:`Outcome` (applied, already current, skipped) or
raises a :class:`~gitops_reloader.errors.ReloaderError`. It never sleeps or retries by
itself (the work queue does), never mutates ``request.workload``, and never calls back
into the controller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

from gitops_reloader.model import Outcome, ReloadRequest


class Sink(Protocol):
    """Emit a reload for one workload."""

    name: ClassVar[str]

    def emit(self, request: ReloadRequest) -> Outcome: ...


class BatchSink(Protocol):
    """A sink that emits many workloads at once (the git sink: one commit per repository).

    The controller queues such workloads under ``group_key(record)`` instead of their own
    key, so everything that changed within one coalescing window for one group reaches
    ``emit_batch`` together. ``emit_batch`` returns one Outcome per request, in order, or
    raises (the whole batch is then retried).
    """

    name: ClassVar[str]

    def group_key(self, record: Any) -> str: ...

    def emit_batch(self, requests: Sequence[ReloadRequest]) -> list[Outcome]: ...
