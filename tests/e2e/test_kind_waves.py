"""Issue 28: under a rollout budget, each kind's wave completes by its own rule.

OpenKruise CloneSets and Advanced StatefulSets (stored through the reduced v1.9.0 CRDs,
docs/api-test-server.md) and a configured kind naming ``completesLike`` are reloaded under
``--max-concurrent-rollouts``. No OpenKruise controller runs: the test plays it by writing
the ``status`` subresource as its controllers do (``pkg/controller/cloneset/cloneset_status.go``:
observedGeneration first, with no pod at the new revision yet, then ``updatedReplicas`` /
``updatedReadyReplicas`` climbing to replicas - partition). ``--rollout-timeout`` is an hour, so
no wave can end by the timeout: each next wave starts because the test wrote the status that
completes the previous rollout by its kind's rule.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from git_setup import GitSetup
from kubernetes.client import ApiClient, CoreV1Api
from reload_helpers import call, configmap, create
from test_git_sink import events, file_at, git_controller, wait_commits, wait_event
from test_workload_kinds import WORKER_CRD

from gitops_reloader import cli
from gitops_reloader.errors import KubeError
from gitops_reloader.hashing import configmap_hash
from gitops_reloader.kube.api import MERGE
from gitops_reloader.model import ObjectRef
from gitops_reloader.rollout.completion import PAUSED, RolloutStatus
from gitops_reloader.rollout.marker import MARKER_ANNOTATION
from gitops_reloader.testing.apiserver import ApiServer
from gitops_reloader.testing.githost import GitHostServer
from gitops_reloader.testing.harness import App, running_controller, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("isolated_git")]

CM_ENV = "STAKATER_APP_CFG_CONFIGMAP"
PRIORITY = "gitops-reloader.io/rollout-priority"
HOUR = "--rollout-timeout=1h"


@dataclass(frozen=True)
class Workload:
    """One workload of the test: where it lives and where its pod template is."""

    api_version: str
    kind: str
    plural: str
    name: str
    key: str
    template_field: str = "template"

    @property
    def url(self) -> str:
        return f"/apis/{self.api_version}/namespaces/ns/{self.plural}/{self.name}"

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.key, "ns", self.name)

    def get(self, api_client: ApiClient) -> dict[str, Any]:
        return call(api_client, "GET", self.url)

    def generation(self, api_client: ApiClient) -> int:
        return self.get(api_client)["metadata"]["generation"]

    def reloaded(self, api_client: ApiClient) -> bool:
        """The template carries the hash of the changed ConfigMap (the env-vars sink wrote it)."""
        [container] = self.get(api_client)["spec"][self.template_field]["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in container.get("env") or ()}
        return env.get(CM_ENV) == configmap_hash({"v": "2"})

    def write_status(self, api_client: ApiClient, status: dict[str, Any]) -> None:
        """What the owning controller writes: the status subresource, nothing else."""
        call(api_client, "PATCH", f"{self.url}/status", {"status": status}, content_type=MERGE)


def template(name: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "app", "image": "app:1",
                                     "envFrom": [{"configMapRef": {"name": "app-cfg"}}]}]}}


def metadata(name: str, priority: int) -> dict[str, Any]:
    return {"name": name, "namespace": "ns",
            "annotations": {"reloader.stakater.com/auto": "true", PRIORITY: str(priority)}}


def cloneset(api_client: ApiClient, name: str, *, priority: int, replicas: int,
             strategy: dict[str, Any]) -> Workload:
    """A CloneSet whose controller reported its current revision complete (generation 1)."""
    create(api_client, {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
                        "metadata": metadata(name, priority),
                        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                                 "template": template(name), "updateStrategy": strategy}})
    workload = Workload("apps.kruise.io/v1alpha1", "CloneSet", "clonesets", name, "CloneSet.apps.kruise.io")
    workload.write_status(api_client, cloneset_status(1, replicas, replicas, f"{name}-1"))
    return workload


def cloneset_status(observed: int, replicas: int, updated: int, revision: str,
                    updated_ready: int | None = None) -> dict[str, Any]:
    """The CloneSet controller's status: pods at ``revision`` counted as updated."""
    ready = updated if updated_ready is None else updated_ready
    return {"observedGeneration": observed, "replicas": replicas, "readyReplicas": replicas,
            "availableReplicas": replicas, "updatedReplicas": updated, "updatedReadyReplicas": ready,
            "updatedAvailableReplicas": ready, "expectedUpdatedReplicas": replicas,
            "updateRevision": revision,
            "currentRevision": revision if updated == replicas else f"{revision}-old",
            "labelSelector": "app"}


