"""Byte-exact edits of manifests, values files and patches (ACCEPTANCE: GitOps sinks).

Every case in ``corpus/`` is ``NAME.in.yaml`` plus, for edits, the expected
``NAME.out.yaml``, compared byte for byte. The expected outputs were written by hand
(insert these lines / change this one line), not produced by the code under test.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops_reloader.errors import GitError, YamlEditError
from gitops_reloader.gitops.yamledit import (
    CONFIG_HASH_KEY,
    DocumentInfo,
    EditResult,
    find_document,
    list_documents,
    parse_yaml_path,
    read_at_path,
    read_template_annotation,
    set_at_path,
    set_template_annotation,
)

CORPUS = Path(__file__).parent / "corpus"
V1 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
V2 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
V3 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
OLD = "fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9"


@dataclass(frozen=True)
class Case:
    """One corpus file and what to do with it.

    ``path_expr`` None means the pod template (``set_template_annotation``); ``find``
    locates the document by (kind, name, namespace) instead of ``doc``; ``refuse`` is a
    regex the YamlEditError message must match (no ``.out`` file then).
    """

    name: str
    value: str = V1
    path_expr: str | None = None
    doc: int = 0
    find: tuple[str, str, str | None] | None = None
    refuse: str | None = None
    unchanged: bool = False


CASES = [
    Case("comments-everywhere"),
    Case("key-order-unusual"),
    Case("indent-4"),
    Case("statefulset-indented-seqs"),
    Case("daemonset-non-indented-seqs"),
    Case("annotation-styles"),
    Case("block-literal-last"),
    Case("block-folded-last"),
    Case("hash-plain-needs-quotes"),
    Case("hash-plain-stays-plain", value=V2),
    Case("hash-double-quoted"),
    Case("hash-single-quoted"),
    Case("hash-already-current", unchanged=True),
    Case("multi-document", find=("Deployment", "web", "shop")),
    Case("crlf"),
    Case("crlf-no-final-newline"),
    Case("no-final-newline-at-end"),
    Case("no-final-newline-mid"),
    Case("flow-empty"),
    Case("flow-entries"),
    Case("flow-existing"),
    Case("flow-metadata"),
    Case("quoted-keys"),
    Case("single-quoted-keys"),
    Case("json-manifest"),
    Case("tabs-unicode"),
    Case("rollout-empty-hash"),
    Case("kustomize-patch"),
    Case("helm-values-flow-empty", path_expr="podAnnotations"),
    Case("helm-values-entries", path_expr="podAnnotations"),
    Case("helm-values-missing", path_expr="podAnnotations"),
    Case("helm-values-null", path_expr="podAnnotations"),
    Case("helm-values-nested-path", path_expr="controller.podAnnotations"),
    Case("helmrelease-values", path_expr="spec.values.podAnnotations"),
    Case("list-items-path", path_expr="items[1].spec.template.metadata.annotations"),
    Case("cronjob-path", path_expr="spec.jobTemplate.spec.template.metadata.annotations"),
    Case("annotations-explicit-null"),
    Case("metadata-implicit-null"),
    Case("refuse-helm-template", refuse=r"templating"),
    Case("template-in-a-string-value"),
    Case("vault-agent-template"),
    Case("refuse-template-in-a-comment", refuse=r"document 0 \(Deployment/web\).*templating"),
    Case("refuse-template-as-flow-syntax", refuse=r"templating"),
    Case("refuse-anchored-template", refuse=r"spec\.template is anchored \(&pod\)"),
    Case("refuse-alias-annotations", refuse=r"annotations is an alias \(\*common\)"),
    Case("refuse-merge-key", refuse=r"spec\.template\.metadata uses a merge key"),
    Case("refuse-unparsable", refuse=r"not valid YAML.*line 9"),
    Case("refuse-no-template", refuse=r"\(Rollout/checkout\): no spec\.template"),
    Case("refuse-annotations-not-a-map", refuse=r"annotations is not a map"),
]
EDITS = [c for c in CASES if c.refuse is None and not c.unchanged]
REFUSALS = [c for c in CASES if c.refuse is not None]


def read(name: str) -> str:
    with open(CORPUS / name, encoding="utf-8", newline="") as f:
        return f.read()


def doc_index(case: Case, text: str) -> int:
    if case.find is None:
        return case.doc
    kind, name, namespace = case.find
    index = find_document(text, kind=kind, name=name, namespace=namespace)
    assert index is not None
    return index


def apply(case: Case, text: str, value: str) -> EditResult:
    index = doc_index(case, text)
    if case.path_expr is None:
        return set_template_annotation(text, doc_index=index, value=value, path=case.name)
    return set_at_path(
        text,
        path_expr=parse_yaml_path(case.path_expr),
        value=value,
        doc_index=index,
        path=case.name,
    )


def read_back(case: Case, text: str) -> str | None:
    index = doc_index(case, text)
    if case.path_expr is None:
        return read_template_annotation(text, doc_index=index, path=case.name)
    return read_at_path(text, path_expr=parse_yaml_path(case.path_expr), doc_index=index)


def removed_and_added(before: str, after: str) -> tuple[list[str], list[str]]:
    """Lines only in ``before`` and only in ``after`` (line endings kept)."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    removed: list[str] = []
    added: list[str] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            removed += a[i1:i2]
            added += b[j1:j2]
    return removed, added


