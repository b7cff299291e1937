"""The job each gang of a workload's manifests makes: its object and the pods that name it.

A Volcano PodGroup, a ``batch.volcano.sh`` Job, a gang of another dialect (a coscheduling
or v1alpha2 PodGroup, one pod group of a v1alpha1 Workload) or a pod of its own each make
one :class:`~pumice.sim.workload.JobSpec`: tasks from the pods' roles (all pods of a role
alike), the gang's minimum, queue and priority class as the scheduler reads them, and the
simulated arrival, duration and outcome from the ``pumice.sim/*`` annotations (the
object's, or its pods' when they agree). A gang object of another dialect, or a Volcano
Job, is kept to be created as written. Every function raises
:class:`~pumice.errors.InputError` naming the field; the caller adds the file and the
object. :data:`JOIN`, :data:`JOIN_FIELD` and :data:`GANG_OBJECT` say how a pod joins a
gang of each dialect, for the messages of whoever pairs pods with gangs.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from pumice.api import gang_apis
from pumice.api.quantity import render_resources
from pumice.api.topology_spec import parse_network_topology
from pumice.errors import InputError, shown
from pumice.sim.fields import parse_seconds, require_int
from pumice.sim.pod_manifests import GangKey, Pod, pod_requests, pod_resource_claims
from pumice.sim.workload import (
    ANNOTATION_ARRIVAL,
    ANNOTATION_DURATION,
    ANNOTATION_END_FRACTION,
    ANNOTATION_GROUP_NAME,
    ANNOTATION_OUTCOME,
    ANNOTATION_QUEUE_NAME,
    ANNOTATION_TASK_SPEC,
    COSCHEDULING_LABEL,
    DEFAULT_QUEUE,
    Dialect,
    JobSpec,
    Outcome,
    TaskSpec,
)
from pumice.sim.workload_fields import optional_str, parse_end_fraction, parse_outcome


def _sim_facts(
    annotations: Mapping[str, Any], pods: Sequence[Pod], *, prefix: str
) -> tuple[float, float, Outcome, float]:
    """Arrival, duration, outcome and end fraction from ``annotations``, falling back to the
    pods' own annotations (which must then agree)."""

    def lookup(key: str) -> tuple[object, str] | None:
        if key in annotations:
            return annotations[key], f"{prefix}[{key}]"
        values = {str(p.annotations[key]) for p in pods if key in p.annotations}
        if not values:
            return None
        if len(values) > 1:
            raise InputError(
                f"pods disagree on {key} ({', '.join(sorted(values))}); set it on the PodGroup",
                field=f"{prefix}[{key}]",
            )
        return values.pop(), f"pod metadata.annotations[{key}]"

    arrival = 0.0
    found = lookup(ANNOTATION_ARRIVAL)
    if found is not None:
        arrival = parse_seconds(found[0], field=found[1])
    found = lookup(ANNOTATION_DURATION)
    if found is None:
        raise InputError(
            f"missing annotation {ANNOTATION_DURATION}", field=f"{prefix}[{ANNOTATION_DURATION}]"
        )
    duration = parse_seconds(found[0], field=found[1])
    outcome: Outcome = "succeed"
    found = lookup(ANNOTATION_OUTCOME)
    if found is not None:
        outcome = parse_outcome(found[0], field=found[1])
    end_fraction = 1.0
    found = lookup(ANNOTATION_END_FRACTION)
    if found is not None:
        end_fraction = parse_end_fraction(found[0], outcome, field=found[1])
    return arrival, duration, outcome, end_fraction


