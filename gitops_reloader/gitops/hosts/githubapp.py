"""Authenticate as a GitHub App: a JWT signed with the App's key, exchanged for installation tokens.

What Argo CD (repository credentials), Argo CD Image Updater and Flux (``provider: github``)
do, from GitHub's "Authenticating as a GitHub App installation":

1. A JWT (RS256) signed with the App's private key, ``iss`` the App's id (or client id),
   ``iat`` 60 s in the past (clock drift) and ``exp`` 9 minutes ahead (GitHub refuses more
   than 10).
2. The installation: the configured id, or ``GET /repos/{owner}/{repo}/installation``
   with the JWT (``{"id": ...}``).
3. ``POST /app/installations/{id}/access_tokens`` with the JWT and
   ``{"repositories": [name]}`` (the token is scoped to the one repository): 201
   ``{"token": "ghs_...", "expires_at": "...Z"}``. A token lives an hour. A 404 there means
   the App was uninstalled and installed again (a new installation id): the installation is
   looked up once more and the exchange tried again, once; :meth:`AppTokens.notices` says so
   (the git sinks turn it into an Event).

:class:`AppTokens` caches the token and mints a new one :data:`REFRESH_MARGIN` seconds
before ``expires_at``, so no git command or API request starts with a token about to
expire. When the host refuses a token anyway (revoked, clocks apart), the caller says so
with :meth:`AppTokens.refused`: one new token is minted and the caller retries once —
never in a loop, because a token refused twice is a real refusal. The private key file
is read again when the kubelet replaces it (a rotated App key).

The same token serves git over HTTPS (HTTP Basic ``x-access-token:<token>``, as GitHub
documents) and the pull-request API (``Authorization: Bearer``). :meth:`AppTokens.author`
is the App's bot identity, ``<slug>[bot]`` with GitHub's noreply address
``<user id>+<slug>[bot]@users.noreply.<host>`` (``github.com``, or the Enterprise Server's
own host), so commits and pull requests appear as the App, as with Image Updater and
Renovate. The slug comes from ``GET /app`` (a JWT endpoint); the bot's user id from
``GET /users/<slug>[bot]`` with the installation token, as GitHub's own
``create-github-app-token`` action does — GitHub accepts a JWT only on the App's endpoints.

Nothing here logs or raises with a token, the JWT or key material in it.
"""

from __future__ import annotations

import datetime as _dt
import logging
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt

from gitops_reloader.errors import HostAuthError, HostError
from gitops_reloader.filewatch import identity
from gitops_reloader.gitops.auth import CredentialFileError
from gitops_reloader.gitops.gitconfig import GitHubAppConfig
from gitops_reloader.gitops.hosts.github import GitHubHost

__all__ = ["JWT_LIFETIME", "REFRESH_MARGIN", "AppAuthor", "AppTokens", "app_jwt", "app_tokens",
           "noreply_domain"]

log = logging.getLogger(__name__)

JWT_LIFETIME = 540
"""Seconds from now a JWT expires (GitHub refuses ``exp`` more than 10 minutes ahead)."""
_CLOCK_DRIFT = 60
"""Seconds ``iat`` is set in the past, as GitHub recommends against clock drift."""
REFRESH_MARGIN = 300.0
"""Seconds before ``expires_at`` a new installation token is minted."""
_MAX_KEY_BYTES = 64 * 1024
_INSTALLED = "the App is installed on the repository with Contents and Pull requests: write"


@dataclass(frozen=True, slots=True)
class AppAuthor:
    """The App's bot account: the author and committer of its commits."""

    name: str
    email: str


def app_jwt(app_id: str, private_key: bytes, now: float) -> str:
    """The JWT a GitHub App signs to call ``/app`` endpoints (RS256, valid 9 minutes)."""
    issued = int(now) - _CLOCK_DRIFT
    claims = {"iat": issued, "exp": int(now) + JWT_LIFETIME, "iss": app_id}
    return jwt.encode(claims, private_key, algorithm="RS256")


class _Jwts:
    """A fresh JWT for each ``/app`` request (the :class:`TokenSource` the API client asks)."""

    def __init__(self, tokens: AppTokens) -> None:
        self._tokens = tokens

    def current(self) -> str:
        return self._tokens.jwt()

    def refused(self, token: str) -> bool:
        return False  # a refused JWT is a wrong App id or key: nothing to renew


