"""The field selectors informers send: ignored namespaces and ignored Secret types."""

from __future__ import annotations

import pytest

from gitops_reloader.config import HELM_RELEASE_SECRET_TYPE, Filters, load_config
from gitops_reloader.kube.fieldselectors import escape_value, field_selector
from gitops_reloader.testing.apiserver.selectors import parse_field_selector

NO_HOME = {"HOME": "/nonexistent"}


@pytest.mark.parametrize(("filters", "secrets", "expected"), [
    (Filters(), False, ""),
    (Filters(), True, "type!=helm.sh/release.v1"),
    (Filters(ignore_secret_types=()), True, ""),
    (Filters(namespaces_to_ignore=("a", "b")), False, "metadata.namespace!=a,metadata.namespace!=b"),
    (Filters(namespaces_to_ignore=("a",), ignore_secret_types=("x/y", "helm.sh/release.v1")), True,
     "metadata.namespace!=a,type!=x/y,type!=helm.sh/release.v1"),
])
def test_field_selector(filters, secrets, expected):
    assert field_selector(filters, secrets=secrets) == expected


@pytest.mark.parametrize(("raw", "escaped"), [
    ("plain", "plain"), ("a,b", "a\\,b"), ("k=v", "k\\=v"), ("back\\slash", "back\\\\slash"),
])
def test_escape_value_round_trips_through_a_selector_parser(raw, escaped):
    assert escape_value(raw) == escaped
    (term,) = parse_field_selector(f"type!={escaped}").terms
    assert term.value == raw


@pytest.mark.parametrize(("argv", "types"), [
    ([], (HELM_RELEASE_SECRET_TYPE,)),
    (["--ignore-secret-types="], ()),
    (["--ignore-secret-types", "a/b, c"], ("a/b", "c")),
])
def test_ignore_secret_types_flag(argv, types):
    assert load_config(argv, environ=NO_HOME).filters.ignore_secret_types == types
