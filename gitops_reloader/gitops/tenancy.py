"""The tenancy policy: which workload may write which file and document of a repository.

A workload (namespace, kind, name) may only write its own document, within what the
repository's ``tenants`` (``--git-config``, :class:`~gitops_reloader.gitops.gitconfig.TenantRule`)
allow its namespace. The decisions, each a :class:`Decision`:

- :func:`may_use` — the repository: with ``tenants``, only namespaces an entry names;
  without, every namespace.
- :func:`may_write` — a file: with ``tenants``, only files matching the paths of an entry
  that names the namespace; without, every file (``paths`` of the repository apply anyway).
- :func:`may_edit` — a workload document (*exact identity*): the file must pass
  :func:`may_write`, and the document's kind and name must be the workload's, and its
  ``metadata.namespace`` the workload's namespace. A document without a namespace is
  deployed wherever its GitOps tool says: it is the workload's only when an entry
  covering the file says ``documentNamespace`` is the workload's namespace, or, when no
  covering entry says, when the Argo CD destination / Flux ``targetNamespace`` that
  deploys it (``deploy_namespace``) is the workload's namespace.
- :func:`may_target` — a ``git-target`` file (a Helm values file or patch has no
  identity to check): with ``tenants``, :func:`may_write`; without, only files inside
  the directories of the Argo CD Application, Flux Kustomization or HelmRelease (its
  chart and ``valuesFiles``) that deploys the workload (``scope``; ``None`` when none
  does: refused). A repository that trusts every namespace says so explicitly:
  ``tenants: [{namespaces: ["*"], paths: ["**"]}]``.

Reasons name the workload's namespace, the repository and the path the workload asked
for, never the content of a file (another team's document) nor another tenant's rules.
Pure: no I/O; globs match in linear time (:mod:`gitops_reloader.gitops.pathglob`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gitops_reloader.gitops.gitconfig import RepositoryConfig

__all__ = ["Decision", "DocumentIdentity", "may_edit", "may_target", "may_use", "may_write"]


@dataclass(frozen=True, slots=True)
class Decision:
    """Allowed, or denied with a reason fit for an Event on the attempting workload."""

    allowed: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.allowed


ALLOWED = Decision(True)


@dataclass(frozen=True, slots=True)
class DocumentIdentity:
    """Kind, name and ``metadata.namespace`` (``None`` when absent) of a document in git."""

    kind: str
    name: str
    namespace: str | None


def may_use(repo: RepositoryConfig, namespace: str) -> Decision:
    """Whether workloads of ``namespace`` may write to ``repo`` at all."""
    if not repo.tenants or any(rule.names(namespace) for rule in repo.tenants):
        return ALLOWED
    return Decision(False, f"namespace {namespace} may not write to repository {repo.name} "
                           "(its tenants policy does not name the namespace)")


def may_write(repo: RepositoryConfig, namespace: str, path: str) -> Decision:
    """Whether workloads of ``namespace`` may write the file at ``path`` of ``repo``."""
    used = may_use(repo, namespace)
    if not used:
        return used
    if not _normalized(path):
        return Decision(False, f"{path!r} is not a normalized repository path")
    if not repo.tenants or any(rule.names(namespace) and rule.covers(path) for rule in repo.tenants):
        return ALLOWED
    return Decision(False, f"namespace {namespace} may not write {path} in repository {repo.name} "
                           "(outside the paths its tenants policy allows)")


def may_edit(repo: RepositoryConfig, *, namespace: str, kind: str, name: str, path: str,
             document: DocumentIdentity, deploy_namespace: str | None = None) -> Decision:
    """Whether the workload ``namespace/kind/name`` may edit ``document`` in ``path``."""
    writable = may_write(repo, namespace, path)
    if not writable:
        return writable
    if (document.kind, document.name) != (kind, name):
        return Decision(False, f"the document in {path} is not {kind} {name}")
    if document.namespace is not None:
        if document.namespace == namespace:
            return ALLOWED
        return Decision(False, f"the {kind} {name} in {path} declares another namespace than {namespace}")
    declared = {rule.document_namespace for rule in repo.tenants
                if rule.document_namespace is not None and rule.covers(path)}
    if declared:
        if namespace in declared:
            return ALLOWED
        return Decision(False, f"the {kind} {name} in {path} has no namespace, and the tenants policy "
                               f"of repository {repo.name} deploys that file into another namespace")
    if deploy_namespace == namespace:
        return ALLOWED
    return Decision(False, f"the {kind} {name} in {path} has no namespace, and nothing says it is "
                           f"deployed into {namespace} (set documentNamespace in the repository's "
                           "tenants policy, or deploy it with an Argo CD Application / Flux "
                           "Kustomization whose destination is the namespace)")


def may_target(repo: RepositoryConfig, namespace: str, path: str,
               scope: Sequence[str] | None) -> Decision:
    """Whether a ``git-target`` of a workload in ``namespace`` may write ``path``.

    ``scope`` lists the directories (and files) of the Argo CD Application / Flux
    Kustomization / HelmRelease that deploys the workload (``""``: the whole
    repository; a HelmRelease's chart directory and ``valuesFiles``), ``None`` when none does;
    it matters only for a repository without ``tenants``.
    """
    writable = may_write(repo, namespace, path)
    if not writable or repo.tenants:
        return writable
    if scope is not None and any(not d or path == d or path.startswith(d.rstrip("/") + "/") for d in scope):
        return ALLOWED
    found = ("it is outside the path of the Argo CD Application or Flux Kustomization that deploys "
             "the workload") if scope is not None else \
        "no Argo CD Application or Flux Kustomization deploys the workload from this repository"
    return Decision(False, f"git-target {path} in repository {repo.name} is not allowed for namespace "
                           f"{namespace}: the repository has no tenants policy and {found} "
                           "(add a tenants entry that allows the file for the namespace)")


def _normalized(path: str) -> bool:
    """A relative path without empty, ``.`` or ``..`` segments (what globs are matched against)."""
    return bool(path) and not path.startswith("/") and "\\" not in path and all(
        segment not in ("", ".", "..") for segment in path.split("/"))
