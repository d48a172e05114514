"""Pure decisions of the pull-request sink: branch names, title and body, whose branch it is.

Nothing here does I/O, reads a clock or logs; every function is deterministic in its
arguments, so the sink's behaviour can be tested table-driven.

**Branches.** One deterministic branch per grouping key, so the open pull request is
found from the branch alone (no local database): ``gitops-reloader/<base>/<key>`` where
``<key>`` is the workload (``<namespace>-<kind>-<name>``, lower-case, sanitized, then
``-`` and 16 hex digits of the SHA-256 of the exact ``namespace/Kind/name``, so workloads
whose sanitized names coincide, like ``x``/``deployment-y`` and ``x-deployment``/``y``,
never share a branch) or :data:`REPOSITORY_KEY` (``all``) when one pull request
collects every workload of the repository.

**Title and body.** The title names the workloads and the changed sources
(``Reload web (configmap/app-config changed)``). The body lists, per workload, the
sources (kind/namespace/name), when the change was seen (RFC 3339) and the first 12 hex
digits of the *keyed* digest written to git, says how to stop the controller touching
the pull request, and ends with two hidden HTML comments: the branch, and the entries as
JSON, so the next rebuild of an accumulating pull request (repository grouping) can list
the workloads of earlier batches again. A body is at most :data:`BODY_LIMIT` characters
(GitHub's limit, the smallest of the four hosts): with hundreds of workloads the table is
cut first (down to 10 rows, then "and N more"), then the marker lists fewer entries (down
to 10), then both further; the marker always stays whole and parseable. A body never
holds data, a plain hash of data or anything that is not a Kubernetes name, a time or a
keyed digest; entries read back from a body are validated field by field and dropped
when they don't fit.

**Whose branch.** A name or an e-mail in a commit proves nothing: anyone who can push
sets them. Every commit the sink makes carries a *seal*, the trailer
``Gitops-Reloader-Seal: <hex>``, an HMAC-SHA256 over the commit's tree and parent shas
keyed with the cluster-held digest key (:func:`commit_seal`). Only the controller can
compute it, and it is bound to the content: copied onto another tree or another parent
it no longer verifies. :func:`branch_ownership` lets the controller rebuild a branch
only when it has at most one commit on top of the base and that commit's seal verifies;
anything else (whatever its author) is someone else's.

**Someone else's branch.** The controller then stops vouching for that pull request: it
posts :func:`foreign_notice` on it once — recognised again only by
:func:`foreign_notice_marker`, an HMAC over the repository, number and branch keyed with
the digest key, so nobody else's comment passes for it — adds :data:`FOREIGN_LABEL`, and
moves the reload to the next *generation* of the branch key, :func:`generation_branch`
(``<branch>-<n>``, up to :data:`MAX_GENERATION`). The generation in use is the newest one
on the remote (:func:`generations` reads them from branch names), so a restart finds the
same new pull request.

**Carry-over.** When a branch is rebuilt on a new base, only the changes of lines
holding ``gitops-reloader.io/config-hash`` (plus the bare ``annotations:``/``metadata:``
keys and the flow entries the editor inserts for a new one) are carried over:
:func:`hash_only_diff` checks a file's diff before it is re-applied, never whole files.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from gitops_reloader.model import ObjectRef, ReloadRequest
from gitops_reloader.regex import compile_linear

__all__ = [
    "BODY_LIMIT",
    "BRANCH_PREFIX",
    "FOREIGN_LABEL",
    "MAX_GENERATION",
    "REPOSITORY_KEY",
    "SEAL_TRAILER",
    "BranchDecision",
    "CommitInfo",
    "SourceEntry",
    "WorkloadEntry",
    "append_trailer",
    "branch_key",
    "branch_name",
    "branch_ownership",
    "commit_seal",
    "entry_for",
    "foreign_notice",
    "foreign_notice_marker",
    "format_when",
    "generation_branch",
    "generations",
    "group_key",
    "has_notice",
    "hash_only_diff",
    "is_sealed",
    "marker_branch",
    "merge_entries",
    "own_commit",
    "parse_entries",
    "render_body",
    "render_title",
    "seal_trailer",
    "short_digest",
    "workload_branch_key",
]

BRANCH_PREFIX = "gitops-reloader"
"""First segment of every branch the pull-request sink pushes."""
REPOSITORY_KEY = "all"
"""Branch key of the one pull request per repository (``grouping: repository``)."""
BODY_LIMIT = 65_536
"""Longest body :func:`render_body` renders, in characters: GitHub's cap on a pull request body."""
SEAL_TRAILER = "Gitops-Reloader-Seal"
"""Commit-message trailer holding the seal of a commit the sink made."""
FOREIGN_LABEL = "gitops-reloader/foreign-commits"
"""Label put on a pull request whose branch holds commits the controller did not make."""
MAX_GENERATION = 99
"""Highest generation of a branch key: ``<branch>-99``; a higher number on the remote is ignored."""

