"""What preempt and reclaim share: candidate nodes, victim order, audit records.

Kept apart from the two actions so that each reads as the Volcano loop it follows and
nothing more. Nothing here decides; these are the questions both actions ask.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cmp_to_key
from typing import Any

import numpy as np

from pumice.api.job import JobInfo
from pumice.api.task import TaskInfo, TaskStatus
from pumice.framework.fit import fits
from pumice.framework.pqueue import PriorityQueue
from pumice.framework.session import Session
from pumice.framework.statement import Statement

#: Volcano's ``PreemptableStatus``: tasks preempt may evict.
PREEMPTABLE_STATUSES = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})


def unresolvable_blocked(ssn: Session, task: TaskInfo) -> np.ndarray | None:
    """The nodes ``task`` can never use, whatever is evicted (Volcano's
    ``PredicateForPreemptAction`` keeps only *UnschedulableAndUnresolvable* refusals:
    node selector and affinity, taints, cordons, readiness). Host-port conflicts are
    resolvable by eviction, so they are left out: the predicates see a copy of the task
    without host ports."""
    probe = task.clone()
    probe.host_ports = ()
    blocked = None
    for fn in ssn.hooks.flat("predicate"):
        b, _ = fn(probe)
        if b is not None:
            blocked = b.copy() if blocked is None else (blocked | b)
    return blocked


def candidate_nodes(ssn: Session, task: TaskInfo) -> list[int]:
    """Node indices the predicates allow for ``task``, in name order."""
    n = len(ssn.nodes)
    blocked = unresolvable_blocked(ssn, task)
    if blocked is None:
        return list(range(n))
    return [int(i) for i in np.flatnonzero(~blocked)]


def scored_nodes(ssn: Session, task: TaskInfo, nodes: list[int]) -> list[int]:
    """``nodes`` by node-order score, best first (Volcano's ``PrioritizeNodes`` +
    ``SortNodes``); equal scores keep name order, where Volcano picks at random."""
    if len(nodes) <= 1:
        return nodes
    scorers = ssn.hooks.flat("node_order")
    if not scorers:
        return nodes
    cand = np.asarray(nodes, dtype=np.intp)
    scores = np.zeros(len(cand), dtype=np.float64)
    for fn in scorers:
        scores = scores + np.asarray(fn(task, cand), dtype=np.float64)
    order = np.lexsort((cand, -scores))
    return [int(cand[i]) for i in order]


def fits_future(ssn: Session, task: TaskInfo, i: int) -> bool:
    """``task`` fits node ``i``'s future idle resources (idle + releasing - pipelined)."""
    future = ssn.nodes.idle[i] + ssn.nodes.releasing[i] - ssn.nodes.pipelined[i]
    return bool(fits(task.init_resreq, future[None, :])[0])


def victims_could_fit(ssn: Session, task: TaskInfo, i: int, victims: Iterable[TaskInfo]) -> bool:
    """Volcano's ``ValidateVictims``: future idle plus every victim covers the request."""
    future = ssn.nodes.idle[i] + ssn.nodes.releasing[i] - ssn.nodes.pipelined[i]
    for v in victims:
        future = future + v.resreq
    return bool(fits(task.init_resreq, future[None, :])[0])


def room_with_all(ssn: Session, task: TaskInfo, candidates: dict[int, list[TaskInfo]]) -> list[int]:
    """The nodes of ``candidates`` (node row -> evictable tasks) where evicting every
    candidate would make room for ``task`` (:func:`victims_could_fit` with all of them).
    Resources only add up, so on any other node no subset of the candidates passes that
    test either: callers pass those nodes over before ordering candidates and asking the
    victim functions, for one vector test over all nodes instead of one per node."""
    if not candidates:
        return []
    nodes = ssn.nodes
    rows = np.fromiter(candidates, dtype=np.intp, count=len(candidates))
    held = np.zeros((len(rows), ssn.space.size))
    for k, cands in enumerate(candidates.values()):
        row = held[k]
        for t in cands:
            row += t.resreq
    room = nodes.idle[rows] + nodes.releasing[rows] - nodes.pipelined[rows] + held
    return rows[fits(task.init_resreq, room)].tolist()


