"""The Helm chart: lint, render every values file of the matrix, validate, check RBAC and args.

The matrix lives in ``helm/gitops-reloader/values-tests/``; each file names one feature
set. Rendering uses the real helm binary (``.ci/install-tools.sh``); a missing helm fails
these tests. Every rendered object is validated strictly with kubernetes-validate, and
the container args are fed to the controller's own flag parser.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

# tests/ is not a package: make tests/helm_tools.py importable from here.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import helm_tools
from helm_tools import CHART_DIR, render, require_helm, run_helm, validate_object

from gitops_reloader.config import FLAGS, Rollouts, load_config
from gitops_reloader.gitops.gitconfig import parse_git_config
from gitops_reloader.kube.permissions import required_permissions
from gitops_reloader.kube.workloads import adapters_for
from gitops_reloader.testing.apiserver.authz import rules_from_role
from gitops_reloader.windows import parse_windows

VALUES_DIR = CHART_DIR / "values-tests"
EXPECTED_MATRIX = {
    "default", "namespaced", "ha", "git-sink", "pull-request", "argo-rollouts-openshift",
    "ignore-secrets", "monitoring-pdb-netpol", "stakater-compat", "shards-by-label", "shards-by-hash",
    "state-store", "github-app-signing", "reload-windows",
}
NAMESPACE = "ops"
RELEASE = "reloader"
FULLNAME = "reloader-gitops-reloader"
KNOWN_FLAGS = frozenset(name for spec in FLAGS for name in spec.names)
READ = ["get", "list", "watch"]

Obj = dict[str, Any]


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def helm() -> Path:
    return require_helm()


@pytest.fixture(scope="module")
def helm_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("helm-home")


@pytest.fixture(scope="module")
def rendered(helm: Path, helm_home: Path) -> dict[str, list[Obj]]:
    """Every values file of the matrix, rendered once: name → objects."""
    return {
        path.stem: render(helm, CHART_DIR, home=helm_home, values_files=[path],
                          release=RELEASE, namespace=NAMESPACE)
        for path in sorted(VALUES_DIR.glob("*.yaml"))
    }


def values_files() -> list[str]:
    return sorted(path.stem for path in VALUES_DIR.glob("*.yaml"))


# --------------------------------------------------------------------------- helpers


def objects(docs: list[Obj], kind: str) -> list[Obj]:
    return [doc for doc in docs if doc["kind"] == kind]


def one(docs: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = [doc for doc in objects(docs, kind) if name is None or doc["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def container(docs: list[Obj]) -> Obj:
    containers = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def args_of(docs: list[Obj]) -> list[str]:
    args = container(docs)["args"]
    assert args[0] == "run", "the first arg must be the `run` sub-command"
    return args[1:]


def env_of(docs: list[Obj]) -> dict[str, str]:
    """The controller's environment as the pod would see it (fieldRef namespace resolved)."""
    return container_env(container(docs))


