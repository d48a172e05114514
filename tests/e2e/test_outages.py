"""Issue 31: an outage of any length loses nothing, doubles nothing, and is quiet while it lasts.

Each test takes one far side down — the git host over HTTPS or SSH, a pull-request host's
API, a webhook receiver, the API server's write path — for longer than the old give-up
(``--max-retries`` attempts; here 3, with ``--retry-max-delay=300ms`` so that a minute of
production backoff passes in a second). While it is down the change stays pending: one
``ReloadFailed`` Event object whose ``count`` grows, one ``ReloadStillFailing`` once the
attempts pass ``--max-retries``, the ``pending_failures`` gauge, the failure record
ConfigMap and ``status`` all say so. When it comes back the change lands exactly once.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from git_setup import REPO, GitSetup, commits, deployment_manifest, wait_commits
from kubernetes.client import ApiClient
from processes import Cluster, Controller
from prometheus_client import CollectorRegistry
from reload_helpers import call, configmap, create, env_of, events, metric, quiet, workload
from test_git_sink import CONTROLLER_NS, git_controller, git_workload, put_data
from test_git_ssh import SshSetup
from test_git_ssh import controller as ssh_controller
from test_git_ssh import git_workload as ssh_workload
from test_git_ssh import put_data as ssh_put_data
from test_pull_request_sink import REPO as PR_REPO
from test_pull_request_sink import PrSetup, pr_controller, pulls, wait_open_pull, web_reloads_on_app_config

from gitops_reloader.app import App
from gitops_reloader.clock import FakeClock
from gitops_reloader.config import load_config
from gitops_reloader.gitops.locate import GIT_REPO_ANNOTATION
from gitops_reloader.hashing import configmap_hash
from gitops_reloader.kube.api import KubeApi
from gitops_reloader.ledger import Entry, Failure, FailureClass, Ledger, PendingSource, Record, decode, encode
from gitops_reloader.model import SourceKind, SourceMeta, SourceRef
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.state.ledgerstore import LedgerStore
from gitops_reloader.status import read_census
from gitops_reloader.testing.apiserver import ApiServer, Fault
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import deployment, env_from_configmap, running_controller, wait_for
from gitops_reloader.testing.prhost import PrHost
from gitops_reloader.testing.receiver import HttpReceiver
from gitops_reloader.testing.sshhost import SshGitHost

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

FAST = ("--max-retries=3", "--retry-max-delay=300ms")
"""The old give-up after 3 attempts; backoff capped at 0.3 s (a minute of production in a second)."""
PAST_GIVE_UP = 6
APP_CONFIG = SourceRef(SourceKind.CONFIGMAP, "ns", "app-config")
"""Attempts the tests wait for while down: past the 3 after which the change used to be dropped."""


@dataclass(frozen=True)
class Failing:
    """A failing emission as ``status`` shows it: the failure and what each workload waits for."""

    recorded: Failure
    workloads: dict[str, tuple[str, ...]]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.recorded, name)


def failing_of(entries: list[Entry]) -> list[Failing]:
    by_key: dict[str, Failing] = {}
    for entry in entries:
        if entry.failure is not None:
            found = by_key.setdefault(entry.failure.key, Failing(entry.failure, {}))
            found.workloads[entry.workload] = tuple(sorted(ref.local_id for ref in entry.owes))
    return sorted(by_key.values(), key=lambda f: (f.recorded.since, f.recorded.key))


def failing(app: App) -> list[Failing]:
    return failing_of(app.controller.ledger.entries())


def wait_attempts(app: App, attempts: int = PAST_GIVE_UP, timeout: float = 30.0) -> Any:
    """The one failing emission, once it has failed ``attempts`` times."""
    return wait_for(lambda: [f for f in failing(app) if f.attempts >= attempts], timeout=timeout,
                    message=f"{attempts} failed attempts")[0]


def event_objects(api_client: ApiClient, name: str, reason: str,
                  namespace: str = "ns") -> list[dict[str, Any]]:
    return [e for e in events(api_client, name, namespace) if e.get("reason") == reason]


def assert_quiet_while_down(app: App, api_client: ApiClient, name: str, attempts: int) -> None:
    """One ReloadFailed object counting the attempts, one ReloadStillFailing; the gauge and the record."""
    app.recorder.flush()
    wait_for(lambda: sum(e.get("count", 1) for e in event_objects(api_client, name, "ReloadFailed")) >= 3,
             message="ReloadFailed counted")
    failed = event_objects(api_client, name, "ReloadFailed")
    assert len(failed) == 1, [e["message"] for e in failed]
    assert failed[0]["count"] >= 3 and failed[0]["lastTimestamp"] >= failed[0]["firstTimestamp"]
    still = wait_for(lambda: event_objects(api_client, name, "ReloadStillFailing"), message="raised")
    assert len(still) == 1 and still[0]["type"] == "Warning"
    assert "stays pending" in still[0]["message"]
    assert sum(v for v in app.controller.ledger.counts().values()) == 1
    assert attempts >= PAST_GIVE_UP


def record_in_cluster(api_client: ApiClient, name: str = "gitops-reloader-failures",
                      namespace: str = CONTROLLER_NS) -> list[Any]:
    """The failure record ConfigMap as the controller wrote it (empty when absent)."""
    try:
        stored = call(api_client, "GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}")
    except Exception:  # 404 before the first write
        return []
    return failing_of(decode(stored.get("data") or {}))


def pending_gauge(app: App, sink: str, reason: str) -> float:
    return metric(app, "pending_failures", sink=sink, reason=reason)


# --------------------------------------------------------------------------- the git host


def test_git_outage_over_https_past_the_old_give_up_commits_once_when_the_host_is_back(
        api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    git.create({"apps/web.yaml": deployment_manifest("web")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    with git_controller(api_client, git, *FAST) as (app, _):
        host.set_down(True)
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        entry = wait_attempts(app)
        assert entry.sink == "git" and entry.failure.value == "transient"
        assert entry.workloads == {"ns/Deployment/web": ("ConfigMap/app-config",)}
        assert_quiet_while_down(app, api_client, "web", entry.attempts)
        assert pending_gauge(app, "git", entry.reason) == 1.0
        recorded = wait_for(lambda: record_in_cluster(api_client), message="the failure record written")
        assert recorded[0].workloads == {"ns/Deployment/web": ("ConfigMap/app-config",)}
        assert "token" not in recorded[0].error.lower() or "***" in recorded[0].error
        assert len(commits(host)) == 1
        host.set_down(False)
        log = wait_commits(host, 2, timeout=30)
        quiet(app)
        assert len(commits(host)) == 2 and log[0][1].startswith("reload: web")
        assert failing(app) == [] and pending_gauge(app, "git", entry.reason) == 0.0
        wait_for(lambda: record_in_cluster(api_client) == [], message="the failure record emptied")


def test_git_outage_over_ssh_commits_once_when_sshd_is_back(
        api_client: ApiClient, tmp_path: Path, githost: GitHostServer, sshgit: SshGitHost) -> None:
    setup = SshSetup(tmp_path, githost, sshgit)
    githost.create_repo(REPO, {"apps/web.yaml": deployment_manifest("web")})
    setup.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, ssh_workload("web"))
    with ssh_controller(api_client, setup, *FAST) as (app, _):
        sessions = sshgit.sessions()
        sshgit.stop()  # connection refused: an ordinary outage, retried with backoff
        ssh_put_data(api_client, "app-config", {"url": "b"})
        entry = wait_attempts(app)
        assert entry.failure.value == "transient"
        assert_quiet_while_down(app, api_client, "web", entry.attempts)
        sshgit.start()
        wait_commits(githost, 2, timeout=60)
        quiet(app)
        assert len(commits(githost)) == 2 and failing(app) == []
        assert sshgit.sessions() > sessions


def test_outage_host_key_fixed_in_the_mounted_known_hosts_commits_without_restart_or_change(
        api_client: ApiClient, tmp_path: Path, githost: GitHostServer, sshgit: SshGitHost) -> None:
    """A failure only a person can fix is retried slowly (5 min by default) — and at once
    when the mounted known_hosts changes, as the kubelet swaps a Secret volume's ``..data``."""
    setup = SshSetup(tmp_path, githost, sshgit)
    volume = tmp_path / "known-hosts-volume"
    volume.mkdir()
    swap_data(volume, "known_hosts", setup.known_hosts.read_text(), "1")
    githost.create_repo(REPO, {"apps/web.yaml": deployment_manifest("web")})
    setup.configure(known_hosts=volume / "known_hosts")
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, ssh_workload("web"))
    sshgit.change_host_key()
    with ssh_controller(api_client, setup) as (app, _):
        ssh_put_data(api_client, "app-config", {"url": "b"})
        entry = wait_attempts(app, 1)
        assert (entry.failure.value, entry.reason) == ("needs-person", "HostKeyChanged")
        assert entry.next_try - app.clock.now() > 200  # slow: nothing would happen for minutes
        assert len(commits(githost)) == 1
        swap_data(volume, "known_hosts", sshgit.known_hosts_line + "\n", "2")  # the person's fix
        wait_commits(githost, 2, timeout=30)
        quiet(app)
        assert len(commits(githost)) == 2 and failing(app) == []
        assert app.controller.ledger.failure(entry.key) is None


