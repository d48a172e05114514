"""ACCEPTANCE "Events, kinds, pausing": the workload kinds beyond Deployment/DaemonSet/StatefulSet.

CronJob (a Job is created from its template, the CronJob is left alone), Job (deleted and
re-created), Argo Rollout (template edit, or ``spec.restartAt`` with the restart strategy,
nothing for a ``workloadRef`` Rollout) and OpenShift DeploymentConfig (by flag or by
discovery). Objects are created through the official client; the controller runs
in-process against the API test server.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from kubernetes.client import BatchV1Api, CustomObjectsApi
from reload_helpers import call, configmap, create, env_of, set_cm_data, workload, writes

from gitops_reloader.hashing import configmap_hash
from gitops_reloader.model import ObjectRef, SourceKind
from gitops_reloader.testing.apiserver import ApiServer, Fault
from gitops_reloader.testing.harness import deployment, running_controller, settle, wait_for

pytestmark = pytest.mark.e2e

CM_ENV = "STAKATER_APP_CFG_CONFIGMAP"
NEW_DATA = {"v": "2"}
NEW_HASH = configmap_hash(NEW_DATA)
RELOAD = {"configmap.reloader.stakater.com/reload": "app-cfg"}
NIGHTLY = ObjectRef("CronJob", "ns", "nightly")


def uses_cm(name: str = "app-cfg") -> dict[str, Any]:
    return {"name": "app", "image": "busybox", "envFrom": [{"configMapRef": {"name": name}}]}


def pod_template(containers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "batch"}},
            "spec": {"restartPolicy": "Never", "containers": containers or [uses_cm()]}}


def cronjob(name: str, *, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": name, "namespace": "ns", "annotations": dict(annotations or {})},
        "spec": {"schedule": "*/5 * * * *", "jobTemplate": {
            "metadata": {"labels": {"team": "batch"}},
            "spec": {"backoffLimit": 1, "template": pod_template()}}},
    }


def job(name: str, *, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "ns", "annotations": dict(annotations or {}),
                         "labels": {"team": "batch"}},
            "spec": {"backoffLimit": 1, "template": pod_template()}}


def rollout(name: str, *, annotations: dict[str, str] | None = None,
            workload_ref: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                            "strategy": {"canary": {"steps": [{"setWeight": 50}]}}}
    if workload_ref:
        spec["workloadRef"] = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    else:
        spec["template"] = {"metadata": {"labels": {"app": name}},
                            "spec": {"containers": [uses_cm()]}}
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
            "metadata": {"name": name, "namespace": "ns", "annotations": dict(annotations or {})},
            "spec": spec}


def deployment_config(name: str, *, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "apps.openshift.io/v1", "kind": "DeploymentConfig",
            "metadata": {"name": name, "namespace": "ns", "annotations": dict(annotations or {})},
            "spec": {"replicas": 1, "selector": {"app": name},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [uses_cm()]}}}}


def create_custom(api_client, group: str, plural: str, body: dict[str, Any]) -> dict[str, Any]:
    version = body["apiVersion"].split("/")[1]
    return CustomObjectsApi(api_client).create_namespaced_custom_object(
        group, version, "ns", plural, body)


def template_env(template: dict[str, Any]) -> dict[str, Any]:
    [container] = template["spec"]["containers"]
    return {e["name"]: e.get("value") for e in container.get("env") or ()}


def change(app, api_client) -> None:
    set_cm_data(app, api_client, "app-cfg", NEW_DATA)


# --- CronJob -------------------------------------------------------------------------


def test_cronjob_is_left_alone_and_a_job_is_created_from_its_template(server, api_client):
    batch = BatchV1Api(api_client)
    create(api_client, configmap("app-cfg", {"v": "1"}))
    created = batch.create_namespaced_cron_job("ns", cronjob("nightly", annotations=RELOAD))
    with running_controller(api_client) as app:
        before = server.get_object("cronjobs", "ns", "nightly")
        change(app, api_client)
        [made] = wait_for(lambda: batch.list_namespaced_job("ns").items, message="a Job")
        assert server.get_object("cronjobs", "ns", "nightly") == before
        assert writes(server, "cronjobs") == 1  # our own create above
    assert made.metadata.generate_name == "nightly-"
    assert made.metadata.name.startswith("nightly-") and made.metadata.name != "nightly-"
    assert made.metadata.annotations["cronjob.kubernetes.io/instantiate"] == "manual"
    assert made.metadata.labels == {"team": "batch"}
    [owner] = made.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == (
        "CronJob", "nightly", created.metadata.uid, True)
    job_obj = server.get_object("jobs", "ns", made.metadata.name)
    assert job_obj is not None
    assert template_env(job_obj["spec"]["template"]) == {CM_ENV: NEW_HASH}
    assert job_obj["spec"]["backoffLimit"] == 1


def test_cronjob_with_auto_creates_one_job_per_change(server, api_client):
    batch = BatchV1Api(api_client)
    create(api_client, configmap("app-cfg", {"v": "1"}))
    batch.create_namespaced_cron_job("ns", cronjob("nightly",
                                                   annotations={"reloader.stakater.com/auto": "true"}))
    with running_controller(api_client) as app:
        change(app, api_client)
        set_cm_data(app, api_client, "app-cfg", {"v": "3"})
        wait_for(lambda: len(batch.list_namespaced_job("ns").items) == 2, message="two Jobs")
        jobs = batch.list_namespaced_job("ns").items
    hashes = sorted(template_env(server.get_object("jobs", "ns", j.metadata.name)["spec"]["template"])
                    [CM_ENV] for j in jobs)
    assert hashes == sorted([NEW_HASH, configmap_hash({"v": "3"})])


def change_heard_before(server: ApiServer, app, api_client, create_first: bool) -> None:
    """A CronJob ``nightly`` created just before (``create_first``) or just after a change of
    app-cfg, with the CronJob watch held back so that the controller hears of the change first
    (the race Stakater's suite runs into: the two arrive on different watches)."""
    batch = BatchV1Api(api_client)
    server.add_fault(Fault(verb="watch", resource="cronjobs", status=None, latency=3.0, times=1))
    server.cut_watches()
    if create_first:
        batch.create_namespaced_cron_job("ns", cronjob("nightly", annotations=RELOAD))
    path = "/api/v1/namespaces/ns/configmaps/app-cfg"
    current = call(api_client, "GET", path)
    version = call(api_client, "PUT", path, {**current, "data": NEW_DATA})["metadata"]["resourceVersion"]
    wait_for(lambda: app.controller.seen(SourceKind.CONFIGMAP, "ns", "app-cfg", version),
             message="the change heard of")
    if not create_first:
        batch.create_namespaced_cron_job("ns", cronjob("nightly", annotations=RELOAD))
    assert app.controller.workload(NIGHTLY) is None  # the CronJob not heard of yet
    wait_for(lambda: app.controller.workload(NIGHTLY) is not None, message="the CronJob heard of")


def test_cronjob_created_just_before_a_change_heard_of_after_it_still_gets_a_job(server, api_client):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    with running_controller(api_client) as app:
        change_heard_before(server, app, api_client, create_first=True)
        [made] = wait_for(lambda: BatchV1Api(api_client).list_namespaced_job("ns").items, message="a Job")
        settle(app)
        assert len(BatchV1Api(api_client).list_namespaced_job("ns").items) == 1
    assert template_env(server.get_object("jobs", "ns", made.metadata.name)["spec"]["template"]) == {
        CM_ENV: NEW_HASH}


def test_cronjob_created_just_after_a_change_gets_no_job_for_it(server, api_client):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    with running_controller(api_client) as app:
        change_heard_before(server, app, api_client, create_first=False)
        settle(app)
        assert BatchV1Api(api_client).list_namespaced_job("ns").items == []


# --- Job -----------------------------------------------------------------------------


def test_job_is_deleted_and_recreated_with_the_env_var(server, api_client):
    batch = BatchV1Api(api_client)
    create(api_client, configmap("app-cfg", {"v": "1"}))
    old = batch.create_namespaced_job("ns", job("migrate", annotations=RELOAD))
    with running_controller(api_client) as app:
        change(app, api_client)
        new = wait_for(lambda: (j := server.get_object("jobs", "ns", "migrate")) is not None
                       and j["metadata"]["uid"] != old.metadata.uid and j,
                       message="a new Job")
    assert template_env(new["spec"]["template"]) == {CM_ENV: NEW_HASH}
    assert new["metadata"]["annotations"] == RELOAD
    assert new["metadata"]["labels"] == {"team": "batch"}
    assert new["spec"]["backoffLimit"] == 1
    counts = server.request_counts()
    assert counts.get(("delete", "jobs")) == 1 and counts.get(("create", "jobs")) == 2


def test_job_is_recreated_when_the_create_after_the_delete_fails_once(server, api_client):
    batch = BatchV1Api(api_client)
    create(api_client, configmap("app-cfg", {"v": "1"}))
    old = batch.create_namespaced_job("ns", job("migrate", annotations=RELOAD))
    with running_controller(api_client) as app:
        server.add_fault(Fault(verb="create", resource="jobs", status=500, times=1))
        change(app, api_client)
        new = wait_for(lambda: server.get_object("jobs", "ns", "migrate"), message="Job re-created")
        settle(app)
    assert new["metadata"]["uid"] != old.metadata.uid
    assert template_env(new["spec"]["template"]) == {CM_ENV: NEW_HASH}
    counts = server.request_counts()
    # ours + the failed + the retried create; the retry's delete found the Job already gone
    assert counts.get(("create", "jobs")) == 3 and counts.get(("delete", "jobs")) == 2


@pytest.mark.parametrize("flag", ["--ignored-workload-types=jobs,cronjobs",
                                  "--ignored-workload-types=cronjobs, jobs"])
def test_ignored_workload_types_turns_jobs_and_cronjobs_off(server, api_client, flag):
    batch = BatchV1Api(api_client)
    create(api_client, configmap("app-cfg", {"v": "1"}))
    batch.create_namespaced_cron_job("ns", cronjob("nightly", annotations=RELOAD))
    batch.create_namespaced_job("ns", job("migrate", annotations=RELOAD))
    create(api_client, deployment("web", annotations=RELOAD))
    with running_controller(api_client, [flag]) as app:
        assert not {"Job", "CronJob"} & set(app.controller.adapters)
        before = (server.get_object("jobs", "ns", "migrate"), server.get_object("cronjobs", "ns", "nightly"))
        change(app, api_client)
        wait_for(lambda: env_of(workload(server, "Deployment", "web")).get(CM_ENV) == NEW_HASH)
    assert (server.get_object("jobs", "ns", "migrate"),
            server.get_object("cronjobs", "ns", "nightly")) == before
    counts = server.request_counts()  # the controller neither listed nor watched them
    assert not [key for key in counts if key[1] in ("jobs", "cronjobs") and key[0] != "create"]
    assert [j.metadata.name for j in batch.list_namespaced_job("ns").items] == ["migrate"]


# --- Argo Rollouts -------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--is-Argo-Rollouts", "--is-argo-rollouts", "--is-argo-rollouts=true",
                                  "--is-Argo-Rollouts true"])
