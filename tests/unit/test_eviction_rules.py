"""Issue 34: the pure rules of restarting pods by eviction (gitops_reloader/rollout/eviction.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gitops_reloader.errors import ConfigError
from gitops_reloader.kinds import parse_kinds_config
from gitops_reloader.rollout.completion import Phase
from gitops_reloader.rollout.eviction import (
    AT_ONCE_ANNOTATION,
    BARE_POD_ANNOTATION,
    EVICTION_ANNOTATION,
    MAX_RECORD_CHARS,
    STRATEGY_ANNOTATION,
    EvictionMode,
    EvictionRecord,
    EvictionState,
    PodView,
    at_once,
    describe_restart,
    disruptions_allowed,
    eviction_status,
    expected_pods,
    is_old,
    next_step,
    owned,
    parse_record,
    pod_view,
    selector_query,
    selects,
    strategy_wanted,
)

SINCE = 1_764_355_200


def pod(name: str, created: float = SINCE - 100, *, ready: bool = True, terminating: bool = False,
        owner: str = "sts-uid") -> PodView:
    return PodView(name=name, uid=f"uid-{name}", created=created, ready=ready, terminating=terminating,
                   owner_uid=owner)


def step(pods: list[PodView], *, count: int = 1, expected: int | None = None, by_ordinal: bool = True,
         now: float = SINCE + 5, timeout: float = 0.0, bare: tuple[PodView, ...] = ()):
    return next_step(pods, SINCE, at_once=count, expected=len(pods) if expected is None else expected,
                     by_ordinal=by_ordinal, now=now, timeout=timeout, bare=bare)


def test_evict_the_highest_ordinal_first_for_a_statefulset_one_at_a_time() -> None:
    chosen = step([pod("db-0"), pod("db-10"), pod("db-2")])
    assert [p.name for p in chosen.evict] == ["db-10"]
    assert (chosen.old, chosen.state) == (3, EvictionState.EVICTING)


def test_evict_the_oldest_first_otherwise_and_as_many_as_allowed_at_once() -> None:
    chosen = step([pod("a", SINCE - 10), pod("b", SINCE - 30), pod("c", SINCE - 20)], count=2,
                  by_ordinal=False)
    assert [p.name for p in chosen.evict] == ["b", "c"]


@pytest.mark.parametrize(("pods", "expected", "reason"), [
    ([pod("db-0"), pod("db-1", terminating=True)], 2, "pod db-1 is terminating"),
    ([pod("db-0")], 2, "1 of 2 pods exist: waiting for the missing one"),
    ([pod("db-0"), pod("db-1", SINCE + 3, ready=False)], 2, "pod db-1 is not Ready"),
    ([pod("db-0", ready=False), pod("db-1", terminating=True)], 2, "pod db-1 is terminating"),
    ([pod("db-0", ready=False)], 2, "1 of 2 pods exist: waiting for the missing one"),
])
def test_no_evict_while_a_replacement_is_missing_terminating_or_unready(
        pods: list[PodView], expected: int, reason: str) -> None:
    chosen = step(pods, expected=expected)
    assert chosen.evict == ()
    assert (chosen.state, chosen.reason) == (EvictionState.WAITING, reason)


def test_no_evict_before_the_clock_leaves_the_write_second() -> None:
    """A replacement created in the write's own second would count as old: nothing goes until then."""
    chosen = step([pod("db-0")], now=SINCE + 0.5)
    assert chosen.evict == () and chosen.reason.startswith("waiting for the clock")


def test_done_when_every_pod_is_newer_than_the_change_and_ready() -> None:
    assert step([pod("db-0", SINCE + 2), pod("db-1", SINCE + 9)]).done
    assert not step([pod("db-0", SINCE + 2, ready=False)]).done


def test_a_pod_of_the_write_second_is_old_one_a_second_later_is_not() -> None:
    assert is_old(pod("a", SINCE), SINCE) and is_old(pod("a", SINCE + 0.9), SINCE)
    assert not is_old(pod("a", SINCE + 1), SINCE)


def test_bare_pods_are_kept_apart_allowed_or_not_and_foreign_pods_dropped() -> None:
    bare = pod("debug", owner="")
    allowed = PodView("tool", "u", SINCE, True, False, "", bare_allowed=True)
    found = owned([pod("db-0"), bare, allowed, pod("other", owner="x")], frozenset({"sts-uid"}))
    assert [p.name for p in found.own] == ["db-0"]
    assert [p.name for p in found.bare] == ["tool"] and [p.name for p in found.refused] == ["debug"]


def test_an_old_pod_that_is_not_ready_is_evicted_first_even_while_a_replacement_starts() -> None:
    """Issue 40 case 1: a crash-looping pod serves nothing and is the one that needs the new data."""
    crashing = [pod("db-0"), pod("db-1", ready=False), pod("db-2")]
    assert [p.name for p in step(crashing).evict] == ["db-1"]
    starting = [pod("db-0", ready=False), pod("db-1"), pod("db-2", SINCE + 2, ready=False)]
    assert [p.name for p in step(starting).evict] == ["db-0"]
    assert [p.name for p in step(starting[1:]).evict] == []  # only Ready old pods: wait for db-2