def container_env(c: Obj) -> dict[str, str]:
    """A container's environment as the pod would see it (fieldRef namespace resolved)."""
    env: dict[str, str] = {}
    for var in c.get("env", []):
        field = ((var.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if "value" in var:
            env[var["name"]] = var["value"]
        elif field == "metadata.namespace":
            env[var["name"]] = NAMESPACE
    return env


def flag_values(docs: list[Obj]) -> dict[str, str]:
    return dict(arg.split("=", 1) for arg in args_of(docs))


def load_rendered(docs: list[Obj], args: list[str], environ: dict[str, str]) -> Any:
    """``load_config`` of rendered ``args``: a file the chart mounts from its ConfigMaps
    (``/etc/gitops-reloader/<key>``) is read from the rendered ConfigMap instead."""
    mounted = {f"/etc/gitops-reloader/{key}": text for cm in objects(docs, "ConfigMap")
               for key, text in cm["data"].items()}
    directory = Path(tempfile.mkdtemp(prefix="chart-files-"))
    runnable = []
    for arg in args:
        flag, sep, value = arg.partition("=")
        if sep and value in mounted:
            local = directory / Path(value).name
            local.write_text(mounted[value])
            arg = f"{flag}={local}"
        runnable.append(arg)
    return load_config(runnable, environ=environ)


def deployment_args(docs: list[Obj]) -> dict[str, list[str]]:
    """Deployment name → its controller args after `run` (one Deployment per shard)."""
    out: dict[str, list[str]] = {}
    for doc in objects(docs, "Deployment"):
        [only] = doc["spec"]["template"]["spec"]["containers"]
        assert only["args"][0] == "run", "the first arg must be the `run` sub-command"
        out[doc["metadata"]["name"]] = only["args"][1:]
    assert out, "no Deployment"
    return out


def all_rules(docs: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    """(role, rule) for every rule of every Role and ClusterRole."""
    for role in objects(docs, "ClusterRole") + objects(docs, "Role"):
        for rule in role["rules"]:
            yield role, rule


FAILURE_RECORD_CREATE = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}
"""The "-self" Role's create rule of the failure record (always there; meta-info shares it)."""


def failure_record_rules(docs: list[Obj]) -> list[Obj]:
    """The rules of the "-self" Role for the failure record ConfigMaps (``<lease>-failures``)."""
    return [rule for role, rule in all_rules(docs)
            if role["kind"] == "Role" and role["metadata"]["name"].endswith("-self")
            and (rule == FAILURE_RECORD_CREATE or (
                rule.get("resourceNames") and all(n.endswith("-failures") for n in rule["resourceNames"])))]


def verbs_for(docs: list[Obj], group: str, resource: str) -> set[str]:
    """All verbs granted on ``group/resource`` by any rule (with or without resourceNames),
    besides the failure record's own rules (checked by themselves)."""
    record = failure_record_rules(docs)
    return {
        verb
        for _, rule in all_rules(docs)
        if group in rule["apiGroups"] and resource in rule["resources"] and rule not in record
        for verb in rule["verbs"]
    }


def unrestricted_verbs(docs: list[Obj], group: str, resource: str) -> set[str]:
    """Verbs granted on ``group/resource`` without a resourceNames restriction."""
    return {
        verb
        for _, rule in all_rules(docs)
        if group in rule["apiGroups"] and resource in rule["resources"]
        and not rule.get("resourceNames")
        for verb in rule["verbs"]
    }


def main_role(docs: list[Obj]) -> Obj:
    return one(docs, "ClusterRole") if objects(docs, "ClusterRole") else one(docs, "Role", FULLNAME)


# --------------------------------------------------------------------------- lint, render, validate


def test_values_matrix_is_complete() -> None:
    assert set(values_files()) >= EXPECTED_MATRIX


@pytest.mark.parametrize("values", [None, *values_files()])
def test_helm_lint_strict(helm: Path, helm_home: Path, values: str | None) -> None:
    args = ["lint", "--strict", str(CHART_DIR)]
    if values:
        args += ["--values", str(VALUES_DIR / f"{values}.yaml")]
    result = run_helm(helm, args, home=helm_home)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("values", values_files())
def test_every_rendered_object_validates_strictly(rendered: dict[str, list[Obj]], values: str) -> None:
    docs = rendered[values]
    assert docs, "nothing rendered"
    problems = [problem for doc in docs for problem in validate_object(doc)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("values", values_files())
def test_core_objects_always_rendered(rendered: dict[str, list[Obj]], values: str) -> None:
    docs = rendered[values]
    for kind in ("ServiceAccount", "Deployment", "Service"):
        assert objects(docs, kind), f"{kind} missing"
    for doc in docs:
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding", "PodMonitor"):
            continue
        if doc["metadata"]["name"] == f"{FULLNAME}-gitops":  # Argo CD / Flux Roles live in their namespaces
            assert doc["kind"] in ("Role", "RoleBinding")
            continue
        if values == "scoped-namespaces" and doc["kind"] in ("Role", "RoleBinding"):
            continue  # one in each watched namespace (test_scoped_namespaces_get_a_role_each…)
        assert doc["metadata"]["namespace"] == NAMESPACE, doc["kind"]


def test_validator_rejects_unknown_fields_and_unknown_groups() -> None:
    """Guard for the guard: strict validation really fails on typos."""
    bad_field = {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "dataa": {},
    }
    assert validate_object(bad_field)
    unknown_group = {"apiVersion": "example.invalid/v1", "kind": "Thing", "metadata": {"name": "x"}}
    assert validate_object(unknown_group)
    crd = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
           "metadata": {"name": "x"}, "spec": {"anything": True}}
    assert validate_object(crd) == []


# --------------------------------------------------------------------------- args


@pytest.mark.parametrize("values", values_files())
def test_every_arg_is_a_known_flag(rendered: dict[str, list[Obj]], values: str) -> None:
    for arg in (arg for args in deployment_args(rendered[values]).values() for arg in args):
        assert arg.startswith("--") and "=" in arg, f"{arg!r}: use --flag=value"
        name = arg.split("=", 1)[0]
        assert name in KNOWN_FLAGS, f"{name} is not in gitops_reloader.config.FLAGS"


@pytest.mark.parametrize("values", values_files())
def test_args_are_accepted_by_the_controller(rendered: dict[str, list[Obj]], values: str) -> None:
    for args in deployment_args(rendered[values]).values():
        load_rendered(rendered[values], args, {"POD_NAMESPACE": NAMESPACE})


def test_default_args_are_minimal(rendered: dict[str, list[Obj]]) -> None:
    # The OpenShift flag is always explicit so the controller never watches a kind
    # it has no RBAC for (it would otherwise detect DeploymentConfigs by discovery).
    assert args_of(rendered["default"]) == ["--is-openshift=false", f"--lease-name={FULLNAME}"]
    config = load_config(args_of(rendered["default"]), environ={"POD_NAMESPACE": NAMESPACE})
    assert config.filters.namespaces == ()
    assert config.gitops.config_file == ""


def test_stakater_values_file_keeps_stakater_defaults(rendered: dict[str, list[Obj]]) -> None:
    docs = rendered["stakater-compat"]
    assert args_of(docs) == ["--is-openshift=false", f"--lease-name={FULLNAME}"]
    assert main_role(docs)["kind"] == "ClusterRole"
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 65534  # the user's value wins
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def test_namespaced_args(rendered: dict[str, list[Obj]]) -> None:
    flags = flag_values(rendered["namespaced"])
    assert flags["--namespaces"] == NAMESPACE
    assert flags["--reload-strategy"] == "annotations"
    assert flags["--namespaces-to-ignore"] == "kube-system,kube-public"
    assert flags["--resource-label-selector"] == "reloader=enabled"
    assert flags["--log-format"] == "json"
    assert flags["--log-level"] == "debug"


def test_ha_args(rendered: dict[str, list[Obj]]) -> None:
    flags = flag_values(rendered["ha"])
    assert flags["--enable-ha"] == "true"
    assert flags["--lease-name"] == FULLNAME
    assert flags["--leader-election-release-on-cancel"] == "true"
    for flag in ("--reload-on-create", "--reload-on-delete", "--sync-after-restart",
                 "--auto-reload-all"):
        assert flags[flag] == "true"
    assert flags["--coalesce-window"] == "5s"
    assert flags["--namespace-selector"] == "reloader.stakater.com/watch=true"
    assert one(rendered["ha"], "Deployment")["spec"]["replicas"] == 2


def test_dry_run_arg(helm: Path, helm_home: Path) -> None:
    docs = render(helm, CHART_DIR, home=helm_home, set_values={"reloader.dryRun": "true"})
    assert flag_values(docs)["--dry-run"] == "true"
    assert load_config(args_of(docs), environ={"POD_NAMESPACE": NAMESPACE}).runtime.dry_run


@pytest.mark.parametrize(("values", "expected"), [
    ({}, Rollouts()),
    ({"reloader.rollouts.maxConcurrent": "50", "reloader.rollouts.maxConcurrentPerNamespace": "5",
      "reloader.rollouts.timeout": "5m"},
     Rollouts(max_concurrent=50, max_per_namespace=5, timeout=300.0, hold_on_failure=True)),
    ({"reloader.rollouts.maxConcurrent": "10", "reloader.rollouts.holdOnFailedRollout": "false"},
     Rollouts(max_concurrent=10, hold_on_failure=False)),
])
def test_rollout_waves_args(helm: Path, helm_home: Path, values: dict[str, str], expected: Rollouts) -> None:
    docs = render(helm, CHART_DIR, home=helm_home, set_values=values)
    assert load_config(args_of(docs), environ={"POD_NAMESPACE": NAMESPACE}).rollouts == expected


def test_replicas_need_ha(helm: Path, helm_home: Path) -> None:
    docs = render(helm, CHART_DIR, home=helm_home,
                  set_values={"reloader.deployment.replicas": "3"})
    assert one(docs, "Deployment")["spec"]["replicas"] == 1


def test_ignore_args(rendered: dict[str, list[Obj]]) -> None:
    flags = flag_values(rendered["ignore-secrets"])
    assert flags["--resources-to-ignore"] == "secrets"
    assert flags["--ignored-workload-types"] == "jobs,cronjobs"
    assert flags["--reload-strategy"] == "env-vars"
    config = load_config(args_of(rendered["ignore-secrets"]), environ={})
    assert config.filters.ignore_secrets
    assert config.filters.ignored_workload_types == ("jobs", "cronjobs")


def test_argo_rollouts_openshift_args(rendered: dict[str, list[Obj]]) -> None:
    args = args_of(rendered["argo-rollouts-openshift"])
    assert "--is-Argo-Rollouts=true" in args
    assert "--is-openshift=true" in args
    assert "--webhook-url=https://hooks.acme.example/reloader" in args
    assert "--configmap-annotation=acme.example/configmap-reload" in args
    assert "--secret-annotation=acme.example/secret-reload" in args
    assert "--auto-annotation=acme.example/auto" in args
    assert "--secretproviderclass-annotation=acme.example/spc-reload" in args
    assert "--enable-csi-integration=true" in args


def test_git_args_point_at_the_mounted_config(rendered: dict[str, list[Obj]]) -> None:
    docs = rendered["git-sink"]
    flags = flag_values(docs)
    assert flags["--git-config"] == "/etc/gitops-reloader/git-config.yaml"
    assert flags["--git-cache-dir"] == "/var/cache/gitops-reloader"
    assert flags["--digest-key-secret"] == f"{FULLNAME}-digest-key"
    assert flags["--request-refresh"] == "false"
    assert flags["--reload-strategy"] == "annotations"
    mounts = {m["mountPath"]: m for m in container(docs)["volumeMounts"]}
    assert mounts[flags["--git-config"]]["readOnly"] is True
    assert flags["--git-cache-dir"] in mounts
    pr_flags = flag_values(rendered["pull-request"])
    assert pr_flags["--pr-grouping"] == "repository"
    assert pr_flags["--digest-key-secret"] == "reloader-hmac"
    assert pr_flags["--request-refresh"] == "true"


# --------------------------------------------------------------------------- git config


def git_config(docs: list[Obj]) -> Obj:
    configmap = one(docs, "ConfigMap", f"{FULLNAME}-git")
    return yaml.safe_load(configmap["data"]["git-config.yaml"])


def test_git_config_references_mounted_credentials(rendered: dict[str, list[Obj]]) -> None:
    docs = rendered["git-sink"]
    repos = {repo["name"]: repo for repo in git_config(docs)["repositories"]}
    base = "/etc/gitops-reloader/credentials"
    assert repos["platform"]["tokenFile"] == f"{base}/platform/token"
    assert repos["platform"]["author"] == {"name": "gitops-reloader",
                                           "email": "gitops-reloader@acme.example"}
    assert "sshKeyFile" not in repos["platform"]
    assert repos["infra"]["sshKeyFile"] == f"{base}/infra/ssh-privatekey"
    assert repos["infra"]["knownHostsFile"] == f"{base}/infra/known_hosts"
    assert "tokenFile" not in repos["infra"]
    for repo in repos.values():
        assert "credentialsSecret" not in repo  # a Secret name means nothing to the controller
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    mounts = {mount["mountPath"]: mount for mount in pod["containers"][0]["volumeMounts"]}
    for name, secret in (("platform", "platform-git-token"), ("infra", "infra-git-ssh")):
        mount = mounts[f"{base}/{name}"]
        assert mount["readOnly"] is True
        assert volumes[mount["name"]]["secret"]["secretName"] == secret
    assert volumes["git-cache"]["emptyDir"] == {"sizeLimit": "1Gi"}


@pytest.mark.parametrize("values", ["git-sink", "pull-request"])
def test_rendered_git_config_is_accepted_by_the_controller(rendered: dict[str, list[Obj]],
                                                           values: str) -> None:
    configmap = one(rendered[values], "ConfigMap", f"{FULLNAME}-git")
    config = parse_git_config(configmap["data"]["git-config.yaml"], source=values)
    assert config.repositories


def test_git_config_aliases_are_passed_through(rendered: dict[str, list[Obj]]) -> None:
    configmap = one(rendered["git-sink"], "ConfigMap", f"{FULLNAME}-git")
    config = parse_git_config(configmap["data"]["git-config.yaml"])
    platform = config.get("platform")
    assert platform is not None and platform.aliases == ("ssh://git@github.com/acme/platform",)
    assert config.by_url("git@github.com:acme/platform.git") == [platform]  # the scp-like form of the alias
    assert config.by_url("https://github.com/acme/platform") == [platform]


def test_github_app_and_signing_key_secrets_are_mounted_and_configured(
        rendered: dict[str, list[Obj]]) -> None:
    docs = rendered["github-app-signing"]
    config = parse_git_config(one(docs, "ConfigMap", f"{FULLNAME}-git")["data"]["git-config.yaml"])
    apps, infra = config.get("apps"), config.get("infra")
    assert apps is not None and infra is not None
    base = "/etc/gitops-reloader"
    assert apps.github_app is not None and apps.github_app.app_id == "123456"
    assert apps.github_app.private_key_file == f"{base}/github-app/apps/private-key.pem"
    assert apps.github_app.installation_id == 7890 and apps.token_file == ""
    assert apps.pull_request is not None and apps.pull_request.token_file == ""  # the App's tokens
    assert infra.ssh_key_file == f"{base}/credentials/infra/ssh-privatekey"  # git over SSH ...
    assert infra.github_app is not None and infra.github_app.api_url == "https://ghe.acme.example/api/v3"
    assert apps.signing_key is not None and apps.signing_key.format == "ssh"
    assert infra.signing_key is not None and infra.signing_key.format == "openpgp"
    assert infra.signing_key.file == f"{base}/signing/infra/signing-key"
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    volumes = {volume["name"]: volume["secret"] for volume in pod["volumes"] if "secret" in volume}
    assert volumes["app-apps"] == {"secretName": "acme-reloader-app", "defaultMode": 0o440,
                                   "items": [{"key": "private-key.pem", "path": "private-key.pem"}]}
    assert volumes["sign-infra"]["secretName"] == "infra-gpg"
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["sign-apps"] == f"{base}/signing/apps" and mounts["app-infra"] == f"{base}/github-app/infra"


def test_reload_windows_are_rendered_mounted_and_accepted_by_the_controller(
        rendered: dict[str, list[Obj]]) -> None:
    docs = rendered["reload-windows"]
    text = one(docs, "ConfigMap", f"{FULLNAME}-reload-windows")["data"]["reload-windows.yaml"]
    windows = parse_windows(text)
    assert sorted(windows.windows) == ["sunday-morning", "weeknights"] and windows.default == "weeknights"
    assert windows.windows["weeknights"].duration == 6 * 3600
    args = args_of(docs)
    assert "--reload-windows-config=/etc/gitops-reloader/reload-windows.yaml" in args
    assert "--max-reloads-per-workload=3/1h" in args
    pod = one(docs, "Deployment")["spec"]["template"]
    assert "checksum/reload-windows" in pod["metadata"]["annotations"]
    mounts = {m["name"]: m for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert mounts["reload-windows"]["mountPath"] == "/etc/gitops-reloader/reload-windows.yaml"
    assert not objects(rendered["default"], "ConfigMap")  # nothing without windows
    # Namespaces may choose a window by annotation: the controller reads them (cluster-wide only).
    assert {"get", "list", "watch"} <= verbs_for(docs, "", "namespaces")
    assert not verbs_for(rendered["default"], "", "namespaces")


def test_git_config_pull_request_settings(rendered: dict[str, list[Obj]]) -> None:
    repos = {repo["name"]: repo for repo in git_config(rendered["pull-request"])["repositories"]}
    assert repos["apps"]["pullRequest"] == {
        "enabled": True, "host": "github", "apiUrl": "https://api.github.com",
        "grouping": "repository",
    }
    assert repos["edge"]["pullRequest"]["host"] == "gitea"


def test_git_config_change_rolls_the_controller(rendered: dict[str, list[Obj]]) -> None:
    def checksum(docs: list[Obj]) -> str:
        return one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"][
            "checksum/git-config"]

    assert checksum(rendered["git-sink"]) != checksum(rendered["pull-request"])


@pytest.mark.parametrize("values", ["default", "namespaced", "ha", "ignore-secrets"])
def test_no_git_objects_without_repositories(rendered: dict[str, list[Obj]], values: str) -> None:
    docs = rendered[values]
    assert not objects(docs, "ConfigMap")
    assert not any(arg.startswith("--git-") for arg in args_of(docs))
    volumes = {v["name"] for v in one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes == {"tmp"}


# --------------------------------------------------------------------------- deployment


@pytest.mark.parametrize("values", values_files())
def test_probes_ports_and_security(rendered: dict[str, list[Obj]], values: str) -> None:
    docs = rendered[values]
    for deployment in objects(docs, "Deployment"):
        probes_ports_and_security(docs, deployment)


def probes_ports_and_security(docs: list[Obj], deployment: Obj) -> None:
    [c] = deployment["spec"]["template"]["spec"]["containers"]
    assert c["ports"] == [{"name": "http", "containerPort": 9090, "protocol": "TCP"}]
    assert c["livenessProbe"]["httpGet"] == {"path": "/live", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    security = c["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert security["runAsNonRoot"] is True
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]
    env = {e["name"] for e in c["env"]}
    assert {"POD_NAMESPACE", "POD_NAME"} <= env
    service = one(docs, "Service")
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    assert service["spec"]["ports"][0]["port"] == 9090


def test_default_pod_security(rendered: dict[str, list[Obj]]) -> None:
    pod = one(rendered["default"], "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["runAsNonRoot"] is True


def test_alert_env_from_values(rendered: dict[str, list[Obj]]) -> None:
    docs = rendered["git-sink"]
    env = {e["name"]: e for e in container(docs)["env"]}
    assert env["ALERT_ON_RELOAD"]["value"] == "true"
    assert env["ALERT_SINK"]["value"] == "slack"
    assert env["ALERT_WEBHOOK_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": FULLNAME, "key": "ALERT_WEBHOOK_URL"}
    assert "ALERT_WEBHOOK_URL" in one(docs, "Secret", FULLNAME)["data"]


# --------------------------------------------------------------------------- RBAC


def test_default_rbac(rendered: dict[str, list[Obj]]) -> None:
    docs = rendered["default"]
    role = main_role(docs)
    assert role["kind"] == "ClusterRole"
    binding = one(docs, "ClusterRoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "ClusterRole", "name": FULLNAME}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME,
                                    "namespace": NAMESPACE}]
    assert verbs_for(docs, "", "secrets") == set(READ)
    assert verbs_for(docs, "", "configmaps") == set(READ)
    for kind in ("deployments", "daemonsets", "statefulsets"):
        assert verbs_for(docs, "apps", kind) == {*READ, "patch", "update"}
    assert verbs_for(docs, "batch", "jobs") == {"create", "delete", *READ}
    assert verbs_for(docs, "batch", "cronjobs") == set(READ)
    assert verbs_for(docs, "", "events") == {"create", "patch"}
    assert verbs_for(docs, "events.k8s.io", "events") == {"create", "patch"}
    for group, resource in (("coordination.k8s.io", "leases"), ("", "namespaces"),
                            ("argoproj.io", "rollouts"), ("argoproj.io", "applications"),
                            ("apps.openshift.io", "deploymentconfigs"),
                            ("kustomize.toolkit.fluxcd.io", "kustomizations"),
                            ("source.toolkit.fluxcd.io", "gitrepositories")):
        assert not verbs_for(docs, group, resource), f"{group}/{resource} granted by default"
    assert [rule for role in objects(docs, "Role") for rule in role["rules"]] == failure_record_rules(docs)


@pytest.mark.parametrize("values", values_files())
def test_rbac_never_grants_wildcards_or_escalation(rendered: dict[str, list[Obj]], values: str) -> None:
    for role, rule in all_rules(rendered[values]):
        name = role["metadata"]["name"]
        assert "*" not in rule["verbs"] and "*" not in rule["resources"], name
        assert "*" not in rule["apiGroups"], name
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), name
        assert "nonResourceURLs" not in rule, name


@pytest.mark.parametrize("values", values_files())
def test_secret_writes_only_with_git_or_state_store(rendered: dict[str, list[Obj]], values: str) -> None:
    docs = rendered[values]
    keyed = any(o["metadata"]["name"] == f"{FULLNAME}-git" for o in objects(docs, "ConfigMap")) or any(
        "--state-store=configmap" in args for args in deployment_args(docs).values())
    writes = verbs_for(docs, "", "secrets") - set(READ)
    if not keyed:
        assert not writes, "secret writes without a git sink or state store"
        return
    # create cannot be restricted by name; get/update are limited to the digest key,
    # and all of it lives in a Role in the release namespace, never in a ClusterRole.
    digest_key = flag_values(docs)["--digest-key-secret"]
    for role, rule in all_rules(docs):
        if "" not in rule["apiGroups"] or "secrets" not in rule["resources"]:
            continue
        if set(rule["verbs"]) - set(READ):
            assert role["kind"] == "Role" and role["metadata"]["namespace"] == NAMESPACE
            if rule["verbs"] != ["create"]:
                assert rule["resourceNames"] == [digest_key]
                assert set(rule["verbs"]) == {"get", "update"}


def test_state_store_args_and_rbac(rendered: dict[str, list[Obj]]) -> None:
    docs = rendered["state-store"]
    flags = flag_values(docs)
    assert flags["--state-store"] == "configmap"
    assert flags["--state-store-name"] == f"{FULLNAME}-state"
    assert flags["--digest-key-secret"] == f"{FULLNAME}-digest-key"
    role = one(docs, "Role", f"{FULLNAME}-self")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert {"apiGroups": [""], "resources": ["configmaps"],
            "verbs": ["get", "list", "create", "update"]} in role["rules"]
    # Config map writes stay in the release namespace: never in the ClusterRole.
    assert verbs_for([one(docs, "ClusterRole")], "", "configmaps") == set(READ)
    for values, other in rendered.items():
        if values != "state-store":
            every = deployment_args(other).values()
            assert not any("--state-store=configmap" in args for args in every), values


def test_key_level_reload_args(rendered: dict[str, list[Obj]]) -> None:
    flags = flag_values(rendered["state-store"])
    assert flags["--reload-on"] == "used-keys"
    assert flags["--prune-stale-env-vars"] == "true"
    for values, docs in rendered.items():
        if values != "state-store":
            names = {arg.split("=", 1)[0] for args in deployment_args(docs).values() for arg in args}
            assert not names & {"--reload-on", "--prune-stale-env-vars"}, values


def test_namespaced_rbac(rendered: dict[str, list[Obj]]) -> None:
    docs = rendered["namespaced"]
    assert not objects(docs, "ClusterRole") and not objects(docs, "ClusterRoleBinding")
    role = one(docs, "Role", FULLNAME)
    assert role["metadata"]["namespace"] == NAMESPACE
    binding = one(docs, "RoleBinding", FULLNAME)
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"]["kind"] == "Role"
    assert verbs_for(docs, "apps", "deployments") == {*READ, "patch", "update"}


def test_scoped_namespaces_get_a_role_each_and_are_watched(rendered: dict[str, list[Obj]]) -> None:
    """Stakater's ``reloader.namespaces`` (watchGlobally false): a Role and RoleBinding in every
    listed namespace and the release namespace, no ClusterRole, all of them in --namespaces."""
    docs = rendered["scoped-namespaces"]
    assert not objects(docs, "ClusterRole") and not objects(docs, "ClusterRoleBinding")
    watched = sorted(["team-a", "team-b", NAMESPACE])
    roles = [r for r in objects(docs, "Role") if r["metadata"]["name"] == FULLNAME]
    assert sorted(r["metadata"]["namespace"] for r in roles) == watched
    bindings = [b for b in objects(docs, "RoleBinding") if b["metadata"]["name"] == FULLNAME]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == watched
    assert all(b["subjects"][0]["namespace"] == NAMESPACE for b in bindings)
    assert flag_values(docs)["--namespaces"] == ",".join(watched)


def test_leases_only_with_ha(rendered: dict[str, list[Obj]]) -> None:
    for values, docs in rendered.items():
        has_ha = any("--enable-ha=true" in args for args in deployment_args(docs).values())
        assert bool(verbs_for(docs, "coordination.k8s.io", "leases")) == has_ha, values
    docs = rendered["ha"]
    role = one(docs, "Role", f"{FULLNAME}-self")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert unrestricted_verbs(docs, "coordination.k8s.io", "leases") == {"create"}
    assert verbs_for(docs, "coordination.k8s.io", "leases") == {"create", "get", "update"}
    named = [rule for _, rule in all_rules(docs) if rule.get("resourceNames")
             and rule["resources"] == ["leases"]]
    assert named == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                      "resourceNames": [FULLNAME], "verbs": ["get", "update"]}]
    binding = one(docs, "RoleBinding", f"{FULLNAME}-self")
    assert binding["roleRef"]["name"] == f"{FULLNAME}-self"
    # The leases rule never lands in the ClusterRole.
    assert all(
        "leases" not in rule["resources"] for rule in one(docs, "ClusterRole")["rules"]
    )


def test_namespaces_only_with_namespace_selector_or_reload_windows(rendered: dict[str, list[Obj]]) -> None:
    for values, docs in rendered.items():
        args = [arg for each in deployment_args(docs).values() for arg in each]
        reads = any(arg.startswith(("--namespace-selector=", "--reload-windows-config=")) for arg in args)
        globally = not any(arg.startswith("--namespaces=") for arg in args)
        assert bool(verbs_for(docs, "", "namespaces")) == (reads and globally), values
    assert verbs_for(rendered["ha"], "", "namespaces") == set(READ)


def test_ignore_secrets_jobs_cronjobs_rbac(rendered: dict[str, list[Obj]]) -> None:
    docs = rendered["ignore-secrets"]
    assert not verbs_for(docs, "", "secrets")
    assert verbs_for(docs, "", "configmaps") == set(READ)
    assert not verbs_for(docs, "batch", "jobs")
    assert not verbs_for(docs, "batch", "cronjobs")


def test_ignore_jobs_keeps_job_create_for_cronjobs(helm: Path, helm_home: Path) -> None:
    """A CronJob reload creates a Job from its template: jobs `create` must stay."""
    docs = render(helm, CHART_DIR, home=helm_home, set_values={"reloader.ignoreJobs": "true"})
    assert verbs_for(docs, "batch", "jobs") == {"create"}
    assert verbs_for(docs, "batch", "cronjobs") == set(READ)
    assert "--ignored-workload-types=jobs" in args_of(docs)


def test_ignore_cronjobs_only(helm: Path, helm_home: Path) -> None:
    docs = render(helm, CHART_DIR, home=helm_home, set_values={"reloader.ignoreCronJobs": "true"})
    assert verbs_for(docs, "batch", "jobs") == {"create", "delete", *READ}
    assert not verbs_for(docs, "batch", "cronjobs")
    assert "--ignored-workload-types=cronjobs" in args_of(docs)


def test_ignore_configmaps(helm: Path, helm_home: Path) -> None:
    docs = render(helm, CHART_DIR, home=helm_home, set_values={"reloader.ignoreConfigMaps": "true"})
    assert not verbs_for(docs, "", "configmaps")
    assert verbs_for(docs, "", "secrets") == set(READ)
    assert "--resources-to-ignore=configMaps" in args_of(docs)


def test_argo_rollouts_and_openshift_rbac(rendered: dict[str, list[Obj]]) -> None:
    docs = rendered["argo-rollouts-openshift"]
    assert verbs_for(docs, "argoproj.io", "rollouts") == {*READ, "patch", "update"}
    assert verbs_for(docs, "apps.openshift.io", "deploymentconfigs") == {*READ, "patch", "update"}
    assert not verbs_for(docs, "argoproj.io", "applications")


def test_csi_integration_rbac(rendered: dict[str, list[Obj]]) -> None:
    """Stakater's rule on the driver's objects, plus the owner reads (get only) from pod to workload."""
    docs = rendered["argo-rollouts-openshift"]
    for resource in ("secretproviderclasspodstatuses", "secretproviderclasses"):
        assert verbs_for(docs, "secrets-store.csi.x-k8s.io", resource) == set(READ)
    assert verbs_for(docs, "", "pods") == {"get"}
    assert verbs_for(docs, "", "replicationcontrollers") == {"get"}
    assert verbs_for(docs, "apps", "replicasets") == {"get"}
    assert "get" in verbs_for(docs, "batch", "jobs")
    for name, other in rendered.items():
        if name != "argo-rollouts-openshift":
            assert not verbs_for(other, "secrets-store.csi.x-k8s.io", "secretproviderclasspodstatuses"), name
            assert not verbs_for(other, "", "pods"), name
            for deployment in objects(other, "Deployment"):  # shard values render several
                args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
                assert "--enable-csi-integration=true" not in args, name


@pytest.mark.parametrize("values", ["git-sink", "pull-request", "monitoring-pdb-netpol"])
def test_git_sink_rbac(rendered: dict[str, list[Obj]], values: str) -> None:
    docs = rendered[values]
    role = main_role(docs)
    assert role["kind"] == "ClusterRole"
    if values == "git-sink":  # sets argocdNamespace and fluxNamespaces
        assert gitops_grants(docs) == {
            ("argocd", "argoproj.io", "applications"): {"get", "patch"},
            **{("flux-system", group, resource): verbs for (group, resource), verbs in FLUX_GRANTS.items()},
        }
        assert git_config(docs)["argocdNamespace"] == "argocd"  # the controller looks where RBAC allows
    else:  # by default nothing: the namespaces must be named
        assert gitops_grants(docs) == {} and "argocdNamespace" not in git_config(docs)
    assert unrestricted_verbs(docs, "", "secrets") == {*READ, "create"}
    digest_key = flag_values(docs)["--digest-key-secret"]
    self_role = one(docs, "Role", f"{FULLNAME}-self")
    assert {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [digest_key],
            "verbs": ["get", "update"]} in self_role["rules"]
    assert not any(rule.get("resourceNames") for rule in role["rules"])


GITOPS = (("argoproj.io", "applications"), ("kustomize.toolkit.fluxcd.io", "kustomizations"),
          ("source.toolkit.fluxcd.io", "gitrepositories"), ("helm.toolkit.fluxcd.io", "helmreleases"),
          ("source.toolkit.fluxcd.io", "helmcharts"))
FLUX_GRANTS = {("kustomize.toolkit.fluxcd.io", "kustomizations"): {"get", "patch"},
               ("source.toolkit.fluxcd.io", "gitrepositories"): {"get", "patch"},
               ("helm.toolkit.fluxcd.io", "helmreleases"): {"get", "patch"},
               ("source.toolkit.fluxcd.io", "helmcharts"): {"get"}}


def gitops_grants(docs: list[Obj]) -> dict[tuple[str, str, str], set[str]]:
    """(namespace, group, resource) → verbs, for the Argo CD / Flux resources; asserts their bindings."""
    grants: dict[tuple[str, str, str], set[str]] = {}
    for role, rule in all_rules(docs):
        for group, resource in GITOPS:
            if group in rule["apiGroups"] and resource in rule["resources"]:
                assert role["kind"] == "Role", f"{group}/{resource} granted cluster-wide"
                namespace = role["metadata"]["namespace"]
                grants.setdefault((namespace, group, resource), set()).update(rule["verbs"])
                bindings = [d for d in objects(docs, "RoleBinding")
                            if d["metadata"]["namespace"] == namespace]
                binding = one(bindings, "RoleBinding", role["metadata"]["name"])
                assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                              "name": role["metadata"]["name"]}
                assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME,
                                                "namespace": NAMESPACE}]
    return grants


