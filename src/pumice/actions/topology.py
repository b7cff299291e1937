"""allocate for a job with a network-topology constraint or sub-group policies.

Volcano's search, in pumice's terms. The job is tried in each HyperNode of its
*gradients* (``hypernode_gradient``: eligible HyperNodes grouped by tier, nearest tier
first; the whole cluster alone for a job without a limit). In each, the job's
sub-jobs are placed one after the other, each in turn tried in the HyperNodes of its
own gradient inside the job's HyperNode and placed, task by task over those nodes
only, until the sub-job is ready (its gang complete). Every try is a dry run, undone
afterwards. The first gradient where some HyperNode holds the job ready (or
pipelined) decides: among its HyperNodes that did, the best by the sum of the sub-jobs'
``hypernode_order`` scores (ties: the first tried), whose placements are then made
again for real. A sub-job's choice among its candidates is made the same way.

A job placed this way keeps the HyperNode it holds, so a later turn (an elastic job
above its minimum) stays within the highest HyperNode its limit allows around it.
When no HyperNode holds it, the job says which were tried and why each fell short.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pumice.actions.place import need_continue, place
from pumice.actions.room import queue_refusal
from pumice.api.hypernode import CLUSTER
from pumice.api.job import FitError, JobInfo
from pumice.api.queue import QueueInfo
from pumice.api.task import TaskInfo
from pumice.framework.session import Session
from pumice.framework.statement import ALLOCATE, Statement
from pumice.framework.topology import ALLOCATE_PURPOSE, SessionTopology, SubJob

#: How many failed HyperNodes a pending reason names before "and N more".
SHOWN = 3

Placed = list[tuple[str, TaskInfo, str]]  # (operation kind, task, node)


@dataclass(slots=True)
class Worksheet:
    """A job's pending work: per sub-job its tasks in task order (the next first), and
    the sub-jobs that must be placed for the job to reach ``minSubGroups``."""

    subjobs: list[SubJob]
    tasks: dict[str, list[TaskInfo]]
    required: set[str] = field(default_factory=set)
    #: What each sub-job needs before it is a gang, for the gradients' filter: asked
    #: for every HyperNode of a turn, the same all turn long (see ``_need_request``).
    requests: dict[str, np.ndarray] = field(default_factory=dict)

    def clone(self) -> Worksheet:
        return Worksheet(
            list(self.subjobs),
            {k: list(v) for k, v in self.tasks.items()},
            self.required,
            self.requests,
        )

    def empty(self) -> bool:
        return not self.subjobs

    def pop(self, ssn: Session) -> SubJob:
        best = 0
        for k in range(1, len(self.subjobs)):
            if _subjob_less(ssn, self.subjobs[k], self.subjobs[best], self.required):
                best = k
        return self.subjobs.pop(best)


def _subjob_less(ssn: Session, a: SubJob, b: SubJob, required: set[str]) -> bool:
    ra, rb = a.uid in required, b.uid in required
    if ra != rb:
        return ra
    r = ssn.hooks.order("subjob_order", a, b)
    if r:
        return r < 0
    if a.match_index != b.match_index:
        return a.match_index < b.match_index
    return a.uid < b.uid


def worksheet(
    ssn: Session,
    topo: SessionTopology,
    job: JobInfo,
    ordered_tasks: Callable[[list[TaskInfo]], list[TaskInfo]],
) -> Worksheet:
    """The sub-jobs of ``job`` not yet ready, with their pending tasks (best-effort
    ones left to backfill) in task order; ``ordered_tasks(tasks)`` sorts a list."""
    subjobs = topo.subjobs(job)
    ready: dict[str, int] = {}
    waiting = []
    for sj in subjobs:
        if subjob_ready(ssn, job, sj):
            ready[sj.policy] = ready.get(sj.policy, 0) + 1
        else:
            waiting.append(sj)
    mins = {p.name: p.min_groups for p in job.sub_groups}
    required: set[str] = set()

    def compare(a: SubJob, b: SubJob) -> int:
        return -1 if _subjob_less(ssn, a, b, set()) else int(_subjob_less(ssn, b, a, set()))

    order = sorted(waiting, key=functools.cmp_to_key(compare))
    for sj in order:
        if sj.policy and ready.get(sj.policy, 0) < mins.get(sj.policy, 0):
            required.add(sj.uid)
            ready[sj.policy] = ready.get(sj.policy, 0) + 1
    tasks = {}
    kept = []
    for sj in subjobs:
        todo = [t for t in sj.pending() if not t.best_effort]
        if todo:
            tasks[sj.uid] = ordered_tasks(todo)
            kept.append(sj)
    return Worksheet(kept, tasks, required)


def subjob_ready(ssn: Session, job: JobInfo, sj: SubJob) -> bool:
    if not job.sub_groups:
        return ssn.job_ready(job)
    return ssn.hooks.all("subjob_ready", sj)


def subjob_pipelined(ssn: Session, job: JobInfo, sj: SubJob) -> bool:
    if not job.sub_groups:
        return ssn.job_pipelined(job)
    return ssn.hooks.vote("subjob_pipelined", sj)


def _need_continue(job: JobInfo, sj: SubJob, failed_roles: set[str]) -> bool:
    if job.min_available == len(job.tasks) or sj.min_available >= len(sj.tasks):
        return False
    if job.sub_groups:
        return True
    return need_continue(job, failed_roles)


def _gradients(
    ssn: Session,
    limit: int | None,
    allocated: str,
    request: np.ndarray | None,
    start: str,
) -> list[list[str]]:
    got = ssn.hooks.first("hypernode_gradient", limit, allocated, request, start, ALLOCATE_PURPOSE)
    return [[start]] if got is None else got


def _discard(stmts: list[Statement]) -> None:
    for st in reversed(stmts):
        st.discard()


def _replay(ssn: Session, placed: Placed) -> Statement:
    stmt = Statement(ssn)
    for kind, task, node in placed:
        if kind == ALLOCATE:
            stmt.allocate(task, node)
        else:
            stmt.pipeline(task, node)
    return stmt


def _record(stmt: Statement) -> Placed:
    return [(op.kind, op.task, op.node) for op in stmt.operations]


@dataclass(slots=True)
class Trace:
    """What a job's tries found, for its pending reason."""

    tried: list[tuple[str, str]] = field(default_factory=list)  # (HyperNode, why)
    most: list[TaskInfo] = field(default_factory=list)  # the tasks of the fullest try
    empty: bool = False  # no HyperNode was eligible at all
    #: The most tasks a sub-job's try placed before it gave up, in the try under way.
    partial: int = 0

    def nowhere(self, hypernode: str) -> None:
        self.tried.append((hypernode, "too few idle resources for the gang"))

    def failed(self, job: JobInfo, hypernode: str, placed: Placed, need: int) -> None:
        if len(placed) > len(self.most):
            self.most = [p[1] for p in placed]
        why = f"{max(len(placed), self.partial)} of {need} needed tasks fit"
        if job.fit_errors:
            uid, err = next(iter(job.fit_errors.items()))
            name = job.tasks[uid].name if uid in job.tasks else uid
            why += f" (task {name}: {err.render()})"
        elif job.note:
            why += f" ({job.note})"
        self.tried.append((hypernode, why))


