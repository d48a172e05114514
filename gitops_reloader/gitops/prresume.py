"""Pure decision of a restart for one pull-request workload: what was under way.

:func:`resume_step` takes what the host and the repository show now — whether the
controller's pull request of the workload's branch is open (and still ours), the digest
its branch proposes, the digest the base branch holds, and the digest of the workload's
sources now — and says what the follow-up continues. No I/O: the pull-request sink reads
(:mod:`gitops_reloader.sinks.prresume`), this decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["ResumeStep", "Step", "resume_step"]


class Step(Enum):
    """What a restart continues for one workload."""

    AWAIT_MERGE = "await-merge"
    """Our pull request is open with an edit the base lacks: wait for its merge."""
    FOLLOW_MERGED = "follow-merged"
    """The base holds the current digest (merged, perhaps while no instance ran): follow its commit."""


@dataclass(frozen=True, slots=True)
class ResumeStep:
    """A step and the digest it follows."""

    step: Step
    digest: str


def resume_step(*, open_pull: bool, proposed: str | None, base: str | None,
                current: str) -> ResumeStep | None:
    """What to continue (``None``: nothing was under way, or the next change decides).

    ``open_pull``: the controller's pull request of the branch is open and the branch is
    still ours; ``proposed``: the digest the branch's tip holds for the workload; ``base``:
    the digest on the base branch; ``current``: the digest of the sources now. An open
    pull request that proposes nothing new for this workload does not hold it back: the
    base then decides. A base value that is not the current one is left to the next change
    (or ``--sync-after-restart``).
    """
    if open_pull and proposed is not None and proposed != base:
        return ResumeStep(Step.AWAIT_MERGE, proposed)
    if base is not None and base == current:
        return ResumeStep(Step.FOLLOW_MERGED, base)
    return None