def swap_data(volume: Path, name: str, text: str, version: str, *, mode: int = 0o644) -> None:
    """Write ``name`` into a Secret volume as the kubelet does: a new ``..<version>`` directory,
    ``..data`` swapped to it atomically, ``name`` a link through ``..data``."""
    target = volume / f"..{version}"
    target.mkdir(exist_ok=True)
    (target / name).write_text(text)
    (target / name).chmod(mode)
    (volume / "..data_tmp").symlink_to(target.name)
    os.replace(volume / "..data_tmp", volume / "..data")
    if not (volume / name).is_symlink():
        (volume / name).symlink_to(f"..data/{name}")


# --------------------------------------------------------------------------- a pull-request host


@pytest.mark.parametrize("kind", ["github"])
def test_pull_request_outage_503_opens_one_pull_request_when_the_host_is_back(
        api_client: ApiClient, tmp_path: Path, githost: GitHostServer, prhost: PrHost, kind: str) -> None:
    setup = PrSetup(tmp_path, githost, prhost, kind)
    web_reloads_on_app_config(api_client, setup)
    with pr_controller(api_client, setup, *FAST) as (app, _):
        prhost.set_down(True)
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        entry = wait_attempts(app)
        assert entry.sink == "pull-request" and entry.failure.value == "transient"
        assert_quiet_while_down(app, api_client, "web", entry.attempts)
        assert pulls(prhost) == []
        prhost.set_down(False)
        pull = wait_open_pull(prhost)
        quiet(app)
        assert len(pulls(prhost)) == 1 and failing(app) == []
        branch = githost.log(PR_REPO, pull["head"])
        assert len(branch) == len(githost.log(PR_REPO)) + 1  # one commit on the branch, not one per attempt


