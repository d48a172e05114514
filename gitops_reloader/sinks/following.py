"""What the git sinks hand their commits to: the :class:`CommitFollower` protocol.

The ``git`` and ``pull-request`` sinks only hand over what they wrote (the workload, the
file, the digest, the commit); following it into the cluster is the controller's job
(:class:`~gitops_reloader.control.follower.Follower`), injected after the sink is built.
A sink is called and never calls back: it knows this protocol, not the follower.
"""

from __future__ import annotations

from typing import Protocol

from gitops_reloader.gitops.locate import Location
from gitops_reloader.model import ReloadRequest

__all__ = ["CommitFollower"]


class CommitFollower(Protocol):
    """Receives the values a git sink committed (or found committed) and follows them."""

    def follow(self, request: ReloadRequest, location: Location, digest: str, commit: str, *,
               sink: str) -> None:
        """A pushed (or merged) ``commit`` wrote ``digest`` for ``request``'s workload at ``location``."""

    def await_merge(self, request: ReloadRequest, location: Location, digest: str, *, sink: str) -> None:
        """A pull request's edit wrote ``digest``: follow it once the base branch holds it."""

    def resume(self, request: ReloadRequest, location: Location, digest: str, *, sink: str) -> None:
        """``digest`` was already committed (a start-up check): follow it from the commit that wrote it.

        The caller holds the repository handle's lock.
        """

    def stop(self, timeout: float = 5.0) -> None:
        """The sink is closing: stop following."""
