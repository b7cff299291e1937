"""Close-of-cycle conclusions: podgroup phases and the reason each waiting job waits."""

from __future__ import annotations

from pumice.api.job import COMPLETED, INQUEUE, PENDING, RUNNING, UNKNOWN, FitError, JobInfo
from pumice.api.quantity import plural
from pumice.api.queue import OPEN, QueueInfo
from pumice.api.task import READY_STATUSES, TaskStatus
from pumice.framework.decisions import PodGroupUpdate
from pumice.framework.limits import GENERIC_LIMIT, QueueRefusal
from pumice.framework.never import Limits, never_fits
from pumice.framework.said import Said, Text, join
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


_PIPELINED, _RUNNING, _SUCCEEDED = TaskStatus.PIPELINED, TaskStatus.RUNNING, TaskStatus.SUCCEEDED
_FAILED, _BOUND = TaskStatus.FAILED, TaskStatus.BOUND


def update_podgroups(ssn: Session) -> None:
    """Derive each job's podgroup phase, and list every task left pipelined (whether its
    statement was committed or kept because the job is pipelined but not yet ready)."""
    podgroups = ssn.decisions.podgroups
    pipelined_of = ssn.decisions.pipelined
    invalid, session = ssn.invalid, ssn.uid
    # (A settled job's status is already what it would be; a parked job's stands: see
    # framework/parking.py. Neither is active.)
    for uid, job in ssn.active.items():
        if uid in invalid:
            continue
        by_status = job.by_status
        pipelined = by_status.get(_PIPELINED)
        if pipelined:
            for t in pipelined.values():
                pipelined_of[t.key] = t.node or ""
        upd = podgroups.get(uid)
        if upd is None:
            upd = podgroups[uid] = PodGroupUpdate(phase="")
        if not job.ready_num():  # (a gang that waits: none running, bound or succeeded)
            failed = len(by_status.get(_FAILED, ()))
            if failed >= job.min_available:
                upd.phase = COMPLETED if not failed else RUNNING
            else:
                upd.phase = INQUEUE if job.phase == INQUEUE else PENDING
            upd.running = upd.succeeded = 0
            upd.failed = failed
            continue
        running = len(by_status.get(_RUNNING, ()))
        succeeded = len(by_status.get(_SUCCEEDED, ()))
        failed = len(by_status.get(_FAILED, ()))
        # podgroup_phase's rule, with the counts at hand.
        if running and _unschedulable(upd, session):
            upd.phase = UNKNOWN
        else:
            scheduled = running + succeeded + failed + len(by_status.get(_BOUND, ()))
            if scheduled >= job.min_available:
                upd.phase = COMPLETED if succeeded == scheduled else RUNNING
            else:
                upd.phase = INQUEUE if job.phase == INQUEUE else PENDING
        upd.running = running
        upd.succeeded = succeeded
        upd.failed = failed
    for uid, (job, _reason) in invalid.items():
        upd = podgroups.get(uid)
        if upd is None:  # (setdefault would build an update for every invalid job)
            upd = podgroups[uid] = PodGroupUpdate(phase="")
        upd.phase = job.phase


def _unschedulable(upd: PodGroupUpdate, session: str) -> bool:
    """Whether ``upd`` says its job unschedulable in this very cycle (``session``)."""
    for c in upd.conditions:
        if c.get("type") == "Unschedulable" and c.get("transitionID") == session:
            return True
    return False


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
    return _Explainer(ssn, Limits(ssn) if limits is None else limits)(job)


def _no_node(gang: str, task: str, err: FitError) -> str:
    """Why a job waits whose task ``task`` found no node (``err``), after how its
    gang falls short (``gang``, or "")."""
    detail = f"task {task}: {err.render()}"
    return f"{gang}; {detail}" if gang else detail


#: The stages that can stop a waiting job, in the order a job passes them:
#: ``not-schedulable`` (the job itself is refused: too few pods for its gang, no such
#: queue, ...), ``enqueue`` (not admitted yet: the queue's capability, overcommit,
#: minResources), ``queue`` (admitted, but its queue may not take it now: closed, over
#: its deserved share or capability), ``allocate`` (no node fits, or too few of its
#: tasks to make the gang).
NOT_SCHEDULABLE, ENQUEUE, QUEUE, ALLOCATE = "not-schedulable", "enqueue", "queue", "allocate"
STAGES = (NOT_SCHEDULABLE, ENQUEUE, QUEUE, ALLOCATE)


#: ``JobInfo.verdicts`` key: what of a waiting job's explanation depends on the job
#: alone and the world of :class:`Limits` (what :func:`never_fits` and
#: :func:`gang_short` say), under the union of their stamps.
_OWN = "status.own"