def allocate_for_job(
    ssn: Session, queue: QueueInfo, job: JobInfo, ws: Worksheet, topo: SessionTopology
) -> Statement | None:
    """The job's turn: placed in the best HyperNode of the nearest gradient that holds
    it, or not at all (then its pending reason says why). ``ws`` is left with what
    remains to place.

    Within a gradient, a job of one sub-job is tried in its HyperNodes best-promised
    first: the promise is the best score any HyperNode inside could give the sub-job
    (its terms need no try), a bound on what the try can score; once a try has scored
    more than every promise left, the rest cannot win and are not tried. The choice is
    the one trying them all makes."""
    trace = Trace()
    limit = topo.job_limit(job)
    held = topo.allocated.get(job.uid, "")
    gradients = _gradients(ssn, limit, held, job.min_resources, CLUSTER)
    trace.empty = not any(gradients)
    subjobs = topo.subjobs(job)
    before = {sj.uid: sj.allocated for sj in subjobs}
    for gradient in gradients:
        promise = _promises(ssn, ws, gradient)
        order = sorted(range(len(gradient)), key=lambda k: (-promise[k], k))
        best: tuple[int, Placed, Worksheet, float, dict[str, str]] | None = None
        # The statements of the last successful try while they are still made: kept
        # when that try is the choice, so that it need not be made again.
        live: tuple[int, list[Statement]] | None = None
        for k in order:
            if promise[k] == float("-inf"):
                trace.nowhere(gradient[k])
                continue
            if best is not None:
                if promise[k] < best[3]:
                    break
                if promise[k] == best[3] and k > best[0]:
                    continue
            if live is not None:
                _discard(live[1])
                live = None
                for sj in subjobs:
                    sj.allocated = before[sj.uid]
            got = _try_job(ssn, queue, job, ws, gradient[k], topo, trace)
            if got is not None:
                chosen = {sj.uid: sj.allocated for sj in subjobs}
                placed, w, score, stmts = got
                live = (k, stmts)
                if best is None or score > best[3] or (score == best[3] and k < best[0]):
                    best = (k, placed, w, score, chosen)
            else:
                for sj in subjobs:
                    sj.allocated = before[sj.uid]
        if best is None:
            continue
        k, placed, w, _score, chosen = best
        job.fit_errors.clear()
        job.note = ""
        if live is not None and live[0] == k:
            stmt = Statement(ssn)
            for st in live[1]:
                stmt.operations.extend(st.operations)
        else:
            if live is not None:
                _discard(live[1])
            stmt = _replay(ssn, placed)
        ws.subjobs, ws.tasks = w.subjobs, w.tasks
        ws.requests = {}  # (what remains asks otherwise)
        for sj in subjobs:
            sj.allocated = chosen[sj.uid]
        topo.allocated[job.uid] = gradient[k]
        return stmt
    _explain(job, trace, limit, held)
    return None


