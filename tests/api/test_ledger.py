"""Tests for the Ledger: sums kept job by job equal sums taken at once, whatever the
order of updates and removals (queues that empty and come back included)."""

from __future__ import annotations

import copy
import random

import numpy as np
from tests.kit import node, pod, podgroup, queue

from pumice.api.ledger import Ledger
from pumice.api.task import TaskStatus
from pumice.cache.build import SourcedObject, build_snapshot


def _snapshot():
    objs = [node("n1", cpu="64", memory="256Gi", gpu="8")]
    phases = ("Inqueue", "Running", "Pending")
    for q in range(7):  # (more queues than the ledger's first block of slots)
        objs.append(queue(f"q{q}"))
        for j in range(3):
            name = f"j{q}-{j}"
            objs.append(
                podgroup(
                    name,
                    queue=f"q{q}",
                    min_member=2,
                    phase=phases[j],
                    min_resources={"cpu": "3", "memory": "3Gi", "nvidia.com/gpu": "1.5"},
                )
            )
            for i in range(2):
                objs.append(
                    pod(
                        f"{name}-{i}",
                        group=name,
                        cpu="1500m",
                        gpu="0.5" if i else None,
                        node="n1" if j == 1 else None,
                        phase="Running" if j == 1 else None,
                    )
                )
    return build_snapshot([SourcedObject(o) for o in objs])


def _same(a: Ledger, b: Ledger, queues) -> None:
    (na, qa), (nb, qb) = a.matrices(queues), b.matrices(queues)
    assert na == nb
    for field in ("jobs", "allocated", "pending", "inqueue", "elastic"):
        assert np.array_equal(getattr(qa, field), getattr(qb, field)), field
    assert np.array_equal(a.inqueue_total(queues), b.inqueue_total(queues))
    assert a.affinity_jobs == b.affinity_jobs


def test_kept_sums_equal_fresh_sums():
    snap = _snapshot()
    jobs = sorted(snap.jobs.values(), key=lambda j: j.uid)
    kept = Ledger(snap.space)
    for job in jobs:
        kept.update(job)
    _same(kept, Ledger.of(snap.space, jobs), snap.queues)
    # Queues that empty give their slot back; jobs coming back (in another order) find
    # zeroed sums.
    gone = [j for j in jobs if j.queue in ("q0", "q3", "q6")]
    for job in gone:
        kept.remove(job.uid)
    left = [j for j in jobs if j not in gone]
    _same(kept, Ledger.of(snap.space, left), snap.queues)
    assert kept.matrices(["q0"])[0] == []
    for job in reversed(gone):
        kept.update(job)
    _same(kept, Ledger.of(snap.space, jobs), snap.queues)
    # An update of an unchanged job changes nothing; the matrices handed out are new.
    for job in jobs:
        kept.update(job)
    _names, m = kept.matrices(snap.queues)
    m.allocated += 1.0
    _same(kept, Ledger.of(snap.space, jobs), snap.queues)


def test_the_admitted_total_follows_jobs_coming_and_going_in_any_queue():
    """overcommit's total of what the admitted jobs ask is kept from one call to the
    next, the sum up to the first queue that moved taken as it was: after every job
    that comes or goes, in any queue, it is the sum of the queues' rows afresh."""
    snap = _snapshot()
    jobs = sorted(snap.jobs.values(), key=lambda j: j.uid)
    kept = Ledger(snap.space)
    held: list = []
    rng = random.Random(7)
    for _step in range(120):
        out = [j for j in jobs if j not in held]
        if held and (not out or rng.random() < 0.5):
            job = held.pop(rng.randrange(len(held)))
            kept.remove(job.uid)
        else:
            job = rng.choice(out)
            held.append(job)
            kept.update(job)
        total = kept.inqueue_total(snap.queues)
        fresh = Ledger.of(snap.space, held)
        _names, m = fresh.matrices(snap.queues)
        summed = np.zeros(snap.space.size)
        for row in m.inqueue:
            summed = summed + row
        assert total.tobytes() == summed.tobytes()
        _same(kept, fresh, snap.queues)