def test_no_evict_of_any_pod_while_fewer_exist_than_the_spec_asks() -> None:
    """Issue 40 case 3: the count is the spec's, not what the first pass happened to see."""
    chosen = step([pod("db-0"), pod("db-1")], expected=3)
    assert chosen.evict == () and chosen.state is EvictionState.WAITING and chosen.old == 2
    assert [p.name for p in step([pod("db-0"), pod("db-1")], expected=2).evict] == ["db-1"]


def test_an_opted_in_bare_pod_is_evicted_and_never_waited_for() -> None:
    """Issue 40 case 2: nothing re-creates a bare pod, so its absence is no missing replacement."""
    tool = PodView("tool", "u", SINCE - 50, True, False, "", bare_allowed=True)
    new = [pod("db-0", SINCE + 2), pod("db-1", SINCE + 3)]
    chosen = step(new, expected=2, bare=(tool,))
    assert [p.name for p in chosen.evict] == ["tool"] and chosen.old == 1
    assert step(new, expected=2, bare=(replace(tool, terminating=True),)).done
    assert step(new, expected=2).done
    first = step([pod("db-0")], expected=1, bare=(tool,), count=2)
    assert [p.name for p in first.evict] == ["db-0", "tool"]  # the workload's own pods first


def test_a_replacement_not_ready_within_the_timeout_fails_the_evict_and_evicts_nothing_more() -> None:
    pods = [pod("db-0"), pod("db-1", ready=False), pod("db-2", SINCE + 2, ready=False)]
    assert step(pods, timeout=600, now=SINCE + 601).evict == (pods[1],)  # 599 s: still starting
    failed = step(pods, timeout=600, now=SINCE + 603)
    assert (failed.state, failed.evict, failed.old) == (EvictionState.FAILED, (), 2)
    assert failed.reason == "pod db-2 not Ready 601s after it was created (--rollout-timeout 600s)"
    assert step(pods, timeout=0, now=SINCE + 10_000).evict == (pods[1],)  # no timeout: never fails
    recovered = [pod("db-0"), pod("db-1", ready=False), pod("db-2", SINCE + 2)]
    assert step(recovered, timeout=600, now=SINCE + 603).evict == (recovered[1],)


@pytest.mark.parametrize(("obj", "path", "expected"), [
    ({"spec": {"replicas": 3}}, (), 3),
    ({"spec": {"replicas": 0}}, (), 0),
    ({"spec": {}, "status": {"desiredNumberScheduled": 5}}, (), 5),  # a DaemonSet
    ({"spec": {"instances": 3, "replicas": 9}}, ("spec", "instances"), 3),  # pods.replicasPath
    ({"spec": {"replicas": 9}}, ("spec", "instances"), None),
    ({"spec": {"replicas": "3"}}, (), None),
    ({"spec": {"replicas": True}}, (), None),
    ({"spec": {"replicas": -1}}, (), None),
    ({"spec": "x"}, (), None),
])
def test_the_pods_an_evict_expects_come_from_the_spec(obj: dict, path: tuple[str, ...],
                                                      expected: int | None) -> None:
    assert expected_pods(obj, replicas_path=path) == expected


def test_a_failed_evict_fails_the_rollout() -> None:
    failed = EvictionRecord(SINCE, 3, 2, EvictionState.FAILED).encode()
    status = eviction_status({EVICTION_ANNOTATION: failed})
    assert status is not None and status.phase is Phase.FAILED
    assert status.reason == "ReplacementNotReady" and "2 of 3 pods left to evict" in status.message


