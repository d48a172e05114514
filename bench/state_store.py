"""The state store's pure parts at cluster scale: sharding, batching, reading back.

    python bench/state_store.py            # 100,000 sources, 20,000 workloads, 3 runs
    python bench/state_store.py --quick    # 20,000 sources, 4,000 workloads, 1 run

In-process and pure (no servers): every source is digested (what an informer event costs
with ``--state-store``), the first batch is planned (every shard), then one change and a
burst of 1,000 changes (only the shards holding them), and the written shards are read
back as at start-up. Shard size is the default (512 KiB target, filled to about half).

Last line: one JSON object with every figure.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import scenario_main
from gitops_reloader.state.batch import StateBatch
from gitops_reloader.state.codec import ShardData, merge_shards, state_digest

KEY = b"k" * 32


def run_once(quick: bool) -> dict[str, float]:
    sources, workloads = (20_000, 4_000) if quick else (100_000, 20_000)
    out: dict[str, float] = {}
    batch = StateBatch()
    batch.load(merge_shards([]))
    start = time.perf_counter()
    ids = [f"namespace-{i % 500}/{'Secret' if i % 3 else 'ConfigMap'}/source-{i}" for i in range(sources)]
    for number, source_id in enumerate(ids):
        batch.set_source(source_id, state_digest(KEY, source_id, f"{number:040x}"))
    out["digest_and_record_us_per_source"] = (time.perf_counter() - start) / sources * 1e6
    for i in range(workloads):
        kind = "Secret" if (i * 3) % 3 else "ConfigMap"
        batch.set_emitted(f"namespace-{i % 500}/Deployment/web-{i}",
                          {f"{kind}/source-{i * 3}": state_digest(KEY, "x", str(i))})

    start = time.perf_counter()
    first = batch.prepare()
    out["first_batch_plan_ms"] = (time.perf_counter() - start) * 1000
    assert first is not None
    stored = {w.index: dict(w.data) for w in first.writes}
    batch.committed(first)
    sizes = [len(d["sources"]) + len(d["workloads"]) for d in stored.values()]
    out["shards"] = len(stored)
    out["largest_shard_kib"] = max(sizes) / 1024
    out["total_kib"] = sum(sizes) / 1024

    batch.set_source(ids[7], state_digest(KEY, ids[7], "changed"))
    start = time.perf_counter()
    one = batch.prepare()
    out["one_change_plan_ms"] = (time.perf_counter() - start) * 1000
    assert one is not None
    out["one_change_shard_writes"] = len(one.writes)
    batch.committed(one)

    for source_id in ids[:1000]:
        batch.set_source(source_id, state_digest(KEY, source_id, "burst"))
    start = time.perf_counter()
    burst = batch.prepare()
    out["burst_1000_plan_ms"] = (time.perf_counter() - start) * 1000
    assert burst is not None
    out["burst_1000_shard_writes"] = len(burst.writes)
    for write in burst.writes:
        stored[write.index] = dict(write.data)
    batch.committed(burst)

    start = time.perf_counter()
    decoded = merge_shards([ShardData(i, d) for i, d in stored.items()])
    out["read_back_ms"] = (time.perf_counter() - start) * 1000
    assert len(decoded.snapshot.sources) == sources and decoded.invalid == 0
    return {key: round(value, 3) for key, value in out.items()}


def main() -> int:
    return scenario_main(__doc__ or "", "state_store.py",
                         "state store: digests, shard plans, read-back", run_once)


if __name__ == "__main__":
    raise SystemExit(main())
