"""``gitops-reloader status``'s reading helpers: Events are tenant-reachable input, flags."""

from __future__ import annotations

import pytest

from gitops_reloader import cli
from gitops_reloader.config import load_config
from gitops_reloader.durations import parse_rfc3339
from gitops_reloader.errors import ConfigError
from gitops_reloader.model import ObjectRef
from gitops_reloader.status import _event, _scoped

OURS = {"source": {"component": "gitops-reloader"}, "reason": "ReloadHeld", "message": "held",
        "involvedObject": {"kind": "Deployment", "namespace": "ns", "name": "web"},
        "firstTimestamp": "2026-11-27T18:58:31Z"}


def test_an_event_of_ours_is_read() -> None:
    event = _event(OURS, "ReloadHeld")
    assert event is not None
    assert (event.ref, event.reason, event.at, event.message) == (
        ObjectRef("Deployment", "ns", "web"), "ReloadHeld", 1795805911.0, "held")


@pytest.mark.parametrize("change", [
    {"source": {"component": "someone-else"}, "reportingComponent": "kubectl"},
    {"firstTimestamp": "yesterday"},
    {"firstTimestamp": "2026-11-27T18:58:31Z" + "0" * 100},
    {"firstTimestamp": None, "eventTime": None, "metadata": {}},
    {"involvedObject": {"kind": "Deployment", "namespace": "ns"}},
    {"involvedObject": {}},
])
def test_an_event_not_ours_or_unreadable_is_skipped(change: dict) -> None:
    assert _event({**OURS, **change}, "ReloadHeld") is None


def test_an_event_time_falls_back_to_event_time_and_creation() -> None:
    assert parse_rfc3339("2026-11-27T18:58:31.123456Z") == pytest.approx(1795805911.123456)
    event = _event({**OURS, "firstTimestamp": None, "eventTime": "2026-11-27T18:58:32Z"}, "ReloadHeld")
    assert event is not None and event.at == 1795805912.0
    created = {"creationTimestamp": "2026-11-27T18:58:33Z"}
    event = _event({**OURS, "firstTimestamp": None, "metadata": created}, "ReloadHeld")
    assert event is not None and event.at == 1795805913.0
    assert parse_rfc3339(1795805911) is None


def test_scope_hashes_every_source_and_narrows_to_the_namespace() -> None:
    config = _scoped(load_config(["--max-concurrent-rollouts=1"]), "shop")
    assert config.behaviour.sync_after_restart and config.filters.namespaces == ("shop",)
    assert _scoped(load_config([]), None).filters.namespaces == ()
    with pytest.raises(ConfigError, match="namespace shop is not in --namespaces"):
        _scoped(load_config(["--namespaces=a,b"]), "shop")


@pytest.mark.parametrize("argv", [["-n", "a", "-A"], ["--limit", "0"], ["--limit", "x"], ["-o", "yaml"],
                                  ["--max-concurrent-rollouts=-1"]])
def test_bad_flags_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", *argv]) == 2
    assert "gitops-reloader status:" in capsys.readouterr().err


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "--help"]) == 0
    assert "usage: gitops-reloader status" in capsys.readouterr().out
    assert cli.main(["--help"]) == 0
    assert "status [-n NAMESPACE | -A]" in capsys.readouterr().out
