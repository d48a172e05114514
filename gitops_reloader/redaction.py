"""Credential shapes taken out of text that leaves the process: one rule, linear time (pure).

:func:`redact_text` replaces well-known credential shapes — ``Authorization:`` headers,
``Basic``/``Bearer`` tokens, ``scheme://user:pass@``, ``token=``/``password=`` pairs, quoted
``"token": "..."`` pairs — by ``***``. Log records pass it in the log handler's filter
(:mod:`gitops_reloader.observability.logging`); Event messages, ``status`` and the ledger record
call it directly. Every pattern is an RE2 pattern (:mod:`gitops_reloader.regex`, no
backtracking): text quoting tenant input costs time linear in its size.
"""

from __future__ import annotations

from typing import Any

from gitops_reloader.regex import LinearPattern, compile_linear

__all__ = ["REDACTED", "SENSITIVE_NAME", "redact_text"]

REDACTED = "***"

SENSITIVE_NAME = r"[\w-]*(?:token|password|passwd|secret|api_?key)"
_TOKEN_CHARS = r"A-Za-z0-9._~+/=-"
# A Basic/Bearer token must hold a digit or symbol, so "basic authentication" stays.
_BASIC_OR_BEARER = compile_linear(rf"\b((?i:basic|bearer)\s+)([{_TOKEN_CHARS}]{{8,}})")
# "token": "...", 'password': '...' in JSON or dict reprs (either quote on either side).
_QUOTED_PAIR = compile_linear(
    rf"""(?i)("{SENSITIVE_NAME}"|'{SENSITIVE_NAME}')(\s*:\s*)("[^"\n]*"|'[^'\n]*')""")


def _basic_or_bearer(match: Any) -> str:
    token = match.group(2)
    if token.isalpha():
        return str(match.group(0))
    return f"{match.group(1)}{REDACTED}"


def _url_credentials(match: Any) -> str:
    scheme, password = match.group(1), match.group(3)
    if not password and "ssh" in scheme.lower():
        return str(match.group(0))
    return f"{scheme}{REDACTED}@"


def _quoted_pair(match: Any) -> str:
    quote = match.group(3)[0]
    return f"{match.group(1)}{match.group(2)}{quote}{REDACTED}{quote}"


_PATTERNS: tuple[tuple[LinearPattern, Any], ...] = (
    # Authorization / Proxy-Authorization headers, as "Name: value" or "'Name': 'value'".
    (
        compile_linear(r"""(?i)\b((?:proxy-)?authorization["']?\s*[:=]\s*["']?)[^"'\r\n]+"""),
        rf"\1{REDACTED}",
    ),
    (_BASIC_OR_BEARER, _basic_or_bearer),
    # Credentials in URLs: scheme://user:pass@host, scheme://token@host. An ssh URL's user
    # alone (ssh://git@host) is a login name, never a secret, and stays readable.
    (
        compile_linear(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/\s@:?#]*)((?::[^/\s@?#]*)?)@"),
        _url_credentials,
    ),
    # token=..., password=..., access_token=... in queries and key=value text.
    (
        compile_linear(rf"(?i)\b({SENSITIVE_NAME}|sig|signature)=[^&\s\"',;)}}]+"),
        rf"\1={REDACTED}",
    ),
    (_QUOTED_PAIR, _quoted_pair),
)


def redact_text(text: str) -> str:
    """``text`` with the well-known credential shapes replaced by ``***`` (linear time).

    The one rule for text that leaves the process other than through the log handler
    (Event messages, ``status``, the failure record): a URL with a user part or a
    ``token=`` pair reads the same there as in the logs.
    """
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text
