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


#: No node-order plugin: nodes are tried in name order.
BY_NAME = conf(
    "enqueue, allocate, preempt",
    ["priority", "gang", "conformance"],
    [{"name": "drf", "enablePreemptable": False}, "predicates", "proportion"],
)


def with_port(p: dict, port: int) -> dict:
    p["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
    return p


def test_evicting_the_pod_that_holds_a_host_port_frees_it() -> None:
    """The node has room but a low-priority pod holds the host port the preemptor asks
    for: that pod is evicted, and the preemptor is pipelined only then."""
    objs = [queue("default"), *CLASSES, node("n1", cpu="4", memory="64Gi")]
    objs += running_job("low", 1, min_member=0)
    with_port(objs[-1], 8080)
    high = pending_job("high", 1)
    with_port(high[-1], 8080)
    d = run(objs + high, BY_NAME)
    assert d.evictions == ["default/low-0"]
    assert d.pipelined == {"default/high-0": "n1"}


def test_a_node_that_does_not_work_out_gives_its_evictions_back() -> None:
    """On n1 the victim frees the cpu but a high-priority pod keeps the host port: n1's
    eviction is undone before n2 is tried, where the preemptor is placed. Only n2's
    victim is evicted."""
    objs = [
        queue("default"),
        *CLASSES,
        node("n1", cpu="2", memory="64Gi"),
        node("n2", cpu="1", memory="64Gi"),
        *running_job("low", 1, node_name="n1", min_member=0),
        *running_job("keep", 1, node_name="n1", cls="high"),
        *running_job("other", 1, node_name="n2", min_member=0),
    ]
    with_port(objs[-3], 8080)  # keep-0 holds the port on n1
    high = pending_job("high", 1)
    with_port(high[-1], 8080)
    d = run(objs + high, BY_NAME)
    assert d.evictions == ["default/other-0"]
    assert d.pipelined == {"default/high-0": "n2"}
    assert [r["node"] for r in d.audit if r["kind"] == "evict"] == ["n2"]


def test_a_job_preempt_could_not_help_names_the_gang_at_its_minimum() -> None:
    """gang allows no victim: the pending reason and a ``failed`` audit record say so and
    name the job at its minimum."""
    objs = cluster(*running_job("low", 4, min_member=4), *pending_job("high", 1))
    d = run(objs, GANG_PREEMPT)
    assert d.evictions == []
    reason = d.pending["default/high"]
    assert "preempt could not help: task high-0: 1 node: gang allows no victim" in reason
    assert "job default/low is at its minimum" in reason
    failed = [r for r in d.audit if r["kind"] == "failed"]
    assert [(r["action"], r["preemptor"], r["task"]) for r in failed] == [
        ("preempt", "default/high", "default/high-0")
    ]


def test_a_gang_preempt_places_only_in_part_says_how_far_it_got() -> None:
    """One low-priority pod may go (gang keeps its minimum of one), so one task of a
    gang of three is placed: the pending reason says so, and that for the second no
    candidate was allowed by both priority (only lower priority) and gang (only above
    the minimum)."""
    objs = cluster(*running_job("low", 2), *running_job("mid", 2, cls="high"))
    objs += pending_job("high", 3)
    reason = run(objs, PREEMPT).pending["default/high"]
    assert "preempt could not help: 1 task(s) could be placed, but the job would" in reason
    assert "task high-1: 1 node: no candidate is allowed by all of priority, gang" in reason


def test_a_job_helped_by_preempt_has_no_note() -> None:
    """Preemption that pipelines the job leaves no 'could not help' behind."""
    objs = cluster(*running_job("low", 4), *pending_job("high", 2))
    d = run(objs, PREEMPT)
    assert len(d.evictions) == 2
    assert "could not help" not in " ".join(d.pending.values())
    assert not [r for r in d.audit if r["kind"] == "failed"]


def anti_affinity(p: dict, **labels) -> dict:
    p["metadata"]["labels"] = dict(labels)
    p["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": dict(labels)},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    return p


def affinity_cluster() -> list[dict]:
    """n1 holds a low-priority pod that the preemptor's anti-affinity is about and one
    that it is not; either eviction frees the only pod slot left."""
    objs = [
        queue("default"),
        *CLASSES,
        node("n1", cpu="4", memory="64Gi", pods="2", labels={"kubernetes.io/hostname": "n1"}),
        *running_job("plain", 1, min_member=0),
        *running_job("twin", 1, min_member=0),
    ]
    anti_affinity(objs[-1], app="web")
    high = pending_job("high", 1)
    anti_affinity(high[-1], app="web")
    return objs + high


def test_topology_aware_mode_evicts_the_pod_the_anti_affinity_is_about() -> None:
    """With the victims' removal simulated (the predicates plugin's enablePreemptable on,
    its default), the dry run evicts the pod the anti-affinity is about and reprieves
    the other, as kube-scheduler does."""
    d = run(affinity_cluster(), TOPOLOGY)
    assert d.evictions == ["default/twin-0"]
    assert d.pipelined == {"default/high-0": "n1"}


def test_normal_mode_passes_over_a_node_its_anti_affinity_refuses() -> None:
    """Volcano's normal preempt checks inter-pod affinity with the state from before the
    evictions: the node is never made to fit, nothing is evicted, and the job says why."""
    d = run(affinity_cluster(), PREEMPT)
    assert d.evictions == [] and d.pipelined == {}
    assert (
        "preempt could not help: no node could take task high-0 whatever is evicted "
        "(0/1 nodes are available: 1 didn't match pod anti-affinity rules)"
    ) in d.pending["default/high"]
