"""GitHub App authentication: JWT, installation lookup, installation tokens for git and the API.

Everything runs against the PR host test server's GitHub App endpoints (real HTTP on
127.0.0.1, JWTs verified against the App's public key) and the git server behind it,
which accepts the installation tokens it minted until they expire or are revoked.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from git_setup import GitSetup, deployment_manifest
from kubernetes.client import ApiClient
from reload_helpers import configmap, create, events
from test_git_sink import git_controller, git_workload, put_data, wait_event

from gitops_reloader.errors import HostAuthError, RemoteRefused
from gitops_reloader.gitops.auth import GitAuth
from gitops_reloader.gitops.gitconfig import parse_git_config
from gitops_reloader.gitops.hosts import host_for
from gitops_reloader.gitops.hosts.githubapp import (
    JWT_LIFETIME,
    REFRESH_MARGIN,
    AppTokens,
    app_jwt,
    app_tokens,
    noreply_domain,
)
from gitops_reloader.gitops.remotehead import ask_remote
from gitops_reloader.gitops.repo import Repository
from gitops_reloader.sinks.gitwiring import open_repository
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import wait_for
from gitops_reloader.testing.prhost import PrHost

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

REPO = "org/app"
APP_ID = 31337


def _key_pair() -> tuple[bytes, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def app_host(tmp_path: Path, githost: GitHostServer) -> tuple[PrHost, str, Path]:
    """The PR host with the App registered, its API URL and the App's private key file."""
    githost.create_repo(REPO, {"deploy.yaml": "kind: Deployment\nreplicas: 1\n"})
    private, public = _key_pair()
    key_file = tmp_path / "app-key.pem"
    key_file.write_bytes(private)
    key_file.chmod(0o400)
    prhost = PrHost(githost)
    api = prhost.mount("github")
    prhost.register_github_app(APP_ID, public)
    return prhost, api, key_file


def _tokens(api: str, key_file: Path, **kwargs: object) -> AppTokens:
    return AppTokens(app_id=str(APP_ID), private_key_file=str(key_file), repository=REPO, api_url=api,
                     **kwargs)  # type: ignore[arg-type]


def _repository(githost: GitHostServer, tmp_path: Path, tokens: AppTokens, name: str = "wc") -> Repository:
    return Repository(githost.repo_url(REPO), branch="main", workdir=tmp_path / name,
                      auth=GitAuth(username="x-access-token"), token_source=tokens)


def _commit_and_push(repo: Repository, replicas: int) -> str:
    repo.sync()
    repo.write("deploy.yaml", f"kind: Deployment\nreplicas: {replicas}\n".encode())
    sha = repo.commit(f"replicas {replicas}", ["deploy.yaml"])
    assert sha is not None
    repo.push()
    return sha


def test_github_app_jwt_claims_follow_githubs_limits(tmp_path: Path) -> None:
    private, public = _key_pair()
    token = app_jwt("42", private, now=1_800_000_000)
    claims = jwt.decode(token, public, algorithms=["RS256"],
                        options={"verify_exp": False, "verify_iat": False})
    assert claims == {"iat": 1_800_000_000 - 60, "exp": 1_800_000_000 + JWT_LIFETIME, "iss": "42"}
    assert claims["exp"] - 1_800_000_000 <= 600  # GitHub refuses exp more than 10 minutes ahead


