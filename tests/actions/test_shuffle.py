"""The shuffle action: it evicts what the victim_tasks functions name, tier by tier."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import yaml
from tests.kit import node, pod, podgroup, priority_class, queue

from pumice.api.task import TaskInfo, TaskStatus
from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.arguments import Arguments
from pumice.conf.config import parse_config
from pumice.framework.decisions import Decisions
from pumice.framework.session import Session
from pumice.plugins import default_registry
from pumice.scheduler import Scheduler

LOW, HIGH = 10, 100


def fake(name: str, choose: Callable[[list[TaskInfo]], list]) -> type:
    """A plugin class that answers victim_tasks with ``choose``; it records what it was
    offered in ``offered``."""

    class Fake:
        offered: ClassVar[list[list[TaskInfo]]] = []

        def __init__(self, arguments: Arguments) -> None:
            pass

        def on_session_open(self, ssn: Session) -> None:
            def victims(tasks: list[TaskInfo]) -> list:
                Fake.offered.append(list(tasks))
                return choose(tasks)

            ssn.on("victim_tasks", name, victims)

    Fake.name = name
    return Fake


def cycle(objects: list[dict], tiers: list[list], *plugins: type, actions="shuffle") -> Decisions:
    registry = default_registry()
    for cls in plugins:
        registry.register(cls)
    doc = {
        "actions": actions,
        "tiers": [
            {"plugins": [p if isinstance(p, dict) else {"name": p} for p in t]} for t in tiers
        ],
    }
    sched = Scheduler.create(parse_config(yaml.safe_load(yaml.safe_dump(doc))), registry)
    return sched.cycle(build_snapshot([SourcedObject(o, "test") for o in objects]))


def low_priority(tasks: list[TaskInfo]) -> list[TaskInfo]:
    return [t for t in tasks if t.priority == LOW]


def volcano_cluster() -> list[dict]:
    """Volcano's TestShuffle: two 4-cpu nodes, three running jobs of 1-cpu pods, some of
    low and some of high priority."""
    objs = [queue(), node("node1", cpu="4", memory="8Gi", pods="10"),
            node("node2", cpu="4", memory="8Gi", pods="10")]  # fmt: skip
    objs += [podgroup(f"pg{i}", ns="test", phase="Running") for i in (1, 2, 3)]
    layout = [("pod1-1", "node1", "pg1", LOW), ("pod1-2", "node1", "pg1", HIGH),
              ("pod1-3", "node1", "pg1", HIGH), ("pod2-1", "node1", "pg2", LOW),
              ("pod2-2", "node2", "pg2", HIGH), ("pod3-1", "node2", "pg3", LOW),
              ("pod3-2", "node2", "pg3", HIGH)]  # fmt: skip
    objs += [
        pod(name, ns="test", node=n, group=pg, cpu="1", memory="2G", priority=p)
        for name, n, pg, p in layout
    ]
    return objs


def test_volcano_shuffle_evicts_the_pods_the_victim_function_names() -> None:
    """Volcano's TestShuffle, "select pods with low priority and evict them"."""
    plugin = fake("fake", low_priority)
    d = cycle(volcano_cluster(), [[{"name": "fake", "enabledVictim": True}]], plugin)
    assert sorted(d.evictions) == ["test/pod1-1", "test/pod2-1", "test/pod3-1"]


def test_only_running_tasks_are_offered_and_only_offered_ones_evicted() -> None:
    """A pending pod and a terminating one are not offered; naming a task that was not
    offered (here: every task of the session's jobs) evicts only the running ones."""
    objs = volcano_cluster()
    objs += [podgroup("pg4", ns="test"), pod("waiting", ns="test", group="pg4")]
    objs += [pod("leaving", ns="test", group="pg3", node="node2", terminating=True)]
    statuses: set[TaskStatus] = set()

    class Greedy:
        name = "greedy"

        def __init__(self, arguments: Arguments) -> None:
            pass

        def on_session_open(self, ssn: Session) -> None:
            def victims(tasks: list[TaskInfo]) -> list[TaskInfo]:
                statuses.update(t.status for t in tasks)
                return [t for job in ssn.jobs.values() for t in job.tasks.values()]

            ssn.on("victim_tasks", self.name, victims)

    d = cycle(objs, [["greedy"]], Greedy)
    assert statuses == {TaskStatus.RUNNING}
    assert len(d.evictions) == 7
    assert "test/waiting" not in d.evictions and "test/leaving" not in d.evictions