def _tasks_from_pods(pods: Sequence[Pod]) -> tuple[TaskSpec, ...]:
    order: list[str] = []
    shapes: dict[str, dict[str, float]] = {}
    counts: dict[str, int] = {}
    volumes: dict[str, tuple[Mapping[str, Any], ...]] = {}
    devices: dict[str, tuple[Mapping[str, Any], ...]] = {}
    for pod in pods:
        if pod.task not in shapes:
            order.append(pod.task)
            shapes[pod.task] = pod.requests
            volumes[pod.task] = pod.volumes
            devices[pod.task] = pod.resource_claims
            counts[pod.task] = 0
        elif volumes[pod.task] != pod.volumes:
            raise InputError(
                f"pod {pod.namespace}/{pod.name} attaches other claims than the other pods "
                f"of task {shown(pod.task)}; give each its own {ANNOTATION_TASK_SPEC}",
                field="spec.volumes",
            )
        elif devices[pod.task] != pod.resource_claims:
            raise InputError(
                f"pod {pod.namespace}/{pod.name} needs other ResourceClaims than the other "
                f"pods of task {shown(pod.task)}; give each its own {ANNOTATION_TASK_SPEC}",
                field="spec.resourceClaims",
            )
        elif shapes[pod.task] != pod.requests:
            raise InputError(
                f"pod {pod.namespace}/{pod.name} requests {render_resources(pod.requests)} "
                f"but other pods of task {shown(pod.task)} request "
                f"{render_resources(shapes[pod.task])}; give each shape its own "
                f"{ANNOTATION_TASK_SPEC}",
                field="spec.containers",
            )
        counts[pod.task] += 1
    return tuple(
        TaskSpec(
            name=t,
            replicas=counts[t],
            requests=shapes[t],
            volumes=volumes[t],
            resource_claims=devices[t],
        )
        for t in order
    )


def podgroup_job(obj: Mapping[str, Any], name: str, namespace: str, pods: Sequence[Pod]) -> JobSpec:
    """A Volcano PodGroup's job: its tasks from ``pods`` (the pods that name it), its
    ``minMember`` and ``minTaskMember`` checked against them."""
    meta = obj["metadata"]
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, Mapping):
        raise InputError("expected a map", field="metadata.annotations")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InputError("expected a map", field="spec")
    tasks = _tasks_from_pods(pods)
    total = sum(t.replicas for t in tasks)
    min_member = require_int(spec.get("minMember", 1), field="spec.minMember", minimum=1)
    if min_member > total:
        raise InputError(
            f"minMember {min_member} is greater than the job's {total} pods",
            field="spec.minMember",
        )
    task_min = spec.get("minTaskMember") or {}
    if not isinstance(task_min, Mapping):
        raise InputError("expected a map", field="spec.minTaskMember")
    by_name = {t.name: t for t in tasks}
    for task_name, value in task_min.items():
        f = f"spec.minTaskMember.{task_name}"
        if task_name not in by_name:
            raise InputError(f"no pod has {ANNOTATION_TASK_SPEC}: {task_name}", field=f)
        m = require_int(value, field=f, minimum=0)
        if m > by_name[task_name].replicas:
            raise InputError(
                f"{m} is greater than the task's {by_name[task_name].replicas} pods", field=f
            )
        by_name[task_name] = dataclasses.replace(by_name[task_name], min_available=m)
    arrival, duration, outcome, end_fraction = _sim_facts(
        annotations, pods, prefix="metadata.annotations"
    )
    return JobSpec(
        name=name,
        namespace=namespace,
        queue=optional_str(spec.get("queue"), field="spec.queue") or DEFAULT_QUEUE,
        arrival=arrival,
        duration=duration,
        tasks=tuple(by_name[t.name] for t in tasks),
        min_available=min_member,
        priority_class=optional_str(spec.get("priorityClassName"), field="spec.priorityClassName"),
        outcome=outcome,
        end_fraction=end_fraction,
        network_topology=parse_network_topology(
            spec.get("networkTopology"), "spec.networkTopology"
        ),
    )


