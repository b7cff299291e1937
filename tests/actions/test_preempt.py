"""The preempt action: who is evicted, for whom, and when nothing is."""

from __future__ import annotations

import yaml
from tests.kit import conf, node, pod, podgroup, priority_class, queue, run

PREEMPT = conf(
    "enqueue, allocate, preempt",
    ["priority", "gang", "conformance"],
    [{"name": "drf", "enablePreemptable": False}, "predicates", "proportion", "nodeorder"],
)
#: Volcano's default tiers: gang does not veto victims.
NO_GANG_VETO = conf(
    "enqueue, allocate, preempt",
    ["priority", {"name": "gang", "enablePreemptable": False}, "conformance"],
    [{"name": "drf", "enablePreemptable": False}, "predicates", "proportion", "nodeorder"],
)
CLASSES = [priority_class("high", 1000), priority_class("low", 10)]


def with_args(config: str, **arguments) -> str:
    """``config`` with ``arguments`` for the preempt action."""
    return config + yaml.safe_dump(
        {"configurations": [{"name": "preempt", "arguments": arguments}]}
    )


def running_job(name, n, *, node_name="n1", cls="low", min_member=1, ns="default", cpu="1"):
    objs = [podgroup(name, ns=ns, min_member=min_member, priority_class=cls, phase="Running")]
    objs += [
        pod(f"{name}-{i}", ns=ns, group=name, cpu=cpu, node=node_name, priority_class=cls)
        for i in range(n)
    ]
    return objs


def pending_job(name, n, *, cls="high", min_member=None, cpu="1", **pod_extra):
    objs = [podgroup(name, min_member=min_member or n, priority_class=cls)]
    objs += [
        pod(f"{name}-{i}", group=name, cpu=cpu, priority_class=cls, **pod_extra) for i in range(n)
    ]
    return objs


def cluster(*objs, cpu="4"):
    return [queue("default"), *CLASSES, node("n1", cpu=cpu, memory="64Gi"), *objs]


def test_high_priority_gang_evicts_low_priority_tasks_and_is_pipelined() -> None:
    """Two low-priority tasks go so that a high-priority gang of two fits; both pipelined."""
    d = run(cluster(*running_job("low", 4), *pending_job("high", 2)), PREEMPT)
    assert len(d.evictions) == 2 and all(e.startswith("default/low-") for e in d.evictions)
    assert d.pipelined == {"default/high-0": "n1", "default/high-1": "n1"}
    assert d.binds == {}


def test_audit_names_action_preemptor_victim_node_and_deciding_plugins() -> None:
    """Every eviction and pipelining has an audit record saying who allowed it."""
    d = run(cluster(*running_job("low", 4), *pending_job("high", 1)), PREEMPT)
    kinds = [(r["action"], r["kind"]) for r in d.audit]
    assert kinds == [("preempt", "evict"), ("preempt", "pipeline")]
    evict = d.audit[0]
    assert evict["preemptor"] == "default/high"
    assert evict["victim"] in d.evictions
    assert evict["node"] == "n1"
    assert "priority" in evict["reason"] and "tier 1" in evict["reason"]


def test_equal_priority_is_never_preempted() -> None:
    """A job of the same priority does not preempt."""
    d = run(cluster(*running_job("a", 4, cls="high"), *pending_job("b", 1)), PREEMPT)
    assert d.evictions == [] and d.pipelined == {}


def test_preemption_policy_never_does_not_preempt() -> None:
    """A pod with preemptionPolicy: Never waits instead of evicting."""
    objs = cluster(*running_job("low", 4), *pending_job("high", 1, preemptionPolicy="Never"))
    d = run(objs, PREEMPT)
    assert d.evictions == []


def test_best_effort_preemptor_only_takes_best_effort_victims() -> None:
    """A best-effort pod may evict best-effort pods (freeing a pod slot), never others."""
    objs = [
        queue("default"),
        *CLASSES,
        node("n1", cpu="4", memory="64Gi", pods="2"),
        podgroup("low", priority_class="low", phase="Running"),
        pod("low-0", group="low", cpu="1", node="n1", priority_class="low"),
        pod("low-be", group="low", cpu=None, memory=None, node="n1", priority_class="low"),
        podgroup("high", priority_class="high"),
        pod("high-be", group="high", cpu=None, memory=None, priority_class="high"),
    ]
    d = run(objs, PREEMPT)
    assert d.evictions == ["default/low-be"]


def test_best_effort_preemptor_does_not_evict_burstable_pods() -> None:
    """With only burstable victims, a best-effort preemptor evicts nothing."""
    objs = [
        queue("default"),
        *CLASSES,
        node("n1", cpu="4", memory="64Gi", pods="1"),
        *running_job("low", 1),
        podgroup("high", priority_class="high"),
        pod("high-be", group="high", cpu=None, memory=None, priority_class="high"),
    ]
    assert run(objs, PREEMPT).evictions == []


def test_statement_discarded_when_gang_cannot_be_pipelined() -> None:
    """Room for two of a gang of three: nothing is evicted, and the audit says why."""
    objs = cluster(*running_job("low", 2), *running_job("mid", 2, cls="high"))
    objs += pending_job("high", 3)
    d = run(objs, PREEMPT)
    assert d.evictions == [] and d.pipelined == {}
    assert any(r["kind"] == "discard" for r in d.audit)


