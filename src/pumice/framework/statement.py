"""Statement: tentative allocate / pipeline / evict, then commit or discard.

Each operation changes the session at once (task status, node columns, plugin shares
through the event handlers) and is logged. :meth:`Statement.commit` turns the log into
decisions (binds and evictions); :meth:`Statement.discard` undoes it in reverse order.
This is the gang barrier: an action commits a job's statement only when the job is
ready, so no cluster ever sees half a gang.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pumice.api.task import TaskInfo, TaskStatus

if TYPE_CHECKING:
    from pumice.framework.session import Session

ALLOCATE, PIPELINE, EVICT = "allocate", "pipeline", "evict"


@dataclass(slots=True)
class Operation:
    kind: str
    task: TaskInfo
    node: str
    prev_status: TaskStatus
    prev_node: str | None
    reason: str = ""
    #: A decision record for ``Decisions.audit``, written only if the statement commits.
    audit: dict | None = None


class Statement:
    __slots__ = ("operations", "session")

    def __init__(self, session: Session) -> None:
        self.session = session
        self.operations: list[Operation] = []

    def __len__(self) -> int:
        return len(self.operations)

    def _move(self, task: TaskInfo, status: TaskStatus, node: str | None) -> None:
        """Re-account ``task`` under a new status and node, in job and node columns."""
        ssn = self.session
        nodes = ssn.nodes
        index = nodes.index
        prev = task.node
        if prev is not None:
            i = index.get(prev)
            if i is not None:
                nodes.remove_task(i, task)
        job = ssn.jobs.get(task.job) if task.job else None
        if job is not None:
            job.update_status(task, status)
            ssn.snapshot.touched.add(job.uid)
        else:
            task.status = status
            ssn.snapshot.touched_pods.add(task.key)
        task.node = node
        if node is not None:
            nodes.add_task(index[node], task)

    def allocate(self, task: TaskInfo, node: str) -> None:
        op = Operation(ALLOCATE, task, node, task.status, task.node)
        self._move(task, TaskStatus.ALLOCATED, node)
        self.operations.append(op)
        self.session.fire_allocate(task)

    def pipeline(self, task: TaskInfo, node: str, audit: dict | None = None) -> None:
        op = Operation(PIPELINE, task, node, task.status, task.node, audit=audit)
        self._move(task, TaskStatus.PIPELINED, node)
        self.operations.append(op)
        self.session.fire_allocate(task)

    def evict(self, task: TaskInfo, reason: str, audit: dict | None = None) -> None:
        op = Operation(EVICT, task, task.node or "", task.status, task.node, reason, audit)
        self._move(task, TaskStatus.RELEASING, task.node)
        self.operations.append(op)
        self.session.fire_deallocate(task)

    def discard(self) -> None:
        """Undo every operation, newest first."""
        self.rollback(0)

    def mark(self) -> int:
        """A point to :meth:`rollback` to (the number of operations so far)."""
        return len(self.operations)

    def rollback(self, mark: int) -> None:
        """Undo the operations made since ``mark``, newest first."""
        while len(self.operations) > mark:
            op = self.operations.pop()
            if op.kind == EVICT:
                self._move(op.task, op.prev_status, op.prev_node)
                self.session.fire_allocate(op.task)
            else:
                self.session.fire_deallocate(op.task)
                self._move(op.task, op.prev_status, op.prev_node)

    def commit(self) -> None:
        """Turn the log into decisions: allocated tasks become Binding, evicted ones are
        listed. Pipelined tasks stay Pipelined; the session reports them at close."""
        d = self.session.decisions
        jobs = self.session.jobs
        for op in self.operations:
            t = op.task
            if op.kind == ALLOCATE:
                d.binds[t.key] = op.node
                job = jobs.get(t.job) if t.job else None
                if job is not None:
                    job.update_status(t, TaskStatus.BINDING)
                else:  # pragma: no cover - every task we allocate has a job
                    t.status = TaskStatus.BINDING
            elif op.kind == EVICT:
                d.evictions.append(t.key)
            if op.audit is not None:
                d.audit.append(op.audit)
        self.operations.clear()
