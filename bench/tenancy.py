"""Worst-case cost of the tenancy policy's glob matching (pure, in process).

Prints a table: pattern, input length, whether it matched, median time per match.
The inputs are the adversarial ones: a text that nearly matches a pattern of many
stars (exponential for a backtracking matcher), and a deep path of the maximum length
git allows in practice (4,096 bytes).

    python bench/tenancy.py
"""

from __future__ import annotations

import statistics
import time

from gitops_reloader.gitops.gitconfig import parse_git_config
from gitops_reloader.gitops.pathglob import compile_glob
from gitops_reloader.gitops.tenancy import may_write

CASES = [
    ("*a" * 30 + "*b", "a" * 4096),
    ("apps/team-a/**/*.yaml", "apps/team-a/" + "x/" * 2000 + "v.yml"),
    ("**/values*.yaml", "d/" * 2040 + "values-prod.yaml"),
    ("team-a-*", "team-a-" + "x" * 56),
]


def timed(fn: object, runs: int = 7) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    print(f"{'pattern':<34} {'text length':>11} {'match':>6} {'median':>10}")
    for pattern, text in CASES:
        glob = compile_glob(pattern)
        result = glob.match(text)
        seconds = timed(lambda glob=glob, text=text: glob.match(text))
        shown = pattern if len(pattern) <= 32 else pattern[:29] + "..."
        print(f"{shown:<34} {len(text):>11} {result!s:>6} {seconds * 1000:>8.2f} ms")
    config = parse_git_config("repositories:\n  - name: r\n    url: https://h/r\n    tenants:\n" + "".join(
        f"      - {{namespaces: [team-{i}], paths: ['apps/team-{i}/**', 'charts/team-{i}/values*.yaml']}}\n"
        for i in range(200)))
    repo = config.get("r")
    assert repo is not None
    path = "apps/team-199/" + "x/" * 100 + "web.yaml"
    seconds = timed(lambda: may_write(repo, "team-199", path))
    print(f"{'may_write, 200 tenants entries':<34} {len(path):>11} {'True':>6} {seconds * 1000:>8.2f} ms")


if __name__ == "__main__":
    main()
