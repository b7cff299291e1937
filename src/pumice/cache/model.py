"""Records -> the scheduling model: the one place that decides how a parsed Queue,
PodGroup or Pod becomes a :class:`QueueInfo`, :class:`JobInfo` or :class:`TaskInfo`.

Both the one-shot snapshot builder (``pumice cycle``) and the event-driven scheduler
cache (``simulate``, ``run``) build through :class:`ModelBuilder`, so the two cannot
drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from pumice.api import parse
from pumice.api.job import COMPLETED, INQUEUE, PENDING, RUNNING, JobInfo
from pumice.api.node import NodeSpec
from pumice.api.queue import QueueInfo
from pumice.api.resources import ResourceSpace, is_empty
from pumice.api.task import TERMINATED_STATUSES, TaskInfo, TaskStatus

TASK_PRIORITY_ANNOTATION = "volcano.sh/task-priority"
#: Kubernetes scores a pod without a cpu or memory request as if it asked for these.
DEFAULT_CPU_REQUEST = 100.0  # millicores
DEFAULT_MEMORY_REQUEST = 200.0 * 2**20

Vectors = tuple[np.ndarray, np.ndarray, bool, np.ndarray]


def resource_space(
    nodes: Iterable[NodeSpec],
    pods: Iterable[parse.PodRecord],
    podgroups: Iterable[parse.PodGroupRecord],
    queues: Iterable[parse.QueueRecord],
) -> ResourceSpace:
    """Every resource name any object mentions."""
    names: set[str] = set()
    for n in nodes:
        names.update(n.allocatable)
    for p in pods:
        names.update(p.init_resreq)
        names.update(p.resreq)
    for g in podgroups:
        names.update(g.min_resources or ())
    for q in queues:
        for r in (q.capability, q.deserved, q.guarantee):
            names.update(r or ())
    return ResourceSpace(names)


def name_index(name: str) -> int | None:
    """The trailing index of ``job-role-N`` pod names (Volcano orders tasks by it)."""
    parts = name.split("-")
    if len(parts) >= 3 and parts[-1].isdigit():
        return int(parts[-1])
    return None


def bare_job_name(p: parse.PodRecord) -> str:
    """The PodGroup Volcano's controller (and :mod:`pumice.controllers.podgroup`) makes
    for a pod without one: ``podgroup-<uid>``, the uid of the pod's controlling owner
    (a ReplicaSet, StatefulSet, Job...) when it has one, so that an owner's pods share
    one group, else the pod's own (its name when it has no uid)."""
    if p.owner:
        return f"podgroup-{p.owner}"
    return f"podgroup-{p.uid}" if p.uid != f"{p.namespace}/{p.name}" else f"podgroup-{p.name}"


def finished(job: JobInfo) -> bool:
    """Whether every pod of ``job`` has finished (Succeeded or Failed): nothing of it
    holds a node or waits for one any more."""
    done = sum(len(job.by_status.get(s, ())) for s in TERMINATED_STATUSES)
    return bool(job.tasks) and done == len(job.tasks)


def bare_phase(job: JobInfo) -> str:
    """The phase of an implicit group: Pending while all its pods are, Completed once
    all have finished (as the PodGroup Volcano's controller makes for them would say),
    else Running (it has minMember 1, so one pod placed is enough)."""
    if finished(job):
        return COMPLETED
    pending = job.by_status.get(TaskStatus.PENDING, {})
    return PENDING if len(pending) == len(job.tasks) else RUNNING


def derived_phase(job: JobInfo) -> str:
    """The phase of a gang whose status pumice does not write (another dialect's
    PodGroup, a Workload's pod group): Running once one of its pods holds a node, else
    Inqueue if a cycle admitted it (remembered by the scheduler cache), else Pending."""
    pending = job.by_status.get(TaskStatus.PENDING, {})
    if len(pending) < len(job.tasks):
        return RUNNING
    return INQUEUE if job.phase == INQUEUE else PENDING


