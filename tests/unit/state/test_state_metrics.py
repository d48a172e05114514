"""The state store's metrics (observability/metrics.py)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from gitops_reloader.observability.metrics import Metrics


def test_state_store_metrics_carry_their_labels() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    metrics.state_store_batch()
    for operation in ("read", "write", "key"):
        metrics.state_store_error(operation)
    metrics.state_store_invalid(3)
    metrics.set_state_store_entries(10, 4, 2)
    p = "gitops_reloader_state_store_"
    assert registry.get_sample_value(p + "batches_total") == 1
    assert all(registry.get_sample_value(p + "errors_total", {"operation": op}) == 1
               for op in ("read", "write", "key"))
    assert registry.get_sample_value(p + "invalid_entries_total") == 3
    assert [registry.get_sample_value(p + "entries", {"kind": k}) for k in ("source", "workload", "shard")] \
        == [10, 4, 2]


def test_unknown_state_store_operation_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown state-store operation"):
        Metrics(CollectorRegistry()).state_store_error("delete")
