"""task-topology: place the roles of a job that talk to each other together, and the
roles that must not share a node apart.

A job says which of its roles (pod annotation ``volcano.sh/task-spec``) belong together
through annotations of its PodGroup (a Volcano Job's annotations are copied onto it):

- ``volcano.sh/task-topology-affinity: "ps,worker;ps,evaluator"``: each ``;`` group
  shares nodes (a group of one role: its pods share nodes);
- ``volcano.sh/task-topology-anti-affinity: "ps;worker,chief"``: each group keeps
  apart (a group of one role: its pods spread);
- ``volcano.sh/task-topology-task-order: "ps,worker"``: which roles go first.

An annotation naming a role the job has no pod of, or a role twice in one group, is
ignored with the others of the job (as in Volcano). As Volcano's plugin
(``pkg/scheduler/plugins/task-topology``) does, at each cycle the pods of the roles named
in the affinity annotations are sorted into *buckets*: pods already on a node start
one bucket per node, each pending pod joins the bucket it has most affinity with (the
lighter one on ties), or a new one when all it finds there is anti-affinity. Then:

- **task_order.** Pods in a bucket go before pods outside any bucket; within a job,
  pods of the bigger bucket first, within a bucket by the task order and then by the
  strength of the role's topology (self anti-affinity, inter affinity, self affinity,
  inter anti-affinity), and older buckets before younger ones.
- **node_order.** For a pod in a bucket, a node scores the bucket's pods already on it,
  less the pods of anti-affine roles placed there in this cycle, plus the bucket's
  pods still to place, less those that would not fit there with it (taken one by one,
  in the order they joined the bucket, where Volcano takes them in map order, at
  random), times ``task-topology.weight`` (1) and 100 / the largest bucket. A node the
  pod cannot fit on even when its releasing pods are gone scores 0.

Nothing is refused: the plugin changes orders and scores only. Its functions concern
the jobs that carry the annotations: while no job of the cycle does, the task order
offers a sort key (it says nothing), and its score is 0 for every other pod, through
the separable form (``context`` / ``rows`` / ``one``) allocate's fast path uses.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from pumice.api.job import JobInfo
from pumice.api.parse import TASK_SPEC_ANNOTATION
from pumice.api.quantity import CPU, MEMORY, PODS
from pumice.api.task import TaskInfo, TaskStatus
from pumice.conf.arguments import Arguments
from pumice.errors import InputError
from pumice.framework.scoring import SeparableScore
from pumice.framework.session import EventHandler, Session
from pumice.framework.verdicts import timeless

AFFINITY = "volcano.sh/task-topology-affinity"
ANTI_AFFINITY = "volcano.sh/task-topology-anti-affinity"
TASK_ORDER = "volcano.sh/task-topology-task-order"
MAX_NODE_SCORE = 100.0
#: Volcano's tolerance in resource comparisons (``api.GetMinResource``).
MIN_RESOURCE = 0.1

# How strongly a role's topology orders it (Volcano's ``affinityPriority``).
SELF_ANTI, INTER_AFFINITY, SELF_AFFINITY, INTER_ANTI = 4, 3, 2, 1

_serials = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Topology:
    """A job's three annotations, split (empty names kept, as Volcano keeps them)."""

    affinity: tuple[tuple[str, ...], ...] = ()
    anti_affinity: tuple[tuple[str, ...], ...] = ()
    order: tuple[str, ...] = ()


def _check(groups: tuple[tuple[str, ...], ...], roles: set[str], job: JobInfo) -> str:
    """Why ``groups`` cannot be used for ``job`` ("" when they can)."""
    for group in groups:
        seen: set[str] = set()
        for name in group:
            if not name:
                continue
            if name not in roles:
                return f"task {name} do not exist in job <{job.namespace}/{job.name}>"
            if name in seen:
                return f"task {name} is duplicate in job <{job.namespace}/{job.name}>"
            seen.add(name)
    return ""


def read_topology(job: JobInfo) -> tuple[Topology | None, str]:
    """The job's topology from its annotations (None when it has none), and why it is
    ignored ("" when it is not; then the topology is None too)."""
    ann = job.annotations
    if AFFINITY not in ann and ANTI_AFFINITY not in ann and TASK_ORDER not in ann:
        return None, ""
    roles = {t.role for t in job.tasks.values()}

    def groups(text: str) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple(part.split(",")) for part in text.split(";"))

    affinity = groups(ann[AFFINITY]) if AFFINITY in ann else ()
    anti = groups(ann[ANTI_AFFINITY]) if ANTI_AFFINITY in ann else ()
    order = tuple(ann[TASK_ORDER].split(",")) if TASK_ORDER in ann else ()
    for part in (affinity, anti, (order,)):
        why = _check(part, roles, job)
        if why:
            return None, why
    return Topology(affinity, anti, order), ""


