"""allocate: place pending tasks, a whole gang at a time.

Queues are served in queue order, one job per turn, jobs in job order, tasks in task
order. For each task: the nodes the predicates allow and where the task fits the
node's *future* idle resources (idle + releasing - pipelined) are candidates; those
where it fits the idle resources now are preferred. The best-scored candidate wins
(ties: the node whose name sorts first). The task is allocated if it fits now,
pipelined onto the releasing resources otherwise.

Allocations go into a Statement per job turn: committed (bound) when the job is ready,
kept when the job is pipelined, discarded otherwise. Once a job is ready it yields its
turn after each further task, so other jobs get their share. Jobs still Pending are
left for ``enqueue``, unless ``enqueue`` is not configured, in which case allocate
admits them itself.

A job may be ready only by counting pending best-effort tasks, which backfill places
after allocate (Volcano's arithmetic counts them all; gang's default counts those the
nodes have room for, see :mod:`pumice.plugins.gang`). Committing such a job would bind
part of the gang before anyone knows the rest gets a node: when a ``job_ready`` function
can say whether the tasks placed make the gang on their own (``whole``), a statement
that is ready but not whole is *held*: kept in the session, uncommitted, for backfill to
commit once it has placed the best-effort tasks, or to give back (see
:mod:`pumice.actions.backfill`). A held statement holds its resources like a committed
one, so every other decision of the cycle is the one Volcano makes; only a gang that
Volcano would leave half placed ends differently. Without backfill after allocate, the
held statements are concluded when allocate ends.
"""

from __future__ import annotations

from collections.abc import Callable

from pumice.actions.place import need_continue, place
from pumice.actions.room import hopeless_turn, queue_refusal
from pumice.actions.topology import Worksheet, allocate_for_job, worksheet
from pumice.api.job import INQUEUE, JobInfo
from pumice.api.queue import QueueInfo
from pumice.api.task import TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.framework.orders import job_key, queue_key, task_key, task_keys
from pumice.framework.pqueue import KeyedQueue, Lines, PriorityQueue, ordered
from pumice.framework.session import Session
from pumice.framework.statement import Statement
from pumice.framework.topology import session_topology
from pumice.framework.verdicts import timeless

#: ``JobInfo.verdicts`` key, stamped with the job's version: its pending tasks that
#: allocate places, and which of the task keys orders them (see :func:`_to_place`).
_TO_PLACE = "allocate.to-place"


