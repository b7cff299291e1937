"""preempt: a starving job takes resources from lower-priority work in its own queue.

Follows Volcano's ``preempt`` action (current master):

1. Jobs that are admitted (not Pending) and starving (``job_starving``) are the
   preemptors, grouped by queue; each keeps its pending tasks in task order.
2. *Between jobs*, queue by queue: the first job in job order preempts task after task
   while it is starving; victims are the Bound/Running tasks of *other* jobs of the
   same queue that are ``volcano.sh/preemptable`` and that the ``preemptable``
   functions allow (a best-effort preemptor takes only best-effort victims). The job's
   statement is committed only if the job is then pipelined (``job_pipelined``);
   otherwise it is discarded and nothing is evicted.
3. *Within a job*, then, for the same queue: each starving job's pending tasks may take
   from the job's own lower-priority tasks, one committed statement per task, until
   one fails.

For one preemptor task (``preempt``): a pod with ``preemptionPolicy: Never`` never
preempts. Candidate nodes are those the predicates allow apart from what eviction
resolves (free resources, host ports); they are tried best score first. On a node, the
victims are evicted in victim order (lowest job / task order first) until the task fits
the node's future idle resources, its queue may take it (``allocatable``) and the
predicates pass with the evicted pods gone (a host port freed); the task is then
pipelined onto the node and that node's evictions are kept. A node that cannot be made
to fit gives its evictions back before the next node is tried (Volcano's per-node
statement): only the evictions on the node finally chosen are committed.

Inter-pod anti-affinity is resolvable by eviction in kube-scheduler, but Volcano's
normal preempt asks the predicates after evicting with the inter-pod state it computed
before: a node where the preemptor's anti-affinity (or an existing pod's) refuses it is
never made to fit, so pumice passes it over. The topology-aware mode (below) simulates
the removals, as kube-scheduler does, when the predicates plugin's ``enablePreemptable``
or ``enabledAllocatable`` is on (Volcano calls its ``SimulateRemoveTask`` only then):
such a node is a candidate, and a victim the anti-affinity is about cannot be
reprieved. A required affinity refusal is never
resolvable.

When no node works out, the job's pending explanation and the audit (a ``failed``
record) say why, node by node: nothing to evict there, too little room even with every
candidate gone, the plugin that allowed no victim (gang: the jobs at their minimum),
the queue's share, or a predicate that eviction does not clear.

``enableTopologyAwarePreemption: true`` switches to Volcano's dry-run mode: on up to
``minCandidateNodesPercentage`` % of the candidate nodes (at least
``minCandidateNodesAbsolute``, at most ``maxCandidateNodesAbsolute``) the smallest
victim set is found (evict in victim order until the task fits, then reprieve, the
last evicted first, every victim that is not needed), and the node whose victims do
the least damage wins: the lowest highest-priority victim, then the lowest sum of
priorities, then the fewest victims, then the latest-started victims. Volcano starts
the scan at a random node; pumice starts at the first.

pumice extension: ``evictBrokenGangsWhole: true`` evicts the rest of a gang that a
victim set would take below its minMember (the gang cannot run anyway); by default, as
in Volcano, only the victims needed are evicted and the audit says which gang broke.
"""

from __future__ import annotations

from collections.abc import Callable

from pumice.actions import eviction as ev
from pumice.api.job import JobInfo
from pumice.api.queue import QueueInfo
from pumice.api.task import TaskInfo
from pumice.conf.arguments import Arguments
from pumice.framework.pqueue import PriorityQueue
from pumice.framework.session import Session
from pumice.framework.statement import Statement
from pumice.framework.verdicts import timeless

ACTION = "preempt"
MAX_INT32 = 2**31 - 1
#: A node where a preemptor could go: (row, victims in order, the plugins that decided).
_Candidate = tuple[int, list[TaskInfo], list[str]]


