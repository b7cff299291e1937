"""The reclaim action: a queue below its share takes back what others borrowed."""

from __future__ import annotations

from tests.kit import conf, node, pod, podgroup, queue, run


def reclaim_conf(share_plugin: str = "proportion") -> str:
    """The queue plugin decides in the first tier, next to gang and conformance."""
    return conf(
        "enqueue, allocate, reclaim",
        ["priority", "gang", "conformance", share_plugin],
        ["predicates", "nodeorder"],
    )


def deserving(name: str, cpu: str, **kw) -> dict:
    q = queue(name, **kw)
    q["spec"]["deserved"] = {"cpu": cpu, "memory": "32Gi"}
    return q


def borrower(name: str, q: str, n: int, *, min_member: int = 1, node_name: str = "n1"):
    objs = [podgroup(name, queue=q, min_member=min_member, phase="Running")]
    objs += [pod(f"{name}-{i}", group=name, cpu="1", node=node_name) for i in range(n)]
    return objs


def starving(name: str, q: str, n: int, **pod_extra):
    return [podgroup(name, queue=q, min_member=n)] + [
        pod(f"{name}-{i}", group=name, cpu="1", **pod_extra) for i in range(n)
    ]


def test_queue_above_its_share_is_reclaimed() -> None:
    """q1 holds the whole node, q2 deserves half: one of q1's tasks goes for q2's task."""
    objs = [queue("q1"), queue("q2"), node("n1", cpu="4", memory="64Gi")]
    objs += borrower("a", "q1", 4) + starving("b", "q2", 1)
    d = run(objs, reclaim_conf())
    assert len(d.evictions) == 1 and d.evictions[0].startswith("default/a-")
    assert d.pipelined == {"default/b-0": "n1"}
    assert [r["kind"] for r in d.audit] == ["evict", "pipeline"]
    assert d.audit[0]["action"] == "reclaim" and d.audit[0]["victim_queue"] == "q1"


def test_non_reclaimable_queue_is_never_reclaimed() -> None:
    """spec.reclaimable: false keeps a queue's tasks, however much it borrowed."""
    objs = [queue("q1", reclaimable=False), queue("q2"), node("n1", cpu="4", memory="64Gi")]
    objs += borrower("a", "q1", 4) + starving("b", "q2", 1)
    assert run(objs, reclaim_conf()).evictions == []


def test_queue_within_its_share_is_not_reclaimed() -> None:
    """Two queues each at their deserved half: nothing to take back."""
    objs = [queue("q1"), queue("q2"), queue("q3"), node("n1", cpu="4", memory="64Gi")]
    objs += borrower("a", "q1", 2) + borrower("c", "q3", 2) + starving("b", "q2", 1)
    # three queues of weight 1 deserve 4/3 cpu each; q1 and q3 hold 2 (above) ...
    d = run(objs, reclaim_conf())
    assert len(d.evictions) == 1
    # ... but with q1 and q3 at exactly their share there is nothing to reclaim.
    objs = [queue("q1"), queue("q2"), node("n1", cpu="4", memory="64Gi")]
    objs += borrower("a", "q1", 2) + borrower("c", "q2", 2) + starving("b", "q2", 1)
    assert run(objs, reclaim_conf()).evictions == []


def test_closed_queue_does_not_reclaim() -> None:
    """A Closed queue's jobs take nothing back."""
    objs = [queue("q1"), queue("q2", state="Closed"), node("n1", cpu="4", memory="64Gi")]
    objs += borrower("a", "q1", 4) + starving("b", "q2", 1)
    for plugin in ("proportion", "capacity"):
        assert run(objs, reclaim_conf(plugin)).evictions == []


def test_preemption_policy_never_does_not_reclaim() -> None:
    """preemptionPolicy: Never waits instead of reclaiming."""
    objs = [queue("q1"), queue("q2"), node("n1", cpu="4", memory="64Gi")]
    objs += borrower("a", "q1", 4) + starving("b", "q2", 1, preemptionPolicy="Never")
    assert run(objs, reclaim_conf()).evictions == []


def test_capacity_reclaims_down_to_deserved_never_below_guarantee() -> None:
    """capacity: q1 deserves 1 cpu and holds 4, so a gang of 3 in q2 can take three
    tasks back; with a guarantee of 3 cpu (deserved is raised to it) only one task
    could go, too few for a gang of two, so nothing is evicted."""

    def objs(gang: int, **guarantee):
        out = [deserving("q1", "1", **guarantee), deserving("q2", "3")]
        out += [node("n1", cpu="4", memory="64Gi"), *borrower("a", "q1", 4)]
        return out + starving("b", "q2", gang)

    d = run(objs(3), reclaim_conf("capacity"))
    assert len(d.evictions) == 3 and len(d.pipelined) == 3
    d = run(objs(2, guarantee={"cpu": "3"}), reclaim_conf("capacity"))
    assert d.evictions == []
    d = run(objs(1, guarantee={"cpu": "3"}), reclaim_conf("capacity"))
    assert len(d.evictions) == 1


def test_proportion_never_reclaims_below_a_guarantee() -> None:
    """proportion: q1 holds the node's 4 cpu (more than it deserves) with 4Gi of
    memory; a task of q2 takes one of its tasks back, unless q1 is guaranteed its 4Gi
    of memory, which losing a task would break (Volcano's proportion does not check)."""

    def objs(**guarantee):
        out = [queue("q1", **guarantee), queue("q2"), node("n1", cpu="4", memory="64Gi")]
        return out + borrower("a", "q1", 4) + starving("b", "q2", 1)

    assert len(run(objs(), reclaim_conf()).evictions) == 1
    assert run(objs(guarantee={"memory": "4Gi"}), reclaim_conf()).evictions == []
    assert len(run(objs(guarantee={"memory": "3Gi"}), reclaim_conf()).evictions) == 1


