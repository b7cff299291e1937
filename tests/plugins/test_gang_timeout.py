"""Gang timeouts of the coscheduling and Workload dialects, on a virtual clock across
cycles: a gang that cannot complete in time gives up its places, backs off, and is tried
again; a gang that completes, and every Volcano gang, is left alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from tests.kit import conf

from pumice.api.parse import timestamp
from pumice.cache.build import SourcedObject, build_snapshot
from pumice.conf.config import parse_config
from pumice.errors import InputError
from pumice.plugins.gang_timeout import CARRY_KEY, pod_backoff
from pumice.scheduler import Scheduler

# A gang of two 2-cpu pods on one 4-cpu node held by a terminating pod: both pods are
# pipelined onto the resources being released, and stay so while the pod terminates.
CASE = Path(__file__).parents[1] / "scenarios" / "gang-apis" / "pipelined-on-releasing"
T0 = timestamp("2026-01-01T00:00:00Z", "t0")
UIDS = {
    "volcano": "default/train",
    "coscheduling": "default/coscheduling:train",
    "workload-v1alpha1": "default/workload:train:workers",
    "workload-v1alpha2": "default/podgroup:train",
}
PIPELINED = {"default/train-0": "n1", "default/train-1": "n1"}


def objects(dialect: str) -> list[dict]:
    return list(yaml.safe_load_all((CASE / dialect / "snapshot.yaml").read_text()))


def scheduler(**gang_arguments) -> Scheduler:
    gang = {"name": "gang", "arguments": gang_arguments} if gang_arguments else "gang"
    text = conf(
        "enqueue, allocate, backfill",
        ["priority", gang, "conformance"],
        ["drf", "predicates", "proportion", "nodeorder", "binpack"],
    )
    return Scheduler.create(parse_config(yaml.safe_load(text)))


def cycle(
    sched: Scheduler, objs: list[dict], at: float, carried: dict | None, sessions: bool = True
) -> dict:
    """One cycle ``at`` seconds after T0; ``carried`` plays the scheduler cache, which
    hands the same dict to every snapshot of one cluster (None: a fresh one).
    ``sessions=False``: without the session's transition ids (new every session)."""
    snap = build_snapshot([SourcedObject(o, "test") for o in objs])
    snap.now = T0 + at
    if carried is not None:
        snap.carried = carried
    return sched.cycle(snap).to_json(sessions=sessions)


def conditions(decisions: dict, uid: str) -> list[tuple[str, str]]:
    pg = decisions["podgroups"].get(uid, {"conditions": []})
    return [(c["type"], c["reason"]) for c in pg["conditions"]]


def without(objs: list[dict], name: str) -> list[dict]:
    return [o for o in objs if o["metadata"].get("name") != name or o["kind"] != "Pod"]


def test_partial_gang_times_out_gives_up_backs_off_and_is_tried_again() -> None:
    """scheduleTimeoutSeconds 60, podGroupBackoffSeconds 30: pipelined until 60s; at 60s
    it gives its places up and backs off until 90s; at 90s it is pipelined again, and
    its clock starts again (the next timeout is at 150s)."""
    sched, objs, carried = (
        scheduler(**{"gang.podGroupBackoffSeconds": 30}),
        objects("coscheduling"),
        {},
    )
    uid = UIDS["coscheduling"]
    for at in (0, 30, 59):
        d = cycle(sched, objs, at, carried)
        assert d["pipelined"] == PIPELINED and uid not in d["pending"]

    d = cycle(sched, objs, 60, carried)
    assert d["pipelined"] == {} and d["binds"] == {}
    assert ("Unschedulable", "ScheduleTimeout") in conditions(d, uid)
    reason = d["pending"][uid]
    assert "timed out" in reason and "60s later (scheduleTimeoutSeconds)" in reason
    assert "gave up 2 places" in reason
    assert "backing off until 2026-01-01T00:01:30Z" in reason

    for at in (61, 89):
        d = cycle(sched, objs, at, carried)
        assert d["pipelined"] == {}
        assert d["pending"][uid].startswith(
            "not schedulable: backing off until 2026-01-01T00:01:30Z"
        )
        assert ("Unschedulable", "BackingOff") in conditions(d, uid)

    for at in (90, 149):
        d = cycle(sched, objs, at, carried)
        assert d["pipelined"] == PIPELINED and uid not in d["pending"]
    d = cycle(sched, objs, 150, carried)
    assert d["pipelined"] == {} and "backing off until 2026-01-01T00:03:00Z" in d["pending"][uid]


