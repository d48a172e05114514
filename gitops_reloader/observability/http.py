"""The controller's small HTTP server: ``/metrics``, ``/live``, ``/healthz``, ``/readyz``.

Stakater serves ``/metrics`` and ``/live`` on ``:9090``; keeping both paths and the port
lets existing probes and scrape configs work unchanged.

* ``/metrics``  Prometheus text format of the injected registry, once the caches have
  synced; before that 503 ``caches not synced``. Stakater's chart probes readiness on
  ``/metrics``: answered before the informers listed, it would call the pod Ready while
  a change made then is never seen. After the first sync it always answers (a relist
  after an expired watch leaves no gap in the scrapes).
* ``/live``, ``/healthz``  200 ``ok`` while ``healthy()`` is true, else 500.
* ``/readyz``  200 ``ok`` once ``ready()`` is true (caches synced) and ``problems()``
  names nothing, else 503 with one line per reason (``caches not synced``, and each
  problem, e.g. a git repository whose mounted key failed the start-up checks).
* anything else: 404.

The server runs a stdlib :class:`~http.server.ThreadingHTTPServer` in a daemon thread;
``healthy``/``ready`` are called from its request threads and must be thread-safe and
quick (read a flag, don't do I/O). A callback that raises answers 500/503. Requests are
not logged (probes hit these paths every few seconds).
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)


def parse_address(address: str) -> tuple[str, int]:
    """Split ``":9090"``, ``"127.0.0.1:0"``, ``"0.0.0.0:9090"``, ``"[::1]:9090"``.

    An empty host means every IPv4 interface (as Go's ``:9090`` does for IPv4 clients).
    Raises ``ValueError`` for a missing or invalid port.
    """
    host, sep, port_text = address.strip().rpartition(":")
    if not sep:
        raise ValueError(f"address {address!r} has no port; use host:port or :port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"address {address!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"address {address!r}: port {port} out of range")
    return host or "0.0.0.0", port


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Allow an immediate restart on the same port (TIME_WAIT from the last run).
    allow_reuse_address = True

    def __init__(self, owner: HttpServer, address: tuple[str, int]) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.owner = owner
        super().__init__(address, _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        """Log through logging (not stderr); a client hanging up early is not an error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            log.exception("http server: error while handling a request")


_TEXT = "text/plain; charset=utf-8"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "gitops-reloader"

    def do_GET(self) -> None:
        owner = self.server.owner
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            if owner.synced_once():
                self._send(200, generate_latest(owner.registry), CONTENT_TYPE_LATEST)
            else:
                self._send(503, b"caches not synced\n")
        elif path in ("/live", "/healthz"):
            ok = owner.check(owner.healthy)
            self._send(200 if ok else 500, b"ok\n" if ok else b"unhealthy\n")
        elif path == "/readyz":
            ok = owner.check(owner.ready)
            reasons = ([] if ok else ["caches not synced"]) + owner.readiness_problems()
            body = "".join(f"{reason}\n" for reason in reasons) if reasons else "ok\n"
            self._send(503 if reasons else 200, body.encode("utf-8", errors="replace"))
        else:
            self._send(404, b"not found\n")

    def do_HEAD(self) -> None:
        self.do_GET()

    def _send(self, status: int, body: bytes, content_type: str = _TEXT) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Stay quiet: probes would flood the log."""


class HttpServer:
    """Serve metrics and probes on ``address`` until :meth:`stop`.

    >>> server = HttpServer("127.0.0.1:0", registry=registry, ready=informers_synced)
    >>> server.start(); server.port
    41235

    ``start`` binds synchronously, so a busy port raises ``OSError`` there, not later.
    """

    def __init__(
        self,
        address: str,
        *,
        registry: CollectorRegistry,
        ready: Callable[[], bool],
        healthy: Callable[[], bool] = lambda: True,
        problems: Callable[[], Sequence[str]] = tuple,
    ) -> None:
        self.address = parse_address(address)
        self.registry = registry
        self.ready = ready
        self.healthy = healthy
        self.problems = problems
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._synced = threading.Event()

    @property
    def port(self) -> int:
        """The bound port (useful with port 0). Only valid after :meth:`start`."""
        if self._server is None:
            raise RuntimeError("HttpServer is not started")
        return int(self._server.server_address[1])

    def start(self) -> None:
        """Bind and serve in a daemon thread; idempotent."""
        if self._server is not None:
            return
        self._server = _Server(self, self.address)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
            name="http-server", daemon=True,
        )
        self._thread.start()
        log.info("http server listening", extra={"address": f"{self.address[0]}:{self.port}"})

    def stop(self) -> None:
        """Stop serving and close the socket; idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def check(self, probe: Callable[[], bool]) -> bool:
        """Call a probe callback; one that raises counts as failing."""
        try:
            return bool(probe())
        except Exception:
            log.exception("probe callback failed")
            return False

    def synced_once(self) -> bool:
        """Whether ``ready()`` has been true at least once (it stays so once seen)."""
        if not self._synced.is_set() and self.check(self.ready):
            self._synced.set()
        return self._synced.is_set()

    def readiness_problems(self) -> list[str]:
        """What keeps the controller unready besides its caches (one line each, no newlines)."""
        try:
            return [" ".join(str(problem).split()) for problem in self.problems()]
        except Exception:
            log.exception("readiness problems callback failed")
            return ["readiness check failed"]

    def __enter__(self) -> HttpServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