# --------------------------------------------------------------------------- a webhook receiver


def test_webhook_outage_receiver_refusing_delivers_once_when_it_accepts_again(
        api_client: ApiClient) -> None:
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, deployment("web", annotations={"reloader.stakater.com/auto": "true"},
                                  containers=[env_from_configmap("app-config")]))
    with HttpReceiver(default_status=503) as receiver, \
            running_controller(api_client, [f"--webhook-url={receiver.url}/hook", *FAST]) as app:
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        entry = wait_attempts(app)
        assert entry.sink == "webhook"
        assert_quiet_while_down(app, api_client, "web", entry.attempts)
        refused = len(receiver.requests)
        assert refused >= PAST_GIVE_UP
        receiver.default_status = 200
        wait_for(lambda: len(receiver.requests) == refused + 1, message="one accepted POST")
        quiet(app)
        assert len(receiver.requests) == refused + 1 and failing(app) == []


# --------------------------------------------------------------------------- the API server's write path


def test_api_outage_patch_refused_for_a_while_reloads_once_and_status_says_so(
        server: ApiServer, api_client: ApiClient) -> None:
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, deployment("web", annotations={"reloader.stakater.com/auto": "true"},
                                  containers=[env_from_configmap("app-config")]))
    flags = [*FAST, f"--lease-namespace={CONTROLLER_NS}"]
    with running_controller(api_client, flags) as app:
        server.add_fault(Fault(verb="patch", resource="deployments", status=503, times=None))
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        entry = wait_attempts(app)
        assert (entry.sink, entry.reason, entry.failure.value) == ("env-vars", "ServerError", "transient")
        assert_quiet_while_down(app, api_client, "web", entry.attempts)
        wait_for(lambda: record_in_cluster(api_client), message="the failure record written")
        report = read_census(KubeApi(api_client), load_config(flags, environ={"HOME": "/nonexistent"}),
                             git=False)
        [shown] = report.failing
        assert shown.workloads == ["ns/Deployment/web"] and shown.reason == "ServerError"
        assert shown.attempts >= 3 and shown.raised
        server.clear_faults()
        expected = configmap_hash({"url": "b"})
        wait_for(lambda: env_of(workload(server, "Deployment", "web")).get("STAKATER_APP_CONFIG_CONFIGMAP")
                 == expected, message="reloaded")
        quiet(app)
        accepted = server.request_counts().get(("patch", "deployments"), 0) - entry.attempts
        assert accepted >= 1 and failing(app) == []
        generation = workload(server, "Deployment", "web")["metadata"]["generation"]
        quiet(app, wait=1.0)
        assert workload(server, "Deployment", "web")["metadata"]["generation"] == generation  # once


