"""The report's findings: long waits with what held them, queues far below their
deserved share and why, capacity idle while jobs waited, and the remedies to try."""

from __future__ import annotations

import pytest

from pumice.scheduler import Scheduler
from pumice.sim.cluster_spec import node_object
from pumice.sim.engine import simulate
from pumice.sim.findings import (
    findings,
    idle_while_waiting,
    long_waits,
    queue_share,
    reason_label,
    standstill,
)
from pumice.sim.metrics import JobRecord, Metrics
from pumice.sim.workload import GPU, JobSpec, QueueSpec, TaskSpec, Workload

GiB = float(2**30)
H = 3600.0
NODE = {"cpu": 96000.0, "memory": 768 * GiB, GPU: 8.0}
DESERVED = (
    "gang short: needs 2 tasks, 1 could be placed (worker: 1/2); queue b cannot take task "
    "big-worker-1 now: it would exceed its deserved share (cpu 96, memory 768Gi, "
    "nvidia.com/gpu 8)"
)
NO_ROOM = (
    "gang short: needs 2 tasks, 0 could be placed; task gang-worker-0: 0/2 nodes are "
    "available: 2 insufficient nvidia.com/gpu"
)
OVERCOMMIT = (
    "not enqueued: overcommit: cluster would be overcommitted beyond factor 1.2 in "
    "nvidia.com/gpu: this job's minResources (nvidia.com/gpu 2) plus those of the jobs "
    "already admitted (nvidia.com/gpu 12) exceed what the cluster can take at that factor "
    "(nvidia.com/gpu 11.2: its total times the factor, less what is in use)"
)


def constructed() -> Metrics:
    """16 GPUs for 10 hours: queue a runs 8 of them throughout; queue b's 12-GPU gang
    waits the whole time (b's deserved share 0.5 is below the gang's 0.75), and a 2-GPU
    job of queue a is refused by overcommit for the first 4 hours."""
    m = Metrics({"cpu": 192000.0, "memory": 1536 * GiB, GPU: 16.0},
                [QueueSpec("a", weight=1), QueueSpec("b", weight=1)])  # fmt: skip
    gpu = m.index[GPU]
    for k in range(10):
        util = [0.0, 0.0, 0.0]
        util[gpu] = 0.5 if k < 4 else 0.625
        m.series.time.append(k * H)
        m.series.utilization.append(util)
        m.series.queue_share.append([0.5 if k < 4 else 0.625, 0.0])
        m.series.queue_deserved.append([0.5, 0.5])
        m.series.queue_demand.append([0.5 if k < 4 else 0.625, 0.75])
        m.series.pending.append(2 if k < 4 else 1)
        m.series.running.append(1 if k < 4 else 2)
    m.last_change = 10 * H
    m.jobs["a/run"] = JobRecord("a/run", "a", 0.0, 1, 1, 8.0, "succeed", start=0.0, end=10 * H)
    m.jobs["b/big"] = JobRecord("b/big", "b", 0.0, 2, 2, 12.0, "succeed",
                                reasons=[(0.0, DESERVED)])  # fmt: skip
    m.jobs["a/small"] = JobRecord("a/small", "a", 0.0, 1, 1, 2.0, "succeed", start=4 * H,
                                  end=10 * H, reasons=[(0.0, OVERCOMMIT), (4 * H, "")])  # fmt: skip
    return m


def test_reason_labels_name_the_stage_that_stopped_a_job():
    assert reason_label(OVERCOMMIT) == "not admitted (overcommit)"
    assert reason_label(DESERVED) == "gang short: queue's deserved share"
    assert (
        reason_label(
            "gang short: needs 4 tasks, 0 could be placed; task x: 0/56 nodes are available: "
            "56 insufficient nvidia.com/gpu"
        )
        == "gang short: no node had room"
    )