def test_github_app_token_exchange_serves_git_and_the_api(
        tmp_path: Path, githost: GitHostServer, app_host: tuple[PrHost, str, Path]) -> None:
    prhost, api, key_file = app_host
    tokens = _tokens(api, key_file)
    repo = _repository(githost, tmp_path, tokens)
    sha = _commit_and_push(repo, 2)
    assert githost.branches(REPO)["main"] == sha
    host = host_for("github", api, "", token_source=tokens)
    repo.checkout_new_branch_from(sha, "gitops-reloader/web")
    repo.write("deploy.yaml", b"kind: Deployment\nreplicas: 3\n")
    repo.commit("replicas 3", ["deploy.yaml"])
    repo.push_branch("HEAD", "gitops-reloader/web", expected_remote_sha=None)
    pull = host.create(REPO, head="gitops-reloader/web", base="main", title="reload", body="b")
    assert prhost.pulls(REPO)[0]["number"] == pull.number
    calls = [(r.method, r.path, r.status) for r in prhost.requests]
    assert ("GET", f"/api/v3/repos/{REPO}/installation", 200) in calls
    assert ("POST", "/api/v3/app/installations/4242/access_tokens", 201) in calls
    assert prhost.app_token_exchanges == 1 == tokens.exchanges  # one token for git and API alike
    assert tokens.installation_id == 4242


def test_github_app_refreshes_the_token_before_it_expires(
        tmp_path: Path, githost: GitHostServer, app_host: tuple[PrHost, str, Path]) -> None:
    prhost, api, key_file = app_host
    clock = _Clock(1_900_000_000.0)
    prhost.register_github_app(APP_ID, _public_of(key_file), clock=clock, token_lifetime=3600)
    tokens = _tokens(api, key_file, clock=clock, installation_id=4242)
    first = tokens.current()
    clock.now += 3600 - REFRESH_MARGIN - 1
    assert tokens.current() == first and tokens.exchanges == 1  # still far enough from expiry
    clock.now += 2  # within the margin: a new token before the old one expires
    second = tokens.current()
    assert second != first and tokens.exchanges == 2 == prhost.app_token_exchanges
    _commit_and_push(_repository(githost, tmp_path, tokens), 4)  # the new token works for git


def _pushed_once(githost: GitHostServer, tmp_path: Path, api: str, key_file: Path,
                 ) -> tuple[AppTokens, Repository]:
    """The App's tokens and a clone that has pushed one commit with them."""
    tokens = _tokens(api, key_file)
    repo = _repository(githost, tmp_path, tokens)
    _commit_and_push(repo, 2)
    return tokens, repo


def test_github_app_expired_token_mid_run_fails_no_push(
        tmp_path: Path, githost: GitHostServer, app_host: tuple[PrHost, str, Path]) -> None:
    prhost, api, key_file = app_host
    tokens, repo = _pushed_once(githost, tmp_path, api, key_file)
    host = host_for("github", api, "", token_source=tokens)
    prhost.expire_app_tokens()  # revoked while our cache still thinks it has 55 minutes
    sha = _commit_and_push(repo, 5)  # git: 401, one new token, the same push again
    assert githost.branches(REPO)["main"] == sha and tokens.exchanges == 2
    prhost.expire_app_tokens()
    assert host.find_open(REPO, head="gitops-reloader/web", base="main") is None  # API: 401, renewed
    assert tokens.exchanges == 3
    statuses = [r.status for r in prhost.requests if r.path.endswith("/pulls")]
    assert statuses == [401, 200]


def test_github_app_refused_twice_is_a_refusal_not_a_loop(
        tmp_path: Path, githost: GitHostServer, app_host: tuple[PrHost, str, Path]) -> None:
    prhost, api, key_file = app_host
    _, repo = _pushed_once(githost, tmp_path, api, key_file)
    _, stranger = _key_pair()
    prhost.register_github_app(APP_ID, stranger)  # the App's key was rotated on GitHub only
    prhost.expire_app_tokens()
    prhost.clear_requests()
    with pytest.raises(RemoteRefused) as refused:
        _commit_and_push(repo, 6)
    assert refused.value.reason == "CredentialsRefused"
    assert "ghs_" not in str(refused.value)
    mints = [r for r in prhost.requests if r.path.endswith("/access_tokens")]
    assert [r.status for r in mints] == [401]  # asked once for a new token, refused: no loop


