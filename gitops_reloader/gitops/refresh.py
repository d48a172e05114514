"""Ask Argo CD or Flux to reconcile now, after the git sink pushed a commit.

Without this, Argo CD notices the commit at its next poll (3 minutes by default) and
Flux at the GitRepository's ``spec.interval``. With it:

- Argo CD: the Application gets ``argocd.argoproj.io/refresh: normal`` and
  ``argocd.argoproj.io/refresh-timestamp: <RFC3339Nano now>``, as argo-cd's own
  ``util/argo/argo.go`` ``RefreshApp`` sets them. The controller removes both once it
  has refreshed; since argo-cd v3.5 (``controller/appcontroller.go``
  ``handleRefreshAnnotation``) a timestamp that changed during a refresh keeps the
  request, so a push landing mid-reconcile is not lost. Older controllers ignore the
  timestamp (an annotation needs no CRD support; it is overwritten on the next request).
  An Application with a source hydrator also gets ``argocd.argoproj.io/hydrate: normal``
  and ``argocd.argoproj.io/hydrate-timestamp``: the commit went to its dry source.
- Flux: the GitRepository (and the Kustomization or HelmRelease, so it applies the new
  revision at once) gets ``reconcile.fluxcd.io/requestedAt: <RFC3339Nano now>``; any new value asks
  the controller to reconcile (fluxcd/pkg ``runtime/predicates`` ``ReconcileRequestedPredicate``
  compares the values).

Every timestamp this requester writes is unique and increasing (nanoseconds; a clock
that did not move since the previous request is bumped by one nanosecond), so two
requests in the same second are two requests, not one.

Each request is one JSON merge patch through :class:`~gitops_reloader.kube.api.KubeApi`
(custom resources take no strategic merge). A refresh is an optimisation: a failed
patch is logged and counted, never raised — the commit is already pushed and the
GitOps tool will pick it up at its next poll anyway.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from gitops_reloader.clock import Clock, SystemClock
from gitops_reloader.errors import KubeError
from gitops_reloader.kube.api import MERGE, KubeApi
from gitops_reloader.kube.resources import (
    APPLICATIONS,
    GITREPOSITORIES,
    HELMRELEASES,
    KUSTOMIZATIONS,
    ResourceKind,
)

__all__ = [
    "ARGOCD_HYDRATE_ANNOTATION",
    "ARGOCD_HYDRATE_TIMESTAMP_ANNOTATION",
    "ARGOCD_REFRESH_ANNOTATION",
    "ARGOCD_REFRESH_TIMESTAMP_ANNOTATION",
    "FLUX_REQUESTED_AT_ANNOTATION",
    "RefreshKind",
    "RefreshRequester",
    "RefreshTarget",
    "rfc3339nano",
]

log = logging.getLogger(__name__)

ARGOCD_REFRESH_ANNOTATION = "argocd.argoproj.io/refresh"
ARGOCD_REFRESH_TIMESTAMP_ANNOTATION = "argocd.argoproj.io/refresh-timestamp"
ARGOCD_HYDRATE_ANNOTATION = "argocd.argoproj.io/hydrate"
ARGOCD_HYDRATE_TIMESTAMP_ANNOTATION = "argocd.argoproj.io/hydrate-timestamp"
FLUX_REQUESTED_AT_ANNOTATION = "reconcile.fluxcd.io/requestedAt"


class RefreshKind(enum.StrEnum):
    """Which object to poke."""

    ARGOCD_APPLICATION = "Application"
    FLUX_GITREPOSITORY = "GitRepository"
    FLUX_KUSTOMIZATION = "Kustomization"
    FLUX_HELMRELEASE = "HelmRelease"

    @property
    def resource(self) -> ResourceKind:
        """The API resource of this kind."""
        return {
            RefreshKind.ARGOCD_APPLICATION: APPLICATIONS,
            RefreshKind.FLUX_GITREPOSITORY: GITREPOSITORIES,
            RefreshKind.FLUX_KUSTOMIZATION: KUSTOMIZATIONS,
            RefreshKind.FLUX_HELMRELEASE: HELMRELEASES,
        }[self]


@dataclass(frozen=True, slots=True)
class RefreshTarget:
    """One Argo CD Application or Flux object to ask for a reconcile."""

    kind: RefreshKind
    namespace: str
    name: str
    hydrate: bool = False
    """An Argo CD Application with a source hydrator: also ask it to hydrate the dry source."""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind.value}/{self.name}"


def rfc3339nano(unix_nanos: int) -> str:
    """Go's ``time.RFC3339Nano`` in UTC: trailing zeros of the fraction dropped.

    >>> rfc3339nano(1_700_000_000_123_400_000)
    '2023-11-14T22:13:20.1234Z'
    """
    seconds, nanos = divmod(unix_nanos, 1_000_000_000)
    base = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{nanos:09d}".rstrip("0")
    return f"{base}.{fraction}Z" if fraction else f"{base}Z"


class RefreshRequester:
    """Annotates Applications / GitRepositories / Kustomizations / HelmReleases. Thread-safe.

    The only state is the last timestamp written, kept so that each is unique.
    """

    def __init__(self, api: KubeApi, *, clock: Clock | None = None) -> None:
        self.api = api
        self.clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._last = 0

    def _stamp(self) -> str:
        """A timestamp later than every one this requester wrote before."""
        with self._lock:
            self._last = max(int(self.clock.now() * 1_000_000_000), self._last + 1)
            return rfc3339nano(self._last)

    def request(self, targets: Iterable[RefreshTarget]) -> int:
        """Annotate each distinct target once; return how many patches succeeded."""
        done = 0
        now = self._stamp()
        for target in dict.fromkeys(targets):
            if target.kind is RefreshKind.ARGOCD_APPLICATION:
                annotations = {ARGOCD_REFRESH_ANNOTATION: "normal", ARGOCD_REFRESH_TIMESTAMP_ANNOTATION: now}
                if target.hydrate:
                    annotations |= {ARGOCD_HYDRATE_ANNOTATION: "normal",
                                    ARGOCD_HYDRATE_TIMESTAMP_ANNOTATION: now}
            else:
                annotations = {FLUX_REQUESTED_AT_ANNOTATION: now}
            try:
                self.api.patch(target.kind.resource, target.namespace, target.name,
                               {"metadata": {"annotations": annotations}}, content_type=MERGE)
            except KubeError as exc:
                log.warning("cannot request a reconcile", extra={"object": str(target), "error": str(exc)})
                continue
            done += 1
            log.debug("requested a reconcile", extra={"object": str(target)})
        return done
