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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pumice.api.quantity import PODS
from pumice.api.resources import ResourceSpace
from pumice.api.selectors import NodeIndex
from pumice.api.task import TERMINATED_STATUSES, Taint, TaskInfo, TaskStatus


@dataclass(slots=True, frozen=True)
class NodeSpec:
    """The static part of a node: what does not change within a session."""

    name: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    ready: bool
    allocatable: dict[str, float]


class NodeTable:
    """All nodes of a snapshot: static specs plus resource matrices (nodes x dims)."""

    __slots__ = (
        "_borrowed",
        "affinity",
        "allocatable",
        "changes",
        "idle",
        "index",
        "labels",
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
        #: Rows whose task dict is still shared with the table this one was copied from
        #: (copied on first write: a cycle touches few nodes of a large cluster).
        self._borrowed: set[int] = set()
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

    def __len__(self) -> int:
        return len(self.names)

    def copy(self) -> NodeTable:
        """An independent copy of the mutable state (specs are shared, being immutable)."""
        other = NodeTable.__new__(NodeTable)
        other.specs, other.space, other.names, other.index = (
            self.specs, self.space, self.names, self.index,
        )  # fmt: skip
        other.allocatable = self.allocatable
        other.labels = self.labels
        other.nonzero = self.nonzero.copy()
        other.idle = self.idle.copy()
        other.used = self.used.copy()
        other.releasing = self.releasing.copy()
        other.pipelined = self.pipelined.copy()
        other.tasks = list(self.tasks)
        other._borrowed = set(range(len(self.tasks)))
        other.affinity = self.affinity
        other.ports = {k: dict(v) for k, v in self.ports.items()}
        other.version = 0
        other.changes = []
        other.origin = (self.changes, len(self.changes))
        return other

    def _own(self, i: int) -> None:
        self.tasks[i] = dict(self.tasks[i])
        self._borrowed.discard(i)

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
        if i in self._borrowed:
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

    def remove_task(self, i: int, task: TaskInfo) -> None:
        """Undo :meth:`add_task` for ``task`` with the status it was added with."""
        if task.uid not in self.tasks[i]:
            return
        if i in self._borrowed:
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
        return self.allocatable.sum(axis=0) if len(self) else self.space.zeros()
