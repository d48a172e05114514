"""Run the API test server in its own process.

``python -m gitops_reloader.testing.apiserver --port 0`` binds 127.0.0.1, prints
``READY <url>`` on stdout (flushed) once it accepts connections, and exits with
status 0 on SIGTERM or SIGINT after closing every watch and connection. Faults and
watch cuts can be driven over HTTP through ``/_testing/...`` (see ``server.py``).
``--crds PATH`` (repeatable) names the CRD files or directories custom resources are
validated against (default: ``$GITOPS_RELOADER_TEST_CRDS`` or ``.tools/crds``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from .server import ApiServer


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gitops_reloader.testing.apiserver",
        description="Kubernetes API test server (in-memory, 127.0.0.1).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (0 = ephemeral)")
    parser.add_argument("--history-size", type=int, default=10_000, help="watch events kept per resource")
    parser.add_argument(
        "--bookmark-interval", type=float, default=1.0, help="seconds between BOOKMARK events"
    )
    parser.add_argument(
        "--disable-group",
        action="append",
        default=[],
        metavar="GROUP",
        help="API group to leave out (repeatable)",
    )
    parser.add_argument(
        "--crds",
        action="append",
        default=None,
        metavar="PATH",
        help="CRD file or directory to validate custom resources against (repeatable; "
        "default: $GITOPS_RELOADER_TEST_CRDS or .tools/crds)",
    )
    parser.add_argument("--kubeconfig", help="also write a kubeconfig to this path")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT; return the exit status."""
    args = _parser().parse_args(argv)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server = ApiServer(
        host=args.host,
        port=args.port,
        history_size=args.history_size,
        disabled_groups=frozenset(args.disable_group),
        bookmark_interval=args.bookmark_interval,
        crds=args.crds,
    )
    with server:
        if args.kubeconfig:
            server.write_kubeconfig(args.kubeconfig)
        sys.stdout.write(f"READY {server.url}\n")
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
