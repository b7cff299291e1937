"""drf: Dominant Resource Fairness between jobs.

A job's share is its largest fraction of any cluster resource it holds; jobs with the
smaller dominant share go first, and (for preemption) a task may only take from jobs
whose share would stay above the preemptor's. Shares follow every allocation in the
session through event handlers, so the order is always current.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from pumice.api.job import JobInfo
from pumice.api.queue import QueueInfo
from pumice.api.resources import dominant_share, share_dims, share_of
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

    def __init__(
        self, allocated: _Allocations, dims: list[tuple[int, float]], stamp: tuple
    ) -> None:
        super().__init__()
        self.allocated, self.dims = allocated, dims
        #: The cluster's total and shared dimensions, as bytes (see _Cluster).
        self.stamp = stamp

    def __missing__(self, uid: str) -> float:
        allocated = self.allocated
        if uid not in allocated:
            job = allocated.jobs.get(uid)
            if job is None or not job.tasks:  # (no pods yet, as a Job waiting to be admitted)
                return 0.0
            stamp = (job.version, self.stamp)
            share = job.verdicts.recall(_SHARE, stamp)
            if share is None:
                share = job.verdicts.keep(_SHARE, stamp, dominant_share(job.allocated, self.dims))
            self[uid] = share
            return share
        share = self[uid] = dominant_share(allocated[uid], self.dims)
        return share


#: ``JobInfo.verdicts`` key: the dominant share of what the job holds (see _Shares).
_SHARE = "drf.share"


class _Cluster:
    """What a share is taken against, which changes only with a node event: the
    cluster's total and shared dimensions (the mask compared by identity, the total by
    its bytes), the dimensions a share is taken over, and the stamp of the shares kept
    in jobs' verdicts."""

    __slots__ = ("dims", "mask", "stamp", "total_bytes")

    def __init__(self, total: np.ndarray, mask: np.ndarray) -> None:
        self.mask, self.total_bytes = mask, total.tobytes()
        self.dims = share_dims(total, mask)
        self.stamp = (self.total_bytes, mask.tobytes())


class DrfPlugin:
    name = "drf"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        self.allocated: _Allocations = _Allocations({})
        self.share: _Shares = _Shares(self.allocated, [], (b"", b""))
        self.total_allocated: np.ndarray = np.zeros(0)
        #: The cycle's cluster total and shared dimensions, and the dimensions a share
        #: is taken over as (dim, total) floats.
        self._total = np.zeros(0)
        self._mask = np.zeros(0, dtype=bool)
        self._dims: list[tuple[int, float]] = []
        #: With ``enableHierarchy``: the cycle's queue tree and each queue's path in it.
        self._hdrf: HierarchicalDrf | None = None
        self._paths: dict[str, tuple] = {}
        #: The last cycle's cluster figures (kept while its total and mask stand), and
        #: the configuration whose ``enableHierarchy`` was looked up, with the answer.
        self._cluster: _Cluster | None = None
        self._hierarchy: tuple[object, bool] | None = None

    def job_share(self, uid: str) -> float:
        """The dominant share of what job ``uid`` holds now, as this cycle's session has
        moved it (0.0 for a job without tasks or unknown to the session): what the
        ``volcano_job_share`` metric reports, read when the session closes."""
        return float(self.share[uid])

    def on_session_open(self, ssn: Session) -> None:
        def job_order(a: JobInfo, b: JobInfo) -> int:
            share = self.share
            sa, sb = share[a.uid], share[b.uid]
            return (sa > sb) - (sa < sb)

        def moved(task: TaskInfo, sign: float) -> None:
            allocated, share = self.allocated, self.share
            uid = task.job
            alloc = allocated.get(uid) if uid is not None else None
            if alloc is not None:
                if sign > 0:
                    alloc += task.resreq
                else:
                    alloc -= task.resreq
            elif uid is not None and uid in ssn.jobs:
                alloc = allocated[uid]
            else:
                return
            share[uid] = dominant_share(alloc, self._dims)
            hdrf = self._hdrf
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
            total, mask = self._total, self._mask
            palloc = self.allocated.lookup(preemptor.job)
            if palloc is None:
                return []
            pshare = share_of(palloc + preemptor.resreq, total, mask)
            remaining: dict[str, np.ndarray] = {}
            out = []
            for t in candidates:
                job = t.job
                talloc = self.allocated.lookup(job)
                if job is None or talloc is None:
                    continue
                left = remaining.setdefault(job, talloc.copy())
                left -= t.resreq
                tshare = share_of(left, total, mask)
                if pshare < tshare or abs(pshare - tshare) <= SHARE_DELTA:
                    out.append(t)
            return out

        ssn.on("job_order", self.name, job_order, key=lambda j: self.share[j.uid])
        ssn.on("preemptable", self.name, preemptable)
        ssn.add_event_handler(EventHandler(on_allocate, on_deallocate))
        if hierarchy_enabled(ssn, self.name):
            self._register_hierarchy(ssn)

    def on_cycle_open(self, ssn: Session) -> None:
        """The cycle's allocations and shares (taken from the jobs when first asked),
        and with ``enableHierarchy`` its queue tree."""
        total = self._total = ssn.total
        mask = self._mask = ssn.space.share
        cluster = self._cluster
        if cluster is None or cluster.mask is not mask or cluster.total_bytes != total.tobytes():
            cluster = self._cluster = _Cluster(total, mask)
        self._dims = cluster.dims
        # The last cycle's tables, emptied for this one (nothing outside the plugin
        # holds them from one cycle to the next).
        allocated, share = self.allocated, self.share
        allocated.clear()
        allocated.jobs = ssn.jobs
        share.clear()
        share.dims, share.stamp = cluster.dims, cluster.stamp
        # The jobs whose tasks may be allocated or pipelined hold what they held as the
        # cycle opened, moved by the session's events from there.
        for uid, job in ssn.active.items():
            if job.tasks:
                allocated[uid] = job.allocated.copy()
        hierarchy = self._hierarchy
        if hierarchy is None or hierarchy[0] is not ssn.config:
            hierarchy = self._hierarchy = (ssn.config, hierarchy_enabled(ssn, self.name))
        if hierarchy[1]:
            self._open_hierarchy(ssn)

    def _open_hierarchy(self, ssn: Session) -> None:
        """Hierarchical DRF (``enableHierarchy``): the cycle's queue tree, with every
        job's request and allocation placed in it."""
        total, mask = ssn.total, ssn.space.share
        hdrf = self._hdrf = HierarchicalDrf(total, mask, lambda v: share_of(v, total, mask))
        paths = self._paths = queue_paths(ssn.queues)
        self.total_allocated = ssn.space.zeros()
        for uid in sorted(ssn.jobs):
            job = ssn.jobs[uid]
            request = ssn.space.zeros()
            for t in job.tasks.values():
                request += t.resreq
            hdrf.place(uid, request, *paths[job.queue])
            self.total_allocated += self.allocated[uid]
        hdrf.update(self.allocated.__getitem__, self.total_allocated)

    def _register_hierarchy(self, ssn: Session) -> None:
        """Order queues by the tree and let a task reclaim from queues that would still
        come after its own."""

        # Both ask the cycle's tree, which on_cycle_open builds before they can run.
        def queue_order(a: QueueInfo, b: QueueInfo) -> int:
            paths = self._paths
            r = cast(HierarchicalDrf, self._hdrf).compare(paths[a.name][0], paths[b.name][0])
            return (r > 0) - (r < 0)

        def reclaimable(reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
            hdrf, paths = cast(HierarchicalDrf, self._hdrf), self._paths
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
