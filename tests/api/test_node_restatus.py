"""A task whose status moves on its node without moving its accounting (a bound pod
that starts running) may be left where it is: ``NodeTable.accounted_alike`` says so only
when taking it off and back on would give back the very same floats."""

from __future__ import annotations

import copy
import random

from tests.kit import node, pod, podgroup, queue

from pumice.api.node import NodeTable
from pumice.api.task import TaskStatus
from pumice.cache.build import SourcedObject, build_snapshot

_ON_NODE = (
    TaskStatus.ALLOCATED,
    TaskStatus.PIPELINED,
    TaskStatus.BINDING,
    TaskStatus.BOUND,
    TaskStatus.RUNNING,
    TaskStatus.RELEASING,
    TaskStatus.SUCCEEDED,
    TaskStatus.FAILED,
    TaskStatus.UNKNOWN,
)


def _table(gpu: str):
    objs = [queue("default")]
    objs += [node(f"n{i}", cpu="16", memory="64Gi", nvidia_gpu="4") for i in range(3)]
    objs.append(podgroup("g", min_member=1))
    objs += [pod(f"g-{k}", group="g", cpu=f"{250 * (k + 1)}m", gpu=gpu) for k in range(4)]
    snap = build_snapshot([SourcedObject(o) for o in objs])
    return snap.nodes, list(snap.jobs["default/g"].tasks.values())


def _state(table: NodeTable) -> tuple:
    return (
        table.idle.tobytes(),
        table.used.tobytes(),
        table.releasing.tobytes(),
        table.pipelined.tobytes(),
        table.nonzero.tobytes(),
    )


def test_alike_means_the_round_trip_changes_nothing():
    """Over random tasks and statuses (whole amounts, and tenths of a GPU, which do not
    always add exactly): where the answer is yes, taking the task off and back on under its
    new status leaves every float as it was; a move between matrices is never alike."""
    rng = random.Random(5)
    said = {True: 0, False: 0}
    for gpu in (None, "1", "0.1", "0.3"):
        table, tasks = _table(gpu)
        placed = []
        for _step in range(200):
            if placed and rng.random() < 0.6:
                i, task = rng.choice(placed)
                status = rng.choice(_ON_NODE)
                alike = table.accounted_alike(i, task, status)
                said[alike] += 1
                before = _state(table)
                table.remove_task(i, task)
                task.status = status
                table.add_task(i, task)
                if alike:
                    assert _state(table) == before
                if status in (TaskStatus.SUCCEEDED, TaskStatus.FAILED):
                    placed.remove((i, task))
                continue
            task = copy.copy(rng.choice(tasks))
            task.uid = f"{task.uid}-{_step}"
            task.status = rng.choice(_ON_NODE[:6])
            i = rng.randrange(len(table))
            table.add_task(i, task)
            placed.append((i, task))
    assert said[True] and said[False]


def test_not_alike_across_matrices_or_off_the_node():
    table, tasks = _table("1")
    task = copy.copy(tasks[0])
    task.status = TaskStatus.BOUND
    table.add_task(0, task)
    assert table.accounted_alike(0, task, TaskStatus.RUNNING)
    assert not table.accounted_alike(0, task, TaskStatus.RELEASING)
    assert not table.accounted_alike(0, task, TaskStatus.PIPELINED)
    assert not table.accounted_alike(0, task, TaskStatus.SUCCEEDED)
    assert not table.accounted_alike(1, task, TaskStatus.RUNNING)  # (not on that node)
    # A row whose floats the round trip would not give back: idle 0.3 of a GPU, and a
    # task of a tenth ((0.3 + 0.1) - 0.1 is not 0.3 in float64).
    d = table.space.index["nvidia.com/gpu"]
    tenth = copy.copy(task)
    tenth.uid, tenth.resreq = "tenth", task.resreq.copy()
    tenth.resreq[d] = 0.1
    table.add_task(1, tenth)
    table.idle[1, d] = 0.3
    assert not table.accounted_alike(1, tenth, TaskStatus.RUNNING)
    before = table.idle.tobytes()
    table.remove_task(1, tenth)
    tenth.status = TaskStatus.RUNNING
    table.add_task(1, tenth)
    assert table.idle.tobytes() != before