def advanced_statefulset(api_client: ApiClient, name: str, *, priority: int, partition: int) -> Workload:
    """An Advanced StatefulSet of 3 pods, rolled out at generation 1."""
    create(api_client, {"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
                        "metadata": metadata(name, priority),
                        "spec": {"replicas": 3, "serviceName": name,
                                 "selector": {"matchLabels": {"app": name}},
                                 "template": template(name), "podManagementPolicy": "Parallel",
                                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                                     "partition": partition, "podUpdatePolicy": "InPlaceIfPossible",
                                     "maxUnavailable": 1}}}})
    workload = Workload("apps.kruise.io/v1beta1", "StatefulSet", "statefulsets", name,
                        "StatefulSet.apps.kruise.io")
    workload.write_status(api_client, {
        "observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "availableReplicas": 3,
        "currentReplicas": 3, "updatedReplicas": 3, "updatedReadyReplicas": 3,
        "currentRevision": f"{name}-1", "updateRevision": f"{name}-1"})
    return workload


def worker(api_client: ApiClient, name: str, *, priority: int) -> Workload:
    create(api_client, {"apiVersion": "example.com/v1", "kind": "Worker",
                        "metadata": metadata(name, priority),
                        "spec": {"queue": "jobs", "podTemplate": template(name)}})
    return Workload("example.com/v1", "Worker", "workers", name, "Worker.example.com", "podTemplate")


def kinds_config(tmp_path: Path, completes_like: str) -> str:
    path = tmp_path / "kinds.yaml"
    path.write_text("kinds:\n  - group: example.com\n    version: v1\n    kind: Worker\n    plural: workers\n"
                    f"    podTemplatePath: spec.podTemplate\n    completesLike: {completes_like}\n")
    return f"--workload-kinds-config={path}"


def change_configmap(api_client: ApiClient) -> None:
    CoreV1Api(api_client).patch_namespaced_config_map("app-cfg", "ns", {"data": {"v": "2"}})


def tracked(app: App, workload: Workload) -> RolloutStatus | None:
    """Where the controller's rollout budget says ``workload``'s rollout stands (None: not rolling)."""
    waves = app.controller.waves
    assert waves is not None
    return waves.tracker.status(workload.ref, time.time())


def wait_reason(app: App, workload: Workload, reason: str) -> None:
    wait_for(lambda: (s := tracked(app, workload)) is not None and s.reason == reason,
             message=f"{workload.name}: rollout {reason}")


def frees_its_slot_when_complete(app: App, api_client: ApiClient, first: Workload, second: Workload, *,
                                 updating: dict[str, Any], complete: dict[str, Any]) -> None:
    """Under a budget of one: ``first`` keeps the slot while its controller reports ``updating``,
    and ``second`` is written once it reports ``complete``."""
    first.write_status(api_client, updating)
    wait_reason(app, first, "UpdatingReplicas")
    assert not second.reloaded(api_client), f"{second.name} started before {first.name} completed"
    first.write_status(api_client, complete)
    wait_for(lambda: second.reloaded(api_client), message=f"{second.name} starts once {first.name} completes")


def reasons(api_client: ApiClient, name: str) -> list[str]:
    return [e["reason"] for e in events(api_client, name)]


@pytest.fixture
def kruise(server: ApiServer) -> ApiServer:
    for crd in ("clonesets.apps.kruise.io", "statefulsets.apps.kruise.io"):
        server.serve_crd(crd)
    server.serve_crd(WORKER_CRD)
    return server


