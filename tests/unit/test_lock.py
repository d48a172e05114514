"""The lock (requirements/*.txt): every distribution the README's commands install is pinned
with a hash, the pins agree with pyproject.toml's ranges, and every installer uses them."""

from __future__ import annotations

import json
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = REPO_ROOT / "requirements"
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
LOCKS = ("runtime.txt", "test.txt", "build.txt", "crd-models.txt", "layer.txt")

_ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)((?:\s*\\\s*\n\s*--hash=sha256:[0-9a-f]{64})+)",
                    re.MULTILINE)


def locked(name: str) -> dict[str, Version]:
    """Canonical name -> pinned version of one lock file; fails on an entry without a hash."""
    text = (REQUIREMENTS / name).read_text(encoding="utf-8")
    requirement_lines = [line for line in text.splitlines()
                         if line and not line[0].isspace() and not line.startswith(("#", "-"))]
    entries = {canonicalize_name(m[1]): Version(m[2]) for m in _ENTRY.finditer(text)}
    assert len(entries) == len(requirement_lines), (
        f"{name}: every requirement is name==version with --hash lines: {requirement_lines}")
    return entries


@pytest.mark.parametrize("name", LOCKS)
def test_every_entry_is_pinned_with_a_sha256(name: str) -> None:
    assert locked(name), f"{name} locks nothing"


def pyproject_requirements(*extras: str) -> list[Requirement]:
    project = PYPROJECT["project"]
    out = [Requirement(spec) for spec in project["dependencies"]]
    for extra in extras:
        out += [Requirement(spec) for spec in project["optional-dependencies"][extra]]
    return out


@pytest.mark.parametrize(("lock", "requirements"), [
    ("runtime.txt", pyproject_requirements()),
    ("test.txt", pyproject_requirements("test", "release")
     + [Requirement(spec) for spec in PYPROJECT["build-system"]["requires"]]),
    ("build.txt", [Requirement(spec) for spec in PYPROJECT["build-system"]["requires"]]),
], ids=["runtime", "test", "build"])
def test_the_lock_agrees_with_the_ranges_in_pyproject(lock: str, requirements: list[Requirement]) -> None:
    pins = locked(lock)
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement} is not in requirements/{lock}"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"requirements/{lock} pins {name}=={pins[name]}, outside pyproject's {requirement}")


def test_runtime_test_and_build_locks_pin_the_same_versions() -> None:
    test = locked("test.txt")
    for lock in ("runtime.txt", "build.txt"):
        for name, version in locked(lock).items():
            assert test.get(name) == version, f"{name}: {lock} pins {version}, test.txt {test.get(name)}"


@pytest.mark.parametrize("lock", ["runtime.txt", "test.txt"])
def test_no_unpinned_transitive_dependency(lock: str) -> None:
    """Every dependency of every locked distribution (as its own installed metadata declares it,
    markers evaluated for this interpreter) is locked too. Read from the distributions installed
    at the locked version: all of them after the README's test command; a subset where newer
    releases are installed (``.ci/newest``). ``pip install --require-hashes`` checks the same
    when it installs the lock, and refuses a lock with a hole."""
    pins = locked(lock)
    environment = {**default_environment(), "extra": ""}
    missing: list[str] = []
    read = 0
    for name, version in pins.items():
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if Version(dist.version) != version:
            continue
        read += 1
        for spec in dist.requires or ():
            requirement = Requirement(spec)
            if requirement.marker and not requirement.marker.evaluate(environment):
                continue
            if canonicalize_name(requirement.name) not in pins:
                missing.append(f"{name} needs {requirement}")
    assert read, f"no distribution of requirements/{lock} is installed at its locked version"
    assert not missing, f"requirements/{lock} misses: {missing}"


def joined(script: str) -> str:
    """A shell script with its continuation lines joined."""
    return re.sub(r"\\\n\s*", " ", script)


def test_readme_commands_install_the_lock_with_hashes_and_the_project_without_resolving() -> None:
    commands = [line for line in README.splitlines() if line.startswith("pip install --require-hashes")]
    assert len(commands) == 2, commands
    demo, tests = commands
    assert "-r requirements/runtime.txt -r requirements/build.txt" in demo
    assert demo.endswith("gitops-reloader demo")
    assert "-r requirements/test.txt" in tests and tests.endswith("python3 -m pytest -q -n 4")
    for command in commands:
        assert "pip install --no-deps --no-build-isolation -e ." in command
        assert "[test]" not in command


def test_ci_runs_the_readme_test_command_as_it_stands() -> None:
    run = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'eval "${test_command}"' in run
    assert "grep -m1 -E '^pip install --require-hashes -r requirements/test.txt" in run


def test_the_image_installs_only_locked_hashed_wheels_and_its_own_without_deps() -> None:
    dockerfile = (REPO_ROOT / "Dockerfile").read_text(encoding="utf-8")
    installs = re.findall(r"pip (?:--python \S+ )?(?:install|wheel)[^&\n]*", joined(dockerfile))
    assert installs, "no pip call in the Dockerfile"
    for call in installs:
        assert "--require-hashes" in call or "--no-deps" in call, call
    assert "--no-build-isolation" in dockerfile
    ignore = (REPO_ROOT / ".dockerignore").read_text(encoding="utf-8")
    assert "!requirements/runtime.txt" in ignore and "!requirements/build.txt" in ignore


def test_npm_packages_are_exact_and_locked_with_integrity_hashes() -> None:
    project = REPO_ROOT / ".ci" / "crd-schemas"
    package = json.loads((project / "package.json").read_text(encoding="utf-8"))
    for name, version in package["dependencies"].items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{name}@{version} is not an exact version"
    lock = json.loads((project / "package-lock.json").read_text(encoding="utf-8"))
    packages = {path: entry for path, entry in lock["packages"].items() if path}
    assert packages
    for path, entry in packages.items():
        assert entry.get("integrity", "").startswith("sha512-"), f"{path} has no sha512 integrity"
    for name, version in package["dependencies"].items():
        assert packages[f"node_modules/{name}"]["version"] == version
    install_tools = (REPO_ROOT / ".ci" / "install-tools.sh").read_text(encoding="utf-8")
    assert "npm ci" in install_tools and "npm install " not in install_tools


def test_install_tools_downloads_only_hash_checked_files() -> None:
    install_tools = (REPO_ROOT / ".ci" / "install-tools.sh").read_text(encoding="utf-8")
    pip_calls = re.findall(r"-m pip (?:install|download)[^\n]*", joined(install_tools))
    assert len(pip_calls) >= 3
    for call in pip_calls:
        assert "--require-hashes" in call, call
