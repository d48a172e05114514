"""Issue 10 items 1 and 2, end to end: a tenant's patterns cannot stall the controller.

An attacker namespace holds a workload whose reload list is the catastrophic ``(a+)+$``
(plus an RE2-invalid backreference), a workload whose reload list is over the size cap, and
a ConfigMap named ``aaa…ab`` (253 characters, the longest legal name). While its change is
evaluated, a heartbeat thread must never be held off for more than 100 ms (Python's ``re``
held the GIL for 2^252 steps); the attacker's workloads get Warning Events naming the bad
entry or annotation; another namespace's change is reloaded as usual. A third workload
carries 16 KB of ``a-a-…`` (quadratic for the old log-redaction regexes) and goes through
the production log pipeline: refused with a Warning, every log line stays short.
"""

from __future__ import annotations

import io
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from reload_helpers import configmap, create, env_of, set_cm_data, workload

from gitops_reloader.observability.logging import MAX_FIELD_CHARS, configure_logging
from gitops_reloader.policy import MAX_LIST_ENTRIES
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for

pytestmark = pytest.mark.e2e

RELOAD = "configmap.reloader.stakater.com/reload"
ATTACK_NAME = "a" * 252 + "b"
HEARTBEAT_LIMIT = 0.1


class Heartbeat:
    """A thread that ticks every 5 ms and records the longest gap between two ticks."""

    def __init__(self) -> None:
        self.longest = 0.0
        self.ticks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.wait(0.005):
            now = time.perf_counter()
            self.longest = max(self.longest, now - last)
            self.ticks += 1
            last = now

    @contextmanager
    def running(self) -> Iterator[Heartbeat]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """The production log pipeline (redaction filter, JSON lines) into a buffer; restored after."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    out = io.StringIO()
    configure_logging(fmt="json", stream=out)
    yield out
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def warnings(core, namespace: str, name: str) -> dict[str, str]:
    """Warning Events on Deployment ``name``: reason → message."""
    return {e.reason: e.message for e in core.list_namespaced_event(namespace).items
            if e.type == "Warning" and e.involved_object.name == name}


def test_a_catastrophic_pattern_does_not_stall_the_controller(server, api_client, core, log_output):
    oversized = ",".join(f"cfg-{i}" for i in range(MAX_LIST_ENTRIES + 1))
    hostile = "a-" * 8000 + "(,["  # 16 KB: quadratic for the old redaction regexes
    create(api_client, configmap(ATTACK_NAME, {"v": "1"}, namespace="attacker"))
    create(api_client, deployment("evil", namespace="attacker",
                                  annotations={RELOAD: r"(a+)+$,(a)\1,((a+)+)+c"}))
    create(api_client, deployment("evil-big", namespace="attacker",
                                  annotations={RELOAD: oversized + "," + ATTACK_NAME}))
    create(api_client, deployment("evil-log", namespace="attacker",
                                  annotations={RELOAD: hostile,
                                               "configmap.reloader.stakater.com/auto": "a-" * 8000}))
    create(api_client, configmap("app-cfg", {"v": "1"}, namespace="victim"))
    create(api_client, deployment("web", namespace="victim", annotations={RELOAD: "app-cfg"}))
    with Heartbeat().running() as beat, \
            running_controller(api_client, ["--sync-after-restart"]) as app:
        set_cm_data(app, api_client, ATTACK_NAME, {"v": "2"}, namespace="attacker")
        set_cm_data(app, api_client, "app-cfg", {"v": "2"}, namespace="victim")
        wait_for(lambda: env_of(workload(server, "Deployment", "web", "victim")),
                 message="the victim's workload reloaded")
        settle(app)
        app.recorder.flush()
    assert beat.ticks > 0
    assert beat.longest < HEARTBEAT_LIMIT, f"heartbeat held off for {beat.longest * 1000:.0f} ms"
    assert "unexpected error" not in log_output.getvalue()  # every record survived redaction
    evil = wait_for(lambda: warnings(core, "attacker", "evil"), message="evil's Warning")
    assert set(evil) == {"InvalidAnnotation"}
    assert r"'(a)\\1'" in evil["InvalidAnnotation"]  # the RE2-invalid entry, by repr
    assert "(a+)+$" not in evil["InvalidAnnotation"]  # valid RE2: evaluated, not reported
    big = wait_for(lambda: warnings(core, "attacker", "evil-big"), message="evil-big's Warning")
    assert set(big) == {"AnnotationTooLarge"}
    assert RELOAD in big["AnnotationTooLarge"]
    assert set(wait_for(lambda: warnings(core, "attacker", "evil-log"))) == {"AnnotationTooLarge"}
    lines = log_output.getvalue().splitlines()
    assert any("AnnotationTooLarge" in line for line in lines)
    assert max(len(line) for line in lines) < 3 * MAX_FIELD_CHARS
    # neither matched: the pattern does not match "aaa…ab", the oversized list is ignored
    assert not env_of(workload(server, "Deployment", "evil", "attacker"))
    assert not env_of(workload(server, "Deployment", "evil-big", "attacker"))
