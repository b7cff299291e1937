"""The objects a Volcano Job is made of: its PodGroup and its pods, as Volcano builds them.

- The PodGroup is named ``<job>-<job uid>`` (Volcano 1.6 and later, current master too),
  carries the Job's labels and annotations, ``minMember`` (the Job's minAvailable),
  ``minTaskMember`` (each task's minAvailable), ``queue``, ``priorityClassName``, a
  controller ownerReference to the Job, and ``minResources``: the quota usage of the
  pods the gang needs, taken in task priority order (:func:`min_resources`, Volcano's
  ``calcPGMinResources`` of current master). The Job's ``networkTopology`` becomes the
  PodGroup's (``highestTierAllowed`` or else ``highestTierName``), and each task with a
  ``partitionPolicy`` one ``subGroupPolicy`` entry (:func:`sub_group_policies`).
- A pod is named ``<job>-<task>-<index>``, has the template's labels, annotations and
  spec, the job's scheduler name (unless the template names one) and priority class
  (likewise), Volcano's annotations (group name, task spec and index, job name, queue,
  job version, template key, retry count) and labels (task index, job name and
  namespace, task spec, queue; for a task with a ``partitionPolicy``, its partition,
  ``volcano.sh/partition-id``, ``index // partitionSize``), and a controller
  ownerReference to the Job.

Quota usage is Kubernetes' ``PodUsageFunc``, as Volcano uses it: ``pods`` and
``count/pods`` 1, ``cpu``/``memory``/``ephemeral-storage`` with their ``requests.`` and
``limits.`` twins, hugepages and extended resources under their names and
``requests.<name>``. The scheduler reads only the resource names among them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from pumice.api.parse import copy_tree
from pumice.api.quantity import parse_quantity
from pumice.controllers.job.spec import API_VERSION, KIND, JobSpec, TaskSpec

GROUP_NAME = "scheduling.k8s.io/group-name"
TASK_SPEC = "volcano.sh/task-spec"
TASK_INDEX = "volcano.sh/task-index"
JOB_NAME = "volcano.sh/job-name"
JOB_NAMESPACE = "volcano.sh/job-namespace"
QUEUE_NAME = "volcano.sh/queue-name"
JOB_VERSION = "volcano.sh/job-version"
TEMPLATE_KEY = "volcano.sh/template-uid"
RETRY_COUNT = "volcano.sh/job-retry-count"
NUMA_POLICY = "volcano.sh/numa-topology-policy"
#: A partitioned task's pods: their partition, which the task's sub-group policy
#: groups them by (``matchLabelKeys``).
PARTITION_ID = "volcano.sh/partition-id"
#: Job annotations copied onto its pods (the JDB pair: the first one present).
_COPIED_ANNOTATIONS = (
    "volcano.sh/preemptable",
    "volcano.sh/cooldown-time",
    "volcano.sh/revocable-zone",
)
_JDB = ("volcano.sh/jdb-min-available", "volcano.sh/jdb-max-unavailable")
_COPIED_LABELS = ("volcano.sh/preemptable", "volcano.sh/cooldown-time")


def owner_reference(spec: JobSpec) -> dict[str, Any]:
    """The controller ownerReference to the Job (garbage collection, and how the
    controller knows its own objects)."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": spec.name,
        "uid": spec.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_name(job: str, task: str, index: int) -> str:
    return f"{job}-{task}-{index}"


def pod_index(name: str) -> int | None:
    """The index at the end of a pod's name (``job-task-3`` -> 3), None if none."""
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


# -- quota usage and minResources ---------------------------------------------------------


def _is_native(name: str) -> bool:
    return "/" not in name or name.startswith("kubernetes.io/")


def _add(into: dict[str, Decimal], other: Mapping[str, Decimal], times: int = 1) -> None:
    for k, v in other.items():
        into[k] = into.get(k, Decimal(0)) + v * times


def _resource_list(value: Any, field: str) -> dict[str, Decimal]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): parse_quantity(q, field=f"{field}.{k}") for k, q in value.items()}


