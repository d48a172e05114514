"""The repository scan index: built once, refreshed incrementally from changed paths."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from gitops_reloader.errors import GitError, YamlEditError
from gitops_reloader.gitops.scanindex import (
    DocKey,
    DocRef,
    ScanIndex,
    api_group,
    edit_confined,
    scan_documents,
)
from gitops_reloader.gitops.yamledit import list_documents

CORPUS = Path(__file__).parent / "corpus"


def deploy(name: str, namespace: str | None = "ns", kind: str = "Deployment",
           api_version: str = "apps/v1") -> str:
    ns = f"  namespace: {namespace}\n" if namespace else ""
    return f"apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {name}\n{ns}spec: {{}}\n"


class FakeRepo:
    """Commits as path → content maps; counts reads so tests can see what was re-read."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.commits: dict[str, dict[str, bytes]] = {}
        self.head = ""
        self.reads: Counter[str] = Counter()
        self.fail_diff = False
        self.commit(files, replace=True)

    def commit(self, files: Mapping[str, str | bytes | None], *, replace: bool = False) -> str:
        tree = {} if replace else dict(self.commits.get(self.head, {}))
        for path, content in files.items():
            if content is None:
                tree.pop(path, None)
            else:
                tree[path] = content.encode() if isinstance(content, str) else content
        sha = f"{len(self.commits) + 1:040x}"
        self.commits[sha] = tree
        self.head = sha
        return sha

    def list_files(self, suffixes: Sequence[str] = (".yaml", ".yml")) -> list[str]:
        return sorted(p for p in self.commits[self.head] if p.lower().endswith(tuple(suffixes)))

    def read(self, path: str) -> bytes | None:
        self.reads[path] += 1
        return self.commits[self.head].get(path)

    def changed_paths(self, old_sha: str, new_sha: str) -> tuple[list[str], list[str]]:
        if self.fail_diff or old_sha not in self.commits:
            raise GitError("unknown commit")
        old, new = self.commits[old_sha], self.commits[new_sha]
        changed = sorted(p for p in new if old.get(p) != new[p])
        deleted = sorted(p for p in old if p not in new)
        return changed, deleted


def find(index: ScanIndex, name: str, *, kind: str = "Deployment", group: str = "apps",
         namespace: str = "ns", under: Sequence[str] = ()) -> tuple[list[DocRef], list[DocRef]]:
    found = index.lookup(group=group, kind=kind, namespace=namespace, name=name, under=under)
    return list(found.exact), list(found.loose)


@pytest.fixture
def repo() -> FakeRepo:
    return FakeRepo({
        "apps/web.yaml": "# web\n" + deploy("web") + "---\n" + deploy("web", kind="Service",
                                                                     api_version="v1"),
        "apps/worker.yml": deploy("worker", namespace=None),
        "apps/values.yaml": "replicaCount: 2\npodAnnotations: {}\n",
        "apps/broken.yaml": "kind: Deployment\nmetadata: {name: [oops\n",
        "charts/web/templates/deploy.yaml": "kind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n"
                                            "{{- if .Values.x }}\n  labels: {}\n{{- end }}\n",
        "README.md": "# not yaml\n",
        "other/web.yaml": deploy("web", namespace="other"),
    })


def test_build_indexes_every_object_with_its_document_index(repo: FakeRepo) -> None:
    index = ScanIndex(repo)
    update = index.refresh(repo.head)
    assert update.full and update.files_read == 6  # README.md is not YAML
    assert find(index, "web") == ([DocRef("apps/web.yaml", 0)], [])
    assert find(index, "web", kind="Service", group="") == ([DocRef("apps/web.yaml", 1)], [])
    assert find(index, "worker") == ([], [DocRef("apps/worker.yml", 0)])
    assert find(index, "web", namespace="other") == ([DocRef("other/web.yaml", 0)], [])
    assert find(index, "web", group="argoproj.io") == ([], [])
    assert index.documents("apps/values.yaml") == ()  # no kind: not an object
    assert len(index) == 4 and index.file_count == 3


