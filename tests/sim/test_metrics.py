"""Tests for the simulation metrics: fair-share yardstick, gang check, summaries."""

from __future__ import annotations

import numpy as np

from pumice.framework.said import Layer, Reasons
from pumice.sim.metrics import Metrics, summarize, water_fill
from pumice.sim.workload import GPU, JobSpec, QueueSpec, TaskSpec


def test_water_fill_splits_by_weight():
    """With unlimited demand the cluster is split in proportion to the weights."""
    d = water_fill(
        np.array([8.0]), np.array([[100.0], [100.0]]), np.array([1.0, 3.0]), np.full((2, 1), np.inf)
    )
    assert np.allclose(d[:, 0], [2.0, 6.0])


def test_water_fill_gives_unused_share_to_others():
    """A queue asking for less than its share leaves the rest to the others."""
    d = water_fill(
        np.array([8.0]), np.array([[1.0], [100.0]]), np.array([1.0, 1.0]), np.full((2, 1), np.inf)
    )
    assert np.allclose(d[:, 0], [1.0, 7.0])


def test_water_fill_respects_capability():
    """A capped queue gets no more than its capability."""
    cap = np.array([[np.inf], [3.0]])
    d = water_fill(np.array([8.0]), np.array([[100.0], [100.0]]), np.array([1.0, 9.0]), cap)
    assert np.allclose(d[:, 0], [5.0, 3.0])


def _metrics() -> Metrics:
    return Metrics(
        {"cpu": 8000.0, "memory": 2.0**34, GPU: 8.0, "pods": 110.0},
        [QueueSpec("a"), QueueSpec("b", weight=3)],
    )


def _spec(name: str, queue: str, pods: int = 2) -> JobSpec:
    return JobSpec(name, "default", queue, 0.0, 10.0, (TaskSpec("w", pods, {GPU: 1.0}),), pods)


def test_pods_resource_is_not_a_share_dimension():
    """Utilization and shares are over cpu, memory and extended resources, not pods."""
    assert _metrics().resources == ["cpu", "memory", GPU]


def test_gang_check_counts_short_gangs():
    """A job that got binds but holds fewer than minMember pods is a violation."""
    m = _metrics()
    m.job_submitted(0.0, "default/j", _spec("j", "a"))
    m.check_gang("default/j", 2)
    assert m.gang_violations == 0
    m.check_gang("default/j", 1)
    assert m.gang_violations == 1 and m.gang_checks == 2


def test_shares_utilization_and_summary():
    """Bound pods raise utilization and their queue's share; the summary reports it."""
    m = _metrics()
    for name, q in (("x", "a"), ("y", "b")):
        spec = _spec(name, q)
        m.job_submitted(0.0, f"default/{name}", spec)
        for _ in range(2):
            m.pod_created(f"default/{name}", spec.tasks[0].requests)
    for _ in range(2):
        m.pod_bound(0.0, "default/x", {GPU: 1.0}, 1)
    m.sample(0.0)
    assert m.series.utilization[-1][2] == 0.25
    assert m.series.queue_share[-1] == [0.25, 0.0]
    assert m.series.queue_deserved[-1] == [0.25, 0.25]  # demand is 2 GPUs each
    assert m.series.pending[-1] == 1 and m.series.running[-1] == 1
    for _ in range(2):
        m.pod_released(10.0, "default/x", {GPU: 1.0})
    m.job_ended(10.0, "default/x", "succeed")
    m.sample(10.0)
    s = summarize(m)
    assert s["jobs_ended"] == 1 and s["jobs_never_ran"] == 1
    assert s["utilization"][GPU] == 0.25  # 2 of 8 GPUs for the whole 10 s
    assert s["completion"]["mean"] == 10.0 and s["wait"]["p50"] == 0.0
    assert s["queues"]["a"]["jobs"] == 1


