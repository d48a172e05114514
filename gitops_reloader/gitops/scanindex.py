"""Index of the Kubernetes objects declared in one repository clone, for the manifest scan.

:class:`ScanIndex` maps ``(api group, kind, namespace | None, name)`` to the
``(path, document index)`` pairs that declare it. It is built once over every YAML file
tracked at the synced commit and then refreshed *incrementally*: after each
:meth:`~gitops_reloader.gitops.repo.Repository.sync`, :meth:`ScanIndex.refresh` asks the
repository which paths changed between the indexed commit and the new one
(``changed_paths``) and re-reads only those. A repository of thousands of manifests is
therefore read once, not per change (DESIGN "Where the manifest lives").

Guarantees and limits:

- A file that does not parse (or is not UTF-8, or is too large) is skipped and
  remembered in :attr:`ScanIndex.unparsable` with a reason that names no content; it
  never stops the index. Helm/Go templates that don't parse are remembered separately
  (:attr:`ScanIndex.templated`) — they are expected in a repository and not an error.
- Entries are *hints*: the document numbers come from libyaml (PyYAML's C parser,
  ~30x faster than the pure-Python round-trip parser), not from the parser that edits.
  An edit made at a hinted index is checked with :func:`edit_confined`, and when the
  check fails the document is confirmed with
  :func:`~gitops_reloader.gitops.yamledit.find_document` and the edit redone. Without
  libyaml, or when libyaml rejects a file, documents are listed with
  :func:`~gitops_reloader.gitops.yamledit.list_documents` before the file counts as
  unparsable.
- A document without ``metadata.namespace`` is indexed under namespace ``None``:
  the GitOps tool applies it into its destination namespace.

Not thread-safe: one index belongs to one repository clone, and the caller serializes
work on that repository (the git sink holds the repository's lock).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple, Protocol

import yaml

from gitops_reloader.errors import GitError, YamlEditError
from gitops_reloader.gitops.yamledit import list_documents

__all__ = [
    "Candidates",
    "DocKey",
    "DocRef",
    "IndexUpdate",
    "RepoFiles",
    "ScanIndex",
    "api_group",
    "edit_confined",
    "scan_documents",
]

YAML_SUFFIXES = (".yaml", ".yml")
MAX_FILE_BYTES = 4 * 1024 * 1024
_NULL_TAG = "tag:yaml.org,2002:null"
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_CParser: Any = getattr(yaml, "CSafeLoader", None)


class DocKey(NamedTuple):
    """Identity of a declared object: ``namespace`` is ``None`` when the document has none."""

    group: str
    kind: str
    namespace: str | None
    name: str


class DocRef(NamedTuple):
    """A document in the repository: file path and document index in that file."""

    path: str
    doc_index: int


@dataclass(frozen=True, slots=True)
class Candidates:
    """Documents that may declare an object: ``exact`` name the namespace, ``loose`` name none."""

    exact: tuple[DocRef, ...] = ()
    loose: tuple[DocRef, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.exact or self.loose)


@dataclass(frozen=True, slots=True)
class IndexUpdate:
    """What one :meth:`ScanIndex.refresh` did (for logs and the benchmark)."""

    full: bool
    files_read: int
    files_removed: int
    seconds: float


class RepoFiles(Protocol):
    """What the index needs from a clone (:class:`~gitops_reloader.gitops.repo.Repository`)."""

    def list_files(self, suffixes: Sequence[str] = ...) -> list[str]: ...

    def read(self, path: str) -> bytes | None: ...

    def changed_paths(self, old_sha: str, new_sha: str) -> tuple[list[str], list[str]]: ...


def api_group(api_version: str) -> str:
    """The group of an ``apiVersion`` (``apps/v1`` → ``apps``, ``v1`` → ``""``)."""
    group, slash, _ = api_version.rpartition("/")
    return group if slash else ""


class ScanIndex:
    """``(group, kind, namespace, name) → [(path, doc index)]`` over one repository clone.

    ``include`` limits the index to these repository-relative directories (the
    repository's ``paths`` setting); empty means the whole repository.
    """

    def __init__(self, repo: RepoFiles, *, include: Sequence[str] = (),
                 max_file_bytes: int = MAX_FILE_BYTES) -> None:
        self.repo = repo
        workdir = getattr(repo, "workdir", None)
        # Bulk reads go straight to the work tree (see _read_file); None: through the repository.
        self._workdir = os.fspath(Path(workdir).resolve()) if isinstance(workdir, os.PathLike | str) else None
        self.include = tuple(p.strip("/") for p in include if p.strip("/"))
        self.max_file_bytes = max_file_bytes
        self.head: str | None = None
        self._by_key: dict[DocKey, set[DocRef]] = {}
        self._by_path: dict[str, tuple[DocKey, ...]] = {}
        self._unparsable: dict[str, str] = {}
        self._templated: set[str] = set()

    # -- building ------------------------------------------------------------------

    def refresh(self, head: str) -> IndexUpdate:
        """Bring the index to commit ``head`` (the sha :meth:`Repository.sync` returned).

        The first call reads every YAML file; later calls re-read only the paths changed
        since the indexed commit, and fall back to a full rebuild when the repository
        can't tell (e.g. the old commit is gone).
        """
        started = time.perf_counter()
        if self.head is None:
            return self._rebuild(head, started)
        if head == self.head:
            return IndexUpdate(False, 0, 0, time.perf_counter() - started)
        try:
            changed, deleted = self.repo.changed_paths(self.head, head)
        except GitError:
            return self._rebuild(head, started)
        removed = 0
        for path in deleted:
            removed += self._forget(path)
        read = 0
        for path in changed:
            if self._wanted(path):
                self._index_file(path)
                read += 1
            else:
                removed += self._forget(path)
        self.head = head
        return IndexUpdate(False, read, removed, time.perf_counter() - started)

    def _rebuild(self, head: str, started: float) -> IndexUpdate:
        self._by_key.clear()
        self._by_path.clear()
        self._unparsable.clear()
        self._templated.clear()
        paths = [p for p in self.repo.list_files(YAML_SUFFIXES) if self._wanted(p)]
        for path in paths:
            self._index_file(path)
        self.head = head
        return IndexUpdate(True, len(paths), 0, time.perf_counter() - started)

    def _wanted(self, path: str) -> bool:
        if not path.lower().endswith(YAML_SUFFIXES):
            return False
        return not self.include or any(path == d or path.startswith(d + "/") for d in self.include)

    def _forget(self, path: str) -> int:
        self._unparsable.pop(path, None)
        self._templated.discard(path)
        keys = self._by_path.pop(path, None)
        if keys is None:
            return 0
        for key in keys:
            refs = self._by_key.get(key)
            if refs is None:
                continue
            for ref in [r for r in refs if r.path == path]:
                refs.discard(ref)
            if not refs:
                del self._by_key[key]
        return 1

    def _index_file(self, path: str) -> None:
        self._forget(path)
        try:
            data = self._read_file(path)
        except GitError as exc:
            self._unparsable[path] = f"cannot read: {type(exc).__name__}"
            return
        if data is None:
            return
        if len(data) > self.max_file_bytes:
            self._unparsable[path] = f"larger than {self.max_file_bytes} bytes"
            return
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            self._unparsable[path] = "not UTF-8 text"
            return
        try:
            docs = scan_documents(text, path=path)
        except YamlEditError as exc:
            if "{{" in text:
                self._templated.add(path)
            else:
                self._unparsable[path] = _reason(exc, path)
            return
        keys: list[DocKey] = []
        for index, key in docs:
            keys.append(key)
            self._by_key.setdefault(key, set()).add(DocRef(path, index))
        if keys:
            self._by_path[path] = tuple(keys)

    def _read_file(self, path: str) -> bytes | None:
        """Read a tracked file for indexing, quickly.

        ``Repository.read`` resolves every path against symlinks (about a millisecond
        each), which dominates a cold build of thousands of files. Paths here come from
        git (``ls-tree`` / ``diff``) and git never checks a path out below a symlinked
        directory, so opening the work-tree file with ``O_NOFOLLOW`` is enough to stay
        inside the tree; a symlinked file (``ELOOP``) or any odd path goes through
        ``Repository.read``, which checks where the link leads.
        """
        pure = PurePosixPath(path)
        if (self._workdir is None or pure.is_absolute() or "\0" in path or "\\" in path
                or any(part in ("..", "") or part.lower() == ".git" for part in pure.parts)):
            return self.repo.read(path)
        try:
            fd = os.open(os.path.join(self._workdir, *pure.parts), _OPEN_FLAGS)
        except FileNotFoundError:
            return None
        except OSError:
            return self.repo.read(path)
        with os.fdopen(fd, "rb") as handle:
            return handle.read(self.max_file_bytes + 1)

    # -- reading -------------------------------------------------------------------

    def lookup(self, *, group: str, kind: str, namespace: str, name: str,
               under: Sequence[str] = ()) -> Candidates:
        """Documents declaring ``group/kind`` ``name`` in ``namespace`` (or in none).

        ``under`` restricts the result to files inside these directories (``""`` or an
        empty sequence: anywhere). Results are sorted by path.
        """
        dirs = [d.strip("/") for d in under]

        def pick(refs: Iterable[DocRef]) -> tuple[DocRef, ...]:
            chosen = (r for r in refs if not dirs or any(_inside(r.path, d) for d in dirs))
            return tuple(sorted(chosen))

        exact = pick(self._by_key.get(DocKey(group, kind, namespace, name), ()))
        loose = pick(self._by_key.get(DocKey(group, kind, None, name), ()))
        return Candidates(exact, loose)

    def read(self, path: str) -> bytes | None:
        """The file's content in the clone (the repository's ``read``)."""
        return self.repo.read(path)

    def documents(self, path: str) -> tuple[DocKey, ...]:
        """The objects indexed for ``path`` (empty if none or not indexed)."""
        return self._by_path.get(path, ())

    @property
    def unparsable(self) -> Mapping[str, str]:
        """Path → why it could not be indexed (no file content in the reason)."""
        return dict(self._unparsable)

    @property
    def templated(self) -> frozenset[str]:
        """Paths skipped because they hold Helm/Go templates that don't parse as YAML."""
        return frozenset(self._templated)

    def unparsable_under(self, under: Sequence[str] = ()) -> dict[str, str]:
        """:attr:`unparsable` restricted to files inside ``under``."""
        dirs = [d.strip("/") for d in under]
        return {p: r for p, r in sorted(self._unparsable.items())
                if not dirs or any(_inside(p, d) for d in dirs)}

    @property
    def file_count(self) -> int:
        """Files holding at least one indexed object."""
        return len(self._by_path)

    def __len__(self) -> int:
        """Number of indexed documents."""
        return sum(len(keys) for keys in self._by_path.values())


