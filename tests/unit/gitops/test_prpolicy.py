"""Pure pull-request policy: branch names, title/body, entries read back, whose branch it is.

Also the ``pullRequest`` block of ``--git-config`` (parsed by
:mod:`gitops_reloader.gitops.gitconfig`), which only the pull-request sink reads.
"""

from __future__ import annotations

import hashlib
import json
import re
import textwrap
from typing import Any

import pytest

from gitops_reloader.errors import ConfigError
from gitops_reloader.gitops import prpolicy
from gitops_reloader.gitops.gitconfig import PullRequestConfig, parse_git_config, repository_from_url
from gitops_reloader.gitops.prpolicy import CommitInfo, SourceEntry, WorkloadEntry
from gitops_reloader.hashing import configmap_hash, keyed_digest
from gitops_reloader.model import ObjectRef, ReloadItem, ReloadRequest, Source, SourceKind, SourceRef

DIGEST = "0123456789abcdef" * 4
T0 = 1_714_557_600  # 2024-05-01T10:00:00Z


def entry(name: str, *sources: str, digest: str = "0123456789ab", when: str = "2024-05-01T10:00:00Z",
          kind: str = "Deployment", namespace: str = "ns") -> WorkloadEntry:
    parsed = tuple(SourceEntry(s.split("/")[0], namespace, s.split("/")[1]) for s in sources)
    return WorkloadEntry(kind, namespace, name, parsed, when, digest)


def request(name: str, *sources: tuple[SourceKind, str, bool], observed_at: int = T0) -> ReloadRequest:
    items = tuple(ReloadItem(Source(SourceRef(kind, "ns", source), "f" * 40), None, deleted)
                  for kind, source, deleted in sources)
    return ReloadRequest(ObjectRef("Deployment", "ns", name), None, items, observed_at)


# --------------------------------------------------------------------------- branch names


def key_hash(ref: ObjectRef) -> str:
    return hashlib.sha256(f"{ref.namespace}/{ref.kind}/{ref.name}".encode()).hexdigest()[:16]


@pytest.mark.parametrize(("ref", "readable"), [
    (ObjectRef("Deployment", "ns", "web"), "ns-deployment-web"),
    (ObjectRef("StatefulSet", "Team A", "db.primary"), "team-a-statefulset-db.primary"),
    (ObjectRef("Rollout", "ns", "a..b"), "ns-rollout-a.b"),
    (ObjectRef("Deployment", "ns", "x.lock"), "ns-deployment-x.lock"),  # never *ends* in .lock
    (ObjectRef("Deployment", "ns", "trailing-"), "ns-deployment-trailing"),
    (ObjectRef("Deployment", "ns", "we b~^:?*[\\"), "ns-deployment-we-b"),
    (ObjectRef("Deployment", "", "...."), "deployment"),
    (ObjectRef("", "~", "...."), ""),
])
def test_workload_branch_key_is_lower_case_safe_and_carries_a_hash_of_the_exact_workload(
        ref: ObjectRef, readable: str) -> None:
    key = prpolicy.workload_branch_key(ref)
    assert key == (f"{readable}-{key_hash(ref)}" if readable else key_hash(ref))
    assert re.fullmatch(r"[a-z0-9][a-z0-9._-]*[a-z0-9]", key) and ".." not in key
    assert prpolicy.workload_branch_key(ObjectRef(ref.kind, ref.namespace, ref.name)) == key  # stable


@pytest.mark.parametrize(("a", "b"), [
    (ObjectRef("Deployment", "x", "deployment-y"), ObjectRef("Deployment", "x-deployment", "y")),
    (ObjectRef("Deployment", "ns", "Web"), ObjectRef("Deployment", "ns", "web")),
    (ObjectRef("Deployment", "ns", "a.b"), ObjectRef("Deployment", "ns", "a_b")),
    (ObjectRef("Deployment", "ns", "web"), ObjectRef("StatefulSet", "ns", "web")),
])
def test_workloads_whose_readable_keys_coincide_get_different_branches(a: ObjectRef, b: ObjectRef) -> None:
    assert prpolicy.workload_branch_key(a) != prpolicy.workload_branch_key(b)
    assert prpolicy.branch_key(a, "workload") != prpolicy.branch_key(b, "workload")