def queue_fix(job: JobInfo) -> str:
    """How to give ``job`` an existing queue, for the explanation of one that has none."""
    if job.api == "volcano":
        return "set spec.queue of the PodGroup to an existing queue"
    what = "Workload" if job.uid.partition("/")[2].startswith("workload:") else "PodGroup"
    return f"set the {parse.QUEUE_ANNOTATION} annotation of the {what} to an existing queue"


class ModelBuilder:
    """Builds model objects for one resource space and one set of priority classes."""

    def __init__(
        self,
        space: ResourceSpace,
        classes: Iterable[parse.PriorityClassRecord],
        default_queue: str = parse.DEFAULT_QUEUE,
    ):
        self.space = space
        #: The queue of a pod or podgroup that names none (vc-scheduler's --default-queue).
        self.default_queue = default_queue
        classes = list(classes)
        self.priority_classes = {pc.name: pc.value for pc in classes}
        defaults = [pc.value for pc in classes if pc.global_default]
        self.has_default = bool(defaults)
        self.default_priority = max(defaults) if defaults else 0
        # Pods mostly come in a few request shapes (the replicas of a job, as a rule):
        # one read-only vector per distinct request, shared by every task that has it.
        self._vectors: dict[tuple, Vectors] = {}

    def job_priority(self, class_name: str) -> int:
        return self.priority_classes.get(class_name, self.default_priority)

    def task_priority(self, p: parse.PodRecord) -> int:
        """The ``volcano.sh/task-priority`` annotation, else spec.priority, else the
        priority class's value, else the global default; a pod with none of these has
        priority 1, as Volcano gives it."""
        annotated = p.annotations.get(TASK_PRIORITY_ANNOTATION, "")
        if annotated.lstrip("-").isdigit():
            return int(annotated)
        if p.priority is not None:
            return p.priority
        if p.priority_class in self.priority_classes:
            return self.priority_classes[p.priority_class]
        return self.default_priority if self.has_default else 1

    def queue(self, q: parse.QueueRecord) -> QueueInfo:
        space = self.space
        cap = space.vector(q.capability or {}, default=np.inf)
        for name, amount in (q.capability or {}).items():
            # Volcano: a zero cpu/memory capability means unlimited.
            if name in ("cpu", "memory") and amount <= 0:
                cap[space.index[name]] = np.inf
        # Read-only: the scheduler cache lends its queues to every snapshot uncopied
        # (a session reads a queue's spec; what it computes lives in plugin state).
        deserved = None if q.deserved is None else space.vector(q.deserved)
        guarantee = space.vector(q.guarantee)
        for v in (cap, deserved, guarantee):
            if v is not None:
                v.setflags(write=False)
        return QueueInfo(
            name=q.name,
            weight=q.weight,
            capability=cap,
            deserved=deserved,
            guarantee=guarantee,
            reclaimable=q.reclaimable,
            parent=q.parent,
            state=q.state,
            creation=q.creation,
            annotations=q.annotations,
            has_capability=bool(q.capability),
            priority=q.priority,
            affinity=q.affinity,
        )

    def job(self, g: parse.PodGroupRecord, uid: str | None = None) -> JobInfo:
        """The job of a gang; ``uid`` by default the record's (a v1alpha1 Workload's
        pod group gives its own, see :func:`pumice.api.parse.job_uid`)."""
        space = self.space
        return JobInfo(
            uid=uid or g.uid,
            namespace=g.namespace,
            name=g.name,
            queue=g.queue,
            priority=self.job_priority(g.priority_class),
            priority_class=g.priority_class,
            min_available=g.min_member,
            min_task_member=g.min_task_member,
            min_resources=None if g.min_resources is None else space.vector(g.min_resources),
            phase=g.phase,
            creation=g.creation,
            allocated=space.zeros(),
            conditions=g.conditions,
            annotations=g.annotations,
            network_topology=g.network_topology,
            sub_groups=g.sub_groups,
            labels=g.labels,
            api=g.api,
            schedule_timeout=g.schedule_timeout,
            schedule_start=g.schedule_start,
            min_quota=g.min_quota,
        )

    def join(self, job: JobInfo, p: parse.PodRecord | TaskInfo) -> None:
        """``p`` joins ``job``: a gang of a dialect without a priority class of its own
        takes its first pod's, as Volcano's controller gives a PodGroup its pods'
        (the pods of one gang share a template as a rule)."""
        if job.api != "volcano" and not job.priority_class and p.priority_class:
            job.priority_class = p.priority_class
            job.priority = self.job_priority(p.priority_class)

    def bare_job_for(
        self, jobs: dict[str, JobInfo], p: parse.PodRecord, status: TaskStatus
    ) -> JobInfo:
        """The implicit job of ``p`` in ``jobs``, made on first use: the pods of one
        owner join one job. A PodGroup of that name, if ``jobs`` has one (made by the
        controller before the pod was annotated), is that job."""
        uid = f"{p.namespace}/{bare_job_name(p)}"
        job = jobs.get(uid)
        if job is None:
            job = jobs[uid] = self.bare_job(p, status)
        elif job.bare and status != TaskStatus.PENDING:
            job.phase = RUNNING
        return job

    def bare_job(self, p: parse.PodRecord, status: TaskStatus) -> JobInfo:
        """The implicit job for a pod of ours without a PodGroup, as Volcano's podgroup
        controller makes it from the owner's first pod: minMember 1, minResources the
        pod's requests (the larger of the containers' sum and each init container, plus
        overhead)."""
        name = bare_job_name(p)
        return JobInfo(
            uid=f"{p.namespace}/{name}",
            namespace=p.namespace,
            name=name,
            queue=p.annotations.get(parse.QUEUE_ANNOTATION) or self.default_queue,
            priority=self.job_priority(p.priority_class),
            priority_class=p.priority_class,
            min_available=1,
            min_task_member={},
            min_resources=self.space.vector(p.init_resreq),
            phase=PENDING if status == TaskStatus.PENDING else RUNNING,
            creation=p.creation,
            allocated=self.space.zeros(),
            bare=True,
        )

    def _request_vectors(self, p: parse.PodRecord) -> Vectors:
        key = (tuple(p.resreq.items()), tuple(p.init_resreq.items()))
        got = self._vectors.get(key)
        if got is None:
            space = self.space
            resreq = space.vector(p.resreq)
            init = resreq if p.init_resreq == p.resreq else space.vector(p.init_resreq)
            nonzero = np.array([
                p.resreq.get("cpu") or DEFAULT_CPU_REQUEST,
                p.resreq.get("memory") or DEFAULT_MEMORY_REQUEST,
            ])  # fmt: skip
            for v in (resreq, init, nonzero):
                v.flags.writeable = False
            got = self._vectors[key] = (resreq, init, is_empty(resreq, space), nonzero)
        return got

    def task(
        self, p: parse.PodRecord, job_uid: str | None, status: TaskStatus, node: str | None
    ) -> TaskInfo:
        resreq, init_resreq, best_effort, nonzero = self._request_vectors(p)
        return TaskInfo(
            uid=p.uid,
            namespace=p.namespace,
            name=p.name,
            job=job_uid,
            role=p.role,
            status=status,
            node=node,
            resreq=resreq,
            init_resreq=init_resreq,
            priority=self.task_priority(p),
            best_effort=best_effort,
            placement=p.placement,
            host_ports=p.host_ports,
            creation=p.creation,
            preemption_policy=p.preemption_policy,
            priority_class=p.priority_class,
            annotations=p.annotations,
            labels=p.labels,
            name_index=name_index(p.name),
            scheduled_at=p.scheduled_at,
            pod_affinity=p.pod_affinity,
            spread=p.spread,
            nonzero=nonzero,
            claims=p.claims,
            device_claims=p.device_claims,
            devices=p.devices,
            numa=p.numa,
        )
