"""What preempt and reclaim share: candidate nodes, victim order, audit records, and
how they say they could not help a job.

Kept apart from the two actions so that each reads as the Volcano loop it follows and
nothing more. Nothing here decides; these are the questions both actions ask, and the
sentences their answers make (:class:`Misses`, :func:`could_not_help`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from functools import cmp_to_key
from typing import Any, cast

import numpy as np

from pumice.api.job import JobInfo
from pumice.api.task import TaskInfo, TaskStatus
from pumice.framework.fastpath import shape_key
from pumice.framework.fit import explain_no_fit, fits, fits_one
from pumice.framework.orders import job_key, queue_key, task_keys
from pumice.framework.pqueue import PriorityQueue
from pumice.framework.session import Session
from pumice.framework.statement import EVICT, Statement
from pumice.framework.topology import session_topology

#: Volcano's ``PreemptableStatus``: tasks preempt may evict.
PREEMPTABLE_STATUSES = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})


def unresolvable_blocked(
    ssn: Session, task: TaskInfo, resolve_anti_affinity: bool = False
) -> np.ndarray | None:
    """The nodes ``task`` can never use, whatever is evicted (Volcano's
    ``PredicateForPreemptAction`` keeps only *UnschedulableAndUnresolvable* refusals:
    node selector and affinity, taints, cordons, readiness, required inter-pod affinity).
    Host-port conflicts are resolvable by eviction, so they are left out: the predicates
    see a copy of the task without host ports.

    Inter-pod anti-affinity is resolvable too (kube-scheduler's *Unschedulable*), but it
    only goes away for a caller that asks again with the victims removed from the
    predicates' view: Volcano's topology-aware preempt does (``resolve_anti_affinity``),
    through the plugin's ``SimulateRemoveTask``, which Volcano calls only for a plugin
    with ``enablePreemptable`` or ``enabledAllocatable`` on. Volcano's normal preempt asks
    the predicates after evicting with the inter-pod state it computed before the
    evictions, so an anti-affinity refusal stays and the node is never made to fit:
    such a node is refused here, as it is for reclaim (which never asks again)."""
    return _unresolvable(ssn, task, resolve_anti_affinity)[0]


def no_node_text(ssn: Session, task: TaskInfo, resolve_anti_affinity: bool = False) -> str:
    """The sentence for a task every node refuses whatever is evicted, with the
    predicates' reasons counted per node (the first reason that refused each)."""
    _blocked, reasons = _unresolvable(ssn, task, resolve_anti_affinity)
    room = np.full((len(ssn.nodes), ssn.space.size), np.inf)
    err = explain_no_fit(ssn, task, reasons, room)
    return f"no node could take task {task.name} whatever is evicted ({err.render()})"


def _unresolvable(
    ssn: Session, task: TaskInfo, resolve_anti_affinity: bool
) -> tuple[np.ndarray | None, list[tuple[str, np.ndarray]]]:
    """:func:`unresolvable_blocked`, and the reasons of the refusals."""
    probe = task.clone()
    probe.host_ports = ()
    blocked = None
    why: list[tuple[str, np.ndarray]] = []
    for tier in ssn.hooks.chain("predicate"):
        for plugin, fn in tier:
            b, reasons = fn(probe)
            if b is None:
                continue
            resolvable = ssn.hooks.facet("predicate", fn, "resolvable")
            if resolve_anti_affinity and resolvable is not None and _simulates(ssn, plugin):
                reasons = [(r, m) for r, m in reasons if not resolvable(r)]
                if not reasons:
                    continue
                b = np.logical_or.reduce([m for _, m in reasons])
            why.extend(reasons or [(f"refused by {plugin}", b)])
            blocked = b.copy() if blocked is None else (blocked | b)
    return blocked, why


def _simulates(ssn: Session, plugin: str) -> bool:
    """Whether Volcano would let ``plugin`` simulate the removal of victims (its
    ``enablePreemptable`` or ``enabledAllocatable`` flag is on)."""
    for tier in ssn.config.tiers:
        for opt in tier.plugins:
            if opt.name == plugin:
                return opt.enabled("preemptable") or opt.enabled("allocatable")
    return False


def candidate_nodes(ssn: Session, task: TaskInfo, resolve_anti_affinity: bool = False) -> list[int]:
    """Node indices the predicates allow for ``task`` apart from what eviction resolves
    (see :func:`unresolvable_blocked`), in name order."""
    n = len(ssn.nodes)
    blocked = unresolvable_blocked(ssn, task, resolve_anti_affinity)
    domain = _domain(ssn, task)
    if domain is not None:
        allowed = np.zeros(n, dtype=bool)
        allowed[domain] = True
        blocked = ~allowed if blocked is None else blocked | ~allowed
    if blocked is None:
        return list(range(n))
    return [int(i) for i in np.flatnonzero(~blocked)]


def _domain(ssn: Session, task: TaskInfo) -> np.ndarray | None:
    """The rows a task of a gang with a hard network-topology constraint may take room
    on (see :meth:`pumice.framework.topology.SessionTopology.eviction_domain`)."""
    job = ssn.jobs.get(task.job or "")
    if job is None or (job.network_topology is None and not job.sub_groups):
        return None
    return session_topology(ssn).eviction_domain(job, task)[0]


def topology_refusal(ssn: Session, job: JobInfo) -> str:
    """Why preempt and reclaim do not act for ``job`` at all ("" when they may): a gang
    with a hard network-topology constraint that holds no HyperNode yet."""
    if job.network_topology is None and not job.sub_groups:
        return ""
    topo = session_topology(ssn)
    for task in pending_tasks(job):
        _rows, why = topo.eviction_domain(job, task)
        if not why:
            return ""
    tasks = pending_tasks(job)
    return topo.eviction_domain(job, tasks[0])[1] if tasks else ""


def evicted_keys(ssn: Session, stmt: Statement) -> set[str]:
    """The pods evicted this cycle, committed or still in ``stmt``: as far as the
    predicates are concerned they have left their nodes (Volcano's predicates plugin
    removes an evicted pod from its node at once)."""
    gone = set(ssn.decisions.evictions)
    gone.update(op.task.key for op in stmt.operations if op.kind == EVICT)
    return gone


def refusals_after_eviction(
    ssn: Session, task: TaskInfo, i: int, stmt: Statement, inter_pod: bool = True
) -> list[str]:
    """Why the predicates still refuse ``task`` on node ``i`` with the evictions made so
    far (Volcano's preempt asks ``PredicateFn`` again after each eviction): a host port
    or, with ``inter_pod``, an inter-pod anti-affinity term about a pod that stays (a
    caller whose nodes no anti-affinity refused to begin with passes False: evictions
    only clear such refusals). A predicate function may answer for one node
    (``after_eviction(task, i, gone, inter_pod)``, as the predicates plugin's does); any
    other is asked for all nodes and read at ``i``."""
    out: list[str] = []
    gone: set[str] | None = None
    for fn in ssn.hooks.flat("predicate"):
        after = ssn.hooks.facet("predicate", fn, "after_eviction")
        if after is not None:
            if not inter_pod and not task.host_ports:
                continue  # (nothing it could still refuse)
            if gone is None:
                gone = evicted_keys(ssn, stmt)
            out.extend(after(task, i, gone, inter_pod))
            continue
        b, reasons = fn(task)
        if b is not None and b[i]:
            out.extend([r for r, m in reasons if m[i]] or ["refused by a predicate"])
    return out


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
    return fits_one(task.init_resreq, future)


def victims_could_fit(ssn: Session, task: TaskInfo, i: int, victims: Iterable[TaskInfo]) -> bool:
    """Volcano's ``ValidateVictims``: future idle plus every victim covers the request."""
    nodes = ssn.nodes
    future = nodes.idle[i] + nodes.releasing[i] - nodes.pipelined[i]
    for v in victims:
        future += v.resreq
    return fits_one(task.init_resreq, future)


def room_with_all(
    ssn: Session,
    task: TaskInfo,
    candidates: dict[int, list[TaskInfo]],
    sums: dict[int, np.ndarray] | None = None,
) -> list[int]:
    """The nodes of ``candidates`` (node row -> evictable tasks) where evicting every
    candidate would make room for ``task`` (:func:`victims_could_fit` with all of them).
    Resources only add up, so on any other node no subset of the candidates passes that
    test either: callers pass those nodes over before ordering candidates and asking the
    victim functions, for one vector test over all nodes instead of one per node.
    ``sums``, when given, holds each row's candidates' requests already summed (in
    their order)."""
    if not candidates:
        return []
    nodes = ssn.nodes
    rows = np.fromiter(candidates, dtype=np.intp, count=len(candidates))
    if sums is not None:
        held = np.array([sums[i] for i in candidates])
    else:
        held = np.zeros((len(rows), ssn.space.size))
        for k, cands in enumerate(candidates.values()):
            row = held[k]
            for t in cands:
                row += t.resreq
    room = nodes.idle[rows] + nodes.releasing[rows] - nodes.pipelined[rows] + held
    return rows[fits(task.init_resreq, room)].tolist()


def victim_queue(
    ssn: Session, victims: Iterable[TaskInfo], preemptor: TaskInfo
) -> PriorityQueue[TaskInfo]:
    """Volcano's ``BuildVictimsPriorityQueue``: the victim to evict first pops first."""
    return PriorityQueue(lambda a, b: ssn.victim_less(a, b, preemptor), victims)


def in_victim_order(
    ssn: Session,
    tasks: Iterable[TaskInfo],
    preemptor: TaskInfo,
    keys: VictimKeys | None = None,
) -> list:
    """``tasks`` sorted in the order they would be evicted (with ``keys``, the sort keys
    kept from earlier calls on the same session state).

    Volcano hands the candidates to the preemptable / reclaimable functions in Go map
    order, which is random; functions that count (gang lets a job lose tasks down to
    its minimum, in the order it meets them) then spare arbitrary tasks. pumice hands
    them over in victim order, so that what a function allows is what would be evicted
    first, and the result is reproducible."""

    tasks = list(tasks)
    if len(tasks) < 2:
        return tasks
    key = (keys if keys is not None else VictimKeys()).key(ssn, tasks)
    if key is not None:
        return sorted(tasks, key=key, reverse=True)

    def cmp(a: TaskInfo, b: TaskInfo) -> int:
        if ssn.victim_less(a, b, preemptor):
            return -1
        return 1 if ssn.victim_less(b, a, preemptor) else 0

    return sorted(tasks, key=cmp_to_key(cmp))


class VictimKeys:
    """Sort keys for the victim order, kept for one session while its nodes stay as they
    are (``NodeTable.version``: every statement operation moves it, and with it the
    shares the job and queue orders read).

    The victim order puts first, across queues, the queue the queue order puts last;
    within a queue the job the job order puts last; within a job the task the task
    order puts last: the reverse of (queue key, job key, task key). Every key ends in a
    unique fallback (name or uid), so no two tasks tie and the two sorts agree.

    Reclaim and preempt sort the candidates of every node they try, for every task they
    try, and a victim's (queue key, job key) does not depend on who asks: it is worked
    out once per job and state, the order functions once per session."""

    __slots__ = ("_orders", "_outer", "_session", "_tasks", "_version")

    def __init__(self) -> None:
        self._session: str | None = None
        self._version = -1
        #: (job key, queue key, task key with pod indices, without), or None when the
        #: orders do not all offer keys or a plugin orders victim queues.
        self._orders: tuple | None = None
        #: job uid -> (queue key, job key) at ``_version``
        self._outer: dict[str, tuple] = {}
        #: (with pod indices?, task uid) -> task key, for the session: the task order
        #: compares what tasks are (priority, index, creation), which no statement
        #: operation moves
        self._tasks: dict[tuple[bool, str], tuple] = {}

    def key(self, ssn: Session, tasks: list[TaskInfo]) -> Callable[[TaskInfo], tuple] | None:
        """The key for sorting ``tasks``, descending, into victim order; None when the
        order has no key form (the caller compares with ``victim_less``)."""
        if self._session != ssn.uid:
            self._session, self._version = ssn.uid, -1
            self._orders = _victim_orders(ssn)
            self._tasks = {}
        if self._orders is None:
            return None
        jobs, queues = ssn.jobs, ssn.queues
        if any(t.job not in jobs for t in tasks):
            return None
        jkey, qkey, by_index, plain = self._orders
        # default_task_order compares pod indices only when both tasks have one.
        with_index = sum(1 for t in tasks if t.name_index is not None)
        tkey = by_index if with_index == len(tasks) else plain if with_index == 0 else None
        if tkey is None:
            return None
        if ssn.nodes.version != self._version:
            self._outer, self._version = {}, ssn.nodes.version
        outer_of, inner_of, indexed = self._outer, self._tasks, tkey is by_index

        def key(t: TaskInfo) -> tuple:
            uid = cast(str, t.job)  # (every task's job is in the session: checked above)
            outer = outer_of.get(uid)
            if outer is None:
                job = jobs[uid]
                outer = outer_of[job.uid] = (qkey(queues[job.queue]), jkey(job))
            inner = inner_of.get((indexed, t.uid))
            if inner is None:
                inner = inner_of[(indexed, t.uid)] = tkey(t)
            return (*outer, inner)

        return key


def _victim_orders(ssn: Session) -> tuple | None:
    if ssn.hooks.flat("victim_queue_order"):
        return None
    jkey, qkey = job_key(ssn), queue_key(ssn)
    if jkey is None or qkey is None:
        return None
    by_index, plain = task_keys(ssn)
    if by_index is None or plain is None:
        return None
    return (jkey, qkey, by_index, plain)


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


def alike_key(ssn: Session, job: JobInfo, task: TaskInfo) -> Hashable | None:
    """What preempt and reclaim read of a task of ``job`` (its placement, requests,
    spread, priority, preemption policy, best effort), so that two tasks of one job
    with the same key meet the same answer while the session stays as it was; None for
    a task whose answer may hang on who it is (host ports, inter-pod affinity, a
    network-topology gang's sub-group). Victim functions see the task: they must answer
    alike for tasks alike in these, as the built-in ones do."""
    if task.host_ports or task.pod_affinity is not None or ssn.attaching(task):
        return None
    if job.network_topology is not None or job.sub_groups:
        return None
    return (shape_key(task), task.priority, task.preemption_policy, task.best_effort)


def pending_tasks(job: JobInfo) -> list[TaskInfo]:
    return job.with_status(TaskStatus.PENDING)


def settle(ssn: Session, stmt: Statement, job: JobInfo, action: str) -> bool:
    """End a preempt or reclaim turn: commit when ``job`` is pipelined, otherwise undo
    every tentative eviction and say so in the audit. Returns whether it committed."""
    if ssn.job_pipelined(job):
        if len(stmt):
            ssn.eviction_notes.pop(job.uid, None)  # helped after all
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


# -- saying why eviction could not help ---------------------------------------------------

#: What each built-in plugin's victim rule means, for the sentence that says it allowed
#: no victim (see docs/preemption.md, "Choosing victims").
_RULES = {
    "priority": "only tasks of lower priority may go",
    "gang": "a job keeps at least minMember ready tasks",
    "conformance": "critical and kube-system pods never go",
    "drf": "the victim's job must keep a dominant share at least the preemptor's",
    "proportion": "no other queue there is over its deserved share without going below its "
    "guarantee",
    "capacity": "no task there sharing a resource with this one is of a queue over its "
    "deserved share in what that task uses, without going below its guarantee",
    "pdb": "their PodDisruptionBudgets allow no disruption",
    "cdp": "they are still cooling down",
}


#: Where the gang rule names the jobs at their minimum (filled in by ``Misses.render``).
_AT_MINIMUM = "{at minimum}"


class Misses:
    """Why no node took one task through eviction: for each reason, how many nodes it
    stopped (like a fit error), or one reason for the task as a whole (``whole``).
    Gangs at their minimum among the candidates gang refused are named once."""

    __slots__ = ("at_minimum", "counts", "task", "whole")

    def __init__(self, task: TaskInfo) -> None:
        self.task = task
        self.counts: dict[str, int] = {}
        self.whole = ""
        self.at_minimum: set[str] = set()

    def node(self, reason: str, n: int = 1) -> None:
        """``reason`` stopped ``n`` more nodes."""
        self.counts[reason] = self.counts.get(reason, 0) + n

    def refused(
        self,
        ssn: Session,
        hook: str,
        actor: TaskInfo,
        candidates: list[TaskInfo],
        deciders: list[str],
        alone: list[str] | None = None,
    ) -> None:
        """The ``hook`` functions allowed none of ``candidates`` on one node; ``deciders``
        are the plugins of the tier that refused, and ``alone`` those of them that
        allowed none by themselves, when the caller has it from the same state
        (:meth:`HookTable.victims_detail`); else they are asked again."""
        if not deciders:
            self.node(f"no plugin allows victims ({hook} functions abstain)")
            return
        if alone is None:
            fns = {name: fn for tier in ssn.hooks.chain(hook) for name, fn in tier}
            # Which of them allow none by themselves (the others only narrowed the choice).
            alone = [p for p in deciders if p in fns and not fns[p](actor, candidates)]
        if not alone:
            self.node(f"no candidate is allowed by all of {', '.join(deciders)}")
            return
        if "gang" in alone:
            for t in candidates:
                job = ssn.jobs.get(t.job or "")
                if job is not None and job.ready_num() <= job.min_available:
                    self.at_minimum.add(job.uid)
        rules = [_RULES[p] + (_AT_MINIMUM if p == "gang" else "") for p in alone if p in _RULES]
        verb = "allows" if len(alone) == 1 else "allow"
        text = f"{' and '.join(alone)} {verb} no victim"
        self.node(text + (f" ({'; '.join(rules)})" if rules else ""))

    def retold(self, task: TaskInfo) -> Misses:
        """The same misses, told of ``task`` (one alike, see :func:`alike_key`)."""
        other = Misses(task)
        other.counts = dict(self.counts)
        other.whole = self.whole
        other.at_minimum = set(self.at_minimum)
        return other

    def render(self) -> str:
        name = self.task.name
        if self.whole:
            return self.whole
        if not self.counts:
            return f"no node to try for task {name}"
        jobs = sorted(self.at_minimum)
        more = f" and {len(jobs) - 3} more" if len(jobs) > 3 else ""
        at_minimum = (
            ""
            if not jobs
            else f": job {jobs[0]} is at its minimum"
            if len(jobs) == 1
            else f": jobs {', '.join(jobs[:3])}{more} are at their minimum"
        )
        parts = [
            f"{_nodes(n)}: {reason.replace(_AT_MINIMUM, at_minimum)}"
            for reason, n in self.counts.items()
        ]
        return f"task {name}: " + "; ".join(parts)


class Unheard(Misses):
    """Misses nobody will read (a task after the turn's first miss): the reasons are not
    worked out, which on a large cluster costs more than the search itself."""

    __slots__ = ()

    def node(self, reason: str, n: int = 1) -> None:
        pass

    def refused(
        self,
        ssn: Session,
        hook: str,
        actor: TaskInfo,
        candidates: list[TaskInfo],
        deciders: list[str],
        alone: list[str] | None = None,
    ) -> None:
        pass


class Hopeless:
    """Tasks an eviction action found nothing for, by what the answer hangs on, while
    the session's nodes stay as they were (``NodeTable.version``, read after the try: a
    try that fails gives back what it did).

    The answer hangs on the task's queue (what it may take, the victim order) and on
    what :func:`alike_key` holds of the task (the nodes it may use, its requests); the
    victim functions (``hook``: ``reclaimable``, ``preemptable``) see the task too.
    When all of them say they answer alike for such tasks (facet ``alike``, which the
    built-ins give for ``reclaimable``), the answer holds for every job of the queue: a
    backlog of starving jobs of one shape costs one search per change of the session,
    not one per job (each cycle still searches afresh: its session starts from the
    cluster). Otherwise it holds for the tasks of one job (a job's own tasks are alike
    to every function the built-ins know). What the misses said is kept with the
    answer, to be told in the words of the task that asks again."""

    __slots__ = ("_kept", "_version", "hook")

    def __init__(self, hook: str) -> None:
        self.hook = hook
        self._kept: dict[Hashable, Misses] = {}
        self._version = -1

    def key(self, ssn: Session, job: JobInfo, task: TaskInfo) -> Hashable | None:
        alike = alike_key(ssn, job, task)
        if alike is None:
            return None
        every_job = all(ssn.hooks.facets(self.hook, "alike"))
        return (job.queue, alike, None if every_job else job.uid)

    def recall(
        self, ssn: Session, key: Hashable | None, task: TaskInfo, heard: bool
    ) -> Misses | None:
        """The misses ``task`` would meet, if a task like it met them as things stand;
        ``heard``: the reasons will be told (a try whose reasons were not worked out
        does not answer then)."""
        if key is None:
            return None
        known = self._now(ssn).get(key)
        if known is None:
            return None
        if not heard:
            return Unheard(task)
        if isinstance(known, Unheard):
            return None
        return known.retold(task)

    def keep(self, ssn: Session, key: Hashable | None, misses: Misses) -> None:
        if key is None or misses.whole:  # (a sentence of its own names the task)
            return
        self._now(ssn)[key] = misses

    def _now(self, ssn: Session) -> dict[Hashable, Misses]:
        """The answers kept for the session's nodes as they are (none once they moved)."""
        if ssn.nodes.version != self._version:
            self._kept.clear()
            self._version = ssn.nodes.version
        return self._kept


def _nodes(n: int) -> str:
    return "1 node" if n == 1 else f"{n} nodes"


def could_not_help(
    ssn: Session, action: str, job: JobInfo, text: str, task: TaskInfo | None = None
) -> None:
    """Say that ``action``, run for ``job``, could not help it: in the job's pending
    explanation (the first sentence per action) and in the audit (kind ``failed``)."""
    notes = ssn.eviction_notes.setdefault(job.uid, [])
    prefix = f"{action} could not help"
    if any(n.startswith(prefix) for n in notes):
        return
    notes.append(f"{prefix}: {text}")
    ssn.decisions.audit.append(
        {
            "action": action,
            "kind": "failed",
            "preemptor": job.uid,
            "task": task.key if task is not None else "",
            "victim": "",
            "node": "",
            "reason": text,
        }
    )


def conclude_turn(
    ssn: Session, stmt: Statement, job: JobInfo, action: str, placed: int,
    first_miss: Misses | None,
) -> None:  # fmt: skip
    """:func:`settle` a job's turn that placed ``placed`` tasks; when it kept nothing, say
    why (the first task's misses) in the job's explanation and the audit."""
    if not settle(ssn, stmt, job, action) or not placed:
        could_not_help(
            ssn,
            action,
            job,
            unplaced_text(job, placed, first_miss),
            first_miss.task if first_miss is not None else None,
        )


def unplaced_text(job: JobInfo, placed: int, misses: Misses | None) -> str:
    """The sentence for a turn that ended with nothing kept: how far it got, and why the
    first task that found no node found none."""
    why = misses.render() if misses is not None else ""
    if placed:
        head = (
            f"{placed} task(s) could be placed, but the job would still not be pipelined "
            f"(gang minimum {job.min_available}), so nothing is evicted"
        )
        return f"{head}; {why}" if why else head
    return why or "no task of the job could be placed"
