"""Check that a release's versions agree and print its CHANGELOG section.

Usage: ``python3 .ci/release_notes.py [vX.Y.Z]``

Contract: the package version (``gitops_reloader.__version__``, the one version source),
the chart's ``version`` and ``appVersion`` and the newest released entry of CHANGELOG.md
(``## [X.Y.Z] - YYYY-MM-DD``, below ``## [Unreleased]``) must be the same ``X.Y.Z``; with a
tag argument, the tag must be ``v`` followed by it. On agreement the body of that
CHANGELOG entry is printed (the GitHub release notes) and the exit code is 0; otherwise
every disagreement is printed to stderr and the exit code is 1.

The parsing is pure (``released_versions``, ``section``, ``problems``) and tested by
``tests/unit/test_release.py``; ``main`` only reads the three files.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
CHANGELOG = REPO_ROOT / "CHANGELOG.md"
CHART = REPO_ROOT / "helm" / "gitops-reloader" / "Chart.yaml"

SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)")
# "## [1.2.3] - 2026-11-23"; "## [Unreleased]" has no date and is not a release.
RELEASE_HEADING = re.compile(r"^## \[(?P<version>[^\]\n]+)\] - (?P<date>\d{4}-\d{2}-\d{2})[ \t]*$", re.M)
ANY_HEADING = re.compile(r"^## ", re.M)
LINK_DEFINITIONS = re.compile(r"^\[[^\]\n]+\]: \S+[ \t]*$", re.M)


def released_versions(changelog: str) -> list[str]:
    """The versions of the dated entries, newest (top) first."""
    return [match["version"] for match in RELEASE_HEADING.finditer(changelog)]


def section(changelog: str, version: str) -> str | None:
    """The body of the entry for ``version`` (without its heading), or None if absent."""
    for match in RELEASE_HEADING.finditer(changelog):
        if match["version"] == version:
            following = ANY_HEADING.search(changelog, match.end())
            body = changelog[match.end(): following.start() if following else len(changelog)]
            return LINK_DEFINITIONS.sub("", body).strip()
    return None


def problems(package: str, chart: dict[str, object], changelog: str, tag: str | None = None) -> list[str]:
    """Every way the versions disagree; empty when a release of ``package`` may be cut."""
    found: list[str] = []
    if not SEMVER.fullmatch(package):
        found.append(f"package version {package!r} is not X.Y.Z")
    for key in ("version", "appVersion"):
        if str(chart.get(key)) != package:
            found.append(f"Chart.yaml {key} is {chart.get(key)!r}, the package version is {package!r}")
    versions = released_versions(changelog)
    if not versions:
        found.append("CHANGELOG.md has no '## [X.Y.Z] - YYYY-MM-DD' entry")
    elif versions[0] != package:
        found.append(f"the top CHANGELOG entry is {versions[0]!r}, the package version is {package!r}")
    elif not section(changelog, package):
        found.append(f"the CHANGELOG entry for {package} is empty")
    if tag is not None and tag != f"v{package}":
        found.append(f"tag {tag!r} is not 'v{package}'")
    return found


def package_version() -> str:
    """``gitops_reloader.__version__`` of this checkout (not of whatever is installed)."""
    sys.path.insert(0, str(REPO_ROOT))
    from gitops_reloader import __version__

    return __version__


def main(argv: Sequence[str]) -> int:
    tag = argv[0] if argv else None
    package = package_version()
    changelog = CHANGELOG.read_text(encoding="utf-8")
    chart = yaml.safe_load(CHART.read_text(encoding="utf-8"))
    found = problems(package, chart, changelog, tag)
    for problem in found:
        print(f"release_notes: {problem}", file=sys.stderr)
    if found:
        return 1
    print(section(changelog, package))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
