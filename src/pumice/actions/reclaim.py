"""reclaim: a queue below its deserved share takes back resources other queues borrowed.

Follows Volcano's ``reclaim`` action (current master):

1. Admitted (not Pending), starving jobs are the reclaimers, grouped by queue; queues
   are served in queue order and an ``overused`` queue is skipped.
2. A queue's turn is one job (the first in job order) with one statement: its pending
   tasks, in task order, reclaim while the job is starving. A task with
   ``preemptionPolicy: Never`` does not reclaim; nor does a task its queue may not
   reclaim for (``preemptive``: the queue is open and would stay within its deserved
   share). The statement is committed if the job is pipelined, discarded otherwise. A
   queue with more starving jobs goes back into the queue order (its share has
   changed), so queues take turns job by job.
3. For one task, nodes the predicates allow are tried in name order. Candidates are the
   Running, ``volcano.sh/preemptable`` tasks of *other* queues that are
   ``reclaimable`` (``spec.reclaimable`` not false); the ``reclaimable`` functions
   choose the victims (proportion / capacity: only from queues above their deserved
   share, never below a guarantee; gang: never below minMember; conformance: never
   critical pods; pdb and cdp guards). If victims and the node's future idle resources
   can hold the task, victims are evicted in victim order until the node's future idle
   resources plus what they free cover the task's request (the idle part counts first:
   no more victims than needed), and the task is pipelined onto the node. A node that
   cannot be made to hold the task gives its evictions back before the next node is
   tried: only the evictions on the node the task is pipelined onto are kept.

When reclaim cannot help a job, its pending explanation and the audit (a ``failed``
record) say why: the queue is overused or may not reclaim, or, node by node, nothing of
another queue to take, the plugin that allowed no victim, or too little room.
"""

from __future__ import annotations

import numpy as np

from pumice.actions import eviction as ev
from pumice.actions.room import placements_needed
from pumice.api.job import JobInfo
from pumice.api.queue import QueueInfo
from pumice.api.task import TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.framework.fit import fits_one
from pumice.framework.pqueue import PriorityQueue
from pumice.framework.session import Session
from pumice.framework.statement import Statement
from pumice.framework.verdicts import timeless

ACTION = "reclaim"


