"""The scheduler's own PodGroup status write, coming back on the watch.

Most PodGroup events are the status the scheduler just wrote: the cache knows them by
comparing them with the write, without parsing them. What it takes must be what
parsing takes, and a status someone else wrote, even one that compares equal to the
write loosely (a count written as ``false``), is parsed and refused like any other.
"""

from __future__ import annotations

import dataclasses

import pytest
from tests.kit import node, podgroup, queue

from pumice.api import parse
from pumice.cache.cache import SchedulerCache
from pumice.cluster.memory import MemoryCluster
from pumice.errors import InputError
from pumice.scheduler import Scheduler

UID = "default/waits"


def _cluster(**cache_args) -> tuple[MemoryCluster, SchedulerCache, Scheduler]:
    store = MemoryCluster()
    store.create_all([queue("default"), node("n1", cpu="4")])
    cache = SchedulerCache(store, **cache_args)
    # (made after the cache started, as a Volcano Job's PodGroup is)
    store.create(podgroup("waits", min_member=2, phase="Pending", min_resources={"cpu": "40"}))
    scheduler = dataclasses.replace(Scheduler.from_file(None), repeat=False)
    cache.apply(scheduler.cycle(cache.snapshot()))
    return store, cache, scheduler


def test_the_status_written_reads_back_as_parsing_reads_it() -> None:
    store, cache, _ = _cluster()
    obj = store.get("PodGroup", UID)
    assert obj is not None and obj["status"]["conditions"]  # (the cycle wrote it)
    cache.sync()
    rec = cache.pgs_r[UID]
    assert (rec.phase, rec.conditions, rec.counts) == parse.podgroup_status(obj)
    # The record keeps copies: the object changing later does not change it.
    assert all(c is not d for c, d in zip(rec.conditions, obj["status"]["conditions"], strict=True))


def test_a_status_rewritten_by_someone_else_is_read() -> None:
    store, cache, _ = _cluster()
    cache.sync()
    store.update_podgroup_status(
        UID, "Inqueue", [{"type": "Scheduled", "status": "True", "reason": "Other"}], running=1
    )
    cache.sync()
    rec = cache.pgs_r[UID]
    assert rec.phase == "Inqueue" and rec.counts == (1, 0, 0)
    assert rec.conditions == [{"type": "Scheduled", "status": "True", "reason": "Other"}]


def test_a_count_written_as_a_boolean_is_refused_though_it_equals_the_write() -> None:
    store, cache, _ = _cluster()
    cache.sync()
    store.modify("PodGroup", UID, lambda pg: pg["status"].update(running=False))
    with pytest.raises(InputError, match="expected an integer"):
        cache.sync()


def test_a_bad_status_is_skipped_with_on_bad_and_read_again_once_fixed() -> None:
    bad: list[str] = []
    store, cache, _ = _cluster(on_bad=lambda kind, key, obj, err: bad.append(f"{kind} {key}"))
    cache.sync()
    store.modify("PodGroup", UID, lambda pg: pg["status"].update(succeeded=False))
    cache.sync()
    assert bad == [f"PodGroup {UID}"] and UID not in cache.jobs
    store.modify("PodGroup", UID, lambda pg: pg["status"].update(succeeded=0))
    cache.sync()
    assert UID in cache.jobs and cache.pgs_r[UID].counts == (0, 0, 0)
