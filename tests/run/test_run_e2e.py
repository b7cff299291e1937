"""`pumice run` against a real kube-apiserver: gangs bound whole or not at all, what
`kubectl describe` shows for a job that waits, preemption, and decisions that went stale
between the cycle and the bind."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from tests.run import kube_kit as k

from pumice.cluster.kube_client import RESOURCES

pytestmark = pytest.mark.k8s

PREEMPT_CONFIG = """
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
    enableJobEnqueued: false  # (the queue is full: admission would hold the preemptor back)
  - name: nodeorder
"""


def test_a_gang_of_four_is_bound_on_four_nodes(kube):
    client, kubeconfig = kube
    k.nodes(client, 4, cpu="4")
    k.gang(client, "train", 4, cpu="3")
    with k.running(kubeconfig):
        placed = k.wait_for("the gang bound", lambda: len(k.bound(client)) == 4 and k.bound(client))
        pg = k.wait_for(
            "the podgroup Running",
            lambda: (
                (g := k.get(client, "PodGroup", "default/train"))
                and g.get("status", {}).get("phase") == "Running"
                and g
            ),
        )
    assert sorted(placed.values()) == ["node-000", "node-001", "node-002", "node-003"]
    assert k.condition(pg, "Scheduled")["status"] == "True"
    scheduled = k.wait_for("Scheduled events", lambda: k.events_for(client, "train-0", "Scheduled"))
    assert "Successfully assigned default/train-0 to " in scheduled[0]["message"]


def test_a_gang_that_cannot_fit_stays_wholly_unbound_and_says_why(kube):
    client, kubeconfig = kube
    k.nodes(client, 2, cpu="4")
    k.gang(client, "big", 4, cpu="3")  # one 3-cpu pod per 4-cpu node: two of four
    with k.running(kubeconfig) as runner:
        k.wait_for("a few cycles", lambda: runner.cycles >= 3)
        pods = k.wait_for(
            "the pods' PodScheduled=False condition",
            lambda: (
                all(k.condition(p, "PodScheduled") for p in k.pods(client).values())
                and k.pods(client)
            ),
        )
        pg = k.wait_for(
            "the podgroup's Unschedulable condition",
            lambda: (
                (g := k.get(client, "PodGroup", "default/big"))
                and k.condition(g, "Unschedulable")
                and g
            ),
        )
        failed = k.wait_for(
            "a FailedScheduling event", lambda: k.events_for(client, "big-0", "FailedScheduling")
        )
        pg_events = k.wait_for(
            "an Unschedulable event on the podgroup",
            lambda: k.events_for(client, "big", "Unschedulable"),
        )
        assert k.bound(client) == {}  # never half a gang, however many cycles ran
    for p in pods.values():
        cond = k.condition(p, "PodScheduled")
        assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
        assert "gang short: needs 4 tasks, 2 could be placed" in cond["message"]
    assert k.condition(pg, "Unschedulable")["status"] == "True"
    # The event says what the condition says: the explanation of the job.
    assert failed[0]["message"] == k.condition(pods["big-0"], "PodScheduled")["message"]
    assert failed[0]["type"] == "Warning"
    assert "needs 4 tasks" in pg_events[0]["message"]
    # Deduplicated: the same explanation is one event per object, not one per cycle.
    assert len(k.events_for(client, "big-0", "FailedScheduling")) == 1


def test_preemption_deletes_victims_and_binds_the_preemptor_once_they_are_gone(
    kube, tmp_path: Path
):
    client, kubeconfig = kube
    for name, value in (("high", 1000), ("low", 10)):
        k.ok(client.request("POST", RESOURCES["PriorityClass"].path(), body={
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value,
        }))  # fmt: skip
    k.nodes(client, 1, cpu="4")
    for i in range(2):
        k.pod(client, f"low-{i}", cpu="2", priority_class="low", grace=30)
    config = tmp_path / "preempt.yaml"
    config.write_text(PREEMPT_CONFIG)
    with k.running(kubeconfig, config=str(config)):
        k.wait_for("the low pods bound", lambda: len(k.bound(client)) == 2)
        k.pod(client, "high-0", cpu="3", priority_class="high")

        # Eviction is a graceful delete: the kubelet's part (none runs here) is ours.
        # Both low pods must go for high-0 to fit (3 of 4 cpu), and their evictions are
        # written one by one: wait until both are terminating.
        def victims() -> list[str]:
            gone = [n for n, p in k.pods(client).items() if p["metadata"].get("deletionTimestamp")]
            return sorted(gone) if len(gone) == 2 else []

        terminating = k.wait_for("both victims terminating", victims)
        assert terminating == ["low-0", "low-1"]
        assert "high-0" not in k.bound(client)  # not bound onto resources still held
        for name in terminating:
            k.force_delete(client, f"default/{name}")
        k.wait_for("the preemptor bound", lambda: "high-0" in k.bound(client))
    assert set(terminating) <= {"low-0", "low-1"}
    preempted = k.events_for(client, terminating[0], "Preempted")
    assert preempted, "the victim has a Preempted event"


def test_a_pod_or_node_deleted_before_its_bind_breaks_nothing(kube):
    client, kubeconfig = kube
    names = k.nodes(client, 3, cpu="4")
    gate = threading.Event()
    decided: dict[str, str] = {}
    with k.running(kubeconfig) as runner:
        runner.cluster.may_write = lambda: gate.wait(30) or True  # hold the binds
        runner.on_cycle = lambda decisions, applied: decided.update(decisions.binds)
        for i in range(3):
            k.pod(client, f"solo-{i}", cpu="3")
        k.wait_for("three binds decided", lambda: len(decided) == 3)
        victim_pod = "default/solo-0"
        victim_node = decided["default/solo-1"]
        k.ok(client.request("DELETE", RESOURCES["Pod"].key_path(victim_pod),
                            body={"gracePeriodSeconds": 0}))  # fmt: skip
        k.ok(client.request("DELETE", RESOURCES["Node"].path("", victim_node)))
        gate.set()
        k.wait_for("the untouched pod bound", lambda: "solo-2" in k.bound(client))
        k.wait_for("binds settled", lambda: runner.cluster.binds_in_flight() == 0)
        k.wait_for("nothing left to decide", lambda: not runner.cache.has_pending_work())
        final = k.bound(client)
    assert "solo-0" not in k.pods(client)
    assert final["solo-2"] in names and "solo-1" in final
    # solo-1 was bound to a node that is gone, or refused and rescheduled elsewhere:
    # either way at most once, and the scheduler kept going.
    assert runner.cluster.stats.binds <= 3
