"""``gitops-reloader run`` (the controller) and ``gitops-reloader demo`` (a full local loop)."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Sequence

from gitops_reloader import __version__
from gitops_reloader.config import load_config
from gitops_reloader.errors import ConfigError, ReloaderError
from gitops_reloader.observability.logging import configure_logging

log = logging.getLogger("gitops_reloader")

USAGE = """usage: gitops-reloader {run,explain,plan,status,demo} [flags]
       gitops-reloader [run flags]     (run, as Stakater's image takes its chart's args)
       gitops-reloader --version

  run    watch the cluster and reload workloads (flags: gitops-reloader run --help)
  explain KIND/NAME -n NAMESPACE [--output json] [run flags]
         why that workload would (or would not) reload, and where
  plan   what a ConfigMap/Secret change would make it write (gitops-reloader plan --help)
  status [-n NAMESPACE | -A] [-o json] [run flags]
         what is rolling, failed, held and waiting, per source change (read from the cluster)
  demo   a full loop on the bundled API test server and a local git repository
"""


def run(argv: Sequence[str]) -> int:
    """Parse flags, start the controller, serve until SIGTERM/SIGINT."""
    from gitops_reloader.app import App

    try:
        config = load_config(argv)
    except ConfigError as exc:
        print(f"gitops-reloader: {exc}", file=sys.stderr)
        return 2
    configure_logging(fmt=config.runtime.log_format, level=config.runtime.log_level)
    try:
        app = App(config)
    except ReloaderError as exc:
        log.error("cannot start: %s", exc)
        return 1
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: app._stop.set())
    try:
        app.start()
    except ReloaderError as exc:
        log.error("cannot start: %s", exc)
        app.stop()
        return 1
    log.info("running", extra={"identity": app.identity})
    code = app.wait()
    app.stop()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    if args[0] == "--version":
        print(f"gitops-reloader {__version__}")
        return 0
    command, rest = args[0], args[1:]
    if command == "run":
        return run(rest)
    if command.startswith("-"):  # flags alone, as Stakater's chart passes them to its image
        return run(args)
    if command == "explain":
        from gitops_reloader.explain import main as explain_main

        return explain_main(rest)
    if command == "plan":
        from gitops_reloader.plan import main as plan_main

        return plan_main(rest)
    if command == "status":
        from gitops_reloader.status import main as status_main

        return status_main(rest)
    if command == "demo":
        from gitops_reloader.demo import main as demo_main

        return demo_main(rest)
    print(f"gitops-reloader: unknown command {command!r}\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
