"""The start-up rule of the state store (gitops_reloader/state/resync.py), as a table."""

from __future__ import annotations

import pytest

from gitops_reloader.state.resync import out_of_date, out_of_date_over_keys

HASH, OLD_HASH = "h" * 40, "o" * 40
NOW, BEFORE = "n" * 32, "b" * 32


@pytest.mark.parametrize(("marker", "emitted", "seen", "expected", "why"), [
    (HASH, None, None, False, "marker current"),
    (OLD_HASH, None, None, True, "marker stale"),
    (HASH, BEFORE, BEFORE, False, "the marker wins over the store (written with the rollout)"),
    (OLD_HASH, NOW, NOW, True, "the marker wins even when the store says current"),
    (None, NOW, BEFORE, False, "marker stripped by a re-apply: the emission record says current"),
    (None, BEFORE, NOW, True, "marker stripped, emission older than the data"),
    (None, None, BEFORE, True, "never reloaded, the source changed while down"),
    (None, None, NOW, False, "never reloaded, the source unchanged"),
    (None, None, None, False, "unknown to the store: nothing known to be missed"),
])
def test_out_of_date(marker, emitted, seen, expected: bool, why: str) -> None:
    assert out_of_date(current_hash=HASH, current_digest=NOW, marker=marker, emitted=emitted,
                       seen=seen) is expected, why


@pytest.mark.parametrize(("marker", "emitted", "seen", "expected", "why"), [
    (None, None, None, True, "created while down, creations reload: as a live create"),
    (HASH, None, None, False, "created while down, but the marker says current (handled live)"),
    (OLD_HASH, None, None, True, "created while down over a stale marker"),
    (None, NOW, None, False, "the emission record says current: handled before the crash"),
    (None, None, NOW, False, "the store knows the source after all: unchanged"),
    (None, None, BEFORE, True, "the store knows the source after all: changed"),
])
def test_a_creation_while_down_counts_only_when_nothing_else_is_known(
        marker, emitted, seen, expected: bool, why: str) -> None:
    assert out_of_date(current_hash=HASH, current_digest=NOW, marker=marker, emitted=emitted,
                       seen=seen, created=True) is expected, why


USED, OLD_USED = "u" * 40, "x" * 40
USED_NOW, USED_BEFORE = "m" * 32, "y" * 32


@pytest.mark.parametrize(("marker", "emitted", "created", "expected", "why"), [
    (USED, None, False, False, "marker holds the used-key hash"),
    (HASH, None, False, False, "marker holds the whole hash (written before the switch): current too"),
    (OLD_USED, None, False, True, "a used key changed"),
    (None, USED_NOW, False, False, "entry holds the used-key digest"),
    (None, NOW, False, False, "entry holds the whole digest"),
    (None, USED_BEFORE, False, True, "entry older than the used keys"),
    (None, None, False, False, "no entry: the source-level digest is not consulted"),
    (None, None, True, True, "created while down, creations reload"),
])
def test_out_of_date_over_used_keys(marker, emitted, created, expected: bool, why: str) -> None:
    assert out_of_date_over_keys(used_hash=USED, used_digest=USED_NOW, whole_hash=HASH, whole_digest=NOW,
                                 marker=marker, emitted=emitted, created=created) is expected, why
