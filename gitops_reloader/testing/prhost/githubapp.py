"""GitHub App authentication (``/api/v3``) for the PR host test server.

As GitHub answers ("Authenticating as a GitHub App", "Generating a JSON Web Token",
"Apps" and "Users" REST references):

- ``/app`` endpoints and ``GET /repos/{o}/{r}/installation`` take only a JWT
  (``Authorization: Bearer``), RS256-signed with the App's private key: checked against
  the public key registered with :meth:`GitHubAppApi.register_github_app`. 401 with
  GitHub's messages for a JWT that can't be decoded or verified, an ``exp`` in the past or
  more than 10 minutes ahead, an ``iat`` in the future (60 s leeway), an unknown ``iss``.
- ``GET /app``: the App (``id``, ``slug``, ``name``, ``permissions`` ...).
- ``GET /repos/{o}/{r}/installation``: the installation (``id``, ``account``,
  ``app_id``, ``app_slug``, ``access_tokens_url`` ...); 404 for an unknown repository.
- ``POST /app/installations/{id}/access_tokens`` (optional ``repositories``): 201
  ``{"token": "ghs_…", "expires_at": "…Z", "permissions", "repository_selection"}``; 404
  for another installation; 422 for a repository the installation can't reach.
- ``GET /users/{slug}[bot]``: the App's bot user (``type: Bot``), without authentication or
  with an installation token; a JWT is refused there (401), as GitHub accepts a JWT only on
  the App's own endpoints.
- :meth:`GitHubAppApi.reinstall_github_app`: the App uninstalled and installed again, under a
  new installation id; the old installation's tokens are revoked and its id answers 404.

An installation token is accepted by the REST API (Bearer or ``token``) and by git over
HTTP (Basic ``x-access-token:<token>``) until it expires (``token_lifetime``) or
:meth:`GitHubAppApi.expire_app_tokens` revokes every token issued so far.
"""

from __future__ import annotations

import datetime as _dt
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jwt

from gitops_reloader.testing.prhost.core import (
    _GH_DOCS,
    PR_HOST_KINDS,
    Core,
    _authorization,
    _error,
    _is_jwt,
    _now,
    _Resp,
    _same,
)

__all__ = ["GitHubAppApi"]

_MAX_JWT_AHEAD = 600  # GitHub: exp no more than 10 minutes into the future
_LEEWAY = 60
_APP_PATH = re.compile(
    r"^/(?:app|app/installations/(?P<inst>\d+)/access_tokens|repos/(?P<owner>[^/]+)/(?P<name>[^/]+)/installation)$")
_USER_PATH = re.compile(r"^/users/(?P<login>[^/]+)$")
_PERMISSIONS = {"contents": "write", "pull_requests": "write", "issues": "write", "metadata": "read"}


@dataclass
class _App:
    app_id: int
    public_key: bytes
    slug: str
    installation_id: int
    bot_id: int
    token_lifetime: float
    clock: Callable[[], float]
    tokens: dict[str, float] = field(default_factory=dict)
    """Installation token → expiry (epoch seconds); 0 once revoked."""
    exchanges: int = 0


