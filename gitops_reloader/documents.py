"""Reading parsed documents — API objects, JSON bodies, YAML mappings — by path (pure).

Tenant and host text arrives as nested mappings of any shape; a path walks it without
trusting that shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["value_at"]


def value_at(document: Any, *keys: str) -> Any:
    """The value at ``document[keys[0]][keys[1]]...``; ``None`` where a step is missing or is
    not a mapping (no keys: ``document`` itself)."""
    for key in keys:
        if not isinstance(document, Mapping):
            return None
        document = document.get(key)
    return document
