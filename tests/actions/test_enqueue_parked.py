"""Gangs parked while they wait for admission are refused as a new session refuses them.

A living session parks the Pending PodGroups enqueue refused (see
``pumice.framework.parking``) and, in later cycles, asks overcommit about all of them
at once; a job it rejects then is not asked again, not even in a cycle that admits
another job first. Each refusal must still quote the figures of the moment the job's
turn came: a gang after the admitted one in job order reads the admitted job in the
total, one before it does not.
"""

from __future__ import annotations

import dataclasses

from tests.kit import node, podgroup, queue

from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import MemoryCluster
from pumice.scheduler import Scheduler


def _world() -> tuple[MemoryCluster, SchedulerCache]:
    store = MemoryCluster()
    store.create_all(
        [
            queue("default"),
            node("n1", cpu="8"),
            # Volcano Jobs' PodGroups before admission: no pods, more than the cluster.
            podgroup("big-early", min_member=2, phase="Pending", min_resources={"cpu": "40"},
                     created="2024-01-01T00:00:01Z"),
            podgroup("big-late", min_member=2, phase="Pending", min_resources={"cpu": "40"},
                     created="2024-01-01T00:00:05Z"),
        ]
    )  # fmt: skip
    return store, SchedulerCache(store)


def _cycle(cache: SchedulerCache, scheduler: Scheduler) -> dict[str, str]:
    decisions = scheduler.cycle(cache.snapshot())
    cache.apply(decisions)
    cache.sync()
    return dict(decisions.pending)


def test_parked_gangs_read_the_figures_of_their_turn_in_a_cycle_that_admits() -> None:
    living_store, living_cache = _world()
    fresh_store, fresh_cache = _world()
    living = dataclasses.replace(Scheduler.from_file(None), repeat=False)
    for _ in range(2):
        _cycle(living_cache, living)
        _cycle(fresh_cache, dataclasses.replace(Scheduler.from_file(None), repeat=False))
    assert living._session is not None
    assert set(living._session.parking.kept) == {"default/big-early", "default/big-late"}
    small = podgroup("small", min_member=1, phase="Pending", min_resources={"cpu": "2"},
                     created="2024-01-01T00:00:03Z")  # fmt: skip
    for store, cache in ((living_store, living_cache), (fresh_store, fresh_cache)):
        store.create_all([small])
        cache.sync()
    said = _cycle(living_cache, living)
    expected = _cycle(fresh_cache, dataclasses.replace(Scheduler.from_file(None), repeat=False))
    assert said["default/small"].startswith("admitted")
    assert said == expected
    early, late = said["default/big-early"], said["default/big-late"]
    assert early.startswith("not enqueued: overcommit:")
    assert late.startswith("not enqueued: overcommit:")
    assert early != late  # the later gang's turn came after the small one was admitted


def test_parked_gangs_of_a_closed_queue_are_refused_for_the_closed_queue() -> None:
    def world() -> SchedulerCache:
        store = MemoryCluster()
        store.create_all(
            [
                queue("default"),
                queue("shut", state="Closed"),
                node("n1", cpu="8"),
                podgroup("open-big", min_member=2, phase="Pending", min_resources={"cpu": "40"}),
                podgroup("shut-big", min_member=2, phase="Pending", min_resources={"cpu": "40"},
                         queue="shut"),
            ]
        )  # fmt: skip
        return SchedulerCache(store)

    living_cache, fresh_cache = world(), world()
    living = dataclasses.replace(Scheduler.from_file(None), repeat=False)
    for _ in range(3):
        said = _cycle(living_cache, living)
        expected = _cycle(fresh_cache, dataclasses.replace(Scheduler.from_file(None), repeat=False))
        assert said == expected
    assert living._session is not None
    assert "default/shut-big" in living._session.parking.kept
    assert said["default/shut-big"] == "not enqueued: queue shut is Closed"
    assert said["default/open-big"].startswith("not enqueued: overcommit:")