def test_long_waits_say_what_held_each_job_and_for_how_long():
    f = long_waits(constructed())
    assert f is not None
    first, second = f.numbers["jobs"][:2]
    assert first["job"] == "b/big" and first["never_ran"]
    assert first["wait"] == pytest.approx(10 * H)
    assert first["reasons"][0]["reason"] == "gang short: queue's deserved share"
    assert first["reasons"][0]["seconds"] == pytest.approx(10 * H)
    assert second["job"] == "a/small" and second["wait"] == pytest.approx(4 * H)
    assert second["reasons"][0] == {
        "reason": "not admitted (overcommit)", "seconds": 4 * H, "example": OVERCOMMIT
    }  # fmt: skip
    assert "10.0 h" in f.text and "b/big" in f.title


def test_a_queue_whose_deserved_share_is_below_its_gang_gets_a_weight_and_a_guarantee():
    (f,) = queue_share(constructed())
    n = f.numbers
    assert n["queue"] == "b" and n["job"] == "b/big"
    assert n["seconds_below"] == pytest.approx(10 * H)
    assert n["job_share"] == pytest.approx(0.75) and n["deserved_max"] == 0.5
    # a asks 0.5 to 0.625 at weight 1: b's 0.75 needs b's portion w / (w + 1) >= 0.75
    assert n["weight_estimate"] == 3 and n["weight_modest"]
    # 3 is a few times the other queue's weight: a weight an admin would give
    assert "weight from 1 to about 3" in f.remedy
    assert "guarantee (spec.guarantee.resource) of nvidia.com/gpu: 12" in f.remedy
    assert "smaller than the gang" in f.text


def test_a_queue_whose_capability_is_below_its_gang_is_told_to_raise_it():
    """Queue b's capability of 10 GPUs caps its deserved share below its 12-GPU gang:
    neither a weight nor a guarantee can help, the capability must rise."""
    m = constructed()
    b = m.queue_index["b"]
    m.capability[b, m.index[GPU]] = 10.0
    (f,) = queue_share(m)
    assert f.numbers["capability"] == 10.0
    assert (
        "raise queue b's capability (spec.capability) in nvidia.com/gpu from 10 to at "
        "least 12" in f.remedy
    )
    assert "raise its weight" not in f.remedy and "spec.guarantee" not in f.remedy


def test_a_queue_finding_counts_only_what_its_gang_was_told_while_the_queue_was_behind():
    """Queue b falls behind only from hour 4 (it deserves nothing before): its gang's
    reason counts the 6 hours it held then, not the 10 of the whole stretch."""
    m = constructed()
    for k in range(4):
        m.series.queue_deserved[k] = [0.5, 0.0]
    (f,) = queue_share(m)
    assert f.numbers["seconds_below"] == pytest.approx(6 * H)
    (reason,) = f.numbers["reasons"]
    assert reason["reason"] == "gang short: queue's deserved share"
    assert reason["seconds"] == pytest.approx(6 * H)
    assert "waited 6.0 h then" in f.text


def test_idle_gpus_while_jobs_waited_are_counted_with_the_stretch_and_what_held_it():
    f = idle_while_waiting(constructed())
    assert f is not None
    n = f.numbers
    # 8 idle for 4 h (jobs asking 14), then 6 idle for 6 h (the gang asking 12)
    assert n["idle_while_waiting_hours"] == pytest.approx(8 * 4 + 6 * 6)
    assert (n["stretch_start"], n["stretch_end"]) == (0.0, 10 * H)
    assert n["stretch_waiting"] == [1, 2]
    assert n["stretch_reasons"]["gang short: queue's deserved share"] == pytest.approx(10 * H)


def test_overcommit_blocked_by_an_admitted_gang_waiting_for_room_suggests_a_factor():
    m = constructed()
    m.jobs["b/big"].reasons = [(0.0, OVERCOMMIT.replace("1.2", "1.0"))]
    m.jobs["a/small"].reasons = [(0.0, OVERCOMMIT.replace("1.2", "1.0"))]
    m.jobs["b/gang"] = JobRecord("b/gang", "b", 0.0, 2, 2, 16.0, "succeed",
                                 reasons=[(0.0, NO_ROOM)])  # fmt: skip
    f = idle_while_waiting(m)
    assert f is not None
    n = f.numbers
    assert n["admitted_not_placed"] == ["b/gang"]
    assert n["overcommit_factor"] == 1.0
    # (in use + admitted 16 + the smallest refused, 2) / 16: in use is 8 for 4 samples,
    # then 10 for 6; the median sample is one of the latter
    assert n["factor_needed_median"] == pytest.approx((10 + 16 + 2) / 16)
    assert "overcommit-factor from 1 to about 1.8" in f.remedy
    assert n["admitted_refused_by_share"] == []


