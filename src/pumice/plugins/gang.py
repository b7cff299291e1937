"""gang: a job runs with at least ``minMember`` tasks (and per-role minimums) or not at all.

Registers: job_valid (enough tasks exist at all), job_ready (enough are placed),
job_pipelined (enough are placed or waiting on releasing resources), job_order (jobs
not yet ready before ready ones, so that gangs complete before extras are added),
preemptable/reclaimable (never take a job below its minimum), job_starving. On close it
sets each PodGroup's Scheduled / Unschedulable condition. Gangs of the coscheduling and
Workload dialects also time out (:mod:`pumice.plugins.gang_timeout`).

Argument ``gang.bestEffortReady``: how a pending best-effort task (no cpu, memory or
extended-resource request: allocate leaves it to backfill) counts toward the gang.

``placeable`` (the default)
    Only if a node can take it now: the predicates allow the node and it has a free pod
    slot, the job's other best-effort tasks placed with it (see
    :mod:`pumice.framework.best_effort`). While allocate is still placing the job's
    other tasks, those count as could-be-placed too, so that a gang is refused only
    where backfill could not complete it; where it could, allocate and backfill decide
    as with ``optimistic``. A gang whose readiness rests on best-effort tasks not yet
    placed is not bound by allocate: backfill binds it whole or gives it back (see
    ``whole`` below and :mod:`pumice.actions.allocate`). No gang is left half placed.
``optimistic``
    Volcano's arithmetic: every pending best-effort task counts as ready. When backfill
    then finds no node for some of them (pod limits, node selectors, taints), the gang
    is left below its minimum: some pods bound, the gang never complete.

Job order ranks jobs by Volcano's arithmetic under both (a sort key must not change
while a job waits in a heap, and the placeable answer moves with the nodes).

The ``job_ready`` function offers, besides ``short`` (see :mod:`pumice.actions.room`),
under ``placeable``: ``whole(job)``, ready without counting any pending task (a
statement kept on that answer leaves no gang short), and ``why_not(job)``, the first
pending best-effort task the nodes have no room for, and why (for the pending reason).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pumice.api.job import JobInfo
from pumice.api.task import ALLOCATED_STATUSES, TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.errors import InputError, shown
from pumice.framework.best_effort import BestEffortRoom
from pumice.framework.decisions import PodGroupUpdate
from pumice.framework.session import Session
from pumice.plugins.gang_timeout import ARGUMENT_KEYS as TIMEOUT_KEYS
from pumice.plugins.gang_timeout import GangTimeouts

#: The argument saying how pending best-effort tasks count toward a gang.
BEST_EFFORT_READY = "gang.bestEffortReady"
PLACEABLE = "placeable"
OPTIMISTIC = "optimistic"

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
    stamp = (job.version, job.min_available)
    reason = job.verdicts.recall(_INVALID, stamp)
    if reason is None:
        reason = job.verdicts.keep(_INVALID, stamp, _invalid_reason(job))
    return reason


#: The hooks whose functions may be a cycle's own (see :meth:`GangPlugin.on_cycle_open`).
_CYCLE_HOOKS = ("job_valid", "job_ready", "job_pipelined")

#: ``JobInfo.verdicts`` key: why the job is not a valid gang.
_INVALID = "gang.invalid"


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
        f"{'minCount' if job.api == 'workload' else 'minMember'} is {job.min_available}"
    )


def _ready(job: JobInfo) -> bool:
    return job.is_ready()


def _pipelined(job: JobInfo) -> int:
    return 1 if job.is_pipelined() else -1


# How many more tasks must be placed before the answer can turn yes (the ``short``
# facet): allocate skips a turn that cannot place that many (see pumice.actions.room).
# Best-effort pending tasks count as ready, as in is_ready; pipelined ones only towards
# pipelined.
def _ready_short(j: JobInfo) -> int:
    return j.min_available - j.ready_num() - j.pending_best_effort_num()


def _pipelined_short(j: JobInfo) -> int:
    return j.min_available - j.ready_num() - j.waiting_num()


#: The facets of the job_ready function (``ready_facets``) and job_pipelined's.
Facets = dict[str, Callable]


def _placeable_ready(
    room: Callable[[], BestEffortRoom],
) -> tuple[Callable[[JobInfo], bool], Facets]:
    """``job_ready`` under ``placeable``: Volcano's answer, and then, unless the tasks
    placed already make the gang, the pending best-effort tasks it counts on must have
    room (with the job's pending requesting tasks, which allocate may yet place). With
    its facets: ``short`` (a pending best-effort task may count, so Volcano's shortfall
    stays a lower bound), ``whole`` (ready without counting any pending task) and
    ``why_not`` (which best-effort task has no room; only where Volcano's arithmetic
    says ready: otherwise something else stopped it). ``room`` gives the cycle's room
    for best-effort tasks."""

    def ready(job: JobInfo) -> bool:
        if not job.is_ready():
            return False
        return job.is_placed() or room().can_complete(job, True)

    return ready, {
        "short": _ready_short,
        "whole": lambda j: j.is_placed(),
        "why_not": lambda j: room().why_not(j) if j.is_ready() else None,
    }


def _with_sub_groups(
    ssn: Session,
    valid: Callable[[JobInfo], str | None],
    ready: Callable[[JobInfo], bool],
    pipelined: Callable[[JobInfo], int],
) -> tuple[Callable, Callable, Callable]:
    """The gang functions for a session with sub-group policies: a job is also only
    valid when its pods make ``minSubGroups`` sub-groups of each policy, and only ready
    (pipelined) when that many of them are (Volcano's ``CheckSubJobValid``,
    ``CheckSubJobReady``, ``CheckSubJobPipelined``). The functions' facets (``short``,
    ``whole``, ``why_not``) still hold: sub-groups only add conditions."""
    from pumice.framework.topology import session_topology

    topo = session_topology(ssn)

    def valid_(job: JobInfo) -> str | None:
        reason = valid(job)
        if reason is None and job.sub_groups:
            reason = topo.subgroups_exist(job)
        return reason

    def ready_(job: JobInfo) -> bool:
        return ready(job) and (not job.sub_groups or topo.subgroups_met(job, False))

    def pipelined_(job: JobInfo) -> int:
        vote = pipelined(job)
        if vote > 0 and job.sub_groups and not topo.subgroups_met(job, True):
            return -1
        return vote

    return valid_, ready_, pipelined_


class GangPlugin:
    name = "gang"
    argument_keys = (BEST_EFFORT_READY, *TIMEOUT_KEYS)
    #: Jobs may be parked (see :mod:`pumice.framework.parking`): why a Volcano job
    #: without sub-groups is not a valid gang depends on the job alone, and the close
    #: writes no condition for a parked job.
    parks = True

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        mode = arguments.get_str(BEST_EFFORT_READY, PLACEABLE)
        if mode not in (PLACEABLE, OPTIMISTIC):
            raise InputError(
                f"expected {PLACEABLE} or {OPTIMISTIC}, got {shown(mode)}",
                obj="plugin gang",
                field=f"arguments.{BEST_EFFORT_READY}",
            )
        self.best_effort_ready = mode
        #: Timeouts of the coscheduling and Workload gangs (see plugins.gang_timeout).
        self.timeouts = GangTimeouts(arguments)
        #: Is the job ready as the cycle ends (for its condition)? Set at open.
        self._ready_now: Callable[[JobInfo], bool] = JobInfo.is_ready
        #: job_ready under this mode, with its facets (see :func:`_placeable_ready`).
        self._ready: Callable[[JobInfo], bool] = _ready
        self._ready_facets: Facets = {"short": _ready_short}
        #: The cycle's best-effort room, made at each cycle's open under ``placeable``
        #: (the only mode whose functions read it).
        self._room: BestEffortRoom
        #: Are job_valid, job_ready and job_pipelined registered, and are they the
        #: last cycle's own (sub-groups, back-offs)?
        self._registered = False
        self._own = False

    def valid_until(self, ssn: Session) -> float:
        """Gangs of Volcano's own API never time out; those of other dialects do, at
        the times their clocks say (see :meth:`GangTimeouts.valid_until`)."""
        return self.timeouts.valid_until(ssn)

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
                n = occupied.get(job.uid)
                if n is None:
                    n = job.ready_num()
                if n > job.min_available:
                    occupied[job.uid] = n - 1
                    out.append(t)
            return out

        if self.best_effort_ready == PLACEABLE:
            self._ready, self._ready_facets = _placeable_ready(lambda: self._room)
            # Nothing is placed after close: only the best-effort tasks with room count.
            self._ready_now = lambda j: (
                j.is_ready() and (j.is_placed() or self._room.can_complete(j, False))
            )
        ssn.on("subjob_ready", self.name, lambda sj: sj.is_ready())
        ssn.on("subjob_pipelined", self.name, lambda sj: 1 if sj.is_pipelined() else -1)
        ssn.on("subjob_order", self.name, lambda a, b: int(a.is_ready()) - int(b.is_ready()))
        ssn.on("job_order", self.name, job_order, key=lambda j: int(j.is_ready()))
        ssn.on("preemptable", self.name, evictable)
        ssn.on("reclaimable", self.name, evictable, alike=True)
        ssn.on(
            "job_starving", self.name, lambda j: j.ready_num() + j.waiting_num() < j.min_available
        )

    def on_cycle_open(self, ssn: Session) -> None:
        """The cycle's best-effort room; and, in a cycle with sub-group policies or
        gangs backing off, the cycle's own ``job_valid``, ``job_ready`` and
        ``job_pipelined`` (they read its sub-groups and clocks), registered in place
        of the last cycle's."""
        if self.best_effort_ready == PLACEABLE:
            self._room = BestEffortRoom(ssn)
        valid = self.timeouts.valid(ssn, _valid)
        ready, pipelined = self._ready, _pipelined
        # (Only active jobs are asked whether they are valid or ready.)
        sub_groups = False
        for j in ssn.active.values():  # (no generator: asked every cycle)
            if j.sub_groups:
                sub_groups = True
                break
        if sub_groups:
            valid, ready, pipelined = _with_sub_groups(ssn, valid, ready, pipelined)
        own = sub_groups or valid is not _valid
        if self._registered and not own and not self._own:
            return
        ssn.hooks.drop(self.name, _CYCLE_HOOKS)
        ssn.on("job_valid", self.name, valid)
        ssn.on("job_ready", self.name, ready, **self._ready_facets)
        ssn.on("job_pipelined", self.name, pipelined, short=_pipelined_short)
        self._registered, self._own = True, own

    def on_session_close(self, ssn: Session) -> None:
        # (A settled job keeps the condition it has, a parked one the condition it was
        # parked with: see framework/parking.py. Neither is active.)
        invalid = ssn.invalid
        for uid, (_job, reason) in invalid.items():
            set_condition(ssn, uid, UNSCHEDULABLE, NOT_ENOUGH_PODS, reason)
        ready_now = self._ready_now
        podgroups, session = ssn.decisions.podgroups, ssn.uid
        pipelined = TaskStatus.PIPELINED
        # Only gangs of the dialects with timeouts have clocks to start, stop or run
        # out (``GangTimeouts.applies``): a cycle of Volcano jobs alone has none.
        timed = False
        for uid, job in ssn.active.items():
            if job.api != "volcano":
                timed = True
            if uid in invalid:
                continue
            if ready_now(job):
                ctype, reason, msg = SCHEDULED, "tasks in gang are ready to be scheduled", ""
            else:
                # Volcano counts only tasks that hold resources; pipelined ones still wait.
                ctype, reason = UNSCHEDULABLE, NOT_ENOUGH_RESOURCES
                missing = max(job.min_available - job.ready_num(), 0)
                msg = f"{missing}/{len(job.tasks)} tasks in gang unschedulable"
                waiting = job.by_status.get(pipelined)
                if waiting:
                    msg += f" ({len(waiting)} pipelined onto resources being released)"
            if uid in podgroups:
                set_condition(ssn, uid, ctype, reason, msg)
            else:  # (the common case: every waiting job, every cycle)
                podgroups[uid] = PodGroupUpdate(
                    "",
                    [{"type": ctype, "status": "True", "reason": reason, "message": msg,
                      "transitionID": session}],
                )  # fmt: skip
        if timed:
            self.timeouts.close(ssn, ready_now, set_condition)


def set_condition(ssn: Session, uid: str, ctype: str, reason: str, message: str = "") -> None:
    """Replace the condition of type ``ctype`` in the podgroup update of job ``uid``."""
    podgroups = ssn.decisions.podgroups
    upd = podgroups.get(uid)
    if upd is None:  # (the common case: every waiting job, every cycle)
        podgroups[uid] = PodGroupUpdate("", [_condition(ctype, reason, message, ssn.uid)])
        return
    if upd.conditions:
        upd.conditions = [c for c in upd.conditions if c.get("type") != ctype]
    upd.conditions.append(_condition(ctype, reason, message, ssn.uid))


def _condition(ctype: str, reason: str, message: str, session: str) -> dict[str, Any]:
    """A podgroup condition as Volcano writes it, decided by session ``session``."""
    return {
        "type": ctype,
        "status": "True",
        "reason": reason,
        "message": message,
        "transitionID": session,
    }
