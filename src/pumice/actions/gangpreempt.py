"""gangpreempt: a starving gang takes room from lower-priority gangs of its queue,
whole gangs at a time (see :mod:`pumice.actions.gang_eviction`).

Candidates are the Bound or Running, ``volcano.sh/preemptable`` tasks of other jobs of
the same queue whose job priority is below the gang's; their jobs' bundles go in
victim-job order (the job the job order puts last first). Arguments: ``maxDomains``
(8), ``allowWholeBundle`` (true).
"""

from __future__ import annotations

from collections.abc import Callable

from pumice.actions import eviction as ev
from pumice.actions.gang_eviction import Bundle, GangEvictionAction
from pumice.api.job import JobInfo
from pumice.api.task import TaskInfo
from pumice.framework.orders import job_key
from pumice.framework.session import Session


class GangPreemptAction(GangEvictionAction):
    name = "gangpreempt"

    def candidates(self, ssn: Session, job: JobInfo, task: TaskInfo) -> bool:
        if task.status not in ev.PREEMPTABLE_STATUSES:
            return False
        victim = ssn.jobs[task.job or ""]
        return victim.queue == job.queue and victim.priority < job.priority

    def victim_first(self, ssn: Session, job: JobInfo) -> Callable[[Bundle, Bundle], bool]:
        return lambda a, b: not ssn.job_less(a.job, b.job)

    def victim_key(self, ssn: Session, job: JobInfo) -> Callable[[Bundle], tuple] | None:
        key = job_key(ssn)
        return None if key is None else (lambda b: key(b.job))


__all__ = ["GangPreemptAction"]
