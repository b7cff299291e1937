"""The JSON Volcano's extender plugin sends, made from pumice's model.

Volcano marshals its own scheduling structs with Go's default JSON encoding, so an
extender reads their Go field names: a task is ``{"UID", "Job", "Name", "Namespace",
"Resreq": {"MilliCPU", "Memory", "ScalarResources", "MaxTaskNum"}, "NodeName",
"Status", "Priority", "Preemptable", "BestEffort", "RevocableZone", "Pod", ...}``, a node
``{"Name", "Node", "State", "Idle", "Used", "Allocatable", "Tasks", ...}``, and so on;
the envelopes (``{"task", "node"}``, ``{"evictor", "evictees"}``...) have lowercase JSON
tags. These functions write the same field names and units (milli-CPU, bytes, scalar
resources in thousandths, task statuses as Volcano's bit values), from what pumice
models.

What pumice does not keep is sent empty or rebuilt: the ``Pod`` of a task and the
``Node`` of a node are objects rebuilt from the model (the pod's metadata, its node, its
priority and its requests summed in one container; the node's labels, taints and
allocatable resources), not the API server's objects; fields of Volcano features pumice
lacks (NUMA, DRA, sub-jobs) are null or empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from pumice.api.job import JobInfo
from pumice.api.node import NodeTable
from pumice.api.quantity import CPU, MEMORY, PODS
from pumice.api.queue import QueueInfo
from pumice.api.task import TaskInfo, TaskStatus, revocable_zone

#: Volcano's TaskStatus values (bit flags, ``1 << iota`` from Pending).
STATUS_CODES = {status: 1 << (status.value - 1) for status in TaskStatus}
#: Resources outside Volcano's ScalarResources.
_NOT_SCALAR = frozenset({CPU, MEMORY, PODS, "ephemeral-storage"})


def _quantity(name: str, amount: float) -> str:
    """A canonical amount as an exact Kubernetes quantity (cpu in millicores)."""
    if name == CPU:
        return f"{round(amount)}m"
    if float(amount).is_integer():
        return str(int(amount))
    return repr(float(amount))


def _time(t: float) -> str | None:
    if not t:
        return None
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def resource(
    names: Sequence[str], vector: np.ndarray | None, *, task_num: int = 0
) -> dict[str, Any]:
    """A Volcano ``Resource``: milli-CPU, memory bytes, scalars in thousandths."""
    out: dict[str, Any] = {"MilliCPU": 0.0, "Memory": 0.0, "ScalarResources": None}
    scalars: dict[str, float] = {}
    if vector is not None:
        for name, amount in zip(names, vector.tolist(), strict=True):
            if name == CPU:
                out["MilliCPU"] = amount
            elif name == MEMORY:
                out["Memory"] = amount
            elif name not in _NOT_SCALAR and amount:
                scalars[name] = amount * 1000.0
    if scalars:
        out["ScalarResources"] = scalars
    out["MaxTaskNum"] = task_num
    return out


def pod_object(task: TaskInfo, names: Sequence[str]) -> dict[str, Any]:
    """The task's pod, rebuilt from the model (see the module docstring)."""
    requests = {
        name: _quantity(name, amount)
        for name, amount in zip(names, task.resreq.tolist(), strict=True)
        if amount and name != PODS
    }
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"requests": requests}}],
        "priority": task.priority,
    }
    if task.node:
        spec["nodeName"] = task.node
    if task.priority_class:
        spec["priorityClassName"] = task.priority_class
    phase = {
        TaskStatus.RUNNING: "Running",
        TaskStatus.SUCCEEDED: "Succeeded",
        TaskStatus.FAILED: "Failed",
    }.get(task.status, "Pending")
    return {
        "metadata": {
            "name": task.name,
            "namespace": task.namespace,
            "uid": task.uid,
            "labels": dict(task.labels),
            "annotations": dict(task.annotations),
            "creationTimestamp": _time(task.creation),
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def task_json(task: TaskInfo, names: Sequence[str]) -> dict[str, Any]:
    """A Volcano ``TaskInfo``."""
    return {
        "UID": task.uid,
        "Job": task.job or "",
        "Name": task.name,
        "Namespace": task.namespace,
        "TaskRole": task.role,
        "Resreq": resource(names, task.resreq),
        "InitResreq": resource(names, task.init_resreq),
        "DRAResreq": None,
        "ResourceClaimKeys": None,
        "ResourceClaimDRAResreq": None,
        "NodeName": task.node or "",
        "EvictionOccurred": False,
        "JobAllocatedHyperNode": "",
        "Status": STATUS_CODES[task.status],
        "LastTransaction": None,
        "Priority": task.priority,
        "VolumeReady": False,
        "Preemptable": task.preemptable,
        "BestEffort": task.best_effort,
        "HasRestartableInitContainer": False,
        "SchGated": False,
        "RevocableZone": revocable_zone(task.annotations),
        "NumaInfo": None,
        "Pod": pod_object(task, names),
        "PodAnnotations": dict(task.annotations),
        "CustomBindErrHandlerSucceeded": False,
    }


def node_json(nodes: NodeTable, i: int, with_tasks: bool = True) -> dict[str, Any]:
    """A Volcano ``NodeInfo`` for row ``i``."""
    names = nodes.space.names
    spec = nodes.specs[i]
    pods = nodes.space.index.get(PODS)
    task_num = int(nodes.allocatable[i, pods]) if pods is not None else 0
    allocatable = resource(names, nodes.allocatable[i], task_num=task_num)
    node = {
        "metadata": {"name": spec.name, "labels": dict(spec.labels)},
        "spec": {
            "unschedulable": spec.unschedulable,
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in spec.taints],
        },
        "status": {
            "allocatable": {n: _quantity(n, a) for n, a in spec.allocatable.items()},
        },
    }
    tasks = {uid: task_json(t, names) for uid, t in nodes.tasks[i].items()} if with_tasks else {}
    return {
        "Name": spec.name,
        "Node": node,
        "State": {"Phase": 1 if spec.ready else 2, "Reason": ""},
        "Releasing": resource(names, nodes.releasing[i]),
        "Pipelined": resource(names, nodes.pipelined[i]),
        "Idle": resource(names, nodes.idle[i]),
        "Used": resource(names, nodes.used[i]),
        "Allocatable": allocatable,
        "Capacity": allocatable,
        "ResourceUsage": {
            "MetricsTime": "0001-01-01T00:00:00Z",
            "CPUUsageAvg": {},
            "MEMUsageAvg": {},
        },
        "Tasks": tasks,
        "NumaInfo": None,
        "UnassignedNumaPods": None,
        "NumaSchedulerInfo": None,
        "RevocableZone": spec.labels.get("volcano.sh/revocable-zone", ""),
        "Others": None,
        "OversubscriptionNode": False,
        "OfflineJobEvicting": False,
        "OversubscriptionResource": None,
        "ImageStates": None,
        "Generation": 0,
        "BindGeneration": 0,
    }


def job_json(job: JobInfo, names: Sequence[str]) -> dict[str, Any]:
    """A Volcano ``JobInfo``."""
    by_status: dict[str, dict[str, Any]] = {}
    tasks = {}
    for uid, t in job.tasks.items():
        body = task_json(t, names)
        tasks[uid] = body
        by_status.setdefault(str(STATUS_CODES[t.status]), {})[uid] = body
    budget_min = job.annotations.get("volcano.sh/jdb-min-available", "")
    budget_max = "" if budget_min else job.annotations.get("volcano.sh/jdb-max-unavailable", "")
    podgroup = {
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "annotations": dict(job.annotations),
            "labels": dict(job.labels),
            "creationTimestamp": _time(job.creation),
        },
        "spec": {
            "minMember": job.min_available,
            "queue": job.queue,
            "priorityClassName": job.priority_class,
            "minTaskMember": dict(job.min_task_member) or None,
        },
        "status": {"phase": job.phase},
        "Version": "v1beta1",
    }
    return {
        "UID": job.uid,
        "PgUID": "",
        "Name": job.name,
        "Namespace": job.namespace,
        "Queue": job.queue,
        "Priority": job.priority,
        "MinAvailable": job.min_available,
        "WaitingTime": None,
        "JobFitErrors": "",
        "NodesFitErrors": {},
        "AllocatedHyperNode": "",
        "NetworkTopology": None,
        "SubJobs": {},
        "TaskToSubJob": {},
        "MinSubJobs": {},
        "TaskStatusIndex": by_status,
        "Tasks": tasks,
        "TaskMinAvailable": dict(job.min_task_member),
        "TaskMinAvailableTotal": sum(job.min_task_member.values()),
        "Allocated": resource(names, job.allocated),
        "TotalRequest": resource(
            names, sum((t.resreq for t in job.tasks.values()), np.zeros(len(names)))
        ),
        "CreationTimestamp": _time(job.creation),
        "PodGroup": None if job.bare else podgroup,
        "ScheduleStartTimestamp": None,
        "Preemptable": _job_preemptable(job),
        "RevocableZone": _job_revocable_zone(job),
        "Budget": {"MinAvailable": budget_min, "MaxUnavailable": budget_max},
    }


