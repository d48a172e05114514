"""A version of a repository file read as text within the scan index's bound (the git sink's
reads of the work tree and the pull-request resume's read of a branch tip share it)."""

from __future__ import annotations

import pytest

from gitops_reloader.errors import YamlEditError
from gitops_reloader.sinks.git import bounded_text


def test_a_file_within_the_bound_is_its_text() -> None:
    assert bounded_text(b"kind: Deployment\n", "apps/web.yaml", 64) == "kind: Deployment\n"


def test_a_file_over_the_bound_is_refused_naming_it() -> None:
    with pytest.raises(YamlEditError, match=r"apps/web.yaml: larger than 16 bytes"):
        bounded_text(b"x" * 17, "apps/web.yaml", 16)


def test_a_file_that_is_not_utf8_is_refused_naming_it() -> None:
    with pytest.raises(YamlEditError, match=r"apps/web.yaml: not UTF-8 text"):
        bounded_text(b"\xff\xfe", "apps/web.yaml", 64)
