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
from pumice.api.task import ALLOCATED_STATUSES, TaskInfo
from pumice.conf.arguments import Arguments
from pumice.framework.session import EventHandler, Session
from pumice.plugins.capacity import hierarchy_enabled
from pumice.plugins.drf_hierarchy import HierarchicalDrf, queue_paths

SHARE_DELTA = 1e-6


class DrfPlugin:
    name = "drf"

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        self.allocated: dict[str, np.ndarray] = {}
        self.share: dict[str, float] = {}
        self.total_allocated: np.ndarray | None = None

    def on_session_open(self, ssn: Session) -> None:
        total = ssn.total
        mask = ssn.space.share
        for job in ssn.jobs.values():
            alloc = ssn.space.zeros()
            held = job.with_status(*ALLOCATED_STATUSES)
            for t in held:
                alloc += t.resreq
            self.allocated[job.uid] = alloc
            # Nothing held: every share divides 0.0, so the share is 0.0.
            self.share[job.uid] = share_of(alloc, total, mask) if held else 0.0

        hdrf = self._open_hierarchy(ssn) if hierarchy_enabled(ssn, self.name) else None

        def job_order(a: JobInfo, b: JobInfo) -> int:
            sa, sb = self.share.get(a.uid, 0.0), self.share.get(b.uid, 0.0)
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

        def on_allocate(task: TaskInfo) -> None:
            alloc = self.allocated.get(task.job or "")
            if alloc is not None:
                alloc += task.resreq
                self.share[task.job] = share_fast(alloc)
                if hdrf is not None:
                    self.total_allocated += task.resreq
                    hdrf.update(self.allocated.__getitem__, self.total_allocated)

        def on_deallocate(task: TaskInfo) -> None:
            alloc = self.allocated.get(task.job or "")
            if alloc is not None:
                alloc -= task.resreq
                self.share[task.job] = share_fast(alloc)
                if hdrf is not None:
                    self.total_allocated -= task.resreq
                    hdrf.update(self.allocated.__getitem__, self.total_allocated)

        def preemptable(preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
            """A victim's job must keep a share, after losing the victim (and the victims
            before it), no smaller than the preemptor's job after gaining the task."""
            palloc = self.allocated.get(preemptor.job or "")
            if palloc is None:
                return []
            pshare = share_of(palloc + preemptor.resreq, total, mask)
            remaining: dict[str, np.ndarray] = {}
            out = []
            for t in candidates:
                talloc = self.allocated.get(t.job or "")
                if talloc is None:
                    continue
                left = remaining.setdefault(t.job, talloc.copy())
                left -= t.resreq
                tshare = share_of(left, total, mask)
                if pshare < tshare or abs(pshare - tshare) <= SHARE_DELTA:
                    out.append(t)
            return out

        job_order.key = lambda j: self.share.get(j.uid, 0.0)  # type: ignore[attr-defined]
        ssn.on("job_order", self.name, job_order)
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
