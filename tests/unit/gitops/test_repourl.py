"""Argo CD's repository URL comparison (argo-cd v3.5.1 ``util/git/git.go``), with upstream's own cases.

The tables marked *upstream* are argo-cd's ``util/git/git_test.go`` ``TestIsSSHURL``,
``TestIsSSHURLUserName`` and ``TestSameURL`` (v3.5.1), case for case; the others pin the
parts of Go's ``net/url`` that ``NormalizeGitURL`` relies on.
"""

from __future__ import annotations

import pytest

from gitops_reloader.gitops.repourl import (
    is_ssh_url,
    normalize_git_url,
    normalize_git_url_allow_invalid,
    same_url,
)

# upstream TestIsSSHURL
IS_SSH = {
    "git://github.com/argoproj/test.git": False,
    "git@GITHUB.com:argoproj/test.git": True,
    "git@github.com:test": True,
    "git@github.com:test.git": True,
    "https://github.com/argoproj/test": False,
    "https://github.com/argoproj/test.git": False,
    "ssh://git@GITHUB.com:argoproj/test": True,
    "ssh://git@GITHUB.com:argoproj/test.git": True,
    "ssh://git@github.com:test.git": True,
}

# upstream TestIsSSHURLUserName
SSH_USERS = [
    ("ssh://john@john-server.org:29418/project", "john"),
    ("john@john-server.org:29418/project", "john"),
    ("john@doe.org@john-server.org:29418/project", "john@doe.org"),
    ("ssh://john@doe.org@john-server.org:29418/project", "john@doe.org"),
    ("john@doe.org@john-server.org:project", "john@doe.org"),
    ("john@doe.org@john-server.org:29418/project", "john@doe.org"),
]

# upstream TestSameURL: every pair is the same repository
SAME = {
    "git@GITHUB.com:argoproj/test": "git@github.com:argoproj/test.git",
    "git@GITHUB.com:argoproj/test.git": "git@github.com:argoproj/test.git",
    "git@GITHUB.com:test": "git@github.com:test.git",
    "git@GITHUB.com:test.git": "git@github.com:test.git",
    "https://GITHUB.com/argoproj/test": "https://github.com/argoproj/test.git",
    "https://GITHUB.com/argoproj/test.git": "https://github.com/argoproj/test.git",
    "https://github.com/FOO": "https://github.com/foo",
    "https://github.com/TEST": "https://github.com/TEST.git",
    "https://github.com/TEST.git": "https://github.com/TEST.git",
    "https://github.com:4443/TEST": "https://github.com:4443/TEST.git",
    "https://github.com:4443/TEST.git": "https://github.com:4443/TEST",
    "ssh://git@GITHUB.com/argoproj/test": "git@github.com:argoproj/test.git",
    "ssh://git@GITHUB.com/argoproj/test.git": "git@github.com:argoproj/test.git",
    "ssh://git@GITHUB.com/test.git": "git@github.com:test.git",
    "ssh://git@github.com/test": "git@github.com:test.git",
    " https://github.com/argoproj/test ": "https://github.com/argoproj/test.git",
    "\thttps://github.com/argoproj/test\n": "https://github.com/argoproj/test.git",
    "https://1234.visualstudio.com/myproj/_git/myrepo": "https://1234.visualstudio.com/myproj/_git/myrepo",
    "https://dev.azure.com/1234/myproj/_git/myrepo": "https://dev.azure.com/1234/myproj/_git/myrepo",
}


@pytest.mark.parametrize(("url", "expected"), list(IS_SSH.items()))
def test_ssh_urls_are_recognised_as_upstream_does(url: str, expected: bool) -> None:
    assert is_ssh_url(url)[0] is expected


@pytest.mark.parametrize(("url", "user"), SSH_USERS)
def test_the_ssh_user_is_everything_before_the_last_at(url: str, user: str) -> None:
    assert is_ssh_url(url) == (True, user)


@pytest.mark.parametrize(("left", "right"), list(SAME.items()))
def test_upstream_same_url_pairs_are_the_same_repository(left: str, right: str) -> None:
    assert same_url(left, right) and same_url(right, left)


@pytest.mark.parametrize(("left", "right"), [
    # only case, one trailing .git, surrounding space and the scp-like ssh form are equated
    ("https://github.com/org/app", "git@github.com:org/app"),
    ("https://github.com/org/app", "http://github.com/org/app"),
    ("https://github.com/org/app", "https://github.com:443/org/app"),
    ("https://github.com/org/app", "https://bot@github.com/org/app"),
    ("https://github.com/org/app", "https://github.com/org/app/"),
    ("https://github.com/org/app", "https://github.com/org/app.git.git"),
    ("git@github.com:org/app", "ssh://git@github.com:22/org/app"),
    ("https://github.com/org/app", "https://github.com/org/other"),
    ("", ""),
    ("https://h:port/X", "https://h:port/x"),  # invalid: compared as given
])
def test_other_differences_are_other_repositories(left: str, right: str) -> None:
    assert not same_url(left, right)


@pytest.mark.parametrize(("url", "normalized"), [
    ("git@GITHUB.com:Org/App.git", "git@github.com/org/app"),
    ("ssh://git@github.com:2222/org/app.git", "git@github.com:2222/org/app"),
    ("git@host:2222/org/app", "git@host/2222/org/app"),  # scp-like: the first ':' is a path separator
    ("https://GitHub.com/Org/App.git", "https://github.com/org/app"),
    ("https://u:p@h/x#Frag", "https://u:p@h/x#frag"),
    ("https://h/a b", "https://h/a%20b"),           # Go escapes what a path may not hold
    ("https://h/%41", "https://h/%41"),             # ... and keeps a valid escape as written
    ("https://h/x?q", "https://h/x?q"),
    ("https://[::1]:8443/x", "https://[::1]:8443/x"),
    ("https://[fe80::1%25eth0]/x", "https://[fe80::1%25eth0]/x"),
    ("file:///srv/git/app.git", "file:///srv/git/app"),
    ("/srv/git/app.git", "/srv/git/app"),
    ("\u00a0HTTPS://H/İ\u2003", "https://h/i"),    # Go's TrimSpace and simple lower case
    ("", ""),
    # url.Parse refuses these: "" (and SameURL then compares them as given)
    ("https://h:port/x", ""),
    ("https://[1.2.3.4]/x", ""),
    ("https://[::1/x", ""),
    ("https://h/x%zz", ""),
    ("https://h%41/x", ""),
    ("https://h{}/x", ""),
    ("https://h/x\x7f", ""),
    ("a:b/c:d", "a:b/c:d"),  # a scheme and an opaque part
    ("ab/c:d", "ab/c:d"),
    ("1a:b", ""),            # no scheme, and a colon in the first path segment
    (":x", ""),
])
def test_normalization_follows_go_net_url(url: str, normalized: str) -> None:
    assert normalize_git_url(url) == normalized


def test_an_invalid_url_is_kept_as_given() -> None:
    assert normalize_git_url_allow_invalid(" https://H:port/X ") == " https://H:port/X "
    assert same_url("https://h:port/X", "https://h:port/X")
