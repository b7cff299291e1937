"""backfill: place best-effort tasks (no cpu, memory or extended-resource request),
which allocate skips, on any node the predicates allow and that has a pod slot.

Jobs in job order, each job's pending best-effort tasks in task order; a task that finds
no node does not stop the job's others (as in Volcano). A job's turn is committed when
the job is ready, and, where a ``job_ready`` function can say (gang's ``whole``), ready
without counting any task still pending: nothing places best-effort tasks after
backfill, so a task left pending now stays pending this cycle. The job's statement that
allocate held for this moment (a gang ready only by counting these tasks, see
:mod:`pumice.actions.allocate`) is committed with the turn, or given back with it: a
gang is bound whole or not at all. Under Volcano's arithmetic (``gang.bestEffortReady:
optimistic``) nothing is held and the turn is committed whenever the job is ready,
pending tasks counted.
"""

from __future__ import annotations

import functools

from pumice.actions.allocate import conclude_held, release, whole
from pumice.actions.place import place
from pumice.api.job import JobInfo
from pumice.api.task import TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.framework.orders import job_key
from pumice.framework.session import Session
from pumice.framework.statement import Statement
from pumice.framework.verdicts import timeless


class BackfillAction:
    name = "backfill"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments

    def execute(self, ssn: Session) -> None:
        def cmp_jobs(a: JobInfo, b: JobInfo) -> int:
            return -1 if ssn.job_less(a, b) else (1 if ssn.job_less(b, a) else 0)

        def cmp_tasks(a: TaskInfo, b: TaskInfo) -> int:
            return -1 if ssn.task_less(a, b) else (1 if ssn.task_less(b, a) else 0)

        # Only jobs with pending best-effort tasks have work; a job's list cannot change
        # while other jobs are served (a statement moves only its own job's tasks). The
        # job counts them as they come and go: a backlog of gangs without any costs no
        # list of its tasks.
        work: dict[str, list] = {}
        for j in ssn.active.values():  # a settled job has no pending task
            if j.pending_best_effort_num() and not j.is_pending() and j.uid not in ssn.invalid:
                best_effort = [t for t in j.with_status(TaskStatus.PENDING) if t.best_effort]
                if best_effort:
                    work[j.uid] = best_effort
        if not work:
            conclude_held(ssn)
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
                place(ssn, stmt, job, task)  # (a task without a node stops no other)
            if ssn.job_ready(job) and whole(ssn, job):
                release(ssn, job, commit=True)
                stmt.commit()
            elif not ssn.job_pipelined(job):
                kept = ssn.held.get(job.uid)
                if kept is not None:
                    job.keep_tentative([op.task for op in (*kept.operations, *stmt.operations)])
                stmt.discard()
                release(ssn, job, commit=False)
        conclude_held(ssn)  # jobs held without a best-effort task left to place
