"""What a workload's files declare, collected object by object (:class:`Declarations`).

:meth:`Declarations.add` takes one object of a file and files it by kind: a compact
``kind: Workload`` document's queues, priority classes and jobs, Queues, PriorityClasses,
Volcano Jobs, PersistentVolumeClaims, ResourceClaims and their templates are read and
checked at once; PodGroups, Kubernetes' Workloads and Pods are kept until every file is
read, since a gang's pods may come before it or in another file. An object that is not
part of a workload is skipped, counted and kept as a warning. Each object is checked on
its own here, raising :class:`~pumice.errors.InputError` naming the object and field;
what refers to other objects (queues, priority classes, claims, gangs and their pods) is
checked by :mod:`pumice.sim.workload_assembly`. :class:`Origin` remembers where each job,
queue and priority class was declared, for those later messages.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pumice.api import gang_apis
from pumice.api.dra import parse_resource_claim, parse_resource_claim_template
from pumice.api.limits import MAX_JOB_PODS
from pumice.api.volumes import parse_pvc
from pumice.errors import InputError, shown, shown_text
from pumice.sim.compact_workload import WORKLOAD_KEYS, compact_job, compact_queue
from pumice.sim.fields import check_keys, is_dns_label, parse_resources, require_int, require_str
from pumice.sim.manifest_jobs import volcano_job
from pumice.sim.pod_manifests import (
    Pod,
    pod_claim_volumes,
    pod_ref,
    pod_requests,
    pod_resource_claims,
)
from pumice.sim.workload import (
    ANNOTATION_QUEUE_NAME,
    ANNOTATION_TASK_NAME,
    ANNOTATION_TASK_SPEC,
    DEFAULT_NAMESPACE,
    DEFAULT_TASK,
    WORKLOAD_API,
    JobOrigin,
    JobSpec,
    QueueSpec,
)
from pumice.sim.workload_fields import (
    object_metadata,
    object_namespace,
    optional_resources,
    optional_str,
    require_bool,
)

#: The DRA objects a workload may hold, and their parsers.
_DEVICE_CLAIM_PARSERS = {
    "ResourceClaim": parse_resource_claim,
    "ResourceClaimTemplate": parse_resource_claim_template,
}


@dataclass(slots=True)
class Origin:
    """Where a job, queue or priority class was declared, for error messages."""

    file: str
    obj: str
    field_prefix: str = ""
    queue_field: str = "queue"
    pc_field: str = "priorityClass"

    def error(self, message: str, field: str) -> InputError:
        return InputError(message, file=self.file, obj=self.obj, field=self.field_prefix + field)


@dataclass(slots=True)
class Declarations:
    """What the files declare, collected object by object and checked one at a time
    (what refers to other objects is checked when the workload is assembled, see
    :func:`pumice.sim.workload_assembly.assemble_workload`)."""

    #: (namespace, job uid) -> job.
    jobs: dict[tuple[str, str], JobSpec] = field(default_factory=dict)
    job_origin: dict[tuple[str, str], Origin] = field(default_factory=dict)
    queues: dict[str, QueueSpec] = field(default_factory=dict)
    queue_origin: dict[str, Origin] = field(default_factory=dict)
    priority_classes: dict[str, int] = field(default_factory=dict)
    pc_origin: dict[str, Origin] = field(default_factory=dict)
    podgroups: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    #: Kubernetes' Workloads (``scheduling.k8s.io``), not the compact form.
    workloads: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    #: PersistentVolumeClaim manifests by ``namespace/name``, and where each was read.
    claims: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    claim_files: dict[str, str] = field(default_factory=dict)
    #: ResourceClaim and ResourceClaimTemplate manifests by (kind, ``namespace/name``),
    #: and where each was read.
    device_claims: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    device_claim_files: dict[tuple[str, str], str] = field(default_factory=dict)
    skipped: int = 0
    warnings: list[str] = field(default_factory=list)

    # ---- declarations shared by both forms

    def add_job(self, job: JobSpec, origin: Origin) -> None:
        job = dataclasses.replace(job, origin=_job_origin(job, origin))
        where = job.origin
        pods = sum(t.replicas for t in job.tasks)
        if pods > MAX_JOB_PODS and where is not None:
            index = max(range(len(job.tasks)), key=lambda i: job.tasks[i].replicas)
            raise InputError(
                f"{pods:,} pods in all, more than the {MAX_JOB_PODS:,} pumice simulates "
                "for one job",
                file=where.file,
                obj=where.obj,
                field=where.replicas_field.format(task=index),
            )
        key = (job.namespace, job.uid)
        if key in self.jobs:
            first = self.job_origin[key]
            raise origin.error(
                f"duplicate job {job.uid} (first declared in {first.file})",
                "name" if origin.field_prefix else "metadata.name",
            )
        self.jobs[key] = job
        self.job_origin[key] = origin

    def add_queue(self, queue: QueueSpec, origin: Origin) -> None:
        if queue.name in self.queues:
            first = self.queue_origin[queue.name]
            raise origin.error(
                f"duplicate queue {queue.name} (first declared in {first.file})", "name"
            )
        self.queues[queue.name] = queue
        self.queue_origin[queue.name] = origin

    def add_priority_class(self, name: str, value: object, origin: Origin, field: str) -> None:
        val = require_int(value, field=field, minimum=-(2**31))
        if name in self.priority_classes and self.priority_classes[name] != val:
            first = self.pc_origin[name]
            raise origin.error(
                f"priority class {name} declared twice with different values "
                f"(first in {first.file})",
                field,
            )
        self.priority_classes[name] = val
        self.pc_origin[name] = origin

    def warn(self, message: str) -> None:
        self.skipped += 1
        if len(self.warnings) < 20:
            self.warnings.append(message)

    # ---- one object of a file

    def add(self, obj: Mapping[str, Any], file: str) -> None:
        kind = obj.get("kind")
        if kind is not None and not isinstance(kind, str):
            raise InputError(f"expected a string, got {shown(kind)}", file=file, field="kind")
        api = obj.get("apiVersion")
        if kind == "Workload" and gang_apis.is_kubernetes_workload(obj):
            self.workloads.append((file, obj))
        elif kind == "Workload" or (kind is None and ("jobs" in obj or "queues" in obj)):
            self.add_compact(obj, file)
        elif kind == "PodGroup":
            self.podgroups.append((file, obj))
        elif kind == "Pod":
            self.add_pod(obj, file)
        elif kind == "Job" and isinstance(api, str) and api.startswith("batch.volcano.sh/"):
            self.add_volcano_job(obj, file)
        elif kind == "Queue":
            self.add_queue_object(obj, file)
        elif kind == "PersistentVolumeClaim":
            self.add_claim(obj, file)
        elif kind in _DEVICE_CLAIM_PARSERS:
            self.add_device_claim(str(kind), obj, file)
        elif kind == "PriorityClass":
            meta = object_metadata(obj, file, "PriorityClass")
            name = require_str(meta.get("name"), field="metadata.name")
            self.add_priority_class(
                name, obj.get("value", 0), Origin(file, f"PriorityClass {name}"), "value"
            )
        else:
            raw_meta = obj.get("metadata")
            named = raw_meta.get("name") if isinstance(raw_meta, Mapping) else None
            what = " ".join(shown_text(x) for x in (kind or "an object without kind", named) if x)
            self.warn(f"{file}: skipped {what}: not part of a workload")

    # ---- compact form

    def add_compact(self, doc: Mapping[str, Any], file: str) -> None:
        origin = Origin(file, "Workload")
        try:
            check_keys(doc, WORKLOAD_KEYS, field=None)
        except InputError as exc:
            raise exc.located(file=file, obj="Workload") from None
        api = doc.get("apiVersion")
        if api is not None and api != WORKLOAD_API:
            raise origin.error(
                f"expected apiVersion {WORKLOAD_API}, got {shown(api)}", "apiVersion"
            )
        namespace = doc.get("namespace", DEFAULT_NAMESPACE)
        if not isinstance(namespace, str) or not is_dns_label(namespace):
            raise origin.error(f"invalid namespace {shown(namespace)}", "namespace")
        pcs = doc.get("priorityClasses") or {}
        if isinstance(pcs, Mapping):
            for name, value in pcs.items():
                self.add_priority_class(str(name), value, origin, f"priorityClasses.{name}")
        elif isinstance(pcs, list):
            for i, entry in enumerate(pcs):
                f = f"priorityClasses[{i}]"
                if not isinstance(entry, Mapping):
                    raise origin.error("expected {name, value}", f)
                try:
                    check_keys(entry, ("name", "value"), field=f)
                    name = require_str(entry.get("name"), field=f"{f}.name")
                except InputError as exc:
                    raise exc.located(file=file, obj="Workload") from None
                self.add_priority_class(name, entry.get("value"), origin, f"{f}.value")
        else:
            raise origin.error("expected a map of name: value", "priorityClasses")
        queues = doc.get("queues") or []
        if not isinstance(queues, list):
            raise origin.error("expected a list", "queues")
        for i, q in enumerate(queues):
            f = f"queues[{i}]"
            try:
                queue = compact_queue(q, f)
            except InputError as exc:
                raise exc.located(file=file, obj="Workload") from None
            self.add_queue(queue, Origin(file, f"Workload queue {queue.name}", f"{f}."))
        jobs = doc.get("jobs") or []
        if not isinstance(jobs, list):
            raise origin.error("expected a list", "jobs")
        for i, j in enumerate(jobs):
            f = f"jobs[{i}]"
            name = j.get("name") if isinstance(j, Mapping) else None
            obj = f"Workload job {name}" if isinstance(name, str) else "Workload"
            try:
                job = compact_job(j, f, namespace)
            except InputError as exc:
                raise exc.located(file=file, obj=obj) from None
            self.add_job(job, Origin(file, obj, f"{f}."))

    # ---- manifests

    def add_queue_object(self, obj: Mapping[str, Any], file: str) -> None:
        meta = object_metadata(obj, file, "Queue")
        name = require_str(meta.get("name"), field="metadata.name")
        where = f"Queue {name}"
        spec = obj.get("spec") or {}
        try:
            if not isinstance(spec, Mapping):
                raise InputError("expected a map", field="spec")
            guarantee = spec.get("guarantee")
            if isinstance(guarantee, Mapping) and "resource" in guarantee:
                guarantee = guarantee.get("resource")
            queue = QueueSpec(
                name=name,
                weight=require_int(spec.get("weight", 1), field="spec.weight", minimum=1),
                capability=optional_resources(spec, "capability", "spec.capability"),
                guarantee=(
                    parse_resources(guarantee, field="spec.guarantee.resource")
                    if guarantee is not None
                    else None
                ),
                deserved=optional_resources(spec, "deserved", "spec.deserved"),
                reclaimable=require_bool(spec.get("reclaimable", True), field="spec.reclaimable"),
                parent=optional_str(spec.get("parent"), field="spec.parent"),
            )
        except InputError as exc:
            raise exc.located(file=file, obj=where) from None
        self.add_queue(queue, Origin(file, where))

    def add_claim(self, obj: Mapping[str, Any], file: str) -> None:
        """A PersistentVolumeClaim the workload's pods mount (checked as the scheduler
        reads it; created in the simulated cluster when first needed)."""
        key, claim = _declared(
            "PersistentVolumeClaim", obj, file, parse_pvc, self.claim_files, noun="claim"
        )
        (claim.get("spec") or {}).pop("volumeName", None)
        self.claims[key] = claim
        self.claim_files[key] = file

    def add_device_claim(self, kind: str, obj: Mapping[str, Any], file: str) -> None:
        """A ResourceClaimTemplate or ResourceClaim the workload's pods name (checked as
        the scheduler reads it; created in the simulated cluster, see
        :mod:`pumice.sim.devices`)."""
        seen = {k[1]: f for k, f in self.device_claim_files.items() if k[0] == kind}
        obj = {"apiVersion": "resource.k8s.io/v1", **obj}
        name, manifest = _declared(kind, obj, file, _DEVICE_CLAIM_PARSERS[kind], seen)
        self.device_claims[(kind, name)] = manifest
        self.device_claim_files[(kind, name)] = file

    def add_pod(self, obj: Mapping[str, Any], file: str) -> None:
        meta = object_metadata(obj, file, "Pod")
        name = require_str(meta.get("name"), field="metadata.name")
        namespace = object_namespace(meta, file, "Pod", name)
        where = f"Pod {namespace}/{name}"
        annotations = meta.get("annotations") or {}
        spec = obj.get("spec") or {}
        try:
            if not isinstance(annotations, Mapping):
                raise InputError("expected a map", field="metadata.annotations")
            if not isinstance(spec, Mapping):
                raise InputError("expected a map", field="spec")
            requests = pod_requests(spec)
            labels = meta.get("labels") or {}
            if not isinstance(labels, Mapping):
                raise InputError("expected a map", field="metadata.labels")
            task = (
                annotations.get(ANNOTATION_TASK_SPEC)
                or annotations.get(ANNOTATION_TASK_NAME)
                or labels.get(ANNOTATION_TASK_SPEC)
                or labels.get(ANNOTATION_TASK_NAME)
                or DEFAULT_TASK
            )
            if not isinstance(task, str) or not is_dns_label(task):
                raise InputError(
                    f"invalid task name {shown(task)}",
                    field=f"metadata.annotations[{ANNOTATION_TASK_SPEC}]",
                )
            pc = optional_str(spec.get("priorityClassName"), field="spec.priorityClassName")
            queue = optional_str(
                annotations.get(ANNOTATION_QUEUE_NAME),
                field=f"metadata.annotations[{ANNOTATION_QUEUE_NAME}]",
            )
            ref = pod_ref(annotations, labels, spec)
            volumes = pod_claim_volumes(spec)
            resource_claims = pod_resource_claims(spec, namespace)
        except InputError as exc:
            raise exc.located(file=file, obj=where) from None
        self.pods.append(
            Pod(file, name, namespace, task, requests, annotations, pc, queue, ref, volumes,
                 resource_claims)
        )  # fmt: skip

    def add_volcano_job(self, obj: Mapping[str, Any], file: str) -> None:
        meta = object_metadata(obj, file, "Job")
        name = require_str(meta.get("name"), field="metadata.name")
        namespace = object_namespace(meta, file, "Job", name)
        where = f"Job {namespace}/{name}"
        try:
            job = volcano_job(obj, name, namespace)
        except InputError as exc:
            raise exc.located(file=file, obj=where) from None
        self.add_job(job, Origin(file, where, "", "spec.queue", "spec.priorityClassName"))


def _job_origin(job: JobSpec, origin: Origin) -> JobOrigin:
    """Where ``job`` was written, with the fields of its queue, requests and replicas
    in the form the user wrote it in."""
    prefix = origin.field_prefix
    if prefix:  # the compact form: the shorthand (one task of the default name) or tasks
        shorthand = len(job.tasks) == 1 and job.tasks[0].name == DEFAULT_TASK
        task = prefix if shorthand else f"{prefix}tasks[{{task}}]."
        requests, replicas = f"{task}requests", f"{task}replicas"
        spec = task.rstrip(".")
    elif origin.obj.startswith("Job "):  # a Volcano Job
        spec = "spec.tasks[{task}].template.spec"
        requests = f"{spec}.containers[*].resources.requests"
        replicas = "spec.tasks[{task}].replicas"
    else:  # pods (of a PodGroup, a Workload, or of their own)
        spec = "spec"
        requests = "spec.containers[*].resources.requests"
        replicas = "metadata.name"
    queue = prefix + origin.queue_field
    return JobOrigin(origin.file, origin.obj, queue, requests, replicas, spec)


def _declared(
    kind: str,
    obj: Mapping[str, Any],
    file: str,
    parse: Callable[[Mapping[str, Any]], Any],
    seen: Mapping[str, str],
    noun: str = "",
) -> tuple[str, dict[str, Any]]:
    """A claim-like manifest of a workload file (``namespace/name``, a copy to create):
    checked by ``parse`` as the scheduler reads it, refused when ``seen`` (key -> file)
    already has it (a ``noun`` other than the kind names it), and stripped of what the
    API server sets (uid, versions, status)."""
    meta = object_metadata(obj, file, kind)
    name = require_str(meta.get("name"), field="metadata.name")
    namespace = object_namespace(meta, file, kind, name)
    key = f"{namespace}/{name}"
    where = f"{kind} {key}"
    manifest = copy.deepcopy(dict(obj))
    manifest["metadata"] = {**manifest["metadata"], "namespace": namespace}
    try:
        parse(manifest)
    except InputError as exc:
        raise exc.located(file=file, obj=where) from None
    if key in seen:
        raise InputError(
            f"duplicate {noun or kind} {key} (first declared in {seen[key]})",
            file=file,
            obj=where,
            field="metadata.name",
        )
    manifest["metadata"] = {
        k: v
        for k, v in manifest["metadata"].items()
        if k not in ("uid", "resourceVersion", "creationTimestamp", "generation")
    }
    manifest.pop("status", None)
    return key, manifest
