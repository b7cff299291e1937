"""Which of a job's pending best-effort tasks the nodes can take now, all together.

A best-effort task (no cpu, memory or extended-resource request) is left by allocate to
backfill, which runs after it. Volcano counts every such pending task as ready toward
the gang's ``minMember``: allocate then binds the gang's other tasks, and when backfill
finds no node for some of them (the nodes at their pod limit, a node selector or a taint
none of them matches) the gang is left short: some pods bound, the gang never complete.

The gang plugin (``gang.bestEffortReady: placeable``, its default) asks this module
instead whether the tasks a gang still needs can be found a node: one the predicates
allow, with a free pod slot now (a slot being released does not count: backfill would
only pipeline onto it), each node's slots shared among the job's best-effort tasks
placed with it. Best-effort tasks count only where an action places them (``backfill``
in the configuration).

**How.** The job's pending best-effort tasks are grouped by role and by what decides
their nodes (placement and requests; when the predicates look at more than the
placement, inter-pod affinity or host ports, by those too). For each group, the slots
of every node in its idle resources: how many of its tasks fit one after another, the
arithmetic of :mod:`pumice.framework.slots`. Nodes are lumped by the groups they take,
and a max flow from roles through groups to lumps says whether some placement gives
every role its minimum and the gang its total. When the groups share one request vector
(as a rule they do: a best-effort pod asks for one pod slot and nothing else) the
answer is exact; otherwise a node is let hold as many tasks as its roomiest group
would, and beyond :data:`MAX_GROUPS` groups the groups of a role are merged: an upper
bound either way.

**Why an upper bound is the right answer.** It says no only where backfill cannot
complete the gang this cycle: a cycle only takes node resources after the question is
asked (other jobs' tries give back what they took), and backfill allocates a task only
where it fits now. While allocate is still placing the job's own requesting tasks (a
ready job yields its turn after each), those count as placed too, for they might be.
So where backfill would complete the gang, allocate and backfill
decide exactly as with Volcano's arithmetic. Where the bound is too generous (other
jobs took the slots meanwhile, or backfill's choice of nodes left a task without one),
allocate has kept the gang's statement uncommitted and backfill gives it back (see
:mod:`pumice.actions.allocate`): no gang is left half placed either way.

**Cost.** An answer is kept per job until the job's tasks or the nodes change; allocate
asks after every placement of a gang that counts on best-effort tasks (and only then).
The groups, their slots on every node and the lumps' sizes are kept per job until the
job's pending best-effort tasks change, and brought up to date in the node rows that
changed since they were last looked at (a placement changes one), in plain floats with
the same operations as the vector pass; the flow then runs on a graph of a few
vertices. When every task asks for a pod slot and nothing else, a placement found
stands, one task less per node change since, until it no longer covers the need (a job
that yields its turn asks again after the other jobs' turns). On 1,000 nodes, 200 gangs
of a master and 50 best-effort workers cost 10% more than under Volcano's arithmetic;
50 gangs of 100 requesting and 100 best-effort tasks with ``minMember`` 150, whose
readiness is asked after each of the last 50 placements, 15% (46% with the workers in
two placements).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable

import numpy as np

from pumice.api.job import FitError, JobInfo
from pumice.api.quantity import PODS
from pumice.api.spread import hard
from pumice.api.task import READY_STATUSES, TaskInfo, TaskStatus
from pumice.framework.fit import predicate_filter
from pumice.framework.session import Session

#: Beyond this many groups of tasks, the groups of each role are merged into one.
MAX_GROUPS = 8
#: Up to this many changed node rows are brought up to date one by one.
SCALAR_ROWS = 16
#: A node's slots when a task requests nothing at all (not even a pod slot).
_UNBOUNDED = 1e9


class _Part:
    """Pending best-effort tasks of one role that the predicates and the nodes' room
    treat alike."""

    __slots__ = ("blocked", "dims", "first", "init", "reasons", "role", "tasks", "use")

    def __init__(self, role: str, first: TaskInfo) -> None:
        self.role = role
        self.first = first
        self.tasks: list[TaskInfo] = [first]
        req = first.init_resreq
        dims = np.flatnonzero(req)
        self.dims: list[int] = dims.tolist()
        self.init: list[float] = req[dims].tolist()
        self.use: list[float] = first.resreq[dims].tolist()
        self.blocked: np.ndarray | None = None
        self.reasons: list = []

    def rows(self, idle: np.ndarray) -> np.ndarray:
        """How many of the tasks each row of ``idle`` takes, one after another
        (predicates aside)."""
        if not self.dims:
            return np.full(idle.shape[0], _UNBOUNDED)
        if len(self.dims) == 1 and self.init == self.use == [1.0]:  # (one pod slot each)
            return np.maximum(np.floor(idle[:, self.dims[0]]), 0.0)
        init, use = np.array(self.init), np.array(self.use)
        head = idle[:, self.dims] - init
        with np.errstate(divide="ignore", invalid="ignore"):
            more = np.where(use > 0, np.floor(head / use), _UNBOUNDED)
            more += (head - (more + 1) * use >= 0) & (use > 0)
            return np.minimum(np.where(head >= 0, more + 1, 0.0).min(axis=1), _UNBOUNDED)

    def row(self, idle: np.ndarray, i: int) -> float:
        """:meth:`rows` for row ``i`` alone, in plain floats: the same operations."""
        if self.blocked is not None and self.blocked[i]:
            return 0.0
        s = _UNBOUNDED
        for d, init, use in zip(self.dims, self.init, self.use, strict=True):
            head = float(idle[i, d]) - init
            if not head >= 0:
                return 0.0
            if use > 0:
                more = float(math.floor(head / use))
                if head - (more + 1) * use >= 0:
                    more += 1
                s = min(s, more + 1)
        return s


class _Group:
    """What the flow treats as one: a part, or (beyond :data:`MAX_GROUPS`) the parts of
    a role, or all of them, merged (a node takes as many as its roomiest part would)."""

    __slots__ = ("parts", "role", "tasks")

    def __init__(self, parts: list[_Part]) -> None:
        self.parts = parts
        self.role = parts[0].role
        self.tasks = [t for p in parts for t in p.tasks]


class _JobRoom:
    """One job's pending best-effort tasks and their room on the nodes: the slots of
    each group on every node, and the nodes lumped by the groups they take."""

    __slots__ = ("cap", "code", "group_of", "groups", "lumps", "part_of", "pods_only",
                 "proof", "seen", "slots", "static", "version")  # fmt: skip

    def __init__(self, version: int, groups: list[_Group], static: bool, pods: int) -> None:
        self.version = version
        self.groups = groups
        self.group_of = {t.uid: g for g in groups for t in g.tasks}
        self.part_of = {t.uid: p for g in groups for p in g.parts for t in p.tasks}
        self.static = static
        #: Every task asks for one pod slot and nothing else: a change to a node (one
        #: task more or less) moves each group's slots there by one at most.
        self.pods_only = all(
            p.dims == [pods] and p.init == [1.0] and p.use == [1.0] for g in groups for p in g.parts
        )
        #: The last placement found (change log position, tasks placed, per role): with
        #: ``pods_only`` it stands, less one task per change since, without a new flow.
        self.proof: tuple[int, int, dict[str, int]] | None = None
        self.slots: np.ndarray | None = None  # groups x nodes
        self.cap: np.ndarray | None = None  # per node: the most any group takes there
        self.code = np.zeros(0, dtype=np.int64)  # per node: the groups with a slot, as bits
        self.lumps: dict[int, float] = {}  # groups as bits -> the nodes' summed cap
        self.seen = -1  # how far into the node table's change log the slots looked


class BestEffortRoom:
    """The answers of one session (made by the gang plugin when it opens)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.nodes = ssn.nodes
        #: Whether any action of the configuration places best-effort tasks.
        self.placed = "backfill" in ssn.config.actions
        #: The predicates' answer depends on a task's placement alone (no inter-pod
        #: affinity about): a part's node mask is computed once in the session.
        self.static = all(ssn.hooks.facets("predicate", "by_placement"))
        self._jobs: dict[str, _JobRoom] = {}
        self._answers: dict[str, tuple[tuple[int, int, bool], bool]] = {}

    # -- the question -------------------------------------------------------------------

    def can_complete(self, job: JobInfo, with_requests: bool) -> bool:
        """Could ``job`` reach ``minMember`` and each role's minimum with the tasks it
        has ready, its pending best-effort tasks that the nodes can take now (together),
        and, with ``with_requests``, every pending task that requests resources (those
        allocate may still place in a later turn of the job)?"""
        key = (job.version, self.nodes.version, with_requests)
        got = self._answers.get(job.uid)
        if got is not None and got[0] == key:
            return got[1]
        answer = self._can_complete(job, with_requests)
        self._answers[job.uid] = (key, answer)
        return answer

    def _can_complete(self, job: JobInfo, with_requests: bool) -> bool:
        need = job.min_available - job.ready_num()
        if with_requests:
            need -= job.pending_requesting_num()
        roles = _roles_short(job, with_requests)
        if need <= 0 and not roles:
            return True
        if not self.placed or not job.pending_best_effort_num():
            return False
        room = self._jobs.get(job.uid)
        if room is not None and room.version == job.best_effort_version and room.proof:
            # A job that yields its turn once ready asks again after the other jobs'
            # turns: the placement found last time, less what those took, may still do.
            at, placed, placed_by_role = room.proof
            lost = len(self.nodes.changes) - at
            if (
                room.pods_only
                and placed - lost >= need
                and all(placed_by_role.get(r, 0) - lost >= n for r, n in roles.items())
            ):
                return True
        room = self._room(job)
        met, total, flows = self._flow(room, roles)
        if met:
            by_role: dict[str, int] = {}
            for g, f in zip(room.groups, flows, strict=True):
                if len({p.role for p in g.parts}) == 1:  # (merged across roles: unknown)
                    by_role[g.role] = by_role.get(g.role, 0) + f
            room.proof = (len(self.nodes.changes), total, by_role)
        return met and total >= need

    def why_not(self, job: JobInfo) -> str | None:
        """The first pending best-effort task, in task order, that gets no node when the
        job's others are placed, and why; None when each of them has one."""
        pending = [t for t in job.with_status(TaskStatus.PENDING) if t.best_effort]
        if not pending:
            return None
        if not self.placed:
            return (
                f"best-effort task {_first(self.ssn, pending).name} has no node: no action "
                f"of this configuration places best-effort tasks (backfill does)"
            )
        room = self._room(job)
        _, _, flows = self._flow(room, {})
        left = dict(zip(map(id, room.groups), flows, strict=True))
        for task in sorted(pending, key=functools.cmp_to_key(_task_cmp(self.ssn))):
            g = room.group_of[task.uid]
            if left[id(g)] > 0:
                left[id(g)] -= 1
                continue
            why = self._explain(room.part_of[task.uid])
            return f"best-effort task {task.name} has no node: {why}"
        return None

    # -- groups, slots and lumps --------------------------------------------------------

    def _room(self, job: JobInfo) -> _JobRoom:
        """``job``'s groups with their slots and lumps up to date with the nodes."""
        room = self._jobs.get(job.uid)
        if room is None or room.version != job.best_effort_version:
            room = self._jobs[job.uid] = self._group(job)
        nodes = self.nodes
        changes = nodes.changes
        if room.slots is None or not room.static or len(changes) - room.seen > SCALAR_ROWS:
            self._rebuild(room)
        elif len(changes) > room.seen:
            self._refresh(room, set(changes[room.seen :]))
        room.seen = len(changes)
        return room

    def _group(self, job: JobInfo) -> _JobRoom:
        found: dict[Hashable, _Part] = {}
        static = self.static
        for t in job.with_status(TaskStatus.PENDING):
            if not t.best_effort:
                continue
            key: Hashable = (t.role, t.placement, t.init_resreq.tobytes(), t.resreq.tobytes())
            if (not static or t.host_ports or t.pod_affinity is not None or hard(t.spread)
                    or t.attaches):  # fmt: skip
                static = False  # (the predicates' answer moves with the nodes' pods)
                key = (key, t.host_ports, t.pod_affinity, t.spread, t.namespace,
                       tuple(t.labels.items()), t.uid if t.attaches else None)  # fmt: skip
            part = found.get(key)
            if part is None:
                found[key] = _Part(t.role, t)
            else:
                part.tasks.append(t)
        parts = list(found.values())
        groups = [_Group([p]) for p in parts]
        if len(groups) > MAX_GROUPS:
            by_role: dict[str, list[_Part]] = {}
            for p in parts:
                by_role.setdefault(p.role, []).append(p)
            groups = [_Group(ps) for ps in by_role.values()]
            if len(groups) > MAX_GROUPS:
                groups = [_Group(parts)]
        pods = self.nodes.space.names.index(PODS)
        return _JobRoom(job.best_effort_version, groups, static, pods)

    def _rebuild(self, room: _JobRoom) -> None:
        idle = self.nodes.idle
        rows: list[np.ndarray] = []
        for g in room.groups:
            best: np.ndarray | None = None
            for p in g.parts:
                if room.slots is None or not room.static:
                    p.blocked, p.reasons = predicate_filter(self.ssn, p.first)
                s = p.rows(idle)
                if p.blocked is not None:
                    s[p.blocked] = 0.0
                best = s if best is None else np.maximum(best, s)
            assert best is not None  # (a group has at least one part)
            rows.append(best)
        if len(rows) == 1:  # (the rule: one lump)
            cap = rows[0]
            room.slots, room.cap = cap[None, :], cap
            room.code = (cap > 0).astype(np.int64)
            total = float(cap.sum())
            room.lumps = {1: total} if total else {}
            return
        slots = np.stack(rows)
        room.slots = slots
        room.cap = slots.max(axis=0)
        bits = 1 << np.arange(len(slots), dtype=np.int64)
        room.code = ((slots > 0) * bits[:, None]).sum(axis=0)
        sums = np.bincount(room.code, weights=room.cap)
        room.lumps = {c: float(sums[c]) for c in range(1, len(sums)) if sums[c]}

    def _refresh(self, room: _JobRoom, rows: set[int]) -> None:
        idle = self.nodes.idle
        slots, cap, code, lumps = room.slots, room.cap, room.code, room.lumps
        assert slots is not None and cap is not None
        for i in rows:
            old = int(code[i])
            if old:
                left = lumps[old] - cap[i]
                if left:
                    lumps[old] = left
                else:
                    del lumps[old]
            new, most = 0, 0.0
            for k, g in enumerate(room.groups):
                s = max(p.row(idle, i) for p in g.parts)
                slots[k, i] = s
                if s > 0:
                    new |= 1 << k
                    most = max(most, s)
            code[i] = new
            cap[i] = most
            if new:
                lumps[new] = lumps.get(new, 0.0) + most

    # -- the flow -----------------------------------------------------------------------

    def _flow(self, room: _JobRoom, roles: dict[str, int]) -> tuple[bool, int, list[int]]:
        """(every role in ``roles`` gets as many tasks as it needs, the most tasks placed
        with that, how many of each group's tasks are placed) over the nodes' slots."""
        groups = room.groups
        counts = [len(g.tasks) for g in groups]
        if len(groups) == 1:
            g = groups[0]
            total = int(min(counts[0], sum(room.lumps.values())))
            have: dict[str, int] = {}
            for p in g.parts:
                have[p.role] = have.get(p.role, 0) + len(p.tasks)
            # (Merged across roles, any role may have the places.)
            met = all(n <= min(total, have.get(r, 0)) for r, n in roles.items())
            return met, total, [total]
        lumps = list(room.lumps.items())
        role_names = sorted({g.role for g in groups} | set(roles))
        # Vertices: 0 source, 1 sink, then roles, groups, lumps.
        ri = {r: 2 + k for k, r in enumerate(role_names)}
        gi = [2 + len(role_names) + k for k in range(len(groups))]
        li = [gi[-1] + 1 + k for k in range(len(lumps))]
        cap: list[dict[int, int]] = [{} for _ in range(gi[-1] + 1 + len(lumps))]
        for k, g in enumerate(groups):
            cap[ri[g.role]][gi[k]] = counts[k]
        for (code, size), v in zip(lumps, li, strict=True):
            cap[v][1] = int(size)
            for k in range(len(groups)):
                if code >> k & 1:
                    cap[gi[k]][v] = counts[k]
        have = {r: 0 for r in role_names}
        for k, g in enumerate(groups):
            have[g.role] += counts[k]
        for r, n in roles.items():
            cap[0][ri[r]] = n
        first = _max_flow(cap, 0, 1)
        met = first == sum(roles.values())
        for r in role_names:
            cap[0][ri[r]] = cap[0].get(ri[r], 0) + have[r] - roles.get(r, 0)
        total = first + _max_flow(cap, 0, 1)
        flows = [counts[k] - cap[ri[g.role]][gi[k]] for k, g in enumerate(groups)]
        return met, total, flows

    # -- explanations -------------------------------------------------------------------

    def _explain(self, part: _Part) -> str:
        """Why no node is left for one more task of ``part`` once the nodes' slots are
        taken: each node under the first predicate that refuses it, or else under the
        resource it has no room left in."""
        nodes = self.nodes
        n = len(nodes)
        if n == 0:
            return "there are no nodes in the cluster"
        slots = part.rows(nodes.idle)
        hist: dict[str, int] = {}
        claimed = np.zeros(n, dtype=bool)
        single = ""
        for reason, mask in part.reasons:
            new = mask & ~claimed
            k = int(np.count_nonzero(new))
            if k:
                hist[reason] = hist.get(reason, 0) + k
                claimed |= new
                single = "was " + reason[5:] if reason.startswith("were ") else reason
        names = nodes.space.names
        for i in np.flatnonzero(~claimed).tolist():
            d = self._limit(part, i, float(slots[i]))
            if names[d] == PODS:
                reason = "too many pods"
                single = f"is at its pod limit ({_amount(nodes.allocatable[i, d])})"
            else:
                reason = f"insufficient {names[d]}"
                single = f"has no {names[d]} left"
            hist[reason] = hist.get(reason, 0) + 1
        if n == 1:
            return f"node {nodes.names[0]} {single}"
        return FitError(n, hist).render()

    def _limit(self, part: _Part, i: int, taken: float) -> int:
        """The resource node ``i`` has too little of for one more of ``part``'s tasks
        once ``taken`` of them are on it (the first such in the space's order)."""
        idle = self.nodes.idle[i]
        dims = part.dims
        lefts = [
            idle[d] - taken * use - init
            for d, init, use in zip(dims, part.init, part.use, strict=True)
        ]
        short = [d for d, left in zip(dims, lefts, strict=True) if left < 0]
        if short:
            return short[0]
        return dims[int(np.argmin(lefts))] if dims else 0


