"""Git over SSH against git over HTTP: what the SSH transport costs the git sinks.

One manifest repository of N generated files is served two ways from the same bare
repository on 127.0.0.1: by the git host test server (``git http-backend``, token auth)
and by a real ``sshd`` with ``git-shell`` (:class:`~gitops_reloader.testing.sshhost.SshGitHost`,
deploy key, strict host-key checking). For each transport, a
:class:`~gitops_reloader.gitops.repo.Repository` (the git sinks' adapter, with the
environment the controller gives git) measures, median of R rounds:

- ``clone``: the first ``sync()`` into an empty directory;
- ``fetch``: ``sync()`` with nothing new on the remote;
- ``commit+push``: one changed file committed and pushed, then fetched back (``sync()``).

    python bench/git_ssh.py            # 2,000 files, 7 rounds
    python bench/git_ssh.py --quick    # 300 files, 3 rounds (seconds)

The last line is one JSON object with the medians in seconds per transport.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import median, print_table
from gitops_reloader.gitops.auth import GitAuth
from gitops_reloader.gitops.repo import Repository
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.sshhost import SshGitHost

TOKEN = "bench-git-token"
REPO = "bench"


def manifest(i: int) -> str:
    return (f"# svc-{i:05d}\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: svc-{i:05d}\n"
            f"  namespace: bench\nspec:\n  replicas: 2\n  template:\n    metadata:\n      annotations:\n"
            f"        owner: team-{i % 50:02d}\n")


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def measure(url: str, auth: GitAuth, work: Path, rounds: int) -> dict[str, float]:
    clone: list[float] = []
    fetch: list[float] = []
    push: list[float] = []
    for r in range(rounds):
        repo = Repository(url, branch="main", workdir=work / f"clone-{r}", auth=auth)
        clone.append(timed(repo.sync))
        fetch.append(timed(repo.sync))

        def commit_and_push(repo: Repository = repo, r: int = r) -> None:
            repo.write("apps/svc-00000.yaml", (manifest(0) + f"# round {r}\n").encode())
            repo.commit(f"bench round {r}", ["apps/svc-00000.yaml"])
            repo.push()
            repo.sync()

        push.append(timed(commit_and_push))
    return {"clone": median(clone), "fetch": median(fetch), "commit+push": median(push)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 files, 3 rounds")
    args = parser.parse_args()
    files, rounds = (300, 3) if args.quick else (2000, 7)
    with tempfile.TemporaryDirectory(prefix="bench-git-ssh-") as tmp:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        os.environ.update({"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"})
        with GitHostServer(root / "srv", token=TOKEN) as http, SshGitHost(http.root, root / "sshd") as ssh:
            http.create_repo(REPO, {f"apps/svc-{i:05d}.yaml": manifest(i) for i in range(files)})
            http_auth = GitAuth(username="bench", token=TOKEN)
            ssh_auth = GitAuth(ssh_key_path=str(ssh.client_key_path),
                               known_hosts_path=str(ssh.write_known_hosts(root / "known_hosts")))
            results = {"http": measure(http.repo_url(REPO), http_auth, root / "http", rounds),
                       "ssh": measure(ssh.url(REPO), ssh_auth, root / "ssh", rounds)}
    rows = [(f"{step} ({transport})", f"{seconds * 1000:8.1f} ms")
            for step in ("clone", "fetch", "commit+push") for transport, seconds in
            (("http", results["http"][step]), ("ssh", results["ssh"][step]))]
    command = "python bench/git_ssh.py" + (" --quick" if args.quick else "")
    print_table(f"git over SSH vs HTTP: {files} files, median of {rounds} rounds", rows, command)
    print(json.dumps({"files": files, "rounds": rounds, **results}))


if __name__ == "__main__":
    main()
