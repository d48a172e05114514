"""Issue 39: nothing owed is ever forgotten — the ten sequences the first version got wrong.

Each test drives the controller through an ordinary sequence on the API test server and
judges it by what the cluster shows: the pod template, the ReplicaSets (as ``kubectl get rs``),
the pods, the Events, the metrics. Holds run on a :class:`FakeClock` the test moves, so nothing
is slept; the ledger record is written by the controller as it runs.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
from git_setup import GitSetup, commits, deployment_manifest
from kubernetes.client import ApiClient, AppsV1Api
from reload_helpers import call, configmap, create, env_of, events, metric, quiet, wait_event, workload
from test_eviction import POD_SPEC, pods, record_of, statefulset  # noqa: F401 - the test kubelet fixture
from test_eviction import change as change_db_config
from test_git_sink import git_controller, git_workload
from test_one_rollout_per_sync import count_rs, replicasets, sync_image, web  # noqa: F401 - fixture
from test_reload_windows import open_window, windows_file
from test_reload_windows import rewrite as rewrite_seen

from gitops_reloader.clock import FakeClock
from gitops_reloader.hashing import configmap_hash
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.kube.events import EventRecorder
from gitops_reloader.model import ObjectRef, SourceKind
from gitops_reloader.syncs import SYNCED_ANNOTATION
from gitops_reloader.testing.apiserver import ApiServer, Fault
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for
from gitops_reloader.testing.pods import PodPlayer
from gitops_reloader.testing.replicasets import ReplicaSetPlayer

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

ENV = "STAKATER_APP_CONFIG_CONFIGMAP"
RELOAD = {"configmap.reloader.stakater.com/reload": "app-config"}
RECORD = "/api/v1/namespaces/default/configmaps/gitops-reloader-failures"


def reloaded_to(server: ApiServer, value: str, name: str = "web") -> bool:
    return env_of(workload(server, "Deployment", name)).get(ENV) == configmap_hash({"url": value}, None)


def put(api_client: ApiClient, name: str, data: dict[str, str]) -> str:
    """New data in a ConfigMap (without waiting for the controller); its new resourceVersion."""
    path = f"/api/v1/namespaces/ns/configmaps/{name}"
    current = call(api_client, "GET", path)
    current["data"] = data
    return str(call(api_client, "PUT", path, current)["metadata"]["resourceVersion"])


def advance(app, clock: FakeClock, seconds: float) -> None:  # type: ignore[no-untyped-def]
    clock.advance(seconds)
    app.controller.queue.wake()


def reasons(api_client: ApiClient, name: str) -> list[str]:
    return [e["reason"] for e in events(api_client, name)]


# --- 1, 2: what counts as a sync -------------------------------------------------------------


def test_owed_a_template_change_undone_within_the_window_is_not_a_sync(
        server: ApiServer, api_client: ApiClient, replicasets: ReplicaSetPlayer) -> None:  # noqa: F811
    """ConfigMap changed; within the coalescing window the image goes to 1.27 and back to 1.26
    (``kubectl rollout undo``, Argo CD's self-heal). The template is back to what it was, the
    old ReplicaSet runs again with its old pods: the change is still owed, and reloaded."""
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, web())
    count_rs(replicasets, 1)
    with running_controller(api_client, ["--coalesce-window=2s"]) as app:
        put(api_client, "app-config", {"url": "v1"})
        sync_image(api_client, "nginx:1.27")
        count_rs(replicasets, 2)
        sync_image(api_client, "nginx:1.26")  # undone: the first ReplicaSet is the newest again
        wait_for(lambda: reloaded_to(server, "v1"), message="the change reloaded")
        quiet(app)
        app.recorder.flush()
        count_rs(replicasets, 3)  # 1.26, 1.27, and the reload's: the pods read v1
        assert "ReloadSynced" not in reasons(api_client, "web")
        annotations = workload(server, "Deployment", "web")["metadata"].get("annotations") or {}
        assert SYNCED_ANNOTATION not in annotations
        assert metric(app, "reloads_synced_total", sink="env-vars") == 0


def test_owed_an_on_delete_statefulset_template_change_is_not_a_sync(
        api_client: ApiClient, pods: PodPlayer) -> None:  # noqa: F811
    """An OnDelete StatefulSet's template change restarts no pod: after a ConfigMap change and a
    template change, the pods are still the old ones, so the reload is written and its pods
    evicted."""
    create(api_client, configmap("db-config", {"v": "1"}))
    statefulset(api_client, pods, "db", 2)
    with running_controller(api_client, ["--eviction=on-delete", "--eviction-interval=0.1s",
                                         "--coalesce-window=1s"]) as app:
        change_db_config(api_client)
        path = "/apis/apps/v1/namespaces/ns/statefulsets/db?fieldManager=argocd-controller"
        call(api_client, "PATCH", path,
             {"spec": {"template": {"spec": {"containers": [{"name": "db", "image": "postgres:16.4"}]}}}},
             "application/strategic-merge-patch+json")
        wait_for(lambda: (r := record_of(api_client, "db")) is not None and r.left == 0, timeout=30,
                 message="every pod evicted")
        quiet(app)
        assert sorted(pods.deleted) == ["db-0", "db-1"]
        assert "ReloadSynced" not in reasons(api_client, "db")


# --- 3: holds outlive a restart ------------------------------------------------------------


def test_owed_a_change_held_by_a_window_survives_a_restart_of_a_never_reloaded_workload(
        server: ApiServer, api_client: ApiClient, tmp_path: Path) -> None:
    """A default maintenance window, a Deployment never reloaded (no hash recorded anywhere), a
    ConfigMap change held by the window, then a restart: the new instance still owes it, waits
    without announcing the wait twice, and reloads when the window opens."""
    clock = FakeClock()
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations=RELOAD))
    flags = [windows_file(tmp_path, default="early")]
    with running_controller(api_client, flags, clock=clock) as app:
        rewrite_seen(api_client, "v1", app, clock)
        wait_event(api_client, "web", "ReloadWaitingForWindow")
    assert not reloaded_to(server, "v1")
    with running_controller(api_client, flags, clock=clock) as app:
        wait_for(lambda: metric(app, "waiting_for_window") == 1, message="still waiting after the restart")
        assert env_of(workload(server, "Deployment", "web")).get(ENV) is None
        open_window(app, clock)
        wait_for(lambda: reloaded_to(server, "v1"), message="reloaded when the window opens")
        app.recorder.flush()
        waiting = [e for e in events(api_client, "web") if e["reason"] == "ReloadWaitingForWindow"]
        assert len(waiting) == 1 and waiting[0].get("count", 1) == 1  # announced once, restart or not


def test_owed_a_change_held_by_a_storm_brake_survives_a_restart_and_keeps_its_time(
        server: ApiServer, api_client: ApiClient) -> None:
    """A workload braked at one reload an hour: the second change waits; a restart forgets the
    brake's memory but not the hold — nothing is written before the hour is up, and the latest
    data is written after."""
    clock = FakeClock()
    create(api_client, configmap("app-config", {"url": "v0"}))
    braked = {**RELOAD, "gitops-reloader.io/max-reloads": "1/1h"}
    create(api_client, deployment("web", annotations=braked))
    flags = ["--source-backoff-cap=0"]
    with running_controller(api_client, flags, clock=clock) as app:
        rewrite_seen(api_client, "v1", app, clock)
        assert reloaded_to(server, "v1")
        rewrite_seen(api_client, "v2", app, clock)
        wait_event(api_client, "web", "ReloadThrottled")
    with running_controller(api_client, flags, clock=clock) as app:
        advance(app, clock, 1800)
        settle(app)
        assert reloaded_to(server, "v1")  # the brake's hour is not over: the restart let nothing through
        advance(app, clock, 1900)
        wait_for(lambda: reloaded_to(server, "v2"), message="the latest data once the hour is up")


def test_owed_a_change_inside_the_coalescing_window_survives_a_restart(
        server: ApiServer, api_client: ApiClient) -> None:
    """A change seen, its coalescing window not over, the controller stopped: the next instance
    (no --sync-after-restart, and the workload never recorded a hash) still reloads it."""
    clock = FakeClock()
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations=RELOAD))
    flags = ["--coalesce-window=30s"]
    with running_controller(api_client, flags, clock=clock) as app:
        version = put(api_client, "app-config", {"url": "v1"})
        wait_for(lambda: app.controller.seen(SourceKind.CONFIGMAP, "ns", "app-config", version),
                 message="seen")
    assert env_of(workload(server, "Deployment", "web")).get(ENV) is None
    with running_controller(api_client, flags, clock=clock) as app:
        advance(app, clock, 31)
        wait_for(lambda: reloaded_to(server, "v1"), message="reloaded by the next instance")


# --- 4: the resync repairs every source a workload reads ------------------------------------------


def test_owed_a_second_source_changed_while_down_is_repaired_by_the_resync(
        server: ApiServer, api_client: ApiClient) -> None:
    """The annotations strategy records one source in ``last-reloaded-from``; a workload reads two.
    The second changes while no controller runs: the next instance's resync repairs it."""
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, configmap("flags", {"beta": "off"}))
    create(api_client, deployment("web", annotations={"reloader.stakater.com/auto": "true"}, containers=[
        {"name": "app", "image": "nginx", "envFrom": [{"configMapRef": {"name": "app-config"}},
                                                     {"configMapRef": {"name": "flags"}}]}]))
    flags = ["--reload-strategy=annotations"]
    with running_controller(api_client, flags) as app:
        put(api_client, "app-config", {"url": "b"})
        wait_for(lambda: "app-config" in last_reloaded_from(server), message="reloaded for app-config")
        quiet(app)
    generation = int(workload(server, "Deployment", "web")["metadata"]["generation"])
    put(api_client, "flags", {"beta": "on"})  # while no controller runs
    with running_controller(api_client, [*flags, "--resync-period=200ms"]) as app:
        wait_for(lambda: '"name":"flags"' in last_reloaded_from(server), message="the resync repairs it")
        quiet(app)
        assert int(workload(server, "Deployment", "web")["metadata"]["generation"]) == generation + 1  # once