class PreemptAction:
    name = ACTION
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = (
        "enableTopologyAwarePreemption",
        "minCandidateNodesPercentage",
        "minCandidateNodesAbsolute",
        "maxCandidateNodesAbsolute",
        "evictBrokenGangsWhole",
    )

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        self.topology_aware = arguments.get_bool("enableTopologyAwarePreemption", False)
        self.min_pct = arguments.get_int("minCandidateNodesPercentage", 10)
        self.min_abs = arguments.get_int("minCandidateNodesAbsolute", 1)
        self.max_abs = arguments.get_int("maxCandidateNodesAbsolute", 100)
        self.whole_gangs = arguments.get_bool("evictBrokenGangsWhole", False)
        self._keys = ev.VictimKeys()  # (kept per session and state: see its docstring)

    # -- the action ---------------------------------------------------------------------

    def execute(self, ssn: Session) -> None:
        preemptors: dict[str, PriorityQueue[JobInfo]] = {}
        tasks_of: dict[str, PriorityQueue[TaskInfo]] = {}
        under_request: dict[str, list[JobInfo]] = {}
        for uid in sorted(ssn.jobs):
            job = ssn.jobs[uid]
            if job.is_pending() or job.queue not in ssn.queues or uid in ssn.invalid:
                continue
            if ssn.job_starving(job):
                refusal = ev.topology_refusal(ssn, job)
                if refusal:
                    ev.could_not_help(ssn, ACTION, job, refusal)
                    continue
                preemptors.setdefault(job.queue, PriorityQueue(ssn.job_less)).push(job)
                under_request.setdefault(job.queue, []).append(job)
                tasks_of[job.uid] = PriorityQueue(ssn.task_less, ev.pending_tasks(job))
        # Volcano walks a Go map (random order); pumice serves queues in queue order.
        order = PriorityQueue(ssn.queue_less, (ssn.queues[q] for q in preemptors))
        hopeless = ev.Hopeless("preemptable")
        while not order.empty():
            queue = order.pop()
            self._between_jobs(ssn, preemptors[queue.name], tasks_of, hopeless)
            self._within_jobs(ssn, under_request[queue.name])

    def _between_jobs(
        self,
        ssn: Session,
        jobs: PriorityQueue[JobInfo],
        tasks_of: dict[str, PriorityQueue[TaskInfo]],
        hopeless: ev.Hopeless,
    ) -> None:
        while not jobs.empty():
            job = jobs.pop()
            stmt = Statement(ssn)
            tasks = tasks_of[job.uid]
            first_miss: ev.Misses | None = None
            placed = 0
            while ssn.job_starving(job) and not tasks.empty():
                preemptor = tasks.pop()
                key = hopeless.key(ssn, job, preemptor)
                known = hopeless.recall(ssn, key, preemptor, first_miss is None)
                if known is not None:  # (a task like it found nothing as things stand)
                    if first_miss is None:
                        first_miss = known
                    continue

                def other_jobs(t: TaskInfo, p: TaskInfo = preemptor, j: JobInfo = job) -> bool:
                    if t.status not in ev.PREEMPTABLE_STATUSES:
                        return False
                    if p.best_effort and not t.best_effort:
                        return False
                    if not t.preemptable:
                        return False
                    tj = ssn.jobs.get(t.job or "")
                    return tj is not None and tj.queue == j.queue and t.job != p.job

                misses = ev.Misses(preemptor) if first_miss is None else ev.Unheard(preemptor)
                if self.preempt(ssn, stmt, preemptor, other_jobs, misses):
                    placed += 1
                    continue
                hopeless.keep(ssn, key, misses)
                if first_miss is None:
                    first_miss = misses
            ev.conclude_turn(ssn, stmt, job, ACTION, placed, first_miss)

    def _within_jobs(self, ssn: Session, under_request: list[JobInfo]) -> None:
        for job in under_request:
            tasks = PriorityQueue(ssn.task_less, ev.pending_tasks(job))
            while not tasks.empty():
                preemptor = tasks.pop()

                def same_job(t: TaskInfo, p: TaskInfo = preemptor) -> bool:
                    if t.status not in ev.PREEMPTABLE_STATUSES:
                        return False
                    if p.best_effort and not t.best_effort:
                        return False
                    return t.preemptable and t.job == p.job

                stmt = Statement(ssn)
                if not self.preempt(ssn, stmt, preemptor, same_job):
                    stmt.discard()
                    break
                stmt.commit()

    # -- one preemptor ------------------------------------------------------------------

    def preempt(
        self,
        ssn: Session,
        stmt: Statement,
        preemptor: TaskInfo,
        keep: Callable[[TaskInfo], bool],
        misses: ev.Misses | None = None,
    ) -> bool:
        """Try to place ``preemptor`` by evicting tasks ``keep`` allows; True if it was
        pipelined. ``misses``, when given, is told why each node did not work out."""
        if misses is None:
            misses = ev.Unheard(preemptor)
        if preemptor.preemption_policy == "Never":
            misses.whole = f"task {preemptor.name} has preemptionPolicy: Never"
            return False
        job = ssn.jobs.get(preemptor.job or "")
        if job is None:
            return False
        nodes = ev.candidate_nodes(ssn, preemptor, resolve_anti_affinity=self.topology_aware)
        if not nodes:
            misses.whole = ev.no_node_text(ssn, preemptor, self.topology_aware)
            return False
        if self.topology_aware:
            return self._dry_run(ssn, stmt, preemptor, job, keep, nodes, misses)
        queue = ssn.queues[job.queue]
        # A node where even evicting every candidate would leave too little room cannot
        # work with any subset the preemptable functions allow: pass it over before
        # ordering and asking them. (Each node gives back its evictions when it does not
        # work out, so the test made here holds while the loop below runs.) Most
        # preemptors find no such node.
        cands = {i: [t for t in ssn.nodes.tasks[i].values() if keep(t)] for i in nodes}
        possible = {i: cands[i] for i in ev.room_with_all(ssn, preemptor, cands)}
        if not possible:
            self._no_room(misses, nodes, cands)
            return False

        def fits(i: int) -> bool:
            # The candidates passed anti-affinity with every pod present: evictions can
            # only have freed a host port.
            return (
                ssn.allocatable(queue, preemptor)
                and ev.fits_future(ssn, preemptor, i)
                and not ev.refusals_after_eviction(ssn, preemptor, i, stmt, inter_pod=False)
            )

        for i in ev.scored_nodes(ssn, preemptor, nodes):
            if i not in possible:
                misses.node(_why_no_room(cands[i]))
                continue
            name = ssn.nodes.names[i]
            candidates = ev.in_victim_order(ssn, possible[i], preemptor, self._keys)
            victims, deciders, alone = ssn.hooks.victims_detail(
                "preemptable", preemptor, candidates
            )
            if not ev.victims_could_fit(ssn, preemptor, i, victims):
                if victims:
                    misses.node("the victims allowed there would free too little")
                else:
                    misses.refused(ssn, "preemptable", preemptor, candidates, deciders, alone)
                continue
            why = ev.deciders_text(ssn, "preemptable", deciders)
            pending = ev.victim_queue(ssn, victims, preemptor)
            mark = stmt.mark()
            ready: dict[str, int] = {}
            while not fits(i) and not pending.empty():
                self._evict(ssn, stmt, preemptor, pending.pop(), why, ready)
            if not fits(i):
                if victims:
                    misses.node(self._why_not(ssn, queue, preemptor, i, stmt))
                else:
                    misses.refused(ssn, "preemptable", preemptor, candidates, deciders)
                stmt.rollback(mark)  # this node's evictions only: the next node starts afresh
                continue
            n = self._finish(ssn, stmt, mark, ready)
            stmt.pipeline(
                preemptor,
                name,
                ev.record(
                    ssn,
                    ACTION,
                    "pipeline",
                    preemptor,
                    name,
                    f"pipelined onto resources released by {n} eviction(s)"
                    if n
                    else "pipelined: fits the node's future idle resources",
                ),
            )
            return True
        return False

    @staticmethod
    def _no_room(misses: ev.Misses, nodes: list[int], cands: dict[int, list[TaskInfo]]) -> None:
        for i in nodes:
            misses.node(_why_no_room(cands[i]))

    @staticmethod
    def _why_not(
        ssn: Session, queue: QueueInfo, preemptor: TaskInfo, i: int, stmt: Statement
    ) -> str:
        """Why node ``i`` still does not take ``preemptor`` with every victim evicted."""
        if not ssn.allocatable(queue, preemptor):
            return (
                f"queue {queue.name} could still not take the task (allocatable), even "
                "with every victim there evicted"
            )
        if not ev.fits_future(ssn, preemptor, i):
            return "the victims allowed there would free too little"
        refusals = ev.refusals_after_eviction(ssn, preemptor, i, stmt)
        return "with the victims gone it still " + (refusals[0] if refusals else "does not fit")

    def _evict(
        self,
        ssn: Session,
        stmt: Statement,
        preemptor: TaskInfo,
        victim: TaskInfo,
        why: str,
        ready: dict[str, int],
    ) -> None:
        job = ssn.jobs.get(victim.job or "")
        if job is not None:
            ready.setdefault(job.uid, job.ready_num())
        stmt.evict(
            victim,
            ACTION,
            ev.record(
                ssn,
                ACTION,
                "evict",
                preemptor,
                victim.node or "",
                f"victim priority {victim.priority}, preemptor priority {preemptor.priority}; "
                f"allowed by {why}",
                victim,
            ),
        )

    def _finish(self, ssn: Session, stmt: Statement, mark: int, ready: dict[str, int]) -> int:
        """Note in the audit every gang the evictions since ``mark`` take below its
        minMember and, with ``evictBrokenGangsWhole``, evict the rest of it. Returns the
        number of evictions."""
        ops = [op for op in stmt.operations[mark:] if op.kind == "evict"]
        lost: dict[str, int] = {}
        for op in ops:
            if op.task.job:
                lost[op.task.job] = lost.get(op.task.job, 0) + 1
        broken = {
            uid: ssn.jobs[uid]
            for uid, n in lost.items()
            if uid in ssn.jobs and ready.get(uid, 0) - n < ssn.jobs[uid].min_available
        }
        for op in ops:
            job = broken.get(op.task.job or "")
            if job is not None and op.audit is not None:
                left = ready.get(job.uid, 0) - lost[job.uid]
                op.audit["reason"] += (
                    f"; takes gang {job.uid} below minMember ({left} of {job.min_available} "
                    "ready left)" + (", so the whole gang is evicted" if self.whole_gangs else "")
                )
        count = len(ops)
        if self.whole_gangs and ops:
            for job in broken.values():
                for t in job.with_status(*ev.PREEMPTABLE_STATUSES):
                    rec = dict(ops[0].audit or {})
                    rec.update(
                        victim=t.key,
                        victim_job=job.uid,
                        victim_priority=t.priority,
                        node=t.node or "",
                        reason=f"rest of gang {job.uid}, which this preemption takes below "
                        f"minMember {job.min_available}",
                    )
                    stmt.evict(t, ACTION, rec)
                    count += 1
        return count

    # -- Volcano's topology-aware (dry-run) mode ----------------------------------------

    def _num_candidates(self, n: int) -> int:
        k = n * self.min_pct // 100
        k = max(k, self.min_abs)
        k = min(k, self.max_abs)
        return min(k, n)

    def _dry_run(
        self,
        ssn: Session,
        stmt: Statement,
        preemptor: TaskInfo,
        job: JobInfo,
        keep: Callable[[TaskInfo], bool],
        nodes: list[int],
        misses: ev.Misses,
    ) -> bool:
        want = self._num_candidates(len(nodes))
        queue = ssn.queues[job.queue]
        found: list[_Candidate] = []
        for i in nodes:
            candidates = ev.in_victim_order(
                ssn, (t for t in ssn.nodes.tasks[i].values() if keep(t)), preemptor, self._keys
            )
            if not candidates:
                misses.node(_why_no_room(candidates))
                continue
            victims, deciders, alone = ssn.hooks.victims_detail(
                "preemptable", preemptor, candidates
            )
            if not ev.victims_could_fit(ssn, preemptor, i, victims):
                if victims:
                    misses.node("the victims allowed there would free too little")
                elif ev.victims_could_fit(ssn, preemptor, i, candidates):
                    misses.refused(ssn, "preemptable", preemptor, candidates, deciders, alone)
                else:
                    misses.node(_why_no_room(candidates))
                continue
            chosen = self._select_on_node(
                ssn, stmt, preemptor, queue, i, (candidates, victims, deciders), misses
            )
            if chosen:
                found.append((i, chosen, deciders))
                if len(found) >= want:
                    break
        if not found:
            return False
        i, victims, deciders = _least_damage(
            found, (lambda vs: len(ev.gang_breaks(ssn, vs))) if self.whole_gangs else None
        )
        name = ssn.nodes.names[i]
        mark = stmt.mark()
        ready: dict[str, int] = {}
        why = ev.deciders_text(ssn, "preemptable", deciders)
        for v in victims:
            self._evict(ssn, stmt, preemptor, v, why, ready)
        n = self._finish(ssn, stmt, mark, ready)
        stmt.pipeline(
            preemptor,
            name,
            ev.record(
                ssn,
                ACTION,
                "pipeline",
                preemptor,
                name,
                f"pipelined after {n} eviction(s), the least damaging victim set on "
                f"{len(found)} candidate node(s)",
            ),
        )
        return True

    def _select_on_node(
        self,
        ssn: Session,
        stmt: Statement,
        preemptor: TaskInfo,
        queue: QueueInfo,
        i: int,
        asked: tuple[list[TaskInfo], list[TaskInfo], list[str]],
        misses: ev.Misses,
    ) -> list[TaskInfo]:
        """The minimal victims on node ``i`` (Volcano's ``SelectVictimsOnNode``), found
        by evicting tentatively and undoing: evict in victim order until the preemptor
        fits (resources, its queue's share, and the predicates with the evicted pods
        gone: a host port, inter-pod anti-affinity), then, highest priority first, give
        back each victim the preemptor can do without. A victim that the preemptor's
        anti-affinity is about cannot be given back. ``asked`` is what the preemptable
        functions were given and what they allowed (and who decided)."""
        candidates, victims, deciders = asked
        mark = stmt.mark()

        def fits() -> bool:
            return (
                ssn.allocatable(queue, preemptor)
                and ev.fits_future(ssn, preemptor, i)
                and not ev.refusals_after_eviction(ssn, preemptor, i, stmt)
            )

        # Fitting only gets easier with more evictions (resources add up; an
        # anti-affinity or host-port refusal only goes away): if evicting every victim is
        # not enough, no subset is (one check instead of one per victim).
        if not victims:
            misses.refused(ssn, "preemptable", preemptor, candidates, deciders)
            return []
        for t in victims:
            stmt.evict(t, ACTION)
        enough = fits()
        if not enough:
            misses.node(self._why_not(ssn, queue, preemptor, i, stmt))
        stmt.rollback(mark)
        if not enough:
            return []
        ordered = sorted(victims, key=lambda t: (-t.priority, t.scheduled_at))
        pending = ev.victim_queue(ssn, ordered, preemptor)
        potential: list[TaskInfo] = []
        while not pending.empty():
            t = pending.pop()
            potential.append(t)
            stmt.evict(t, ACTION)
            if fits():
                break
        ok = bool(potential) and fits()
        stmt.rollback(mark)
        if not ok:
            return []
        # Reprieve the last evicted (the highest in victim order) first, as Volcano does.
        chosen: list[TaskInfo] = []
        for k in range(len(potential) - 1, -1, -1):
            for other in chosen + potential[:k]:
                stmt.evict(other, ACTION)
            if not fits():
                chosen.append(potential[k])
            stmt.rollback(mark)
        return chosen


