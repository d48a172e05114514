"""The git host test server speaks real smart HTTP, with token auth and scripted faults."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from gitops_reloader.testing.githost import GitHostServer

pytestmark = pytest.mark.e2e

TOKEN = "githost-test-token-42"


@pytest.fixture
def host(tmp_path: Path) -> Iterator[GitHostServer]:
    with GitHostServer(tmp_path / "srv", token=TOKEN) as server:
        yield server


@pytest.fixture
def client_env(tmp_path: Path) -> dict[str, str]:
    """A git client environment free of the user's and the system's configuration."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        {
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_AUTHOR_NAME": "Tester",
            "GIT_AUTHOR_EMAIL": "tester@example.com",
            "GIT_COMMITTER_NAME": "Tester",
            "GIT_COMMITTER_EMAIL": "tester@example.com",
        }
    )
    return env


def _basic(password: str, user: str = "anyone") -> str:
    return "Authorization: Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def git(
    env: Mapping[str, str], *args: str, cwd: Path | None = None, header: str | None = None
) -> subprocess.CompletedProcess[str]:
    prefix = ["git", "-c", f"http.extraHeader={header}"] if header else ["git"]
    return subprocess.run(
        [*prefix, *args], cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=60
    )


def commit_file(env: Mapping[str, str], wc: Path, name: str, data: bytes, message: str) -> None:
    (wc / name).write_bytes(data)
    assert git(env, "add", name, cwd=wc).returncode == 0
    assert git(env, "commit", "-q", "-m", message, cwd=wc).returncode == 0


def test_clone_and_push_with_the_token(
    host: GitHostServer, client_env: dict[str, str], tmp_path: Path
) -> None:
    url = host.create_repo("app", {"deploy.yaml": "kind: Deployment\n"})
    assert url == f"{host.url}/app.git"
    assert "@" not in url and TOKEN not in url
    wc = tmp_path / "wc"

    cloned = git(client_env, "clone", url, str(wc), header=_basic(TOKEN))
    assert cloned.returncode == 0, cloned.stderr
    assert (wc / "deploy.yaml").read_text() == "kind: Deployment\n"

    commit_file(client_env, wc, "new.yaml", b"a: 1\n", "add new")
    pushed = git(client_env, "push", "origin", "HEAD:main", cwd=wc, header=_basic(TOKEN))
    assert pushed.returncode == 0, pushed.stderr
    assert [subject for _, subject in host.log("app")] == ["add new", "initial"]
    assert host.read_file("app", "new.yaml") == b"a: 1\n"
    assert host.requests[("POST", "git-receive-pack")] >= 1
    assert host.requests[("POST", "git-upload-pack")] >= 1


def test_credentials_in_the_url_answer_the_basic_challenge(
    host: GitHostServer, client_env: dict[str, str], tmp_path: Path
) -> None:
    url = host.create_repo("app", {"a.txt": "a"})
    with_creds = url.replace("http://", f"http://someone:{TOKEN}@")
    cloned = git(client_env, "clone", with_creds, str(tmp_path / "wc"))
    assert cloned.returncode == 0, cloned.stderr
    # git first asks without credentials; the 401 challenge makes it send them.
    assert host.requests[("GET", "git-upload-pack")] >= 2


def test_bearer_token_is_accepted(
    host: GitHostServer, client_env: dict[str, str], tmp_path: Path
) -> None:
    url = host.create_repo("app", {"a.txt": "a"})
    cloned = git(
        client_env, "clone", url, str(tmp_path / "wc"), header=f"Authorization: Bearer {TOKEN}"
    )
    assert cloned.returncode == 0, cloned.stderr


@pytest.mark.parametrize(
    "header", [_basic("wrong-token"), "Authorization: Bearer wrong-token", None]
)
def test_wrong_or_missing_token_is_refused_with_401(
    host: GitHostServer, client_env: dict[str, str], tmp_path: Path, header: str | None
) -> None:
    url = host.create_repo("app", {"a.txt": "a"})
    cloned = git(client_env, "clone", url, str(tmp_path / "wc"), header=header)
    assert cloned.returncode != 0
    assert "terminal prompts disabled" in cloned.stderr or "Authentication" in cloned.stderr
    assert not (tmp_path / "wc").exists()

    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{url}/info/refs?service=git-upload-pack", timeout=10)
    assert info.value.code == 401
    assert info.value.headers["WWW-Authenticate"] == 'Basic realm="git"'
    info.value.close()


def test_set_down_fails_everything_until_up_again(
    host: GitHostServer, client_env: dict[str, str], tmp_path: Path
) -> None:
    url = host.create_repo("app", {"a.txt": "a"})
    host.set_down(True)
    failed = git(client_env, "clone", url, str(tmp_path / "wc1"), header=_basic(TOKEN))
    assert failed.returncode != 0
    assert "503" in failed.stderr

    host.set_down(False)
    cloned = git(client_env, "clone", url, str(tmp_path / "wc2"), header=_basic(TOKEN))
    assert cloned.returncode == 0, cloned.stderr