def test_outage_of_three_hours_on_a_fake_clock_backs_off_to_the_cap_and_lands_once(
        server: ApiServer, api_client: ApiClient) -> None:
    """The long one, on a fake clock: the API server refuses every PATCH for three hours. The
    change stays pending the whole time; attempts back off 1 s, 2 s, 4 s … to the 5-minute cap
    (about 45 in three hours, not thousands); the Events stay two objects, ReloadFailed with a
    growing count (the spam filter lets 25 through, then one per five minutes: at the cap every
    attempt still counts) and one ReloadStillFailing; then one write."""
    clock = FakeClock()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, deployment("web", annotations={"reloader.stakater.com/auto": "true"},
                                  containers=[env_from_configmap("app-config")]))
    with running_controller(api_client, clock=clock) as app:
        server.add_fault(Fault(verb="patch", resource="deployments", status=503, times=None))
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        entry = wait_attempts(app, 1)
        start, delays = clock.now(), []
        while clock.now() - start < 3 * 3600:
            due = entry.next_try - clock.now()
            delays.append(due)
            clock.advance(due + 0.001)
            app.controller.queue.wake()
            entry = wait_attempts(app, entry.attempts + 1)
        assert delays[:4] == pytest.approx([1.0, 2.0, 4.0, 8.0], rel=0.21)  # doubling, jittered down
        assert max(delays) <= 300.0 and min(delays[-10:]) >= 240.0  # at the cap, jitter 20 % at most
        assert 40 <= entry.attempts <= 55
        app.recorder.flush()
        failed = event_objects(api_client, "web", "ReloadFailed")
        # every attempt counted on one object (at the cap a token refills between attempts)
        assert len(failed) == 1 and 25 < failed[0]["count"] <= entry.attempts
        assert len(event_objects(api_client, "web", "ReloadStillFailing")) == 1
        assert len(events(api_client, "web")) == 2
        server.clear_faults()
        clock.advance(entry.next_try - clock.now() + 0.001)
        app.controller.queue.wake()
        expected = configmap_hash({"url": "b"})
        wait_for(lambda: env_of(workload(server, "Deployment", "web")).get("STAKATER_APP_CONFIG_CONFIGMAP")
                 == expected, message="reloaded once the API server accepts writes")
        wait_for(lambda: failing(app) == [], message="no longer failing")


def test_outage_of_permissions_is_retried_at_once_when_the_workload_annotations_change(
        server: ApiServer, api_client: ApiClient) -> None:
    """A 403 is a failure a person must fix: retried only every --retry-max-delay (5 min), and
    at once when the workload's annotations change (its owner acting on the Warning)."""
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, deployment("web", annotations={"reloader.stakater.com/auto": "true"},
                                  containers=[env_from_configmap("app-config")]))
    with running_controller(api_client) as app:
        server.add_fault(Fault(verb="patch", resource="deployments", status=403, times=1))
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        entry = wait_attempts(app, 1)
        assert (entry.failure.value, entry.reason) == ("needs-person", "Forbidden")
        assert entry.next_try - app.clock.now() > 200
        call(api_client, "PATCH", "/apis/apps/v1/namespaces/ns/deployments/web",
             {"metadata": {"annotations": {"ops.example.com/ticket": "RBAC-42"}}},
             "application/merge-patch+json")
        expected = configmap_hash({"url": "b"})
        wait_for(lambda: env_of(workload(server, "Deployment", "web")).get("STAKATER_APP_CONFIG_CONFIGMAP")
                 == expected, message="retried at once")
        wait_for(lambda: failing(app) == [], message="no longer failing")


