"""Worst-case evaluation time of tenant text: reload-list patterns, log redaction, origin parsing.

    python bench/patterns.py            # 3 runs
    python bench/patterns.py --quick    # 1 run, smaller inputs for the old engines

In-process and pure (no servers): the policy decides for a workload whose reload list is a
catastrophic pattern and a ConfigMap named ``a…ab`` of 253 characters (the longest legal
name), with RE2 as shipped. For comparison, the same patterns under Python's backtracking
``re`` (what the policy used before), on shorter names: its time doubles with each added
character, so 253 characters cannot be measured at all. Likewise the log redaction and the
Flux origin parser, old regex against the current code, on hostile text.

Last line: one JSON object with every figure (milliseconds).
"""

from __future__ import annotations

import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import scenario_main
from gitops_reloader.gitops.locate import parse_origin_path
from gitops_reloader.model import ObjectRef, PodRefs, SourceKind, SourceMeta, SourceRef
from gitops_reloader.observability.logging import RedactionFilter
from gitops_reloader.policy import PolicyOptions, WorkloadView, decide

CATASTROPHIC = ("(a+)+$", "(a|a)*$", "(a*)*c", "((a+)+)+c", "(.*a){20}")
LONGEST_NAME = "a" * 252 + "b"
# The expressions the code used before it moved to RE2 / line parsing, for comparison only.
OLD_ORIGIN = re.compile(r"^path:[ \t]*(?P<value>.*?)[ \t]*$", re.MULTILINE)
OLD_REDACT_NAME = r"[\w-]*(?:token|password|passwd|secret|api_?key)"
OLD_REDACT = re.compile(rf"(?i)\b({OLD_REDACT_NAME}|sig|signature)=[^&\s\"',;)}}]+")


def elapsed_ms(action: Callable[[], object], repeat: int = 1) -> float:
    """The median wall time of ``action`` over ``repeat`` calls, in milliseconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def policy_ms(pattern: str, name: str, repeat: int) -> float:
    view = WorkloadView(ObjectRef("Deployment", "bench", "web"),
                        {"configmap.reloader.stakater.com/reload": pattern}, {}, PodRefs())
    source = SourceMeta(SourceRef(SourceKind.CONFIGMAP, "bench", name), "0" * 40)
    options = PolicyOptions()
    decide(view, source, options)  # compile once (cached, as in the controller)
    return elapsed_ms(lambda: decide(view, source, options), repeat)


def run_once(quick: bool) -> dict[str, float]:
    out: dict[str, float] = {}
    out["re2_worst_pattern_253_chars_ms"] = max(policy_ms(p, LONGEST_NAME, 200) for p in CATASTROPHIC)
    for n in ((16, 18, 20) if quick else (18, 20, 22)):
        name = "a" * n + "b"
        out[f"old_re_(a+)+$_{n + 1}_chars_ms"] = elapsed_ms(lambda name=name: re.fullmatch("(a+)+$", name))
    hostile_log = "a-" * (1000 if quick else 2000)
    out[f"redact_{len(hostile_log)}_chars_now_ms"] = elapsed_ms(
        lambda: RedactionFilter().redact(hostile_log), 5)
    out[f"redact_{len(hostile_log)}_chars_old_re_ms"] = elapsed_ms(lambda: OLD_REDACT.sub("x", hostile_log))
    origin = "path:a" + " " * (8000 if quick else 16000) + "b"
    out[f"origin_{len(origin)}_chars_now_ms"] = elapsed_ms(lambda: parse_origin_path(origin), 5)
    out[f"origin_{len(origin)}_chars_old_re_ms"] = elapsed_ms(lambda: OLD_ORIGIN.search(origin))
    return {key: round(value, 4) for key, value in out.items()}


def main() -> int:
    return scenario_main(
        __doc__ or "", "patterns.py",
        "tenant text: worst-case pattern, redaction and origin parsing (ms)", run_once,
    )


if __name__ == "__main__":
    raise SystemExit(main())
