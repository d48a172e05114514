"""Cost of finding a ``--git-config`` repository by URL, with ``aliases`` (pure, in process).

Prints a table: what is looked up, against how many repositories, median time per lookup.
``GitConfig.by_url`` normalizes the URL once (Argo CD's ``git.SameURL`` rule) and reads
one dictionary that holds every ``url`` and alias; the reference row is the comparison
it replaced, ``same_url`` against each repository's ``url`` in turn (which could not see
aliases). The hostile rows are Application / GitRepository URLs a tenant writes: very
long, nearly matching, on the same host and path as a repository (the refusal then
computes the ``aliases:`` line to add).

    python bench/url_lookup.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from gitops_reloader.gitops.gitconfig import GitConfig, parse_git_config
from gitops_reloader.gitops.repourl import same_url


def timed(fn: Callable[[], object], runs: int = 7, loops: int = 20) -> float:
    """Median seconds of one call of ``fn``."""
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        for _ in range(loops):
            fn()
        samples.append((time.perf_counter() - started) / loops)
    return statistics.median(samples)


def config_of(count: int) -> GitConfig:
    """``count`` repositories over HTTPS, each with its ssh:// spelling as an alias."""
    return parse_git_config("repositories:\n" + "".join(
        f"  - {{name: r{i}, url: 'https://git.example.com/org/repo-{i}.git', "
        f"aliases: ['ssh://git@git.example.com/org/repo-{i}']}}\n" for i in range(count)))


def main() -> None:
    print(f"{'lookup':<62} {'repos':>6} {'median':>10}")
    for count in (10, 200, 1000):
        config = config_of(count)
        last = f"git@git.example.com:org/repo-{count - 1}.git"  # found through the alias
        https = f"https://git.example.com/org/repo-{count - 1}"
        rows: list[tuple[str, Callable[[], object]]] = [
            ("by_url, scp-like spelling of the last repository's alias",
             lambda config=config, last=last: config.by_url(last)),
            ("by_url, https spelling of the last repository",
             lambda config=config, https=https: config.by_url(https)),
            ("reference: same_url against each url (no aliases)",
             lambda config=config, https=https: [r for r in config.repositories if same_url(r.url, https)]),
        ]
        for label, fn in rows:
            assert fn(), label
            print(f"{label:<62} {count:>6} {timed(fn) * 1e6:>7.1f} µs")
    config = config_of(200)
    repo = config.get("r0")
    assert repo is not None
    for length in (400, 10_000, 100_000):
        near = "ssh://git@git.example.com:22/org/repo-0" + "/" * (length - 40)  # same host and path
        garbage = "git@" + "@:" * (length // 2)
        hostile: list[tuple[str, Callable[[], object]]] = [
            (f"by_url, {length:,}-char URL on repo-0's host and path",
             lambda near=near: config.by_url(near)),
            ("  + same_place and alias_line (the refusal's hint)",
             lambda near=near: (config.same_place(near), config.alias_line(repo, near))),
            (f"by_url, {length:,} chars of '@:'", lambda garbage=garbage: config.by_url(garbage)),
            ("  + same_place", lambda garbage=garbage: config.same_place(garbage)),
        ]
        for label, fn in hostile:
            print(f"{label:<62} {200:>6} {timed(fn, loops=3) * 1e6:>7.1f} µs")


if __name__ == "__main__":
    main()
