"""podman for the container tests: find or build the image, run containers, stop them.

Every podman call reads the containers.conf that ``.ci/build-image.sh`` writes
(``.tools/podman/containers.conf``: runc, cgroupfs, limits this VM can set). Containers
are started detached under a name of our own and removed by that name in teardown.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitops_reloader.testing.harness import wait_for

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / ".ci" / "build-image.sh"
STATE_DIR = ROOT / ".tools" / "podman"
CONTAINERS_CONF = STATE_DIR / "containers.conf"
DEFAULT_IMAGE = "localhost/gitops-reloader:ci"
IMAGE_USER = "65532:65532"

HARDENED: tuple[str, ...] = (
    "--read-only", "--read-only-tmpfs=false", "--cap-drop=ALL", "--security-opt=no-new-privileges",
    f"--user={IMAGE_USER}",
    # podman 4.3 refuses tmpfs uid=/gid= options, and copies the image directory's mode but not
    # its owner onto a tmpfs mounted over it: /tmp (1777 in the image) keeps its mode, the git
    # cache (0755, owned by 65532) is chowned to the container user with U instead
    "--tmpfs=/tmp:rw,mode=1777", "--tmpfs=/var/cache/gitops-reloader:rw,U",
)
"""How the chart runs the image: uid 65532, read-only root, no capabilities, no privilege
gain, HOME=/tmp and the git cache on writable scratch space (the chart's emptyDirs)."""


class PodmanUnavailable(Exception):
    """podman is missing or cannot run containers on this machine (one line: why)."""


def podman_env() -> dict[str, str]:
    env = dict(os.environ)
    env["CONTAINERS_CONF"] = str(CONTAINERS_CONF)
    return env


def podman(*args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``podman ARGS`` with the CI containers.conf; output captured as text. With ``check``,
    a non-zero exit is an AssertionError that shows podman's stderr."""
    done = subprocess.run(["podman", *args], env=podman_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return done


def check_podman() -> None:
    """Raise :class:`PodmanUnavailable` unless podman is installed, we are root, and it answers
    ``info``."""
    if shutil.which("podman") is None:
        raise PodmanUnavailable("podman is not installed (bash .ci/build-image.sh installs it)")
    if os.geteuid() != 0:
        raise PodmanUnavailable("the container tests run podman as root (runc, overlay storage, "
                                "volume files owned by the pod's uid)")
    env = podman_env() if CONTAINERS_CONF.exists() else dict(os.environ)
    info = subprocess.run(["podman", "info", "--format", "{{.Host.OCIRuntime.Name}}"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["no output"])[-1]
        raise PodmanUnavailable(f"podman does not work here: {reason}")


def find_or_build_image() -> str:
    """The image the tests run.

    ``$GITOPS_RELOADER_IMAGE`` names one already built (``.ci/run`` builds it once before
    the tests and sets it); otherwise ``.ci/build-image.sh`` builds the working tree as
    ``localhost/gitops-reloader:ci``: a few seconds when nothing changed, since every layer
    comes from podman's cache. Parallel test workers take turns on a lock file, so one builds
    and the others reuse its layers.
    """
    given = os.environ.get("GITOPS_RELOADER_IMAGE")
    if given:
        if podman("image", "exists", given, check=False).returncode != 0:
            raise AssertionError(f"GITOPS_RELOADER_IMAGE={given} does not exist: bash .ci/build-image.sh")
        return given
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with (STATE_DIR / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        build = subprocess.run(["bash", str(BUILD_SCRIPT)], cwd=ROOT, capture_output=True, text=True,
                               timeout=1800, check=False)
    if build.returncode != 0:
        raise AssertionError(f"bash .ci/build-image.sh failed:\n{build.stderr[-4000:]}")
    return DEFAULT_IMAGE


@dataclass
class Container:
    """One detached container of ours, known by the name we gave it."""

    name: str

    def logs(self) -> str:
        out = podman("logs", self.name, check=False)
        return out.stdout + out.stderr

    def running(self) -> bool:
        state = podman("inspect", "--format", "{{.State.Running}}", self.name, check=False)
        return state.stdout.strip() == "true"

    def exit_code(self) -> int | None:
        """The exit status once it stopped; None while it runs."""
        state = podman("inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}", self.name,
                       check=False)
        running, _, code = state.stdout.strip().partition(" ")
        return None if running != "false" else int(code)

    def wait(self, predicate: Callable[[], Any], *, timeout: float, message: str,
             interval: float = 0.2) -> Any:
        """:func:`wait_for`, and on a timeout the container's log in the failure."""
        try:
            return wait_for(predicate, timeout=timeout, interval=interval, message=message)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- log of {self.name} ---\n{self.logs()[-6000:]}") from None

    def signal(self, name: str) -> None:
        podman("kill", f"--signal={name}", self.name)

    def remove(self) -> None:
        podman("rm", "--force", "--time=0", self.name, check=False)


@contextmanager
def running_container(image: str, args: Sequence[str], *,
                      options: Sequence[str] = HARDENED) -> Iterator[Container]:
    """``podman run --detach`` ``image`` with ``options`` and ``args``; removed on exit."""
    container = Container(f"gitops-reloader-test-{uuid.uuid4().hex[:12]}")
    podman("run", "--detach", f"--name={container.name}", *options, image, *args)
    try:
        yield container
    finally:
        container.remove()