def test_long_workload_keys_are_cut_and_stay_unique() -> None:
    a = prpolicy.workload_branch_key(ObjectRef("Deployment", "ns", "x" * 200 + "a"))
    b = prpolicy.workload_branch_key(ObjectRef("Deployment", "ns", "x" * 200 + "b"))
    assert len(a) <= 100 and len(b) <= 100 and a != b
    assert re.fullmatch(r"ns-deployment-x+-[0-9a-f]{16}", a)


def test_branch_key_follows_the_grouping() -> None:
    ref = ObjectRef("Deployment", "ns", "web")
    assert prpolicy.branch_key(ref, "workload") == f"ns-deployment-web-{key_hash(ref)}"
    assert prpolicy.branch_key(ref, "repository") == prpolicy.REPOSITORY_KEY == "all"
    with pytest.raises(ValueError, match="grouping"):
        prpolicy.branch_key(ref, "namespace")


def test_branch_and_group_names() -> None:
    assert prpolicy.branch_name("main", "ns-deployment-web") == "gitops-reloader/main/ns-deployment-web"
    assert prpolicy.branch_name("release/1.2", "all") == "gitops-reloader/release/1.2/all"
    assert prpolicy.group_key("fleet", "all") == "fleet#all"


# --------------------------------------------------------------------------- entries


def test_entry_for_a_request_names_sources_and_shortens_the_digest() -> None:
    made = prpolicy.entry_for(request("web", (SourceKind.CONFIGMAP, "app-config", False),
                                      (SourceKind.SECRET, "db", True)), DIGEST)
    assert made == WorkloadEntry("Deployment", "ns", "web", (
        SourceEntry("ConfigMap", "ns", "app-config"), SourceEntry("Secret", "ns", "db", deleted=True)),
        "2024-05-01T10:00:00Z", DIGEST[:12])
    assert made.key == "ns/Deployment/web"
    assert [s.label for s in made.sources] == ["configmap/app-config", "secret/db"]
    assert made.sources[1].describe() == "Secret ns/db (deleted)"


def test_format_when_is_rfc3339_utc() -> None:
    assert prpolicy.format_when(T0) == "2024-05-01T10:00:00Z"
    assert prpolicy.short_digest(DIGEST) == "0123456789ab"


def test_merge_replaces_in_place_appends_new_and_drops_what_is_on_the_base() -> None:
    web = entry("web", "ConfigMap/app-config", digest="aaaaaaaaaaaa")
    worker = entry("worker", "ConfigMap/queue", digest="bbbbbbbbbbbb")
    api = entry("api", "Secret/db", digest="cccccccccccc")
    new_web = entry("web", "ConfigMap/app-config", digest="dddddddddddd", when="2024-05-02T00:00:00Z")
    cron = entry("cron", "ConfigMap/cron", digest="eeeeeeeeeeee")
    merged = prpolicy.merge_entries([web, worker, api], [new_web, cron], drop=["ns/Deployment/api"])
    assert merged == (new_web, worker, cron)


def test_merge_keeps_the_earlier_time_when_the_digest_did_not_change() -> None:
    web = entry("web", "ConfigMap/app-config", when="2024-05-01T10:00:00Z")
    again = entry("web", "ConfigMap/app-config", when="2024-05-01T11:00:00Z")
    assert prpolicy.merge_entries([web], [again]) == (web,)  # same body: no update of the PR
    assert prpolicy.merge_entries([], [again], drop=["ns/Deployment/web"]) == ()


# --------------------------------------------------------------------------- title and body


