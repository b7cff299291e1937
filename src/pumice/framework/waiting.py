"""The line of waiting jobs: every job a cycle leaves waiting, in the order the
scheduler tries them, with the stage that stopped it.

The order is the one allocate follows, as the cycle ran it:

1. the admitted jobs allocate gave a turn, in the order of their first turn. Allocate
   serves queues in queue order (proportion's share, queue priority), which changes as
   each queue is served, and the jobs of a queue in job order (priority, gang, drf);
   a cycle on the same cluster state gives its turns in the same order again, so this
   is the order of the next cycle for as long as nothing changes;
2. the admitted jobs allocate gave no turn (their queue had used its share when its
   turn came), then the jobs waiting for admission, each group by queue order as the
   cycle ended, then by priority (higher first), creation time and name: the job order
   of the priority plugin and Volcano's fallback. The finer job order functions (gang's
   readiness, drf's share) are not asked for these jobs: they are worked out when a job
   reaches allocate, and asking them for a whole refused backlog in every cycle would
   cost more than the cycle spends on it (enqueue refuses such a backlog without
   ordering it);
3. the jobs that cannot be scheduled as they are (too few pods for their gang, an
   unknown queue), by name.

A job's position in its queue counts only the jobs of that queue.
"""

from __future__ import annotations

from functools import cmp_to_key

from pumice.api.job import JobInfo
from pumice.framework.decisions import Waiting
from pumice.framework.session import Session
from pumice.framework.status import ENQUEUE, NOT_SCHEDULABLE


def line_up(ssn: Session) -> None:
    """Write ``ssn.decisions.waiting`` (a closer, after the pending explanations): one
    record per job in ``decisions.pending``, in line order (see the module's
    docstring)."""
    pending = ssn.decisions.pending
    stages = ssn.stages
    if ssn.refused_parked is not None:  # (enqueue refused them: see explain_pending)
        stages = {**dict.fromkeys(ssn.refused_parked, ENQUEUE), **stages}
    jobs = ssn.jobs
    line: list[Waiting] = []
    seen: set[str] = set()
    for uid in ssn.turns:
        if uid in seen or uid not in pending:
            continue
        seen.add(uid)
        turn = jobs[uid]
        line.append(Waiting(uid, turn.queue, turn.priority, stages.get(uid, "")))
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
        later.sort(
            key=lambda j: (
                stages.get(j.uid) == ENQUEUE,
                rank[j.queue],
                -j.priority,
                j.creation,
                j.uid,
            )
        )
        line.extend(Waiting(j.uid, j.queue, j.priority, stages.get(j.uid, "")) for j in later)
    for uid in sorted(unknown):
        job = jobs.get(uid)
        if job is not None:
            queue, priority = job.queue, job.priority
        else:
            queue, priority = ssn.snapshot.blocked_queues.get(uid, ""), 0
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


__all__ = ["line_up"]
