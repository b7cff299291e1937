"""A :class:`~pumice.sim.workload.Workload` as Kubernetes objects and as a compact document.

The scheduling core reads only Kubernetes-shaped objects, so the simulator renders every
job, queue and priority class here instead of building objects by hand, and the same
objects written out are ordinary manifests that :mod:`pumice.sim.loader` reads back.
Rendering is pure and deterministic: quantities are rounded so that what is rendered never
asks for less than the model holds, pods are named ``{job}-{task}-{index}``, and
:func:`to_compact` gives a document the loader reads back to an equal workload.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pumice.api.parse import copy_tree
from pumice.api.quantity import CPU, MEMORY, render_resources
from pumice.sim.workload import (
    ANNOTATION_ARRIVAL,
    ANNOTATION_DURATION,
    ANNOTATION_END_FRACTION,
    ANNOTATION_GROUP_NAME,
    ANNOTATION_OUTCOME,
    ANNOTATION_QUEUE_NAME,
    ANNOTATION_TASK_SPEC,
    COSCHEDULING_API,
    COSCHEDULING_LABEL,
    K8S_PODGROUP_API,
    K8S_WORKLOAD_API,
    PODGROUP_API,
    PRIORITY_CLASS_API,
    QUEUE_API,
    SIM_IMAGE,
    VOLCANO_JOB_API,
    WORKLOAD_API,
    JobSpec,
    QueueSpec,
    TaskSpec,
    Workload,
)


def format_seconds(seconds: float) -> str:
    """Seconds as an annotation value: ``"90"`` or ``"12.5"``, exact (``repr``) for floats."""
    if float(seconds).is_integer():
        return str(int(seconds))
    return repr(float(seconds))


def min_resources(job: JobSpec) -> dict[str, float]:
    """PodGroup ``minResources``: the requests of the first ``min_available`` pods.

    Pods are taken in role order (the order of ``job.tasks``), as the simulator and the
    objects list them.
    """
    left = job.min_available
    total: dict[str, float] = {}
    for task in job.tasks:
        take = min(left, task.replicas)
        if take <= 0:
            break
        for name, amount in task.requests.items():
            total[name] = total.get(name, 0.0) + amount * take
        left -= take
    return total


def _sim_annotations(job: JobSpec) -> dict[str, str]:
    out = {
        ANNOTATION_ARRIVAL: format_seconds(job.arrival),
        ANNOTATION_DURATION: format_seconds(job.duration),
    }
    if job.outcome != "succeed":
        out[ANNOTATION_OUTCOME] = job.outcome
        out[ANNOTATION_END_FRACTION] = format_seconds(job.end_fraction)
    return out


def pod_name(job: JobSpec, task: TaskSpec, index: int) -> str:
    """The name of pod ``index`` of ``task``: ``{job}-{task}-{index}`` (for a Workload's
    pod group, ``{workload}-{podGroup}[-{replicaKey}]-{task}-{index}``)."""
    return f"{job.pod_prefix}-{task.name}-{index}"


def group_key(job: JobSpec) -> tuple[str, str]:
    """The kind and key the store keeps ``job``'s group object under (see
    :func:`pumice.cluster.protocol.store_kind`): the Workload's for a ``workload`` job,
    which every job of that Workload shares."""
    kind = {
        "volcano": "PodGroup",
        "coscheduling": "CoschedulingPodGroup",
        "podgroup": "WorkloadPodGroup",
        "workload": "Workload",
    }[job.dialect]
    return kind, f"{job.namespace}/{job.name}"


def workload_object(
    namespace: str, name: str, groups: Mapping[str, int], annotations: Mapping[str, str]
) -> dict[str, Any]:
    """A ``scheduling.k8s.io/v1alpha1`` Workload with ``groups`` (pod group -> minCount)
    as its ``spec.podGroups``, each a gang."""
    return {
        "apiVersion": K8S_WORKLOAD_API,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations)},
        "spec": {
            "podGroups": [
                {"name": g, "policy": {"gang": {"minCount": n}}} for g, n in groups.items()
            ]
        },
    }


def group_annotations(job: JobSpec) -> dict[str, str]:
    """The annotations of a group object of another dialect than Volcano's: the
    simulation's, and the queue (``scheduling.volcano.sh/queue-name``, which is how those
    dialects name a Volcano queue)."""
    return {**_sim_annotations(job), ANNOTATION_QUEUE_NAME: job.queue}


def group_object(job: JobSpec) -> dict[str, Any]:
    """The group object of a job of another dialect than Volcano's, in that dialect:
    ``job.group`` as read from a file, else rendered from the job's fields (a
    coscheduling PodGroup with ``minMember`` and ``minResources``, a v1alpha2 PodGroup or
    a Workload whose pod group is a gang of ``minCount`` ``min_available``)."""
    if job.group is not None:
        obj = copy_tree(dict(job.group))
        obj.pop("status", None)
        obj.setdefault("metadata", {})["namespace"] = job.namespace
        return obj
    annotations = group_annotations(job)
    meta = {"name": job.name, "namespace": job.namespace, "annotations": annotations}
    if job.dialect == "coscheduling":
        spec: dict[str, Any] = {
            "minMember": job.min_available,
            "minResources": render_resources(min_resources(job)),
        }
        return {"apiVersion": COSCHEDULING_API, "kind": "PodGroup", "metadata": meta,
                "spec": spec}  # fmt: skip
    if job.dialect == "podgroup":
        spec = {"schedulingPolicy": {"gang": {"minCount": job.min_available}}}
        return {"apiVersion": K8S_PODGROUP_API, "kind": "PodGroup", "metadata": meta,
                "spec": spec}  # fmt: skip
    if job.dialect == "workload":
        groups = {job.pod_group: job.min_available}
        return workload_object(job.namespace, job.name, groups, annotations)
    raise ValueError(f"a {job.dialect} job has no group object of another dialect")


def _join(job: JobSpec, meta: dict[str, Any], spec: dict[str, Any]) -> None:
    """Make a pod of ``job`` join its gang, in the job's dialect."""
    if job.dialect == "volcano":
        return  # (the group-name annotation, set with the others)
    if job.dialect == "coscheduling":
        meta["labels"] = {COSCHEDULING_LABEL: job.name}
    elif job.dialect == "podgroup":
        spec["schedulingGroup"] = {"podGroupName": job.name}
    else:
        ref = {"name": job.name, "podGroup": job.pod_group}
        if job.replica_key:
            ref["podGroupReplicaKey"] = job.replica_key
        spec["workloadRef"] = ref