@pytest.mark.parametrize("values", values_files())
def test_argo_cd_and_flux_objects_are_never_granted_cluster_wide(rendered: dict[str, list[Obj]],
                                                                 values: str) -> None:
    docs = rendered[values]
    grants = gitops_grants(docs)  # asserts: Roles only, each bound to our service account
    assert all(verbs <= {"get", "patch"} for verbs in grants.values()), values  # no list/watch/update
    assert not grants or objects(docs, "ConfigMap"), values  # only with git repositories


def test_argo_cd_and_flux_roles_follow_the_configured_namespaces(helm: Path, helm_home: Path) -> None:
    docs = render(helm, CHART_DIR, home=helm_home, values_files=[VALUES_DIR / "git-sink.yaml"],
                  release=RELEASE, namespace=NAMESPACE,
                  set_values={"reloader.git.argocdNamespace": "gitops",
                              "reloader.git.fluxNamespaces": "{gitops,team-a}"})
    assert gitops_grants(docs) == {
        ("gitops", "argoproj.io", "applications"): {"get", "patch"},
        **{(ns, group, resource): verbs for ns in ("gitops", "team-a")
           for (group, resource), verbs in FLUX_GRANTS.items()},
    }
    assert len([d for d in objects(docs, "Role") if d["metadata"]["name"] == f"{FULLNAME}-gitops"]) == 2
    assert git_config(docs)["argocdNamespace"] == "gitops"
    assert not [problem for doc in docs for problem in validate_object(doc)]