def test_each_wave_completes_by_its_kinds_rule(kruise, api_client, tmp_path) -> None:
    """Budget 2, four workloads in priority order: a CloneSet with partition 50%, an Advanced
    StatefulSet with partition 1, a Worker completing like a Deployment and a plain CloneSet.
    Each waiting reload starts only once the test wrote the status that completes one of the
    rollouts under way by that kind's rule; a status still short of it keeps the slot."""
    create(api_client, configmap("app-cfg", {"v": "1"}))
    cache = cloneset(api_client, "a-cache", priority=40, replicas=4,
                     strategy={"type": "InPlaceIfPossible", "partition": "50%", "maxUnavailable": 1})
    db = advanced_statefulset(api_client, "b-db", priority=30, partition=1)
    crunch = worker(api_client, "c-crunch", priority=20)
    web = cloneset(api_client, "d-web", priority=10, replicas=2, strategy={"type": "ReCreate"})
    flags = ["--max-concurrent-rollouts=2", HOUR, kinds_config(tmp_path, "Deployment")]
    with running_controller(api_client, flags) as app:
        change_configmap(api_client)
        wait_for(lambda: cache.reloaded(api_client) and db.reloaded(api_client), message="the first wave")
        for first in (cache, db):
            assert first.generation(api_client) == 2
            assert MARKER_ANNOTATION in first.get(api_client)["metadata"]["annotations"]
            wait_reason(app, first, "ObservedGenerationBehind")  # the controllers have not seen it yet

        # The CloneSet controller observes the new revision; no pod is updated yet.
        cache.write_status(api_client, cloneset_status(2, 4, 0, "a-cache-2"))
        wait_reason(app, cache, "UpdatingReplicas")
        # Two of four pods updated (partition 50% keeps two), one not ready yet: still rolling.
        cache.write_status(api_client, cloneset_status(2, 4, 2, "a-cache-2", updated_ready=1))
        wait_reason(app, cache, "UpdatedPodsNotReady")
        assert not crunch.reloaded(api_client), "a slot was freed before the CloneSet's rule said complete"
        cache.write_status(api_client, cloneset_status(2, 4, 2, "a-cache-2"))
        wait_for(lambda: crunch.reloaded(api_client), message="the Worker starts once the CloneSet completes")
        assert tracked(app, cache) is None  # complete: no longer rolling
        assert not web.reloaded(api_client)

        # The Advanced StatefulSet: partition 1 of 3, so two pods to update, all ready.
        db.write_status(api_client, {"observedGeneration": 2, "replicas": 3, "readyReplicas": 2,
                                     "availableReplicas": 2, "currentReplicas": 2, "updatedReplicas": 1,
                                     "currentRevision": "b-db-1", "updateRevision": "b-db-2"})
        wait_reason(app, db, "PodsNotReady")
        assert not web.reloaded(api_client)
        db.write_status(api_client, {"observedGeneration": 2, "replicas": 3, "readyReplicas": 3,
                                     "availableReplicas": 3, "currentReplicas": 1, "updatedReplicas": 2,
                                     "updatedReadyReplicas": 2, "currentRevision": "b-db-1",
                                     "updateRevision": "b-db-2"})
        wait_for(lambda: web.reloaded(api_client),
                 message="the last CloneSet starts once the StatefulSet completes")

        # The Worker completes like a Deployment; the last CloneSet by its own rule.
        crunch.write_status(api_client, {"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1,
                                         "readyReplicas": 1, "availableReplicas": 1})
        web.write_status(api_client, cloneset_status(2, 2, 2, "d-web-2"))
        wait_for(lambda: not app.controller.waves.tracker.rollouts(time.time()), message="every rollout done")
        wait_for(lambda: app.metrics.registry.get_sample_value("gitops_reloader_rollouts",
                                                               {"state": "rolling"}) == 0,
                 message="the rolling gauge back at 0")
    for workload in (cache, db, crunch, web):
        assert workload.generation(api_client) == 2  # each reloaded exactly once
        assert "RolloutFailed" not in reasons(api_client, workload.name)


def advanced_daemonset(api_client: ApiClient, name: str, *, priority: int, partition: int | str) -> Workload:
    """An Advanced DaemonSet on 4 nodes, rolled out at generation 1."""
    create(api_client, {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "DaemonSet",
                        "metadata": metadata(name, priority),
                        "spec": {"selector": {"matchLabels": {"app": name}}, "template": template(name),
                                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                                     "rollingUpdateType": "Standard", "maxUnavailable": 1,
                                     "partition": partition}}}})
    workload = Workload("apps.kruise.io/v1alpha1", "DaemonSet", "daemonsets", name,
                        "DaemonSet.apps.kruise.io")
    workload.write_status(api_client, daemonset_status(1, updated=4, available=4, revision=f"{name}-1"))
    return workload


def daemonset_status(observed: int, *, updated: int, available: int, revision: str) -> dict[str, Any]:
    """The Advanced DaemonSet controller's status for 4 scheduled pods."""
    return {"observedGeneration": observed, "desiredNumberScheduled": 4, "currentNumberScheduled": 4,
            "numberMisscheduled": 0, "numberReady": available, "numberAvailable": available,
            "updatedNumberScheduled": updated, "daemonSetHash": revision}


