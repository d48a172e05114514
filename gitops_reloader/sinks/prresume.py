"""After a restart: continue following the pull-request sink's edits, from the host and the repository.

:func:`resume_pull_requests` runs once when an instance becomes active
(:class:`~gitops_reloader.control.resume.Resumer`). Nothing is remembered from the instance
that stopped: per branch key it syncs the base, asks the host for the open pull request of
the newest generation of the branch (``find_open``), fetches that branch and checks it is
still ours (:func:`~gitops_reloader.gitops.prpolicy.branch_ownership`), then per workload
reads the digest the branch proposes and the one the base holds, and lets
:func:`~gitops_reloader.gitops.prresume.resume_step` decide:

* our pull request proposes an edit the base lacks → :meth:`CommitFollower.await_merge`
  (nothing reported; once merged, the commit is followed as without a restart);
* the base holds the current digest → :meth:`CommitFollower.resume`, the git sink's resume
  path: the commit that last wrote the file, if younger than ``--git-apply-timeout``, is
  followed and its end reported unless that Event is on the workload already.

It only reads: nothing is committed, pushed, opened, updated or commented. A workload that
can't be resolved or located, or a repository or host that can't be read, is logged and
left to its next change (no Event).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from gitops_reloader.errors import ReloaderError
from gitops_reloader.gitops import prpolicy
from gitops_reloader.gitops.digestkey import DigestKey
from gitops_reloader.gitops.handle import RepositoryHandle
from gitops_reloader.gitops.locate import Location, Resolution
from gitops_reloader.gitops.prbranch import PullRequestRepository
from gitops_reloader.gitops.prresume import Step, resume_step
from gitops_reloader.model import ReloadRequest
from gitops_reloader.sinks.git import ManifestPlanner, bounded_text
from gitops_reloader.sinks.pullrequest import PullRequestSink

__all__ = ["resume_pull_requests"]

log = logging.getLogger(__name__)

_Item = tuple[int, ReloadRequest, Resolution]


def resume_pull_requests(sink: PullRequestSink, requests: Sequence[ReloadRequest]) -> int:
    """Hand what was under way for ``requests`` (the sink's workloads) to its follower; how many."""
    if sink.follower is None:
        return 0
    groups: dict[tuple[str, str], list[_Item]] = {}
    for position, request in enumerate(requests):
        try:
            sink.planner.check_supported(request)
            resolution = sink.planner.resolve(request.workload)
        except ReloaderError:
            continue  # its next reload says why
        name = resolution.repo_name
        target = sink.targets.get(name)
        if target is None or name in sink.unusable or name not in sink.repositories:
            continue
        groups.setdefault((name, sink.branch_key(target, request.ref)), []).append(
            (position, request, resolution))
    if not groups:
        return 0
    try:
        digest_key = sink.digest_key()
    except ReloaderError as exc:
        log.warning("cannot resume the pull-request follow-up: no digest key", extra={"error": str(exc)})
        return 0
    resumed = 0
    for (name, key), items in groups.items():
        try:
            resumed += _resume_branch(sink, name, key, items, digest_key)
        except ReloaderError as exc:
            log.warning("cannot resume the pull-request follow-up of a branch; its next change will",
                        extra={"repo": name, "key": key, "error": str(exc)})
    return resumed


def _resume_branch(sink: PullRequestSink, name: str, key: str, items: Sequence[_Item],
                   digest_key: DigestKey) -> int:
    """One branch key: read the base, the open pull request and its branch; follow what was under way."""
    follower = sink.follower
    assert follower is not None
    handle = sink.repository(name)
    target = sink.targets[name]
    repo = handle.repo
    assert isinstance(repo, PullRequestRepository)  # checked when the sink was built
    base = handle.config.branch
    with handle.lock:
        base_sha = handle.sync()
        branch = sink.branch_for(handle, key)
        pull = target.host.find_open(target.config.repository, head=branch, base=base)
        tip = repo.fetch_branch(branch) if pull is not None else None
        if tip is not None and not prpolicy.branch_ownership(repo.commits_ahead(base_sha, tip),
                                                             key=digest_key.value).ours:
            tip = None  # someone else's commits: not the controller's edit to wait for
        plan = sink.planner.plan(handle, items, digest_key)  # in memory: nothing is written
        resumed = 0
        for position, request, location in (*plan.applied, *plan.current):
            step = resume_step(open_pull=tip is not None, proposed=_proposed(handle, tip, request, location),
                               base=ManifestPlanner.committed_value(handle, request, location),
                               current=plan.values[position])
            if step is None:
                continue
            if step.step is Step.AWAIT_MERGE:
                follower.await_merge(request, location, step.digest, sink=sink.name)
            else:
                follower.resume(request, location, step.digest, sink=sink.name)
            resumed += 1
        return resumed


def _proposed(handle: RepositoryHandle, tip: str | None, request: ReloadRequest,
              location: Location) -> str | None:
    """The digest the pull-request branch's tip holds for the workload (``None``: no branch, none).
    The file is read within the same bound as the base's (:func:`~gitops_reloader.sinks.git.bounded_text`)."""
    if tip is None:
        return None
    repo = handle.repo
    assert isinstance(repo, PullRequestRepository)
    data = repo.read_at(tip, location.path)
    if data is None:
        return None
    try:
        text = bounded_text(data, location.path, handle.index.max_file_bytes)
        return ManifestPlanner.value_in(text, request, location)
    except ReloaderError as exc:  # this workload only: the others of the branch go on
        log.warning("pull-request branch file not read; not resumed", extra={
            "object": request.ref.key, "path": location.path, "error": str(exc)})
        return None