@pytest.mark.parametrize("settings", [
    {"reloader.git.argocdNamespace": "", "reloader.git.fluxNamespaces": "null"},
    {"reloader.watchGlobally": "false"},
])
def test_no_argo_cd_or_flux_access_when_not_configured_or_namespaced(
        helm: Path, helm_home: Path, settings: dict[str, str]) -> None:
    docs = render(helm, CHART_DIR, home=helm_home, values_files=[VALUES_DIR / "git-sink.yaml"],
                  release=RELEASE, namespace=NAMESPACE, set_values=settings)
    assert gitops_grants(docs) == {}
    assert all(doc["metadata"].get("namespace", NAMESPACE) == NAMESPACE for doc in docs)


def test_git_sink_with_ignored_secrets_still_manages_its_key(helm: Path, helm_home: Path) -> None:
    docs = render(helm, CHART_DIR, home=helm_home,
                  values_files=[VALUES_DIR / "git-sink.yaml"],
                  set_values={"reloader.ignoreSecrets": "true"})
    assert unrestricted_verbs(docs, "", "secrets") == {"create"}
    assert all("secrets" not in rule["resources"] for rule in one(docs, "ClusterRole")["rules"]
               if "" in rule["apiGroups"])


def test_rbac_disabled(helm: Path, helm_home: Path) -> None:
    docs = render(helm, CHART_DIR, home=helm_home,
                  values_files=[VALUES_DIR / "git-sink.yaml"],
                  set_values={"reloader.rbac.enabled": "false",
                              "reloader.serviceAccount.create": "false",
                              "reloader.serviceAccount.name": "existing"})
    kinds = {doc["kind"] for doc in docs}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                        "ServiceAccount"}
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "existing"


