"""Byte-preserving edits of one annotation in Kubernetes manifests, Helm values and patches.

This module is the only place that imports ruamel.yaml, and it uses it only to *parse*
(libyaml, through PyYAML, only pre-checks the nesting depth):
the event stream gives the position (index, line, column) and style of every node.
Edits are then spliced into the original text — one value replaced in place, or a few
lines (or one flow entry) inserted — so every byte outside the edit is unchanged:
comments, key order, quoting, indentation, sequence style, long and folded scalars,
``%YAML`` directives, ``---``/``...`` markers, other documents, CRLF line endings and a
missing final newline. The whole file is never re-dumped.

Guarantees:

* **Idempotence.** Setting the value a key already holds returns ``changed=False`` and
  the identical text; a later edit with a new value changes only that key's line.
* **Refusal over damage.** :class:`~gitops_reloader.errors.YamlEditError` is raised,
  naming the file and document, when the file does not parse, the document is a
  Helm/Go template (see below), the target map is (or lies inside) an alias, an anchored
  node or a map with a merge key (``<<``), a node on the path is not a map (or sequence
  for an integer step), more maps are missing than the caller allows to create, or the
  document index is out of range.
* **Templates.** ``{{`` inside a scalar (a Vault agent template in an annotation, a Go
  template in an embedded ConfigMap) is content: such a document is edited like any
  other. A document is a template, and refused, when ``{{`` appears anywhere else in it
  (in a comment, or as flow-collection syntax), or when the file does not parse and
  contains ``{{``. Files in a Helm chart's ``templates/`` directory are refused by the
  caller, which knows the repository (:mod:`gitops_reloader.sinks.git`).
* **Bounded work on hostile text.** Input longer than :data:`MAX_TEXT_CHARS` or nested
  deeper than :data:`MAX_DEPTH` is refused before or while parsing (libyaml's and
  ruamel's cost per token grows with the nesting depth). Aliases are never expanded:
  an alias is a reference to its anchored node, so an alias bomb costs its text's size.
* Document indices count every document of the YAML stream, empty and comment-only ones
  included; take them from :func:`list_documents` or :func:`find_document` rather than
  from another parser.

All functions are pure (text in, text out) and thread-safe. Error messages carry the
path, document and YAML path, never file content: a manifest may be a Secret.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import yaml as pyyaml
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

from gitops_reloader.errors import YamlEditError
from gitops_reloader.model import CONFIG_HASH_KEY
from gitops_reloader.regex import compile_linear

__all__ = [
    "CONFIG_HASH_KEY",
    "MAX_DEPTH",
    "MAX_TEXT_CHARS",
    "DocumentInfo",
    "EditResult",
    "find_document",
    "list_documents",
    "parse_yaml_path",
    "read_at_path",
    "read_template_annotation",
    "set_at_path",
    "set_template_annotation",
]

MAX_TEXT_CHARS: Final = 4 * 1024 * 1024
"""Longest text parsed (the scan index reads files of at most as many bytes)."""
MAX_DEPTH: Final = 100
"""Deepest nesting of collections parsed; Kubernetes objects, CRD schemas included, stay far below."""

YamlPath = tuple[str | int, ...]
"""A path into a document: strings are map keys, integers are sequence indices."""

_LIBYAML: Final = getattr(pyyaml, "CSafeLoader", None)
_TEMPLATE_PATH: Final[YamlPath] = ("spec", "template")
_ANNOTATIONS_PATH: Final[YamlPath] = ("spec", "template", "metadata", "annotations")
_NULLS: Final = frozenset({"", "~", "null", "Null", "NULL"})
_MERGE_TAG: Final = "tag:yaml.org,2002:merge"
_STR_TAGS: Final = frozenset({"tag:yaml.org,2002:str", "!!str"})
# Plain scalars that every YAML 1.1/1.2 parser reads back as the same string: start with
# a letter or underscore, no indicators, and none of the words YAML 1.1 turns into bools.
_PLAIN_SAFE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
_PLAIN_RESERVED: Final = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})
_DEFAULT_STEP: Final = 2
_COLON: Final = re.compile(r"[ \t]*:")
# YAML allows tabs in the whitespace before a comment and at the end of a line, but
# ruamel.yaml rejects them there. The parser sees those runs as spaces: same length, so
# every position stays valid for splicing into the original text. (Inside a quoted or
# block scalar such a run is content; only values read back can differ, never bytes.)
# RE2 (linear): the backtracking form took minutes on a few KB of blanks and tabs; group 2
# is the terminator, kept as is.
_TAB_SEPARATION: Final = compile_linear(r"([ \t]*\t[ \t]*)(#|\r?\n|\r?\z)")


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    """Identity of one Kubernetes object document in a YAML file (for the repository index).

    ``namespace`` is ``None`` when the document has no ``metadata.namespace``; such a
    document is applied into whatever namespace the GitOps tool chooses.
    """

    index: int
    api_version: str
    kind: str
    name: str
    namespace: str | None


@dataclass(frozen=True, slots=True)
class EditResult:
    """The outcome of an edit: the new ``text`` (the input itself when ``changed`` is False).

    ``previous`` is the value the key held before, or ``None`` when it was absent or null.
    """

    text: str
    changed: bool
    previous: str | None


# --------------------------------------------------------------------------- parse tree


@dataclass(slots=True, eq=False)
class _Node:
    """One node of a parsed document with its source span (character indices).

    ``start`` includes a leading anchor or tag; for flow collections ``close`` is the
    index of the closing bracket. Maps keep keys and values alternating in ``children``.
    Aliases are kept as alias nodes (``value`` is the anchor name) and never followed
    implicitly.
    """

    kind: str  # "map" | "seq" | "scalar" | "alias"
    start: int
    end: int
    column: int
    style: str | None = None
    flow: bool = False
    anchor: str | None = None
    tag: str | None = None
    value: str | None = None
    close: int = -1
    children: list[_Node] = field(default_factory=list)

    def pairs(self) -> list[tuple[_Node, _Node]]:
        """The (key, value) pairs of a map node."""
        it = iter(self.children)
        return list(zip(it, it, strict=True))


@dataclass(slots=True)
class _Doc:
    """One document of the stream: its span, root node and anchor table."""

    index: int
    start: int
    end: int
    root: _Node | None
    anchors: dict[str, _Node]


@dataclass(slots=True)
class _Walk:
    """Where a path ends: the existing target map, or where the missing part begins.

    ``chain`` holds the existing collections from the root down (the last one is the
    target map, or the map under which ``missing`` must be created). ``null_key`` is
    set when the last existing step is a key whose value is null.
    """

    chain: list[_Node]
    target: _Node | None
    missing: tuple[str, ...] = ()
    null_key: tuple[_Node, _Node] | None = None


def _parse(text: str, path: str) -> list[_Doc]:
    """Parse ``text`` into documents; the only call into ruamel.yaml.

    The pure-Python *safe* parser gives the same events and marks as the round-trip one
    without collecting comments (comments are kept by splicing, not by the parser), and
    is about 1.4x faster (``bench/yaml_hostile.py``).
    """
    where = path or "<text>"
    if len(text) > MAX_TEXT_CHARS:
        raise YamlEditError(f"{where}: longer than {MAX_TEXT_CHARS} characters; not parsed")
    _precheck_depth(text, where)
    try:
        return _build(YAML(typ="safe", pure=True).parse(_TAB_SEPARATION.sub(_spaces, text)), where)
    except YAMLError as exc:
        if "{{" in text:
            raise YamlEditError(
                f"{where}: contains Helm/Go templating ('{{{{'); templated files can't be edited safely"
            ) from exc
        detail = "not valid YAML"
        if isinstance(exc, MarkedYAMLError) and exc.problem:
            detail += f": {exc.problem}"
            if exc.problem_mark is not None:
                mark = exc.problem_mark
                detail += f" (line {mark.line + 1}, column {mark.column + 1})"
        raise YamlEditError(f"{where}: {detail}") from exc


def _precheck_depth(text: str, where: str) -> None:
    """Refuse deep nesting with libyaml's event stream before ruamel.yaml sees the text.

    ruamel.yaml's scanner keeps up to 1024 characters of possible keys per line and
    re-checks all of them for every token, so deep flow nesting costs it seconds before
    :func:`_build` can stop it; libyaml gets there in microseconds. A text libyaml can't
    parse is left to ruamel.yaml (the two differ on a few corner cases).
    """
    if _LIBYAML is None:
        return
    depth = 0
    try:
        for event in pyyaml.parse(text, Loader=_LIBYAML):
            if isinstance(event, pyyaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise YamlEditError(f"{where}: nested deeper than {MAX_DEPTH} levels; not parsed")
            elif isinstance(event, pyyaml.CollectionEndEvent):
                depth -= 1
    except pyyaml.YAMLError:
        return


def _spaces(match: Any) -> str:
    return " " * len(match.group(1)) + match.group(2)


def _build(events: Iterable[Event], where: str) -> list[_Doc]:
    """Turn the event stream into :class:`_Doc` trees, refusing nesting deeper than MAX_DEPTH."""
    docs: list[_Doc] = []
    stack: list[_Node] = []
    roots: list[_Node] = []
    anchors: dict[str, _Node] = {}
    doc_start = 0

    def attach(node: _Node) -> None:
        (stack[-1].children if stack else roots).append(node)
        if node.anchor is not None:
            anchors[node.anchor] = node

    for ev in events:
        start, end = ev.start_mark, ev.end_mark
        if isinstance(ev, DocumentStartEvent):
            doc_start, roots, anchors = start.index, [], {}
        elif isinstance(ev, DocumentEndEvent):
            root = roots[0] if roots else None
            docs.append(_Doc(len(docs), doc_start, end.index, root, anchors))
        elif isinstance(ev, MappingStartEvent | SequenceStartEvent):
            node = _Node(
                kind="map" if isinstance(ev, MappingStartEvent) else "seq",
                start=start.index,
                end=-1,
                column=start.column,
                flow=bool(ev.flow_style),
                anchor=_opt_str(ev.anchor),
                tag=_opt_str(ev.tag),
            )
            attach(node)
            stack.append(node)
            if len(stack) > MAX_DEPTH:
                raise YamlEditError(f"{where}: nested deeper than {MAX_DEPTH} levels; not parsed")
        elif isinstance(ev, MappingEndEvent | SequenceEndEvent):
            node = stack.pop()
            node.end, node.close = end.index, start.index
        elif isinstance(ev, ScalarEvent):
            attach(
                _Node(
                    kind="scalar",
                    start=start.index,
                    end=end.index,
                    column=start.column,
                    style=_opt_str(ev.style),
                    anchor=_opt_str(ev.anchor),
                    tag=_opt_str(ev.tag),
                    value=str(ev.value),
                )
            )
        elif isinstance(ev, AliasEvent):
            node = _Node("alias", start.index, end.index, start.column, value=str(ev.anchor))
            (stack[-1].children if stack else roots).append(node)
    return docs


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


# --------------------------------------------------------------------------- public API


def list_documents(text: str, *, path: str = "") -> list[DocumentInfo]:
    """List the Kubernetes objects in a YAML file, for the repository scan index.

    Documents whose root is not a map, or that have no string ``kind``, are skipped
    (empty and comment-only documents, Helm values files). Missing ``apiVersion`` or
    ``metadata.name`` read as ``""``. Templated documents are listed if they parse;
    editing them is refused later.

    Raises:
        YamlEditError: the file does not parse.
    """
    infos: list[DocumentInfo] = []
    for doc in _parse(text, path):
        root = doc.root
        if root is None or root.kind != "map":
            continue
        kind = _field_str(doc, root, "kind")
        if not kind:
            continue
        meta = _field(doc, root, "metadata")
        name = namespace = None
        if meta is not None and meta.kind == "map":
            name = _field_str(doc, meta, "name")
            namespace = _field_str(doc, meta, "namespace")
        infos.append(
            DocumentInfo(
                index=doc.index,
                api_version=_field_str(doc, root, "apiVersion") or "",
                kind=kind,
                name=name or "",
                namespace=namespace or None,
            )
        )
    return infos


def find_document(
    text: str,
    *,
    kind: str,
    name: str,
    namespace: str | None,
    api_group: str | None = None,
    path: str = "",
) -> int | None:
    """Return the index of the document declaring ``kind``/``name``, or ``None``.

    ``api_group`` (``"apps"``, ``""`` for the core group) is compared when given. A
    document without ``metadata.namespace`` matches any namespace; one that names the
    namespace exactly is preferred. ``namespace=None`` matches every document.

    Raises:
        YamlEditError: the file does not parse.
    """
    fallback: int | None = None
    for info in list_documents(text, path=path):
        if info.kind != kind or info.name != name:
            continue
        if api_group is not None and _api_group(info.api_version) != api_group:
            continue
        if namespace is None or info.namespace == namespace:
            return info.index
        if info.namespace is None and fallback is None:
            fallback = info.index
    return fallback


def read_template_annotation(
    text: str, *, doc_index: int, key: str = CONFIG_HASH_KEY, path: str = ""
) -> str | None:
    """Read ``spec.template.metadata.annotations[key]`` of one document.

    Returns ``None`` when the metadata, annotations or key are absent (or null).

    Raises:
        YamlEditError: for the same reasons :func:`set_template_annotation` refuses.
    """
    docs = _parse(text, path)
    doc = _document(docs, doc_index, text, path)
    _require_template(doc, path)
    return _read(doc, _ANNOTATIONS_PATH, key, path)


def set_template_annotation(
    text: str, *, doc_index: int, value: str, key: str = CONFIG_HASH_KEY, path: str = ""
) -> EditResult:
    """Set ``spec.template.metadata.annotations[key] = value`` in one document.

    ``metadata`` and ``annotations`` are created when missing (``metadata`` goes
    before the template's ``spec``); ``spec.template`` itself must exist.

    Raises:
        YamlEditError: no ``spec.template``, or any refusal listed in the module docstring.
    """
    docs = _parse(text, path)
    doc = _document(docs, doc_index, text, path)
    _require_template(doc, path)
    return _set(text, doc, _ANNOTATIONS_PATH, key, value, path)


def read_at_path(
    text: str,
    *,
    path_expr: YamlPath,
    key: str = CONFIG_HASH_KEY,
    doc_index: int = 0,
    path: str = "",
) -> str | None:
    """Read ``key`` of the map at ``path_expr`` (``None`` when the map or key is absent).

    Raises:
        YamlEditError: for the same reasons :func:`set_at_path` refuses.
    """
    docs = _parse(text, path)
    return _read(_document(docs, doc_index, text, path), path_expr, key, path)


def set_at_path(
    text: str,
    *,
    path_expr: YamlPath,
    value: str,
    key: str = CONFIG_HASH_KEY,
    doc_index: int = 0,
    path: str = "",
    max_create: int | None = None,
) -> EditResult:
    """Set ``key: value`` in the map at ``path_expr``, creating missing maps.

    Used for Helm values files (``("podAnnotations",)``), HelmRelease values and
    kustomize patches. Missing maps are created as nested block maps (or inside a flow
    map when their parent is one); integer steps must exist. ``max_create`` caps how
    many maps of the path may be created (a key whose value is null counts as one):
    ``1`` lets only the last map of the path be created, and only where its parent
    exists; ``0`` only writes into an existing map; ``None``: no cap.

    Raises:
        YamlEditError: see the module docstring.
    """
    docs = _parse(text, path)
    doc = _document(docs, doc_index, text, path)
    return _set(text, doc, path_expr, key, value, path, max_create)


def parse_yaml_path(expr: str) -> YamlPath:
    """Parse a dotted YAML path such as ``spec.template.metadata.annotations``.

    ``[N]`` indexes a sequence (``items[1].spec``); keys containing dots or brackets are
    quoted, ``'podAnnotations."x.y/z"'`` or ``a["x.y"]``. Inside double quotes ``\\"``
    and ``\\\\`` are escapes; inside single quotes ``''`` is a quote. ``""`` parses to
    ``()`` (the document root).

    Raises:
        YamlEditError: the expression is malformed.
    """
    steps: list[str | int] = []
    i, n = 0, len(expr)
    expect_key = True  # at the start, or just after a '.'
    while i < n:
        ch = expr[i]
        if ch == "[":
            close = expr.find("]", i)
            inner = expr[i + 1 : close] if close != -1 else ""
            if close == -1 or not inner:
                raise YamlEditError(f"invalid YAML path {expr!r}: unclosed or empty '['")
            if inner[0] in "\"'":
                key, j = _quoted_step(expr, i + 1)
                if expr[j : j + 1] != "]":
                    raise YamlEditError(f"invalid YAML path {expr!r}: expected ']'")
                steps.append(key)
                i = j + 1
            elif inner.isdigit():
                steps.append(int(inner))
                i = close + 1
            else:
                raise YamlEditError(f"invalid YAML path {expr!r}: bad index [{inner}]")
            expect_key = False
        elif ch == ".":
            if expect_key:
                raise YamlEditError(f"invalid YAML path {expr!r}: empty key")
            i += 1
            expect_key = True
            if i == n:
                raise YamlEditError(f"invalid YAML path {expr!r}: ends with '.'")
        elif expect_key:
            if ch in "\"'":
                key, i = _quoted_step(expr, i)
            else:
                j = i
                while j < n and expr[j] not in ".[\"'":
                    j += 1
                key, i = expr[i:j], j
            steps.append(key)
            expect_key = False
        else:
            raise YamlEditError(f"invalid YAML path {expr!r}: unexpected {ch!r} at {i}")
    return tuple(steps)


def _quoted_step(expr: str, i: int) -> tuple[str, int]:
    """Read a quoted key starting at ``expr[i]``; return it and the index after it."""
    quote, out, j = expr[i], [], i + 1
    while j < len(expr):
        ch = expr[j]
        if quote == '"' and ch == "\\" and j + 1 < len(expr):
            out.append(expr[j + 1])
            j += 2
        elif ch == quote:
            if quote == "'" and expr[j + 1 : j + 2] == "'":
                out.append("'")
                j += 2
            else:
                return "".join(out), j + 1
        else:
            out.append(ch)
            j += 1
    raise YamlEditError(f"invalid YAML path {expr!r}: unterminated quote")


# --------------------------------------------------------------------------- locate


def _document(docs: Sequence[_Doc], index: int, text: str, path: str) -> _Doc:
    """Return document ``index``, refusing out-of-range indices and templated documents."""
    if not 0 <= index < len(docs):
        raise YamlEditError(
            f"{path or '<text>'}: document {index} is out of range (the file has {len(docs)} documents)"
        )
    doc = docs[index]
    if _templated(doc, text):
        raise YamlEditError(
            f"{_where(doc, path)}: contains Helm/Go templating ('{{{{' outside a string value); "
            "templated documents can't be edited safely"
        )
    return doc


def _templated(doc: _Doc, text: str) -> bool:
    """Whether ``{{`` appears in the document outside every scalar (comments included)."""
    first = text.find("{{", doc.start, doc.end)
    if first == -1:
        return False
    spans: list[tuple[int, int]] = []
    todo = [doc.root] if doc.root is not None else []
    while todo:
        node = todo.pop()
        if node.kind == "scalar":
            spans.append((node.start, node.end))
        todo.extend(node.children)
    spans.sort()
    starts = [start for start, _ in spans]
    pos = first
    while pos != -1:
        i = bisect_right(starts, pos) - 1
        if i < 0 or pos + 2 > spans[i][1]:
            return True
        pos = text.find("{{", pos + 1, doc.end)
    return False


def _require_template(doc: _Doc, path: str) -> None:
    walk = _walk(doc, _TEMPLATE_PATH, path)
    if walk.target is None:
        raise YamlEditError(f"{_where(doc, path)}: no spec.template (no pod template to annotate)")


def _walk(doc: _Doc, path_expr: YamlPath, path: str) -> _Walk:
    """Descend ``path_expr`` from the root, checking every step can be edited safely."""
    node = doc.root
    if node is None or _is_null(node):
        raise YamlEditError(f"{_where(doc, path)}: the document is empty")
    chain: list[_Node] = []
    for i, step in enumerate(path_expr):
        _check_editable(node, doc, path, path_expr[:i])
        chain.append(node)
        if isinstance(step, int):
            if node.kind != "seq":
                raise YamlEditError(f"{_where(doc, path)}: {_label(path_expr[:i])} is not a sequence")
            if not 0 <= step < len(node.children):
                raise YamlEditError(f"{_where(doc, path)}: {_label(path_expr[: i + 1])} does not exist")
            node = node.children[step]
            continue
        if node.kind != "map":
            raise YamlEditError(f"{_where(doc, path)}: {_label(path_expr[:i])} is not a map")
        hit = _lookup(node, step, doc, path, path_expr[:i])
        if hit is None:
            return _Walk(chain, None, _creatable(path_expr[i:], doc, path))
        key_node, value_node = hit
        _check_editable(value_node, doc, path, path_expr[: i + 1])
        if _is_null(value_node):
            rest = _creatable(path_expr[i + 1 :], doc, path)
            return _Walk(chain, None, rest, (key_node, value_node))
        node = value_node
    _check_editable(node, doc, path, path_expr)
    if node.kind != "map":
        raise YamlEditError(f"{_where(doc, path)}: {_label(path_expr)} is not a map")
    chain.append(node)
    return _Walk(chain, node)


def _creatable(rest: YamlPath, doc: _Doc, path: str) -> tuple[str, ...]:
    """The missing steps as key names; missing sequence items can't be invented."""
    names = tuple(step for step in rest if isinstance(step, str))
    if len(names) != len(rest):
        raise YamlEditError(
            f"{_where(doc, path)}: path {_label(rest)} is missing and contains a sequence "
            "index; only maps are created"
        )
    return names


def _check_editable(node: _Node, doc: _Doc, path: str, at: YamlPath) -> None:
    """Refuse aliases, anchored nodes and merge keys on the way to the edit."""
    where, label = _where(doc, path), _label(at)
    if node.kind == "alias":
        raise YamlEditError(
            f"{where}: {label} is an alias (*{node.value}); editing through it would "
            "change the anchored node and every other alias of it"
        )
    if node.anchor is not None:
        raise YamlEditError(
            f"{where}: {label} is anchored (&{node.anchor}); editing it would also change every alias of it"
        )
    if node.kind == "map" and any(_is_merge_key(k) for k, _ in node.pairs()):
        raise YamlEditError(
            f"{where}: {label} uses a merge key (<<); part of its content comes from "
            "elsewhere and can't be edited safely"
        )


def _lookup(node: _Node, name: str, doc: _Doc, path: str, at: YamlPath) -> tuple[_Node, _Node] | None:
    """The (key, value) pair of ``name`` in map ``node``; duplicates are refused."""
    hits = [(k, v) for k, v in node.pairs() if k.kind == "scalar" and k.value == name]
    if len(hits) > 1:
        raise YamlEditError(f"{_where(doc, path)}: {_label((*at, name))} is a duplicate key")
    return hits[0] if hits else None


def _read(doc: _Doc, path_expr: YamlPath, key: str, path: str) -> str | None:
    walk = _walk(doc, path_expr, path)
    if walk.target is None:
        return None
    hit = _lookup(walk.target, key, doc, path, path_expr)
    if hit is None:
        return None
    value = _resolve(doc, hit[1])
    if value.kind != "scalar":
        raise YamlEditError(
            f"{_where(doc, path)}: {_label((*path_expr, key))} is a {value.kind}, not a string"
        )
    return None if _is_null(value) else value.value


def _resolve(doc: _Doc, node: _Node) -> _Node:
    """Follow an alias, for reading only."""
    if node.kind == "alias" and node.value in doc.anchors:
        return doc.anchors[node.value]
    return node


def _field(doc: _Doc, node: _Node, name: str) -> _Node | None:
    for k, v in node.pairs():
        if k.kind == "scalar" and k.value == name:
            return _resolve(doc, v)
    return None


def _field_str(doc: _Doc, node: _Node, name: str) -> str | None:
    value = _field(doc, node, name)
    if value is None or value.kind != "scalar" or _is_null(value):
        return None
    return value.value


def _api_group(api_version: str) -> str:
    group, slash, _ = api_version.rpartition("/")
    return group if slash else ""


def _is_null(node: _Node) -> bool:
    return node.kind == "scalar" and node.style is None and node.tag is None and node.value in _NULLS


def _is_merge_key(node: _Node) -> bool:
    return node.kind == "scalar" and (node.tag == _MERGE_TAG or (node.style is None and node.value == "<<"))


def _where(doc: _Doc, path: str) -> str:
    """``file: document N (Kind/name)`` for messages."""
    where = f"{path or '<text>'}: document {doc.index}"
    if doc.root is not None and doc.root.kind == "map":
        kind = _field_str(doc, doc.root, "kind")
        meta = _field(doc, doc.root, "metadata")
        name = _field_str(doc, meta, "name") if meta is not None and meta.kind == "map" else None
        if kind:
            where += f" ({kind}/{name or '?'})"
    return where


def _label(at: YamlPath) -> str:
    if not at:
        return "the document root"
    out = ""
    for step in at:
        if isinstance(step, int):
            out += f"[{step}]"
        else:
            shown = step if _PLAIN_SAFE.fullmatch(step) else f'"{step}"'
            out += f".{shown}" if out else shown
    return out


# --------------------------------------------------------------------------- edit


def _set(text: str, doc: _Doc, path_expr: YamlPath, key: str, value: str, path: str,
         max_create: int | None = None) -> EditResult:
    walk = _walk(doc, path_expr, path)
    created = len(walk.missing) + (walk.null_key is not None)
    if max_create is not None and created > max_create:
        first = path_expr[: len(path_expr) - created + 1]
        raise YamlEditError(
            f"{_where(doc, path)}: {_label(first)} does not exist and only "
            f"{max_create} missing map(s) at the end of {_label(path_expr)} may be created"
        )
    if walk.target is not None:
        hit = _lookup(walk.target, key, doc, path, path_expr)
        if hit is not None:
            return _replace_value(text, doc, hit, value, path, (*path_expr, key))
        return _insert_into_map(text, doc, walk.chain, (), key, value)
    if walk.null_key is not None:
        return _fill_null(text, doc, walk, key, value, path)
    return _insert_into_map(text, doc, walk.chain, walk.missing, key, value)


def _replace_value(
    text: str, doc: _Doc, hit: tuple[_Node, _Node], value: str, path: str, at: YamlPath
) -> EditResult:
    """Replace an existing key's value in place, keeping its quoting style."""
    key_node, old = hit
    if old.kind in ("map", "seq"):
        raise YamlEditError(f"{_where(doc, path)}: {_label(at)} is a {old.kind}, not a string")
    if old.anchor is not None:
        raise YamlEditError(
            f"{_where(doc, path)}: {_label(at)} is anchored (&{old.anchor}); editing it "
            "would also change every alias of it"
        )
    resolved = _resolve(doc, old)
    previous = None
    if resolved.kind == "scalar" and not _is_null(resolved):
        previous = resolved.value
    if old.kind == "alias":
        start, end, new = old.start, old.end, _double_quoted(value)
    elif _is_null(old) and old.start == old.end:  # `key:` with nothing after it
        start = end = _after_colon(text, key_node)
        if text[start - 1 : start] != ":":
            raise YamlEditError(f"{_where(doc, path)}: {_label(at)} is an explicit key without ':'")
        new = " " + _double_quoted(value)
    else:
        same_type = old.tag is None or old.tag in _STR_TAGS
        if old.value == value and same_type and (old.style is not None or _plain_safe(value)):
            return EditResult(text, False, previous)
        start, end = old.start, old.end
        if old.style in ("|", ">"):  # keep the blank lines after it, even a `|+` one's
            end = start + len(text[start:end].rstrip())
        # A null or block scalar gives no quoting to keep: write it as a new value is.
        new = _double_quoted(value) if _is_null(old) else _format_value(value, old.style)
    return EditResult(text[:start] + new + text[end:], True, previous)


def _insert_into_map(
    text: str, doc: _Doc, chain: list[_Node], names: tuple[str, ...], key: str, value: str
) -> EditResult:
    """Add ``names[0]: {...: {key: value}}`` (or just ``key: value``) to ``chain[-1]``."""
    target = chain[-1]
    quote = _key_quote(chain)
    if target.flow:
        entry = _flow_entry(names, key, value, quote)
        if target.children:
            pos = _content_end(text, target.children[-1]) or _after_colon(text, target.children[-2])
            return _splice(text, pos, ", " + entry)
        return _splice(text, target.close, entry)
    column = target.children[0].column
    lines = _block_lines(names, key, value, quote, column, _indent_step(doc, chain))
    before = _before_sibling(text, target, names[0], target is doc.root) if names else None
    if before is not None:
        return EditResult(_insert_before(text, before, lines), True, None)
    end = _content_end(text, target)
    assert end is not None  # a block map has at least one key
    return EditResult(_insert_after_line(text, end, lines), True, None)


def _fill_null(text: str, doc: _Doc, walk: _Walk, key: str, value: str, path: str) -> EditResult:
    """Turn ``name:`` / ``name: null`` into a map holding the missing path and the key."""
    assert walk.null_key is not None
    key_node, null = walk.null_key
    parent = walk.chain[-1]
    quote = _key_quote(walk.chain)
    if parent.flow:
        if null.start == null.end:
            raise YamlEditError(
                f"{_where(doc, path)}: an implicit null inside a flow map can't be edited safely"
            )
        entry = "{" + _flow_entry(walk.missing, key, value, quote) + "}"
        return EditResult(text[: null.start] + entry + text[null.end :], True, None)
    step = _indent_step(doc, walk.chain)
    lines = _block_lines(walk.missing, key, value, quote, key_node.column + step, step)
    anchor = key_node.end
    if null.start != null.end:  # drop the explicit `null` / `~`, keep a trailing comment
        cut = null.start
        while cut > key_node.end and text[cut - 1] in " \t":
            cut -= 1
        text = text[:cut] + text[null.end :]
        anchor = cut
    return EditResult(_insert_after_line(text, anchor, lines), True, None)


def _content_end(text: str, node: _Node) -> int | None:
    """Index just after the last character that belongs to ``node``.

    A block map's own end points at the next token, so descend into its last value;
    block scalars lose their trailing blank lines. ``None`` for an implicit null.
    """
    if node.kind == "scalar":
        if node.style in ("|", ">"):
            span = text[node.start : node.end]
            header = span.split("\n", 1)[0].split(" #", 1)[0]
            header = header[header.rfind(node.style) :]  # past any anchor or tag
            if "+" in header:  # keep chomping: trailing blank lines are part of the value
                return node.end
            return node.start + len(span.rstrip())
        return None if node.start == node.end else node.end
    if node.kind == "alias" or node.flow:
        return node.end
    last = node.children[-1]
    end = _content_end(text, last)
    if end is not None:
        return end
    if node.kind == "map":  # `key:` with an implicit null: the colon ends the content
        return _after_colon(text, node.children[-2])
    return text.rfind("-", node.start, last.start) + 1  # a trailing bare `-`


def _after_colon(text: str, key: _Node) -> int:
    """Index after the ``:`` following ``key`` (after the key itself if there is none)."""
    match = _COLON.match(text, key.end)
    return match.end() if match else key.end


def _before_sibling(text: str, target: _Node, first: str, is_root: bool) -> int | None:
    """Where a new ``metadata`` goes: before a sibling ``spec``, above its comments.

    Comment lines right above ``spec`` at its column describe it and stay with it —
    except the head comments of a document, above its first key.
    """
    if first != "metadata":
        return None
    keys = [k for k, _ in target.pairs()]
    spec = next((k for k in keys if k.kind == "scalar" and k.value == "spec"), None)
    if spec is None:
        return None
    line_start = text.rfind("\n", 0, spec.start) + 1
    if text[line_start : spec.start].strip(" "):
        return None  # `- spec:` and the like: fall back to appending
    pos = line_start
    while pos > 0 and not (is_root and spec is keys[0]):
        prev = text.rfind("\n", 0, pos - 1) + 1
        line = text[prev:pos].rstrip("\r\n")
        body = line.lstrip(" ")
        if not body.startswith("#") or len(line) - len(body) != spec.column:
            break
        pos = prev
    return pos


def _indent_step(doc: _Doc, chain: Sequence[_Node]) -> int:
    """The file's indentation step, from block maps nested directly in block maps.

    Looks at the target map first, then its ancestors, then the whole document.
    """
    for node in reversed(chain):
        step = _step_below(node)
        if step:
            return step
    todo = [doc.root] if doc.root is not None else []
    while todo:
        node = todo.pop()
        step = _step_below(node)
        if step:
            return step
        todo.extend(child for child in node.children if child.kind in ("map", "seq"))
    return _DEFAULT_STEP


def _step_below(node: _Node) -> int | None:
    if node.kind != "map" or node.flow:
        return None
    for _, value in node.pairs():
        if value.kind == "map" and not value.flow:
            step = value.children[0].column - node.children[0].column
            if step > 0:
                return step
    return None


def _key_quote(chain: Sequence[_Node]) -> str | None:
    """Quote style for new keys: the siblings' when they are all quoted alike.

    A map without keys (``{}``) takes the style of its nearest ancestor map with keys.
    """
    for node in reversed(chain):
        if node.kind != "map":
            continue
        styles = {k.style for k, _ in node.pairs() if k.kind == "scalar"}
        if styles:
            return styles.pop() if len(styles) == 1 and styles <= {'"', "'"} else None
    return None


def _block_lines(
    names: Sequence[str], key: str, value: str, quote: str | None, column: int, step: int
) -> list[str]:
    lines = [" " * (column + i * step) + _format_key(n, quote) + ":" for i, n in enumerate(names)]
    indent = " " * (column + len(names) * step)
    lines.append(f"{indent}{_format_key(key, quote)}: {_double_quoted(value)}")
    return lines


def _flow_entry(names: Sequence[str], key: str, value: str, quote: str | None) -> str:
    entry = f"{_format_key(key, quote)}: {_double_quoted(value)}"
    for name in reversed(names):
        entry = f"{_format_key(name, quote)}: {{{entry}}}"
    return entry


# --------------------------------------------------------------------------- text splicing


def _splice(text: str, pos: int, insert: str) -> EditResult:
    return EditResult(text[:pos] + insert + text[pos:], True, None)


def _insert_after_line(text: str, pos: int, lines: Sequence[str]) -> str:
    """Insert ``lines`` after the line holding ``pos``, in that line's line ending.

    At the end of a file without a final newline the file keeps having none.
    """
    if pos > 0 and text[pos - 1] == "\n":  # already at a line start (a `|+` scalar's end)
        return _insert_before(text, pos, lines)
    newline = text.find("\n", pos)
    if newline == -1:
        eol = _line_eol(text, 0)
        return text + eol + eol.join(lines)
    return _insert_before(text, newline + 1, lines)


def _insert_before(text: str, line_start: int, lines: Sequence[str]) -> str:
    eol = _line_eol(text, line_start)
    return text[:line_start] + "".join(line + eol for line in lines) + text[line_start:]


def _line_eol(text: str, pos: int) -> str:
    """The line ending of the line at ``pos`` (the file's first one if it has none)."""
    newline = text.find("\n", pos)
    if newline == -1:
        newline = text.find("\n")
    return "\r\n" if newline > 0 and text[newline - 1] == "\r" else "\n"


# --------------------------------------------------------------------------- scalars


def _plain_safe(value: str) -> bool:
    """True when ``value`` reads back as the same string when written plain."""
    return bool(_PLAIN_SAFE.fullmatch(value)) and value.lower() not in _PLAIN_RESERVED


def _format_key(name: str, quote: str | None) -> str:
    if quote == "'" and (single := _single_quoted(name)) is not None:
        return single
    if quote is None and _plain_safe(name):
        return name
    return _double_quoted(name)


def _format_value(value: str, style: str | None) -> str:
    """``value`` in the old value's style: quotes kept, plain only when safe."""
    if style == "'" and (single := _single_quoted(value)) is not None:
        return single
    if style is None and _plain_safe(value):
        return value
    return _double_quoted(value)


_ESCAPES: Final = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _double_quoted(value: str) -> str:
    out = []
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _single_quoted(value: str) -> str | None:
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return None
    return "'" + value.replace("'", "''") + "'"
