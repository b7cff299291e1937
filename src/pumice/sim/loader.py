"""Reading a :class:`~pumice.sim.workload.Workload` from files (``pumice simulate WORKLOAD...``).

Two forms are accepted and may be mixed: Kubernetes manifests (PodGroups and Pods with
``pumice.sim/*`` annotations, Queues, PriorityClasses) and the compact ``kind: Workload``
document; :func:`load_workload` describes both. Loading is all or nothing: a malformed field
or a reference to an undeclared queue or priority class raises
:class:`~pumice.errors.InputError` naming the file, the object and the field, and nothing is
returned, so a simulation never starts on part of a workload. Objects that are not part of
a workload are skipped, counted and reported as warnings.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pumice.api import gang_apis
from pumice.api.dra import parse_resource_claim, parse_resource_claim_template
from pumice.api.limits import MAX_JOB_PODS
from pumice.api.parse import pod_device_claims
from pumice.api.quantity import render_resources
from pumice.api.topology_spec import parse_network_topology
from pumice.api.volumes import parse_pvc
from pumice.errors import InputError, shown, shown_text
from pumice.sim.documents import iter_objects, read_documents
from pumice.sim.fields import (
    check_keys,
    is_dns_label,
    is_dns_subdomain,
    parse_resources,
    parse_seconds,
    require_int,
    require_str,
)
from pumice.sim.objects import group_annotations, workload_object
from pumice.sim.workload import (
    ANNOTATION_ARRIVAL,
    ANNOTATION_DURATION,
    ANNOTATION_END_FRACTION,
    ANNOTATION_GROUP_NAME,
    ANNOTATION_OUTCOME,
    ANNOTATION_QUEUE_NAME,
    ANNOTATION_TASK_NAME,
    ANNOTATION_TASK_SPEC,
    COSCHEDULING_LABEL,
    DEFAULT_NAMESPACE,
    DEFAULT_POD_GROUP,
    DEFAULT_QUEUE,
    DEFAULT_TASK,
    DIALECTS,
    OUTCOMES,
    WORKLOAD_API,
    Dialect,
    JobOrigin,
    JobSpec,
    Outcome,
    QueueSpec,
    TaskSpec,
    Workload,
    sort_jobs,
)

#: The DRA objects a workload may hold, and their parsers.
_DEVICE_CLAIM_PARSERS = {
    "ResourceClaim": parse_resource_claim,
    "ResourceClaimTemplate": parse_resource_claim_template,
}

# --------------------------------------------------------------------------- input paths

_EXTENSIONS = (".yaml", ".yml", ".json")


def _expand(paths: Sequence[str]) -> Iterator[Path]:
    for p in paths:
        path = Path(p)
        if path.is_dir():
            files = sorted(
                f for f in path.rglob("*") if f.is_file() and f.suffix.lower() in _EXTENSIONS
            )
            yield from files
        elif path.is_file():
            yield path
        else:
            raise InputError("no such file or directory", file=str(p))


# --------------------------------------------------------------------------- the loader

_WORKLOAD_KEYS = ("apiVersion", "kind", "namespace", "queues", "priorityClasses", "jobs")
_JOB_KEYS = (
    "name",
    "namespace",
    "queue",
    "arrival",
    "duration",
    "minAvailable",
    "priorityClass",
    "tasks",
    "replicas",
    "requests",
    "outcome",
    "endFraction",
    "networkTopology",
    "dialect",
    "podGroup",
    "replicaKey",
)
_TASK_KEYS = ("name", "replicas", "requests", "minAvailable")
_QUEUE_KEYS = ("name", "weight", "capability", "guarantee", "deserved", "reclaimable", "parent")


@dataclass(slots=True)
class _Origin:
    """Where a job, queue or priority class was declared, for error messages."""

    file: str
    obj: str
    field_prefix: str = ""
    queue_field: str = "queue"
    pc_field: str = "priorityClass"

    def error(self, message: str, field: str) -> InputError:
        return InputError(message, file=self.file, obj=self.obj, field=self.field_prefix + field)


@dataclass(slots=True)
class _Pod:
    file: str
    name: str
    namespace: str
    task: str
    requests: dict[str, float]
    annotations: Mapping[str, Any]
    priority_class: str | None
    queue: str | None
    #: The gang it joins: (dialect, group name, Workload pod group, replica key);
    #: None: a job of its own.
    ref: GangKey | None = None
    #: Its claim volumes (``persistentVolumeClaim`` or ``ephemeral``), as written.
    volumes: tuple[Mapping[str, Any], ...] = ()
    #: Its ``spec.resourceClaims`` (DRA), as written.
    resource_claims: tuple[Mapping[str, Any], ...] = ()


#: A gang a pod names (see :class:`_Pod`).
GangKey = tuple[str, str, str, str]


@dataclass(slots=True)
class _Builder:
    """Collects what the files declare, then checks references and builds the workload."""

    #: (namespace, job uid) -> job.
    jobs: dict[tuple[str, str], JobSpec] = field(default_factory=dict)
    job_origin: dict[tuple[str, str], _Origin] = field(default_factory=dict)
    queues: dict[str, QueueSpec] = field(default_factory=dict)
    queue_origin: dict[str, _Origin] = field(default_factory=dict)
    priority_classes: dict[str, int] = field(default_factory=dict)
    pc_origin: dict[str, _Origin] = field(default_factory=dict)
    podgroups: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    #: Kubernetes' Workloads (``scheduling.k8s.io``), not the compact form.
    workloads: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    pods: list[_Pod] = field(default_factory=list)
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

    def add_job(self, job: JobSpec, origin: _Origin) -> None:
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

    def add_queue(self, queue: QueueSpec, origin: _Origin) -> None:
        if queue.name in self.queues:
            first = self.queue_origin[queue.name]
            raise origin.error(
                f"duplicate queue {queue.name} (first declared in {first.file})", "name"
            )
        self.queues[queue.name] = queue
        self.queue_origin[queue.name] = origin

    def add_priority_class(self, name: str, value: object, origin: _Origin, field: str) -> None:
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
            meta = _metadata(obj, file, "PriorityClass")
            name = require_str(meta.get("name"), field="metadata.name")
            self.add_priority_class(
                name, obj.get("value", 0), _Origin(file, f"PriorityClass {name}"), "value"
            )
        else:
            meta = obj.get("metadata")
            name = meta.get("name") if isinstance(meta, Mapping) else None
            what = " ".join(shown_text(x) for x in (kind or "an object without kind", name) if x)
            self.warn(f"{file}: skipped {what}: not part of a workload")

    # ---- compact form

    def add_compact(self, doc: Mapping[str, Any], file: str) -> None:
        origin = _Origin(file, "Workload")
        try:
            check_keys(doc, _WORKLOAD_KEYS, field=None)
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
                queue = _compact_queue(q, f)
            except InputError as exc:
                raise exc.located(file=file, obj="Workload") from None
            self.add_queue(queue, _Origin(file, f"Workload queue {queue.name}", f"{f}."))
        jobs = doc.get("jobs") or []
        if not isinstance(jobs, list):
            raise origin.error("expected a list", "jobs")
        for i, j in enumerate(jobs):
            f = f"jobs[{i}]"
            name = j.get("name") if isinstance(j, Mapping) else None
            obj = f"Workload job {name}" if isinstance(name, str) else "Workload"
            try:
                job = _compact_job(j, f, namespace)
            except InputError as exc:
                raise exc.located(file=file, obj=obj) from None
            self.add_job(job, _Origin(file, obj, f"{f}."))

    # ---- manifests

    def add_queue_object(self, obj: Mapping[str, Any], file: str) -> None:
        meta = _metadata(obj, file, "Queue")
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
                capability=_optional_resources(spec, "capability", "spec.capability"),
                guarantee=(
                    parse_resources(guarantee, field="spec.guarantee.resource")
                    if guarantee is not None
                    else None
                ),
                deserved=_optional_resources(spec, "deserved", "spec.deserved"),
                reclaimable=_bool(spec.get("reclaimable", True), field="spec.reclaimable"),
                parent=_optional_str(spec.get("parent"), field="spec.parent"),
            )
        except InputError as exc:
            raise exc.located(file=file, obj=where) from None
        self.add_queue(queue, _Origin(file, where))

    def add_claim(self, obj: Mapping[str, Any], file: str) -> None:
        """A PersistentVolumeClaim the workload's pods mount (checked as the scheduler
        reads it; created in the simulated cluster when first needed)."""
        key, claim = _declared(
            "PersistentVolumeClaim", obj, file, parse_pvc, self.claim_files, noun="claim"
        )
        (claim.get("spec") or {}).pop("volumeName", None)
        self.claims[key] = claim
        self.claim_files[key] = file

    def check_claims(self) -> None:
        """Every claim a job mounts by name is declared by some file (else the job would
        wait for it for ever)."""
        from pumice.sim.storage import mounted_claims

        for key, job in self.jobs.items():
            for name in mounted_claims(job):
                if f"{job.namespace}/{name}" not in self.claims:
                    origin = self.job_origin[key]
                    raise InputError(
                        f"its pods mount persistentvolumeclaim {name}, which no file "
                        "declares (add the PersistentVolumeClaim to the workload)",
                        file=origin.file,
                        obj=origin.obj,
                        field="spec.volumes",
                    )

    def add_device_claim(self, kind: str, obj: Mapping[str, Any], file: str) -> None:
        """A ResourceClaimTemplate or ResourceClaim the workload's pods name (checked as
        the scheduler reads it; created in the simulated cluster, see
        :mod:`pumice.sim.devices`)."""
        seen = {k[1]: f for k, f in self.device_claim_files.items() if k[0] == kind}
        obj = {"apiVersion": "resource.k8s.io/v1", **obj}
        name, manifest = _declared(kind, obj, file, _DEVICE_CLAIM_PARSERS[kind], seen)
        self.device_claims[(kind, name)] = manifest
        self.device_claim_files[(kind, name)] = file

    def check_device_claims(self) -> None:
        """Every ResourceClaim and ResourceClaimTemplate a job's pods name is declared by
        some file (else its pods would wait for it for ever)."""
        from pumice.sim.devices import claim_refs

        for key, job in self.jobs.items():
            for kind, name in claim_refs(job):
                if (kind, f"{job.namespace}/{name}") not in self.device_claims:
                    origin = self.job_origin[key]
                    field = "resourceClaimName" if kind == "ResourceClaim" else (
                        "resourceClaimTemplateName")  # fmt: skip
                    raise InputError(
                        f"its pods need {kind} {name}, which no file declares (add the "
                        f"{kind} to the workload)",
                        file=origin.file,
                        obj=origin.obj,
                        field=f"spec.resourceClaims[].{field}",
                    )

    def add_pod(self, obj: Mapping[str, Any], file: str) -> None:
        meta = _metadata(obj, file, "Pod")
        name = require_str(meta.get("name"), field="metadata.name")
        namespace = meta.get("namespace") or DEFAULT_NAMESPACE
        where = f"Pod {namespace}/{name}"
        annotations = meta.get("annotations") or {}
        spec = obj.get("spec") or {}
        try:
            if not isinstance(annotations, Mapping):
                raise InputError("expected a map", field="metadata.annotations")
            if not isinstance(spec, Mapping):
                raise InputError("expected a map", field="spec")
            requests = _pod_requests(spec)
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
            pc = _optional_str(spec.get("priorityClassName"), field="spec.priorityClassName")
            queue = _optional_str(
                annotations.get(ANNOTATION_QUEUE_NAME),
                field=f"metadata.annotations[{ANNOTATION_QUEUE_NAME}]",
            )
            ref = _pod_ref(annotations, labels, spec)
            volumes = _claim_volumes(spec)
            resource_claims = _resource_claims(spec, str(namespace))
        except InputError as exc:
            raise exc.located(file=file, obj=where) from None
        self.pods.append(
            _Pod(file, name, namespace, task, requests, annotations, pc, queue, ref, volumes,
                 resource_claims)
        )  # fmt: skip

    def build_manifest_jobs(self) -> None:
        groups: dict[tuple[str, GangKey], list[_Pod]] = {}
        singles: list[_Pod] = []
        for pod in self.pods:
            if pod.ref is not None:
                groups.setdefault((pod.namespace, pod.ref), []).append(pod)
            else:
                singles.append(pod)
        seen: set[tuple[str, str, str]] = set()
        for file, obj in self.podgroups:
            meta = _metadata(obj, file, "PodGroup")
            name = require_str(meta.get("name"), field="metadata.name")
            namespace = meta.get("namespace") or DEFAULT_NAMESPACE
            try:
                dialect: Dialect = _podgroup_dialect(obj)
            except InputError as exc:
                self.warn(f"{file}: skipped PodGroup {namespace}/{name}: {exc.message}")
                continue
            where = f"PodGroup {namespace}/{name}"
            if dialect != "volcano":
                where += f" ({obj.get('apiVersion')})"
            queue_field = "spec.queue"
            if dialect != "volcano":
                queue_field = f"metadata.annotations[{ANNOTATION_QUEUE_NAME}]"
            origin = _Origin(file, where, "", queue_field, "spec.priorityClassName")
            if (dialect, namespace, name) in seen:
                raise origin.error(f"duplicate PodGroup {namespace}/{name}", "metadata.name")
            seen.add((dialect, namespace, name))
            pods = groups.pop((namespace, (dialect, name, "", "")), [])
            if not pods:
                raise origin.error(
                    f"no pod names this PodGroup ({_JOIN[dialect]})", "metadata.name"
                )
            try:
                if dialect == "volcano":
                    job = _podgroup_job(obj, name, namespace, pods)
                else:
                    job = _dialect_job(obj, dialect, name, namespace, pods)
            except InputError as exc:
                raise exc.located(file=file, obj=where) from None
            self.add_job(job, origin)
        self.build_workload_jobs(groups)
        for (namespace, ref), pods in sorted(groups.items()):
            pod = pods[0]
            dialect, group = ref[0], ref[1]
            raise InputError(
                f"{_JOIN[dialect]} names {_OBJECT[dialect]} {group}, which no file declares",
                file=pod.file,
                obj=f"Pod {namespace}/{pod.name}",
                field=_JOIN_FIELD[dialect],
            )
        for pod in singles:
            where = f"Pod {pod.namespace}/{pod.name}"
            try:
                job = _single_pod_job(pod)
            except InputError as exc:
                raise exc.located(file=pod.file, obj=where) from None
            queue_field = f"metadata.annotations[{ANNOTATION_QUEUE_NAME}]"
            self.add_job(job, _Origin(pod.file, where, "", queue_field, "spec.priorityClassName"))

    def build_workload_jobs(self, groups: dict[tuple[str, GangKey], list[_Pod]]) -> None:
        """The gangs of Kubernetes' Workloads: one job per pod group and replica key
        its pods name (taken out of ``groups``)."""
        seen: set[tuple[str, str]] = set()
        for file, obj in self.workloads:
            meta = _metadata(obj, file, "Workload")
            name = require_str(meta.get("name"), field="metadata.name")
            namespace = meta.get("namespace") or DEFAULT_NAMESPACE
            where = f"Workload {namespace}/{name} ({obj.get('apiVersion')})"
            try:
                record = gang_apis.parse_workload(obj)
            except InputError as exc:
                raise exc.located(file=file, obj=where) from None
            queue_field = f"metadata.annotations[{ANNOTATION_QUEUE_NAME}]"
            origin = _Origin(file, where, "", queue_field, "spec.priorityClassName")
            if (namespace, name) in seen:
                raise origin.error(f"duplicate Workload {namespace}/{name}", "metadata.name")
            seen.add((namespace, name))
            if record.version != "v1alpha1":
                self.warn(
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
                raise origin.error(
                    f"no pod names this Workload ({_JOIN['workload']})", "metadata.name"
                )
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
                    job = _dialect_job(
                        obj, "workload", name, namespace, pods, record.groups[ref[2]], ref
                    )
                except InputError as exc:
                    raise exc.located(file=file, obj=where) from None
                self.add_job(job, origin)

    def add_volcano_job(self, obj: Mapping[str, Any], file: str) -> None:
        meta = _metadata(obj, file, "Job")
        name = require_str(meta.get("name"), field="metadata.name")
        namespace = meta.get("namespace") or DEFAULT_NAMESPACE
        where = f"Job {namespace}/{name}"
        try:
            job = _volcano_job(obj, name, str(namespace))
        except InputError as exc:
            raise exc.located(file=file, obj=where) from None
        self.add_job(job, _Origin(file, where, "", "spec.queue", "spec.priorityClassName"))

    # ---- the end

    def group_compact_workloads(self) -> None:
        """Compact jobs of dialect ``workload`` of one name are pod groups (or replicas)
        of one Workload: render it once, with all of them, for each to carry."""
        by_name: dict[tuple[str, str], list[tuple[str, str]]] = {}
        manifests = {
            (j.namespace, j.name)
            for j in self.jobs.values()
            if j.dialect == "workload" and j.group is not None
        }
        for key, job in self.jobs.items():
            if job.dialect == "workload" and job.group is None:
                by_name.setdefault((job.namespace, job.name), []).append(key)
        for (namespace, name), keys in sorted(by_name.items()):
            origin = self.job_origin[keys[0]]
            if (namespace, name) in manifests:
                raise origin.error(
                    f"a file declares Workload {namespace}/{name} as a manifest too", "name"
                )
            counts: dict[str, int] = {}
            for key in keys:
                job = self.jobs[key]
                known = counts.setdefault(job.pod_group, job.min_available)
                if known != job.min_available:
                    raise self.job_origin[key].error(
                        f"pod group {shown(job.pod_group)} of Workload {namespace}/{name} has "
                        f"minAvailable {known} in another job",
                        "minAvailable",
                    )
            first = self.jobs[keys[0]]
            obj = workload_object(namespace, name, counts, group_annotations(first))
            for key in keys:
                self.jobs[key] = dataclasses.replace(self.jobs[key], group=obj)

    def check_pod_names(self) -> None:
        """Jobs whose pods would have the same names (``{job}-{task}-{i}``) in one
        namespace cannot both run: a Volcano PodGroup and a coscheduling PodGroup of one
        name, say."""
        prefixes: dict[tuple[str, str], str] = {}
        for key, job in self.jobs.items():
            other = prefixes.setdefault((job.namespace, job.pod_prefix), job.uid)
            if other != job.uid:
                raise self.job_origin[key].error(
                    f"the pods of jobs {other} and {job.uid} would have the same names "
                    f"({job.pod_prefix}-<task>-<i>); rename one of them",
                    "name" if self.job_origin[key].field_prefix else "metadata.name",
                )

    def finish(
        self, known_queues: Collection[str], known_priority_classes: Mapping[str, int]
    ) -> Workload:
        self.build_manifest_jobs()
        self.group_compact_workloads()
        self.check_pod_names()
        self.check_claims()
        self.check_device_claims()
        queue_names = set(self.queues) | set(known_queues)
        if DEFAULT_QUEUE not in queue_names and any(
            job.queue == DEFAULT_QUEUE for job in self.jobs.values()
        ):
            # Volcano's scheduler creates this queue on every cluster; it is added only
            # when a job uses it, since an idle queue of weight 1 changes nothing but a
            # queue with demand does take its part of the cluster under proportion.
            self.queues[DEFAULT_QUEUE] = QueueSpec(name=DEFAULT_QUEUE)
            queue_names.add(DEFAULT_QUEUE)
        for key, job in self.jobs.items():
            origin = self.job_origin[key]
            if job.queue not in queue_names:
                raise origin.error(
                    f"queue {shown(job.queue)} is not declared by any file "
                    "(add it under queues: or as a Queue object)",
                    origin.queue_field,
                )
            if (
                job.priority_class is not None
                and job.priority_class not in self.priority_classes
                and job.priority_class not in known_priority_classes
            ):
                raise origin.error(
                    f"priority class {shown(job.priority_class)} is not declared by any file",
                    origin.pc_field,
                )
        for name, queue in self.queues.items():
            if queue.parent is not None and queue.parent not in queue_names:
                raise self.queue_origin[name].error(
                    f"parent queue {shown(queue.parent)} is not declared by any file", "parent"
                )
        if not self.jobs:
            first = f" (first: {self.warnings[0]})" if self.warnings else ""
            raise InputError(
                f"holds no jobs: {self.skipped} object(s) skipped{first}"
                if self.skipped
                else "holds no jobs: no PodGroup, pod, Volcano Job or compact jobs: list"
            )
        pcs = dict(known_priority_classes)
        pcs.update(self.priority_classes)
        return Workload(
            jobs=sort_jobs(self.jobs.values()),
            queues=tuple(self.queues.values()),
            priority_classes=pcs,
            skipped=self.skipped,
            warnings=tuple(self.warnings),
            claims=tuple(self.claims[k] for k in sorted(self.claims)),
            device_claims=tuple(self.device_claims[k] for k in sorted(self.device_claims)),
        )


def load_workload(
    paths: Sequence[str],
    *,
    known_queues: Collection[str] = (),
    known_priority_classes: Mapping[str, int] | None = None,
) -> Workload:
    """Read a workload from YAML/JSON files or directories of them (searched recursively,
    in sorted order).

    Two forms, which may be mixed across and within files:

    - Kubernetes manifests: PodGroups and Pods (plus Queues and PriorityClasses). A job's
      arrival and duration come from the ``pumice.sim/arrival`` and ``pumice.sim/duration``
      annotations of its PodGroup (or of its pods, which must then agree; a pod without
      a group is a job of one). Pods are grouped into roles by ``volcano.sh/task-spec``
      (or ``volcano.sh/task-name``, as annotation or label; default ``task``); all pods
      of a role must request the same resources. Pod names are not kept: a loaded job's
      pods are named ``{job}-{task}-{i}`` again when rendered.
    - Gangs of the other dialects, with their pods: scheduler-plugins coscheduling
      PodGroups (``scheduling.x-k8s.io/v1alpha1``), Kubernetes' ``scheduling.k8s.io``
      v1alpha1 Workloads (one job per pod group and replica key its pods name) and
      v1alpha2 PodGroups, with the same annotations; the group object is kept for the
      simulated cluster as written (``JobSpec.group``).
    - The compact form: a ``kind: Workload`` document (``apiVersion: pumice.io/v1alpha1``)
      with ``queues``, ``priorityClasses`` and ``jobs`` (each may say its ``dialect``).

    - PersistentVolumeClaims the pods mount (a pod volume's
      ``persistentVolumeClaim.claimName``, a Volcano Job's ``volumeClaimName``): each
      claim mounted by name must be declared by some file; it is created in the
      simulated cluster when the first job mounting it arrives (:mod:`pumice.sim.storage`).
      The pods of one role attach the same claims (a pod's claim volumes are kept, as
      written, for every pod of its role).
    - ResourceClaimTemplates and ResourceClaims (dynamic resource allocation) the pods
      name in ``spec.resourceClaims`` (a pod's or a Volcano Job task template's): each
      must be declared by some file; they are created in the simulated cluster
      (:mod:`pumice.sim.devices`). The pods of one role name the same claims.

    Objects of other kinds (Nodes, say) are skipped and counted. Every job's queue must be
    declared by some file or be in ``known_queues``, except Volcano's ``default`` queue,
    which every Volcano cluster has: when a job names it (a job that names no queue is
    in it) and no file declares it, the workload gets it as Volcano creates it (weight 1,
    reclaimable, no capability or guarantee). Every priority class a job names must be
    declared or in ``known_priority_classes``. Anything malformed raises
    :class:`InputError` naming the file, the object and the field; nothing is returned then.
    """
    if isinstance(paths, str | os.PathLike):
        paths = [str(paths)]
    builder = _Builder()
    for path in _expand(paths):
        file = str(path)
        for obj in iter_objects(read_documents(path), file=file):
            try:
                builder.add(obj, file)
            except InputError as exc:
                raise exc.located(file=file) from None
    try:
        return builder.finish(known_queues, known_priority_classes or {})
    except InputError as exc:  # (what is not about one object is about the files)
        raise exc.located(file=", ".join(map(str, paths))) from None


# --------------------------------------------------------------------------- form details


def _job_origin(job: JobSpec, origin: _Origin) -> JobOrigin:
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
    meta = _metadata(obj, file, kind)
    name = require_str(meta.get("name"), field="metadata.name")
    namespace = meta.get("namespace") or DEFAULT_NAMESPACE
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


def _metadata(obj: Mapping[str, Any], file: str, kind: str) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        raise InputError(
            f"expected a map, got {shown(meta)}", file=file, obj=kind, field="metadata"
        )
    if not isinstance(meta, Mapping) or not meta.get("name"):
        raise InputError("missing metadata.name", file=file, obj=kind, field="metadata.name")
    return meta


def _bool(value: object, *, field: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"expected true or false, got {shown(value)}", field=field)
    return value


def _optional_str(value: object, *, field: str) -> str | None:
    if value is None or value == "":
        return None
    return require_str(value, field=field)


def _optional_resources(d: Mapping[str, Any], key: str, field: str) -> dict[str, float] | None:
    if d.get(key) is None:
        return None
    return parse_resources(d[key], field=field)


def _outcome(value: object, *, field: str) -> Outcome:
    if value not in OUTCOMES:
        raise InputError(f"expected one of {', '.join(OUTCOMES)}, got {shown(value)}", field=field)
    return value  # type: ignore[return-value]


def _end_fraction(value: object, outcome: str, *, field: str) -> float:
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InputError(f"expected a number in (0, 1], got {shown(value)}", field=field)
    try:
        fraction = float(value)
    except ValueError:
        raise InputError(f"expected a number in (0, 1], got {shown(value)}", field=field) from None
    if not 0 < fraction <= 1:
        raise InputError(f"expected a number in (0, 1], got {shown(value)}", field=field)
    if outcome == "succeed" and fraction != 1:
        raise InputError("only a job that fails or is cancelled ends early", field=field)
    return fraction


def _compact_queue(q: object, f: str) -> QueueSpec:
    if not isinstance(q, Mapping):
        raise InputError("expected a map", field=f)
    check_keys(q, _QUEUE_KEYS, field=f)
    name = require_str(q.get("name"), field=f"{f}.name")
    if not is_dns_label(name):
        raise InputError(f"invalid queue name {shown(name)}", field=f"{f}.name")
    return QueueSpec(
        name=name,
        weight=require_int(q.get("weight", 1), field=f"{f}.weight", minimum=1),
        capability=_optional_resources(q, "capability", f"{f}.capability"),
        guarantee=_optional_resources(q, "guarantee", f"{f}.guarantee"),
        deserved=_optional_resources(q, "deserved", f"{f}.deserved"),
        reclaimable=_bool(q.get("reclaimable", True), field=f"{f}.reclaimable"),
        parent=_optional_str(q.get("parent"), field=f"{f}.parent"),
    )


def _compact_task(t: object, f: str) -> TaskSpec:
    if not isinstance(t, Mapping):
        raise InputError("expected a map", field=f)
    check_keys(t, _TASK_KEYS, field=f)
    name = t.get("name", DEFAULT_TASK)
    if not isinstance(name, str) or not is_dns_label(name):
        raise InputError(f"invalid task name {shown(name)}", field=f"{f}.name")
    if "replicas" not in t:
        raise InputError("missing replicas", field=f"{f}.replicas")
    replicas = require_int(t["replicas"], field=f"{f}.replicas", minimum=1, maximum=MAX_JOB_PODS)
    min_available = None
    if t.get("minAvailable") is not None:
        min_available = require_int(t["minAvailable"], field=f"{f}.minAvailable", minimum=1)
        if min_available > replicas:
            raise InputError(
                f"minAvailable {min_available} is greater than replicas {replicas}",
                field=f"{f}.minAvailable",
            )
    return TaskSpec(
        name=name,
        replicas=replicas,
        requests=parse_resources(t.get("requests"), field=f"{f}.requests"),
        min_available=min_available,
    )


def _compact_job(j: object, f: str, namespace: str) -> JobSpec:
    if not isinstance(j, Mapping):
        raise InputError("expected a map", field=f)
    check_keys(j, _JOB_KEYS, field=f)
    name = require_str(j.get("name"), field=f"{f}.name")
    if not is_dns_subdomain(name):
        raise InputError(f"invalid job name {shown(name)}", field=f"{f}.name")
    ns = j.get("namespace", namespace)
    if not isinstance(ns, str) or not is_dns_label(ns):
        raise InputError(f"invalid namespace {shown(ns)}", field=f"{f}.namespace")
    queue = require_str(j.get("queue", DEFAULT_QUEUE), field=f"{f}.queue")
    if "tasks" in j:
        if "replicas" in j or "requests" in j:
            raise InputError(
                "give either tasks or the shorthand replicas + requests, not both",
                field=f"{f}.tasks",
            )
        raw_tasks = j["tasks"]
        if not isinstance(raw_tasks, list) or not raw_tasks:
            raise InputError("expected a non-empty list", field=f"{f}.tasks")
        tasks = tuple(_compact_task(t, f"{f}.tasks[{k}]") for k, t in enumerate(raw_tasks))
        names = [t.name for t in tasks]
        for k, n in enumerate(names):
            if n in names[:k]:
                raise InputError(f"duplicate task name {shown(n)}", field=f"{f}.tasks[{k}].name")
    else:
        if "replicas" not in j:
            raise InputError("missing replicas (or tasks)", field=f"{f}.replicas")
        replicas = require_int(
            j["replicas"], field=f"{f}.replicas", minimum=1, maximum=MAX_JOB_PODS
        )
        tasks = (
            TaskSpec(
                name=DEFAULT_TASK,
                replicas=replicas,
                requests=parse_resources(j.get("requests"), field=f"{f}.requests"),
            ),
        )
    total = sum(t.replicas for t in tasks)
    min_available = total
    if j.get("minAvailable") is not None:
        min_available = require_int(j["minAvailable"], field=f"{f}.minAvailable", minimum=1)
        if min_available > total:
            raise InputError(
                f"minAvailable {min_available} is greater than the job's {total} replicas",
                field=f"{f}.minAvailable",
            )
    if "duration" not in j:
        raise InputError("missing duration", field=f"{f}.duration")
    outcome = _outcome(j.get("outcome", "succeed"), field=f"{f}.outcome")
    dialect, pod_group, replica_key = _compact_dialect(j, f, tasks)
    return JobSpec(
        name=name,
        namespace=ns,
        queue=queue,
        arrival=parse_seconds(j.get("arrival", 0), field=f"{f}.arrival"),
        duration=parse_seconds(j["duration"], field=f"{f}.duration"),
        tasks=tasks,
        min_available=min_available,
        priority_class=_optional_str(j.get("priorityClass"), field=f"{f}.priorityClass"),
        outcome=outcome,
        end_fraction=_end_fraction(j.get("endFraction"), outcome, field=f"{f}.endFraction"),
        network_topology=parse_network_topology(j.get("networkTopology"), f"{f}.networkTopology"),
        dialect=dialect,
        pod_group=pod_group,
        replica_key=replica_key,
    )


def _compact_dialect(
    j: Mapping[str, Any], f: str, tasks: Sequence[TaskSpec]
) -> tuple[Dialect, str, str]:
    """A compact job's ``dialect`` (default ``volcano``) and, for ``workload``, its
    ``podGroup`` (default :data:`DEFAULT_POD_GROUP`) and ``replicaKey``. What only a
    Volcano PodGroup can say (a role's own minimum, a network topology) is refused for
    the others."""
    dialect = j.get("dialect", "volcano")
    if dialect not in DIALECTS:
        raise InputError(
            f"expected one of {', '.join(DIALECTS)}, got {shown(dialect)}", field=f"{f}.dialect"
        )
    if dialect != "volcano":
        if j.get("networkTopology") is not None:
            raise InputError(
                "only a Volcano PodGroup has a network topology", field=f"{f}.networkTopology"
            )
        for k, t in enumerate(tasks):
            if t.min_available is not None:
                raise InputError(
                    f"a {dialect} gang has no minimum per role (only Volcano's minTaskMember)",
                    field=f"{f}.tasks[{k}].minAvailable",
                )
    if dialect != "workload":
        for key in ("podGroup", "replicaKey"):
            if key in j:
                raise InputError("only a job of dialect workload has one", field=f"{f}.{key}")
        return dialect, "", ""  # type: ignore[return-value]
    pod_group = j.get("podGroup", DEFAULT_POD_GROUP)
    if not isinstance(pod_group, str) or not is_dns_label(pod_group):
        raise InputError(f"invalid pod group name {shown(pod_group)}", field=f"{f}.podGroup")
    replica_key = j.get("replicaKey", "")
    if not isinstance(replica_key, str) or (replica_key and not is_dns_label(replica_key)):
        raise InputError(f"invalid replica key {shown(replica_key)}", field=f"{f}.replicaKey")
    return "workload", pod_group, replica_key


def _container_requests(c: object, field: str) -> dict[str, float]:
    if not isinstance(c, Mapping):
        raise InputError("expected a map", field=field)
    resources = c.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise InputError("expected a map", field=f"{field}.resources")
    # Kubernetes defaults a missing request to the limit.
    out = parse_resources(resources.get("limits"), field=f"{field}.resources.limits")
    out.update(parse_resources(resources.get("requests"), field=f"{field}.resources.requests"))
    return out


def _pod_requests(spec: Mapping[str, Any]) -> dict[str, float]:
    """A pod's effective requests: the sum over containers, at least each init container."""
    total: dict[str, float] = {}
    containers = spec.get("containers") or []
    if not isinstance(containers, list):
        raise InputError("expected a list", field="spec.containers")
    for i, c in enumerate(containers):
        for name, amount in _container_requests(c, f"spec.containers[{i}]").items():
            total[name] = total.get(name, 0.0) + amount
    inits = spec.get("initContainers") or []
    if not isinstance(inits, list):
        raise InputError("expected a list", field="spec.initContainers")
    for i, c in enumerate(inits):
        for name, amount in _container_requests(c, f"spec.initContainers[{i}]").items():
            total[name] = max(total.get(name, 0.0), amount)
    return total


def _sim_facts(
    annotations: Mapping[str, Any], pods: Sequence[_Pod], *, prefix: str
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
        outcome = _outcome(found[0], field=found[1])
    end_fraction = 1.0
    found = lookup(ANNOTATION_END_FRACTION)
    if found is not None:
        end_fraction = _end_fraction(found[0], outcome, field=found[1])
    return arrival, duration, outcome, end_fraction


def _claim_volumes(spec: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """The pod's volumes that attach a claim (by name, or an ephemeral one), checked."""
    out = []
    volumes = spec.get("volumes") or []
    if not isinstance(volumes, list):
        raise InputError("expected a list", field="spec.volumes")
    for i, v in enumerate(volumes):
        f = f"spec.volumes[{i}]"
        if not isinstance(v, Mapping):
            raise InputError("expected a map", field=f)
        if "persistentVolumeClaim" in v:
            pvc = v["persistentVolumeClaim"]
            if not isinstance(pvc, Mapping):
                raise InputError("expected a map", field=f"{f}.persistentVolumeClaim")
            require_str(pvc.get("claimName"), field=f"{f}.persistentVolumeClaim.claimName")
        elif "ephemeral" in v:
            eph = v["ephemeral"]
            template = eph.get("volumeClaimTemplate") if isinstance(eph, Mapping) else None
            if not isinstance(template, Mapping):
                raise InputError("expected a map", field=f"{f}.ephemeral.volumeClaimTemplate")
            try:
                parse_pvc({"metadata": {"name": "x"}, "spec": template.get("spec")})
            except InputError as exc:
                raise InputError(
                    exc.message, field=f"{f}.ephemeral.volumeClaimTemplate.{exc.field}"
                ) from None
        else:
            continue
        name = require_str(v.get("name"), field=f"{f}.name")
        if not is_dns_label(name):
            raise InputError(f"invalid volume name {shown(name)}", field=f"{f}.name")
        out.append(copy.deepcopy(dict(v)))
    return tuple(out)


def _resource_claims(spec: Mapping[str, Any], namespace: str) -> tuple[Mapping[str, Any], ...]:
    """The pod's ``spec.resourceClaims`` entries (DRA), checked, as written."""
    entries = spec.get("resourceClaims")
    if not entries:
        return ()
    refs = pod_device_claims(spec, {}, namespace)  # (checks each entry)
    names = [r.name for r in refs]
    for i, name in enumerate(names):
        if not is_dns_label(name):
            raise InputError(
                f"invalid claim entry name {shown(name)}", field=f"spec.resourceClaims[{i}].name"
            )
        if name in names[:i]:
            raise InputError(f"entry {name} is given twice", field=f"spec.resourceClaims[{i}].name")
    return tuple(copy.deepcopy(dict(e)) for e in entries)


def _tasks_from_pods(pods: Sequence[_Pod]) -> tuple[TaskSpec, ...]:
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


def _podgroup_job(
    obj: Mapping[str, Any], name: str, namespace: str, pods: Sequence[_Pod]
) -> JobSpec:
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
        queue=_optional_str(spec.get("queue"), field="spec.queue") or DEFAULT_QUEUE,
        arrival=arrival,
        duration=duration,
        tasks=tuple(by_name[t.name] for t in tasks),
        min_available=min_member,
        priority_class=_optional_str(spec.get("priorityClassName"), field="spec.priorityClassName"),
        outcome=outcome,
        end_fraction=end_fraction,
        network_topology=parse_network_topology(
            spec.get("networkTopology"), "spec.networkTopology"
        ),
    )


def _volcano_job(obj: Mapping[str, Any], name: str, namespace: str) -> JobSpec:
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
            requests = _pod_requests(t.template.get("spec") or {})
        except InputError as exc:
            raise InputError(exc.message, field=f"{f}.{exc.field}" if exc.field else f) from None
        duration = outcome = end_fraction = None
        if ANNOTATION_DURATION in tann:
            duration = parse_seconds(
                tann[ANNOTATION_DURATION], field=f"{f}.metadata.annotations[{ANNOTATION_DURATION}]"
            )
            durations.append(duration)
        if ANNOTATION_OUTCOME in tann:
            outcome = _outcome(
                tann[ANNOTATION_OUTCOME], field=f"{f}.metadata.annotations[{ANNOTATION_OUTCOME}]"
            )
        if ANNOTATION_END_FRACTION in tann:
            end_fraction = _end_fraction(
                tann[ANNOTATION_END_FRACTION],
                outcome or "fail",
                field=f"{f}.metadata.annotations[{ANNOTATION_END_FRACTION}]",
            )
        given = t.min_available_given
        try:
            claims = _resource_claims(t.template.get("spec") or {}, namespace)
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


def _single_pod_job(pod: _Pod) -> JobSpec:
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
_JOIN = {
    "volcano": f"annotation {ANNOTATION_GROUP_NAME}",
    "coscheduling": f"label {COSCHEDULING_LABEL}",
    "workload": "spec.workloadRef",
    "podgroup": "spec.schedulingGroup.podGroupName",
}
_JOIN_FIELD = {
    "volcano": f"metadata.annotations[{ANNOTATION_GROUP_NAME}]",
    "coscheduling": f"metadata.labels[{COSCHEDULING_LABEL}]",
    "workload": "spec.workloadRef.name",
    "podgroup": "spec.schedulingGroup.podGroupName",
}
_OBJECT = {
    "volcano": "PodGroup",
    "coscheduling": "PodGroup (scheduling.x-k8s.io)",
    "workload": "Workload",
    "podgroup": "PodGroup (scheduling.k8s.io/v1alpha2)",
}


def _podgroup_dialect(obj: Mapping[str, Any]) -> Dialect:
    """A ``kind: PodGroup``'s dialect, by its ``apiVersion`` (none: Volcano's)."""
    if obj.get("apiVersion") is None:
        return "volcano"
    dialect = gang_apis.podgroup_dialect(obj)
    return "podgroup" if dialect == "workload" else dialect  # type: ignore[return-value]


def _pod_ref(
    annotations: Mapping[str, Any], labels: Mapping[str, Any], spec: Mapping[str, Any]
) -> GangKey | None:
    """The gang a pod joins, as the scheduler reads it (:func:`pumice.api.parse.parse_pod`):
    Volcano's annotation wins, then ``spec.schedulingGroup``, ``spec.workloadRef``, the
    coscheduling label."""
    group = annotations.get(ANNOTATION_GROUP_NAME)
    if group:
        return ("volcano", str(group), "", "")
    if spec.get("schedulingGroup") is not None:
        sg = spec["schedulingGroup"]
        if not isinstance(sg, Mapping):
            raise InputError("expected a map", field="spec.schedulingGroup")
        name = require_str(sg.get("podGroupName"), field="spec.schedulingGroup.podGroupName")
        return ("podgroup", name, "", "")
    if spec.get("workloadRef") is not None:
        ref = spec["workloadRef"]
        if not isinstance(ref, Mapping):
            raise InputError("expected a map", field="spec.workloadRef")
        name = require_str(ref.get("name"), field="spec.workloadRef.name")
        pg = require_str(ref.get("podGroup"), field="spec.workloadRef.podGroup")
        key = _optional_str(
            ref.get("podGroupReplicaKey"), field="spec.workloadRef.podGroupReplicaKey"
        )
        return ("workload", name, pg, key or "")
    label = labels.get(COSCHEDULING_LABEL)
    if label:
        return ("coscheduling", str(label), "", "")
    return None


def _pods_priority_class(pods: Sequence[_Pod]) -> str | None:
    """The priority class of a gang of another dialect: its pods' (which must agree)."""
    classes = {p.priority_class for p in pods}
    if len(classes) > 1:
        names = ", ".join(sorted(c or "(none)" for c in classes))
        raise InputError(
            f"its pods name different priority classes ({names}); the simulator gives a gang one",
            field="spec.priorityClassName",
        )
    return classes.pop()


def _dialect_job(
    obj: Mapping[str, Any],
    dialect: Dialect,
    name: str,
    namespace: str,
    pods: Sequence[_Pod],
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
        queue=_optional_str(queue, field=f"metadata.annotations[{ANNOTATION_QUEUE_NAME}]")
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
