"""A real git server over HTTP, on 127.0.0.1, for tests and demos.

:class:`GitHostServer` serves bare repositories under one root directory through git's
own ``git http-backend`` CGI (smart HTTP protocol, fetch and push, protocol v2),
wrapped in a small WSGI app and run by a threaded stdlib WSGI server on an ephemeral
port. It is to gitops-reloader what ``gittestserver`` is to fluxcd/pkg: the real
protocol, with faults scripted as data.

- **Auth**: HTTP Basic with any username and the server's token as password (a wrong
  or missing one gets ``401`` with ``WWW-Authenticate: Basic realm="git"``, so git asks
  for credentials), or ``Authorization: Bearer <token>``.
- **Faults**: :meth:`GitHostServer.set_down` answers ``503`` to everything;
  :meth:`GitHostServer.reject_pushes` fails the next *n* pushes with ``503``.
- **Someone else**: :meth:`GitHostServer.commit_directly` writes commits straight into
  a bare repository, the way a colleague's push would move the branch on.
- **Inspection**: :meth:`GitHostServer.log`, :meth:`GitHostServer.read_file`,
  :meth:`GitHostServer.all_history_text` and the :attr:`GitHostServer.requests`
  counter.
- **More endpoints**: :meth:`GitHostServer.add_route` mounts another WSGI app (a
  PR host's REST API) under a path prefix; mounted apps do their own auth.

All methods are thread-safe. Use it as a context manager (or call :meth:`stop`); the
server thread and any git processes still running are stopped on exit.

Example::

    with GitHostServer(tmp_path / "srv") as host:
        url = host.create_repo("app", {"deploy.yaml": "kind: Deployment\\n"})
        ...  # clone ``url`` with the header "Authorization: Bearer test-token"
        assert host.log("app")[0][1] == "initial"
"""

from __future__ import annotations

import base64
import binascii
import collections
import contextlib
import hmac
import os
import re
import socketserver
import ssl
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import IO, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from gitops_reloader.testing.tlsserve import TlsMixin

__all__ = ["GitHostServer", "Symlink", "WsgiApp"]

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
"""A WSGI application (PEP 3333)."""

_CHUNK = 64 * 1024
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_SERVICES = ("git-upload-pack", "git-receive-pack")
_REPO_NAME = re.compile(r"^[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*$")
_SOMEONE_ELSE = {
    "GIT_AUTHOR_NAME": "Someone Else",
    "GIT_AUTHOR_EMAIL": "someone.else@example.com",
    "GIT_COMMITTER_NAME": "Someone Else",
    "GIT_COMMITTER_EMAIL": "someone.else@example.com",
}


@dataclass(frozen=True, slots=True)
class Symlink:
    """A file given to :meth:`GitHostServer.create_repo` that is committed as a symlink to ``target``."""

    target: str