def room_of(ssn: Session) -> BestEffortRoom:
    """A fresh :class:`BestEffortRoom` for ``ssn``."""
    return BestEffortRoom(ssn)


def _roles_short(job: JobInfo, with_requests: bool) -> dict[str, int]:
    """Role -> how many more tasks it needs beyond those ready (and, with
    ``with_requests``, its pending tasks that request resources). Volcano skips the
    per-role check when the roles ask for more than minMember; so does this."""
    minimums = job.min_task_member
    if not minimums or job.min_available < sum(minimums.values()):
        return {}
    counts: dict[str, int] = {}
    for status, bucket in job.by_status.items():
        ready = status in READY_STATUSES
        if not ready and not (with_requests and status == TaskStatus.PENDING):
            continue
        for t in bucket.values():
            if ready or not t.best_effort:
                counts[t.role] = counts.get(t.role, 0) + 1
    return {r: n - counts.get(r, 0) for r, n in minimums.items() if n > counts.get(r, 0)}


def _max_flow(cap: list[dict[int, int]], s: int, t: int) -> int:
    """Edmonds-Karp on residual capacities ``cap`` (changed in place): the flow added."""
    total = 0
    while True:
        parent = {s: s}
        frontier = [s]
        while frontier and t not in parent:
            nxt = []
            for u in frontier:
                for v, c in cap[u].items():
                    if c > 0 and v not in parent:
                        parent[v] = u
                        nxt.append(v)
            frontier = nxt
        if t not in parent:
            return total
        v, bottleneck = t, math.inf
        while v != s:
            u = parent[v]
            bottleneck = min(bottleneck, cap[u][v])
            v = u
        flow = int(bottleneck)  # (one of the capacities: t was reached, t is not s)
        v = t
        while v != s:
            u = parent[v]
            cap[u][v] -= flow
            cap[v][u] = cap[v].get(u, 0) + flow
            v = u
        total += flow


def _task_cmp(ssn: Session) -> Callable[[TaskInfo, TaskInfo], int]:
    def cmp(a: TaskInfo, b: TaskInfo) -> int:
        return -1 if ssn.task_less(a, b) else (1 if ssn.task_less(b, a) else 0)

    return cmp


def _first(ssn: Session, tasks: list[TaskInfo]) -> TaskInfo:
    return min(tasks, key=functools.cmp_to_key(_task_cmp(ssn)))


def _amount(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


__all__ = ["MAX_GROUPS", "BestEffortRoom", "room_of"]
