"""Log line shapes (text and JSON), extras, and the redaction backstop."""

from __future__ import annotations

import io
import json
import logging
import re
import time
from collections.abc import Iterator

import pytest

from gitops_reloader.errors import ConfigError
from gitops_reloader.model import SinkName
from gitops_reloader.observability.logging import (
    MAX_FIELD_CHARS,
    MAX_TRACEBACK_CHARS,
    RedactionFilter,
    configure_logging,
    truncate,
)

log = logging.getLogger("gitops_reloader.test")

SECRET = "s3cr3t-Pa55word"


@pytest.fixture(autouse=True)
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in ("httpx", "httpcore")}
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    for name, lvl in levels.items():
        logging.getLogger(name).setLevel(lvl)


def json_lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_json_line_has_time_level_logger_msg_and_extras() -> None:
    out = io.StringIO()
    configure_logging(fmt="json", stream=out)
    log.info("reloaded", extra={"object": "ns/Deployment/web", "sink": "git", "repo": "infra"})
    [line] = json_lines(out)
    assert line["level"] == "info"
    assert line["logger"] == "gitops_reloader.test"
    assert line["msg"] == "reloaded"
    assert line["object"] == "ns/Deployment/web"
    assert line["sink"] == "git"
    assert line["repo"] == "infra"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", str(line["time"]))
    assert set(line) == {"time", "level", "logger", "msg", "object", "sink", "repo"}


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_str_enum_extras_are_logged_as_their_text_and_redacted(fmt: str) -> None:
    """A StrEnum field (e.g. a sink name) once crashed the RE2 redaction and lost the record."""
    class Secretish(str):
        pass

    out = io.StringIO()
    configure_logging(fmt=fmt, stream=out).register_secret(SECRET)
    log.info("reloaded", extra={"sink": SinkName.ENV_VARS, "detail": Secretish(f"token {SECRET}")})
    text = out.getvalue()
    assert "env-vars" in text and "reloaded" in text
    assert SECRET not in text


def test_json_keeps_numbers_and_formats_args() -> None:
    out = io.StringIO()
    configure_logging(fmt="json", stream=out)
    log.warning("retrying in %ss", 2, extra={"attempt": 3, "synced": True})
    [line] = json_lines(out)
    assert line["msg"] == "retrying in 2s"
    assert line["level"] == "warning"
    assert line["attempt"] == 3
    assert line["synced"] is True


def test_text_line_is_time_level_logger_message_then_key_values() -> None:
    out = io.StringIO()
    configure_logging(fmt="text", stream=out)
    log.info("commit pushed", extra={"repo": "infra", "reason": "two words"})
    line = out.getvalue().rstrip("\n")
    assert re.fullmatch(
        r'\S+Z info gitops_reloader\.test commit pushed repo=infra reason="two words"', line
    ), line


def test_level_filters_lower_records() -> None:
    out = io.StringIO()
    configure_logging(fmt="text", level="warning", stream=out)
    log.info("hidden")
    log.error("shown")
    assert "hidden" not in out.getvalue()
    assert "shown" in out.getvalue()


def test_configure_replaces_existing_root_handlers() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging(stream=first)
    configure_logging(stream=second)
    log.info("once")
    assert first.getvalue() == ""
    assert "once" in second.getvalue()
    assert len(logging.getLogger().handlers) == 1


def test_httpx_request_logs_are_held_back_at_info() -> None:
    out = io.StringIO()
    configure_logging(stream=out)
    logging.getLogger("httpx").info("HTTP Request: POST https://hooks.example/T/B/xyz")
    assert out.getvalue() == ""


@pytest.mark.parametrize(("fmt", "level"), [("yaml", "info"), ("text", "loud")])
def test_invalid_format_or_level_is_a_config_error(fmt: str, level: str) -> None:
    with pytest.raises(ConfigError):
        configure_logging(fmt=fmt, level=level, stream=io.StringIO())


