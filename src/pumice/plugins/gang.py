"""gang: a job runs with at least ``minMember`` tasks (and per-role minimums) or not at all.

Registers: job_valid (enough tasks exist at all), job_ready (enough are placed),
job_pipelined (enough are placed or waiting on releasing resources), job_order (jobs
not yet ready before ready ones, so that gangs complete before extras are added),
preemptable/reclaimable (never take a job below its minimum), job_starving. On close it
sets each PodGroup's Scheduled / Unschedulable condition.
"""

from __future__ import annotations

from pumice.api.job import JobInfo
from pumice.api.task import ALLOCATED_STATUSES, TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.framework.decisions import PodGroupUpdate
from pumice.framework.session import Session

UNSCHEDULABLE = "Unschedulable"
SCHEDULED = "Scheduled"
NOT_ENOUGH_RESOURCES = "NotEnoughResources"
NOT_ENOUGH_PODS = "NotEnoughTasks"
NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"


def _valid(job: JobInfo) -> str | None:
    """Why ``job`` is not a valid gang, or None; kept with the job's version (a backlog
    job whose pods are not created yet asks every cycle)."""
    if job.is_valid():
        return None
    version, minimum, reason = job._invalid_memo
    if version == job._version and minimum == job.min_available:
        return reason
    reason = _invalid_reason(job)
    job._invalid_memo = (job._version, job.min_available, reason)
    return reason


def _invalid_reason(job: JobInfo) -> str:
    """Why a job that is not a valid gang is not (too few tasks, or of some role)."""
    if job.valid_num() >= job.min_available:
        short = job.roles_short(
            frozenset({TaskStatus.PENDING, TaskStatus.PIPELINED})
            | ALLOCATED_STATUSES
            | {TaskStatus.SUCCEEDED}
        )
        detail = ", ".join(f"{r}: {have}/{need}" for r, (have, need) in short.items())
        return f"not enough pods of each task role for gang scheduling ({detail})"
    return (
        f"not enough valid tasks for gang scheduling: {job.valid_num()} exist, "
        f"minMember is {job.min_available}"
    )


def _ready(job: JobInfo) -> bool:
    return job.is_ready()


def _pipelined(job: JobInfo) -> int:
    return 1 if job.is_pipelined() else -1


# How many more tasks must be placed before the answer can turn yes: allocate skips a
# turn that cannot place that many (see pumice.actions.room). Best-effort pending tasks
# count as ready, as in is_ready; pipelined ones only towards pipelined.
_ready.short = lambda j: j.min_available - j.ready_num() - j.pending_best_effort_num()  # type: ignore[attr-defined]
_pipelined.short = lambda j: j.min_available - j.ready_num() - j.waiting_num()  # type: ignore[attr-defined]


class GangPlugin:
    name = "gang"
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments

    def on_session_open(self, ssn: Session) -> None:
        def job_order(a: JobInfo, b: JobInfo) -> int:
            ra, rb = a.is_ready(), b.is_ready()
            return int(ra) - int(rb)

        def evictable(_actor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
            occupied: dict[str, int] = {}
            out = []
            for t in candidates:
                job = ssn.jobs.get(t.job or "")
                if job is None:
                    continue
                n = occupied.setdefault(job.uid, job.ready_num())
                if n > job.min_available:
                    occupied[job.uid] = n - 1
                    out.append(t)
            return out

        job_order.key = lambda j: int(j.is_ready())  # type: ignore[attr-defined]
        ssn.on("job_valid", self.name, _valid)
        ssn.on("job_ready", self.name, _ready)
        ssn.on("job_pipelined", self.name, _pipelined)
        ssn.on("job_order", self.name, job_order)
        ssn.on("preemptable", self.name, evictable)
        ssn.on("reclaimable", self.name, evictable)
        ssn.on(
            "job_starving", self.name, lambda j: j.ready_num() + j.waiting_num() < j.min_available
        )

    def on_session_close(self, ssn: Session) -> None:
        for uid, (_job, reason) in ssn.invalid.items():
            set_condition(ssn, uid, UNSCHEDULABLE, NOT_ENOUGH_PODS, reason)
        for job in ssn.active.values():  # a settled job keeps the condition it has
            if job.uid in ssn.invalid:
                continue
            if job.is_ready():
                set_condition(ssn, job.uid, SCHEDULED, "tasks in gang are ready to be scheduled")
                continue
            # Volcano counts only tasks that hold resources; pipelined ones still wait.
            missing = max(job.min_available - job.ready_num(), 0)
            msg = f"{missing}/{len(job.tasks)} tasks in gang unschedulable"
            if job.waiting_num():
                msg += f" ({job.waiting_num()} pipelined onto resources being released)"
            set_condition(ssn, job.uid, UNSCHEDULABLE, NOT_ENOUGH_RESOURCES, msg)


def set_condition(ssn: Session, uid: str, ctype: str, reason: str, message: str = "") -> None:
    """Replace the condition of type ``ctype`` in the podgroup update of job ``uid``."""
    podgroups = ssn.decisions.podgroups
    upd = podgroups.get(uid)
    if upd is None:  # (setdefault would build an update for every call)
        upd = podgroups[uid] = PodGroupUpdate(phase="")
    if upd.conditions:
        upd.conditions = [c for c in upd.conditions if c.get("type") != ctype]
    upd.conditions.append(
        {
            "type": ctype,
            "status": "True",
            "reason": reason,
            "message": message,
            "transitionID": ssn.uid,
        }
    )
