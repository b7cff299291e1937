"""Nodes, held as columns so that fit and scores over all nodes are vector operations.

Row ``i`` of each matrix is node ``names[i]``; nodes are sorted by name, which is also the
documented tie-break between equally scored nodes (the first name wins).

Accounting follows Volcano's ``NodeInfo.AddTask``: a running or allocated task takes
``idle`` and adds to ``used``; a releasing (terminating) task still takes ``idle`` and
``used`` and adds to ``releasing``; a pipelined task only adds to ``pipelined``. What a
task may be pipelined onto is ``future_idle = idle + releasing - pipelined``, except in
the ``pods`` column: Volcano's pod-count check (the predicates plugin's
``MaxTaskNum <= len(nodeInfo.Pods)``) counts every pod on the node, a terminating one and
a pipelined one too, so a releasing pod's slot is not free until the pod is gone.

**Nodes left out.** Volcano's scheduler cache hands a session only the nodes whose state
is Ready (``NodeInfo.Ready()``, Volcano 1.7): a node whose Ready condition is not True
(False or Unknown; a node without one counts as ready) or whose pods request more than
its allocatable (``OutOfSync``: a device plugin that lost its GPUs, pods bound by another
scheduler) is not in the session at all, whatever the plugins, so nothing is placed,
pipelined or evicted there and it adds nothing to the cluster's total. A table holds
every node; :meth:`NodeTable.copy`, the table a session works on, holds only the others
and names the ones left out (``left_out``), so explanations can count them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pumice.api.quantity import PODS, format_amount, plural
from pumice.api.resources import ResourceSpace
from pumice.api.selectors import NodeIndex
from pumice.api.task import TERMINATED_STATUSES, Taint, TaskInfo, TaskStatus

#: Why a node is left out of a session, as fit explanations count it.
NOT_READY = "were not ready"
OUT_OF_SYNC = "were out of sync (their pods request more than allocatable)"
#: Used beyond allocatable by more than this (in canonical units) puts a node out of
#: sync; below it, float sums of milli-precise amounts may differ from the exact total.
OUT_OF_SYNC_SLACK = 1e-6


@dataclass(slots=True, frozen=True)
class LeftOut:
    """A node a session leaves out: ``reason`` (:data:`NOT_READY` or
    :data:`OUT_OF_SYNC`) and, for people, what is wrong with it."""

    reason: str
    detail: str


@dataclass(slots=True, frozen=True)
class NodeSpec:
    """The static part of a node: what does not change within a session."""

    name: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    ready: bool
    allocatable: dict[str, float]
    #: The node annotations a plugin reads (shared GPUs' card registrations, see
    #: :data:`pumice.api.gpus.NODE_ANNOTATIONS`), not all of them: the others change
    #: often (device plugins' handshakes) and no decision reads them.
    annotations: dict[str, str] = field(default_factory=dict)
    #: ``status.capacity`` of the resources read there rather than in allocatable
    #: (GPU share's card count and memory, :data:`pumice.api.gpus.NODE_CAPACITY`).
    capacity: dict[str, float] = field(default_factory=dict)


class NodeTable:
    """All nodes of a snapshot: static specs plus resource matrices (nodes x dims)."""

    __slots__ = (
        "_borrowed",
        "_left_of",
        "_owned",
        "_session",
        "_shared",
        "_total_of",
        "affinity",
        "allocatable",
        "changes",
        "idle",
        "index",
        "labels",
        "left_out",
        "names",
        "nonzero",
        "origin",
        "pipelined",
        "ports",
        "releasing",
        "space",
        "specs",
        "tasks",
        "used",
        "version",
    )

    def __init__(self, specs: list[NodeSpec], space: ResourceSpace) -> None:
        self.specs = sorted(specs, key=lambda s: s.name)
        self.space = space
        self.names = [s.name for s in self.specs]
        self.index = {n: i for i, n in enumerate(self.names)}
        n, r = len(self.specs), space.size
        self.allocatable = np.zeros((n, r), dtype=np.float64)
        for i, s in enumerate(self.specs):
            self.allocatable[i] = space.vector(s.allocatable)
        self.idle = self.allocatable.copy()
        self.used = np.zeros((n, r), dtype=np.float64)
        self.releasing = np.zeros((n, r), dtype=np.float64)
        self.pipelined = np.zeros((n, r), dtype=np.float64)
        #: cpu and memory requested with Kubernetes' defaults for zero requests (100m,
        #: 200Mi), counting every task on the node, for the requested-resource scores.
        self.nonzero = np.zeros((n, 2), dtype=np.float64)
        self.labels = NodeIndex(self.specs)
        self.tasks: list[dict[str, TaskInfo]] = [{} for _ in range(n)]
        #: For a copy (``_shared``): the rows whose task dict it has copied; the others
        #: still share the dict of the table it was copied from (copied on first write:
        #: a cycle touches few nodes of a large cluster).
        self._shared = False
        self._owned: set[int] = set()
        #: For a copy: its resource matrices (``idle``, ``used``, ``releasing``,
        #: ``pipelined``, ``nonzero``) and its ``tasks`` list are still the very objects
        #: of the table it was copied from, until its first change copies them (see
        #: :meth:`copy`).
        self._borrowed = False
        #: Tasks on the nodes with required inter-pod (anti-)affinity terms.
        self.affinity = 0
        #: (protocol, host port) -> {node index: pods using it}
        self.ports: dict[tuple[str, int], dict[int, int]] = {}
        #: Bumped on every change; lets callers cache per-state results.
        self.version = 0
        #: The row of every change, in order: a cache of per-node results refreshes
        #: only the rows logged since it last looked (``changes[seen:]``). All changes
        #: go through :meth:`add_task` and :meth:`remove_task`.
        self.changes: list[int] = []
        #: For a copy: the original's ``changes`` and how long it was at the copy, so a
        #: cache of per-node results kept across copies knows which rows moved since
        #: (see :mod:`pumice.framework.slots`). None for a table built from specs.
        self.origin: tuple[list[int], int] | None = None
        #: For a session's copy: the nodes of the cluster it leaves out, by name (see
        #: the module docstring). A table built from specs holds every node.
        self.left_out: dict[str, LeftOut] = {}
        #: What the copies that leave nodes out share while the same nodes are left out
        #: (see :meth:`_subset`).
        self._session: _Subset | None = None
        #: [(the allocatable matrix, its column sums)]: :meth:`total` while the matrix
        #: is the same object (it is replaced, never written, once a copy shares it).
        #: One holder for a table and its copies (those that leave nodes out share
        #: theirs), so that the sum a session's copy takes is kept for the next.
        self._total_of: list[tuple[np.ndarray, np.ndarray] | None] = [None]
        #: (version, label columns, specs, allocatable, :meth:`leaving`'s answer, the
        #: bounds and readiness of :meth:`_none_leaving`) as :meth:`copy` last asked:
        #: asked again while none of them moved (a cycle after one that changed no
        #: node), the answer stands.
        self._left_of: _LeftOf | None = None

    def __len__(self) -> int:
        return len(self.names)

    # -- the session's nodes ------------------------------------------------------------

    def leaving(self) -> np.ndarray | None:
        """The rows a session leaves out (a boolean mask), None when it takes them all:
        nodes that are not ready, and nodes whose pods request more than their
        allocatable in some resource other than ``pods`` (Volcano's out-of-sync check
        compares resource amounts; the pod count is not one of them)."""
        if not self.names:
            return None
        labels = self.labels
        if labels.specs is self.specs:
            out = labels.not_ready.copy()
        else:  # (a respec not yet followed by new label columns)
            out = np.array([not s.ready for s in self.specs], dtype=bool)
        excess = self.used - self.allocatable
        excess[:, self.space.index[PODS]] = 0.0
        over = excess > OUT_OF_SYNC_SLACK
        if np.count_nonzero(over):  # (rare; the row-wise any is most of the cost)
            out |= over.any(axis=1)
        return out if out.any() else None

    def _why(self, i: int) -> LeftOut:
        """Why row ``i`` is left out; out of sync first, as Volcano checks it first."""
        used, alloc = self.used[i].tolist(), self.allocatable[i].tolist()
        over = [
            f"{name} {format_amount(name, used[d])} of {format_amount(name, alloc[d])}"
            for d, name in enumerate(self.space.names)
            if name != PODS and used[d] - alloc[d] > OUT_OF_SYNC_SLACK
        ]
        if over:
            return LeftOut(OUT_OF_SYNC, "its pods request " + ", ".join(over))
        return LeftOut(NOT_READY, "its Ready condition is not True")

    def left_out_counts(self) -> dict[str, int]:
        """The nodes this session table leaves out, counted by reason (for a fit
        error's histogram: ``0/N nodes are available`` counts them in N)."""
        counts: dict[str, int] = {}
        for why in self.left_out.values():
            counts[why.reason] = counts.get(why.reason, 0) + 1
        return counts

    def left_out_summary(self) -> str:
        """``2 nodes not ready, 1 out of sync``: the nodes this session table leaves out,
        in a few words ("" when none)."""
        counts = self.left_out_counts()
        parts = [
            f"{plural(k, 'node')} {'not ready' if reason == NOT_READY else 'out of sync'}"
            for reason, k in counts.items()
        ]
        return ", ".join(parts)

    def left_out_notes(self) -> list[str]:
        """One line per reason for the nodes this session table leaves out, naming
        them (the first few), for people: ``pumice cycle`` prints them."""
        by: dict[str, list[str]] = {}
        for name, why in self.left_out.items():
            by.setdefault(why.reason, []).append(name)
        notes = []
        for reason, names in by.items():
            shown = ", ".join(
                f"{n} ({self.left_out[n].detail})" if reason == OUT_OF_SYNC else n
                for n in names[:5]
            )
            more = f" and {len(names) - 5} more" if len(names) > 5 else ""
            what = "not ready" if reason == NOT_READY else "out of sync"
            notes.append(
                f"left out {plural(len(names), 'node')} {what}, as Volcano does (nothing "
                f"is placed on them, they add nothing to the cluster's total): {shown}{more}"
            )
        return notes

    def copy(self) -> NodeTable:
        """The table a session works on: a copy of the mutable state (specs are shared,
        being immutable) holding only the nodes a session takes (see :meth:`leaving`);
        the others are named in the copy's ``left_out``.

        Copied on write: the copy's changes (:meth:`add_task`, :meth:`remove_task`,
        :meth:`respec`) never reach this table. When it takes every node, the copy
        borrows this table's resource matrices and task list until its first change
        copies them (about half the cycles of a simulation change no node, and the
        copy costs as much as the rest of the snapshot), and its task rows until that
        row changes. Like the task rows shared since before, what is borrowed follows
        this table's own later changes: a copy stands for this table as it is now, for
        as long as this table does not change (a session runs between two changes of
        the scheduler cache)."""
        memo = self._left_of
        if (
            memo is not None
            and memo[1] is self.labels
            and memo[2] is self.specs
            and memo[3] is self.allocatable
        ):
            if memo[0] == self.version:
                out = memo[4]
            else:
                bound, unready = memo[5], memo[6]
                out = None if self._none_leaving(bound, unready) else self.leaving()
                self._left_of = (self.version, *memo[1:4], out, bound, unready)
        else:
            bound, unready = self._bounds()
            out = None if self._none_leaving(bound, unready) else self.leaving()
            self._left_of = (
                self.version, self.labels, self.specs, self.allocatable, out, bound, unready
            )  # fmt: skip
        if out is not None:
            return self._subset(out)
        other = NodeTable.__new__(NodeTable)
        other.specs, other.space, other.names, other.index = (
            self.specs, self.space, self.names, self.index,
        )  # fmt: skip
        other.allocatable = self.allocatable
        other.labels = self.labels
        other.nonzero = self.nonzero
        other.idle = self.idle
        other.used = self.used
        other.releasing = self.releasing
        other.pipelined = self.pipelined
        other.tasks = self.tasks
        other._shared, other._owned, other._borrowed = True, set(), True
        other.affinity = self.affinity
        other.ports = {k: dict(v) for k, v in self.ports.items()} if self.ports else {}
        other.version = 0
        other.changes = []
        other.origin = (self.changes, len(self.changes))
        other.left_out = dict(self.left_out) if self.left_out else {}
        other._session = None
        other._total_of = self._total_of
        other._left_of = None
        return other

    def _bounds(self) -> tuple[np.ndarray, bool]:
        """What :meth:`_none_leaving` compares with, kept while the label columns,
        specs and allocatable stay the same: allocatable with the ``pods`` column
        unbounded, and whether a node is not ready (as :meth:`leaving` reads it)."""
        bound = self.allocatable.copy()
        if len(bound):
            bound[:, self.space.index[PODS]] = np.inf
        labels = self.labels
        if labels.specs is self.specs:
            unready = bool(labels.not_ready.any())
        else:
            unready = any(not s.ready for s in self.specs)
        return bound, unready

    def _none_leaving(self, bound: np.ndarray, unready: bool) -> bool:
        """True when :meth:`leaving` would answer None, told in one comparison for the
        common case (every node ready, none using more than its allocatable); False
        when :meth:`leaving` must be asked. Sound because used beyond allocatable by
        more than the slack is used above allocatable (a float difference has the sign
        of the exact one)."""
        return not unready and not np.count_nonzero(self.used > bound)

    def _subset(self, out: np.ndarray) -> NodeTable:
        """:meth:`copy` without the rows of ``out``.

        Row numbers differ from this table's, so the copy's ``origin`` is a log of its
        own rows, kept for as long as the same nodes are left out: this table's
        changes since the last copy, translated (rows left out dropped). Caches of
        per-node results kept across sessions (:mod:`pumice.framework.slots`) go on
        working row by row; when other nodes are left out, the log is a new one and
        they start afresh. The static parts (specs, names, label columns,
        allocatable) are shared by the copies while they stay the same."""
        keep = np.flatnonzero(~out)
        sub = self._session
        key = out.tobytes()
        if sub is None or sub.key != key or sub.source is not self.changes:
            sub = self._session = _Subset(key, keep, len(self), self.changes)
        sub.refresh(self)
        other = NodeTable.__new__(NodeTable)
        other.specs, other.space, other.names, other.index = (
            sub.specs, self.space, sub.names, sub.index,
        )  # fmt: skip
        other.allocatable = sub.allocatable
        other.labels = sub.labels
        other.nonzero = self.nonzero[keep]
        other.idle = self.idle[keep]
        other.used = self.used[keep]
        other.releasing = self.releasing[keep]
        other.pipelined = self.pipelined[keep]
        other.tasks = [self.tasks[i] for i in keep.tolist()]
        other._shared, other._owned, other._borrowed = True, set(), False
        gone = np.flatnonzero(out).tolist()
        other.affinity = self.affinity - sum(
            1 for i in gone for t in self.tasks[i].values() if t.pod_affinity is not None
        )
        inverse = sub.inverse
        other.ports = {}
        for port, users in self.ports.items():
            kept = {inverse[i]: k for i, k in users.items() if inverse[i] >= 0}
            if kept:
                other.ports[port] = kept
        other.version = 0
        other.changes = []
        other.origin = (sub.log, len(sub.log))
        left = dict(self.left_out)
        left.update((self.names[i], self._why(i)) for i in gone)
        other.left_out = dict(sorted(left.items()))
        other._session = None
        other._total_of = sub.total_of
        other._left_of = None
        return other

    def _own(self, i: int) -> None:
        if self._borrowed:
            self._unborrow()
        self.tasks[i] = dict(self.tasks[i])
        self._owned.add(i)

    def _unborrow(self) -> None:
        """Copy what this copy borrowed (see :meth:`copy`), before its first change."""
        self.nonzero = self.nonzero.copy()
        self.idle = self.idle.copy()
        self.used = self.used.copy()
        self.releasing = self.releasing.copy()
        self.pipelined = self.pipelined.copy()
        self.tasks = list(self.tasks)
        self._borrowed = False

    def future_idle(self, rows: np.ndarray | None = None) -> np.ndarray:
        """What a task may be pipelined onto, per node (of ``rows``, or all): idle plus
        releasing minus pipelined, but for ``pods`` idle minus pipelined (a terminating
        pod still holds its slot in Volcano's pod count; see the module docstring)."""
        if rows is None:
            idle, releasing, pipelined = self.idle, self.releasing, self.pipelined
        else:
            idle, releasing, pipelined = self.idle[rows], self.releasing[rows], self.pipelined[rows]
        future = idle + releasing - pipelined
        p = self.space.index[PODS]
        future[:, p] = idle[:, p] - pipelined[:, p]
        return future

    def add_task(self, i: int, task: TaskInfo) -> None:
        """Account ``task`` (with its current status) on node ``i``."""
        if task.status in TERMINATED_STATUSES:
            return
        if self._shared and i not in self._owned:
            self._own(i)
        self.tasks[i][task.uid] = task
        if task.pod_affinity is not None:
            self.affinity += 1
        # In place on row views (``row = m[i]; row += v``): the same arithmetic as
        # ``m[i] += v`` without writing the row back onto itself.
        row = self.nonzero[i]
        row += task.nonzero
        req = task.resreq
        if task.status == TaskStatus.PIPELINED:
            row = self.pipelined[i]
            row += req
        else:
            row = self.idle[i]
            row -= req
            row = self.used[i]
            row += req
            if task.status == TaskStatus.RELEASING:
                row = self.releasing[i]
                row += req
        for port in task.host_ports:
            users = self.ports.setdefault(port, {})
            users[i] = users.get(i, 0) + 1
        self.version += 1
        self.changes.append(i)

    def accounted_alike(self, i: int, task: TaskInfo, status: TaskStatus) -> bool:
        """True when ``task``, accounted on row ``i`` with its status, would be
        accounted with the very same floats under ``status``: the same matrices take it
        (a bound pod that starts running), and taking it off and back on
        (:meth:`remove_task`, then :meth:`add_task` with ``status``) gives back every
        float the row holds, bit for bit (the round trip is computed, not written).
        The caller may then change the task's status without touching the table:
        nothing of the node moves, and nothing is logged as changed."""
        if status in TERMINATED_STATUSES or _ACCOUNT.get(task.status, 0) != _ACCOUNT.get(status, 0):
            return False
        nonzero = task.nonzero
        if nonzero is None or self.tasks[i].get(task.uid) is not task:
            return False
        req = task.resreq
        if not _back(self.nonzero[i], nonzero):
            return False
        if status == TaskStatus.PIPELINED:
            return _back(self.pipelined[i], req)
        idle = self.idle[i]  # (idle gives the request back, then takes it again)
        if ((idle + req) - req).tobytes() != idle.tobytes() or not _back(self.used[i], req):
            return False
        return status != TaskStatus.RELEASING or _back(self.releasing[i], req)

    def remove_task(self, i: int, task: TaskInfo) -> None:
        """Undo :meth:`add_task` for ``task`` with the status it was added with."""
        if task.uid not in self.tasks[i]:
            return
        if self._shared and i not in self._owned:
            self._own(i)
        del self.tasks[i][task.uid]
        if task.pod_affinity is not None:
            self.affinity -= 1
        row = self.nonzero[i]
        row -= task.nonzero
        req = task.resreq
        if task.status == TaskStatus.PIPELINED:
            row = self.pipelined[i]
            row -= req
        else:
            row = self.idle[i]
            row += req
            row = self.used[i]
            row -= req
            if task.status == TaskStatus.RELEASING:
                row = self.releasing[i]
                row -= req
        for port in task.host_ports:
            users = self.ports[port]
            users[i] -= 1
            if not users[i]:
                del users[i]
        self.version += 1
        self.changes.append(i)

    def respec(self, i: int, spec: NodeSpec) -> None:
        """Replace node ``i``'s spec (same name, resources within the space): its
        allocatable row moves and idle with it. Arrays and lists shared with copies are
        replaced, not written; the label columns are the caller's to rebuild once a
        batch of changes is in (``labels = NodeIndex(specs)``)."""
        if self._borrowed:
            self._unborrow()
        self.specs = [*self.specs[:i], spec, *self.specs[i + 1 :]]
        new = self.space.vector(spec.allocatable)
        delta = new - self.allocatable[i]
        if delta.any():
            self.allocatable = self.allocatable.copy()
            self.allocatable[i] = new
            row = self.idle[i]
            row += delta
        self.version += 1
        self.changes.append(i)

    def total(self) -> np.ndarray:
        """The cluster's allocatable resources (a new array). Every cycle asks, and the
        sum over a large cluster changes only when a node's allocatable does: it is
        kept with the matrix it was taken from."""
        if not len(self):
            return self.space.zeros()
        holder = self._total_of
        got = holder[0]
        if got is None or got[0] is not self.allocatable:
            got = holder[0] = (self.allocatable, self.allocatable.sum(axis=0))
        return got[1].copy()


#: The matrices a task of each status is accounted in (see :meth:`NodeTable.add_task`):
#: pipelined (1), idle and used (0, every status not named), and releasing too (2).
_ACCOUNT = {TaskStatus.PIPELINED: 1, TaskStatus.RELEASING: 2}


def _back(row: np.ndarray, v: np.ndarray) -> bool:
    """``v`` taken from ``row`` and added back gives ``row``, bit for bit."""
    return bool(((row - v) + v).tobytes() == row.tobytes())


#: See ``NodeTable._left_of``.
_LeftOf = tuple[int, NodeIndex, list[NodeSpec], np.ndarray, np.ndarray | None, np.ndarray, bool]


class _Subset:
    """What the copies of one table that leave the same rows out share: the kept rows'
    static parts, rebuilt when the table's own are replaced (``respec``, new label
    columns), and the log of changes in the copies' row numbers (see
    :meth:`NodeTable._subset`)."""

    __slots__ = (
        "_alloc_of", "_labels_of", "_specs_of", "allocatable", "index", "inverse", "keep",
        "key", "labels", "log", "names", "seen", "source", "specs", "total_of",
    )  # fmt: skip

    def __init__(self, key: bytes, keep: np.ndarray, n: int, source: list[int]) -> None:
        self.key = key
        self.keep = keep
        self.inverse = [-1] * n
        for j, i in enumerate(keep.tolist()):
            self.inverse[i] = j
        self.source = source
        self.seen = 0
        self.log: list[int] = []
        self._specs_of: list[NodeSpec] | None = None
        self._labels_of: NodeIndex | None = None
        self._alloc_of: np.ndarray | None = None
        #: The copies' holder of their column sums (see ``NodeTable._total_of``).
        self.total_of: list[tuple[np.ndarray, np.ndarray] | None] = [None]

    def refresh(self, table: NodeTable) -> None:
        keep = self.keep.tolist()
        if self._specs_of is not table.specs:
            self.specs = [table.specs[i] for i in keep]
            self.names = [s.name for s in self.specs]
            self.index = {name: j for j, name in enumerate(self.names)}
            self._specs_of = table.specs
        if self._labels_of is not table.labels:
            self.labels = NodeIndex(self.specs)
            self._labels_of = table.labels
        if self._alloc_of is not table.allocatable:
            self.allocatable = table.allocatable[self.keep]
            self._alloc_of = table.allocatable
        source, inverse, log = self.source, self.inverse, self.log
        for i in source[self.seen :]:
            j = inverse[i]
            if j >= 0:
                log.append(j)
        self.seen = len(source)