def test_a_queues_stamp_moves_with_its_sums_alone():
    """What a plugin derives from a queue's sums may be kept while the queue's stamp
    stands: the stamp moves when that queue's sums move and not for another queue's,
    and the rows handed out are the queue's rows of the matrices."""
    snap = _snapshot()
    jobs = sorted(snap.jobs.values(), key=lambda j: j.uid)
    kept = Ledger(snap.space)
    for job in jobs:
        kept.update(job)
    names = kept.queues_with_jobs(snap.queues)
    before = dict(zip(names, kept.stamps(names), strict=True))
    _names, m = kept.matrices(snap.queues)
    for k, name in enumerate(names):
        rows = kept.sums_of(name)
        assert (
            rows.tobytes()
            == np.array([m.allocated[k], m.pending[k], m.inqueue[k], m.elastic[k]]).tobytes()
        )
    for job in jobs:  # (nothing moved)
        kept.update(job)
    assert kept.stamps(names) == list(before.values())
    moved = next(j for j in jobs if j.queue == "q2")
    kept.remove(moved.uid)
    after = dict(zip(names, kept.stamps(names), strict=True))
    assert [n for n in names if after[n] != before[n]] == ["q2"]
    left = Ledger.of(snap.space, [j for j in jobs if j is not moved])
    assert kept.sums_of("q2").tobytes() == left.sums_of("q2").tobytes()
    kept.update(moved)
    _same(kept, Ledger.of(snap.space, jobs), snap.queues)
    # Another ledger over the same jobs carries none of these stamps.
    fresh = Ledger.of(snap.space, jobs)
    assert not set(fresh.stamps(names)) & set(kept.stamps(names))


def test_sums_follow_tasks_through_their_lives_and_jobs_made_anew():
    """Tasks bound, running, finished one by one (a queue with one job and queues with
    several), jobs admitted, and jobs made anew as they were (a cycle's job rebuilt):
    after each change the kept sums equal sums taken at once, and a job made anew as
    it was leaves its queue's stamp where it was."""
    snap = _snapshot()
    jobs = {j.uid: j for j in sorted(snap.jobs.values(), key=lambda j: j.uid)}
    kept = Ledger(snap.space)
    for job in jobs.values():
        kept.update(job)
    alone = Ledger(snap.space)  # (a ledger whose queues hold one job each)
    for job in jobs.values():
        if job.uid.endswith("j2-0"):
            alone.update(job)
    names = kept.queues_with_jobs(snap.queues)

    def check() -> None:
        _same(kept, Ledger.of(snap.space, jobs.values()), snap.queues)
        solo = [j for j in jobs.values() if j.uid.endswith("j2-0")]
        _same(alone, Ledger.of(snap.space, solo), snap.queues)

    for step in (TaskStatus.BINDING, TaskStatus.RUNNING, TaskStatus.SUCCEEDED):
        for job in jobs.values():
            for task in list(job.tasks.values()):
                if task.status in (TaskStatus.PENDING, TaskStatus.BINDING, TaskStatus.RUNNING):
                    job.update_status(task, step)
                    job.phase = "Running"
                    kept.update(job)
                    if job.uid.endswith("j2-0"):
                        alone.update(job)
                    check()
    for job in jobs.values():  # (a task comes: pending moves, allocated stays)
        extra = copy.copy(next(iter(job.tasks.values())))
        extra.uid, extra.status = f"{extra.uid}-extra", TaskStatus.PENDING
        job.add_task(extra)
        kept.update(job)
        if job.uid.endswith("j2-0"):
            alone.update(job)
        check()
    stamps = kept.stamps(names)
    for uid, job in list(jobs.items()):
        jobs[uid] = copy.deepcopy(job)
        kept.update(jobs[uid])
    assert kept.stamps(names) == stamps
    check()


