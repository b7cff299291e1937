"""drf: Dominant Resource Fairness between jobs.

A job's share is its largest fraction of any cluster resource it holds; jobs with the
smaller dominant share go first, and (for preemption) a task may only take from jobs
whose share would stay above the preemptor's. Shares follow every allocation in the
session through event handlers, so the order is always current.
"""

from __future__ import annotations

import math

import numpy as np

from pumice.api.job import JobInfo
from pumice.api.queue import QueueInfo
from pumice.api.resources import share_of
from pumice.api.task import TaskInfo
from pumice.conf.arguments import Arguments
from pumice.framework.session import EventHandler, Session
from pumice.framework.verdicts import timeless
from pumice.plugins.capacity import hierarchy_enabled
from pumice.plugins.drf_hierarchy import HierarchicalDrf, queue_paths

SHARE_DELTA = 1e-6


class _Allocations(dict):
    """uid -> the job's allocated resources (a copy the session's events update),
    taken from ``JobInfo.allocated`` when first asked."""

    def __init__(self, jobs: dict[str, JobInfo]) -> None:
        super().__init__()
        self.jobs = jobs

    def __missing__(self, uid: str) -> np.ndarray:
        alloc = self[uid] = self.jobs[uid].allocated.copy()
        return alloc

    def lookup(self, uid: str | None) -> np.ndarray | None:
        """The job's allocation, or None for a task without a job in the session.
        (Not for the event handlers: see ``moved`` in :meth:`DrfPlugin.on_session_open`.)"""
        if uid is None or (uid not in self and uid not in self.jobs):
            return None
        return self[uid]


class _Shares(dict):
    """uid -> dominant share, computed when first asked (0.0 for an unknown job).

    A job the session has not moved holds what ``JobInfo.allocated`` says, which
    changes only with its task index: its share is kept in the job's verdicts, stamped
    with its version and the cluster's total, so that the running jobs reclaim and
    preempt order as victims in every cycle cost one division each, not one per
    session."""

    def __init__(self, allocated: _Allocations, total: np.ndarray, mask: np.ndarray) -> None:
        super().__init__()
        self.allocated, self.total, self.mask = allocated, total, mask
        self.stamp = (total.tobytes(), mask.tobytes())

    def __missing__(self, uid: str) -> float:
        allocated = self.allocated
        if uid not in allocated:
            job = allocated.jobs.get(uid)
            if job is None:
                return 0.0
            stamp = (job.version, self.stamp)
            share = job.verdicts.recall(_SHARE, stamp)
            if share is None:
                held = job.allocated
                share = share_of(held, self.total, self.mask) if held.any() else 0.0
                job.verdicts.keep(_SHARE, stamp, share)
            self[uid] = share
            return share
        alloc = allocated[uid]
        share = self[uid] = share_of(alloc, self.total, self.mask) if alloc.any() else 0.0
        return share


#: ``JobInfo.verdicts`` key: the dominant share of what the job holds (see _Shares).
_SHARE = "drf.share"