def last_reloaded_from(server: ApiServer) -> str:
    template = workload(server, "Deployment", "web")["spec"]["template"]["metadata"]
    return str((template.get("annotations") or {}).get("reloader.stakater.com/last-reloaded-from", ""))


# --- 5: Retry-After is a floor -------------------------------------------------------------------


def test_owed_retry_after_of_one_second_is_a_floor_not_a_metronome(
        server: ApiServer, api_client: ApiClient) -> None:
    """Every write answered 429 with ``Retry-After: 1``: the next try recorded after each attempt
    still backs off (1, 2, 4, 8 s, jittered by at most a fifth, never under the second asked
    for), not one a second for good. Read from the record the controller writes."""
    clock = FakeClock()
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations=RELOAD))
    with running_controller(api_client, ["--retry-max-delay=5m"], clock=clock) as app:
        server.add_fault(Fault(verb="patch", resource="deployments", status=429, retry_after=1, times=None))
        rewrite_seen(api_client, "v1", app, clock)
        seen, waits = 0, {}
        while seen < 5:
            attempts, next_try = wait_for(lambda seen=seen: (found := recorded_failure(api_client))
                                          and found[0] > seen and found, timeout=10,
                                          message=f"attempt {seen + 1} recorded")
            seen, waits[attempts] = attempts, next_try - clock.now()  # whole seconds: up to 1 s less
            advance(app, clock, next_try - clock.now() + 1.5)
        assert all(wait >= 0 for wait in waits.values()), waits  # never sooner than the second asked
        assert all(wait >= 0.8 * 2 ** (n - 1) - 1 for n, wait in waits.items()), waits  # doubled: no 1 Hz
        server.clear_faults()
        advance(app, clock, 300)
        wait_for(lambda: reloaded_to(server, "v1"), message="reloaded once the server accepts")


