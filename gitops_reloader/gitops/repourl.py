"""Whether two repository URLs name the same repository: Argo CD's rule, exactly.

Argo CD decides which repository an Application's ``repoURL`` is with argo-cd
``util/git/git.go`` ``SameURL`` (v3.5.1; unchanged on ``master`` as of 2026-08):
both URLs go through ``NormalizeGitURLAllowInvalid`` and must be equal and non-empty.
``NormalizeGitURL``:

1. trim white space (Go's ``strings.TrimSpace``) and lower-case the **whole** URL
   (``strings.ToLower``): host, path, user and query alike;
2. an SSH URL (``IsSSHURL``: ``^(ssh://)?([^/:]*?)@[^@]+$``) without ``ssh://`` is the
   scp-like form: its first ``:`` becomes ``/`` and ``ssh://`` is prepended;
3. one trailing ``.git`` is removed;
4. the result is parsed and printed again by Go's ``net/url`` (``url.Parse`` then
   ``URL.String``: percent-encoding made canonical, an invalid URL is an error);
5. a leading ``ssh://`` is removed.

When step 4 fails, ``NormalizeGitURLAllowInvalid`` keeps the URL **as given** (neither
trimmed nor lower-cased). Nothing else is equated: the scheme stays (``https://h/o/r``
and ``git@h:o/r`` differ), as do a user name, a port (even the scheme's default one) and
a trailing ``/``.

Go's ``net/url`` (1.25) is reproduced below for what step 4 needs: scheme, opaque part,
authority (user info, host, port, bracketed IPv6 literals with zones), path, query and
fragment, with Go's validation and escaping tables. Pure: no I/O; linear in the URL's
length (no backtracking regular expression on tenant text: the one pattern is the
upstream ``IsSSHURL`` one, which Python runs in linear time for these character classes).
"""

from __future__ import annotations

import enum
import ipaddress
import re
import unicodedata
from dataclasses import dataclass

__all__ = ["is_ssh_url", "normalize_git_url", "normalize_git_url_allow_invalid", "same_url"]

_SSH_URL = re.compile(r"^(ssh://)?([^/:]*?)@[^@]+\Z", re.DOTALL)
_GO_SPACE = frozenset(" \t\n\v\f\r\x85\xa0")
_ALNUM = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_HEX = frozenset(b"0123456789abcdefABCDEF")


class _UrlError(ValueError):
    """``url.Parse`` refused the URL."""


def _go_trim_space(text: str) -> str:
    """``strings.TrimSpace``: Unicode white space as Go's ``unicode.IsSpace`` defines it."""
    def space(ch: str) -> bool:
        return ch in _GO_SPACE or unicodedata.category(ch) in ("Zs", "Zl", "Zp")

    start, end = 0, len(text)
    while start < end and space(text[start]):
        start += 1
    while end > start and space(text[end - 1]):
        end -= 1
    return text[start:end]


def _go_lower(text: str) -> str:
    """``strings.ToLower``: each character's simple lower case (one character for one)."""
    return "".join(low if len(low := ch.lower()) == 1 else low[0] for ch in text)


def is_ssh_url(url: str) -> tuple[bool, str]:
    """``IsSSHURL``: whether ``url`` is an SSH URL, and its user (``git@host:o/r`` → ``git``)."""
    match = _SSH_URL.match(url)
    return (True, match.group(2)) if match else (False, "")


def normalize_git_url(url: str) -> str:
    """``NormalizeGitURL``: the comparable form of a repository URL; ``""`` if Go can't parse it.

    >>> normalize_git_url("git@GITHUB.com:Org/App.git")
    'git@github.com/org/app'
    >>> normalize_git_url("https://GitHub.com/Org/App.git")
    'https://github.com/org/app'
    """
    repo = _go_lower(_go_trim_space(url))
    if is_ssh_url(repo)[0] and not repo.startswith("ssh://"):
        repo = "ssh://" + repo.replace(":", "/", 1)
    repo = repo.removesuffix(".git")
    try:
        normalized = _GoUrl.parse(repo).string()
    except _UrlError:
        return ""
    return normalized.removeprefix("ssh://")


def normalize_git_url_allow_invalid(url: str) -> str:
    """``NormalizeGitURLAllowInvalid``: :func:`normalize_git_url`, or ``url`` unchanged if invalid."""
    return normalize_git_url(url) or url


def same_url(left: str, right: str) -> bool:
    """``SameURL``: whether two repository URLs name the same repository for Argo CD.

    >>> same_url("git@GITHUB.com:argoproj/test", "ssh://git@github.com/argoproj/test.git")
    True
    >>> same_url("https://github.com/argoproj/test", "git@github.com:argoproj/test")
    False
    """
    normal_left = normalize_git_url_allow_invalid(left)
    normal_right = normalize_git_url_allow_invalid(right)
    return normal_left != "" and normal_right != "" and normal_left == normal_right