def test_exception_traceback_is_included() -> None:
    out = io.StringIO()
    configure_logging(fmt="json", stream=out)
    try:
        raise ValueError("bad thing")
    except ValueError:
        log.exception("failed", extra={"object": "ns/Deployment/web"})
    [line] = json_lines(out)
    assert "Traceback" in str(line["exc"])
    assert "ValueError: bad thing" in str(line["exc"])


# redaction


@pytest.fixture
def json_out() -> tuple[io.StringIO, RedactionFilter]:
    out = io.StringIO()
    return out, configure_logging(fmt="json", stream=out)


def test_registered_secret_is_redacted_in_message_args_and_extras(
    json_out: tuple[io.StringIO, RedactionFilter],
) -> None:
    out, redactor = json_out
    redactor.register_secret(SECRET)
    log.info(f"inline {SECRET}")
    log.info("as arg %s", SECRET)
    log.info("as extra", extra={"detail": f"value={SECRET}", "nested": {"k": [SECRET]}})
    text = out.getvalue()
    assert SECRET not in text
    lines = json_lines(out)
    assert lines[0]["msg"] == "inline ***"
    assert lines[1]["msg"] == "as arg ***"
    assert lines[2]["detail"] == "value=***"
    assert lines[2]["nested"] == {"k": ["***"]}


def test_registered_secret_is_redacted_in_its_base64_form(
    json_out: tuple[io.StringIO, RedactionFilter],
) -> None:
    out, redactor = json_out
    redactor.register_secret(SECRET)
    log.info("data %s", "czNjcjN0LVBhNTV3b3Jk")
    assert "czNjcjN0LVBhNTV3b3Jk" not in out.getvalue()


def test_registered_secret_is_redacted_in_tracebacks(
    json_out: tuple[io.StringIO, RedactionFilter],
) -> None:
    out, redactor = json_out
    redactor.register_secret(SECRET)
    try:
        raise RuntimeError(f"login failed with {SECRET}")
    except RuntimeError:
        log.exception("push failed")
    assert SECRET not in out.getvalue()
    [line] = json_lines(out)
    assert "RuntimeError: login failed with ***" in str(line["exc"])


def test_text_format_redacts_tracebacks_too() -> None:
    out = io.StringIO()
    redactor = configure_logging(fmt="text", stream=out)
    redactor.register_secret(SECRET)
    try:
        raise RuntimeError(f"Authorization: Bearer {SECRET}")
    except RuntimeError:
        log.exception("request failed")
    assert SECRET not in out.getvalue()
    assert "RuntimeError: Authorization: ***" in out.getvalue()


def test_short_values_are_not_registered() -> None:
    redactor = RedactionFilter()
    redactor.register_secret("ab")
    assert redactor.redact("a tab and a cab") == "a tab and a cab"