def test_rollout_template_is_updated(server, api_client, flag):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create_custom(api_client, "argoproj.io", "rollouts", rollout("canary", annotations=RELOAD))
    with running_controller(api_client, flag.split()) as app:
        change(app, api_client)
        obj = wait_for(lambda: (r := server.get_object("rollouts", "ns", "canary"))
                       and CM_ENV in template_env(r["spec"]["template"]) and r)
    assert template_env(obj["spec"]["template"]) == {CM_ENV: NEW_HASH}
    assert "restartAt" not in obj["spec"]


@pytest.mark.parametrize("resource", ["rollouts", "deploymentconfigs"])
def test_custom_kinds_with_the_annotations_sink(server, api_client, resource):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    if resource == "rollouts":
        create_custom(api_client, "argoproj.io", resource, rollout("app", annotations=RELOAD))
    else:
        create_custom(api_client, "apps.openshift.io", resource, deployment_config("app", annotations=RELOAD))
    flags = ["--reload-strategy=annotations", "--is-argo-rollouts", "--is-openshift"]
    with running_controller(api_client, flags) as app:
        change(app, api_client)
        obj = wait_for(lambda: (o := server.get_object(resource, "ns", "app"))
                       and (o["spec"]["template"]["metadata"].get("annotations") or {}) and o)
    recorded = json.loads(obj["spec"]["template"]["metadata"]["annotations"][
        "reloader.stakater.com/last-reloaded-from"])
    assert (recorded["name"], recorded["hash"]) == ("app-cfg", NEW_HASH)
    assert template_env(obj["spec"]["template"]) == {}
    assert obj["spec"]["template"]["metadata"]["labels"] == {"app": "app"}


