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
where it fits now. So where backfill would complete the gang, allocate and backfill
decide exactly as with Volcano's arithmetic. Where the bound is too generous (other
jobs took the slots meanwhile, or backfill's choice of nodes left a task without one),
allocate has kept the gang's statement uncommitted and backfill gives it back (see
:mod:`pumice.actions.allocate`): no gang is left half placed either way.

**Cost.** An answer is kept per job until the job's tasks or the nodes change (allocate
asks after every placement of a gang that counts on best-effort tasks, and only
then); the groups until the job's pending best-effort tasks change; a group's slots are
refreshed only in the node rows that changed since it last looked.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable

import numpy as np

from pumice.api.job import FitError, JobInfo
from pumice.api.quantity import PODS
from pumice.api.task import READY_STATUSES, TaskInfo, TaskStatus
from pumice.framework.fit import predicate_filter
from pumice.framework.session import Session

#: Beyond this many groups of tasks, the groups of each role are merged into one.
MAX_GROUPS = 8


class _Group:
    """Pending best-effort tasks of one role that the predicates and the nodes' room
    treat alike; or, merged (``parts``), several such groups of a role."""

    __slots__ = (
        "blocked", "dims", "first", "init", "parts", "reasons", "role", "seen", "slots",
        "tasks", "use",
    )  # fmt: skip

    def __init__(self, role: str, first: TaskInfo) -> None:
        self.role = role
        self.first = first
        self.tasks: list[TaskInfo] = [first]
        req = first.init_resreq
        self.dims = np.flatnonzero(req)
        self.init = req[self.dims]
        self.use = first.resreq[self.dims]
        self.blocked: np.ndarray | None = None
        self.reasons: list = []
        self.slots: np.ndarray | None = None
        self.seen = -1  # how far into the node table's change log ``slots`` looked
        self.parts: list[_Group] | None = None


#: A node's slots when a task requests nothing at all (not even a pod slot).
_UNBOUNDED = 1e9

#: (pending best-effort version, the groups the flow runs on, each task's flow group,
#: each task's own group), per job.
_Groups = tuple[int, list[_Group], dict[str, _Group], dict[str, _Group]]


