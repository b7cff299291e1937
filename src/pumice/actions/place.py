"""Placing one task: the best node for it, and whether its gang can go on after a miss.

Shared by allocate (over all nodes, or one HyperNode's nodes for a constrained gang) and
backfill.
"""

from __future__ import annotations

import numpy as np

from pumice.api.job import FitError, JobInfo
from pumice.api.task import READY_STATUSES, TaskInfo, TaskStatus
from pumice.framework.fastpath import for_session, shape_key
from pumice.framework.fit import explain_no_fit, fits, no_nodes, predicate_filter
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


def place(
    ssn: Session, stmt: Statement, job: JobInfo, task: TaskInfo, rows: np.ndarray | None = None
) -> bool:
    """Allocate or pipeline ``task`` on the best node (of ``rows``, one HyperNode's
    nodes, when given); record why not when none fits."""
    nodes = ssn.nodes
    if len(nodes) == 0:
        job.fit_errors[task.uid] = no_nodes(nodes)
        return False
    if rows is not None:
        return _place_within(ssn, stmt, job, task, rows)
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
    if (
        task.pod_affinity is None
        and not fastpath.affinity_about
        and not ssn.attaching(task)
        and not fastpath.per_task
    ):
        memo_key = (shape_key(task), task.host_ports, nodes.version)
        err = fastpath.no_fit.get(memo_key)
        if err is not None:
            job.fit_errors[task.uid] = err
            return False
    err = fastpath.no_room(task)
    if err is not None:  # (the fast path knows why: no pass over the nodes)
        job.fit_errors[task.uid] = err
        if memo_key is not None:
            fastpath.no_fit[memo_key] = err
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


def _place_within(
    ssn: Session, stmt: Statement, job: JobInfo, task: TaskInfo, rows: np.ndarray
) -> bool:
    """:func:`place` over the nodes of ``rows`` alone."""
    got = choose_within(ssn, job, task, rows)
    if got is None:
        return False
    i, now_fits = got
    if now_fits:
        stmt.allocate(task, ssn.nodes.names[i])
    else:
        stmt.pipeline(task, ssn.nodes.names[i])
    return True


def choose_within(
    ssn: Session, job: JobInfo, task: TaskInfo, rows: np.ndarray
) -> tuple[int, bool] | None:
    """The best node of ``rows`` (one HyperNode's nodes, sorted) for ``task`` and
    whether it fits there now (else on its future idle resources); None, with the
    reason recorded in the job's fit errors, when none can take it. Nodes where it
    fits now come first, as in :func:`place`."""
    nodes = ssn.nodes
    if rows.size == 0:
        job.fit_errors[task.uid] = FitError(0, {}, "the HyperNode has no nodes")
        return None
    fast = for_session(ssn).choose_within(task, rows)
    if fast is not None:  # the same choice as below, from per-shape caches
        return fast
    blocked, reasons = predicate_filter(ssn, task)
    future = nodes.future_idle(rows)
    feasible = fits(task.init_resreq, future)
    if blocked is not None:
        feasible &= ~blocked[rows]
    if not feasible.any():
        job.fit_errors[task.uid] = explain_no_fit(ssn, task, reasons, nodes.future_idle(), rows)
        return None
    now = feasible & fits(task.init_resreq, nodes.idle[rows])
    cand = rows[now if now.any() else feasible]
    return best_node(ssn, task, cand), bool(now.any())


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
