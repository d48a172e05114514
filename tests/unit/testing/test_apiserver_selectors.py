"""Label and field selectors of the API test server, matched like kube-apiserver."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gitops_reloader.testing.apiserver.selectors import (
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)

LABELS = {"app": "web", "tier": "front", "env": "prod", "replicas": "3"}


@pytest.mark.parametrize(
    ("selector", "selected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app=api", False),
        ("app!=api", True),
        ("app!=web", False),
        ("missing!=x", True),
        ("app in (web,api)", True),
        ("app in (api, db)", False),
        ("app notin (api)", True),
        ("app notin (web)", False),
        ("missing notin (x)", True),
        ("missing in (x)", False),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        (" app = web , env in ( prod , staging ) , !canary ", True),
        ("replicas>2", True),
        ("replicas<2", False),
        ("app>2", False),
        ("missing=", False),
    ],
)
def test_label_selector_operators(selector: str, selected: bool) -> None:
    assert parse_label_selector(selector).matches(LABELS) is selected


def test_label_selector_empty_value_matches_empty_label() -> None:
    assert parse_label_selector("flag=").matches({"flag": ""})
    assert parse_label_selector("flag in (,x)").matches({"flag": ""})


def test_label_selector_prefixed_keys() -> None:
    sel = parse_label_selector("app.kubernetes.io/name=web,!example.com/skip")
    assert sel.matches({"app.kubernetes.io/name": "web"})
    assert not sel.matches({"app.kubernetes.io/name": "web", "example.com/skip": "1"})


def test_label_selector_matches_objects_without_labels() -> None:
    assert parse_label_selector("a!=b").matches(None)
    assert not parse_label_selector("a").matches(None)


@pytest.mark.parametrize(
    "selector",
    [
        "app=web,",
        "=web",
        "app in web",
        "app in (web",
        "app in ()",
        "app=we b",
        "-bad=1",
        "app=$x",
        "Bad_Prefix/x=1",
        "a>b",
        "app web",
        "!",
        "in=1",
    ],
)
def test_invalid_label_selectors_raise(selector: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(selector)


def test_label_selector_double_equals_with_empty_value_means_empty_value() -> None:
    assert parse_label_selector("a==").matches({"a": ""})
    assert not parse_label_selector("a==").matches({"a": "x"})


def _lookup(values: dict[str, str]) -> Callable[[str], str]:
    return lambda field: values.get(field, "")


@pytest.mark.parametrize(
    ("selector", "selected"),
    [
        ("", True),
        ("metadata.name=web", True),
        ("metadata.name==web", True),
        ("metadata.name!=web", False),
        ("metadata.name=web,metadata.namespace=default", True),
        ("metadata.name=web,metadata.namespace!=default", False),
        ("metadata.namespace=other", False),
        ("type=a\\,b", False),
        ("type=x\\=y", True),
    ],
)
def test_field_selector_terms(selector: str, selected: bool) -> None:
    values = {"metadata.name": "web", "metadata.namespace": "default", "type": "x=y"}
    assert parse_field_selector(selector).matches(_lookup(values)) is selected


def test_field_selector_reports_fields() -> None:
    assert parse_field_selector("metadata.name=a,type!=b").fields == {"metadata.name", "type"}


@pytest.mark.parametrize("selector", ["metadata.name", "=x", "a=b=c", "a=b\\q"])
def test_invalid_field_selectors_raise(selector: str) -> None:
    with pytest.raises(SelectorError):
        parse_field_selector(selector)