def test_rollouts_are_not_watched_without_the_flag(server, api_client):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create_custom(api_client, "argoproj.io", "rollouts", rollout("canary", annotations=RELOAD))
    with running_controller(api_client) as app:
        before = server.get_object("rollouts", "ns", "canary")
        change(app, api_client)
    assert server.get_object("rollouts", "ns", "canary") == before
    assert not server.request_counts().get(("list", "rollouts"))


def test_rollout_restart_strategy_sets_restart_at_and_leaves_template(server, api_client):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create_custom(api_client, "argoproj.io", "rollouts", rollout(
        "canary", annotations={**RELOAD, "reloader.stakater.com/rollout-strategy": "restart"}))
    with running_controller(api_client, ["--is-argo-rollouts"]) as app:
        before = server.get_object("rollouts", "ns", "canary")
        change(app, api_client)
        obj = wait_for(lambda: (r := server.get_object("rollouts", "ns", "canary"))
                       and r["spec"].get("restartAt") and r)
    restart_at = datetime.fromisoformat(obj["spec"]["restartAt"].replace("Z", "+00:00"))
    assert abs(restart_at.timestamp() - datetime.now().timestamp()) < 5
    assert obj["spec"]["template"] == before["spec"]["template"]
    assert writes(server, "rollouts") == 2  # create + the one restart


