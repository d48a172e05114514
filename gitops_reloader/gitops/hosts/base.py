"""The :class:`GitHost` protocol, the :class:`PullRequest` value, and the HTTP plumbing
every host client shares.

A host client turns "this branch should be a pull request into that base" into REST
calls against GitHub, GitLab, Gitea/Forgejo or Bitbucket Cloud. The pull-request sink
only ever talks to the :class:`GitHost` protocol; this module is, with its siblings,
the only place that imports ``httpx`` for git hosts.

Guarantees of every client built on :class:`_RestHost`:

- **Bounded.** Each request has a timeout (10 s by default). Network errors, 408, 5xx
  and rate limits are retried up to :attr:`RetryPolicy.attempts` times in all, with
  exponential backoff or the host's ``Retry-After`` / ``X-RateLimit-Reset``. A rate
  limit is a 429, or a 403 that carries ``Retry-After``, ``X-RateLimit-Remaining: 0`` or
  a message saying "rate limit" (GitHub's secondary limit may carry no header at all);
  without a header the wait is the host's :attr:`HostTraits.rate_limit_floor` (60 s on
  GitHub and Bitbucket), doubled per further attempt. A wait longer than
  :attr:`RetryPolicy.max_wait` is not slept through:
  :class:`~gitops_reloader.errors.HostRateLimited` is raised at once with
  ``retry_after`` set, so the work queue can come back later without blocking a worker.
- **Redirects.** A 301/302/307/308 whose ``Location`` stays under the API URL (same
  scheme, host, port and path prefix; GitHub answers so for a renamed or transferred
  repository) is followed, at most :data:`MAX_REDIRECTS` hops, and logged once per
  repository. Any other redirect is a permanent :class:`HostError` naming where the
  host points, so the configuration can be fixed: the token never leaves the API URL.
- **Shape-checked.** A 2xx whose JSON is not what the endpoint returns (a list where a
  list is expected, a pull request document) is a :class:`HostError`, never "no pull
  request".
- **Translated.** ``httpx`` exceptions never escape: they become
  :class:`~gitops_reloader.errors.HostError` (retryable: network, 5xx),
  :class:`~gitops_reloader.errors.HostRateLimited` (429) or
  :class:`~gitops_reloader.errors.HostAuthError` (401/403: the token is refused or lacks
  a scope; 404: the repository does not exist or the token cannot see it). Other 4xx
  answers are a :class:`~gitops_reloader.errors.HostError` whose ``retryable`` is
  ``False`` (the request itself is wrong; trying again cannot help).
- **Quiet about secrets.** The token is sent in a header on each request (never set on
  a shared client, never in a URL). Messages name the host kind, the method and the
  API path without its query string, and the repository; any text quoted from the host
  is scrubbed of the token. ``repr`` shows the API URL but never the token.
- **Bounded bodies.** :attr:`HostTraits.max_body` is the longest description the host
  stores (GitHub: 65,536 characters); a longer one is refused before it is sent, with a
  permanent error (:func:`~gitops_reloader.gitops.prpolicy.render_body` renders within
  :data:`~gitops_reloader.gitops.prpolicy.BODY_LIMIT`, the smallest of them).
- **Idempotent create.** "Already exists" (GitHub 422, GitLab/Gitea 409, Bitbucket 400
  or the existing pull request itself) is not an error: the client finds the open pull
  request and updates it. That is also
  why a ``POST`` is retried after a network error or 5xx like any other request: if the
  first attempt did reach the host, the retry comes back as "already exists".

Clients are thread-safe when the ``httpx.Client`` is (it is); they keep no state
between calls. Labels are only ever *added*, never removed.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar, Literal, Protocol, Self, runtime_checkable

import httpx

from gitops_reloader.backoff import exponential, floored, parse_retry_after
from gitops_reloader.errors import ConfigError, HostAuthError, HostError, HostRateLimited
from gitops_reloader.gitops.auth import CredentialFileError, GitAuth, TokenSource, display_url, scrub

__all__ = ["MAX_COMMENTS", "MAX_REDIRECTS", "GitHost", "HostTraits", "NewPull", "PullRequest",
           "PullRequestState", "RetryPolicy", "github_pull_request", "label_names"]

log = logging.getLogger(__name__)

PullRequestState = Literal["open", "closed", "merged"]
"""The three states every host's pull requests map onto."""

