"""Property-based fuzzing of the YAML editor over mutated real-world manifests (issue 10).

Every manifest of ``corpus/`` is mutated (indentation, comments, quoting, CRLF, flow
maps, extra documents, anchors, block scalars, unicode, truncation, stray characters)
and then edited. The editor must either refuse with :class:`YamlEditError` or produce a
text that

* differs from the input in one place only, and that place holds the digest;
* loads with PyYAML (an independent parser) to the same documents, the edited one
  plus the key — when PyYAML can load the input at all;
* is stable: the same value again changes nothing, a new value changes one line.

Any other exception is a bug. Each edit stays within a generous time bound. The run is
derandomized (a fixed seed) with a fixed number of examples.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gitops_reloader.errors import YamlEditError
from gitops_reloader.gitops.scanindex import DocKey, api_group, edit_confined, scan_documents
from gitops_reloader.gitops.yamledit import (
    CONFIG_HASH_KEY,
    list_documents,
    parse_yaml_path,
    set_at_path,
    set_template_annotation,
)

CORPUS = Path(__file__).parent / "corpus"
MANIFESTS = sorted(p.read_bytes().decode("utf-8") for p in CORPUS.glob("*.in.yaml"))
VALUES_FILES = [m for m in MANIFESTS if "podAnnotations" in m and "kind:" not in m]
V1 = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
V2 = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
BOUND_SECONDS = 5.0  # per edit; the corpus files edit in milliseconds
FUZZ = settings(derandomize=True, database=None, max_examples=250, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

Mutation = Callable[[str, st.DataObject], str]


# --------------------------------------------------------------------------- mutations


def _line_index(text: str, data: st.DataObject) -> tuple[list[str], int]:
    lines = text.splitlines(keepends=True) or [""]
    return lines, data.draw(st.integers(0, len(lines) - 1))


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" "))]


def reindent(text: str, data: st.DataObject) -> str:
    factor = data.draw(st.sampled_from([2, 3]))
    return re.sub(r"(?m)^( +)", lambda m: m.group(1) * factor, text)


def comment(text: str, data: st.DataObject) -> str:
    lines, i = _line_index(text, data)
    body = data.draw(st.sampled_from(["# note", "#", "# {{ .Values.x }}", "# ü ✓ 日本", "  # a: b"]))
    if data.draw(st.booleans()):
        lines.insert(i, _indent_of(lines[i]) + body + "\n")
    else:
        lines[i] = lines[i].rstrip("\r\n") + " " + body + "\n"
    return "".join(lines)


def quote(text: str, data: st.DataObject) -> str:
    style = data.draw(st.sampled_from(['"', "'"]))
    matches = list(re.finditer(r"(?m)^( *[A-Za-z0-9_./-]+: )([A-Za-z0-9_./-]+)$", text))
    if not matches:
        return text
    m = data.draw(st.sampled_from(matches))
    return text[: m.start(2)] + style + m.group(2) + style + text[m.end(2):]


def crlf(text: str, data: st.DataObject) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def flow_map(text: str, data: st.DataObject) -> str:
    lines, i = _line_index(text, data)
    entry = data.draw(st.sampled_from(["x: {a: 1, b: [c, d]}", "annotations: {}", "metadata: {}",
                                       "spec: {template: {metadata: {annotations: {}}}}", "y: [ ]"]))
    lines.insert(i, _indent_of(lines[i]) + entry + "\n")
    return "".join(lines)


def documents(text: str, data: st.DataObject) -> str:
    other = data.draw(st.sampled_from(MANIFESTS))
    return data.draw(st.sampled_from([text + "\n---\n" + other, other + "\n---\n" + text,
                                      "---\n" + text + "...\n", text + "---\n# only a comment\n"]))


def anchors(text: str, data: st.DataObject) -> str:
    matches = list(re.finditer(r"(?m)^( *)([A-Za-z]+):[ ]*$", text))
    if not matches:
        return text
    m = data.draw(st.sampled_from(matches))
    text = text[: m.end()] + " &anc" + text[m.end():]
    return text + data.draw(st.sampled_from(["", "---\nref: *anc\n", "extra: *anc\n",
                                             "more: {<<: *anc}\n"]))


def block_scalar(text: str, data: st.DataObject) -> str:
    lines, i = _line_index(text, data)
    ind = _indent_of(lines[i])
    header = data.draw(st.sampled_from(["|", ">", "|-", "|+", ">2"]))
    lines.insert(i, f"{ind}note: {header}\n{ind}  {{{{ with secret \"kv\" }}}}\n{ind}  line: two\n\n")
    return "".join(lines)


def unicode(text: str, data: st.DataObject) -> str:
    pos = data.draw(st.integers(0, len(text)))
    return text[:pos] + data.draw(st.text(min_size=1, max_size=4)) + text[pos:]


def truncate(text: str, data: st.DataObject) -> str:
    return text[: data.draw(st.integers(0, len(text)))]


def stray(text: str, data: st.DataObject) -> str:
    pos = data.draw(st.integers(0, len(text)))
    char = data.draw(st.sampled_from([":", "-", "[", "]", "{", "}", "\t", "#", "&", "*", "!", "|", ">",
                                      "'", '"', "\n", " ", "%", "@", "`", "? ", "<<: "]))
    if data.draw(st.booleans()) and pos < len(text):
        return text[:pos] + text[pos + 1:]
    return text[:pos] + char + text[pos:]


MUTATIONS: list[Mutation] = [reindent, comment, quote, crlf, flow_map, documents, anchors, block_scalar,
                             unicode, truncate, stray]


@st.composite
def mutated(draw: st.DrawFn, sources: list[str]) -> str:
    text = draw(st.sampled_from(sources))
    data = draw(st.data())
    for mutation in draw(st.lists(st.sampled_from(MUTATIONS), max_size=3)):
        text = mutation(text, data)
    return text


# --------------------------------------------------------------------------- properties


def timed(edit: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    try:
        return edit()
    finally:
        assert time.perf_counter() - started < BOUND_SECONDS


def pyyaml_documents(text: str) -> list[Any] | None:
    """The documents as PyYAML loads them, or ``None`` when it can't (libyaml is stricter)."""
    try:
        return list(yaml.safe_load_all(text))
    except (yaml.YAMLError, RecursionError, ValueError, TypeError):
        return None


