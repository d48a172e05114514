"""The image as the chart runs it: uid 65532, read-only root, no capabilities, no privilege
gain, writable HOME=/tmp and git cache only (``containers.HARDENED``)."""

from __future__ import annotations

import json

import pytest
from containers import HARDENED, IMAGE_USER, podman

import gitops_reloader

pytestmark = pytest.mark.container


def test_version_as_the_image_user_on_a_read_only_root(image: str) -> None:
    config = json.loads(podman("image", "inspect", "--format", "{{json .Config}}", image).stdout)
    assert config["User"] == IMAGE_USER
    assert config["Entrypoint"] == ["gitops-reloader"]
    out = podman("run", "--rm", *HARDENED, image, "--version")
    assert out.stdout.strip() == f"gitops-reloader {gitops_reloader.__version__}"


def test_demo_runs_its_full_loop_inside_the_hardened_container(image: str) -> None:
    out = podman("run", "--rm", *HARDENED, image, "demo")
    assert "demo finished: live patch for web, commit " in out.stdout, out.stdout + out.stderr
    assert "Traceback" not in out.stderr


def test_image_holds_the_runtime_and_git_ssh_clients_only(image: str) -> None:
    probe = """
        for tool in git ssh python3 gitops-reloader; do
          command -v "$tool" >/dev/null || echo "missing $tool"
        done
        for tool in gcc cc make; do command -v "$tool" >/dev/null && echo "has $tool"; done
        for path in /opt/venv/bin/pip /opt/build /root/.cache/pip /src /wheels /dist; do
          [ -e "$path" ] && echo "has $path"
        done
        python3 -c 'import gitops_reloader, os; print("package", os.path.dirname(gitops_reloader.__file__))'
        touch /tmp/written /var/cache/gitops-reloader/written || echo "has a read-only scratch directory"
        id -u; id -g
    """
    out = podman("run", "--rm", *HARDENED, "--entrypoint=sh", image, "-c", probe).stdout.splitlines()
    assert [line for line in out if line.startswith(("missing", "has"))] == []
    assert out[-3] == "package /opt/venv/lib/python3.11/site-packages/gitops_reloader"
    assert out[-2:] == ["65532", "65532"]