def victim_queue(ssn: Session, victims: Iterable[TaskInfo], preemptor: TaskInfo):
    """Volcano's ``BuildVictimsPriorityQueue``: the victim to evict first pops first."""
    return PriorityQueue(lambda a, b: ssn.victim_less(a, b, preemptor), victims)


def in_victim_order(ssn: Session, tasks: Iterable[TaskInfo], preemptor: TaskInfo) -> list:
    """``tasks`` sorted in the order they would be evicted.

    Volcano hands the candidates to the preemptable / reclaimable functions in Go map
    order, which is random; functions that count (gang lets a job lose tasks down to
    its minimum, in the order it meets them) then spare arbitrary tasks. pumice hands
    them over in victim order, so that what a function allows is what would be evicted
    first, and the result is reproducible."""

    def cmp(a: TaskInfo, b: TaskInfo) -> int:
        if ssn.victim_less(a, b, preemptor):
            return -1
        return 1 if ssn.victim_less(b, a, preemptor) else 0

    return sorted(tasks, key=cmp_to_key(cmp))


def tier_of(ssn: Session, plugin: str) -> int | None:
    """The 1-based tier of ``plugin`` in the configuration (for audit records)."""
    for k, tier in enumerate(ssn.config.tiers, 1):
        if any(p.name == plugin for p in tier.plugins):
            return k
    return None


def deciders_text(ssn: Session, hook: str, deciders: list[str]) -> str:
    if not deciders:
        return f"no plugin registers {hook}"
    tier = tier_of(ssn, deciders[0])
    return f"{hook}: {', '.join(deciders)} (tier {tier})"


def record(
    ssn: Session,
    action: str,
    kind: str,
    preemptor: TaskInfo,
    node: str,
    reason: str,
    victim: TaskInfo | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One audit record (``Decisions.audit``)."""
    rec: dict[str, Any] = {
        "action": action,
        "kind": kind,
        "preemptor": preemptor.job or "",
        "task": preemptor.key,
        "victim": victim.key if victim is not None else "",
        "node": node,
        "reason": reason,
    }
    if victim is not None:
        rec["victim_job"] = victim.job or ""
        rec["victim_priority"] = victim.priority
    rec.update(extra)
    return rec


def gang_breaks(ssn: Session, victims: Iterable[TaskInfo]) -> dict[str, tuple[JobInfo, int]]:
    """Jobs that the eviction of ``victims`` takes below their minMember:
    job uid -> (job, ready tasks left)."""
    lost: dict[str, int] = {}
    for v in victims:
        if v.job:
            lost[v.job] = lost.get(v.job, 0) + 1
    out: dict[str, tuple[JobInfo, int]] = {}
    for uid, n in lost.items():
        job = ssn.jobs.get(uid)
        if job is None:
            continue
        left = job.ready_num() - n
        if left < job.min_available <= job.ready_num():
            out[uid] = (job, left)
    return out


def pending_tasks(job: JobInfo) -> list[TaskInfo]:
    return job.with_status(TaskStatus.PENDING)


def settle(ssn: Session, stmt: Statement, job: JobInfo, action: str) -> bool:
    """End a preempt or reclaim turn: commit when ``job`` is pipelined, otherwise undo
    every tentative eviction and say so in the audit. Returns whether it committed."""
    if ssn.job_pipelined(job):
        stmt.commit()
        return True
    if len(stmt):
        ops = stmt.operations
        task = next((op.task for op in ops if op.kind == "pipeline"), ops[0].task)
        ssn.decisions.audit.append(
            record(
                ssn,
                action,
                "discard",
                task,
                "",
                f"job {job.uid} would still not be pipelined (gang minimum "
                f"{job.min_available}); {len(stmt)} tentative operation(s) "
                "undone, nothing evicted",
            )
        )
    stmt.discard()
    return False
