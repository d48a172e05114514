"""Log output: text or JSON lines, with a secret-redaction backstop.

Code logs constant messages and puts facts in ``extra`` (STYLE B.16)::

    log.info("reloaded", extra={"object": "ns/Deployment/web", "sink": "env-vars"})

:func:`configure_logging` replaces the root logger's handlers with one stream handler:

* ``text``: ``2024-05-01T12:00:00.123Z info gitops_reloader.sinks.git reloaded object=ns/D/web``
  (values with spaces or quotes are JSON-quoted; a traceback follows on its own lines);
* ``json``: one object per line, ``{"time", "level", "logger", "msg", <extras>..., "exc"}``.

Extras are whatever a record carries beyond the standard :class:`logging.LogRecord`
attributes. The handler's :class:`RedactionFilter` runs before formatting and replaces
registered secret values and well-known credential shapes (``Authorization:`` headers,
``Basic``/``Bearer`` tokens, ``scheme://user:pass@``, ``token=``/``password=`` pairs) by
``***`` in the message and its arguments, in extras and in tracebacks. It is a backstop:
code must still never log secrets. ``httpx``/``httpcore`` are held at WARNING because they
log full request URLs (webhook URLs carry tokens) at INFO.

Log text often quotes tenant input (annotation values, object names), so the filter's cost
is linear in the record's size: every credential shape is an RE2 pattern
(:mod:`gitops_reloader.regex`, no backtracking) and registered secrets are replaced by plain
substring search. After redaction, the message and each string field are cut to
:data:`MAX_FIELD_CHARS` and tracebacks to :data:`MAX_TRACEBACK_CHARS`, with a
``…[N more chars]`` marker (cutting after redaction never exposes part of a secret).
"""

from __future__ import annotations

import base64
import json
import logging
import sys
import threading
import traceback
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from gitops_reloader.errors import ConfigError
from gitops_reloader.redaction import REDACTED, SENSITIVE_NAME, redact_text
from gitops_reloader.regex import compile_linear

LEVELS: Mapping[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}

_STANDARD_ATTRS = frozenset(
    logging.LogRecord("", 0, "", 0, "", (), None).__dict__
) | {"message", "asctime", "taskName"}

MIN_SECRET_LENGTH = 4
"""Shorter values are not registered: replacing them everywhere would garble the log."""

MAX_FIELD_CHARS = 4096
"""The message and each string field are cut to this many characters (after redaction)."""
MAX_TRACEBACK_CHARS = 16384
"""A traceback or stack is cut to this many characters (after redaction)."""

_SENSITIVE_KEY = compile_linear(
    rf"(?i)(?:{SENSITIVE_NAME}|(?:proxy-)?authorization|sig|signature)", capture=False)