def test_an_advanced_daemonset_wave_completes_by_its_partition_rule(kruise, api_client) -> None:
    """Budget 1: an Advanced DaemonSet with ``rollingUpdate.partition: 25%`` of 4 nodes (one pod
    kept, rounded down as its controller) holds the only slot until 3 pods are updated and all
    4 available; then the second one (no partition) starts and completes with all 4."""
    kruise.serve_crd("daemonsets.apps.kruise.io")
    create(api_client, configmap("app-cfg", {"v": "1"}))
    agents = advanced_daemonset(api_client, "a-agents", priority=10, partition="25%")
    logs = advanced_daemonset(api_client, "b-logs", priority=0, partition=0)
    with running_controller(api_client, ["--max-concurrent-rollouts=1", HOUR]) as app:
        change_configmap(api_client)
        wait_for(lambda: agents.reloaded(api_client), message="the first Advanced DaemonSet is written")
        wait_reason(app, agents, "ObservedGenerationBehind")
        agents.write_status(api_client, daemonset_status(2, updated=2, available=4, revision="a-agents-2"))
        wait_reason(app, agents, "UpdatingPods")
        agents.write_status(api_client, daemonset_status(2, updated=3, available=3, revision="a-agents-2"))
        wait_reason(app, agents, "AvailabilityPending")
        assert not logs.reloaded(api_client), "a slot was freed before the partition rule said complete"
        agents.write_status(api_client, daemonset_status(2, updated=3, available=4, revision="a-agents-2"))
        wait_for(lambda: logs.reloaded(api_client), message="the second starts once the first completes")
        assert tracked(app, agents) is None
        logs.write_status(api_client, daemonset_status(2, updated=3, available=4, revision="b-logs-2"))
        wait_reason(app, logs, "UpdatingPods")  # no partition: all 4 pods
        logs.write_status(api_client, daemonset_status(2, updated=4, available=4, revision="b-logs-2"))
        wait_for(lambda: not app.controller.waves.tracker.rollouts(time.time()), message="every rollout done")
    for workload in (agents, logs):
        assert workload.generation(api_client) == 2
        assert "RolloutFailed" not in reasons(api_client, workload.name)


MASTER_CLONESETS = Path(__file__).parent / "crds" / "openkruise_master_clonesets.json"
"""The CloneSet CRD of OpenKruise master: v1alpha1 served, v1beta1 served and stored."""


def cloneset_v1beta1(api_client: ApiClient, name: str, *, priority: int, rolling: dict[str, Any]) -> Workload:
    """A v1beta1 CloneSet of 4 pods (knobs under ``rollingUpdate``), rolled out at generation 1."""
    create(api_client, {"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
                        "metadata": metadata(name, priority),
                        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": name}},
                                 "template": template(name),
                                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling}}})
    workload = Workload("apps.kruise.io/v1beta1", "CloneSet", "clonesets", name, "CloneSet.apps.kruise.io")
    workload.write_status(api_client, cloneset_status(1, 4, 4, f"{name}-1"))
    return workload


