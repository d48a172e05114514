"""The HTTP face of the API test server: kube-apiserver's REST paths on 127.0.0.1.

``ApiServer`` runs a ``ThreadingHTTPServer`` (HTTP/1.1, keep-alive, one daemon thread
per connection, ``TCP_NODELAY``) in a background thread. Requests are routed like the
real server's: discovery (``/api``, ``/apis/...``, ``/version``), then
``/api/v1[/namespaces/{ns}]/{plural}[/{name}[/status]]`` and the ``/apis/{group}/{version}``
equivalent, with get, list, watch, create, update (PUT), patch (JSON, merge, strategic),
delete and deletecollection. Watches stream chunked JSON lines pushed from the store
the moment a change commits.

Test controls (faults, cutting watches, compaction) are methods of ``ApiServer`` and,
for a server in another process, ``POST /_testing/{faults,cut-watches,compact,restart}``;
``POST /_testing/load`` seeds many objects of one resource in one request (benchmarks).

Guarantees: every response carries a ``Content-Length`` or is chunked, so connections
stay reusable; errors are ``metav1.Status`` bodies; ``stop`` closes every watch and
every client connection, so nothing keeps serving after it returns.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import socket
import ssl
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final, NamedTuple
from urllib.parse import parse_qsl, unquote

from ..tlsserve import TlsMixin
from .authz import Authorizer, access_review
from .crdschema import CrdSchemas, default_crd_paths
from .eviction import evict
from .faults import Fault, FaultBook
from .patch import (
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)
from .resources import Registry, ResourceType
from .selectors import SelectorError, parse_field_selector, parse_label_selector
from .status import ApiError, bad_request, status_body
from .storage import Record, Store, Watcher, dumps

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

__all__ = ["ApiServer", "ListQuery"]

log = logging.getLogger(__name__)

_PHRASES: Final = {
    200: "OK",
    201: "Created",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    409: "Conflict",
    410: "Gone",
    413: "Request Entity Too Large",
    414: "URI Too Long",
    415: "Unsupported Media Type",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
_VERSION: Final = {
    "major": "1",
    "minor": "36",
    "gitVersion": "v1.36.0",
    "gitCommit": "test-apiserver",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_ACCEPTED_PATCHES: Final = (
    "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
)
_LIVENESS_CHECK: Final = 1.0
_FLUSH_BYTES: Final = 256 * 1024


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")


class ListQuery(NamedTuple):
    """One list or watch request as the server saw it (for tests: what crossed the wire)."""

    verb: str
    resource: str
    namespace: str
    label_selector: str
    field_selector: str


class _HTTPServer(TlsMixin, ThreadingHTTPServer):
    """Threading server that remembers its connections so ``stop`` can close them."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], api: ApiServer) -> None:
        self.api = api
        self.ssl_context = api.tls
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Shut every client connection down (blocked reads return at once)."""
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _Route:
    """A parsed resource path."""

    __slots__ = ("name", "namespace", "rt", "subresource")

    def __init__(self, rt: ResourceType, namespace: str, name: str, subresource: str) -> None:
        self.rt = rt
        self.namespace = namespace
        self.name = name
        self.subresource = subresource


def _not_found_path() -> ApiError:
    return ApiError(404, "the server could not find the requested resource", details={})


class _Handler(BaseHTTPRequestHandler):
    """One client connection; requests are served one after another (keep-alive)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _HTTPServer
    fields: dict[str, str]
    """Request headers, lower-cased names."""

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request stderr log."""

    def handle_one_request(self) -> None:
        """Read one request (fast header parsing, no ``email`` module) and serve it."""
        try:
            line = self.rfile.readline(65537)
            if not line:
                self.close_connection = True
                return
            if len(line) > 65536:
                self._fail_early(414, "request line too long")
                return
            parts = line.decode("latin-1").split()
            if len(parts) != 3 or not parts[2].startswith("HTTP/"):
                self._fail_early(400, f"bad request line: {line[:100]!r}")
                return
            self.command, self.path, self.request_version = parts
            self.requestline = " ".join(parts)
            fields: dict[str, str] = {}
            for _ in range(200):
                raw = self.rfile.readline(65537)
                if raw in (b"\r\n", b"\n", b""):
                    break
                key, _, value = raw.decode("latin-1").partition(":")
                fields[key.strip().lower()] = value.strip()
            else:
                self._fail_early(431, "too many headers")
                return
            self.fields = fields
            connection = fields.get("connection", "").lower()
            self.close_connection = connection == "close" or (
                self.request_version == "HTTP/1.0" and connection != "keep-alive"
            )
            if fields.get("expect", "").lower() == "100-continue":
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            handler = {
                "GET": "GET",
                "POST": "POST",
                "PUT": "PUT",
                "PATCH": "PATCH",
                "DELETE": "DELETE",
            }.get(self.command)
            if handler is None:
                self._read_body()
                error = ApiError(405, "the server does not allow this method on the requested resource")
                self._respond(405, dumps(error.body))
                return
            self._dispatch(handler)
        except (TimeoutError, ConnectionError):
            self.close_connection = True

    def _fail_early(self, code: int, message: str) -> None:
        self.close_connection = True
        self.request_version = "HTTP/1.1"
        with contextlib.suppress(OSError):
            self._respond(code, dumps(status_body(code, message)))

    # ------------------------------------------------------------------ plumbing

    def _head(self, code: int, length: int, headers: Iterable[tuple[str, str]], content_type: str) -> bytes:
        lines = [
            f"HTTP/1.1 {code} {_PHRASES.get(code, 'Unknown')}",
            f"Content-Type: {content_type}",
            f"Content-Length: {length}",
            "Cache-Control: no-cache, private",
        ]
        lines.extend(f"{k}: {v}" for k, v in headers)
        if self.close_connection:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _respond_head(self, code: int, length: int) -> None:
        self.wfile.write(self._head(code, length, (), "application/json"))

    def _respond(
        self,
        code: int,
        body: bytes,
        *,
        headers: Iterable[tuple[str, str]] = (),
        content_type: str = "application/json",
    ) -> None:
        self.wfile.write(self._head(code, len(body), headers, content_type) + body)

    def _respond_json(self, code: int, value: Any) -> None:
        self._respond(code, dumps(value))

    def _read_body(self) -> bytes:
        length = self.fields.get("content-length")
        if length:
            return self.rfile.read(int(length))
        if self.fields.get("transfer-encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(parts)
        return b""

    def _json_body(self, raw: bytes, *, required: bool = True) -> Any:
        if not raw.strip():
            if required:
                raise bad_request("the request body is empty")
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise bad_request(f"couldn't get version/kind; json parse error: {exc}") from None

    def _dispatch(self, method: str) -> None:
        body = self._read_body()
        try:
            self._route(method, body)
        except ApiError as exc:
            self._respond(exc.code, dumps(exc.body), headers=exc.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # a bug in the test server: say so, drop the connection
            self.close_connection = True
            log.exception("API test server failed on %s %s", method, self.path)
            self._respond(500, dumps(status_body(500, f"Internal error occurred: {exc!r}")))

    # ------------------------------------------------------------------ routing

    def _route(self, method: str, body: bytes) -> None:
        api = self.server.api
        path, _, query = self.path.partition("?")
        params = dict(parse_qsl(query, keep_blank_values=True))
        parts = [unquote(p) for p in path.split("/") if p]
        registry = api.registry
        if not parts:
            self._respond_json(200, {"paths": ["/api", "/api/v1", "/apis", "/version"]})
            return
        head = parts[0]
        if head in ("healthz", "livez", "readyz"):
            self._respond(200, b"ok", content_type="text/plain; charset=utf-8")
            return
        if head == "version" and len(parts) == 1:
            self._respond_json(200, _VERSION)
            return
        if head == "apis" and parts[1:] == ["authorization.k8s.io", "v1", "selfsubjectaccessreviews"]:
            if method != "POST":
                raise ApiError(405, "the server does not allow this method on the requested resource")
            self._respond_json(201, access_review(api.authorizer, self._token(), json.loads(body or b"{}")))
            return
        if head == "_testing":
            self._admin(method, parts[1:], body)
            return
        if not api.authorizer.authenticated(self._token()):
            raise ApiError(401, "Unauthorized", reason="Unauthorized")
        if head == "openapi" and parts[1:3] == ["v3", "apis"] and len(parts) == 5:
            if not registry.has_group_version(parts[3], parts[4]):
                raise _not_found_path()
            self._discovery(method, api.openapi_v3(parts[3], parts[4]))
            return
        if head == "api":
            if len(parts) == 1:
                self._discovery(method, registry.api_versions(api.address))
                return
            if parts[1] != "v1":
                raise _not_found_path()
            if len(parts) == 2:
                self._discovery(method, registry.api_resource_list("", "v1"))
                return
            group, version, rest = "", "v1", parts[2:]
        elif head == "apis":
            if len(parts) == 1:
                self._discovery(method, registry.api_group_list())
                return
            group = parts[1]
            if not registry.has_group_version(group):
                raise _not_found_path()
            if len(parts) == 2:
                self._discovery(method, registry.api_group(group))
                return
            version = parts[2]
            if not registry.has_group_version(group, version):
                raise _not_found_path()
            if len(parts) == 3:
                self._discovery(method, registry.api_resource_list(group, version))
                return
            rest = parts[3:]
        else:
            raise _not_found_path()
        route = self._parse_resource_path(group, version, rest)
        self._serve_resource(method, route, params, body)

    def _token(self) -> str:
        """The bearer token; the scheme is case-insensitive, as kube-apiserver reads it (the
        official client's in-cluster config sends ``bearer``)."""
        scheme, _, token = self.fields.get("authorization", "").strip().partition(" ")
        return token.strip() if scheme.lower() == "bearer" else ""

    def _discovery(self, method: str, doc: dict[str, Any]) -> None:
        if method != "GET":
            raise ApiError(405, "the server does not allow this method on the requested resource")
        self._respond_json(200, doc)

    def _parse_resource_path(self, group: str, version: str, rest: list[str]) -> _Route:
        registry = self.server.api.registry
        namespace = ""
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and not (len(rest) == 3 and rest[2] in ("status", "finalize"))
        ):
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise _not_found_path()
        rt = registry.lookup(group, version, rest[0])
        if rt is None:
            raise _not_found_path()
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if namespace and not rt.namespaced:
            raise _not_found_path()
        if rt.namespaced and name and not namespace:
            raise _not_found_path()
        if sub and not ((sub == "status" and rt.status_subresource)
                        or (sub == "eviction" and rt.kind == "Pod" and not rt.group)):
            raise _not_found_path()
        return _Route(rt, namespace, name, sub)

    # ------------------------------------------------------------------ resources

    def _serve_resource(self, method: str, route: _Route, params: dict[str, str], body: bytes) -> None:
        api = self.server.api
        rt = route.rt
        if route.name:
            verb = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method)
        else:
            verb = {"POST": "create", "DELETE": "deletecollection"}.get(method)
            if method == "GET":
                verb = "watch" if _truthy(params.get("watch")) else "list"
        if route.subresource == "eviction":  # POST only: a create of the subresource
            verb = "create" if method == "POST" else None
        if verb is None:
            raise ApiError(405, "the server does not allow this method on the requested resource")
        resource = f"{rt.plural}/{route.subresource}" if route.subresource else rt.plural
        if route.subresource == "status" and verb not in ("get", "update", "patch"):
            raise ApiError(405, "the server does not allow this method on the requested resource")
        api._count(verb, resource)
        api.authorizer.check(self._token(), verb, rt.group, resource, route.namespace, route.name)
        if verb in ("list", "watch"):
            api._log_query(ListQuery(verb, resource, route.namespace, params.get("labelSelector", ""),
                                     params.get("fieldSelector", "")))
        fault = api.faults.take(verb, resource, route.namespace, route.name,
                                params.get("labelSelector", "") if verb in ("list", "watch") else "",
                                params.get("fieldManager", ""))
        if fault is not None:
            if fault.latency > 0:
                time.sleep(fault.latency)
            if fault.status is not None:
                error = fault.error(
                    plural=rt.plural,
                    group=rt.group,
                    name=route.name,
                    current_rv=api.store.resource_version(),
                )
                if verb == "watch" and fault.status == 410:
                    self._stream_error(error)
                    return
                raise error
        store = api.store
        dry_run = params.get("dryRun") == "All"
        manager = params.get("fieldManager") or self._default_manager()
        if verb == "get":
            rec = store.get(rt, route.namespace, route.name)
            self._respond(200, rec.raw)
        elif verb == "list":
            self._serve_list(route, params)
        elif verb == "watch":
            self._serve_watch(route, params)
        elif verb == "create" and route.subresource == "eviction":
            budgets = api.registry.lookup("policy", "v1", "poddisruptionbudgets")
            assert budgets is not None
            answer = evict(store, rt, budgets, route.namespace, route.name, self._json_body(body),
                           manager=manager, dry_run=dry_run)
            self._respond_json(int(answer["code"]), answer)  # 201 Success, or the 500 Status it returns
        elif verb == "create":
            rec = store.create(rt, route.namespace, self._json_body(body), manager=manager, dry_run=dry_run)
            self._respond(201, rec.raw)
        elif verb == "update":
            new = self._json_body(body)
            rec = store.update(
                rt,
                route.namespace,
                route.name,
                lambda _old: new,
                manager=manager,
                subresource=route.subresource or None,
                dry_run=dry_run,
            )
            self._respond(200, rec.raw)
        elif verb == "patch":
            self._serve_patch(route, body, manager=manager, dry_run=dry_run)
        elif verb == "delete":
            options = self._json_body(body, required=False)
            rec = store.delete(rt, route.namespace, route.name, options=options, dry_run=dry_run)
            self._respond_deleted(rt, rec)
        else:  # deletecollection
            labels, fields = self._selectors(rt, params)
            recs = store.delete_collection(rt, route.namespace, labels=labels, fields=fields, dry_run=dry_run)
            self._respond_list(rt, recs, {"resourceVersion": str(store.resource_version())})

    def _default_manager(self) -> str:
        agent = self.fields.get("user-agent") or ""
        return agent.split("/", 1)[0].strip() or "unknown"

    def _respond_deleted(self, rt: ResourceType, rec: Record) -> None:
        if rt.custom or rt.kind == "Pod":
            self._respond(200, rec.raw)
            return
        details: dict[str, Any] = {"name": rec.name}
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.plural
        uid = json.loads(rec.raw)["metadata"].get("uid")
        if uid:
            details["uid"] = uid
        self._respond_json(
            200,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            },
        )

    def _serve_patch(self, route: _Route, body: bytes, *, manager: str, dry_run: bool) -> None:
        rt = route.rt
        content_type = (self.fields.get("content-type") or "").split(";")[0].strip().lower()
        patch = self._json_body(body)
        if content_type == "application/json-patch+json":

            def change(doc: dict[str, Any]) -> Any:
                return apply_json_patch(doc, patch)
        elif content_type == "application/merge-patch+json":

            def change(doc: dict[str, Any]) -> Any:
                return apply_merge_patch(doc, patch)
        elif content_type == "application/strategic-merge-patch+json" and not rt.custom:

            def change(doc: dict[str, Any]) -> Any:
                return apply_strategic_merge_patch(doc, patch, rt.merge_schema)
        else:
            accepted = _ACCEPTED_PATCHES
            if rt.custom:
                accepted = "application/json-patch+json, application/merge-patch+json"
            raise ApiError(
                415,
                "the body of the request was in an unknown format - accepted media types "
                f"include: {accepted}",
            )

        def guarded(doc: dict[str, Any]) -> Any:
            try:
                return change(doc)
            except PatchError as exc:
                raise ApiError(exc.status, str(exc)) from None

        rec = self.server.api.store.update(
            rt,
            route.namespace,
            route.name,
            guarded,
            manager=manager,
            subresource=route.subresource or None,
            dry_run=dry_run,
        )
        self._respond(200, rec.raw)

    def _selectors(self, rt: ResourceType, params: dict[str, str]) -> tuple[Any, Any]:
        try:
            labels = parse_label_selector(params.get("labelSelector"))
            fields = parse_field_selector(params.get("fieldSelector"))
        except SelectorError as exc:
            raise bad_request(str(exc)) from None
        self.server.api.store.check_fields(rt, fields)
        return labels, fields

    def _respond_list(self, rt: ResourceType, recs: list[Record], meta: dict[str, Any]) -> None:
        """Send a ``<Kind>List`` without building one huge body (10k x 20 KB lists)."""
        head = (
            b'{"kind":"'
            + rt.list_kind.encode()
            + b'","apiVersion":"'
            + rt.group_version.encode()
            + b'","metadata":'
            + dumps(meta)
            + b',"items":['
        )
        prefix = b"" if rt.custom else self.server.api._item_prefix(rt)
        skip = len(prefix)
        pieces: list[tuple[bytes, int]] = []
        total = len(head) + 2 + max(len(recs) - 1, 0)
        for rec in recs:
            start = skip if skip and rec.raw.startswith(prefix) else 0
            pieces.append((rec.raw, start))
            total += len(rec.raw) - start + (1 if start else 0)
        self._respond_head(200, total)
        out = bytearray(head)
        for i, (raw, start) in enumerate(pieces):
            if i:
                out += b","
            if start:
                out += b"{"
                out += memoryview(raw)[start:]
            else:
                out += raw
            if len(out) >= _FLUSH_BYTES:
                self.wfile.write(out)
                out = bytearray()
        out += b"]}"
        self.wfile.write(out)

    def _serve_list(self, route: _Route, params: dict[str, str]) -> None:
        rt = route.rt
        labels, fields = self._selectors(rt, params)
        limit: int | None = None
        if params.get("limit"):
            try:
                limit = int(params["limit"])
            except ValueError:
                raise bad_request(f"invalid limit: {params['limit']}") from None
        page = self.server.api.store.list_page(
            rt,
            route.namespace,
            labels=labels,
            fields=fields,
            limit=limit,
            continue_token=params.get("continue") or None,
        )
        meta: dict[str, Any] = {"resourceVersion": str(page.resource_version)}
        if page.continue_token:
            meta["continue"] = page.continue_token
        if page.remaining is not None:
            meta["remainingItemCount"] = page.remaining
        self._respond_list(rt, page.records, meta)

    # ------------------------------------------------------------------ watches

    def _start_stream(self) -> None:
        self.wfile.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Cache-Control: no-cache, private\r\nTransfer-Encoding: chunked\r\n\r\n"
        )

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def _stream_error(self, error: ApiError) -> None:
        self._start_stream()
        self._chunk(b'{"type":"ERROR","object":' + dumps(error.body) + b"}\n")
        self._end_stream()

    def _client_gone(self) -> bool:
        conn = self.connection
        try:
            readable, _, _ = select.select([conn], [], [], 0)
            if isinstance(conn, ssl.SSLSocket):
                # TLS cannot peek; a watching client sends nothing, so whatever arrives is
                # its close_notify or end of stream
                return bool(readable)
            return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _serve_watch(self, route: _Route, params: dict[str, str]) -> None:
        api = self.server.api
        rt = route.rt
        labels, fields = self._selectors(rt, params)
        timeout: float | None = None
        if params.get("timeoutSeconds"):
            try:
                timeout = float(params["timeoutSeconds"])
            except ValueError:
                raise bad_request("invalid timeoutSeconds") from None
        bookmarks = _truthy(params.get("allowWatchBookmarks"))
        send_initial = params.get("sendInitialEvents")
        initial_flag = None if send_initial is None else _truthy(send_initial)
        try:
            watcher = api.store.watch(
                rt,
                route.namespace,
                labels=labels,
                fields=fields,
                resource_version=params.get("resourceVersion"),
                send_initial_events=initial_flag,
            )
        except ApiError as exc:
            if exc.code == 410:
                self._stream_error(exc)
                return
            raise
        try:
            self._pump(watcher, timeout=timeout, bookmarks=bookmarks, initial_end=bool(initial_flag))
        except OSError:
            self.close_connection = True
        finally:
            watcher.close("finished")

    def _bookmark(self, rt: ResourceType, rv: int, *, initial_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return (
            b'{"type":"BOOKMARK","object":'
            + dumps({"kind": rt.kind, "apiVersion": rt.group_version, "metadata": meta})
            + b"}\n"
        )

    def _pump(self, watcher: Watcher, *, timeout: float | None, bookmarks: bool, initial_end: bool) -> None:
        api = self.server.api
        rt = watcher.rt
        self._start_stream()
        sent = 0
        buf: list[bytes] = []
        size = 0

        def emit(events: Iterable[Any]) -> bool:
            """Render and send events; False once the cut-after limit is reached."""
            nonlocal sent, size
            limit = api._cut_after
            for event in events:
                line = watcher.render(event)
                if line is None:
                    continue
                buf.append(line)
                size += len(line)
                sent += 1
                if size >= _FLUSH_BYTES:
                    flush()
                if limit and sent >= limit:
                    flush()
                    return False
            flush()
            return True

        def flush() -> None:
            nonlocal size
            if buf:
                self._chunk(b"".join(buf))
                buf.clear()
                size = 0

        cut = not emit(watcher.initial)
        watcher.initial = []
        if not cut and (bookmarks or initial_end):
            self._chunk(self._bookmark(rt, watcher.start_rv, initial_end=initial_end))
        now = time.monotonic()
        deadline = now + timeout if timeout else None
        interval = api.bookmark_interval
        next_bookmark = now + interval if bookmarks and interval > 0 else None
        while not cut:
            now = time.monotonic()
            wait = _LIVENESS_CHECK
            if deadline is not None:
                wait = min(wait, deadline - now)
            if next_bookmark is not None:
                wait = min(wait, next_bookmark - now)
            events, rv_now = watcher.take(max(wait, 0.0))
            if events and not emit(events):
                cut = True
                break
            if watcher.closed:  # cut, overflow or server stop
                cut = True
                break
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                break
            if next_bookmark is not None and now >= next_bookmark:
                self._chunk(self._bookmark(rt, rv_now))
                next_bookmark = now + interval
            if not events and self._client_gone():
                self.close_connection = True
                return
        self._end_stream()
        if cut:
            self.close_connection = True

    # ------------------------------------------------------------------ admin

    def _admin(self, method: str, parts: list[str], body: bytes) -> None:
        api = self.server.api
        action = "/".join(parts)
        if method == "GET" and action == "requests":
            counts = [
                {"verb": v, "resource": r, "count": n} for (v, r), n in sorted(api.request_counts().items())
            ]
            self._respond_json(200, {"requests": counts})
            return
        if method != "POST" and not (method == "DELETE" and action == "faults"):
            raise ApiError(405, "the server does not allow this method on the requested resource")
        result: dict[str, Any] = {"ok": True}
        if action == "faults" and method == "DELETE":
            api.clear_faults()
        elif action == "faults":
            spec = self._json_body(body)
            if not isinstance(spec, dict):
                raise bad_request("a fault must be a JSON object")
            try:
                api.add_fault(Fault(**spec))
            except TypeError as exc:
                raise bad_request(str(exc)) from None
        elif action == "cut-watches":
            result["closed"] = api.cut_watches()
        elif action == "cut-watches-after":
            spec = self._json_body(body, required=False) or {}
            api.cut_watches_after(spec.get("n"))
        elif action == "compact":
            result["resourceVersion"] = api.compact()
        elif action == "restart":
            api.restart(compact=bool((self._json_body(body, required=False) or {}).get("compact", True)))
        elif action == "reset-requests":
            api.reset_request_counts()
        elif action == "load":
            result["created"] = self._load(self._json_body(body))
        else:
            raise _not_found_path()
        self._respond_json(200, result)


    def _load(self, spec: Any) -> int:
        """``POST /_testing/load``: ``{"group", "version", "resource", "items": [...]}``.

        Creates every item (namespace from its metadata) with the checks of a POST but
        without one HTTP round trip each: benchmarks seed 200,000 objects this way.
        """
        if not isinstance(spec, dict) or not isinstance(spec.get("items"), list):
            raise bad_request("load needs a JSON object with an items list")
        api = self.server.api
        rt = api.registry.lookup(str(spec.get("group", "")), str(spec.get("version", "v1")),
                                 str(spec.get("resource", "")))
        if rt is None:
            raise bad_request(f"unknown resource {spec.get('resource')!r}")
        return api.store.load(rt, spec["items"], manager="bench-load")


class ApiServer:
    """A kube-apiserver stand-in on 127.0.0.1 for the official ``kubernetes`` client.

    Use it as a context manager (``with ApiServer() as srv:``); ``srv.api_client()``
    gives a configured ``kubernetes.client.ApiClient``. Objects created through the
    API are kept in memory until the server stops; ``restart`` keeps them.

    Custom resources are validated against the CRDs found in ``crds`` (files or
    directories; default: ``default_crd_paths()``, i.e. ``$GITOPS_RELOADER_TEST_CRDS``
    or ``.tools/crds`` as installed by ``.ci/install-tools.sh``).

    ``tls``: a server-side ``ssl.SSLContext`` (certificate and key loaded) to serve HTTPS,
    as kube-apiserver does; ``url`` is then ``https://``. With
    ``authorizer.authenticate(tokens)`` only known bearer tokens are accepted, others get 401.

    Callers must not mutate ``requests`` (use ``reset_request_counts``) nor reach into
    ``store`` from other threads while relying on request ordering.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        history_size: int = 10_000,
        disabled_groups: Iterable[str] = frozenset(),
        bookmark_interval: float = 1.0,
        token: str = "test-token",
        crds: Iterable[str | os.PathLike[str]] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.token = token
        self.tls = tls
        self.bookmark_interval = bookmark_interval
        self.registry = Registry(disabled_groups=frozenset(disabled_groups))
        self.schemas = CrdSchemas.load(default_crd_paths() if crds is None else crds)
        self.store = Store(self.registry, history_size=history_size, schemas=self.schemas)
        self.faults = FaultBook()
        self.authorizer = Authorizer()
        """RBAC-shaped rules per bearer token; tokens without rules may do anything."""
        self.requests: Counter[tuple[str, str]] = Counter()
        self._requests_lock = threading.Lock()
        self._queries: deque[ListQuery] = deque(maxlen=10_000)
        self._cut_after: int | None = None
        self._prefixes: dict[str, bytes] = {}
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ApiServer:
        """Bind and serve in a daemon thread; returns ``self``."""
        if self._httpd is not None:
            return self
        self._httpd = _HTTPServer((self.host, self.port), self)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name=f"apiserver-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close every watch and connection and stop serving. Idempotent."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self.store.close_watches("stopped")
        httpd.shutdown()
        httpd.server_close()
        httpd.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ addresses

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (``https://`` when serving TLS)."""
        if self._httpd is None and self.port == 0:
            raise RuntimeError("the API server is not started")
        return f"{'https' if self.tls else 'http'}://{self.address}"

    def write_kubeconfig(self, path: str | os.PathLike[str]) -> str | os.PathLike[str]:
        """Write a kubeconfig (JSON, valid YAML) pointing at this server; return ``path``."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "test-apiserver",
                    "cluster": {"server": self.url, "insecure-skip-tls-verify": True},
                }
            ],
            "users": [{"name": "test-user", "user": {"token": self.token}}],
            "contexts": [
                {
                    "name": "test-apiserver",
                    "context": {
                        "cluster": "test-apiserver",
                        "user": "test-user",
                        "namespace": "default",
                    },
                }
            ],
            "current-context": "test-apiserver",
            "preferences": {},
        }
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(config, fh, indent=2)
            fh.write("\n")
        return path

    def api_client(self, token: str | None = None) -> ApiClient:
        """A ``kubernetes.client.ApiClient`` for this server (no proxy, no TLS).

        ``token``: another bearer token, e.g. one restricted with ``authorizer.restrict``.
        """
        from kubernetes import client

        cfg = client.Configuration(host=self.url)
        cfg.proxy = None
        cfg.no_proxy = "127.0.0.1,localhost"
        cfg.verify_ssl = False
        cfg.api_key = {"authorization": f"Bearer {token or self.token}"}
        return client.ApiClient(configuration=cfg)

    # ------------------------------------------------------------------ requests

    def _count(self, verb: str, resource: str) -> None:
        with self._requests_lock:
            self.requests[(verb, resource)] += 1

    def _log_query(self, query: ListQuery) -> None:
        with self._requests_lock:
            self._queries.append(query)

    def list_queries(self, resource: str | None = None) -> list[ListQuery]:
        """The last 10,000 list and watch requests (of ``resource`` if given), oldest first."""
        with self._requests_lock:
            return [q for q in self._queries if resource is None or q.resource == resource]

    def request_counts(self) -> dict[tuple[str, str], int]:
        """A snapshot of ``(verb, resource) -> count``."""
        with self._requests_lock:
            return dict(self.requests)

    def reset_request_counts(self) -> None:
        """Forget every counted request."""
        with self._requests_lock:
            self.requests.clear()
            self._queries.clear()

    def _item_prefix(self, rt: ResourceType) -> bytes:
        prefix = self._prefixes.get(rt.key)
        if prefix is None:
            prefix = dumps({"kind": rt.kind, "apiVersion": rt.group_version})[:-1] + b","
            self._prefixes[rt.key] = prefix
        return prefix

    # ------------------------------------------------------------------ faults

    def add_fault(self, fault: Fault) -> None:
        """Answer matching requests with the fault (see ``Fault``)."""
        self.faults.add(fault)

    def clear_faults(self) -> None:
        """Remove every fault."""
        self.faults.clear()

    def cut_watches(self) -> int:
        """Close every open watch stream now; return how many were open."""
        return self.store.close_watches("cut")

    def cut_watches_after(self, n: int | None) -> None:
        """Every watch stream closes itself after sending ``n`` events (0/None: never)."""
        self._cut_after = n or None

    def compact(self) -> int:
        """Drop all watch history; older versions get 410. Returns the current version."""
        return self.store.compact()

    def restart(self, compact: bool = True) -> None:
        """Simulate an apiserver restart: cut every watch and (by default) compact."""
        self.store.close_watches("cut")
        if compact:
            self.store.compact()

    # ------------------------------------------------------------------ custom resources

    def serve_crd(self, crd: Mapping[str, Any] | str) -> None:
        """Start serving a CRD's versions, as kube-apiserver does once a CRD is established:
        discovery lists them, their paths answer, their objects are validated.

        ``crd`` is a ``CustomResourceDefinition`` document, or the name of one the server
        loaded (``clonesets.apps.kruise.io``: its file is in the CRD paths). Kinds of the
        fixed catalogue are served from the start; the ones only a CRD brings (Knative,
        OpenKruise, a test's own) wait for this call, so a test can install one later.
        """
        if isinstance(crd, str):
            versions = self.schemas.named(crd)
            if not versions:
                raise KeyError(f"no CRD {crd!r} in the loaded CRD paths")
            schemas = self.schemas
        else:
            schemas = self.schemas.with_crd(crd)
            spec = crd.get("spec") or {}
            name = f"{(spec.get('names') or {}).get('plural')}.{spec.get('group')}"
            versions = schemas.named(name)
        added = [ResourceType(v.group, v.version, v.plural, v.kind, status_subresource=v.status_subresource,
                              custom=True)
                 for v in versions if self.registry.lookup(v.group, v.version, v.plural) is None]
        # Versions of one CRD share one table (one storage), as they share etcd keys.
        registry = Registry([*self.registry.resources, *added])
        self.store.serve(registry, schemas)
        self.registry, self.schemas = registry, schemas

    def openapi_v3(self, group: str, version: str) -> dict[str, Any]:
        """``GET /openapi/v3/apis/<group>/<version>``: the CRD schemas of the served kinds,
        each with ``x-kubernetes-group-version-kind`` as the real server publishes them."""
        schemas: dict[str, Any] = {}
        for rt in self.registry.resources:
            crd = self.schemas.get(group, version, rt.kind)
            if crd is not None and (rt.group, rt.version) == (group, version):
                name = ".".join([*reversed(group.split(".")), version, rt.kind])
                schemas[name] = {**crd.schema, "x-kubernetes-group-version-kind": [
                    {"group": group, "version": version, "kind": rt.kind}]}
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
                "paths": {}, "components": {"schemas": schemas}}

    # ------------------------------------------------------------------ direct access

    def get_object(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """A copy of a stored object (``resource`` is a plural, ``plural.group`` allowed)."""
        rt = self.registry.by_name(resource)
        if rt is None:
            raise KeyError(f"unknown resource: {resource}")
        rec = self.store.find(rt, namespace or "", name)
        return None if rec is None else rec.load()

    def resource_version(self) -> int:
        """The current global resourceVersion."""
        return self.store.resource_version()

    def watch_count(self) -> int:
        """How many watch streams are open."""
        return self.store.watcher_count()
