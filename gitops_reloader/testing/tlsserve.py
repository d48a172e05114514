"""TLS for the test servers (API test server, git host): HTTPS with a context the test gives.

:class:`TlsMixin` goes before a ``socketserver`` TCP server class in the bases. With an
``ssl_context`` set, each accepted connection is wrapped server-side, and its handshake runs
in the connection's own thread (``finish_request``), so a client that connects and never
speaks holds up nobody else. A failed handshake (wrong CA, plain HTTP) closes that
connection only. A connection is closed with TLS's close_notify first: a response that
ends with the connection (HTTP/1.0, CGI output without a length) is complete only with it
(GnuTLS, which Debian's git uses, fails without it). Without a context the server speaks
plain HTTP, as before.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

__all__ = ["HANDSHAKE_TIMEOUT", "TlsMixin"]

HANDSHAKE_TIMEOUT = 10.0
"""Seconds a client gets to complete the TLS handshake."""
CLOSE_TIMEOUT = 2.0
"""Seconds to wait for the client's close_notify in answer to ours."""


class TlsMixin:
    """Serve TLS when ``ssl_context`` is set (a server-side :class:`ssl.SSLContext`)."""

    ssl_context: ssl.SSLContext | None = None
    socket: socket.socket

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, address = self.socket.accept()
        if self.ssl_context is not None:
            conn = self.ssl_context.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        return conn, address

    def finish_request(self, request: Any, client_address: Any) -> None:
        if isinstance(request, ssl.SSLSocket):
            timeout = request.gettimeout()
            try:
                request.settimeout(HANDSHAKE_TIMEOUT)
                request.do_handshake()
                request.settimeout(timeout)
            except (ssl.SSLError, OSError):
                return  # this client only: shutdown_request closes the socket
        super().finish_request(request, client_address)  # type: ignore[misc]

    def shutdown_request(self, request: Any) -> None:
        if isinstance(request, ssl.SSLSocket):
            try:
                request.settimeout(CLOSE_TIMEOUT)
                request = request.unwrap()  # sends close_notify; the plain socket is closed below
            except (ssl.SSLError, OSError, ValueError):
                pass  # the peer is gone already: closing is all that is left
        super().shutdown_request(request)  # type: ignore[misc]