def one_place_changed(before: str, after: str, value: str) -> None:
    """The edit touched one contiguous place, and that place holds the key and value."""
    prefix = 0
    limit = min(len(before), len(after))
    while prefix < limit and before[prefix] == after[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and before[-1 - suffix] == after[-1 - suffix]:
        suffix += 1
    removed = before[prefix: len(before) - suffix]
    added = after[prefix: len(after) - suffix]
    # What may go: an explicit null or the old value; nothing spanning lines.
    assert "\n" not in removed and len(removed) <= len(V1) + 2, (removed, added)
    context = after[max(0, prefix - len(CONFIG_HASH_KEY) - 4): len(after) - suffix + 2]
    assert value in added and CONFIG_HASH_KEY in context, (removed, added)


def set_in(document: Any, path: tuple[str | int, ...], value: str) -> Any:
    expected = copy.deepcopy(document)
    node = expected
    for step in path[:-1]:
        if isinstance(step, str) and node.get(step) is None:
            node[step] = {}
        node = node[step]
    last = path[-1]
    if node.get(last) is None:
        node[last] = {}
    node[last][CONFIG_HASH_KEY] = value
    return expected


def check_edit(before: str, edit: Callable[[str, str], Any], doc_index: int,
               path: tuple[str | int, ...]) -> None:
    try:
        result = timed(lambda: edit(before, V1))
    except YamlEditError:
        event("edit refused")
        return  # refused: allowed
    if not result.changed:
        assert result.text == before
        return
    after = result.text
    one_place_changed(before, after, V1)
    old_docs = pyyaml_documents(before)
    event("edited, PyYAML compared" if old_docs is not None else "edited, input not PyYAML-loadable")
    if old_docs is not None:
        new_docs = pyyaml_documents(after)
        assert new_docs is not None, "PyYAML loaded the input but not the edited text"
        assert len(new_docs) == len(old_docs)
        for i, (old, new) in enumerate(zip(old_docs, new_docs, strict=True)):
            assert new == (set_in(old, path, V1) if i == doc_index else old), i
    again = timed(lambda: edit(after, V1))
    assert not again.changed and again.text == after
    bumped = timed(lambda: edit(after, V2)).text
    removed = [line for line in after.splitlines() if line not in bumped.splitlines()]
    added = [line for line in bumped.splitlines() if line not in after.splitlines()]
    assert len(removed) == len(added) == 1 and V2 in added[0], (removed, added)


@FUZZ
@given(mutated(MANIFESTS))
def test_pod_template_edits_never_damage_a_mutated_manifest(text: str) -> None:
    try:
        infos = timed(lambda: list_documents(text))
    except YamlEditError:
        event("file refused")
        return
    for info in infos:
        def edit(source: str, value: str, index: int = info.index) -> Any:
            return set_template_annotation(source, doc_index=index, value=value)

        check_edit(text, edit, info.index, ("spec", "template", "metadata", "annotations"))


@FUZZ
@given(mutated(VALUES_FILES), st.sampled_from(["podAnnotations", "controller.podAnnotations"]),
       st.sampled_from([None, 1]))
def test_values_edits_never_damage_a_mutated_values_file(text: str, expr: str,
                                                        max_create: int | None) -> None:
    path = parse_yaml_path(expr)

    def edit(source: str, value: str) -> Any:
        return set_at_path(source, path_expr=path, value=value, max_create=max_create)

    check_edit(text, edit, 0, path)


@FUZZ
@given(mutated(MANIFESTS))
def test_the_scan_agrees_with_the_editor_and_the_confinement_check_never_fails(text: str) -> None:
    """The libyaml scan (hints) and the editor's parser list the same objects when both parse."""
    try:
        reference = [(d.index, DocKey(api_group(d.api_version), d.kind, d.namespace, d.name))
                     for d in timed(lambda: list_documents(text))]
    except YamlEditError:
        event("file refused")
        return
    try:
        scanned = timed(lambda: scan_documents(text))
    except YamlEditError:
        event("scan refused, editor parsed")
        return
    assert scanned == reference or pyyaml_documents(text) is None, (scanned, reference)
    for index, key in reference:
        try:
            after = set_template_annotation(text, doc_index=index, value=V1).text
        except YamlEditError:
            continue
        confined = timed(lambda a=after, i=index, k=key: edit_confined(
            text, a, doc_index=i, expected=k, path_expr=("spec", "template", "metadata", "annotations"),
            key=CONFIG_HASH_KEY, value=V1))
        event(f"confinement checked: {confined}")
        # A false negative only costs a confirmation with the reference parser; where libyaml
        # reads the file too and the object has a name, the check must see the edit as confined.
        assert confined or not key.name or pyyaml_documents(text) is None