class GitHubAppApi(Core):
    """GitHub App endpoints of the PR host test server, mixed into :class:`PrHost`."""

    _app: _App | None = None

    def register_github_app(self, app_id: int, public_key: bytes, *, slug: str = "gitops-reloader",
                            installation_id: int = 4242, bot_id: int = 190001,
                            token_lifetime: float = 3600.0,
                            clock: Callable[[], float] = time.time) -> None:
        """Let GitHub App ``app_id`` (its PEM ``public_key``) in, installed on every repository of
        the git server as ``installation_id``; its tokens live ``token_lifetime`` seconds by
        ``clock`` (the JWT times are checked by the same clock)."""
        with self._lock:
            first = self._app is None
            self._app = _App(app_id, public_key, slug, installation_id, bot_id, token_lifetime, clock)
        if first:
            self._githost.accept_tokens(self._installation_token_valid)

    def reinstall_github_app(self, installation_id: int) -> None:
        """The App uninstalled and installed again as ``installation_id`` (its tokens revoked)."""
        with self._lock:
            if self._app is not None:
                self._app.installation_id = installation_id
                self._app.tokens = dict.fromkeys(self._app.tokens, 0.0)

    def expire_app_tokens(self) -> None:
        """Revoke every installation token issued so far (as if they expired an hour later)."""
        with self._lock:
            if self._app is not None:
                self._app.tokens = dict.fromkeys(self._app.tokens, 0.0)

    @property
    def app_token_exchanges(self) -> int:
        """Installation tokens minted so far."""
        with self._lock:
            return self._app.exchanges if self._app is not None else 0

    # -- serving ---------------------------------------------------------------------------

    def _before_auth(self, kind: str, method: str, path: str, environ: Mapping[str, Any],
                     body: Any) -> _Resp | None:
        if kind != "github":
            return super()._before_auth(kind, method, path, environ, body)
        return self._github_app_answer(method, path, environ, body)

    def _token_valid(self, kind: str, token: str) -> bool:
        if kind == "github" and self._installation_token_valid(token):
            return True
        return super()._token_valid(kind, token)

    def _installation_token_valid(self, token: str) -> bool:
        with self._lock:
            app = self._app
            if app is None:
                return False
            expiry = next((e for t, e in app.tokens.items() if _same(token, t)), None)
            return expiry is not None and app.clock() < expiry

    def _github_app_answer(self, method: str, path: str, environ: Mapping[str, Any],
                           body: Any) -> _Resp | None:
        """The answer to an App or Users endpoint (``None``: not one; the REST API answers)."""
        user = _USER_PATH.match(path)
        if user is not None and method == "GET":
            return self._bot_user(user["login"], environ)
        match = _APP_PATH.match(path)
        if match is None:
            return None
        app, refusal = self._jwt_app(environ)
        if app is None:
            return refusal
        if match["inst"] is not None:
            if method != "POST":
                return _Resp(404, _error("github", 404, "Not Found"))
            return self._mint(app, int(match["inst"]), body)
        if method != "GET":
            return _Resp(404, _error("github", 404, "Not Found"))
        if match["owner"] is not None:
            repo = f"{match['owner']}/{match['name']}"
            if not self._exists(repo):
                return _Resp(404, _error("github", 404, "Not Found"))
            return _Resp(200, self._installation(app, match["owner"]))
        return _Resp(200, self._app_document(app))

    def _jwt_app(self, environ: Mapping[str, Any]) -> tuple[_App | None, _Resp]:
        scheme, _, token = str(environ.get("HTTP_AUTHORIZATION", "")).strip().partition(" ")
        app = self._app
        if scheme.lower() != "bearer" or app is None:
            return None, _unauthorized("A JSON web token could not be decoded")
        try:
            claims = jwt.decode(token.strip(), app.public_key, algorithms=["RS256"],
                                options={"verify_exp": False, "verify_iat": False,
                                         "require": ["iat", "exp", "iss"]})
        except jwt.PyJWTError:
            return None, _unauthorized("A JSON web token could not be decoded")
        now = app.clock()
        if str(claims["iss"]) != str(app.app_id):
            return None, _unauthorized("Integration not found")
        if not isinstance(claims["exp"], int) or claims["exp"] <= now:
            return None, _unauthorized("'Expiration time' claim ('exp') must be a numeric value representing "
                                       "the future time at which the assertion expires")
        if claims["exp"] > now + _MAX_JWT_AHEAD:
            return None, _unauthorized("'Expiration time' claim ('exp') is too far in the future")
        if not isinstance(claims["iat"], int) or claims["iat"] > now + _LEEWAY:
            return None, _unauthorized("'Issued at' claim ('iat') must be an Integer representing the time "
                                       "that the assertion was issued")
        return app, _Resp(200)

    def _mint(self, app: _App, installation: int, body: Any) -> _Resp:
        if installation != app.installation_id:
            return _Resp(404, _error("github", 404, "Not Found"))
        names = body.get("repositories") if isinstance(body, dict) else None
        repos = self._githost_repositories()
        if names is not None:
            known = {r.rsplit("/", 1)[-1]: r for r in repos}
            if not isinstance(names, list) or any(n not in known for n in names):
                return _Resp(422, {"message": "There is at least one repository that does not exist or is "
                                              "not accessible to the parent installation.",
                                   "documentation_url": _GH_DOCS, "status": "422"})
            repos = [known[n] for n in names]
        token = "ghs_" + secrets.token_urlsafe(27).replace("-", "a").replace("_", "b")[:36]
        expiry = app.clock() + app.token_lifetime
        app.tokens[token] = expiry
        app.exchanges += 1
        return _Resp(201, {
            "token": token,
            "expires_at": _iso(expiry),
            "permissions": dict(_PERMISSIONS),
            "repository_selection": "all" if names is None else "selected",
            "repositories": [{"id": self._repo(r).project_id, "name": r.rsplit("/", 1)[-1], "full_name": r,
                              "private": True} for r in repos] if names is not None else None,
        })

    def _githost_repositories(self) -> list[str]:
        root = self._githost.root
        bare = (p for p in root.rglob("*.git") if p.is_dir())
        return sorted(str(p.relative_to(root)).removesuffix(".git") for p in bare)

    def _installation(self, app: _App, owner: str) -> dict[str, Any]:
        api = self._githost.url + PR_HOST_KINDS["github"]
        return {
            "id": app.installation_id,
            "account": {"login": owner, "id": 5000 + app.installation_id, "type": "Organization",
                        "html_url": f"{self._githost.url}/{owner}"},
            "repository_selection": "all",
            "access_tokens_url": f"{api}/app/installations/{app.installation_id}/access_tokens",
            "repositories_url": f"{api}/installation/repositories",
            "html_url": f"{self._githost.url}/organizations/{owner}/settings/installations/"
                        f"{app.installation_id}",
            "app_id": app.app_id,
            "app_slug": app.slug,
            "target_id": 5000 + app.installation_id,
            "target_type": "Organization",
            "permissions": dict(_PERMISSIONS),
            "events": [],
            "created_at": _now(),
            "updated_at": _now(),
            "single_file_name": None,
            "suspended_at": None,
        }

    def _app_document(self, app: _App) -> dict[str, Any]:
        return {
            "id": app.app_id,
            "slug": app.slug,
            "node_id": f"A_kwDO{app.app_id}",
            "client_id": f"Iv23li{app.app_id:08d}",
            "owner": {"login": "example-org", "id": 5000, "type": "Organization"},
            "name": app.slug.replace("-", " ").title(),
            "description": "",
            "external_url": f"{self._githost.url}/{app.slug}",
            "html_url": f"{self._githost.url}/apps/{app.slug}",
            "created_at": _now(),
            "updated_at": _now(),
            "permissions": dict(_PERMISSIONS),
            "events": [],
            "installations_count": 1,
        }

    def _bot_user(self, login: str, environ: Mapping[str, Any]) -> _Resp:
        app = self._app
        credential = _authorization(environ)
        if credential and (_is_jwt(credential) or not self._authorized("github", environ)):
            # A JWT is an App credential: GitHub takes it on /app endpoints only.
            return _Resp(401, {"message": "Bad credentials", "documentation_url": _GH_DOCS, "status": "401"})
        if app is None or login != f"{app.slug}[bot]":
            return _Resp(404, _error("github", 404, "Not Found"))
        return _Resp(200, {
            "login": login, "id": app.bot_id, "node_id": f"BOT_kgDO{app.bot_id}", "type": "Bot",
            "site_admin": False, "html_url": f"{self._githost.url}/apps/{app.slug}",
        })


def _iso(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(int(epoch), _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _unauthorized(message: str) -> _Resp:
    return _Resp(401, {"message": message, "documentation_url": _GH_DOCS, "status": "401"})
