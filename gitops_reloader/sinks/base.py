"""The one small protocol every sink implements.

A sink receives its collaborators in ``__init__``, is handed one :class:`ReloadRequest`
per workload, and returns an :class:`Outcome` (applied, already current, skipped) or
raises a :class:`~gitops_reloader.errors.ReloaderError`. It never sleeps or retries by
itself (the work queue does), never mutates ``request.workload``, and never calls back
into the controller.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from gitops_reloader.model import Outcome, ReloadRequest


class Sink(Protocol):
    """Emit a reload for one workload."""

    name: ClassVar[str]

    def emit(self, request: ReloadRequest) -> Outcome: ...
