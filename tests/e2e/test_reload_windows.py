"""Maintenance windows (issue 32, in part): a change outside the workload's window waits, many
changes while it waits make one reload of the latest data when the window opens, waiting
survives a restart, and the git sink commits when the window opens.

The controller runs on a :class:`FakeClock` (wall time 2023-11-14 22:13:20 UTC, a Tuesday);
the test moves it to the window's opening and wakes the work queue, so nothing is slept.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from git_setup import GitSetup, commits, deployment_manifest
from kubernetes.client import ApiClient
from reload_helpers import call, configmap, create, env_of, events, metric, quiet, workload
from test_git_sink import git_controller, git_workload

from gitops_reloader import cli
from gitops_reloader.clock import FakeClock
from gitops_reloader.hashing import configmap_hash
from gitops_reloader.model import SourceKind
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

ENV = "STAKATER_APP_CONFIG_CONFIGMAP"
RELOAD = {"configmap.reloader.stakater.com/reload": "app-config"}
WINDOWS = """\
windows:
  - name: early
    schedule: "0 6 * * *"
    timeZone: UTC
    duration: 1h
  - name: always
    schedule: "* * * * *"
    timeZone: UTC
    duration: 2m
"""
OPENS = 1_700_028_000.0  # 2023-11-15 06:00 UTC, the "early" window's next opening


def windows_file(tmp_path: Path, default: str = "") -> str:
    path = tmp_path / "windows.yaml"
    path.write_text(WINDOWS + (f"default: {default}\n" if default else ""))
    return f"--reload-windows-config={path}"


def rewrite(api_client: ApiClient, value: str, app=None, clock=None) -> None:  # type: ignore[no-untyped-def]
    """New data in app-config; with ``app``, once the controller has seen it and is idle (with
    ``clock``, moved past the coalescing window, which runs on it too)."""
    path = "/api/v1/namespaces/ns/configmaps/app-config"
    current = call(api_client, "GET", path)
    current["data"] = {"url": value}
    version = call(api_client, "PUT", path, current)["metadata"]["resourceVersion"]
    if app is not None:
        wait_for(lambda: app.controller.seen(SourceKind.CONFIGMAP, "ns", "app-config", version),
                 message="the controller sees the change")
        if clock is not None:
            clock.advance(5)
            app.controller.queue.wake()
        settle(app)


def reasons(api_client: ApiClient, name: str) -> list[str]:
    return [e["reason"] for e in events(api_client, name)]


def open_window(app, clock: FakeClock) -> None:  # type: ignore[no-untyped-def]
    clock.advance(OPENS - clock.now() + 1)
    app.controller.queue.wake()


def test_reload_window_many_changes_while_closed_make_one_reload_of_the_latest_data_at_open(
        server: ApiServer, api_client: ApiClient, tmp_path: Path) -> None:
    clock = FakeClock()
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations={"configmap.reloader.stakater.com/reload": "app-config",
                                                      "gitops-reloader.io/reload-window": "early"}))
    create(api_client, deployment("free", annotations={"configmap.reloader.stakater.com/reload": "app-config",
                                                       "gitops-reloader.io/reload-window": "none"}))
    with running_controller(api_client, [windows_file(tmp_path, default="early")], clock=clock) as app:
        for i in (1, 2, 3):
            rewrite(api_client, f"v{i}", app)
        app.recorder.flush()
        assert env_of(workload(server, "Deployment", "web")).get(ENV) is None  # nothing restarted
        assert env_of(workload(server, "Deployment", "free")).get(ENV) == configmap_hash({"url": "v3"}, None)
        waiting = [e for e in events(api_client, "web") if e["reason"] == "ReloadWaitingForWindow"]
        assert len(waiting) == 1 and waiting[0]["type"] == "Normal"
        assert "waiting for window early, opens at 2023-11-15 06:00 (UTC)" in waiting[0]["message"]
        assert metric(app, "waiting_for_window") == 1
        open_window(app, clock)
        latest = configmap_hash({"url": "v3"}, None)
        wait_for(lambda: env_of(workload(server, "Deployment", "web")).get(ENV) == latest,
                 message="one reload, of the latest data, when the window opens")
        quiet(app)
        app.recorder.flush()
        assert int(workload(server, "Deployment", "web")["metadata"]["generation"]) == 2  # one write
        assert "ReloadWindowOpen" in reasons(api_client, "web")
        assert metric(app, "waiting_for_window") == 0


def test_reload_window_waiting_survives_a_restart(
        server: ApiServer, api_client: ApiClient, tmp_path: Path) -> None:
    clock = FakeClock()
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations=RELOAD))
    flags = [windows_file(tmp_path, default="always"), "--sync-after-restart=true"]
    with running_controller(api_client, flags, clock=clock) as app:
        rewrite(api_client, "v1", app)  # inside the "always" window: reloaded, the hash recorded
        assert env_of(workload(server, "Deployment", "web")).get(ENV) == configmap_hash({"url": "v1"}, None)
    flags[0] = windows_file(tmp_path, default="early")
    with running_controller(api_client, flags, clock=clock) as app:
        rewrite(api_client, "v2", app)
        assert metric(app, "waiting_for_window") == 1
    # A new replica (the old one's memory gone) finds web out of date and waits again.
    with running_controller(api_client, flags, clock=clock) as app:
        wait_for(lambda: metric(app, "waiting_for_window") == 1, message="waiting again after the restart")
        assert env_of(workload(server, "Deployment", "web")).get(ENV) == configmap_hash({"url": "v1"}, None)
        open_window(app, clock)
        latest = configmap_hash({"url": "v2"}, None)
        wait_for(lambda: env_of(workload(server, "Deployment", "web")).get(ENV) == latest,
                 message="applied when the window opens")


def test_reload_window_git_sink_commits_when_the_window_opens(
        api_client: ApiClient, git: GitSetup, host: GitHostServer, tmp_path: Path) -> None:
    clock = FakeClock()
    git.create({"apps/web/web.yaml": deployment_manifest("web")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, git_workload("web", annotations={"gitops-reloader.io/reload-window": "early"}))
    with git_controller(api_client, git, windows_file(tmp_path), clock=clock) as (app, _):
        for i in (1, 2):
            rewrite(api_client, f"v{i}", app, clock)
        assert metric(app, "waiting_for_window") == 1
        assert len(commits(host)) == 1  # nothing committed outside the window
        open_window(app, clock)
        wait_for(lambda: len(commits(host)) == 2, message="one commit when the window opens")
        quiet(app)
        assert len(commits(host)) == 2


def test_reload_window_unknown_name_holds_the_reload_with_a_warning(
        server: ApiServer, api_client: ApiClient, tmp_path: Path) -> None:
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations={"configmap.reloader.stakater.com/reload": "app-config",
                                                      "gitops-reloader.io/reload-window": "weekends"}))
    with running_controller(api_client, [windows_file(tmp_path)]) as app:
        rewrite(api_client, "v1")
        invalid = "InvalidAnnotation"
        warning = wait_for(lambda: [e for e in events(api_client, "web") if e["reason"] == invalid],
                           message="a warning")[0]
        assert "no reload window named 'weekends' (known: always, early)" in warning["message"]
        assert env_of(workload(server, "Deployment", "web")).get(ENV) is None
        assert app.controller.ledger.owed("ns/Deployment/web")  # held, not dropped
        settle(app)
        assert metric(app, "invalid_annotations_total", kind="Deployment") == 1
        rewrite(api_client, "v2", app)  # checked again, still the same wrong name: said once a hold
        assert metric(app, "invalid_annotations_total", kind="Deployment") == 1
        assert app.controller.ledger.owed("ns/Deployment/web")
        call(api_client, "PATCH", "/apis/apps/v1/namespaces/ns/deployments/web",
             {"metadata": {"annotations": {"gitops-reloader.io/reload-window": "weekend"}}},
             content_type="application/merge-patch+json")
        wait_for(lambda: [e for e in events(api_client, "web") if "'weekend'" in e["message"]],
                 message="another wrong name, said again")
        assert metric(app, "invalid_annotations_total", kind="Deployment") == 2
        assert env_of(workload(server, "Deployment", "web")).get(ENV) is None


def test_reload_window_override_lets_one_change_through_and_says_who(
        server: ApiServer, api_client: ApiClient, tmp_path: Path) -> None:
    clock = FakeClock()
    create(api_client, configmap("app-config", {"url": "v0"}))
    for name in ("web", "api"):
        create(api_client, deployment(name, annotations=RELOAD))
    with running_controller(api_client, [windows_file(tmp_path, default="early")], clock=clock) as app:
        rewrite(api_client, "v1", app)
        assert metric(app, "waiting_for_window") == 2
        # An operator lets this change through: the annotation, with the data, as kubectl does.
        path = "/api/v1/namespaces/ns/configmaps/app-config"
        current = call(api_client, "GET", path)
        current["metadata"].setdefault("annotations", {})["gitops-reloader.io/reload-now"] = "INC-4711"
        current["data"] = {"url": "v2"}
        answer = call(api_client, "PUT", path + "?fieldManager=kubectl-annotate", current)
        version = answer["metadata"]["resourceVersion"]
        wait_for(lambda: app.controller.seen(SourceKind.CONFIGMAP, "ns", "app-config", version),
                 message="seen")
        latest = configmap_hash({"url": "v2"}, None)
        for name in ("web", "api"):  # every workload of that change goes through
            wait_for(lambda name=name: env_of(workload(server, "Deployment", name)).get(ENV) == latest,
                     message=f"{name} reloaded through the closed window")
        settle(app)
        app.recorder.flush()
        override = [e for e in events(api_client, "web") if e["reason"] == "ReloadWindowOverride"]
        assert len(override) == 1 and override[0]["type"] == "Normal"
        assert "reload-now='INC-4711'" in override[0]["message"]
        assert "field manager kubectl-annotate" in override[0]["message"]
        assert "window early, opens at 2023-11-15 06:00 (UTC)" in override[0]["message"]
        rewrite(api_client, "v3", app)  # the same value lets no later change through
        assert env_of(workload(server, "Deployment", "web")).get(ENV) == latest
        assert metric(app, "waiting_for_window") == 2


def test_reload_window_status_text_and_json_say_which_window_and_when(
        server: ApiServer, api_client: ApiClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hour = (time.gmtime().tm_hour + 2) % 24  # opens in 1-2 hours, whenever the test runs
    path = tmp_path / "windows.yaml"
    path.write_text("windows:\n"
                    f"  - {{name: later, schedule: '0 {hour} * * *', timeZone: UTC, duration: 1h}}\n"
                    "default: later\n")
    create(api_client, configmap("app-config", {"url": "v0"}))
    given = [{"name": "app", "image": "nginx",
              "env": [{"name": ENV, "value": configmap_hash({"url": "v0"}, None)}]}]
    create(api_client, deployment("web", annotations=RELOAD, containers=given))
    rewrite(api_client, "v1")  # changed while no controller ran: web has not been given v1
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    argv = ["status", "--kubeconfig", kubeconfig, f"--reload-windows-config={path}"]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.strip().startswith("ns/Deployment/web"))
    assert "waiting for window later, opens at " in line and f"{hour:02d}:00 (UTC), in " in line
    assert "waiting for a maintenance window: 1 workload(s)" in text
    assert cli.main([*argv, "-o", "json"]) == 0
    [wait] = json.loads(capsys.readouterr().out)["waiting_for_window"]
    assert (wait["workload"], wait["window"], wait["time_zone"]) == ("ns/Deployment/web", "later", "UTC")
    assert 3600 <= wait["opens_at"] - time.time() <= 2 * 3600 + 60


def test_reload_window_and_storm_brake_are_in_explain(
        server: ApiServer, api_client: ApiClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations={**RELOAD, "gitops-reloader.io/reload-window": "early",
                                                      "gitops-reloader.io/max-reloads": "2/1h"}))
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    argv = ["explain", "deployment/web", "-n", "ns", "--kubeconfig", kubeconfig, windows_file(tmp_path)]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "  maintenance window: window early" in text  # "is open" from 06:00 to 07:00 UTC
    assert "  storm brake: at most 2/1h (annotation) reloads" in text
    assert cli.main([*argv, "-o", "json"]) == 0
    timing = json.loads(capsys.readouterr().out)["timing"]
    assert timing["window"].startswith("window early") and timing["max_reloads"] == "2/1h (annotation)"


def test_reload_window_resync_checks_wait_without_announcing_a_wait(
        api_client: ApiClient, git: GitSetup, host: GitHostServer, tmp_path: Path) -> None:
    """The slow resync checks every git workload; in a closed window such a check waits for the
    window too, but nothing is announced: no change is known to wait."""
    clock = FakeClock()
    git.create({"apps/web/web.yaml": deployment_manifest("web")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, git_workload("web"))
    with git_controller(api_client, git, windows_file(tmp_path, default="early"), "--resync-period=1m",
                        clock=clock) as (app, _):
        clock.advance(61)
        app.controller.resync()
        clock.advance(5)
        app.controller.queue.wake()
        settle(app)
        app.recorder.flush()
        assert "ns/Deployment/web" in app.controller.reconciler.holding()  # the check waits for the window
        assert metric(app, "waiting_for_window") == 0
        assert not [r for r in reasons(api_client, "web") if r.startswith("ReloadWaiting")]
        assert len(commits(host)) == 1


def test_reload_window_plan_says_which_writes_wait_and_until_when(
        server: ApiServer, api_client: ApiClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hour = (time.gmtime().tm_hour + 3) % 24  # Berlin is UTC+1 or +2: opens in 1-3 hours
    path = tmp_path / "windows.yaml"
    path.write_text("windows:\n"
                    f"  - {{name: later, schedule: '0 {hour} * * *', timeZone: Europe/Berlin, "
                    "duration: 1h}\n"
                    "default: later\n")
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations=RELOAD))
    create(api_client, deployment("now", annotations={**RELOAD, "gitops-reloader.io/reload-window": "none"}))
    create(api_client, deployment("typo", annotations={**RELOAD,
                                                       "gitops-reloader.io/reload-window": "nightly"}))
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    argv = ["plan", "--configmap", "ns/app-config", "--from-literal", "url=v1",
            "--kubeconfig", kubeconfig, f"--reload-windows-config={path}"]
    assert cli.main(argv) == 1  # something would be written
    text = capsys.readouterr().out
    blocks = {block.splitlines()[0].split(" ")[0]: block for block in text.split("\n\n")[1:]}
    assert "waiting for window later, opens at " in blocks["ns/Deployment/web"]
    assert ":00 (Europe/Berlin)" in blocks["ns/Deployment/web"]
    assert "waiting for" not in blocks["ns/Deployment/now"]
    assert "held: no reload window named 'nightly' (known: later)" in blocks["ns/Deployment/typo"]
    assert cli.main([*argv, "-o", "json"]) == 1
    windows = {w["key"]: w["window"] for w in json.loads(capsys.readouterr().out)["workloads"]}
    assert windows["ns/Deployment/now"] == ""
    assert windows["ns/Deployment/web"].startswith("waiting for window later")


def test_reload_window_chosen_by_the_namespace_annotation_unless_the_workload_says_otherwise(
        server: ApiServer, api_client: ApiClient, tmp_path: Path) -> None:
    clock = FakeClock()
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": "ns", "annotations": {"gitops-reloader.io/reload-window": "early"}}}
    call(api_client, "POST", "/api/v1/namespaces", namespace)
    create(api_client, configmap("app-config", {"url": "v0"}))
    create(api_client, deployment("web", annotations=RELOAD))
    create(api_client, deployment("free", annotations={**RELOAD, "gitops-reloader.io/reload-window": "none"}))
    with running_controller(api_client, [windows_file(tmp_path)], clock=clock) as app:  # no default
        rewrite(api_client, "v1", app)
        app.recorder.flush()
        assert env_of(workload(server, "Deployment", "web")).get(ENV) is None
        assert env_of(workload(server, "Deployment", "free")).get(ENV) == configmap_hash({"url": "v1"}, None)
        [waiting] = [e for e in events(api_client, "web") if e["reason"] == "ReloadWaitingForWindow"]
        assert "waiting for window early" in waiting["message"]
        open_window(app, clock)
        wait_for(lambda: env_of(workload(server, "Deployment", "web")).get(ENV)
                 == configmap_hash({"url": "v1"}, None), message="reloaded when the namespace's window opens")
