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
from dataclasses import dataclass

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
    """A compiled pattern; :meth:`match` is linear in the text's length."""

    pattern: str
    _tokens: tuple[_Token, ...]

    def match(self, text: str) -> bool:
        """Whether the whole of ``text`` matches the pattern."""
        states = self._closure({0})
        for ch in text:
            following: set[int] = set()
            for state in states:
                self._step(state, ch, following)
            if not following:
                return False
            states = self._closure(following)
        return len(self._tokens) in states

    def _step(self, state: int, ch: str, into: set[int]) -> None:
        """Add the states ``state`` reaches on ``ch``.

        State ``i`` is "before token ``i``"; ``-(i + 1)`` is "inside a segment of the
        ``**/`` token ``i``" (a segment must end with ``/`` before the run may stop).
        """
        if state < 0:
            into.add(-state - 1 if ch == "/" else state)
            return
        if state == len(self._tokens):
            return
        token = self._tokens[state]
        op = token.op
        if op is _Op.LITERAL:
            if ch == token.char:
                into.add(state + 1)
        elif op is _Op.ONE:
            if ch != "/":
                into.add(state + 1)
        elif op is _Op.STAR:
            if ch != "/":
                into.add(state)
        elif op is _Op.ANY:
            into.add(state)
        else:  # SEGMENTS, at a segment boundary
            into.add(state if ch == "/" else -(state + 1))

    def _closure(self, states: set[int]) -> set[int]:
        """``states`` plus every state reachable without input (a star may match nothing)."""
        tokens = self._tokens
        out = set(states)
        stack = list(states)
        while stack:
            i = stack.pop()
            if 0 <= i < len(tokens) and tokens[i].op not in (_Op.LITERAL, _Op.ONE) and i + 1 not in out:
                out.add(i + 1)
                stack.append(i + 1)
        return out


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