def test_unparsable_files_are_remembered_not_fatal_and_templates_are_not_errors(repo: FakeRepo) -> None:
    index = ScanIndex(repo)
    index.refresh(repo.head)
    assert list(index.unparsable) == ["apps/broken.yaml"]
    assert "[oops" not in index.unparsable["apps/broken.yaml"]
    assert index.templated == {"charts/web/templates/deploy.yaml"}
    assert index.unparsable_under(["charts"]) == {}
    assert list(index.unparsable_under(["apps"])) == ["apps/broken.yaml"]


def test_lookup_can_be_limited_to_directories(repo: FakeRepo) -> None:
    index = ScanIndex(repo)
    index.refresh(repo.head)
    assert find(index, "web", namespace="other", under=["apps"]) == ([], [])
    assert find(index, "web", namespace="other", under=["other"]) == ([DocRef("other/web.yaml", 0)], [])
    assert find(index, "web", under=[""]) == ([DocRef("apps/web.yaml", 0)], [])
    assert find(index, "web", under=["app"]) == ([], [])  # a prefix is not a directory


def test_refresh_rereads_only_changed_paths(repo: FakeRepo) -> None:
    index = ScanIndex(repo)
    index.refresh(repo.head)
    repo.reads.clear()
    head = repo.commit({
        "apps/worker.yml": None,                                  # deleted
        "apps/web.yaml": deploy("web-renamed"),                   # changed
        "new/api.yaml": deploy("api") + "---\n" + deploy("api-b"),  # added
        "apps/broken.yaml": deploy("fixed"),                      # repaired
        "README.md": "# changed\n",                               # not YAML
    })
    update = index.refresh(head)
    assert not update.full and update.files_read == 3 and update.files_removed == 1
    assert set(repo.reads) == {"apps/web.yaml", "new/api.yaml", "apps/broken.yaml"}
    assert find(index, "worker") == ([], [])
    assert find(index, "web") == ([], [])
    assert find(index, "web-renamed") == ([DocRef("apps/web.yaml", 0)], [])
    assert find(index, "web", kind="Service", group="") == ([], [])
    assert find(index, "api-b") == ([DocRef("new/api.yaml", 1)], [])
    assert find(index, "fixed") == ([DocRef("apps/broken.yaml", 0)], [])
    assert index.unparsable == {}
    assert index.head == head


def test_refresh_to_the_same_head_reads_nothing(repo: FakeRepo) -> None:
    index = ScanIndex(repo)
    index.refresh(repo.head)
    repo.reads.clear()
    assert index.refresh(repo.head).files_read == 0
    assert not repo.reads


def test_a_file_that_breaks_is_dropped_and_reported(repo: FakeRepo) -> None:
    index = ScanIndex(repo)
    index.refresh(repo.head)
    index.refresh(repo.commit({"other/web.yaml": "kind: [\n"}))
    assert find(index, "web", namespace="other") == ([], [])
    assert "other/web.yaml" in index.unparsable


def test_refresh_falls_back_to_a_full_build_when_the_diff_fails(repo: FakeRepo) -> None:
    index = ScanIndex(repo)
    index.refresh(repo.head)
    repo.fail_diff = True
    head = repo.commit({"apps/web.yaml": None})
    update = index.refresh(head)
    assert update.full
    assert find(index, "web") == ([], [])


def test_include_limits_the_index_to_configured_paths(repo: FakeRepo) -> None:
    index = ScanIndex(repo, include=["other/"])
    index.refresh(repo.head)
    assert find(index, "web") == ([], [])
    assert find(index, "web", namespace="other") == ([DocRef("other/web.yaml", 0)], [])
    index.refresh(repo.commit({"apps/new.yaml": deploy("new"), "other/new.yaml": deploy("new2")}))
    assert find(index, "new") == ([], [])
    assert find(index, "new2") == ([DocRef("other/new.yaml", 0)], [])


