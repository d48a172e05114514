"""Repository against a real git server over real HTTP: sync, commit, push, never force."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
from reload_helpers import GIT_TOKEN

from gitops_reloader.errors import ConfigError, GitError, PushRejected, UnsafePath
from gitops_reloader.gitops.auth import GitAuth
from gitops_reloader.gitops.repo import Author, Repository
from gitops_reloader.testing.githost import GitHostServer

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

TOKEN = GIT_TOKEN




@pytest.fixture
def url(host: GitHostServer) -> str:
    return host.create_repo(
        "app",
        {
            "apps/web/deploy.yaml": "kind: Deployment\nmetadata:\n  name: web\n",
            "apps/web/svc.yml": "kind: Service\n",
            "README.md": "# manifests\n",
        },
    )


def make_repo(url: str, workdir: Path, *, token: str = TOKEN, **kwargs: object) -> Repository:
    return Repository(
        url,
        branch="main",
        workdir=workdir,
        auth=GitAuth(username="bot", token=token),
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture
def repo(url: str, tmp_path: Path) -> Repository:
    return make_repo(url, tmp_path / "wc")


def subjects(host: GitHostServer, branch: str = "main") -> list[str]:
    return [subject for _, subject in host.log("app", branch)]


def exception_texts(exc: BaseException) -> str:
    """str() and repr() of the exception and of everything chained to it."""
    texts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        texts += [str(current), repr(current), repr(current.args)]
        current = current.__cause__ or current.__context__
    return "\n".join(texts)


def token_forms(user: str, token: str) -> list[str]:
    return [token, base64.b64encode(f"{user}:{token}".encode()).decode()]


# -- sync ---------------------------------------------------------------------------


def test_sync_clones_then_fetches(repo: Repository, host: GitHostServer) -> None:
    first = repo.sync()
    assert first == host.log("app")[0][0] == repo.head()
    assert repo.read("apps/web/deploy.yaml") == b"kind: Deployment\nmetadata:\n  name: web\n"

    second = host.commit_directly("app", {"apps/web/deploy.yaml": "changed\n"})
    assert repo.sync() == second
    assert repo.read("apps/web/deploy.yaml") == b"changed\n"
    assert repo.remote_head("main") == second


def test_sync_discards_local_edits_commits_and_untracked_files(
    repo: Repository, host: GitHostServer
) -> None:
    tip = repo.sync()
    repo.write("apps/web/deploy.yaml", b"local edit\n")
    repo.commit("local only", ["apps/web/deploy.yaml"])
    repo.write("README.md", b"dirty\n")
    repo.write("untracked/new.yaml", b"x: 1\n")

    assert repo.sync() == tip
    assert repo.read("apps/web/deploy.yaml") == b"kind: Deployment\nmetadata:\n  name: web\n"
    assert repo.read("README.md") == b"# manifests\n"
    assert repo.read("untracked/new.yaml") is None
    assert subjects(host) == ["initial"]


def test_sync_of_a_missing_branch_is_a_git_error(url: str, tmp_path: Path) -> None:
    repo = Repository(url, branch="nope", workdir=tmp_path / "wc", auth=GitAuth(token=TOKEN))
    with pytest.raises(GitError, match="nope"):
        repo.sync()


def test_sync_refuses_a_foreign_non_empty_workdir(url: str, tmp_path: Path) -> None:
    workdir = tmp_path / "wc"
    workdir.mkdir()
    (workdir / "precious.txt").write_text("keep me")
    with pytest.raises(GitError, match="not a git repository"):
        make_repo(url, workdir).sync()
    assert (workdir / "precious.txt").read_text() == "keep me"


def test_methods_before_sync_ask_for_sync(repo: Repository) -> None:
    with pytest.raises(GitError, match=r"sync\(\)"):
        repo.head()
    with pytest.raises(GitError, match=r"sync\(\)"):
        repo.commit("x", ["a.yaml"])


# -- write, commit, push ------------------------------------------------------------------


def test_write_commit_push_lands_on_the_remote(repo: Repository, host: GitHostServer) -> None:
    repo.sync()
    repo.write("apps/web/deploy.yaml", b"kind: Deployment\n# bumped\n")

    sha = repo.commit("reload ns/Deployment/web", ["apps/web/deploy.yaml"])
    assert sha is not None and sha == repo.head()
    repo.push()

    assert host.log("app")[0] == (sha, "reload ns/Deployment/web")
    assert host.read_file("app", "apps/web/deploy.yaml") == b"kind: Deployment\n# bumped\n"
    author = subprocess.run(
        ["git", f"--git-dir={host.bare_path('app')}", "log", "-1", "--format=%an <%ae>|%cn"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert author == "gitops-reloader <gitops-reloader@localhost>|gitops-reloader"


def test_commit_uses_the_configured_author(url: str, host: GitHostServer, tmp_path: Path) -> None:
    repo = make_repo(url, tmp_path / "wc", author=Author(name="Bot", email="bot@example.org"))
    repo.sync()
    repo.write("README.md", b"changed\n")
    assert repo.commit("msg", ["README.md"])
    repo.push()
    log = subprocess.run(
        ["git", f"--git-dir={host.bare_path('app')}", "log", "-1", "--format=%an %ae %cn %ce"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert log == "Bot bot@example.org Bot bot@example.org"


def test_commit_without_a_change_returns_none(repo: Repository, host: GitHostServer) -> None:
    repo.sync()
    assert repo.commit("nothing", ["apps/web/deploy.yaml"]) is None
    repo.write("apps/web/deploy.yaml", b"kind: Deployment\nmetadata:\n  name: web\n")
    assert repo.commit("same bytes", ["apps/web/deploy.yaml"]) is None
    assert repo.commit("no paths", []) is None
    assert subjects(host) == ["initial"]


def test_commit_stages_exactly_the_given_paths(repo: Repository, host: GitHostServer) -> None:
    repo.sync()
    repo.write("apps/web/deploy.yaml", b"one\n")
    repo.write("README.md", b"not this one\n")
    repo.write("new/file.yaml", b"new\n")

    assert repo.commit("two files", ["apps/web/deploy.yaml", "new/file.yaml"])
    repo.push()

    assert host.read_file("app", "apps/web/deploy.yaml") == b"one\n"
    assert host.read_file("app", "new/file.yaml") == b"new\n"
    assert host.read_file("app", "README.md") == b"# manifests\n"


def test_commit_records_a_deleted_path(repo: Repository, host: GitHostServer) -> None:
    repo.sync()
    (repo.workdir / "apps/web/svc.yml").unlink()
    assert repo.commit("drop svc", ["apps/web/svc.yml"])
    repo.push()
    assert host.read_file("app", "apps/web/svc.yml") is None


def test_push_after_the_remote_moved_on_is_rejected_then_reapplied_without_force(
    repo: Repository, host: GitHostServer
) -> None:
    repo.sync()
    repo.write("apps/web/deploy.yaml", b"ours\n")
    ours = repo.commit("ours", ["apps/web/deploy.yaml"])
    theirs = host.commit_directly("app", {"other.yaml": "theirs\n"}, message="theirs")

    with pytest.raises(PushRejected) as rejected:
        repo.push()
    assert rejected.value.retryable
    assert host.log("app")[0][0] == theirs  # nothing was overwritten

    # The caller's retry: sync onto the new tip, re-apply the edit, commit, push.
    assert repo.sync() == theirs
    repo.write("apps/web/deploy.yaml", b"ours\n")
    again = repo.commit("ours", ["apps/web/deploy.yaml"])
    assert again is not None and again != ours
    repo.push()

    assert subjects(host) == ["ours", "theirs", "initial"]
    assert host.read_file("app", "other.yaml") == b"theirs\n"
    assert host.read_file("app", "apps/web/deploy.yaml") == b"ours\n"


def test_push_of_a_non_fast_forward_known_tip_is_rejected(
    repo: Repository, host: GitHostServer, tmp_path: Path
) -> None:
    """The remote tip is known locally (fetched) but not an ancestor: non-fast-forward."""
    repo.sync()
    repo.write("README.md", b"ours\n")
    assert repo.commit("ours", ["README.md"])
    host.commit_directly("app", {"README.md": "theirs\n"}, message="theirs")
    # A plain fetch (with the same credentials) makes the new tip known locally.
    fetch = subprocess.run(
        [
            "git",
            "-c",
            "http.extraHeader=Authorization: Bearer " + TOKEN,
            "fetch",
            "-q",
            "origin",
        ],
        cwd=repo.workdir,
        capture_output=True,
        text=True,
    )
    assert fetch.returncode == 0, fetch.stderr

    with pytest.raises(PushRejected, match="non-fast-forward"):
        repo.push()
    assert subjects(host) == ["theirs", "initial"]


def test_push_failing_on_the_server_is_a_git_error_not_a_rejection(
    repo: Repository, host: GitHostServer
) -> None:
    repo.sync()
    repo.write("README.md", b"x\n")
    assert repo.commit("x", ["README.md"])
    host.reject_pushes(1)

    with pytest.raises(GitError) as failed:
        repo.push()
    assert not isinstance(failed.value, PushRejected)
    assert "503" in str(failed.value)
    for form in token_forms("bot", TOKEN):
        assert form not in exception_texts(failed.value)

    repo.push()  # the next attempt goes through
    assert subjects(host) == ["x", "initial"]


def test_host_down_is_a_git_error(repo: Repository, host: GitHostServer) -> None:
    repo.sync()
    host.set_down(True)
    with pytest.raises(GitError, match="503"):
        repo.sync()
    with pytest.raises(GitError):
        repo.remote_head("main")


def test_signed_commits_carry_a_signature(url: str, host: GitHostServer, tmp_path: Path) -> None:
    key = tmp_path / "signing_key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30
    )
    (Path(os.environ["HOME"]) / ".gitconfig").write_text(
        f"[gpg]\n\tformat = ssh\n[user]\n\tsigningkey = {key}.pub\n"
    )
    repo = make_repo(url, tmp_path / "wc", sign=True)
    repo.sync()
    repo.write("README.md", b"signed\n")
    sha = repo.commit("signed", ["README.md"])
    assert sha is not None
    raw = subprocess.run(
        ["git", "cat-file", "commit", sha], cwd=repo.workdir, capture_output=True, text=True
    ).stdout
    assert "-----BEGIN SSH SIGNATURE-----" in raw


def test_signing_without_a_key_is_a_git_error(url: str, tmp_path: Path) -> None:
    (Path(os.environ["HOME"]) / ".gitconfig").write_text(
        "[gpg]\n\tformat = ssh\n[user]\n\tsigningkey = /nonexistent/key.pub\n"
    )
    repo = make_repo(url, tmp_path / "wc", sign=True)
    repo.sync()
    repo.write("README.md", b"signed\n")
    with pytest.raises(GitError, match="commit"):
        repo.commit("signed", ["README.md"])


def test_a_silent_remote_times_out(tmp_path: Path) -> None:
    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        repo = make_repo(f"http://127.0.0.1:{port}/app.git", tmp_path / "wc", timeout=1.0)
        started = time.monotonic()
        with pytest.raises(GitError, match=r"(?i)timeout"):
            repo.sync()
        assert time.monotonic() - started < 30


def test_push_has_no_force_parameter() -> None:
    import inspect

    assert list(inspect.signature(Repository.push).parameters) == ["self"]


# -- auth -----------------------------------------------------------------------------------


def test_wrong_token_is_a_git_error_without_the_token_anywhere(url: str, tmp_path: Path) -> None:
    wrong = "wr0ng-but-still-secret-token"
    repo = make_repo(url, tmp_path / "wc", token=wrong)

    with pytest.raises(GitError) as failed:
        repo.sync()

    assert not isinstance(failed.value, PushRejected)
    assert "refused the credentials" in str(failed.value)
    text = exception_texts(failed.value)
    for form in token_forms("bot", wrong):
        assert form not in text
    assert failed.value.__cause__ is None
    assert failed.value.__context__ is None
    assert wrong not in repr(repo)


def test_a_later_sync_with_the_right_token_heals_a_failed_first_clone(
    url: str, host: GitHostServer, tmp_path: Path
) -> None:
    with pytest.raises(GitError):
        make_repo(url, tmp_path / "wc", token="wrong").sync()
    assert make_repo(url, tmp_path / "wc").sync() == host.log("app")[0][0]


def test_token_is_never_stored_in_config_or_remote_urls(
    repo: Repository, host: GitHostServer
) -> None:
    repo.sync()
    repo.write("README.md", b"x\n")
    repo.commit("x", ["README.md"])
    repo.push()

    git_dir = repo.workdir / ".git"
    remotes = subprocess.run(
        ["git", "remote", "-v"], cwd=repo.workdir, capture_output=True, text=True, check=True
    ).stdout
    assert remotes.split()[1] == host.repo_url("app")
    stored = [(git_dir / "config").read_text(), remotes]
    stored += [p.read_text(errors="replace") for p in (git_dir / "logs").rglob("*") if p.is_file()]
    for text in stored:
        for form in token_forms("bot", TOKEN):
            assert form not in text
    assert TOKEN not in host.all_history_text("app")


def test_a_url_with_credentials_is_refused(host: GitHostServer, tmp_path: Path) -> None:
    url = host.create_repo("app")
    with pytest.raises(ConfigError) as refused:
        Repository(url.replace("http://", f"http://bot:{TOKEN}@"), branch="main", workdir=tmp_path)
    assert TOKEN not in str(refused.value)


# -- reading --------------------------------------------------------------------------------


def test_changed_paths_between_two_syncs(repo: Repository, host: GitHostServer) -> None:
    old = repo.sync()
    host.commit_directly(
        "app",
        {
            "apps/web/deploy.yaml": "modified\n",
            "apps/web/svc.yml": None,
            "apps/api/deploy.yaml": "added\n",
        },
    )
    new = repo.sync()

    changed, deleted = repo.changed_paths(old, new)

    assert sorted(changed) == ["apps/api/deploy.yaml", "apps/web/deploy.yaml"]
    assert deleted == ["apps/web/svc.yml"]
    assert repo.changed_paths(new, new) == ([], [])
    with pytest.raises(GitError):
        repo.changed_paths(old, "f" * 40)  # unknown commit
    with pytest.raises(GitError):
        repo.changed_paths(old, "--output=/tmp/x")


def test_list_files_filters_by_suffix(repo: Repository) -> None:
    repo.sync()
    repo.write("untracked.yaml", b"x\n")  # not in HEAD
    assert repo.list_files() == ["apps/web/deploy.yaml", "apps/web/svc.yml"]
    assert repo.list_files((".yml",)) == ["apps/web/svc.yml"]
    assert repo.list_files(()) == ["README.md", "apps/web/deploy.yaml", "apps/web/svc.yml"]


def test_read_of_a_missing_path_is_none(repo: Repository) -> None:
    repo.sync()
    assert repo.read("nope.yaml") is None
    assert repo.read("apps") is None  # a directory


@pytest.mark.parametrize(
    "path", ["../outside.yaml", "apps/../../outside.yaml", "/etc/passwd", ".git/config", ""]
)
def test_paths_escaping_the_work_tree_are_refused(repo: Repository, path: str) -> None:
    repo.sync()
    with pytest.raises(GitError):
        repo.write(path, b"x")
    with pytest.raises(GitError):
        repo.read(path)
    with pytest.raises(GitError):
        repo.commit("x", [path])


def test_symlinks_leading_outside_are_refused(repo: Repository, tmp_path: Path) -> None:
    repo.sync()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.yaml").write_text("secret")
    (repo.workdir / "linkdir").symlink_to(outside)
    (repo.workdir / "link.yaml").symlink_to(outside / "secret.yaml")

    with pytest.raises(GitError):
        repo.write("linkdir/x.yaml", b"x")
    with pytest.raises(GitError):
        repo.read("linkdir/secret.yaml")
    with pytest.raises(GitError):
        repo.read("link.yaml")
    with pytest.raises(GitError):
        repo.write("link.yaml", b"x")
    assert not (outside / "x.yaml").exists()
    assert (outside / "secret.yaml").read_text() == "secret"


def test_unsafe_paths_are_permanent_and_symlinks_are_never_editable(repo: Repository, tmp_path: Path) -> None:
    repo.sync()
    (repo.workdir / "apps").mkdir(exist_ok=True)
    (repo.workdir / "apps" / "web.yaml").write_text("kind: Deployment\n")
    (repo.workdir / "inside.yaml").symlink_to("apps/web.yaml")
    (repo.workdir / "linked").symlink_to("apps")
    (repo.workdir / "loop-a.yaml").symlink_to("loop-b.yaml")
    (repo.workdir / "loop-b.yaml").symlink_to("loop-a.yaml")

    repo.check_editable("apps/web.yaml")
    assert repo.read("inside.yaml") == b"kind: Deployment\n"  # reading may follow a link inside
    for path, message in [("inside.yaml", "symlink inside.yaml"), ("linked/web.yaml", "symlink linked"),
                          ("../x.yaml", "escapes"), (".git/config", "inside .git")]:
        with pytest.raises(UnsafePath, match=message) as refused:
            repo.check_editable(path)
        assert not refused.value.retryable
    with pytest.raises(UnsafePath, match="symlink loop") as loop:
        repo.read("loop-a.yaml")
    assert not loop.value.retryable


# -- the pull-request sink's own branch -------------------------------------------------------


def test_push_branch_with_a_lease(repo: Repository, host: GitHostServer) -> None:
    base = repo.sync()
    branch = "gitops-reloader/web"

    # First push: the branch must not exist yet.
    repo.checkout_new_branch_from(base, branch)
    repo.write("apps/web/deploy.yaml", b"v1\n")
    first = repo.commit("bump v1", ["apps/web/deploy.yaml"])
    assert first is not None
    repo.push_branch(branch, branch, expected_remote_sha=None)
    assert host.branches("app")[branch] == first
    assert repo.remote_head(branch) == first

    # Rebuild on the base and replace our own branch (a forced update, under lease).
    repo.checkout_new_branch_from(base, branch)
    repo.write("apps/web/deploy.yaml", b"v2\n")
    second = repo.commit("bump v2", ["apps/web/deploy.yaml"])
    assert second is not None
    repo.push_branch(branch, branch, expected_remote_sha=first)
    assert subjects(host, branch) == ["bump v2", "initial"]

    # Someone else commits to our branch: the lease protects their commit.
    theirs = host.commit_directly("app", {"human.yaml": "fix\n"}, branch=branch, message="human")
    repo.checkout_new_branch_from(base, branch)
    repo.write("apps/web/deploy.yaml", b"v3\n")
    assert repo.commit("bump v3", ["apps/web/deploy.yaml"])
    with pytest.raises(PushRejected):
        repo.push_branch(branch, branch, expected_remote_sha=second)
    assert host.branches("app")[branch] == theirs

    # "Must not exist yet" is also a lease.
    with pytest.raises(PushRejected):
        repo.push_branch(branch, branch, expected_remote_sha=None)
    assert host.branches("app")[branch] == theirs
    assert subjects(host) == ["initial"]  # the base branch never moved


def test_push_branch_refuses_the_base_branch(repo: Repository, host: GitHostServer) -> None:
    base = repo.sync()
    with pytest.raises(GitError, match="base branch"):
        repo.push_branch("HEAD", "main", expected_remote_sha=base)
    with pytest.raises(GitError):
        repo.push_branch("--force", "pr", expected_remote_sha=None)
    with pytest.raises(GitError):
        repo.checkout_new_branch_from(base, "main")


def test_push_refuses_to_run_from_the_pr_branch(repo: Repository, host: GitHostServer) -> None:
    base = repo.sync()
    repo.checkout_new_branch_from(base, "pr/x")
    repo.write("README.md", b"pr\n")
    assert repo.commit("pr", ["README.md"])
    with pytest.raises(GitError, match="not main"):
        repo.push()
    assert subjects(host) == ["initial"]
    assert repo.sync() == base  # back on the base branch
    assert repo.read("README.md") == b"# manifests\n"


def test_remote_head_of_a_missing_branch_is_none(repo: Repository) -> None:
    assert repo.remote_head("does-not-exist") is None  # works before the first sync
    with pytest.raises(GitError):
        repo.remote_head("-bad")


# -- ancestry (the git sink's follow-up counts a revision only on our commit's line) ------


def test_contains_counts_the_commit_and_its_descendants_on_the_branch(
    repo: Repository, host: GitHostServer
) -> None:
    ours = repo.sync()
    later = host.commit_directly("app", {"README.md": "later\n"})
    side = host.commit_directly("app", {"README.md": "side\n"}, branch="side")
    assert repo.contains(ours, later) is None  # not fetched yet
    repo.sync()
    assert repo.contains(ours, ours) is True
    assert repo.contains(ours, later) is True
    assert repo.contains(ours, later[:12]) is True
    assert repo.contains(later, ours) is False  # an older commit does not count
    assert repo.contains(ours, side) is None  # another branch is not in the clone
    assert repo.contains(ours, "not-a-commit") is False
    readme = repo.last_change("README.md")
    assert readme is not None and readme[0] == later and readme[1] > 0
    deploy = repo.last_change("apps/web/deploy.yaml")
    assert deploy is not None and deploy[0] == ours
