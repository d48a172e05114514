"""The ``env-vars`` sink (Stakater's default): ``STAKATER_<NAME>_<TYPE>=<sha1>`` in the container.

Idempotent: no write when every env var already holds its hash. A deleted source removes
its env var (``--reload-on-delete``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from gitops_reloader.hashing import env_var_name
from gitops_reloader.kube.workloads import WorkloadRecord
from gitops_reloader.model import (
    Outcome,
    OutcomeStatus,
    ReloadRequest,
    SinkName,
    SourceRef,
    TemplateEdit,
)
from gitops_reloader.sinks.live import LivePatcher


def container_env(record: WorkloadRecord, adapter_template: Mapping[str, Any] | None,
                  container: str) -> dict[str, str | None]:
    """The plain env values of one container of a pod template (valueFrom → None)."""
    spec = (adapter_template or {}).get("spec") or {}
    for entry in spec.get("containers") or ():
        if isinstance(entry, Mapping) and entry.get("name") == container:
            return {
                str(e.get("name")): (None if "valueFrom" in e else e.get("value"))
                for e in entry.get("env") or () if isinstance(e, Mapping)
            }
    return {}


class EnvVarsSink:
    """Patch the env var of each changed source into the container that uses it."""

    name: ClassVar[str] = SinkName.ENV_VARS.value

    def __init__(self, patcher: LivePatcher) -> None:
        self.patcher = patcher

    def recorded_hash(self, record: WorkloadRecord, ref: SourceRef,
                      container: str | None) -> str | None:
        """The hash this workload records for ``ref`` (its env var), if any."""
        if container is None:
            return None
        template = self.patcher.adapters[record.ref.kind].pod_template(record.raw)
        return container_env(record, template, container).get(env_var_name(ref.name, ref.kind))

    def edit_for(self, request: ReloadRequest) -> TemplateEdit:
        """What must change so the workload records every item's hash (may be empty)."""
        record: WorkloadRecord = request.workload
        template = self.patcher.adapters[record.ref.kind].pod_template(record.raw)
        set_env: list[tuple[str, str, str]] = []
        remove_env: list[tuple[str, str]] = []
        for item in request.items:
            if item.container is None:
                continue
            name = env_var_name(item.source.ref.name, item.source.ref.kind)
            current = container_env(record, template, item.container)
            if item.deleted:
                if name in current:
                    remove_env.append((item.container, name))
            elif current.get(name) != item.source.hash or name not in current:
                set_env = [e for e in set_env if e[:2] != (item.container, name)]
                set_env.append((item.container, name, item.source.hash))
        return TemplateEdit(set_env=tuple(set_env), remove_env=tuple(remove_env))

    def emit(self, request: ReloadRequest) -> Outcome:
        edit = self.edit_for(request)
        if not edit:
            return Outcome(OutcomeStatus.ALREADY_CURRENT, self.name)
        self.patcher.apply(request.workload, edit, now=request.observed_at,
                           annotations=request.workload_annotations)
        return Outcome(OutcomeStatus.APPLIED, self.name, describe_env(edit))


def describe_env(edit: TemplateEdit) -> str:
    """``env NAME, ...``: the env vars an edit sets or removes (names only, never values)."""
    names = {n for _, n, _ in edit.set_env} | {n for _, n in edit.remove_env}
    return "env " + ", ".join(sorted(names))
