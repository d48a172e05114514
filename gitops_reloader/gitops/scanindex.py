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
  ~30x faster than the editor's pure-Python parser), not from the parser that edits.
  An edit made at a hinted index is checked with :func:`edit_confined`, and when the
  check fails the document is confirmed with
  :func:`~gitops_reloader.gitops.yamledit.find_document` and the edit redone. Without
  libyaml, or when libyaml rejects a file, documents are listed with
  :func:`~gitops_reloader.gitops.yamledit.list_documents` before the file counts as
  unparsable.
- Hostile files cost their size, not more: documents are read from libyaml's *event
  stream* (an alias is a reference to its anchored node, never expanded, so an alias
  bomb is as cheap as its text), nesting deeper than
  :data:`~gitops_reloader.gitops.yamledit.MAX_DEPTH` is refused as unparsable (deep
  flow nesting used to crash libyaml's recursive composer), and files over
  ``max_file_bytes`` are not read. :func:`edit_confined` compares event streams too.
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
from gitops_reloader.gitops.yamledit import MAX_DEPTH, list_documents

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
_STR_TAG = "tag:yaml.org,2002:str"
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
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
    """The identities, read from libyaml's events without building the documents.

    Only the root map's ``apiVersion``/``kind``/``metadata`` and the metadata's
    ``name``/``namespace`` are looked at (first occurrence wins); everything else is
    skipped by depth. Aliases of scalars are resolved; nothing is ever expanded.
    """
    out: list[tuple[int, DocKey]] = []
    index = -1
    depth = 0
    fields: dict[str, _Scalar | None] = {}
    anchors: dict[str, _Scalar] = {}
    key: str | None = None  # the pending key at depth 1 (root) or 2 (metadata); None: expecting a key
    in_meta = False
    has_meta = False
    is_map_doc = False
    scalar: _Scalar | None = None
    for event in yaml.parse(text, Loader=_CParser):
        kind = type(event)
        if kind is yaml.ScalarEvent:
            reading = (depth == 1 and not in_meta) or (depth == 2 and in_meta)
            if not reading and event.anchor is None:
                continue
            scalar = _scalar_of(event)
            if event.anchor is not None:
                anchors[event.anchor] = scalar
        elif kind is yaml.AliasEvent:
            scalar = anchors.get(event.anchor)
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            depth += 1
            if depth > MAX_DEPTH:
                raise _DepthExceeded(f"nested deeper than {MAX_DEPTH} levels")
            if depth == 1:
                is_map_doc = kind is yaml.MappingStartEvent
            elif depth == 2 and not in_meta:  # a collection in the root map: skipped, unless metadata
                if key == "metadata" and not has_meta and kind is yaml.MappingStartEvent:
                    in_meta = has_meta = True
                    key = None
                else:
                    key = None if key is not None else ""  # a value ends the pair; a key awaits one
            elif depth == 3 and in_meta:
                key = None if key is not None else ""
            continue
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            depth -= 1
            if depth == 1 and in_meta:
                in_meta, key = False, None
            continue
        elif kind is yaml.DocumentStartEvent:
            index += 1
            fields, anchors, key, in_meta, has_meta, is_map_doc = {}, {}, None, False, False, False
            continue
        elif kind is yaml.DocumentEndEvent:
            kind_field = fields.get("kind")
            if is_map_doc and kind_field is not None and not kind_field.null and kind_field.value:
                group = api_group(_text_of(fields.get("apiVersion")) or "")
                out.append((index, DocKey(group, kind_field.value, _text_of(fields.get("namespace")) or None,
                                          _text_of(fields.get("name")) or "")))
            continue
        else:
            continue
        # A scalar (or an alias of one) at the level we read: a key or a value.
        if (depth == 1 and not in_meta) or (depth == 2 and in_meta):
            if key is None:
                key = scalar.value if scalar is not None else ""
            else:
                wanted = ("name", "namespace") if in_meta else ("apiVersion", "kind")
                if key in wanted and key not in fields:
                    fields[key] = scalar
                key = None
    return out


def _text_of(scalar: _Scalar | None) -> str | None:
    return None if scalar is None or scalar.null else scalar.value


# ------------------------------------------------------------------ event-stream documents
#
# Documents are read from libyaml's *event stream* into a light tree in which an alias
# is a reference to the anchored node, never a copy: a "billion laughs" alias structure
# stays as small as its text. Nesting deeper than MAX_DEPTH is refused before libyaml's
# cost per token (which grows with the depth) matters, and nothing recurses in Python.


class _Scalar(NamedTuple):
    """A scalar: its text, whether it was plain (unquoted) and its explicit tag, if any."""

    value: str
    plain: bool
    tag: str | None

    @property
    def null(self) -> bool:
        """Whether the scalar reads as null (``~``, ``null``, empty, ``!!null``)."""
        if self.tag is not None:
            return self.tag == _NULL_TAG
        return self.plain and self.value in _NULLS

    @property
    def string(self) -> bool:
        """Whether the scalar reads as a string (resolved as a YAML 1.1 loader does)."""
        if self.tag is not None:
            return self.tag == _STR_TAG
        if not self.plain:
            return True
        return _RESOLVER.resolve(yaml.ScalarNode, self.value, (True, False)) == _STR_TAG


class _Map:
    """A mapping as its (key, value) pairs; keys that are not scalars are kept as ``None``."""

    __slots__ = ("pairs",)

    def __init__(self) -> None:
        self.pairs: list[tuple[str | None, Any]] = []

    def first(self, name: str) -> Any:
        """The value of the first ``name`` key (what the scan uses), ``None`` if absent."""
        return next((v for k, v in self.pairs if k == name), None)

    def only(self, name: str) -> Any:
        """The value of ``name`` when it is there exactly once, else ``None``."""
        hits = [v for k, v in self.pairs if k == name]
        return hits[0] if len(hits) == 1 else None


_NO_KEY: Any = object()


class _DepthExceeded(yaml.YAMLError):
    """The document nests deeper than :data:`~gitops_reloader.gitops.yamledit.MAX_DEPTH`."""


_RESOLVER = yaml.resolver.Resolver()


def _scalar_of(event: Any) -> _Scalar:
    plain = bool(event.implicit[0]) and not event.style  # libyaml: "" for plain
    tag = None if event.tag in (None, "!") else str(event.tag)
    if event.tag == "!":
        plain = False  # the non-specific tag makes any scalar a string
    return _Scalar(str(event.value), plain, tag)


def _event_documents(text: str) -> list[Any]:
    """The root of every document of ``text`` (``None`` for an empty one), from libyaml events.

    Raises:
        yaml.YAMLError: the text does not parse, or nests deeper than ``MAX_DEPTH``.
    """
    docs: list[Any] = []
    stack: list[Any] = []
    pending: list[str | None] = []  # per open map: the key waiting for its value (or _NO_KEY)
    anchors: dict[str, Any] = {}
    root: Any = None

    def attach(node: Any) -> None:
        """Put ``node`` into the open collection (as the next key or value of a map)."""
        nonlocal root
        if not stack:
            root = node
        elif isinstance(stack[-1], list):
            stack[-1].append(node)
        elif pending[-1] is _NO_KEY:
            pending[-1] = node.value if isinstance(node, _Scalar) else None
        else:
            stack[-1].pairs.append((pending[-1], node))
            pending[-1] = _NO_KEY

    for event in yaml.parse(text, Loader=_CParser):
        if isinstance(event, yaml.DocumentStartEvent):
            root, anchors = None, {}
        elif isinstance(event, yaml.DocumentEndEvent):
            docs.append(root)
        elif isinstance(event, yaml.ScalarEvent):
            node = _scalar_of(event)
            attach(node)
            if event.anchor is not None:
                anchors[event.anchor] = node
        elif isinstance(event, yaml.AliasEvent):
            attach(anchors.get(event.anchor))
        elif isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= MAX_DEPTH:
                raise _DepthExceeded(f"nested deeper than {MAX_DEPTH} levels")
            node = _Map() if isinstance(event, yaml.MappingStartEvent) else []
            attach(node)  # a collection as a key: its value is kept under the name None
            if event.anchor is not None:
                anchors[event.anchor] = node
            stack.append(node)
            pending.append(_NO_KEY)
        elif isinstance(event, yaml.CollectionEndEvent):
            stack.pop()
            pending.pop()
    return docs


def _str_field(node: Any, name: str) -> str | None:
    """A scalar field's text (first occurrence); ``None`` when absent, null or not a scalar."""
    value = node.first(name)
    if not isinstance(value, _Scalar) or value.null:
        return None
    return value.value


def _document_events(text: str) -> list[list[tuple[Any, ...]]]:
    """Every document's events as comparable tuples (no alias is expanded)."""
    docs: list[list[tuple[Any, ...]]] = []
    current: list[tuple[Any, ...]] = []
    depth = 0
    for event in yaml.parse(text, Loader=_CParser):
        if isinstance(event, yaml.DocumentStartEvent):
            current = []
        elif isinstance(event, yaml.DocumentEndEvent):
            docs.append(current)
        else:
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _DepthExceeded(f"nested deeper than {MAX_DEPTH} levels")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            current.append((type(event).__name__, getattr(event, "anchor", None),
                            getattr(event, "tag", None), getattr(event, "implicit", None),
                            getattr(event, "value", None)))
    return docs


def edit_confined(before: str, after: str, *, doc_index: int, expected: DocKey,
                  path_expr: Sequence[str | int], key: str, value: str) -> bool:
    """Whether an edit of document ``doc_index`` stayed in the object it was meant for.

    Checked with libyaml, independently of the parser that made the edit, on *event
    streams* (never on documents with their aliases expanded, so the check is linear in
    the text): both texts hold the same number of documents, every document but
    ``doc_index`` has the same events, and document ``doc_index`` declares ``expected``
    (a document without namespace matches any) and holds the string ``value`` under
    ``key`` in the map at ``path_expr`` (each step there exactly once). ``False`` when
    libyaml is unavailable or can't read either text: the caller then confirms the
    location with the reference parser.
    """
    if _CParser is None:
        return False
    try:
        old = _document_events(before)
        new = old if after == before else _document_events(after)
        roots = _event_documents(after)
    except yaml.YAMLError:
        return False
    if len(old) != len(new) or not 0 <= doc_index < len(new):
        return False
    if any(a != b for i, (a, b) in enumerate(zip(old, new, strict=True)) if i != doc_index):
        return False
    doc = roots[doc_index]
    if not isinstance(doc, _Map):
        return False
    meta = doc.first("metadata")
    if not isinstance(meta, _Map):
        return False
    namespace = _str_field(meta, "namespace")
    identity = (api_group(_str_field(doc, "apiVersion") or ""), _str_field(doc, "kind"),
                _str_field(meta, "name"))
    if identity != (expected.group, expected.kind, expected.name):
        return False
    if namespace is not None and namespace != expected.namespace:
        return False
    node: Any = doc
    for step in path_expr:
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and 0 <= step < len(node) else None
        else:
            node = node.only(step) if isinstance(node, _Map) else None
    found = node.only(key) if isinstance(node, _Map) else None
    return isinstance(found, _Scalar) and found.string and found.value == value