# --------------------------------------------------------------------------- optional objects


def test_monitoring_pdb_netpol(rendered: dict[str, list[Obj]]) -> None:
    docs = rendered["monitoring-pdb-netpol"]
    service_monitor = one(docs, "ServiceMonitor")
    assert service_monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert service_monitor["spec"]["endpoints"][0]["port"] == "http"
    assert service_monitor["metadata"]["labels"]["release"] == "prometheus"
    pod_monitor = one(docs, "PodMonitor")
    assert pod_monitor["metadata"]["namespace"] == "monitoring"
    assert pod_monitor["spec"]["podMetricsEndpoints"][0]["path"] == "/metrics"
    assert pod_monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    selector = one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    assert pdb["spec"]["selector"]["matchLabels"] == selector
    policy = one(docs, "NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"] == selector
    assert policy["ingress"] == [{
        "ports": [{"port": "http", "protocol": "TCP"}],
        "from": [{"namespaceSelector": {"matchLabels": {
            "kubernetes.io/metadata.name": "monitoring"}}}],
    }]
    egress_ports = [{p["port"] for p in rule["ports"]} for rule in policy["egress"]]
    assert {53} in egress_ports
    api_rule = next(rule for rule in policy["egress"] if 6443 in {p["port"] for p in rule["ports"]})
    assert [peer["ipBlock"]["cidr"] for peer in api_rule["to"]] == ["10.96.0.1/32",
                                                                     "172.18.0.0/16"]
    assert {443, 22} in egress_ports  # git hosts (repositories are configured)


