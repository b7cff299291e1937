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

import numpy as np

from pumice.actions.room import hopeless_turn, queue_refusal
from pumice.api.job import INQUEUE, JobInfo
from pumice.api.queue import QueueInfo
from pumice.api.task import READY_STATUSES, TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.framework.fastpath import for_session, shape_key
from pumice.framework.fit import explain_no_fit, fits, no_nodes, predicate_filter
from pumice.framework.orders import job_key, queue_key, task_key
from pumice.framework.pqueue import KeyedQueue, PriorityQueue, ordered
from pumice.framework.session import Session
from pumice.framework.statement import Statement


def best_node(ssn: Session, task: TaskInfo, cand: np.ndarray) -> int:
    """The highest-scored candidate; the first (name-sorted) on ties."""
    if cand.size == 1:
        return int(cand[0])
    scorers = ssn.hooks.flat("node_order")
    if not scorers:
        return int(cand[0])
    scores = scorers[0](task, cand)
    for fn in scorers[1:]:
        scores = scores + fn(task, cand)
    return int(cand[int(np.argmax(scores))])


def place(ssn: Session, stmt: Statement, job: JobInfo, task: TaskInfo) -> bool:
    """Allocate or pipeline ``task`` on the best node; record why not when none fits."""
    nodes = ssn.nodes
    if len(nodes) == 0:
        job.fit_errors[task.uid] = no_nodes(nodes)
        return False
    fastpath = for_session(ssn)
    fast = fastpath.choose(task)
    if fast is not None:  # the same choice as below, from per-shape caches
        i, now_fits = fast
        if now_fits:
            stmt.allocate(task, nodes.names[i])
        else:
            stmt.pipeline(task, nodes.names[i])
        return True
    # A task that found no node fails the same way, for the same reasons, as long as
    # neither its shape nor the nodes changed: a backlog of jobs waiting for room asks
    # this again and again in a cycle. (Not with inter-pod affinity about, where the
    # answer also depends on the task's labels and on other pods.)
    memo_key = None
    if task.pod_affinity is None and not fastpath.affinity_about:
        memo_key = (shape_key(task), task.host_ports, nodes.version)
        err = fastpath.no_fit.get(memo_key)
        if err is not None:
            job.fit_errors[task.uid] = err
            return False
    blocked, reasons = predicate_filter(ssn, task)
    future = nodes.future_idle()
    feasible = fits(task.init_resreq, future)
    if blocked is not None:
        feasible &= ~blocked
    if not feasible.any():
        err = job.fit_errors[task.uid] = explain_no_fit(ssn, task, reasons, future)
        if memo_key is not None:
            fastpath.no_fit[memo_key] = err
        return False
    now = feasible & fits(task.init_resreq, nodes.idle)
    cand = np.flatnonzero(now if now.any() else feasible)
    i = best_node(ssn, task, cand)
    if now[i]:
        stmt.allocate(task, nodes.names[i])
    else:
        stmt.pipeline(task, nodes.names[i])
    return True


def need_continue(job: JobInfo, failed_roles: set[str]) -> bool:
    """After a task found no node, may the job's other tasks still complete the gang?

    Volcano's rule: never when every task is needed. When the roles' minimums add up to
    more than minMember, only if ready tasks plus the pending tasks of roles that have
    not failed can still reach minMember. Otherwise, unless a failed role needs more
    tasks than it already has ready."""
    if job.min_available >= len(job.tasks):
        return False
    if job.min_task_member and job.min_available < sum(job.min_task_member.values()):
        left = sum(1 for t in job.with_status(TaskStatus.PENDING) if t.role not in failed_roles)
        return job.ready_num() + left >= job.min_available
    ready: dict[str, int] = {}
    for t in job.with_status(*READY_STATUSES):
        ready[t.role] = ready.get(t.role, 0) + 1
    return not any(job.min_task_member.get(role, 0) > ready.get(role, 0) for role in failed_roles)


class AllocateAction:
    name = "allocate"
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments

    def execute(self, ssn: Session) -> None:
        # A queue's share changes only while it is served (out of the heap): sort keys
        # give the same pops as ssn.queue_less where the plugins offer them.
        queues = ordered(ssn.queue_less, queue_key(ssn))
        jobs_of: dict[str, PriorityQueue[JobInfo] | KeyedQueue[JobInfo]] = {}
        admit_pending = "enqueue" not in ssn.config.actions
        # A waiting job's order cannot change (only the job being served changes), so
        # sort keys give the same order as ssn.job_less where the plugins offer them.
        jkey = job_key(ssn)
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
            if job.queue not in jobs_of:
                jobs_of[job.queue] = ordered(ssn.job_less, jkey)
                queues.push(ssn.queues[job.queue])
            jobs_of[job.queue].push(job)

        pending: dict[str, PriorityQueue[TaskInfo] | KeyedQueue[TaskInfo]] = {}
        while not queues.empty():
            queue = queues.pop()
            if ssn.overused(queue):
                ssn.overused_queues.add(queue.name)
                continue
            jobs = jobs_of.get(queue.name)
            if jobs is None or jobs.empty():
                continue
            job = jobs.pop()
            tasks = pending.get(job.uid)
            if tasks is None:
                todo = [t for t in job.with_status(TaskStatus.PENDING) if not t.best_effort]
                tkey = task_key(ssn, todo) if len(todo) > 1 else None  # one: no order
                if hopeless_turn(ssn, queue, job, todo, tkey):
                    queues.push(queue)  # as after a try that kept nothing
                    continue
                tasks = ordered(ssn.task_less, tkey, todo)
                pending[job.uid] = tasks
            if not tasks.empty():
                self._allocate_job(ssn, queue, job, jobs, tasks)
            queues.push(queue)
        actions = ssn.config.actions
        later = actions[actions.index(self.name) + 1 :] if self.name in actions else ()
        if "backfill" not in later:
            conclude_held(ssn)  # nothing places best-effort tasks after this action

    def _allocate_job(
        self,
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        jobs: PriorityQueue[JobInfo] | KeyedQueue[JobInfo],
        tasks: PriorityQueue[TaskInfo] | KeyedQueue[TaskInfo],
    ) -> None:
        stmt = Statement(ssn)
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


# -- gangs that count on best-effort tasks not yet placed ---------------------------------


def whole(ssn: Session, job: JobInfo) -> bool:
    """Ready without counting any pending task, as the ``job_ready`` functions that can
    say (``whole``) see it; True when none can (Volcano's arithmetic: a ready job is
    committed as it is)."""
    for fn in ssn.hooks.flat("job_ready"):
        check = getattr(fn, "whole", None)
        if check is not None and not check(job):
            return False
    return True


def explain_best_effort(ssn: Session, job: JobInfo) -> None:
    """Note which pending best-effort task of ``job`` the nodes have no room for, where
    a ``job_ready`` function can say (``why_not``)."""
    if not job.pending_best_effort_num():
        return
    for fn in ssn.hooks.flat("job_ready"):
        why = getattr(fn, "why_not", None)
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
