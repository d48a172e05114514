"""Pure decisions for a pull request whose branch someone else committed to.

Generations of a branch key (where the reload goes next, found again from the remote's
branch names), the keyed marker that makes the notice on the old pull request ours and
findable, the notice's text, and which commit the ownership decision blames.
"""

from __future__ import annotations

import pytest

from gitops_reloader.gitops import prpolicy
from gitops_reloader.gitops.prpolicy import BranchDecision, CommitInfo
from gitops_reloader.model import ObjectRef

KEY = b"k" * 32
WEB = prpolicy.workload_branch_key(ObjectRef("Deployment", "ns", "web"))
FIRST = prpolicy.branch_name("main", WEB)


# --------------------------------------------------------------------------- generations


def test_generation_zero_is_the_branch_and_later_ones_carry_a_number() -> None:
    assert prpolicy.generation_branch("main", WEB, 0) == FIRST
    assert prpolicy.generation_branch("main", WEB, 1) == FIRST + "-1"
    assert prpolicy.generation_branch("main", "all", 99) == "gitops-reloader/main/all-99"
    for bad in (-1, prpolicy.MAX_GENERATION + 1):
        with pytest.raises(ValueError):
            prpolicy.generation_branch("main", WEB, bad)


@pytest.mark.parametrize(("branches", "expected"), [
    ([], ()),
    ([FIRST], (0,)),
    ([FIRST, FIRST + "-1", FIRST + "-2"], (0, 1, 2)),
    ([FIRST + "-3"], (3,)),  # generation 0 merged and its branch deleted
    ([FIRST + "-01", FIRST + "-0", FIRST + "-100", FIRST + "-1a", FIRST + "-", FIRST + "-1-2"], ()),
    ([FIRST + "x", FIRST[:-1], "gitops-reloader/main/all-1"], ()),  # other keys' branches
    ([prpolicy.branch_name("other", WEB) + "-1"], ()),  # another base
])
def test_generations_read_only_our_own_numbering(branches: list[str], expected: tuple[int, ...]) -> None:
    assert prpolicy.generations("main", WEB, branches) == expected


def test_another_workload_whose_key_starts_with_ours_is_no_generation() -> None:
    # A workload named "web-<hash of web>-2" gets its own key, ending in its own hash.
    tricky = prpolicy.workload_branch_key(ObjectRef("Deployment", "ns", WEB.split("-", 2)[2] + "-2"))
    assert tricky.startswith(WEB + "-2-")
    assert prpolicy.generations("main", WEB, [prpolicy.branch_name("main", tricky)]) == ()


def test_every_generation_of_every_key_reads_back_as_itself() -> None:
    for key in (WEB, "all"):
        names = [prpolicy.generation_branch("main", key, g) for g in range(prpolicy.MAX_GENERATION + 1)]
        assert prpolicy.generations("main", key, names) == tuple(range(prpolicy.MAX_GENERATION + 1))


# --------------------------------------------------------------------------- the notice


def test_the_marker_is_keyed_and_bound_to_repository_number_and_branch() -> None:
    marker = prpolicy.foreign_notice_marker(KEY, "org/fleet", 7, FIRST)
    assert marker.startswith("<!-- gitops-reloader:foreign-commits=") and marker.endswith(" -->")
    assert marker == prpolicy.foreign_notice_marker(KEY, "org/fleet", 7, FIRST)  # a restart finds it
    others = {
        prpolicy.foreign_notice_marker(b"x" * 32, "org/fleet", 7, FIRST),
        prpolicy.foreign_notice_marker(KEY, "org/other", 7, FIRST),
        prpolicy.foreign_notice_marker(KEY, "org/fleet", 8, FIRST),
        prpolicy.foreign_notice_marker(KEY, "org/fleet", 7, FIRST + "-1"),
    }
    assert marker not in others and len(others) == 4
    with pytest.raises(ValueError):
        prpolicy.foreign_notice_marker(b"", "org/fleet", 7, FIRST)


def test_has_notice_needs_our_exact_marker() -> None:
    marker = prpolicy.foreign_notice_marker(KEY, "org/fleet", 7, FIRST)
    copied = prpolicy.foreign_notice_marker(KEY, "org/fleet", 6, FIRST)  # from another pull request
    assert prpolicy.has_notice(["lgtm", f"notice\n{marker}\n"], marker)
    assert not prpolicy.has_notice([], marker)
    assert not prpolicy.has_notice(["<!-- gitops-reloader:foreign-commits=00 -->", copied], marker)


def test_the_notice_names_the_commit_the_reason_and_the_new_branch() -> None:
    sha = "abcdef0123456789" * 2 + "ab" * 4
    decision = BranchDecision(False, "commit abcdef012345 was made by someone else", sha)
    marker = prpolicy.foreign_notice_marker(KEY, "org/fleet", 7, FIRST)
    text = prpolicy.foreign_notice(branch=FIRST, decision=decision, successor=FIRST + "-1", marker=marker)
    assert f"`{FIRST}`" in text and f"`{FIRST}-1`" in text
    assert "commit `abcdef012345`" in text and decision.reason in text
    assert "will not push to, merge or close this one" in text
    assert text.rstrip().endswith(marker)
    without = prpolicy.foreign_notice(branch=FIRST, decision=BranchDecision(False, "two commits"),
                                      successor=FIRST + "-1", marker=marker)
    assert "holds commits that" in without


# --------------------------------------------------------------------------- whom the decision blames


def test_the_decision_names_the_first_unsealed_commit() -> None:
    tree, parent = "t" * 40, "p" * 40
    sealed = CommitInfo("a" * 40, tree, (parent,), (prpolicy.commit_seal(KEY, tree, (parent,)),))
    theirs = CommitInfo("b" * 40, "u" * 40, ("a" * 40,))
    decision = prpolicy.branch_ownership([theirs, sealed], key=KEY)
    assert not decision.ours and decision.commit == "b" * 40
    assert prpolicy.branch_ownership([sealed], key=KEY).commit == ""
    two = prpolicy.branch_ownership([sealed, sealed], key=KEY)
    assert not two.ours and two.commit == "a" * 40  # the tip


def test_own_commit_is_the_newest_sealed_one_whatever_else_the_branch_holds() -> None:
    tree, parent = "t" * 40, "p" * 40
    sealed = CommitInfo("a" * 40, tree, (parent,), (prpolicy.commit_seal(KEY, tree, (parent,)),))
    copied = CommitInfo("c" * 40, "v" * 40, (parent,), sealed.seals)  # the seal on another tree
    theirs = CommitInfo("b" * 40, "u" * 40, ("a" * 40,))
    assert prpolicy.own_commit([theirs, sealed], key=KEY) == "a" * 40
    assert prpolicy.own_commit([theirs, copied], key=KEY) is None
    assert prpolicy.own_commit([sealed], key=b"other key") is None
    assert prpolicy.own_commit([], key=KEY) is None