@pytest.mark.parametrize(("entries", "title"), [
    ([entry("web", "ConfigMap/app-config")], "Reload web (configmap/app-config changed)"),
    ([entry("web", "ConfigMap/app-config", "Secret/db"), entry("worker", "ConfigMap/app-config")],
     "Reload web, worker (configmap/app-config, secret/db changed)"),
    ([entry(f"w{i}", f"ConfigMap/c{i}") for i in range(7)],
     "Reload w0, w1, w2, w3, w4 and 2 more (configmap/c0, configmap/c1, configmap/c2, configmap/c3, "
     "configmap/c4 and 2 more changed)"),
    ([], "Reload workloads"),
])
def test_title_names_workloads_and_sources(entries: list[WorkloadEntry], title: str) -> None:
    assert prpolicy.render_title(entries) == title


def test_title_is_bounded() -> None:
    entries = [entry("w" * 60 + str(i), "ConfigMap/" + "c" * 60) for i in range(5)]
    assert len(prpolicy.render_title(entries)) <= 200


def test_body_lists_workloads_and_says_how_to_stop_without_data() -> None:
    value = "s3cr3t-value"
    body = prpolicy.render_body([entry("web", "ConfigMap/app-config", "Secret/db")],
                                branch="gitops-reloader/main/ns-deployment-web", base="main")
    assert "| `ns/Deployment/web` | ConfigMap `ns/app-config`<br>Secret `ns/db` | 2024-05-01T10:00:00Z " \
           "| `0123456789ab` |" in body
    assert "gitops-reloader.io/sink: pull-request" in body
    assert "Close it without merging" in body and "next change opens a new pull request" in body
    assert "push a commit of your own to `gitops-reloader/main/ns-deployment-web`" in body
    assert prpolicy.marker_branch(body) == "gitops-reloader/main/ns-deployment-web"
    assert value not in body and configmap_hash({"k": value}) not in body


def test_body_entries_round_trip() -> None:
    entries = (entry("web", "ConfigMap/app-config", "Secret/db"), entry("a--b", "ConfigMap/c--d"))
    body = prpolicy.render_body(entries, branch="gitops-reloader/main/all", base="main")
    hidden = body.split("<!-- gitops-reloader:entries=", 1)[1].split(" -->", 1)[0]
    assert "--" not in hidden  # nothing can end the HTML comment early
    assert prpolicy.parse_entries(body) == entries
    # Hosts may normalize line endings.
    assert prpolicy.parse_entries(body.replace("\n", "\r\n")) == entries


def test_long_bodies_are_bounded() -> None:
    entries = [entry(f"w{i}", "ConfigMap/app-config") for i in range(300)]
    body = prpolicy.render_body(entries, branch="b", base="main")
    assert "| and 200 more | | | |" in body
    assert len(prpolicy.parse_entries(body)) == 200
    assert len(body) < 60_000


def _long_names(count: int, sources: int) -> list[WorkloadEntry]:
    """Workloads with 253-character names and many long-named sources: the worst a body gets."""
    name = "n" * 240
    return [entry(f"{name}-{i:06d}"[:253], *(f"ConfigMap/{name}-{j:06d}"[:263] for j in range(sources)),
                  namespace="x" * 63) for i in range(count)]


@pytest.mark.parametrize(("count", "sources", "limit"), [
    (300, 1, prpolicy.BODY_LIMIT),
    (300, 3, prpolicy.BODY_LIMIT),
    (300, 50, prpolicy.BODY_LIMIT),
    (40, 1, 20_000),
    (5, 50, 8_000),
    (1, 1, 3_000),
])
def test_bodies_stay_within_the_limit_and_the_marker_stays_parseable(count: int, sources: int,
                                                                     limit: int) -> None:
    entries = _long_names(count, sources)
    body = prpolicy.render_body(entries, branch="gitops-reloader/main/all", base="main", limit=limit)
    assert len(body) <= limit
    parsed = prpolicy.parse_entries(body)
    assert parsed == tuple(entries[:len(parsed)])  # a prefix, read back whole
    assert prpolicy.marker_branch(body) == "gitops-reloader/main/all"
    shown = body.count("| `xxx")
    if shown < count:
        assert f"| and {count - shown} more | | | |" in body
    assert "**To stop gitops-reloader touching this pull request**" in body