def job_objects(
    job: JobSpec,
    *,
    scheduler_name: str = "volcano",
    priority_classes: Mapping[str, int] | None = None,
) -> list[dict[str, Any]]:
    """The PodGroup and Pods of ``job``, as a job controller would have created them.

    The PodGroup comes first, then the pods in role order; for a job of another dialect,
    its group object in that dialect (:func:`group_object`), and pods that join it as
    that dialect says (a label, ``spec.schedulingGroup``, ``spec.workloadRef``).
    Pods carry the group and task annotations, the simulation annotations, requests as
    quantity strings (extended resources such as GPUs also as limits, as Kubernetes
    requires) and phase ``Pending``.
    When ``priority_classes`` is given, pods also get ``spec.priority`` (the value an
    admission controller would have filled in).
    """
    annotations = _sim_annotations(job)
    if job.dialect != "volcano":
        return [group_object(job), *_pods(job, annotations, scheduler_name, priority_classes)]
    pg_spec: dict[str, Any] = {
        "minMember": job.min_available,
        "queue": job.queue,
        "minResources": render_resources(min_resources(job)),
    }
    task_min = {t.name: t.min_available for t in job.tasks if t.min_available is not None}
    if task_min:
        pg_spec["minTaskMember"] = task_min
    if job.priority_class:
        pg_spec["priorityClassName"] = job.priority_class
    if job.network_topology is not None:
        pg_spec["networkTopology"] = job.network_topology.to_object()
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": PODGROUP_API,
            "kind": "PodGroup",
            "metadata": {
                "name": job.name,
                "namespace": job.namespace,
                "annotations": dict(annotations),
            },
            "spec": pg_spec,
            "status": {"phase": "Pending"},
        }
    ]
    objects += _pods(job, annotations, scheduler_name, priority_classes)
    return objects