def test_places_given_up_go_to_another_gang_while_it_backs_off() -> None:
    """While the coscheduling gang backs off, a Volcano gang of the same shape takes the
    place on the releasing node that it gave up."""
    sched, carried = scheduler(**{"gang.podGroupBackoffSeconds": 30}), {}
    objs = objects("coscheduling") + [
        o
        for o in objects("volcano")
        if o["kind"] in ("PodGroup", "Pod") and o["metadata"]["name"] != "old"
    ]
    for o in objs[-3:]:  # the Volcano gang: PodGroup "train", pods "v-train-0/1"
        o["metadata"]["creationTimestamp"] = "2026-01-01T00:00:10Z"
        if o["kind"] == "Pod":
            o["metadata"]["name"] = "v-" + o["metadata"]["name"]
            o["metadata"]["uid"] = "v-" + o["metadata"]["uid"]
    d = cycle(sched, objs, 0, carried)
    assert d["pipelined"] == PIPELINED  # the older gang goes first
    d = cycle(sched, objs, 60, carried)
    assert d["pipelined"] == {}  # timed out at the end of the cycle: given up
    d = cycle(sched, objs, 61, carried)
    assert d["pipelined"] == {"default/v-train-0": "n1", "default/v-train-1": "n1"}


@pytest.mark.parametrize("dialect", ["workload-v1alpha1", "workload-v1alpha2"])
def test_workload_gangs_time_out_after_five_minutes_and_back_off_as_pods_do(
    dialect: str,
) -> None:
    """Kubernetes' gang timeout (5 minutes), then kube-scheduler's pod backoff: 1s after
    the first timeout, 2s after the second."""
    sched, objs, carried, uid = scheduler(), objects(dialect), {}, UIDS[dialect]
    cycle(sched, objs, 0, carried)  # the clock starts
    assert cycle(sched, objs, 299, carried)["pipelined"] == PIPELINED
    d = cycle(sched, objs, 300, carried)
    assert d["pipelined"] == {}
    assert "300s later (the Workload gang timeout)" in d["pending"][uid]
    assert "backing off until 2026-01-01T00:05:01Z" in d["pending"][uid]
    assert cycle(sched, objs, 301, carried)["pipelined"] == PIPELINED
    d = cycle(sched, objs, 601, carried)
    assert "backing off until 2026-01-01T00:10:03Z" in d["pending"][uid]
    assert cycle(sched, objs, 602, carried)["pipelined"] == {}
    assert cycle(sched, objs, 603, carried)["pipelined"] == PIPELINED


def test_coscheduling_without_a_timeout_waits_the_permit_waiting_time() -> None:
    objs = objects("coscheduling")
    for o in objs:
        if o["kind"] == "PodGroup":
            del o["spec"]["scheduleTimeoutSeconds"]
    for sched, limit in (
        (scheduler(), 60),
        (scheduler(**{"gang.permitWaitingTimeSeconds": 90}), 90),
    ):
        carried: dict = {}
        cycle(sched, objs, 0, carried)
        assert cycle(sched, objs, limit - 1, carried)["pipelined"] == PIPELINED
        d = cycle(sched, objs, limit, carried)
        assert f"{limit}s later (the permit waiting time)" in d["pending"][UIDS["coscheduling"]]


def test_gang_that_completes_within_its_timeout_is_untouched() -> None:
    """Pipelined for 50s, then the terminating pod is gone and the gang is bound: the
    same decisions as a cycle that never kept a clock, and its clock is dropped."""
    sched, objs, carried = scheduler(), objects("coscheduling"), {}
    uid = UIDS["coscheduling"]
    for at in (0, 50):
        assert cycle(sched, objs, at, carried)["pipelined"] == PIPELINED
    assert uid in carried[CARRY_KEY]
    gone = without(objs, "old")
    d = cycle(sched, gone, 55, carried, sessions=False)
    assert d == cycle(sched, gone, 55, None, sessions=False)
    assert d["binds"] == PIPELINED
    assert all(r not in ("ScheduleTimeout", "BackingOff") for _t, r in conditions(d, uid))
    assert uid not in carried[CARRY_KEY]