class DrfPlugin:
    name = "drf"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        self.allocated: _Allocations = _Allocations({})
        self.share: _Shares = _Shares(self.allocated, np.zeros(0), np.zeros(0, dtype=bool))
        self.total_allocated: np.ndarray | None = None

    def on_session_open(self, ssn: Session) -> None:
        total = ssn.total
        mask = ssn.space.share
        # Each job's allocation and share, filled in when first asked (job order asks
        # only for the jobs it compares; most running jobs are never asked).
        self.allocated = _Allocations(ssn.jobs)
        self.share = _Shares(self.allocated, total, mask)
        hdrf = self._open_hierarchy(ssn) if hierarchy_enabled(ssn, self.name) else None

        share = self.share

        def job_order(a: JobInfo, b: JobInfo) -> int:
            sa, sb = share[a.uid], share[b.uid]
            return (sa > sb) - (sa < sb)

        # The event handlers run on every allocation: the dominant share over the
        # dimensions share_of looks at, as plain floats (the same divisions, the same
        # maximum, the first of equals kept).
        total_l = total.tolist()
        dims = [
            (k, t)
            for k, (t, m) in enumerate(zip(total_l, mask.tolist(), strict=True))
            if m and t > 0 and t != math.inf
        ]

        def share_fast(alloc: np.ndarray) -> float:
            a = alloc.tolist()
            best = None
            for k, t in dims:
                v = a[k] / t
                if best is None or v > best:
                    best = v
            return 0.0 if best is None else best

        allocated = self.allocated
        for uid, job in ssn.active.items():  # jobs whose tasks may be allocated or pipelined
            if job.tasks:
                allocated[uid]

        def moved(task: TaskInfo, sign: float) -> None:
            uid = task.job
            alloc = allocated.get(uid) if uid is not None else None
            if alloc is not None:
                if sign > 0:
                    alloc += task.resreq
                else:
                    alloc -= task.resreq
            elif uid is not None and uid in ssn.jobs:
                # First seen now: a running job losing (or regaining) a victim. Its
                # JobInfo.allocated already reflects the move (evictions go through the
                # job's task index, as allocations do; only pipelining, which never
                # reaches a job that was not active, does not).
                alloc = allocated[uid]
            else:
                return
            share[uid] = share_fast(alloc)
            if hdrf is not None:
                if sign > 0:
                    self.total_allocated += task.resreq
                else:
                    self.total_allocated -= task.resreq
                hdrf.update(allocated.__getitem__, self.total_allocated)

        def on_allocate(task: TaskInfo) -> None:
            moved(task, 1.0)

        def on_deallocate(task: TaskInfo) -> None:
            moved(task, -1.0)

        def preemptable(preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
            """A victim's job must keep a share, after losing the victim (and the victims
            before it), no smaller than the preemptor's job after gaining the task."""
            palloc = self.allocated.lookup(preemptor.job)
            if palloc is None:
                return []
            pshare = share_of(palloc + preemptor.resreq, total, mask)
            remaining: dict[str, np.ndarray] = {}
            out = []
            for t in candidates:
                talloc = self.allocated.lookup(t.job)
                if talloc is None:
                    continue
                left = remaining.setdefault(t.job, talloc.copy())
                left -= t.resreq
                tshare = share_of(left, total, mask)
                if pshare < tshare or abs(pshare - tshare) <= SHARE_DELTA:
                    out.append(t)
            return out

        ssn.on("job_order", self.name, job_order, key=lambda j: share[j.uid])
        ssn.on("preemptable", self.name, preemptable)
        ssn.add_event_handler(EventHandler(on_allocate, on_deallocate))

    def _open_hierarchy(self, ssn: Session) -> HierarchicalDrf:
        """Hierarchical DRF (``enableHierarchy``): build the queue tree, order queues by
        it and let a task reclaim from queues that would still come after its own."""
        total, mask = ssn.total, ssn.space.share
        hdrf = HierarchicalDrf(total, mask, lambda v: share_of(v, total, mask))
        paths = queue_paths(ssn.queues)
        self.total_allocated = ssn.space.zeros()
        for uid in sorted(ssn.jobs):
            job = ssn.jobs[uid]
            request = ssn.space.zeros()
            for t in job.tasks.values():
                request += t.resreq
            hdrf.place(uid, request, *paths[job.queue])
            self.total_allocated += self.allocated[uid]
        hdrf.update(self.allocated.__getitem__, self.total_allocated)

        def queue_order(a: QueueInfo, b: QueueInfo) -> int:
            r = hdrf.compare(paths[a.name][0], paths[b.name][0])
            return (r > 0) - (r < 0)

        def reclaimable(reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
            rjob = ssn.jobs.get(reclaimer.job or "")
            if rjob is None:
                return []
            override = {rjob.uid: self.allocated[rjob.uid] + reclaimer.resreq}
            base = self.total_allocated + reclaimer.resreq
            lpath = paths[rjob.queue][0]
            victims = []
            for t in candidates:
                vjob = ssn.jobs.get(t.job or "")
                if vjob is None:
                    continue
                trial = dict(override)
                trial[vjob.uid] = trial.get(vjob.uid, self.allocated[vjob.uid]) - t.resreq

                def alloc_of(uid: str, trial: dict = trial) -> np.ndarray:
                    return trial.get(uid, self.allocated[uid])

                hdrf.update(alloc_of, base - t.resreq)
                if hdrf.compare(lpath, paths[vjob.queue][0]) < 0:
                    victims.append(t)
            hdrf.update(self.allocated.__getitem__, self.total_allocated)
            return victims

        ssn.on("queue_order", self.name, queue_order)
        ssn.on("reclaimable", self.name, reclaimable)
        return hdrf
