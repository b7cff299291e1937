"""A :class:`~pumice.sim.workload.Workload` assembled from what its files declare.

Once every file is read (:class:`~pumice.sim.workload_declarations.Declarations`), the
references between objects can be checked: each PodGroup, Kubernetes Workload and pod of
its own becomes a job with the pods that name it (a gang no pod names, or a pod naming a
gang no file declares, is refused); compact jobs of one Kubernetes Workload share one
rendered object; two jobs whose pods would have the same names are refused; every claim,
device claim, queue, parent queue and priority class a job names must be declared.
:func:`assemble_workload` is all or nothing: the first problem raises
:class:`~pumice.errors.InputError` naming the file, the object and the field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

from pumice.api import gang_apis
from pumice.errors import InputError, shown
from pumice.sim.fields import require_str
from pumice.sim.manifest_jobs import (
    GANG_OBJECT,
    JOIN,
    JOIN_FIELD,
    dialect_job,
    podgroup_dialect,
    podgroup_job,
    single_pod_job,
)
from pumice.sim.objects import group_annotations, workload_object
from pumice.sim.pod_manifests import GangKey, Pod
from pumice.sim.workload import (
    ANNOTATION_QUEUE_NAME,
    DEFAULT_QUEUE,
    Dialect,
    QueueSpec,
    Workload,
    sort_jobs,
)
from pumice.sim.workload_declarations import Declarations, Origin
from pumice.sim.workload_fields import object_metadata, object_namespace


def _check_claims(decl: Declarations) -> None:
    """Every claim a job mounts by name is declared by some file (else the job would
    wait for it for ever)."""
    from pumice.sim.storage import mounted_claims

    for key, job in decl.jobs.items():
        for name in mounted_claims(job):
            if f"{job.namespace}/{name}" not in decl.claims:
                origin = decl.job_origin[key]
                raise InputError(
                    f"its pods mount persistentvolumeclaim {name}, which no file "
                    "declares (add the PersistentVolumeClaim to the workload)",
                    file=origin.file,
                    obj=origin.obj,
                    field="spec.volumes",
                )


def _check_device_claims(decl: Declarations) -> None:
    """Every ResourceClaim and ResourceClaimTemplate a job's pods name is declared by
    some file (else its pods would wait for it for ever)."""
    from pumice.sim.devices import claim_refs

    for key, job in decl.jobs.items():
        for kind, name in claim_refs(job):
            if (kind, f"{job.namespace}/{name}") not in decl.device_claims:
                origin = decl.job_origin[key]
                field = "resourceClaimName" if kind == "ResourceClaim" else (
                    "resourceClaimTemplateName")  # fmt: skip
                raise InputError(
                    f"its pods need {kind} {name}, which no file declares (add the "
                    f"{kind} to the workload)",
                    file=origin.file,
                    obj=origin.obj,
                    field=f"spec.resourceClaims[].{field}",
                )


def _build_manifest_jobs(decl: Declarations) -> None:
    groups: dict[tuple[str, GangKey], list[Pod]] = {}
    singles: list[Pod] = []
    for pod in decl.pods:
        if pod.ref is not None:
            groups.setdefault((pod.namespace, pod.ref), []).append(pod)
        else:
            singles.append(pod)
    seen: set[tuple[str, str, str]] = set()
    for file, obj in decl.podgroups:
        meta = object_metadata(obj, file, "PodGroup")
        name = require_str(meta.get("name"), field="metadata.name")
        namespace = object_namespace(meta, file, "PodGroup", name)
        try:
            dialect: Dialect = podgroup_dialect(obj)
        except InputError as exc:
            decl.warn(f"{file}: skipped PodGroup {namespace}/{name}: {exc.message}")
            continue
        where = f"PodGroup {namespace}/{name}"
        if dialect != "volcano":
            where += f" ({obj.get('apiVersion')})"
        queue_field = "spec.queue"
        if dialect != "volcano":
            queue_field = f"metadata.annotations[{ANNOTATION_QUEUE_NAME}]"
        origin = Origin(file, where, "", queue_field, "spec.priorityClassName")
        if (dialect, namespace, name) in seen:
            raise origin.error(f"duplicate PodGroup {namespace}/{name}", "metadata.name")
        seen.add((dialect, namespace, name))
        pods = groups.pop((namespace, (dialect, name, "", "")), [])
        if not pods:
            raise origin.error(f"no pod names this PodGroup ({JOIN[dialect]})", "metadata.name")
        try:
            if dialect == "volcano":
                job = podgroup_job(obj, name, namespace, pods)
            else:
                job = dialect_job(obj, dialect, name, namespace, pods)
        except InputError as exc:
            raise exc.located(file=file, obj=where) from None
        decl.add_job(job, origin)
    _build_workload_jobs(decl, groups)
    for (namespace, ref), pods in sorted(groups.items()):
        pod = pods[0]
        via, group = ref[0], ref[1]
        raise InputError(
            f"{JOIN[via]} names {GANG_OBJECT[via]} {group}, which no file declares",
            file=pod.file,
            obj=f"Pod {namespace}/{pod.name}",
            field=JOIN_FIELD[via],
        )
    for pod in singles:
        where = f"Pod {pod.namespace}/{pod.name}"
        try:
            job = single_pod_job(pod)
        except InputError as exc:
            raise exc.located(file=pod.file, obj=where) from None
        queue_field = f"metadata.annotations[{ANNOTATION_QUEUE_NAME}]"
        decl.add_job(job, Origin(pod.file, where, "", queue_field, "spec.priorityClassName"))


def _build_workload_jobs(decl: Declarations, groups: dict[tuple[str, GangKey], list[Pod]]) -> None:
    """The gangs of Kubernetes' Workloads: one job per pod group and replica key
    its pods name (taken out of ``groups``)."""
    seen: set[tuple[str, str]] = set()
    for file, obj in decl.workloads:
        meta = object_metadata(obj, file, "Workload")
        name = require_str(meta.get("name"), field="metadata.name")
        namespace = object_namespace(meta, file, "Workload", name)
        where = f"Workload {namespace}/{name} ({obj.get('apiVersion')})"
        try:
            record = gang_apis.parse_workload(obj)
        except InputError as exc:
            raise exc.located(file=file, obj=where) from None
        queue_field = f"metadata.annotations[{ANNOTATION_QUEUE_NAME}]"
        origin = Origin(file, where, "", queue_field, "spec.priorityClassName")
        if (namespace, name) in seen:
            raise origin.error(f"duplicate Workload {namespace}/{name}", "metadata.name")
        seen.add((namespace, name))
        if record.version != "v1alpha1":
            decl.warn(
                f"{file}: skipped Workload {namespace}/{name} ({record.version}): its "
                "PodGroups are the gangs, not it"
            )
            continue
        mine = sorted(
            (ref, pods)
            for (ns, ref), pods in groups.items()
            if ns == namespace and ref[0] == "workload" and ref[1] == name
        )
        if not mine:
            raise origin.error(f"no pod names this Workload ({JOIN['workload']})", "metadata.name")
        for ref, pods in mine:
            if ref[2] not in record.groups:
                pod = pods[0]
                raise InputError(
                    f"Workload {namespace}/{name} has no pod group {shown(ref[2])} (it has "
                    f"{', '.join(sorted(record.groups))})",
                    file=pod.file,
                    obj=f"Pod {namespace}/{pod.name}",
                    field="spec.workloadRef.podGroup",
                )
            del groups[(namespace, ref)]
            try:
                job = dialect_job(
                    obj, "workload", name, namespace, pods, record.groups[ref[2]], ref
                )
            except InputError as exc:
                raise exc.located(file=file, obj=where) from None
            decl.add_job(job, origin)


def _group_compact_workloads(decl: Declarations) -> None:
    """Compact jobs of dialect ``workload`` of one name are pod groups (or replicas)
    of one Workload: render it once, with all of them, for each to carry."""
    by_name: dict[tuple[str, str], list[tuple[str, str]]] = {}
    manifests = {
        (j.namespace, j.name)
        for j in decl.jobs.values()
        if j.dialect == "workload" and j.group is not None
    }
    for key, job in decl.jobs.items():
        if job.dialect == "workload" and job.group is None:
            by_name.setdefault((job.namespace, job.name), []).append(key)
    for (namespace, name), keys in sorted(by_name.items()):
        origin = decl.job_origin[keys[0]]
        if (namespace, name) in manifests:
            raise origin.error(
                f"a file declares Workload {namespace}/{name} as a manifest too", "name"
            )
        counts: dict[str, int] = {}
        for key in keys:
            job = decl.jobs[key]
            known = counts.setdefault(job.pod_group, job.min_available)
            if known != job.min_available:
                raise decl.job_origin[key].error(
                    f"pod group {shown(job.pod_group)} of Workload {namespace}/{name} has "
                    f"minAvailable {known} in another job",
                    "minAvailable",
                )
        first = decl.jobs[keys[0]]
        obj = workload_object(namespace, name, counts, group_annotations(first))
        for key in keys:
            decl.jobs[key] = dataclasses.replace(decl.jobs[key], group=obj)


def _check_pod_names(decl: Declarations) -> None:
    """Jobs whose pods would have the same names (``{job}-{task}-{i}``) in one
    namespace cannot both run: a Volcano PodGroup and a coscheduling PodGroup of one
    name, say."""
    prefixes: dict[tuple[str, str], str] = {}
    for key, job in decl.jobs.items():
        other = prefixes.setdefault((job.namespace, job.pod_prefix), job.uid)
        if other != job.uid:
            raise decl.job_origin[key].error(
                f"the pods of jobs {other} and {job.uid} would have the same names "
                f"({job.pod_prefix}-<task>-<i>); rename one of them",
                "name" if decl.job_origin[key].field_prefix else "metadata.name",
            )


def assemble_workload(
    decl: Declarations, known_queues: Collection[str], known_priority_classes: Mapping[str, int]
) -> Workload:
    """The workload ``decl`` declares, once every file is read: gangs paired with
    their pods into jobs, then every reference checked: pod names, claims, device
    claims, queues (or ``known_queues``; Volcano's ``default`` queue is added when a
    job uses it), parent queues and priority classes (or ``known_priority_classes``).
    Raises :class:`~pumice.errors.InputError` at the first problem, naming where the
    object was declared; an empty workload is refused too."""
    _build_manifest_jobs(decl)
    _group_compact_workloads(decl)
    _check_pod_names(decl)
    _check_claims(decl)
    _check_device_claims(decl)
    queue_names = set(decl.queues) | set(known_queues)
    if DEFAULT_QUEUE not in queue_names and any(
        job.queue == DEFAULT_QUEUE for job in decl.jobs.values()
    ):
        # Volcano's scheduler creates this queue on every cluster; it is added only
        # when a job uses it, since an idle queue of weight 1 changes nothing but a
        # queue with demand does take its part of the cluster under proportion.
        decl.queues[DEFAULT_QUEUE] = QueueSpec(name=DEFAULT_QUEUE)
        queue_names.add(DEFAULT_QUEUE)
    for key, job in decl.jobs.items():
        origin = decl.job_origin[key]
        if job.queue not in queue_names:
            raise origin.error(
                f"queue {shown(job.queue)} is not declared by any file "
                "(add it under queues: or as a Queue object)",
                origin.queue_field,
            )
        if (
            job.priority_class is not None
            and job.priority_class not in decl.priority_classes
            and job.priority_class not in known_priority_classes
        ):
            raise origin.error(
                f"priority class {shown(job.priority_class)} is not declared by any file",
                origin.pc_field,
            )
    for name, queue in decl.queues.items():
        if queue.parent is not None and queue.parent not in queue_names:
            raise decl.queue_origin[name].error(
                f"parent queue {shown(queue.parent)} is not declared by any file", "parent"
            )
    if not decl.jobs:
        first = f" (first: {decl.warnings[0]})" if decl.warnings else ""
        raise InputError(
            f"holds no jobs: {decl.skipped} object(s) skipped{first}"
            if decl.skipped
            else "holds no jobs: no PodGroup, pod, Volcano Job or compact jobs: list"
        )
    pcs = dict(known_priority_classes)
    pcs.update(decl.priority_classes)
    return Workload(
        jobs=sort_jobs(decl.jobs.values()),
        queues=tuple(decl.queues.values()),
        priority_classes=pcs,
        skipped=decl.skipped,
        warnings=tuple(decl.warnings),
        claims=tuple(decl.claims[k] for k in sorted(decl.claims)),
        device_claims=tuple(decl.device_claims[k] for k in sorted(decl.device_claims)),
    )