def _try_job(
    ssn: Session,
    queue: QueueInfo,
    job: JobInfo,
    ws: Worksheet,
    hn: str,
    topo: SessionTopology,
    trace: Trace,
) -> tuple[Placed, Worksheet, float, list[Statement]] | None:
    """One dry run of the job in HyperNode ``hn``: its placements, what would remain
    to place, its score and the statements that made them (for the caller to undo);
    None (undone, noted in ``trace``) when the job ends neither ready nor pipelined."""
    job.fit_errors.clear()
    job.note = ""
    trace.partial = 0
    need = max(job.min_available - job.ready_num() - job.waiting_num(), 1)
    w = ws.clone()
    stmts: list[Statement] = []
    score = 0.0
    while not w.empty():
        sj = w.pop(ssn)
        stmt, s = _allocate_subjob(ssn, queue, job, sj, w.tasks[sj.uid], hn, topo, trace)
        if stmt is not None and len(stmt):
            stmts.append(stmt)
            score += s
            if w.tasks[sj.uid]:
                w.subjobs.append(sj)
            if ssn.job_ready(job):
                break
    placed = [p for st in stmts for p in _record(st)]
    if placed and (ssn.job_ready(job) or ssn.job_pipelined(job)):
        return placed, w, score, stmts
    trace.failed(job, hn, placed, need)
    _discard(stmts)
    return None


def _promises(ssn: Session, ws: Worksheet, gradient: list[str]) -> list[float]:
    """Per HyperNode of ``gradient``, the most the job's try there can score; +inf
    when no bound is known (several sub-jobs: each placement moves the next one's
    scores; or a scorer that cannot say)."""
    inf = [float("inf")] * len(gradient)
    if len(ws.subjobs) != 1:
        return inf
    sj = ws.subjobs[0]
    request = ws.requests.get(sj.uid)
    if request is None:
        request = ws.requests[sj.uid] = _need_request(ssn, sj, ws.tasks[sj.uid])
    out = []
    for hn in gradient:
        inside = [n for tier in _gradients(ssn, sj.limit, sj.allocated, request, hn) for n in tier]
        if not inside:
            out.append(float("-inf"))  # the sub-job has nowhere to go: it cannot win
            continue
        parts = _parts(ssn, sj, inside)
        if parts is None:
            return inf
        packed, share = parts
        out.append(max(packed[n] + share[n] for n in inside))
    return out