class _Explainer:
    """Says the stage that stopped a job and why (see :func:`stage_and_reason`), for
    the jobs of one cycle's close: what the cycle's state answers the same for every
    job (the configuration, a queue's state, an overused queue's explanation) is
    looked up once, and what the job alone answers (``never_fits``, ``gang_short``)
    once per change of the job, with one stamp for both. Nothing moves while a cycle
    explains."""

    __slots__ = (
        "closed", "limits", "named", "not_enqueued", "notes", "overused", "overused_said",
        "plugins", "queues", "space", "ssn", "waiting_admission", "world",
    )  # fmt: skip

    def __init__(self, ssn: Session, limits: Limits) -> None:
        self.ssn = ssn
        self.limits = limits
        self.world = limits.world
        self.named = limits.refusal_limits
        self.not_enqueued = ssn.not_enqueued
        self.queues = ssn.queues
        self.overused = ssn.overused_queues
        self.notes = ssn.eviction_notes
        self.plugins = ssn.plugins
        self.space = ssn.space
        self.waiting_admission = (
            "not enqueued yet: waiting for admission by the enqueue action"
            if "enqueue" in ssn.config.actions
            else "not enqueued: no action admits Pending jobs in this configuration"
        )
        #: Queue -> why a job of it waits, where the queue alone says (closed; used
        #: its deserved share).
        self.closed: dict[str, str] = {}
        self.overused_said: dict[str, str] = {}

    def __call__(self, job: JobInfo) -> tuple[str, Text]:
        pending = job.phase == PENDING
        tentative = job.tentative
        stamp = (
            job.version, pending, job.min_available, job.queue, id(job.min_resources),
            self.world, tentative, job.tentative_at_most,
            tuple(job.tentative_roles.items()) if tentative else (),
        )  # fmt: skip
        own = job.verdicts.recall(_OWN, stamp)
        if own is None:
            # (With the objects whose ids the stamp names: no id is reused meanwhile.)
            own = job.verdicts.keep(
                _OWN,
                stamp,
                (
                    never_fits(self.ssn, job, self.limits),
                    gang_short(job),
                    job.min_resources,
                    self.limits.held,
                ),
            )
        never = own[0]
        stage, said = self._stage_reason(job, pending, own[1])
        reason = join("; ", [never, said]) if never else said
        # Why preempt or reclaim, run for the job, could not help it (actions/eviction.py).
        if self.notes:
            notes = self.notes.get(job.uid)
            if notes:
                return stage, join("; ", [reason, *notes])
        return stage, reason

    def _stage_reason(self, job: JobInfo, pending: bool, gang: str) -> tuple[str, Text]:
        """The stage that stopped ``job`` this cycle, and why (``gang``: what
        :func:`gang_short` says of it)."""
        queue = self.queues[job.queue]
        said = self.not_enqueued.get(job.uid)
        if said is not None:
            return ENQUEUE, said
        if pending:
            return ENQUEUE, self.waiting_admission
        if queue.state != OPEN:
            said = self.closed.get(queue.name)
            if said is None:
                said = self.closed[queue.name] = (
                    f"queue {queue.name} is {queue.state}: it accepts no new work"
                )
            return QUEUE, said
        fit_errors = job.fit_errors
        if fit_errors:
            # (Said when read: a fit error is read-only once recorded.)
            for uid, err in fit_errors.items():
                task = job.tasks.get(uid)
                return ALLOCATE, Said(_no_node, gang, uid if task is None else task.name, err)
        detail = ""
        stage = ALLOCATE
        if job.note:
            if isinstance(job.note, QueueRefusal):
                stage = QUEUE
            detail = _named_refusal(self.ssn, queue, job.note, self.named)
        elif job.queue in self.overused:
            stage = QUEUE
            detail = self._overused(queue)
        elif job.ready_num() + job.waiting_num() >= job.min_available:
            detail = "more tasks than the gang minimum; they wait for free resources"
        said = f"{gang}; {detail}" if gang and detail else gang or detail or "waiting for resources"
        return stage, said

    def _overused(self, queue: QueueInfo) -> str:
        """Why a job of ``queue``, which has used its deserved share, waits: as the
        last plugin that explains it says."""
        detail = self.overused_said.get(queue.name)
        if detail is None:
            detail = f"queue {queue.name} has used its deserved share this cycle"
            for plugin in self.plugins:
                explain = getattr(plugin, "explain_overused", None)
                if explain is not None:
                    detail = explain(queue, self.space)
            self.overused_said[queue.name] = detail
        return detail


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
    # (Made when the first job is to be explained: some cycles explain none.)
    explain: _Explainer | None = None
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
        if invalid:
            stages.update(dict.fromkeys(invalid, ENQUEUE))
            d.pending.hold(zip(invalid, map(ssn.not_enqueued.__getitem__, invalid), strict=True))
        if len(invalid) + (len(layer) if layer is not None else 0) < len(parked):
            for uid in apart:
                p = parked[uid]
                if p.reason is None:
                    if explain is None:
                        explain = _Explainer(ssn, Limits(ssn))
                    stages[uid], d.pending[uid] = explain(p.job)
    not_valid = ssn.invalid
    pending_tasks = TaskStatus.PENDING
    said: list[tuple[str, Text]] = []
    for uid, job in ssn.active.items():
        if uid in not_valid:
            continue
        if job.phase != PENDING and not job.by_status.get(pending_tasks):
            continue
        if explain is None:
            explain = _Explainer(ssn, Limits(ssn))
        stages[uid], why = explain(job)
        said.append((uid, why))
    d.pending.hold(said)
