"""The capacity plugin: deserved, capability, guarantee, elastic borrowing, queue trees."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from tests.kit import conf, node, pod, podgroup, queue, run

from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.config import parse_config
from pumice.errors import InputError
from pumice.scheduler import Scheduler

FLAT = conf("enqueue, allocate", ["priority", "gang", "capacity"], ["predicates", "nodeorder"])
TREE = conf(
    "enqueue, allocate",
    ["priority", "gang", {"name": "capacity", "enableHierarchy": True}],
    ["predicates", "nodeorder"],
)
GIB = 2**30


def q(name, *, deserved=None, capability=None, guarantee=None, parent=None, priority=0):
    out = queue(name, capability=capability, guarantee=guarantee, parent=parent)
    if deserved is not None:
        out["spec"]["deserved"] = deserved
    if priority:
        out["spec"]["priority"] = priority
    return out


def job(name, queue_name, n, *, cpu="1", min_member=1, min_resources=None, phase="Inqueue"):
    objs = [
        podgroup(
            name, queue=queue_name, min_member=min_member, min_resources=min_resources, phase=phase
        )
    ]
    return objs + [pod(f"{name}-{i}", group=name, cpu=cpu, memory="1Gi") for i in range(n)]


def attrs(objs, config=FLAT):
    """The capacity plugin's queue attributes after session open."""
    sched = Scheduler.create(parse_config(yaml.safe_load(config)))
    ssn = sched.open(build_snapshot([SourcedObject(o, "t") for o in objs]))
    (plugin,) = [p for p in ssn.plugins if p.name == "capacity"]
    return plugin, ssn


def test_real_capability_is_the_cluster_minus_other_guarantees_capped_by_capability() -> None:
    """q1 is guaranteed 2 cpu of 8; q2 may use at most 8 - 2 = 6, and q1 its cap of 5."""
    objs = [
        q("q1", guarantee={"cpu": "2"}, capability={"cpu": "5"}),
        q("q2"),
        node("n1", cpu="8", memory="64Gi"),
        *job("a", "q1", 1),
        *job("b", "q2", 1),
    ]
    plugin, _ = attrs(objs)
    assert plugin.attrs["q1"].real_capability[0] == 5000
    assert plugin.attrs["q2"].real_capability[0] == 6000
    # deserved is raised to the guarantee
    assert plugin.attrs["q1"].deserved[0] == 2000


def test_elastic_borrowing_up_to_real_capability_not_beyond() -> None:
    """A queue deserving 2 cpu borrows idle cpu up to its capability of 3."""
    objs = [
        q("q1", deserved={"cpu": "2"}, capability={"cpu": "3"}),
        node("n1", cpu="8", memory="64Gi"),
        *job("a", "q1", 5),
    ]
    d = run(objs, FLAT)
    assert len(d.binds) == 3


def test_guarantee_of_another_queue_is_kept_free() -> None:
    """q2's guarantee of 6 cpu leaves q1 only 2 of the 8 cpu, even while q2 is idle."""
    objs = [
        q("q1"),
        q("q2", guarantee={"cpu": "6"}),
        node("n1", cpu="8", memory="64Gi"),
        *job("a", "q1", 5),
    ]
    assert len(run(objs, FLAT).binds) == 2


def test_enqueue_refuses_a_job_whose_minimum_exceeds_real_capability() -> None:
    """minResources of 4 cpu do not fit a capability of 3: the job stays Pending."""
    objs = [
        q("q1", capability={"cpu": "3"}),
        node("n1", cpu="8", memory="64Gi"),
        *job("a", "q1", 4, min_member=4, min_resources={"cpu": "4"}, phase="Pending"),
    ]
    d = run(objs, FLAT)
    assert d.binds == {}
    assert d.podgroups["default/a"].phase == "Pending"
    assert "capability" in d.pending["default/a"]


def test_queue_order_is_priority_then_share_then_deserved_first() -> None:
    """Only one node fits one job: the queue of higher spec.priority gets it."""
    objs = [
        q("q1", deserved={"cpu": "1"}),
        q("q2", deserved={"cpu": "1"}, priority=5),
        node("n1", cpu="1", memory="64Gi"),
        *job("a", "q1", 1),
        *job("b", "q2", 1),
    ]
    assert list(run(objs, FLAT).binds) == ["default/b-0"]