def unquote(line: str) -> str:
    return re.sub(r"[\"']([0-9a-f]{64})[\"']", r"\1", line)


def load_all(text: str) -> list[Any]:
    """Load with PyYAML, an independent parser (tabs before comments made spaces first)."""
    return list(yaml.safe_load_all(re.sub(r"\t(?=[ \t]*(#|\n))", " ", text)))


# --------------------------------------------------------------------------- the corpus


def test_every_corpus_file_has_a_case() -> None:
    names = {p.name.split(".")[0] for p in CORPUS.iterdir()}
    assert names == {c.name for c in CASES}
    for case in CASES:
        has_out = (CORPUS / f"{case.name}.out.yaml").exists()
        assert has_out == (case in EDITS), case.name


@pytest.mark.parametrize("case", EDITS, ids=lambda c: c.name)
def test_edit_matches_expected_output_byte_for_byte(case: Case) -> None:
    before, expected = read(f"{case.name}.in.yaml"), read(f"{case.name}.out.yaml")
    result = apply(case, before, case.value)
    assert result.changed
    assert result.text == expected


@pytest.mark.parametrize("case", EDITS, ids=lambda c: c.name)
def test_edit_only_inserts_lines_or_changes_one_line(case: Case) -> None:
    before = read(f"{case.name}.in.yaml")
    after = apply(case, before, case.value).text
    removed, added = removed_and_added(before, after)
    assert len(removed) <= 1, removed
    assert any(CONFIG_HASH_KEY in line and case.value in line for line in added), added
    if removed:
        # The one changed line keeps its start (indentation and key) and its comment.
        (old,) = removed
        body = old.rstrip("\r\n")
        assert added[0].startswith(body.split(":")[0])
        if " #" in body:
            assert body[body.index(" #") :] in "".join(added)
    crlf = "\r\n" in before
    assert all(line.endswith("\r\n") == crlf for line in added if line.endswith("\n"))
    assert after.endswith("\n") == before.endswith("\n")


@pytest.mark.parametrize("case", EDITS, ids=lambda c: c.name)
def test_edit_is_idempotent_and_reads_back(case: Case) -> None:
    after = read(f"{case.name}.out.yaml")
    again = apply(case, after, case.value)
    assert again == EditResult(text=after, changed=False, previous=case.value)
    assert read_back(case, after) == case.value


@pytest.mark.parametrize("case", EDITS, ids=lambda c: c.name)
def test_second_edit_changes_only_the_hash_line(case: Case) -> None:
    after = read(f"{case.name}.out.yaml")
    for new in (V2, V3):
        if new == case.value:
            continue
        result = apply(case, after, new)
        assert result.changed and result.previous == case.value
        removed, added = removed_and_added(after, result.text)
        assert len(removed) == len(added) == 1, (removed, added)
        # Only the value differs (a plain value may gain quotes when the new one needs them).
        assert unquote(removed[0]).replace(case.value, new) == unquote(added[0])
        assert read_back(case, result.text) == new


@pytest.mark.parametrize("case", EDITS, ids=lambda c: c.name)
def test_other_documents_are_untouched(case: Case) -> None:
    before = read(f"{case.name}.in.yaml")
    after = apply(case, before, case.value).text
    index = doc_index(case, before)
    assert [d for d in list_documents(before) if d.index != index] == [
        d for d in list_documents(after) if d.index != index
    ]