def _pods(
    job: JobSpec,
    annotations: Mapping[str, str],
    scheduler_name: str,
    priority_classes: Mapping[str, int] | None,
) -> list[dict[str, Any]]:
    """The pods of ``job`` (see :func:`job_objects`)."""
    objects: list[dict[str, Any]] = []
    group = {ANNOTATION_GROUP_NAME: job.name} if job.dialect == "volcano" else {}
    priority = None
    if job.priority_class and priority_classes is not None:
        priority = priority_classes.get(job.priority_class)
    for task in job.tasks:
        resources = _resources(task)
        for i in range(task.replicas):
            spec = _pod_spec(job, task, resources, scheduler_name, priority)
            meta: dict[str, Any] = {
                "name": pod_name(job, task, i),
                "namespace": job.namespace,
                "annotations": {**group, ANNOTATION_TASK_SPEC: task.name, **annotations},
            }
            _join(job, meta, spec)
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": meta,
                    "spec": spec,
                    "status": {"phase": "Pending"},
                }
            )
    return objects


def _resources(task: TaskSpec) -> dict[str, Any]:
    """A container's ``resources`` for ``task``: its requests as quantities, those
    beyond cpu and memory also as limits."""
    requests = render_resources(task.requests)
    limits = {k: v for k, v in requests.items() if k not in (CPU, MEMORY)}
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    return resources


def _pod_spec(
    job: JobSpec,
    task: TaskSpec,
    resources: Mapping[str, Mapping[str, str]],
    scheduler_name: str,
    priority: int | None,
) -> dict[str, Any]:
    """The ``spec`` of a pod of ``task`` before it joins its gang (a new one per pod:
    nothing in it is shared with ``resources`` or ``task``)."""
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": SIM_IMAGE,
                "resources": {k: dict(v) for k, v in resources.items()},
            }
        ],
    }
    if job.priority_class:
        spec["priorityClassName"] = job.priority_class
    if priority is not None:
        spec["priority"] = priority
    if task.volumes:
        spec["volumes"] = copy_tree(list(task.volumes))
    if task.resource_claims:
        spec["resourceClaims"] = copy_tree(list(task.resource_claims))
    return spec


#: The policies a job of the PodGroup model becomes a Volcano Job with: what that
#: model does (an eviction restarts the whole job; a failed pod is left failed and the
#: job fails once all its pods ended).
MODEL_POLICIES = ({"event": "PodEvicted", "action": "RestartJob"},)
#: The model restarts a job as often as it is evicted.
MODEL_MAX_RETRY = 2**31 - 1


def volcano_job(job: JobSpec, *, scheduler_name: str = "volcano") -> dict[str, Any]:
    """``job`` as a ``batch.volcano.sh/v1alpha1`` Job: one task per role with the pods
    :func:`job_objects` renders (as templates), the same ``minAvailable`` (and per-task
    minimums), queue and priority class, and the policies of the PodGroup model
    (:data:`MODEL_POLICIES`), with the simulation annotations."""
    # (a template per task: the spec :func:`job_objects` gives the first pod of the
    # first task of that name, without rendering the others)
    first: dict[str, dict[str, Any]] = {}
    for task in job.tasks:
        if task.replicas > 0 and task.name not in first:
            template = _pod_spec(job, task, _resources(task), scheduler_name, None)
            _join(job, {}, template)
            first[task.name] = template
    tasks = []
    for task in job.tasks:
        tspec: dict[str, Any] = {
            "name": task.name,
            "replicas": task.replicas,
            "template": {"spec": first[task.name]},
        }
        if task.min_available is not None:
            tspec["minAvailable"] = task.min_available
        tasks.append(tspec)
    spec: dict[str, Any] = {
        "minAvailable": job.min_available,
        "schedulerName": scheduler_name,
        "queue": job.queue,
        "maxRetry": MODEL_MAX_RETRY,
        "policies": [dict(p) for p in MODEL_POLICIES],
        "tasks": tasks,
    }
    if job.priority_class:
        spec["priorityClassName"] = job.priority_class
    if job.network_topology is not None:
        spec["networkTopology"] = job.network_topology.to_object()
    return {
        "apiVersion": VOLCANO_JOB_API,
        "kind": "Job",
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "annotations": _sim_annotations(job),
        },
        "spec": spec,
    }


