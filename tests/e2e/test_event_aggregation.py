"""Issue 31: Events as the cluster expects them, written by the EventRecorder to the API test server.

A repeat of the same object, reason and message is a PATCH of one Event (``count`` grows,
``lastTimestamp`` moves, ``firstTimestamp`` and name stay); ten distinct messages of one
reason within ten minutes become one ``(combined from similar events)`` object; past the
per-object burst nothing is written. Messages read as the logs do: one redaction.
"""

from __future__ import annotations

import io
import logging

import pytest
from kubernetes.client import ApiClient
from reload_helpers import events

from gitops_reloader.clock import FakeClock
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.eventcorrelator import AGGREGATE_PREFIX
from gitops_reloader.kube.events import EventRecorder
from gitops_reloader.model import ObjectRef
from gitops_reloader.observability.logging import configure_logging
from gitops_reloader.testing.apiserver import ApiServer

pytestmark = pytest.mark.e2e

WEB = ObjectRef("Deployment", "ns", "web")


def test_event_aggregation_ten_minutes_of_failures_leave_two_event_objects(
        server: ApiServer, api_client: ApiClient) -> None:
    """One workload failing for ten minutes at the controller's backoff (1 s doubling to the
    5-minute cap): ReloadFailed at every attempt, ReloadStillFailing once at the 12th. Two Event
    objects, the first's count equal to the attempts, its lastTimestamp moved."""
    clock = FakeClock()
    recorder = EventRecorder(KubeApi(api_client), clock=clock)
    try:
        delay, elapsed, attempts = 1.0, 0.0, 0
        while elapsed < 600:
            attempts += 1
            recorder.warning(WEB, "ReloadFailed", "reload failed, still pending: git host down", uid="u1")
            if attempts == 12:
                recorder.warning(WEB, "ReloadStillFailing", "still failing after 12 attempts", uid="u1")
            recorder.flush()
            clock.advance(delay)
            elapsed += delay
            delay = min(delay * 2, 300.0)
    finally:
        recorder.close()
    found = events(api_client, "web")
    assert sorted(e["reason"] for e in found) == ["ReloadFailed"]  # attempts < 12 in 10 minutes
    [failed] = found
    assert failed["count"] == attempts == 10
    assert failed["lastTimestamp"] > failed["firstTimestamp"]
    creates = server.request_counts().get(("create", "events"), 0)
    patches = server.request_counts().get(("patch", "events"), 0)
    assert (creates, patches) == (1, attempts - 1)


def test_event_aggregation_distinct_messages_of_one_reason_are_combined_and_bounded(
        server: ApiServer, api_client: ApiClient) -> None:
    clock = FakeClock()
    recorder = EventRecorder(KubeApi(api_client), clock=clock)
    try:
        for attempt in range(100):  # a message that changes every time (an attempt number)
            recorder.warning(WEB, "ReloadFailed", f"attempt {attempt} failed", uid="u1")
            clock.advance(2)
        recorder.flush()
    finally:
        recorder.close()
    found = events(api_client, "web")
    assert len(found) == 10  # nine single ones, then one aggregate
    [combined] = [e for e in found if e["message"].startswith(AGGREGATE_PREFIX)]
    assert combined["count"] == 25 - 9  # the per-object burst of 25, then filtered
    assert server.request_counts().get(("create", "events"), 0) == 10


def test_event_aggregation_messages_read_as_the_logs_do(server: ApiServer, api_client: ApiClient) -> None:
    """The same redaction everywhere: a URL with credentials reads the same in the Event and
    in the log line; an ssh user (never a secret) stays readable in both."""
    text = ("git push to https://bot:s3cr3t-token@git.example/org/app.git failed; "
            "mirror ssh://git@git.example/org/app.git")
    stream = io.StringIO()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    configure_logging(fmt="text", level="info", stream=stream)
    try:
        logging.getLogger("test").warning(text)
        recorder = EventRecorder(KubeApi(api_client))
        recorder.warning(WEB, "ReloadFailed", text, uid="u1")
        recorder.flush()
        recorder.close()
    finally:  # give pytest its handlers back
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
    [event] = events(api_client, "web")
    assert "s3cr3t-token" not in event["message"] and "s3cr3t-token" not in stream.getvalue()
    assert event["message"] in stream.getvalue()
    assert "https://***@git.example/org/app.git" in event["message"]
    assert "ssh://git@git.example/org/app.git" in event["message"]
