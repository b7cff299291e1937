"""reclaim: a queue below its deserved share takes back resources other queues borrowed.

Follows Volcano's ``reclaim`` action (v1.13):

1. Admitted (not Pending), starving jobs are the reclaimers, grouped by queue; queues
   are served in queue order and an ``overused`` queue is skipped.
2. Each job of the queue, in job order, gets one statement: its pending tasks, in task
   order, reclaim while the job is starving. A task with ``preemptionPolicy: Never``
   does not reclaim; nor does a task its queue may not reclaim for (``preemptive``:
   the queue is open and would stay within its deserved share).
3. For one task, nodes the predicates allow are tried in name order. Candidates are the
   Running, ``volcano.sh/preemptable`` tasks of *other* queues that are
   ``reclaimable`` (``spec.reclaimable`` not false); the ``reclaimable`` functions
   choose the victims (proportion / capacity: only from queues above their deserved
   share, never below a guarantee; gang: never below minMember; conformance: never
   critical pods; pdb and cdp guards). If victims and the node's future idle resources
   can hold the task, victims are evicted in victim order until they have freed as
   much as the task requests, and the task is pipelined onto the node.
4. The job's statement is committed if the job is pipelined, discarded otherwise.

As in Volcano, the evictions made on a node that could not hold the task are kept while
the next nodes are tried; but when no node works out, pumice undoes them all (Volcano
leaves them in the job's statement): it never evicts for a task it does not place.
"""

from __future__ import annotations

from pumice.actions import eviction as ev
from pumice.api.job import JobInfo
from pumice.api.queue import QueueInfo
from pumice.api.task import TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.framework.fit import fits
from pumice.framework.pqueue import PriorityQueue
from pumice.framework.session import Session
from pumice.framework.statement import Statement

ACTION = "reclaim"


class ReclaimAction:
    name = ACTION
    argument_keys = ()

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments

    def execute(self, ssn: Session) -> None:
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
                jobs_of.setdefault(job.queue, PriorityQueue(ssn.job_less)).push(job)
                tasks_of[job.uid] = PriorityQueue(ssn.task_less, ev.pending_tasks(job))
        while not queues.empty():
            queue = queues.pop()
            if ssn.overused(queue):
                continue
            jobs = jobs_of.get(queue.name)
            while jobs is not None and not jobs.empty():
                job = jobs.pop()
                stmt = Statement(ssn)
                tasks = tasks_of[job.uid]
                while ssn.job_starving(job) and not tasks.empty():
                    task = tasks.pop()
                    if task.preemption_policy == "Never":
                        continue
                    if not ssn.preemptive(queue, task):
                        continue
                    self.reclaim_for(ssn, stmt, task, job)
                ev.settle(ssn, stmt, job, ACTION)

    def reclaim_for(self, ssn: Session, stmt: Statement, task: TaskInfo, job: JobInfo) -> bool:
        """Try to pipeline ``task`` onto resources reclaimed from other queues."""
        start = stmt.mark()
        found: dict[int, list[TaskInfo]] = {}
        for i in ev.candidate_nodes(ssn, task):
            reclaimees = []
            for t in ssn.nodes.tasks[i].values():
                if t.status != TaskStatus.RUNNING or not t.preemptable:
                    continue
                tj = ssn.jobs.get(t.job or "")
                if tj is None or tj.queue == job.queue:
                    continue
                if not ssn.queues[tj.queue].reclaimable:
                    continue
                reclaimees.append(t)
            if reclaimees:
                found[i] = reclaimees
        # Only nodes where all the reclaimees together would fit the task (see
        # ev.room_with_all); evictions on one node change only that node, so the test
        # made here still holds when the loop reaches a node.
        room = set(ev.room_with_all(ssn, task, found))
        for i in found:
            if i not in room:
                continue
            name = ssn.nodes.names[i]
            reclaimees = ev.in_victim_order(ssn, found[i], task)
            victims, deciders = ssn.hooks.victims("reclaimable", task, reclaimees)
            if not victims or not ev.victims_could_fit(ssn, task, i, victims):
                continue
            why = ev.deciders_text(ssn, "reclaimable", deciders)
            reclaimed = ssn.space.zeros()
            pending = ev.victim_queue(ssn, victims, task)
            while not pending.empty():
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
                reclaimed = reclaimed + v.resreq
                if _covers(task, reclaimed):
                    break
            if not _covers(task, reclaimed):
                continue  # Volcano keeps these evictions and tries the next node
            stmt.pipeline(
                task,
                name,
                ev.record(
                    ssn,
                    ACTION,
                    "pipeline",
                    task,
                    name,
                    f"pipelined onto resources reclaimed for queue {job.queue}",
                ),
            )
            return True
        # pumice: no node worked out, so nothing is evicted for this task.
        stmt.rollback(start)
        return False


def _covers(task: TaskInfo, reclaimed) -> bool:
    """What the victims freed covers the task's request (Volcano compares the request
    with the reclaimed resources alone, not with the node's idle ones)."""
    return bool(fits(task.init_resreq, reclaimed[None, :])[0])
