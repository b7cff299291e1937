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
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments

    def execute(self, ssn: Session) -> None:
        def cmp_jobs(a: JobInfo, b: JobInfo) -> int:
            return -1 if ssn.job_less(a, b) else (1 if ssn.job_less(b, a) else 0)

        def cmp_tasks(a, b) -> int:
            return -1 if ssn.task_less(a, b) else (1 if ssn.task_less(b, a) else 0)

        # Only jobs with pending best-effort tasks have work; a job's list cannot change
        # while other jobs are served (a statement moves only its own job's tasks).
        work: dict[str, list] = {}
        for j in ssn.active.values():  # a settled job has no pending task
            if not j.is_pending() and j.uid not in ssn.invalid:
                best_effort = [t for t in j.with_status(TaskStatus.PENDING) if t.best_effort]
                if best_effort:
                    work[j.uid] = best_effort
        if not work:
            return
        # Nothing changes while sorting: sort keys order jobs as job_less does (and order
        # the jobs with work alike whether or not the others are sorted with them).
        jkey = job_key(ssn)
        if jkey is not None:
            jobs = sorted((ssn.jobs[uid] for uid in work), key=jkey)
        else:
            everyone = (j for j in ssn.jobs.values() if not j.is_pending())
            ranked = sorted(everyone, key=functools.cmp_to_key(cmp_jobs))
            jobs = [j for j in ranked if j.uid in work]
        for job in jobs:
            best_effort = work[job.uid]
            best_effort.sort(key=functools.cmp_to_key(cmp_tasks))
            stmt = Statement(ssn)
            for task in best_effort:
                if not place(ssn, stmt, job, task):
                    break
            if ssn.job_ready(job):
                stmt.commit()
            elif not ssn.job_pipelined(job):
                stmt.discard()