# --------------------------------------------------------------------------- Go's net/url


class _Mode(enum.Enum):
    """``net/url``'s ``encoding``: which part of the URL a byte is escaped for."""

    PATH = enum.auto()
    HOST = enum.auto()
    ZONE = enum.auto()
    USER_PASSWORD = enum.auto()
    FRAGMENT = enum.auto()


def _should_escape(c: int, mode: _Mode) -> bool:
    """``shouldEscape`` for the modes above."""
    if c in _ALNUM:
        return False
    if mode in (_Mode.HOST, _Mode.ZONE) and chr(c) in "!$&'()*+,;=:[]<>\"":
        return False
    if chr(c) in "-_.~":
        return False
    if chr(c) in "$&+,/:;=?@":
        if mode is _Mode.PATH:
            return c == ord("?")
        if mode is _Mode.USER_PASSWORD:
            return chr(c) in "@/?:"
        if mode is _Mode.FRAGMENT:
            return False
    return not (mode is _Mode.FRAGMENT and chr(c) in "!()*")


def _escape(text: str, mode: _Mode) -> str:
    """``escape``: every byte ``shouldEscape`` names as ``%XX`` (upper-case hex)."""
    out: list[str] = []
    for c in text.encode("utf-8", "surrogateescape"):
        out.append(f"%{c:02X}" if _should_escape(c, mode) else chr(c))
    return "".join(out)


def _unescape(text: str, mode: _Mode) -> str:
    """``unescape``: decode ``%XX``; refuse bad escapes and, in a host, bytes it may not hold."""
    data = text.encode("utf-8", "surrogateescape")
    out = bytearray()
    i = 0
    while i < len(data):
        c = data[i]
        if c == ord("%"):
            if i + 2 >= len(data) or data[i + 1] not in _HEX or data[i + 2] not in _HEX:
                raise _UrlError("invalid URL escape")
            value = int(data[i + 1:i + 3], 16)
            if mode is _Mode.HOST and value < 0x80 and data[i:i + 3] != b"%25":
                raise _UrlError("invalid URL escape in host")  # only non-ASCII bytes may be escaped
            if mode is _Mode.ZONE and data[i:i + 3] != b"%25" and value != 0x20 \
                    and _should_escape(value, _Mode.HOST):
                raise _UrlError("invalid URL escape in zone")  # only what could be written as it is
            out.append(value)
            i += 3
            continue
        if mode in (_Mode.HOST, _Mode.ZONE) and c < 0x80 and _should_escape(c, mode):
            raise _UrlError("invalid character in host name")
        out.append(c)
        i += 1
    return out.decode("utf-8", "surrogateescape")


def _valid_encoded(text: str, mode: _Mode) -> bool:
    """``validEncoded``: whether ``text`` may be printed as it was given."""
    return all(ch in "!$&'()*+,;=:@[]%" or not _should_escape(c, mode)
               for ch, c in ((chr(c), c) for c in text.encode("utf-8", "surrogateescape")))


def _valid_optional_port(port: str) -> bool:
    return port == "" or (port[0] == ":" and all("0" <= ch <= "9" for ch in port[1:]))


def _valid_userinfo(text: str) -> bool:
    return all(ch.isascii() and (ch.isalnum() or ch in "-._:~!$&'()*+,;=%@") for ch in text)


def _contains_ctl(text: str) -> bool:
    return any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text)


def _scheme(raw: str) -> tuple[str, str]:
    """``getScheme``: ``(scheme, rest)``; no scheme when a character before ``:`` can't be one."""
    for i, ch in enumerate(raw):
        if ch.isascii() and ch.isalpha():
            continue
        if ch.isascii() and (ch.isdigit() or ch in "+-."):
            if i == 0:
                return "", raw
            continue
        if ch == ":":
            if i == 0:
                raise _UrlError("missing protocol scheme")
            return raw[:i], raw[i + 1:]
        return "", raw
    return "", raw


def _host(host: str) -> str:
    """``parseHost``: the port must be digits; a bracketed literal must be an IPv6 address."""
    if host.startswith("["):
        end = host.rfind("]")
        if end < 0:
            raise _UrlError("missing ']' in host")
        if not _valid_optional_port(host[end + 1:]):
            raise _UrlError("invalid port after host")
        zone = host.find("%25", 0, end)
        literal = _unescape(host[1:zone if zone >= 0 else end], _Mode.HOST)
        try:
            ipaddress.IPv6Address(literal)
        except ValueError:
            raise _UrlError("invalid IP-literal") from None
        if zone >= 0:
            return (_unescape(host[:zone], _Mode.HOST) + _unescape(host[zone:end], _Mode.ZONE)
                    + _unescape(host[end:], _Mode.HOST))
    elif (colon := host.rfind(":")) >= 0 and not _valid_optional_port(host[colon:]):
        raise _UrlError("invalid port after host")
    return _unescape(host, _Mode.HOST)