def test_the_first_tier_naming_a_victim_decides_and_a_tier_joins_its_answers() -> None:
    first = fake("first", lambda ts: [t for t in ts if t.name == "pod1-1"])
    second = fake("second", lambda ts: [t for t in ts if t.name == "pod2-1"])
    later = fake("later", low_priority)
    d = cycle(volcano_cluster(), [["first", "second"], ["later"]], first, second, later)
    assert sorted(d.evictions) == ["test/pod1-1", "test/pod2-1"]
    assert later.offered == []  # not asked


def test_a_tier_naming_nothing_leaves_the_decision_to_the_next() -> None:
    nothing = fake("nothing", lambda ts: [])
    later = fake("later", low_priority)
    d = cycle(volcano_cluster(), [["nothing"], ["later"]], nothing, later)
    assert sorted(d.evictions) == ["test/pod1-1", "test/pod2-1", "test/pod3-1"]


def test_enabled_victim_false_turns_a_plugin_off() -> None:
    plugin = fake("fake", low_priority)
    d = cycle(volcano_cluster(), [[{"name": "fake", "enabledVictim": False}]], plugin)
    assert d.evictions == []
    assert plugin.offered == []


def test_no_victim_function_no_eviction() -> None:
    d = cycle(volcano_cluster(), [["priority", "gang"]])
    assert d.evictions == [] and d.audit == []


def test_each_eviction_is_audited_with_plugin_tier_strategy_and_rule() -> None:
    def chosen(tasks: list[TaskInfo]) -> list:
        return [(t, "lowest", "priority 10 is the lowest") if t.name == "pod1-1" else t
                for t in low_priority(tasks)]  # fmt: skip

    plugin = fake("fake", chosen)
    d = cycle(volcano_cluster(), [["priority"], ["fake"]], plugin)
    by_victim = {r["victim"]: r for r in d.audit}
    assert set(by_victim) == set(d.evictions)
    rec = by_victim["test/pod1-1"]
    assert rec["action"] == "shuffle" and rec["kind"] == "evict"
    assert rec["node"] == "node1" and rec["victim_priority"] == LOW
    assert (rec["plugin"], rec["tier"], rec["strategy"]) == ("fake", 2, "lowest")
    assert rec["rule"] == "priority 10 is the lowest"
    assert rec["reason"] == "fake (tier 2), lowest: priority 10 is the lowest"
    assert by_victim["test/pod2-1"]["rule"] == "named by fake"


def test_a_pod_named_twice_is_evicted_once() -> None:
    a = fake("a", low_priority)
    b = fake("b", low_priority)
    d = cycle(volcano_cluster(), [["a", "b"]], a, b)
    assert sorted(d.evictions) == ["test/pod1-1", "test/pod2-1", "test/pod3-1"]
    assert {r["plugin"] for r in d.audit} == {"a"}


def test_pods_preempt_evicted_are_not_offered_again() -> None:
    """After preempt in the same cycle, its victims are terminating: shuffle leaves them."""
    objs = [queue(), node("n1", cpu="2", memory="8Gi"), priority_class("low", LOW),
            priority_class("high", HIGH)]  # fmt: skip
    objs += [podgroup("low", phase="Running", priority_class="low"),
             pod("low-0", group="low", node="n1", cpu="2", priority_class="low")]  # fmt: skip
    objs += [podgroup("high", priority_class="high"),
             pod("high-0", group="high", cpu="2", priority_class="high")]  # fmt: skip
    plugin = fake("fake", lambda ts: ts)
    tiers = [["priority", {"name": "gang", "enablePreemptable": False}, "fake"], ["predicates"]]
    d = cycle(objs, tiers, plugin, actions="enqueue, allocate, preempt, shuffle")
    assert d.evictions == ["default/low-0"]
    assert [r["action"] for r in d.audit if r["kind"] == "evict"] == ["preempt"]
    assert all(not o for o in plugin.offered)