def test_github_app_enterprise_base_url_from_the_clone_url(
        tmp_path: Path, githost: GitHostServer, app_host: tuple[PrHost, str, Path]) -> None:
    prhost, api, key_file = app_host
    public = parse_git_config(_app_config("https://github.com/org/app.git", key_file))
    assert public.repositories[0].github_app.api_url == "https://api.github.com"
    ghes = parse_git_config(_app_config("git@ghe.example.com:org/app.git", key_file))
    assert ghes.repositories[0].github_app.api_url == "https://ghe.example.com/api/v3"
    local = parse_git_config(_app_config(githost.repo_url(REPO), key_file))
    app = local.repositories[0].github_app
    assert app.api_url == api and app.repository == REPO  # http://127.0.0.1:port/api/v3: GHES layout
    tokens = app_tokens(app)
    assert tokens is app_tokens(app)  # one per App and repository in the process
    assert tokens.current().startswith("ghs_") and prhost.app_token_exchanges == 1
    assert ask_remote(local.repositories[0]) == "main"  # the default-branch lookup uses the App too


def test_github_app_commits_are_authored_as_the_app(
        tmp_path: Path, githost: GitHostServer, app_host: tuple[PrHost, str, Path]) -> None:
    key_file = app_host[2]
    config = parse_git_config(_app_config(githost.repo_url(REPO), key_file, name="as-app"))
    handle = open_repository(config.repositories[0], tmp_path / "cache")
    sha = _commit_and_push(handle.repo, 7)
    author = githost.log(REPO)[0]
    assert author[0] == sha
    shown = _git_show(githost, sha)
    login = "gitops-reloader[bot]"
    # The test host is laid out as an Enterprise Server (http://127.0.0.1:PORT/api/v3): its own
    # noreply domain, as GitHub Enterprise Server gives its bots.
    assert shown == f"{login} <190001+{login}@users.noreply.127.0.0.1>|{login}"
    assert "ghs_" not in githost.all_history_text(REPO)


def _git_show(githost: GitHostServer, sha: str) -> str:
    import subprocess

    out = subprocess.run(["git", f"--git-dir={githost.bare_path(REPO)}", "show", "-s",
                          "--format=%an <%ae>|%cn", sha], capture_output=True, check=True, text=True)
    return out.stdout.strip()


