"""When a source's data was last written, by the API server's own record (I/O, cached).

A workload switched from Stakater Reloader (or from a version before the ledger) with the
annotations strategy records one source in ``last-reloaded-from``, with the time of that reload
(``observedAt``); another source it reads has no record at all. Whether that source changed
since the pods last rolled is answered by the cluster: the newest ``managedFields`` time of the
source (kube-apiserver stamps each field manager's entry when its write changes the object) against
``observedAt`` (:func:`gitops_reloader.control.startup.out_of_date`). A label edit also moves that
time, so the answer errs towards one reload more, never one less.

Asked only for such workloads (never for those this version reloaded: their ``synced-sources``
entry answers), one GET per source version, remembered.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from gitops_reloader.durations import parse_rfc3339
from gitops_reloader.errors import KubeError
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.resources import CONFIGMAPS, SECRETS
from gitops_reloader.model import SourceKind, SourceRef

__all__ = ["DataWrittenAt"]

log = logging.getLogger(__name__)

REMEMBERED = 4096
"""Sources whose write time is kept (one entry each, for its current version)."""
RESOURCES = {SourceKind.CONFIGMAP: CONFIGMAPS, SourceKind.SECRET: SECRETS}


class DataWrittenAt:
    """The newest write time of a ConfigMap or Secret at a resourceVersion (thread-safe)."""

    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self._known: OrderedDict[SourceRef, tuple[str, float | None]] = OrderedDict()
        self._lock = threading.Lock()

    def at(self, ref: SourceRef, resource_version: str) -> float | None:
        """Unix seconds of the newest write of ``ref`` (None: unknown — not asked, gone, unreadable)."""
        resource = RESOURCES.get(ref.kind)
        if resource is None:
            return None
        with self._lock:
            known = self._known.get(ref)
            if known is not None and known[0] == resource_version:
                return known[1]
        try:
            stored = self.api.get(resource, ref.namespace, ref.name)
        except KubeError as exc:
            log.debug("cannot read when the source was written",
                      extra={"object": str(ref), "error": str(exc)})
            return None
        metadata = stored.get("metadata") or {}
        times = [parse_rfc3339(entry.get("time")) for entry in metadata.get("managedFields") or ()
                 if isinstance(entry, dict)]
        written = max((t for t in times if t is not None), default=None)
        with self._lock:
            self._known[ref] = (str(metadata.get("resourceVersion", resource_version)), written)
            self._known.move_to_end(ref)
            while len(self._known) > REMEMBERED:
                self._known.popitem(last=False)
        return written
