"""Linear-time regular expressions for every pattern applied to tenant text (RE2).

The one place that imports ``re2`` (the ``google-re2`` package). RE2 is the engine behind
Go's ``regexp`` package, which Stakater Reloader uses, so tenant patterns keep Stakater's
syntax and meaning. Matching is linear in the subject's length whatever the pattern
(``(a+)+$`` against ``aaa…ab`` takes microseconds, not seconds): there is no backtracking,
hence no backreferences and no lookaround; such patterns fail to compile.

Contracts:

* :func:`compile_linear` raises :class:`RegexError` (a :class:`ValueError`) for any pattern
  RE2 refuses: bad syntax, unsupported Perl/Python syntax, or a program larger than
  :data:`MAX_PROGRAM_BYTES`. The memory cap also bounds compile time (RE2 compiles with the
  GIL held; the caller additionally bounds the pattern's length).
* Errors are never written to stderr by the library (``log_errors`` off).
* Compiled patterns are immutable and safe to share between threads.
"""

from __future__ import annotations

import re2

__all__ = ["MAX_PROGRAM_BYTES", "LinearPattern", "RegexError", "compile_linear"]

MAX_PROGRAM_BYTES = 256 << 10
"""RE2's ``max_mem`` for one pattern: larger programs are refused ("pattern too large").

Ample for name patterns (a 253-character literal, ``\\w{253}``, ``(?i)`` classes), and it
keeps both the memory of a cached pattern and the compile time of a hostile 512-character
one (``\\pL`` repeated) to a few tens of KB and ms."""

LinearPattern = re2._Regexp
"""A compiled RE2 pattern: ``fullmatch``, ``search``, ``sub`` as in :mod:`re` (no lookaround)."""


class RegexError(ValueError):
    """The pattern is not valid RE2 syntax, or it compiles to too large a program."""


def compile_linear(pattern: str, *, capture: bool = True) -> LinearPattern:
    """Compile ``pattern`` with RE2 (Go ``regexp`` syntax), matched in linear time.

    ``capture=False`` drops capture groups, which makes pure yes/no matching cheaper.
    Raises :class:`RegexError` when RE2 refuses the pattern.
    """
    options = re2.Options()
    options.log_errors = False
    options.never_capture = not capture
    options.max_mem = MAX_PROGRAM_BYTES
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else b""
        text = detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
        raise RegexError(text) from None