def test_share_of_a_queue_without_deserved_is_one() -> None:
    """A best-effort queue (no deserved) has share 1."""
    objs = [q("q1"), node("n1", cpu="8", memory="64Gi"), *job("a", "q1", 1)]
    plugin, _ = attrs(objs)
    assert plugin.attrs["q1"].share == 1.0


# -- hierarchy ---------------------------------------------------------------------------


def tree(*extra):
    return [
        q("root"),
        q("eng", capability={"cpu": "4"}, parent="root"),
        q("ml", parent="eng", deserved={"cpu": "2"}),
        q("web", parent="eng", capability={"cpu": "3"}),
        node("n1", cpu="16", memory="64Gi"),
        *extra,
    ]


def test_child_is_bounded_by_its_parent() -> None:
    """ml has no capability of its own but eng's 4 cpu bound it."""
    d = run(tree(*job("a", "ml", 6)), TREE)
    assert len(d.binds) == 4


def test_siblings_share_the_parent_capability() -> None:
    """web takes 3 (its cap), ml then only the 1 left of eng's 4."""
    objs = tree(*job("w", "web", 3), *job("a", "ml", 3))
    d = run(objs, TREE)
    per = {k: sum(1 for b in d.binds if b.startswith(f"default/{k}-")) for k in ("w", "a")}
    assert sum(per.values()) == 4 and per["w"] <= 3


def test_children_inherit_unset_capability_and_ancestors_are_recorded() -> None:
    plugin, _ = attrs(tree(*job("a", "ml", 1)), TREE)
    ml = plugin.attrs["ml"]
    assert ml.ancestors == ["root", "eng"]
    assert ml.capability[0] == 4000
    assert np.isclose(ml.real_capability[0], 4000)
    assert set(plugin.attrs["eng"].children) == {"ml", "web"}


def test_allocations_count_in_every_ancestor() -> None:
    objs = tree(
        podgroup("a", queue="ml", phase="Running"),
        pod("a-0", group="a", cpu="1", node="n1"),
        pod("a-1", group="a", cpu="1", node="n1"),
    )
    plugin, _ = attrs(objs, TREE)
    for name in ("ml", "eng", "root"):
        assert plugin.attrs[name].allocated[0] == 2000


def test_job_in_a_non_leaf_queue_stops_the_plugin() -> None:
    """Volcano refuses to schedule anything when a job sits in a queue with children."""
    d = run(tree(*job("a", "eng", 1), *job("b", "ml", 1)), TREE)
    assert d.binds == {}
    assert any("only leaf queues" in n for n in d.notes)


def test_child_capability_above_the_parent_is_an_error() -> None:
    objs = tree(*job("a", "ml", 1))
    objs[3] = q("web", parent="eng", capability={"cpu": "6"})
    with pytest.raises(InputError, match="exceeds the capability of parent queue eng"):
        run(objs, TREE)


def test_queue_cycle_is_an_error() -> None:
    objs = [
        q("a", parent="b"),
        q("b", parent="a"),
        node("n1"),
    ]
    with pytest.raises(InputError, match="cycle"):
        run(objs, TREE)


def test_missing_root_queue_is_implied() -> None:
    """Volcano's controller always creates root; a snapshot without it still works."""
    objs = [q("eng", capability={"cpu": "2"}), node("n1", cpu="8", memory="64Gi")]
    objs += job("a", "eng", 3)
    assert len(run(objs, TREE).binds) == 2


def test_victims_nearest_in_the_tree_go_first() -> None:
    """A reclaimer in ml takes from its sibling web before the cousin queue ops."""
    config = conf(
        "reclaim",
        ["priority", "gang", "conformance", {"name": "capacity", "enableHierarchy": True}],
        ["predicates"],
    )
    objs = [
        q("root"),
        q("eng", parent="root", deserved={"cpu": "2"}),
        q("ml", parent="eng", deserved={"cpu": "1"}),
        q("web", parent="eng", deserved={"cpu": "1"}),
        q("ops", parent="root", deserved={"cpu": "1"}),
        node("n1", cpu="4", memory="64Gi"),
        podgroup("w", queue="web", phase="Running", min_member=0),
        pod("w-0", group="w", cpu="1", node="n1"),
        pod("w-1", group="w", cpu="1", node="n1"),
        podgroup("o", queue="ops", phase="Running", min_member=0),
        pod("o-0", group="o", cpu="1", node="n1"),
        pod("o-1", group="o", cpu="1", node="n1"),
        *job("a", "ml", 1),
    ]
    d = run(objs, config)
    assert len(d.evictions) == 1 and d.evictions[0].startswith("default/w-")