def recorded_failure(api_client: ApiClient) -> tuple[int, float] | None:
    """(attempts, next try) of web's failure in the record the controller wrote, if any (the
    ledger record, or the failure record that came before it)."""
    data = {}
    try:
        data = call(api_client, "GET", RECORD).get("data") or {}
    except Exception:  # 404 before the first write
        return None
    parsed = json.loads(data.get("ledger.json") or data.get("failures.json") or "{}")
    for entry in parsed.get("entries", parsed.get("failures", [])):
        failure = entry.get("fail", entry)
        if "ns/Deployment/web" in json.dumps(entry) and "attempts" in failure:
            return int(failure["attempts"]), float(failure["next"])
    return None


def test_owed_retry_after_inf_neither_stops_the_retries_nor_the_ledger_record(
        server: ApiServer, api_client: ApiClient, caplog: pytest.LogCaptureFixture) -> None:
    """A proxy answering ``Retry-After: inf``: not a valid value, so the backoff decides; the
    record of what is failing is written (no thread dies), and the reload lands when the writes
    are accepted."""
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations=RELOAD))
    with running_controller(api_client, ["--retry-max-delay=300ms"]) as app:
        server.add_fault(Fault(verb="patch", resource="deployments", status=429, retry_after="inf",
                               times=None))
        put(api_client, "app-config", {"url": "v1"})
        wait_for(lambda: "ns/Deployment/web" in record_text(api_client), timeout=15,
                 message="the failing reload recorded")
        attempts = server.request_counts().get(("patch", "deployments"), 0)
        wait_for(lambda: server.request_counts().get(("patch", "deployments"), 0) > attempts + 2,
                 message="tried again, at the backoff's pace")
        server.clear_faults()
        wait_for(lambda: reloaded_to(server, "v1"), timeout=15, message="reloaded once accepted")
        quiet(app)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR and "Overflow" in r.getMessage()]
    assert "OverflowError" not in caplog.text


