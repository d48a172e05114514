"""A real Kubernetes control plane on 127.0.0.1 for the ``-m engines`` tier.

etcd, kube-apiserver and kube-controller-manager (its Deployment, ReplicaSet, StatefulSet,
DaemonSet and disruption controllers; more on request), optionally kube-scheduler, built by
``.ci/build-engines.sh`` from the Go module proxy, started as host processes on free ports with
certificates made here (a throw-away CA, the apiserver's serving certificate, an admin client
certificate in ``system:masters``) and a kubeconfig. RBAC is the apiserver's authorizer.
Optionally kwok plays the nodes and the kubelets: pods bound to a node it manages
(``spec.nodeName``) become Running and Ready, and are deleted when evicted, as a kubelet would.

Each process writes its log to ``<dir>/<name>.log`` (shown when it fails to start) and is
stopped by PID at the end.
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from tls_certs import Authority, make_authority, write_pem

from gitops_reloader.testing.ports import free_port

_CACHE_HOME = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
ENGINE_CACHE = Path(os.environ.get("ENGINE_CACHE") or _CACHE_HOME / "gitops-reloader" / "engines")
"""Where ``.ci/build-engines.sh`` leaves the engines (``<engine>/<binary>``)."""
START_TIMEOUT = 90.0
FAKE_NODE = "kwok-node-0"
"""The node kwok plays; pods with ``spec.nodeName`` set to it are run by kwok."""
_CONTROLLERS = "deployment,replicaset,statefulset,daemonset,disruption,garbagecollector,namespace"


class EngineMissing(Exception):
    """An engine binary is not built (``.ci/build-engines.sh`` has not run, or it failed)."""


def engine_binary(engine: str, binary: str) -> Path:
    """The built ``binary`` of ``engine``; :class:`EngineMissing` when it is not there."""
    path = ENGINE_CACHE / engine / binary
    if not os.access(path, os.X_OK):
        raise EngineMissing(f"{path} is not built (run .ci/build-engines.sh)")
    return path


@dataclass
class Process:
    """One engine process: its name, its log, its PID."""

    name: str
    log: Path
    popen: subprocess.Popen[bytes]

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.popen.pid, signal.SIGKILL)
                self.popen.wait(5)


def start_process(name: str, argv: Sequence[str | Path], directory: Path, *,
                  env: dict[str, str] | None = None) -> Process:
    log = directory / f"{name}.log"
    with log.open("wb") as out:
        popen = subprocess.Popen([str(a) for a in argv], stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    return Process(name, log, popen)


@dataclass
class ControlPlane:
    """What the tests use of the running control plane."""

    directory: Path
    url: str
    kubeconfig: Path
    ca_file: Path
    authority: Authority
    processes: dict[str, Process] = field(default_factory=dict)

    @property
    def audit_log(self) -> Path:
        """The apiserver's audit log (every request's metadata; with ``audit=True``)."""
        return self.directory / "audit.log"

    def user_kubeconfig(self, user: str, group: str = "system:masters") -> Path:
        """A kubeconfig for a client certificate of its own (``CN=user``, ``O=group``), so that
        the audit log tells its requests apart."""
        pki = self.directory / "pki"
        cert, key = self.authority.issue(user, organization=group)
        return _kubeconfig(self.directory / f"{user}.kubeconfig", self.url, self.ca_file,
                           write_pem(pki / f"{user}.crt", cert), write_pem(pki / f"{user}.key", key))

    def api_client(self) -> k8s.ApiClient:
        """An official client as the cluster's admin (``system:masters``)."""
        return k8s_config.new_client_from_config(config_file=str(self.kubeconfig))

    def token_client(self, token: str) -> k8s.ApiClient:
        """An official client authenticating with a bearer ``token`` (a ServiceAccount's)."""
        configuration = k8s.Configuration()
        configuration.host = self.url
        configuration.ssl_ca_cert = str(self.ca_file)
        configuration.api_key = {"authorization": f"Bearer {token}"}
        return k8s.ApiClient(configuration)

    def check_alive(self) -> None:
        for process in self.processes.values():
            if process.popen.poll() is not None:
                raise RuntimeError(f"{process.name} exited ({process.popen.returncode}):\n{process.tail()}")


def wait_ready(url: str, context: ssl.SSLContext | None, process: Process, what: str) -> None:
    """Wait until ``url`` answers 200; fail with ``process``'s log when it exits or times out."""
    deadline = time.monotonic() + START_TIMEOUT
    last = ""
    while time.monotonic() < deadline:
        if process.popen.poll() is not None:
            raise RuntimeError(f"{process.name} exited ({process.popen.returncode}):\n{process.tail()}")
        try:
            with urllib.request.urlopen(url, context=context, timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError as exc:
            last = str(exc)
        time.sleep(0.2)
    raise RuntimeError(f"{what} not ready after {START_TIMEOUT:.0f}s ({last}):\n{process.tail()}")


def _kubeconfig(path: Path, url: str, ca: Path, cert: Path, key: Path) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: engines\n  cluster:\n"
        f"    server: {url}\n    certificate-authority: {ca}\n"
        "users:\n- name: admin\n  user:\n"
        f"    client-certificate: {cert}\n    client-key: {key}\n"
        "contexts:\n- name: engines\n  context: {cluster: engines, user: admin}\n"
        "current-context: engines\n")
    return path


