"""The steps of a schedule, and seeded random schedules of them (pure).

A schedule is a short list of :class:`Step`, each what a cluster's users, its controllers or
its failures do between two looks: a source's data changes (to new data, to the same data,
back to old data), someone else changes a workload's template (an image, a change undone at
once, a scale), the clock moves (coalescing windows end, maintenance windows open and close,
brakes release), the controller restarts, is killed or loses its Lease, the API server answers
409/429/503 with assorted ``Retry-After`` values, its watches are cut and compacted (the
informers relist and fold events), a workload is created, deleted or deleted and created again,
a person edits a value of the ledger record by hand. :func:`generate` draws one
from a seed, so a seed *is* its schedule: printed with a failure, it replays it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["EDITS", "IMAGES", "RETRY_AFTERS", "SOURCES", "VALUES", "WORKLOADS", "Step", "Variant", "generate"]

SOURCES = ("a", "b")
VALUES = ("v0", "v1", "v2")
"""Few values, so that a change often returns to data a source had before, or to the same."""
IMAGES = ("nginx:1.26", "nginx:1.27")
WORKLOADS = ("plain", "two", "nightly", "braked")
"""The workloads every schedule starts with (see :mod:`.world`); ``spare`` comes and goes."""
RETRY_AFTERS: tuple[int | str | None, ...] = (None, 1, 5, "inf", "-1", "nan", "Wed, 21 Oct 2015 07:28:00 GMT")
"""What a ``Retry-After`` header may hold: valid seconds, the past, and what no server should send."""


@dataclass(frozen=True, slots=True)
class Variant:
    """How the controller runs in a schedule: its flags beyond the world's own."""

    name: str
    flags: tuple[str, ...] = ()
    unflushed_crashes: bool = False
    """Whether a kill may land before the ledger record caught up (only what the cluster and
    the state store show then survives)."""
    budget: int = 0
    """``--max-concurrent-rollouts`` (0: none): the oracle checks no more reloads roll at once."""


@dataclass(frozen=True, slots=True)
class Step:
    """One thing that happens; ``args`` as drawn (printable, replayable)."""

    kind: str
    args: tuple[str | int | None, ...] = field(default_factory=tuple)

    def __str__(self) -> str:
        return f"{self.kind}({', '.join(repr(a) for a in self.args)})"


_WEIGHTS: tuple[tuple[str, int], ...] = (
    ("change", 10), ("wait", 8), ("template", 3), ("undo", 3), ("scale", 2), ("restart", 2),
    ("crash", 2), ("crash_seen", 2), ("takeover", 1), ("fault", 3), ("heal", 2), ("relist", 1),
    ("spare", 2), ("edit", 1),
)
EDITS = ("until", "attempts", "since", "why", "fingerprint")
"""What a person's edit of the ledger record may break (a value, never the whole record: what a
record destroyed whole owed a never-reloaded workload, nothing in the cluster can tell)."""


def generate(seed: int, *, length: tuple[int, int] = (6, 14)) -> list[Step]:
    """The schedule of ``seed``: the same seed, the same steps."""
    rng = random.Random(seed)
    kinds = [k for k, _ in _WEIGHTS]
    weights = [w for _, w in _WEIGHTS]
    steps: list[Step] = []
    for _ in range(rng.randint(*length)):
        kind = rng.choices(kinds, weights)[0]
        steps.append(_step(kind, rng))
    return steps


def _step(kind: str, rng: random.Random) -> Step:
    if kind in ("change", "crash_seen"):
        return Step(kind, (rng.choice(SOURCES), rng.choice(VALUES)))
    if kind == "wait":
        return Step(kind, (rng.choice((1, 3, 30, 150)),))
    if kind == "template":
        return Step(kind, (rng.choice(WORKLOADS), rng.choice(IMAGES)))
    if kind == "undo":
        return Step(kind, (rng.choice(WORKLOADS),))
    if kind == "scale":
        return Step(kind, (rng.choice(WORKLOADS), rng.randint(1, 3)))
    if kind == "fault":
        status = rng.choice((409, 429, 503))
        after = rng.choice(RETRY_AFTERS) if status != 409 else None
        return Step(kind, (status, after, rng.choice((1, 3, None))))
    if kind == "spare":
        return Step(kind, (rng.choice(("create", "delete", "recreate")),))
    if kind == "edit":
        return Step(kind, (rng.choice(EDITS),))
    return Step(kind)
