"""``python -m gitops_reloader.testing.schedules``: run the schedule checker from a shell.

    --schedules N     how many seeds to run (from --first, default 0)
    --seconds S       stop starting schedules after S seconds
    --seed N          replay one seed (and shrink it if it fails)
    --variant NAME    default | state-store | budget | unflushed | all (default, state-store, budget)

Exits 1 when a schedule failed, after printing each failure with its seed and shrunk steps.
"""

from __future__ import annotations

import argparse
import logging
import sys

from gitops_reloader.testing.schedules.checker import VARIANTS, explore, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gitops_reloader.testing.schedules")
    parser.add_argument("--schedules", type=int, default=100)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--variant", default="all", choices=[*VARIANTS, "all"])
    parser.add_argument("--no-shrink", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    variants = ([VARIANTS["default"], VARIANTS["state-store"], VARIANTS["budget"]] if args.variant == "all"
                else [VARIANTS[args.variant]])
    seeds = [args.seed] if args.seed is not None else list(range(args.first, args.first + args.schedules))
    failed = False
    for variant in variants:
        ran, failures = explore(seeds, variant, seconds=args.seconds, shrink_failures=not args.no_shrink)
        print(f"{variant.name}: {ran} schedules, {len(failures)} failed")
        for result in failures:
            print(report(result))
        failed = failed or bool(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
