"""What the kubelet gives the controller's pod, made as files and podman options.

- The ServiceAccount volume at ``/var/run/secrets/kubernetes.io/serviceaccount``: ``token``
  (0600, owned by the pod's runAsUser, as the kubelet writes a projected token when the pod
  sets one), ``ca.crt`` and ``namespace`` (0644, root), plus ``KUBERNETES_SERVICE_HOST`` /
  ``_PORT``: what ``load_incluster_config`` reads.
- Secret volumes as the chart mounts git credentials: files ``defaultMode: 288`` (0440),
  group = the pod's ``fsGroup`` 65532, the directory only for that group.
- Single ConfigMap files (``subPath``): 0644, root.
- :class:`KubeletSecretVolume`: a Secret volume with the kubelet's ``..data`` layout, whose
  content can be rotated as the kubelet rotates it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
RUN_AS_USER = 65532
FS_GROUP = 65532
SECRET_MODE = 0o440  # the chart's defaultMode: 288


def _write(path: Path, text: str, mode: int, uid: int = 0, gid: int = 0) -> Path:
    path.write_text(text)
    os.chown(path, uid, gid)
    path.chmod(mode)
    return path


def service_account(directory: Path, *, token: str, ca_cert: Path, namespace: str,
                    api_port: int) -> list[str]:
    """The ServiceAccount volume and the in-cluster environment, as podman options."""
    directory.mkdir(parents=True)
    directory.chmod(0o755)
    _write(directory / "token", token, 0o600, uid=RUN_AS_USER, gid=FS_GROUP)
    _write(directory / "ca.crt", ca_cert.read_text(), 0o644)
    _write(directory / "namespace", namespace, 0o644)
    return [f"--volume={directory}:{SA_DIR}:ro", "--env=KUBERNETES_SERVICE_HOST=127.0.0.1",
            f"--env=KUBERNETES_SERVICE_PORT={api_port}"]


def secret_volume(directory: Path, files: Mapping[str, str], mount_path: str, *, mode: int = SECRET_MODE,
                  group: int = FS_GROUP, owner: int = 0) -> str:
    """A Secret volume (by default as the chart mounts it: 0440, owner root, group fsGroup); the
    podman ``--volume``. ``owner`` gives the files to another uid, as a projected volume or a CSI
    secrets driver gives them to the pod's runAsUser."""
    directory.mkdir(parents=True)
    os.chown(directory, 0, group)
    directory.chmod(0o750)
    for name, text in files.items():
        _write(directory / name, text, mode, uid=owner, gid=group)
    return f"--volume={directory}:{mount_path}:ro"


class KubeletSecretVolume:
    """A Secret volume laid out as the kubelet's atomic writer lays it out: the files of each
    version in a ``..<version>`` directory, ``..data`` a link to the current one, each file a
    link through ``..data``. :meth:`swap` publishes a new version the way the kubelet does when
    the Secret changes (a rotation): the new directory first, then one atomic rename of the
    ``..data`` link, so the pod never sees a half-written version."""

    def __init__(self, directory: Path, files: Mapping[str, str], *, mode: int = SECRET_MODE,
                 group: int = FS_GROUP) -> None:
        self.directory, self.mode, self.group, self.version = directory, mode, group, 0
        directory.mkdir(parents=True)
        os.chown(directory, 0, group)
        directory.chmod(0o750)
        self.swap(files)
        for name in files:
            (directory / name).symlink_to(f"..data/{name}")

    def volume(self, mount_path: str) -> str:
        """The podman ``--volume`` (the directory, links and all, read-only)."""
        return f"--volume={self.directory}:{mount_path}:ro"

    def swap(self, files: Mapping[str, str]) -> None:
        self.version += 1
        target = self.directory / f"..2026_11_28_00_00_{self.version:02d}.{os.getpid()}"
        target.mkdir()
        os.chown(target, 0, self.group)
        target.chmod(0o750)
        for name, text in files.items():
            _write(target / name, text, self.mode, gid=self.group)
        staged = self.directory / "..data_tmp"
        staged.symlink_to(target.name)
        os.replace(staged, self.directory / "..data")


def config_file(path: Path, text: str, mount_path: str) -> str:
    """One ConfigMap key mounted with ``subPath`` (0644); the podman ``--volume``."""
    _write(path, text, 0o644)
    return f"--volume={path}:{mount_path}:ro"
