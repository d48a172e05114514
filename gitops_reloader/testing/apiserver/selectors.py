"""Label and field selectors, parsed and matched like kube-apiserver does.

Label selectors follow apimachinery's ``labels.Parse``: requirements joined by commas
(logical AND), each one of ``key=value``, ``key==value``, ``key!=value``,
``key in (v1,v2)``, ``key notin (v1)``, ``key`` (exists), ``!key`` (does not exist),
``key>N`` and ``key<N`` (integer comparison). Keys must be qualified names and values
label values; anything else raises ``SelectorError``. ``!=`` and ``notin`` also match
objects that lack the label, exactly like the real server.

Field selectors follow ``fields.ParseSelector``: comma-separated ``field=value``,
``field==value`` or ``field!=value`` terms, with ``\\,``, ``\\=`` and ``\\\\`` escapes.
Which fields a resource supports is decided by the caller (the resource registry).

Everything here is pure: no I/O, no shared state; parsed selectors are immutable and
safe to share between threads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "EVERYTHING_FIELDS",
    "EVERYTHING_LABELS",
    "FieldSelector",
    "FieldTerm",
    "LabelRequirement",
    "LabelSelector",
    "SelectorError",
    "parse_field_selector",
    "parse_label_selector",
]


class SelectorError(ValueError):
    """A selector string does not parse or names something invalid (HTTP 400)."""


_NAME_RE: Final = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_DNS1123_SUBDOMAIN_RE: Final = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_SPECIAL: Final = frozenset("!=(),<>")


def _validate_key(key: str) -> None:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.match(prefix)):
        raise SelectorError(f"invalid label key {key!r}: prefix must be a DNS subdomain")
    if not name or len(name) > 63 or not _NAME_RE.match(name):
        raise SelectorError(f"invalid label key {key!r}: name part must be a qualified name")


def _validate_value(value: str) -> None:
    if value and (len(value) > 63 or not _NAME_RE.match(value)):
        raise SelectorError(f"invalid label value: {value!r}")


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """One requirement of a label selector."""

    key: str
    operator: str
    """One of ``in``, ``notin``, ``=``, ``!=``, ``exists``, ``!``, ``gt``, ``lt``."""
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement."""
        op = self.operator
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        value = labels.get(self.key)
        if op in ("=", "in"):
            return value is not None and value in self.values
        if op in ("!=", "notin"):
            return value is None or value not in self.values
        if value is None:
            return False
        try:
            have = int(value)
        except ValueError:
            return False
        bound = int(next(iter(self.values)))
        return have > bound if op == "gt" else have < bound


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed label selector: all requirements must hold (AND)."""

    requirements: tuple[LabelRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        """True when the selector matches everything."""
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with ``labels`` is selected."""
        lab = labels or {}
        return all(r.matches(lab) for r in self.requirements)


EVERYTHING_LABELS: Final = LabelSelector()


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch in _SPECIAL:
            two = text[i : i + 2]
            if two in ("==", "!="):
                tokens.append(two)
                i += 2
            else:
                tokens.append(ch)
                i += 1
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] not in _SPECIAL:
            j += 1
        tokens.append(text[i:j])
        i = j
    return tokens


