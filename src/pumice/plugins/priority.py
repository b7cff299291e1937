"""priority: higher-priority jobs and tasks first; preempt only lower priority."""

from __future__ import annotations

from pumice.api.job import JobInfo
from pumice.api.task import TaskInfo
from pumice.conf.arguments import Arguments
from pumice.framework.session import Session
from pumice.framework.verdicts import timeless
from pumice.framework.victims import on_kind


class PriorityPlugin:
    name = "priority"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments

    def on_session_open(self, ssn: Session) -> None:
        def task_order(a: TaskInfo, b: TaskInfo) -> int:
            return (a.priority < b.priority) - (a.priority > b.priority)

        def job_order(a: JobInfo, b: JobInfo) -> int:
            return (a.priority < b.priority) - (a.priority > b.priority)

        def preemptable(preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
            """Other jobs: only those of lower job priority; the same job: lower task
            priority."""
            pjob = ssn.jobs.get(preemptor.job or "")
            out = []
            for t in candidates:
                tjob = ssn.jobs.get(t.job or "")
                if pjob is None or tjob is None:
                    continue
                if tjob is not pjob:
                    if tjob.priority >= pjob.priority:
                        continue
                elif t.priority >= preemptor.priority:
                    continue
                out.append(t)
            return out

        # Sort keys equivalent to the order functions (see pumice.framework.orders).
        ssn.on("task_order", self.name, task_order, key=lambda t: -t.priority)
        ssn.on("job_order", self.name, job_order, key=lambda j: -j.priority)
        ssn.on(
            "subjob_order",
            self.name,
            lambda a, b: (a.priority < b.priority) - (a.priority > b.priority),
        )
        ssn.on("preemptable", self.name, preemptable)
        # gangpreempt asks the same rule of a whole gang (its first pending task).
        ssn.on("gang_evictable", self.name, on_kind("gangpreempt", preemptable))
        ssn.on("job_starving", self.name, JobInfo.is_starving)

    def on_cycle_open(self, ssn: Session) -> None:
        """Nothing to refresh: the functions read the session when they are called, so
        they stay registered from cycle to cycle."""