def queue_objects(queues: Iterable[QueueSpec]) -> list[dict[str, Any]]:
    """Volcano ``Queue`` objects (state ``Open``), in the order given."""
    out: list[dict[str, Any]] = []
    for q in queues:
        spec: dict[str, Any] = {"weight": q.weight, "reclaimable": q.reclaimable}
        if q.capability is not None:
            spec["capability"] = render_resources(q.capability)
        if q.guarantee is not None:
            spec["guarantee"] = {"resource": render_resources(q.guarantee)}
        if q.deserved is not None:
            spec["deserved"] = render_resources(q.deserved)
        if q.parent is not None:
            spec["parent"] = q.parent
        out.append(
            {
                "apiVersion": QUEUE_API,
                "kind": "Queue",
                "metadata": {"name": q.name},
                "spec": spec,
                "status": {"state": "Open"},
            }
        )
    return out


def priority_class_objects(priority_classes: Mapping[str, int]) -> list[dict[str, Any]]:
    """``PriorityClass`` objects, sorted by name."""
    return [
        {
            "apiVersion": PRIORITY_CLASS_API,
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": int(priority_classes[name]),
            "globalDefault": False,
        }
        for name in sorted(priority_classes)
    ]


def workload_objects(workload: Workload, *, scheduler_name: str = "volcano") -> list[dict]:
    """Every object of ``workload``: priority classes, queues, then each job's objects."""
    objects = priority_class_objects(workload.priority_classes)
    objects += queue_objects(workload.queues)
    for job in workload.jobs:
        objects += job_objects(
            job, scheduler_name=scheduler_name, priority_classes=workload.priority_classes
        )
    return objects


def to_compact(workload: Workload) -> dict[str, Any]:
    """``workload`` as a compact ``kind: Workload`` document that
    :func:`~pumice.sim.loader.load_workload` reads back to an equal workload (apart from
    ``skipped`` and ``warnings``)."""

    def resources(m: Mapping[str, float]) -> dict[str, str]:
        return render_resources(m)

    queues = []
    for q in workload.queues:
        d: dict[str, Any] = {"name": q.name, "weight": q.weight}
        for key, value in (
            ("capability", q.capability),
            ("guarantee", q.guarantee),
            ("deserved", q.deserved),
        ):
            if value is not None:
                d[key] = resources(value)
        if not q.reclaimable:
            d["reclaimable"] = False
        if q.parent is not None:
            d["parent"] = q.parent
        queues.append(d)
    jobs = []
    for j in workload.jobs:
        tasks = []
        for t in j.tasks:
            td: dict[str, Any] = {
                "name": t.name,
                "replicas": t.replicas,
                "requests": resources(t.requests),
            }
            if t.min_available is not None:
                td["minAvailable"] = t.min_available
            tasks.append(td)
        jd: dict[str, Any] = {
            "name": j.name,
            "namespace": j.namespace,
            "queue": j.queue,
            "arrival": j.arrival,
            "duration": j.duration,
            "minAvailable": j.min_available,
            "tasks": tasks,
        }
        if j.priority_class is not None:
            jd["priorityClass"] = j.priority_class
        if j.outcome != "succeed":
            jd["outcome"] = j.outcome
            jd["endFraction"] = j.end_fraction
        if j.network_topology is not None:
            jd["networkTopology"] = j.network_topology.to_object()
        if j.dialect != "volcano":
            jd["dialect"] = j.dialect
        if j.pod_group:
            jd["podGroup"] = j.pod_group
        if j.replica_key:
            jd["replicaKey"] = j.replica_key
        jobs.append(jd)
    return {
        "apiVersion": WORKLOAD_API,
        "kind": "Workload",
        "priorityClasses": dict(workload.priority_classes),
        "queues": queues,
        "jobs": jobs,
    }
