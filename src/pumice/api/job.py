"""Jobs: one PodGroup and its tasks, indexed by status.

The gang arithmetic (ready, pipelined, valid counts and the per-role minimums) lives
here as small pure methods because several plugins and actions ask the same questions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from pumice.api.resources import Vector
from pumice.api.task import (
    ALLOCATED_STATUSES,
    READY_STATUSES,
    VALID_STATUSES,
    TaskInfo,
    TaskStatus,
)
from pumice.api.topology_spec import NetworkTopology, SubGroupPolicy
from pumice.api.verdicts import Verdicts

PENDING = "Pending"
INQUEUE = "Inqueue"
RUNNING = "Running"
UNKNOWN = "Unknown"
COMPLETED = "Completed"


@dataclass(slots=True)
class FitError:
    """Why one task found no node: node count and a histogram of reasons."""

    total_nodes: int
    reasons: dict[str, int]
    message: str = ""  # set instead of reasons for a task-level refusal
    #: The rendered text, once asked: a fit error is read-only once recorded, and a
    #: backlog's explanations quote the same one cycle after cycle.
    _text: str = field(default="", init=False, repr=False, compare=False)

    def render(self) -> str:
        if self.message:
            return self.message
        if not self._text:
            ranked = sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0]))
            # Reasons are worded for several nodes ("were not ready"): one node "was".
            detail = ", ".join(
                f"{n} {'was ' + r[5:] if n == 1 and r.startswith('were ') else r}"
                for r, n in ranked
            )
            self._text = f"0/{self.total_nodes} nodes are available: {detail}"
        return self._text


@dataclass(slots=True, eq=False)
class JobInfo:
    """A PodGroup (or a bare pod, a job of one) and its tasks."""

    uid: str  # "namespace/name"
    namespace: str
    name: str
    queue: str
    priority: int
    priority_class: str
    min_available: int
    min_task_member: dict[str, int]
    min_resources: Vector | None
    phase: str
    creation: float
    allocated: Vector
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    by_status: dict[TaskStatus, dict[str, TaskInfo]] = field(default_factory=dict)
    conditions: list[dict] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    bare: bool = False
    #: The PodGroup's ``spec.networkTopology`` and ``spec.subGroupPolicy`` (see
    #: :mod:`pumice.api.topology_spec`).
    network_topology: NetworkTopology | None = None
    sub_groups: tuple[SubGroupPolicy, ...] = ()
    #: The PodGroup's labels (``volcano.sh/preemptable`` may be one).
    labels: dict[str, str] = field(default_factory=dict)
    #: When the gang's scheduling started, as its group's status says (coscheduling's
    #: ``scheduleStartTime``; None: not said): the timeout clock's start.
    schedule_start: float | None = None
    #: The gang's dialect: "volcano", "coscheduling" or "workload"
    #: (see :mod:`pumice.api.gang_apis`).
    api: str = "volcano"
    #: coscheduling's ``scheduleTimeoutSeconds`` (None: not set), carried only.
    schedule_timeout: float | None = None
    #: Every entry of the PodGroup's ``spec.minResources``, quota-style keys
    #: (``requests.cpu``, ``limits.memory``, ``count/pods``) included, which
    #: ``min_resources`` leaves out: what the resourcequota plugin compares with a
    #: namespace's quotas (None: no such entries known).
    min_quota: dict[str, float] | None = None
    #: Per-task fit errors recorded during this session (task uid -> error).
    fit_errors: dict[str, FitError] = field(default_factory=dict)
    #: A job-level reason recorded during this session (e.g. "queue is overused").
    note: str = ""
    #: Tasks placed tentatively this session and then given back (gang not complete).
    tentative: int = 0
    #: ``tentative`` is an upper bound from a proof, not a count from a try (a gang of
    #: several task shapes: see ``pumice.actions.room``).
    tentative_at_most: bool = False
    #: The roles of those ``tentative`` tasks (role -> count), for a job with per-role
    #: minimums: set with ``tentative`` by :meth:`keep_tentative`, read only while
    #: ``tentative`` is not 0 (so a stale one from an earlier session is never read).
    tentative_roles: dict[str, int] = field(default_factory=dict)
    #: Bumped by every change through :meth:`add_task` / :meth:`update_status`; keys the
    #: memo of :meth:`is_ready`, which job order asks on every comparison.
    _version: int = field(default=0, init=False, repr=False, compare=False)
    #: Pending best-effort tasks, kept by :meth:`add_task` / :meth:`update_status`.
    _best_effort_pending: int = field(default=0, init=False, repr=False, compare=False)
    #: Bumped whenever a best-effort task enters or leaves Pending: keys what
    #: :mod:`pumice.framework.best_effort` keeps about those tasks.
    _best_effort_version: int = field(default=0, init=False, repr=False, compare=False)
    #: (task index version, minAvailable, ready counting no pending task): see
    #: :meth:`is_placed`.
    _placed_memo: tuple[int, int, bool] = field(
        default=(-1, -1, False), init=False, repr=False, compare=False
    )
    _ready_memo: tuple[int, int, bool] = field(
        default=(-1, -1, False), init=False, repr=False, compare=False
    )
    #: What plugins and actions know of this job's tasks, kept from cycle to cycle with
    #: the :attr:`version` (and configuration) it was found under (a backlog job is
    #: asked every cycle, and its tasks do not change while it waits); a job rebuilt
    #: from the cluster's records starts with none. See :mod:`pumice.api.verdicts`.
    verdicts: Verdicts = field(default_factory=Verdicts, init=False, repr=False, compare=False)
    _valid_memo: tuple[int, int, bool] = field(
        default=(-1, -1, False), init=False, repr=False, compare=False
    )
    #: (task index version, roles below their minimum as ready tasks count them): see
    #: :meth:`roles_short`, which a backlog's explanations ask every cycle.
    _short_memo: tuple[int, dict[str, tuple]] = field(
        default=(-1, {}), init=False, repr=False, compare=False
    )
    #: Tasks in the READY_STATUSES buckets, kept by :meth:`add_task` / :meth:`update_status`
    #: (gang readiness asks after every placement).
    _ready_count: int = field(default=0, init=False, repr=False, compare=False)
    #: Sum of the Pending tasks' requests: computed when first asked, then kept like
    #: ``allocated`` (queue plugins ask at every session open; a backlog of thousands
    #: of pods must not be re-summed every cycle).
    _pending_request: Vector | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        pending = self.by_status.get(TaskStatus.PENDING, {})
        self._best_effort_pending = sum(1 for t in pending.values() if t.best_effort)
        self._ready_count = sum(len(b) for s, b in self.by_status.items() if s in READY_STATUSES)

    @property
    def pending_request(self) -> Vector:
        """The summed requests of the Pending tasks (do not modify)."""
        if self._pending_request is None:
            total = np.zeros_like(self.allocated)
            for t in self.by_status.get(TaskStatus.PENDING, {}).values():
                total += t.resreq
            self._pending_request = total
        return self._pending_request

    # -- task index ---------------------------------------------------------------------

    def add_task(self, task: TaskInfo) -> None:
        self._version += 1
        self.tasks[task.uid] = task
        bucket = self.by_status.setdefault(task.status, {})
        fresh = task.uid not in bucket
        bucket[task.uid] = task
        if task.status in ALLOCATED_STATUSES:
            self.allocated += task.resreq
        elif task.status == TaskStatus.PENDING and fresh and self._pending_request is not None:
            self._pending_request += task.resreq
        if fresh:
            if task.best_effort and task.status == TaskStatus.PENDING:
                self._best_effort_pending += 1
                self._best_effort_version += 1
            if task.status in READY_STATUSES:
                self._ready_count += 1

    def update_status(self, task: TaskInfo, status: TaskStatus) -> None:
        """Move ``task`` to ``status``, keeping the index and ``allocated`` in step."""
        old = task.status
        if old == status:
            return
        self._version += 1
        bucket = self.by_status.get(old)
        left = bucket is not None and bucket.pop(task.uid, None) is not None
        if old in ALLOCATED_STATUSES:
            self.allocated -= task.resreq
        elif old == TaskStatus.PENDING and left and self._pending_request is not None:
            self._pending_request -= task.resreq
        task.status = status
        into = self.by_status.setdefault(status, {})
        fresh = task.uid not in into
        into[task.uid] = task
        if status in ALLOCATED_STATUSES:
            self.allocated += task.resreq
        elif status == TaskStatus.PENDING and fresh and self._pending_request is not None:
            self._pending_request += task.resreq
        if left and old in READY_STATUSES:
            self._ready_count -= 1
        if fresh and status in READY_STATUSES:
            self._ready_count += 1
        if task.best_effort:
            if left and old == TaskStatus.PENDING:
                self._best_effort_pending -= 1
                self._best_effort_version += 1
            if fresh and status == TaskStatus.PENDING:
                self._best_effort_pending += 1
                self._best_effort_version += 1

    def with_status(self, *statuses: TaskStatus) -> list[TaskInfo]:
        """A new list of the tasks in ``statuses``, status by status in the order given."""
        by_status = self.by_status
        if len(statuses) == 1:
            bucket = by_status.get(statuses[0])
            return list(bucket.values()) if bucket else []
        out: list[TaskInfo] = []
        for s in statuses:
            bucket = by_status.get(s)
            if bucket:
                out.extend(bucket.values())
        return out

    def count(self, statuses: Iterable[TaskStatus]) -> int:
        if not isinstance(statuses, frozenset | set):
            return sum(len(self.by_status.get(s, ())) for s in statuses)
        # Walk the (few) statuses present rather than every status asked for.
        n = 0
        for s, bucket in self.by_status.items():
            if s in statuses:
                n += len(bucket)
        return n

    # -- gang arithmetic ----------------------------------------------------------------

    def ready_num(self) -> int:
        """Tasks in READY_STATUSES: the bucket sizes, counted as buckets change."""
        return self._ready_count

    def waiting_num(self) -> int:
        return len(self.by_status.get(TaskStatus.PIPELINED, ()))

    def valid_num(self) -> int:
        return self.count(VALID_STATUSES)

    def pending_best_effort_num(self) -> int:
        return self._best_effort_pending

    def pending_requesting_num(self) -> int:
        """Pending tasks that request resources (allocate's to place, not backfill's)."""
        return len(self.by_status.get(TaskStatus.PENDING, ())) - self._best_effort_pending

    def _role_counts(self, statuses: frozenset[TaskStatus], best_effort_pending: bool) -> dict:
        counts: dict[str, int] = {}
        for status, bucket in self.by_status.items():
            take = status in statuses
            for t in bucket.values():
                if take or (best_effort_pending and status == TaskStatus.PENDING and t.best_effort):
                    counts[t.role] = counts.get(t.role, 0) + 1
        return counts

    def _roles_meet(self, statuses: frozenset[TaskStatus], best_effort_pending: bool) -> bool:
        if not self.min_task_member:
            return True
        # Volcano skips the per-role check when the roles ask for more than minMember.
        if self.min_available < sum(self.min_task_member.values()):
            return True
        counts = self._role_counts(statuses, best_effort_pending)
        return all(counts.get(role, 0) >= n for role, n in self.min_task_member.items())

    def keep_tentative(self, tasks: Sequence[TaskInfo], at_most: bool = False) -> None:
        """A turn placed ``tasks`` (or a proof bounds what a turn would place by them)
        and gave them back: keep the largest such count of the session, with the
        roles of its tasks, so that the explanation's total and per-role counts tell
        one story. ``at_most``: a bound, not a count."""
        if len(tasks) <= self.tentative:
            return
        self.tentative = len(tasks)
        if at_most:
            self.tentative_at_most = True
        if self.min_task_member:
            roles: dict[str, int] = {}
            for t in tasks:
                roles[t.role] = roles.get(t.role, 0) + 1
            self.tentative_roles = roles

    def role_counts(self, statuses: frozenset[TaskStatus]) -> dict[str, int]:
        """Tasks in ``statuses``, by role."""
        return self._role_counts(statuses, False)

    def roles_short(self, statuses: frozenset[TaskStatus] = READY_STATUSES) -> dict[str, tuple]:
        """Roles below their minimum: role -> (have, need). (The answer for ready
        tasks is kept on the task index version: do not change it.)"""
        if not self.min_task_member:
            return {}
        memo = statuses is READY_STATUSES
        if memo and self._short_memo[0] == self._version:
            return self._short_memo[1]
        counts = self._role_counts(statuses, False)
        short = {
            r: (counts.get(r, 0), n)
            for r, n in sorted(self.min_task_member.items())
            if counts.get(r, 0) < n
        }
        if memo:
            self._short_memo = (self._version, short)
        return short

    def is_ready(self) -> bool:
        """Enough tasks hold resources (or need none) to run the gang: Volcano's
        arithmetic, which counts every pending best-effort task as ready (backfill is
        to place it). The gang plugin by default asks more of those tasks (see
        :mod:`pumice.framework.best_effort`); job order keeps this answer.

        Memoized on the task index version and ``min_available``: job order asks this
        on every heap comparison."""
        version, min_available, ready = self._ready_memo
        if version == self._version and min_available == self.min_available:
            return ready
        ready = self._is_ready()
        self._ready_memo = (self._version, self.min_available, ready)
        return ready

    def _is_ready(self) -> bool:
        if self.ready_num() + self.pending_best_effort_num() < self.min_available:
            return False
        return self._roles_meet(READY_STATUSES, True)

    def is_placed(self) -> bool:
        """Ready without counting any pending task: enough tasks hold resources (or have
        finished) for ``minMember`` and for every role's minimum. A statement kept on
        this answer leaves no gang short, whatever happens to the job's pending
        best-effort tasks afterwards. Memoized like :meth:`is_ready`."""
        version, min_available, placed = self._placed_memo
        if version == self._version and min_available == self.min_available:
            return placed
        placed = self.ready_num() >= self.min_available and self._roles_meet(READY_STATUSES, False)
        self._placed_memo = (self._version, self.min_available, placed)
        return placed

    def is_pipelined(self) -> bool:
        """Ready once the pipelined tasks get the resources they wait for."""
        if self.waiting_num() + self.ready_num() < self.min_available:
            return False
        return self._roles_meet(READY_STATUSES | {TaskStatus.PIPELINED}, False)

    @property
    def version(self) -> int:
        """The task index's version: it changes whenever a task is added or changes
        status, so an answer about the tasks stamped with it stays true while it is
        the same."""
        return self._version

    @property
    def best_effort_version(self) -> int:
        """Changes whenever a best-effort task starts or stops pending (and only then):
        what is known of where the pending best-effort tasks could go stays true while
        it is the same."""
        return self._best_effort_version

    def is_valid(self) -> bool:
        """Enough tasks exist (placed or not) for the gang; memoized like is_ready."""
        version, min_available, valid = self._valid_memo
        if version == self._version and min_available == self.min_available:
            return valid
        valid = self.valid_num() >= self.min_available and self._roles_meet(VALID_STATUSES, False)
        self._valid_memo = (self._version, self.min_available, valid)
        return valid

    def is_starving(self) -> bool:
        return self.ready_num() + self.waiting_num() < len(self.tasks)

    def is_pending(self) -> bool:
        return self.phase == PENDING

    def inqueue_demand(self) -> Vector | None:
        """What an admitted job still holds a claim on: its minResources when Inqueue;
        the part of them not yet allocated when Running with a gang of tasks that hold
        resources. Finished tasks do not count (Volcano's ``CalculateAllocatedTaskNum``):
        a Running job whose tasks have ended claims nothing, or it would hold its
        minResources back from admission for ever."""
        if self.min_resources is None:
            return None
        if self.phase == INQUEUE:
            return self.min_resources
        if self.phase == RUNNING and self.count(ALLOCATED_STATUSES) >= self.min_available:
            return np.maximum(self.min_resources - self.allocated, 0.0)
        return None

    def settled(self) -> bool:
        """Nothing a cycle could decide or report for this job: admitted and running or
        completed, no task waiting for a node or pipelined, a valid gang. A cycle only
        needs to look at the jobs that are not settled (and at jobs whose state changed
        since the last cycle, to write their status); see :attr:`Snapshot.active`."""
        if self.phase != RUNNING and self.phase != COMPLETED:
            return False
        by_status = self.by_status
        if by_status.get(TaskStatus.PENDING) or by_status.get(TaskStatus.PIPELINED):
            return False
        return self.is_valid()

    def __repr__(self) -> str:
        return (
            f"JobInfo({self.uid}, {self.phase}, min={self.min_available}, tasks={len(self.tasks)})"
        )
