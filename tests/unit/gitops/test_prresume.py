"""What a restart continues for one pull-request workload (:func:`resume_step`), table-driven."""

from __future__ import annotations

import pytest

from gitops_reloader.gitops.prresume import ResumeStep, Step, resume_step


@pytest.mark.parametrize(("open_pull", "proposed", "base", "current", "expected"), [
    # Our open pull request proposes what the base lacks: wait for its merge, whatever the sources say now.
    (True, "new", "old", "new", ResumeStep(Step.AWAIT_MERGE, "new")),
    (True, "new", None, "newer", ResumeStep(Step.AWAIT_MERGE, "new")),
    # Merged (no open pull request) and the base holds the current value: follow its commit.
    (False, None, "new", "new", ResumeStep(Step.FOLLOW_MERGED, "new")),
    # A grouped pull request open for others, this workload's edit already on the base.
    (True, "new", "new", "new", ResumeStep(Step.FOLLOW_MERGED, "new")),
    (True, None, "new", "new", ResumeStep(Step.FOLLOW_MERGED, "new")),
    # Nothing under way: the base is behind the sources and no pull request of ours proposes anything.
    (False, None, "old", "new", None),
    (False, None, None, "new", None),
    (True, "old", "old", "new", None),
])
def test_resume_step(open_pull: bool, proposed: str | None, base: str | None, current: str,
                     expected: ResumeStep | None) -> None:
    assert resume_step(open_pull=open_pull, proposed=proposed, base=base, current=current) == expected