@pytest.mark.parametrize("at", [0, 60, 301, 86_400])
def test_volcano_gangs_are_never_timed_out(at: int) -> None:
    """The Volcano PodGroup of the same case stays pipelined however long it waits, with
    the decisions of a cycle that keeps nothing, and no clock is kept for it."""
    sched, objs, carried = scheduler(**{"gang.podGroupBackoffSeconds": 30}), objects("volcano"), {}
    for t in range(0, at + 1, max(at // 4, 1)):
        d = cycle(sched, objs, t, carried, sessions=False)
        assert d == cycle(sched, objs, t, None, sessions=False)
        assert d["pipelined"] == PIPELINED and d["pending"] == {}
    assert not carried.get(CARRY_KEY)


def test_schedule_start_time_from_the_podgroup_status_in_one_cycle() -> None:
    """``pumice cycle`` keeps no clock between runs: a coscheduling PodGroup whose
    status.scheduleStartTime is more than its timeout ago times out in one cycle."""
    objs = objects("coscheduling")
    pg = next(o for o in objs if o["kind"] == "PodGroup")
    pg["status"] = {"scheduleStartTime": "2025-12-31T23:58:00Z"}
    d = cycle(scheduler(), objs, 0, None)
    assert d["pipelined"] == {}
    reason = d["pending"][UIDS["coscheduling"]]
    assert "started at 2025-12-31T23:58:00Z" in reason
    pg["status"] = {"scheduleStartTime": "2025-12-31T23:59:30Z"}  # 30s ago: in time
    assert cycle(scheduler(), objs, 0, None)["pipelined"] == PIPELINED


def test_bad_schedule_start_time_is_refused() -> None:
    objs = objects("coscheduling")
    next(o for o in objs if o["kind"] == "PodGroup")["status"] = {"scheduleStartTime": "soon"}
    with pytest.raises(InputError) as err:
        build_snapshot([SourcedObject(o, "test") for o in objs])
    assert "status.scheduleStartTime" in str(err.value)


@pytest.mark.parametrize("key", ["gang.podGroupBackoffSeconds", "gang.permitWaitingTimeSeconds"])
def test_negative_seconds_are_refused(key: str) -> None:
    with pytest.raises(InputError) as err:
        scheduler(**{key: -1})
    assert f"arguments.{key}" in str(err.value)


def test_pod_backoff_doubles_up_to_ten_seconds() -> None:
    assert [pod_backoff(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]


def test_the_scheduler_cache_keeps_the_clocks_on_its_virtual_clock() -> None:
    """As in ``pumice simulate``: one cache over an in-memory cluster, its snapshots'
    "now" the virtual clock; the clocks live in the cache's ``carried`` between cycles,
    and the gang bound once the terminating pod is gone has none left."""
    from pumice.cache.cache import SchedulerCache
    from pumice.cluster.memory import MemoryCluster

    at = [0.0]
    store = MemoryCluster(clock=lambda: T0 + at[0])
    store.create_all(objects("coscheduling"))
    cache = SchedulerCache(store, clock=lambda: T0 + at[0])
    sched, uid = scheduler(**{"gang.podGroupBackoffSeconds": 30}), UIDS["coscheduling"]

    def step(t: float) -> dict:
        at[0] = t
        decisions = sched.cycle(cache.snapshot())
        cache.apply(decisions)
        return decisions.to_json()

    assert step(0)["pipelined"] == PIPELINED
    d = step(60)
    assert d["pipelined"] == {} and "backing off until 2026-01-01T00:01:30Z" in d["pending"][uid]
    assert "backing off" in step(75)["pending"][uid]
    assert step(90)["pipelined"] == PIPELINED
    store.delete("Pod", "default/old")
    d = step(100)
    assert d["binds"] == PIPELINED and uid not in cache.carried[CARRY_KEY]


def test_a_gang_short_of_pods_loses_its_clock() -> None:
    """A pod of the gang is gone for a while (the gang waits for it, not tried): its
    clock starts afresh when the pod is back, so it does not time out at once."""
    sched, objs, carried = scheduler(), objects("coscheduling"), {}
    uid = UIDS["coscheduling"]
    cycle(sched, objs, 0, carried)
    short = cycle(sched, without(objs, "train-1"), 30, carried)
    assert "not enough valid tasks" in short["pending"][uid]
    assert cycle(sched, objs, 70, carried)["pipelined"] == PIPELINED
    assert cycle(sched, objs, 129, carried)["pipelined"] == PIPELINED
    assert "timed out" in cycle(sched, objs, 130, carried)["pending"][uid]
