"""gangreclaim: a starving gang takes back room other queues borrowed, whole gangs at a
time (see :mod:`pumice.actions.gang_eviction`).

The gang's queue must not be overused and may reclaim for every task it needs
(``preemptive``). Candidates are the Running, ``volcano.sh/preemptable`` tasks of jobs
in other queues that are ``reclaimable``; their bundles go in victim-queue order (the
``victim_queue_order`` functions, else the queue the queue order puts last first).
Arguments: ``maxDomains`` (8), ``allowWholeBundle`` (true).
"""

from __future__ import annotations

from collections.abc import Callable

from pumice.actions.gang_eviction import Bundle, GangEvictionAction
from pumice.api.job import JobInfo
from pumice.api.queue import QueueInfo
from pumice.api.task import TaskInfo, TaskStatus
from pumice.framework.orders import queue_key
from pumice.framework.session import Session


class GangReclaimAction(GangEvictionAction):
    name = "gangreclaim"
    skip_overused = True

    def queue_may(self, ssn: Session, queue: QueueInfo, pending: list[TaskInfo]) -> str:
        # Asked once for the gang as a whole, its requests summed (Volcano's
        # ``Preemptive(queue, tasks)``): the queue must stay within its share with all of
        # them, not with each alone.
        gang = pending[0].clone()
        gang.resreq = sum((t.resreq for t in pending[1:]), pending[0].resreq.copy())
        gang.init_resreq = sum((t.init_resreq for t in pending[1:]), pending[0].init_resreq.copy())
        if not ssn.preemptive(queue, gang):
            return (
                f"queue {queue.name} may not reclaim now: the gang would take it beyond its share"
            )
        return ""

    def candidates(self, ssn: Session, job: JobInfo, task: TaskInfo) -> bool:
        if task.status != TaskStatus.RUNNING:
            return False
        victim = ssn.jobs[task.job or ""]
        queue = ssn.queues.get(victim.queue)
        return victim.queue != job.queue and queue is not None and queue.reclaimable

    def victim_first(self, ssn: Session, job: JobInfo) -> Callable[[Bundle, Bundle], bool]:
        mine = ssn.queues[job.queue]

        def first(a: Bundle, b: Bundle) -> bool:
            qa, qb = ssn.queues[a.job.queue], ssn.queues[b.job.queue]
            if qa is qb:
                return False
            for fn in ssn.hooks.flat("victim_queue_order"):
                r = fn(qa, qb, mine)
                if r:
                    return r < 0
            return not ssn.queue_less(qa, qb)

        return first

    def victim_key(self, ssn: Session, job: JobInfo) -> Callable[[Bundle], tuple] | None:
        if ssn.hooks.flat("victim_queue_order"):
            return None
        key = queue_key(ssn)
        if key is None:
            return None
        return lambda b: key(ssn.queues[b.job.queue])


__all__ = ["GangReclaimAction"]
