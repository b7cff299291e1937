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
    #: allocated, pending, inqueue and elastic, one row each, in integer units.
    units: np.ndarray
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
    that of :meth:`of` over the same jobs."""

    def __init__(self, space: ResourceSpace) -> None:
        self.space = space
        self._scale = np.array([1.0 if _integral(n) else 1000.0 for n in space.names])
        self._scaled = not bool(np.all(self._scale == 1.0))
        #: The scale once per row of a queue's sums (dividing by it takes no broadcast).
        self._scale_rows = np.tile(self._scale, (_ROWS, 1))
        #: A zero vector, read only (a part's inqueue row when the job claims nothing).
        self._zero = space.zeros()
        self._zero.setflags(write=False)
        self._parts: dict[str, _Part] = {}
        #: Queue -> job count, for the queues that have jobs.
        self._counts: dict[str, int] = {}
        #: Queue -> its row block in ``_sums`` (a queue keeps it until its last job goes,
        #: when the block is zeroed and freed).
        self._slots: dict[str, int] = {}
        self._free: list[int] = []
        #: The sums: (allocated, pending, inqueue, elastic) x queue slot x dimensions,
        #: so that a job's part goes in or out in one operation and a session's
        #: matrices are taken in one.
        self._sums = np.zeros((_ROWS, 4, space.size))
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
        #: Queue -> (stamp, the bytes of the inqueue row of its sums in integer units,
        #: that row as floats): see inqueue_total.
        self._inqueue_rows: dict[str, tuple[int, bytes, list[float]]] = {}
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
            slot = ledger._slot(queue)
            ledger._counts[queue] = len(members)
            ledger._stamps[queue] = next(_STAMPS)
            for k, m in enumerate(mats):
                ledger._sums[k, slot] = ledger._units(m).sum(axis=0)
        ledger._read_only = True
        return ledger

    def _units(self, v: np.ndarray) -> np.ndarray:
        """``v`` in integer units (a new array)."""
        return np.rint(v * self._scale) if self._scaled else v.copy()

    def _slot(self, queue: str) -> int:
        """A zeroed block of ``_sums`` for ``queue``, which has none."""
        if self._free:
            slot = self._free.pop()
        else:
            slot = len(self._slots)
            if slot == self._sums.shape[1]:
                grown = np.zeros((_ROWS, 2 * slot, self.space.size))
                grown[:, :slot] = self._sums
                self._sums = grown
        self._slots[queue] = slot
        return slot

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
            self._parts[job.uid] = _Part(job, key, inputs, queue, old.units, affinity)
            self.affinity_jobs += affinity - old.affinity
            return
        rows = np.array((allocated, pending, self._zero if demand is None else demand, allocated))
        elastic = rows[3]  # (allocated beyond minResources, at least 0: in place)
        if minres is not None:
            elastic -= minres
        np.maximum(elastic, 0.0, out=elastic)
        if self._scaled:
            rows *= self._scale
            np.rint(rows, out=rows)
        part = _Part(job, key, inputs, queue, rows, affinity)
        if old is not None:
            if old.queue == queue and old.units.tobytes() == rows.tobytes():
                self._parts[job.uid] = part
                self.affinity_jobs += part.affinity - old.affinity
                return
            if old.queue != queue or old.units[2].tobytes() != rows[2].tobytes():
                self._inqueue_moves += 1
            if old.queue == queue:  # (the queue keeps its job count and its block)
                self._parts[job.uid] = part
                self._changes += 1
                block = self._sums[:, self._slots[queue]]
                if self._counts[queue] == 1:  # (its own part alone: summed afresh)
                    block[...] = 0.0
                else:
                    block -= old.units
                block += rows
                self._stamps[queue] = next(_STAMPS)
                self.affinity_jobs += part.affinity - old.affinity
                return
            self._take_out(job.uid)
        elif rows[2].any():
            self._inqueue_moves += 1
        self._parts[job.uid] = part
        self._changes += 1
        slot = self._slots.get(queue)
        if slot is None:
            slot = self._slot(queue)
        count = self._counts.get(queue, 0)
        if count == 0:
            self._members += 1
        self._counts[queue] = count + 1
        self._sums[:, slot] += rows
        self._stamps[queue] = next(_STAMPS)
        self.affinity_jobs += part.affinity

    def remove(self, uid: str) -> None:
        """Take job ``uid``'s part away (the job is gone)."""
        part = self._take_out(uid)
        if part is not None and part.units[2].any():
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
            slot = self._slots.pop(queue)
            self._sums[:, slot] = 0.0
            self._free.append(slot)
        else:
            self._counts[queue] = count
            self._sums[:, self._slots[queue]] -= part.units
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
        out = []
        for name in names:
            stamp = stamps[name]
            got = kept_rows.get(name)
            if got is None or got[0] != stamp:
                units = self._sums[2, self._slots[name]]
                key = units.tobytes()
                if got is None or got[1] != key:
                    # (the inqueue row of sums_of: the same division, of that row alone)
                    row = units / self._scale if self._scaled else units
                    got = kept_rows[name] = (stamp, key, row.tolist())
                else:
                    got = kept_rows[name] = (stamp, key, got[2])
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
            rows = self._sums[:, self._slots[queue]]
            rows = rows / self._scale_rows if self._scaled else rows.copy()
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
        got = self._sums[:, [self._slots[n] for n in names]]  # (a new array)
        if self._scaled:
            got = got / self._scale
        counts = np.array([self._counts[n] for n in names])
        return QueueSums(counts, got[0], got[1], got[2], got[3])


__all__ = ["Ledger", "QueueSums"]