def task_name(task: TaskInfo) -> str:
    """The role the plugin sorts a pod by: its ``volcano.sh/task-spec`` annotation."""
    return task.annotations.get(TASK_SPEC_ANNOTATION, "")


@dataclass(slots=True)
class Bucket:
    """Pods of one job meant to share nodes: those still to place (in the order they
    joined) and, per node, how many are there already."""

    index: int
    request: np.ndarray
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    roles: dict[str, int] = field(default_factory=dict)
    #: Volcano's weighing of a bucket's pending requests: 1 cpu (in millicores), 1 Mi
    #: of memory and a thousandth of an extended resource count alike.
    req_score: float = 0.0
    bound: int = 0
    node: dict[str, int] = field(default_factory=dict)


class JobTopology:
    """One job's buckets and role relations in one cycle (Volcano's ``JobManager``)."""

    def __init__(self, topology: Topology, weights: np.ndarray) -> None:
        #: (serial, version) name this state in the scorer's context: the version moves
        #: whenever a pod of the job is placed.
        self.serial = next(_serials)
        self.version = 0
        self.weights = weights
        self.buckets: list[Bucket] = []
        self.bucket_of: dict[str, int] = {}
        self.role_of: dict[str, str] = {}
        self.strength: dict[str, int] = {}
        self.order: dict[str, int] = {}
        self.inter: dict[str, set[str]] = {}
        self.self_affine: set[str] = set()
        self.inter_anti: dict[str, set[str]] = {}
        self.self_anti: set[str] = set()
        self.max_size = 0
        #: node -> role -> pods of that role placed there in this cycle.
        self.placed: dict[str, dict[str, int]] = {}
        self._apply(topology)

    def _mark(self, role: str, strength: int) -> None:
        if strength > self.strength.get(role, 0):
            self.strength[role] = strength

    def _apply(self, topology: Topology) -> None:
        for groups, pairs, single, kinds in (
            (topology.affinity, self.inter, self.self_affine, (SELF_AFFINITY, INTER_AFFINITY)),
            (topology.anti_affinity, self.inter_anti, self.self_anti, (SELF_ANTI, INTER_ANTI)),
        ):
            for group in groups:
                if len(group) == 1:
                    single.add(group[0])
                    self._mark(group[0], kinds[0])
                    continue
                for k, src in enumerate(group):
                    for dst in group[:k]:
                        pairs.setdefault(src, set()).add(dst)
                        pairs.setdefault(dst, set()).add(src)
                    self._mark(src, kinds[1])
        n = len(topology.order)
        for k, role in enumerate(topology.order):
            self.order[role] = n - k

    def affinity(self, role: str, counts: dict[str, int], only_anti: bool) -> int:
        """Pods of ``counts`` (role -> pods) ``role`` is affine to, less those it is
        anti-affine to."""
        total = 0
        if not role:
            return total
        for other, count in counts.items():
            same = other == role
            if not only_anti and (
                role in self.self_affine if same else other in self.inter.get(role, ())
            ):
                total += count
            if role in self.self_anti if same else other in self.inter_anti.get(role, ()):
                total -= count
        return total

    def rank(self, role: str) -> tuple[int, int]:
        """(task order, strength): the larger goes first."""
        return self.order.get(role, 0), self.strength.get(role, 0)

    def build(self, tasks: list[TaskInfo]) -> None:
        """Sort the job's pods of topology roles into buckets: placed pods first (by
        node name), then by rank, then by name."""
        members = []
        for t in tasks:
            role = task_name(t)
            if role and role in self.strength:
                self.role_of[t.uid] = role
                members.append(t)
        placed = sorted((t for t in members if t.node), key=lambda t: (t.node, t.name))
        waiting = sorted(
            (t for t in members if not t.node),
            key=lambda t: (*(-r for r in self.rank(self.role_of[t.uid])), t.name),
        )
        by_node: dict[str, Bucket] = {}
        for t in (*placed, *waiting):
            role = self.role_of[t.uid]
            chosen: Bucket | None = None
            if t.node:
                best = 0
                chosen = by_node.get(t.node)
            else:
                best = None
                for b in self.buckets:
                    aff = self.affinity(role, b.roles, False)
                    if best is None or aff > best:
                        best, chosen = aff, b
                    elif aff == best and chosen is not None and b.req_score < chosen.req_score:
                        chosen = b
            if chosen is None or (best is not None and best < 0):
                chosen = Bucket(len(self.buckets), np.zeros_like(self.weights))
                self.buckets.append(chosen)
                if t.node:
                    by_node[t.node] = chosen
            self._add(chosen, role, t)

    def _add(self, bucket: Bucket, role: str, task: TaskInfo) -> None:
        self.bucket_of[task.uid] = bucket.index
        bucket.roles[role] = bucket.roles.get(role, 0) + 1
        if task.node:
            bucket.node[task.node] = bucket.node.get(task.node, 0) + 1
            bucket.bound += 1
        else:
            bucket.tasks[task.uid] = task
            bucket.request += task.resreq
            bucket.req_score += float(task.resreq @ self.weights)
        self.max_size = max(self.max_size, len(bucket.tasks) + bucket.bound)

    def bucket(self, task: TaskInfo) -> Bucket | None:
        k = self.bucket_of.get(task.uid)
        return None if k is None else self.buckets[k]

    def bound(self, task: TaskInfo) -> None:
        """``task`` was placed in this cycle (Volcano's ``TaskBound``)."""
        self.version += 1
        role = task_name(task)
        if role and task.node:
            on = self.placed.setdefault(task.node, {})
            on[role] = on.get(role, 0) + 1
        bucket = self.bucket(task)
        if bucket is not None and task.node:
            bucket.node[task.node] = bucket.node.get(task.node, 0) + 1
            bucket.bound += 1
            if bucket.tasks.pop(task.uid, None) is not None:
                bucket.request -= task.resreq
                bucket.req_score -= float(task.resreq @ self.weights)