def test_a_body_within_the_limit_keeps_every_row_it_can() -> None:
    entries = _long_names(300, 1)
    body = prpolicy.render_body(entries, branch="b", base="main")
    # Rows are cut before marker entries, but never below ten while the marker can give way.
    assert body.count("| `xxx") == 10 and len(prpolicy.parse_entries(body)) > 50
    assert len(body) > prpolicy.BODY_LIMIT - 1_000  # the space is used, not thrown away


def _body_with(items: Any) -> str:
    data = json.dumps({"v": 1, "entries": items}).replace("--", "-\\u002d")
    return f"text\n<!-- gitops-reloader:entries={data} -->\n"


def _raw(**changes: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"kind": "Deployment", "namespace": "ns", "name": "web",
                            "when": "2024-05-01T10:00:00Z", "digest": "0123456789ab",
                            "sources": [{"kind": "ConfigMap", "namespace": "ns", "name": "app-config",
                                         "deleted": False}]}
    item.update(changes)
    return item


@pytest.mark.parametrize("bad", [
    {"name": "Web"},  # not a Kubernetes name
    {"name": "web` | [click](http://evil)"},
    {"kind": "deployment"},
    {"when": "yesterday"},
    {"digest": "not-hex"},
    {"digest": "0123"},
    {"sources": [{"kind": "Pod", "namespace": "ns", "name": "x"}]},
    {"sources": [{"kind": "Secret", "namespace": "ns", "name": "db", "deleted": "yes"}]},
    {"sources": "ConfigMap/ns/app-config"},
])
def test_entries_edited_by_a_person_are_dropped_not_trusted(bad: dict[str, Any]) -> None:
    good = _raw(name="worker")
    assert prpolicy.parse_entries(_body_with([_raw(**bad), good])) == (
        entry("worker", "ConfigMap/app-config"),)


@pytest.mark.parametrize("body", [
    "", "a description someone wrote", "<!-- gitops-reloader:entries={not json} -->",
    '<!-- gitops-reloader:entries={"v":2,"entries":[]} -->',
    '<!-- gitops-reloader:entries={"v":1,"entries":{}} -->',
])
def test_bodies_without_our_entries_give_none(body: str) -> None:
    assert prpolicy.parse_entries(body) == ()
    assert prpolicy.marker_branch(body) is None


def test_duplicate_entries_are_read_once() -> None:
    assert len(prpolicy.parse_entries(_body_with([_raw(), _raw()]))) == 1


# --------------------------------------------------------------------------- whose branch


KEY = b"k" * 32
TREE = "a" * 40
PARENT = "b" * 40


def commit(*, tree: str = TREE, parents: tuple[str, ...] = (PARENT,), sha: str = "1" * 40,
           seals: tuple[str, ...] | None = None, key: bytes = KEY) -> CommitInfo:
    """A commit sealed with ``key`` over its own tree and parents unless ``seals`` is given."""
    given = (prpolicy.commit_seal(key, tree, parents),) if seals is None else seals
    return CommitInfo(sha, tree, parents, given)


def test_seal_is_an_hmac_bound_to_key_tree_and_parents() -> None:
    seal = prpolicy.commit_seal(KEY, TREE, (PARENT,))
    assert re.fullmatch(r"[0-9a-f]{64}", seal) and seal == prpolicy.commit_seal(KEY, TREE, [PARENT])
    others = {prpolicy.commit_seal(b"j" * 32, TREE, (PARENT,)),
              prpolicy.commit_seal(KEY, "c" * 40, (PARENT,)), prpolicy.commit_seal(KEY, TREE, ("c" * 40,)),
              prpolicy.commit_seal(KEY, TREE, ()),
              prpolicy.commit_seal(KEY, TREE, (PARENT, PARENT))}
    assert len(others) == 5 and seal not in others
    assert prpolicy.seal_trailer(KEY, TREE, (PARENT,)) == f"Gitops-Reloader-Seal: {seal}"
    with pytest.raises(ValueError, match="key"):
        prpolicy.commit_seal(b"", TREE, (PARENT,))


