"""The waves flags: defaults (no budget: nothing changes), the hold's default, bad values."""

from __future__ import annotations

import pytest

from gitops_reloader.config import Rollouts, load_config
from gitops_reloader.errors import ConfigError


@pytest.mark.parametrize(("argv", "expected"), [
    ([], Rollouts(0, 0, 600.0, False)),
    (["--max-concurrent-rollouts=50"], Rollouts(50, 0, 600.0, True)),
    (["--max-concurrent-rollouts-per-namespace", "3"], Rollouts(0, 3, 600.0, True)),
    (["--max-concurrent-rollouts=5", "--hold-on-failed-rollout=false", "--rollout-timeout=90s"],
     Rollouts(5, 0, 90.0, False)),
    (["--hold-on-failed-rollout"], Rollouts(0, 0, 600.0, True)),  # on, but nothing to hold without a budget
])
def test_flags(argv: list[str], expected: Rollouts) -> None:
    config = load_config(argv, environ={})
    assert config.rollouts == expected
    assert config.rollouts.budgeted is (expected.max_concurrent > 0 or expected.max_per_namespace > 0)


def test_environment() -> None:
    env = {"GITOPS_RELOADER_MAX_CONCURRENT_ROLLOUTS": "7", "GITOPS_RELOADER_ROLLOUT_TIMEOUT": "1m"}
    assert load_config([], environ=env).rollouts == Rollouts(7, 0, 60.0, True)


@pytest.mark.parametrize(("argv", "message"), [
    (["--max-concurrent-rollouts=-1"], "--max-concurrent-rollouts: must be at least 0"),
    (["--max-concurrent-rollouts=lots"], "--max-concurrent-rollouts"),
    (["--max-concurrent-rollouts-per-namespace=100001"], "must be at most 100000"),
    (["--rollout-timeout=0"], "--rollout-timeout: must be greater than 0"),
    (["--rollout-timeout=soon"], "--rollout-timeout"),
    (["--hold-on-failed-rollout=maybe"], "--hold-on-failed-rollout"),
])
def test_bad_values_stop_start_up(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(argv, environ={})
