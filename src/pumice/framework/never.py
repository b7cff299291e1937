"""Requests no node and no queue could ever hold, for explanations.

A task that asks for more than the largest node offers, in some resource, or for more
than its queue's capability (or an ancestor's, in a queue tree) waits for ever, whatever
else runs or ends. Its job's explanation says so ("task big-0 can never fit: asks cpu
100, the largest node has 8") instead of the fit error or queue refusal of the moment,
which reads as a shortage that time will cure. Likewise a gang whose minimum of tasks
asks, in some resource, more than all nodes together or than its queue's capability
(counting its smallest tasks), and a Pending job whose minResources exceed its queue's
capability, can never run.

Nothing here changes a decision: it is asked only when a cycle explains waiting jobs.
The node side looks at the session's nodes, among those whose labels match the task's
``nodeSelector`` (other placement rules are left to the fit error); when the session
leaves nodes out (not ready, out of sync), a node that comes back might hold the task,
so nothing is said. The queue side asks the plugins that decide ``allocatable`` (for
tasks) or ``job_enqueueable`` (for minResources) and offer ``capability_exceeded(queue,
request)``: the queue whose own ``spec.capability`` the request alone exceeds, and in
which resource. Those plugins hold a queue without a capability to the cluster's
total, so minResources beyond the cluster's total are never admitted either.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pumice.api.job import JobInfo
from pumice.api.quantity import format_amount
from pumice.api.resources import Vector
from pumice.api.task import TaskInfo, TaskStatus
from pumice.api.verdicts import TASK_SHAPES
from pumice.framework.session import Session

#: ``capability_exceeded(queue name, request)`` -> (queue whose capability, dimension)
CapabilityCheck = Callable[[str, Vector], "tuple[str, int] | None"]


class Limits:
    """One session's answers to "could this ever fit?", kept while it explains: the
    replicas of a gang share a request vector and a placement, so each distinct pair is
    looked at once."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        nodes = ssn.nodes
        #: None when the session's nodes cannot say "never": none at all, or some left out.
        self._allocatable = (
            nodes.allocatable if len(nodes) and not getattr(nodes, "left_out", None) else None
        )
        self._largest: dict[tuple, Vector | None] = {}
        self._tasks: dict[tuple, str] = {}
        #: The plugins' checks, looked up when first asked (most cycles answer every
        #: job from what its ``verdicts`` kept).
        self._checks: dict[str, list[CapabilityCheck]] = {}
        #: What every answer here depends on besides the job: the configuration (which
        #: plugins ask), the nodes' allocatable resources and labels (arrays replaced,
        #: never written, when a node changes), whether nodes are left out. Queue specs
        #: and the resource space change only with a rebuild of the cluster's model,
        #: which starts every job afresh with an empty ``verdicts``. By identity: the
        #: answer kept with it holds the objects, so no id is reused meanwhile.
        self.world = (
            ssn.config,
            id(nodes.allocatable),
            id(nodes.labels),
            self._allocatable is None,
        )
        self.held = (nodes.allocatable, nodes.labels)
        #: The limit a queue refusal names, per queue (``status._named_refusal``): the
        #: plugins' figures stand while a session explains.
        self.refusal_limits: dict[str, str | None] = {}

    def _checks_of(self, hook: str) -> list[CapabilityCheck]:
        """The ``capability_exceeded`` checks of the plugins deciding ``hook``."""
        got = self._checks.get(hook)
        if got is None:
            got = self._checks[hook] = _checks(self.ssn, hook)
        return got

    def largest(self, selector: tuple[tuple[str, str], ...]) -> Vector | None:
        """Per resource, the most any node matching ``selector`` offers (None when no
        node matches, or the nodes cannot say)."""
        if self._allocatable is None:
            return None
        if selector not in self._largest:
            alloc = self._allocatable
            if selector:
                alloc = alloc[self.ssn.nodes.labels.selector(selector)]
            self._largest[selector] = alloc.max(axis=0) if len(alloc) else None
        return self._largest[selector]

    def task(self, queue: str, task: TaskInfo) -> str:
        """Why ``task`` can never fit ("asks cpu 100, the largest node has 8"), or "".
        Kept by the identity of the task's (shared, read-only) request vectors and
        placement, which the tasks keep alive through the session."""
        key = (id(task.init_resreq), id(task.resreq), id(task.placement), queue)
        got = self._tasks.get(key)
        if got is None:
            got = self._tasks[key] = self._task(queue, task, task.placement.node_selector)
        return got

    def _task(self, queue: str, task: TaskInfo, selector: tuple) -> str:
        names = self.ssn.space.names
        req = task.init_resreq
        largest = self.largest(selector)
        if largest is not None:
            over = np.flatnonzero(req > largest)
            if over.size:
                d = int(over[0])
                name = names[d]
                which = "node matching its nodeSelector" if selector else "node"
                if largest[d] <= 0:
                    return f"asks {name} {format_amount(name, float(req[d]))}, no {which} has any"
                return (
                    f"asks {name} {format_amount(name, float(req[d]))}, the largest {which} "
                    f"has {format_amount(name, float(largest[d]))}"
                )
        return self._capability(queue, task.resreq, self._checks_of("allocatable"), "asks")

    def gang(self, job: JobInfo) -> str:
        """Why ``job``'s gang can never run whole ("its 8 tasks ask nvidia.com/gpu 64 at
        least, the cluster has 32"), or "": in some resource, the ``min_available``
        smallest requests of its tasks add up to more than every node together, or than
        its queue's capability."""
        k = job.min_available
        if k <= 1 or len(job.tasks) < k:
            return ""
        least = _least(job, k)
        names = self.ssn.space.names
        if self._allocatable is not None:
            total = self._allocatable.sum(axis=0)
            over = np.flatnonzero(least > total)
            if over.size:
                d = int(over[0])
                name = names[d]
                return (
                    f"its {k} tasks ask {name} {format_amount(name, float(least[d]))} at "
                    f"least, all nodes together have {format_amount(name, float(total[d]))}"
                )
        why = self._capability(job.queue, least, self._checks_of("allocatable"), "ask at least")
        return f"its {k} tasks {why}" if why else ""

    def admission(self, job: JobInfo) -> str:
        """Why ``job``'s minResources can never be admitted to its queue, or ""."""
        if job.min_resources is None:
            return ""
        for_admission = self._checks_of("job_enqueueable")
        why = self._capability(job.queue, job.min_resources, for_admission, "ask for")
        if why or not for_admission or self._allocatable is None:
            return why
        # Those plugins also hold a queue to the cluster's total where no capability is
        # set: minResources beyond it are never admitted while the cluster stays.
        total = self.ssn.total
        over = np.flatnonzero(self.ssn.space.share & (job.min_resources > total))
        if not over.size:
            return ""
        d = int(over[0])
        name = self.ssn.space.names[d]
        asks = format_amount(name, float(job.min_resources[d]))
        has = format_amount(name, float(total[d]))
        return f"ask for {name} {asks}, the cluster's total is {name} {has}"

    def _capability(self, queue: str, req: Vector, checks: list[CapabilityCheck], verb: str) -> str:
        for check in checks:
            got = check(queue, req)
            if got is None:
                continue
            limiter, d = got
            name = self.ssn.space.names[d]
            cap = format_amount(name, float(self.ssn.queues[limiter].capability[d]))
            asks = f"{verb} {name} {format_amount(name, float(req[d]))}"
            if limiter == queue:
                return f"{asks}, its queue {queue}'s capability is {name} {cap}"
            return f"{asks}, the capability of {limiter} (above its queue {queue}) is {name} {cap}"
        return ""