@pytest.mark.parametrize(("message", "expected"), [
    ("reload: web\n\n- ns/Deployment/web\n\nReloaded-by: gitops-reloader\n",
     "reload: web\n\n- ns/Deployment/web\n\nReloaded-by: gitops-reloader\nSeal: x\n"),
    ("reload: web\n", "reload: web\n\nSeal: x\n"),  # a subject is not a trailer block
    ("Fix: the subject looks like a trailer", "Fix: the subject looks like a trailer\n\nSeal: x\n"),
    ("reload\n\nbody text here\n\n", "reload\n\nbody text here\n\nSeal: x\n"),
])
def test_append_trailer_puts_the_seal_in_the_trailer_block(message: str, expected: str) -> None:
    assert prpolicy.append_trailer(message, "Seal: x") == expected


def test_seal_never_equals_a_config_hash_digest_under_the_same_key() -> None:
    # The digest key also keys the config-hash written to git: the two inputs must not meet.
    assert prpolicy.commit_seal(KEY, TREE, (PARENT,)) != keyed_digest(KEY, [(f"tree {TREE}", PARENT)])


COPIED = prpolicy.commit_seal(KEY, TREE, (PARENT,))


@pytest.mark.parametrize(("commits", "ours", "reason"), [
    ([], True, "no commits"),
    ([commit()], True, "one sealed gitops-reloader commit"),
    ([commit(seals=("junk", COPIED.upper(), COPIED))], True, "one sealed"),  # one valid seal is enough
    ([commit(seals=())], False, "commit 111111111111 was made by someone else"),  # any author e-mail
    ([commit(key=b"stolen-or-guessed-key-0000000000")], False, "no valid gitops-reloader seal"),
    ([commit(tree="c" * 40, seals=(COPIED,))], False, "someone else"),  # a copied trailer, another tree
    ([commit(parents=("c" * 40,), seals=(COPIED,))], False, "someone else"),  # rebased onto other history
    ([commit(seals=(COPIED[:-1] + "0",))], False, "someone else"),
    ([commit(seals=(COPIED + " ",))], False, "someone else"),
    ([commit(sha="2" * 40), commit()], False, "2 commits on top of the base"),
    ([commit(seals=(), sha="2" * 40), commit()], False, "222222222222"),
])
def test_branch_ownership(commits: list[CommitInfo], ours: bool, reason: str) -> None:
    decision = prpolicy.branch_ownership(commits, key=KEY)
    assert decision.ours is ours
    assert reason in decision.reason
    assert COPIED not in decision.reason and "@" not in decision.reason


HASH_LINE = '-    gitops-reloader.io/config-hash: "{old}"\n+    gitops-reloader.io/config-hash: "{new}"\n'
HEADER = "diff --git a/w.yaml b/w.yaml\nindex 1111111..2222222 100644\n--- a/w.yaml\n+++ b/w.yaml\n"


