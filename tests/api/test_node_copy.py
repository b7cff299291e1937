"""A session's node table is copied on write: what a copy changes never reaches the
table it was copied from nor the other copies of it, and a copy that changes is
accounted exactly as a table that took the same tasks afresh. (A copy stands for its
source while the source does not change: see ``NodeTable.copy``.)"""

from __future__ import annotations

import copy
import random

from tests.kit import node, pod, podgroup, queue

from pumice.api.node import NodeTable
from pumice.api.task import TaskInfo, TaskStatus
from pumice.cache.build import SourcedObject, build_snapshot


def _snapshot():
    objs = [queue("default")]
    objs += [node(f"n{i}", cpu="16", memory="64Gi", nvidia_gpu="4") for i in range(6)]
    for j in range(8):
        objs.append(podgroup(f"g{j}", min_member=1))
        for k in range(3):
            on = f"n{(j + k) % 6}" if k else None
            objs.append(
                pod(
                    f"g{j}-{k}",
                    group=f"g{j}",
                    cpu=f"{250 * (k + 1)}m",
                    memory=f"{k + 1}Gi",
                    gpu="0.5" if j % 2 else None,
                    node=on,
                    phase="Running" if on else None,
                )
            )
    return build_snapshot([SourcedObject(o) for o in objs])


def _state(table: NodeTable) -> tuple:
    """Everything a session reads of a table's accounting, as values."""
    return (
        table.idle.tobytes(),
        table.used.tobytes(),
        table.releasing.tobytes(),
        table.pipelined.tobytes(),
        table.nonzero.tobytes(),
        [sorted(row) for row in table.tasks],
    )


def _afresh(table: NodeTable) -> tuple:
    """The state of a table built from the same specs that took ``table``'s tasks."""
    fresh = NodeTable(list(table.specs), table.space)
    for i, row in enumerate(table.tasks):
        for task in row.values():
            fresh.add_task(i, task)
    return _state(fresh)


def test_changes_of_a_copy_stay_in_it():
    snap = _snapshot()
    source = snap.nodes
    before = _state(source)
    pending = [t for j in snap.jobs.values() for t in j.tasks.values() if t.node is None]
    rng = random.Random(3)
    for _round in range(20):
        first, second = source.copy(), source.copy()
        assert _state(first) == before and _state(second) == before
        made: list[TaskInfo] = []
        for _step in range(rng.randrange(1, 6)):
            i = rng.randrange(len(first))
            held = list(first.tasks[i].values())
            if held and rng.random() < 0.4:
                first.remove_task(i, rng.choice(held))
                continue
            task = copy.copy(rng.choice(pending))
            task.uid = f"{task.uid}-{len(made)}"
            task.status = rng.choice(
                (TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.RELEASING)
            )
            made.append(task)
            first.add_task(i, task)
            if rng.random() < 0.3:  # (a copy of a changed copy: its changes its own)
                was = _state(first)
                other = first.copy()
                extra = copy.copy(task)
                extra.uid = f"{task.uid}-x"
                other.add_task(rng.randrange(len(other)), extra)
                assert _state(first) == was
                assert _state(other) == _afresh(other)
        assert _state(source) == before
        assert _state(second) == before
        assert _state(first) == _afresh(first)


def test_a_respecced_copy_leaves_the_source_alone():
    snap = _snapshot()
    source = snap.nodes
    before = _state(source)
    alloc = source.allocatable.tobytes()
    other = source.copy()
    spec = copy.copy(source.specs[0])
    object.__setattr__(spec, "allocatable", {**spec.allocatable, "cpu": 32000.0})
    other.respec(0, spec)
    assert other.idle[0, 0] == source.idle[0, 0] + 16000.0
    assert _state(source) == before and source.allocatable.tobytes() == alloc
