"""Ledger: per-queue sums over jobs, kept up to date one job at a time.

Why: the queue plugins (proportion, overcommit) need, at every session open, what each
queue holds, asks for and has been admitted with. Summing that over every job makes a
cycle cost grow with the number of *running* jobs, which in a simulation (or a large
cluster) is thousands of jobs that nothing changes from one cycle to the next. The
scheduler cache keeps a ledger and updates it only for the jobs an event changed; a
snapshot built from scratch gets a ledger summed from its jobs. The two are equal.

Exactness: a job's part is taken away exactly as it was added (each job's last part is
kept), and parts are held in integer units (cpu millicores and bytes already are;
other resources, which keep milli precision, are scaled by 1,000 and rounded), so the
sums do not drift however many times jobs come and go.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from pumice.api.job import JobInfo
from pumice.api.quantity import CPU, MEMORY
from pumice.api.resources import ResourceSpace, Vector


@dataclass(slots=True)
class QueueSums:
    """What the jobs of each queue add up to, one row per queue (new arrays: a session
    may change them)."""

    jobs: np.ndarray  # job counts
    allocated: np.ndarray  # requests of the tasks holding resources
    pending: np.ndarray  # requests of the tasks waiting for a node
    inqueue: np.ndarray  # JobInfo.inqueue_demand of admitted jobs
    elastic: np.ndarray  # allocated beyond minResources, per job, summed


@dataclass(slots=True, frozen=True)
class _Part:
    job: JobInfo  # (kept so that the identity in ``key`` stays the job's)
    key: tuple  # what the part was computed from: identity, task index version, phase
    queue: str
    allocated: Vector
    pending: Vector
    inqueue: Vector
    elastic: Vector
    affinity: bool


def _integral(name: str) -> bool:
    return name in (CPU, MEMORY) or name.endswith("storage") or name.startswith("hugepages-")


class Ledger:
    """Per-queue :class:`QueueSums` over a set of jobs.

    Contract: call :meth:`update` after every change of a job (its tasks' statuses,
    its phase, its spec) and :meth:`remove` when it goes; :meth:`matrices` then equals
    that of :meth:`of` over the same jobs."""

    def __init__(self, space: ResourceSpace) -> None:
        self.space = space
        self._scale = np.array([1.0 if _integral(n) else 1000.0 for n in space.names])
        self._scaled = not bool(np.all(self._scale == 1.0))
        self._parts: dict[str, _Part] = {}
        self._queues: dict[str, list] = {}  # name -> [jobs, allocated, pending, inqueue, elastic]
        self._read_only = False
        #: Bumped by every change of the sums; keys the last matrices handed out.
        self._changes = 0
        self._last: tuple[tuple, QueueSums] | None = None
        #: ``inqueue_total`` of the matrices it was summed from (held, so compared by
        #: identity).
        self._last_inqueue: tuple[QueueSums, Vector] | None = None
        #: Jobs with a task that has required inter-pod (anti-)affinity.
        self.affinity_jobs = 0

    @classmethod
    def of(cls, space: ResourceSpace, jobs: Iterable[JobInfo]) -> Ledger:
        """The sums over ``jobs``, taken queue by queue as matrices (a snapshot built
        from files has every job to sum, once). The result is read-only: it keeps no
        part per job to take away again."""
        ledger = cls(space)
        by_queue: dict[str, list[JobInfo]] = {}
        for job in jobs:
            by_queue.setdefault(job.queue, []).append(job)
            ledger.affinity_jobs += any(t.pod_affinity is not None for t in job.tasks.values())
        zero = space.zeros()
        for queue, members in by_queue.items():
            alloc = np.array([j.allocated for j in members])
            minres = np.array([zero if (m := j.min_resources) is None else m for j in members])
            demands = [j.inqueue_demand() for j in members]
            mats = (
                alloc,
                np.array([j.pending_request for j in members]),
                np.array([zero if d is None else d for d in demands]),
                np.maximum(alloc - minres, 0.0),
            )
            ledger._queues[queue] = [len(members), *(ledger._units(m).sum(axis=0) for m in mats)]
        ledger._read_only = True
        return ledger

    def _units(self, v: Vector) -> Vector:
        return np.round(v * self._scale) if self._scaled else v.copy()

    def update(self, job: JobInfo) -> None:
        """Take ``job``'s part as it is now (replacing the part it had). Nothing to do
        when neither the task index nor the phase moved since (a status rewrite)."""
        if self._read_only:
            raise RuntimeError("a ledger summed at once (Ledger.of) cannot be updated")
        key = (id(job), job._version, job.phase, job.queue, job.min_available)
        old = self._parts.get(job.uid)
        if old is not None and old.key == key and old.job is job:
            return
        self.remove(job.uid)
        zero = self.space.zeros()
        minres = job.min_resources
        elastic = job.allocated - minres if minres is not None else job.allocated
        demand = job.inqueue_demand()
        part = _Part(
            job=job,
            key=key,
            queue=job.queue,
            allocated=self._units(job.allocated),
            pending=self._units(job.pending_request),
            inqueue=self._units(demand) if demand is not None else zero,
            elastic=self._units(np.maximum(elastic, 0.0)),
            affinity=any(t.pod_affinity is not None for t in job.tasks.values()),
        )
        self._parts[job.uid] = part
        self._changes += 1
        sums = self._queues.get(part.queue)
        if sums is None:
            sums = self._queues[part.queue] = [0, *(self.space.zeros() for _ in range(4))]
        sums[0] += 1
        sums[1] += part.allocated
        sums[2] += part.pending
        sums[3] += part.inqueue
        sums[4] += part.elastic
        self.affinity_jobs += part.affinity

    def remove(self, uid: str) -> None:
        part = self._parts.pop(uid, None)
        if part is None:
            return
        self._changes += 1
        sums = self._queues[part.queue]
        sums[0] -= 1
        if sums[0] == 0:
            del self._queues[part.queue]
        else:
            sums[1] -= part.allocated
            sums[2] -= part.pending
            sums[3] -= part.inqueue
            sums[4] -= part.elastic
        self.affinity_jobs -= part.affinity

    def matrices(self, queues: Iterable[str]) -> tuple[list[str], QueueSums]:
        """The sums of the queues of ``queues`` that have jobs, in canonical units, as
        new matrices (one row per queue, in name order): the names, and a
        :class:`QueueSums` of arrays (``jobs`` a vector of counts)."""
        names, got = self._kept(queues)
        return names, QueueSums(
            got.jobs.copy(),
            got.allocated.copy(),
            got.pending.copy(),
            got.inqueue.copy(),
            got.elastic.copy(),
        )

    def inqueue_total(self, queues: Iterable[str]) -> Vector:
        """The rows of :meth:`matrices`' ``inqueue`` (what the admitted jobs of each
        queue ask) summed one by one in name order onto zeros, as a new vector:
        overcommit asks this at every session open, and needs no copy of the matrices.
        Kept with them until the ledger changes."""
        _names, got = self._kept(queues)
        kept = self._last_inqueue
        if kept is None or kept[0] is not got:
            total = self.space.zeros()
            for row in got.inqueue:
                total += row
            kept = self._last_inqueue = (got, total)
        return kept[1].copy()

    def _kept(self, queues: Iterable[str]) -> tuple[list[str], QueueSums]:
        """:meth:`_matrices` of the queues of ``queues`` that have jobs, kept (and
        shared: callers copy) until the ledger changes or other queues are asked."""
        names = sorted(set(queues) & set(self._queues))
        key = (self._changes, tuple(names))
        if self._last is not None and self._last[0] == key:
            return names, self._last[1]
        got = self._matrices(names)
        self._last = (key, got)
        return names, got

    def _matrices(self, names: list[str]) -> QueueSums:
        if not names:
            z = np.zeros((0, self.space.size))
            return QueueSums(np.zeros(0, dtype=int), z, z.copy(), z.copy(), z.copy())
        rows = [self._queues[n] for n in names]
        counts = np.array([r[0] for r in rows])
        mats = [np.array([r[k] for r in rows]) for k in range(1, 5)]
        if self._scaled:
            mats = [m / self._scale for m in mats]
        return QueueSums(counts, *mats)


__all__ = ["Ledger", "QueueSums"]
