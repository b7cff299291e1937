"""Build a :class:`~pumice.api.snapshot.Snapshot` from Kubernetes objects.

This is the one place where records become the model: it fixes the resource space,
resolves priorities, groups pods into jobs and accounts running pods on their nodes.
Every object is validated before anything is built, so a bad object fails the whole
snapshot with an error that names it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pumice.api import parse
from pumice.api.job import INQUEUE, PENDING, RUNNING, JobInfo
from pumice.api.node import NodeTable
from pumice.api.pdb import parse_pdb
from pumice.api.queue import QueueInfo
from pumice.api.resources import ResourceSpace, is_empty
from pumice.api.snapshot import Snapshot
from pumice.api.task import TaskInfo, TaskStatus, status_of_pod
from pumice.errors import InputError

DEFAULT_SCHEDULER = "volcano"
ROOT_QUEUE = "root"
TASK_PRIORITY_ANNOTATION = "volcano.sh/task-priority"
#: Kubernetes scores a pod without a cpu or memory request as if it asked for these.
DEFAULT_CPU_REQUEST = 100.0  # millicores
DEFAULT_MEMORY_REQUEST = 200.0 * 2**20

_KINDS = {
    "Node": parse.parse_node,
    "Pod": parse.parse_pod,
    "PodGroup": parse.parse_podgroup,
    "Queue": parse.parse_queue,
    "PriorityClass": parse.parse_priority_class,
    "PodDisruptionBudget": parse_pdb,
}


@dataclass(slots=True)
class SourcedObject:
    """An object and the file it came from (for error messages)."""

    obj: Mapping[str, Any]
    source: str = ""


def parse_objects(
    objects: Iterable[SourcedObject],
) -> tuple[dict[str, list], list[str], dict[tuple[str, str], str]]:
    """Validate every object; return records by kind, notes on skipped kinds, and the
    file each (kind, namespace/name) came from."""
    records: dict[str, list] = {k: [] for k in _KINDS}
    notes: list[str] = []
    skipped: dict[str, int] = {}
    seen: dict[tuple[str, str], str] = {}
    for item in objects:
        obj = item.obj
        if not isinstance(obj, Mapping):
            raise InputError("expected a Kubernetes object (a mapping)", file=item.source)
        kind = obj.get("kind")
        if not kind:
            raise InputError(
                "is required", file=item.source, obj=parse.object_name(obj), field="kind"
            )
        fn = _KINDS.get(str(kind))
        if fn is None:
            skipped[str(kind)] = skipped.get(str(kind), 0) + 1
            continue
        try:
            rec = fn(obj)
        except InputError as err:
            raise err.located(file=item.source, obj=parse.object_name(obj)) from None
        ident = getattr(rec, "namespace", "") + "/" + rec.name
        if (kind, ident) in seen:
            raise InputError("appears twice", file=item.source, obj=parse.object_name(obj))
        seen[(str(kind), ident)] = item.source
        records[str(kind)].append(rec)
    for kind, n in sorted(skipped.items()):
        notes.append(f"skipped {n} object(s) of kind {kind}")
    return records, notes, seen


def _check_queue_tree(queues: list[parse.QueueRecord]) -> None:
    by_name = {q.name: q for q in queues}
    for q in queues:
        if q.parent and q.parent not in by_name and q.parent != ROOT_QUEUE:
            raise InputError(
                f"parent queue {q.parent!r} does not exist",
                obj=f"Queue {q.name}",
                field="spec.parent",
            )
        path = [q.name]
        cur = q
        while cur.parent and cur.parent in by_name:
            if cur.parent in path:
                cycle = " -> ".join([*path[path.index(cur.parent) :], cur.parent])
                raise InputError(
                    f"queue parents form a cycle: {cycle}",
                    obj=f"Queue {q.name}",
                    field="spec.parent",
                )
            path.append(cur.parent)
            cur = by_name[cur.parent]


def _name_index(name: str) -> int | None:
    parts = name.split("-")
    if len(parts) >= 3 and parts[-1].isdigit():
        return int(parts[-1])
    return None


def build_snapshot(
    objects: Iterable[SourcedObject],
    *,
    scheduler_name: str = DEFAULT_SCHEDULER,
    now: float | None = None,
) -> Snapshot:
    """Validate ``objects`` and build the snapshot one cycle schedules against.

    Pods whose ``schedulerName`` is ``scheduler_name`` (or empty) are ours; other pods
    only occupy their nodes.
    """
    records, notes, sources = parse_objects(objects)
    nodes_r: list = records["Node"]
    pods_r: list[parse.PodRecord] = records["Pod"]
    pgs_r: list[parse.PodGroupRecord] = records["PodGroup"]
    queues_r: list[parse.QueueRecord] = records["Queue"]
    pcs_r: list[parse.PriorityClassRecord] = records["PriorityClass"]
    try:
        _check_queue_tree(queues_r)
    except InputError as err:
        name = (err.obj or "").removeprefix("Queue ")
        raise err.located(file=sources.get(("Queue", "/" + name))) from None

    priority_classes = {pc.name: pc.value for pc in pcs_r}
    defaults = [pc.value for pc in pcs_r if pc.global_default]
    default_priority = max(defaults) if defaults else 0

    names: set[str] = set()
    for n in nodes_r:
        names.update(n.allocatable)
    for p in pods_r:
        names.update(p.init_resreq)
    for g in pgs_r:
        names.update(g.min_resources or ())
    for q in queues_r:
        for r in (q.capability, q.deserved, q.guarantee):
            names.update(r or ())
    space = ResourceSpace(names)
    nodes = NodeTable(nodes_r, space)

    queues: dict[str, QueueInfo] = {}
    for q in queues_r:
        cap = space.vector(q.capability or {}, default=np.inf)
        if q.capability:
            for name in q.capability:  # Volcano: a zero cpu/memory capability means unlimited
                if name in ("cpu", "memory") and q.capability[name] <= 0:
                    cap[space.index[name]] = np.inf
        queues[q.name] = QueueInfo(
            name=q.name,
            weight=q.weight,
            capability=cap,
            deserved=None if q.deserved is None else space.vector(q.deserved),
            guarantee=space.vector(q.guarantee),
            reclaimable=q.reclaimable,
            parent=q.parent,
            state=q.state,
            creation=q.creation,
            annotations=q.annotations,
            has_capability=bool(q.capability),
            priority=q.priority,
        )

    def priority_of(class_name: str) -> int:
        return priority_classes.get(class_name, default_priority)

    def task_priority(p: parse.PodRecord) -> int:
        """The ``volcano.sh/task-priority`` annotation, else spec.priority, else the
        priority class's value, else the global default; a pod with none of these has
        priority 1, as Volcano gives it."""
        annotated = p.annotations.get(TASK_PRIORITY_ANNOTATION, "")
        if annotated.lstrip("-").isdigit():
            return int(annotated)
        if p.priority is not None:
            return p.priority
        if p.priority_class in priority_classes:
            return priority_classes[p.priority_class]
        return default_priority if defaults else 1

    jobs: dict[str, JobInfo] = {}
    for g in pgs_r:
        uid = f"{g.namespace}/{g.name}"
        jobs[uid] = JobInfo(
            uid=uid,
            namespace=g.namespace,
            name=g.name,
            queue=g.queue,
            priority=priority_of(g.priority_class),
            priority_class=g.priority_class,
            min_available=g.min_member,
            min_task_member=g.min_task_member,
            min_resources=None if g.min_resources is None else space.vector(g.min_resources),
            phase=g.phase,
            creation=g.creation,
            allocated=space.zeros(),
            conditions=g.conditions,
            annotations=g.annotations,
        )

    # Pods mostly come in a few request shapes (the replicas of a job, as a rule): one
    # read-only vector per distinct request, shared by every task that has it.
    interned: dict[tuple, tuple[np.ndarray, np.ndarray, bool, np.ndarray]] = {}

    def request_vectors(p: parse.PodRecord) -> tuple[np.ndarray, np.ndarray, bool, np.ndarray]:
        key = (tuple(p.resreq.items()), tuple(p.init_resreq.items()))
        got = interned.get(key)
        if got is None:
            resreq = space.vector(p.resreq)
            init = resreq if p.init_resreq == p.resreq else space.vector(p.init_resreq)
            cpu = p.resreq.get("cpu") or DEFAULT_CPU_REQUEST
            nonzero = np.array([cpu, p.resreq.get("memory") or DEFAULT_MEMORY_REQUEST])
            for v in (resreq, init, nonzero):
                v.flags.writeable = False
            got = interned[key] = (resreq, init, is_empty(resreq, space), nonzero)
        return got

    blocked: dict[str, str] = {}
    unknown_nodes = 0
    for p in pods_r:
        ours = p.scheduler_name in ("", scheduler_name)
        status = status_of_pod(p.phase, p.node_name, p.terminating)
        job_uid: str | None = None
        if ours:
            if p.group:
                job_uid = f"{p.namespace}/{p.group}"
                if job_uid not in jobs:
                    blocked.setdefault(
                        job_uid,
                        f"PodGroup {job_uid} does not exist; create it or fix the "
                        f"{parse.GROUP_ANNOTATION} annotation of its pods",
                    )
                    job_uid = None
            else:
                pg_name = (
                    f"podgroup-{p.uid}"
                    if p.uid != f"{p.namespace}/{p.name}"
                    else (f"podgroup-{p.name}")
                )
                job_uid = f"{p.namespace}/{pg_name}"
                running = status not in (TaskStatus.PENDING,)
                jobs[job_uid] = JobInfo(
                    uid=job_uid,
                    namespace=p.namespace,
                    name=pg_name,
                    queue=p.annotations.get(parse.QUEUE_ANNOTATION) or parse.DEFAULT_QUEUE,
                    priority=priority_of(p.priority_class),
                    priority_class=p.priority_class,
                    min_available=1,
                    min_task_member={},
                    min_resources=space.vector({k: v for k, v in p.resreq.items() if k != "pods"}),
                    phase=RUNNING if running else PENDING,
                    creation=p.creation,
                    allocated=space.zeros(),
                    bare=True,
                )
        resreq, init_resreq, best_effort, nonzero = request_vectors(p)
        task = TaskInfo(
            uid=p.uid,
            namespace=p.namespace,
            name=p.name,
            job=job_uid,
            role=p.role,
            status=status,
            node=p.node_name or None,
            resreq=resreq,
            init_resreq=init_resreq,
            priority=task_priority(p),
            best_effort=best_effort,
            placement=p.placement,
            host_ports=p.host_ports,
            creation=p.creation,
            preemption_policy=p.preemption_policy,
            priority_class=p.priority_class,
            annotations=p.annotations,
            labels=p.labels,
            name_index=_name_index(p.name),
            scheduled_at=p.scheduled_at,
            pod_affinity=p.pod_affinity,
            nonzero=nonzero,
        )
        if job_uid is not None:
            jobs[job_uid].add_task(task)
        if task.node:
            i = nodes.index.get(task.node)
            if i is None:
                unknown_nodes += 1
            else:
                nodes.add_task(i, task)
    if unknown_nodes:
        notes.append(f"{unknown_nodes} pod(s) are on nodes not in the snapshot; ignored them")

    for uid in list(jobs):
        job = jobs[uid]
        if job.queue not in queues:
            blocked[uid] = (
                f"queue {job.queue!r} does not exist; create the Queue or set spec.queue "
                f"of the PodGroup to an existing queue"
            )
            del jobs[uid]
    if now is None:
        stamps = [max(p.creation, p.scheduled_at) for p in pods_r] + [g.creation for g in pgs_r]
        now = max(stamps, default=0.0)
    return Snapshot(
        now=now,
        space=space,
        nodes=nodes,
        jobs=jobs,
        queues=queues,
        priority_classes=priority_classes,
        default_priority=default_priority,
        blocked=blocked,
        notes=notes,
        pdbs=records["PodDisruptionBudget"],
    )


__all__ = ["DEFAULT_SCHEDULER", "INQUEUE", "SourcedObject", "build_snapshot", "parse_objects"]
