"""A parked backlog's explanations, held as one layer per cycle, read as a new session
says them, whenever they are read.

A living session refuses the Pending PodGroups it parked all at once, and says why as
one layer with the cycle's figures (see ``pumice.framework.said``); the sentences are
made when read. A reader that keeps a cycle's explanations and reads them many cycles
later (the simulator's metrics do) must read the figures of that cycle, not of the
cycle it reads them in.
"""

from __future__ import annotations

import dataclasses

from tests.kit import node, podgroup, queue

from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import MemoryCluster
from pumice.framework.decisions import Decisions
from pumice.scheduler import Scheduler

BIG = ("big-a", "big-b", "big-c")


def _world() -> tuple[MemoryCluster, SchedulerCache]:
    store = MemoryCluster()
    store.create_all(
        [
            queue("default"),
            node("n1", cpu="8"),
            # Volcano Jobs' PodGroups before admission: no pods, more than the cluster.
            *(
                podgroup(name, min_member=2, phase="Pending", min_resources={"cpu": "40"},
                         created=f"2024-01-01T00:00:0{k}Z")
                for k, name in enumerate(BIG)
            ),
        ]
    )  # fmt: skip
    return store, SchedulerCache(store)


def _small(k: int) -> dict:
    return podgroup(f"small-{k}", min_member=1, phase="Pending", min_resources={"cpu": "1"},
                    created=f"2024-01-02T00:00:0{k}Z")  # fmt: skip


def _cycle(cache: SchedulerCache, scheduler: Scheduler) -> Decisions:
    decisions = scheduler.cycle(cache.snapshot())
    cache.apply(decisions)
    cache.sync()
    return decisions


def _fresh() -> Scheduler:
    return dataclasses.replace(Scheduler.from_file(None), repeat=False)


def test_a_parked_jobs_explanation_read_many_cycles_later_quotes_its_cycles_figures() -> None:
    living_store, living_cache = _world()
    fresh_store, fresh_cache = _world()
    living = _fresh()
    kept: list[Decisions] = []  # (read at the end)
    expected: list[dict[str, str]] = []  # (read at once)
    for k in range(8):
        if k % 2:  # a small job admitted every other cycle: what is admitted grows
            for store, cache in ((living_store, living_cache), (fresh_store, fresh_cache)):
                store.create_all([_small(k)])
                cache.sync()
        kept.append(_cycle(living_cache, living))
        expected.append(dict(_cycle(fresh_cache, _fresh()).pending))
    assert living._session is not None
    assert {f"default/{n}" for n in BIG} <= set(living._session.parking.kept)
    # The cycles that admitted nothing said the parked gangs' refusal as one layer.
    assert any(d.pending.held()[1] for d in kept)
    said = [dict(d.pending) for d in kept]
    assert said == expected
    quoted = {s["default/big-a"] for s in said}
    assert len(quoted) >= 4  # (the figures moved from cycle to cycle)
    for s in said:
        assert s["default/big-a"].startswith("not enqueued: overcommit:")


def test_a_copy_of_the_explanations_holds_the_layer_by_reference() -> None:
    _store, cache = _world()
    living = _fresh()
    for _ in range(3):
        decisions = _cycle(cache, living)
    held, layers = decisions.pending.held()
    assert layers  # (the three gangs, parked, refused at once)
    copy = decisions.repeated().pending
    assert copy.held()[1] == layers
    assert dict(copy) == dict(decisions.pending)
    assert len(copy) == len(held) + sum(map(len, layers)) == 3


def test_in_a_cycle_that_admits_a_job_each_parked_refusal_quotes_the_figures_of_its_turn() -> None:
    # A gang created after the small jobs comes after them in job order: the cycle
    # that admits one refuses it on the figures that count the small job in, and the
    # gangs before it on the figures before.
    late = podgroup("big-late", min_member=2, phase="Pending", min_resources={"cpu": "40"},
                    created="2024-01-03T00:00:00Z")  # fmt: skip
    living_store, living_cache = _world()
    fresh_store, fresh_cache = _world()
    for store, cache in ((living_store, living_cache), (fresh_store, fresh_cache)):
        store.create_all([late])
        cache.sync()
    living = _fresh()
    for _ in range(2):  # (the gangs parked)
        _cycle(living_cache, living)
        _cycle(fresh_cache, _fresh())
    for store, cache in ((living_store, living_cache), (fresh_store, fresh_cache)):
        store.create_all([_small(1)])
        cache.sync()
    decisions = _cycle(living_cache, living)
    expected = dict(_cycle(fresh_cache, _fresh()).pending)
    assert expected["default/small-1"].startswith("admitted")
    assert decisions.pending.held()[1]  # (the parked gangs' refusals as one layer)
    said = dict(decisions.pending)
    assert said == expected
    assert said["default/big-a"] != said["default/big-late"]
    assert said["default/big-a"] == said["default/big-b"]
