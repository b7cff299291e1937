"""Close-of-cycle conclusions: podgroup phases and the reason each waiting job waits."""

from __future__ import annotations

from pumice.api.job import COMPLETED, INQUEUE, PENDING, RUNNING, UNKNOWN, JobInfo
from pumice.api.quantity import plural
from pumice.api.queue import QueueInfo
from pumice.api.task import READY_STATUSES, TaskStatus
from pumice.framework.decisions import PodGroupUpdate
from pumice.framework.limits import GENERIC_LIMIT, QueueRefusal
from pumice.framework.never import Limits, never_fits
from pumice.framework.said import Text, join
from pumice.framework.session import Session

SCHEDULED_STATUSES = frozenset(
    {TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.FAILED, TaskStatus.SUCCEEDED}
)


def podgroup_phase(ssn: Session, job: JobInfo, unschedulable: bool) -> str:
    """Volcano's rule (v1.13+): Unknown if running tasks but unschedulable this cycle;
    Running once *scheduled* tasks (bound, running, or finished) reach minMember
    (Completed when all of them succeeded); otherwise Pending, unless the job was
    admitted (Inqueue). Tasks bound in this very cycle are only Binding, so a job
    stays Inqueue until its pods are seen bound."""
    running = len(job.by_status.get(TaskStatus.RUNNING, ()))
    if running and unschedulable:
        return UNKNOWN
    scheduled = job.count(SCHEDULED_STATUSES)
    if scheduled >= job.min_available:
        succeeded = len(job.by_status.get(TaskStatus.SUCCEEDED, ()))
        return COMPLETED if succeeded == scheduled else RUNNING
    if job.phase != INQUEUE:
        return PENDING
    return INQUEUE


def update_podgroups(ssn: Session) -> None:
    """Derive each job's podgroup phase, and list every task left pipelined (whether its
    statement was committed or kept because the job is pipelined but not yet ready)."""
    podgroups = ssn.decisions.podgroups
    # (A settled job's status is already what it would be; a parked job's stands: see
    # framework/parking.py. Neither is active.)
    for job in ssn.active.values():
        if job.uid in ssn.invalid:
            continue
        pipelined = job.by_status.get(TaskStatus.PIPELINED)
        if pipelined:
            for t in pipelined.values():
                ssn.decisions.pipelined[t.key] = t.node or ""
        upd = podgroups.get(job.uid)
        if upd is None:
            upd = podgroups[job.uid] = PodGroupUpdate(phase="")
        unschedulable = False
        for c in upd.conditions:
            if c.get("type") == "Unschedulable" and c.get("transitionID") == ssn.uid:
                unschedulable = True
                break
        upd.phase = podgroup_phase(ssn, job, unschedulable)
        upd.running = len(job.by_status.get(TaskStatus.RUNNING, ()))
        upd.succeeded = len(job.by_status.get(TaskStatus.SUCCEEDED, ()))
        upd.failed = len(job.by_status.get(TaskStatus.FAILED, ()))
    for uid, (job, _reason) in ssn.invalid.items():
        upd = podgroups.get(uid)
        if upd is None:  # (setdefault would build an update for every invalid job)
            upd = podgroups[uid] = PodGroupUpdate(phase="")
        upd.phase = job.phase


def _waiting_tasks(job: JobInfo) -> int:
    return len(job.by_status.get(TaskStatus.PENDING, ()))


_PLACED = READY_STATUSES | {TaskStatus.PIPELINED}


def gang_short(job: JobInfo) -> str:
    """How the gang falls short, one story in its numbers: the tasks placed and those a
    turn placed and gave back (``tentative``) count in the total and, for a job with
    per-role minimums that Volcano checks, role by role (``master: 1/1, worker: 0/4``
    adds up to 1 that could be placed). "" when the gang is not short.

    A waiting job is explained in every cycle: the sentence is kept in the job's
    verdicts with what it counts (the job's tasks, and what its last turn placed)."""
    tentative = job.tentative
    stamp = (
        job.version,
        tentative,
        job.tentative_at_most,
        tuple(job.tentative_roles.items()) if tentative else (),
    )
    said = job.verdicts.recall(_GANG_SHORT, stamp)
    if said is None:
        said = job.verdicts.keep(_GANG_SHORT, stamp, _gang_short(job))
    return said


#: ``JobInfo.verdicts`` key: :func:`gang_short`'s sentence.
_GANG_SHORT = "status.gang-short"