def _public_of(key_file: Path) -> bytes:
    key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    return key.public_key().public_bytes(serialization.Encoding.PEM,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


def _app_config(url: str, key_file: Path, *, name: str = "manifests") -> str:
    return (f"repositories:\n  - name: {name}\n    url: {url}\n"
            f"    githubApp:\n      appId: {APP_ID}\n      privateKeyFile: {key_file}\n")


# --- issue 40: the bot, a reinstalled App, Enterprise Server, the JWT checks, key rotation --------


def test_github_app_bot_user_is_looked_up_with_the_installation_token_not_the_jwt(
        app_host: tuple[PrHost, str, Path]) -> None:
    """GitHub accepts a JWT only on the App's own endpoints: ``GET /app`` with the JWT, then
    ``GET /users/<slug>[bot]`` with the installation token (as create-github-app-token does)."""
    prhost, api, key_file = app_host
    tokens = _tokens(api, key_file)
    author = tokens.author()
    assert author.name == "gitops-reloader[bot]"
    assert author.email == "190001+gitops-reloader[bot]@users.noreply.127.0.0.1"
    lookups = [r for r in prhost.requests if r.path.startswith("/api/v3/users/")]
    assert [r.status for r in lookups] == [200]
    assert lookups[0].auth == "app-token"  # not the JWT
    assert [r.auth for r in prhost.requests if r.path == "/api/v3/app"] == ["jwt"]


def test_github_app_server_refuses_a_jwt_on_the_users_endpoint(app_host: tuple[PrHost, str, Path]) -> None:
    _, api, key_file = app_host
    jwt_token = _tokens(api, key_file).jwt()
    with httpx.Client() as client:
        refused = client.get(f"{api}/users/gitops-reloader%5Bbot%5D",
                             headers={"Authorization": f"Bearer {jwt_token}"})
        anonymous = client.get(f"{api}/users/gitops-reloader%5Bbot%5D")
    assert refused.status_code == 401 and refused.json()["message"] == "Bad credentials"
    assert anonymous.status_code == 200 and anonymous.json()["type"] == "Bot"


def test_github_app_reinstalled_app_is_looked_up_again_once_and_said(
        tmp_path: Path, githost: GitHostServer, app_host: tuple[PrHost, str, Path]) -> None:
    """After the App is uninstalled and installed again (a new installation id), the next token
    request gets 404: the installation is looked up again, once, and a notice says so (the git
    sinks make it a ``GitHubAppReinstalled`` Event); git keeps working without a restart."""
    prhost, api, key_file = app_host
    tokens, repo = _pushed_once(githost, tmp_path, api, key_file)
    assert tokens.installation_id == 4242 and tokens.notices() == []
    prhost.reinstall_github_app(5151)
    sha = _commit_and_push(repo, 8)  # 401 (revoked) → mint: 404 → look up 5151 → mint
    assert githost.branches(REPO)["main"] == sha
    assert tokens.installation_id == 5151
    [notice] = tokens.notices()
    assert "installation 4242 is gone" in notice and "installation 5151 now" in notice
    assert tokens.notices() == []  # said once
    mints = [(r.path, r.status) for r in prhost.requests if r.path.endswith("/access_tokens")]
    assert mints[-2:] == [("/api/v3/app/installations/4242/access_tokens", 404),
                          ("/api/v3/app/installations/5151/access_tokens", 201)]


def test_github_app_a_configured_installation_gone_is_looked_up_once_not_in_a_loop(
        app_host: tuple[PrHost, str, Path]) -> None:
    """A configured installation id that is gone: one lookup of the one that covers the repository,
    said once; a repository no installation covers is a refusal, not a loop."""
    prhost, api, key_file = app_host
    tokens = _tokens(api, key_file, installation_id=999)
    assert tokens.current().startswith("ghs_") and tokens.installation_id == 4242
    assert len(tokens.notices()) == 1
    stranger = AppTokens(app_id=str(APP_ID), private_key_file=str(key_file), repository="org/absent",
                         api_url=api, installation_id=999)
    prhost.clear_requests()
    with pytest.raises(HostAuthError):
        stranger.current()
    assert [(r.method, r.status) for r in prhost.requests] == [("POST", 404), ("GET", 404)]


@pytest.mark.parametrize(("api_url", "domain"), [
    ("https://api.github.com", "users.noreply.github.com"),
    ("https://ghe.example.com/api/v3", "users.noreply.ghe.example.com"),
    ("https://GHE.Example.com:8443/api/v3", "users.noreply.ghe.example.com"),
])
def test_github_app_noreply_domain_follows_the_api_base_url(api_url: str, domain: str) -> None:
    assert noreply_domain(api_url) == domain


def _signed(private: bytes, **claims: object) -> str:
    return jwt.encode(claims, private, algorithm="RS256")


@pytest.mark.parametrize(("claims", "message"), [
    ({"iss": "1"}, "Integration not found"),
    ({"exp": 700}, "too far in the future"),
    ({"exp": -10}, "'Expiration time' claim ('exp') must be a numeric value"),
    ({"iat": 120}, "'Issued at' claim ('iat') must be an Integer"),
])
def test_github_app_server_checks_each_jwt_claim_as_github_does(
        tmp_path: Path, githost: GitHostServer, claims: dict[str, int | str], message: str) -> None:
    """The test server's JWT checks: ``iss`` an unknown App, ``exp`` more than 10 minutes ahead or
    in the past, ``iat`` in the future (past GitHub's 60 s leeway) — each a 401 with GitHub's text;
    the same JWT with sound claims is accepted."""
    githost.create_repo(REPO, {"deploy.yaml": "kind: Deployment\n"})
    private, public = _key_pair()
    clock = _Clock(2_000_000_000.0)
    prhost = PrHost(githost)
    api = prhost.mount("github")
    prhost.register_github_app(APP_ID, public, clock=clock)
    now = int(clock.now)
    sound: dict[str, int | str] = {"iss": str(APP_ID), "iat": now - 60, "exp": now + 540}
    wrong = {**sound, **{k: (now + v if k in ("exp", "iat") else v) for k, v in claims.items()}}
    with httpx.Client() as client:
        good = client.get(f"{api}/app", headers={"Authorization": f"Bearer {_signed(private, **sound)}"})
        bad = client.get(f"{api}/app", headers={"Authorization": f"Bearer {_signed(private, **wrong)}"})
    assert good.status_code == 200
    assert bad.status_code == 401 and message in bad.json()["message"]


def test_github_app_private_key_rotated_in_its_file_signs_without_a_restart(
        tmp_path: Path, githost: GitHostServer, app_host: tuple[PrHost, str, Path]) -> None:
    """The App's key is rotated on GitHub and in the mounted Secret (the kubelet swaps the file):
    the next exchange signs with the new key, no restart, the old JWT no longer accepted."""
    prhost, api, key_file = app_host
    tokens, repo = _pushed_once(githost, tmp_path, api, key_file)
    old_jwt = tokens.jwt()
    private, public = _key_pair()
    prhost.register_github_app(APP_ID, public)  # GitHub holds the new key only
    prhost.expire_app_tokens()
    rotated = key_file.with_name("app-key.new")
    rotated.write_bytes(private)
    rotated.replace(key_file)  # a new file in its place, as the kubelet's atomic swap
    sha = _commit_and_push(repo, 9)
    assert githost.branches(REPO)["main"] == sha and tokens.exchanges == 2
    with httpx.Client() as client:
        assert client.get(f"{api}/app", headers={"Authorization": f"Bearer {old_jwt}"}).status_code == 401


def test_github_app_reinstalled_is_said_in_an_event_on_the_workload_it_reloads(
        tmp_path: Path, githost: GitHostServer, app_host: tuple[PrHost, str, Path],
        api_client: ApiClient) -> None:
    """The git sink, an App reinstalled between two reloads: the second reload's commit lands
    without a restart and the workload gets a ``GitHubAppReinstalled`` Warning Event."""
    prhost, _, key_file = app_host
    githost.create_repo("org/web", {"web.yaml": deployment_manifest("web")})
    setup = GitSetup(tmp_path, githost)
    setup.config_path.write_text(
        f"defaultRepository: web\nrepositories:\n  - name: web\n    url: {githost.repo_url('org/web')}\n"
        f"    branch: main\n    githubApp:\n      appId: {APP_ID}\n      privateKeyFile: {key_file}\n")
    create(api_client, configmap("app-config", {"k": "1"}))
    create(api_client, git_workload("web"))
    with git_controller(api_client, setup):
        put_data(api_client, "ConfigMap", "app-config", {"k": "2"})
        wait_for(lambda: len(githost.log("org/web")) == 2, timeout=30, message="the first reload's commit")
        prhost.reinstall_github_app(5151)  # uninstalled and installed again: its tokens revoked
        put_data(api_client, "ConfigMap", "app-config", {"k": "3"})
        wait_for(lambda: len(githost.log("org/web")) == 3, timeout=30, message="the second reload's commit")
        event = wait_event(api_client, "web", "GitHubAppReinstalled")
    assert event["type"] == "Warning"
    assert "installation 5151 now" in event["message"] and "ghs_" not in event["message"]
    assert [e["reason"] for e in events(api_client, "web")].count("GitHubAppReinstalled") == 1