# --- 6: a failed read of the record ---------------------------------------------------------------


def test_owed_a_failed_first_read_of_the_record_is_read_again_never_overwritten(
        server: ApiServer, api_client: ApiClient) -> None:
    """A failing reload recorded; the next instance's first reads of the record get 503: it reads
    it again and only then writes, so the workload it named is reloaded (no --sync-after-restart)."""
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations=RELOAD))
    flags = ["--retry-max-delay=500ms"]
    server.add_fault(Fault(verb="patch", resource="deployments", status=503, times=None))
    with running_controller(api_client, flags) as app:
        put(api_client, "app-config", {"url": "v1"})
        wait_for(lambda: "ns/Deployment/web" in record_text(api_client), timeout=15,
                 message="the failing reload recorded")
    server.add_fault(Fault(verb="get", resource="configmaps", name="gitops-reloader-failures",
                           status=503, times=3))
    with running_controller(api_client, flags) as app:
        server.clear_faults()  # the API server is back; the first reads of the record failed
        wait_for(lambda: reloaded_to(server, "v1"), timeout=30, message="the recorded reload goes through")
        quiet(app)
        assert metric(app, "failure_record_reads_total", success="false") == 3


def record_text(api_client: ApiClient) -> str:
    """The record's data as text ("" before the first write)."""
    try:
        return str(call(api_client, "GET", RECORD).get("data") or "")
    except Exception:  # 404 before the first write
        return ""


# --- 7: a failing reload held by a window is still failing --------------------------------------

EVENING = """\
windows:
  - name: evening
    schedule: "0 22 * * *"
    timeZone: UTC
    duration: 1h
"""


