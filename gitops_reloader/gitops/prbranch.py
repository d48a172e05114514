"""A :class:`~gitops_reloader.gitops.repo.Repository` that can inspect and rebuild a pull-request branch.

What the pull-request sink needs beyond the git sink: fetch its own branch, list the
commits it has on top of the base (with their tree, parents and seal trailers, so
:func:`~gitops_reloader.gitops.prpolicy.branch_ownership` can tell whether the
controller made them), make *sealed* commits (:meth:`PullRequestRepository.commit_sealed`:
the seal is computed over the exact tree and parent being committed, so the commit is
built with plumbing, ``write-tree`` + ``commit-tree``), compare trees, and carry the
previous commit's config-hash changes over onto a new base with a three-way merge. Every
command runs through the adapter's own runner, so the auth environment, timeouts and
scrubbing of error messages stay :mod:`gitops.repo`'s; GitPython is not imported here.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gitops_reloader.errors import GitError, PushRejected
from gitops_reloader.gitops import prpolicy
from gitops_reloader.gitops.repo import Repository, _check_branch_name

__all__ = ["CarryOver", "PullRequestRepository"]

_ORIGIN = "origin"  # the remote name Repository configures
_FIELD = "\x1f"
_RECORD = "\x1e"
_COMMITS_READ = 20  # more than one commit on top of the base is foreign anyway
_SHA_LINE = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
# The receiving side refused to move the ref because another push moved it at the same moment.
_REF_RACE = re.compile(r"cannot lock ref|reference already exists|but expected [0-9a-f]{7,}")


@dataclass(frozen=True, slots=True)
class CarryOver:
    """Files of the previous pull-request commit re-applied onto the new base.

    ``carried``: paths written to the work tree; ``conflicted``: paths the base changed
    in a way that clashes with the commit (the base's version is kept); ``refused``:
    paths whose change is not config-hash lines only (never carried).
    """

    carried: tuple[str, ...] = ()
    conflicted: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()


class PullRequestRepository(Repository):
    """A :class:`~gitops_reloader.gitops.repo.Repository` that can inspect and rebuild a PR branch.

    Adds inspection of the sink's own branch (fetch it, list the commits it has on top
    of the base with their seals, compare trees), sealed commits and the carry-over of
    its previous commit's config-hash changes. Every command runs through the adapter's
    own runner, so the auth environment, timeouts and the scrubbing of error messages
    are the adapter's. Same contract as the base class: not thread-safe, the caller
    serializes work.
    """

    def branches_starting(self, branch: str) -> dict[str, str]:
        """Remote branches named ``branch`` or ``branch`` followed by anything, with their tips.

        One ``git ls-remote --heads`` with the glob ``refs/heads/<branch>*``: how the sink
        finds every generation of a pull-request branch
        (:func:`~gitops_reloader.gitops.prpolicy.generations`) in one round trip.
        """
        _check_branch_name(branch)
        prefix = f"refs/heads/{branch}"
        out = self._git(None, "ls-remote", "--heads", "--", self.url, prefix + "*", network=True,
                        action="ls-remote")
        found: dict[str, str] = {}
        for line in out.splitlines():
            sha, _, name = line.partition("\t")
            name = name.strip()
            if name.startswith(prefix) and _SHA_LINE.match(sha.strip()):
                found[name.removeprefix("refs/heads/")] = sha.strip()
        return found

    def fetch_branch(self, branch: str) -> str | None:
        """Fetch ``branch`` from the remote; its tip sha, or ``None`` if the remote has no such branch."""
        repo = self._require()
        tracking = f"refs/remotes/{_ORIGIN}/{branch}"
        sha = self.remote_head(branch)
        if sha is None:
            if self._git(repo, "for-each-ref", "--format=%(refname)", tracking):
                self._git(repo, "update-ref", "-d", tracking)
            return None
        self._git(repo, "fetch", "--no-tags", "--quiet", _ORIGIN, f"+refs/heads/{branch}:{tracking}",
                  network=True, action=f"fetch {branch}")
        # The fetched tip (the branch may have moved since ls-remote): what the lease expects.
        return self._git(repo, "rev-parse", "--verify", f"{tracking}^{{commit}}")

    def push_branch(self, local_ref: str, remote_branch: str, *, expected_remote_sha: str | None) -> None:
        """:meth:`Repository.push_branch`; a push that lost a race on the server is a lost lease too.

        Two pushes creating the same branch at the same moment both pass the client-side
        lease check; the server then refuses one with "cannot lock ref". That is the same
        situation as a lost lease, so it raises :class:`PushRejected` as well.
        """
        try:
            super().push_branch(local_ref, remote_branch, expected_remote_sha=expected_remote_sha)
            return
        except PushRejected:
            raise
        except GitError as exc:
            if not _REF_RACE.search(str(exc)):
                raise
            error = PushRejected(f"{exc} (another push updated {remote_branch} at the same moment)")
        raise error  # outside the handler: no chained context

    def commits_ahead(self, base_sha: str, tip_sha: str) -> list[prpolicy.CommitInfo]:
        """Commits reachable from ``tip_sha`` but not from ``base_sha``, newest first (at most 20).

        Each with its tree, parents and the values of its ``Gitops-Reloader-Seal`` trailers.
        """
        trailers = f"%(trailers:key={prpolicy.SEAL_TRAILER},valueonly,separator=%x1f)"
        out = self._git(self._require(), "log", f"--max-count={_COMMITS_READ}",
                        f"--format=%H%x1f%T%x1f%P%x1f{trailers}%x1e", f"{base_sha}..{tip_sha}", "--")
        commits: list[prpolicy.CommitInfo] = []
        for record in out.split(_RECORD):
            fields = record.strip().split(_FIELD)
            if len(fields) < 3 or not _SHA_LINE.match(fields[0]):
                continue
            parents = tuple(fields[2].split())
            seals = tuple(v.strip() for v in fields[3:] if v.strip())
            commits.append(prpolicy.CommitInfo(fields[0], fields[1], parents, seals))
        return commits

    def commit_sealed(self, message: str, paths: Sequence[str],
                      seal: Callable[[str, tuple[str, ...]], str]) -> str | None:
        """Commit exactly ``paths`` on the checked-out branch with a seal trailer; the new sha.

        ``seal(tree, parents)`` returns the trailer line for the commit's tree and
        parents, added to ``message``'s trailer block. Returns ``None`` when none of
        ``paths`` differs from ``HEAD``. The work tree must hold no other staged change
        (the sink checks its branch out fresh with :meth:`checkout_new_branch_from`).
        Signs like :meth:`commit` when the repository signs commits.
        """
        repo = self._require()
        if self._stage(repo, message, paths) is None:
            return None
        parent = self.head()
        tree = self._git(repo, "write-tree")
        text = prpolicy.append_trailer(message, seal(tree, (parent,)))
        sha = self._git(repo, "commit-tree", tree, "-p", parent, "-S" if self.sign else "--no-gpg-sign",
                        "-m", text)
        self._git(repo, "update-ref", "-m", "gitops-reloader: sealed commit", "HEAD", sha, parent)
        return sha

    def tree(self, sha: str) -> str:
        """The tree sha of commit ``sha`` (equal trees: equal content)."""
        return self._git(self._require(), "rev-parse", "--verify", f"{sha}^{{tree}}")

    def carry_over(self, commit: str) -> CarryOver:
        """Re-apply the config-hash changes ``commit`` made (against its first parent) onto the work tree.

        Per file changed by ``commit``: a change that is not config-hash lines only
        (:func:`~gitops_reloader.gitops.prpolicy.hash_only_diff`: a new or deleted file,
        any other line) is refused and never written. Otherwise: work tree equal to the
        parent's version → the commit's version; already equal to the commit's →
        nothing; else a three-way merge (``git merge-file``), and on a conflict the work
        tree's version stays.
        """
        repo = self._require()
        parent = self._git(repo, "rev-parse", "--verify", f"{commit}^1^{{commit}}")
        changed, _ = self.changed_paths(parent, commit)
        carried: list[str] = []
        conflicted: list[str] = []
        refused: list[str] = []
        for path in changed:
            diff = self._git(repo, "diff", "-U0", "--no-color", "--no-ext-diff", "--no-renames",
                             "--no-textconv", parent, commit, "--", self._relative(path), raw=True)
            if not prpolicy.hash_only_diff(diff):
                refused.append(path)
                continue
            before = self.read_at(parent, path)  # what the commit started from
            after = self.read_at(commit, path)  # what it made of it
            now = self.read(path)  # the new base
            if after is None or now == after:
                continue
            if now is not None and now == before:
                merged: bytes | None = after  # the base did not touch the file since
            elif now is None or before is None:
                merged = None  # deleted or added on one side only: keep the base's state
            else:
                merged = self._merge_file(now, before, after)
            if merged is None:
                conflicted.append(path)
            else:
                self.write(path, merged)
                carried.append(path)
        return CarryOver(tuple(carried), tuple(conflicted), tuple(refused))

    def read_at(self, sha: str, path: str) -> bytes | None:
        """``path`` as commit ``sha`` has it (``None``: not in that commit); the work tree is not touched."""
        repo = self._require()
        clean = self._relative(path)
        if not self._git(repo, "ls-tree", "--name-only", sha, "--", clean):
            return None
        return self._git(repo, "cat-file", "blob", f"{sha}:{clean}", raw=True).encode(
            "utf-8", "surrogateescape")

    def _merge_file(self, current: bytes, base: bytes, other: bytes) -> bytes | None:
        """``git merge-file -p current base other``; ``None`` on a conflict."""
        with tempfile.TemporaryDirectory(prefix="gitops-reloader-merge-") as tmp:
            names = []
            for label, data in (("current", current), ("base", base), ("other", other)):
                target = Path(tmp) / label
                target.write_bytes(data)
                names.append(str(target))
            try:
                out = self._git(self._require(), "merge-file", "-p", "--quiet", *names, raw=True)
            except GitError:  # exit status > 0: that many conflicts
                return None
        return out.encode("utf-8", "surrogateescape")