def test_pdb_max_unavailable_for_a_single_replica(helm: Path, helm_home: Path) -> None:
    docs = render(helm, CHART_DIR, home=helm_home,
                  set_values={"reloader.podDisruptionBudget.enabled": "true",
                              "reloader.podDisruptionBudget.maxUnavailable": "1"})
    assert one(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    assert "minAvailable" not in one(docs, "PodDisruptionBudget")["spec"]


def test_netpol_without_external_hosts(helm: Path, helm_home: Path) -> None:
    docs = render(helm, CHART_DIR, home=helm_home, set_values={"reloader.netpol.enabled": "true"})
    egress = one(docs, "NetworkPolicy")["spec"]["egress"]
    assert all(22 not in {p["port"] for p in rule["ports"]} for rule in egress)


@pytest.mark.parametrize("values", ["default", "namespaced", "git-sink"])
def test_optional_objects_off_by_default(rendered: dict[str, list[Obj]], values: str) -> None:
    kinds = {doc["kind"] for doc in rendered[values]}
    assert not kinds & {"ServiceMonitor", "PodMonitor", "PodDisruptionBudget", "NetworkPolicy"}


def test_ha_spreads_pods(rendered: dict[str, list[Obj]]) -> None:
    affinity = one(rendered["ha"], "Deployment")["spec"]["template"]["spec"]["affinity"]
    term = affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"


# --------------------------------------------------------------------------- bad values


@pytest.mark.parametrize(
    ("set_values", "message"),
    [
        ({"reloader.ignoreSecrets": "true", "reloader.ignoreConfigMaps": "true"},
         "nothing would be watched"),
        ({"reloader.defaultSink": "git"}, "needs reloader.git.repositories"),
        ({"reloader.defaultSink": "webhook"}, "needs reloader.webhookUrl"),
        ({"reloader.watchGlobally": "false", "reloader.namespaceSelector": "a=b"},
         "needs reloader.watchGlobally=true"),
        ({"reloader.reloadStrategy": "restart"}, "reloadStrategy"),
        ({"reloader.git.repositories[0].name": "Bad_Name",
          "reloader.git.repositories[0].url": "https://x.invalid/r.git"}, "name"),
        ({"reloader.git.repositories[0].name": "a"}, "url"),
        ({"reloader.git.repositories[0].name": "a",
          "reloader.git.repositories[0].url": "https://x.invalid/r.git",
          "reloader.git.repositories[0].pullRequest.host": "svn"}, "host"),
        ({"reloader.git.repositories[0].name": "a",
          "reloader.git.repositories[0].url": "https://x.invalid/r.git",
          "reloader.git.repositories[0].aliases": "ssh://git@x.invalid/r"}, "repositories/0/aliases"),
        ({"reloader.custom_annotations.nope": "x"}, "custom_annotations.nope"),
        ({"reloader.podDisruptionBudget.enabled": "true"}, "would block every node drain"),
    ],
)
def test_bad_values_fail_with_a_clear_message(
    helm: Path, helm_home: Path, set_values: dict[str, str], message: str
) -> None:
    args = ["template", RELEASE, str(CHART_DIR)]
    for key, value in set_values.items():
        args += ["--set", f"{key}={value}"]
    result = run_helm(helm, args, home=helm_home)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_helm_tools_locates_helm_from_env(monkeypatch: pytest.MonkeyPatch, helm: Path) -> None:
    monkeypatch.setenv("HELM_BIN", str(helm))
    assert helm_tools.find_helm() == helm
    monkeypatch.setenv("HELM_BIN", "/nonexistent/helm")
    assert helm_tools.find_helm() is None


@pytest.mark.parametrize(("value", "flag", "types"), [
    (None, None, ("helm.sh/release.v1",)),
    ("", "--ignore-secret-types=", ()),
    ("helm.sh/release.v1,example.com/big", "--ignore-secret-types=helm.sh/release.v1,example.com/big",
     ("helm.sh/release.v1", "example.com/big")),
])
def test_ignore_secret_types(helm: Path, helm_home: Path, tmp_path: Path, value: str | None,
                             flag: str | None, types: tuple[str, ...]) -> None:
    """Helm release Secrets stay server-side by default; the value reaches the flag as given."""
    values = tmp_path / "values.yaml"
    values.write_text("{}" if value is None else json.dumps({"reloader": {"ignoreSecretTypes": value}}))
    docs = render(helm, CHART_DIR, home=helm_home, values_files=[values])
    args = args_of(docs)
    assert [a for a in args if a.startswith("--ignore-secret-types")] == ([flag] if flag else [])
    assert load_config(args, environ={}).filters.ignore_secret_types == types


def test_meta_info_is_published_only_when_asked(rendered: dict[str, list[Obj]]) -> None:
    """publishMetaInfo sets Stakater's two variables and grants that one ConfigMap, nothing more."""
    meta = load_config([], environ=env_of(rendered["ha"])).meta_info
    assert meta is not None and (meta.namespace, meta.deployment_name) == (NAMESPACE, FULLNAME)
    assert load_config([], environ=env_of(rendered["default"])).meta_info is None
    granted = [rule for role, rule in all_rules(rendered["ha"]) if "configmaps" in rule["resources"]
               and role["kind"] == "Role" and role["metadata"]["name"].endswith("-self")]
    assert granted == [FAILURE_RECORD_CREATE,
                       {"apiGroups": [""], "resources": ["configmaps"],
                        "resourceNames": [f"{FULLNAME}-failures"], "verbs": ["get", "update"]},
                       {"apiGroups": [""], "resources": ["configmaps"],
                        "resourceNames": ["reloader-meta-info"], "verbs": ["get", "update"]}]
    default_roles = [rule for role, rule in all_rules(rendered["default"]) if role["kind"] == "Role"]
    assert default_roles == failure_record_rules(rendered["default"])  # nothing but the failure record


def test_the_failure_record_is_granted_by_name_for_every_shard(rendered: dict[str, list[Obj]]) -> None:
    """What is failing survives a restart: each instance writes ``<its Lease>-failures`` in the
    release namespace, and may touch no other ConfigMap there by this grant."""
    for name, docs in rendered.items():
        records = []
        for deployment in objects(docs, "Deployment"):
            [pod] = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["args"][0] == "run"]
            config = load_rendered(docs, pod["args"][1:], container_env(pod))
            records.append(config.runtime.failure_record)
        assert failure_record_rules(docs) == [
            FAILURE_RECORD_CREATE,
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": records,
             "verbs": ["get", "update"]}], name