def test_gang_larger_than_its_queue_share_evicts_nothing() -> None:
    """A gang of three in a queue that deserves two cpus: reclaim could take only two
    slots for it, so nothing is evicted, and the job is told it is its queue's share
    (not the nodes) that stops it."""
    objs = [queue("q1"), queue("q2"), node("n1", cpu="4", memory="64Gi")]
    objs += borrower("a", "q1", 4, min_member=2) + starving("b", "q2", 3)
    d = run(objs, reclaim_conf())
    assert d.evictions == [] and d.pipelined == {}
    why = d.pending["default/b"]
    assert "queue q2 may reclaim for at most 2 more task(s) like b-" in why
    assert "(proportion: beyond that it would exceed its deserved share" in why
    assert "the job needs 3 more to be pipelined (gang minimum 3)" in why
    assert [r["kind"] for r in d.audit] == ["failed"]


def test_gang_statement_discarded_when_the_job_cannot_be_pipelined() -> None:
    """The queue's share would take both tasks of the gang, but the running gang keeps
    its minimum of three: one of its four tasks may go, the second task finds no
    victim, and the first eviction is given back."""
    objs = [queue("q1"), queue("q2"), node("n1", cpu="4", memory="64Gi")]
    objs += borrower("a", "q1", 4, min_member=3) + starving("b", "q2", 2)
    d = run(objs, reclaim_conf())
    assert d.evictions == [] and d.pipelined == {}
    assert any(r["kind"] == "discard" for r in d.audit)
    assert "1 task(s) could be placed" in d.pending["default/b"]


def test_victims_come_from_the_lowest_priority_queue_first() -> None:
    """Two overusing queues: the one of lower spec.priority loses a task first."""
    q_low, q_high = queue("low"), queue("high")
    q_low["spec"]["priority"], q_high["spec"]["priority"] = 1, 10
    objs = [q_low, q_high, queue("q3"), node("n1", cpu="4", memory="64Gi")]
    objs += borrower("a", "low", 2) + borrower("c", "high", 2) + starving("b", "q3", 1)
    d = run(objs, reclaim_conf())
    assert len(d.evictions) == 1 and d.evictions[0].startswith("default/a-")


def test_idle_resources_count_before_victims_are_chosen() -> None:
    """The node has the reclaimer's memory but only 1 of the 2 cpus it asks: one 1-cpu
    victim is enough, where counting the victims alone would have taken two."""
    objs = [queue("q1"), queue("q2"), node("n1", cpu="4", memory="64Gi")]
    objs += borrower("a", "q1", 3)
    objs += [podgroup("b", queue="q2"), pod("b-0", group="b", cpu="2")]
    d = run(objs, reclaim_conf())
    assert len(d.evictions) == 1
    assert d.pipelined == {"default/b-0": "n1"}


def test_reclaim_for_a_queue_that_may_not_reclaim_says_so() -> None:
    """Both queues hold exactly their share: q2 may not reclaim for its task, and the
    job's pending reason and a ``failed`` audit record say so."""
    objs = [queue("q1"), queue("q2"), node("n1", cpu="4", memory="64Gi")]
    objs += borrower("a", "q1", 2) + borrower("c", "q2", 2) + starving("b", "q2", 1)
    d = run(objs, reclaim_conf())
    assert d.evictions == []
    assert (
        "reclaim could not help: queue q2 may not reclaim for task b-0 (proportion"
        in (d.pending["default/b"])
    )
    failed = [r for r in d.audit if r["kind"] == "failed"]
    assert [(r["action"], r["preemptor"]) for r in failed] == [("reclaim", "default/b")]


def cpu_only(objs: list[dict]) -> list[dict]:
    for o in objs:
        if o["kind"] == "Pod":
            del o["spec"]["containers"][0]["resources"]["requests"]["memory"]
    return objs


def test_reclaim_for_an_overused_queue_says_so() -> None:
    """A queue that already holds its deserved share reclaims nothing for its jobs."""
    objs = [queue("q1"), queue("q2"), node("n1", cpu="4", memory="64Gi")]
    objs += cpu_only(borrower("a", "q1", 2) + borrower("c", "q2", 2))
    objs += cpu_only(starving("b", "q1", 1) + starving("d", "q2", 1))
    d = run(objs, reclaim_conf())
    assert d.evictions == []
    assert "reclaim could not help: queue q1 is overused" in d.pending["default/b"]


def test_reclaim_names_the_plugin_that_allowed_no_victim() -> None:
    """q2 is below its share, but the node's other half is held by a pod of another
    scheduler and q1 holds exactly its share: proportion allows no victim, and the
    sentence says no other queue is over its deserved share."""
    objs = [queue("q1"), queue("q2"), node("n1", cpu="4", memory="64Gi")]
    objs += [pod("other", cpu="2", node="n1", scheduler="default-scheduler")]
    objs += borrower("a", "q1", 2) + starving("b", "q2", 1)
    d = run(objs, reclaim_conf())
    assert d.evictions == []
    assert (
        "reclaim could not help: task b-0: 1 node: proportion allows no victim (no other "
        "queue there is over its deserved share"
    ) in d.pending["default/b"]