def test_non_utf8_and_oversized_files_are_unparsable() -> None:
    repo = FakeRepo({})
    repo.commit({"latin1.yaml": "kind: Deployment\nmetadata: {name: caf\xe9}\n".encode("latin-1"),
                 "big.yaml": deploy("big") + "# " + "x" * 2000 + "\n"})
    index = ScanIndex(repo, max_file_bytes=1000)
    index.refresh(repo.head)
    assert index.unparsable == {"latin1.yaml": "not UTF-8 text", "big.yaml": "larger than 1000 bytes"}


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.yaml")), ids=lambda p: p.name)
def test_scan_documents_agrees_with_yamledit_on_the_corpus(path: Path) -> None:
    """The fast scan and the reference parser give the same documents and indices."""
    text = path.read_bytes().decode("utf-8")
    try:
        expected = [(d.index, DocKey(api_group(d.api_version), d.kind, d.namespace, d.name))
                    for d in list_documents(text)]
    except YamlEditError:
        with pytest.raises(YamlEditError):
            scan_documents(text)
        return
    assert scan_documents(text) == expected


@pytest.mark.parametrize("text", [
    "---\n---\n" + deploy("third"),
    "%YAML 1.2\n---\n" + deploy("a") + "...\n---\n" + deploy("b"),
    "# only a comment\n---\n" + deploy("a"),
    deploy("a") + "---\n# empty document\n---\n" + deploy("b"),
    "kind: null\nmetadata: {name: x}\n---\n" + deploy("b"),
    "kind: Deployment\nmetadata: {name: x, namespace: ~}\n",
    "kind: Deployment\nmetadata: {name: x, namespace: ''}\n",
    "kind: Deployment\nmetadata:\n  labels: {a: b}\n  name: 'quoted'\n  annotations:\n    x: [1, {y: 2}]\n",
    "- not\n- a map\n---\n" + deploy("a"),
    "kind: Deployment\r\nmetadata:\r\n  name: crlf\r\n",
    "&anchor\nkind: Deployment\nmetadata: {name: x}\n",
])
def test_scan_documents_agrees_with_yamledit_on_document_structure(text: str) -> None:
    expected = [(d.index, DocKey(api_group(d.api_version), d.kind, d.namespace, d.name))
                for d in list_documents(text)]
    assert scan_documents(text) == expected


class WorkTreeRepo(FakeRepo):
    """A fake whose files also exist in a work tree, as a Repository's clone does."""

    def __init__(self, workdir: Path, files: Mapping[str, str]) -> None:
        super().__init__(files)
        self.workdir = workdir
        for path, content in files.items():
            (workdir / path).parent.mkdir(parents=True, exist_ok=True)
            (workdir / path).write_text(content)


def test_bulk_reads_come_from_the_work_tree_and_symlinks_go_through_the_repository(tmp_path: Path) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text(deploy("secret-looking"))
    workdir = tmp_path / "wc"
    repo = WorkTreeRepo(workdir, {"apps/web.yaml": deploy("web")})
    (workdir / "apps" / "link.yaml").symlink_to(outside)
    repo.commit({"apps/link.yaml": deploy("from-repository")})
    index = ScanIndex(repo)
    index.refresh(repo.head)
    assert "apps/web.yaml" not in repo.reads  # read straight from the work tree
    assert repo.reads["apps/link.yaml"] == 1  # the symlink was not followed by the index
    assert find(index, "from-repository") == ([DocRef("apps/link.yaml", 0)], [])
    assert find(index, "secret-looking") == ([], [])


WEB = DocKey("apps", "Deployment", "ns", "web")
TWO_DOCS = deploy("api") + "---\n" + deploy("web")
ANNOTATIONS = ("spec", "template", "metadata", "annotations")


def annotate(text: str, doc: int, value: str = "v1", *, replace: str = "spec: {}\n") -> str:
    """Give document ``doc`` a pod-template annotation by hand (the docs are ``deploy()`` shaped)."""
    docs = text.split("---\n")
    docs[doc] = docs[doc].replace(
        replace, f"spec:\n  template:\n    metadata:\n      annotations:\n        k: {value}\n")
    return "---\n".join(docs)


def confined(before: str, after: str, doc: int, expected: DocKey = WEB, value: str = "v1") -> bool:
    return edit_confined(before, after, doc_index=doc, expected=expected, path_expr=ANNOTATIONS, key="k",
                         value=value)


def test_an_edit_of_the_right_document_is_confined() -> None:
    assert confined(TWO_DOCS, annotate(TWO_DOCS, 1), 1)
    assert confined(annotate(TWO_DOCS, 1), annotate(TWO_DOCS, 1), 1)  # already there: no change