def truncate(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    """``text`` cut to ``limit`` characters plus a ``…[N more chars]`` marker, if longer."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[{len(text) - limit} more chars]"


class RedactionFilter(logging.Filter):
    """Replace secrets by ``***`` in every record that passes (thread-safe).

    Attach it to a handler, not a logger: handler filters see records from every logger.
    The filter rewrites the record in place (``msg`` becomes the formatted message and
    ``args`` is cleared), so every handler downstream sees the redacted text.
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._ordered: tuple[str, ...] = ()

    def register_secret(self, value: str, *, encoded: bool = True) -> None:
        """Redact ``value`` wherever it appears from now on.

        With ``encoded`` (the default) its standard base64 form is registered too, as
        Secret data travels base64-encoded. Values under :data:`MIN_SECRET_LENGTH`
        characters (after stripping) are ignored.
        """
        candidates = {value}
        if encoded:
            candidates.add(base64.b64encode(value.encode()).decode())
        with self._lock:
            for candidate in candidates:
                if len(candidate.strip()) >= MIN_SECRET_LENGTH:
                    self._secrets.add(candidate)
            self._ordered = tuple(sorted(self._secrets, key=len, reverse=True))

    def redact(self, text: str) -> str:
        """``text`` with registered secrets and credential patterns replaced (linear time)."""
        for secret in self._ordered:  # longest first: a secret containing another goes whole
            if secret in text:
                text = text.replace(secret, REDACTED)
        return redact_text(text)

    def scrub(self, value: Any) -> Any:
        """Redact a log field: strings, and recursively mappings and sequences.

        Numbers, booleans and ``None`` pass unchanged; any other object becomes its
        redacted ``str`` (the formatter would print ``str(value)`` anyway).
        """
        if value is None or isinstance(value, bool | int | float):
            return value
        if isinstance(value, str):  # a str subclass (StrEnum) becomes its plain text first
            return truncate(self.redact(value if type(value) is str else str.__str__(value)))
        if isinstance(value, Mapping):
            return {
                str(k): REDACTED if _SENSITIVE_KEY.fullmatch(str(k)) else self.scrub(v)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple | set | frozenset):
            return [self.scrub(v) for v in value]
        return truncate(self.redact(str(value)))

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; never drops it."""
        try:
            message = record.getMessage()
        except Exception:  # a bad %-format must not lose the record
            message = f"{record.msg} {record.args!r}"
        record.msg = truncate(self.redact(message))
        record.args = None
        for key in extra_keys(record):
            value = record.__dict__[key]
            record.__dict__[key] = REDACTED if _SENSITIVE_KEY.fullmatch(key) else self.scrub(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        if record.exc_text:
            record.exc_text = truncate(self.redact(record.exc_text), MAX_TRACEBACK_CHARS)
        if record.stack_info:
            record.stack_info = truncate(self.redact(record.stack_info), MAX_TRACEBACK_CHARS)
        return True


def extra_keys(record: logging.LogRecord) -> list[str]:
    """The names of the fields a record carries beyond the standard attributes."""
    return [k for k in record.__dict__ if k not in _STANDARD_ATTRS and not k.startswith("_")]


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(record.msecs):03d}Z"


def _level(record: logging.LogRecord) -> str:
    return record.levelname.lower()


def _exception_text(formatter: logging.Formatter, record: logging.LogRecord) -> str:
    if record.exc_info and not record.exc_text:
        record.exc_text = formatter.formatException(record.exc_info)
    text = record.exc_text or ""
    if record.stack_info:
        text = f"{text}\n{record.stack_info}" if text else record.stack_info
    return text


class TextFormatter(logging.Formatter):
    """``time level logger message key=value...`` then the traceback, if any."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [_timestamp(record), _level(record), record.name, record.getMessage()]
        parts.extend(f"{key}={_text_value(record.__dict__[key])}" for key in extra_keys(record))
        line = " ".join(parts)
        exc = _exception_text(self, record)
        return f"{line}\n{exc}" if exc else line


def _text_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, separators=(",", ":"))
    if text == "" or any(ch.isspace() or ch in "\"=" for ch in text):
        return json.dumps(text)
    return text


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time``, ``level``, ``logger``, ``msg``, extras, ``exc``."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": _timestamp(record),
            "level": _level(record),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in extra_keys(record):
            if key not in out:
                out[key] = record.__dict__[key]
        exc = _exception_text(self, record)
        if exc:
            out["exc"] = exc
        return json.dumps(out, default=str, ensure_ascii=False)


def configure_logging(
    *, fmt: str = "text", level: str = "info", stream: TextIO | None = None
) -> RedactionFilter:
    """Replace the root logger's handlers with one that writes ``fmt`` to ``stream``.

    ``stream`` defaults to ``sys.stderr`` at call time. Returns the handler's
    :class:`RedactionFilter`, so the caller can :meth:`~RedactionFilter.register_secret`
    tokens it loads (webhook URLs, git credentials). Raises :class:`ConfigError` for an
    unknown format or level. Call it once at start-up.
    """
    if fmt not in ("text", "json"):
        raise ConfigError(f"invalid log format {fmt!r}; use text or json")
    try:
        numeric_level = LEVELS[level.lower()]
    except KeyError:
        raise ConfigError(
            f"invalid log level {level!r}; use debug, info, warning or error") from None
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    redactor = RedactionFilter()
    handler.addFilter(redactor)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric_level)
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, numeric_level))
    return redactor