def quota_usage(pod_spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """Kubernetes' quota usage of one pod of ``pod_spec`` (module docstring)."""
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    for c in pod_spec.get("containers") or ():
        res = (c or {}).get("resources") or {}
        _add(requests, _resource_list(res.get("requests"), "resources.requests"))
        _add(limits, _resource_list(res.get("limits"), "resources.limits"))
    for c in pod_spec.get("initContainers") or ():
        res = (c or {}).get("resources") or {}
        for into, got in (
            (requests, _resource_list(res.get("requests"), "resources.requests")),
            (limits, _resource_list(res.get("limits"), "resources.limits")),
        ):
            for k, v in got.items():
                into[k] = max(into.get(k, Decimal(0)), v)
    overhead = _resource_list(pod_spec.get("overhead"), "overhead")
    _add(requests, overhead)
    _add(limits, overhead)
    out: dict[str, Decimal] = {"count/pods": Decimal(1), "pods": Decimal(1)}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            out[name] = out[f"requests.{name}"] = requests[name]
        if name in limits:
            out[f"limits.{name}"] = limits[name]
    for name, q in requests.items():
        if name.startswith("hugepages-"):
            out[name] = out[f"requests.{name}"] = q
        elif not _is_native(name) and not name.startswith("requests."):
            out[f"requests.{name}"] = q
            out[name] = q  # Volcano's GetPodQuotaUsage drops the prefix again
    return out


def render(name: str, amount: Decimal) -> str:
    """A quantity as a Kubernetes ``ResourceList`` value: ``2``, ``1500m``, ``8Gi``."""
    base = name.rsplit(".", 1)[-1] if name.startswith(("requests.", "limits.")) else name
    if amount == amount.to_integral_value():
        n = int(amount)
        if base in ("memory", "ephemeral-storage") or base.startswith("hugepages-"):
            for suffix, factor in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30),
                                   ("Mi", 2**20), ("Ki", 2**10)):  # fmt: skip
                if n >= factor and n % factor == 0:
                    return f"{n // factor}{suffix}"
        return str(n)
    milli = amount * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return f"{math.ceil(amount * 10**9)}n"


def _task_order(tasks: Iterable[TaskSpec], priority_of: Callable[[str], int]) -> list[TaskSpec]:
    """Tasks by their pods' priority, highest first (stable: the spec's order)."""

    def priority(t: TaskSpec) -> int:
        pc = str(t.pod_spec.get("priorityClassName") or "")
        return priority_of(pc) if pc else 0

    return sorted(tasks, key=priority, reverse=True)


def min_resources(spec: JobSpec, priority_of: Callable[[str], int]) -> dict[str, str]:
    """What the gang's minimum asks for, as Volcano computes it: when the Job's
    minAvailable is below the sum of its tasks' minAvailable, the first minAvailable
    pods in task priority order; otherwise each task's minAvailable pods, then more
    pods of the tasks with replicas to spare, in priority order, up to the Job's
    minAvailable. ``priority_of(priorityClassName)`` is the class's value (0 unknown)."""
    order = _task_order(spec.tasks, priority_of)
    total: dict[str, Decimal] = {}
    want = spec.min_available
    if want < sum(t.min_available for t in spec.tasks):
        left = want
        for t in order:
            n = min(left, t.replicas)
            _add(total, quota_usage(t.pod_spec), max(n, 0))
            left -= n
            if left <= 0:
                break
    else:
        count = 0
        for t in order:
            n = min(t.min_available, want - count)
            _add(total, quota_usage(t.pod_spec), max(n, 0))
            count += n
            if count >= want:
                break
        left = want - count
        for t in order:
            if left <= 0:
                break
            spare = t.replicas - t.min_available
            if spare <= 0:
                continue
            n = min(left, spare)
            _add(total, quota_usage(t.pod_spec), n)
            left -= n
    return {k: render(k, total[k]) for k in sorted(total)}


# -- the objects -------------------------------------------------------------------------


def sub_group_policies(spec: JobSpec) -> list[dict[str, Any]]:
    """One ``subGroupPolicy`` entry per task with a ``partitionPolicy``, in task order, as
    Volcano's ``getSubGroupPolicy`` makes it: named for the task, sub-groups of
    ``partitionSize`` pods of which ``minPartitions`` are needed, the task's pods
    (``volcano.sh/task-spec``) grouped by their partition label, and the partitions'
    network topology."""
    out = []
    for t in spec.tasks:
        p = t.partition
        if p is None:
            continue
        policy: dict[str, Any] = {
            "name": t.name,
            "subGroupSize": p.size,
            "minSubGroups": p.min_partitions,
            "labelSelector": {"matchLabels": {TASK_SPEC: t.name}},
            "matchLabelKeys": [PARTITION_ID],
        }
        if p.topology is not None:
            policy["networkTopology"] = p.topology.to_object()
        out.append(policy)
    return out