@pytest.mark.parametrize(("after", "doc", "expected"), [
    (annotate(TWO_DOCS, 0), 0, WEB),                          # the other workload's document
    (annotate(TWO_DOCS, 0), 1, WEB),                          # change landed outside doc 1
    (annotate(TWO_DOCS, 1, "other"), 1, WEB),                 # not the value we wrote
    (annotate(TWO_DOCS, 1), 1, DocKey("apps", "Deployment", "other", "web")),  # wrong namespace
    (annotate(TWO_DOCS, 1), 1, DocKey("", "Deployment", "ns", "web")),         # wrong group
    (annotate(TWO_DOCS, 1) + "---\nkind: Extra\n", 1, WEB),   # document count changed
    (annotate(TWO_DOCS, 1), 5, WEB),                          # out of range
    ("kind: [\n", 1, WEB),                                    # unparsable
])
def test_an_edit_outside_the_expected_object_is_detected(after: str, doc: int, expected: DocKey) -> None:
    assert not confined(TWO_DOCS, after, doc, expected)


# --------------------------------------------------------------------------- hostile files

BOMB = "kind: ConfigMap\nmetadata: {name: lol}\ndata:\n  a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10))


def test_an_alias_bomb_next_to_the_workload_is_checked_in_linear_time() -> None:
    """Issue 10 item 3: the tenant's Deployment plus a 9^10-leaf alias structure (under 1 KB)."""
    before = TWO_DOCS + "---\n" + BOMB
    assert len(before.encode()) < 1024
    # Was hours: the documents were compared expanded (bench/yaml_hostile.py times it now).
    assert confined(before, annotate(before, 1), 1)
    assert not confined(before, annotate(before, 0), 1)


def test_aliases_in_the_target_document_are_followed_not_expanded() -> None:
    before = TWO_DOCS.replace("spec: {}\n", "spec: {}\nbomb:\n" + BOMB.split("data:\n")[1])
    assert confined(before, annotate(before, 1), 1)


def test_a_changed_alias_structure_elsewhere_is_not_confined() -> None:
    before = TWO_DOCS + "---\n" + BOMB
    after = annotate(before, 1).replace("[x, x, x,", "[x, y, x,")
    assert not confined(before, after, 1)


@pytest.mark.parametrize("text", [
    "a: " + "[" * 100_000 + "]" * 100_000 + "\n",   # crashed the process in libyaml's composer
    "a: " + "{a: " * 50_000 + "}" * 50_000 + "\n",
], ids=["flow-sequences", "flow-maps"])
def test_deep_nesting_is_refused_and_never_crashes(text: str) -> None:
    # How fast the refusal is, is measured in bench/yaml_hostile.py, not asserted here.
    with pytest.raises(YamlEditError, match=r"nested deeper than"):
        scan_documents(text, path="deep.yaml")
    assert not confined(text, text, 0)


def test_index_skips_deep_files_and_indexes_alias_bombs() -> None:
    repo = FakeRepo({"deep.yaml": "a: " + "[" * 1000 + "]" * 1000 + "\n", "bomb.yaml": BOMB})
    index = ScanIndex(repo)
    index.refresh(repo.head)
    assert "nested deeper than" in index.unparsable["deep.yaml"]
    assert index.documents("bomb.yaml") == (DocKey("", "ConfigMap", None, "lol"),)


@pytest.mark.parametrize("text", [
    "? [a, b]\n: x\nkind: Deployment\nmetadata:\n  ? {k: v}\n  : y\n  name: web\n  namespace: ns\n",
    "kind: &k Deployment\nmetadata: {name: *k, labels: {name: other}, namespace: ns}\napiVersion: apps/v1\n",
    "metadata: {name: web}\nmetadata: {name: second}\nkind: Deployment\nkind: Service\n",
    "kind: !!str Deployment\nmetadata:\n  name: !!null ''\n  namespace: !custom ns\n",
])
def test_collections_as_keys_aliases_and_duplicates_read_like_the_reference(text: str) -> None:
    expected = [(d.index, DocKey(api_group(d.api_version), d.kind, d.namespace, d.name))
                for d in list_documents(text)]
    assert scan_documents(text) == expected
