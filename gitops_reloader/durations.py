"""Durations as people write and read them: Go's ``time.ParseDuration`` text in, compact text out.

One parser for every duration the controller reads — flags, annotations (tenant text), the
maintenance-window file, storm-brake rates — and one way of printing a number of seconds in
messages, ``status`` and Events. Pure.

Parsing is bounded: text longer than :data:`MAX_CHARS` is refused before it reaches
``durationpy`` (whose regular expression is quadratic on hostile input).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import durationpy

__all__ = ["MAX_CHARS", "format_duration", "parse_duration", "parse_rfc3339"]

MAX_CHARS = 64
"""Longer duration text is refused before parsing."""


def parse_duration(text: str) -> float:
    """Parse a Go-style duration (``10s``, ``1m30s``, ``500ms``, ``0``) into seconds.

    Raises :class:`ValueError` naming what is wrong for anything else: text over
    :data:`MAX_CHARS` characters, malformed text, a negative or non-finite value.
    """
    stripped = text.strip()
    if stripped in ("0", ""):
        return 0.0
    if len(stripped) > MAX_CHARS:
        raise ValueError(f"not a duration: longer than {MAX_CHARS} characters")
    try:
        seconds = durationpy.from_str(stripped).total_seconds()
    except Exception as exc:  # durationpy raises its own error types for malformed text
        raise ValueError(f"not a duration: {stripped[:MAX_CHARS]!r} (use e.g. 500ms, 2s, 1m)") from exc
    if seconds < 0 or not math.isfinite(seconds):
        raise ValueError(f"duration must not be negative: {stripped!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """``3900`` → ``1h5m``, ``300`` → ``5m``, ``65`` → ``1m5s``, ``1.5`` → ``1.5s``, ``0.25`` →
    ``250ms``: hours, minutes and seconds that are not zero, as Go prints them but without the
    trailing zero units. A negative value prints as seconds, a non-finite one as it is (``inf``)."""
    if not math.isfinite(seconds):
        return str(seconds)
    if seconds < 0:
        return f"{seconds:g}s"
    if seconds < 1:
        return f"{seconds * 1000:g}ms" if seconds else "0s"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    fraction = seconds - whole
    parts = []
    if hours:
        parts.append(f"{hours}h")
    if minutes:
        parts.append(f"{minutes}m")
    if secs or fraction > 1e-9:
        parts.append(f"{secs + fraction:g}s" if fraction > 1e-9 else f"{secs}s")
    return "".join(parts)


def parse_rfc3339(stamp: Any) -> float | None:
    """Unix seconds of an RFC 3339 timestamp as the API server writes it (None: not one)."""
    if not isinstance(stamp, str) or len(stamp) > 64:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