def _gang_short(job: JobInfo) -> str:
    placed = job.ready_num() + job.waiting_num()
    minimums = job.min_task_member
    # Volcano skips the per-role check when the roles ask for more than minMember.
    if minimums and job.min_available < sum(minimums.values()):
        minimums = {}
    short_total = placed < job.min_available and job.min_available > 1
    if not short_total and not minimums:
        return ""
    could = placed + job.tentative
    at_most = "at most " if job.tentative_at_most else ""
    breakdown = ""
    if minimums:
        counts = job.role_counts(_PLACED)
        if job.tentative:
            for role, n in job.tentative_roles.items():
                counts[role] = counts.get(role, 0) + n
        if all(counts.get(r, 0) >= n for r, n in minimums.items()):
            if not short_total:
                return ""
        else:
            breakdown = (
                " ("
                + ", ".join(f"{r}: {counts.get(r, 0)}/{n}" for r, n in sorted(minimums.items()))
                + ")"
            )
            if could >= job.min_available:
                return (
                    f"gang short: needs {plural(job.min_available, 'task')}, {at_most}{could} "
                    f"could be placed, but not of the roles it needs{breakdown}"
                )
    return (
        f"gang short: needs {plural(job.min_available, 'task')}, {at_most}{could} could be "
        f"placed{breakdown}"
    )


def _named_refusal(
    ssn: Session, queue: QueueInfo, note: str, named: dict[str, str | None] | None = None
) -> str:
    """``note``, with a queue refusal's limit named for what it is (the plugin that
    decides ``allocatable`` says: its deserved share, its capability, the cluster's
    total). Left as it is when several plugins decide, or none can say.

    ``named`` keeps the name found per queue while a session explains (nothing moves
    then, and every refused job of a queue asks the same)."""
    if GENERIC_LIMIT not in note:
        return note
    if named is not None and queue.name in named:
        limit = named[queue.name]
    else:
        limit = _refusal_limit(ssn, queue)
        if named is not None:
            named[queue.name] = limit
    return note if limit is None else note.replace(GENERIC_LIMIT, limit, 1)


def _refusal_limit(ssn: Session, queue: QueueInfo) -> str | None:
    """The limit of ``queue`` that the one plugin deciding ``allocatable`` names, or
    None when several plugins decide, or none can say."""
    deciding = {name for tier in ssn.hooks.chain("allocatable") for name, _fn in tier}
    named = []
    for plugin in ssn.plugins:
        limit = getattr(plugin, "refusal_limit", None)
        if limit is not None and plugin.name in deciding:
            named.append(limit(queue.name, ssn.space))
    if len(named) != 1 or not named[0]:
        return None
    return named[0]


def pending_reason(ssn: Session, job: JobInfo, limits: Limits | None = None) -> str:
    """Why ``job`` still has tasks waiting: first what it asks that can never be had
    (see :mod:`pumice.framework.never`; ``limits`` keeps its answers for a cycle's
    explanations), the real cause whatever stage stopped it this cycle; then that
    stage, and why."""
    return str(stage_and_reason(ssn, job, limits)[1])


def stage_and_reason(ssn: Session, job: JobInfo, limits: Limits | None = None) -> tuple[str, Text]:
    """The stage that stopped ``job`` this cycle (one of :data:`STAGES`) and
    :func:`pending_reason`'s sentence (made when read, where the stage that stopped
    the job can say it then: see :mod:`pumice.framework.said`)."""
    if limits is None:
        limits = Limits(ssn)
    never = never_fits(ssn, job, limits)
    stage, said = _stage_reason(ssn, job, limits.refusal_limits)
    reason = join("; ", [never, said]) if never else said
    # Why preempt or reclaim, run for the job, could not help it (actions/eviction.py).
    notes = ssn.eviction_notes.get(job.uid)
    return stage, (join("; ", [reason, *notes]) if notes else reason)


#: The stages that can stop a waiting job, in the order a job passes them:
#: ``not-schedulable`` (the job itself is refused: too few pods for its gang, no such
#: queue, ...), ``enqueue`` (not admitted yet: the queue's capability, overcommit,
#: minResources), ``queue`` (admitted, but its queue may not take it now: closed, over
#: its deserved share or capability), ``allocate`` (no node fits, or too few of its
#: tasks to make the gang).
NOT_SCHEDULABLE, ENQUEUE, QUEUE, ALLOCATE = "not-schedulable", "enqueue", "queue", "allocate"
STAGES = (NOT_SCHEDULABLE, ENQUEUE, QUEUE, ALLOCATE)