def test_within_job_preemption_evicts_a_lower_priority_task_of_the_same_job() -> None:
    """A job's pending high-priority task takes the place of its own low-priority task."""
    objs = [
        queue("default"),
        *CLASSES,
        node("n1", cpu="2", memory="64Gi"),
        podgroup("j", min_member=3, priority_class="low", phase="Running"),
        pod("j-0", group="j", cpu="1", node="n1", priority=5),
        pod("j-1", group="j", cpu="1", node="n1", priority=5),
        pod("j-2", group="j", cpu="1", priority=50),
    ]
    d = run(objs, NO_GANG_VETO)
    assert len(d.evictions) == 1 and d.evictions[0] in ("default/j-0", "default/j-1")
    assert d.pipelined == {"default/j-2": "n1"}


def test_critical_and_kube_system_pods_are_never_victims() -> None:
    """conformance keeps kube-system pods and system-critical classes."""
    objs = [
        queue("default"),
        *CLASSES,
        priority_class("system-node-critical", 5),
        node("n1", cpu="2", memory="64Gi"),
        *running_job("sys", 1, ns="kube-system"),
        podgroup("crit", priority_class="system-node-critical", phase="Running"),
        pod("crit-0", group="crit", node="n1", priority_class="system-node-critical"),
        *pending_job("high", 1),
    ]
    assert run(objs, PREEMPT).evictions == []


def test_preemptable_false_protects_a_pod() -> None:
    """volcano.sh/preemptable: "false" keeps a pod out of the candidates."""
    objs = cluster(*running_job("low", 2), *pending_job("high", 1), cpu="2")
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"] == "low-0":
            o["metadata"]["annotations"]["volcano.sh/preemptable"] = "false"
    d = run(objs, PREEMPT)
    assert d.evictions == ["default/low-1"]


GANG_PREEMPT = conf(
    "enqueue, allocate, preempt",
    ["priority", {"name": "gang", "enablePreemptable": True}, "conformance"],
    ["predicates", "proportion", "nodeorder"],
)


def test_gang_preemptable_never_takes_a_gang_below_its_minimum() -> None:
    """With gang's preemptable on, a gang at its minimum keeps every task."""
    objs = cluster(*running_job("low", 4, min_member=4), *pending_job("high", 1))
    assert run(objs, GANG_PREEMPT).evictions == []
    objs = cluster(*running_job("low", 4, min_member=3), *pending_job("high", 1))
    assert len(run(objs, GANG_PREEMPT).evictions) == 1


def test_broken_gang_is_reported_and_optionally_evicted_whole() -> None:
    """Without gang's veto a gang can break; the audit says so, and with
    evictBrokenGangsWhole the rest of the gang goes too."""
    objs = cluster(*running_job("low", 4, min_member=4), *pending_job("high", 1))
    d = run(objs, NO_GANG_VETO)
    assert len(d.evictions) == 1
    assert "below minMember" in d.audit[0]["reason"]
    whole = with_args(NO_GANG_VETO, evictBrokenGangsWhole=True)
    d = run(objs, whole)
    assert sorted(d.evictions) == [f"default/low-{i}" for i in range(4)]
    assert any("rest of gang" in r["reason"] for r in d.audit)


TOPOLOGY = with_args(PREEMPT, enableTopologyAwarePreemption=True, minCandidateNodesAbsolute=10)


def test_topology_aware_mode_picks_the_least_damaging_node() -> None:
    """Dry run: n1 would lose a priority-100 pod, n2 a priority-10 one: n2 is chosen."""
    objs = [
        queue("default"),
        *CLASSES,
        priority_class("mid", 100),
        node("n1", cpu="1", memory="64Gi"),
        node("n2", cpu="1", memory="64Gi"),
        *running_job("mid", 1, node_name="n1", cls="mid", min_member=0),
        *running_job("low", 1, node_name="n2", cls="low", min_member=0),
        *pending_job("high", 1),
    ]
    d = run(objs, TOPOLOGY)
    assert d.evictions == ["default/low-0"]
    assert d.pipelined == {"default/high-0": "n2"}


def test_topology_aware_mode_reprieves_victims_that_are_not_needed() -> None:
    """Only the victims needed are evicted: a 2-cpu task needs two of three 1-cpu pods."""
    objs = cluster(*running_job("low", 3), *pending_job("high", 1, cpu="2"), cpu="3")
    d = run(objs, TOPOLOGY)
    assert len(d.evictions) == 2


def test_topology_aware_mode_with_whole_gangs_prefers_not_breaking_a_gang() -> None:
    """n1's victim would take a gang below its minimum, n2's would not. Volcano's order
    picks the lower-priority victim on n1; with evictBrokenGangsWhole, n2 is chosen."""
    objs = [
        queue("default"),
        *CLASSES,
        priority_class("mid", 100),
        node("n1", cpu="1", memory="64Gi"),
        node("n2", cpu="1", memory="64Gi"),
        node("n3", cpu="1", memory="64Gi"),
        podgroup("gang", priority_class="low", phase="Running", min_member=2),
        pod("gang-0", group="gang", cpu="1", node="n1", priority_class="low"),
        pod("gang-1", group="gang", cpu="1", node="n3", priority_class="high"),
        *running_job("solo", 1, node_name="n2", cls="mid", min_member=0),
        *pending_job("high", 1),
    ]
    args = {"enableTopologyAwarePreemption": True, "minCandidateNodesAbsolute": 10}
    d = run(objs, with_args(NO_GANG_VETO, **args))
    assert d.evictions == ["default/gang-0"]
    d = run(objs, with_args(NO_GANG_VETO, evictBrokenGangsWhole=True, **args))
    assert d.evictions == ["default/solo-0"]
