"""FileWatch sees the kubelet's atomic ``..data`` swap of a Secret volume, and reads no content."""

from __future__ import annotations

import os
from pathlib import Path

from gitops_reloader.filewatch import FileWatch


def kubelet_volume(root: Path, files: dict[str, str], version: str) -> None:
    """Write ``files`` as the kubelet does: a timestamped dir, ``..data`` swapped atomically."""
    target = root / f"..{version}"
    target.mkdir()
    for name, text in files.items():
        (target / name).write_text(text)
    tmp = root / "..data_tmp"
    tmp.symlink_to(target.name)
    os.replace(tmp, root / "..data")
    for name in files:
        link = root / name
        if not link.is_symlink():
            link.symlink_to(f"..data/{name}")


def test_a_data_swap_is_seen_once(tmp_path: Path) -> None:
    kubelet_volume(tmp_path, {"known_hosts": "old"}, "2026_11_28_1")
    seen: list[list[str]] = []
    watch = FileWatch([str(tmp_path / "known_hosts"), ""], seen.append)
    assert watch.poll() == []
    kubelet_volume(tmp_path, {"known_hosts": "new"}, "2026_11_28_2")
    assert watch.poll() == [str(tmp_path / "known_hosts")]
    assert watch.poll() == []
    assert seen == [[str(tmp_path / "known_hosts")]]


def test_a_file_appearing_or_vanishing_is_a_change(tmp_path: Path) -> None:
    path = tmp_path / "token"
    seen: list[list[str]] = []
    watch = FileWatch([str(path)], seen.append)
    path.write_text("t")
    assert watch.poll() == [str(path)]
    path.unlink()
    assert watch.poll() == [str(path)]


def test_a_failing_listener_does_not_end_the_watch(tmp_path: Path) -> None:
    path = tmp_path / "key"
    def boom(paths: list[str]) -> None:
        raise RuntimeError("listener bug")
    watch = FileWatch([str(path)], boom)
    path.write_text("k")
    assert watch.poll() == [str(path)]