_MARKER = "gitops-reloader"
_BRANCH_MARKER = re.compile(r"<!-- " + _MARKER + r":branch=(?P<branch>[^\s<>]+) -->")
# RE2: a body is editable by anyone with write access; the backtracking form was quadratic
# in repeated unterminated markers (1.3 s for 60 KB).
_ENTRIES_MARKER = compile_linear(r"(?s)<!-- " + _MARKER + r":entries=(?P<json>\{.*?\}) -->")
_KEY_MAX = 100
_KEY_HASH = 16  # hex digits: 64 bits, no feasible second preimage for a chosen name
_SEAL_DOMAIN = b"gitops-reloader/pr-commit-seal/v1\0"  # the NUL keeps it apart from keyed_digest input
_NOTICE_DOMAIN = b"gitops-reloader/foreign-notice/v1\0"
_GENERATION = re.compile(r"^[1-9][0-9]?$")
_SEAL = re.compile(r"^[0-9a-f]{64}$")
_SEALS_READ = 8
_TRAILER_LINE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,62}: \S")
_HASH_KEY = "gitops-reloader.io/config-hash"
# A key with no value on its own line, as the editor inserts above a new annotation.
_BARE_KEY = re.compile(r"^[ \t]*(?:annotations|metadata|podAnnotations|template|spec)[ \t]*:[ \t]*\r?$")
_DIFF_MAX_LINES = 2000
_LINE_MAX = 4096
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
# What is left of an inserted flow entry once the key is taken out: punctuation, the
# names of the maps the editor creates, and the 64-hex keyed digest.
_FLOW_INSERT = re.compile(r"(?:[ ,:{}\"']|annotations|metadata|podAnnotations|template|[0-9a-f]{64})*")
_SHORT_DIGEST = 12
_TITLE_ITEMS = 5
_TITLE_MAX = 200
_TABLE_ROWS = 100
_MARKER_ENTRIES = 200
_MIN_ROWS = 10
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]{0,62}$")
_SOURCE_KINDS = frozenset({"ConfigMap", "Secret"})
_WHEN = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
_DIGEST = re.compile(r"^[0-9a-f]{8,64}$")


# --------------------------------------------------------------------------- branches


def workload_branch_key(ref: ObjectRef) -> str:
    """``<namespace>-<kind>-<name>-<hash>``, lower-case, safe as one branch-name segment.

    Characters git or hosts dislike become ``-`` and the readable part is cut to fit 100
    characters; ``<hash>`` is 16 hex digits of the SHA-256 of the exact
    ``namespace/Kind/name`` (a hash of the workload's *name*, not of any data), so two
    workloads never share a key even when their readable parts coincide.
    """
    exact = f"{ref.namespace}/{ref.kind}/{ref.name}"
    suffix = hashlib.sha256(exact.encode("utf-8")).hexdigest()[:_KEY_HASH]
    key = re.sub(r"[^a-z0-9._-]+", "-", f"{ref.namespace}-{ref.kind}-{ref.name}".lower())
    key = re.sub(r"\.{2,}", ".", key)
    key = re.sub(r"-{2,}", "-", key).strip("-.")
    key = key[: _KEY_MAX - _KEY_HASH - 1].rstrip("-.")
    return f"{key}-{suffix}" if key else suffix


