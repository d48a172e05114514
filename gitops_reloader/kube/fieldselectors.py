"""The field selectors the informers send, so filtered objects never cross the network.

Field selectors are a comma-separated AND of ``field=value`` / ``field!=value`` terms
(kube-apiserver ``fields.ParseSelector``); a value's ``\\``, ``,`` and ``=`` are escaped
with a backslash (``fields.EscapeValue``). kube-apiserver supports ``metadata.name`` and
``metadata.namespace`` on every kind, and ``type`` on Secrets.
"""

from __future__ import annotations

from gitops_reloader.config import Filters

__all__ = ["escape_value", "field_selector"]


def escape_value(value: str) -> str:
    """Escape a field selector value as ``fields.EscapeValue`` does."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def field_selector(filters: Filters, *, secrets: bool = False) -> str:
    """The selector for one informer: ignored namespaces, and for Secrets ignored types."""
    terms = [f"metadata.namespace!={escape_value(ns)}" for ns in filters.namespaces_to_ignore]
    if secrets:
        terms += [f"type!={escape_value(kind)}" for kind in filters.ignore_secret_types]
    return ",".join(terms)