def stalled() -> Metrics:
    """16 GPUs for 10 hours, queues a and b of weight 1 (deserved 8 GPUs each): a/run
    holds 8 GPUs for the first 2 hours; a 12-GPU gang of each queue is admitted and
    refused by its queue's deserved share the whole time; three more 12-GPU jobs are
    refused by overcommit (factor 2: the two admitted gangs' 24 GPUs plus 12 are more
    than twice the cluster, less what is in use). After a/run ends, nothing can change."""
    m = Metrics({"cpu": 192000.0, "memory": 1536 * GiB, GPU: 16.0},
                [QueueSpec("a", weight=1), QueueSpec("b", weight=1)])  # fmt: skip
    gpu = m.index[GPU]
    for k in range(10):
        util = [0.0, 0.0, 0.0]
        util[gpu] = 0.5 if k < 2 else 0.0
        m.series.time.append(k * H)
        m.series.utilization.append(util)
        m.series.queue_share.append([util[gpu], 0.0])
        m.series.queue_deserved.append([0.5, 0.5])
        m.series.queue_demand.append([1.0, 1.0])
        m.series.pending.append(5)
        m.series.running.append(1 if k < 2 else 0)
    m.last_change = 10 * H
    m.last_end = 2 * H
    m.jobs["a/run"] = JobRecord("a/run", "a", 0.0, 1, 1, 8.0, "succeed", start=0.0,
                                restart_start=0.0, end=2 * H)  # fmt: skip
    for uid in ("a/gang", "b/gang"):
        told = DESERVED.replace("queue b", f"queue {uid[0]}")
        m.jobs[uid] = JobRecord(uid, uid[0], 0.0, 2, 2, 12.0, "succeed", reasons=[(0.0, told)])
    for uid in ("a/next", "b/next1", "b/next2"):
        m.jobs[uid] = JobRecord(uid, uid[0], 60.0, 2, 2, 12.0, "succeed",
                                reasons=[(0.0, OVERCOMMIT.replace("1.2", "2"))])  # fmt: skip
    return m


def test_overcommit_blocked_by_gangs_their_queue_refuses_does_not_suggest_a_higher_factor():
    """Raising the factor would admit more gangs into queues whose deserved share is
    already smaller than the gang each holds: fewer admitted at once is what helps."""
    f = idle_while_waiting(stalled())
    assert f is not None
    n = f.numbers
    # in use + admitted 24 + the smallest refused 12, over 16, is above 2: what a higher
    # factor would have let in, and only as more gangs that could not be placed
    assert n["factor_needed_median"] == pytest.approx(36 / 16)
    assert "to about" not in f.remedy
    assert f.remedy.startswith("Do not raise overcommit-factor")
    assert "lower overcommit's overcommit-factor from 2 toward 1.2" in f.remedy
    assert "give queues a, b the weight or a guarantee" in f.remedy
    assert "2 of them were refused by their queue's deserved share" in f.text
    assert n["admitted_not_placed"] == ["a/gang", "b/gang"]
    assert n["admitted_refused_by_share"] == ["a/gang", "b/gang"]
    assert n["budget_held_by_refused_gangs"] == 1.0


def test_a_run_that_ends_with_gangs_blocking_each_other_is_called_a_standstill():
    found = findings(stalled())
    assert [f.kind for f in found][:2] == ["standstill", "idle_while_waiting"]
    f = found[0]
    n = f.numbers
    assert (n["waiting"], n["never_ran"]) == (5, 5)
    assert n["by_reason"] == {"not admitted (overcommit)": 3,
                              "gang short: queue's deserved share": 2}  # fmt: skip
    assert n["refused_gangs"] == ["a/gang", "b/gang"] and n["refused_gangs_size"] == 24
    assert n["refused_gangs_queues"] == ["a", "b"] and n["overcommit_factor"] == 2.0
    assert "a/gang (12 GPUs), b/gang (12 GPUs)" in f.text
    assert "the last job ended at 2.0 h" in f.text
    assert "the 3 job(s) it refused could not be admitted either" in f.text
    assert "Standstill: 5 job(s) never ran" in f.title
    assert "lower overcommit's overcommit-factor from 2 toward 1.2" in f.remedy
    assert "to about" not in f.remedy