def branch_key(ref: ObjectRef, grouping: str) -> str:
    """The branch key of ``ref`` under ``grouping`` (``workload`` or ``repository``)."""
    if grouping == "repository":
        return REPOSITORY_KEY
    if grouping != "workload":
        raise ValueError(f"unknown pull-request grouping {grouping!r}")
    return workload_branch_key(ref)


def branch_name(base: str, key: str) -> str:
    """``gitops-reloader/<base>/<key>``: the branch of one pull request into ``base``."""
    return f"{BRANCH_PREFIX}/{base}/{key}"


def group_key(repo_name: str, key: str) -> str:
    """The controller's batch group: ``<repository>#<branch key>``."""
    return f"{repo_name}#{key}"


def generation_branch(base: str, key: str, generation: int) -> str:
    """The branch of ``key``'s pull request number ``generation`` into ``base``.

    Generation 0 is :func:`branch_name`; when someone else commits to the open pull
    request of generation *n*, the reload moves on to ``<branch>-<n+1>``. A workload key
    ends in 16 hex digits and ``all`` has no digits, so no generation of one key is
    another key's branch.
    """
    if not 0 <= generation <= MAX_GENERATION:
        raise ValueError(f"generation {generation} is outside 0..{MAX_GENERATION}")
    name = branch_name(base, key)
    return name if generation == 0 else f"{name}-{generation}"


def generations(base: str, key: str, branches: Iterable[str]) -> tuple[int, ...]:
    """The generations of ``key``'s branch into ``base`` found among ``branches``, ascending.

    Only ``<branch>`` (0) and ``<branch>-<1..99>`` (no leading zero) count; any other
    name, e.g. one a person pushed with a larger number, is ignored.
    """
    name = branch_name(base, key)
    found: set[int] = set()
    for branch in branches:
        if branch == name:
            found.add(0)
        elif branch.startswith(name + "-") and _GENERATION.match(branch[len(name) + 1:]):
            found.add(int(branch[len(name) + 1:]))
    return tuple(sorted(found))


# --------------------------------------------------------------------------- entries


@dataclass(frozen=True, slots=True)
class SourceEntry:
    """One changed source as a pull request shows it: kind, namespace, name; never data."""

    kind: str
    namespace: str
    name: str
    deleted: bool = False

    @property
    def label(self) -> str:
        """``configmap/app-config``, for titles."""
        return f"{self.kind.lower()}/{self.name}"

    def describe(self) -> str:
        """``ConfigMap ns/app-config`` (``(deleted)`` appended for a deletion)."""
        return f"{self.kind} {self.namespace}/{self.name}" + (" (deleted)" if self.deleted else "")


@dataclass(frozen=True, slots=True)
class WorkloadEntry:
    """One workload in a pull request: what changed, when, and the short keyed digest."""

    kind: str
    namespace: str
    name: str
    sources: tuple[SourceEntry, ...]
    when: str
    digest: str

    @property
    def key(self) -> str:
        """``namespace/Kind/name``, as :attr:`ObjectRef.key`."""
        return f"{self.namespace}/{self.kind}/{self.name}"


def short_digest(digest: str) -> str:
    """The first 12 hex digits of a keyed digest (enough to compare, nothing to learn from)."""
    return digest[:_SHORT_DIGEST]