@pytest.mark.parametrize(
    ("raw", "leak"),
    [
        ("Authorization: Bearer eyJhbGciOi.eyJzdWIi.sig", "eyJhbGciOi"),
        ("headers={'Authorization': 'token ghp_abcdef123456'}", "ghp_abcdef123456"),
        ("Proxy-Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        ("sent Basic dXNlcjpwYXNzd29yZA== upstream", "dXNlcjpwYXNzd29yZA=="),
        ("sent Bearer glpat-1234567890abcdef", "glpat-1234567890abcdef"),
        ("cloning https://oauth2:glpat-XYZ123@gitlab.example.com/g/r.git", "glpat-XYZ123"),
        ("remote https://x-access-token@github.com/o/r.git", "x-access-token"),
        ("GET https://hooks.example.com/in?token=abc123&x=1", "abc123"),
        ("POST https://h.example/api?access_token=zz99zz", "zz99zz"),
        ("password=hunter22 user=bob", "hunter22"),
        ('{"private_token": "glpat-abc", "user": "bob"}', "glpat-abc"),
    ],
)
def test_credential_shapes_are_redacted(raw: str, leak: str) -> None:
    redacted = RedactionFilter().redact(raw)
    assert leak not in redacted
    assert "***" in redacted


@pytest.mark.parametrize(
    "text",
    [
        "using basic auth for the git remote",
        "Bearer tokens are read from the Secret",
        "tokens=5 secret-name=app-secret",
        "https://github.com/org/repo.git",
        "object=ns/Deployment/web hash=3c9a892aeaed",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert RedactionFilter().redact(text) == text


def test_url_with_credentials_is_redacted_but_host_kept(
    json_out: tuple[io.StringIO, RedactionFilter],
) -> None:
    out, _ = json_out
    log.info("fetch", extra={"remote": "https://bot:tok3n-value@git.example.com/infra.git"})
    [line] = json_lines(out)
    assert line["remote"] == "https://***@git.example.com/infra.git"


def test_extra_fields_named_like_credentials_are_redacted_whole(
    json_out: tuple[io.StringIO, RedactionFilter],
) -> None:
    out, _ = json_out
    log.info("auth", extra={"token": "plain", "api_key": "k", "authorization": "x", "sink": "git"})
    [line] = json_lines(out)
    assert line["token"] == line["api_key"] == line["authorization"] == "***"
    assert line["sink"] == "git"


def test_redaction_applies_to_records_of_every_logger(
    json_out: tuple[io.StringIO, RedactionFilter],
) -> None:
    out, redactor = json_out
    redactor.register_secret(SECRET)
    logging.getLogger("some.library").warning("oops %s", SECRET)
    assert SECRET not in out.getvalue()


def test_objects_in_extras_are_stringified_and_redacted(
    json_out: tuple[io.StringIO, RedactionFilter],
) -> None:
    class Thing:
        def __str__(self) -> str:
            return f"thing with {SECRET}"

    out, redactor = json_out
    redactor.register_secret(SECRET)
    log.info("obj", extra={"thing": Thing()})
    [line] = json_lines(out)
    assert line["thing"] == "thing with ***"


# hostile input: bounded time and size


HOSTILE = {
    # each took Python's `re` 0.5 s to over 20 s at 16 KB (quadratic scans per start position)
    "dotted-words": "a." * 8000,
    "dashed-words": "a-" * 8000,
    "scheme-like": "a" * 16000,
    "header-spaces": "authorization" + " " * 16000,
    "bearer-runs": ("bearer " + "a" * 10) * 1000,
    "quoted-key": '"' + "-" * 16000,
    "quoted-pairs": '"token": "' * 1600,
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_redaction_is_linear_on_hostile_text(text: str) -> None:
    redactor = RedactionFilter()
    redactor.register_secret(SECRET)
    start = time.perf_counter()
    redactor.redact(text * 4)  # 64 KB
    assert time.perf_counter() - start < 0.5  # seconds to minutes before RE2


def test_a_huge_tenant_value_is_logged_truncated_after_redaction(
    json_out: tuple[io.StringIO, RedactionFilter],
) -> None:
    out, redactor = json_out
    redactor.register_secret(SECRET)
    value = "x" * (MAX_FIELD_CHARS - 5) + SECRET + "y" * 20000
    start = time.perf_counter()
    log.warning("invalid annotation %s", value, extra={"value": value, "short": "kept"})
    assert time.perf_counter() - start < 0.5
    [line] = json_lines(out)
    assert SECRET[:4] not in out.getvalue()
    marker = f"…[{len(value) - len(SECRET) + 3 - MAX_FIELD_CHARS} more chars]"
    assert line["value"] == "x" * (MAX_FIELD_CHARS - 5) + "***" + "y" * 2 + marker
    assert str(line["msg"]).startswith("invalid annotation xxx")
    assert str(line["msg"]).endswith("more chars]")
    assert line["short"] == "kept"


def test_truncate_keeps_short_text_and_marks_the_cut() -> None:
    assert truncate("abc", 3) == "abc"
    assert truncate("abcdef", 3) == "abc…[3 more chars]"


def test_tracebacks_are_cut_at_their_own_cap(json_out: tuple[io.StringIO, RedactionFilter]) -> None:
    out, _ = json_out
    try:
        raise RuntimeError("z" * (MAX_TRACEBACK_CHARS * 2))
    except RuntimeError:
        log.exception("failed")
    [line] = json_lines(out)
    assert len(str(line["exc"])) < MAX_TRACEBACK_CHARS + 40
    assert str(line["exc"]).endswith("more chars]")
