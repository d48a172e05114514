"""The linear-time glob matcher for tenancy paths and namespaces (table-driven)."""

from __future__ import annotations

import random
import re
import time

import pytest

from gitops_reloader.gitops.pathglob import GlobError, compile_glob


@pytest.mark.parametrize(("pattern", "text", "expected"), [
    # literals and ?
    ("apps/web.yaml", "apps/web.yaml", True),
    ("apps/web.yaml", "apps/web.yml", False),
    ("apps/web.yaml", "apps/web.yaml.bak", False),
    ("team-?", "team-a", True),
    ("team-?", "team-ab", False),
    ("a?b", "a/b", False),
    # * stays inside one segment
    ("team-a-*", "team-a-dev", True),
    ("team-a-*", "team-a-", True),
    ("team-a-*", "team-a", False),
    ("apps/*.yaml", "apps/web.yaml", True),
    ("apps/*.yaml", "apps/sub/web.yaml", False),
    ("*.yaml", "a/b.yaml", False),
    ("charts/team-a/values*.yaml", "charts/team-a/values-prod.yaml", True),
    ("charts/team-a/values*.yaml", "charts/team-a/templates/values.yaml", False),
    ("*a*b*", "xxaxxbxx", True),
    ("*a*b*", "xxbxxaxx", False),
    # ** across segments
    ("apps/team-a/**", "apps/team-a/web.yaml", True),
    ("apps/team-a/**", "apps/team-a/sub/deep/web.yaml", True),
    ("apps/team-a/**", "apps/team-ab/web.yaml", False),
    ("apps/team-a/**", "apps/team-b/web.yaml", False),
    ("**", "anything/at/all.yaml", True),
    ("**/values.yaml", "values.yaml", True),
    ("**/values.yaml", "a/b/values.yaml", True),
    ("**/values.yaml", "a/myvalues.yaml", False),
    ("a/**/b.yaml", "a/b.yaml", True),
    ("a/**/b.yaml", "a/x/y/b.yaml", True),
    ("a/**/b.yaml", "a/xb.yaml", False),
    ("a/**/b.yaml", "ab.yaml", False),
    ("a/**/*.yaml", "a/x/y/z.yaml", True),
    ("a/**/*.yaml", "b/x/z.yaml", False),
])
def test_globs(pattern: str, text: str, expected: bool) -> None:
    assert compile_glob(pattern).match(text) is expected


@pytest.mark.parametrize("pattern", ["", "a**", "**b/c", "a/x**/b"])
def test_double_star_must_be_a_whole_segment(pattern: str) -> None:
    with pytest.raises(GlobError):
        compile_glob(pattern)


def test_a_pathological_input_does_not_backtrack() -> None:
    # With a backtracking matcher "*a*a*...*b" against "aaaa..." takes exponential time.
    glob = compile_glob("*a" * 30 + "*b")
    text = "a" * 5000
    started = time.perf_counter()
    assert not glob.match(text)
    assert time.perf_counter() - started < 1.0  # a safety bound: linear, well under 100 ms here


def reference(pattern: str, text: str) -> bool:
    """An independent oracle: the documented syntax as a (backtracking) regex, for short inputs."""
    parts: list[str] = []
    segments = pattern.split("/")
    for n, segment in enumerate(segments):
        last = n == len(segments) - 1
        if segment == "**":
            parts.append(".*" if last else "(?:.*/)?")
            continue
        parts.append("".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in segment))
        if not last:
            parts.append("/")
    return re.fullmatch("".join(parts), text) is not None


def test_matches_an_independent_oracle_on_every_small_case() -> None:
    rng = random.Random(10)
    segments = ["a", "b", "*", "?", "a*", "*b", "**", "a?b"]
    for _ in range(3000):
        pattern = "/".join(rng.choice(segments) for _ in range(rng.randint(1, 4)))
        text = "".join(rng.choice("ab/") for _ in range(rng.randint(0, 8)))
        assert compile_glob(pattern).match(text) is reference(pattern, text), (pattern, text)