def _least_damage(
    found: list[_Candidate], broken_gangs: Callable[[list[TaskInfo]], int] | None = None
) -> _Candidate:
    """Volcano's ``pickOneNodeForPreemption`` over (node, victims, deciders) candidates:
    the lowest priority of the first victim, then the lowest sum of priorities, the
    fewest victims, the latest start. With ``broken_gangs`` (pumice,
    ``evictBrokenGangsWhole``) the candidate that takes the fewest gangs below their
    minimum comes first."""

    def keys(c: _Candidate) -> tuple[int, int, int, int, float]:
        _i, victims, _why = c
        highest = victims[0].priority
        total = sum(v.priority + MAX_INT32 + 1 for v in victims)
        top_priority = max(v.priority for v in victims)
        top = [v for v in victims if v.priority == top_priority]
        earliest = min((v.scheduled_at for v in top), default=0.0)
        first = broken_gangs(victims) if broken_gangs is not None else 0
        return (first, highest, total, len(victims), -earliest)

    best = min(keys(c) for c in found)
    for c in found:
        if keys(c) == best:
            return c
    return found[0]  # pragma: no cover


def _why_no_room(candidates: list[TaskInfo]) -> str:
    if not candidates:
        return "nothing to evict there (no running, preemptable task of another job it may take)"
    return "too little room even with every task it may evict there gone"