@pytest.mark.parametrize("case", REFUSALS, ids=lambda c: c.name)
def test_refusals(case: Case) -> None:
    text = read(f"{case.name}.in.yaml")
    assert case.refuse is not None
    with pytest.raises(YamlEditError, match=case.refuse) as info:
        apply(case, text, V1)
    assert case.name in str(info.value)
    assert info.value.retryable is False
    assert isinstance(info.value, GitError)
    cause = info.value.__cause__  # a parser error is chained, never leaked unwrapped
    assert cause is None or type(cause).__module__.startswith("ruamel.")


def test_already_current_hash_is_unchanged() -> None:
    text = read("hash-already-current.in.yaml")
    assert set_template_annotation(text, doc_index=0, value=V1) == EditResult(text, False, V1)


def test_unparsable_file_keeps_the_parser_error_as_cause() -> None:
    with pytest.raises(YamlEditError) as info:
        list_documents(read("refuse-unparsable.in.yaml"), path="apps/web.yaml")
    assert str(info.value).startswith("apps/web.yaml: not valid YAML")
    assert info.value.__cause__ is not None
    assert "[a, b" not in str(info.value)  # positions only, never file content


# --------------------------------------------------------------------------- documents


def test_list_documents_skips_empty_and_non_object_documents() -> None:
    text = read("multi-document.in.yaml")
    assert list_documents(text) == [
        DocumentInfo(0, "v1", "Service", "web", "shop"),
        DocumentInfo(2, "apps/v1", "Deployment", "web", "shop"),
        DocumentInfo(3, "v1", "ConfigMap", "web-config", "shop"),
    ]
    assert list_documents("a: 1\n---\n- x\n---\n") == []


def test_find_document_matches_kind_name_namespace_and_group() -> None:
    text = read("multi-document.in.yaml")
    assert find_document(text, kind="Deployment", name="web", namespace="shop") == 2
    assert find_document(text, kind="Service", name="web", namespace="shop") == 0
    assert find_document(text, kind="Deployment", name="web", namespace="other") is None
    assert find_document(text, kind="Deployment", name="web", namespace=None) == 2
    assert find_document(text, kind="Deployment", name="web", namespace="shop", api_group="apps")
    assert find_document(text, kind="Deployment", name="web", namespace="shop", api_group="") is None
    assert find_document(text, kind="Service", name="web", namespace="shop", api_group="") == 0


def test_document_without_namespace_matches_any_but_exact_namespace_wins() -> None:
    text = (
        "kind: Deployment\nmetadata: {name: web}\n---\n"
        "kind: Deployment\nmetadata: {name: web, namespace: prod}\n"
    )
    assert find_document(text, kind="Deployment", name="web", namespace="prod") == 1
    assert find_document(text, kind="Deployment", name="web", namespace="dev") == 0


def test_doc_index_out_of_range_is_refused() -> None:
    with pytest.raises(YamlEditError, match=r"x\.yaml: document 5 is out of range \(.* 1 doc"):
        set_template_annotation("kind: A\n", doc_index=5, value=V1, path="x.yaml")
    with pytest.raises(YamlEditError, match="out of range"):
        read_at_path("a: 1\n", path_expr=(), doc_index=-1)


def test_template_text_in_a_string_value_is_content() -> None:
    text = read("multi-document.in.yaml")  # the ConfigMap holds "{{ $labels.instance }}"
    after = set_at_path(text, path_expr=("metadata", "annotations"), value=V1, doc_index=3).text
    removed, added = removed_and_added(text, after)
    assert removed == [] and len(added) == 1 and CONFIG_HASH_KEY in added[0]
    assert set_template_annotation(text, doc_index=2, value=V1).changed


def test_only_the_templated_document_is_refused() -> None:
    extra = "---\n# {{ .Values.extra }}\nkind: ConfigMap\nmetadata: {name: x}\n"
    text = read("multi-document.in.yaml") + extra
    with pytest.raises(YamlEditError, match=r"document 4 \(ConfigMap/x\).*templat"):
        set_at_path(text, path_expr=("metadata", "annotations"), value=V1, doc_index=4)
    assert set_at_path(text, path_expr=("metadata", "annotations"), value=V1, doc_index=3).changed


def test_unparsable_templated_file_says_templating() -> None:
    with pytest.raises(YamlEditError, match=r"t\.yaml: contains Helm/Go templating"):
        list_documents(read("refuse-helm-template.in.yaml"), path="t.yaml")