_JSON = "application/json"
_MAX_QUOTED = 300  # characters of a host's error message quoted in ours
_REDIRECTS = (301, 302, 307, 308)
MAX_REDIRECTS = 3
"""Redirect hops followed for one request (all on the API URL's own origin)."""
MAX_COMMENTS = 2000
"""Comments of one pull request read by :meth:`GitHost.comments` (oldest first)."""


@dataclass(frozen=True, slots=True)
class PullRequest:
    """One pull (merge) request as the sink sees it, whatever the host.

    ``number`` is GitHub's/Gitea's number, GitLab's ``iid`` or Bitbucket's ``id``;
    ``url`` the page a human opens; ``head``/``base`` branch names; ``head_sha`` the
    head commit when the host reports it (``""`` otherwise); ``labels`` the names of
    its labels (always empty on Bitbucket Cloud, which has none).
    """

    number: int
    url: str
    state: PullRequestState
    head: str
    base: str
    title: str
    body: str
    head_sha: str = ""
    labels: tuple[str, ...] = ()


@runtime_checkable
class GitHost(Protocol):
    """What the pull-request sink needs from a git host.

    ``repo`` is ``owner/name`` (GitHub, Gitea; ``workspace/slug`` on Bitbucket) or the
    full project path on GitLab (``group/sub/name``). Every method raises a
    :class:`~gitops_reloader.errors.HostError` (or subclass) on failure and nothing
    else. Callers must not retry by themselves on top of the client's own bounded
    retries: re-queue on ``retryable`` errors instead.
    """

    kind: ClassVar[str]
    """``"github"``, ``"gitlab"``, ``"gitea"`` or ``"bitbucket"``."""

    def find_open(self, repo: str, *, head: str, base: str) -> PullRequest | None:
        """The open pull request from ``head`` into ``base`` (newest if several), or ``None``."""
        ...

    def find_latest(self, repo: str, *, head: str, base: str) -> PullRequest | None:
        """The newest pull request from ``head`` into ``base`` in any state, or ``None``.

        Tells the sink whether its last pull request was merged or closed.
        """
        ...

    def create(
        self,
        repo: str,
        *,
        head: str,
        base: str,
        title: str,
        body: str,
        labels: Sequence[str] = (),
    ) -> PullRequest:
        """Open a pull request; if one is already open for ``head``/``base``, update it instead."""
        ...

    def update(
        self, repo: str, number: int, *, title: str, body: str, labels: Sequence[str] = ()
    ) -> PullRequest:
        """Set the title and body of pull request ``number`` and add ``labels``."""
        ...

    def close(self, repo: str, number: int) -> None:
        """Close (decline) pull request ``number`` without merging."""
        ...

    def enable_auto_merge(self, repo: str, number: int) -> bool:
        """Ask the host to merge ``number`` once its checks pass; ``False`` if it can't."""
        ...

    def cancel_auto_merge(self, repo: str, number: int) -> bool:
        """Cancel an armed auto-merge of ``number``.

        ``True``: one was armed and is cancelled; ``False``: none was armed, or the host
        has no auto-merge we use (GitHub, Bitbucket Cloud).
        """
        ...

    def comments(self, repo: str, number: int) -> list[str]:
        """The bodies of the comments on pull request ``number``, oldest first, at most
        :data:`MAX_COMMENTS` (deleted comments left out)."""
        ...

    def add_comment(self, repo: str, number: int, body: str) -> None:
        """Post ``body`` (Markdown) as a new comment on pull request ``number``."""
        ...

    def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> bool:
        """Add ``labels`` to ``number``, creating those the repository lacks where the host
        needs labels created first (Gitea); ``False`` when the host has no labels (Bitbucket)."""
        ...


