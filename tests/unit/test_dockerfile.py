"""The Dockerfile's base: one pinned digest, both stages built on ``ARG BASE_IMAGE``."""

from __future__ import annotations

import re
from pathlib import Path

DOCKERFILE = (Path(__file__).resolve().parents[2] / "Dockerfile").read_text(encoding="utf-8")


def test_both_stages_start_from_the_base_argument_whose_default_is_the_pinned_release_base() -> None:
    froms = re.findall(r"^FROM (\S+)(?: AS (\S+))?$", DOCKERFILE, re.MULTILINE)
    assert froms[1:] == [("${BASE_IMAGE}", "build"), ("${BASE_IMAGE}", "")]
    (pinned, stage) = froms[0]
    assert stage == "release-base"
    assert re.fullmatch(r"python:3\.11-slim@sha256:[0-9a-f]{64}", pinned)
    # the stage Dependabot updates and the default every builder uses name one digest
    default = re.search(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE, re.MULTILINE)
    assert default is not None
    assert default.group(1) == pinned, "bump ARG BASE_IMAGE with the release-base FROM line"
    digest = pinned.split("@", 1)[1]
    assert f'org.opencontainers.image.base.digest="{digest}"' in DOCKERFILE


def test_the_runtime_stage_copies_the_venv_and_never_runs_pip() -> None:
    runtime = DOCKERFILE.split("FROM ${BASE_IMAGE}\n", 1)[1]
    assert "COPY --from=build /opt/venv /opt/venv" in runtime
    commands = re.findall(r"^RUN (.*?)(?<!\\)$", re.sub(r"#.*\n", "\n", runtime), re.MULTILINE | re.DOTALL)
    assert commands and not any("pip" in command for command in commands)
