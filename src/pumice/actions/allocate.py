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
"""

from __future__ import annotations

import numpy as np

from pumice.actions.room import hopeless_turn, queue_refusal
from pumice.api.job import INQUEUE, FitError, JobInfo
from pumice.api.queue import QueueInfo
from pumice.api.task import READY_STATUSES, TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.framework.fastpath import for_session, shape_key
from pumice.framework.fit import explain_no_fit, fits, predicate_filter
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
        job.fit_errors[task.uid] = FitError(0, {}, "there are no nodes in the cluster")
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
                job.note = queue_refusal(queue, task)
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
            stmt.commit()
        elif not ssn.job_pipelined(job):
            job.tentative = max(job.tentative, len(stmt))
            stmt.discard()
