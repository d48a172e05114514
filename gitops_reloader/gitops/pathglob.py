"""Glob patterns for repository paths and namespace names, matched in linear time.

Syntax (nothing else is special; there are no character classes or escapes):

- ``?`` one character other than ``/``;
- ``*`` any run of characters other than ``/`` (within one path segment);
- ``**`` as a whole segment: any run of segments. ``apps/**`` matches every file
  below ``apps/``; ``**/values.yaml`` matches ``values.yaml`` at any depth, the
  root included; ``a/**/b`` matches ``a/b``, ``a/x/b`` and ``a/x/y/b``.

A pattern always matches the whole text. :func:`compile_glob` turns a pattern into
a :class:`Glob`, whose :meth:`Glob.match` simulates the pattern's automaton over a
set of states: time is O(len(text) x len(pattern)) whatever the input, so a
hostile path or namespace name can never make matching backtrack. Patterns come
from the ``--git-config`` file (written by the cluster admin); the texts matched
against them come from tenants.

Pure: no I/O, no regular expressions.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = ["Glob", "GlobError", "compile_glob"]


class GlobError(ValueError):
    """A pattern that is not a valid glob (e.g. ``**`` inside a segment)."""


class _Op(enum.Enum):
    LITERAL = "literal"
    ONE = "?"          # one character, not "/"
    STAR = "*"         # any run without "/"
    ANY = "**"         # any run, "/" included (a trailing "/**")
    SEGMENTS = "**/"   # empty, or any run that ends with "/"


@dataclass(frozen=True, slots=True)
class _Token:
    op: _Op
    char: str = ""


@dataclass(frozen=True, slots=True)
class Glob:
    """A compiled pattern; :meth:`match` is linear in the text's length.

    The automaton's states are bits of an int: bit ``i`` is "before token ``i``" (bit
    ``len(tokens)``: matched), bit ``len(tokens) + 1 + i`` is "inside a segment of the
    ``**/`` token ``i``" (a segment must end with ``/`` before the run may stop). One
    character advances every state at once with a few integer operations.
    """

    pattern: str
    _tokens: tuple[_Token, ...]
    _literals: dict[str, int] = field(init=False, repr=False, compare=False)
    _masks: dict[_Op, int] = field(init=False, repr=False, compare=False)
    _epsilon: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        literals: dict[str, int] = {}
        masks = dict.fromkeys(_Op, 0)
        for i, token in enumerate(self._tokens):
            if token.op is _Op.LITERAL:
                literals[token.char] = literals.get(token.char, 0) | 1 << i
            else:
                masks[token.op] |= 1 << i
        object.__setattr__(self, "_literals", literals)
        object.__setattr__(self, "_masks", masks)
        object.__setattr__(self, "_epsilon", masks[_Op.STAR] | masks[_Op.ANY] | masks[_Op.SEGMENTS])

    def match(self, text: str) -> bool:
        """Whether the whole of ``text`` matches the pattern."""
        if not self._epsilon and not self._masks[_Op.ONE]:
            return text == self.pattern  # no wildcard: a plain comparison
        inner_shift = len(self._tokens) + 1
        masks = self._masks
        states = self._closure(1)
        for ch in text:
            boundary = states & masks[_Op.SEGMENTS]
            inside = states >> inner_shift
            following = (states & self._literals.get(ch, 0)) << 1 | states & masks[_Op.ANY]
            if ch == "/":
                following |= boundary | inside
            else:
                following |= (states & masks[_Op.ONE]) << 1 | states & masks[_Op.STAR]
                following |= (boundary | inside) << inner_shift
            if not following:
                return False
            states = self._closure(following)
        return bool(states >> len(self._tokens) & 1)

    def _closure(self, states: int) -> int:
        """``states`` plus every state reachable without input (a star may match nothing)."""
        while True:
            grown = states | (states & self._epsilon) << 1
            if grown == states:
                return states
            states = grown


def compile_glob(pattern: str) -> Glob:
    """Compile ``pattern``; raises :class:`GlobError` when ``**`` is not a whole segment.

    >>> compile_glob("apps/team-a/**").match("apps/team-a/web/deploy.yaml")
    True
    >>> compile_glob("team-a-*").match("team-a-dev")
    True
    """
    if not pattern:
        raise GlobError("a pattern must not be empty")
    tokens: list[_Token] = []
    segments = pattern.split("/")
    last = len(segments) - 1
    for n, segment in enumerate(segments):
        if segment == "**":
            if n < last:
                tokens.append(_Token(_Op.SEGMENTS))
                continue  # the "/" that follows is part of the token
            tokens.append(_Token(_Op.ANY))
            break
        if "**" in segment:
            raise GlobError(f"'**' must be a whole path segment in {pattern!r}")
        for ch in segment:
            if ch == "*":
                tokens.append(_Token(_Op.STAR))
            elif ch == "?":
                tokens.append(_Token(_Op.ONE))
            else:
                tokens.append(_Token(_Op.LITERAL, ch))
        if n < last:
            tokens.append(_Token(_Op.LITERAL, "/"))
    return Glob(pattern, tuple(tokens))