class BestEffortRoom:
    """The answers of one session (made by the gang plugin when it opens)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.nodes = ssn.nodes
        #: Whether any action of the configuration places best-effort tasks.
        self.placed = "backfill" in ssn.config.actions
        #: The predicates' answer depends on a task's placement alone (no inter-pod
        #: affinity about): a group's node mask is computed once in the session.
        self.static = all(getattr(fn, "by_placement", False) for fn in ssn.hooks.flat("predicate"))
        self._groups: dict[str, _Groups] = {}
        self._answers: dict[str, tuple[tuple[int, int, bool], bool]] = {}

    # -- the question -------------------------------------------------------------------

    def can_complete(self, job: JobInfo, with_requests: bool) -> bool:
        """Could ``job`` reach ``minMember`` and each role's minimum with the tasks it
        has ready, its pending best-effort tasks that the nodes can take now (together),
        and, with ``with_requests``, every pending task that requests resources (those
        allocate may still place in a later turn of the job)?"""
        key = (job._version, self.nodes.version, with_requests)
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
        if not self.placed:
            return False
        groups = self._groups_of(job)[1]
        if not groups:
            return False
        met, total, _ = self._flow(groups, roles)
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
        _, groups, group_of, part_of = self._groups_of(job)
        _, _, flows = self._flow(groups, {})
        left = dict(zip(map(id, groups), flows, strict=True))
        for task in sorted(pending, key=functools.cmp_to_key(_task_cmp(self.ssn))):
            g = group_of[task.uid]
            if left[id(g)] > 0:
                left[id(g)] -= 1
                continue
            return f"best-effort task {task.name} has no node: {self._explain(part_of[task.uid])}"
        return None

    # -- groups and slots ---------------------------------------------------------------

    def _groups_of(self, job: JobInfo) -> _Groups:
        """(version, the groups the flow runs on, each task's flow group, each task's
        own group) of ``job``'s pending best-effort tasks."""
        got = self._groups.get(job.uid)
        if got is not None and got[0] == job._best_effort_version:
            return got
        found: dict[Hashable, _Group] = {}
        part_of: dict[str, _Group] = {}
        for t in job.with_status(TaskStatus.PENDING):
            if not t.best_effort:
                continue
            key: Hashable = (t.role, t.placement, t.init_resreq.tobytes(), t.resreq.tobytes())
            if not self.static or t.host_ports or t.pod_affinity is not None:
                key = (key, t.host_ports, t.pod_affinity, t.namespace, tuple(t.labels.items()))
            g = found.get(key)
            if g is None:
                g = found[key] = _Group(t.role, t)
            else:
                g.tasks.append(t)
            part_of[t.uid] = g
        groups = list(found.values())
        if len(groups) > MAX_GROUPS:
            groups = _merged(groups, by_role=True)
            if len(groups) > MAX_GROUPS:
                groups = _merged(groups, by_role=False)
        group_of = {t.uid: g for g in groups for t in g.tasks}
        got = (job._best_effort_version, groups, group_of, part_of)
        self._groups[job.uid] = got
        return got

    def _slots(self, g: _Group) -> np.ndarray:
        """How many of ``g``'s tasks each node could take now, one after another (for a
        merged group: the most any of its parts could)."""
        if g.parts is not None:
            return np.max(np.stack([self._slots(p) for p in g.parts]), axis=0)
        nodes = self.nodes
        changes = nodes.changes
        dynamic = not self.static or g.first.host_ports or g.first.pod_affinity is not None
        if g.slots is None or dynamic or len(changes) - g.seen > len(nodes) // 8 + 8:
            if g.slots is None or dynamic:
                g.blocked, g.reasons = predicate_filter(self.ssn, g.first)
            g.slots = self._rows(g, None)
        elif len(changes) > g.seen:
            rows = np.unique(np.asarray(changes[g.seen :], dtype=np.intp))
            g.slots[rows] = self._rows(g, rows)
        g.seen = len(changes)
        return g.slots

    def _rows(self, g: _Group, rows: np.ndarray | None) -> np.ndarray:
        idle = self.nodes.idle if rows is None else self.nodes.idle[rows]
        if not g.dims.size:
            slots = np.full(idle.shape[0], _UNBOUNDED)
        else:
            head = idle[:, g.dims] - g.init
            use = g.use
            with np.errstate(divide="ignore", invalid="ignore"):
                more = np.where(use > 0, np.floor(head / use), _UNBOUNDED)
                more += (head - (more + 1) * use >= 0) & (use > 0)
                slots = np.minimum(np.where(head >= 0, more + 1, 0.0).min(axis=1), _UNBOUNDED)
        if g.blocked is not None:
            slots[g.blocked if rows is None else g.blocked[rows]] = 0.0
        return slots

    # -- the flow -----------------------------------------------------------------------

    def _flow(self, groups: list[_Group], roles: dict[str, int]) -> tuple[bool, int, list[int]]:
        """(every role in ``roles`` gets as many tasks as it needs, the most tasks placed
        with that, how many of each group's tasks are placed) over the nodes' slots."""
        slots = [self._slots(g) for g in groups]
        counts = [len(g.tasks) for g in groups]
        if len(groups) == 1:
            g = groups[0]
            total = int(min(counts[0], slots[0].sum()))
            if g.parts is None:
                have = {g.role: counts[0]}
            else:  # (merged across roles: any role may have the places)
                have = {}
                for t in g.tasks:
                    have[t.role] = have.get(t.role, 0) + 1
            met = all(n <= min(total, have.get(r, 0)) for r, n in roles.items())
            return met, total, [total]
        # Nodes lumped by the set of groups that have a slot on them; a lump holds what
        # its nodes would hold of the roomiest of those groups.
        allowed = np.stack([s > 0 for s in slots])
        codes = (allowed * (1 << np.arange(len(groups)))[:, None]).sum(axis=0)
        room = np.max(np.stack(slots), axis=0)
        sums = np.bincount(codes, weights=room)
        lumps = [(int(c), int(sums[c])) for c in np.flatnonzero(sums) if c]
        role_names = sorted({g.role for g in groups} | set(roles))
        # Vertices: 0 source, 1 sink, then roles, groups, lumps.
        ri = {r: 2 + k for k, r in enumerate(role_names)}
        gi = [2 + len(role_names) + k for k in range(len(groups))]
        li = [gi[-1] + 1 + k for k in range(len(lumps))]
        cap: list[dict[int, int]] = [{} for _ in range(li[-1] + 1 if li else gi[-1] + 1)]
        for k, g in enumerate(groups):
            cap[ri[g.role]][gi[k]] = counts[k]
        for (code, size), v in zip(lumps, li, strict=True):
            cap[v][1] = size
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

    def _explain(self, g: _Group) -> str:
        """Why no node is left for one more task of ``g`` once the nodes' slots are
        taken: each node under the first predicate that refuses it, or else under the
        resource it has no room left in."""
        nodes = self.nodes
        n = len(nodes)
        if n == 0:
            return "there are no nodes in the cluster"
        slots = self._slots(g)
        hist: dict[str, int] = {}
        claimed = np.zeros(n, dtype=bool)
        single = ""
        for reason, mask in g.reasons:
            new = mask & ~claimed
            k = int(np.count_nonzero(new))
            if k:
                hist[reason] = hist.get(reason, 0) + k
                claimed |= new
                single = "was " + reason[5:] if reason.startswith("were ") else reason
        names = nodes.space.names
        for i in np.flatnonzero(~claimed).tolist():
            d = self._limit(g, i, float(slots[i]))
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

    def _limit(self, g: _Group, i: int, taken: float) -> int:
        """The resource node ``i`` has too little of for one more of ``g``'s tasks once
        ``taken`` of them are on it (the first such in the space's order)."""
        idle = self.nodes.idle[i]
        dims = g.dims.tolist()
        lefts = [
            idle[d] - taken * use - init
            for d, init, use in zip(dims, g.init.tolist(), g.use.tolist(), strict=True)
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


def _merged(groups: list[_Group], by_role: bool) -> list[_Group]:
    """Groups merged (per role, or all into one): a node takes as many of a merged
    group's tasks as its roomiest part would, an upper bound on what the parts could."""
    out: dict[str, _Group] = {}
    for g in groups:
        key = g.role if by_role else ""
        m = out.get(key)
        if m is None:
            m = out[key] = _Group(g.role, g.first)
            m.tasks, m.parts = [], []
        m.tasks.extend(g.tasks)
        assert m.parts is not None
        m.parts.extend(g.parts if g.parts is not None else [g])
    return list(out.values())


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
        v = t
        while v != s:
            u = parent[v]
            cap[u][v] -= bottleneck
            cap[v][u] = cap[v].get(u, 0) + bottleneck
            v = u
        total += int(bottleneck)


def _task_cmp(ssn: Session):
    def cmp(a: TaskInfo, b: TaskInfo) -> int:
        return -1 if ssn.task_less(a, b) else (1 if ssn.task_less(b, a) else 0)

    return cmp


def _first(ssn: Session, tasks: list[TaskInfo]) -> TaskInfo:
    return min(tasks, key=functools.cmp_to_key(_task_cmp(ssn)))


def _amount(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


__all__ = ["MAX_GROUPS", "BestEffortRoom", "room_of"]
