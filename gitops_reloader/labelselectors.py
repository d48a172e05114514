"""``--namespace-selector`` and ``--resource-label-selector`` read as Stakater Reloader reads them.

Stakater declares both as pflag string slices: every occurrence of the flag is read as one CSV
record (Go's ``encoding/csv``), so ``"env=test"`` — what Stakater's chart emits, the quotes
inside the argument — is ``env=test``, and ``a=1,b=2`` is two requirements. Each requirement
then takes its legacy spellings: ``key:value`` is ``key=value``, and ``key:*`` or ``key=*`` is
"has the key". The requirements are joined with commas (all must hold). Whether the result is a
selector at all is for the API server to say: :func:`gitops_reloader.app` asks it once at start.
"""

from __future__ import annotations

import csv

__all__ = ["stakater_selector"]


def stakater_selector(text: str) -> str:
    """The label selector Stakater builds from the flag's ``text`` (repeats joined with commas,
    which reads the same as CSV; an unbalanced quote is left as it stands, for the API server to
    refuse)."""
    return ",".join(_legacy(field.strip()) for field in _csv_fields(text.strip()) if field.strip())


def _csv_fields(text: str) -> list[str]:
    if not text:
        return []
    try:
        return next(csv.reader([text], strict=True))
    except (csv.Error, StopIteration):
        return [text]


def _legacy(requirement: str) -> str:
    """Stakater's ``GetNamespaceLabelSelector`` rewrite of one requirement."""
    result = requirement
    if ":" in requirement:
        key, value = requirement.split(":")[:2]
        result = key if value == "*" else f"{key}={value}"
    if "=" in requirement:
        key, value = requirement.split("=")[:2]
        if value == "*":
            result = key
    return result
