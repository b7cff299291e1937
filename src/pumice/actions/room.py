"""A gang turn that cannot complete, proven before it is tried.

allocate gives a job a turn: it places the job's pending tasks one by one into a
statement, and keeps the statement only if the job ends ready (or pipelined). A backlog
of admitted gangs waiting for room is tried again in every cycle, and each try places
all the tasks the nodes can take, scores the nodes for each, then gives everything
back. On a busy cluster of 1,000 nodes that was most of a cycle's work.

When every pending task of the job (two or more: a single task is tried, which costs
no more than the proof) has one shape, how many of them the nodes can take
is known without trying: per node, how many fit one after another in its future idle
resources (:meth:`FastPath.slot_view <pumice.framework.fastpath.FastPath.slot_view>`), summed
over the nodes. The nodes are independent, so any order of placement takes exactly
that many; the queue's share, asked before each task, lets through a known number in a
row. The try places the fewer of the two. If that is fewer than the job still needs
before ``job_ready`` or ``job_pipelined`` could say yes, the try would place them, find
no node (or no share) for the next one and discard the statement: no decision differs
from not trying. The turn is skipped, and the job left as the try would have left it:
the count of tasks that could be placed, and the fit error of the first that could not
against the nodes with every slot taken (or the queue's refusal of the last).

When the pending tasks have several shapes (a CPU-only parameter server and its GPU
workers: a fifth of the synthetic gangs, and most of allocate's failed tries at the
daily peaks of 1,000 nodes), each shape's slots and share bound how many of its tasks
any try places, and the bounds add up: the decision is proven the same way, and the
explanation says "at most N could be placed" (see :func:`_mixed_turn`).

The proof needs what the fast path needs (predicates that look at placement alone, no
host ports, no inter-pod affinity about), ``job_ready`` / ``job_pipelined`` functions
that say how many more placements they need before they could say yes (a ``short(job)``
attribute that looks at the job alone, as gang's do), and ``allocatable`` functions that
say how many tasks in a row they would let the queue take (``run(queue, task, limit)``,
as proportion's has): a try asks before each task and, once refused, notes it and places
no more. Otherwise the turn is tried as before.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from pumice.api.job import JobInfo
from pumice.api.node import NodeTable
from pumice.api.queue import QueueInfo
from pumice.api.task import TaskInfo
from pumice.api.verdicts import TASK_SHAPES
from pumice.framework.fastpath import FastPath, for_session, shape_key
from pumice.framework.limits import GENERIC_LIMIT, QueueRefusal
from pumice.framework.session import Session
from pumice.framework.slots import SlotView

#: A job's pending task shapes: (shape, how many tasks have it, the first of them).
_Groups = tuple[tuple[Hashable, int, TaskInfo], ...]
#: What a proof knows of a job's pending tasks (see :func:`_gang_facts`): their shapes,
#: each task's shape by uid, the placements the gang needs, the tasks in task order.
_Facts = tuple[_Groups, dict[str, Hashable], int | None, list[TaskInfo]]


def hopeless_turn(
    ssn: Session,
    queue: QueueInfo,
    job: JobInfo,
    todo: list[TaskInfo],
    key: Callable[[TaskInfo], tuple] | None,
) -> bool:
    """True when ``job``'s first turn this cycle is proven to end with nothing kept; the
    job's fit error and tentative count are then recorded as the turn would have.
    ``todo`` are the pending tasks the turn would place, ``key`` their task order."""
    if len(todo) < 2 or key is None:
        return False  # (one task: trying it is as cheap as a proof)
    fast = for_session(ssn)
    if not fast.enabled or fast.affinity_about:
        return False
    facts = _gang_facts(ssn, job, todo, key)
    if facts is None:
        return False
    groups, _shape_of, need, order = facts
    if need is None or need <= 0 or need > len(todo):
        return False
    if len(groups) > 1:
        return _mixed_turn(ssn, fast, queue, job, facts, need)
    shape = groups[0][0]
    # Every task has the same shape, hence the same answers from allocatable (the
    # queue's share runs out after ``takes`` of them) and the same slots: the try places
    # the fewer of the two counts. Only the names the explanation quotes depend on the
    # task order.
    takes = _queue_takes(ssn, queue, todo[0], need)
    if takes is None:
        return False
    if takes == 0:
        # The queue refuses every task, and the try places none: whatever the nodes
        # have, the note names the last task refused and nothing was tentative.
        job.note = queue_refusal(queue, order[-1], ssn.nodes)
        return True
    if takes >= need:
        known = fast.shapes.get(shape)
        if known is not None and known.n_future >= need:
            # A slot on each of that many nodes, as the fast path last saw them: no
            # proof to be had (if rows changed since, the try finds out).
            return False
    view = fast.slot_view(todo[0], shape)
    if view is None or (takes >= need and view.total >= need):
        return False
    if view.total >= takes:
        # The try places ``takes`` tasks; the queue refuses the next and, its share
        # unchanged, every one after: the note names the last.
        job.note = queue_refusal(queue, order[-1], ssn.nodes)
        job.keep_tentative(order[:takes])
        return True
    room = int(view.total)  # fewer than the queue would take: a task finds no node
    job.fit_errors[order[room].uid] = view.fit_error(len(ssn.nodes))
    job.keep_tentative(order[:room])
    return True


def _mixed_turn(
    ssn: Session, fast: FastPath, queue: QueueInfo, job: JobInfo, facts: _Facts, need: int
) -> bool:
    """:func:`hopeless_turn` for pending tasks of several shapes (a parameter server
    and its GPU workers): a bound, not a count.

    A try places at most as many tasks of a shape as the nodes have slots for it (the
    other shapes' placements only take resources away) and as the queue's share lets
    it take in a row (the others only add to the queue's allocation). If those bounds
    add up to fewer than the job needs, the try keeps nothing, whatever the order.

    The explanation gives the bound as what could be placed at most (the job says so:
    ``tentative_at_most``), and names the first task, in task order, that the bounds
    leave without a node, with its shape's fit error against the nodes with every slot
    taken (or, failing that, the last task the queue's share refuses). The try itself
    might have placed fewer, or been stopped elsewhere first, where the shapes compete
    for a node or for the queue's share; the decisions are the same."""
    groups, shape_of, _, order = facts  # (``need``: the facts', known by now)
    room: dict[Hashable, int] = {}
    allowed: dict[Hashable, int] = {}
    views: dict[Hashable, SlotView] = {}
    bound = 0
    for shape, count, first in groups:
        takes = _queue_takes(ssn, queue, first, count)
        if takes is None:
            return False
        known = fast.shapes.get(shape)
        if known is not None and known.n_future >= count:
            room[shape] = count  # a node for each (as last seen): no shortfall to count
        else:
            view = fast.slot_view(first, shape)
            if view is None:
                return False
            views[shape] = view
            room[shape] = count if view.total >= count else int(view.total)
        allowed[shape] = takes
        bound += min(room[shape], takes)
        if bound >= need:
            return False
    through, refused, unplaced = _walk(ssn, job, order, shape_of, room, allowed)
    if refused is not None:
        job.note = queue_refusal(queue, refused, ssn.nodes)
    if unplaced is not None:
        task, shape = unplaced
        job.fit_errors[task.uid] = views[shape].fit_error(len(ssn.nodes))
    job.keep_tentative(through, at_most=True)
    return True


def _walk(
    ssn: Session,
    job: JobInfo,
    order: list[TaskInfo],
    shape_of: dict[str, Hashable],
    room: dict[Hashable, int],
    allowed: dict[Hashable, int],
) -> tuple[list[TaskInfo], TaskInfo | None, tuple[TaskInfo, Hashable] | None]:
    """The tasks of a mixed turn's explanation, in task order under the bounds (the slots
    ``room`` and the queue's ``allowed`` count, per shape): the tasks the bounds let
    through (their roles are told), the last task the queue refuses before the first
    left without a node, and that one with its shape. A function of the job's tasks and
    the bounds, kept with them: a waiting gang meets the same bounds cycle after cycle,
    and walking its tasks was about half the cost of the proof."""
    stamp = (job.version, ssn.config, tuple(room.items()), tuple(allowed.items()))
    got = job.verdicts.recall(_WALK, stamp)
    if got is not None:
        return got
    left = {shape: min(n, allowed[shape]) for shape, n in room.items()}
    through = []
    for task in order:
        if left[shape_of[task.uid]]:
            left[shape_of[task.uid]] -= 1
            through.append(task)
    room, allowed = dict(room), dict(allowed)
    refused: TaskInfo | None = None
    unplaced: tuple[TaskInfo, Hashable] | None = None
    for task in order:
        shape = shape_of[task.uid]
        if not allowed[shape]:
            refused = task
        elif room[shape]:
            room[shape] -= 1
            allowed[shape] -= 1
        else:
            unplaced = (task, shape)
            break
    return job.verdicts.keep(_WALK, stamp, (through, refused, unplaced))


def queue_refusal(queue: QueueInfo, task: TaskInfo, nodes: NodeTable | None = None) -> QueueRefusal:
    """The note a job gets when ``allocatable`` refuses one of its tasks (naming the
    nodes the session leaves out, which count in no share)."""
    if not queue.is_open():
        return QueueRefusal(
            f"queue {queue.name} cannot take task {task.name} now: the queue is not open"
        )
    text = f"queue {queue.name} cannot take task {task.name} now: it would exceed {GENERIC_LIMIT}"
    left = nodes.left_out_summary() if nodes is not None else ""
    return QueueRefusal(f"{text} (the cluster's total leaves out {left})" if left else text)


def _queue_takes(ssn: Session, queue: QueueInfo, task: TaskInfo, limit: int) -> int | None:
    """How many tasks like ``task`` in a row every ``allocatable`` function would let
    ``queue`` take, up to ``limit``; None when one cannot say (no ``run`` facet)."""
    taken = limit
    for run in ssn.hooks.facets("allocatable", "run"):
        if run is None:
            return None
        taken = min(taken, run(queue, task, limit))
    return taken


def placements_needed(ssn: Session, job: JobInfo) -> int | None:
    """The fewest placements after which a turn of ``job`` could be kept: ``job_ready`` needs
    every function to agree, so the largest shortfall counts; ``job_pipelined`` votes,
    so it stays no only while every function is short. None when a function cannot
    say (or none is registered, which means yes).

    A ``short`` looks at the job alone, so the answer is kept with the job's version
    under one configuration (a backlog job asks every cycle)."""
    stamp = (job.version, ssn.config)
    need = job.verdicts.recall(_NEED, stamp, _UNKNOWN)
    if need is _UNKNOWN:
        need = job.verdicts.keep(_NEED, stamp, _shortfall(ssn, job))
    return need


#: ``JobInfo.verdicts`` keys: the placements the gang needs; what a proof knows of its
#: pending tasks (see :func:`_gang_facts`); a mixed turn's walk of them (see :func:`_walk`).
_NEED, _FACTS, _WALK = "room.need", "room.facts", "room.walk"
_UNKNOWN = object()


def _shortfall(ssn: Session, job: JobInfo) -> int | None:
    ready, pipelined = ssn.hooks.flat("job_ready"), ssn.hooks.flat("job_pipelined")
    if not ready or not pipelined:
        return None
    for_ready = max(
        short(job) if short is not None else 0 for short in ssn.hooks.facets("job_ready", "short")
    )
    for_pipelined = None
    for short in ssn.hooks.facets("job_pipelined", "short"):
        if short is None:
            return None
        s = short(job)
        for_pipelined = s if for_pipelined is None else min(for_pipelined, s)
    assert for_pipelined is not None
    return min(for_ready, for_pipelined)


def _gang_facts(
    ssn: Session, job: JobInfo, todo: list[TaskInfo], key: Callable[[TaskInfo], tuple]
) -> _Facts | None:
    """What a proof needs to know of ``job``'s pending tasks ``todo``: their shapes
    (see :func:`_shape_groups`), each task's shape, the placements the gang needs, and
    the tasks in task order (``key``). None when the tasks have what a proof cannot
    count. The task order and the gang's needs look at the job alone, under one
    configuration: kept with the job's version (a backlog gang asks in every cycle).
    Tasks the numa-aware plugin may pin (see :meth:`Session.attaching`) are not counted
    by shape either: whether that applies moves with ``numa_known``, in the stamp."""
    stamp = (job.version, ssn.config, ssn.numa_known)
    facts = job.verdicts.recall(_FACTS, stamp, _UNKNOWN)
    if facts is _UNKNOWN:
        pinned = any(t.numa is not None and ssn.attaching(t) for t in todo)
        shapes = None if pinned else _shape_groups(job, todo)
        if shapes is None:
            facts = None
        else:
            groups, shape_of = shapes
            facts = (groups, shape_of, placements_needed(ssn, job), sorted(todo, key=key))
        job.verdicts.keep(_FACTS, stamp, facts)
    return facts


def _shape_groups(job: JobInfo, todo: list[TaskInfo]) -> tuple[_Groups, dict[str, Hashable]] | None:
    """The shapes of ``todo``: (shape, how many tasks have it, the first of them) in
    order of first appearance, and each task's shape by uid; None when a task has what
    the proof cannot count (host ports, inter-pod affinity, no requests known).
    Memoized on the job's version (``TASK_SHAPES``, which the explanations read too): a
    backlog job asks each cycle, and its tasks do not change while it waits."""
    memo = job.verdicts.recall(TASK_SHAPES, job.version, _UNKNOWN)
    if memo is not _UNKNOWN:
        return memo
    found: dict[Hashable, list] = {}
    shape_of: dict[str, Hashable] = {}
    ok = True
    for t in todo:
        if t.host_ports or t.pod_affinity is not None or t.nonzero is None or t.attaches:
            ok = False
            break
        shape = shape_key(t)
        shape_of[t.uid] = shape
        got = found.get(shape)
        if got is None:
            found[shape] = [shape, 1, t]
        else:
            got[1] += 1
    memo = (tuple((s, n, t) for s, n, t in found.values()), shape_of) if ok else None
    return job.verdicts.keep(TASK_SHAPES, job.version, memo)


__all__ = ["hopeless_turn", "placements_needed"]
