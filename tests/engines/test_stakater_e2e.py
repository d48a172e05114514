"""Stakater Reloader's own end-to-end suites, run against gitops-reloader and against Stakater.

The suites (Ginkgo v2, ``test/e2e/<suite>`` of Stakater's source, built by
``.ci/build-engines.sh`` into the engine cache as ``<suite>.test``, run by its Ginkgo CLI in
:data:`PROCS` processes, as its Makefile's ``GINKGO_PROCS`` would) run unchanged on a real
control plane (etcd, kube-apiserver, kube-controller-manager with the ``job`` and ``cronjob``
controllers, kube-scheduler, kwok playing the node; the Argo Rollouts CRD, with
``rolloutstatus.py`` reporting Rollouts ready as their controller would). They
install the reloader with ``helm`` from ``PATH``: here ``stakater_helm.py``, which renders a chart
with the suite's ``--set`` values and runs the container's command as a host process. Three
ways (those with Stakater's chart share a test worker and a control plane, the other has its own):

* ``gitops-reloader``: the project's own chart, our controller;
* ``gitops-reloader+stakater-chart``: Stakater's chart rendering the args for our binary (a team
  that swaps only the image);
* ``stakater``: Stakater's chart and Stakater's binary — the anchor, proving the harness.

Each run prints ``stakater-e2e <implementation> <suite>: N passed, M failed, K skipped``; specs
labelled ``csi`` (a CSI driver and Vault) and ``openshift`` (a DeploymentConfig API) are left
out by label, and counted as skipped. docs/real-engines.md keeps the last table.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import require, started
from controlplane import ENGINE_CACHE, ControlPlane, running_control_plane
from rolloutstatus import RolloutStatusPlayer

from gitops_reloader.testing.harness import wait_for

pytestmark = [pytest.mark.engines, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
STAKATER = ENGINE_CACHE / "stakater"
SUITES = ("core", "annotations", "advanced", "flags", "argo")
LABELS = "!csi && !openshift"
ROLLOUTS_CRD = ROOT / ".tools" / "crds" / "argoproj" / "argoproj.io_rollouts.json"
OURS = [str(Path(sys.executable).parent / "gitops-reloader")]
IMPLEMENTATIONS = {
    # name: (chart, the image's entrypoint, the environment variable that moves its address)
    "gitops-reloader": ("ours", OURS, "METRICS_ADDR"),
    "gitops-reloader+stakater-chart": ("theirs", OURS, "METRICS_ADDR"),
    "stakater": ("theirs", [str(STAKATER / "reloader")], ""),
}
SUITE_TIMEOUT = 1500  # seconds; the longest suite takes a few minutes
ATTEMPTS = 2
"""Ginkgo's own retry: a spec that fails is run once more, and counts as passed only if that run
passes; the line names it (``…, R passed on a second attempt``). The suites race a workload's
creation against its ConfigMap's change within ~60 ms; Stakater itself failed such specs here."""
PROCS = 3
"""Ginkgo processes per suite (its SynchronizedBeforeSuite shares one reloader among them; the
``flags`` specs, which each deploy their own, are ``Serial``)."""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane for the suites: a scheduler, the job and cronjob controllers, kwok."""
    if not (STAKATER / ".built").exists():
        require(f"{STAKATER} is not built (.ci/build-engines.sh needs ../shared/anchors/"
                "stakater-reloader-655a2b38-vendored.tar.gz)")
    for plane in started(running_control_plane(tmp_path_factory.mktemp("stakater") / "cp", kwok=True,
                                               scheduler=True, controllers=("job", "cronjob"))):
        env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig)}
        subprocess.run([real("kubectl"), "apply", "--server-side", "-f", str(ROLLOUTS_CRD)], check=True,
                       env=env, capture_output=True)
        established(env)  # before a suite asks: its set-up looks once, and sets isArgoRollouts if so
        with plane.api_client() as api, RolloutStatusPlayer(api):
            yield plane


def established(env: dict[str, str], timeout: float = 90.0) -> None:
    """Wait until the Rollouts CRD says Established (``kubectl wait`` can answer "not found" at once
    for a CRD just applied)."""
    def condition() -> subprocess.CompletedProcess[str]:
        return subprocess.run([real("kubectl"), "get", "crd/rollouts.argoproj.io", "-o",
                               'jsonpath={.status.conditions[?(@.type=="Established")].status}'],
                              env=env, capture_output=True, text=True, check=False)

    wait_for(lambda: condition().stdout.strip() == "True", timeout=timeout, interval=0.5,
             message=lambda: f"the Rollouts CRD Established (now: {condition()})")


def helm_dir(tmp: Path) -> Path:
    """A directory holding ``helm`` (the stand-in) and ``kubectl`` (the real one)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    stand_in = ROOT / "tests" / "engines" / "stakater_helm.py"
    (bin_dir / "helm").write_text(f'#!/bin/sh\nexec "{sys.executable}" "{stand_in}" "$@"\n')
    (bin_dir / "helm").chmod(0o755)
    return bin_dir