class ReclaimAction:
    name = ACTION
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        self._held = _Reclaimees()
        self._hopeless = ev.Hopeless("reclaimable")

    def execute(self, ssn: Session) -> None:
        self._held = _Reclaimees()
        self._hopeless = ev.Hopeless("reclaimable")
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_less)
        seen: set[str] = set()
        jobs_of: dict[str, PriorityQueue[JobInfo]] = {}
        tasks_of: dict[str, PriorityQueue[TaskInfo]] = {}
        for uid in sorted(ssn.jobs):
            job = ssn.jobs[uid]
            if job.is_pending() or job.queue not in ssn.queues or uid in ssn.invalid:
                continue
            if job.queue not in seen:
                seen.add(job.queue)
                queues.push(ssn.queues[job.queue])
            if ssn.job_starving(job):
                refusal = ev.topology_refusal(ssn, job)
                if refusal:
                    ev.could_not_help(ssn, ACTION, job, refusal)
                    continue
                jobs_of.setdefault(job.queue, PriorityQueue(ssn.job_less)).push(job)
                tasks_of[job.uid] = PriorityQueue(ssn.task_less, ev.pending_tasks(job))
        while not queues.empty():
            queue = queues.pop()
            jobs = jobs_of.get(queue.name)
            if ssn.overused(queue):
                while jobs is not None and not jobs.empty():
                    ev.could_not_help(ssn, ACTION, jobs.pop(), f"queue {queue.name} is overused")
                continue
            if jobs is None or jobs.empty():
                continue
            self._turn(ssn, queue, jobs.pop(), tasks_of)
            if not jobs.empty():
                queues.push(queue)

    def _turn(
        self,
        ssn: Session,
        queue: QueueInfo,
        job: JobInfo,
        tasks_of: dict[str, PriorityQueue[TaskInfo]],
    ) -> None:
        """One job's statement: its tasks reclaim while it starves."""
        tasks = tasks_of[job.uid]
        short = share_shortfall(ssn, queue, job)
        if short:
            ev.could_not_help(ssn, ACTION, job, short)
            return
        stmt = Statement(ssn)
        first_miss: ev.Misses | None = None
        placed = 0
        while ssn.job_starving(job) and not tasks.empty():
            task = tasks.pop()
            heard = first_miss is None  # (only the first miss is told)
            misses = ev.Misses(task) if heard else ev.Unheard(task)
            if task.preemption_policy == "Never":
                misses.whole = f"task {task.name} has preemptionPolicy: Never"
            elif not ssn.preemptive(queue, task):
                misses.whole = _not_preemptive(ssn, queue, task)
            else:
                key = self._hopeless.key(ssn, job, task)
                known = self._hopeless.recall(ssn, key, task, heard)
                if known is not None:
                    misses = known
                elif self.reclaim_for(ssn, stmt, task, job, misses):
                    placed += 1
                    continue
                else:
                    self._hopeless.keep(ssn, key, misses)
            if first_miss is None:
                first_miss = misses
        ev.conclude_turn(ssn, stmt, job, ACTION, placed, first_miss)

    def reclaim_for(
        self,
        ssn: Session,
        stmt: Statement,
        task: TaskInfo,
        job: JobInfo,
        misses: ev.Misses | None = None,
    ) -> bool:
        """Try to pipeline ``task`` onto resources reclaimed from other queues;
        ``misses``, when given, is told why each node did not work out."""
        if misses is None:
            misses = ev.Unheard(task)
        nodes = ev.candidate_nodes(ssn, task)
        if not nodes:
            misses.whole = ev.no_node_text(ssn, task)
            return False
        held = self._held
        held.sync(ssn)
        takeable, sums = held.rows(ssn, job.queue)
        found = {i: takeable[i] for i in nodes if i in takeable}
        if len(found) < len(nodes):
            misses.node(
                "nothing to take there (no running, preemptable task of another "
                "queue that may be reclaimed)",
                len(nodes) - len(found),
            )
        # Only nodes where all the reclaimees together would fit the task (see
        # ev.room_with_all); a node that does not work out gives its evictions back, so
        # the test made here still holds when the loop reaches a node.
        room = set(ev.room_with_all(ssn, task, found, sums))
        for i in found:
            if i not in room:
                misses.node("too little room even with every task of another queue there gone")
                continue
            name = ssn.nodes.names[i]
            reclaimees = held.ordered(ssn, task, job.queue, i)
            victims, deciders, alone = ssn.hooks.victims_detail("reclaimable", task, reclaimees)
            # Victims are chosen among the candidates: when every candidate is chosen,
            # room_with_all has already found them enough (amounts are whole numbers in
            # canonical units, so the sum does not depend on the order).
            if len(victims) < len(reclaimees) and not ev.victims_could_fit(ssn, task, i, victims):
                if victims:
                    misses.node("the victims allowed there would free too little")
                else:
                    misses.refused(ssn, "reclaimable", task, reclaimees, deciders, alone)
                continue
            why = ev.deciders_text(ssn, "reclaimable", deciders)
            # What the node will have once the victims go: its future idle resources
            # first, so that no more victims are evicted than the task needs.
            available = ssn.nodes.idle[i] + ssn.nodes.releasing[i] - ssn.nodes.pipelined[i]
            pending = ev.victim_queue(ssn, victims, task)
            mark = stmt.mark()
            while not _covers(task, available) and not pending.empty():
                v = pending.pop()
                vq = ssn.jobs[v.job].queue if v.job in ssn.jobs else "?"
                stmt.evict(
                    v,
                    ACTION,
                    ev.record(
                        ssn,
                        ACTION,
                        "evict",
                        task,
                        name,
                        f"queue {vq} holds more than it deserves; allowed by {why}",
                        v,
                        victim_queue=vq,
                        reclaimer_queue=job.queue,
                    ),
                )
                available = available + v.resreq
            if not _covers(task, available):  # pragma: no cover - victims_could_fit said so
                stmt.rollback(mark)  # give this node's evictions back: the next starts afresh
                misses.node("the victims allowed there would free too little")
                continue
            stmt.pipeline(
                task,
                name,
                ev.record(
                    ssn,
                    ACTION,
                    "pipeline",
                    task,
                    name,
                    f"pipelined onto resources reclaimed for queue {job.queue}"
                    if len(stmt) - mark
                    else "pipelined: fits the node's future idle resources",
                ),
            )
            return True
        return False


