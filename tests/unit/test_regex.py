"""The RE2 adapter: Go regexp syntax, linear time, errors as RegexError, nothing on stderr."""

from __future__ import annotations

import time

import pytest

from gitops_reloader.regex import RegexError, compile_linear


@pytest.mark.parametrize(("pattern", "text", "full"), [
    ("app-.*", "app-cfg", True),
    ("(?i)APP", "app", True),
    (r"\d{3}", "123", True),
    ("[[:alpha:]]+", "abc", True),
    ("(?P<name>a)b", "ab", True),
    ("a|ab", "ab", True),  # fullmatch is anchored, whatever the alternation order
    ("a{1", "a{1", True),  # not a repetition: a literal brace, as in Go
    (".", "\n", False),  # dot excludes newline, as in Go without (?s)
    ("(?s).", "\n", True),
    ("(a+)+$", "a" * 252 + "b", False),
])
def test_go_regexp_semantics(pattern: str, text: str, full: bool) -> None:
    assert (compile_linear(pattern).fullmatch(text) is not None) is full
    assert (compile_linear(pattern, capture=False).fullmatch(text) is not None) is full


@pytest.mark.parametrize(("pattern", "reason"), [
    (r"(a)\1", "invalid escape"),
    ("(?=a)", "invalid perl operator"),
    ("(?<!a)b", "invalid"),
    (r"a\Z", "invalid escape"),
    ("a{1001}", "invalid repetition size"),
    ("[", "missing ]"),
    (r"\pL{1000}", "too large"),
])
def test_unsupported_or_oversized_patterns_raise_regex_error(
    pattern: str, reason: str, capfd: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(RegexError, match=reason):
        compile_linear(pattern)
    assert capfd.readouterr().err == ""  # RE2's own error logging is off


def test_regex_error_is_a_value_error() -> None:
    assert issubclass(RegexError, ValueError)


def test_search_and_sub_are_linear_on_long_text() -> None:
    pattern = compile_linear(r"\b([a-z][a-z0-9+.-]*://)[^/\s@]*@")
    text = "a." * 50_000
    start = time.perf_counter()
    assert pattern.sub("x", text) == text
    assert pattern.search(text) is None
    assert time.perf_counter() - start < 0.5


def test_sub_supports_group_references_and_callables() -> None:
    pattern = compile_linear(r"(\w+)=(\w+)")
    assert pattern.sub(r"\1=***", "a=b c=d") == "a=*** c=***"
    assert pattern.sub(lambda m: m.group(2), "a=b") == "b"


@pytest.mark.parametrize("pattern", [r"\pL" * 170, "(?i)" + r"\pL" * 169, r"[^\pL\pN\pS\pP]" * 34,
                                     ".{999}" * 85, r"\w{999}" * 73],
                         ids=["letters", "folded-letters", "negated-classes", "dots", "words"])
def test_a_hostile_512_char_pattern_compiles_or_fails_quickly(pattern: str) -> None:
    # RE2 compiles with the GIL held: the program budget bounds that pause (~40 ms here,
    # 420 ms with RE2's default 8 MiB budget and no length cap).
    assert len(pattern) <= 512
    start = time.perf_counter()
    with pytest.raises(RegexError, match="too large"):
        compile_linear(pattern, capture=False)
    assert time.perf_counter() - start < 0.5