def test_a_run_cut_off_while_a_job_runs_is_no_standstill():
    m = stalled()
    m.jobs["a/run"].end = None
    assert standstill(m) is None
    m.jobs["a/run"].end = 2 * H
    for uid in ("a/gang", "b/gang", "a/next", "b/next1", "b/next2"):
        m.jobs[uid].start = m.jobs[uid].restart_start = 3 * H
        m.jobs[uid].end = 9 * H
    assert standstill(m) is None


def test_nothing_to_say_about_a_run_where_nobody_waited():
    m = Metrics({"cpu": 1000.0, GPU: 8.0}, [QueueSpec("a")])
    m.jobs["a/x"] = JobRecord("a/x", "a", 0.0, 1, 1, 8.0, "succeed", start=0.0, end=60.0)
    m.series.time += [0.0, 30.0]
    m.series.utilization += [[1.0, 1.0], [1.0, 1.0]]
    m.series.queue_share += [[1.0], [1.0]]
    m.series.queue_deserved += [[1.0], [1.0]]
    m.series.queue_demand += [[1.0], [1.0]]
    m.series.pending += [0, 0]
    m.series.running += [1, 1]
    assert findings(m) == []


def _job(name: str, queue: str, arrival: float, hours: float, pods: int, gpus: float) -> JobSpec:
    task = TaskSpec("worker", pods, {"cpu": 8000.0, "memory": 64 * GiB, GPU: gpus})
    return JobSpec(name, queue, queue, arrival, hours * H, (task,), pods)


def test_a_real_run_whose_gang_exceeds_its_queue_share_is_found():
    """Four 8-GPU nodes: queue a runs 8 GPUs for 10 hours; queue b's gang of 7 pods of 4
    GPUs (28 of the 32) arrives a minute later, is admitted (overcommit lets 1.2 × 32 - 8
    in) and waits the whole time: its deserved share, what a leaves (24 GPUs), is below
    the gang, while 24 GPUs sit idle."""
    nodes = [node_object(f"n{i}", NODE) for i in range(4)]
    w = Workload(
        jobs=(_job("long", "a", 0.0, 10, 1, 8.0), _job("gang", "b", 60.0, 1, 7, 4.0)),
        queues=(QueueSpec("a"), QueueSpec("b")),
    )
    result = simulate(nodes, w, Scheduler.from_file(None))
    found = {f.kind: f for f in findings(result.metrics)}
    assert set(found) == {"idle_while_waiting", "queue_share", "long_waits"}
    waits = found["long_waits"].numbers["jobs"]
    assert waits[0]["job"] == "b/gang" and waits[0]["wait"] == pytest.approx(10 * H, rel=0.01)
    assert sum(r["seconds"] for r in waits[0]["reasons"]) > 9.9 * H
    q = found["queue_share"].numbers
    assert q["queue"] == "b" and q["job"] == "b/gang"
    assert q["deserved_max"] == 0.75 and q["job_share"] == 0.875
    # b's portion w / (w + 1) must reach 0.875 of the cluster (a asks 0.25)
    assert q["weight_estimate"] == 7 and not q["weight_modest"]
    # weight 7 against the other queue's 1 is no remedy: the gang's whole request as a
    # guarantee is (8 cpu, 64Gi and 4 GPUs a pod, 7 pods)
    remedy = found["queue_share"].remedy
    assert q["guarantee"] == {"cpu": "56", "memory": "448Gi", GPU: "28"}
    assert "guarantee (spec.guarantee.resource) of cpu: 56, memory: 448Gi, " in remedy
    assert "raise its weight" not in remedy and "it would take about 7" in remedy
    idle = found["idle_while_waiting"].numbers
    assert idle["idle_while_waiting_hours"] == pytest.approx(240, rel=0.02)