@pytest.mark.parametrize(("diff", "ok"), [
    (HEADER + "@@ -8 +8 @@ annotations:\n" + HASH_LINE.format(old="a", new="b"), True),
    (HEADER + "@@ -7,0 +8,3 @@\n+  metadata:\n+    annotations:\n"
              "+      gitops-reloader.io/config-hash: b\n", True),  # a new annotations map
    (HEADER + "@@ -8 +8 @@\n-  annotations: {a: b}\n"
              f"+  annotations: {{a: b, gitops-reloader.io/config-hash: \"{DIGEST}\"}}\n", True),
    (HEADER + "@@ -8 +8 @@\n-  annotations: {a: b}\n"
              f"+  annotations: {{a: c, gitops-reloader.io/config-hash: \"{DIGEST}\"}}\n", False),
    (HEADER + "@@ -8 +8 @@\n-  annotations: {a: b}\n"
              f"+  annotations: {{a: b, gitops-reloader.io/config-hash: \"{DIGEST}\", x: y}}\n", False),
    (HEADER + "@@ -8 +8 @@\n-  metadata: {name: w}\n"
              f"+  metadata: {{name: w, annotations: {{gitops-reloader.io/config-hash: {DIGEST}}}}}\n", True),
    (HEADER + "@@ -8 +8 @@\n-  metadata: {name: w, annotations: null}\n"
              f"+  metadata: {{name: w, annotations: {{gitops-reloader.io/config-hash: {DIGEST}}}}}\n", True),
    (HEADER + "@@ -8 +8,2 @@\n-  annotations: ~\n+  annotations:\n"
              f"+    gitops-reloader.io/config-hash: {DIGEST}\n", True),  # an explicit null dropped
    (HEADER + "@@ -8 +8 @@\n-  annotations: {a: b}\n+  annotations: {a: b, c: d}\n", False),
    (HEADER + "@@ -8 +8 @@\n-  annotations: {a: b}\n+  annotations: {a: b}  \n", False),
    (HEADER + "@@ -8 +8 @@\n-  annotations: {gitops-reloader.io/config-hash: a}\n"
              "+  annotations: {gitops-reloader.io/config-hash: b}\n", True),
    (HEADER + "@@ -3 +3 @@\n-  image: nginx\n+  image: evil\n", False),
    (HEADER + "@@ -8 +8 @@\n" + HASH_LINE.format(old="a", new="b") + "@@ -20,0 +20 @@\n+  image: x\n", False),
    (HEADER + "@@ -8,0 +9 @@\n+  annotations:\n", True),
    (HEADER + "@@ -8 +7,0 @@\n-  annotations:\n", False),  # removing a key is never ours
    (HEADER + "@@ -8,0 +9 @@\n+  hostNetwork:\n", False),  # a bare key that is not an annotations map
    ("diff --git a/n.yaml b/n.yaml\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n"
     "+++ b/n.yaml\n@@ -0,0 +1 @@\n+gitops-reloader.io/config-hash: a\n", False),  # a new file
    ("diff --git a/n.yaml b/n.yaml\ndeleted file mode 100644\n", False),
    ("diff --git a/b.bin b/b.bin\nindex 1..2 100644\nBinary files a/b.bin and b/b.bin differ\n", False),
    (HEADER + "@@ -1 +1 @@\n-gitops-reloader.io/config-hash: a\n\\ No newline at end of file\n"
              "+gitops-reloader.io/config-hash: b\n\\ No newline at end of file\n", True),
    (HEADER + "@@ -1 +1 @@\n-image: a\n\\ No newline at end of file\n+image: b\n", False),
    ("", False),
])
def test_hash_only_diff(diff: str, ok: bool) -> None:
    assert prpolicy.hash_only_diff(diff) is ok


def test_hash_only_diff_is_bounded_and_linear() -> None:
    many = HEADER + "@@ -1,3000 +1,3000 @@\n" + HASH_LINE.format(old="a", new="b") * 1500
    assert prpolicy.hash_only_diff(many) is False  # over 2,000 changed lines: not ours
    assert prpolicy.hash_only_diff(HEADER + "+" + " " * 200_000 + "x\n") is False


# --------------------------------------------------------------------------- the pullRequest block


def repo_config(block: str, *, url: str = "https://github.com/acme/fleet.git",
                auth: str = "tokenFile: /etc/git/token") -> PullRequestConfig | None:
    text = (f"repositories:\n  - name: fleet\n    url: {url}\n    {auth}\n"
            + textwrap.indent(textwrap.dedent(block), "    "))
    return parse_git_config(text, source="cfg.yaml").repositories[0].pull_request