def real(tool: str) -> str:
    found = shutil.which(tool, path=f"{ROOT / '.tools' / 'bin'}:{os.environ.get('PATH', '')}")
    if found is None:
        require(f"{tool} not found (bash .ci/install-tools.sh)")
    assert found is not None
    return found


def counts(report: Path) -> dict[str, list[str]]:
    """Spec names by state, from Ginkgo's JSON report: the ``It`` specs, and a suite node
    (BeforeSuite, AfterSuite…) that failed, under its node type."""
    states: dict[str, list[str]] = {"passed": [], "failed": [], "skipped": [], "retried": []}
    for suite in json.loads(report.read_text()):
        for spec in suite.get("SpecReports") or []:
            state = spec.get("State", "")
            if spec.get("LeafNodeType") != "It":
                if state not in ("passed", "skipped"):
                    states["failed"].append(f"[{spec.get('LeafNodeType')}]")
                continue
            name = " ".join([*(spec.get("ContainerHierarchyTexts") or []), spec.get("LeafNodeText", "")])
            if state == "passed" and (spec.get("NumAttempts") or 1) > 1:
                states["retried"].append(name)
            states["passed" if state == "passed" else "skipped" if state in ("skipped", "pending") else
                   "failed"].append(name)
    return states


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.parametrize("implementation", [  # a test worker and a control plane per chart
    pytest.param(name, marks=pytest.mark.xdist_group(f"stakater-e2e-{chart}"))
    for name, (chart, _, _) in IMPLEMENTATIONS.items()])
def test_stakater_e2e_suite_passes(plane: ControlPlane, tmp_path: Path, implementation: str, suite: str,
                                   record_property: pytest.RecordProperty) -> None:
    chart, entrypoint, port_env = IMPLEMENTATIONS[implementation]
    directory = STAKATER / "stakater-reloader" / "test" / "e2e" / suite
    state, report = tmp_path / "helm-state", tmp_path / "report.json"
    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig),
           "PATH": f"{helm_dir(tmp_path)}:{Path(real('kubectl')).parent}:{os.environ.get('PATH', '')}",
           "STAKATER_HELM_REAL": real("helm"), "STAKATER_HELM_STATE": str(state),
           "STAKATER_HELM_CHART": chart, "STAKATER_HELM_OURS": str(ROOT / "helm" / "gitops-reloader"),
           "STAKATER_HELM_ENTRYPOINT": json.dumps(entrypoint), "STAKATER_HELM_PORT_ENV": port_env,
           "RELOADER_IMAGE": "localhost/reloader:e2e"}
    log = tmp_path / "suite.log"
    with one_at_a_time(not port_env), log.open("wb") as out:
        try:
            subprocess.run([str(STAKATER / "ginkgo"), "run", f"--procs={PROCS}", f"--label-filter={LABELS}",
                            f"--flake-attempts={ATTEMPTS}",
                            f"--json-report={report}", "--no-color", f"--timeout={SUITE_TIMEOUT}s",
                            str(directory / f"{suite}.test")],
                           cwd=directory, env=env, stdout=out, stderr=subprocess.STDOUT,
                           timeout=SUITE_TIMEOUT + 120, check=False)
        finally:
            stop_left_over(state, env)
    assert report.exists(), f"no report; the suite's output:\n{tail(log)}"
    states = counts(report)
    line = (f"stakater-e2e {implementation} {suite}: {len(states['passed'])} passed, "
            f"{len(states['failed'])} failed, {len(states['skipped'])} skipped"
            + (f" ({len(states['retried'])} passed on a second attempt: {'; '.join(states['retried'])})"
               if states["retried"] else ""))
    record_property("stakater-e2e", line)  # printed at the end of the run (conftest.py)
    assert not states["failed"], f"{line}\nfailed: {states['failed']}\n{tail(log)}\n{process_logs(state)}"
    assert states["passed"], line


@contextlib.contextmanager
def one_at_a_time(needed: bool) -> Iterator[None]:
    """A lock across test workers, where ``needed``: Stakater's binary binds port 9090, as in its pod."""
    if not needed:
        yield
        return
    with (ENGINE_CACHE / ".stakater-e2e.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def stop_left_over(state: Path, env: dict[str, str]) -> None:
    """A release the suite did not uninstall (it failed early): its process stopped, by PID."""
    for record in state.glob("*.json") if state.exists() else ():
        pid = json.loads(record.read_text())["pid"]
        subprocess.run([sys.executable, str(ROOT / "tests/engines/stakater_helm.py"), "uninstall",
                        record.stem], env=env, check=False)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def tail(path: Path, lines: int = 60) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


def process_logs(state: Path) -> str:
    logs = sorted(state.glob("*.log")) if state.exists() else []
    return "\n".join(f"--- {log.name}\n{tail(log, 30)}" for log in logs)