def test_pod_view_reads_what_the_api_server_returns() -> None:
    view = pod_view({"metadata": {
        "name": "db-1", "uid": "u1", "creationTimestamp": "2025-11-28T18:40:00Z", "deletionTimestamp": None,
        "labels": {"app": "db"}, "annotations": {BARE_POD_ANNOTATION: "true"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "s1",
                             "controller": True}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert view is not None
    assert (view.name, view.created, view.ready, view.terminating) == ("db-1", SINCE, True, False)
    assert (view.owner_uid, view.owner, view.ordinal) == ("s1", ("apps/v1", "StatefulSet", "db"), 1)
    assert pod_view({"metadata": {"name": "x"}}) is None  # no creation time


def test_evict_record_round_trips_and_rejects_anything_else() -> None:
    record = EvictionRecord(SINCE, 3, 1, EvictionState.BLOCKED, {"ConfigMap/db": "abc"})
    assert parse_record(record.encode()) == record
    for text in ("", "[]", "{}", '{"since":-1}', '{"since":1,"state":"Nope"}', '{"since":true}',
                 '{"since":1,"sources":{"a":1}}', json.dumps({"since": 1, "x": "y" * MAX_RECORD_CHARS})):
        assert parse_record(text) is None, text


def test_an_evict_under_way_holds_the_rollout_and_done_hands_back_to_the_kind_rule() -> None:
    waiting = EvictionRecord(SINCE, 3, 2, EvictionState.WAITING).encode()
    status = eviction_status({EVICTION_ANNOTATION: waiting})
    assert status is not None and status.phase is Phase.PROGRESSING
    assert (status.reason, status.message) == ("WaitingForReplacement", "2 of 3 pods left to evict")
    finished = EvictionRecord(SINCE, state=EvictionState.DONE).encode()
    assert eviction_status({EVICTION_ANNOTATION: finished}) is None
    assert eviction_status({}) is None


@pytest.mark.parametrize(("mode", "annotated", "rolls", "template", "wanted", "why"), [
    (EvictionMode.OFF, False, False, True, False, ""),
    (EvictionMode.OFF, True, False, True, False, "--eviction=off"),
    (EvictionMode.OFF, False, False, False, False, "--eviction=off"),
    (EvictionMode.ANNOTATED, False, False, True, False, ""),
    (EvictionMode.ANNOTATED, True, False, True, True, f"annotation {STRATEGY_ANNOTATION}=eviction"),
    (EvictionMode.ANNOTATED, True, True, True, False, "the template write rolls its pods"),
    (EvictionMode.ANNOTATED, False, True, False, True,
     "its kind has no pod template: its pods are restarted by eviction"),
    (EvictionMode.ON_DELETE, False, False, True, True,
     "--eviction=on-delete: a template write rolls none of its pods"),
    (EvictionMode.ON_DELETE, False, True, True, False, ""),
])
def test_which_workloads_restart_by_evict(mode: EvictionMode, annotated: bool, rolls: bool, template: bool,
                                          wanted: bool, why: str) -> None:
    annotations = {STRATEGY_ANNOTATION: " Eviction "} if annotated else {}
    assert strategy_wanted(mode, annotations, rolls_on_write=rolls, has_template=template) == (wanted, why)


def test_evictions_at_once_annotation_is_bounded() -> None:
    assert at_once({}, 1) == (1, None)
    assert at_once({AT_ONCE_ANNOTATION: "3"}, 1) == (3, None)
    for bad in ("0", "101", "-1", "two", ""):
        assert at_once({AT_ONCE_ANNOTATION: bad}, 2) == (2, bad)


def test_label_selectors_as_the_api_server_reads_them() -> None:
    selector = {"matchLabels": {"app": "db"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["a", "b"]},
        {"key": "canary", "operator": "DoesNotExist"}]}
    assert selector_query(selector) == "app=db,tier in (a,b),!canary"
    assert selects(selector, {"app": "db", "tier": "b"})
    assert not selects(selector, {"app": "db", "tier": "c"})
    assert not selects(selector, {"app": "db", "tier": "a", "canary": "1"})
    assert selector_query({}) == "" and selects({}, {"x": "y"})  # an empty selector selects everything
    assert selector_query(None) is None and not selects(None, {"app": "db"})
    assert selector_query({"matchExpressions": [{"key": "a", "operator": "Gt"}]}) is None


def test_the_budget_covering_a_pod_and_the_line_explain_prints() -> None:
    budgets = [{"metadata": {"name": "other"}, "spec": {"selector": {"matchLabels": {"app": "web"}}},
                "status": {"disruptionsAllowed": 5}},
               {"metadata": {"name": "db-pdb"}, "spec": {"selector": {"matchLabels": {"app": "db"}}},
                "status": {"disruptionsAllowed": 1}}]
    covering = disruptions_allowed(budgets, {"app": "db"})
    assert covering == ("db-pdb", 1)
    assert disruptions_allowed(budgets, {"app": "cache"}) is None
    assert describe_restart(3, 1, covering) == "evict 3 pods, one at a time, PDB db-pdb allows 1 now"
    assert describe_restart(1, 2, None, ["debug"]) == (
        "evict 1 pod, 2 at a time, no PodDisruptionBudget covers them; never evicted (no owner, nothing "
        "would re-create them): debug")


def test_kinds_config_pods_names_a_kind_without_a_pod_template() -> None:
    [spec] = parse_kinds_config("kinds:\n- {group: postgresql.cnpg.io, version: v1, kind: Cluster, "
                                "plural: clusters, pods: {selector: 'cnpg.io/cluster={name}', "
                                "ownerDepth: 1, replicasPath: spec.instances}}\n",
                                source="f")
    assert spec.template_path == () and spec.pod_selector_for("pg") == "cnpg.io/cluster=pg"
    assert spec.replicas_path == ("spec", "instances")
    with pytest.raises(ConfigError, match="podTemplatePath"):
        parse_kinds_config("kinds:\n- {group: a.io, version: v1, kind: A, plural: as}\n", source="f")
    for pods, message in (("{ownerDepth: 5}", "ownerDepth"), ("{selector: 'a in (b)'}", "selector"),
                          ("{other: 1}", "pods must be"), ("{replicasPath: status.x}", "must start at spec"),
                          ("{replicasPath: 3}", "pods.replicasPath")):
        with pytest.raises(ConfigError, match=message):
            parse_kinds_config(f"kinds:\n- {{group: a.io, version: v1, kind: A, plural: as, pods: {pods}}}\n",
                               source="f")