def volcano_job(obj: Mapping[str, Any], name: str, namespace: str) -> JobSpec:
    """A ``batch.volcano.sh`` Job as the simulator replays it: the manifest is kept for
    the job controller; the tasks' requests and the ``pumice.sim/*`` annotations (on the
    Job, or per task on its pod template, which wins) say what its pods ask for and how
    long they run. Refused here, as on a cluster by Volcano's webhook, when the webhook
    would refuse it (the queue is checked with the others, when the workload is built)."""
    from pumice.controllers.job.spec import parse_job
    from pumice.controllers.job.validate import problems

    manifest = copy.deepcopy(dict(obj))
    manifest.pop("status", None)
    meta = manifest.setdefault("metadata", {})
    meta["namespace"] = namespace
    for k in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        meta.pop(k, None)
    parsed = parse_job(manifest, default_queue=DEFAULT_QUEUE)
    found = problems(parsed, lambda _queue: "Open")
    if found:
        raise InputError("Volcano would refuse this Job: " + "; ".join(found), field="spec")
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, Mapping):
        raise InputError("expected a map", field="metadata.annotations")
    tasks: list[TaskSpec] = []
    durations: list[float] = []
    for i, t in enumerate(parsed.tasks):
        f = f"spec.tasks[{i}].template"
        tmeta = t.template.get("metadata") or {}
        tann = tmeta.get("annotations") or {}
        if not isinstance(tann, Mapping):
            raise InputError("expected a map", field=f"{f}.metadata.annotations")
        try:
            requests = pod_requests(t.template.get("spec") or {})
        except InputError as exc:
            raise InputError(exc.message, field=f"{f}.{exc.field}" if exc.field else f) from None
        duration = outcome = end_fraction = None
        if ANNOTATION_DURATION in tann:
            duration = parse_seconds(
                tann[ANNOTATION_DURATION], field=f"{f}.metadata.annotations[{ANNOTATION_DURATION}]"
            )
            durations.append(duration)
        if ANNOTATION_OUTCOME in tann:
            outcome = parse_outcome(
                tann[ANNOTATION_OUTCOME], field=f"{f}.metadata.annotations[{ANNOTATION_OUTCOME}]"
            )
        if ANNOTATION_END_FRACTION in tann:
            end_fraction = parse_end_fraction(
                tann[ANNOTATION_END_FRACTION],
                outcome or "fail",
                field=f"{f}.metadata.annotations[{ANNOTATION_END_FRACTION}]",
            )
        given = t.min_available_given
        try:
            claims = pod_resource_claims(t.template.get("spec") or {}, namespace)
        except InputError as exc:
            raise InputError(exc.message, field=f"{f}.{exc.field}" if exc.field else f) from None
        tasks.append(TaskSpec(t.name, t.replicas, requests, given, duration, outcome, end_fraction,
                              resource_claims=claims))  # fmt: skip
    facts = dict(annotations)
    if ANNOTATION_DURATION not in facts and len(durations) == len(tasks) and tasks:
        facts[ANNOTATION_DURATION] = str(max(durations))  # every task says its own
    arrival, duration, outcome, end_fraction = _sim_facts(facts, (), prefix="metadata.annotations")
    if not tasks or parsed.total_replicas < 1:
        raise InputError("the Job has no pods", field="spec.tasks")
    return JobSpec(
        name=name,
        namespace=namespace,
        queue=parsed.queue,
        arrival=arrival,
        duration=duration,
        tasks=tuple(tasks),
        min_available=max(1, min(parsed.min_available, parsed.total_replicas)),
        priority_class=parsed.priority_class or None,
        outcome=outcome,
        end_fraction=end_fraction,
        manifest=manifest,
        network_topology=parse_network_topology(
            (manifest.get("spec") or {}).get("networkTopology"), "spec.networkTopology"
        ),
    )


def single_pod_job(pod: Pod) -> JobSpec:
    """A pod that names no gang: a job of one pod, in its own role."""
    arrival, duration, outcome, end_fraction = _sim_facts(
        pod.annotations, (), prefix="metadata.annotations"
    )
    return JobSpec(
        name=pod.name,
        namespace=pod.namespace,
        queue=pod.queue or DEFAULT_QUEUE,
        arrival=arrival,
        duration=duration,
        tasks=(
            TaskSpec(
                name=pod.task,
                replicas=1,
                requests=pod.requests,
                volumes=pod.volumes,
                resource_claims=pod.resource_claims,
            ),
        ),
        min_available=1,
        priority_class=pod.priority_class,
        outcome=outcome,
        end_fraction=end_fraction,
    )


# --------------------------------------------------------------------------- other dialects

