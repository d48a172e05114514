"""How long to wait before the next attempt: one formula for every retry the controller makes (pure).

Every component that tries again — the work queue's per-key limiter, the retry of a failing
emission (:mod:`~gitops_reloader.control.retrypolicy`), the storm brake on a source that keeps
changing, the evictor under a disruption budget, the git-host and alert clients — waits

    ``min(cap, base * 2 ** (attempt - 1))``, cut by up to ``jitter`` at random,

and a server's ``Retry-After`` is a **floor** under that wait, never a replacement for it: a
host that answers ``Retry-After: 1`` to every try still sees the delay double (and a fleet of
keys spread by jitter), and the floor itself is bounded by the cap, so a header of a day or
of ``inf`` cannot park a change for good.

:func:`parse_retry_after` is the one reader of the header (RFC 9110 §10.2.3): delay-seconds
or an HTTP-date. A negative number, a non-finite one, an unparsable value and a date in the
past give no floor (``None`` or ``0``), never an exception.
"""

from __future__ import annotations

import email.utils
import math
from dataclasses import dataclass

__all__ = ["Backoff", "exponential", "floored", "parse_retry_after"]

_MAX_EXPONENT = 64
"""``2**64`` times any base is past any cap: larger exponents are not computed."""
MAX_HEADER_CHARS = 64


def exponential(base: float, attempt: int, cap: float) -> float:
    """``base * 2**(attempt - 1)`` seconds, at most ``cap`` (``attempt`` counts from 1; never
    overflows however many attempts failed)."""
    exponent = min(max(attempt - 1, 0), _MAX_EXPONENT)
    return min(base * 2.0 ** exponent, cap)


def floored(delay: float, retry_after: float | None, cap: float) -> float:
    """``delay``, raised to a server's ``retry_after`` where that is longer, the floor bounded
    by ``cap`` (a non-finite or negative ``retry_after`` is no floor)."""
    if retry_after is None or not math.isfinite(retry_after) or retry_after <= 0:
        return delay
    return max(delay, min(retry_after, cap))


@dataclass(frozen=True, slots=True)
class Backoff:
    """Capped exponential backoff with jitter and a ``Retry-After`` floor (seconds)."""

    base: float
    cap: float
    jitter: float = 0.0
    """A delay is cut by up to this fraction at random (spread, never longer than the cap)."""

    def delay(self, attempt: int, *, retry_after: float | None = None, spread: float = 0.0) -> float:
        """The wait before the try after failed try number ``attempt`` (from 1).

        ``spread`` in [0, 1) picks where in the jitter band the delay lands (the caller's
        random draw; 0 means none); ``retry_after`` is the server's floor.
        """
        cut = self.jitter * min(max(spread, 0.0), 1.0)
        return floored(exponential(self.base, attempt, self.cap) * (1.0 - cut), retry_after, self.cap)


def parse_retry_after(value: str | None, *, now: float) -> float | None:
    """Seconds a ``Retry-After`` header asks for, at wall time ``now``; ``None`` when absent or
    not a valid value.

    Delay-seconds (a non-negative number; a fraction is accepted) or an HTTP-date (``0`` once
    it has passed). Negative, non-finite (``inf``, ``nan``) and unparsable values are not a
    valid header: ``None``.
    """
    if not value:
        return None
    text = value.strip()[:MAX_HEADER_CHARS]
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None  # an HTTP-date is always GMT; a date without a zone is not one
    return max(0.0, when.timestamp() - now)
