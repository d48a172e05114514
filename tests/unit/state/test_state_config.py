"""The --state-store flags (config.py)."""

from __future__ import annotations

import pytest

from gitops_reloader.config import load_config
from gitops_reloader.errors import ConfigError

ENV = {"HOME": "/nonexistent", "POD_NAMESPACE": "ops"}


def test_defaults_keep_todays_behaviour() -> None:
    state = load_config([], environ=ENV).state
    assert not state.enabled
    assert (state.kind, state.name, state.namespace, state.interval, state.shard_bytes) == (
        "none", "gitops-reloader-state", "ops", 5.0, 512 * 1024)


def test_flags_and_environment() -> None:
    state = load_config(["--state-store=configmap", "--state-store-name=rs", "--state-store-interval=250ms",
                         "--state-store-shard-size=4096"], environ=ENV).state
    assert (state.enabled, state.name, state.interval, state.shard_bytes) == (True, "rs", 0.25, 4096)
    assert load_config([], environ={**ENV, "GITOPS_RELOADER_STATE_STORE": "configmap"}).state.enabled


def test_each_hash_shard_keeps_its_own_store() -> None:
    state = load_config(["--state-store=configmap", "--shard-count=3", "--shard-index=2"], environ=ENV).state
    assert state.name == "gitops-reloader-state-shard-2"


@pytest.mark.parametrize("argv", [
    ["--state-store=redis"],
    ["--state-store-name=Upper"],
    ["--state-store-name=-dash"],
    ["--state-store-name=" + "a" * 59],
    ["--state-store-name=" + "a" * 52, "--shard-count=2"],  # too long with -shard-<index>
    ["--state-store-interval=0"],
    ["--state-store-shard-size=1023"],
    ["--state-store-shard-size=921601"],
])
def test_bad_values_name_the_flag(argv: list[str]) -> None:
    flag = argv[0].split("=")[0]
    with pytest.raises(ConfigError, match=flag):
        load_config(argv, environ=ENV)
