"""backfill: place best-effort tasks (no cpu, memory or extended-resource request),
which allocate skips, on any node the predicates allow and that has a pod slot."""

from __future__ import annotations

import functools

from pumice.actions.allocate import place
from pumice.api.job import JobInfo
from pumice.api.task import TaskStatus
from pumice.conf.arguments import Arguments
from pumice.framework.orders import job_key
from pumice.framework.session import Session
from pumice.framework.statement import Statement


class BackfillAction:
    name = "backfill"

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments

    def execute(self, ssn: Session) -> None:
        def cmp_jobs(a: JobInfo, b: JobInfo) -> int:
            return -1 if ssn.job_less(a, b) else (1 if ssn.job_less(b, a) else 0)

        def cmp_tasks(a, b) -> int:
            return -1 if ssn.task_less(a, b) else (1 if ssn.task_less(b, a) else 0)

        # Nothing changes while sorting: sort keys order jobs as job_less does.
        jkey = job_key(ssn)
        jobs = sorted(
            (j for j in ssn.jobs.values() if not j.is_pending()),
            key=jkey if jkey is not None else functools.cmp_to_key(cmp_jobs),
        )
        for job in jobs:
            best_effort = [t for t in job.with_status(TaskStatus.PENDING) if t.best_effort]
            if not best_effort:
                continue
            best_effort.sort(key=functools.cmp_to_key(cmp_tasks))
            stmt = Statement(ssn)
            for task in best_effort:
                if not place(ssn, stmt, job, task):
                    break
            if ssn.job_ready(job):
                stmt.commit()
            elif not ssn.job_pipelined(job):
                stmt.discard()