def test_ancestor_reclaim_level_spares_a_subtree_within_its_share() -> None:
    """a1 holds 2 cpu against a deserved 1, but its parent A is within its deserved 2:
    by default a1 loses a task to b1; with ancestorReclaimLevel 1 it keeps it."""

    def config(level: int) -> str:
        plugin = {"name": "capacity", "enableHierarchy": True}
        if level:
            plugin["arguments"] = {"ancestorReclaimLevel": level}
        return conf("reclaim", ["priority", "gang", "conformance", plugin], ["predicates"])

    objs = [
        q("root"),
        q("A", parent="root", deserved={"cpu": "2"}),
        q("a1", parent="A", deserved={"cpu": "1"}),
        q("B", parent="root", deserved={"cpu": "2"}),
        q("b1", parent="B", deserved={"cpu": "2"}),
        node("n1", cpu="2", memory="64Gi"),
        podgroup("a", queue="a1", phase="Running", min_member=0),
        pod("a-0", group="a", cpu="1", node="n1"),
        pod("a-1", group="a", cpu="1", node="n1"),
        *job("b", "b1", 1),
    ]
    assert len(run(objs, config(0)).evictions) == 1
    assert run(objs, config(1)).evictions == []


def _reclaimable(ssn):
    (fn,) = [f for tier in ssn.hooks.chain("reclaimable") for name, f in tier if name == "capacity"]
    return fn


def _task(ssn, key):
    return next(t for j in ssn.jobs.values() for t in j.tasks.values() if t.key == key)


def dims_cluster():
    """q1 deserves 2 cpu and 2Gi: it holds 2 cpu (its share) and 3Gi (over, in memory
    only). a uses cpu and memory, b cpu only. Reclaimers of q2 ask cpu only or memory
    only."""
    return [
        q("q1", deserved={"cpu": "2", "memory": "2Gi"}),
        q("q2", deserved={"cpu": "2", "memory": "2Gi"}),
        node("n1", cpu="2", memory="8Gi"),
        podgroup("v", queue="q1", phase="Running", min_member=0),
        pod("a", group="v", cpu="1", memory="3Gi", node="n1"),
        pod("b", group="v", cpu="1", memory=None, node="n1"),
        podgroup("r", queue="q2"),
        pod("r-cpu", group="r", cpu="1", memory=None),
        pod("r-mem", group="r", cpu=None, memory="1Gi"),
    ]


def test_a_victim_counts_where_its_queue_is_over_in_what_the_victim_uses() -> None:
    """Volcano's capacity (current master): a reclaimee is a victim when its queue is over
    its deserved share in a dimension the reclaimee uses (and deserved names), provided it
    shares a dimension with the reclaimer. A cpu-only reclaimer may so take a, whose
    queue is over in memory; b (cpu only, and q1 is not over in cpu) is no victim."""
    _plugin, ssn = attrs(dims_cluster(), conf("reclaim", ["gang", "capacity"], ["predicates"]))
    reclaimable = _reclaimable(ssn)
    a, b = _task(ssn, "default/a"), _task(ssn, "default/b")
    assert reclaimable(_task(ssn, "default/r-cpu"), [b, a]) == [a]


def test_a_victim_sharing_no_dimension_with_the_reclaimer_is_skipped() -> None:
    """A memory-only reclaimer takes a (memory, over), never b (no memory at all)."""
    _plugin, ssn = attrs(dims_cluster(), conf("reclaim", ["gang", "capacity"], ["predicates"]))
    reclaimable = _reclaimable(ssn)
    a, b = _task(ssn, "default/a"), _task(ssn, "default/b")
    assert reclaimable(_task(ssn, "default/r-mem"), [b, a]) == [a]