# --------------------------------------------------------------------------- values


def test_reads_return_none_when_absent() -> None:
    assert read_template_annotation(read("kustomize-patch.in.yaml"), doc_index=0) is None
    assert read_template_annotation(read("key-order-unusual.in.yaml"), doc_index=0) is None
    assert read_template_annotation(read("annotations-explicit-null.in.yaml"), doc_index=0) is None
    text = read("helm-values-null.in.yaml")
    assert read_at_path(text, path_expr=("podAnnotations",)) is None
    assert read_at_path(text, path_expr=("nothing", "here")) is None
    assert read_at_path(read("hash-plain-needs-quotes.in.yaml"), path_expr=_ANN) == OLD


_ANN = ("spec", "template", "metadata", "annotations")


def test_other_key_can_be_set() -> None:
    result = set_at_path("podAnnotations:\n  a: b\n", path_expr=("podAnnotations",), key="x/y", value="it's")
    assert result.text == 'podAnnotations:\n  a: b\n  x/y: "it\'s"\n'


@pytest.mark.parametrize(
    ("line", "value", "expected"),
    [
        ("k: old", "new-value", "k: new-value"),
        ("k: old", "123", 'k: "123"'),
        ("k: old", "true", 'k: "true"'),
        ("k: old", "a: b", 'k: "a: b"'),
        ("k: 'old'", "it's", "k: 'it''s'"),
        ("k: 'old'", "line\nbreak", 'k: "line\\nbreak"'),
        ('k: "old"', 'say "hi" \\o/', 'k: "say \\"hi\\" \\\\o/"'),
        ("k: !!str old", "new", "k: new"),
        ("k: 123", "123", 'k: "123"'),  # same text, but it was an int: quote it
        ("k: ~", "v", 'k: "v"'),
        ("k:", "v", 'k: "v"'),
        ("k:  # note", "v", 'k: "v"  # note'),
    ],
)
def test_replaced_value_keeps_quoting_style_when_it_can(line: str, value: str, expected: str) -> None:
    text = f"m:\n  {line}\n  z: 1\n"
    result = set_at_path(text, path_expr=("m",), key="k", value=value)
    assert result.text == f"m:\n  {expected}\n  z: 1\n"
    assert read_at_path(result.text, path_expr=("m",), key="k") == value
    assert set_at_path(result.text, path_expr=("m",), key="k", value=value).changed is False


def test_block_scalar_hash_value_is_replaced_by_a_quoted_one() -> None:
    text = "m:\n  k: |\n    old\n\n  z: 1\n"
    result = set_at_path(text, path_expr=("m",), key="k", value="v")
    assert result == EditResult('m:\n  k: "v"\n\n  z: 1\n', True, "old\n")


def test_alias_hash_value_is_replaced_and_anchored_one_refused() -> None:
    text = "x: &h abc\nm:\n  k: *h\n"
    result = set_at_path(text, path_expr=("m",), key="k", value="v")
    assert result == EditResult('x: &h abc\nm:\n  k: "v"\n', True, "abc")
    with pytest.raises(YamlEditError, match=r"m\.k is anchored \(&h\)"):
        set_at_path("m:\n  k: &h abc\nn: *h\n", path_expr=("m",), key="k", value="v")


def test_non_string_hash_value_is_refused() -> None:
    with pytest.raises(YamlEditError, match="is a map, not a string"):
        set_at_path("m:\n  k: {a: 1}\n", path_expr=("m",), key="k", value="v")
    with pytest.raises(YamlEditError, match="is a seq, not a string"):
        read_at_path("m:\n  k: [1]\n", path_expr=("m",), key="k")


def test_duplicate_keys_on_the_path_are_refused() -> None:
    with pytest.raises(YamlEditError, match="m is a duplicate key"):
        set_at_path("m: {a: 1}\nm: {b: 2}\n", path_expr=("m",), value="v")


def test_missing_sequence_item_is_refused() -> None:
    with pytest.raises(YamlEditError, match=r"items\[3\] does not exist"):
        set_at_path("items:\n- a: 1\n", path_expr=("items", 3, "x"), value="v")
    with pytest.raises(YamlEditError, match="contains a sequence index"):
        set_at_path("a: 1\n", path_expr=("items", 0, "x"), value="v")
    with pytest.raises(YamlEditError, match="is not a sequence"):
        set_at_path("items: {}\n", path_expr=("items", 0), value="v")


