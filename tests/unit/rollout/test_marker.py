"""The controller's rollout marker: round trip and hostile values."""

from __future__ import annotations

import json

import pytest

from gitops_reloader.model import Source, SourceKind, SourceRef
from gitops_reloader.rollout.marker import MAX_CHANGES, Marker, change_id, marker_for, parse_marker


def test_round_trip_and_change_id() -> None:
    source = Source(SourceRef(SourceKind.SECRET, "shop", "db"), "3f2a9c81d0e4aa55" + "0" * 24)
    marker = marker_for([source], 1764120000.7)
    assert marker == Marker(1764120000, frozenset({"shop/Secret/db@3f2a9c81d0e4"}))
    assert change_id(source) == "shop/Secret/db@3f2a9c81d0e4"
    assert parse_marker(marker.encode()) == marker
    assert marker.encode() == '{"at":1764120000,"changes":["shop/Secret/db@3f2a9c81d0e4"]}'


@pytest.mark.parametrize("value", [
    None, "", "{", "[]", "null", '{"at":"1","changes":[]}', '{"at":true,"changes":[]}',
    '{"at":-1,"changes":[]}', '{"at":1,"changes":"x"}', '{"at":1,"changes":[1]}',
    '{"at":1}', json.dumps({"at": 1, "changes": ["x"] * (MAX_CHANGES + 1)}),
    json.dumps({"at": 1, "changes": ["x" * 600]}), "x" * 5000,
])
def test_malformed_is_no_marker(value: str | None) -> None:
    assert parse_marker(value) is None
