"""Ask Argo CD or Flux to reconcile now, after the git sink pushed a commit.

Without this, Argo CD notices the commit at its next poll (3 minutes by default) and
Flux at the GitRepository's ``spec.interval``. With it:

- Argo CD: the Application gets ``argocd.argoproj.io/refresh: normal``; Argo CD removes
  the annotation once it has refreshed.
- Flux: the GitRepository (and the Kustomization, so it applies the new revision at
  once) gets ``reconcile.fluxcd.io/requestedAt: <RFC3339 now>``; any new value asks
  the controller to reconcile.

Each request is one JSON merge patch through :class:`~gitops_reloader.kube.api.KubeApi`
(custom resources take no strategic merge). A refresh is an optimisation: a failed
patch is logged and counted, never raised — the commit is already pushed and the
GitOps tool will pick it up at its next poll anyway.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from gitops_reloader.clock import Clock, SystemClock
from gitops_reloader.errors import KubeError
from gitops_reloader.kube.api import MERGE, KubeApi
from gitops_reloader.kube.resources import APPLICATIONS, GITREPOSITORIES, KUSTOMIZATIONS, ResourceKind
from gitops_reloader.kube.workloads import rfc3339

__all__ = [
    "ARGOCD_REFRESH_ANNOTATION",
    "FLUX_REQUESTED_AT_ANNOTATION",
    "RefreshKind",
    "RefreshRequester",
    "RefreshTarget",
]

log = logging.getLogger(__name__)

ARGOCD_REFRESH_ANNOTATION = "argocd.argoproj.io/refresh"
FLUX_REQUESTED_AT_ANNOTATION = "reconcile.fluxcd.io/requestedAt"


class RefreshKind(enum.StrEnum):
    """Which object to poke."""

    ARGOCD_APPLICATION = "Application"
    FLUX_GITREPOSITORY = "GitRepository"
    FLUX_KUSTOMIZATION = "Kustomization"

    @property
    def resource(self) -> ResourceKind:
        """The API resource of this kind."""
        return {
            RefreshKind.ARGOCD_APPLICATION: APPLICATIONS,
            RefreshKind.FLUX_GITREPOSITORY: GITREPOSITORIES,
            RefreshKind.FLUX_KUSTOMIZATION: KUSTOMIZATIONS,
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


class RefreshRequester:
    """Annotates Applications / GitRepositories / Kustomizations. Thread-safe (stateless)."""

    def __init__(self, api: KubeApi, *, clock: Clock | None = None) -> None:
        self.api = api
        self.clock = clock or SystemClock()

    def request(self, targets: Iterable[RefreshTarget]) -> int:
        """Annotate each distinct target once; return how many patches succeeded."""
        done = 0
        now = rfc3339(self.clock.now())
        for target in dict.fromkeys(targets):
            if target.kind is RefreshKind.ARGOCD_APPLICATION:
                annotations = {ARGOCD_REFRESH_ANNOTATION: "normal"}
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