def test_rollout_with_workload_ref_is_not_changed_and_nothing_crashes(server, api_client):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create_custom(api_client, "argoproj.io", "rollouts",
                  rollout("by-ref", annotations=RELOAD, workload_ref=True))
    create_custom(api_client, "argoproj.io", "rollouts", rollout(
        "by-ref-restart", workload_ref=True,
        annotations={**RELOAD, "reloader.stakater.com/rollout-strategy": "restart"}))
    create(api_client, deployment("web", annotations=RELOAD))
    with running_controller(api_client, ["--is-argo-rollouts"]) as app:
        before = [server.get_object("rollouts", "ns", n) for n in ("by-ref", "by-ref-restart")]
        change(app, api_client)
        assert env_of(workload(server, "Deployment", "web"))[CM_ENV] == NEW_HASH
        set_cm_data(app, api_client, "app-cfg", {"v": "3"})  # the workers are still alive
        assert env_of(workload(server, "Deployment", "web"))[CM_ENV] == configmap_hash({"v": "3"})
    assert [server.get_object("rollouts", "ns", n) for n in ("by-ref", "by-ref-restart")] == before
    assert writes(server, "rollouts") == 2


# --- OpenShift DeploymentConfig --------------------------------------------------------


@pytest.mark.parametrize("flags", [["--is-openshift"], ["--is-openshift=true"], []],
                         ids=["flag", "flag=true", "discovered"])
def test_deployment_config_is_reloaded_by_flag_or_when_discovered(server, api_client, flags):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create_custom(api_client, "apps.openshift.io", "deploymentconfigs",
                  deployment_config("legacy", annotations=RELOAD))
    with running_controller(api_client, flags) as app:
        assert "DeploymentConfig" in app.controller.adapters
        change(app, api_client)
        obj = wait_for(lambda: (d := server.get_object("deploymentconfigs", "ns", "legacy"))
                       and CM_ENV in template_env(d["spec"]["template"]) and d)
    assert template_env(obj["spec"]["template"]) == {CM_ENV: NEW_HASH}


def test_deployment_config_off_by_flag_even_when_served(server, api_client):
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create_custom(api_client, "apps.openshift.io", "deploymentconfigs",
                  deployment_config("legacy", annotations=RELOAD))
    with running_controller(api_client, ["--is-openshift=false"]) as app:
        assert "DeploymentConfig" not in app.controller.adapters
        before = server.get_object("deploymentconfigs", "ns", "legacy")
        change(app, api_client)
    assert server.get_object("deploymentconfigs", "ns", "legacy") == before


def test_deployment_configs_are_not_watched_when_the_group_is_not_served():
    with ApiServer(disabled_groups={"apps.openshift.io"}) as server:
        api_client = server.api_client()
        try:
            create(api_client, configmap("app-cfg", {"v": "1"}))
            create(api_client, deployment("web", annotations=RELOAD))
            with running_controller(api_client) as app:
                assert "DeploymentConfig" not in app.controller.adapters
                change(app, api_client)
                assert env_of(workload(server, "Deployment", "web"))[CM_ENV] == NEW_HASH
            counts = server.request_counts()
            assert not [key for key in counts if key[1] == "deploymentconfigs"]
        finally:
            api_client.close()