def test_empty_document_is_refused() -> None:
    text = "a: 1\n---\n# nothing\n---\nb: 2\n"
    with pytest.raises(YamlEditError, match="document 1: the document is empty"):
        set_at_path(text, path_expr=("a",), doc_index=1, value="v")
    with pytest.raises(YamlEditError, match="has 0 documents"):
        set_at_path("# nothing\n", path_expr=("a",), value="v")


def test_root_map_and_created_chain_use_detected_step() -> None:
    result = set_at_path("a:\n   b: 1\n", path_expr=("p", "q"), value=V1)
    assert result.text == f'a:\n   b: 1\np:\n   q:\n      {CONFIG_HASH_KEY}: "{V1}"\n'


def test_new_keys_that_yaml_would_not_read_back_as_strings_are_quoted() -> None:
    result = set_at_path("a: 1\n", path_expr=("y", "on"), key="1.5", value="v")
    assert result.text == 'a: 1\n"y":\n  "on":\n    "1.5": "v"\n'


def test_new_key_in_a_sequence_item_map_uses_the_item_column() -> None:
    text = "items:\n  - name: a\n    env: {}\n"
    result = set_at_path(text, path_expr=("items", 0), key="k", value="v")
    assert result.text == 'items:\n  - name: a\n    env: {}\n    k: "v"\n'


def test_last_value_ending_in_a_bare_dash_is_not_split() -> None:
    text = "m:\n  list:\n  - a\n  -\nz: 1\n"
    result = set_at_path(text, path_expr=("m",), key="k", value="v")
    assert result.text == 'm:\n  list:\n  - a\n  -\n  k: "v"\nz: 1\n'


def test_anchors_and_merge_keys_off_the_path_are_fine() -> None:
    text = (
        "x-env: &env\n  - {name: A, value: b}\n"
        "spec:\n  template:\n    metadata:\n      labels: {app: web}\n"
        "    spec:\n      containers:\n      - <<: {image: x}\n        env: *env\n"
    )
    result = set_template_annotation(text, doc_index=0, value=V1)
    assert result.text == text.replace(
        "      labels: {app: web}\n",
        f'      labels: {{app: web}}\n      annotations:\n        {CONFIG_HASH_KEY}: "{V1}"\n',
    )


def test_keep_chomped_block_scalar_keeps_its_trailing_blank_lines() -> None:
    text = "m:\n  a: |+\n    x\n\n  # about z\nz: 1\n"
    result = set_at_path(text, path_expr=("m",), key="k", value="v")
    assert result.text == 'm:\n  a: |+\n    x\n\n  k: "v"\n  # about z\nz: 1\n'
    assert load_all(result.text) == [{"m": {"a": "x\n\n", "k": "v"}, "z": 1}]


def test_tabs_before_comments_are_accepted_and_tab_indentation_refused() -> None:
    text = "m:\t# tabbed comment\n  a: b\t\t# another\t\n"
    result = set_at_path(text, path_expr=("m",), key="k", value="v")
    assert result.text == text + '  k: "v"\n'
    with pytest.raises(YamlEditError, match="not valid YAML"):
        set_at_path("m:\n\ta: b\n", path_expr=("m",), key="k", value="v")


def test_bom_and_directives_survive() -> None:
    text = "\ufeff%YAML 1.2\n---\nm:\n  a: b\n...\n"
    result = set_at_path(text, path_expr=("m",), key="k", value="v")
    assert result.text == '\ufeff%YAML 1.2\n---\nm:\n  a: b\n  k: "v"\n...\n'


def test_unicode_values_are_written_as_is() -> None:
    result = set_at_path("m: {}\n", path_expr=("m",), key="k", value="café ✓")
    assert result.text == 'm: {k: "café ✓"}\n'
    assert read_at_path(result.text, path_expr=("m",), key="k") == "café ✓"


def test_results_are_valid_yaml_with_the_same_data_plus_the_key() -> None:
    for case in EDITS:
        before = load_all(read(f"{case.name}.in.yaml"))
        after = load_all(read(f"{case.name}.out.yaml"))
        index = doc_index(case, read(f"{case.name}.in.yaml"))
        assert before[:index] + before[index + 1 :] == after[:index] + after[index + 1 :]
        node = after[index]
        steps = parse_yaml_path(case.path_expr) if case.path_expr else _ANN
        for step in steps:
            node = node[step]
        assert node[CONFIG_HASH_KEY] == case.value, case.name