@contextmanager
def running_control_plane(directory: Path, *, kwok: bool = False, audit: bool = False,
                          scheduler: bool = False, controllers: Sequence[str] = (),
                          ) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver and kube-controller-manager (and kwok with ``kwok``; kube-scheduler
    with ``scheduler``, so pods need no ``spec.nodeName``; an audit log of every request's metadata
    with ``audit``; ``controllers`` beyond the usual ones, e.g. ``job``, ``cronjob``) on free ports
    under ``directory``; stopped, by PID, at the end."""
    etcd_bin = engine_binary("etcd", "etcd")
    apiserver_bin = engine_binary("kube", "kube-apiserver")
    manager_bin = engine_binary("kube", "kube-controller-manager")
    kwok_bin = engine_binary("kwok", "kwok") if kwok else None
    scheduler_bin = engine_binary("kube-scheduler", "kube-scheduler") if scheduler else None
    directory.mkdir(parents=True, exist_ok=True)
    pki = directory / "pki"
    pki.mkdir()
    authority = make_authority()
    ca = write_pem(pki / "ca.crt", authority.cert)
    serving, serving_key = authority.issue("kube-apiserver", server=True)
    admin, admin_key = authority.issue("admin", organization="system:masters")
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (pki / "sa.key").write_bytes(sa_key.private_bytes(serialization.Encoding.PEM,
                                                      serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()))
    (pki / "sa.pub").write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    admin_cert, admin_pem = write_pem(pki / "admin.crt", admin), write_pem(pki / "admin.key", admin_key)
    etcd_port, etcd_peer, api_port = free_port(), free_port(), free_port()
    url = f"https://127.0.0.1:{api_port}"
    kubeconfig = _kubeconfig(directory / "kubeconfig", url, ca, admin_cert, admin_pem)
    plane = ControlPlane(directory, url, kubeconfig, ca, authority)
    auditing: list[str | Path] = []
    if audit:
        policy = directory / "audit-policy.yaml"
        policy.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\n"
                          "rules:\n- level: Metadata\n")
        auditing = [f"--audit-policy-file={policy}", f"--audit-log-path={plane.audit_log}",
                    "--audit-log-format=json", "--audit-log-mode=blocking"]
    context = ssl.create_default_context(cafile=str(ca))
    context.load_cert_chain(admin_cert, admin_pem)
    with ExitStack() as stack:
        def run(name: str, argv: list[str | Path], **kwargs: dict[str, str]) -> Process:
            process = start_process(name, argv, directory, **kwargs)
            plane.processes[name] = process
            stack.callback(process.stop)
            return process

        etcd = run("etcd", [
            etcd_bin, "--name=engines", f"--data-dir={directory / 'etcd'}", "--unsafe-no-fsync",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=engines=http://127.0.0.1:{etcd_peer}", "--log-level=warn"])
        wait_ready(f"http://127.0.0.1:{etcd_port}/health", context, etcd, "etcd")
        apiserver = run("kube-apiserver", [
            apiserver_bin, f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={api_port}",
            f"--tls-cert-file={write_pem(pki / 'apiserver.crt', serving)}",
            f"--tls-private-key-file={write_pem(pki / 'apiserver.key', serving_key)}",
            f"--client-ca-file={ca}", "--authorization-mode=RBAC",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.96.0.0/16", "--disable-admission-plugins=ServiceAccount",
            "--endpoint-reconciler-type=none", "--enable-priority-and-fairness=false", "--profiling=false",
            "--v=1", *auditing])
        wait_ready(f"{url}/readyz", context, apiserver, "kube-apiserver")
        manager = run("kube-controller-manager", [
            manager_bin, f"--kubeconfig={kubeconfig}",
            f"--controllers={','.join((_CONTROLLERS, *controllers))}",
            "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            "--concurrent-deployment-syncs=5", "--concurrent-statefulset-syncs=5", "--v=1"])
        if kwok_bin is not None:
            run("kwok", [kwok_bin, f"--kubeconfig={kubeconfig}", "--manage-all-nodes=false",
                         f"--config={kwok_bin.parent / 'stages.yaml'}",
                         "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                         f"--server-address=127.0.0.1:{free_port()}", "--enable-crds="])
        if scheduler_bin is not None:
            run("kube-scheduler", [
                scheduler_bin, f"--kubeconfig={kubeconfig}", "--leader-elect=false",
                "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
                f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
                "--v=1"])
        if manager.popen.poll() is not None:  # ready is what it does: the tests wait on that
            raise RuntimeError(f"kube-controller-manager exited:\n{manager.tail()}")
        if kwok_bin is not None:
            with plane.api_client() as api:
                k8s.CoreV1Api(api).create_node({"metadata": {
                    "name": FAKE_NODE, "annotations": {"kwok.x-k8s.io/node": "fake"},
                    "labels": {"kubernetes.io/hostname": FAKE_NODE, "type": "kwok"}}})
                if scheduler_bin is not None:
                    schedulable(k8s.CoreV1Api(api))
        yield plane


def schedulable(core: k8s.CoreV1Api) -> None:
    """The fake node without the ``not-ready`` taint the API server puts on every new node (the
    node lifecycle controller, which would lift it once kwok reports Ready, is not run here)."""
    deadline = time.monotonic() + START_TIMEOUT
    while not (core.read_node(FAKE_NODE).spec.taints is None or
               core.patch_node(FAKE_NODE, {"spec": {"taints": None}}).spec.taints is None):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{FAKE_NODE} keeps its taints")
        time.sleep(0.2)