def test_full_pull_request_block() -> None:
    settings = repo_config("""\
        pullRequest:
          host: GitHub
          apiUrl: https://ghe.example.com/api/v3/
          tokenFile: /etc/git/api-token
          repository: acme/other
          labels: [gitops-reloader, "needs review", gitops-reloader]
          autoMerge: true
          grouping: repository
        """)
    assert settings == PullRequestConfig(
        host="github", api_url="https://ghe.example.com/api/v3", token_file="/etc/git/api-token",
        repository="acme/other", labels=("gitops-reloader", "needs review"), auto_merge=True,
        grouping="repository")


@pytest.mark.parametrize(("url", "host", "api_url", "repository"), [
    ("https://github.com/acme/fleet.git", "github", "https://api.github.com", "acme/fleet"),
    ("git@github.com:acme/fleet.git", "github", "https://api.github.com", "acme/fleet"),
    ("https://ghe.acme.example/acme/fleet", "github", "https://ghe.acme.example/api/v3", "acme/fleet"),
    ("https://gitlab.example.com/group/sub/app.git", "gitlab", "https://gitlab.example.com/api/v4",
     "group/sub/app"),
    ("ssh://git@gitlab.example.com:2222/group/app.git", "gitlab", "https://gitlab.example.com:2222/api/v4",
     "group/app"),
    ("http://127.0.0.1:3000/org/app.git", "gitea", "http://127.0.0.1:3000/api/v1", "org/app"),
    ("https://code.example.com/forgejo/org/app.git", "forgejo", "https://code.example.com/api/v1",
     "org/app"),
    ("https://bitbucket.org/ws/app.git", "bitbucket", "https://api.bitbucket.org/2.0", "ws/app"),
])
def test_defaults_are_derived_from_the_clone_url(url: str, host: str, api_url: str, repository: str) -> None:
    settings = repo_config(f"pullRequest: {{host: {host}}}\n", url=url)
    assert settings is not None
    assert (settings.api_url, settings.repository) == (api_url, repository)
    assert settings.token_file == "/etc/git/token"  # the repository's own token
    assert (settings.labels, settings.auto_merge, settings.grouping) == ((), False, "")


@pytest.mark.parametrize(("block", "url", "expected"), [
    ("pullRequest: {host: bitbucket, username: me@example.com}\n", "https://bitbucket.org/ws/app.git",
     {"username": "me@example.com"}),
    ("pullRequest: {host: bitbucket}\n", "https://bitbucket.org/ws/app.git", {"username": ""}),
    ("pullRequest: {host: gitlab, removeSourceBranch: true, squash: true}\n",
     "https://gitlab.example.com/g/app.git", {"remove_source_branch": True, "squash": True}),
    ("pullRequest: {host: gitlab, squash: false}\n", "https://gitlab.example.com/g/app.git",
     {"remove_source_branch": False, "squash": False}),
])
def test_host_options(block: str, url: str, expected: dict[str, Any]) -> None:
    settings = repo_config(block, url=url)
    assert settings is not None
    assert {key: getattr(settings, key) for key in expected} == expected


def test_repository_from_url() -> None:
    assert repository_from_url("https://h/a/b/c.git", "gitlab") == "a/b/c"
    assert repository_from_url("https://h/a/b/c.git", "gitea") == "b/c"
    assert repository_from_url("https://h/only", "github") == ""


@pytest.mark.parametrize("block", ["", "pullRequest: {enabled: false}\n",
                                   "pullRequest: {enabled: false, host: svn}\n"])
def test_no_block_or_disabled_means_no_pull_requests(block: str) -> None:
    assert repo_config(block) is None