def _random_snapshot(rng: random.Random):
    """Jobs of random sizes and requests, fractions of a GPU among them (scaled by
    1,000 and rounded into whole units, ties to even included)."""
    objs = [node("n1", cpu="512", memory="4Ti", gpu="64")]
    for q in range(3):
        objs.append(queue(f"q{q}"))
    gpus = (None, "1", "0.5", "0.001", "0.333", "2.5", "0.0005")
    for j in range(12):
        name = f"j{j}"
        minres = {"cpu": f"{rng.randrange(1, 9000)}m", "memory": f"{rng.randrange(1, 64)}Mi"}
        gpu = rng.choice(gpus)
        if gpu is not None:
            minres["nvidia.com/gpu"] = gpu
        objs.append(
            podgroup(
                name,
                queue=f"q{rng.randrange(3)}",
                min_member=rng.randrange(1, 4),
                phase=rng.choice(("Pending", "Inqueue", "Running")),
                min_resources=minres if rng.random() < 0.8 else None,
            )
        )
        for i in range(rng.randrange(1, 5)):
            objs.append(
                pod(
                    f"{name}-{i}",
                    group=name,
                    cpu=f"{rng.randrange(1, 4000)}m",
                    memory=f"{rng.randrange(1, 2**20)}Ki",
                    gpu=rng.choice(gpus),
                )
            )
    return build_snapshot([SourcedObject(o) for o in objs])


def test_kept_sums_equal_fresh_sums_over_random_changes():
    """Parts and sums are kept as plain floats: after every one of many random changes
    (tasks moving between statuses, phases, queues, minMember, jobs made anew, gone and
    back), the kept matrices, rows and admitted total are the very floats (compared as
    bytes) that sums taken at once with numpy give."""
    statuses = (
        TaskStatus.PENDING,
        TaskStatus.ALLOCATED,
        TaskStatus.PIPELINED,
        TaskStatus.BINDING,
        TaskStatus.BOUND,
        TaskStatus.RUNNING,
        TaskStatus.SUCCEEDED,
        TaskStatus.FAILED,
    )
    for seed in range(4):
        rng = random.Random(seed)
        snap = _random_snapshot(rng)
        jobs = {j.uid: j for j in sorted(snap.jobs.values(), key=lambda j: j.uid)}
        held = dict(jobs)
        kept = Ledger(snap.space)
        for job in held.values():
            kept.update(job)
        for _step in range(300):
            uid = rng.choice(sorted(jobs))
            job = jobs[uid]
            roll = rng.random()
            if uid not in held:
                held[uid] = job
                kept.update(job)
            elif roll < 0.5:
                task = rng.choice(list(job.tasks.values()))
                job.update_status(task, rng.choice(statuses))
            elif roll < 0.65:
                job.phase = rng.choice(("Pending", "Inqueue", "Running", "Completed"))
            elif roll < 0.75:
                job.queue = f"q{rng.randrange(3)}"
            elif roll < 0.8:
                job.min_available = rng.randrange(1, 5)
            elif roll < 0.9:
                job = jobs[uid] = held[uid] = copy.deepcopy(job)
            else:
                del held[uid]
                kept.remove(uid)
                continue
            if uid in held:
                kept.update(job)
            fresh = Ledger.of(snap.space, held.values())
            _same(kept, fresh, snap.queues)
            names = kept.queues_with_jobs(snap.queues)
            _names, m = fresh.matrices(snap.queues)
            for k, name in enumerate(names):
                rows = np.array([m.allocated[k], m.pending[k], m.inqueue[k], m.elastic[k]])
                assert kept.sums_of(name).tobytes() == rows.tobytes()
            for field in ("jobs", "allocated", "pending", "inqueue", "elastic"):
                assert (
                    getattr(kept.matrices(snap.queues)[1], field).tobytes()
                    == getattr(m, field).tobytes()
                )
