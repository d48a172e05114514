"""Property tests (hypothesis) over the tenant-facing annotation parsers and the policy.

Fixed seed (``derandomize``), no example database and a bounded number of examples, so
the run is reproducible and the whole file stays well under a minute. Inputs are built
from alphabets rich in what breaks parsers (regex metacharacters, commas, blanks,
newlines, quotes, non-ASCII), not only from random text.
"""

from __future__ import annotations

import posixpath
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_reloader.config import AnnotationKeys
from gitops_reloader.durations import MAX_CHARS as MAX_DURATION_CHARS
from gitops_reloader.durations import parse_duration
from gitops_reloader.errors import AnnotationError
from gitops_reloader.gitops.locate import MAX_ORIGIN_CHARS, parse_git_target, parse_origin_path
from gitops_reloader.model import (
    ContainerRefs,
    ObjectRef,
    PodRefs,
    SinkName,
    SourceKind,
    SourceMeta,
    SourceRef,
)
from gitops_reloader.policy import (
    MAX_LIST_BYTES,
    MAX_LIST_ENTRIES,
    TRUTHY_VALUES,
    Decision,
    PolicyOptions,
    Reason,
    WorkloadView,
    decide,
    has_explicit_lists,
    is_truthy,
    relevant_keys,
)

FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=150)

K = AnnotationKeys()
RELOADS = frozenset({Reason.EXPLICIT, Reason.SEARCH, Reason.AUTO, Reason.TYPED_AUTO,
                     Reason.AUTO_RELOAD_ALL})

# Object names: DNS-1123 subdomains up to 253 characters, biased to runs of one letter.
names = st.one_of(
    st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,40}[a-z0-9])?", fullmatch=True),
    st.integers(1, 252).map(lambda n: "a" * n + "b"),
)
# Pattern text: regex syntax, commas and blanks, plus anything else.
PATTERN_ALPHABET = "ab.-*+?()[]{}|^$\\,: \t\n0123456789?=!<>PLpd"
pattern_text = st.one_of(
    st.text(alphabet=PATTERN_ALPHABET, max_size=60),
    st.text(max_size=30),
    st.lists(names, max_size=5).map(",".join),
)
booleans = st.one_of(st.sampled_from(sorted(TRUTHY_VALUES)), st.text(max_size=8))
annotation_maps = st.dictionaries(
    st.sampled_from((*relevant_keys(K), K.match, K.ignore, "unrelated/key")),
    st.one_of(pattern_text, booleans), max_size=6,
)
kinds = st.sampled_from([SourceKind.CONFIGMAP, SourceKind.SECRET])


def pod(kind: SourceKind, names_used: frozenset[str]) -> PodRefs:
    used = ContainerRefs("app", False,
                         configmaps=names_used if kind is SourceKind.CONFIGMAP else frozenset(),
                         secrets=names_used if kind is SourceKind.SECRET else frozenset())
    return PodRefs(containers=(used,))


@st.composite
def cases(draw: st.DrawFn) -> tuple[WorkloadView, SourceMeta, PolicyOptions]:
    kind = draw(kinds)
    name = draw(names)
    referenced = draw(st.booleans())
    view = WorkloadView(
        ref=ObjectRef("Deployment", "ns", "web"),
        annotations=draw(annotation_maps),
        template_annotations=draw(annotation_maps),
        refs=pod(kind, frozenset({name}) if referenced else frozenset()),
    )
    source = SourceMeta(SourceRef(kind, draw(st.sampled_from(["ns", "other"])), name), "0" * 40,
                        annotations=draw(annotation_maps))
    return view, source, PolicyOptions(keys=K, auto_reload_all=draw(st.booleans()))


def reload_key(kind: SourceKind) -> str:
    return K.configmap_reload if kind is SourceKind.CONFIGMAP else K.secret_reload


def exclude_key(kind: SourceKind) -> str:
    return K.configmaps_exclude if kind is SourceKind.CONFIGMAP else K.secrets_exclude


@FUZZ
@given(cases())
def test_decide_never_fails_and_is_deterministic(
    case: tuple[WorkloadView, SourceMeta, PolicyOptions],
) -> None:
    view, source, options = case
    first = decide(view, source, options)
    assert decide(view, source, options) == first
    assert first.reload is (first.reason in RELOADS)
    assert first.container is None or first.reload
    key = reload_key(source.ref.kind)
    listed = {e.strip() for a in (view.annotations, view.template_annotations)
              for e in a.get(key, "").split(",")}
    assert set(first.invalid_patterns) <= listed
    assert set(first.oversized) <= {key, exclude_key(source.ref.kind)}


@FUZZ
@given(cases())
def test_another_namespace_never_reloads(case: tuple[WorkloadView, SourceMeta, PolicyOptions]) -> None:
    view, source, options = case
    moved = SourceMeta(SourceRef(source.ref.kind, "elsewhere", source.ref.name), source.hash,
                       annotations=source.annotations)
    assert decide(view, moved, options) == Decision(False, Reason.OTHER_NAMESPACE)


@FUZZ
@given(cases(), st.sampled_from(sorted(TRUTHY_VALUES)))
def test_ignore_always_wins(case: tuple[WorkloadView, SourceMeta, PolicyOptions], truthy: str) -> None:
    view, source, options = case
    ignored = SourceMeta(SourceRef(source.ref.kind, "ns", source.ref.name), source.hash,
                         annotations={**source.annotations, K.ignore: truthy})
    same_ns = WorkloadView(view.ref, view.annotations, view.template_annotations, view.refs)
    assert decide(same_ns, ignored, options) == Decision(False, Reason.IGNORED)


