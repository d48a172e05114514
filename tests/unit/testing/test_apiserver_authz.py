"""The API test server's RBAC-shaped authorizer: rule matching, 403 text, access reviews."""

from __future__ import annotations

import pytest

from gitops_reloader.testing.apiserver.authz import Authorizer, PolicyRule, access_review, rules_from_role
from gitops_reloader.testing.apiserver.status import ApiError

RULES = rules_from_role(
    [
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["key"]},
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["watch"]},
    ]
)


@pytest.fixture
def authorizer() -> Authorizer:
    authz = Authorizer()
    authz.restrict("sa", RULES, user="system:serviceaccount:ops:reloader")
    return authz


@pytest.mark.parametrize(
    ("verb", "group", "resource", "namespace", "name", "allowed"),
    [
        ("list", "apps", "deployments", "", "", True),
        ("patch", "apps", "deployments", "ns", "web", False),
        ("get", "", "secrets", "ops", "key", True),
        ("get", "", "secrets", "ops", "other", False),
        ("watch", "batch", "jobs", "", "", True),
        ("list", "apps", "deployments/status", "", "", False),
    ],
)
def test_rules(authorizer, verb, group, resource, namespace, name, allowed):
    assert authorizer.allows("sa", verb, group, resource, namespace, name) is allowed
    assert authorizer.allows("admin", verb, group, resource, namespace, name)  # unrestricted token


def test_namespaced_binding():
    rule = PolicyRule(("get",), ("",), ("secrets",), namespaces=("ops",))
    assert rule.allows("get", "", "secrets", "ops", "x")
    assert not rule.allows("get", "", "secrets", "other", "x")
    assert not rule.allows("get", "", "secrets", "", "x")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("watch2", "apps", "deployments", "", ""),
            'deployments.apps is forbidden: User "system:serviceaccount:ops:reloader" cannot watch2 resource '
            '"deployments" in API group "apps" at the cluster scope',
        ),
        (
            ("patch", "apps", "deployments", "ns", "web"),
            'deployments.apps "web" is forbidden: User "system:serviceaccount:ops:reloader" '
            'cannot patch resource "deployments" in API group "apps" in the namespace "ns"',
        ),
    ],
)
def test_forbidden_is_shaped_like_kube_apiserver(authorizer, args, message):
    with pytest.raises(ApiError) as caught:
        authorizer.check("sa", *args)
    assert caught.value.code == 403
    assert caught.value.body["reason"] == "Forbidden"
    assert caught.value.body["message"] == message


def test_access_review(authorizer):
    review = {"spec": {"resourceAttributes": {"verb": "list", "group": "apps", "resource": "deployments"}}}
    assert access_review(authorizer, "sa", review)["status"]["allowed"] is True
    review["spec"]["resourceAttributes"]["verb"] = "delete"
    assert access_review(authorizer, "sa", review)["status"] == {"allowed": False}
    with pytest.raises(ApiError) as caught:
        access_review(authorizer, "sa", {"spec": {}})
    assert caught.value.code == 422
