"""The controller image: its size, start-to-ready inside the container, idle RSS inside it.

The image is the one ``.ci/build-image.sh`` builds (``localhost/gitops-reloader:ci``, on CI's
Debian bookworm base; build it first). Its size is podman's: the whole image, and the
layers above the base the build script recorded in the ``org.opencontainers.image.base.name``
label. Each run starts the API test server (its own process, plain HTTP, 127.0.0.1) seeded
with C ConfigMaps and D Deployments through its bulk-load path, then ``podman run`` the
image hardened as the chart runs it (uid 65532, read-only root, no capabilities, tmpfs
HOME and git cache) on the host's network with the server's kubeconfig mounted:

- ``ready_s``: from ``podman run`` to /readyz answering 200 (container start, Python start,
  discovery, the initial lists, caches synced);
- ``idle_rss_mb``: VmRSS of the container's PID 1 (read from the host's /proc) after
  ``SETTLE_S`` idle seconds past ready; ``empty_rss_mb`` is the same against an empty server.

    python bench/image.py            # 2,000 ConfigMaps, 400 Deployments, 3 runs
    python bench/image.py --quick    # 200 ConfigMaps, 40 Deployments, 1 run

Last line: one JSON object with the medians.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    apiserver_process,
    configmap_body,
    deployment_body,
    free_port,
    load_objects,
    rss_mb,
    scenario_main,
    wait_ready,
)

ROOT = Path(__file__).resolve().parent.parent
IMAGE = os.environ.get("GITOPS_RELOADER_IMAGE", "localhost/gitops-reloader:ci")
CONTAINERS_CONF = ROOT / ".tools" / "podman" / "containers.conf"
SETTLE_S = 5.0
HARDENED = ("--read-only", "--read-only-tmpfs=false", "--cap-drop=ALL",
            "--security-opt=no-new-privileges", "--user=65532:65532",
            "--tmpfs=/tmp:rw,mode=1777", "--tmpfs=/var/cache/gitops-reloader:rw,U")


def podman(*args: str) -> str:
    env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}
    done = subprocess.run(["podman", *args], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def sizes() -> dict[str, float]:
    total = int(podman("image", "inspect", "--format", "{{.Size}}", IMAGE))
    base = podman("image", "inspect", "--format",
                  '{{index .Labels "org.opencontainers.image.base.name"}}', IMAGE)
    base_size = int(podman("image", "inspect", "--format", "{{.Size}}", base))
    return {"image_mb": total / 1e6, "above_base_mb": (total - base_size) / 1e6}


def start_to_ready(kubeconfig: Path) -> tuple[float, float]:
    """(seconds from ``podman run`` to /readyz 200, idle VmRSS MiB of the container's PID 1)."""
    port = free_port()
    name = f"gitops-reloader-bench-{uuid.uuid4().hex[:10]}"
    started = time.monotonic()
    podman("run", "--detach", f"--name={name}", *HARDENED, "--network=host",
           f"--volume={kubeconfig}:/etc/kubeconfig:ro", IMAGE, "run", "--kubeconfig=/etc/kubeconfig",
           f"--http-address=127.0.0.1:{port}", "--log-level=warning")
    try:
        wait_ready(port)
        ready = time.monotonic() - started
        time.sleep(SETTLE_S)
        return ready, rss_mb(int(podman("inspect", "--format", "{{.State.Pid}}", name)))
    finally:
        podman("rm", "--force", "--time=0", name)


def run_once(quick: bool) -> dict[str, float]:
    configmaps, deployments = (200, 40) if quick else (2_000, 400)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        workdir.chmod(0o755)  # the kubeconfig is read by uid 65532 in the container
        with apiserver_process(workdir) as (_, kubeconfig):
            kubeconfig.chmod(0o644)
            _, empty_rss = start_to_ready(kubeconfig)
        with apiserver_process(workdir) as (url, kubeconfig):
            kubeconfig.chmod(0o644)
            load_objects(url, "configmaps",
                         (configmap_body(f"cm-{i}", {"k": str(i)}) for i in range(configmaps)))
            load_objects(url, "deployments",
                         (deployment_body(f"d-{i}", f"cm-{i}") for i in range(deployments)), group="apps")
            ready, idle_rss = start_to_ready(kubeconfig)
    return {**sizes(), "ready_s": ready, "idle_rss_mb": idle_rss, "empty_rss_mb": empty_rss,
            "configmaps": configmaps, "deployments": deployments}


if __name__ == "__main__":
    if not CONTAINERS_CONF.exists():
        sys.exit("run `bash .ci/build-image.sh` first (it writes .tools/podman/containers.conf)")
    sys.exit(scenario_main(__doc__ or "", "image.py", "The controller image", run_once))