@FUZZ
@given(kinds, names, st.lists(names, max_size=5), pattern_text, st.booleans())
def test_exclude_beats_explicit_and_auto(
    kind: SourceKind, name: str, others: list[str], extra_patterns: str, auto: bool
) -> None:
    annotations = {exclude_key(kind): ",".join([*others, f" {name} "]),
                   reload_key(kind): f".*,{extra_patterns}", K.auto: "true" if auto else ""}
    view = WorkloadView(ObjectRef("Deployment", "ns", "web"), annotations, {},
                        pod(kind, frozenset({name})))
    source = SourceMeta(SourceRef(kind, "ns", name), "0" * 40, {})
    assert decide(view, source, PolicyOptions(keys=K, auto_reload_all=True)) == Decision(
        False, Reason.EXCLUDED)


@FUZZ
@given(kinds, names, st.lists(names, max_size=5))
def test_a_listed_escaped_name_reloads_explicitly(kind: SourceKind, name: str, others: list[str]) -> None:
    escaped = name.replace(".", r"\.")
    view = WorkloadView(ObjectRef("Deployment", "ns", "web"),
                        {reload_key(kind): ",".join([*others, escaped])}, {}, PodRefs())
    source = SourceMeta(SourceRef(kind, "ns", name), "0" * 40, {})
    assert decide(view, source, PolicyOptions(keys=K)).reason is Reason.EXPLICIT
    assert has_explicit_lists(view, K)


@FUZZ
@given(kinds, st.integers(MAX_LIST_ENTRIES + 1, 200), st.integers(0, 2 * MAX_LIST_BYTES))
def test_an_oversized_list_matches_nothing_and_is_reported(kind: SourceKind, count: int, pad: int) -> None:
    value = ",".join(["web-cfg"] * count) + " " * pad
    view = WorkloadView(ObjectRef("Deployment", "ns", "web"), {reload_key(kind): value}, {}, PodRefs())
    decision = decide(view, SourceMeta(SourceRef(kind, "ns", "web-cfg"), "0" * 40, {}),
                      PolicyOptions(keys=K))
    assert decision == Decision(False, Reason.NOT_MATCHED, None, (), (reload_key(kind),))


@FUZZ
@given(st.text(alphabet=PATTERN_ALPHABET, min_size=1, max_size=120))
def test_any_pattern_on_a_253_char_name_is_fast(pattern: str) -> None:
    view = WorkloadView(ObjectRef("Deployment", "ns", "web"), {K.configmap_reload: pattern}, {},
                        PodRefs())
    source = SourceMeta(SourceRef(SourceKind.CONFIGMAP, "ns", "a" * 252 + "b"), "0" * 40, {})
    decide(view, source, PolicyOptions(keys=K))  # compiles (cached)
    start = time.perf_counter()
    decide(view, source, PolicyOptions(keys=K))
    assert time.perf_counter() - start < 0.05


@FUZZ
@given(booleans)
def test_is_truthy_is_exactly_go_parsebool_true(value: str) -> None:
    assert is_truthy(value) is (value in {"1", "t", "T", "true", "TRUE", "True"})


@FUZZ
@given(st.one_of(st.sampled_from([f"{pad}{s}{pad}" for s in SinkName for pad in ("", " ", "\t")]),
                 st.text(alphabet="-abcdegiklnoprstuvw \t\n", max_size=14), st.text(max_size=14)))
def test_sink_names_are_exact_after_trimming(value: str) -> None:
    sink = SinkName.from_annotation(value)
    assert sink is (SinkName(value.strip()) if value.strip() in {s.value for s in SinkName} else None)


@FUZZ
@given(st.one_of(st.text(alphabet="0123456789.+-hmsuµn ", max_size=24), st.text(max_size=24)))
def test_durations_parse_or_raise_value_error(text: str) -> None:
    try:
        seconds = parse_duration(text)
    except ValueError:
        return
    assert seconds >= 0


@pytest.mark.parametrize("text", ["1" * 20000, "9" * 5000 + "." + "9" * 5000])
def test_a_long_duration_is_refused_before_parsing(text: str) -> None:
    # durationpy took 11 s on 20,000 digits (its regex backtracks); refused up front now.
    start = time.perf_counter()
    with pytest.raises(ValueError, match=f"longer than {MAX_DURATION_CHARS}"):
        parse_duration(text)
    assert time.perf_counter() - start < 0.1


@FUZZ
@given(st.one_of(st.text(alphabet="ab./#[]'\"\\ 0-9\n", max_size=60), st.text(max_size=40)))
def test_git_target_parses_inside_the_repository_or_raises_annotation_error(value: str) -> None:
    try:
        path, yaml_path = parse_git_target(value)
    except AnnotationError:
        return
    assert path and not path.startswith("/")
    assert posixpath.normpath(path) == path and not path.startswith("..")
    assert all(isinstance(step, str | int) for step in yaml_path)


@FUZZ
@given(st.one_of(st.text(alphabet="pathrepo: \t\n'\"ab/.", max_size=80), st.text(max_size=40)))
def test_origin_path_is_none_or_one_trimmed_line(value: str) -> None:
    path = parse_origin_path(value)
    assert path is None or ("\n" not in path and (path == path.strip() or path[0] in "'\""))


@FUZZ
@given(st.integers(MAX_ORIGIN_CHARS - 20, 4 * MAX_ORIGIN_CHARS))
def test_origin_values_over_the_cap_are_absent(size: int) -> None:
    value = ("path: web.yaml\n" + " " * size)[:size]
    assert parse_origin_path(value) == (None if len(value) > MAX_ORIGIN_CHARS else "web.yaml")