def _is_ident(token: str | None) -> bool:
    return token is not None and token[0] not in _SPECIAL


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a label selector string; ``None`` or blank selects everything."""
    if not text or not text.strip():
        return EVERYTHING_LABELS
    tokens = _tokenize(text)
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str | None:
        nonlocal pos
        tok = peek()
        pos += 1
        return tok

    reqs: list[LabelRequirement] = []
    while True:
        tok = take()
        if tok == "!":
            key = take()
            if not _is_ident(key) or key in ("in", "notin"):
                raise SelectorError(f"unable to parse requirement: {text!r}")
            assert key is not None
            _validate_key(key)
            reqs.append(LabelRequirement(key, "!"))
        elif _is_ident(tok) and tok not in ("in", "notin"):
            assert tok is not None
            key = tok
            _validate_key(key)
            nxt = peek()
            if nxt is None or nxt == ",":
                reqs.append(LabelRequirement(key, "exists"))
            elif nxt in ("=", "==", "!="):
                take()
                op = "!=" if nxt == "!=" else "="
                value = ""
                if _is_ident(peek()):
                    value = take() or ""
                _validate_value(value)
                reqs.append(LabelRequirement(key, op, frozenset((value,))))
            elif nxt in ("in", "notin"):
                take()
                if take() != "(":
                    raise SelectorError(f"found {peek()!r}, expected: '(' in {text!r}")
                values: list[str] = []
                expect_value = True
                while True:
                    cur = take()
                    if cur is None:
                        raise SelectorError(f"found end of string, expected: ')' in {text!r}")
                    if cur == ")":
                        if expect_value and values:
                            values.append("")
                        break
                    if cur == ",":
                        if expect_value:
                            values.append("")
                        expect_value = True
                        continue
                    if not _is_ident(cur) or not expect_value:
                        raise SelectorError(f"unexpected {cur!r} in values of {text!r}")
                    values.append(cur)
                    expect_value = False
                if not values:
                    raise SelectorError("for 'in', 'notin' operators, values set can't be empty")
                for v in values:
                    _validate_value(v)
                reqs.append(LabelRequirement(key, nxt, frozenset(values)))
            elif nxt in (">", "<"):
                take()
                bound = take()
                if bound is None or not _is_ident(bound):
                    raise SelectorError(f"expected an integer after {nxt!r} in {text!r}")
                try:
                    int(bound)
                except ValueError:
                    raise SelectorError(
                        f"for 'Gt', 'Lt' operators, the value must be an integer: {bound!r}"
                    ) from None
                reqs.append(LabelRequirement(key, "gt" if nxt == ">" else "lt", frozenset((bound,))))
            else:
                raise SelectorError(f"found {nxt!r}, expected an operator in {text!r}")
        else:
            raise SelectorError(f"found {tok!r}, expected: !, identifier in {text!r}")
        sep = take()
        if sep is None:
            break
        if sep != ",":
            raise SelectorError(f"found {sep!r}, expected: ',' or end of string in {text!r}")
    return LabelSelector(tuple(reqs))


@dataclass(frozen=True, slots=True)
class FieldTerm:
    """One ``field op value`` term of a field selector."""

    field: str
    negated: bool
    value: str


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """A parsed field selector: every term must hold (AND)."""

    terms: tuple[FieldTerm, ...] = ()

    @property
    def empty(self) -> bool:
        """True when the selector matches everything."""
        return not self.terms

    @property
    def fields(self) -> frozenset[str]:
        """The field paths this selector reads."""
        return frozenset(t.field for t in self.terms)

    def matches(self, lookup: Callable[[str], str]) -> bool:
        """Whether the object whose field values ``lookup`` returns is selected."""
        for term in self.terms:
            equal = lookup(term.field) == term.value
            if equal == term.negated:
                return False
        return True


EVERYTHING_FIELDS: Final = FieldSelector()


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts: list[str] = []
    buf: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            buf.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
    if escaped:
        buf.append("\\")
    parts.append("".join(buf))
    return parts


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 >= len(text) or text[i + 1] not in "\\,=":
                raise SelectorError(f"invalid field selector escape in {text!r}")
            out.append(text[i + 1])
            i += 2
            continue
        if ch in ",=":
            raise SelectorError(f"invalid field selector: unescaped {ch!r} in {text!r}")
        out.append(ch)
        i += 1
    return "".join(out)


def _find_operator(term: str) -> tuple[int, str] | None:
    i = 0
    while i < len(term):
        ch = term[i]
        if ch == "\\":
            i += 2
            continue
        if term.startswith("!=", i):
            return i, "!="
        if term.startswith("==", i):
            return i, "=="
        if ch == "=":
            return i, "="
        i += 1
    return None


def parse_field_selector(text: str | None) -> FieldSelector:
    """Parse a field selector string; ``None`` or blank selects everything."""
    if not text or not text.strip():
        return EVERYTHING_FIELDS
    terms: list[FieldTerm] = []
    for raw in _split_unescaped(text, ","):
        if not raw.strip():
            continue
        found = _find_operator(raw)
        if found is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{raw}'")
        idx, op = found
        field = raw[:idx].strip()
        if not field:
            raise SelectorError(f"invalid selector: '{text}'; missing field name in '{raw}'")
        terms.append(FieldTerm(field, op == "!=", _unescape(raw[idx + len(op) :])))
    return FieldSelector(tuple(terms))
