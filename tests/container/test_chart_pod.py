"""The chart's own pod: ``helm template`` with git over SSH and ``enableHA``, then the rendered
Deployment's container run as it is (``podspec.translate``: command, args, env, volumes with
their modes, securityContext, limits), the ServiceAccount bound to the chart's own RBAC rules
on the API test server. The test plays the kubelet: it asks the probes as they are written,
and stops the pod with SIGTERM, which must end it within terminationGracePeriodSeconds and
release the Lease.

The second test runs the same pod against a real sshd (``SshGitHost``) with the chart's
Secret modes for the key and known_hosts (0440, group fsGroup): one commit reaches the bare
repository, then a changed host key gives no push and a Warning Event naming the repository.

The container shares the host's network (it reaches the servers on 127.0.0.1), so the
controller listens on the chart's port 9090 of this machine: the tests of this module take
turns on it through a lock file.
"""

from __future__ import annotations

import fcntl
import socket
import subprocess
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cluster import SA_TOKEN, Cluster
from containers import STATE_DIR, Container, running_container
from helm_tools import CHART_DIR, render, require_helm
from pod import service_account
from podspec import HttpProbe, PodRun, translate

from gitops_reloader.ledger import decode
from gitops_reloader.testing.apiserver.authz import PolicyRule, rules_from_role
from gitops_reloader.testing.harness import deployment, wait_for
from gitops_reloader.testing.ports import free_port
from gitops_reloader.testing.sshhost import SshGitHost

pytestmark = pytest.mark.container

RELEASE, NAMESPACE = "rel", "gitops-system"
FULLNAME = f"{RELEASE}-gitops-reloader"
POD_NAME = f"{FULLNAME}-7d9f8c6b5-qx2lp"
SERVICE_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:{FULLNAME}"


def ssh_credentials(directory: Path, ssh_port: int) -> dict[str, str]:
    """The ``fleet-git`` Secret's data: a client key, and known_hosts for the git host's key."""
    directory.mkdir()
    for name in ("client", "host"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name,
                        "-f", str(directory / name)], check=True)
    host_key = (directory / "host.pub").read_text().split()
    return {"ssh-privatekey": (directory / "client").read_text(),
            "known_hosts": f"[127.0.0.1]:{ssh_port} {host_key[0]} {host_key[1]}\n"}


