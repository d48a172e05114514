"""RBAC-shaped authorization for the API test server, and SelfSubjectAccessReviews.

Off by default (every request allowed, as before). For a token given rules, it answers like
kube-apiserver's RBAC authorizer: a request no rule allows gets ``403 Forbidden`` with
the real message shape::

    deployments.apps is forbidden: User "system:serviceaccount:ops:reloader" cannot watch
    resource "deployments" in API group "apps" at the cluster scope

and ``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`` evaluates the same
rules (every authenticated user may create one, as ``system:basic-user`` allows).
A rule is an RBAC ``PolicyRule`` (``verbs``, ``apiGroups``, ``resources``, ``*`` allowed,
``resourceNames``), granted cluster-wide (a ClusterRoleBinding) or in the namespaces listed
(RoleBindings).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .status import ApiError, qualified

__all__ = ["Authorizer", "PolicyRule", "access_review", "rules_from_role"]

DEFAULT_USER = "system:serviceaccount:default:gitops-reloader"


@dataclass(frozen=True, slots=True)
class PolicyRule:
    """One RBAC rule, bound cluster-wide (``namespaces`` empty) or in those namespaces."""

    verbs: tuple[str, ...]
    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    resource_names: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()

    def allows(self, verb: str, group: str, resource: str, namespace: str, name: str) -> bool:
        """RBAC's ``RuleAllows`` plus the binding's scope."""
        if self.namespaces and namespace not in self.namespaces:
            return False
        return ((verb in self.verbs or "*" in self.verbs)
                and (group in self.api_groups or "*" in self.api_groups)
                and (resource in self.resources or "*" in self.resources)
                and (not self.resource_names or name in self.resource_names))


class Authorizer:
    """Thread-safe RBAC rules per bearer token; a token without rules may do anything.

    Tests keep their own unrestricted client for setup and give the controller a
    restricted token (:meth:`ApiServer.api_client` ``token=``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subjects: dict[str, tuple[str, tuple[PolicyRule, ...]]] = {}
        self._accepted: frozenset[str] | None = None

    def authenticate(self, tokens: Iterable[str]) -> None:
        """From now on, only ``tokens`` and the tokens given rules are accepted: a request with
        any other bearer token, or none, gets kube-apiserver's ``401 Unauthorized``."""
        with self._lock:
            self._accepted = frozenset(tokens)

    def authenticated(self, token: str) -> bool:
        """True unless :meth:`authenticate` was called and ``token`` is unknown."""
        with self._lock:
            return self._accepted is None or token in self._accepted or token in self._subjects

    def restrict(self, token: str, rules: Iterable[PolicyRule], user: str = DEFAULT_USER) -> None:
        """From now on, requests bearing ``token`` are ``user`` and only ``rules`` allow."""
        with self._lock:
            self._subjects[token] = (user, tuple(rules))

    def allows(self, token: str, verb: str, group: str, resource: str, namespace: str = "",
               name: str = "") -> bool:
        with self._lock:
            subject = self._subjects.get(token)
        return subject is None or any(r.allows(verb, group, resource, namespace, name) for r in subject[1])

    def check(self, token: str, verb: str, group: str, resource: str, namespace: str, name: str) -> None:
        """Raise kube-apiserver's 403 unless allowed."""
        if self.allows(token, verb, group, resource, namespace, name):
            return
        user = self._subjects[token][0]
        plural = resource.partition("/")[0]
        what = qualified(plural, group) + (f' "{name}"' if name else "")
        scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        details: dict[str, Any] = {"group": group, "kind": plural} if group else {"kind": plural}
        if name:
            details["name"] = name
        raise ApiError(403, f'{what} is forbidden: User "{user}" cannot {verb} resource '
                            f'"{resource}" in API group "{group}" {scope}', details=details)


def access_review(authorizer: Authorizer, token: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """Answer a SelfSubjectAccessReview as kube-apiserver does (``status.allowed``)."""
    spec = body.get("spec") or {}
    attrs = spec.get("resourceAttributes")
    if not isinstance(attrs, Mapping):
        raise ApiError(422, "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: "
                            "spec.resourceAttributes: Required value", reason="Invalid")
    resource = str(attrs.get("resource") or "")
    if attrs.get("subresource"):
        resource += f"/{attrs['subresource']}"
    allowed = authorizer.allows(token, str(attrs.get("verb") or ""), str(attrs.get("group") or ""), resource,
                                str(attrs.get("namespace") or ""), str(attrs.get("name") or ""))
    status: dict[str, Any] = {"allowed": allowed}
    if allowed:
        status["reason"] = "RBAC: allowed by the API test server's rules"
    return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None}, "spec": dict(spec), "status": status}


def rules_from_role(rules: Sequence[Mapping[str, Any]], namespaces: Sequence[str] = ()) -> list[PolicyRule]:
    """PolicyRules from a Role/ClusterRole's ``rules`` as written in YAML."""
    return [PolicyRule(tuple(r.get("verbs") or ()), tuple(r.get("apiGroups") or ()),
                       tuple(r.get("resources") or ()), tuple(r.get("resourceNames") or ()),
                       tuple(namespaces)) for r in rules]