def _parts(
    ssn: Session, sj: SubJob, names: list[str]
) -> tuple[dict[str, float], dict[str, float]] | None:
    """The ``hypernode_order`` terms of each HyperNode alone (see
    :meth:`pumice.plugins.network_topology._State.parts`): zero without any scorer,
    None when a scorer cannot give them."""
    fns = ssn.hooks.flat("hypernode_order")
    if not fns:
        zero = dict.fromkeys(names, 0.0)
        return zero, dict(zero)
    if len(fns) != 1 or not hasattr(fns[0], "parts"):
        return None
    return fns[0].parts(sj, names)


def _need_request(ssn: Session, sj: SubJob, tasks: list[TaskInfo]) -> np.ndarray:
    """What the sub-job needs before it is a gang: its next pending tasks up to its
    minimum (Volcano sums every pending task, which for an elastic gang asks more than
    its minimum and refuses the HyperNodes its own user guide places it in)."""
    need = sj.min_available - sj.pipelined_num()
    request = np.zeros(ssn.space.size)
    for t in tasks[:need] if need > 0 else tasks[:1]:
        request += t.init_resreq
    return request


def _allocate_subjob(
    ssn: Session,
    queue: QueueInfo,
    job: JobInfo,
    sj: SubJob,
    tasks: list[TaskInfo],
    within: str,
    topo: SessionTopology,
    trace: Trace,
) -> tuple[Statement | None, float]:
    """Place ``sj`` in the best HyperNode of its nearest gradient inside ``within``;
    ``tasks`` is left with what remains.

    The best of those where the sub-job fits is the one with the highest bin-packing
    score, then the highest share of its tasks already there, then the first; those
    terms need no try, so the HyperNodes are tried in that order and the first that
    holds the sub-job is the choice. Its score adds the share term only where another
    that holds it ties on bin packing (``hypernode_order``'s rule over the candidates
    that fit), so one such other is looked for."""
    if not tasks:
        return None, 0.0
    request = _need_request(ssn, sj, tasks)
    for gradient in _gradients(ssn, sj.limit, sj.allocated, request, within):
        parts = _parts(ssn, sj, gradient)
        got: tuple[str, Placed | Statement, list[TaskInfo], float] | None
        if parts is None:
            got = _every_candidate(ssn, queue, job, sj, tasks, gradient, topo, trace)
        else:
            got = _first_candidate(ssn, queue, job, sj, tasks, gradient, topo, parts, trace)
        if got is None:
            continue
        hn, made, left, score = got
        stmt = made if isinstance(made, Statement) else _replay(ssn, made)
        sj.allocated = topo.tree.lca(sj.allocated, hn)
        tasks[:] = left
        return stmt, score
    return None, 0.0


def _first_candidate(
    ssn: Session,
    queue: QueueInfo,
    job: JobInfo,
    sj: SubJob,
    tasks: list[TaskInfo],
    gradient: list[str],
    topo: SessionTopology,
    parts: tuple[dict[str, float], dict[str, float]],
    trace: Trace,
) -> tuple[str, Placed | Statement, list[TaskInfo], float] | None:
    """The first HyperNode (best terms first) that holds the sub-job: its placements
    (the statement itself, still made, when no tie needs looking for), what remains
    and its score."""
    packed, share = parts
    order = sorted(
        range(len(gradient)), key=lambda k: (-packed[gradient[k]], -share[gradient[k]], k)
    )
    winner: tuple[str, Placed | Statement, list[TaskInfo]] | None = None
    tied = False
    for k in order:
        hn = gradient[k]
        if winner is not None and packed[hn] != packed[winner[0]]:
            break
        left = list(tasks)
        stmt = _allocate_tasks(ssn, queue, job, sj, left, hn, topo, trace)
        if stmt is None or not len(stmt):
            continue
        if winner is not None:
            stmt.discard()
            tied = True
            break
        if share[hn] == 0:  # nothing to look for: the try stands, as made
            return hn, stmt, left, packed[hn]
        winner = (hn, _record(stmt), left)
        stmt.discard()
    if winner is None:
        return None
    hn = winner[0]
    return hn, winner[1], winner[2], packed[hn] + (share[hn] if tied else 0.0)


