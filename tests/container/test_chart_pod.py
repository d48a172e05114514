"""The chart's own pod: ``helm template`` with git over SSH and ``enableHA``, then the rendered
Deployment's container run as it is (``podspec.translate``: command, args, env, volumes with
their modes, securityContext, limits), the ServiceAccount bound to the chart's own RBAC rules
on the API test server. The test plays the kubelet: it asks the probes as they are written,
and stops the pod with SIGTERM, which must end it within terminationGracePeriodSeconds and
release the Lease.

The container shares the host's network (it reaches the servers on 127.0.0.1), so the
controller listens on the chart's port 9090 of this machine while the test runs.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cluster import SA_TOKEN, Cluster, free_port
from containers import Container, running_container
from helm_tools import CHART_DIR, render, require_helm
from pod import service_account
from podspec import HttpProbe, translate

from gitops_reloader.testing.apiserver.authz import PolicyRule, rules_from_role
from gitops_reloader.testing.harness import wait_for

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


def test_chart_pod_with_ssh_and_ha_probes_answer_and_sigterm_releases_the_lease(
        image: str, cluster: Cluster, tmp_path: Path) -> None:
    ssh_port = free_port()  # nothing listens there: this test does not push
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"reloader": {"enableHA": True, "git": {"repositories": [
        {"name": "fleet", "url": f"ssh://git@127.0.0.1:{ssh_port}/srv/fleet.git", "branch": "main",
         "credentialsSecret": "fleet-git"}]}}}))
    objects = render(require_helm(), CHART_DIR, home=tmp_path / "helm", values_files=[values],
                     release=RELEASE, namespace=NAMESPACE)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    configmaps = {o["metadata"]["name"]: o["data"] for o in objects if o["kind"] == "ConfigMap"}
    cluster.server.authorizer.restrict(SA_TOKEN, chart_rules(objects), user=SERVICE_ACCOUNT)
    run = translate(
        deployment, configmaps=configmaps, pod_name=POD_NAME, workdir=tmp_path / "volumes",
        secrets={"fleet-git": ssh_credentials(tmp_path / "keys", ssh_port)},
        service_account=service_account(tmp_path / "serviceaccount", token=SA_TOKEN,
                                        ca_cert=cluster.tls.ca_cert, namespace=NAMESPACE,
                                        api_port=cluster.server.port))
    assert "--enable-ha=true" in run.args
    probes = run.probes["livenessProbe"], run.probes["readinessProbe"]
    with socket.socket() as free:  # the chart's port must be ours on the host's network
        free.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the controller binds it
        free.bind(("0.0.0.0", probes[0].port))

    with running_container(image, run.args, options=[*run.options, "--network=host",
                                                      f"--hostname={POD_NAME}"]) as pod:
        wait_probe(pod, probes[0], "livenessProbe")
        wait_probe(pod, probes[1], "readinessProbe")
        # the identity is <hostname>-<pid>: the pod's name, and PID 1 in its container
        assert wait_for(lambda: lease_holder(cluster), timeout=60, message="the Lease") == f"{POD_NAME}-1"
        pod.signal("TERM")
        wait_for(lambda: pod.exit_code() is not None, timeout=run.grace_seconds, interval=0.1,
                 message=f"exit within terminationGracePeriodSeconds={run.grace_seconds}")
        assert pod.exit_code() == 0, pod.logs()
        logs = pod.logs()
    assert lease_holder(cluster) == "", logs
    assert "Traceback" not in logs and SA_TOKEN not in logs
    # nothing the chart's RBAC forbids was needed
    assert "403" not in logs and "forbidden" not in logs.lower()
