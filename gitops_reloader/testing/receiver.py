"""An HTTP receiver for tests: records every request, answers as scripted.

Stands in for Slack, Teams, Google Chat or any webhook endpoint::

    with HttpReceiver() as receiver:
        receiver.respond_with(500, times=2)          # then the default 200
        config = AlertConfig(enabled=True, sink="slack", webhook_url=receiver.url + "/hook")
        alerter = Alerter(config)
        alerter.notify("hello")
        [request] = receiver.wait_for(1, timeout=5)  # waits for the first *recorded* request
        assert request.json == {"text": "hello"}

It listens on ``127.0.0.1`` on an ephemeral port and serves each request in its own
daemon thread. Every request, whatever it is answered, is recorded (method, path, query,
headers, body, parsed JSON) in arrival order under a lock. Scripted responses are used
in the order they were queued, each ``times`` times; after them the receiver answers
``default_status`` with body ``ok``. A scripted response can add latency (``delay``) or
drop the connection without answering (``disconnect``), to exercise timeouts and
network errors.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the receiver saw it."""

    method: str
    path: str
    """The path without the query string."""
    query: str
    headers: Mapping[str, str]
    """Header names in lower case; a repeated header keeps its last value."""
    body: bytes
    json: Any = None
    """The body parsed as JSON, or ``None`` when it is not JSON."""

    def header(self, name: str, default: str | None = None) -> str | None:
        """A header by case-insensitive name."""
        return self.headers.get(name.lower(), default)

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (invalid bytes replaced)."""
        return self.body.decode("utf-8", errors="replace")


@dataclass(slots=True)
class ScriptedResponse:
    """How to answer the next ``times`` requests."""

    status: int
    times: int = 1
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0
    disconnect: bool = False


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: HttpReceiver) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that gave up (timeout test) is expected; anything else is logged."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            log.exception("HttpReceiver: error while handling a request")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "HttpReceiver"

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        try:
            parsed: Any = json.loads(body) if body else None
        except ValueError:
            parsed = None
        recorded = RecordedRequest(
            method=self.command,
            path=parts.path,
            query=parts.query,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            json=parsed,
        )
        owner = self.server.owner
        response = owner._next_response()
        owner._record(recorded)
        if response.delay:
            time.sleep(response.delay)
        if response.disconnect:
            # shutdown() acts at once; close() would wait for rfile/wfile to be released.
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        payload = response.body if response.body or response.status == 204 else b"ok"
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        if response.status != 204:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if response.status != 204 and self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

    def log_message(self, format: str, *args: object) -> None:
        """Stay quiet."""


class HttpReceiver:
    """A recording HTTP endpoint on 127.0.0.1 for tests; use it as a context manager."""

    def __init__(self, *, default_status: int = 200) -> None:
        self.default_status = default_status
        self._cond = threading.Condition()
        self._requests: list[RecordedRequest] = []
        self._script: deque[ScriptedResponse] = deque()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> HttpReceiver:
        """Bind an ephemeral port and serve in a daemon thread; idempotent."""
        if self._server is None:
            self._server = _Server(self)
            self._thread = threading.Thread(
                target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                name="http-receiver", daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port; idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> HttpReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port."""
        if self._server is None:
            raise RuntimeError("HttpReceiver is not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    def respond_with(
        self,
        status: int,
        *,
        times: int = 1,
        headers: Mapping[str, str] | None = None,
        body: bytes | str | Mapping[str, Any] | None = None,
        delay: float = 0.0,
        disconnect: bool = False,
    ) -> None:
        """Answer the next ``times`` requests (after earlier scripts) with ``status``.

        ``body`` may be bytes, text, or a mapping sent as JSON (with its content type).
        ``delay`` sleeps before answering; ``disconnect`` closes the connection instead.
        """
        out_headers = dict(headers or {})
        if isinstance(body, Mapping):
            raw = json.dumps(body).encode()
            out_headers.setdefault("Content-Type", "application/json")
        elif isinstance(body, str):
            raw = body.encode()
        else:
            raw = body or b""
        with self._cond:
            script = ScriptedResponse(status, times, out_headers, raw, delay, disconnect)
            self._script.append(script)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request recorded so far, in arrival order."""
        with self._cond:
            return list(self._requests)

    def wait_for(self, n: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until at least ``n`` requests arrived; return them all.

        Raises :class:`TimeoutError` listing how many arrived if ``timeout`` passes.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._requests) >= n, timeout):
                got = len(self._requests)
                raise TimeoutError(f"expected {n} request(s) within {timeout}s, got {got}")
            return list(self._requests)

    def clear(self) -> None:
        """Forget recorded requests (scripted responses stay)."""
        with self._cond:
            self._requests.clear()

    def _next_response(self) -> ScriptedResponse:
        with self._cond:
            if not self._script:
                return ScriptedResponse(self.default_status)
            head = self._script[0]
            head.times -= 1
            if head.times <= 0:
                self._script.popleft()
            return ScriptedResponse(
                head.status, 1, head.headers, head.body, head.delay, head.disconnect)

    def _record(self, request: RecordedRequest) -> None:
        with self._cond:
            self._requests.append(request)
            self._cond.notify_all()