def test_cloneset_v1beta1_is_discovered_and_its_wave_completes_by_its_rule(server, api_client) -> None:
    """On OpenKruise master the controller watches CloneSets at v1beta1 (the storage version)
    and reads ``rollingUpdate.partition``: with 50% of 4 kept, the slot frees at 2 updated and
    ready pods, and the next CloneSet starts."""
    server.serve_crd(json.loads(MASTER_CLONESETS.read_text()))
    create(api_client, configmap("app-cfg", {"v": "1"}))
    half = cloneset_v1beta1(api_client, "a-half", priority=10,
                            rolling={"partition": "50%", "podUpdatePolicy": "InPlaceIfPossible"})
    whole = cloneset_v1beta1(api_client, "b-whole", priority=0, rolling={"podUpdatePolicy": "ReCreate"})
    with running_controller(api_client, ["--max-concurrent-rollouts=1", HOUR]) as app:
        assert app.controller.adapters["CloneSet.apps.kruise.io"].resource.version == "v1beta1"
        change_configmap(api_client)
        wait_for(lambda: half.reloaded(api_client), message="the first CloneSet is written")
        frees_its_slot_when_complete(app, api_client, half, whole,  # 2 of 4 updated: 50% kept
                                     updating=cloneset_status(2, 4, 1, "a-half-2"),
                                     complete=cloneset_status(2, 4, 2, "a-half-2"))
        whole.write_status(api_client, cloneset_status(2, 4, 4, "b-whole-2"))
        wait_for(lambda: not app.controller.waves.tracker.rollouts(time.time()), message="every rollout done")
    assert half.get(api_client)["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == "50%"  # kept
    for workload in (half, whole):
        assert workload.generation(api_client) == 2


def test_cloneset_v1beta1_row_falls_back_to_v1alpha1_on_openkruise_releases(kruise, api_client) -> None:
    """OpenKruise v1.9 serves CloneSets at v1alpha1 only: discovery watches that version."""
    with running_controller(api_client, []) as app:
        assert app.controller.adapters["CloneSet.apps.kruise.io"].resource.version == "v1alpha1"


def test_a_paused_cloneset_holds_its_wave_with_a_clear_reason(kruise, api_client) -> None:
    """A CloneSet its owner paused (``spec.updateStrategy.paused``) is written, its controller
    updates no pod: the rollout keeps the only slot, a RolloutPaused Event says why, and the
    next reload waits until the owner resumes it and it completes."""
    create(api_client, configmap("app-cfg", {"v": "1"}))
    held = cloneset(api_client, "a-held", priority=10, replicas=2,
                    strategy={"type": "ReCreate", "paused": True})
    after = cloneset(api_client, "b-after", priority=0, replicas=2, strategy={"type": "ReCreate"})
    with running_controller(api_client, ["--max-concurrent-rollouts=1", HOUR]) as app:
        change_configmap(api_client)
        wait_for(lambda: held.reloaded(api_client), message="the paused CloneSet is written")
        held.write_status(api_client, cloneset_status(2, 2, 0, "a-held-2"))
        wait_reason(app, held, PAUSED)
        event = wait_event(api_client, "a-held", "RolloutPaused")
        assert event["type"] == "Warning"
        assert event["involvedObject"]["kind"] == "CloneSet"
        assert event["message"].startswith("rollout paused by the workload's owner (the update strategy is "
                                           "paused; 0 of 2 pods updated)")
        assert "--rollout-timeout (3600s after its write)" in event["message"]
        assert not after.reloaded(api_client)

        # The owner resumes it; the controller observes generation 3 and rolls both pods.
        call(api_client, "PATCH", held.url, {"spec": {"updateStrategy": {"paused": False}}},
             content_type=MERGE)
        frees_its_slot_when_complete(app, api_client, held, after,
                                     updating=cloneset_status(3, 2, 1, "a-held-2"),
                                     complete=cloneset_status(3, 2, 2, "a-held-2"))
        after.write_status(api_client, cloneset_status(2, 2, 2, "b-after-2"))
        wait_for(lambda: not app.controller.waves.tracker.rollouts(time.time()), message="every rollout done")
    assert reasons(api_client, "a-held").count("RolloutPaused") == 1
    assert "RolloutPaused" not in reasons(api_client, "b-after")
    assert "RolloutFailed" not in reasons(api_client, "a-held")


def test_a_kind_completing_like_none_is_done_at_the_write(kruise, api_client, tmp_path) -> None:
    """``completesLike: none``: nobody writes status, yet with a budget of 1 and an hour's
    timeout both Workers reload, one after the other."""
    create(api_client, configmap("app-cfg", {"v": "1"}))
    workers = [worker(api_client, name, priority=0) for name in ("a-one", "b-two")]
    flags = ["--max-concurrent-rollouts=1", HOUR, kinds_config(tmp_path, "none")]
    with running_controller(api_client, flags) as app:
        change_configmap(api_client)
        wait_for(lambda: all(w.reloaded(api_client) for w in workers), message="both Workers reloaded")
        wait_for(lambda: not app.controller.waves.tracker.rollouts(time.time()), message="nothing rolling")
    for one in workers:
        # both went through the budget
        assert MARKER_ANNOTATION in one.get(api_client)["metadata"]["annotations"]


def test_the_kruise_crds_keep_the_strategy_fields_the_rules_read(kruise, api_client) -> None:
    """partition (int or percentage) and paused are stored under their upstream names; a
    wrong type is refused as kube-apiserver refuses it, an unknown field pruned."""
    kruise.serve_crd("daemonsets.apps.kruise.io")
    stored = cloneset(api_client, "cs", priority=0, replicas=2,
                      strategy={"type": "ReCreate", "partition": "50%", "paused": True, "colour": "blue"})
    assert stored.get(api_client)["spec"]["updateStrategy"] == {"type": "ReCreate", "partition": "50%",
                                                                "paused": True}
    with pytest.raises(KubeError) as refused:
        call(api_client, "PATCH", stored.url, {"spec": {"updateStrategy": {"paused": "yes"}}},
             content_type=MERGE)
    assert refused.value.status == 422 and "spec.updateStrategy.paused" in str(refused.value)
    sts = advanced_statefulset(api_client, "sts", priority=0, partition=2)
    assert sts.get(api_client)["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2
    with pytest.raises(KubeError) as refused:
        call(api_client, "PATCH", sts.url,
             {"spec": {"updateStrategy": {"rollingUpdate": {"partition": "50%"}}}}, content_type=MERGE)
    assert refused.value.status == 422 and "spec.updateStrategy.rollingUpdate.partition" in str(refused.value)
    create(api_client, {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "DaemonSet",
                        "metadata": metadata("ds", 0),
                        "spec": {"selector": {"matchLabels": {"app": "ds"}}, "template": template("ds"),
                                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                                     "rollingUpdateType": "Standard", "partition": "25%", "paused": True}}}})
    ds = call(api_client, "GET", "/apis/apps.kruise.io/v1alpha1/namespaces/ns/daemonsets/ds")
    assert ds["spec"]["updateStrategy"]["rollingUpdate"] == {
        "rollingUpdateType": "Standard", "partition": "25%", "paused": True}