@dataclass(slots=True)
class _User:
    name: str
    password: str | None

    def string(self) -> str:
        text = _escape(self.name, _Mode.USER_PASSWORD)
        return text if self.password is None else f"{text}:{_escape(self.password, _Mode.USER_PASSWORD)}"


@dataclass(slots=True)
class _GoUrl:
    """The fields of Go's ``url.URL`` that ``String`` prints."""

    scheme: str = ""
    opaque: str = ""
    user: _User | None = None
    host: str = ""
    path: str = ""
    raw_path: str = ""
    omit_host: bool = False
    force_query: bool = False
    raw_query: str = ""
    fragment: str = ""
    raw_fragment: str = ""

    @classmethod
    def parse(cls, raw: str) -> _GoUrl:
        """``url.Parse``."""
        without_fragment, has_fragment, fragment = raw.partition("#")
        url = cls._parse(without_fragment)
        if has_fragment and fragment:
            url.fragment = _unescape(fragment, _Mode.FRAGMENT)
            url.raw_fragment = "" if _escape(url.fragment, _Mode.FRAGMENT) == fragment else fragment
        return url

    @classmethod
    def _parse(cls, raw: str) -> _GoUrl:
        if _contains_ctl(raw):
            raise _UrlError("invalid control character in URL")
        url = cls()
        if raw == "*":
            url.path = "*"
            return url
        scheme, rest = _scheme(raw)
        url.scheme = scheme.lower()
        if rest.endswith("?") and rest.count("?") == 1:
            url.force_query, rest = True, rest[:-1]
        else:
            rest, _, url.raw_query = rest.partition("?")
        if not rest.startswith("/"):
            if url.scheme:
                url.opaque = rest
                return url
            if ":" in rest.partition("/")[0]:
                raise _UrlError("first path segment in URL cannot contain colon")
        if (url.scheme or not rest.startswith("///")) and rest.startswith("//"):
            authority, slash, path = rest[2:].partition("/")
            rest = slash + path
            url.user, url.host = _authority(authority)
        elif url.scheme and rest.startswith("/"):
            url.omit_host = True
        url.path = _unescape(rest, _Mode.PATH)
        url.raw_path = "" if _escape(url.path, _Mode.PATH) == rest else rest
        return url

    def _escaped(self, value: str, raw: str, mode: _Mode) -> str:
        """``EscapedPath`` / ``EscapedFragment``: the raw form when it is valid and means the same."""
        if raw and _valid_encoded(raw, mode):
            try:
                if _unescape(raw, mode) == value:
                    return raw
            except _UrlError:
                pass
        if mode is _Mode.PATH and value == "*":
            return "*"
        return _escape(value, mode)

    def string(self) -> str:
        """``URL.String``."""
        out: list[str] = []
        if self.scheme:
            out.append(self.scheme + ":")
        if self.opaque:
            out.append(self.opaque)
        else:
            if (self.scheme or self.host or self.user is not None) and not (
                    self.omit_host and not self.host and self.user is None):
                if self.host or self.path or self.user is not None:
                    out.append("//")
                if self.user is not None:
                    out.append(self.user.string() + "@")
                if self.host:
                    out.append(_escape(self.host, _Mode.HOST))
            path = self._escaped(self.path, self.raw_path, _Mode.PATH)
            if path and path[0] != "/" and self.host:
                out.append("/")
            if not out and ":" in path.partition("/")[0]:
                out.append("./")
            out.append(path)
        if self.force_query or self.raw_query:
            out.append("?" + self.raw_query)
        if self.fragment:
            out.append("#" + self._escaped(self.fragment, self.raw_fragment, _Mode.FRAGMENT))
        return "".join(out)


def _authority(authority: str) -> tuple[_User | None, str]:
    """``parseAuthority``: user info up to the last ``@``, then the host."""
    at = authority.rfind("@")
    host = _host(authority[at + 1:] if at >= 0 else authority)
    if at < 0:
        return None, host
    userinfo = authority[:at]
    if not _valid_userinfo(userinfo):
        raise _UrlError("invalid userinfo")
    name, colon, password = userinfo.partition(":")
    return _User(_unescape(name, _Mode.USER_PASSWORD),
                 _unescape(password, _Mode.USER_PASSWORD) if colon else None), host