def chart_rules(objects: list[dict[str, Any]]) -> list[PolicyRule]:
    """The rules the chart grants its ServiceAccount: ClusterRoles through ClusterRoleBindings
    (cluster-wide), Roles through RoleBindings (in the binding's namespace)."""
    named = {(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace", "")): o for o in objects
             if o["kind"] in ("ClusterRole", "Role")}
    rules: list[PolicyRule] = []
    for binding in (o for o in objects if o["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        if not any((s["kind"], s["name"], s.get("namespace")) == ("ServiceAccount", FULLNAME, NAMESPACE)
                   for s in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        namespace = binding["metadata"].get("namespace", "")
        role = named[(ref["kind"], ref["name"], "" if ref["kind"] == "ClusterRole" else namespace)]
        rules += rules_from_role(role["rules"], [namespace] if namespace else [])
    return rules


def probe_passes(probe: HttpProbe) -> bool:
    """One probe as the kubelet runs it: a GET within timeoutSeconds, 200-399 passes."""
    try:
        answer = httpx.get(f"http://127.0.0.1:{probe.port}{probe.path}", timeout=probe.timeout)
    except httpx.TransportError:
        return False
    return 200 <= answer.status_code < 400


def wait_probe(pod: Container, probe: HttpProbe, what: str) -> None:
    """Until ``probe`` passes; the kubelet acts after initialDelay + period x failureThreshold."""

    def passes() -> bool:
        assert pod.running(), pod.logs()
        return probe_passes(probe)

    wait_for(passes, timeout=probe.initial_delay + probe.period * probe.failure_threshold,
             interval=0.2, message=f"{what} {probe.path} on port {probe.port}")


def lease_holder(cluster: Cluster) -> str:
    lease = cluster.get(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{FULLNAME}")
    return str(lease["spec"].get("holderIdentity") or "")


@pytest.fixture
def chart_port() -> Iterator[None]:
    """The chart's port on the host's network, for one test at a time (parallel workers wait)."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with (STATE_DIR / "chart-port.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def chart_pod(cluster: Cluster, tmp_path: Path, values: Mapping[str, Any],
              secrets: Mapping[str, Mapping[str, str]]) -> PodRun:
    """``helm template`` with ``values``, the ServiceAccount bound to the chart's RBAC, and
    the Deployment's pod translated to podman (``--network=host``, hostname = pod name)."""
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    objects = render(require_helm(), CHART_DIR, home=tmp_path / "helm", values_files=[values_file],
                     release=RELEASE, namespace=NAMESPACE)
    (rendered,) = [o for o in objects if o["kind"] == "Deployment"]
    configmaps = {o["metadata"]["name"]: o["data"] for o in objects if o["kind"] == "ConfigMap"}
    cluster.server.authorizer.restrict(SA_TOKEN, chart_rules(objects), user=SERVICE_ACCOUNT)
    run = translate(
        rendered, configmaps=configmaps, secrets=secrets, pod_name=POD_NAME, workdir=tmp_path / "volumes",
        service_account=service_account(tmp_path / "serviceaccount", token=SA_TOKEN,
                                        ca_cert=cluster.tls.ca_cert, namespace=NAMESPACE,
                                        api_port=cluster.server.port))
    run.options += ["--network=host", f"--hostname={POD_NAME}"]
    with socket.socket() as free:  # the chart's port must be free on the host's network
        free.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the controller binds it
        free.bind(("0.0.0.0", run.probes["readinessProbe"].port))
    return run


def stop_within_grace(pod: Container, run: PodRun) -> str:
    """SIGTERM as the kubelet sends it; the pod must exit 0 within the grace period. Its log."""
    pod.signal("TERM")
    pod.wait(lambda: pod.exit_code() is not None, timeout=run.grace_seconds, interval=0.1,
             message=f"exit within terminationGracePeriodSeconds={run.grace_seconds}")
    logs = pod.logs()
    assert pod.exit_code() == 0, logs
    return logs


def test_chart_pod_with_ssh_and_ha_probes_answer_and_sigterm_releases_the_lease(
        image: str, cluster: Cluster, tmp_path: Path, chart_port: None) -> None:
    ssh_port = free_port()  # nothing listens there: this test does not push
    values = {"reloader": {"enableHA": True, "git": {"repositories": [
        {"name": "fleet", "url": f"ssh://git@127.0.0.1:{ssh_port}/srv/fleet.git", "branch": "main",
         "credentialsSecret": "fleet-git"}]}}}
    run = chart_pod(cluster, tmp_path, values, {"fleet-git": ssh_credentials(tmp_path / "keys", ssh_port)})
    assert "--enable-ha=true" in run.args

    with running_container(image, run.args, options=run.options) as pod:
        wait_probe(pod, run.probes["livenessProbe"], "livenessProbe")
        wait_probe(pod, run.probes["readinessProbe"], "readinessProbe")
        # the identity is <hostname>-<pid>: the pod's name, and PID 1 in its container
        assert pod.wait(lambda: lease_holder(cluster), timeout=60, message="the Lease") == f"{POD_NAME}-1"
        logs = stop_within_grace(pod, run)
    assert lease_holder(cluster) == "", logs
    assert "Traceback" not in logs and SA_TOKEN not in logs
    # nothing the chart's RBAC forbids was needed
    assert "403" not in logs and "forbidden" not in logs.lower()


MANIFEST = textwrap.dedent("""\
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: web
      namespace: ns
    spec:
      selector:
        matchLabels: {app: web}
      template:
        metadata:
          labels: {app: web}
        spec:
          containers:
            - name: app
              image: nginx
    """)


CONFIGMAPS = "/api/v1/namespaces/ns/configmaps"


def fleet_over_ssh(cluster: Cluster, tmp_path: Path, sshgit: SshGitHost,
                   reloader: Mapping[str, Any]) -> PodRun:
    """The chart's pod for repository ``fleet`` over SSH (``reloader``: more values), and in the
    cluster ConfigMap app-config and Deployment web, reloading through git into ``fleet``."""
    values = {"reloader": {**reloader, "git": {"repositories": [
        {"name": "fleet", "url": sshgit.url("fleet"), "branch": "main", "credentialsSecret": "fleet-git"}]}}}
    run = chart_pod(cluster, tmp_path, values, {"fleet-git": {
        "ssh-privatekey": sshgit.client_key_path.read_text(), "known_hosts": sshgit.known_hosts_line + "\n"}})
    cluster.api.request("POST", CONFIGMAPS, body={"metadata": {"name": "app-config"}, "data": {"url": "a"}})
    web = deployment("web", annotations={"configmap.reloader.stakater.com/reload": "app-config",
                                         "gitops-reloader.io/sink": "git",
                                         "gitops-reloader.io/git-repo": "fleet"})
    cluster.api.request("POST", "/apis/apps/v1/namespaces/ns/deployments", body=web)
    return run


def change_app_config(cluster: Cluster, url: str) -> None:
    cluster.api.request("PUT", f"{CONFIGMAPS}/app-config",
                        body={**cluster.get(f"{CONFIGMAPS}/app-config"), "data": {"url": url}})


def warning_events(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    events = cluster.get("/api/v1/namespaces/ns/events")["items"]
    return [e for e in events if e["involvedObject"]["name"] == name and e["type"] == "Warning"]


def test_chart_pod_commits_over_ssh_and_a_changed_host_key_pushes_nothing(
        image: str, cluster: Cluster, tmp_path: Path, chart_port: None) -> None:
    githost = cluster.githost
    githost.create_repo("fleet", {"apps/web.yaml": MANIFEST})
    with SshGitHost(githost.root, tmp_path / "sshd") as sshgit:
        key = sshgit.client_key_path.read_text()
        run = fleet_over_ssh(cluster, tmp_path, sshgit, {})

        def change(url: str) -> None:
            change_app_config(cluster, url)

        with running_container(image, run.args, options=run.options) as pod:
            wait_probe(pod, run.probes["readinessProbe"], "readinessProbe")
            change("b")
            pod.wait(lambda: len(githost.log("fleet")) == 2, timeout=60, message="one commit over SSH")
            assert githost.log("fleet")[0][1] == "reload: web (configmap/app-config changed)"
            assert sshgit.sessions() >= 2  # fetched and pushed over SSH
            sessions = sshgit.sessions()

            sshgit.change_host_key()
            change("c")
            event = pod.wait(lambda: [e for e in warning_events(cluster, "web") if "does not match"
                                      in e["message"]], timeout=60, message="a Warning Event")[0]
            logs = stop_within_grace(pod, run)
    assert event["reason"] == "ReloadFailed"
    assert sshgit.url("fleet") in event["message"]
    assert len(githost.log("fleet")) == 2 and sshgit.sessions() == sessions  # never past the host key
    events = str(cluster.get("/api/v1/namespaces/ns/events"))
    for line in key.splitlines()[1:-1]:  # the key's body, line by line
        assert line not in logs and line not in events


def test_chart_pod_outage_of_the_ssh_git_host_survives_a_sigkill_and_commits_once(
        image: str, cluster: Cluster, tmp_path: Path, chart_port: None) -> None:
    """Issue 31 in the image as the chart runs it: sshd goes away while a change is pending.
    The pod retries with backoff, one ReloadFailed Event object counts the attempts, and the
    failure record (its ConfigMap, written under the chart's own RBAC) holds the change. The pod
    is SIGKILLed mid-outage and a new one starts with the same arguments: it resumes the failing
    emission from the record and, once sshd is back, commits exactly once."""
    githost = cluster.githost
    githost.create_repo("fleet", {"apps/web.yaml": MANIFEST})
    with SshGitHost(githost.root, tmp_path / "sshd") as sshgit:
        run = fleet_over_ssh(cluster, tmp_path, sshgit, {"extraArgs": ["--max-retries=3"]})
        record_path = f"/api/v1/namespaces/{NAMESPACE}/configmaps/{FULLNAME}-failures"

        def recorded_attempts() -> int:
            try:
                data = cluster.get(record_path).get("data") or {}
            except Exception:  # 404 until the first write
                return 0
            return max((e.failure.attempts for e in decode(data) if e.failure), default=0)

        with running_container(image, run.args, options=run.options) as pod:
            wait_probe(pod, run.probes["readinessProbe"], "readinessProbe")
            sshgit.stop()  # the git host is down: connection refused
            change_app_config(cluster, "b")
            pod.wait(lambda: recorded_attempts() >= 3, timeout=60, message="3 attempts in the failure record")
            failed = [e for e in warning_events(cluster, "web") if e["reason"] == "ReloadFailed"]
            assert len(failed) == 1 and failed[0]["count"] >= 2, failed
            pod.signal("KILL")
            pod.wait(lambda: pod.exit_code() is not None, timeout=30, message="killed")
            first_logs = pod.logs()
        assert len(githost.log("fleet")) == 1
        with running_container(image, run.args, options=run.options) as pod:
            wait_probe(pod, run.probes["readinessProbe"], "readinessProbe")
            pod.wait(lambda: "resuming what the ledger recorded before the restart" in pod.logs(),
                     timeout=60, message="the new pod resumes the failing emission")
            sshgit.start()
            pod.wait(lambda: len(githost.log("fleet")) == 2, timeout=120,
                     message="one commit once sshd is back")
            pod.wait(lambda: recorded_attempts() == 0, timeout=30, message="the failure record emptied")
            logs = stop_within_grace(pod, run)
    assert len(githost.log("fleet")) == 2
    assert githost.log("fleet")[0][1] == "reload: web (configmap/app-config changed)"
    assert "giving up" not in first_logs + logs and "forbidden" not in (first_logs + logs).lower()