class AllocateAction:
    name = "allocate"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments

    def execute(self, ssn: Session) -> None:
        # A queue's share changes only while it is served (out of the heap): sort keys
        # give the same pops as ssn.queue_less where the plugins offer them.
        queues = ordered(ssn.queue_less, queue_key(ssn))
        admit_pending = "enqueue" not in ssn.config.actions
        # A waiting job's order cannot change (only the job being served changes), so
        # sort keys give the same order as ssn.job_less where the plugins offer them.
        # Then a queue's jobs are ordered only when the queue is first served: a queue
        # that has used its share never is, and its jobs cost no key.
        jkey = job_key(ssn)
        line = Lines(ssn.job_less, jkey)
        # Only active jobs can have pending tasks; a job without any would take a turn
        # of its queue and do nothing, and job and queue orders are total, so leaving
        # settled jobs out changes no decision.
        for job in ssn.active.values():
            if job.uid in ssn.invalid:
                continue
            if job.is_pending():
                if not admit_pending:
                    continue
                job.phase = INQUEUE
            if line.add(job.queue, job):
                queues.push(ssn.queues[job.queue])

        pending: dict[str, PriorityQueue[TaskInfo] | KeyedQueue[TaskInfo]] = {}
        sheets: dict[str, Worksheet] = {}
        turns = ssn.turns
        tkeys = task_keys(ssn)  # (the task order functions stay for the action)
        # With sort keys, a queue whose turn placed nothing has the key it was popped
        # with, the smallest, and the share it had: it is served again at once, as the
        # heap would pop it, and is no more overused than it was.
        keyed = isinstance(queues, KeyedQueue)
        while not queues.empty():
            queue = queues.pop()
            if ssn.overused(queue):
                ssn.overused_queues.add(queue.name)
                continue
            jobs = line.of(queue.name)
            while jobs is not None and not jobs.empty():
                job = jobs.pop()
                turns.append(job.uid)
                if self._turn(ssn, queue, job, jobs, pending, sheets, tkeys) or not keyed:
                    queues.push(queue)
                    break
        actions = ssn.config.actions
        later = actions[actions.index(self.name) + 1 :] if self.name in actions else ()
        if "backfill" not in later:
            conclude_held(ssn)  # nothing places best-effort tasks after this action

    def _turn(
        self,
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        jobs: PriorityQueue[JobInfo] | KeyedQueue[JobInfo],
        pending: dict[str, PriorityQueue[TaskInfo] | KeyedQueue[TaskInfo]],
        sheets: dict[str, Worksheet],
        tkeys: tuple[Callable[[TaskInfo], tuple] | None, Callable[[TaskInfo], tuple] | None],
    ) -> bool:
        """One turn of ``job``; False when it placed nothing (no allocation event
        fired, so no queue's share or order moved). ``tkeys``: the task keys (see
        :func:`~pumice.framework.orders.task_keys`)."""
        if job.network_topology is not None or job.sub_groups:
            self._allocate_constrained(ssn, queue, job, jobs, sheets)
            return True
        tasks = pending.get(job.uid)
        if tasks is None:
            todo, tkey = _to_place(job, tkeys)
            if hopeless_turn(ssn, queue, job, todo, tkey):
                return False  # (as after a try that kept nothing)
            tasks = ordered(ssn.task_less, tkey, todo)
            pending[job.uid] = tasks
        if tasks.empty():
            return False
        return self._allocate_job(ssn, queue, job, jobs, tasks)

    def _allocate_constrained(
        self,
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        jobs: PriorityQueue[JobInfo] | KeyedQueue[JobInfo],
        sheets: dict[str, Worksheet],
    ) -> None:
        """A turn of a job placed HyperNode by HyperNode (:mod:`pumice.actions.topology`):
        committed when ready (held when ready only by best-effort tasks still to
        place), kept when pipelined; the job takes another turn while work remains."""
        topo = session_topology(ssn)
        if job.network_topology is not None and not ssn.hooks.flat("hypernode_gradient"):
            topo.unenforced(job)
        ws = sheets.get(job.uid)
        if ws is None:

            def in_order(todo: list[TaskInfo]) -> list[TaskInfo]:
                heap = ordered(ssn.task_less, task_key(ssn, todo) if len(todo) > 1 else None, todo)
                return [heap.pop() for _ in range(len(todo))]

            ws = sheets[job.uid] = worksheet(ssn, topo, job, in_order)
        if ws.empty():
            return
        stmt = allocate_for_job(ssn, queue, job, ws, topo)
        if stmt is None or not ssn.job_ready(job):
            return
        if whole(ssn, job):
            release(ssn, job, commit=True)
            stmt.commit()
        else:
            hold(ssn, job, stmt)
        if not ws.empty():
            jobs.push(job)

    def _allocate_job(
        self,
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        jobs: PriorityQueue[JobInfo] | KeyedQueue[JobInfo],
        tasks: PriorityQueue[TaskInfo] | KeyedQueue[TaskInfo],
    ) -> bool:
        """A turn of ``job``'s tasks (see the module's docstring); whether it placed
        any."""
        stmt = Statement(ssn)
        placed = False
        failed_roles: set[str] = set()
        while not tasks.empty():
            task = tasks.pop()
            if not ssn.allocatable(queue, task):
                job.note = queue_refusal(queue, task, ssn.nodes)
                continue
            if task.role and task.role in failed_roles:
                continue
            if not place(ssn, stmt, job, task):
                failed_roles.add(task.role)
                if need_continue(job, failed_roles):
                    continue
                break
            placed = True
            if ssn.job_ready(job) and not tasks.empty():
                jobs.push(job)
                break
        if ssn.job_ready(job):
            if whole(ssn, job):
                release(ssn, job, commit=True)
                stmt.commit()
            else:
                hold(ssn, job, stmt)
        elif not ssn.job_pipelined(job):
            job.keep_tentative([op.task for op in stmt.operations])
            explain_best_effort(ssn, job)  # (before the discard: the try's nodes)
            stmt.discard()
        return placed