def test_owed_a_failing_emission_held_by_a_window_keeps_its_failure(
        server: ApiServer, api_client: ApiClient, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Failing inside its window (22:00-23:00; the clock reads 22:13), then the window closes: the
    reload is held, not "went through", and still counted as failing until it really goes through."""
    clock = FakeClock()
    path = tmp_path / "windows.yaml"
    path.write_text(EVENING + "default: evening\n")
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations=RELOAD))
    with running_controller(api_client, [f"--reload-windows-config={path}", "--retry-max-delay=2s"],
                            clock=clock) as app:
        server.add_fault(Fault(verb="patch", resource="deployments", status=503, times=None))
        caplog.set_level(logging.INFO, logger="gitops_reloader")
        rewrite_seen(api_client, "v1", app, clock)
        wait_for(lambda: metric(app, "pending_failures", sink="env-vars", reason="ServerError") == 1,
                 message="failing")
        advance(app, clock, 50 * 60)  # 23:03: the window closed
        settle(app)
        assert metric(app, "waiting_for_window") == 1
        assert metric(app, "pending_failures", sink="env-vars", reason="ServerError") == 1
        assert "emission went through after failing" not in caplog.text
        server.clear_faults()
        advance(app, clock, 23 * 3600)  # the next evening
        wait_for(lambda: reloaded_to(server, "v1"), message="reloaded in the next window")
        settle(app)
        assert metric(app, "pending_failures", sink="env-vars", reason="ServerError") == 0
        assert "emission went through after failing" in caplog.text


# --- 8: a resync check that cannot run raises no alarm ---------------------------------------------


def test_owed_a_resync_check_during_a_git_outage_raises_no_alarm(
        api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    """The git workload is up to date; the host goes down; the slow resync's checks fail: no
    ReloadFailed, no ReloadStillFailing, no failing gauge, nothing in the record — a metric."""
    git.create({"apps/web/web.yaml": deployment_manifest("web")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, git_workload("web"))
    with git_controller(api_client, git, "--resync-period=100ms", "--max-retries=3",
                        "--retry-max-delay=200ms") as (app, _):
        quiet(app)
        host.set_down(True)
        passes = metric(app, "resync_passes_total")
        wait_for(lambda: metric(app, "resync_passes_total") >= passes + 8, timeout=20,
                 message="resync passes")
        settle(app)
        app.recorder.flush()
        assert not {"ReloadFailed", "ReloadStillFailing"} & set(reasons(api_client, "web"))
        assert metric(app, "pending_failures", sink="git", reason="GitError") == 0
        assert "ns/Deployment/web" not in record_text(api_client)
        assert metric(app, "resync_checks_failed_total", sink="git") >= 1
        host.set_down(False)
        assert len(commits(host)) == 1


# --- 9: a failed Event write keeps the correlator's count ------------------------------------------


def test_owed_a_failed_event_write_keeps_counting_on_the_same_event_object(
        server: ApiServer, api_client: ApiClient) -> None:
    """A repeat whose PATCH the API server refused, then another repeat: still one Event object,
    patched — the correlator keeps its cache as client-go's does."""
    recorder = EventRecorder(KubeApi(api_client))
    web_ref = ObjectRef("Deployment", "ns", "web")
    try:
        recorder.warning(web_ref, "ReloadFailed", "git host down", uid="u1")
        recorder.flush()
        server.add_fault(Fault(verb="patch", resource="events", status=500, times=1))
        recorder.warning(web_ref, "ReloadFailed", "git host down", uid="u1")
        recorder.flush()
        recorder.warning(web_ref, "ReloadFailed", "git host down", uid="u1")
        recorder.flush()
    finally:
        recorder.close()
    found = events(api_client, "web")
    assert len(found) == 1 and found[0]["count"] == 3


def test_owed_an_event_write_that_got_no_answer_is_tried_again(
        server: ApiServer, api_client: ApiClient) -> None:
    """The API server unreachable for a moment: the Event is written once it answers again."""
    recorder = EventRecorder(KubeApi(api_client))
    recorder.retry_sleep = 0.2  # client-go sleeps 10 s between tries
    try:
        server.stop()  # the API server restarts: connections refused meanwhile
        recorder.normal(ObjectRef("Deployment", "ns", "web"), "Reloaded", "reloaded through env-vars")
        time.sleep(0.5)
        server.start()
        wait_for(lambda: events(api_client, "web"), timeout=10, message="the Event written after all")
    finally:
        recorder.close()


# --- 10: fixing an unknown window name ----------------------------------------------------------


def test_owed_fixing_an_unknown_window_name_retries_the_held_reload_at_once(
        server: ApiServer, api_client: ApiClient, tmp_path: Path) -> None:
    """A reload held because the annotation names no window goes ahead as soon as the annotation
    names an open one — not after --retry-max-delay (5 minutes)."""
    create(api_client, configmap("app-config", {"url": "v0"}))
    unknown = {**RELOAD, "gitops-reloader.io/reload-window": "weekends"}
    create(api_client, deployment("web", annotations=unknown))
    with running_controller(api_client, [windows_file(tmp_path)]) as app:
        put(api_client, "app-config", {"url": "v1"})
        wait_event(api_client, "web", "InvalidAnnotation")
        AppsV1Api(api_client).patch_namespaced_deployment(
            "web", "ns", {"metadata": {"annotations": {"gitops-reloader.io/reload-window": "always"}}})
        wait_for(lambda: reloaded_to(server, "v1"), timeout=10, message="reloaded at once")
        quiet(app)