@pytest.mark.parametrize("name", values_files())
def test_chart_rbac_grants_every_permission_the_start_up_check_asks_for(rendered, name):
    """The start-up check (kube/permissions.py) and the chart's Roles must agree: a chart
    install never stops on its own RBAC, whatever the values."""
    docs = rendered[name]
    rules = [*rules_from_role([rule for role in objects(docs, "ClusterRole") for rule in role["rules"]])]
    for role in objects(docs, "Role"):
        rules += rules_from_role(role["rules"], namespaces=[role["metadata"]["namespace"]])
    for deployment in objects(docs, "Deployment"):  # every shard, with its own Lease
        [c] = deployment["spec"]["template"]["spec"]["containers"]
        config = load_rendered(docs, c["args"][1:], {**container_env(c), "HOME": "/nonexistent"})
        behaviour = config.behaviour
        adapters = adapters_for(argo_rollouts=behaviour.is_argo_rollouts,
                                openshift=bool(behaviour.is_openshift),
                                ignored=config.filters.ignored_workload_types)
        denied = [str(need) for need in required_permissions(config, adapters)
                  if not any(rule.allows(need.verb, need.group, need.resource, need.namespace, need.name)
                             for rule in rules)]
        assert denied == [], deployment["metadata"]["name"]


# --------------------------------------------------------------------------- shards

SHARD_LABEL = "app.kubernetes.io/shard"


def config_of(args: list[str]) -> Any:
    return load_config(args, environ={"POD_NAMESPACE": NAMESPACE})


def test_empty_shards_list_renders_todays_single_deployment(helm: Path, helm_home: Path,
                                                            tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(json.dumps({"reloader": {"shards": []}}))
    assert render(helm, CHART_DIR, home=helm_home, values_files=[values]) == render(
        helm, CHART_DIR, home=helm_home)
    docs = render(helm, CHART_DIR, home=helm_home, values_files=[VALUES_DIR / "ha.yaml"])
    [deployment] = objects(docs, "Deployment")
    assert deployment["metadata"]["name"] == FULLNAME
    assert SHARD_LABEL not in json.dumps(docs)
    assert not any(arg.startswith("--shard-") for arg in args_of(docs))


def test_label_shards_are_separate_deployments_with_their_own_selector_and_lease(
        rendered: dict[str, list[Obj]]) -> None:
    docs = rendered["shards-by-label"]
    deployments = {d["metadata"]["name"]: d for d in objects(docs, "Deployment")}
    assert set(deployments) == {f"{FULLNAME}-a", f"{FULLNAME}-b"}
    configs = {name: config_of(args) for name, args in deployment_args(docs).items()}
    a, b = configs[f"{FULLNAME}-a"], configs[f"{FULLNAME}-b"]
    # Each shard's selector is ANDed with the release-wide one.
    assert a.filters.namespace_selector == "reloader.stakater.com/watch=true,reloader-shard=a"
    assert b.filters.namespace_selector == "reloader.stakater.com/watch=true,reloader-shard=b"
    assert (a.runtime.lease_name, b.runtime.lease_name) == (f"{FULLNAME}-a", f"{FULLNAME}-b")
    assert a.runtime.enable_ha and b.runtime.enable_ha
    assert not a.filters.shard.sharded and not b.filters.shard.sharded
    assert b.runtime.workers == 8 and a.runtime.workers == 4  # the shard's extraArgs are its own
    assert deployments[f"{FULLNAME}-a"]["spec"]["replicas"] == 2
    assert deployments[f"{FULLNAME}-b"]["spec"]["replicas"] == 3
    resources = {name: d["spec"]["template"]["spec"]["containers"][0]["resources"]
                 for name, d in deployments.items()}
    assert resources[f"{FULLNAME}-a"]["requests"] == {"cpu": "10m", "memory": "128Mi"}  # the default
    assert resources[f"{FULLNAME}-b"]["requests"] == {"cpu": "50m", "memory": "256Mi"}
    # One Lease rule naming both Leases; the namespaces read for the selectors.
    named = [rule for _, rule in all_rules(docs) if rule.get("resourceNames")
             and rule not in failure_record_rules(docs)]
    assert named == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                      "resourceNames": [f"{FULLNAME}-a", f"{FULLNAME}-b"], "verbs": ["get", "update"]}]
    assert verbs_for(docs, "", "namespaces") == set(READ)