class TaskTopologyPlugin:
    name = "task-topology"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = ("task-topology.weight",)

    def __init__(self, arguments: Arguments) -> None:
        self.weight = arguments.get_int("task-topology.weight", 1)
        if self.weight < 0:
            raise InputError(
                f"must not be negative, got {self.weight}",
                obj="plugin task-topology",
                field="arguments.task-topology.weight",
            )
        self.ssn: Session | None = None
        self.jobs: dict[str, JobTopology] = {}
        #: Why a job's annotations were ignored this cycle (job uid -> reason).
        self.ignored: dict[str, str] = {}
        #: Whether the task order is registered with a sort key (None: not yet).
        self._keyed: bool | None = None

    def on_session_open(self, ssn: Session) -> None:
        ssn.on("node_order", self.name, TopologyScore(self))
        ssn.add_event_handler(EventHandler(allocate=self._placed))

    def on_cycle_open(self, ssn: Session) -> None:
        """The buckets of the cycle's jobs with pending pods and topology annotations;
        the task order registered again when whether any job has them changes (with no
        such job it says nothing, and offers a sort key)."""
        self.ssn = ssn
        self.jobs, self.ignored = {}, {}
        weights = _request_weights(ssn)
        jobs = ssn.active
        if ssn.parked:  # (enqueue may admit one and allocate place it: see parking)
            jobs = dict(sorted({**jobs, **{u: p.job for u, p in ssn.parked.items()}}.items()))
        for uid, job in jobs.items():
            if not job.by_status.get(TaskStatus.PENDING):
                continue
            topology, why = read_topology(job)
            if why:
                self.ignored[uid] = why
            if topology is None:
                continue
            manager = JobTopology(topology, weights)
            manager.build(list(job.tasks.values()))
            self.jobs[uid] = manager
        keyed = not self.jobs
        if keyed != self._keyed:
            if self._keyed is not None:
                ssn.hooks.drop(self.name, ["task_order"])
            if keyed:
                ssn.on("task_order", self.name, self.task_order, key=_no_preference)
            else:
                ssn.on("task_order", self.name, self.task_order)
            self._keyed = keyed

    def _placed(self, task: TaskInfo) -> None:
        manager = self.jobs.get(task.job or "")
        if manager is not None:
            manager.bound(task)

    def task_order(self, a: TaskInfo, b: TaskInfo) -> int:
        jobs = self.jobs
        ma, mb = jobs.get(a.job or ""), jobs.get(b.job or "")
        if ma is None or mb is None:
            return 0
        ba, bb = ma.bucket(a), mb.bucket(b)
        if (ba is None) != (bb is None):
            return -1 if ba is not None else 1
        if a.job != b.job or ba is None or bb is None:
            return 0
        if len(ba.tasks) != len(bb.tasks):
            return -1 if len(ba.tasks) > len(bb.tasks) else 1
        if ba.index == bb.index:
            ra, rb = ma.role_of.get(a.uid, ""), ma.role_of.get(b.uid, "")
            if ra == rb:
                return 0
            x, y = ma.rank(ra), ma.rank(rb)
            return (x < y) - (x > y)
        return -1 if ba.index < bb.index else 1