def format_when(unix_seconds: float) -> str:
    """RFC 3339 in UTC, seconds precision: ``2024-05-01T10:00:00Z``."""
    return datetime.fromtimestamp(unix_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def entry_for(request: ReloadRequest, digest: str) -> WorkloadEntry:
    """The entry of ``request`` whose edit writes the keyed ``digest``."""
    sources = tuple(
        SourceEntry(item.source.ref.kind.kube_kind, item.source.ref.namespace, item.source.ref.name,
                    item.deleted)
        for item in request.items)
    ref = request.ref
    return WorkloadEntry(ref.kind, ref.namespace, ref.name, sources, format_when(request.observed_at),
                         short_digest(digest))


def merge_entries(previous: Sequence[WorkloadEntry], batch: Sequence[WorkloadEntry], *,
                  drop: Iterable[str] = ()) -> tuple[WorkloadEntry, ...]:
    """The entries of a rebuilt pull request.

    ``previous`` (read from the open pull request) keeps its order; an entry of
    ``batch`` replaces the previous one of the same workload in place — keeping the
    earlier ``when`` if the digest did not change, so re-running the same batch gives
    the same body — and new workloads are appended. Workloads in ``drop`` (their edit is
    in the base branch now) are left out.
    """
    dropped = set(drop)
    merged: dict[str, WorkloadEntry] = {}
    for entry in previous:
        if entry.key not in dropped:
            merged[entry.key] = entry
    for entry in batch:
        if entry.key in dropped:
            continue
        old = merged.get(entry.key)
        if old is not None and old.digest == entry.digest:
            entry = WorkloadEntry(entry.kind, entry.namespace, entry.name, entry.sources, old.when,
                                  entry.digest)
        merged[entry.key] = entry
    return tuple(merged.values())


# --------------------------------------------------------------------------- title and body


def render_title(entries: Sequence[WorkloadEntry]) -> str:
    """``Reload web, worker (configmap/app-config, secret/db changed)``; at most 200 characters."""
    workloads = list(dict.fromkeys(e.name for e in entries))
    sources = list(dict.fromkeys(s.label for e in entries for s in e.sources))
    title = f"Reload {_short(workloads) or 'workloads'}"
    if sources:
        title += f" ({_short(sources)} changed)"
    if len(title) > _TITLE_MAX:
        title = title[: _TITLE_MAX - 3].rstrip() + "..."
    return title


def render_body(entries: Sequence[WorkloadEntry], *, branch: str, base: str,
                limit: int = BODY_LIMIT) -> str:
    """The pull request's description (Markdown) with the hidden branch and entries markers.

    At most ``limit`` characters: the table shows up to 100 workloads and the marker up
    to 200; when that is too long the table shrinks to 10 rows, then the marker to 10
    entries, then the table and finally the marker further. Rows left out are
    summarised as "and N more".
    """
    rows = [_row(entry) for entry in entries[:_TABLE_ROWS]]
    items = [_entry_json(entry) for entry in entries[:_MARKER_ENTRIES]]

    def body(k: int, m: int) -> str:
        return _assemble(rows[:k], len(entries), items[:m], branch=branch, base=base)

    def fits(k: int, m: int) -> bool:
        return len(body(k, m)) <= limit

    k, m = len(rows), len(items)
    # Give way in turn: table rows down to 10, remembered entries down to 10, then the
    # rest of the table, then the rest of the marker (it stays a whole, parseable comment).
    for cut_rows, floor in ((True, _MIN_ROWS), (False, _MIN_ROWS), (True, 0), (False, 0)):
        if fits(k, m):
            break
        if cut_rows:
            k = _largest(lambda x, m=m: fits(x, m), min(k, floor), k)
        else:
            m = _largest(lambda x, k=k: fits(k, x), min(m, floor), m)
    return body(k, m)


def marker_branch(body: str) -> str | None:
    """The branch named by the hidden marker of a body we rendered, ``None`` if absent."""
    match = _BRANCH_MARKER.search(body or "")
    return match.group("branch") if match else None


def parse_entries(body: str) -> tuple[WorkloadEntry, ...]:
    """The entries of a body we rendered; ``()`` for any other body.

    A person may have edited the description: anything that does not parse, or a field
    that is not a Kubernetes name, a known kind, an RFC 3339 time or a hex digest, drops
    that entry (or all of them) rather than being trusted.
    """
    match = _ENTRIES_MARKER.search(body or "")
    if match is None:
        return ()
    try:
        data = json.loads(match.group("json"))
    except ValueError:
        return ()
    items = data.get("entries") if isinstance(data, dict) and data.get("v") == 1 else None
    if not isinstance(items, list):
        return ()
    entries: list[WorkloadEntry] = []
    seen: set[str] = set()
    for item in items[:_MARKER_ENTRIES]:
        entry = _entry_from_json(item)
        if entry is not None and entry.key not in seen:
            seen.add(entry.key)
            entries.append(entry)
    return tuple(entries)


# --------------------------------------------------------------------------- whose branch


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """A commit on the pull-request branch that is not on the base branch.

    ``seals``: the values of its ``Gitops-Reloader-Seal`` trailers, as git reports them.
    No author or e-mail: they prove nothing.
    """

    sha: str
    tree: str
    parents: tuple[str, ...]
    seals: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class BranchDecision:
    """Whether the controller may rebuild the branch; ``reason`` is safe for Events."""

    ours: bool
    reason: str
    commit: str = ""
    """The first commit that is not ours (``""`` when ``ours`` or the count alone decided)."""


def commit_seal(key: bytes, tree: str, parents: Sequence[str]) -> str:
    """The seal of a commit with ``tree`` and ``parents``: HMAC-SHA256 hex keyed with ``key``.

    The message is a fixed domain string (with a NUL, which no :func:`keyed_digest` input
    holds) followed by the tree and the parents in order, so a seal is bound to exactly
    that content and history. Raises :class:`ValueError` for an empty key.
    """
    if not key:
        raise ValueError("commit_seal needs a non-empty key")
    message = _SEAL_DOMAIN + "\n".join(["tree " + tree, *("parent " + p for p in parents)]).encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def seal_trailer(key: bytes, tree: str, parents: Sequence[str]) -> str:
    """The trailer line ``Gitops-Reloader-Seal: <seal>`` for a commit message."""
    return f"{SEAL_TRAILER}: {commit_seal(key, tree, parents)}"


def append_trailer(message: str, trailer: str) -> str:
    """``message`` with ``trailer`` in its trailer block (git reads trailers only there).

    Joins the last paragraph when that paragraph is already trailers (``Key: value``
    lines, not the subject), else starts a new paragraph.
    """
    body = message.rstrip("\n")
    head, _, last = body.rpartition("\n\n")
    trailers = bool(head) and all(_TRAILER_LINE.match(line) for line in last.splitlines())
    separator = "\n" if trailers else "\n\n"
    return f"{body}{separator}{trailer}\n"


def is_sealed(commit: CommitInfo, key: bytes) -> bool:
    """Whether one of ``commit``'s seal trailers verifies for its own tree and parents."""
    expected = commit_seal(key, commit.tree, commit.parents)
    return any(_SEAL.match(seal) is not None and hmac.compare_digest(seal, expected)
               for seal in commit.seals[:_SEALS_READ])


def branch_ownership(commits: Sequence[CommitInfo], *, key: bytes) -> BranchDecision:
    """Decide from the commits a branch has on top of its base whether it is still ours.

    Ours: no such commit (the branch is merged or empty), or exactly one, sealed by us
    (:func:`is_sealed` with the digest key). Anything else means a person (or another
    tool) pushed to the branch — whatever name and e-mail they gave — and it must not be
    touched.
    """
    for commit in commits:
        if not is_sealed(commit, key):
            return BranchDecision(False, f"commit {commit.sha[:12]} was made by someone else "
                                         "(it carries no valid gitops-reloader seal)", commit.sha)
    if len(commits) > 1:
        return BranchDecision(False, f"it has {len(commits)} commits on top of the base; "
                                     "gitops-reloader makes exactly one", commits[0].sha)
    if not commits:
        return BranchDecision(True, "no commits on top of the base")
    return BranchDecision(True, "one sealed gitops-reloader commit on top of the base")


def foreign_notice_marker(key: bytes, repo: str, number: int, branch: str) -> str:
    """The hidden marker ending the notice on pull request ``number`` of ``repo``.

    An HMAC keyed with the digest key over the repository, the number and the branch:
    only the controller can write it, and copied onto another pull request it does not
    match, so a comment someone else wrote never passes for the notice.
    """
    if not key:
        raise ValueError("foreign_notice_marker needs a non-empty key")
    message = _NOTICE_DOMAIN + f"{repo}\n{number}\n{branch}".encode()
    return f"<!-- {_MARKER}:foreign-commits={hmac.new(key, message, hashlib.sha256).hexdigest()} -->"


def has_notice(bodies: Iterable[str], marker: str) -> bool:
    """Whether one of the comment ``bodies`` holds ``marker`` (the notice was posted)."""
    return any(marker in body for body in bodies)


def foreign_notice(*, branch: str, decision: BranchDecision, successor: str, marker: str) -> str:
    """The comment on a pull request the controller stops updating (Markdown, names and shas only)."""
    commit = f"commit `{decision.commit[:12]}`" if decision.commit else "commits"
    return "\n".join([
        f"**gitops-reloader no longer updates this pull request.** Its branch `{branch}` holds "
        f"{commit} that gitops-reloader did not make ({decision.reason}).",
        "",
        f"The reload goes on in a new pull request from branch `{successor}`. gitops-reloader "
        "will not push to, merge or close this one: review every commit on it before you merge "
        "it, or close it.",
        "",
        marker,
        "",
    ])


def own_commit(commits: Sequence[CommitInfo], *, key: bytes) -> str | None:
    """The newest of ``commits`` sealed by us (:func:`is_sealed`), ``None`` if none is.

    On a branch someone else committed to, that commit's config-hash lines may still be
    carried over to the next generation: the seal proves its tree is what we committed.
    """
    return next((commit.sha for commit in commits if is_sealed(commit, key)), None)


def hash_only_diff(diff: str) -> bool:
    """Whether a ``git diff -U0`` of one file changes nothing but the config-hash annotation.

    What the editor writes, and nothing else, passes: a changed line holding
    ``gitops-reloader.io/config-hash``; a bare ``annotations:``/``metadata:``-style key
    inserted above a new one; a line whose only change is one inserted flow entry holding
    the key (``{a: b}`` → ``{a: b, gitops-reloader.io/config-hash: "…"}``) or an explicit
    null turned into such a map. Within a hunk the n-th removed line is compared with the
    n-th added line. A new, deleted, renamed or binary file, a line over 4 KB, or a diff
    over 2,000 changed lines is not a hash-only change. Linear in the diff's length.
    """
    removed: list[str] = []
    added: list[str] = []
    changed = 0
    for line in diff.splitlines():
        if line.startswith(("diff --git ", "index ", "--- ", "+++ ", "\\ ")):
            continue
        if line.startswith("@@ "):
            if not _hash_only_hunk(removed, added):
                return False
            removed, added = [], []
            continue
        if not line.startswith(("+", "-")) or len(line) > _LINE_MAX:
            return False  # file mode, new/deleted/binary file, or an unbounded line
        changed += 1
        if changed > _DIFF_MAX_LINES:
            return False
        (added if line[0] == "+" else removed).append(line[1:])
    return changed > 0 and _hash_only_hunk(removed, added)


# --------------------------------------------------------------------------- internals


def _hash_only_hunk(removed: Sequence[str], added: Sequence[str]) -> bool:
    """Every removed line holds the key or became its paired added line by one insertion."""
    paired: set[int] = set()
    for index, line in enumerate(removed):
        if _HASH_KEY in line:
            continue
        if index >= len(added) or not _one_insertion(line, added[index]):
            return False
        paired.add(index)
    return all(index in paired or _HASH_KEY in line or _BARE_KEY.match(line) is not None
               for index, line in enumerate(added))


def _one_insertion(before: str, after: str) -> bool:
    """``after`` is ``before`` with one flow entry holding the key spliced in (or a null replaced)."""
    prefix = 0
    limit = min(len(before), len(after))
    while prefix < limit and before[prefix] == after[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and before[-1 - suffix] == after[-1 - suffix]:
        suffix += 1
    taken = before[prefix:len(before) - suffix].strip()
    inserted = after[prefix:len(after) - suffix]
    if taken not in _NULLS:
        return False
    if _HASH_KEY not in inserted:
        return taken != "" and inserted.strip() == ""  # an explicit null dropped above new lines
    return _FLOW_INSERT.fullmatch(inserted.replace(_HASH_KEY, "", 1)) is not None


def _short(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_TITLE_ITEMS])
    return shown + (f" and {len(items) - _TITLE_ITEMS} more" if len(items) > _TITLE_ITEMS else "")


def _row(entry: WorkloadEntry) -> str:
    changed = "<br>".join(f"{s.kind} `{s.namespace}/{s.name}`" + (" (deleted)" if s.deleted else "")
                          for s in entry.sources) or "-"
    return f"| `{entry.key}` | {changed} | {entry.when} | `{entry.digest}` |"


def _entry_json(e: WorkloadEntry) -> str:
    """One entry of the marker, compact JSON with sorted keys."""
    data = {"kind": e.kind, "namespace": e.namespace, "name": e.name, "when": e.when, "digest": e.digest,
            "sources": [{"kind": s.kind, "namespace": s.namespace, "name": s.name, "deleted": s.deleted}
                        for s in e.sources]}
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


def _assemble(rows: Sequence[str], total: int, items: Sequence[str], *, branch: str, base: str) -> str:
    lines = [
        "Configuration that these workloads use changed in the cluster. Merging this pull request "
        f"into `{base}` updates `gitops-reloader.io/config-hash` in their manifests, so the GitOps "
        "tool rolls them out with the new configuration.",
        "",
        "| Workload | Changed | When | Digest |",
        "| --- | --- | --- | --- |",
        *rows,
    ]
    if total > len(rows):
        lines.append(f"| and {total - len(rows)} more | | | |")
    # "--" must not appear inside an HTML comment; JSON reads the escape back as "-".
    marker = ('{"entries":[' + ",".join(items) + '],"v":1}').replace("--", "-\\u002d")
    lines += [
        "",
        "The digest is an HMAC of the sources' data keyed with a key that never leaves the cluster: "
        "it changes when the data changes and reveals nothing about it.",
        "",
        "**To stop gitops-reloader touching this pull request**, push a commit of your own to "
        f"`{branch}`: gitops-reloader then leaves the branch alone, says so here, reports a Warning "
        "event on the workload and opens a new pull request for the reload. **Close it without "
        "merging** to drop it: it is not reopened, and the next change opens a new pull request. "
        "To stop pull requests for a workload altogether, remove its "
        "`gitops-reloader.io/sink: pull-request` annotation.",
        "",
        f"<!-- {_MARKER}:branch={branch} -->",
        f"<!-- {_MARKER}:entries={marker} -->",
        "",
    ]
    return "\n".join(lines)


def _largest(holds: Callable[[int], bool], low: int, high: int) -> int:
    """The largest ``x`` in ``[low, high]`` for which the monotone ``holds(x)`` is true; ``low`` if none."""
    while low < high:
        middle = (low + high + 1) // 2
        if holds(middle):
            low = middle
        else:
            high = middle - 1
    return low


def _entry_from_json(item: object) -> WorkloadEntry | None:
    if not isinstance(item, dict):
        return None
    kind, namespace, name = item.get("kind"), item.get("namespace"), item.get("name")
    when, digest, raw_sources = item.get("when"), item.get("digest"), item.get("sources")
    if not (_is(kind, _KIND) and _is(namespace, _NAME) and _is(name, _NAME) and _is(when, _WHEN)
            and _is(digest, _DIGEST) and isinstance(raw_sources, list)):
        return None
    sources: list[SourceEntry] = []
    for raw in raw_sources[:50]:
        if not isinstance(raw, dict):
            return None
        s_kind, s_namespace, s_name, deleted = (raw.get("kind"), raw.get("namespace"), raw.get("name"),
                                                raw.get("deleted", False))
        if s_kind not in _SOURCE_KINDS or not _is(s_namespace, _NAME) or not _is(s_name, _NAME) \
                or not isinstance(deleted, bool):
            return None
        sources.append(SourceEntry(str(s_kind), str(s_namespace), str(s_name), deleted))
    return WorkloadEntry(str(kind), str(namespace), str(name), tuple(sources), str(when), str(digest))


def _is(value: object, pattern: re.Pattern[str]) -> bool:
    return isinstance(value, str) and pattern.match(value) is not None
