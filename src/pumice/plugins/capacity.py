"""capacity: per-queue deserved / capability / guarantee, with elastic borrowing.

Follows Volcano's ``capacity`` plugin (v1.13). Each queue states what it *deserves*
(``spec.deserved``), the most it may ever hold (``spec.capability``) and what is
reserved for it (``spec.guarantee``). A queue may borrow idle resources beyond its
deserved share, up to its *real capability*: the cluster minus every queue's guarantee,
plus its own guarantee, capped by its capability. Borrowed resources can be taken
back: ``reclaim`` may evict a queue's tasks while it holds more than it deserves in a
dimension the victim uses, never below its guarantee.

With ``enableHierarchy: true`` queues form a tree through ``spec.parent`` (a queue
without a parent hangs under ``root``): only leaf queues hold jobs, every ancestor's
real capability bounds its subtree (a child's real capability is computed from its
parent's), allocations count in every ancestor, and victims are taken first from the
queues nearest the reclaimer in the tree. Trees are checked when the session opens: a
job in a queue that has children stops the plugin (Volcano's "not ready to schedule":
nothing is allocated, admitted or reclaimed), and a child whose capability exceeds its
parent's in a resource both name is an error.

Registered: queue_order (spec.priority, then share = allocated / deserved; a queue with
no deserved has share 1 and goes after queues with one), allocatable, job_enqueueable
and job_enqueued, reclaimable, preemptive, victim_queue_order (hierarchy).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import numpy as np

from pumice.api.job import JobInfo
from pumice.api.quantity import format_amount
from pumice.api.queue import QueueInfo
from pumice.api.resources import ResourceSpace
from pumice.api.task import ALLOCATED_STATUSES, TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.errors import InputError, shown
from pumice.framework.limits import CAPABILITY, amounts, cluster_total, describe, finite_dims
from pumice.framework.pqueue import PriorityQueue
from pumice.framework.session import EventHandler, Session
from pumice.framework.verdicts import timeless
from pumice.framework.victims import on_kind

Vector = np.ndarray
ROOT = "root"


@dataclass(slots=True, eq=False)
class QueueAttr:
    name: str
    deserved: Vector
    allocated: Vector
    request: Vector
    inqueue: Vector
    elastic: Vector
    guarantee: Vector
    capability: Vector  # +inf where unlimited
    real_capability: Vector
    share: float = 0.0
    ancestors: list[str] = field(default_factory=list)  # root first
    children: dict[str, QueueAttr] = field(default_factory=dict)

    def update_share(self) -> None:
        """Volcano's ``updateQueueAttrShare``: a queue without deserved resources is
        best effort (share 1); otherwise the largest allocated / deserved ratio."""
        sel = self.deserved > 0
        if not sel.any():
            self.share = 1.0
            return
        self.share = float(np.max(self.allocated[sel] / self.deserved[sel]))


def hierarchy_enabled(ssn: Session, plugin: str) -> bool:
    for tier in ssn.config.tiers:
        for opt in tier.plugins:
            if opt.name == plugin:
                return opt.enabled("hierarchy")
    return False


def _fits_dims(used: Vector, limit: Vector, req: Vector) -> bool:
    """``used <= limit`` in the dimensions ``req`` asks for (Volcano's
    ``LessEqualWithDimension``)."""
    sel = req > 0
    return bool(np.all(used[sel] <= limit[sel]))


class CapacityPlugin:
    name = "capacity"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ("ancestorReclaimLevel",)

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        self.attrs: dict[str, QueueAttr] = {}
        self.ready = True
        self.not_ready_reason = ""
        self.hierarchy = False
        #: ``ancestorReclaimLevel``: how many levels of ancestors reclaim also checks
        #: (hierarchy only; 0, the default, looks at the leaf queues alone).
        self.ancestor_level = max(arguments.get_int("ancestorReclaimLevel", 0), 0)
        self._space: ResourceSpace | None = None  # the session's, for messages
        self._queues: dict[str, QueueInfo] = {}  # the session's queues, for messages

    # -- building the queue attributes --------------------------------------------------

    def _clip(self, ssn: Session, v: Vector) -> Vector:
        return np.where(ssn.space.share, v, 0.0)

    def _new_attr(self, ssn: Session, q: QueueInfo) -> QueueAttr:
        zero = ssn.space.zeros
        deserved = self._clip(ssn, q.deserved) if q.deserved is not None else zero()
        cap = np.where(ssn.space.share, q.capability, np.inf)
        return QueueAttr(
            name=q.name, deserved=deserved, allocated=zero(), request=zero(),
            inqueue=zero(), elastic=zero(), guarantee=self._clip(ssn, q.guarantee),
            capability=cap, real_capability=zero(),
        )  # fmt: skip

    def _account_job(self, ssn: Session, attr: QueueAttr, job: JobInfo) -> list[Vector]:
        """Add ``job`` to ``attr``; return the deltas (allocated, request, inqueue,
        elastic) so that ancestors can add them too."""
        alloc, req = ssn.space.zeros(), ssn.space.zeros()
        for t in job.with_status(*ALLOCATED_STATUSES):
            alloc += t.resreq
            req += t.resreq
        for t in job.with_status(TaskStatus.PENDING):
            req += t.resreq
        demand = job.inqueue_demand()
        inq = demand if demand is not None else ssn.space.zeros()
        minres = job.min_resources if job.min_resources is not None else ssn.space.zeros()
        elastic = np.maximum(job.allocated - minres, 0.0)
        deltas = [self._clip(ssn, v) for v in (alloc, req, inq, elastic)]
        for target, d in zip(
            (attr.allocated, attr.request, attr.inqueue, attr.elastic), deltas, strict=True
        ):
            target += d
        return deltas

    def _build_flat(self, ssn: Session, total: Vector) -> None:
        total_guarantee = ssn.space.zeros()
        for q in ssn.queues.values():
            total_guarantee += self._clip(ssn, q.guarantee)
        for uid in sorted(ssn.jobs):
            job = ssn.jobs[uid]
            attr = self.attrs.get(job.queue)
            if attr is None:
                attr = self._new_attr(ssn, ssn.queues[job.queue])
                real = np.maximum(total - total_guarantee, 0.0) + attr.guarantee
                attr.real_capability = np.minimum(real, attr.capability)
                self.attrs[job.queue] = attr
            self._account_job(ssn, attr, job)
        for attr in self.attrs.values():
            attr.deserved = np.maximum(
                np.minimum(attr.deserved, attr.real_capability), attr.guarantee
            )
            attr.update_share()

    def _build_tree(self, ssn: Session, total: Vector) -> None:
        for name in sorted(ssn.queues):
            self.attrs[name] = self._new_attr(ssn, ssn.queues[name])
        if ROOT not in self.attrs:  # Volcano's controller always creates it
            root_q = QueueInfo(
                name=ROOT, weight=1, capability=np.full(ssn.space.size, np.inf),
                deserved=None, guarantee=ssn.space.zeros(),
            )  # fmt: skip
            self.attrs[ROOT] = self._new_attr(ssn, root_q)
        for name in sorted(ssn.queues):
            if name == ROOT:
                continue
            chain: list[str] = []
            cur = name
            while cur != ROOT:
                q = ssn.queues.get(cur)
                parent = (q.parent if q is not None else None) or ROOT
                if parent not in self.attrs:
                    raise InputError(
                        f"parent queue {shown(parent)} does not exist",
                        obj=f"Queue {cur}",
                        field="spec.parent",
                    )
                if parent in chain or parent == name:
                    raise InputError(
                        f"queue parents form a cycle through {shown(parent)}",
                        obj=f"Queue {name}",
                        field="spec.parent",
                    )
                chain.append(parent)
                cur = parent
            self.attrs[name].ancestors = list(reversed(chain))
            direct = chain[0]
            self.attrs[direct].children[name] = self.attrs[name]
        for uid in sorted(ssn.jobs):
            job = ssn.jobs[uid]
            attr = self.attrs[job.queue]
            if attr.children:
                self.ready = False
                self.not_ready_reason = (
                    f"job {job.uid} is in queue {job.queue}, which has child queues; "
                    "only leaf queues may hold jobs"
                )
                continue
            deltas = self._account_job(ssn, attr, job)
            for anc in attr.ancestors:
                a = self.attrs[anc]
                for target, d in zip(
                    (a.allocated, a.request, a.inqueue, a.elastic), deltas, strict=True
                ):
                    target += d
        root = self.attrs[ROOT]
        root.real_capability = root.capability
        self._check_tree(root)
        for attr in self.attrs.values():
            attr.update_share()

    def _check_tree(self, attr: QueueAttr) -> None:
        """Volcano's ``checkHierarchicalQueue``: children inherit unset capabilities,
        deserved is raised to guarantee, real capabilities flow down the tree."""
        total_guarantee = np.zeros_like(attr.guarantee)
        total_deserved = np.zeros_like(attr.deserved)
        for name in sorted(attr.children):
            child = attr.children[name]
            child.deserved = np.maximum(child.deserved, child.guarantee)
            total_deserved += child.deserved
            total_guarantee += child.guarantee
            over = np.isfinite(child.capability) & (child.capability > attr.capability)
            if over.any():
                # (on_cycle_open sets the space before it builds the tree)
                names = cast(ResourceSpace, self._space).names
                detail = ", ".join(
                    f"{names[d]} {format_amount(names[d], float(child.capability[d]))} > "
                    f"{format_amount(names[d], float(attr.capability[d]))}"
                    for d in np.flatnonzero(over)
                )
                raise InputError(
                    f"capability exceeds the capability of parent queue {attr.name} ({detail})",
                    obj=f"Queue {child.name}",
                    field="spec.capability",
                )
            child.capability = np.where(
                np.isinf(child.capability), attr.capability, child.capability
            )
        if attr.name == ROOT:
            attr.guarantee = total_guarantee
            attr.deserved = total_deserved
        for name in sorted(attr.children):
            child = attr.children[name]
            real = np.maximum(attr.real_capability - total_guarantee, 0.0) + child.guarantee
            child.real_capability = np.minimum(real, child.capability)
        for name in sorted(attr.children):
            self._check_tree(attr.children[name])

    # -- the session --------------------------------------------------------------------

    def on_cycle_open(self, ssn: Session) -> None:
        """The cycle's queue attributes (the queue tree, with hierarchy), from the
        snapshot's queues and jobs; the functions registered at open read them. A tree
        that is not sound (a parent missing, a cycle, a child's capability above its
        parent's) raises :class:`InputError`, and the cycle decides nothing."""
        total = self._clip(ssn, ssn.total)
        self._space = ssn.space
        self._queues = ssn.queues
        self.ready, self.not_ready_reason = True, ""
        self.attrs.clear()  # (in place: the registered functions hold the dict)
        if self.hierarchy:
            self._build_tree(ssn, total)
        else:
            self._build_flat(ssn, total)

    def on_session_open(self, ssn: Session) -> None:
        """Register the functions, once for as long as the session lives (see
        :meth:`on_cycle_open`)."""
        self.hierarchy = hierarchy_enabled(ssn, self.name)
        attrs = self.attrs

        def chain(queue: str) -> list[QueueAttr]:
            """The queue and its ancestors, leaf first."""
            a = attrs[queue]
            return [a, *(attrs[x] for x in reversed(a.ancestors))]

        def is_leaf(queue: str) -> bool:
            return not attrs[queue].children

        def compare_share(a: QueueAttr, b: QueueAttr) -> int:
            if a.share == b.share:
                da, db = bool(np.any(a.deserved > 0)), bool(np.any(b.deserved > 0))
                return 0 if da == db else (-1 if da else 1)
            return -1 if a.share < b.share else 1

        def queue_order(a: QueueInfo, b: QueueInfo) -> int:
            if a.priority != b.priority:
                return -1 if a.priority > b.priority else 1
            la, lb = attrs.get(a.name), attrs.get(b.name)
            if la is None or lb is None:
                return 0
            if not self.hierarchy:
                return compare_share(la, lb)
            leaf_a, leaf_b = is_leaf(a.name), is_leaf(b.name)
            if leaf_a != leaf_b:
                return -1 if leaf_a else 1
            if not leaf_a:
                return compare_share(la, lb)
            level = _common_level(la, lb)
            pa = attrs[la.ancestors[level + 1]] if level + 1 < len(la.ancestors) else la
            pb = attrs[lb.ancestors[level + 1]] if level + 1 < len(lb.ancestors) else lb
            return compare_share(pa, pb)

        def victim_queue_order(a: QueueInfo, b: QueueInfo, p: QueueInfo) -> int:
            la, lb, lp = attrs.get(a.name), attrs.get(b.name), attrs.get(p.name)
            if la is None or lb is None or lp is None:
                return 0
            x, y = _common_level(la, lp), _common_level(lb, lp)
            return 0 if x == y else (-1 if x > y else 1)

        def allocatable(q: QueueInfo, task: TaskInfo) -> bool:
            if not q.is_open() or not self.ready:
                return False
            if q.name not in attrs:
                return True
            if self.hierarchy and not is_leaf(q.name):
                return False
            req = self._clip(ssn, task.resreq)
            return all(_fits_dims(a.allocated + req, a.real_capability, req) for a in chain(q.name))

        def enqueueable(job: JobInfo) -> int:
            if not self.ready:
                return -1
            if self.hierarchy and job.queue in attrs and not is_leaf(job.queue):
                return -1
            q = ssn.queues[job.queue]
            if not q.is_open():
                return -1
            if job.min_resources is None or job.queue not in attrs:
                return 1
            minreq = self._clip(ssn, job.min_resources)
            for a in chain(job.queue):
                need = minreq + a.allocated + a.inqueue - a.elastic
                if not _fits_dims(need, a.real_capability, minreq):
                    return -1
            return 1

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is None or job.queue not in attrs:
                return
            minreq = self._clip(ssn, job.min_resources)
            for a in chain(job.queue):
                a.inqueue += minreq

        level_max = self.ancestor_level if self.hierarchy else 0

        def ancestor_at(a: QueueAttr, depth: int) -> str | None:
            """Volcano's ``queueAncestorAtDepth``: depth 1 is the parent."""
            if depth <= 0 or len(a.ancestors) < depth:
                return None
            return a.ancestors[len(a.ancestors) - depth]

        def shares_ancestor(a: QueueAttr, b: QueueAttr) -> bool:
            ours = {ancestor_at(a, d) for d in range(1, level_max + 1)} - {None, ROOT}
            theirs = {ancestor_at(b, d) for d in range(1, level_max + 1)}
            return bool(ours & theirs)

        def exceeds(alloc: Vector, deserved: Vector, req: Vector) -> bool:
            """Above deserved in a dimension the victim uses (or deserved does not
            name any such dimension: an immediate victim)."""
            relevant = (req > 0) & (deserved > 0)
            if not relevant.any():
                return True
            return bool(np.any(relevant & (alloc > deserved)))

        def reclaimable(reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
            if not self.ready:
                return []
            rjob = ssn.jobs.get(reclaimer.job or "")
            if rjob is None or rjob.queue not in attrs:
                return []
            rattr = attrs[rjob.queue]
            want = self._clip(ssn, reclaimer.init_resreq) > 0
            left: dict[str, Vector] = {}
            victims = []
            ordered = PriorityQueue(lambda x, y: ssn.victim_less(x, y, reclaimer), candidates)
            while not ordered.empty():
                t = ordered.pop()
                job = ssn.jobs.get(t.job or "")
                if job is None or job.queue not in attrs:
                    continue
                attr = attrs[job.queue]
                req = self._clip(ssn, t.resreq)
                if not np.any((req > 0) & want):
                    continue  # nothing the reclaimer needs
                alloc = left.setdefault(job.queue, attr.allocated.copy())
                if not bool(np.all(attr.guarantee <= alloc - req)):
                    continue  # would go below the guarantee
                relevant = (req > 0) & (attr.deserved > 0)
                immediate = not relevant.any()
                if immediate:
                    if (
                        level_max
                        and shares_ancestor(rattr, attr)
                        and not np.any(want & (rattr.deserved > 0))
                    ):
                        continue  # no real contention under a shared ancestor
                elif not np.any(relevant & (alloc > attr.deserved)):
                    continue  # not above deserved in a dimension it uses and deserved names
                # ancestorReclaimLevel: the victim's ancestors must be above deserved too
                ancestors: list[Vector] = []
                eligible = True
                for depth in range(1, level_max + 1):
                    anc = ancestor_at(attr, depth)
                    if anc is None or anc == ROOT or ancestor_at(rattr, depth) == anc:
                        continue
                    aattr = attrs[anc]
                    aalloc = left.setdefault(anc, aattr.allocated.copy())
                    ancestors.append(aalloc)
                    if not exceeds(aalloc, aattr.deserved, req):
                        eligible = False
                        break
                if not eligible:
                    continue
                alloc -= req
                for aalloc in ancestors:
                    aalloc -= req
                victims.append(t)
            return victims

        def preemptive(q: QueueInfo, task: TaskInfo) -> bool:
            if not self.ready or not q.is_open():
                return False
            attr = attrs.get(q.name)
            if attr is None:
                return True
            req = self._clip(ssn, task.resreq)
            future = attr.allocated + req
            if not _fits_dims(future, attr.real_capability, req):
                return False
            sel = (req > 0) & (attr.deserved > 0)
            if np.any(future[sel] <= attr.deserved[sel]):
                return True
            for depth in range(1, level_max + 1):
                anc = ancestor_at(attr, depth)
                if anc is None or anc == ROOT:
                    continue
                a = attrs[anc]
                fa = a.allocated + req
                sel = (req > 0) & (a.deserved > 0)
                if np.any(fa[sel] <= a.deserved[sel]):
                    return True
            return False

        def on_allocate(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job or "")
            if job is not None and job.queue in attrs:
                req = self._clip(ssn, task.resreq)
                for a in chain(job.queue):
                    a.allocated += req
                    a.update_share()

        def on_deallocate(task: TaskInfo) -> None:
            job = ssn.jobs.get(task.job or "")
            if job is not None and job.queue in attrs:
                req = self._clip(ssn, task.resreq)
                for a in chain(job.queue):
                    a.allocated -= req
                    a.update_share()

        ssn.on("queue_order", self.name, queue_order)
        ssn.on("allocatable", self.name, allocatable)
        ssn.on("job_enqueueable", self.name, enqueueable)
        ssn.on("job_enqueued", self.name, enqueued)
        ssn.on("reclaimable", self.name, reclaimable, alike=True)
        ssn.on("gang_evictable", self.name, on_kind("gangreclaim", reclaimable))
        ssn.on("preemptive", self.name, preemptive)
        if self.hierarchy:
            ssn.on("victim_queue_order", self.name, victim_queue_order)
        ssn.add_event_handler(EventHandler(on_allocate, on_deallocate))

    def on_session_close(self, ssn: Session) -> None:
        if not self.ready and self.not_ready_reason:
            note = f"capacity: queue tree not usable: {self.not_ready_reason}"
            if note not in ssn.decisions.notes:
                ssn.decisions.notes.append(note)

    # -- explanations -------------------------------------------------------------------

    def _chain(self, queue: str) -> list[QueueAttr]:
        """The queue and its ancestors (hierarchy), leaf first."""
        a = self.attrs[queue]
        return [a, *(self.attrs[x] for x in reversed(a.ancestors))]

    def _sources(self, attr: QueueAttr) -> list[str]:
        """Per resource, what the queue's real capability is: its own
        ``spec.capability``, an ancestor's (inherited, in a tree), or derived from the
        cluster (its total less the queues' guarantees; a parent's real capability less
        its children's guarantees, in a tree)."""
        queues = self._queues
        own = queues.get(attr.name)
        above = [queues[a] for a in reversed(attr.ancestors) if a in queues]
        guarantees = any(bool(np.any(q.guarantee > 0)) for q in queues.values())
        parent = attr.ancestors[-1] if attr.ancestors else None
        if parent is None:
            derived = cluster_total(guarantees)
        else:
            derived = f"what queue {parent} has left beyond its children's guarantees"
        out = []
        for d, real in enumerate(attr.real_capability.tolist()):
            source = derived
            for q in [own, *above]:
                if q is None or not q.has_capability or not np.isfinite(q.capability[d]):
                    continue
                if real >= q.capability[d]:
                    source = CAPABILITY if q is own else f"queue {q.name}'s capability"
                break  # the nearest capability set is the one inherited
            out.append(source)
        return out

    def capability_exceeded(self, queue: str, request: Vector) -> tuple[str, int] | None:
        """The nearest queue (the queue itself, then its ancestors in a tree) whose own
        ``spec.capability`` ``request`` alone exceeds, and the first such resource:
        its real capability can never hold it. None when within every one."""
        if queue not in self.attrs or self._space is None:
            return None
        share = self._space.share
        names = [queue, *(a for a in reversed(self.attrs[queue].ancestors) if self.hierarchy)]
        for name in names:
            q = self._queues.get(name)
            if q is None or not q.has_capability:
                continue
            over = np.flatnonzero(share & (request > q.capability))
            if over.size:
                return name, int(over[0])
        return None

    def refusal_limit(self, queue: str, space: ResourceSpace) -> str | None:
        """What ``allocatable`` held the queue's tasks to: its real capability, named
        by source (``its capability (cpu 8)``, ``the cluster's total (cpu 16)``), and in
        a tree the ancestors that have reached theirs."""
        if not self.ready or queue not in self.attrs:
            return None
        chain = self._chain(queue)
        leaf = chain[0]
        dims = finite_dims(leaf.real_capability, space.share)
        parts = [describe(space, leaf.real_capability, self._sources(leaf), dims)] if dims else []
        for a in chain[1:]:
            full = finite_dims(a.real_capability, space.share & (a.allocated >= a.real_capability))
            if full:
                limit = describe(space, a.real_capability, self._sources(a), full)
                theirs = limit.replace("its ", f"queue {a.name}'s ")
                parts.append(theirs if theirs != limit else f"{limit} for queue {a.name}")
        return " or ".join(parts) if parts else None

    def explain_enqueue(self, ssn: Session, job: JobInfo) -> str:
        if not self.ready:
            return f"the queue tree is not usable: {self.not_ready_reason}"
        q = ssn.queues[job.queue]
        if not q.is_open():
            return f"queue {q.name} is {q.state}"
        attr = self.attrs.get(job.queue)
        if attr is None or job.min_resources is None:
            return f"queue {job.queue} refused the job"
        if attr.children:
            return f"queue {job.queue} has child queues; only leaf queues hold jobs"
        space = ssn.space
        minreq = self._clip(ssn, job.min_resources)
        for a in self._chain(job.queue):  # the first that refuses, as enqueueable asks
            need = minreq + a.allocated + a.inqueue - a.elastic
            over = (minreq > 0) & ~(need <= a.real_capability)
            if not over.any():
                continue
            dims = np.flatnonzero(over).tolist()
            limit = describe(space, a.real_capability, self._sources(a), dims)
            where = f"queue {a.name}" if a is attr else f"queue {a.name} (above {job.queue})"
            return (
                f"admitting it would take {where} past {limit}: "
                f"minResources {amounts(space, minreq, dims)}, already allocated "
                f"{amounts(space, a.allocated, dims)}, admitted {amounts(space, a.inqueue, dims)}"
            )
        return f"queue {job.queue} refused the job"


def _common_level(a: QueueAttr, b: QueueAttr) -> int:
    """Volcano's ``getQueueLevel``: the depth of the deepest common ancestor."""
    level = 0
    for i in range(min(len(a.ancestors), len(b.ancestors))):
        if a.ancestors[i] == b.ancestors[i]:
            level = i
        else:
            return level
    return level