class _Reclaimees:
    """What a queue could take back on each node: the Running, preemptable tasks there
    of the other queues that are ``reclaimable`` (``rows``, with their requests
    summed), and the same in victim order (``ordered``).

    Every starving task of the queue asks for every candidate node, and the answers
    depend on the reclaimer only through its queue (the victim order asks the victim
    queue order with the reclaimer's queue). What is takeable on a node changes only
    with the tasks there: a queue's rows are worked out for every node once, then
    only the rows logged as changed since (``NodeTable.changes``) are worked out again.
    The victim order also reads the job and queue orders, which any statement
    operation may move: it is kept while the session's nodes stay as they are
    (``NodeTable.version``)."""

    __slots__ = ("_base", "_keys", "_log", "_ordered", "_queues", "_seen", "_version")

    def __init__(self) -> None:
        #: row -> the tasks there any other queue could take, with their queues
        self._base: dict[int, list[tuple[TaskInfo, str]]] = {}
        #: queue -> (row -> takeable tasks, row -> their requests summed, stale rows);
        #: rows with nothing takeable are left out
        self._queues: dict[str, tuple[dict[int, list[TaskInfo]], dict, set[int]]] = {}
        self._ordered: dict[tuple[str, int], list[TaskInfo]] = {}
        self._log: list[int] | None = None
        self._seen = 0
        self._version = -1
        self._keys = ev.VictimKeys()

    def sync(self, ssn: Session) -> None:
        """Mark what the session's changes since the last call may have moved."""
        nodes = ssn.nodes
        log = nodes.changes
        if log is not self._log:
            self._queues.clear()
            self._base.clear()
            self._log = log
        elif self._seen < len(log):
            rows = set(log[self._seen :])
            for i in rows:
                self._base.pop(i, None)
            for _takeable_rows, _sums, stale in self._queues.values():
                stale.update(rows)
        self._seen = len(log)
        if nodes.version != self._version:
            self._ordered.clear()
            self._version = nodes.version

    def rows(
        self, ssn: Session, queue: str
    ) -> tuple[dict[int, list[TaskInfo]], dict[int, np.ndarray]]:
        """For every node where ``queue`` could take something: the takeable tasks, and
        their requests summed (as of the last :meth:`sync`)."""
        got = self._queues.get(queue)
        if got is None:
            got = self._queues[queue] = ({}, {}, set(range(len(ssn.nodes))))
        takeable, sums, stale = got
        if stale:
            base = self._base
            for i in sorted(stale):
                row = base.get(i)
                if row is None:
                    row = base[i] = _reclaimable(ssn, i)
                tasks = [t for t, q in row if q != queue]
                if tasks:
                    takeable[i] = tasks
                    total = np.zeros(ssn.space.size)
                    for t in tasks:
                        total += t.resreq
                    sums[i] = total
                else:
                    takeable.pop(i, None)
                    sums.pop(i, None)
            stale.clear()
        return takeable, sums

    def ordered(self, ssn: Session, reclaimer: TaskInfo, queue: str, i: int) -> list[TaskInfo]:
        """The takeable tasks on node ``i`` in victim order (``reclaimer`` is a task of
        ``queue``), worked out only for nodes that get that far."""
        got = self._ordered.get((queue, i))
        if got is None:
            got = self._ordered[(queue, i)] = ev.in_victim_order(
                ssn, self.rows(ssn, queue)[0].get(i, ()), reclaimer, self._keys
            )
        return got


