"""Where the real Argo CD shows a live reload as drift (pure).

Measured on the real Argo CD (v3.2, ``tests/engines/test_real_argocd.py``): neither live
sink makes an Application OutOfSync while the manifest does not set the field the sink
writes. The one exception: the manifest's pod template sets an **empty**
``annotations: {}`` and the ``annotations`` sink adds an annotation. Argo CD's default
diff is three-way, against the ``kubectl.kubernetes.io/last-applied-configuration`` its
client-side apply recorded on the object; an applied empty map owns the whole map, so an
added key is drift (self-heal applies ``{}`` again, which removes nothing, and the
Application stays OutOfSync). Server-side diff shows none.

The rule reads only what is on the workload: Argo CD's tracking id (or its instance
label) and the configuration its apply recorded, parsed within a size bound.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from gitops_reloader.documents import value_at

__all__ = ["LAST_APPLIED_ANNOTATION", "MAX_LAST_APPLIED_BYTES", "annotations_sink_drift"]

LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
MAX_LAST_APPLIED_BYTES = 262_144
"""The apiserver's limit for all annotations of an object together (256 KiB)."""

_TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id"
_INSTANCE_LABEL = "app.kubernetes.io/instance"


def _last_applied(text: str) -> Any:
    if len(text) > MAX_LAST_APPLIED_BYTES:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # typed by hand, or nested past the parser's depth
        return None


def annotations_sink_drift(workload: Mapping[str, Any], template_path: Sequence[str] | None) -> str:
    """Why Argo CD's default diff would show the ``annotations`` sink's write as drift, or "".

    ``workload`` is the raw object as the apiserver returns it; ``template_path`` where its
    pod template sits (``None``: the kind has none, so the sink writes no pod annotation).
    """
    if template_path is None:
        return ""
    metadata = workload.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    labels = metadata.get("labels") or {}
    if _TRACKING_ANNOTATION in annotations:
        managed = f"Argo CD manages it ({_TRACKING_ANNOTATION})"
    elif _INSTANCE_LABEL in labels:
        managed = f"if Argo CD manages it (label {_INSTANCE_LABEL})"
    else:
        return ""
    text = annotations.get(LAST_APPLIED_ANNOTATION)
    applied = _last_applied(text) if isinstance(text, str) else None
    if value_at(applied, *template_path, "metadata", "annotations") != {}:
        return ""
    return (f"{managed}: its last apply set the pod template's annotations to an empty map, so "
            "Argo CD's default diff shows this sink's reload as OutOfSync (self-heal removes "
            "nothing; server-side diff shows none). Remove the empty `annotations: {}` from the "
            "manifest, or use env-vars (docs/troubleshooting.md)")
