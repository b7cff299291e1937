"""A gang that waits is placed, or explained anew, once what it waits for moves.

A living session keeps what it knows of a waiting gang from cycle to cycle (its tasks'
shapes and order, the placements it needs: see :mod:`pumice.actions.room`; the slots of
each shape: :mod:`pumice.framework.slots`). When something the gang waits for moves (a
node frees room, its queue's share moves, the gang itself changes) the gang must be
placed, or explained, as a new session would. These tests run the same clusters through
the same changes twice: one scheduler lives from cycle to cycle, the other is new in
every cycle and works out everything about the gangs afresh; every cycle must decide
and explain the same.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.kit import node, pod, podgroup, queue
from tests.properties.test_hopeless_turn import crowded

from pumice.actions import room
from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import MemoryCluster
from pumice.scheduler import Scheduler

#: A change between two cycles: ("end", pod) deletes a pod (room frees, or a gang loses
#: one of its own), ("weight", queue, w) moves a queue's deserved share, ("min", group,
#: n) changes a gang's minimum, ("none",) changes nothing.
Change = tuple[Any, ...]


@contextlib.contextmanager
def proving_afresh() -> Iterator[None]:
    """Every turn works out what it knows of the gang afresh, as if nothing had been
    kept."""
    real = room.hopeless_turn

    def afresh(ssn, queue, job, *args):
        job.verdicts.forget(room._FACTS)
        return real(ssn, queue, job, *args)

    with mock.patch("pumice.actions.allocate.hopeless_turn", afresh):
        yield


def _apply(store: MemoryCluster, change: Change) -> None:
    kind = change[0]
    if kind == "end":
        store.delete("Pod", f"default/{change[1]}")
    elif kind == "weight":

        def weigh(q: dict) -> None:
            q["spec"]["weight"] = change[2]

        store.modify("Queue", change[1], weigh)
    elif kind == "min":

        def least(pg: dict) -> None:
            pg["spec"]["minMember"] = change[2]

        store.modify("PodGroup", f"default/{change[1]}", least)


def _run(objs: list[dict], rounds: list[list[Change]]) -> list[dict]:
    """The cycles of a living scheduler, checked against a new scheduler in every cycle
    that proves afresh."""
    stores = []
    for _ in range(2):
        store = MemoryCluster()
        store.create_all(copy.deepcopy(objs))
        stores.append((store, SchedulerCache(store)))
    living = Scheduler.from_file(None)
    seen = []
    for changes in [[], *rounds]:
        said = []
        for k, (store, cache) in enumerate(stores):
            for change in changes:
                _apply(store, change)
            if k == 0:
                decisions = living.cycle(cache.snapshot())
            else:
                with proving_afresh():
                    decisions = Scheduler.from_file(None).cycle(cache.snapshot())
            cache.apply(decisions)
            said.append(decisions.to_json(sessions=False))
        assert said[0] == said[1]
        seen.append(said[0])
    return seen


@st.composite
def crowded_then_changed(draw) -> tuple[list[dict], list[list[Change]]]:
    """A crowded cluster of gangs in two queues, then rounds of changes between cycles
    (some rounds none)."""
    objs = draw(crowded(mixed=draw(st.booleans())))
    pods = [o["metadata"]["name"] for o in objs if o["kind"] == "Pod"]
    groups = [o["metadata"]["name"] for o in objs if o["kind"] == "PodGroup"]
    change = st.one_of(
        st.just(("none",)),
        st.tuples(st.just("end"), st.sampled_from(pods)) if pods else st.just(("none",)),
        st.tuples(st.just("weight"), st.sampled_from(["a", "b"]), st.integers(1, 4)),
        st.tuples(st.just("min"), st.sampled_from(groups), st.integers(1, 4))
        if groups
        else st.just(("none",)),
    )
    rounds = draw(st.lists(st.lists(change, max_size=2), min_size=1, max_size=5))
    return objs, rounds


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crowded_then_changed())
def test_a_living_session_wakes_waiting_gangs_as_new_sessions(case) -> None:
    objs, rounds = case
    _run(objs, rounds)


def _gpu_cluster() -> list[dict]:
    """Four 8-GPU nodes, one busy with another scheduler's pod; a gang of four 8-GPU
    workers in queue ``b`` (the three free nodes hold three of them)."""
    objs = [queue("a"), queue("b")]
    for i in range(4):
        objs.append(node(f"n{i}", cpu="96", memory="768Gi", nvidia_gpu="8"))
    objs.append(pod("busy", cpu="8", memory="64Gi", gpu="8", node="n3", scheduler="other"))
    objs.append(podgroup("big", min_member=4, queue="b"))
    for k in range(4):
        objs.append(pod(f"big-w-{k}", cpu="8", memory="64Gi", gpu="8", group="big"))
    return objs


def test_a_waiting_gang_is_placed_once_a_node_frees_room() -> None:
    """The gang waits, explained the same while nothing changes; the busy pod ends, and
    the next cycle binds the whole gang."""
    seen = _run(_gpu_cluster(), [[], [], [("end", "busy")]])
    for said in seen[:3]:
        assert not said["binds"]
        assert said["pending"]["default/big"].startswith(
            "gang short: needs 4 tasks, 3 could be placed; task big-w-3:"
        )
    assert sorted(seen[3]["binds"]) == [f"default/big-w-{k}" for k in range(4)]


def test_a_waiting_gang_whose_minimum_drops_is_placed() -> None:
    """The gang itself changes (its minimum drops to the three tasks the nodes hold):
    three of its tasks are bound."""
    seen = _run(_gpu_cluster(), [[], [("min", "big", 3)]])
    assert not seen[1]["binds"]
    assert len(seen[2]["binds"]) == 3


@pytest.mark.parametrize(
    "changes",
    [
        [("weight", "b", 3)],  # (the queue changes)
        [("end", f"wide-{k}") for k in range(2, 6)],  # (only the other queue's demand)
    ],
)
def test_a_gang_refused_by_its_queue_share_is_placed_when_the_share_moves(
    changes: list[Change],
) -> None:
    """Queue ``a`` (weight 3) runs two pods and asks for more than the cluster has;
    queue ``b`` (weight 1) deserves a quarter, fewer CPUs than its gang of three needs,
    which waits, refused by its queue, the same while nothing changes. Then ``b``'s
    weight grows to 3, or ``a``'s pods that wait are deleted: ``b``'s share grows, and
    the gang is bound."""
    objs = [queue("a", weight=3), queue("b", weight=1)]
    for i in range(6):
        objs.append(node(f"n{i}", cpu="4", memory="16Gi"))
    objs.append(podgroup("wide", min_member=1, queue="a"))
    for k in range(2):
        objs.append(pod(f"wide-{k}", cpu="4", memory="1Gi", group="wide", node=f"n{k}"))
    for k in range(2, 6):  # (larger than any node: they never bind)
        objs.append(pod(f"wide-{k}", cpu="5", memory="1Gi", group="wide"))
    objs.append(podgroup("big", min_member=3, queue="b"))
    for k in range(3):
        objs.append(pod(f"big-w-{k}", cpu="4", memory="1Gi", group="big"))
    seen = _run(objs, [[], [], changes])
    first = seen[0]["pending"]["default/big"]
    assert first.startswith("gang short: needs 3 tasks, 1 could be placed; queue b cannot take")
    assert [said["pending"]["default/big"] for said in seen[1:3]] == [first, first]
    assert sorted(seen[3]["binds"]) == [f"default/big-w-{k}" for k in range(3)]
