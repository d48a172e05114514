"""The README documents every flag the controller accepts."""

from pathlib import Path

from gitops_reloader.config import FLAGS

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_every_flag_is_in_the_readme_flags_table():
    missing = [spec.names[0] for spec in FLAGS if f"`{spec.names[0]}`" not in README]
    assert missing == []


def test_quick_start_has_the_demo_and_the_test_command():
    assert "gitops-reloader demo" in README
    assert "python3 -m pytest -q" in README
