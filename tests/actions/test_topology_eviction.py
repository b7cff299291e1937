"""preempt and reclaim keep a hard network-topology gang within its HyperNode.

Two racks (tier-1 HyperNodes) of three 2-CPU nodes under one zone. A high-priority hard
rack-level gang of three 2-CPU pods holds rack-a with two running pods and is
starving; low-priority work fills the rest of the cluster. Room must be made in
rack-a, the only place the gang's other pods may go, never in rack-b.
"""

from __future__ import annotations

from tests.kit import conf, hypernode, node, pod, podgroup, priority_class, queue, run

PREEMPT = conf(
    "enqueue, allocate, preempt",
    ["priority", "gang", "conformance"],
    ["predicates", "proportion", "nodeorder", "binpack", "network-topology-aware"],
)


def cluster(gang_running: int) -> list[dict]:
    objs = [
        queue("default"),
        priority_class("high", 1000),
        priority_class("low", 1),
        hypernode("rack-a", 1, "Node", ["x0", "x1", "x2"]),
        hypernode("rack-b", 1, "Node", ["b0", "b1", "b2"]),
        hypernode("zone", 2, "HyperNode", ["rack-a", "rack-b"]),
    ]
    for n in ("x0", "x1", "x2", "b0", "b1", "b2"):
        objs.append(node(n, cpu="2", memory="8Gi"))
    gang = podgroup("gang", min_member=3, priority_class="high")
    gang["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    objs.append(gang)
    for i in range(3):
        on = "x0" if i == 0 and gang_running else None
        objs.append(
            pod(f"gang-{i}", cpu="2", memory="1Gi", group="gang", node=on,
                priority_class="high", priority=1000)
        )  # fmt: skip
    fillers = (
        ["x1", "x2", "b0", "b1", "b2"] if gang_running else ["x0", "x1", "x2", "b0", "b1", "b2"]
    )
    objs.append(podgroup("low", min_member=1, priority_class="low"))
    for k, n in enumerate(fillers):
        objs.append(pod(f"low-{k}", cpu="2", memory="1Gi", group="low", node=n,
                        priority_class="low", priority=1))  # fmt: skip
    return objs


def test_preempt_makes_room_only_in_the_hypernode_the_gang_holds() -> None:
    d = run(cluster(gang_running=1), PREEMPT)
    # The gang holds rack-a (gang-0 on x0): only the fillers on x1 and x2 are in
    # reach; those of rack-b would free room the gang may not use.
    assert sorted(d.evictions) == ["default/low-0", "default/low-1"]
    assert {v["node"] for v in d.audit if v.get("victim")} <= {"x1", "x2"}


def test_a_hard_gang_holding_no_hypernode_evicts_nothing_and_says_why() -> None:
    d = run(cluster(gang_running=0), PREEMPT)
    assert d.evictions == []
    reason = d.pending["default/gang"]
    assert "preempt could not help" in reason
    assert "holds no HyperNode yet" in reason


def test_soft_gangs_take_room_anywhere() -> None:
    objs = cluster(gang_running=0)
    for o in objs:
        if o["kind"] == "PodGroup" and o["metadata"]["name"] == "gang":
            o["spec"]["networkTopology"] = {"mode": "soft"}
    d = run(objs, PREEMPT)
    assert len(d.evictions) == 3