def test_outage_of_an_unknown_repository_holds_the_reload_until_the_annotation_is_fixed(
        api_client: ApiClient, git: GitSetup, host: GitHostServer) -> None:
    """A per-workload refusal a person can fix (the workload names a repository --git-config
    does not have) used to be skipped for good. Now it is held: pending, shown as failing, and
    committed at once when the workload's annotation is corrected — with no new change."""
    git.create({"apps/web.yaml": deployment_manifest("web")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web", annotations={GIT_REPO_ANNOTATION: "manifest"}))  # a typo
    with git_controller(api_client, git) as (app, _):
        put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
        entry = wait_attempts(app, 1)
        assert (entry.key, entry.reason, entry.failure.value) == ("ns/Deployment/web", "InvalidAnnotation",
                                                                   "needs-person")
        assert entry.workloads == {"ns/Deployment/web": ("ConfigMap/app-config",)}
        assert "names no repository of --git-config" in entry.error
        wait_for(lambda: event_objects(api_client, "web", "InvalidAnnotation"), message="the Warning")
        assert len(commits(host)) == 1
        call(api_client, "PATCH", "/apis/apps/v1/namespaces/ns/deployments/web",
             {"metadata": {"annotations": {GIT_REPO_ANNOTATION: REPO}}}, "application/merge-patch+json")
        log = wait_commits(host, 2, timeout=30)
        assert log[0][1].startswith("reload: web")
        quiet(app)
        assert len(commits(host)) == 2 and failing(app) == []


# --------------------------------------------------------------------------- a restart mid-outage


def kill_while_failing(api_client: ApiClient, host: GitHostServer, controller: Controller) -> None:
    """Take the git host down, change app-config, and SIGKILL ``controller`` once the failure
    record in the cluster shows four failed attempts."""
    host.set_down(True)
    put_data(api_client, "ConfigMap", "app-config", {"url": "b"})
    wait_for(lambda: any(f.attempts >= 4 for f in record_in_cluster(api_client)), timeout=30,
             message="the failure recorded in the cluster")
    os.kill(controller.pid, signal.SIGKILL)
    controller.proc.wait(10)


@pytest.fixture
def cluster(tmp_path: Path, server: ApiServer, api_client: ApiClient) -> Iterator[Cluster]:
    with httpx.Client() as http:
        yield Cluster("", str(server.write_kubeconfig(tmp_path / "kubeconfig")), api_client, http)


def test_outage_sigkill_while_failing_restart_without_flags_commits_once_when_back(
        api_client: ApiClient, git: GitSetup, host: GitHostServer, cluster: Cluster, tmp_path: Path) -> None:
    """SIGKILL while the git host is down; the same command line again (no
    ``--sync-after-restart``): the change is still pending, read back from the failure record,
    and committed once when the host returns. The manifest holds no digest yet, so nothing
    but the record could have told the new process."""
    git.create({"apps/web.yaml": deployment_manifest("web")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    flags = [*git.flags(*FAST), f"--lease-namespace={CONTROLLER_NS}"]
    assert not any("sync-after-restart" in f for f in flags)
    first = Controller(cluster, tmp_path / "first.jsonl", flags)
    second: Controller | None = None
    try:
        first.wait_ready(cluster.http)
        kill_while_failing(api_client, host, first)
        assert len(commits(host)) == 1
        second = Controller(cluster, tmp_path / "second.jsonl", flags)
        second.wait_ready(cluster.http)
        said = "resuming what the ledger recorded before the restart"
        resumed = wait_for(lambda: next((r for r in second.log() if r["msg"] == said), None),
                           message="the restart resumed the failure")
        assert resumed["workloads_pending"] == 1
        gauge = 'gitops_reloader_pending_failures{reason="GitError",sink="git"}'
        wait_for(lambda: (second.sample(cluster.http, gauge) or 0) >= 1,
                 message="still failing after restart")
        host.set_down(False)
        wait_commits(host, 2, timeout=30)
        wait_for(lambda: second.sample(cluster.http, gauge) == 0, message="no longer failing")
        assert len(commits(host)) == 2
        assert not any("giving up" in r["msg"] for r in first.log() + second.log())
    finally:
        for proc in (first, second):
            if proc is not None and proc.proc.poll() is None:
                proc.proc.terminate()
                proc.proc.wait(10)


def lease_holder(api_client: ApiClient) -> str:
    try:
        lease = call(api_client, "GET", f"/apis/coordination.k8s.io/v1/namespaces/{CONTROLLER_NS}/leases/"
                                         "gitops-reloader")
    except Exception:  # 404 before the first leader
        return ""
    return str(lease["spec"].get("holderIdentity") or "")


def test_outage_leader_change_while_failing_the_new_leader_continues_and_commits_once(
        api_client: ApiClient, git: GitSetup, host: GitHostServer, cluster: Cluster, tmp_path: Path) -> None:
    """Two replicas with --enable-ha; the leader's git host goes down with a change pending, and
    the leader is SIGKILLed. The standby takes the Lease, reads the failure record the dead
    leader wrote, and commits the change once when the host returns."""
    git.create({"apps/web.yaml": deployment_manifest("web")})
    git.configure()
    create(api_client, configmap("app-config", {"url": "a"}))
    create(api_client, git_workload("web"))
    flags = [*git.flags(*FAST), "--enable-ha", "--lease-duration=2s", f"--lease-namespace={CONTROLLER_NS}"]
    replicas = {}
    try:
        for name in ("a", "b"):
            replica = Controller(cluster, tmp_path / f"{name}.jsonl", flags)
            replicas[replica.pid] = replica
        for replica in replicas.values():
            replica.wait_ready(cluster.http)
        holder = wait_for(lambda: lease_holder(api_client), message="a leader")
        first = replicas[int(holder.rsplit("-", 1)[1])]
        [standby] = [r for r in replicas.values() if r is not first]
        wait_for(lambda: first.sample(cluster.http, "gitops_reloader_leader") == 1, message="leader active")
        kill_while_failing(api_client, host, first)
        wait_for(lambda: lease_holder(api_client).endswith(f"-{standby.pid}"), timeout=15,
                 message="the standby took the Lease")
        said = "resuming what the ledger recorded before the restart"
        wait_for(lambda: any(r["msg"] == said for r in standby.log()), message="the new leader resumed")
        assert len(commits(host)) == 1
        host.set_down(False)
        wait_commits(host, 2, timeout=30)
        gauge = 'gitops_reloader_pending_failures{reason="GitError",sink="git"}'
        wait_for(lambda: standby.sample(cluster.http, gauge) == 0, message="no longer failing")
        assert len(commits(host)) == 2
    finally:
        for replica in replicas.values():
            if replica.proc.poll() is None:
                replica.proc.terminate()
                replica.proc.wait(10)


def test_outage_record_naming_a_workload_deleted_meanwhile_is_dropped_at_start(api_client: ApiClient) -> None:
    """A restart finds in the record a failing workload that was deleted while no controller
    ran: nothing is left to emit, so it is not listed as failing, and the record is rewritten."""
    create(api_client, configmap("app-config", {"url": "a"}))
    gone = "ns/Deployment/gone"
    stale = Entry(gone, {APP_CONFIG: PendingSource(SourceMeta(APP_CONFIG))}, failure=Failure(
        gone, "env-vars", "ServerError", FailureClass.TRANSIENT, 1000.0, 5, 1010.0, "503"))
    create(api_client, {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "gitops-reloader-failures", "namespace": "default"},
                        "data": encode([stale])})
    with running_controller(api_client) as app:
        assert failing(app) == []
        assert metric(app, "pending_failures", sink="env-vars", reason="ServerError") == 0.0
        wait_for(lambda: record_in_cluster(api_client, namespace="default") == [], message="rewritten")


def test_outage_record_is_never_written_by_a_replica_that_lost_the_lease(api_client: ApiClient) -> None:
    """The old leader's last write must not overwrite what the new leader records: once
    leadership is lost (``abandon``) the store writes nothing more, not even on stop."""
    ledger = Ledger()
    store = LedgerStore(KubeApi(api_client), ledger, namespace="default", name="gitops-reloader-failures",
                        metrics=Metrics(CollectorRegistry()), interval=0.05)
    assert store.read() == Record([])
    for number, key in enumerate(("ns/Deployment/web", "ns/Deployment/api")):
        ledger.owe(key, {APP_CONFIG: PendingSource(SourceMeta(APP_CONFIG))})
        ledger.fail(key, [key], sink="git", reason="GitError", failure=FailureClass.TRANSIENT,
                    error="503", now=1000.0 + number, delay=1.0)
        if number == 0:
            assert store.flush()
            assert [f.key for f in record_in_cluster(api_client, namespace="default")] == [
                "ns/Deployment/web"]
            store.start(on_loaded=ledger.restore)
            store.abandon()
    store.stop()
    assert [f.key for f in record_in_cluster(api_client, namespace="default")] == ["ns/Deployment/web"]
