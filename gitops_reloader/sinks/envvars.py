"""The ``env-vars`` sink (Stakater's default): ``STAKATER_<NAME>_<TYPE>=<sha1>`` in the container.

Idempotent: no write when every env var already holds its hash. A deleted source removes
its env var (``--reload-on-delete``).

With ``prune`` (``--prune-stale-env-vars``) a write also removes, in the same patch, the
``STAKATER_*`` variables of sources a container no longer uses (:func:`stale_env_vars`);
pruning alone never causes a write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from gitops_reloader import policy
from gitops_reloader.hashing import ENV_VAR_PREFIX, env_var_name
from gitops_reloader.kube.workloads import WorkloadRecord
from gitops_reloader.model import (
    Outcome,
    OutcomeStatus,
    PodRefs,
    ReloadRequest,
    SinkName,
    SourceKind,
    SourceRef,
    TemplateEdit,
)
from gitops_reloader.sinks.live import RESTART_DETAIL, LivePatcher, restarting


def _kind_of(variable: str) -> SourceKind | None:
    """The source kind a ``STAKATER_*`` variable name ends in (None: not one of ours)."""
    if not variable.startswith(ENV_VAR_PREFIX):
        return None
    for kind in SourceKind:
        if variable.endswith("_" + kind.value):
            return kind
    return None


def kept_env_vars(refs: PodRefs, container: str) -> set[str]:
    """The ``STAKATER_*`` names container ``container`` may carry: one per source it uses
    (env, envFrom, a mounted volume), plus the sources whose variable goes to it because
    no regular container uses them (:func:`~gitops_reloader.policy.choose_container`)."""
    kept: set[str] = set()
    for kind in SourceKind:
        for name in refs.names(kind):
            uses = any(c.name == container and c.uses(kind, name) for c in refs.containers)
            if (uses or container in refs.volumes(kind).get(name, ())
                    or policy.choose_container(refs, kind, name) == container):
                kept.add(env_var_name(name, kind))
    return kept


def stale_env_vars(refs: PodRefs, container: str, env: Mapping[str, str | None], *,
                   listed: frozenset[SourceKind] = frozenset()) -> list[str]:
    """The ``STAKATER_<NAME>_<TYPE>`` variables of ``container`` whose source it no longer uses.

    A variable belongs to a source iff its name equals that source's converted name
    (:func:`~gitops_reloader.hashing.env_var_name`). Never another variable: one without
    the prefix and a type suffix, one set through ``valueFrom`` (not written by a
    reloader), or one of a type the workload has a reload list for (``listed``: a list
    may name sources the pod does not reference) stays.
    """
    kept = kept_env_vars(refs, container)
    return sorted(name for name, value in env.items()
                  if value is not None and name not in kept
                  and (kind := _kind_of(name)) is not None and kind not in listed)


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

    def __init__(self, patcher: LivePatcher, *, prune: bool = False) -> None:
        self.patcher = patcher
        self.prune = prune

    def recorded_hash(self, record: WorkloadRecord, ref: SourceRef,
                      container: str | None) -> str | None:
        """The hash this workload records for ``ref`` (its env var), if any."""
        if container is None:
            return None
        template = self.patcher.adapters[record.ref.kind].pod_template(record.raw)
        return container_env(record, template, container).get(env_var_name(ref.name, ref.kind))

    def recorded_after(self, request: ReloadRequest, ref: SourceRef, container: str | None) -> str | None:
        """The hash the workload records for ``ref`` once ``request`` is written (each source has
        a variable of its own: the request's items change theirs, no other)."""
        for item in request.items:
            if item.source.ref == ref and item.container == container:
                return None if item.deleted else item.source.hash
        return self.recorded_hash(request.workload, ref, container)

    def edit_for(self, request: ReloadRequest) -> TemplateEdit:
        """What must change so the workload records every item's hash (may be empty), with the
        restart annotation when the request must restart pods and nothing else changes."""
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
        if self.prune and (set_env or remove_env):
            remove_env += self._stale(record, template, {(c, n) for c, n, _ in set_env} | set(remove_env))
        return restarting(TemplateEdit(set_env=tuple(set_env), remove_env=tuple(remove_env)), request)

    def _stale(self, record: WorkloadRecord, template: Mapping[str, Any] | None,
               touched: set[tuple[str, str]]) -> list[tuple[str, str]]:
        """(container, name) of every stale variable in the regular containers."""
        keys = self.patcher.keys
        workload = policy.WorkloadView(record.ref, record.annotations, record.template_annotations,
                                       record.refs)
        listed = frozenset(kind for kind in SourceKind if policy.effective_annotations(
            workload, keys, kind).get(policy.list_key(kind, keys)))
        out: list[tuple[str, str]] = []
        for container in record.refs.containers:
            if container.init:
                continue
            env = container_env(record, template, container.name)
            out += [(container.name, name) for name in stale_env_vars(record.refs, container.name, env,
                                                                      listed=listed)
                    if (container.name, name) not in touched]
        return out

    def emit(self, request: ReloadRequest) -> Outcome:
        edit = self.edit_for(request)
        if not edit:
            return Outcome(OutcomeStatus.ALREADY_CURRENT, self.name)
        self.patcher.apply(request.workload, edit, now=request.observed_at,
                           annotations=request.workload_annotations)
        pruned = sum(1 for _, name in edit.remove_env
                     if not any(i.deleted and env_var_name(i.source.ref.name, i.source.ref.kind) == name
                                for i in request.items))
        if pruned and self.patcher.metrics is not None:
            self.patcher.metrics.env_vars_pruned(pruned)
        return Outcome(OutcomeStatus.APPLIED, self.name, describe_env(edit))


def describe_env(edit: TemplateEdit) -> str:
    """``env NAME, ...``: the env vars an edit sets or removes (names only, never values)."""
    names = {n for _, n, _ in edit.set_env} | {n for _, n in edit.remove_env}
    if not names:
        return RESTART_DETAIL
    return "env " + ", ".join(sorted(names))