class AppTokens:
    """Installation tokens of GitHub App ``app_id`` for ``repository`` (``owner/name``).

    ``api_url`` is ``https://api.github.com`` or ``https://HOST/api/v3`` (Enterprise
    Server). ``installation_id`` 0 means "ask GitHub which installation covers the
    repository" (once, then kept). :meth:`current` is what every git command and API
    request calls; it is thread-safe and makes at most one exchange at a time. The calls
    go through :class:`~gitops_reloader.gitops.hosts.github.GitHubHost`'s request core
    (timeouts, bounded retries, rate limits, errors as
    :class:`~gitops_reloader.errors.HostError`); ``client`` and ``sleep`` are handed to it.
    """

    def __init__(self, *, app_id: str, private_key_file: str, repository: str, api_url: str,
                 installation_id: int = 0, client: httpx.Client | None = None,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:
        self.app_id = app_id
        self.private_key_file = private_key_file
        self.repository = repository
        self.installation_id = installation_id
        self._clock = clock
        self._api = GitHubHost(api_url, "", client=client, sleep=sleep, token_source=_Jwts(self))
        """The App's own endpoints, with a JWT."""
        self._rest = GitHubHost(api_url, "", client=client, sleep=sleep, token_source=self)
        """Everything else, with the installation token."""
        self._noreply = noreply_domain(api_url)
        self._notices: list[str] = []
        self._lock = threading.RLock()
        self._key: bytes = b""
        self._key_identity: object = None
        self._token = ""
        self._expires = 0.0
        self._author: AppAuthor | None = None
        self.exchanges = 0
        """Installation tokens minted so far (each logged as well)."""

    def __repr__(self) -> str:
        return f"AppTokens(app_id={self.app_id!r}, repository={self.repository!r})"

    def current(self) -> str:
        """An installation token valid for at least :data:`REFRESH_MARGIN` more seconds."""
        with self._lock:
            if not self._token or self._expires - self._clock() <= REFRESH_MARGIN:
                self._mint()
            return self._token

    def refused(self, token: str) -> bool:
        """The host refused ``token``: mint a new one unless another thread already did.

        Always ``True`` (a new token is ready: retry once with :meth:`current`); a token
        that cannot be minted raises instead.
        """
        with self._lock:
            if token == self._token:
                log.info("GitHub App installation token refused; minting a new one",
                         extra={"repo": self.repository, "app_id": self.app_id})
                self._mint()
            return True

    def check_key(self) -> None:
        """Read the private key file now; :class:`CredentialFileError` if it is missing or not a key."""
        self.jwt()

    def jwt(self) -> str:
        """A JWT signed with the App's key as the file holds it now (re-read once replaced)."""
        with self._lock:
            try:
                return app_jwt(self.app_id, self._private_key(), self._clock())
            except (ValueError, TypeError, jwt.PyJWTError):
                raise CredentialFileError(
                    f"GitHub App private key file {self.private_key_file} holds no RSA private key "
                    "JWTs can be signed with", reason="AppKeyInvalid", path=self.private_key_file) from None

    def author(self) -> AppAuthor:
        """The App's bot identity (``GET /app`` with the JWT, then ``GET /users/<slug>[bot]`` with
        the installation token; kept once known)."""
        with self._lock:
            if self._author is None:
                slug = str(self._call("GET", "/app").get("slug") or "")
                if not slug:
                    raise HostError(f"github app {self.app_id}: GET /app answered without a slug")
                login = f"{slug}[bot]"
                user = self._call("GET", f"/users/{urllib.parse.quote(login, safe='')}", api=self._rest)
                self._author = AppAuthor(login, f"{int(user['id'])}+{login}@{self._noreply}")
            return self._author

    def notices(self) -> list[str]:
        """What happened since the last call that people should hear of (a reinstalled App)."""
        with self._lock:
            out, self._notices = self._notices, []
            return out

    # -- internals -----------------------------------------------------------------------

    def _mint(self) -> None:
        if not self.installation_id:
            self.installation_id = self._installation()
        answer = self._exchange(missing_ok=True)
        if answer is None:  # uninstalled and installed again: a new installation id, once
            old, self.installation_id = self.installation_id, self._installation()
            message = (f"GitHub App {self.app_id}: installation {old} is gone for {self.repository}; "
                       f"it is installation {self.installation_id} now (the App was installed again)")
            log.warning("GitHub App installation changed; looked up again", extra={
                "repo": self.repository, "app_id": self.app_id, "installation": self.installation_id})
            self._notices.append(message)
            answer = self._exchange()
        try:
            minted = str(answer["token"])
            expires = _dt.datetime.fromisoformat(str(answer["expires_at"]).replace("Z", "+00:00"))
        except (KeyError, ValueError):
            raise HostError(f"github app {self.app_id}: the installation token answer has no token "
                            "or no valid expires_at") from None
        self._token, self._expires = minted, expires.timestamp()
        self.exchanges += 1
        log.info("GitHub App installation token minted", extra={
            "repo": self.repository, "app_id": self.app_id, "installation": self.installation_id,
            "expires_at": expires.isoformat()})

    def _private_key(self) -> bytes:
        now = identity(self.private_key_file)
        if now != self._key_identity or not self._key:
            self._key = _read_key(self.private_key_file)
            self._key_identity = now
        return self._key

    def _quoted_repo(self) -> str:
        owner, _, name = self.repository.partition("/")
        return f"{urllib.parse.quote(owner, safe='')}/{urllib.parse.quote(name, safe='')}"

    def _exchange(self, *, missing_ok: bool = False) -> Any:
        """The installation's token for the one repository (``POST .../access_tokens``)."""
        name = self.repository.rsplit("/", 1)[-1]
        return self._call("POST", f"/app/installations/{self.installation_id}/access_tokens",
                          json={"repositories": [name]}, missing_ok=missing_ok)

    def _installation(self) -> int:
        """The installation that covers the repository (``GET /repos/{o}/{r}/installation``)."""
        return int(self._call("GET", f"/repos/{self._quoted_repo()}/installation")["id"])

    def _call(self, method: str, path: str, *, json: Any = None, missing_ok: bool = False,
              api: GitHubHost | None = None) -> Any:
        """One App API call; its JSON object (None: 404 with ``missing_ok``). 401/403/404 say which
        App setting to check."""
        try:
            data = (api or self._api).call(method, path, repo=self.repository, json=json,
                                           missing_ok=missing_ok)
        except HostAuthError as exc:
            raise HostAuthError(f"github app {self.app_id}: {exc}; check the App id, its private key "
                                f"file {self.private_key_file} and that {_INSTALLED}") from None
        if data is None and missing_ok:
            return None
        if not isinstance(data, dict):
            raise HostError(f"github app {self.app_id}: {method} {path} answered without a JSON object")
        return data


def noreply_domain(api_url: str) -> str:
    """GitHub's noreply e-mail domain for the API at ``api_url``: ``users.noreply.github.com`` for
    github.com, ``users.noreply.<host>`` for an Enterprise Server (``https://HOST/api/v3``)."""
    host = (urllib.parse.urlsplit(api_url).hostname or "").lower()
    if host in ("", "api.github.com", "github.com"):
        return "users.noreply.github.com"
    return f"users.noreply.{host}"


def _read_key(path: str) -> bytes:
    try:
        data = Path(path).read_bytes()[: _MAX_KEY_BYTES + 1]
    except OSError as exc:
        reason = "AppKeyMissing" if isinstance(exc, FileNotFoundError) else "AppKeyUnreadable"
        raise CredentialFileError(f"cannot read GitHub App private key file {path}: {exc.strerror}",
                                  reason=reason, path=path) from None
    if len(data) > _MAX_KEY_BYTES or b"PRIVATE KEY-----" not in data:
        raise CredentialFileError(f"GitHub App private key file {path} is not a PEM private key",
                                  reason="AppKeyInvalid", path=path)
    return data


_shared: dict[GitHubAppConfig, AppTokens] = {}
_shared_lock = threading.Lock()


def app_tokens(config: GitHubAppConfig) -> AppTokens:
    """The one :class:`AppTokens` of ``config`` in this process: git, the pull-request API and
    the default-branch lookup of a repository share its installation token."""
    with _shared_lock:
        tokens = _shared.get(config)
        if tokens is None:
            tokens = AppTokens(app_id=config.app_id, private_key_file=config.private_key_file,
                               repository=config.repository, api_url=config.api_url,
                               installation_id=config.installation_id)
            _shared[config] = tokens
        return tokens