def test_reject_pushes_fails_exactly_the_next_n_pushes(
    host: GitHostServer, client_env: dict[str, str], tmp_path: Path
) -> None:
    url = host.create_repo("app", {"a.txt": "a"})
    wc = tmp_path / "wc"
    assert git(client_env, "clone", url, str(wc), header=_basic(TOKEN)).returncode == 0
    commit_file(client_env, wc, "b.txt", b"b", "second")
    host.reject_pushes(2)

    for _ in range(2):
        failed = git(client_env, "push", "origin", "HEAD:main", cwd=wc, header=_basic(TOKEN))
        assert failed.returncode != 0
        assert "503" in failed.stderr
        assert [s for _, s in host.log("app")] == ["initial"]

    pushed = git(client_env, "push", "origin", "HEAD:main", cwd=wc, header=_basic(TOKEN))
    assert pushed.returncode == 0, pushed.stderr
    assert [s for _, s in host.log("app")] == ["second", "initial"]
    # fetches were never affected
    fetched = git(client_env, "fetch", "origin", cwd=wc, header=_basic(TOKEN))
    assert fetched.returncode == 0, fetched.stderr


def test_commit_directly_moves_the_branch_and_deletes_files(host: GitHostServer) -> None:
    host.create_repo("org/app", {"a.yaml": "a: 1\n", "b.yaml": "b: 1\n"})
    first = host.log("org/app")[0][0]

    sha = host.commit_directly(
        "org/app", {"a.yaml": "a: 2\n", "b.yaml": None, "dir/c.yaml": b"c\n"}, message="other"
    )

    assert host.log("org/app") == [(sha, "other"), (first, "initial")]
    assert host.read_file("org/app", "a.yaml") == b"a: 2\n"
    assert host.read_file("org/app", "b.yaml") is None
    assert host.read_file("org/app", "b.yaml", ref=first) == b"b: 1\n"
    assert host.read_file("org/app", "dir/c.yaml") == b"c\n"
    assert host.read_file("org/app", "dir") is None  # a tree, not a file
    assert host.bare_path("org/app") == host.root / "org" / "app.git"


def test_commit_directly_creates_a_missing_branch_from_head(host: GitHostServer) -> None:
    host.create_repo("app", {"a.yaml": "a\n"})
    sha = host.commit_directly("app", {"b.yaml": "b\n"}, branch="feature", message="feat")
    assert [s for _, s in host.log("app", "feature")] == ["feat", "initial"]
    assert host.branches("app") == {"main": host.log("app")[0][0], "feature": sha}
    assert host.log("app", "nope") == []


def test_pushed_history_is_searchable(
    host: GitHostServer, client_env: dict[str, str], tmp_path: Path
) -> None:
    url = host.create_repo("app", {"a.txt": "first line\n"})
    host.commit_directly("app", {"a.txt": "needle-in-history\n"})
    host.commit_directly("app", {"a.txt": "gone again\n"})
    text = host.all_history_text("app")
    assert "needle-in-history" in text
    assert "first line" in text
    assert "never-written" not in text
    assert url.endswith("/app.git")


def test_large_chunked_push_arrives_intact(
    host: GitHostServer, client_env: dict[str, str], tmp_path: Path
) -> None:
    """Pushes above http.postBuffer (1 MiB) are sent chunked, after a probe request."""
    url = host.create_repo("app", {"a.txt": "a"})
    wc = tmp_path / "wc"
    assert git(client_env, "clone", url, str(wc), header=_basic(TOKEN)).returncode == 0
    payload = os.urandom(3 * 1024 * 1024)
    commit_file(client_env, wc, "blob.bin", payload, "big")

    pushed = git(client_env, "push", "origin", "HEAD:main", cwd=wc, header=_basic(TOKEN))

    assert pushed.returncode == 0, pushed.stderr
    assert host.read_file("app", "blob.bin") == payload


def test_create_repo_refuses_duplicates_and_bad_names(host: GitHostServer) -> None:
    host.create_repo("app")
    with pytest.raises(FileExistsError):
        host.create_repo("app")
    for bad in ("../escape", "/abs", "a//b", "a b"):
        with pytest.raises(ValueError):
            host.bare_path(bad)
    with pytest.raises(ValueError):
        host.commit_directly("app", {"../x": "x"})


def test_unknown_repository_is_404(host: GitHostServer) -> None:
    request = urllib.request.Request(
        f"{host.url}/missing.git/info/refs?service=git-upload-pack",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=10)
    assert info.value.code == 404
    info.value.close()


def _json_app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    body = json.dumps(
        {
            "script_name": environ["SCRIPT_NAME"],
            "path_info": environ["PATH_INFO"],
            "method": environ["REQUEST_METHOD"],
            "body": environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)).decode(),
        }
    ).encode()
    start_response("201 Created", [("Content-Type", "application/json")])
    return [body]


def test_add_route_serves_a_mounted_app(host: GitHostServer) -> None:
    host.add_route("/api/v3", _json_app)
    request = urllib.request.Request(
        f"{host.url}/api/v3/repos/o/r/pulls", data=b'{"title": "x"}', method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 201
        answer = json.loads(response.read())
    assert answer == {
        "script_name": "/api/v3",
        "path_info": "/repos/o/r/pulls",
        "method": "POST",
        "body": '{"title": "x"}',
    }
    assert host.requests[("POST", "/api/v3")] == 1

    # /api/v30 is not below /api/v3: it goes to git, which wants credentials.
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{host.url}/api/v30/x", timeout=10)
    assert info.value.code == 401
    info.value.close()

    host.set_down(True)
    with pytest.raises(urllib.error.HTTPError) as down:
        urllib.request.urlopen(f"{host.url}/api/v3/repos", timeout=10)
    assert down.value.code == 503
    down.value.close()


def test_stop_is_idempotent_and_frees_the_port(tmp_path: Path) -> None:
    server = GitHostServer(tmp_path / "srv")
    url = server.url
    server.stop()
    server.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/x.git/info/refs", timeout=2)
