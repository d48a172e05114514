"""Releases: one version everywhere, the CHANGELOG entry a release publishes, the chart's image.

The package version (``gitops_reloader.__version__``), the chart's ``version`` and
``appVersion`` and the top CHANGELOG entry must agree; ``.ci/release_notes.py`` holds that
check (the release workflow runs it against the pushed tag) and is tested here on the real
files and on a table of broken ones. The chart's image reference is rendered with the real
helm binary: by default the GHCR repository the release workflow pushes to, tagged with
the chart's ``appVersion``; by digest when ``image.digest`` is set.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helm_tools import CHART_DIR, REPO_ROOT, render, require_helm, run_helm

from gitops_reloader import __version__
from gitops_reloader.cli import main as cli_main

SCRIPT = REPO_ROOT / ".ci" / "release_notes.py"
CHANGELOG = (REPO_ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
CHART = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text(encoding="utf-8"))
# The GHCR name .github/workflows/release.yml publishes (ghcr.io/<repository owner>/gitops-reloader).
IMAGE_REPOSITORY = "ghcr.io/gitops-reloader/gitops-reloader"
DIGEST = "sha256:" + "0123456789abcdef" * 4


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("release_notes", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


release_notes = load_script()


def changelog(*entries: str) -> str:
    return "# Changelog\n\n## [Unreleased]\n\n" + "".join(entries)


def entry(version: str, body: str = "### Added\n\n- a feature\n", date: str = "2026-11-23") -> str:
    return f"## [{version}] - {date}\n\n{body}\n"


# --------------------------------------------------------------------------- the real files


def test_package_chart_and_changelog_versions_agree() -> None:
    assert CHART["appVersion"] == __version__
    assert CHART["version"] == __version__
    assert release_notes.released_versions(CHANGELOG)[0] == __version__
    assert release_notes.problems(__version__, CHART, CHANGELOG) == []


def test_installed_metadata_is_read_from_the_one_version_source() -> None:
    pyproject = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in pyproject
    assert 'version = { attr = "gitops_reloader.__version__" }' in pyproject


def test_cli_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["--version"]) == 0
    assert capsys.readouterr().out == f"gitops-reloader {__version__}\n"


def test_script_prints_the_release_notes_for_the_matching_tag() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT), f"v{__version__}"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == release_notes.section(CHANGELOG, __version__)
    assert "## [" not in result.stdout, "only the one entry, without headings of others"


def test_script_refuses_a_tag_that_is_not_the_package_version() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT), "v99.0.0"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1
    assert result.stdout == ""
    assert f"tag 'v99.0.0' is not 'v{__version__}'" in result.stderr


# --------------------------------------------------------------------------- parsing, table-driven

CHART_OK = {"version": "1.2.3", "appVersion": "1.2.3"}


@pytest.mark.parametrize(
    ("package", "chart", "text", "tag", "expected"),
    [
        ("1.2.3", CHART_OK, changelog(entry("1.2.3"), entry("1.2.2")), "v1.2.3", []),
        ("1.2.3", CHART_OK, changelog(entry("1.2.3")), None, []),
        ("1.2.3", {"version": "1.2.3", "appVersion": 1.2}, changelog(entry("1.2.3")), None,
         ["Chart.yaml appVersion is 1.2, the package version is '1.2.3'"]),
        ("1.2.3", {"appVersion": "1.2.3"}, changelog(entry("1.2.3")), None,
         ["Chart.yaml version is None, the package version is '1.2.3'"]),
        ("1.2.3", CHART_OK, changelog(entry("1.2.2"), entry("1.2.3")), None,
         ["the top CHANGELOG entry is '1.2.2', the package version is '1.2.3'"]),
        ("1.2.3", CHART_OK, changelog(), None,
         ["CHANGELOG.md has no '## [X.Y.Z] - YYYY-MM-DD' entry"]),
        ("1.2.3", CHART_OK, changelog("## [1.2.3]\n\n- undated\n"), None,
         ["CHANGELOG.md has no '## [X.Y.Z] - YYYY-MM-DD' entry"]),
        ("1.2.3", CHART_OK, changelog(entry("1.2.3", body=""), entry("1.2.2")), None,
         ["the CHANGELOG entry for 1.2.3 is empty"]),
        ("1.2.3", CHART_OK, changelog(entry("1.2.3")), "1.2.3", ["tag '1.2.3' is not 'v1.2.3'"]),
        ("1.2.3", CHART_OK, changelog(entry("1.2.3")), "v1.2.4", ["tag 'v1.2.4' is not 'v1.2.3'"]),
        ("1.2.3rc1", {"version": "1.2.3rc1", "appVersion": "1.2.3rc1"}, changelog(entry("1.2.3rc1")),
         None, ["package version '1.2.3rc1' is not X.Y.Z"]),
        ("01.2.3", {"version": "01.2.3", "appVersion": "01.2.3"}, changelog(entry("01.2.3")),
         None, ["package version '01.2.3' is not X.Y.Z"]),
    ],
    ids=["agree-with-tag", "agree", "chart-appversion-number", "chart-version-missing",
         "changelog-not-newest-first", "changelog-no-release", "changelog-undated",
         "changelog-entry-empty", "tag-without-v", "tag-other-version", "pre-release",
         "leading-zero"],
)
def test_problems(package: str, chart: dict[str, Any], text: str, tag: str | None,
                  expected: list[str]) -> None:
    assert release_notes.problems(package, chart, text, tag) == expected


def test_section_is_the_entry_body_only() -> None:
    text = changelog(entry("1.2.3", "### Fixed\n\n- one\n"), entry("1.2.2", "### Added\n\n- two\n"))
    text += "[Unreleased]: https://example.invalid/compare/v1.2.3...HEAD\n"
    text += "[1.2.2]: https://example.invalid/releases/tag/v1.2.2\n"
    assert release_notes.released_versions(text) == ["1.2.3", "1.2.2"]
    assert release_notes.section(text, "1.2.3") == "### Fixed\n\n- one"
    assert release_notes.section(text, "1.2.2") == "### Added\n\n- two"
    assert release_notes.section(text, "9.9.9") is None


def test_section_parsing_is_linear_on_a_pathological_changelog() -> None:
    # One huge heading-like line that never closes: the patterns must not backtrack on it.
    text = changelog("## [" + "1." * 200_000 + "\n", entry("1.2.3"))
    assert release_notes.released_versions(text) == ["1.2.3"]
    assert release_notes.section(text, "1.2.3") == "### Added\n\n- a feature"


# --------------------------------------------------------------------------- workflows

WORKFLOWS = sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml"))
PINNED = re.compile(r"uses: [\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+")
LOCAL = re.compile(r"uses: \./\.github/workflows/[\w.-]+\.yml")


def test_workflows_exist() -> None:
    assert {path.name for path in WORKFLOWS} == {"ci.yml", "newest.yml", "release.yml"}


def test_newest_workflow_runs_weekly_and_on_demand_on_the_newest_releases() -> None:
    workflow = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "newest.yml").read_text())
    triggers = workflow[True]
    assert "workflow_dispatch" in triggers and len(triggers["schedule"]) == 1
    (job,) = workflow["jobs"].values()
    assert [step["run"] for step in job["steps"] if "run" in step] == ["bash .ci/newest"]
    script = (REPO_ROOT / ".ci" / "newest").read_text()
    assert "install --quiet --upgrade --upgrade-strategy eager -e '.[test,release]'" in script
    assert "requirements/" not in script.replace("requirements/test.txt", "")  # never the lock
    assert script.rstrip().endswith("python3 -m pytest -q -n 4")


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda path: path.name)
def test_every_action_is_pinned_by_commit_sha_with_its_release(workflow: Path) -> None:
    uses = [line.strip().removeprefix("- ") for line in workflow.read_text().splitlines()
            if line.strip().removeprefix("- ").startswith("uses:")]
    assert uses, "a workflow without steps"
    unpinned = [line for line in uses if not (PINNED.fullmatch(line) or LOCAL.fullmatch(line))]
    assert unpinned == []


def test_ci_workflow_runs_the_ci_script() -> None:
    workflow = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "ci.yml").read_text())
    triggers = workflow[True]  # PyYAML reads the key `on` as the boolean true
    assert {"push", "pull_request", "workflow_call"} <= set(triggers)
    (job,) = workflow["jobs"].values()
    assert [step["run"] for step in job["steps"] if "run" in step] == ["bash .ci/run"]


# --------------------------------------------------------------------------- the chart's image


@pytest.fixture(scope="module")
def helm() -> Path:
    return require_helm()


def image_of(docs: list[dict[str, Any]]) -> str:
    (deployment,) = [doc for doc in docs if doc["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container["image"]


@pytest.mark.parametrize(
    ("set_values", "expected"),
    [
        ({}, f"{IMAGE_REPOSITORY}:{CHART['appVersion']}"),
        ({"reloader.deployment.image.tag": "1.0.0"}, f"{IMAGE_REPOSITORY}:1.0.0"),
        ({"reloader.deployment.image.digest": DIGEST}, f"{IMAGE_REPOSITORY}@{DIGEST}"),
        ({"reloader.deployment.image.tag": "1.0.0", "reloader.deployment.image.digest": DIGEST},
         f"{IMAGE_REPOSITORY}@{DIGEST}"),
        ({"reloader.deployment.image.repository": "registry.example/mirror/reloader"},
         f"registry.example/mirror/reloader:{CHART['appVersion']}"),
    ],
    ids=["default-appversion", "tag", "digest", "digest-wins-over-tag", "mirror"],
)
def test_image_reference(helm: Path, tmp_path: Path, set_values: dict[str, str], expected: str) -> None:
    docs = render(helm, CHART_DIR, home=tmp_path, set_values=set_values)
    assert image_of(docs) == expected


def test_image_digest_must_be_a_sha256_digest(helm: Path, tmp_path: Path) -> None:
    result = run_helm(helm, ["template", "reloader", str(CHART_DIR),
                             "--set", "reloader.deployment.image.digest=latest"], home=tmp_path)
    assert result.returncode != 0
    assert "digest" in result.stderr


def test_chart_default_image_is_what_the_release_workflow_publishes() -> None:
    """One owner: the repository URL in pyproject, the chart's image, the workflow's GHCR name."""
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    repository_url = pyproject["project"]["urls"]["Repository"]
    owner = repository_url.removeprefix("https://github.com/").split("/")[0]
    assert f"ghcr.io/{owner.lower()}/gitops-reloader" == IMAGE_REPOSITORY
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text(encoding="utf-8"))
    assert values["reloader"]["deployment"]["image"]["repository"] == IMAGE_REPOSITORY
    dockerfile = (REPO_ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert f'org.opencontainers.image.source="{repository_url}"' in dockerfile
    workflow = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "release.yml").read_text())
    assert workflow["env"]["IMAGE"] == "ghcr.io/${{ github.repository_owner }}/gitops-reloader"
