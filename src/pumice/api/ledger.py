"""Ledger: per-queue sums over jobs, kept up to date one job at a time.

Why: the queue plugins (proportion, overcommit) need, at every session open, what each
queue holds, asks for and has been admitted with. Summing that over every job makes a
cycle cost grow with the number of *running* jobs, which in a simulation (or a large
cluster) is thousands of jobs that nothing changes from one cycle to the next. The
scheduler cache keeps a ledger and updates it only for the jobs an event changed; a
snapshot built from scratch gets a ledger summed from its jobs. The two are equal.

Each queue's sums carry a stamp that changes whenever they change (stamps are unique
across ledgers), so that a plugin can keep what it derived from a queue's sums until
they move: most cycles change one or two queues' sums, or none.

Exactness: a job's part is taken away exactly as it was added (each job's last part is
kept), and parts are held in integer units (cpu millicores and bytes already are;
other resources, which keep milli precision, are scaled by 1,000 and rounded), so the
sums do not drift however many times jobs come and go.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import count

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


@dataclass(slots=True)
class _Part:
    job: JobInfo  # (kept so that the identity in ``key`` stays the job's)
    key: tuple  # what the part was computed from: identity, task index version, phase
    #: What the units are computed from, as bytes (queue, allocated, pending, inqueue
    #: demand, minResources): a job whose inputs are the same has the same units.
    inputs: tuple
    queue: str
    #: allocated, pending, inqueue and elastic, one row after the other (a flat list of
    #: 4 x dimensions plain floats), in integer units.
    units: list[float]
    affinity: bool


#: The rows of a queue's sums (and of a part): allocated, pending, inqueue, elastic.
_ROWS = 4


#: The stamps of queues' sums, unique across ledgers (see :meth:`Ledger.stamps`).
_STAMPS = count(1)


def _integral(name: str) -> bool:
    return name in (CPU, MEMORY) or name.endswith("storage") or name.startswith("hugepages-")


class Ledger:
    """Per-queue :class:`QueueSums` over a set of jobs.

    Contract: call :meth:`update` after every change of a job (its tasks' statuses,
    its phase, its spec) and :meth:`remove` when it goes; :meth:`matrices` then equals
    that of :meth:`of` over the same jobs.

    A job's part and a queue's sums are kept as plain floats, not numpy rows: a part is
    a few numbers, and numpy's cost per call is many times its arithmetic on them. The
    floats are the same: every operation is the IEEE double one numpy does element by
    element (a product, a rounding half to even, a difference, a sum), in the same
    order."""

    def __init__(self, space: ResourceSpace) -> None:
        self.space = space
        self._scale = np.array([1.0 if _integral(n) else 1000.0 for n in space.names])
        self._scaled = not bool(np.all(self._scale == 1.0))
        #: The scale once per row of a queue's sums (dividing by it takes no broadcast).
        self._scale_rows = np.tile(self._scale, (_ROWS, 1))
        #: The scale as floats, once per row of a part (flat, as a part's units are).
        self._scale_flat: list[float] = self._scale_rows.ravel().tolist()
        self._parts: dict[str, _Part] = {}
        #: Queue -> job count, for the queues that have jobs.
        self._counts: dict[str, int] = {}
        #: Queue -> its sums: (allocated, pending, inqueue, elastic) one row after the
        #: other, a flat list of plain floats in integer units, for the queues with jobs.
        self._sums: dict[str, list[float]] = {}
        self._read_only = False
        #: Bumped by every change of the sums; keys the last matrices handed out.
        self._changes = 0
        self._last: tuple[tuple, QueueSums] | None = None
        #: Bumped whenever a queue gains its first job or loses its last: keys the last
        #: ``queues_with_jobs``.
        self._members = 0
        #: The last ``queues_with_jobs``: the membership count, the queues asked and the
        #: answer.
        self._last_names: tuple[int, set[str], list[str]] | None = None
        #: Bumped whenever a part that asks something of the inqueue row comes or goes
        #: (a row that moves, in integer units): keys the last ``inqueue_total``.
        self._inqueue_moves = 0
        #: The last ``inqueue_total``: the inqueue moves, its queues, and the total.
        self._last_inqueue: tuple[int, list[str], Vector] | None = None
        #: Queue -> the stamp of its sums (see :meth:`stamps`), for the queues with jobs.
        self._stamps: dict[str, int] = {}
        #: Queue -> (stamp, its sums in canonical units): see :meth:`sums_of`.
        self._rows: dict[str, tuple[int, np.ndarray]] = {}
        #: Queue -> (stamp, the inqueue row of its sums in integer units, that row in
        #: canonical units): see inqueue_total.
        self._inqueue_rows: dict[str, tuple[int, list[float], list[float]]] = {}
        #: The rows inqueue_total last summed (in order) and the sum after each.
        self._partials: tuple[list[list[float]], list[list[float]]] = ([], [])
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
            ledger._counts[queue] = len(members)
            ledger._stamps[queue] = next(_STAMPS)
            # (whole units: the sums are exact in any order of addition)
            ledger._sums[queue] = (
                np.array([ledger._units(m).sum(axis=0) for m in mats]).ravel().tolist()
            )
        ledger._read_only = True
        return ledger

    def _units(self, v: np.ndarray) -> np.ndarray:
        """``v`` in integer units (a new array)."""
        return np.rint(v * self._scale) if self._scaled else v.copy()

    def _part_units(
        self,
        allocated: list[float],
        pending: list[float],
        demand: list[float] | None,
        minres: list[float] | None,
    ) -> list[float]:
        """A part's rows, flat, in integer units: allocated, pending, inqueue demand
        (zeros when None) and elastic (allocated beyond ``minres``, at least 0), each
        scaled and rounded half to even as ``np.rint`` does."""
        if minres is None:
            elastic = [a if a >= 0.0 else 0.0 for a in allocated]
        else:
            elastic = [
                e if (e := a - m) >= 0.0 else 0.0 for a, m in zip(allocated, minres, strict=True)
            ]
        flat = [
            *allocated,
            *pending,
            *([0.0] * len(allocated) if demand is None else demand),
            *elastic,
        ]
        if not self._scaled:
            return flat
        return [float(round(x * s)) for x, s in zip(flat, self._scale_flat, strict=True)]

    def _inqueue_row(self, units: list[float]) -> list[float]:
        """The inqueue row (the third) of a part's or a queue's flat units."""
        size = self.space.size
        return units[2 * size : 3 * size]

    def update(self, job: JobInfo) -> None:
        """Take ``job``'s part as it is now (replacing the part it had). Nothing to do
        when neither the task index nor the phase moved since (a status rewrite); the
        sums and the queue's stamp stay as they are when the part comes out the same
        (a pod that starts running: taking it away and adding it back, in integer
        units, gives the same sums), and the part is not computed again when what it
        is computed from is the same (the job's vectors, compared as bytes)."""
        if self._read_only:
            raise RuntimeError("a ledger summed at once (Ledger.of) cannot be updated")
        key = (id(job), job.version, job.phase, job.queue, job.min_available)
        old = self._parts.get(job.uid)
        if old is not None and old.key == key and old.job is job:
            return
        minres = job.min_resources
        allocated = job.allocated
        pending = job.pending_request
        demand = job.inqueue_demand()
        queue = job.queue
        inputs = (
            queue,
            allocated.tobytes(),
            pending.tobytes(),
            None if demand is None else demand.tobytes(),
            None if minres is None else minres.tobytes(),
        )
        affinity = any(t.pod_affinity is not None for t in job.tasks.values())
        if old is not None and old.inputs == inputs:
            # The same part (a pod that starts running, a job rebuilt as it was): only
            # what it was computed from is kept anew.
            old.job, old.key = job, key
            self.affinity_jobs += affinity - old.affinity
            old.affinity = affinity
            return
        units = self._part_units(
            allocated.tolist(),
            pending.tolist(),
            None if demand is None else demand.tolist(),
            None if minres is None else minres.tolist(),
        )
        part = _Part(job, key, inputs, queue, units, affinity)
        if old is not None:
            if old.queue == queue and old.units == units:
                self._parts[job.uid] = part
                self.affinity_jobs += part.affinity - old.affinity
                return
            if old.queue != queue or self._inqueue_row(old.units) != self._inqueue_row(units):
                self._inqueue_moves += 1
            if old.queue == queue:  # (the queue keeps its job count and its sums)
                self._parts[job.uid] = part
                self._changes += 1
                if self._counts[queue] == 1:  # (its own part alone: summed afresh)
                    self._sums[queue] = [0.0 + u for u in units]
                else:
                    sums = self._sums[queue]
                    self._sums[queue] = [
                        (s - o) + u for s, o, u in zip(sums, old.units, units, strict=True)
                    ]
                self._stamps[queue] = next(_STAMPS)
                self.affinity_jobs += part.affinity - old.affinity
                return
            self._take_out(job.uid)
        elif any(self._inqueue_row(units)):
            self._inqueue_moves += 1
        self._parts[job.uid] = part
        self._changes += 1
        was = self._sums.get(queue)
        if was is None:
            self._members += 1
            self._counts[queue] = 1
            self._sums[queue] = [0.0 + u for u in units]
        else:
            self._counts[queue] += 1
            self._sums[queue] = [s + u for s, u in zip(was, units, strict=True)]
        self._stamps[queue] = next(_STAMPS)
        self.affinity_jobs += part.affinity

    def remove(self, uid: str) -> None:
        """Take job ``uid``'s part away (the job is gone)."""
        part = self._take_out(uid)
        if part is not None and any(self._inqueue_row(part.units)):
            self._inqueue_moves += 1

    def _take_out(self, uid: str) -> _Part | None:
        """Take job ``uid``'s part away from the sums; the part (None: it had none)."""
        part = self._parts.pop(uid, None)
        if part is None:
            return None
        self._changes += 1
        queue = part.queue
        count = self._counts[queue] - 1
        if count == 0:
            self._members += 1
            del self._counts[queue]
            del self._stamps[queue]
            self._rows.pop(queue, None)
            self._inqueue_rows.pop(queue, None)
            del self._sums[queue]
        else:
            self._counts[queue] = count
            sums = self._sums[queue]
            self._sums[queue] = [s - u for s, u in zip(sums, part.units, strict=True)]
            self._stamps[queue] = next(_STAMPS)
        self.affinity_jobs -= part.affinity
        return part

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
        Kept until a part with something in its inqueue row comes or goes (a job
        admitted, bound or gone) or other queues are summed: most cycles move only
        allocations, and cost a comparison here. When it moves, the sum up to the first
        queue whose row is another is taken as it was."""
        names = self.queues_with_jobs(queues)
        kept = self._last_inqueue
        if kept is not None and kept[0] == self._inqueue_moves and kept[1] == names:
            return kept[2].copy()
        rows = self._inqueue_lists(names)
        # The sum so far after each queue: the part before the first queue whose row
        # is another than last time is taken as it was (the same additions).
        last_rows, partials = self._partials
        start = 0
        for row, was in zip(rows, last_rows, strict=False):  # (lengths may differ)
            if row is not was:
                break
            start += 1
        del partials[start:]
        total = partials[-1] if partials else [0.0] * self.space.size
        for row in rows[start:]:  # (plain floats, queue after queue: the same additions)
            total = [a + b for a, b in zip(total, row, strict=True)]
            partials.append(total)
        self._partials = (rows, partials)
        summed = np.array(total, dtype=np.float64)
        self._last_inqueue = (self._inqueue_moves, names, summed)
        return summed.copy()

    def _inqueue_lists(self, names: list[str]) -> list[list[float]]:
        """The inqueue rows of the queues ``names`` (queues with jobs) in canonical
        units, as lists: the same list while the row's units are the same floats (a
        queue whose allocation alone moved keeps it)."""
        kept_rows = self._inqueue_rows
        stamps = self._stamps
        size = self.space.size
        scale = self._scale_flat[:size]
        out = []
        for name in names:
            stamp = stamps[name]
            got = kept_rows.get(name)
            if got is None or got[0] != stamp:
                units = self._inqueue_row(self._sums[name])
                if got is None or got[1] != units:
                    # (the inqueue row of sums_of: the same division, of that row alone)
                    row = (
                        [u / s for u, s in zip(units, scale, strict=True)]
                        if self._scaled
                        else units
                    )
                    got = kept_rows[name] = (stamp, units, row)
                else:
                    got = kept_rows[name] = (stamp, units, got[2])
            out.append(got[2])
        return out

    def queues_with_jobs(self, queues: Iterable[str]) -> list[str]:
        """The queues of ``queues`` that have jobs, in name order (a new list). Kept
        until a queue gains its first job or loses its last, or other queues are asked
        (a session asks with its queue table, every cycle)."""
        asked = queues.keys() if isinstance(queues, dict) else set(queues)
        kept = self._last_names
        if kept is not None and kept[0] == self._members and kept[1] == asked:
            return list(kept[2])
        names = sorted(asked & self._counts.keys())
        self._last_names = (self._members, set(asked), names)
        return list(names)

    def stamps(self, names: list[str]) -> list[int]:
        """The stamps of the sums of the queues ``names`` (queues with jobs), in that
        order. A queue's stamp changes whenever its sums change, and no other queue's
        sums, in this ledger or another, ever carry it: what is derived from a queue's
        sums stands while its stamp does."""
        stamps = self._stamps
        return [stamps[n] for n in names]

    def sums_of(self, queue: str) -> np.ndarray:
        """``queue``'s sums (a queue with jobs) in canonical units: allocated, pending,
        inqueue and elastic, one row each, the same floats as its rows of
        :meth:`matrices`. Read-only, kept until the queue's stamp changes."""
        stamp = self._stamps[queue]
        got = self._rows.get(queue)
        if got is None or got[0] != stamp:
            rows = np.array(self._sums[queue]).reshape(_ROWS, self.space.size)
            if self._scaled:
                rows /= self._scale_rows
            rows.setflags(write=False)
            got = self._rows[queue] = (stamp, rows)
        return got[1]

    def _kept(self, queues: Iterable[str]) -> tuple[list[str], QueueSums]:
        """:meth:`_matrices` of the queues of ``queues`` that have jobs, kept (and
        shared: callers copy) until the ledger changes or other queues are asked."""
        names = self.queues_with_jobs(queues)
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
        sums = self._sums
        got = np.array([sums[n] for n in names]).reshape(len(names), _ROWS, self.space.size)
        got = got.transpose(1, 0, 2).copy()  # (rows by kind, then queue: contiguous)
        if self._scaled:
            got /= self._scale
        counts = np.array([self._counts[n] for n in names])
        return QueueSums(counts, got[0], got[1], got[2], got[3])


__all__ = ["Ledger", "QueueSums"]
