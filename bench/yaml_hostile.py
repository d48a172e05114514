"""Hostile YAML in a manifest repository: what the scan and the editor spend on it.

Each row times one call on a tenant-written file (the best of ``--repeat`` runs):

- an alias bomb (``&a0 [x, ...9 times]``, ``&aN [*aN-1, ...9 times]``) in a document next to the
  tenant's Deployment: the scan, the edit of the Deployment and the confinement check
  (``edit_confined``); for contrast, the old check (both texts loaded with PyYAML and
  their documents compared expanded) at a smaller depth;
- deep flow nesting (100,000 ``[``), which crashed libyaml's recursive composer and
  costs ruamel.yaml seconds: the scan and the editor's refusal;
- a large, ordinary file (4,000 Deployments, about 1 MiB): scan and edit, for scale
  (the ruamel.yaml parser that gives the editor its byte positions is pure Python).

    python bench/yaml_hostile.py
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import print_table
from gitops_reloader.errors import YamlEditError
from gitops_reloader.gitops.scanindex import DocKey, edit_confined, scan_documents
from gitops_reloader.gitops.yamledit import list_documents, set_template_annotation

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web{i}
  namespace: ns
spec:
  template:
    metadata:
      annotations:
        owner: team-a   # the team
    spec:
      containers:
        - name: app
          image: nginx:1.25
"""
PATH = ("spec", "template", "metadata", "annotations")
KEY = "gitops-reloader.io/config-hash"
VALUE = "0f" * 32


def bomb(depth: int) -> str:
    lines = ["kind: ConfigMap", "metadata: {name: lol}", "data:", "  a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, depth + 1)]
    return DEPLOYMENT.format(i="") + "---\n" + "\n".join(lines) + "\n"


def best(repeat: int, call: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        with contextlib.suppress(YamlEditError):
            call()
        times.append(time.perf_counter() - started)
    return min(times)


def old_confined(before: str, after: str) -> bool:
    """The check as it was: documents loaded (aliases expanded on comparison) and compared."""
    old = list(yaml.load_all(before, Loader=yaml.CSafeLoader))
    new = list(yaml.load_all(after, Loader=yaml.CSafeLoader))
    return all(a == b for i, (a, b) in enumerate(zip(old, new, strict=True)) if i != 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    web = DocKey("apps", "Deployment", "ns", "web")
    rows: list[tuple[str, str]] = []

    for depth in (9, 12):
        text = bomb(depth)
        after = set_template_annotation(text, doc_index=0, value=VALUE).text
        label = f"alias bomb 9^{depth + 1} leaves ({len(text)} bytes)"
        scan = best(args.repeat, lambda t=text: scan_documents(t))
        edit = best(args.repeat, lambda t=text: set_template_annotation(t, doc_index=0, value=VALUE))
        rows.append((f"{label}: scan", f"{scan * 1e3:.2f} ms"))
        rows.append((f"{label}: edit", f"{edit * 1e3:.2f} ms"))
        check = best(args.repeat, lambda t=text, a=after: edit_confined(
            t, a, doc_index=0, expected=web, path_expr=PATH, key=KEY, value=VALUE))
        rows.append((f"{label}: edit_confined", f"{check * 1e3:.2f} ms"))
    small = bomb(7)
    small_after = set_template_annotation(small, doc_index=0, value=VALUE).text
    old = best(1, lambda: old_confined(small, small_after))
    rows.append(("alias bomb 9^8 leaves: old expanded comparison", f"{old * 1e3:.0f} ms (x9 per level)"))

    deep = "a: " + "[" * 100_000 + "]" * 100_000 + "\n"
    rows.append(("100,000 nested '[': scan (refused)",
                 f"{best(args.repeat, lambda: scan_documents(deep)) * 1e3:.2f} ms"))
    rows.append(("100,000 nested '[': editor (refused)",
                 f"{best(args.repeat, lambda: list_documents(deep)) * 1e3:.2f} ms"))

    count = 4_000
    large = "---\n".join(DEPLOYMENT.format(i=i) for i in range(count))
    mib = len(large) / 2**20
    scan = best(1, lambda: scan_documents(large))
    edit = best(1, lambda: set_template_annotation(large, doc_index=count - 1, value=VALUE))
    rows.append((f"ordinary file, {count:,} Deployments ({mib:.2f} MiB): scan", f"{scan:.2f} s"))
    rows.append((f"ordinary file, {count:,} Deployments: edit the last one",
                 f"{edit:.2f} s ({edit / mib:.1f} s per MiB)"))
    print_table("Hostile YAML: time per call (best of runs)", rows, "python bench/yaml_hostile.py")


if __name__ == "__main__":
    main()