def _inside(path: str, directory: str) -> bool:
    return not directory or path == directory or path.startswith(directory + "/")


def _reason(exc: YamlEditError, path: str) -> str:
    text = str(exc)
    return text.removeprefix(f"{path}: ") if path else text


def scan_documents(text: str, *, path: str = "") -> list[tuple[int, DocKey]]:
    """``(document index, identity)`` of every Kubernetes object in a YAML file.

    Same rules as :func:`~gitops_reloader.gitops.yamledit.list_documents` (documents
    without a string ``kind`` are skipped; every document of the stream counts for the
    index), read with libyaml when available.

    Raises:
        YamlEditError: the file does not parse.
    """
    if _CParser is not None:
        try:
            return _scan_libyaml(text)
        except yaml.YAMLError:
            pass  # libyaml and ruamel differ on a few corner cases: ask the reference parser
    return [
        (info.index, DocKey(api_group(info.api_version), info.kind, info.namespace, info.name))
        for info in list_documents(text, path=path)
    ]


def _scan_libyaml(text: str) -> list[tuple[int, DocKey]]:
    out: list[tuple[int, DocKey]] = []
    for index, root in enumerate(yaml.compose_all(text, Loader=_CParser)):
        if not isinstance(root, yaml.MappingNode):
            continue  # empty, scalar or sequence document
        fields = _fields(root, ("apiVersion", "kind", "metadata"))
        kind = _scalar(fields.get("kind"))
        if not kind:
            continue
        meta = fields.get("metadata")
        meta_fields = _fields(meta, ("name", "namespace")) if isinstance(meta, yaml.MappingNode) else {}
        out.append((index, DocKey(api_group(_scalar(fields.get("apiVersion")) or ""), kind,
                                  _scalar(meta_fields.get("namespace")) or None,
                                  _scalar(meta_fields.get("name")) or "")))
    return out


