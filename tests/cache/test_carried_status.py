"""A parked gang's status, carried from cycle to cycle, is written only when the
cluster says otherwise.

A living session carries the status of a Pending gang that waits for admission (see
``pumice.framework.parking``): the same update, cycle after cycle. The cache then
finds it agrees with what the cluster says without comparing it again; but when
someone else rewrites the PodGroup's status, the cluster says otherwise: the gang is
looked at again and its status written back.
"""

from __future__ import annotations

import dataclasses

from tests.kit import node, podgroup, queue

from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import MemoryCluster
from pumice.scheduler import Scheduler

UID = "default/waits"


def _cluster() -> tuple[MemoryCluster, SchedulerCache, Scheduler]:
    store = MemoryCluster()
    store.create_all(
        [
            queue("default"),
            node("n1", cpu="4"),
            # A Volcano Job's PodGroup before admission: no pods, more than the cluster.
            podgroup("waits", min_member=2, phase="Pending", min_resources={"cpu": "40"}),
        ]
    )
    cache = SchedulerCache(store)
    scheduler = dataclasses.replace(Scheduler.from_file(None), repeat=False)
    return store, cache, scheduler


def _cycle(cache: SchedulerCache, scheduler: Scheduler):
    decisions = scheduler.cycle(cache.snapshot())
    cache.apply(decisions)
    cache.sync()
    return decisions


def _conditions(store: MemoryCluster) -> list[tuple[str, str, str]]:
    pg = store.get("PodGroup", UID)
    assert pg is not None
    return [(c["type"], c["reason"], c["message"]) for c in pg["status"].get("conditions", [])]


def test_a_carried_status_is_written_back_after_someone_else_changed_it() -> None:
    store, cache, scheduler = _cluster()
    first = _cycle(cache, scheduler)
    said = _conditions(store)
    assert said == [("Unschedulable", "NotEnoughTasks", said[0][2])]
    assert "not enough valid tasks" in said[0][2]
    # Its status written, the gang is looked at once more (the write is a change),
    # then parked: the same status again, as the session that decided it wrote it.
    second = _cycle(cache, scheduler)
    assert _conditions(store) == said
    first = second
    second = _cycle(cache, scheduler)
    assert second.podgroups[UID] is first.podgroups[UID]
    assert _conditions(store) == said
    store.update_podgroup_status(
        UID, "Pending", [{"type": "Unschedulable", "status": "True", "reason": "Other",
                          "message": "written by someone else"}],
    )  # fmt: skip
    cache.sync()
    third = _cycle(cache, scheduler)
    assert _conditions(store) == said  # the cluster says what the scheduler decided
    assert third.pending[UID].startswith("not enqueued: overcommit:")


def _parked(cache: SchedulerCache, scheduler: Scheduler, store: MemoryCluster):
    """Cycles until the gang's status is carried: the last decisions and the status."""
    _cycle(cache, scheduler)
    said = _conditions(store)
    last = _cycle(cache, scheduler)
    last = _cycle(cache, scheduler)
    assert last.carried is not None and UID in last.podgroups
    return last, said


def _rewrite(store: MemoryCluster) -> None:
    store.update_podgroup_status(
        UID, "Pending", [{"type": "Unschedulable", "status": "True", "reason": "Other",
                          "message": "written by someone else"}],
    )  # fmt: skip


def test_a_status_rewritten_while_the_cycle_runs_is_written_back_by_its_apply() -> None:
    store, cache, scheduler = _cluster()
    _last, said = _parked(cache, scheduler, store)
    decisions = scheduler.cycle(cache.snapshot())
    assert decisions.carried is not None  # (the gang's status, carried again)
    _rewrite(store)  # after the snapshot, before the decisions are carried out
    cache.sync()
    cache.apply(decisions)
    assert _conditions(store) == said


def test_a_status_rewritten_between_cycles_is_written_back_many_times() -> None:
    store, cache, scheduler = _cluster()
    _last, said = _parked(cache, scheduler, store)
    for _ in range(3):
        _rewrite(store)
        cache.sync()
        _cycle(cache, scheduler)
        assert _conditions(store) == said
        for _ in range(3):  # (parked again: carried, the cluster agrees)
            _cycle(cache, scheduler)
            assert _conditions(store) == said


def test_a_status_carried_by_decisions_not_carried_out_is_written() -> None:
    # A cycle whose decisions nobody carried out: the next one, though it carries
    # the same status, compares it with what the cluster says.
    store, cache, scheduler = _cluster()
    _last, said = _parked(cache, scheduler, store)
    _rewrite(store)
    cache.sync()
    scheduler.cycle(cache.snapshot())  # (decided, never applied)
    cache.settle()
    _cycle(cache, scheduler)
    assert _conditions(store) == said