@pytest.mark.parametrize("values", ["shards-by-label", "shards-by-hash"])
def test_shards_share_one_identity_and_service_but_never_a_pod_selector(
        rendered: dict[str, list[Obj]], values: str) -> None:
    docs = rendered[values]
    for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Service"):
        one(docs, kind)
    deployments = objects(docs, "Deployment")
    assert len(deployments) >= 2
    selectors = []
    for deployment in deployments:
        shard = deployment["metadata"]["name"].rsplit("-", 1)[1]
        selector = deployment["spec"]["selector"]["matchLabels"]
        pod = deployment["spec"]["template"]
        assert selector[SHARD_LABEL] == shard
        assert selector.items() <= pod["metadata"]["labels"].items()
        assert pod["spec"]["serviceAccountName"] == FULLNAME
        # HA replicas spread apart from their own shard's pods.
        term = pod["spec"]["affinity"]["podAntiAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
        assert term["labelSelector"]["matchLabels"] == selector
        # The shared Service (metrics) selects every shard's pods.
        assert one(docs, "Service")["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
        selectors.append(selector)
    # No pod matches another Deployment's selector (overlapping selectors fight over pods).
    for deployment in deployments:
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert sum(selector.items() <= labels.items() for selector in selectors) == 1


def test_hash_shards_get_their_index_count_and_lease(rendered: dict[str, list[Obj]]) -> None:
    docs = rendered["shards-by-hash"]
    by_name = deployment_args(docs)
    assert list(by_name) == [f"{FULLNAME}-s0", f"{FULLNAME}-s1", f"{FULLNAME}-s2"]
    leases = []
    for index, args in enumerate(by_name.values()):
        config = config_of(args)
        assert (config.filters.shard.index, config.filters.shard.count) == (index, 3)
        assert config.filters.namespace_selector == ""
        leases.append(config.runtime.lease_name)
    assert leases == [f"{FULLNAME}-shard-{i}" for i in range(3)]
    named = [rule for _, rule in all_rules(docs) if rule.get("resourceNames")
             and rule not in failure_record_rules(docs)]
    assert named[0]["resourceNames"] == leases
    assert [d["spec"]["replicas"] for d in objects(docs, "Deployment")] == [2, 2, 2]
    assert not verbs_for(docs, "", "namespaces")  # hashing needs no namespace reads


def test_shards_pdb_and_leader_alert_count_every_shard(rendered: dict[str, list[Obj]]) -> None:
    docs = rendered["shards-by-label"]
    pdbs = {p["metadata"]["name"]: p for p in objects(docs, "PodDisruptionBudget")}
    deployments = {d["metadata"]["name"]: d for d in objects(docs, "Deployment")}
    assert set(pdbs) == set(deployments)
    for name, pdb in pdbs.items():
        assert pdb["spec"]["selector"]["matchLabels"] == deployments[name]["spec"]["selector"]["matchLabels"]
    rules = {rule.get("alert"): rule for group in one(docs, "PrometheusRule")["spec"]["groups"]
             for rule in group["rules"]}
    assert rules["GitopsReloaderLeaderMissing"]["expr"].endswith("< 2")


def test_shard_replicas_need_ha(helm: Path, helm_home: Path, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(json.dumps({"reloader": {"shards": [{"name": "a", "replicas": 3}, {"name": "b"}]}}))
    docs = render(helm, CHART_DIR, home=helm_home, values_files=[values])
    assert [d["spec"]["replicas"] for d in objects(docs, "Deployment")] == [1, 1]
    assert not verbs_for(docs, "coordination.k8s.io", "leases")
    assert all("--enable-ha=true" not in args for args in deployment_args(docs).values())


@pytest.mark.parametrize(("shards", "extra", "message"), [
    ([{"name": "a", "namespaceSelector": "s=a"}, {"name": "b"}], {},
     "every shard a namespaceSelector (label sharding) or none"),
    ([{"name": "a"}, {"name": "a"}], {}, 'name "a" is used twice'),
    ([{"name": "a"}, {"name": "b"}], {"watchGlobally": False},
     "reloader.shards needs reloader.watchGlobally=true"),
    ([{"name": "a"}, {"name": "b"}], {"podDisruptionBudget": {"enabled": True}},
     "minAvailable=1 with 1 replica(s) in shard a would block every node drain"),
])
def test_bad_shards_fail_with_a_clear_message(helm: Path, helm_home: Path, tmp_path: Path,
                                              shards: list[Obj], extra: Obj, message: str) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(json.dumps({"reloader": {"shards": shards, **extra}}))
    result = run_helm(helm, ["template", RELEASE, str(CHART_DIR), "--values", str(values)], home=helm_home)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize("name", ["Upper", "a_b", "-a", "x" * 17])
def test_shard_names_are_checked_by_the_schema(helm: Path, helm_home: Path, tmp_path: Path,
                                               name: str) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(json.dumps({"reloader": {"shards": [{"name": name}]}}))
    result = run_helm(helm, ["template", RELEASE, str(CHART_DIR), "--values", str(values)], home=helm_home)
    assert result.returncode != 0
    assert "shards" in result.stderr, result.stderr


@pytest.mark.parametrize("values", ["shards-by-label", "shards-by-hash"])
def test_every_shard_keeps_its_own_state_store(helm: Path, helm_home: Path, values: str) -> None:
    """Each shard leads alone (its own Lease), so two shards must never write one store."""
    docs = render(helm, CHART_DIR, home=helm_home, values_files=[VALUES_DIR / f"{values}.yaml"],
                  set_values={"reloader.stateStore": "configmap"}, release=RELEASE, namespace=NAMESPACE)
    names = [config_of(args).state.name for args in deployment_args(docs).values()]
    assert len(set(names)) == len(names) > 1
    assert all(name.startswith(f"{FULLNAME}-state-") and len(name) <= 58 for name in names)


@pytest.mark.parametrize("mode", ["off", "annotated", "on-delete"])
def test_pod_evict_rbac_is_granted_only_when_eviction_is_enabled(helm: Path, helm_home: Path,
                                                                 mode: str) -> None:
    """--eviction needs list of pods and create of pods/eviction; with it off the controller may not
    read or evict any pod (and never delete one in any mode)."""
    values = {"reloader.eviction.mode": mode, "reloader.eviction.atOnce": "2",
              "reloader.eviction.intermediateOwners[0].group": "core.strimzi.io",
              "reloader.eviction.intermediateOwners[0].plural": "strimzipodsets"}
    docs = render(helm, CHART_DIR, home=helm_home, set_values=values)
    config = load_config(args_of(docs), environ={"POD_NAMESPACE": NAMESPACE})
    enabled = mode != "off"
    assert config.rollouts.eviction == mode
    assert config.rollouts.evictions_at_once == 2
    assert verbs_for(docs, "", "pods/eviction") == ({"create"} if enabled else set())
    assert verbs_for(docs, "", "pods") == ({"get", "list"} if enabled else set())
    assert verbs_for(docs, "core.strimzi.io", "strimzipodsets") == ({"get"} if enabled else set())
    assert "delete" not in verbs_for(docs, "", "pods")


def test_evict_interval_and_an_unquoted_off_mode_in_a_values_file(helm: Path, helm_home: Path,
                                                                    tmp_path: Path) -> None:
    """Issue 40: ``interval`` is --eviction-interval; YAML reads an unquoted ``off`` as false (taken
    as off, no pods RBAC) and an unquoted ``on`` as true (refused, saying to quote the mode)."""
    unquoted = tmp_path / "off.yaml"
    unquoted.write_text("reloader:\n  eviction:\n    mode: off\n    interval: 500ms\n")
    docs = render(helm, CHART_DIR, home=helm_home, values_files=[unquoted])
    config = load_config(args_of(docs), environ={"POD_NAMESPACE": NAMESPACE})
    assert config.rollouts.eviction == "off" and config.rollouts.eviction_interval == 0.5
    assert verbs_for(docs, "", "pods/eviction") == set()
    assert not any(arg.startswith("--eviction=") for arg in args_of(docs))
    enabled = render(helm, CHART_DIR, home=helm_home, set_values={"reloader.eviction.mode": "on-delete"})
    assert not any(arg.startswith("--eviction-interval") for arg in args_of(enabled))  # the flag's 2s
    on = tmp_path / "on.yaml"
    on.write_text("reloader:\n  eviction:\n    mode: on\n")
    result = run_helm(helm, ["template", "r", str(CHART_DIR), "--values", str(on)], home=helm_home)
    assert result.returncode != 0
    assert "reloader.eviction.mode is the boolean true" in result.stderr and "quoted" in result.stderr