def _fields(node: Any, wanted: tuple[str, ...]) -> dict[str, Any]:
    """The value nodes of ``wanted`` scalar keys of a mapping node (first occurrence wins)."""
    found: dict[str, Any] = {}
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value in wanted and key.value not in found:
            found[key.value] = value
    return found


def _scalar(node: Any) -> str | None:
    """A scalar node's text; ``None`` for anything else and for null (``~``, ``null``, empty)."""
    if not isinstance(node, yaml.ScalarNode) or node.tag == _NULL_TAG:
        return None
    return str(node.value)


def edit_confined(before: str, after: str, *, doc_index: int, expected: DocKey,
                  path_expr: Sequence[str | int], key: str, value: str) -> bool:
    """Whether an edit of document ``doc_index`` stayed in the object it was meant for.

    Checked with libyaml, independently of the parser that made the edit: both texts
    load into the same number of documents, every document but ``doc_index`` is equal,
    document ``doc_index`` declares ``expected`` (a document without namespace matches
    any) and holds ``value`` under ``key`` in the map at ``path_expr``. ``False`` when
    libyaml is unavailable or can't load either text: the caller then confirms the
    location with the reference parser.
    """
    if _CParser is None:
        return False
    try:
        old = list(yaml.load_all(before, Loader=_CParser))
        new = old if after == before else list(yaml.load_all(after, Loader=_CParser))
    except yaml.YAMLError:
        return False
    if len(old) != len(new) or not 0 <= doc_index < len(new):
        return False
    if any(a != b for i, (a, b) in enumerate(zip(old, new, strict=True)) if i != doc_index):
        return False
    doc = new[doc_index]
    if not isinstance(doc, dict):
        return False
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        return False
    namespace = meta.get("namespace") or None
    if (api_group(str(doc.get("apiVersion") or "")), doc.get("kind"), meta.get("name")) != (
            expected.group, expected.kind, expected.name):
        return False
    if namespace is not None and namespace != expected.namespace:
        return False
    node: Any = doc
    for step in path_expr:
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and 0 <= step < len(node) else None
        else:
            node = node.get(step) if isinstance(node, dict) else None
    return isinstance(node, dict) and node.get(key) == value
