"""Preempt and reclaim decide the same with their shortcuts as without them.

Both actions skip work on a large backlog: a task like one of its job that just found
nothing is not tried again until something changes; the reasons of misses nobody reads
are not worked out; victims are sorted by the orders' keys where they offer them; reclaim
keeps each node's takeable tasks, in victim order, while the session's nodes stay the
same. Random clusters of gangs with identical and differing tasks, over several queues
and priorities, are decided both ways: the binds, evictions, audit and every pending
job's explanation must be the same.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import conf, node, pod, podgroup, priority_class, queue, run

from pumice.actions import eviction as ev
from pumice.actions import reclaim
from pumice.framework.hooks import HookTable

PRIORITIES = {"p10": 10, "p100": 100, "p1000": 1000}
QUEUES = ("q1", "q2", "q3")


@contextlib.contextmanager
def without_shortcuts() -> Iterator[None]:
    """Every task tried, every miss explained, victims sorted by comparisons, takeable
    tasks found afresh each time, the plugins that refused victims asked again."""
    synced = reclaim._Reclaimees.sync

    def sync(self, ssn):
        self._version, self._log = -1, None  # forget what was kept
        synced(self, ssn)

    detail = HookTable.victims_detail

    def victims_detail(self, hook, actor, candidates):
        chosen, deciders, _alone = detail(self, hook, actor, candidates)
        return chosen, deciders, None  # (the refusing plugins asked again)

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(ev, "alike_key", lambda ssn, job, task: None))
        stack.enter_context(mock.patch.object(ev, "Unheard", ev.Misses))
        stack.enter_context(mock.patch.object(ev.VictimKeys, "key", lambda self, ssn, tasks: None))
        stack.enter_context(mock.patch.object(reclaim._Reclaimees, "sync", sync))
        stack.enter_context(mock.patch.object(HookTable, "victims_detail", victims_detail))
        yield


@st.composite
def clusters(draw) -> list[dict]:
    objs: list[dict] = [priority_class(k, v) for k, v in PRIORITIES.items()]
    for name in QUEUES:
        q = queue(name, weight=draw(st.integers(1, 3)), reclaimable=draw(st.booleans()))
        q["spec"]["priority"] = draw(st.integers(0, 1))  # (served first, whatever its share)
        if draw(st.booleans()):
            q["spec"]["guarantee"] = {"resource": {"cpu": str(draw(st.integers(0, 2)))}}
        objs.append(q)
    sizes = draw(st.lists(st.sampled_from([2, 4, 6]), min_size=1, max_size=4))
    for i, cpus in enumerate(sizes):
        objs.append(node(f"n{i}", cpu=str(cpus), memory="64Gi"))
    running = []
    for j in range(draw(st.integers(1, 4))):  # running jobs, filling the nodes
        cls = draw(st.sampled_from(list(PRIORITIES)))
        running.append((f"r{j}", cls))
        objs.append(
            podgroup(
                f"r{j}",
                queue=draw(st.sampled_from(QUEUES)),
                min_member=draw(st.integers(0, 2)),
                priority_class=cls,
                phase="Running",
            )
        )
    k = 0
    for i, cpus in enumerate(sizes):
        for _ in range(draw(st.integers(cpus - 1, cpus))):
            name, cls = draw(st.sampled_from(running))
            objs.append(pod(f"{name}-{k}", group=name, cpu="1", node=f"n{i}", priority_class=cls))
            k += 1
    for j in range(draw(st.integers(1, 6))):  # waiting gangs
        cls = draw(st.sampled_from(list(PRIORITIES)))
        size = draw(st.integers(1, 6))
        objs.append(
            podgroup(
                f"w{j}",
                queue=draw(st.sampled_from(QUEUES)),
                min_member=draw(st.integers(1, size)),
                priority_class=cls,
            )
        )
        asks = draw(st.lists(st.sampled_from(["1", "2", "3"]), min_size=1, max_size=2))
        for k in range(size):
            objs.append(
                pod(f"w{j}-{k}", group=f"w{j}", cpu=asks[k % len(asks)], priority_class=cls)
            )
    return objs


def _seen(objs: list[dict], config: str) -> dict:
    d = run(objs, config)
    return {"decisions": d.to_json(sessions=False), "audit": d.audit}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    clusters(),
    st.sampled_from(["proportion", "capacity"]),
    st.sampled_from(["enqueue, allocate, reclaim", "enqueue, allocate, preempt"]),
)
def test_shortcuts_change_no_decision(objs: list[dict], share: str, actions: str) -> None:
    config = conf(actions, ["priority", "gang", "conformance"], ["predicates", "drf", share])
    shipped = _seen(objs, config)
    with without_shortcuts():
        reference = _seen(objs, config)
    assert shipped == reference


def _decided(objs: list[dict], config: str) -> dict:
    """What reclaim did to the cluster: binds, evictions, pipelined pods, phases."""
    d = run(objs, config)
    return {
        "binds": d.binds,
        "evictions": sorted(d.evictions),
        "pipelined": d.pipelined,
        "podgroups": {k: v.phase for k, v in d.podgroups.items()},
    }


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_share_shortfall_proof_changes_no_decision(objs: list[dict]) -> None:
    """A turn reclaim skips because its queue's share cannot let enough of the gang
    through would have evicted nothing: deciding with every turn tried gives the same
    binds, evictions, pipelined pods and podgroup phases (only the explanation
    differs: it names the share instead of the first task that missed)."""
    config = conf(
        "enqueue, allocate, reclaim",
        ["priority", "gang", "conformance"],
        ["predicates", "drf", "proportion"],
    )
    shipped = _decided(objs, config)
    with mock.patch.object(reclaim, "share_shortfall", lambda ssn, queue, job: ""):
        reference = _decided(objs, config)
    assert shipped == reference
