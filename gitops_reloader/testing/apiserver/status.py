"""``metav1.Status`` bodies and the one exception that carries them.

Every failure the test server answers is an ``ApiError``: an HTTP code plus the
Status body kube-apiserver would send, field for field (``kind``, ``apiVersion``,
``metadata``, ``status``, ``message``, ``reason``, ``details``, ``code``). The
constructors below produce the exact messages the real server uses, e.g.
``configmaps "x" not found`` or ``deployments.apps "web" already exists``.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = [
    "REASONS",
    "ApiError",
    "already_exists",
    "bad_request",
    "conflict",
    "expired",
    "invalid",
    "not_found",
    "qualified",
    "status_body",
]

REASONS: Final[dict[int, str]] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_body(
    code: int,
    message: str,
    *,
    reason: str | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A failure ``Status`` object as kube-apiserver serialises it."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason if reason is not None else REASONS.get(code, ""),
    }
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


class ApiError(Exception):
    """A request failure answered with ``code`` and a Status ``body``."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.code = code
        self.body = status_body(code, message, reason=reason, details=details)
        self.headers = headers


def qualified(plural: str, group: str) -> str:
    """``deployments.apps`` for grouped resources, ``configmaps`` for core ones."""
    return f"{plural}.{group}" if group else plural


def _details(plural: str, group: str, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = plural
    return details


def not_found(plural: str, group: str, name: str) -> ApiError:
    """404 ``<resource> "<name>" not found``."""
    return ApiError(
        404,
        f'{qualified(plural, group)} "{name}" not found',
        details=_details(plural, group, name),
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    """409 AlreadyExists on a duplicate create."""
    return ApiError(
        409,
        f'{qualified(plural, group)} "{name}" already exists',
        reason="AlreadyExists",
        details=_details(plural, group, name),
    )


def conflict(plural: str, group: str, name: str, why: str | None = None) -> ApiError:
    """409 Conflict, by default the optimistic-concurrency one."""
    reason = why or (
        "the object has been modified; please apply your changes to the latest version and try again"
    )
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": {reason}',
        details=_details(plural, group, name),
    )


def invalid(kind: str, group: str, name: str, field: str, detail: str, cause: str) -> ApiError:
    """422 Invalid with one cause, like the real validation errors."""
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [{"reason": cause, "message": detail, "field": field}]
    return ApiError(
        422,
        f'{kind}.{group} "{name}" is invalid: {field}: {detail}'
        if group
        else f'{kind} "{name}" is invalid: {field}: {detail}',
        details=details,
    )


def bad_request(message: str) -> ApiError:
    """400 BadRequest."""
    return ApiError(400, message)


def expired(message: str) -> ApiError:
    """410 Expired (too old resource version, stale continue token)."""
    return ApiError(410, message)
