"""The line of waiting jobs: every job a cycle leaves waiting, in the order the
scheduler tries them, with the stage that stopped it.

The order is the one allocate follows, as the cycle ran it:

1. the admitted jobs allocate gave a turn, in the order of their first turn. Allocate
   serves queues in queue order (proportion's share, queue priority), which changes as
   each queue is served, and the jobs of a queue in job order (priority, gang, drf);
   a cycle on the same cluster state gives its turns in the same order again, so this
   is the order of the next cycle for as long as nothing changes;
2. the admitted jobs allocate gave no turn (their queue had used its share when its
   turn came), then the jobs waiting for admission (the enqueue action admits them in
   the same orders), each group by queue order as the cycle ended, then job order;
3. the jobs that cannot be scheduled as they are (too few pods for their gang, an
   unknown queue), by name.

A job's position in its queue counts only the jobs of that queue.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cmp_to_key
from typing import Any

from pumice.api.job import JobInfo
from pumice.framework.decisions import Waiting
from pumice.framework.orders import job_key
from pumice.framework.session import Session
from pumice.framework.status import ENQUEUE, NOT_SCHEDULABLE


def line_up(ssn: Session) -> None:
    """Write ``ssn.decisions.waiting`` (a closer, after the pending explanations): one
    record per job in ``decisions.pending``, in line order (see the module's
    docstring)."""
    pending = ssn.decisions.pending
    stages = ssn.stages
    jobs = ssn.jobs
    line: list[Waiting] = []
    seen: set[str] = set()
    for uid in ssn.turns:
        if uid in seen or uid not in pending:
            continue
        seen.add(uid)
        job = jobs[uid]
        line.append(Waiting(uid, job.queue, job.priority, stages.get(uid, "")))
    if len(seen) == len(pending):
        ssn.decisions.waiting = line
        return
    later: list[JobInfo] = []
    unknown: list[str] = []
    for uid in pending:
        if uid in seen:
            continue
        job = jobs.get(uid)
        if job is None or stages.get(uid) == NOT_SCHEDULABLE:
            unknown.append(uid)
        else:
            later.append(job)
    if later:
        rank = _queue_ranks(ssn, {j.queue for j in later})
        order = _job_order(ssn)
        later.sort(key=lambda j: (stages.get(j.uid) == ENQUEUE, rank[j.queue], order(j)))
        line.extend(Waiting(j.uid, j.queue, j.priority, stages.get(j.uid, "")) for j in later)
    for uid in sorted(unknown):
        job = jobs.get(uid)
        queue, priority = (job.queue, job.priority) if job is not None else ("", 0)
        line.append(Waiting(uid, queue, priority, stages.get(uid, NOT_SCHEDULABLE)))
    ssn.decisions.waiting = line


def _queue_ranks(ssn: Session, names: set[str]) -> dict[str, int]:
    """Each named queue's place in queue order (a queue the session does not know
    comes last)."""
    known = [ssn.queues[n] for n in names if n in ssn.queues]
    known.sort(key=cmp_to_key(lambda a, b: -1 if ssn.queue_less(a, b) else (
        1 if ssn.queue_less(b, a) else 0)))  # fmt: skip
    rank = {q.name: i for i, q in enumerate(known)}
    return {n: rank.get(n, len(known)) for n in names}


def _job_order(ssn: Session) -> Callable[[JobInfo], Any]:
    """A sort key for job order: the plugins' key where they offer one, else their
    comparison."""
    key = job_key(ssn)
    if key is not None:
        return key
    return cmp_to_key(lambda a, b: -1 if ssn.job_less(a, b) else (1 if ssn.job_less(b, a) else 0))


__all__ = ["line_up"]