def _reclaimable(ssn: Session, i: int) -> list[tuple[TaskInfo, str]]:
    """The Running, preemptable tasks on node ``i`` whose queues may be reclaimed from,
    with their queues: what any queue but their own could take there."""
    out = []
    jobs, queues = ssn.jobs, ssn.queues
    for t in ssn.nodes.tasks[i].values():
        if t.status != TaskStatus.RUNNING or not t.preemptable:
            continue
        tj = jobs.get(t.job or "")
        if tj is None or not queues[tj.queue].reclaimable:
            continue
        out.append((t, tj.queue))
    return out


def _covers(task: TaskInfo, available: np.ndarray) -> bool:
    """``available`` (the node's future idle resources plus what the victims so far
    free) holds the task's request."""
    return fits_one(task.init_resreq, available)


def share_shortfall(ssn: Session, queue: QueueInfo, job: JobInfo) -> str:
    """Why ``job``'s turn cannot end pipelined whatever reclaim evicts, proven before
    it is tried ("" when it is not proven).

    A turn asks ``preemptive`` before each task, and only the tasks it pipelines add
    to the queue's allocation (what it evicts belongs to other queues). When the
    job's pending tasks ask alike, every ``preemptive`` function says how many of
    them in a row it would let through (facet ``run``, as proportion's does), and
    that is fewer than the job needs to be pipelined (gang's ``short``), the turn
    pipelines at most that many, is not pipelined, and gives everything back: no
    decision differs from not trying it. The search is skipped (on a cluster where a
    queue's deserved share is smaller than its gangs, these are reclaim's costliest
    turns: each pipelines what it can before giving it back) and the job is told what
    stops it: its queue's share, not the nodes.

    A queue that lets none through is left to the turn, whose first task says so as
    cheaply."""
    todo = ev.pending_tasks(job)
    if len(todo) < 2:
        return ""
    first = todo[0]
    for t in todo:
        if t.resreq is not first.resreq and not np.array_equal(t.resreq, first.resreq):
            return ""
    need = placements_needed(ssn, job)
    if need is None or need < 2 or need > len(todo):
        return ""
    takes = need
    limiting: list[str] = []
    for tier in ssn.hooks.chain("preemptive"):
        for plugin, fn in tier:
            run = ssn.hooks.facet("preemptive", fn, "run")
            if run is None:
                return ""
            n = run(queue, first, need)
            if n < takes:
                takes, limiting = n, [plugin]
            elif n == takes and limiting:
                limiting.append(plugin)
    if takes >= need or takes == 0:
        return ""
    return (
        f"queue {queue.name} may reclaim for at most {takes} more task(s) like "
        f"{first.name} ({', '.join(limiting)}: beyond that it would exceed its deserved "
        f"share or its capability), but the job needs {need} more to be pipelined (gang "
        f"minimum {job.min_available}), so nothing is evicted"
    )


def _not_preemptive(ssn: Session, queue: QueueInfo, task: TaskInfo) -> str:
    """Why ``queue`` may not reclaim for ``task``: the plugins whose ``preemptive``
    function said no."""
    if not queue.is_open():
        return f"queue {queue.name} is {queue.state}: it may not reclaim"
    refused = [
        plugin
        for tier in ssn.hooks.chain("preemptive")
        for plugin, fn in tier
        if not fn(queue, task)
    ]
    return (
        f"queue {queue.name} may not reclaim for task {task.name} "
        f"({', '.join(refused)}: it would exceed its deserved share or its capability)"
    )