def test_the_git_follow_up_judges_a_custom_kinds_rollout_by_its_completes_like(
        kruise, api_client, git: GitSetup, host: GitHostServer, tmp_path) -> None:
    """A Worker on the git sink (``completesLike: Deployment``), its manifest found by the
    repository scan, no engine: the test applies the commit as it is (a plain file, as
    ``kubectl apply`` would) and writes the Worker's status as its operator would. The
    follow-up reads the Worker through the controller's own kind table and reports
    ``Applied`` once its status is complete by the Deployment rule, not before."""
    crunch = Workload("example.com/v1", "Worker", "workers", "crunch", "Worker.example.com", "podTemplate")
    body = {"apiVersion": "example.com/v1", "kind": "Worker",
            "metadata": {"name": "crunch", "namespace": "ns",
                         "annotations": {"reloader.stakater.com/auto": "true",
                                         "gitops-reloader.io/sink": "git"}},
            "spec": {"queue": "jobs", "podTemplate": template("crunch")}}
    git.create({"workers/crunch.yaml": yaml.safe_dump(body, sort_keys=False)})
    git.configure()
    create(api_client, configmap("app-cfg", {"v": "1"}))
    create(api_client, body)
    flags = (kinds_config(tmp_path, "Deployment"), "--git-follow-interval=100ms", "--git-apply-timeout=5m")
    with git_controller(api_client, git, *flags) as (app, _):
        change_configmap(api_client)
        wait_commits(host, 2)
        committed = yaml.safe_load(file_at(host, "workers/crunch.yaml"))
        call(api_client, "PATCH", f"{crunch.url}?fieldManager=kubectl",
             {"spec": committed["spec"]}, content_type=MERGE)  # the commit applied, as it is
        follower = app.controller.sinks["git"].follower  # type: ignore[attr-defined]

        def following(reason: str) -> bool:
            followed = follower.state_of(crunch.ref)
            return followed is not None and followed.state.message.startswith(f"rolling: {reason}")

        wait_for(lambda: following("ObservedGenerationBehind"), timeout=20,
                 message="the follow-up sees the digest applied and the operator not caught up")
        generation = crunch.generation(api_client)
        crunch.write_status(api_client, {"observedGeneration": generation, "replicas": 2,
                                         "updatedReplicas": 0, "readyReplicas": 1, "availableReplicas": 1})
        wait_for(lambda: following("UpdatingReplicas"), timeout=20,
                 message="the follow-up sees the Worker rolling by the Deployment rule")
        assert "Applied" not in reasons(api_client, "crunch")
        crunch.write_status(api_client, {"observedGeneration": generation, "replicas": 1,
                                         "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1})
        event = wait_event(api_client, "crunch", "Applied")
        assert event["involvedObject"]["kind"] == "Worker" and "rolled out" in event["message"]


def test_an_unknown_completes_like_stops_start_up_naming_the_file_and_entry(tmp_path, capsys) -> None:
    flag = kinds_config(tmp_path, "Rollout")
    assert cli.main(["run", flag]) == 2
    assert capsys.readouterr().err.strip() == (
        f"gitops-reloader: {tmp_path / 'kinds.yaml'} entry 1 (Worker): completesLike must be one of "
        "Deployment, StatefulSet, DaemonSet, Ready-condition, none, got 'Rollout'")