def _least(job: JobInfo, k: int) -> Vector:
    """Per resource, what the ``k`` smallest requests of ``job``'s tasks add up to: kept
    with the job's version (a waiting gang is explained every cycle)."""
    stamp = (job.version, k)
    least = job.verdicts.recall(_LEAST, stamp)
    if least is None:
        reqs = np.stack([t.init_resreq for t in job.tasks.values()])
        least = job.verdicts.keep(_LEAST, stamp, np.partition(reqs, k - 1, axis=0)[:k].sum(0))
    return least


#: ``JobInfo.verdicts`` key: the least a gang's minimum of tasks asks for.
_LEAST = "never.least"


def _checks(ssn: Session, hook: str) -> list[CapabilityCheck]:
    """The ``capability_exceeded`` of the plugins whose ``hook`` function is enabled."""
    deciding = {name for tier in ssn.hooks.chain(hook) for name, _fn in tier}
    out = []
    for plugin in ssn.plugins:
        check = getattr(plugin, "capability_exceeded", None)
        if check is not None and plugin.name in deciding:
            out.append(check)
    return out


def never_fits(ssn: Session, job: JobInfo, limits: Limits) -> str:
    """Why ``job`` can never run as it stands: a pending task no node or queue could
    ever hold (the first by name), or, for a job not yet admitted, minResources beyond
    its queue's capability. "" when nothing is known to be impossible.

    A waiting job is explained in every cycle, and its answer changes only with its
    tasks, its gang, its admission or the world of ``limits``: it is kept with those in
    the job's ``verdicts``."""
    stamp = (
        job.version, job.is_pending(), job.min_available, job.queue,
        id(job.min_resources), limits.world,
    )  # fmt: skip
    kept = job.verdicts.recall(_NEVER, stamp)
    if kept is None:
        kept = job.verdicts.keep(
            _NEVER, stamp, (_never_fits(job, limits), limits.held, job.min_resources)
        )
    return kept[0]


#: ``JobInfo.verdicts`` key: :func:`never_fits`'s answer (with what its stamp names).
_NEVER = "never.fits"


def _never_fits(job: JobInfo, limits: Limits) -> str:
    worst = None
    task, queue = limits.task, job.queue
    pending = job.by_status.get(TaskStatus.PENDING, {})
    shapes = job.verdicts.recall(TASK_SHAPES, job.version)
    if shapes is not None and pending:
        # allocate grouped the pending tasks by shape (placement and requests) for this
        # very task index: one task per shape answers for all (a backlog of gangs is
        # explained every cycle). Best-effort tasks, left out there, ask for nothing.
        groups, shape_of = shapes
        never = {shape: no for shape, _n, first in groups if (no := task(queue, first))}
        if never:
            for t in pending.values():
                why = never.get(shape_of.get(t.uid))
                if why and (worst is None or t.name < worst[0]):
                    worst = (t.name, why)
    else:
        for t in pending.values():
            why = task(queue, t)
            if why and (worst is None or t.name < worst[0]):
                worst = (t.name, why)
    if worst is not None:
        return f"task {worst[0]} can never fit: {worst[1]}"
    why = limits.gang(job)
    if why:
        return f"the gang can never run whole: {why}"
    if job.is_pending():
        why = limits.admission(job)
        if why:
            return f"can never be admitted: its minResources {why}"
    return ""


__all__ = ["Limits", "never_fits"]
