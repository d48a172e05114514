"""Stakater's METRICS_COUNT_BY_NAMESPACE switch: only the exact value ``enabled`` turns it on."""

from __future__ import annotations

import pytest

from gitops_reloader.config import load_config


@pytest.mark.parametrize(("env", "enabled"), [
    ({"METRICS_COUNT_BY_NAMESPACE": "enabled"}, True),
    ({"METRICS_COUNT_BY_NAMESPACE": "true"}, False),
    ({"METRICS_COUNT_BY_NAMESPACE": ""}, False),
    ({}, False),
])
def test_metrics_count_by_namespace(env: dict[str, str], enabled: bool) -> None:
    assert load_config([], env).metrics_count_by_namespace is enabled