def build_podgroup(
    spec: JobSpec,
    priority_of: Callable[[str], int],
    *,
    min_res: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The Job's PodGroup (module docstring); ``min_res``, when given, is what
    :func:`min_resources` gives for it (a caller that keeps it saves computing it)."""
    meta: dict[str, Any] = {
        "name": spec.podgroup_name,
        "namespace": spec.namespace,
        "ownerReferences": [owner_reference(spec)],
    }
    if spec.labels:
        meta["labels"] = dict(spec.labels)
    if spec.annotations:
        meta["annotations"] = dict(spec.annotations)
    pg_spec: dict[str, Any] = {
        "minMember": spec.min_available,
        "minTaskMember": {t.name: t.min_available for t in spec.tasks},
        "queue": spec.queue,
        "minResources": dict(min_res) if min_res is not None else min_resources(spec, priority_of),
    }
    if spec.priority_class:
        pg_spec["priorityClassName"] = spec.priority_class
    if spec.network_topology is not None:
        pg_spec["networkTopology"] = spec.network_topology.to_object()
    sub_groups = sub_group_policies(spec)
    if sub_groups:
        pg_spec["subGroupPolicy"] = sub_groups
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": meta,
        "spec": pg_spec,
        "status": {"phase": "Pending"},
    }


def podgroup_changes(
    pg: Mapping[str, Any],
    spec: JobSpec,
    priority_of: Callable[[str], int],
    *,
    min_res: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The spec fields of an existing PodGroup that the Job now says otherwise (a
    scaled Job): a merge patch, empty when nothing changed (``min_res`` as for
    :func:`build_podgroup`). As Volcano's controller, it brings ``subGroupPolicy`` up
    to date but leaves ``networkTopology`` as the PodGroup was made."""
    have = pg.get("spec") or {}
    want = build_podgroup(spec, priority_of, min_res=min_res)["spec"]
    patch: dict[str, Any] = {}
    for k in ("minMember", "minResources", "priorityClassName"):
        if have.get(k) != want.get(k):
            patch[k] = want.get(k)
    tm = dict(have.get("minTaskMember") or {})
    if any(tm.get(t) != n for t, n in want["minTaskMember"].items()):
        patch["minTaskMember"] = want["minTaskMember"]
    if (have.get("subGroupPolicy") or []) != want.get("subGroupPolicy", []):
        patch["subGroupPolicy"] = want.get("subGroupPolicy")  # None: no policy left
    return {"spec": patch} if patch else {}


def build_pod(
    spec: JobSpec, task: TaskSpec, index: int, version: int, retries: int
) -> dict[str, Any]:
    """Pod number ``index`` of ``task`` at job version ``version`` (module docstring);
    job plugins then add to it."""
    template = copy_tree(dict(task.template))
    tmeta = template.get("metadata") or {}
    pod_spec = dict(template.get("spec") or {})
    if not pod_spec.get("schedulerName"):
        pod_spec["schedulerName"] = spec.scheduler_name
    if not pod_spec.get("priorityClassName") and spec.priority_class:
        pod_spec["priorityClassName"] = spec.priority_class
    annotations = dict(tmeta.get("annotations") or {})
    annotations.update(
        {
            TASK_INDEX: str(index),
            TASK_SPEC: task.name,
            GROUP_NAME: spec.podgroup_name,
            JOB_NAME: spec.name,
            QUEUE_NAME: spec.queue,
            JOB_VERSION: str(version),
            TEMPLATE_KEY: f"{spec.name}-{task.name}",
            RETRY_COUNT: str(retries),
        }
    )
    if task.topology_policy:
        annotations[NUMA_POLICY] = task.topology_policy
    for k in _COPIED_ANNOTATIONS:
        if k in spec.annotations:
            annotations[k] = spec.annotations[k]
    for k in _JDB:
        if k in spec.annotations:
            annotations[k] = spec.annotations[k]
            break
    labels = dict(tmeta.get("labels") or {})
    labels.update(
        {
            TASK_INDEX: str(index),
            JOB_NAME: spec.name,
            TASK_SPEC: task.name,
            JOB_NAMESPACE: spec.namespace,
            QUEUE_NAME: spec.queue,
        }
    )
    for k in _COPIED_LABELS:
        if k in spec.labels:
            labels[k] = spec.labels[k]
    if task.partition is not None:
        size = task.partition.size
        labels[PARTITION_ID] = str(index // size if size > 0 else 0)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(spec.name, task.name, index),
            "namespace": spec.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(spec)],
        },
        "spec": pod_spec,
        "status": {"phase": "Pending"},
    }


__all__ = [
    "GROUP_NAME",
    "JOB_NAME",
    "JOB_VERSION",
    "PARTITION_ID",
    "TASK_INDEX",
    "TASK_SPEC",
    "build_pod",
    "build_podgroup",
    "min_resources",
    "owner_reference",
    "pod_index",
    "pod_name",
    "podgroup_changes",
    "quota_usage",
    "render",
    "sub_group_policies",
]