def test_utilization_over_arrivals_and_while_jobs_waited():
    """A small job running long after the last arrival drags the whole-run average
    down; the arrival window and the time a job waited keep what the cluster did while
    it was busy. Job x (2 GPUs of 8) runs 0-20 s; y arrives at 10 s (the last arrival),
    waits to 30 s and runs its 1 GPU until 1,000 s."""
    m = _metrics()
    x, y = _spec("x", "a", pods=2), _spec("y", "b", pods=1)
    m.job_submitted(0.0, "default/x", x)
    for _ in range(2):
        m.pod_bound(0.0, "default/x", {GPU: 1.0}, 1)
    m.job_submitted(10.0, "default/y", y)
    for _ in range(2):
        m.pod_released(20.0, "default/x", {GPU: 1.0})
    m.job_ended(20.0, "default/x", "succeed")
    m.pod_bound(30.0, "default/y", {GPU: 1.0}, 1)
    m.pod_released(1000.0, "default/y", {GPU: 1.0})
    m.job_ended(1000.0, "default/y", "succeed")
    m.sample(1000.0)
    s = summarize(m)
    assert s["utilization"][GPU] == round((2 * 20 + 970) / (8 * 1000), 6)
    assert s["arrival_window"] == 10.0
    assert s["utilization_arrivals"][GPU] == 0.25  # 2 of 8 GPUs from 0 to 10 s
    assert s["waiting_seconds"] == 20.0  # y pending from 10 to 30 s
    assert s["utilization_waiting"][GPU] == 0.125  # 2 GPUs for 10 of those 20 s
    assert s["utilization_waiting"]["cpu"] == 0.0


def test_utilization_windows_without_time_have_no_figures():
    """Jobs that all arrive at once and never wait leave those windows empty."""
    m = _metrics()
    m.job_submitted(0.0, "default/x", _spec("x", "a", pods=1))
    m.pod_bound(0.0, "default/x", {GPU: 1.0}, 1)
    m.pod_released(10.0, "default/x", {GPU: 1.0})
    m.job_ended(10.0, "default/x", "succeed")
    m.sample(10.0)
    s = summarize(m)
    assert s["utilization"][GPU] == 0.125
    assert s["utilization_arrivals"] == {} and s["utilization_waiting"] == {}


def test_a_job_left_waiting_counts_to_the_end_of_the_run():
    """A job that never starts keeps the run in the waiting window to its end."""
    m = _metrics()
    m.job_submitted(0.0, "default/x", _spec("x", "a", pods=1))
    m.pod_bound(0.0, "default/x", {GPU: 1.0}, 1)
    m.job_submitted(5.0, "default/y", _spec("y", "b", pods=9))
    m.sample(50.0)
    s = summarize(m)
    assert s["waiting_seconds"] == 45.0
    assert s["utilization_waiting"][GPU] == 0.125


def _refused(jobs: list[str], figure: int) -> Reasons:
    """A cycle's explanations: the parked ``jobs`` refused as one layer, quoting
    ``figure`` (a fresh layer for each cycle, as a cycle makes one)."""
    uids = _UIDS.setdefault(tuple(jobs), list(jobs))  # (the parked jobs, unchanged)
    job = {u: u for u in uids}
    layer = Layer(
        [job[u] for u in uids], uids, [True] * len(uids), {u: i for i, u in enumerate(uids)},
        lambda u: f"not enqueued: {u} refused at {figure}", len(uids),
    )  # fmt: skip
    reasons = Reasons({"default/other": f"other at {figure}"})
    reasons.lay(layer)
    return reasons


_UIDS: dict[tuple[str, ...], list[str]] = {}


def test_a_parked_backlogs_reasons_follow_each_cycle_and_are_kept_at_start() -> None:
    """The reasons a backlog refused as one layer gives, sampled between cycles, read
    each cycle's figures; a job that starts keeps the last one as its pending reason,
    and one that never starts has it at the end."""
    m = _metrics()
    backlog = ["default/x", "default/y"]
    for uid in [*backlog, "default/other"]:
        m.job_submitted(0.0, uid, _spec(uid.split("/")[1], "a", pods=1))
    for k in range(1, 4):
        m.cycle(_refused(backlog, k))
        m.sample(float(k))
    assert [r for _t, r in m.jobs["default/x"].reasons] == [
        f"not enqueued: default/x refused at {k}" for k in (1, 2, 3)
    ]
    m.cycle(_refused(backlog, 4))
    m.pod_bound(5.0, "default/x", {GPU: 1.0}, 1)
    m.cycle(_refused(["default/y"], 5))  # (x started: the backlog is y alone)
    m.cycle(_refused(["default/y"], 6))
    m.say_reasons()
    assert m.jobs["default/x"].pending_reason == "not enqueued: default/x refused at 4"
    assert m.jobs["default/y"].pending_reason == "not enqueued: default/y refused at 6"
    assert m.jobs["default/other"].pending_reason == "other at 6"
