"""The reload rules (ACCEPTANCE: Which workloads reload), table-driven.

Precedence: ignore > exclude > explicit > search > auto > auto-reload-all.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import pytest

from gitops_reloader.config import AnnotationKeys
from gitops_reloader.index import extract_refs
from gitops_reloader.model import (
    ContainerRefs,
    ObjectRef,
    PodRefs,
    SourceKind,
    SourceMeta,
    SourceRef,
)
from gitops_reloader.policy import (
    MAX_LIST_BYTES,
    MAX_LIST_ENTRIES,
    MAX_PATTERN_CHARS,
    TRUTHY_VALUES,
    Decision,
    PolicyOptions,
    Reason,
    WorkloadView,
    choose_container,
    decide,
    effective_annotations,
    has_explicit_lists,
    is_truthy,
    relevant_keys,
)

CM, SECRET = SourceKind.CONFIGMAP, SourceKind.SECRET
K = AnnotationKeys()
OPTS = PolicyOptions(keys=K)
ALL = PolicyOptions(keys=K, auto_reload_all=True)

AUTO = K.auto
CM_AUTO = K.configmap_auto
SECRET_AUTO = K.secret_auto
CM_RELOAD = K.configmap_reload
SECRET_RELOAD = K.secret_reload
SEARCH = K.search
MATCH = K.match
IGNORE = K.ignore
CM_EXCLUDE = K.configmaps_exclude
SECRET_EXCLUDE = K.secrets_exclude

TRUTHY = ["1", "t", "T", "true", "TRUE", "True"]
NOT_TRUE = [
    "false", "False", "FALSE", "f", "F", "0", "", " ", "yes", "y", "on", "2",
    " true", "true ", "tRUE", "enabled", "-1",
]


def typed_auto(kind: SourceKind) -> str:
    return CM_AUTO if kind is CM else SECRET_AUTO


def reload_key(kind: SourceKind) -> str:
    return CM_RELOAD if kind is CM else SECRET_RELOAD


def exclude_key(kind: SourceKind) -> str:
    return CM_EXCLUDE if kind is CM else SECRET_EXCLUDE


def other(kind: SourceKind) -> SourceKind:
    return SECRET if kind is CM else CM


def uses(kind: SourceKind, name: str, container: str = "app", *, init: bool = False) -> PodRefs:
    """A pod whose one container references ``name`` through env."""
    names = frozenset({name})
    refs = ContainerRefs(
        container, init,
        configmaps=names if kind is CM else frozenset(),
        secrets=names if kind is SECRET else frozenset(),
    )
    return PodRefs(containers=(refs,))


NO_REFS = PodRefs(containers=(ContainerRefs("app", False),))


def view(
    annotations: Mapping[str, str] | None = None,
    *,
    template: Mapping[str, str] | None = None,
    refs: PodRefs = NO_REFS,
    namespace: str = "ns",
    kind: str = "Deployment",
) -> WorkloadView:
    return WorkloadView(
        ref=ObjectRef(kind, namespace, "web"),
        annotations=dict(annotations or {}),
        template_annotations=dict(template or {}),
        refs=refs,
    )


def source(
    kind: SourceKind = CM,
    name: str = "app-cfg",
    annotations: Mapping[str, str] | None = None,
    namespace: str = "ns",
) -> SourceMeta:
    return SourceMeta(
        ref=SourceRef(kind, namespace, name), hash="0" * 40, annotations=dict(annotations or {})
    )


# --- explicit reload lists ----------------------------------------------------------------


@pytest.mark.parametrize("workload_kind", ["Deployment", "DaemonSet", "StatefulSet", "Rollout",
                                           "DeploymentConfig", "CronJob", "Job"])
def test_explicit_list_reloads_any_workload_kind(workload_kind: str) -> None:
    d = decide(view({CM_RELOAD: "app-cfg"}, kind=workload_kind), source(), OPTS)
    assert d == Decision(True, Reason.EXPLICIT, "app")


@pytest.mark.parametrize("kind", [CM, SECRET])
def test_explicit_match_needs_no_reference_and_goes_to_first_regular_container(
    kind: SourceKind,
) -> None:
    refs = PodRefs(containers=(
        ContainerRefs("init", True), ContainerRefs("first", False), ContainerRefs("second", False)
    ))
    d = decide(view({reload_key(kind): "app-cfg"}, refs=refs), source(kind), OPTS)
    assert d == Decision(True, Reason.EXPLICIT, "first")


@pytest.mark.parametrize("kind", [CM, SECRET])
def test_explicit_match_goes_to_the_container_that_uses_the_source(kind: SourceKind) -> None:
    refs = PodRefs(containers=(ContainerRefs("a", False), *uses(kind, "app-cfg", "b").containers))
    d = decide(view({reload_key(kind): "app-cfg"}, refs=refs), source(kind), OPTS)
    assert d == Decision(True, Reason.EXPLICIT, "b")


@pytest.mark.parametrize(
    ("value", "name", "reload", "invalid"),
    [
        ("app-cfg", "app-cfg", True, ()),
        ("app-config-.*", "app-config-x", True, ()),
        ("app-config-.*", "app-config-", True, ()),
        ("app-config-.*", "app-config", False, ()),
        ("app", "app-config", False, ()),  # anchored at the end
        ("config", "app-config", False, ()),  # anchored at the start
        ("app-config", "app", False, ()),
        (".*-config", "app-config", True, ()),
        ("app.*", "app", True, ()),
        (".", "a", True, ()),
        (".", "ab", False, ()),
        ("a|b", "a", True, ()),
        ("a|b", "ab", False, ()),
        ("app|web", "apple", False, ()),  # the whole alternation is anchored
        ("app|web", "my-web", False, ()),
        ("APP", "app", False, ()),  # case-sensitive
        ("app-cfg", "app-cfg\n", False, ()),  # no "$ before newline" leniency
        ("other,app-cfg", "app-cfg", True, ()),  # comma list
        ("  other ,  app-cfg  ", "app-cfg", True, ()),  # trimmed
        ("other,,app-cfg,", "app-cfg", True, ()),  # empty entries ignored
        ("other, web", "app-cfg", False, ()),
        ("", "app-cfg", False, ()),
        (" , ,", "app-cfg", False, ()),
        ("[,app-cfg", "app-cfg", True, ("[",)),  # invalid skipped, others work
        ("app-cfg,[", "app-cfg", True, ("[",)),  # reported even after a match
        ("(a, *b ,app-.*", "app-cfg", True, ("(a", "*b")),
        ("[", "[", False, ("[",)),  # invalid entries are skipped, not compared literally
        ("(unclosed", "app-cfg", False, ("(unclosed",)),
        # the comma splits first: "a{1" and "3}", both literal text for `re`
        ("a{1,3}", "aa", False, ()),
        ("a{1,3}", "a{1", True, ()),
    ],
)
@pytest.mark.parametrize("kind", [CM, SECRET])
def test_reload_list_entries_are_trimmed_anchored_regexes(
    kind: SourceKind, value: str, name: str, reload: bool, invalid: tuple[str, ...]
) -> None:
    d = decide(view({reload_key(kind): value}), source(kind, name), OPTS)
    assert d.reload is reload
    assert d.reason is (Reason.EXPLICIT if reload else Reason.NOT_MATCHED)
    assert d.invalid_patterns == invalid


@pytest.mark.parametrize(
    ("value", "name", "reload", "invalid"),
    [
        # RE2 (Go regexp) syntax, as Stakater: no backreferences, no lookaround, no \Z
        (r"(a)\1", "aa", False, (r"(a)\1",)),
        ("(?=app)app-cfg", "app-cfg", False, ("(?=app)app-cfg",)),
        ("(?!x)app-cfg", "app-cfg", False, ("(?!x)app-cfg",)),
        (r"app-cfg\Z", "app-cfg", False, (r"app-cfg\Z",)),
        ("a{1001}", "a", False, ("a{1001}",)),  # RE2's repetition limit
        (r"\pL" * 400, "a", False, (r"\pL" * 400,)),  # too large a program / too long
        # syntax both engines share keeps its meaning
        ("(?i)APP-CFG", "app-cfg", True, ()),
        (r"app-\d+", "app-42", True, ()),
        (r"[[:alpha:]]+-cfg", "app-cfg", True, ()),
        ("(?P<n>app)-cfg", "app-cfg", True, ()),
        ("(a+)+$", "a" * 252 + "b", False, ()),
        ("(a+)+$", "a" * 253, True, ()),
        ("x" * MAX_PATTERN_CHARS, "x" * MAX_PATTERN_CHARS, True, ()),
        ("x" * (MAX_PATTERN_CHARS + 1), "x" * (MAX_PATTERN_CHARS + 1), False,
         ("x" * (MAX_PATTERN_CHARS + 1),)),
    ],
    ids=["backreference", "lookahead", "negative-lookahead", "python-only-escape", "repeat-limit",
         "program-too-large", "case-flag", "digit-class", "posix-class", "named-group",
         "catastrophic-no-match", "catastrophic-match", "max-length", "too-long"],
)
def test_reload_list_entries_use_re2_syntax(
    value: str, name: str, reload: bool, invalid: tuple[str, ...]
) -> None:
    d = decide(view({CM_RELOAD: value}), source(CM, name), OPTS)
    assert (d.reload, d.invalid_patterns) == (reload, invalid)


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a|a)*$", "(a*)*c", "(.*a){20}", "((a+)+)+c"])
def test_catastrophic_patterns_evaluate_in_linear_time(pattern: str) -> None:
    # Python's re takes seconds (unbounded for longer names) on these; RE2 microseconds.
    name = "a" * 252 + "b"
    decide(view({CM_RELOAD: pattern}), source(CM, "warm-up"), OPTS)  # compile once
    start = time.perf_counter()
    d = decide(view({CM_RELOAD: pattern}), source(CM, name), OPTS)
    assert time.perf_counter() - start < 0.01
    assert d.reason is Reason.NOT_MATCHED


def _entries(count: int) -> str:
    return ",".join(f"cfg-{i}" for i in range(count))


@pytest.mark.parametrize("kind", [CM, SECRET])
@pytest.mark.parametrize(
    ("value", "too_large"),
    [
        (_entries(MAX_LIST_ENTRIES), False),
        (_entries(MAX_LIST_ENTRIES + 1), True),
        ("cfg-0" + " " * (MAX_LIST_BYTES - 5), False),
        ("cfg-0" + " " * (MAX_LIST_BYTES - 4), True),
        ("cfg-0," + " " * (MAX_LIST_BYTES - 7) + "é", True),  # bytes, not characters
        ("cfg-0," + " ," * 3000, True),  # empty entries are free, the bytes are not
    ],
    ids=["max-entries", "too-many-entries", "max-bytes", "too-many-bytes", "utf8-bytes",
         "empty-entries"],
)
def test_an_oversized_reload_list_is_ignored_and_reported(
    kind: SourceKind, value: str, too_large: bool
) -> None:
    d = decide(view({reload_key(kind): value}), source(kind, "cfg-0"), OPTS)
    if too_large:
        assert d == Decision(False, Reason.NOT_MATCHED, None, (), (reload_key(kind),))
        assert has_explicit_lists(view({reload_key(kind): value}), K)  # evaluated, to report it
    else:
        assert d == Decision(True, Reason.EXPLICIT, "app")


@pytest.mark.parametrize("kind", [CM, SECRET])
def test_an_oversized_exclude_list_is_ignored_and_reported(kind: SourceKind) -> None:
    annotations = {exclude_key(kind): _entries(MAX_LIST_ENTRIES + 1), AUTO: "true"}
    d = decide(view(annotations, refs=uses(kind, "cfg-0")), source(kind, "cfg-0"), OPTS)
    assert d == Decision(True, Reason.AUTO, "app", (), (exclude_key(kind),))


def test_both_oversized_lists_are_reported_in_order() -> None:
    big = _entries(MAX_LIST_ENTRIES + 1)
    d = decide(view({CM_EXCLUDE: big, CM_RELOAD: big}), source(CM, "cfg-0"), OPTS)
    assert d.oversized == (CM_EXCLUDE, CM_RELOAD)
    assert not d.reload


def test_an_oversized_list_of_the_other_type_is_not_read() -> None:
    d = decide(view({SECRET_RELOAD: _entries(MAX_LIST_ENTRIES + 1), CM_RELOAD: "cfg-0"}),
               source(CM, "cfg-0"), OPTS)
    assert d == Decision(True, Reason.EXPLICIT, "app")


def test_invalid_pattern_is_reported_when_another_rule_reloads() -> None:
    annotations = {CM_RELOAD: "[", AUTO: "true"}
    d = decide(view(annotations, refs=uses(CM, "app-cfg")), source(), OPTS)
    assert d == Decision(True, Reason.AUTO, "app", ("[",))


@pytest.mark.parametrize("kind", [CM, SECRET])
def test_lists_are_per_type(kind: SourceKind) -> None:
    # A source named like an entry of the *other* type's list does not match.
    d = decide(view({reload_key(other(kind)): "app-cfg"}), source(kind), OPTS)
    assert d == Decision(False, Reason.NOT_MATCHED)


def test_both_lists_each_match_their_own_type() -> None:
    w = view({CM_RELOAD: "cfg", SECRET_RELOAD: "sec"})
    assert decide(w, source(CM, "cfg"), OPTS).reload
    assert decide(w, source(SECRET, "sec"), OPTS).reload
    assert not decide(w, source(SECRET, "cfg"), OPTS).reload
    assert not decide(w, source(CM, "sec"), OPTS).reload


# --- namespace and "no annotation" --------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "options", "refs"),
    [
        ({CM_RELOAD: "app-cfg"}, OPTS, NO_REFS),
        ({AUTO: "true"}, OPTS, uses(CM, "app-cfg")),
        ({CM_AUTO: "true"}, OPTS, uses(CM, "app-cfg")),
        ({SEARCH: "true"}, OPTS, uses(CM, "app-cfg")),
        ({}, ALL, uses(CM, "app-cfg")),
    ],
)
def test_a_workload_in_another_namespace_never_reloads(
    annotations: dict[str, str], options: PolicyOptions, refs: PodRefs
) -> None:
    src = source(CM, annotations={MATCH: "true"}, namespace="elsewhere")
    assert decide(view(annotations, refs=refs), src, options) == Decision(
        False, Reason.OTHER_NAMESPACE
    )


@pytest.mark.parametrize("refs", [NO_REFS, uses(CM, "app-cfg")])
def test_a_workload_without_any_reloader_annotation_never_reloads(refs: PodRefs) -> None:
    w = view({"deployment.kubernetes.io/revision": "3"}, template={"foo": "bar"}, refs=refs)
    assert decide(w, source(), OPTS) == Decision(False, Reason.NO_ANNOTATION)


# --- auto, typed auto: truthy spellings, reference required -------------------------------


@pytest.mark.parametrize("value", TRUTHY)
@pytest.mark.parametrize("kind", [CM, SECRET])
def test_auto_reloads_on_every_truthy_spelling(kind: SourceKind, value: str) -> None:
    d = decide(view({AUTO: value}, refs=uses(kind, "app-cfg")), source(kind), OPTS)
    assert d == Decision(True, Reason.AUTO, "app")


@pytest.mark.parametrize("value", NOT_TRUE)
@pytest.mark.parametrize("kind", [CM, SECRET])
def test_auto_with_a_non_true_value_does_not_reload(kind: SourceKind, value: str) -> None:
    d = decide(view({AUTO: value}, refs=uses(kind, "app-cfg")), source(kind), OPTS)
    assert d == Decision(False, Reason.NOT_MATCHED)


@pytest.mark.parametrize("value", TRUTHY)
@pytest.mark.parametrize("kind", [CM, SECRET])
def test_typed_auto_reloads_its_own_type(kind: SourceKind, value: str) -> None:
    d = decide(view({typed_auto(kind): value}, refs=uses(kind, "app-cfg")), source(kind), OPTS)
    assert d == Decision(True, Reason.TYPED_AUTO, "app")


@pytest.mark.parametrize("kind", [CM, SECRET])
def test_typed_auto_does_not_reload_the_other_type(kind: SourceKind) -> None:
    w = view({typed_auto(other(kind)): "true"}, refs=uses(kind, "app-cfg"))
    assert decide(w, source(kind), OPTS) == Decision(False, Reason.NOT_MATCHED)


@pytest.mark.parametrize("value", NOT_TRUE)
@pytest.mark.parametrize("kind", [CM, SECRET])
def test_typed_auto_non_true_does_not_reload(kind: SourceKind, value: str) -> None:
    w = view({typed_auto(kind): value}, refs=uses(kind, "app-cfg"))
    assert not decide(w, source(kind), OPTS).reload


@pytest.mark.parametrize(
    ("generic", "typed", "reason"),
    [
        ("true", None, Reason.AUTO),
        (None, "true", Reason.TYPED_AUTO),
        ("true", "true", Reason.AUTO),
        ("false", "true", Reason.TYPED_AUTO),
        ("true", "false", Reason.AUTO),
        ("false", "false", Reason.NOT_MATCHED),
    ],
)
@pytest.mark.parametrize("kind", [CM, SECRET])
def test_typed_and_generic_auto_are_ored(
    kind: SourceKind, generic: str | None, typed: str | None, reason: Reason
) -> None:
    annotations = {}
    if generic is not None:
        annotations[AUTO] = generic
    if typed is not None:
        annotations[typed_auto(kind)] = typed
    d = decide(view(annotations, refs=uses(kind, "app-cfg")), source(kind), OPTS)
    assert d.reason is reason
    assert d.reload is (reason is not Reason.NOT_MATCHED)


def pod(**spec: Any) -> PodRefs:
    return extract_refs(spec)


REFERENCING_PODS: dict[str, tuple[SourceKind, PodRefs]] = {
    "cm env valueFrom": (CM, pod(containers=[{"name": "app", "env": [
        {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "app-cfg", "key": "k"}}}]}])),
    "secret env valueFrom": (SECRET, pod(containers=[{"name": "app", "env": [
        {"name": "X", "valueFrom": {"secretKeyRef": {"name": "app-cfg", "key": "k"}}}]}])),
    "cm envFrom": (CM, pod(containers=[
        {"name": "app", "envFrom": [{"configMapRef": {"name": "app-cfg"}}]}])),
    "secret envFrom": (SECRET, pod(containers=[
        {"name": "app", "envFrom": [{"secretRef": {"name": "app-cfg"}}]}])),
    "cm volume": (CM, pod(
        containers=[{"name": "app", "volumeMounts": [{"name": "v"}]}],
        volumes=[{"name": "v", "configMap": {"name": "app-cfg"}}])),
    "secret volume": (SECRET, pod(
        containers=[{"name": "app", "volumeMounts": [{"name": "v"}]}],
        volumes=[{"name": "v", "secret": {"secretName": "app-cfg"}}])),
    "cm projected": (CM, pod(
        containers=[{"name": "app", "volumeMounts": [{"name": "v"}]}],
        volumes=[{"name": "v", "projected": {"sources": [{"configMap": {"name": "app-cfg"}}]}}])),
    "secret projected": (SECRET, pod(
        containers=[{"name": "app", "volumeMounts": [{"name": "v"}]}],
        volumes=[{"name": "v", "projected": {"sources": [{"secret": {"name": "app-cfg"}}]}}])),
    "cm init env": (CM, pod(
        containers=[{"name": "app"}],
        initContainers=[{"name": "init", "envFrom": [{"configMapRef": {"name": "app-cfg"}}]}])),
    "secret init env": (SECRET, pod(
        containers=[{"name": "app"}],
        initContainers=[{"name": "init", "env": [
            {"name": "X", "valueFrom": {"secretKeyRef": {"name": "app-cfg"}}}]}])),
    "cm init volume": (CM, pod(
        containers=[{"name": "app"}],
        initContainers=[{"name": "init", "volumeMounts": [{"name": "v"}]}],
        volumes=[{"name": "v", "configMap": {"name": "app-cfg"}}])),
    "secret unmounted volume": (SECRET, pod(
        containers=[{"name": "app"}],
        volumes=[{"name": "v", "secret": {"secretName": "app-cfg"}}])),
}

Arrangement = tuple[dict[str, str], dict[str, str], PolicyOptions, Reason]
"""Workload annotations, source annotations, options, expected reason."""

AUTO_LIKE: dict[str, Arrangement] = {
    "auto": ({AUTO: "true"}, {}, OPTS, Reason.AUTO),
    "typed auto": ({}, {}, OPTS, Reason.TYPED_AUTO),  # filled per kind below
    "search": ({SEARCH: "true"}, {MATCH: "true"}, OPTS, Reason.SEARCH),
    "auto-reload-all": ({}, {}, ALL, Reason.AUTO_RELOAD_ALL),
}


def auto_like(rule: str, kind: SourceKind) -> Arrangement:
    annotations, src_annotations, options, reason = AUTO_LIKE[rule]
    if rule == "typed auto":
        annotations = {typed_auto(kind): "true"}
    return annotations, src_annotations, options, reason


@pytest.mark.parametrize("rule", list(AUTO_LIKE))
@pytest.mark.parametrize("pod_name", list(REFERENCING_PODS))
def test_auto_like_rules_reload_every_kind_of_reference(rule: str, pod_name: str) -> None:
    kind, refs = REFERENCING_PODS[pod_name]
    annotations, src_annotations, options, reason = auto_like(rule, kind)
    d = decide(view(annotations, refs=refs), source(kind, annotations=src_annotations), options)
    assert d == Decision(True, reason, "app")


@pytest.mark.parametrize("rule", list(AUTO_LIKE))
@pytest.mark.parametrize("kind", [CM, SECRET])
def test_auto_like_rules_need_a_reference(rule: str, kind: SourceKind) -> None:
    annotations, src_annotations, options, _ = auto_like(rule, kind)
    refs = PodRefs(
        containers=(ContainerRefs("app", False, frozenset({"other"}), frozenset({"other"})),),
        volume_configmaps={"other": ("app",)},
        volume_secrets={"other": ("app",)},
    )
    d = decide(view(annotations, refs=refs), source(kind, annotations=src_annotations), options)
    assert d == Decision(False, Reason.NOT_REFERENCED)


@pytest.mark.parametrize("rule", list(AUTO_LIKE))
@pytest.mark.parametrize("kind", [CM, SECRET])
def test_a_reference_of_the_other_type_does_not_count(rule: str, kind: SourceKind) -> None:
    annotations, src_annotations, options, _ = auto_like(rule, kind)
    w = view(annotations, refs=uses(other(kind), "app-cfg"))
    d = decide(w, source(kind, annotations=src_annotations), options)
    assert d.reload is False


# --- search + match -------------------------------------------------------------------


@pytest.mark.parametrize("search", TRUTHY)
@pytest.mark.parametrize("match", TRUTHY)
def test_search_and_match_reload(search: str, match: str) -> None:
    w = view({SEARCH: search}, refs=uses(CM, "app-cfg"))
    d = decide(w, source(annotations={MATCH: match}), OPTS)
    assert d == Decision(True, Reason.SEARCH, "app")


@pytest.mark.parametrize(
    ("workload", "src_annotations", "reason"),
    [
        ({SEARCH: "true"}, {}, Reason.NOT_MATCHED),
        ({SEARCH: "true"}, {MATCH: "false"}, Reason.NOT_MATCHED),
        ({SEARCH: "true"}, {MATCH: "yes"}, Reason.NOT_MATCHED),
        ({SEARCH: "false"}, {MATCH: "true"}, Reason.NOT_MATCHED),
        ({SEARCH: "no"}, {MATCH: "true"}, Reason.NOT_MATCHED),
        ({}, {MATCH: "true"}, Reason.NO_ANNOTATION),
        # match belongs on the source, search on the workload
        ({MATCH: "true"}, {SEARCH: "true"}, Reason.NO_ANNOTATION),
        ({SEARCH: "true", MATCH: "true"}, {}, Reason.NOT_MATCHED),
    ],
)
def test_search_without_both_annotations_does_not_reload(
    workload: dict[str, str], src_annotations: dict[str, str], reason: Reason
) -> None:
    w = view(workload, refs=uses(CM, "app-cfg"))
    assert decide(w, source(annotations=src_annotations), OPTS) == Decision(False, reason)


@pytest.mark.parametrize("kind", [CM, SECRET])
def test_search_works_for_both_types(kind: SourceKind) -> None:
    w = view({SEARCH: "true"}, refs=uses(kind, "app-cfg"))
    assert decide(w, source(kind, annotations={MATCH: "true"}), OPTS).reason is Reason.SEARCH


# --- auto-reload-all ------------------------------------------------------------------


@pytest.mark.parametrize("kind", [CM, SECRET])
def test_auto_reload_all_reloads_referencing_workloads_without_annotations(
    kind: SourceKind,
) -> None:
    d = decide(view(refs=uses(kind, "app-cfg")), source(kind), ALL)
    assert d == Decision(True, Reason.AUTO_RELOAD_ALL, "app")


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({AUTO: "false"}, Reason.AUTO_DISABLED),
        ({AUTO: "False"}, Reason.AUTO_DISABLED),
        ({AUTO: "0"}, Reason.AUTO_DISABLED),
        ({AUTO: "no"}, Reason.AUTO_DISABLED),
        ({AUTO: "garbage"}, Reason.AUTO_DISABLED),
        ({AUTO: " "}, Reason.AUTO_DISABLED),
        ({"TYPED": "false"}, Reason.AUTO_DISABLED),
        ({"TYPED": "0"}, Reason.AUTO_DISABLED),
        ({"OTHER_TYPED": "false"}, Reason.AUTO_RELOAD_ALL),  # the other type's opt-out
        ({AUTO: ""}, Reason.AUTO_RELOAD_ALL),  # empty = not set (Go map semantics)
        ({"TYPED": ""}, Reason.AUTO_RELOAD_ALL),
        ({AUTO: "true"}, Reason.AUTO),
        ({"TYPED": "true"}, Reason.TYPED_AUTO),
        ({AUTO: "false", "TYPED": "true"}, Reason.TYPED_AUTO),
        ({AUTO: "true", "TYPED": "false"}, Reason.AUTO),
        ({CM_RELOAD: "nope", SECRET_RELOAD: "nope"}, Reason.AUTO_RELOAD_ALL),
        ({SEARCH: "true"}, Reason.AUTO_RELOAD_ALL),  # search without match falls through
        ({SEARCH: "false"}, Reason.AUTO_RELOAD_ALL),
    ],
)
@pytest.mark.parametrize("kind", [CM, SECRET])
def test_auto_reload_all_opt_out(
    kind: SourceKind, annotations: dict[str, str], expected: Reason
) -> None:
    aliases = {"TYPED": typed_auto(kind), "OTHER_TYPED": typed_auto(other(kind))}
    real = {aliases.get(k, k): v for k, v in annotations.items()}
    d = decide(view(real, refs=uses(kind, "app-cfg")), source(kind), ALL)
    assert d.reason is expected
    assert d.reload is (expected is not Reason.AUTO_DISABLED)
    assert d.container == ("app" if d.reload else None)


def test_auto_reload_all_opt_out_is_read_from_the_template_as_fallback() -> None:
    w = view({"unrelated": "x"}, template={AUTO: "false"}, refs=uses(CM, "app-cfg"))
    assert decide(w, source(), ALL) == Decision(False, Reason.AUTO_DISABLED)


def test_auto_reload_all_off_by_default() -> None:
    assert decide(view(refs=uses(CM, "app-cfg")), source(), OPTS).reload is False


# --- exclude ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "excluded"),
    [
        ("app-cfg", True),
        ("other,app-cfg", True),
        ("  other ,  app-cfg ", True),
        ("other,,app-cfg,", True),
        ("app-.*", False),  # exact names, not regexes
        ("app", False),
        ("app-cfg-2", False),
        ("", False),
        ("APP-CFG", False),
    ],
)
@pytest.mark.parametrize("kind", [CM, SECRET])
def test_exclude_lists_are_exact_trimmed_names(
    kind: SourceKind, value: str, excluded: bool
) -> None:
    w = view({exclude_key(kind): value, AUTO: "true"}, refs=uses(kind, "app-cfg"))
    d = decide(w, source(kind), OPTS)
    expected = Decision(False, Reason.EXCLUDED) if excluded else Decision(True, Reason.AUTO, "app")
    assert d == expected


@pytest.mark.parametrize("kind", [CM, SECRET])
def test_exclude_lists_are_per_type(kind: SourceKind) -> None:
    w = view({exclude_key(other(kind)): "app-cfg", AUTO: "true"}, refs=uses(kind, "app-cfg"))
    assert decide(w, source(kind), OPTS).reason is Reason.AUTO


def test_exclude_alone_makes_metadata_authoritative_and_matches_nothing() -> None:
    w = view({CM_EXCLUDE: "x"}, refs=uses(CM, "app-cfg"))
    assert decide(w, source(), OPTS) == Decision(False, Reason.NOT_MATCHED)


# --- ignore -----------------------------------------------------------------------------


@pytest.mark.parametrize("value", TRUTHY)
def test_ignore_on_the_source_beats_everything(value: str) -> None:
    w = view(
        {CM_RELOAD: "app-cfg", AUTO: "true", CM_AUTO: "true", SEARCH: "true"},
        refs=uses(CM, "app-cfg"),
    )
    src = source(annotations={IGNORE: value, MATCH: "true"})
    assert decide(w, src, ALL) == Decision(False, Reason.IGNORED)


@pytest.mark.parametrize("value", ["false", "", "no", "0", "yes"])
def test_ignore_with_a_non_true_value_has_no_effect(value: str) -> None:
    w = view({CM_RELOAD: "app-cfg"})
    assert decide(w, source(annotations={IGNORE: value}), OPTS).reason is Reason.EXPLICIT


def test_ignore_on_the_workload_has_no_effect() -> None:
    w = view({CM_RELOAD: "app-cfg", IGNORE: "true"})
    assert decide(w, source(), OPTS).reason is Reason.EXPLICIT


# --- precedence: every pair ---------------------------------------------------------------

RULES = ["ignore", "exclude", "explicit", "search", "auto", "auto-reload-all"]
WINNER = {
    "ignore": Decision(False, Reason.IGNORED),
    "exclude": Decision(False, Reason.EXCLUDED),
    "explicit": Decision(True, Reason.EXPLICIT, "app"),
    "search": Decision(True, Reason.SEARCH, "app"),
    "auto": Decision(True, Reason.AUTO, "app"),
    "auto-reload-all": Decision(True, Reason.AUTO_RELOAD_ALL, "app"),
}
PAIRS = [(a, b) for i, a in enumerate(RULES) for b in RULES[i + 1:]]


def arrange(rules: set[str]) -> tuple[WorkloadView, SourceMeta, PolicyOptions]:
    annotations: dict[str, str] = {}
    src_annotations: dict[str, str] = {}
    if "ignore" in rules:
        src_annotations[IGNORE] = "true"
    if "exclude" in rules:
        annotations[CM_EXCLUDE] = "app-cfg"
    if "explicit" in rules:
        annotations[CM_RELOAD] = "app-.*"
    if "search" in rules:
        annotations[SEARCH] = "true"
        src_annotations[MATCH] = "true"
    if "auto" in rules:
        annotations[AUTO] = "true"
    options = ALL if "auto-reload-all" in rules else OPTS
    w = view(annotations, refs=uses(CM, "app-cfg"))
    return w, source(annotations=src_annotations), options


@pytest.mark.parametrize("rule", RULES)
def test_each_rule_alone(rule: str) -> None:
    assert decide(*arrange({rule})) == WINNER[rule]


@pytest.mark.parametrize(("stronger", "weaker"), PAIRS)
def test_precedence_pair(stronger: str, weaker: str) -> None:
    assert decide(*arrange({stronger, weaker})) == WINNER[stronger]


def test_all_rules_together_ignore_wins() -> None:
    assert decide(*arrange(set(RULES))) == WINNER["ignore"]


@pytest.mark.parametrize("weaker", RULES[1:])
def test_other_namespace_beats_every_rule(weaker: str) -> None:
    w, src, options = arrange({weaker})
    other_ns = src.replace(ref=SourceRef(CM, "elsewhere", "app-cfg"))
    assert decide(w, other_ns, options) == Decision(False, Reason.OTHER_NAMESPACE)


def test_explicit_beats_auto_even_without_a_reference() -> None:
    w = view({CM_RELOAD: "app-cfg", AUTO: "true"})
    assert decide(w, source(), OPTS) == Decision(True, Reason.EXPLICIT, "app")


def test_search_beats_auto_opt_out_under_auto_reload_all() -> None:
    w = view({SEARCH: "true", AUTO: "false"}, refs=uses(CM, "app-cfg"))
    assert decide(w, source(annotations={MATCH: "true"}), ALL).reason is Reason.SEARCH


def test_explicit_beats_auto_opt_out_under_auto_reload_all() -> None:
    w = view({CM_RELOAD: "app-cfg", AUTO: "false"})
    assert decide(w, source(), ALL).reason is Reason.EXPLICIT


# --- annotation fallback: metadata, else template, never a merge ----------------------------


@pytest.mark.parametrize("key", relevant_keys(K))
def test_any_relevant_metadata_key_hides_the_template(key: str) -> None:
    w = view({key: "something"}, template={CM_RELOAD: "app-cfg", AUTO: "true"})
    assert effective_annotations(w, K) == {key: "something"}


@pytest.mark.parametrize("key", relevant_keys(K))
def test_a_relevant_key_with_an_empty_value_still_counts(key: str) -> None:
    w = view({key: ""}, template={CM_RELOAD: "app-cfg"})
    assert effective_annotations(w, K) == {key: ""}


@pytest.mark.parametrize(
    "metadata",
    [
        {},
        {"deployment.kubernetes.io/revision": "2"},
        {IGNORE: "true", MATCH: "true"},  # source-side keys are not workload keys
        {K.pause_period: "10s", K.rollout_strategy: "restart", K.sink: "git"},
    ],
)
def test_without_relevant_metadata_keys_the_template_is_read(metadata: dict[str, str]) -> None:
    w = view(metadata, template={CM_RELOAD: "app-cfg"})
    assert effective_annotations(w, K) == {CM_RELOAD: "app-cfg"}
    assert decide(w, source(), OPTS) == Decision(True, Reason.EXPLICIT, "app")


@pytest.mark.parametrize(
    ("metadata", "template", "reason"),
    [
        # metadata list for another source hides a template list that would match
        ({CM_RELOAD: "other"}, {CM_RELOAD: "app-cfg"}, Reason.NOT_MATCHED),
        # metadata secret list hides template configmap list (not a merge, not per type)
        ({SECRET_RELOAD: "x"}, {CM_RELOAD: "app-cfg"}, Reason.NOT_MATCHED),
        ({AUTO: "false"}, {AUTO: "true"}, Reason.NOT_MATCHED),
        ({CM_EXCLUDE: "x"}, {CM_RELOAD: "app-cfg"}, Reason.NOT_MATCHED),
        ({AUTO: "true"}, {CM_EXCLUDE: "app-cfg"}, Reason.AUTO),  # template exclude ignored
        ({SEARCH: "false"}, {SEARCH: "true"}, Reason.NOT_MATCHED),
        ({}, {AUTO: "true"}, Reason.AUTO),
        ({}, {CM_EXCLUDE: "app-cfg", AUTO: "true"}, Reason.EXCLUDED),
        ({}, {SEARCH: "true"}, Reason.SEARCH),
        ({}, {CM_AUTO: "true"}, Reason.TYPED_AUTO),
    ],
)
def test_fallback_is_not_a_merge(
    metadata: dict[str, str], template: dict[str, str], reason: Reason
) -> None:
    w = view(metadata, template=template, refs=uses(CM, "app-cfg"))
    assert decide(w, source(annotations={MATCH: "true"}), OPTS).reason is reason


# --- container choice ---------------------------------------------------------------------


def c(name: str, *, init: bool = False, cms: tuple[str, ...] = (), secrets: tuple[str, ...] = ()
      ) -> ContainerRefs:
    return ContainerRefs(name, init, frozenset(cms), frozenset(secrets))


@pytest.mark.parametrize(
    ("refs", "expected"),
    [
        # env/envFrom in the second container
        (PodRefs(containers=(c("a"), c("b", cms=("x",)))), "b"),
        # first of several users
        (PodRefs(containers=(c("a"), c("b", cms=("x",)), c("c", cms=("x",)))), "b"),
        # only an init container uses it: first regular container
        (PodRefs(containers=(c("a"), c("b"), c("init", init=True, cms=("x",)))), "a"),
        # volume mounted by the second container
        (PodRefs(containers=(c("a"), c("b")), volume_configmaps={"x": ("b",)}), "b"),
        # volume mounted only by an init container: first regular container
        (PodRefs(containers=(c("a"), c("b"), c("i", init=True)),
                 volume_configmaps={"x": ("i",)}), "a"),
        # a volume mount wins over an earlier env user (Stakater's order)
        (PodRefs(containers=(c("a", cms=("x",)), c("b")), volume_configmaps={"x": ("b",)}), "b"),
        # mounters are taken in container order, not tuple order
        (PodRefs(containers=(c("a"), c("b"), c("c")), volume_configmaps={"x": ("c", "b")}), "b"),
        # unmounted volume, env user exists
        (PodRefs(containers=(c("a"), c("b", cms=("x",))), volume_configmaps={"x": ()}), "b"),
        # unmounted volume only: first regular container
        (PodRefs(containers=(c("a"), c("b")), volume_configmaps={"x": ()}), "a"),
        # nobody uses it (explicit match)
        (PodRefs(containers=(c("a"), c("b"))), "a"),
        # the other type's references do not count
        (PodRefs(containers=(c("a"), c("b", secrets=("x",))), volume_secrets={"x": ("b",)}), "a"),
        # init containers listed first still lose to the first regular container
        (PodRefs(containers=(c("i", init=True, cms=("x",)), c("a"), c("b"))), "a"),
        # no regular container at all
        (PodRefs(containers=(c("i", init=True, cms=("x",)),)), None),
        (PodRefs(), None),
    ],
)
def test_choose_container(refs: PodRefs, expected: str | None) -> None:
    assert choose_container(refs, CM, "x") == expected


def test_choose_container_for_secrets_reads_secret_references() -> None:
    refs = PodRefs(containers=(c("a", cms=("x",)), c("b", secrets=("x",))),
                   volume_configmaps={"x": ("a",)})
    assert choose_container(refs, SECRET, "x") == "b"
    assert choose_container(refs, CM, "x") == "a"


def test_decide_puts_the_env_var_where_an_init_only_source_is_used() -> None:
    refs = PodRefs(containers=(c("main"), c("side"), c("init", init=True, cms=("app-cfg",))))
    assert decide(view({AUTO: "true"}, refs=refs), source(), OPTS) == Decision(
        True, Reason.AUTO, "main"
    )


def test_decide_with_no_regular_container_reloads_without_a_container() -> None:
    refs = PodRefs(containers=(c("init", init=True, cms=("app-cfg",)),))
    assert decide(view({AUTO: "true"}, refs=refs), source(), OPTS) == Decision(
        True, Reason.AUTO, None
    )
    assert decide(view({CM_RELOAD: "app-cfg"}, refs=PodRefs()), source(), OPTS) == Decision(
        True, Reason.EXPLICIT, None
    )


def test_decide_with_volume_mount_picks_the_mounting_container() -> None:
    refs = extract_refs({
        "containers": [{"name": "a"}, {"name": "b", "volumeMounts": [{"name": "conf"}]}],
        "volumes": [{"name": "conf", "configMap": {"name": "app-cfg"}}],
    })
    assert decide(view({AUTO: "true"}, refs=refs), source(), OPTS).container == "b"


# --- is_truthy, has_explicit_lists, options -----------------------------------------------


@pytest.mark.parametrize("value", TRUTHY)
def test_is_truthy_accepts_go_parsebool_true_set(value: str) -> None:
    assert is_truthy(value)


@pytest.mark.parametrize("value", [*NOT_TRUE, None])
def test_is_truthy_rejects_everything_else(value: str | None) -> None:
    assert not is_truthy(value)


def test_truthy_constant_is_exactly_go_set() -> None:
    assert frozenset(TRUTHY) == TRUTHY_VALUES


@pytest.mark.parametrize(
    ("metadata", "template", "expected"),
    [
        ({CM_RELOAD: "a"}, {}, True),
        ({SECRET_RELOAD: "a"}, {}, True),
        ({CM_RELOAD: "a,b", SECRET_RELOAD: "c"}, {}, True),
        ({CM_RELOAD: "["}, {}, True),  # invalid entries still make it explicit
        ({CM_RELOAD: ""}, {}, False),
        ({CM_RELOAD: " , "}, {}, False),
        ({AUTO: "true"}, {}, False),
        ({SEARCH: "true"}, {}, False),
        ({}, {CM_RELOAD: "a"}, True),  # fallback to the template
        ({"other": "x"}, {SECRET_RELOAD: "a"}, True),
        ({AUTO: "true"}, {CM_RELOAD: "a"}, False),  # metadata is authoritative
        ({}, {}, False),
    ],
)
def test_has_explicit_lists(
    metadata: dict[str, str], template: dict[str, str], expected: bool
) -> None:
    assert has_explicit_lists(view(metadata, template=template), K) is expected


def test_custom_annotation_keys_are_honoured() -> None:
    keys = AnnotationKeys(
        auto="example.com/auto", configmap_reload="example.com/cm", search="example.com/search",
        match="example.com/match",
    )
    options = PolicyOptions(keys=keys)
    refs = uses(CM, "app-cfg")
    assert decide(view({"example.com/cm": "app-cfg"}), source(), options).reason is Reason.EXPLICIT
    assert decide(view({"example.com/auto": "true"}, refs=refs), source(), options).reason is (
        Reason.AUTO
    )
    w = view({"example.com/search": "true"}, refs=refs)
    assert decide(w, source(annotations={"example.com/match": "true"}), options).reason is (
        Reason.SEARCH
    )
    # the default keys no longer mean anything
    assert decide(view({CM_RELOAD: "app-cfg"}), source(), options).reason is Reason.NO_ANNOTATION


def test_decision_and_inputs_are_immutable() -> None:
    d = decide(view({CM_RELOAD: "app-cfg"}), source(), OPTS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.reload = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        OPTS.auto_reload_all = True  # type: ignore[misc]


def test_reasons_are_distinct_strings() -> None:
    values = [r.value for r in Reason]
    assert len(values) == len(set(values))
    assert all(isinstance(r, str) for r in Reason)


def test_decide_is_deterministic_and_repeatable_with_cached_regexes() -> None:
    w = view({CM_RELOAD: "app-.*,["})
    first = decide(w, source(), OPTS)
    for _ in range(3):
        assert decide(w, source(), OPTS) == first
    assert first == Decision(True, Reason.EXPLICIT, "app", ("[",))