#: How a pod joins a gang of each dialect, for messages.
JOIN = {
    "volcano": f"annotation {ANNOTATION_GROUP_NAME}",
    "coscheduling": f"label {COSCHEDULING_LABEL}",
    "workload": "spec.workloadRef",
    "podgroup": "spec.schedulingGroup.podGroupName",
}
JOIN_FIELD = {
    "volcano": f"metadata.annotations[{ANNOTATION_GROUP_NAME}]",
    "coscheduling": f"metadata.labels[{COSCHEDULING_LABEL}]",
    "workload": "spec.workloadRef.name",
    "podgroup": "spec.schedulingGroup.podGroupName",
}
GANG_OBJECT = {
    "volcano": "PodGroup",
    "coscheduling": "PodGroup (scheduling.x-k8s.io)",
    "workload": "Workload",
    "podgroup": "PodGroup (scheduling.k8s.io/v1alpha2)",
}


def podgroup_dialect(obj: Mapping[str, Any]) -> Dialect:
    """A ``kind: PodGroup``'s dialect, by its ``apiVersion`` (none: Volcano's)."""
    if obj.get("apiVersion") is None:
        return "volcano"
    dialect = gang_apis.podgroup_dialect(obj)
    return "podgroup" if dialect == "workload" else dialect  # type: ignore[return-value]


def _pods_priority_class(pods: Sequence[Pod]) -> str | None:
    """The priority class of a gang of another dialect: its pods' (which must agree)."""
    classes = {p.priority_class for p in pods}
    if len(classes) > 1:
        names = ", ".join(sorted(c or "(none)" for c in classes))
        raise InputError(
            f"its pods name different priority classes ({names}); the simulator gives a gang one",
            field="spec.priorityClassName",
        )
    return classes.pop()


def dialect_job(
    obj: Mapping[str, Any],
    dialect: Dialect,
    name: str,
    namespace: str,
    pods: Sequence[Pod],
    min_count: int | None = None,
    ref: GangKey | None = None,
) -> JobSpec:
    """A gang of another dialect than Volcano's: a coscheduling or v1alpha2 PodGroup, or
    one pod group (and replica key, ``ref``) of a v1alpha1 Workload whose ``minCount``
    is ``min_count`` (None: ``basic``). The object is kept to be created as it is; what
    the job model needs of it is read as the scheduler reads it."""
    meta = obj["metadata"]
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, Mapping):
        raise InputError("expected a map", field="metadata.annotations")
    tasks = _tasks_from_pods(pods)
    total = sum(t.replicas for t in tasks)
    if dialect == "workload":
        min_member = 1 if min_count is None else min_count
        field = "spec.podGroups.policy.gang.minCount"
        queue = annotations.get(ANNOTATION_QUEUE_NAME)
    else:
        record = gang_apis.parse_any_podgroup(obj, DEFAULT_QUEUE)
        # (a coscheduling PodGroup without minMember has 0: no gang, as 1 here)
        min_member, queue = max(1, record.min_member), record.queue
        field = "spec.minMember" if dialect == "coscheduling" else "spec.schedulingPolicy"
    if min_member > total:
        raise InputError(
            f"its gang needs {min_member} pods, more than the {total} that name it",
            field=field,
        )
    arrival, duration, outcome, end_fraction = _sim_facts(
        annotations, pods, prefix="metadata.annotations"
    )
    group = copy.deepcopy(dict(obj))
    group.pop("status", None)
    group["metadata"] = {
        k: v
        for k, v in group["metadata"].items()
        if k not in ("uid", "resourceVersion", "creationTimestamp", "generation")
    }
    group["metadata"]["namespace"] = namespace
    return JobSpec(
        name=name,
        namespace=namespace,
        queue=optional_str(queue, field=f"metadata.annotations[{ANNOTATION_QUEUE_NAME}]")
        or DEFAULT_QUEUE,
        arrival=arrival,
        duration=duration,
        tasks=tasks,
        min_available=min_member,
        priority_class=_pods_priority_class(pods),
        outcome=outcome,
        end_fraction=end_fraction,
        dialect=dialect,
        group=group,
        pod_group=ref[2] if ref is not None else "",
        replica_key=ref[3] if ref is not None else "",
    )