def _every_candidate(
    ssn: Session,
    queue: QueueInfo,
    job: JobInfo,
    sj: SubJob,
    tasks: list[TaskInfo],
    gradient: list[str],
    topo: SessionTopology,
    trace: Trace,
) -> tuple[str, Placed, list[TaskInfo], float] | None:
    found: list[tuple[str, Placed, list[TaskInfo]]] = []
    for hn in gradient:
        left = list(tasks)
        stmt = _allocate_tasks(ssn, queue, job, sj, left, hn, topo, trace)
        if stmt is not None and len(stmt):
            found.append((hn, _record(stmt), left))
            stmt.discard()
    if not found:
        return None
    names = [f[0] for f in found]
    scores = dict.fromkeys(names, 0.0)
    for fn in ssn.hooks.flat("hypernode_order"):
        for name, sc in fn(sj, names).items():
            scores[name] += sc
    best = max(range(len(found)), key=lambda k: (scores[names[k]], -k))
    hn, placed, left = found[best]
    return hn, placed, left, scores[hn]


def _allocate_tasks(
    ssn: Session,
    queue: QueueInfo,
    job: JobInfo,
    sj: SubJob,
    tasks: list[TaskInfo],
    hn: str,
    topo: SessionTopology,
    trace: Trace,
) -> Statement | None:
    """Place ``sj``'s tasks on the nodes of HyperNode ``hn`` until the sub-job is ready;
    the statement if it is ready or pipelined, else None (undone; how many it placed
    first goes to ``trace``)."""
    rows = topo.rows_of(hn)
    if rows.size == 0:
        return None
    stmt = Statement(ssn)
    held = sj.allocated
    failed_roles: set[str] = set()
    constrained = sj.topology is not None
    while tasks:
        task = tasks.pop(0)
        if not ssn.allocatable(queue, task):
            job.note = queue_refusal(queue, task, ssn.nodes)
            continue
        if task.role and task.role in failed_roles:
            job.fit_errors[task.uid] = FitError(
                0, {}, f"task {task.name} of role {task.role}: another of its role found no node"
            )
            continue
        if constrained:
            topo.domain_of_task[task.uid] = held
        if not place(ssn, stmt, job, task, rows):
            failed_roles.add(task.role)
            if _need_continue(job, sj, failed_roles):
                continue
            break
        if constrained and task.node:
            home = topo.home_of(task.node, ssn)
            if home:
                held = home if not held else topo.tree.lca(home, held)
        if subjob_ready(ssn, job, sj):
            break
    if subjob_ready(ssn, job, sj) or subjob_pipelined(ssn, job, sj):
        return stmt
    trace.partial = max(trace.partial, len(stmt))
    stmt.discard()
    return None


def _explain(job: JobInfo, trace: Trace, limit: int | None, held: str) -> None:
    """The job's note when no HyperNode held it; its fit errors are folded in."""
    job.fit_errors.clear()
    if trace.most:
        job.keep_tentative(trace.most)
    spec = job.network_topology
    what = spec.describe() if spec is not None else "its sub-group constraints"
    if trace.empty:
        where = f"tier {limit} or lower" if limit is not None else "the cluster"
        if held:
            job.note = (
                f"{what}: the job holds HyperNode {held}, and no HyperNode of {where} "
                f"around it can take more"
            )
        else:
            job.note = (
                f"{what}: no HyperNode of {where} has the idle resources for the job's minResources"
            )
        return
    shown = "; ".join(f"{hn}: {why}" for hn, why in trace.tried[:SHOWN])
    more = len(trace.tried) - SHOWN
    if more > 0:
        shown += f"; and {more} more"
    job.note = f"{what}: no HyperNode could hold the gang ({shown})"


__all__ = ["Worksheet", "allocate_for_job", "worksheet"]