def _no_preference(task: TaskInfo) -> int:
    """The sort key of a task order that says nothing (no job has a topology)."""
    return 0


def _request_weights(ssn: Session) -> np.ndarray:
    """Per resource, what one unit weighs in a bucket's ``req_score`` (Volcano adds up
    millicores, MiB of memory, pods and thousandths of other resources)."""
    names = ssn.space.names
    weights = np.full(len(names), 1000.0)
    index = ssn.space.index
    weights[index[CPU]] = 1.0
    weights[index[MEMORY]] = 1.0 / 2**20
    weights[index[PODS]] = 1.0
    return weights


@dataclass(frozen=True, slots=True)
class _Context:
    """What a pod in a bucket is scored with: its job's state (``serial``, ``version``:
    the state moves with every placement of the job), its bucket and itself. Equal
    contexts score alike; the objects ride along uncompared."""

    serial: int
    version: int
    bucket_index: int
    uid: str
    role: str
    manager: JobTopology = field(compare=False, hash=False, repr=False)
    bucket: Bucket = field(compare=False, hash=False, repr=False)


class TopologyScore(SeparableScore):
    """The ``node_order`` function; pods outside every bucket score 0 (context None)."""

    __slots__ = ("plugin",)

    def __init__(self, plugin: TaskTopologyPlugin) -> None:
        self.plugin = plugin

    def context(self, task: TaskInfo, cand: np.ndarray) -> _Context | None:
        manager = self.plugin.jobs.get(task.job or "")
        if manager is None:
            return None
        bucket = manager.bucket(task)
        if bucket is None:
            return None
        return _Context(
            manager.serial, manager.version, bucket.index, task.uid, task_name(task),
            manager, bucket,
        )  # fmt: skip

    def one(self, task: TaskInfo, i: int, ctx: _Context | None) -> float:
        if ctx is None:
            return 0.0
        return float(self.rows(task, np.array([i], dtype=np.intp), ctx)[0])

    def rows(self, task: TaskInfo, rows: np.ndarray, ctx: _Context | None) -> np.ndarray:
        """Scores over ``rows``, from ``ctx`` and the task's requests alone (the fast
        path may ask with another task of the same shape)."""
        plugin = self.plugin
        if ctx is None or plugin.ssn is None:
            return np.zeros(rows.size)
        manager, bucket = ctx.manager, ctx.bucket
        nodes = plugin.ssn.nodes
        room = nodes.idle[rows] + nodes.releasing[rows]
        never = np.any(room < task.resreq, axis=1)
        names = nodes.names
        score = np.zeros(rows.size)
        for k, i in enumerate(rows.tolist()):
            name = names[i]
            s = bucket.node.get(name, 0)
            on = manager.placed.get(name)
            if on:
                s += min(0, manager.affinity(ctx.role, on, True))
            score[k] = s
        score += len(bucket.tasks)
        short = ~np.all(bucket.request - room < MIN_RESOURCE, axis=1)
        if short.any():
            others = [t.resreq for uid, t in bucket.tasks.items() if uid != ctx.uid]
            if others:
                left = bucket.request - np.cumsum(np.array(others), axis=0)
                for k in np.flatnonzero(short).tolist():
                    fit = np.all(left - room[k] < MIN_RESOURCE, axis=1)
                    score[k] -= int(np.argmax(fit)) + 1 if fit.any() else len(others)
        out = score * float(plugin.weight)
        if manager.max_size:
            out = out * MAX_NODE_SCORE / float(manager.max_size)
        return np.where(never, 0.0, out)