# -- gangs that count on best-effort tasks not yet placed ---------------------------------


def whole(ssn: Session, job: JobInfo) -> bool:
    """Ready without counting any pending task, as the ``job_ready`` functions that can
    say (``whole``) see it; True when none can (Volcano's arithmetic: a ready job is
    committed as it is)."""
    for check in ssn.hooks.facets("job_ready", "whole"):
        if check is not None and not check(job):
            return False
    return True


def explain_best_effort(ssn: Session, job: JobInfo) -> None:
    """Note which pending best-effort task of ``job`` the nodes have no room for, where
    a ``job_ready`` function can say (``why_not``)."""
    if not job.pending_best_effort_num():
        return
    for why in ssn.hooks.facets("job_ready", "why_not"):
        note = why(job) if why is not None else None
        if note:
            job.note = note
            return


def hold(ssn: Session, job: JobInfo, stmt: Statement) -> None:
    """Keep ``stmt`` uncommitted with the job's held statement (a later turn of a job
    that yielded adds to it)."""
    kept = ssn.held
    earlier = kept.get(job.uid)
    if earlier is None:
        kept[job.uid] = stmt
    else:
        earlier.operations.extend(stmt.operations)
        stmt.operations.clear()


def release(ssn: Session, job: JobInfo, commit: bool) -> int:
    """Commit (or discard) ``job``'s held statement, if any; how many operations it
    had."""
    stmt = ssn.held.pop(job.uid, None)
    if stmt is None:
        return 0
    n = len(stmt)
    if commit:
        stmt.commit()
    else:
        stmt.discard()
    return n


def conclude_held(ssn: Session) -> None:
    """Conclude every held statement left: commit where the job is now whole, give it
    back unless the job is pipelined (then it is kept, as a pipelined turn is)."""
    kept = ssn.held
    for uid in list(kept):
        job = ssn.jobs[uid]
        if ssn.job_ready(job) and whole(ssn, job):
            release(ssn, job, commit=True)
        elif not ssn.job_pipelined(job):
            job.keep_tentative([op.task for op in kept[uid].operations])
            explain_best_effort(ssn, job)
            release(ssn, job, commit=False)
    kept.clear()


def _to_place(
    job: JobInfo,
    tkeys: tuple[Callable[[TaskInfo], tuple] | None, Callable[[TaskInfo], tuple] | None],
) -> tuple[list[TaskInfo], Callable[[TaskInfo], tuple] | None]:
    """``job``'s pending tasks that allocate places (best-effort ones are backfill's),
    and their task key (:func:`~pumice.framework.orders.task_key`, one of ``tkeys``;
    None for a single task). A job of the backlog asks in every cycle, and a gang's
    tasks are many: the tasks and which key fits them are kept with the job's version
    (the list is read-only: the queues built from it copy it)."""
    got = job.verdicts.recall(_TO_PLACE, job.version)
    if got is None:
        todo = [t for t in job.with_status(TaskStatus.PENDING) if not t.best_effort]
        with_index = sum(1 for t in todo if t.name_index is not None)
        which = 0 if with_index == len(todo) else (1 if with_index == 0 else None)
        got = job.verdicts.keep(_TO_PLACE, job.version, (todo, which))
    todo, which = got
    if len(todo) < 2 or which is None:
        return todo, None  # (one task: no order; mixed pod indices: no key)
    return todo, tkeys[which]
