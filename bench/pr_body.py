"""Pull-request bodies: size and render time of ``render_body`` for large repository-wide batches.

    python bench/pr_body.py            # 1 to 1,000 workloads, short and worst-case names
    python bench/pr_body.py --quick    # fewer sizes

Prints a table: workloads, sources each, name length, body characters (at most 65,536,
GitHub's limit), table rows shown, workloads remembered in the marker, render time.
Last line: one JSON object with the largest body and the slowest render.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gitops_reloader.gitops import prpolicy
from gitops_reloader.gitops.prpolicy import SourceEntry, WorkloadEntry


def entries(count: int, sources: int, name_length: int) -> list[WorkloadEntry]:
    pad, namespace = "n" * name_length, "x" * min(63, name_length)

    def name(i: int) -> str:
        return f"{pad}-{i:06d}"[-name_length:]

    return [WorkloadEntry("Deployment", namespace, name(i),
                          tuple(SourceEntry("ConfigMap", namespace, name(j)) for j in range(sources)),
                          "2024-05-01T10:00:00Z", "0123456789ab")
            for i in range(count)]


def main() -> None:
    quick = "--quick" in sys.argv
    sizes = [(10, 1, 20), (300, 1, 20), (300, 3, 60), (1000, 1, 253)] if quick else [
        (1, 1, 20), (10, 1, 20), (100, 1, 20), (300, 1, 20), (300, 3, 60), (300, 50, 253),
        (1000, 1, 20), (1000, 1, 253)]
    columns = (("workloads", 9), ("sources", 7), ("name", 4), ("body chars", 10), ("rows", 4),
               ("marker", 6), ("ms", 7))
    print(" ".join(f"{title:>{width}}" for title, width in columns))
    largest = slowest = 0.0
    for count, sources, length in sizes:
        batch = entries(count, sources, length)
        began = time.perf_counter()
        body = prpolicy.render_body(batch, branch="gitops-reloader/main/all", base="main")
        elapsed = (time.perf_counter() - began) * 1000
        rows = body.count("| `x")
        remembered = len(prpolicy.parse_entries(body))
        values = (count, sources, length, len(body), rows, remembered, f"{elapsed:.1f}")
        print(" ".join(f"{value:>{width}}" for value, (_, width) in zip(values, columns, strict=True)))
        largest, slowest = max(largest, len(body)), max(slowest, elapsed)
    print(json.dumps({"largest_body": largest, "limit": prpolicy.BODY_LIMIT,
                      "slowest_render_ms": round(slowest, 1)}))


if __name__ == "__main__":
    main()