@dataclass(frozen=True, slots=True)
class NewPull:
    """A pull request to open: ``head`` into ``base``, its title, body and labels."""

    head: str
    base: str
    title: str
    body: str
    labels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HostTraits:
    """What differs between the hosts' REST APIs, as data (each client's :attr:`_RestHost.traits`)."""

    open_state: str = "open"
    """The host's list filter for open pull requests."""
    any_state: str = "all"
    """The host's list filter for pull requests in any state."""
    scope_hint: str = "access to the repository"
    """What the token needs, quoted in 401/403 messages."""
    default_api_url: str = ""
    rate_limit_floor: float = 0.0
    """Wait after a rate limit without ``Retry-After`` or reset time; 0: the backoff."""
    max_body: int = 1_000_000
    """Longest pull request description the host stores, in characters."""
    states: Mapping[str, PullRequestState] = field(default_factory=dict)
    """The host's pull request states, mapped onto open/closed/merged (GitHub-shaped: empty)."""

    def state(self, value: object) -> PullRequestState:
        """Our state of the host's ``value`` (an unknown one reads as closed)."""
        return self.states.get(str(value), "closed")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long a host client retries one request."""

    attempts: int = 3
    """Tries in all, the first included."""
    backoff: float = 0.5
    """First wait without ``Retry-After``; doubled on each further retry."""
    max_backoff: float = 8.0
    max_wait: float = 30.0
    """Longest ``Retry-After`` slept through; a longer one raises ``HostRateLimited`` at once."""

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ConfigError("RetryPolicy.attempts must be at least 1")
        if self.backoff < 0 or self.max_backoff < 0 or self.max_wait < 0:
            raise ConfigError("RetryPolicy waits must not be negative")

    def delay(self, retry: int) -> float:
        """The backoff before retry number ``retry`` (0 for the first retry)."""
        return exponential(self.backoff, retry + 1, self.max_backoff)


@dataclass(eq=False)
class _RestHost:
    """Shared plumbing of the host clients: auth header, retries, error translation.

    Subclasses set :attr:`kind`, :attr:`traits` and :meth:`_auth_headers`, and
    implement the :class:`GitHost` methods. When ``client`` is ``None`` the host makes
    its own ``httpx.Client`` and :meth:`close` releases it; an injected client is left
    open for its owner. Do not set auth headers on an injected client: the host adds
    its own to every request.
    """

    kind: ClassVar[str] = ""
    traits: ClassVar[HostTraits] = HostTraits()

    api_url: str
    token: str = field(repr=False)
    _: KW_ONLY
    client: httpx.Client | None = field(default=None, repr=False)
    timeout: float = 10.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    token_source: TokenSource | None = field(default=None, repr=False)
    """Where ``token`` came from (a mounted file, a GitHub App): asked again before each
    request, and once more after a 401 (an expired or revoked token is replaced, not fatal)."""
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    clock: Callable[[], float] = field(default=time.time, repr=False)
    """Wall clock, for rate-limit reset times given as epoch seconds."""
    _http: httpx.Client = field(init=False, repr=False)
    _owns_client: bool = field(init=False, repr=False)
    _moved: set[str] = field(init=False, repr=False, default_factory=set)

    def __post_init__(self) -> None:
        url = (self.api_url or self.traits.default_api_url).strip().rstrip("/")
        if not url.lower().startswith(("http://", "https://")):
            raise ConfigError(f"{self.kind} API URL must be http:// or https://, got {display_url(url)!r}")
        parsed = httpx.URL(url)
        if parsed.userinfo:
            raise ConfigError(f"{self.kind} API URL {display_url(url)} must not carry credentials")
        if parsed.query or parsed.fragment:
            raise ConfigError(f"{self.kind} API URL must not have a query or fragment")
        if not self.token and self.token_source is None:
            raise ConfigError(f"{self.kind} API token is empty")
        self.api_url = url
        self._owns_client = self.client is None
        self._http = self.client or httpx.Client(
            timeout=self.timeout, follow_redirects=False, headers={"User-Agent": "gitops-reloader"}
        )

    @property
    def max_body(self) -> int:
        """The longest description the host stores (:attr:`HostTraits.max_body`)."""
        return self.traits.max_body

    # -- lifecycle ---------------------------------------------------------------------

    def close_client(self) -> None:
        """Release the HTTP client if this host made it (an injected one stays open)."""
        if self._owns_client:
            self._http.close()

    def __enter__(self) -> Self:
        """Return self; :meth:`close_client` runs on exit."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Release the HTTP client this host made."""
        self.close_client()

    # -- for subclasses ------------------------------------------------------------------

    def _auth_headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _rotate_token(self, repo: str) -> None:
        """Use the token as it is now (a rotated Secret, a fresh installation token)."""
        if self.token_source is None:
            return
        try:
            self.token = self.token_source.current()
        except CredentialFileError as exc:
            raise HostAuthError(f"{self.kind}: API token for {repo}: {exc}") from None

    def _renew_token(self, repo: str) -> bool:
        """After a 401: whether the token source has another token to try (then it is taken)."""
        if self.token_source is None:
            return False
        try:
            renewed = self.token_source.refused(self.token)
        except (CredentialFileError, HostError):
            return False
        if renewed:
            self._rotate_token(repo)
        return renewed

    def _secret(self) -> GitAuth:
        """The credentials to scrub from quoted host text (every spelling of the token)."""
        return GitAuth(token=self.token)

    def find_open(self, repo: str, *, head: str, base: str) -> PullRequest | None:
        """See :meth:`GitHost.find_open`."""
        return self._find(repo, head=head, base=base, state=self.traits.open_state)

    def find_latest(self, repo: str, *, head: str, base: str) -> PullRequest | None:
        """See :meth:`GitHost.find_latest`."""
        return self._find(repo, head=head, base=base, state=self.traits.any_state)

    def create(self, repo: str, *, head: str, base: str, title: str, body: str,
               labels: Sequence[str] = ()) -> PullRequest:
        """See :meth:`GitHost.create`: the body's length is checked, then the host is asked."""
        self._check_body(repo, body)
        return self._create(repo, NewPull(head, base, title, body, tuple(labels)))

    def _find(self, repo: str, *, head: str, base: str, state: str) -> PullRequest | None:
        """The newest pull request from ``head`` into ``base`` in the host's list ``state``."""
        raise NotImplementedError

    def _create(self, repo: str, new: NewPull) -> PullRequest:
        """Open ``new``; one already open for its branches is updated (:meth:`_adopt_existing`)."""
        raise NotImplementedError

    def update(
        self, repo: str, number: int, *, title: str, body: str, labels: Sequence[str] = ()
    ) -> PullRequest:
        """See :meth:`GitHost.update`."""
        raise NotImplementedError

    def _request(
        self,
        method: str,
        path: str,
        *,
        repo: str,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        accept: Sequence[int] = (),
        not_found: str = "",
        url: str | None = None,
    ) -> httpx.Response:
        """Send one request, retrying as :class:`RetryPolicy` says.

        ``path`` is appended to ``api_url`` and must already be percent-encoded where
        needed; ``url`` (an absolute URL on the same origin, e.g. a "next page" link)
        replaces both. Returns a 2xx response or one whose status is in ``accept``;
        raises a :class:`HostError` otherwise. ``not_found`` extends the 404 message.
        """
        target = url if url is not None else self.api_url + path
        shown = httpx.URL(target).path  # the path only: no query string, no host
        self._rotate_token(repo)
        headers = {"Accept": _JSON, **self._auth_headers()}
        policy = self.retry
        reason = ""
        attempt = hops = 0
        renewed = False
        while True:
            last = attempt == policy.attempts - 1
            try:
                response = self._http.request(
                    method, target, params=params, json=json, headers=headers, timeout=self.timeout
                )
            except httpx.TransportError as exc:
                reason = type(exc).__name__
                if last:
                    raise HostError(
                        f"{self.kind}: {method} {shown} for {repo} failed after "
                        f"{policy.attempts} attempts: {reason}"
                    ) from exc
                self._wait(policy.delay(attempt), method, shown, reason)
                attempt += 1
                continue
            except httpx.HTTPError as exc:  # bad URL, too many redirects: not transient
                raise HostError(f"{self.kind}: {method} {shown} for {repo}: {type(exc).__name__}") from exc
            status = response.status_code
            limited = status == 429 or (status == 403 and self._is_rate_limited(response))
            if 200 <= status < 300 or (status in accept and not limited):
                return response
            if status in _REDIRECTS:
                hops += 1
                target = self._follow(response, method, shown, repo, hops)
                if httpx.URL(target).query:
                    params = None  # the new location carries the query
                continue
            if limited:
                after = self._rate_limit_wait(response, attempt)
                if after > policy.max_wait:
                    raise HostRateLimited(
                        f"{self.kind}: rate limited on {method} {shown} for {repo}; "
                        f"retry after {after:.0f}s",
                        retry_after=after,
                    )
                if last:
                    raise HostRateLimited(
                        f"{self.kind}: rate limited on {method} {shown} for {repo} "
                        f"after {policy.attempts} attempts",
                        retry_after=after,
                    )
                self._wait(after, method, shown, f"rate limited ({status})")
                attempt += 1
                continue
            if status == 401 and not renewed and self._renew_token(repo):
                renewed = True  # once: a token refused twice is a real refusal
                headers = {"Accept": _JSON, **self._auth_headers()}
                continue
            if status >= 500 or status == 408:
                reason = f"status {status}"
                if last:
                    raise HostError(
                        f"{self.kind}: {method} {shown} for {repo} failed after "
                        f"{policy.attempts} attempts: {reason}{self._quote(response)}",
                        retry_after=parse_retry_after(response.headers.get("Retry-After"), now=self.clock()),
                    )
                after = parse_retry_after(response.headers.get("Retry-After"), now=self.clock())
                delay = floored(policy.delay(attempt), after, policy.max_wait)
                self._wait(delay, method, shown, reason)
                attempt += 1
                continue
            raise self._status_error(response, method, shown, repo, not_found)

    def _follow(self, response: httpx.Response, method: str, shown: str, repo: str, hops: int) -> str:
        """The absolute URL a redirect points to, if it stays under the API URL; else a permanent error."""
        location = response.headers.get("Location", "")
        try:
            moved = response.request.url.join(location) if location else None
        except httpx.InvalidURL:
            moved = None
        own = httpx.URL(self.api_url)
        where = f"{moved.host}{moved.path}" if moved is not None else "nowhere"
        if moved is None or (moved.scheme, moved.host, moved.port) != (own.scheme, own.host, own.port) \
                or not moved.path.startswith(own.path.rstrip("/") + "/"):
            error = HostError(
                f"{self.kind}: {method} {shown} for {repo} is redirected ({response.status_code}) to "
                f"{where}, outside the API URL {display_url(self.api_url)}; the repository was probably "
                "renamed or moved: set pullRequest.repository (and apiUrl) to its new place"
            )
            error.retryable = False
            raise error
        if hops > MAX_REDIRECTS:
            error = HostError(f"{self.kind}: {method} {shown} for {repo}: over {MAX_REDIRECTS} redirects")
            error.retryable = False
            raise error
        if repo not in self._moved:
            self._moved.add(repo)
            log.warning(
                "git host says the repository moved; following it (update pullRequest.repository)",
                extra={"host": self.kind, "repo": repo, "path": shown, "location": moved.path,
                       "status": response.status_code},
            )
        return str(moved)

    def _newest(self, repo: str, path: str, params: Mapping[str, Any],
                parse: Callable[[Any], PullRequest], *, head: str, base: str) -> PullRequest | None:
        """The newest pull request from ``head`` into ``base`` on one listed page. The host
        filters already; it is checked again, so a lenient server can't hand us another branch."""
        response = self._request("GET", path, repo=repo, params=params)
        pulls = [self._parse(parse, item, repo) for item in self._list(response, repo)]
        matching = [p for p in pulls if p.head == head and p.base == base]
        return max(matching, key=lambda p: p.number, default=None)

    def _list(self, response: httpx.Response, repo: str) -> list[Any]:
        """The JSON list of ``response``; :class:`HostError` for any other shape."""
        data = self._json(response, repo)
        if not isinstance(data, list):
            raise HostError(
                f"{self.kind}: {response.request.method} {response.request.url.path} for {repo} "
                f"answered {response.status_code} with a JSON {type(data).__name__}, not a list"
            )
        return data

    def _check_body(self, repo: str, body: str) -> None:
        """Refuse a description longer than the host stores (permanent: the text must change)."""
        if len(body) > self.max_body:
            error = HostError(
                f"{self.kind}: pull request description for {repo} has {len(body)} characters; "
                f"the host takes at most {self.max_body}"
            )
            error.retryable = False
            raise error

    def _poll_status(
        self, call: Callable[[], httpx.Response], again: Callable[[httpx.Response], bool], what: str,
    ) -> httpx.Response:
        """``call()`` until ``again(response)`` is false, sleeping the backoff between, at most
        :attr:`RetryPolicy.attempts` + 2 times (a host still checking a new pull request)."""
        tries = self.retry.attempts + 2
        for attempt in range(tries):
            response = call()
            if attempt == tries - 1 or not again(response):
                return response
            self._wait(self.retry.delay(attempt), "poll", what, f"status {response.status_code}")
        raise AssertionError("unreachable")  # pragma: no cover - the loop always returns


    def _json(self, response: httpx.Response, repo: str) -> Any:
        """The JSON body of ``response``; :class:`HostError` if it is not JSON."""
        try:
            return response.json()
        except ValueError as exc:
            shown = response.request.url.path
            raise HostError(
                f"{self.kind}: {response.request.method} {shown} for {repo} "
                f"returned a body that is not JSON (status {response.status_code})"
            ) from exc

    def _parse(self, convert: Callable[[Any], PullRequest], data: Any, repo: str) -> PullRequest:
        """``convert(data)``, turning a malformed host document into a :class:`HostError`."""
        try:
            return convert(data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise HostError(
                f"{self.kind}: unexpected pull request document for {repo} ({type(exc).__name__})"
            ) from exc

    def _adopt_existing(self, repo: str, new: NewPull) -> PullRequest:
        """The host said "already exists": find that open pull request and update it."""
        existing = self.find_open(repo, head=new.head, base=new.base)
        if existing is None:
            raise HostError(
                f"{self.kind}: {repo} reports a pull request from {new.head} into {new.base} "
                "already exists, but none is open"
            )
        log.debug(
            "pull request already exists; updating it",
            extra={"host": self.kind, "repo": repo, "number": existing.number},
        )
        return self.update(repo, existing.number, title=new.title, body=new.body, labels=new.labels)

    def _host_message(self, response: httpx.Response) -> str:
        """The host's own error text (scrubbed, shortened), ``""`` if none."""
        text = ""
        try:
            data = response.json()
        except ValueError:
            data = None
        if isinstance(data, dict):
            parts: list[str] = []
            for key in ("message", "error", "errors"):
                value = data.get(key)
                if isinstance(value, dict) and "message" in value:  # Bitbucket: {"error": {"message"}}
                    value = value["message"]
                if value:
                    parts.append(value if isinstance(value, str) else _flatten(value))
            text = "; ".join(parts)
        elif response.content:
            text = response.text
        text = " ".join(scrub(text, self._secret()).split())
        return text[:_MAX_QUOTED]

    def _quote(self, response: httpx.Response) -> str:
        message = self._host_message(response)
        return f" ({message})" if message else ""

    def _error_for(self, response: httpx.Response, repo: str, not_found: str = "") -> HostError:
        """The :class:`HostError` for a refused ``response`` (passed through via ``accept``)."""
        request = response.request
        return self._status_error(response, request.method, request.url.path, repo, not_found)

    # -- internals -------------------------------------------------------------------------

    def _status_error(
        self, response: httpx.Response, method: str, shown: str, repo: str, not_found: str
    ) -> HostError:
        status = response.status_code
        quoted = self._quote(response)
        if status == 401:
            return HostAuthError(
                f"{self.kind}: token refused (401) on {method} {shown} for {repo}; "
                f"it needs {self.traits.scope_hint}{quoted}"
            )
        if status == 403:
            return HostAuthError(
                f"{self.kind}: token not allowed (403) on {method} {shown} for {repo}; "
                f"it needs {self.traits.scope_hint}{quoted}"
            )
        if status == 404:
            extra = f", {not_found}" if not_found else ""
            return HostAuthError(
                f"{self.kind}: repository {repo} not found or not visible to the token{extra} "
                f"(404 on {method} {shown})"
            )
        error = HostError(f"{self.kind}: {method} {shown} for {repo} refused with status {status}{quoted}")
        if 400 <= status < 500 and status != 409:
            # The request itself is wrong (validation, bad state): trying it again can't help.
            error.retryable = False
        return error

    def _is_rate_limited(self, response: httpx.Response) -> bool:
        """Whether a 403 is a rate limit (headers, or the host's message says so), not a refusal."""
        headers = response.headers
        if "retry-after" in headers or headers.get("x-ratelimit-remaining") == "0":
            return True
        return "rate limit" in self._host_message(response).lower()

    def _rate_limit_wait(self, response: httpx.Response, attempt: int) -> float:
        """Seconds to wait: ``Retry-After``, else the reset time if none remain, else the floor."""
        headers = response.headers
        after = parse_retry_after(headers.get("Retry-After"), now=self.clock())
        if after is not None:
            return after
        remaining = headers.get("x-ratelimit-remaining", headers.get("ratelimit-remaining"))
        reset = headers.get("x-ratelimit-reset", headers.get("ratelimit-reset"))
        if remaining == "0" and reset:
            try:
                return max(1.0, float(reset) - self.clock())
            except ValueError:
                pass
        if self.traits.rate_limit_floor > 0:
            return exponential(self.traits.rate_limit_floor, attempt + 1, float("inf"))
        return self.retry.delay(attempt)

    def _wait(self, delay: float, method: str, shown: str, reason: str) -> None:
        log.debug(
            "git host request failed, retrying",
            extra={"host": self.kind, "method": method, "path": shown, "reason": reason, "delay": delay},
        )
        if delay > 0:
            self.sleep(delay)


class _GitHubShaped(_RestHost):
    """Hosts whose pull requests have GitHub's shape under ``/repos/{owner}/{name}/pulls``
    (GitHub, Gitea and Forgejo): one ``update`` and ``close``; each adds labels its own way."""

    def update(
        self, repo: str, number: int, *, title: str, body: str, labels: Sequence[str] = ()
    ) -> PullRequest:
        """See :meth:`GitHost.update`: title and body, then :meth:`_label` adds ``labels``."""
        self._check_body(repo, body)
        pull = self._edit_github_shaped(repo, self._pull_path(repo, number), {"title": title, "body": body})
        return self._label(repo, pull, labels)

    def close(self, repo: str, number: int) -> None:
        """Close ``number`` without merging."""
        self._edit_github_shaped(repo, self._pull_path(repo, number), {"state": "closed"})

    def _label(self, repo: str, pull: PullRequest, labels: Sequence[str]) -> PullRequest:
        """``pull`` with ``labels`` added, as the host adds them."""
        raise NotImplementedError

    def _repo_path(self, repo: str) -> str:
        owner, name = split_repo(self.kind, repo)
        return f"/repos/{urllib.parse.quote(owner, safe='')}/{urllib.parse.quote(name, safe='')}"

    def _pull_path(self, repo: str, number: int) -> str:
        return f"{self._repo_path(repo)}/pulls/{number}"

    def _owner(self, repo: str) -> str:
        return split_repo(self.kind, repo)[0]

    def _pull(self, data: Any, repo: str) -> PullRequest:
        """The pull request in ``data`` (GitHub's shape), or a :class:`HostError`."""
        return self._parse(github_pull_request, data, repo)

    def _edit_github_shaped(self, repo: str, path: str, fields: Mapping[str, Any]) -> PullRequest:
        """PATCH a GitHub-shaped pull request (GitHub, Gitea) at ``path``; the answer parsed."""
        response = self._request("PATCH", path, repo=repo, json=dict(fields))
        return self._parse(github_pull_request, self._json(response, repo), repo)


def split_repo(kind: str, repo: str) -> tuple[str, str]:
    """``("owner", "name")`` of ``owner/name``; :class:`ConfigError` for anything else."""
    owner, sep, name = repo.strip("/").partition("/")
    if not sep or not owner or not name or "/" in name:
        raise ConfigError(f"{kind} repository must be 'owner/name', got {repo!r}")
    return owner, name


def _flatten(value: Any) -> str:
    """A compact text of a JSON error detail (list or map of messages)."""
    if isinstance(value, list):
        return ", ".join(_flatten(item) for item in value)
    if isinstance(value, dict):
        if "message" in value and isinstance(value["message"], str):
            return value["message"]
        return ", ".join(f"{key}: {_flatten(item)}" for key, item in value.items())
    return str(value)


def github_pull_request(data: Any) -> PullRequest:
    """A pull request in GitHub's shape (Gitea and Forgejo answer the same one)."""
    merged = bool(data.get("merged_at") or data.get("merged"))
    state: PullRequestState = "merged" if merged else ("open" if data["state"] == "open" else "closed")
    return PullRequest(
        number=int(data["number"]),
        url=str(data.get("html_url") or ""),
        state=state,
        head=str(data["head"]["ref"]),
        base=str(data["base"]["ref"]),
        title=str(data.get("title") or ""),
        body=str(data.get("body") or ""),
        head_sha=str(data["head"].get("sha") or ""),
        labels=label_names(data.get("labels")),
    )


def label_names(items: Any) -> tuple[str, ...]:
    """Names of a pull request's ``labels`` (objects with a ``name``)."""
    return tuple(str(item["name"]) for item in items or () if isinstance(item, dict) and item.get("name"))