def _stage_reason(
    ssn: Session, job: JobInfo, named: dict[str, str | None] | None = None
) -> tuple[str, Text]:
    """The stage that stopped ``job`` this cycle, and why (``named``: see
    :func:`_named_refusal`)."""
    queue = ssn.queues[job.queue]
    if job.uid in ssn.not_enqueued:
        return ENQUEUE, ssn.not_enqueued[job.uid]
    if job.is_pending():
        if "enqueue" in ssn.config.actions:
            return ENQUEUE, "not enqueued yet: waiting for admission by the enqueue action"
        return ENQUEUE, "not enqueued: no action admits Pending jobs in this configuration"
    if not queue.is_open():
        return QUEUE, f"queue {queue.name} is {queue.state}: it accepts no new work"
    placed = job.ready_num() + job.waiting_num()
    gang = gang_short(job)
    detail = ""
    stage = ALLOCATE
    if job.fit_errors:
        uid, err = next(iter(job.fit_errors.items()))
        name = job.tasks[uid].name if uid in job.tasks else uid
        detail = f"task {name}: {err.render()}"
    elif job.note:
        if isinstance(job.note, QueueRefusal):
            stage = QUEUE
        detail = _named_refusal(ssn, queue, job.note, named)
    elif job.queue in ssn.overused_queues:
        stage = QUEUE
        detail = f"queue {job.queue} has used its deserved share this cycle"
        for plugin in ssn.plugins:
            explain = getattr(plugin, "explain_overused", None)
            if explain is not None:
                detail = explain(queue, ssn.space)
    elif not detail and placed >= job.min_available:
        detail = "more tasks than the gang minimum; they wait for free resources"
    said = f"{gang}; {detail}" if gang and detail else gang or detail or "waiting for resources"
    return stage, said


def explain_pending(ssn: Session) -> None:
    """Say why each waiting job waits (``Decisions.pending``), and the stage that
    stopped it (``Session.stages``, for :func:`pumice.framework.waiting.line_up`)."""
    d = ssn.decisions
    stages = ssn.stages
    for uid, reason in ssn.snapshot.blocked.items():
        d.pending[uid] = f"not scheduled: {reason}"
        stages[uid] = NOT_SCHEDULABLE
    for uid, (job, reason) in ssn.invalid.items():
        stages[uid] = NOT_SCHEDULABLE
        if uid in ssn.not_enqueued:
            stages[uid] = ENQUEUE
            d.pending[uid] = ssn.not_enqueued[uid]
        elif not job.tasks and not job.is_pending():
            # Admitted before its pods exist, as a vcjob is: its controller creates them.
            d.pending[uid] = (
                f"admitted; waiting for its {plural(job.min_available, 'pod')} to be created by "
                f"the job's controller"
            )
        else:
            d.pending[uid] = f"not schedulable: {reason}"
    limits = Limits(ssn)
    # The parked jobs, refused by enqueue all of them: those not valid as gangs (the
    # many) said at once, as the invalid ones above; by reference, as enqueue said
    # them, where it said them as one layer (``Session.refused_parked``: their stage
    # is enqueue's, see framework/waiting.py), and the others from ``not_enqueued``.
    parked = ssn.parked
    if parked:
        layer = ssn.refused_parked
        if layer is not None:
            d.pending.lay(layer)
            apart = [uid for uid in ssn.not_enqueued if uid in parked]
            invalid = [uid for uid in apart if parked[uid].reason is not None]
        else:
            apart = list(parked)
            invalid = [uid for uid, p in parked.items() if p.reason is not None]
        stages.update(dict.fromkeys(invalid, ENQUEUE))
        d.pending.hold(zip(invalid, map(ssn.not_enqueued.__getitem__, invalid), strict=True))
        if len(invalid) + (len(layer) if layer is not None else 0) < len(parked):
            for uid in apart:
                p = parked[uid]
                if p.reason is None:
                    stages[uid], d.pending[uid] = stage_and_reason(ssn, p.job, limits)
    for job in ssn.active.values():
        if job.uid in ssn.invalid:
            continue
        if _waiting_tasks(job) == 0 and not job.is_pending():
            continue
        stages[job.uid], d.pending[job.uid] = stage_and_reason(ssn, job, limits)