def _job_preemptable(job: JobInfo) -> bool:
    for source in (job.annotations, job.labels):
        value = source.get("volcano.sh/preemptable")
        if value is not None:
            return value in ("1", "t", "T", "TRUE", "true", "True")
    return False


def _job_revocable_zone(job: JobInfo) -> str:
    return revocable_zone(job.annotations)


def queue_json(queue: QueueInfo, names: Sequence[str]) -> dict[str, Any]:
    """A Volcano ``QueueInfo``."""
    spec: dict[str, Any] = {"weight": queue.weight, "reclaimable": queue.reclaimable}
    if queue.has_capability:
        spec["capability"] = {
            n: _quantity(n, a)
            for n, a in zip(names, queue.capability.tolist(), strict=True)
            if np.isfinite(a)
        }
    if queue.parent:
        spec["parent"] = queue.parent
    return {
        "UID": queue.name,
        "Name": queue.name,
        "Weight": queue.weight,
        "Weights": queue.annotations.get("volcano.sh/hierarchy-weights", ""),
        "Hierarchy": queue.annotations.get("volcano.sh/hierarchy", ""),
        "Queue": {
            "metadata": {
                "name": queue.name,
                "annotations": dict(queue.annotations),
                "creationTimestamp": _time(queue.creation),
            },
            "spec": spec,
            "status": {"state": queue.state},
        },
    }


__all__ = [
    "STATUS_CODES",
    "job_json",
    "node_json",
    "pod_object",
    "queue_json",
    "resource",
    "task_json",
]