class _QuietHandler(WSGIRequestHandler):
    """No access log on stderr; answers ``Expect: 100-continue`` (curl sends it)."""

    # Only affects request parsing (100-continue); wsgiref still answers with
    # HTTP/1.0 and closes the connection after each response.
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Drop the access log line."""


class _ThreadingWSGIServer(TlsMixin, socketserver.ThreadingMixIn, WSGIServer):
    """One daemon thread per connection."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def server_bind(self) -> None:
        """Bind without ``HTTPServer``'s reverse DNS lookup of the host name."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)
        self.setup_environ()


class GitHostServer:
    """Serves the bare repositories under ``root`` over smart HTTP on 127.0.0.1.

    The server starts in ``__init__``. ``url`` is ``http://127.0.0.1:PORT`` (``https://`` with
    ``tls``, a server-side ``ssl.SSLContext``; mounted PR host APIs then use it too); clone URLs
    are ``f"{url}/{name}.git"`` and never contain credentials. Repository names may
    contain ``/`` (``org/app``) but no ``..``.

    :attr:`requests` counts every request received, refused ones included, keyed by
    ``(method, service)``: service is ``git-upload-pack`` / ``git-receive-pack`` for
    git's smart protocol, the route prefix for mounted apps, ``""`` otherwise.
    """

    def __init__(
        self,
        root: Path,
        *,
        token: str = "test-token",
        host: str = "127.0.0.1",
        port: int = 0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.token = token
        self.requests: collections.Counter[tuple[str, str]] = collections.Counter()
        self._lock = threading.Lock()
        self._commit_lock = threading.Lock()  # serializes commit_directly/create_repo
        self._down = False
        self._pushes_to_reject = 0
        self._routes: dict[str, WsgiApp] = {}
        self._token_checks: list[Callable[[str], bool]] = []
        self._stopped = False
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=200)
        self._backend = _http_backend_path()
        self._server = _ThreadingWSGIServer((host, port), _QuietHandler)
        self._server.set_app(self._app)
        if tls is not None:
            self._server.ssl_context = tls
            self._server.base_environ["HTTPS"] = "on"  # wsgi.url_scheme https
        bound_port = self._server.server_port
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://{self._server.server_name}:{bound_port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"githost:{bound_port}",
            daemon=True,
        )
        self._thread.start()

    # -- lifecycle ---------------------------------------------------------------

    def __enter__(self) -> GitHostServer:
        """Return the (already running) server."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the server."""
        self.stop()

    def stop(self) -> None:
        """Stop serving, kill git processes still running, close the socket. Idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            procs = list(self._procs)
        self._server.shutdown()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        self._server.server_close()
        self._thread.join(timeout=10)

    def backend_stderr(self) -> str:
        """The last lines ``git http-backend`` wrote to stderr: for debugging tests."""
        return "\n".join(self._stderr_tail)

    # -- faults ------------------------------------------------------------------

    def set_down(self, down: bool) -> None:
        """While ``down``, answer ``503 Service Unavailable`` to every request."""
        with self._lock:
            self._down = down

    def reject_pushes(self, n: int) -> None:
        """Answer ``503`` to the next ``n`` pushes (``POST .../git-receive-pack``)."""
        if n < 0:
            raise ValueError("n must be >= 0")
        with self._lock:
            self._pushes_to_reject = n

    def accept_tokens(self, check: Callable[[str], bool]) -> None:
        """Also accept every password or bearer token for which ``check`` is true (a GitHub
        App's installation tokens, which the PR host test server mints and expires)."""
        with self._lock:
            self._token_checks.append(check)

    def add_route(self, prefix: str, wsgi_app: WsgiApp) -> None:
        """Serve ``wsgi_app`` for paths equal to or below ``prefix`` (e.g. ``/api/v3``).

        The app sees ``SCRIPT_NAME`` extended by the prefix and ``PATH_INFO`` without
        it. It does its own auth; :meth:`set_down` applies to it too.
        """
        normalized = "/" + prefix.strip("/")
        if normalized == "/":
            raise ValueError("a route prefix must not be the root")
        with self._lock:
            self._routes[normalized] = wsgi_app

    # -- repositories --------------------------------------------------------------

    def bare_path(self, name: str) -> Path:
        """The bare repository directory of ``name`` (``root/name.git``)."""
        if not _REPO_NAME.match(name) or ".." in name.split("/"):
            raise ValueError(f"invalid repository name {name!r}")
        return self.root / f"{name}.git"

    def repo_url(self, name: str) -> str:
        """The clone URL of ``name`` (no credentials in it)."""
        self.bare_path(name)
        return f"{self.url}/{name}.git"

    def create_repo(
        self,
        name: str,
        files: Mapping[str, str | bytes | Symlink] | None = None,
        *,
        branch: str = "main",
        message: str = "initial",
    ) -> str:
        """Create bare repository ``name`` with one commit of ``files`` on ``branch``.

        ``HEAD`` points at ``branch``. Returns the clone URL. Raises
        :class:`FileExistsError` if the repository exists.
        """
        path = self.bare_path(name)
        if path.exists():
            raise FileExistsError(f"repository {name} already exists at {path}")
        path.parent.mkdir(parents=True, exist_ok=True)
        _git(None, "init", "--quiet", "--bare", f"--initial-branch={branch}", str(path))
        self._commit(path, files or {}, branch=branch, message=message, env=_SOMEONE_ELSE)
        return self.repo_url(name)

    def commit_directly(
        self,
        name: str,
        files: Mapping[str, str | bytes | Symlink | None],
        *,
        branch: str = "main",
        message: str = "commit by someone else",
    ) -> str:
        """Commit ``files`` onto ``branch`` as "Someone Else", bypassing HTTP.

        A value of ``None`` deletes that path. The commit's parent is the branch tip;
        a missing branch is created from ``HEAD``'s tip. Returns the new commit sha.
        """
        return self._commit(
            self.bare_path(name), files, branch=branch, message=message, env=_SOMEONE_ELSE
        )

    def log(self, name: str, branch: str = "main") -> list[tuple[str, str]]:
        """``(sha, subject)`` of the commits on ``branch``, newest first; ``[]`` if none."""
        path = self.bare_path(name)
        if _rev_parse(path, f"refs/heads/{branch}") is None:
            return []
        out = _git(path, "log", "--format=%H%x00%s", f"refs/heads/{branch}", "--")
        result: list[tuple[str, str]] = []
        for line in out.decode().splitlines():
            sha, _, subject = line.partition("\0")
            result.append((sha, subject))
        return result

    def branches(self, name: str) -> dict[str, str]:
        """Branch name → tip sha of every branch in ``name``."""
        out = _git(
            self.bare_path(name),
            "for-each-ref",
            "--format=%(refname)%00%(objectname)",
            "refs/heads",
        )
        result: dict[str, str] = {}
        for line in out.decode().splitlines():
            ref, _, sha = line.partition("\0")
            result[ref.removeprefix("refs/heads/")] = sha
        return result

    def read_file(self, name: str, path: str, ref: str = "main") -> bytes | None:
        """Content of ``path`` at ``ref`` (branch, tag or sha), ``None`` if absent."""
        repo = self.bare_path(name)
        spec = f"{ref}:{path}"
        probe = _run_git(repo, "cat-file", "-t", spec)
        if probe.returncode != 0 or probe.stdout.strip() != b"blob":
            return None
        return _git(repo, "cat-file", "blob", spec)

    def all_history_text(self, name: str) -> str:
        """``git log -p --all`` of ``name``: every commit and diff, for grep assertions."""
        return _git(self.bare_path(name), "log", "-p", "--all", "--format=fuller", "--text").decode(
            "utf-8", errors="replace"
        )

    # -- internals: commits ------------------------------------------------------------

    def _commit(
        self,
        repo: Path,
        files: Mapping[str, str | bytes | Symlink | None],
        *,
        branch: str,
        message: str,
        env: Mapping[str, str],
    ) -> str:
        # Plumbing on a private index: no work tree, and the branch moves with a
        # compare-and-swap (update-ref <new> <old>), so a push that lands meanwhile
        # makes this fail instead of being overwritten.
        ref = f"refs/heads/{branch}"
        with self._commit_lock:
            tip = _rev_parse(repo, ref)
            parent = tip or _rev_parse(repo, "HEAD")
            entries: list[bytes] = []
            for path, content in files.items():
                clean = _clean_path(path).encode()
                if content is None:
                    entries.append(b"0 " + b"0" * 40 + b"\t" + clean)  # mode 0 removes
                    continue
                mode = b"100644 "
                if isinstance(content, Symlink):
                    mode, content = b"120000 ", content.target
                data = content.encode() if isinstance(content, str) else content
                blob = _git(repo, "hash-object", "-w", "--stdin", input=data).strip()
                entries.append(mode + blob + b"\t" + clean)
            with tempfile.TemporaryDirectory(prefix="githost-index-") as tmp:
                index_env = {**env, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
                if parent:
                    _git(repo, "read-tree", parent, env=index_env)
                if entries:
                    stdin = b"".join(entry + b"\0" for entry in entries)
                    _git(repo, "update-index", "-z", "--index-info", input=stdin, env=index_env)
                tree = _git(repo, "write-tree", env=index_env).decode().strip()
            parent_args = ["-p", parent] if parent else []
            commit = _git(
                repo, "commit-tree", tree, *parent_args, "-F", "-", input=message.encode(), env=env
            )
            sha = commit.decode().strip()
            _git(repo, "update-ref", "-m", "commit_directly", ref, sha, tip or "0" * len(sha))
            return sha

    # -- internals: HTTP ----------------------------------------------------------------

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        path = str(environ.get("PATH_INFO", "") or "/")
        with self._lock:
            route = _match_route(path, self._routes)
            service = route[0] if route else _service_of(path, environ.get("QUERY_STRING", ""))
            self.requests[(method, service)] += 1
            down = self._down
        if down:
            _drain(environ)
            return _plain(start_response, "503 Service Unavailable", b"git host is down\n")
        if route is not None:
            prefix, app = route
            environ["SCRIPT_NAME"] = str(environ.get("SCRIPT_NAME", "")) + prefix
            environ["PATH_INFO"] = path[len(prefix) :]
            return app(environ, start_response)
        user = self._authenticate(str(environ.get("HTTP_AUTHORIZATION", "")))
        if user is None:
            _drain(environ)
            return _plain(
                start_response,
                "401 Unauthorized",
                b"authentication required\n",
                [("WWW-Authenticate", 'Basic realm="git"')],
            )
        if method == "POST" and service == "git-receive-pack" and self._take_push_rejection():
            _drain(environ)
            return _plain(start_response, "503 Service Unavailable", b"push rejected by test\n")
        return self._cgi(environ, user, start_response)

    def _authenticate(self, header: str) -> str | None:
        """The user name if ``header`` carries the token, else ``None``."""
        scheme, _, value = header.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer":
            return "bearer" if self._valid_token(value) else None
        if scheme.lower() != "basic":
            return None
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        user, sep, password = decoded.partition(":")
        if not sep or not self._valid_token(password):
            return None
        return user or "git"

    def _valid_token(self, token: str) -> bool:
        with self._lock:
            checks = list(self._token_checks)
        return _same(token, self.token) or any(check(token) for check in checks)

    def _take_push_rejection(self) -> bool:
        with self._lock:
            if self._pushes_to_reject <= 0:
                return False
            self._pushes_to_reject -= 1
            return True

    def _cgi(
        self, environ: dict[str, Any], user: str, start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        env = _isolated_git_env()
        env.update(
            {
                "GATEWAY_INTERFACE": "CGI/1.1",
                "SERVER_PROTOCOL": str(environ.get("SERVER_PROTOCOL", "HTTP/1.1")),
                "REQUEST_METHOD": str(environ.get("REQUEST_METHOD", "GET")),
                "PATH_INFO": str(environ.get("PATH_INFO", "")),
                "QUERY_STRING": str(environ.get("QUERY_STRING", "")),
                "CONTENT_TYPE": str(environ.get("CONTENT_TYPE", "")),
                "REMOTE_ADDR": str(environ.get("REMOTE_ADDR", "127.0.0.1")),
                "REMOTE_USER": user,  # http-backend only allows receive-pack with it
                "GIT_PROJECT_ROOT": str(self.root),
                "GIT_HTTP_EXPORT_ALL": "1",
            }
        )
        chunked = "chunked" in str(environ.get("HTTP_TRANSFER_ENCODING", "")).lower()
        if environ.get("CONTENT_LENGTH") and not chunked:
            env["CONTENT_LENGTH"] = str(environ["CONTENT_LENGTH"])
        # Without CONTENT_LENGTH http-backend reads the body until EOF (chunked uploads).
        if environ.get("HTTP_CONTENT_ENCODING"):
            env["HTTP_CONTENT_ENCODING"] = str(environ["HTTP_CONTENT_ENCODING"])
        if environ.get("HTTP_GIT_PROTOCOL"):
            env["HTTP_GIT_PROTOCOL"] = str(environ["HTTP_GIT_PROTOCOL"])
            env["GIT_PROTOCOL"] = str(environ["HTTP_GIT_PROTOCOL"])

        proc = subprocess.Popen(
            [self._backend],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        with self._lock:
            self._procs.add(proc)
        stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr
        assert stdin is not None and stdout is not None and stderr is not None
        feeder = threading.Thread(
            target=_feed, args=(_body(environ), stdin), name="githost-stdin", daemon=True
        )
        drainer = threading.Thread(
            target=_collect, args=(stderr, self._stderr_tail), name="githost-stderr", daemon=True
        )
        feeder.start()
        drainer.start()

        def finish(complete: bool) -> None:
            if not complete and proc.poll() is None:
                proc.kill()  # the client went away: don't leave the CGI behind
            stdout.close()
            proc.wait()
            feeder.join()
            drainer.join()
            stderr.close()
            with self._lock:
                self._procs.discard(proc)

        try:
            status, headers = _read_cgi_headers(stdout)
        except BaseException:
            finish(False)
            raise
        start_response(status, headers)
        return _stream(stdout, finish)


# -- module helpers -----------------------------------------------------------------


def _http_backend_path() -> str:
    exec_path = subprocess.run(
        ["git", "--exec-path"], check=True, capture_output=True, text=True
    ).stdout.strip()
    backend = Path(exec_path) / "git-http-backend"
    if not backend.exists():
        raise RuntimeError(f"git-http-backend not found in {exec_path}")
    return str(backend)


def _isolated_git_env() -> dict[str, str]:
    """An environment for server-side git: no user/system config, no inherited GIT_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "LC_ALL": "C",
            "LANGUAGE": "C",
        }
    )
    return env


def _run_git(
    repo: Path | None,
    *args: str,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    full_env = _isolated_git_env()
    if env:
        full_env.update(env)
    prefix = ["git", f"--git-dir={repo}"] if repo is not None else ["git"]
    return subprocess.run(
        [*prefix, *args], input=input, capture_output=True, env=full_env, check=False
    )


def _git(
    repo: Path | None,
    *args: str,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
) -> bytes:
    done = _run_git(repo, *args, input=input, env=env)
    if done.returncode != 0:
        raise RuntimeError(
            f"git {' '.join(args)} failed ({done.returncode}): "
            f"{done.stderr.decode(errors='replace').strip()}"
        )
    return done.stdout


def _rev_parse(repo: Path, rev: str) -> str | None:
    done = _run_git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    return done.stdout.decode().strip() if done.returncode == 0 else None


def _clean_path(path: str) -> str:
    pure = PurePosixPath(path)
    if pure.is_absolute() or not pure.parts or ".." in pure.parts or ".git" in pure.parts:
        raise ValueError(f"invalid path in repository: {path!r}")
    return pure.as_posix()


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _match_route(path: str, routes: Mapping[str, WsgiApp]) -> tuple[str, WsgiApp] | None:
    for prefix in sorted(routes, key=len, reverse=True):
        if path == prefix or path.startswith(prefix + "/"):
            return prefix, routes[prefix]
    return None


def _service_of(path: str, query: str) -> str:
    for service in _SERVICES:
        if path.endswith("/" + service) or f"service={service}" in query:
            return service
    return ""


def _plain(
    start_response: Callable[..., Any],
    status: str,
    body: bytes,
    extra: list[tuple[str, str]] | None = None,
) -> list[bytes]:
    headers = [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))]
    start_response(status, headers + (extra or []))
    return [body]


def _body(environ: Mapping[str, Any]) -> Iterator[bytes]:
    """The request body, de-chunked, in pieces (empty for a body-less request)."""
    stream: IO[bytes] = environ["wsgi.input"]
    if "chunked" in str(environ.get("HTTP_TRANSFER_ENCODING", "")).lower():
        while True:
            size_line = stream.readline(1024)
            if not size_line:
                return
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while stream.readline(1024).strip():  # trailers, then the blank line
                    pass
                return
            remaining = size
            while remaining:
                piece = stream.read(min(remaining, _CHUNK))
                if not piece:
                    return
                remaining -= len(piece)
                yield piece
            stream.readline(16)  # CRLF after the chunk
        return
    try:
        remaining = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        remaining = 0
    while remaining > 0:
        piece = stream.read(min(remaining, _CHUNK))
        if not piece:
            return
        remaining -= len(piece)
        yield piece


def _drain(environ: Mapping[str, Any]) -> None:
    """Read and drop the body, so closing the socket does not reset the connection."""
    for _ in _body(environ):
        pass


def _feed(body: Iterator[bytes], sink: IO[bytes]) -> None:
    try:
        for piece in body:
            sink.write(piece)
    except (BrokenPipeError, ValueError, OSError):
        pass  # the CGI exited early; its output says why
    finally:
        with contextlib.suppress(OSError):
            sink.close()


def _collect(stream: IO[bytes], tail: collections.deque[str]) -> None:
    for line in stream:
        tail.append(line.decode("utf-8", errors="replace").rstrip())


def _read_cgi_headers(stdout: IO[bytes]) -> tuple[str, list[tuple[str, str]]]:
    status = "200 OK"
    headers: list[tuple[str, str]] = []
    while True:
        line = stdout.readline(64 * 1024)
        if not line:
            if not headers:
                return "502 Bad Gateway", [("Content-Type", "text/plain")]
            break
        text = line.decode("latin-1").rstrip("\r\n")
        if not text:
            break
        key, _, value = text.partition(":")
        key, value = key.strip(), value.strip()
        if key.lower() == "status":
            status = value
        elif key.lower() not in _HOP_BY_HOP:
            headers.append((key, value))
    return status, headers


def _stream(stdout: IO[bytes], finish: Callable[[bool], None]) -> Iterator[bytes]:
    """Yield the CGI's output; ``finish(complete)`` runs when done or abandoned."""
    complete = False
    try:
        while True:
            piece = stdout.read1(_CHUNK)  # type: ignore[attr-defined]
            if not piece:
                break
            yield piece
        complete = True
    finally:
        finish(complete)
