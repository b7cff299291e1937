"""What gangpreempt and gangreclaim share: eviction by whole gangs, in a domain.

``preempt`` and ``reclaim`` work task by task: for a starving gang they can evict
victims for some of its tasks and still never complete it. Volcano's ``gangpreempt``
and ``gangreclaim`` think in gangs, and so do these actions:

1. **Starving jobs** (admitted, valid, ``job_starving``) by queue order and job order,
   one statement each. The statement commits only when the job ends pipelined, and is
   discarded otherwise: nothing is evicted for a gang that would still not start.
2. **Candidate domains**: the HyperNodes the job's ``hypernode_gradient`` gives for
   eviction (widest first, at most ``maxDomains``), or the whole cluster for a job
   without a network-topology constraint.
3. **Victim bundles** in a domain: the candidates on its nodes, grouped by job. A job's
   tasks above its minimum (and above each role's and each sub-group policy's minimum)
   form a *safe* bundle, whose eviction leaves the job running; the rest form a *whole*
   bundle, which only makes sense if the whole job goes. Bundles are sorted safe first,
   then by the victim order of their jobs (or queues), then by how much of the
   preemptor's need they cover for what they break. The plugins' ``gang_evictable``
   functions decide which candidates may go: every plugin that answers may veto, in any
   tier (a guard such as ``conformance`` in the first tier does not end the question,
   as it would for ``preemptable``). A whole bundle counts only if all of its
   tasks may go, and only with ``allowWholeBundle`` (default on).
4. **A dry run**: bundles are added in order until the domain's idle and releasing
   resources, plus what the victims free, cover the gang's need. The victims are then
   evicted, and the gang's pending tasks are pipelined, sub-job by sub-job (within the
   HyperNodes of its sub-gradient when constrained), on the best nodes of the domain.
   If the gang ends pipelined, that plan stands; otherwise it is undone and the next
   bundle is added.

The nodes the gang is pipelined onto are where it starts once the victims are gone:
``allocate`` binds it in a later cycle.

pumice differs from Volcano here in one respect. In Volcano, no shipped plugin
registers the victim filter these actions ask, so they evict nothing unless a custom
plugin does. pumice's ``priority``, ``conformance``, ``proportion``, ``capacity``,
``pdb`` and ``cdp`` register it, with the rules of their ``preemptable`` /
``reclaimable`` functions. ``gang`` does not: the bundles are its rule.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pumice.actions import eviction as ev
from pumice.actions.place import choose_within
from pumice.actions.topology import Worksheet, subjob_pipelined, subjob_ready, worksheet
from pumice.api.hypernode import CLUSTER
from pumice.api.job import JobInfo
from pumice.api.queue import QueueInfo
from pumice.api.task import ALLOCATED_STATUSES, TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.framework.orders import task_key
from pumice.framework.pqueue import PriorityQueue, ordered
from pumice.framework.session import Session
from pumice.framework.statement import Statement
from pumice.framework.topology import EVICT_PURPOSE, SessionTopology, SubJob, session_topology
from pumice.framework.verdicts import timeless

SAFE, WHOLE = 0, 1
PREEMPTABLE_KEY = "volcano.sh/preemptable"


@dataclass(slots=True, frozen=True)
class EvictionContext:
    """What a ``gang_evictable`` function is told: which action, for which gang (and
    its first pending task, for functions that compare with a task), in which domain."""

    kind: str  # "gangpreempt" or "gangreclaim"
    job: JobInfo
    task: TaskInfo
    hypernode: str


@dataclass(slots=True)
class Bundle:
    """Victims of one job taken together."""

    kind: int  # SAFE or WHOLE
    job: JobInfo
    tasks: list[TaskInfo]
    local: np.ndarray = field(default_factory=lambda: np.zeros(0))
    whole_job: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def name(self) -> str:
        return "safe" if self.kind == SAFE else "whole"


def _sum(ssn: Session, tasks: list[TaskInfo]) -> np.ndarray:
    """The tasks' requests summed (read-only: one task's is its own vector)."""
    if len(tasks) == 1:
        return tasks[0].resreq
    out = np.zeros(ssn.space.size)
    for t in tasks:
        out += t.resreq
    return out


def job_bundles(
    ssn: Session, topo: SessionTopology, job: JobInfo, tasks: list[TaskInfo]
) -> list[Bundle]:
    """The bundles of ``job``'s candidate ``tasks`` (module docstring). A job already
    below its minimum is broken: evicting any of it is safe."""
    tasks = sorted(tasks, key=lambda t: (t.priority, t.uid))
    surplus = job.ready_num() - job.min_available
    if surplus < 0:
        return [Bundle(SAFE, job, tasks, _sum(ssn, tasks), np.zeros(ssn.space.size))]
    minimums = job.min_task_member
    enforce_roles = bool(minimums) and job.min_available >= sum(minimums.values())
    role_surplus: dict[str, int] = {}
    if enforce_roles:
        ready: dict[str, int] = {}
        for t in job.tasks.values():
            if (
                t.status in ALLOCATED_STATUSES
                or t.status == TaskStatus.SUCCEEDED
                or (t.status == TaskStatus.PENDING and t.best_effort)
            ):
                ready[t.role] = ready.get(t.role, 0) + 1
        role_surplus = {r: ready.get(r, 0) - n for r, n in minimums.items()}
    # Each policy's sub-groups beyond its minSubGroups (none: 0) may be given up; the
    # default sub-job ("" policy) has no minimum.
    group_mins = {p.name: p.min_groups for p in job.sub_groups}
    broken: set[str] = set()
    group_surplus: dict[str, int] = {}
    subjob_of: dict[str, SubJob] = {}
    if job.sub_groups:
        for sj in topo.subjobs(job):
            for t in sj.tasks:
                subjob_of[t.uid] = sj
            if sj.is_ready():
                group_surplus[sj.policy] = group_surplus.get(sj.policy, 0) + 1
            else:
                broken.add(sj.uid)
        for name, n in group_mins.items():
            group_surplus[name] = group_surplus.get(name, 0) - n
    safe: list[TaskInfo] = []
    whole: list[TaskInfo] = []
    for t in tasks:
        role_ok = True
        if enforce_roles and t.role in minimums:
            role_ok = role_surplus.get(t.role, 0) > 0
        group_ok = True
        held = subjob_of.get(t.uid) if job.sub_groups else None
        if job.sub_groups:
            group_ok = held is not None and (
                held.uid in broken or group_surplus.get(held.policy, 0) > 0
            )
        if surplus > 0 and role_ok and group_ok:
            safe.append(t)
            surplus -= 1
            if enforce_roles and t.role in minimums:
                role_surplus[t.role] -= 1
            if held is not None and held.uid not in broken:
                broken.add(held.uid)
                group_surplus[held.policy] = group_surplus.get(held.policy, 0) - 1
        else:
            whole.append(t)
    out = []
    if safe:
        out.append(Bundle(SAFE, job, safe, _sum(ssn, safe), np.zeros(ssn.space.size)))
    if whole:
        out.append(Bundle(WHOLE, job, whole, _sum(ssn, whole), _sum(ssn, list(job.tasks.values()))))
    return out


def rois(bundles: list[Bundle], need: np.ndarray) -> np.ndarray:
    """Per bundle, what it frees towards ``need`` (each dimension capped at the need)
    for what it breaks (the whole job's requests, uncapped): +inf for a safe bundle,
    which breaks nothing."""
    if not bundles:
        return np.zeros(0)
    dims = np.flatnonzero(need > 0)
    n = need[dims]
    local = np.array([b.local[dims] for b in bundles]).reshape(len(bundles), dims.size)
    whole = np.array([b.whole_job[dims] for b in bundles]).reshape(len(bundles), dims.size)
    got = (np.minimum(local, n) / n).sum(axis=1)
    broken = (whole / n).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(broken == 0, np.inf, got / np.where(broken == 0, 1.0, broken))


def roi(b: Bundle, need: np.ndarray) -> float:
    """:func:`rois` of one bundle."""
    return float(rois([b], need)[0])


VictimOrder = Callable[[Bundle, Bundle], bool]


def sort_bundles(
    bundles: list[Bundle],
    need: np.ndarray,
    victim_first: VictimOrder,
    victim_key: Callable[[Bundle], tuple] | None = None,
) -> list[Bundle]:
    """Safe before whole; then ``victim_first`` (whose job or queue goes first); then
    the higher return on what it breaks; then by job uid, first task, size.

    With ``victim_key`` (a sort key of the victim order, in which the *last* goes
    first), the same order from key sorts: one stable pass per criterion, the least
    significant first."""
    r = rois(bundles, need)
    at = {id(b): float(v) for b, v in zip(bundles, r, strict=True)}
    if victim_key is not None:
        out = sorted(
            bundles, key=lambda b: (b.job.uid, b.tasks[0].uid if b.tasks else "", len(b.tasks))
        )
        out.sort(key=lambda b: -at[id(b)])
        out.sort(key=victim_key, reverse=True)
        out.sort(key=lambda b: b.kind)
        return out

    def cmp(a: Bundle, b: Bundle) -> int:
        if a.kind != b.kind:
            return -1 if a.kind < b.kind else 1
        if a.job is not b.job:
            ab, ba = victim_first(a, b), victim_first(b, a)
            if ab != ba:
                return -1 if ab else 1
        ra, rb = at[id(a)], at[id(b)]
        if ra != rb:
            return -1 if ra > rb else 1
        ka = (a.job.uid, a.tasks[0].uid if a.tasks else "", len(a.tasks))
        kb = (b.job.uid, b.tasks[0].uid if b.tasks else "", len(b.tasks))
        return (ka > kb) - (ka < kb)

    return sorted(bundles, key=functools.cmp_to_key(cmp))


def allowed_bundles(bundles: list[Bundle], allowed: set[int]) -> list[Bundle]:
    """Bundles cut to the tasks the plugins allow (by ``id``): a whole bundle survives
    only whole."""
    out = []
    for b in bundles:
        kept = [t for t in b.tasks if id(t) in allowed]
        if b.kind == WHOLE:
            if len(kept) == len(b.tasks):
                out.append(b)
        elif kept:
            out.append(Bundle(SAFE, b.job, kept, _sum_like(b.local, kept), b.whole_job))
    return out


def _sum_like(like: np.ndarray, tasks: list[TaskInfo]) -> np.ndarray:
    out = np.zeros_like(like)
    for t in tasks:
        out += t.resreq
    return out


def job_preemptable(job: JobInfo) -> bool:
    """The PodGroup's ``volcano.sh/preemptable``, annotation first, then label (absent:
    yes; a value that is not a Go boolean: no)."""
    for source in (job.annotations, job.labels):
        value = source.get(PREEMPTABLE_KEY)
        if value is not None:
            return value in ("1", "t", "T", "TRUE", "true", "True")
    return True


class GangEvictionAction:
    """The shared turn of ``gangpreempt`` and ``gangreclaim``; a subclass says which
    candidates and in which order (``candidates``, ``victim_first``), and whether a
    queue may act (``queue_may``)."""

    name = ""
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ("maxDomains", "allowWholeBundle")
    #: An overused queue takes no turn (gangreclaim: it has more than its share).
    skip_overused = False

    def __init__(self, arguments: Arguments) -> None:
        most = arguments.get_int("maxDomains", 8)
        if most <= 0:  # as Volcano: an unusable value falls back to the default
            most = 8
        self.max_domains = most
        self.whole = arguments.get_bool("allowWholeBundle", True)

    # -- what a subclass decides ---------------------------------------------------------

    def queue_may(self, ssn: Session, queue: QueueInfo, pending: list[TaskInfo]) -> str:
        """Why ``queue`` may not act now ("" when it may)."""
        return ""

    def candidates(self, ssn: Session, job: JobInfo, task: TaskInfo) -> bool:
        raise NotImplementedError

    def victim_first(self, ssn: Session, job: JobInfo) -> Callable[[Bundle, Bundle], bool]:
        raise NotImplementedError

    def victim_key(self, ssn: Session, job: JobInfo) -> Callable[[Bundle], tuple] | None:
        """A sort key of the victim order, the last going first (None: compare)."""
        return None

    # -- the action ---------------------------------------------------------------------

    def execute(self, ssn: Session) -> None:
        topo = session_topology(ssn)
        queues: PriorityQueue[QueueInfo] = PriorityQueue(ssn.queue_less)
        seen: set[str] = set()
        starving: dict[str, PriorityQueue[JobInfo]] = {}
        for uid in sorted(ssn.jobs):
            job = ssn.jobs[uid]
            if job.is_pending() or uid in ssn.invalid or job.queue not in ssn.queues:
                continue
            if job.queue not in seen:
                seen.add(job.queue)
                queues.push(ssn.queues[job.queue])
            if ssn.job_starving(job):
                starving.setdefault(job.queue, PriorityQueue(ssn.job_less)).push(job)
        while not queues.empty():
            queue = queues.pop()
            jobs = starving.get(queue.name)
            if jobs is None:
                continue
            if self.skip_overused and ssn.overused(queue):
                while not jobs.empty():
                    ev.could_not_help(ssn, self.name, jobs.pop(), f"queue {queue.name} is overused")
                continue
            while not jobs.empty():
                job = jobs.pop()
                stmt = Statement(ssn)
                why = self._in_domains(ssn, topo, stmt, queue, job)
                if ssn.job_pipelined(job) and not why:
                    stmt.commit()
                else:
                    stmt.discard()
                    ev.could_not_help(ssn, self.name, job, why or "the gang would still not start")

    def _pending(
        self, ssn: Session, topo: SessionTopology, job: JobInfo
    ) -> tuple[Worksheet, list[TaskInfo]]:
        """The gang's worksheet and the tasks to make room for: all its pending ones at
        start-up, those of its first sub-job once it runs."""

        def in_order(todo: list[TaskInfo]) -> list[TaskInfo]:
            heap = ordered(ssn.task_less, task_key(ssn, todo) if len(todo) > 1 else None, todo)
            return [heap.pop() for _ in range(len(todo))]

        ws = worksheet(ssn, topo, job, in_order)
        if ws.empty():
            return ws, []
        if ssn.job_ready(job):
            w = ws.clone()
            first = w.pop(ssn)
            return ws, list(ws.tasks[first.uid])
        w = ws.clone()
        out: list[TaskInfo] = []
        while not w.empty():
            sj = w.pop(ssn)
            out.extend(ws.tasks[sj.uid])
        return ws, out

    def _domains(self, ssn: Session, topo: SessionTopology, job: JobInfo) -> list[str]:
        limit = topo.job_limit(job)
        held = topo.allocated.get(job.uid, "")
        got = ssn.hooks.first(
            "hypernode_gradient", limit, held, job.min_resources, CLUSTER, EVICT_PURPOSE
        )
        gradients = [[CLUSTER]] if got is None else got
        out: list[str] = []
        for names in gradients:
            for name in names:
                if name not in out:
                    out.append(name)
                    if len(out) >= self.max_domains:
                        return out
        if not out and job.network_topology is None and not job.sub_groups:
            out.append(CLUSTER)
        return out

    def _in_domains(
        self, ssn: Session, topo: SessionTopology, stmt: Statement, queue: QueueInfo, job: JobInfo
    ) -> str:
        """Evict and pipeline for ``job`` in the first domain where a plan works; why
        not ("" when one did)."""
        ws, pending = self._pending(ssn, topo, job)
        if not pending:
            return "it has no pending task that requests resources"
        refusal = self.queue_may(ssn, queue, pending)
        if refusal:
            return refusal
        need = np.zeros(ssn.space.size)
        for t in pending:
            need += t.init_resreq
        domains = self._domains(ssn, topo, job)
        if not domains:
            return "no HyperNode its constraint allows could ever hold the gang"
        why = ""
        nodes = ssn.nodes
        for domain in domains:
            rows = topo.rows_of(domain)
            if rows.size == 0:
                continue
            bundles, why_not, rule = self._bundles(ssn, topo, job, pending[0], need, domain, rows)
            if not bundles:
                why = why or why_not
                continue
            # What the domain can take once the victims go, at most: Volcano sums idle
            # and releasing resources; what is already pipelined there cannot be had
            # (a plan short of it would fail), so it is left out, which only skips
            # plans bound to fail.
            room = nodes.future_idle(rows).sum(axis=0)
            chosen: list[tuple[Bundle, TaskInfo]] = []
            freed = np.zeros(ssn.space.size)
            for b in bundles:
                chosen.extend((b, t) for t in b.tasks)
                freed = freed + b.local
                if not np.all(need <= room + freed + 1e-9):
                    why = f"in {self._where(domain)}, all the victims allowed free too little"
                    continue
                failed = self._plan(ssn, stmt, queue, job, ws, domain, chosen, rule)
                if not failed:
                    return ""
                why = failed
        return why or "no domain holds victims the plugins allow"

    @staticmethod
    def _where(domain: str) -> str:
        return "the cluster" if domain == CLUSTER else f"HyperNode {domain}"

    def _bundles(
        self,
        ssn: Session,
        topo: SessionTopology,
        job: JobInfo,
        first: TaskInfo,
        need: np.ndarray,
        domain: str,
        rows: np.ndarray,
    ) -> tuple[list[Bundle], str, str]:
        """The domain's victim bundles in order, the plugins allowing; else why none
        (and the rule that decided, for the audit)."""
        by_job: dict[str, list[TaskInfo]] = {}
        nodes = ssn.nodes
        for i in rows.tolist():
            for t in nodes.tasks[i].values():
                if not t.preemptable or t.job is None or t.job == job.uid:
                    continue
                victim = ssn.jobs.get(t.job)
                if victim is None or not job_preemptable(victim):
                    continue
                if self.candidates(ssn, job, t):
                    by_job.setdefault(t.job, []).append(t)
        where = self._where(domain)
        if not by_job:
            return [], f"in {where}, no running task it may take", ""
        bundles: list[Bundle] = []
        for uid in sorted(by_job):
            bundles.extend(job_bundles(ssn, topo, ssn.jobs[uid], by_job[uid]))
        order = self.victim_first(ssn, job)
        key = self.victim_key(ssn, job)
        bundles = sort_bundles(bundles, need, order, key)
        flat = [t for b in bundles for t in b.tasks]
        ctx = EvictionContext(self.name, job, first, domain)
        allowed, deciders = ssn.hooks.filter("gang_evictable", ctx, flat)
        rule = ev.deciders_text(ssn, "gang_evictable", deciders)
        if not allowed:
            return [], f"in {where}, {rule} allows no victim", rule
        if len(allowed) == len(flat):  # all allowed: the same bundles, in the same order
            valid = bundles
        else:
            valid = sort_bundles(
                allowed_bundles(bundles, {id(t) for t in allowed}), need, order, key
            )
        picked = [b for b in valid if b.kind == SAFE or self.whole]
        if not picked:
            why = "only whole gangs could go, and allowWholeBundle is off"
            if not valid:
                why = "the victims allowed would break gangs the plugins keep whole"
            return [], f"in {where}, {why}", rule
        return picked, "", rule

    def _plan(
        self,
        ssn: Session,
        stmt: Statement,
        queue: QueueInfo,
        job: JobInfo,
        ws: Worksheet,
        domain: str,
        victims: list[tuple[Bundle, TaskInfo]],
        rule: str,
    ) -> str:
        """Evict ``victims`` and pipeline the gang within ``domain``; "" when the gang
        ends pipelined (the operations stay in ``stmt``), else why not (undone)."""
        mark = stmt.mark()
        was_ready = ssn.job_ready(job)
        topo = session_topology(ssn)
        preemptor = next(iter(ws.tasks.values()))[0]
        for b, t in victims:
            audit = ev.record(
                ssn, self.name, "evict", preemptor, t.node or "",
                f"evicted with its {b.name} bundle so that gang {job.uid} starts in "
                f"{self._where(domain)} ({rule})",
                victim=t, domain=domain, bundle=b.name,
            )  # fmt: skip
            stmt.evict(t, self.name, audit)
        w = ws.clone()
        pipelined = False
        constrained = job.network_topology is not None or bool(job.sub_groups)
        while not w.empty():
            sj = w.pop(ssn)
            tasks = w.tasks.get(sj.uid) or []
            if not tasks:
                continue
            places = [domain]
            if constrained and sj.limit is not None:
                request = np.zeros(ssn.space.size)
                for t in tasks:
                    request += t.init_resreq
                got = ssn.hooks.first(
                    "hypernode_gradient", sj.limit, sj.allocated, request, domain, EVICT_PURPOSE
                )
                places = [n for row in got for n in row] if got is not None else [domain]
            won = False
            for hn in places:
                if self._trial(ssn, stmt, queue, job, sj, tasks, topo.rows_of(hn)):
                    won = True
                    break
            if not won:
                stmt.rollback(mark)
                where = self._where(domain)
                return f"in {where}, the gang's pods find no nodes even with the victims gone"
            pipelined = ssn.job_pipelined(job)
            if was_ready or pipelined:
                break
        if not pipelined:
            stmt.rollback(mark)
            return f"in {self._where(domain)}, the gang would still not be complete"
        return ""

    def _trial(
        self,
        ssn: Session,
        stmt: Statement,
        queue: QueueInfo,
        job: JobInfo,
        sj: SubJob,
        tasks: list[TaskInfo],
        rows: np.ndarray,
    ) -> bool:
        """Pipeline every one of ``tasks`` on the best nodes of ``rows``; False (undone)
        when one finds none, or the sub-job is then neither ready nor pipelined."""
        mark = stmt.mark()
        for task in tasks:
            if not ssn.allocatable(queue, task):
                stmt.rollback(mark)
                return False
            got = choose_within(ssn, job, task, rows)
            if got is None:
                stmt.rollback(mark)
                return False
            stmt.pipeline(task, ssn.nodes.names[got[0]])
        if stmt.mark() == mark or not (
            subjob_ready(ssn, job, sj) or subjob_pipelined(ssn, job, sj)
        ):
            stmt.rollback(mark)
            return False
        return True


__all__ = ["Bundle", "EvictionContext", "GangEvictionAction", "job_bundles", "roi", "sort_bundles"]
