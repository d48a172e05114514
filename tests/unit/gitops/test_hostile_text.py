"""Regexes of gitops/ over repository and pull-request text stay linear (issue 10, item 2 sweep).

The YAML editor's tab normalisation and the pull-request body marker ran backtracking
regexes over text that repository writers control; both are RE2 now. The old expressions
serve below as the reference for the behaviour on short inputs, where they are fast.
"""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_reloader.gitops import prpolicy, yamledit

OLD_TAB_SEPARATION = re.compile(r"[ \t]*\t[ \t]*(?=#|\r?\n|\r?\Z)")


@settings(derandomize=True, database=None, deadline=None, max_examples=300)
@given(st.text(alphabet=" \t\r\n#ax:", max_size=40))
def test_tab_normalisation_matches_the_old_expression(text: str) -> None:
    old = OLD_TAB_SEPARATION.sub(lambda m: " " * len(m.group()), text)
    new = yamledit._TAB_SEPARATION.sub(yamledit._spaces, text)
    assert new == old
    assert len(new) == len(text)


@pytest.mark.parametrize("blanks", [" \t" * 4000 + "x", "\t" * 8000 + "x: 1"],
                         ids=["mixed-run", "tab-run"])
def test_a_file_with_long_blank_runs_is_refused_in_bounded_time(blanks: str) -> None:
    # The backtracking form took over two minutes on 4,000 characters of " \t".
    start = time.perf_counter()
    with pytest.raises(yamledit.YamlEditError, match="not valid YAML"):
        yamledit.list_documents(blanks)
    assert time.perf_counter() - start < 2.0


def test_a_long_trailing_blank_run_is_normalised_in_bounded_time() -> None:
    start = time.perf_counter()
    assert yamledit.list_documents("a: 1" + " \t" * 4000) == []  # not a Kubernetes object
    assert time.perf_counter() - start < 2.0


def test_a_body_of_unterminated_entry_markers_is_parsed_in_bounded_time() -> None:
    body = f"<!-- {prpolicy._MARKER}:entries={{" * 3000  # 1.3 s at 2,000 before RE2
    start = time.perf_counter()
    assert prpolicy.parse_entries(body) == ()
    assert time.perf_counter() - start < 0.2