@pytest.mark.parametrize(("block", "url", "auth", "message"), [
    ("pullRequest: {}\n", None, None, "repositories[0].pullRequest.host: is required"),
    ("pullRequest: {host: svn}\n", None, None, "repositories[0].pullRequest.host: must be one of"),
    ("pullRequest: {host: github, enabled: yes-please}\n", None, None, "pullRequest.enabled: must be true"),
    ("pullRequest: {host: github, autoMerge: 1}\n", None, None, "pullRequest.autoMerge: must be true"),
    ("pullRequest: {host: github, grouping: team}\n", None, None, "pullRequest.grouping: must be one of"),
    ("pullRequest: {host: github, labels: a}\n", None, None, "pullRequest.labels: must be a list"),
    ("pullRequest: {host: github, labels: ['a,b']}\n", None, None, "pullRequest.labels[0]"),
    ("pullRequest: {host: github, labels: ['']}\n", None, None, "pullRequest.labels[0]: must not be empty"),
    ("pullRequest: {host: github, apiUrl: ftp://x}\n", None, None, "pullRequest.apiUrl: must be an http"),
    ("pullRequest: {host: github, apiUrl: 'https://u:p@x/api'}\n", None, None,
     "pullRequest.apiUrl: must not carry credentials"),
    ("pullRequest: {host: github, apiUrl: 'https://x/api?a=1'}\n", None, None, "must not have a query"),
    ("pullRequest: {host: github, repository: a/b/c}\n", None, None,
     "pullRequest.repository: use owner/name"),
    ("pullRequest: {host: gitlab, repository: solo}\n", None, None,
     "pullRequest.repository: use the project path"),
    ("pullRequest: {host: bitbucket}\n", "https://bitbucket.example.com/scm/p/r.git", None,
     "pullRequest.apiUrl: is required for bitbucket"),
    ("pullRequest: {host: github}\n", "https://github.com/solo", None, "pullRequest.repository: is required"),
    ("pullRequest: {host: github, tokn: x}\n", None, None, "unknown field repositories[0].pullRequest.tokn"),
    ("pullRequest: [github]\n", None, None, "repositories[0].pullRequest: must be a map"),
    ("pullRequest: {host: github, username: bot}\n", None, None,
     "pullRequest.username: is only used with host bitbucket"),
    ("pullRequest: {host: bitbucket, username: 'a:b'}\n", "https://bitbucket.org/ws/app.git", None,
     "pullRequest.username: no whitespace or ':'"),
    ("pullRequest: {host: gitea, squash: true}\n", None, None, "pullRequest.squash: is a GitLab setting"),
    ("pullRequest: {host: github, removeSourceBranch: false}\n", None, None,
     "pullRequest.removeSourceBranch: is a GitLab and Azure DevOps setting"),
    ("pullRequest: {host: gitlab, squash: yes-please}\n", "https://gitlab.example.com/g/app.git", None,
     "pullRequest.squash: must be true"),
    ("pullRequest: {host: gitlab, apiUrl: 'https://gitlab.example.com/api/v4'}\n",
     "git@gitlab.example.com:g/app.git", "sshKeyFile: /k\n    knownHostsFile: /kh",
     "pullRequest.tokenFile: is required when the repository has no tokenFile"),
])
def test_invalid_blocks_name_the_field(block: str, url: str | None, auth: str | None, message: str) -> None:
    kwargs = {k: v for k, v in (("url", url), ("auth", auth)) if v is not None}
    with pytest.raises(ConfigError) as raised:
        repo_config(block, **kwargs)
    assert message in str(raised.value)
    assert str(raised.value).startswith("--git-config cfg.yaml: ")


def test_the_helm_rendering_is_accepted() -> None:
    config = parse_git_config(textwrap.dedent("""\
        repositories:
          - name: apps
            url: https://github.com/acme/apps.git
            tokenFile: /etc/gitops-reloader/credentials/apps/token
            pullRequest: {apiUrl: https://api.github.com, enabled: true, grouping: repository, host: github}
        """))
    settings = config.repositories[0].pull_request
    assert settings is not None and settings.token_file == "/etc/gitops-reloader/credentials/apps/token"