# --------------------------------------------------------------------------- paths


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("", ()),
        ("spec.template.metadata.annotations", ("spec", "template", "metadata", "annotations")),
        ("a.b[0].c", ("a", "b", 0, "c")),
        ("items[12]", ("items", 12)),
        ("[0].x", (0, "x")),
        ('podAnnotations."x.y/z"', ("podAnnotations", "x.y/z")),
        ("a.'it''s'.b", ("a", "it's", "b")),
        ('a."q\\"uote"', ("a", 'q"uote')),
        ('a["x.y"][2]', ("a", "x.y", 2)),
        ("a[0][1]", ("a", 0, 1)),
    ],
)
def test_parse_yaml_path(expr: str, expected: tuple[str | int, ...]) -> None:
    assert parse_yaml_path(expr) == expected


@pytest.mark.parametrize("expr", ["a..b", ".a", "a.", "a[", "a[x]", "a[]", 'a."b', "a[0]b"])
def test_parse_yaml_path_rejects_malformed(expr: str) -> None:
    with pytest.raises(YamlEditError, match="invalid YAML path"):
        parse_yaml_path(expr)


def test_ruamel_is_imported_only_by_yamledit() -> None:
    package = Path(__file__).parents[3] / "gitops_reloader"
    offenders = []
    for source in package.rglob("*.py"):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n.split(".")[0] == "ruamel" for n in names):
                offenders.append(source.relative_to(package).as_posix())
    assert set(offenders) <= {"gitops/yamledit.py"}


# --------------------------------------------------------------------------- hostile input

VALUES = "controller:\n  image: {tag: v1}\n  podAnnotations:\n    a: b\nempty:\nnested:\n  x: {}\n"


@pytest.mark.parametrize(("path_expr", "max_create", "added"), [
    ("controller.podAnnotations", 0, 1),    # the map exists: only the key is added
    ("controller.annotations", 1, 2),       # the last map is created under an existing parent
    ("empty", 1, 1),                        # a null value becomes the map
    ("nested.x", 0, 0),                     # an empty flow map takes the key on its line
])
def test_max_create_allows_only_the_last_maps(path_expr: str, max_create: int, added: int) -> None:
    after = set_at_path(VALUES, path_expr=parse_yaml_path(path_expr), value=V1, max_create=max_create).text
    removed, new = removed_and_added(VALUES, after)
    assert len(new) - len(removed) == added
    assert read_at_path(after, path_expr=parse_yaml_path(path_expr)) == V1


@pytest.mark.parametrize(("path_expr", "max_create", "message"), [
    ("securityContext.podAnnotations", 1, r"securityContext does not exist"),
    ("controller.extra.podAnnotations", 1, r"controller\.extra does not exist"),
    ("controller.annotations", 0, r"controller\.annotations does not exist"),
    ("empty.podAnnotations", 1, r"empty does not exist"),
])
def test_max_create_refuses_to_invent_parents(path_expr: str, max_create: int, message: str) -> None:
    with pytest.raises(YamlEditError, match=message):
        set_at_path(VALUES, path_expr=parse_yaml_path(path_expr), value=V1, max_create=max_create)


def test_alias_bomb_in_another_document_is_not_expanded() -> None:
    """An alias structure of 9^9 leaves next to the workload: the edit stays linear."""
    bomb = "lol: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"l{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9))
    text = read("multi-document.in.yaml") + "---\n" + bomb
    result = set_template_annotation(text, doc_index=2, value=V1)  # timed in bench/yaml_hostile.py
    assert result.changed and result.text.endswith(bomb)


@pytest.mark.parametrize("text", [
    "a: " + "[" * 5000 + "]" * 5000 + "\n",
    "a:\n" + "".join(" " * i + "b:\n" for i in range(1, 500)),
], ids=["flow", "block"])
def test_nesting_deeper_than_the_cap_is_refused(text: str) -> None:
    # How fast the refusal is, is measured in bench/yaml_hostile.py, not asserted here.
    with pytest.raises(YamlEditError, match=r"nested deeper than \d+ levels"):
        list_documents(text, path="deep.yaml")


def test_text_longer_than_the_cap_is_refused_before_parsing() -> None:
    with pytest.raises(YamlEditError, match=r"big\.yaml: longer than \d+ characters"):
        list_documents("# " + "x" * (4 * 1024 * 1024), path="big.yaml")
