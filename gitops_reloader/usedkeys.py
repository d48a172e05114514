"""Key-level reload: which mode a workload is in, and what a change means for it (pure).

With ``--reload-on=used-keys`` (or the workload annotation ``gitops-reloader.io/reload-on:
used-keys``) a workload that uses a ConfigMap/Secret key by key
(:attr:`~gitops_reloader.model.PodRefs.key_uses`) reloads only when one of those
keys changes, appears or disappears, and every value recorded for it — env var,
``last-reloaded-from`` hash, git digest, state store entry — is :func:`source_hash`: the
hash over the used keys only. Sources used whole (``envFrom``, a volume without items),
sources a reload list names without a reference, SecretProviderClasses and sources with
too many keys keep the whole-object hash, exactly as in ``any-change`` mode.

The annotation is read from the workload's metadata, else from the pod template, like
the other annotations; a value that names no mode leaves the workload on the default and
is reported (:func:`reload_on`).
"""

from __future__ import annotations

from collections.abc import Mapping

from gitops_reloader.hashing import used_key_hash
from gitops_reloader.model import PodRefs, ReloadOn, SourceMeta, SourceRef

__all__ = ["key_scope", "reload_on", "source_hash", "touched"]

_SHOWN_CHARS = 64


def reload_on(annotations: Mapping[str, str], template_annotations: Mapping[str, str],
              key: str, default: ReloadOn) -> tuple[ReloadOn, str | None]:
    """The workload's mode by annotation ``key`` and, when the value names no mode, that
    value (shortened) to report; the workload then keeps ``default``."""
    value = annotations.get(key)
    if value is None:
        value = template_annotations.get(key)
    if value is None:
        return default, None
    mode = ReloadOn.from_annotation(value)
    if mode is None:
        return default, value if len(value) <= _SHOWN_CHARS else value[:_SHOWN_CHARS] + "…"
    return mode, None


def key_scope(mode: ReloadOn, refs: PodRefs, ref: SourceRef) -> frozenset[str] | None:
    """The keys a change of ``ref`` is judged by; None: the whole object."""
    if mode is not ReloadOn.USED_KEYS:
        return None
    return refs.used_keys(ref.kind, ref.name)


def source_hash(meta: SourceMeta, keys: frozenset[str] | None) -> str:
    """The value recorded for ``meta`` under ``keys``: the used-key hash, or the Stakater
    hash for the whole object (``keys`` None, or a source without per-key digests)."""
    if keys is None:
        return meta.hash
    return used_key_hash(meta.key_digests, keys) or meta.hash


def touched(before: SourceMeta | None, after: SourceMeta, keys: frozenset[str] | None) -> bool:
    """Whether a change from ``before`` (None: unknown) to ``after`` touches ``keys``.

    A key that changed, appeared or disappeared touches; a whole-object scope (None), an
    unknown ``before`` or a source without per-key digests always does.
    """
    if keys is None or before is None:
        return True
    old = used_key_hash(before.key_digests, keys)
    new = used_key_hash(after.key_digests, keys)
    return old is None or new is None or old != new
