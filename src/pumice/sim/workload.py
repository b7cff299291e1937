"""Workloads for ``pumice simulate``: the jobs a simulation replays, and how they are read.

A :class:`Workload` is the simulator's whole input on the job side: jobs (gangs of one or
more task roles, each with an arrival time and a run time), the queues they go to and the
priority classes they name. It is a plain value. Loaders produce it (:func:`load_workload`
here for files, :mod:`pumice.sim.synthetic` for generated ones, :mod:`pumice.sim.traces`
for public traces); :func:`job_objects`, :func:`queue_objects` and
:func:`priority_class_objects` turn it into the Kubernetes-shaped objects the scheduling
core reads, so the simulator never builds objects by hand and a workload can be written
out as ordinary manifests.

Units are pumice's canonical ones (:mod:`pumice.api.quantity`): cpu in millicores, memory
in bytes, every other resource (``nvidia.com/gpu``, ``pods``) a count. Mappings inside the
frozen dataclasses are plain dicts for speed and pickling; treat them as read-only.

Simulation facts travel on objects as annotations (all values are strings):

- ``pumice.sim/arrival``: seconds after the start of the simulation (or a duration such as
  ``5m`` or ``1h30m`` when read);
- ``pumice.sim/duration``: seconds a task runs once started;
- ``pumice.sim/outcome`` (``succeed``, ``fail`` or ``cancel``) and
  ``pumice.sim/end-fraction`` (the share of the duration after which a failing or
  cancelled job ends); both are omitted for a job that succeeds.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml

from pumice.api.quantity import CPU, MEMORY, to_canonical
from pumice.errors import InputError

GPU = "nvidia.com/gpu"

ANNOTATION_ARRIVAL = "pumice.sim/arrival"
ANNOTATION_DURATION = "pumice.sim/duration"
ANNOTATION_OUTCOME = "pumice.sim/outcome"
ANNOTATION_END_FRACTION = "pumice.sim/end-fraction"
ANNOTATION_GROUP_NAME = "scheduling.k8s.io/group-name"
ANNOTATION_TASK_SPEC = "volcano.sh/task-spec"
ANNOTATION_TASK_NAME = "volcano.sh/task-name"  # also accepted, as pumice.api.parse does
ANNOTATION_QUEUE_NAME = "scheduling.volcano.sh/queue-name"

PODGROUP_API = "scheduling.volcano.sh/v1beta1"
QUEUE_API = "scheduling.volcano.sh/v1beta1"
PRIORITY_CLASS_API = "scheduling.k8s.io/v1"
WORKLOAD_API = "pumice.io/v1alpha1"

DEFAULT_NAMESPACE = "default"
DEFAULT_QUEUE = "default"
DEFAULT_TASK = "task"
SIM_IMAGE = "pumice.io/sim-task:latest"

Outcome = Literal["succeed", "fail", "cancel"]
OUTCOMES: tuple[str, ...] = ("succeed", "fail", "cancel")


# --------------------------------------------------------------------------- data model


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """One role of a job (``worker``, ``ps``): ``replicas`` identical pods.

    ``requests`` are per pod, in canonical units. ``min_available`` is the role's own
    minimum (PodGroup ``minTaskMember``); ``None`` means the role has none.
    """

    name: str
    replicas: int
    requests: Mapping[str, float]
    min_available: int | None = None


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One gang: a PodGroup and its pods, as the simulator submits it at ``arrival``.

    Every task of the job runs ``duration`` seconds once started; a job whose ``outcome``
    is ``fail`` or ``cancel`` ends after ``end_fraction * duration`` instead.
    ``min_available`` is the PodGroup's ``minMember``: 1 <= min_available <= total
    replicas (loaders guarantee it).
    """

    name: str
    namespace: str
    queue: str
    arrival: float
    duration: float
    tasks: tuple[TaskSpec, ...]
    min_available: int
    priority_class: str | None = None
    outcome: Outcome = "succeed"
    end_fraction: float = 1.0

    @property
    def replicas(self) -> int:
        """Total pods of the job over all roles."""
        return sum(t.replicas for t in self.tasks)

    def total(self, resource: str) -> float:
        """Sum of ``resource`` requested by all pods of the job."""
        return sum(t.requests.get(resource, 0.0) * t.replicas for t in self.tasks)


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """A Volcano Queue. Resource maps are canonical; ``None`` means not set."""

    name: str
    weight: int = 1
    capability: Mapping[str, float] | None = None
    guarantee: Mapping[str, float] | None = None
    deserved: Mapping[str, float] | None = None
    reclaimable: bool = True
    parent: str | None = None


@dataclass(frozen=True, slots=True)
class Workload:
    """What a simulation replays.

    ``jobs`` are sorted by ``(arrival, namespace, name)``. Every job's queue is in
    ``queues`` (or was declared known by the caller of the loader), every priority class
    it names is in ``priority_classes``. ``skipped`` counts input rows or objects a loader
    left out with a warning; ``warnings`` holds the first few messages.
    """

    jobs: tuple[JobSpec, ...]
    queues: tuple[QueueSpec, ...]
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    skipped: int = 0
    warnings: tuple[str, ...] = ()


def sort_jobs(jobs: Iterable[JobSpec]) -> tuple[JobSpec, ...]:
    """Jobs in the order a :class:`Workload` keeps them: arrival, then namespace and name."""
    return tuple(sorted(jobs, key=lambda j: (j.arrival, j.namespace, j.name)))


# --------------------------------------------------------------------------- rendering


def format_seconds(seconds: float) -> str:
    """Seconds as an annotation value: ``"90"`` or ``"12.5"``, exact (``repr``) for floats."""
    if float(seconds).is_integer():
        return str(int(seconds))
    return repr(float(seconds))


def render_quantity(name: str, amount: float) -> str:
    """Render a canonical amount as a Kubernetes quantity string.

    cpu is always millicores (``"1500m"``); memory and storage are ``Gi``/``Mi`` when exact,
    else bytes; counts are integers. Fractions below the unit are rounded up, so what is
    rendered never asks for less than the model holds.
    """
    if name == CPU:
        return f"{math.ceil(round(amount, 6))}m"
    if name == MEMORY or name.endswith("storage"):
        b = math.ceil(round(amount, 3))
        for suffix, factor in (("Gi", 2**30), ("Mi", 2**20)):
            if b >= factor and b % factor == 0:
                return f"{b // factor}{suffix}"
        return str(b)
    if float(amount).is_integer():
        return str(int(amount))
    return repr(float(amount))


def render_resources(resources: Mapping[str, float]) -> dict[str, str]:
    """A canonical resource map as a Kubernetes ``ResourceList`` (names sorted)."""
    return {name: render_quantity(name, resources[name]) for name in sorted(resources)}


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
    """The name of pod ``index`` of ``task``: ``{job}-{task}-{index}``."""
    return f"{job.name}-{task.name}-{index}"


def job_objects(
    job: JobSpec,
    *,
    scheduler_name: str = "volcano",
    priority_classes: Mapping[str, int] | None = None,
) -> list[dict[str, Any]]:
    """The PodGroup and Pods of ``job``, as a job controller would have created them.

    The PodGroup comes first, then the pods in role order. Pods carry the group and task
    annotations, the simulation annotations, requests as quantity strings (extended
    resources such as GPUs also as limits, as Kubernetes requires) and phase ``Pending``.
    When ``priority_classes`` is given, pods also get ``spec.priority`` (the value an
    admission controller would have filled in).
    """
    annotations = _sim_annotations(job)
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
    priority = None
    if job.priority_class and priority_classes is not None:
        priority = priority_classes.get(job.priority_class)
    for task in job.tasks:
        requests = render_resources(task.requests)
        limits = {k: v for k, v in requests.items() if k not in (CPU, MEMORY)}
        resources: dict[str, Any] = {"requests": requests}
        if limits:
            resources["limits"] = limits
        for i in range(task.replicas):
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
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": pod_name(job, task, i),
                        "namespace": job.namespace,
                        "annotations": {
                            ANNOTATION_GROUP_NAME: job.name,
                            ANNOTATION_TASK_SPEC: task.name,
                            **annotations,
                        },
                    },
                    "spec": spec,
                    "status": {"phase": "Pending"},
                }
            )
    return objects


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
    """``workload`` as a compact ``kind: Workload`` document that :func:`load_workload` reads
    back to an equal workload (apart from ``skipped`` and ``warnings``)."""

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
        jobs.append(jd)
    return {
        "apiVersion": WORKLOAD_API,
        "kind": "Workload",
        "priorityClasses": dict(workload.priority_classes),
        "queues": queues,
        "jobs": jobs,
    }


# --------------------------------------------------------------------------- parsing helpers

_DURATION = re.compile(r"(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h|d))+")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def parse_seconds(value: object, *, field: str | None = None) -> float:
    """Parse a time span to seconds: a number (``90``, ``"12.5"``) or a Go-style duration
    (``"30s"``, ``"5m"``, ``"1h30m"``, ``"250ms"``; ``"2d"`` for days is accepted too).

    Raises :class:`InputError` naming ``field`` for anything else, and for negative or
    non-finite values.
    """
    if isinstance(value, bool):
        raise InputError(f"invalid duration {value!r}", field=field)
    seconds: float
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            if not _DURATION.fullmatch(text):
                raise InputError(
                    f"invalid duration {value!r}: expected seconds or e.g. 30s, 5m, 1h30m",
                    field=field,
                ) from None
            seconds = sum(
                float(m.group(1)) * _UNIT_SECONDS[m.group(2)] for m in _DURATION_PART.finditer(text)
            )
    else:
        raise InputError(f"invalid duration {value!r}", field=field)
    if not math.isfinite(seconds) or seconds < 0:
        raise InputError(f"invalid duration {value!r}: must be finite and >= 0", field=field)
    return seconds


def is_dns_label(name: str) -> bool:
    """True when ``name`` is a valid Kubernetes DNS label (task, queue and namespace names)."""
    return len(name) <= 63 and _DNS_LABEL.fullmatch(name) is not None


def is_dns_subdomain(name: str) -> bool:
    """True when ``name`` is a valid Kubernetes object name (DNS subdomain)."""
    return len(name) <= 253 and _DNS_SUBDOMAIN.fullmatch(name) is not None


def parse_resources(value: object, *, field: str) -> dict[str, float]:
    """A ``{resource: quantity}`` map in canonical units; :class:`InputError` names the
    entry's field (``field.cpu``) when a quantity is bad."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"expected a map of resource quantities, got {value!r}", field=field)
    out: dict[str, float] = {}
    for name, quantity in value.items():
        if not isinstance(name, str) or not name:
            raise InputError(f"invalid resource name {name!r}", field=field)
        out[name] = to_canonical(name, quantity, field=f"{field}.{name}")
    return out


def require_int(value: object, *, field: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise InputError(f"expected an integer, got {value!r}", field=field)
    if value < minimum:
        raise InputError(f"must be >= {minimum}, got {value}", field=field)
    return value


def require_str(value: object, *, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"expected a non-empty string, got {value!r}", field=field)
    return value


def check_keys(d: Mapping[str, Any], allowed: Collection[str], *, field: str | None) -> None:
    unknown = sorted(str(k) for k in d if k not in allowed)
    if unknown:
        where = f"{field}." if field else ""
        raise InputError(
            f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
            f"(allowed: {', '.join(sorted(allowed))})",
            field=f"{where}{unknown[0]}",
        )


def _outcome(value: object, *, field: str) -> Outcome:
    if value not in OUTCOMES:
        raise InputError(f"expected one of {', '.join(OUTCOMES)}, got {value!r}", field=field)
    return value  # type: ignore[return-value]


def _end_fraction(value: object, outcome: str, *, field: str) -> float:
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InputError(f"expected a number in (0, 1], got {value!r}", field=field)
    try:
        fraction = float(value)
    except ValueError:
        raise InputError(f"expected a number in (0, 1], got {value!r}", field=field) from None
    if not 0 < fraction <= 1:
        raise InputError(f"expected a number in (0, 1], got {value!r}", field=field)
    if outcome == "succeed" and fraction != 1:
        raise InputError("only a job that fails or is cancelled ends early", field=field)
    return fraction


# --------------------------------------------------------------------------- reading files

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


def read_documents(path: str | os.PathLike[str]) -> list[Any]:
    """The documents of a YAML (multi-document) or JSON file; ``kind: List`` is not expanded.

    A JSON file holding an array yields its elements. Empty YAML documents are dropped.
    """
    file = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=file) from exc
    if file.lower().endswith(".json"):
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc}", file=file) from exc
        return list(doc) if isinstance(doc, list) else [doc]
    try:
        docs = list(yaml.load_all(data, Loader=yaml.CSafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"invalid YAML{where}: {problem}", file=file) from exc
    return [d for d in docs if d is not None]


def iter_objects(docs: Iterable[Any], *, file: str) -> Iterator[Mapping[str, Any]]:
    """Objects of ``docs`` with ``kind: List`` (and ``*List``) documents expanded."""
    for i, doc in enumerate(docs):
        if not isinstance(doc, Mapping):
            raise InputError(f"document {i + 1} is not a map", file=file)
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise InputError("items must be a list", file=file, obj=kind, field="items")
            yield from iter_objects(items, file=file)
        else:
            yield doc


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


@dataclass(slots=True)
class _Builder:
    """Collects what the files declare, then checks references and builds the workload."""

    jobs: dict[tuple[str, str], JobSpec] = field(default_factory=dict)
    job_origin: dict[tuple[str, str], _Origin] = field(default_factory=dict)
    queues: dict[str, QueueSpec] = field(default_factory=dict)
    queue_origin: dict[str, _Origin] = field(default_factory=dict)
    priority_classes: dict[str, int] = field(default_factory=dict)
    pc_origin: dict[str, _Origin] = field(default_factory=dict)
    podgroups: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    pods: list[_Pod] = field(default_factory=list)
    skipped: int = 0
    warnings: list[str] = field(default_factory=list)

    # ---- declarations shared by both forms

    def add_job(self, job: JobSpec, origin: _Origin) -> None:
        key = (job.namespace, job.name)
        if key in self.jobs:
            first = self.job_origin[key]
            raise origin.error(
                f"duplicate job {job.namespace}/{job.name} (first declared in {first.file})",
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
        if kind == "Workload" or (kind is None and ("jobs" in obj or "queues" in obj)):
            self.add_compact(obj, file)
        elif kind == "PodGroup":
            self.podgroups.append((file, obj))
        elif kind == "Pod":
            self.add_pod(obj, file)
        elif kind == "Queue":
            self.add_queue_object(obj, file)
        elif kind == "PriorityClass":
            meta = _metadata(obj, file, "PriorityClass")
            name = require_str(meta.get("name"), field="metadata.name")
            self.add_priority_class(
                name, obj.get("value", 0), _Origin(file, f"PriorityClass {name}"), "value"
            )
        else:
            meta = obj.get("metadata")
            name = meta.get("name") if isinstance(meta, Mapping) else None
            what = " ".join(str(x) for x in (kind or "an object without kind", name) if x)
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
            raise origin.error(f"expected apiVersion {WORKLOAD_API}, got {api!r}", "apiVersion")
        namespace = doc.get("namespace", DEFAULT_NAMESPACE)
        if not isinstance(namespace, str) or not is_dns_label(namespace):
            raise origin.error(f"invalid namespace {namespace!r}", "namespace")
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
                    f"invalid task name {task!r}",
                    field=f"metadata.annotations[{ANNOTATION_TASK_SPEC}]",
                )
            pc = _optional_str(spec.get("priorityClassName"), field="spec.priorityClassName")
            queue = _optional_str(
                annotations.get(ANNOTATION_QUEUE_NAME),
                field=f"metadata.annotations[{ANNOTATION_QUEUE_NAME}]",
            )
        except InputError as exc:
            raise exc.located(file=file, obj=where) from None
        self.pods.append(_Pod(file, name, namespace, task, requests, annotations, pc, queue))

    def build_manifest_jobs(self) -> None:
        groups: dict[tuple[str, str], list[_Pod]] = {}
        singles: list[_Pod] = []
        for pod in self.pods:
            group = pod.annotations.get(ANNOTATION_GROUP_NAME)
            if group:
                groups.setdefault((pod.namespace, str(group)), []).append(pod)
            else:
                singles.append(pod)
        seen: set[tuple[str, str]] = set()
        for file, obj in self.podgroups:
            meta = _metadata(obj, file, "PodGroup")
            name = require_str(meta.get("name"), field="metadata.name")
            namespace = meta.get("namespace") or DEFAULT_NAMESPACE
            key = (namespace, name)
            where = f"PodGroup {namespace}/{name}"
            origin = _Origin(file, where, "", "spec.queue", "spec.priorityClassName")
            if key in seen:
                raise origin.error(f"duplicate PodGroup {namespace}/{name}", "metadata.name")
            seen.add(key)
            pods = groups.pop(key, [])
            if not pods:
                raise origin.error(
                    f"no pod names this PodGroup in annotation {ANNOTATION_GROUP_NAME}",
                    "metadata.name",
                )
            try:
                job = _podgroup_job(obj, name, namespace, pods)
            except InputError as exc:
                raise exc.located(file=file, obj=where) from None
            self.add_job(job, origin)
        for (namespace, group), pods in sorted(groups.items()):
            pod = pods[0]
            raise InputError(
                f"annotation {ANNOTATION_GROUP_NAME} names PodGroup {group}, "
                "which no file declares",
                file=pod.file,
                obj=f"Pod {namespace}/{pod.name}",
                field=f"metadata.annotations[{ANNOTATION_GROUP_NAME}]",
            )
        for pod in singles:
            where = f"Pod {pod.namespace}/{pod.name}"
            try:
                job = _single_pod_job(pod)
            except InputError as exc:
                raise exc.located(file=pod.file, obj=where) from None
            queue_field = f"metadata.annotations[{ANNOTATION_QUEUE_NAME}]"
            self.add_job(job, _Origin(pod.file, where, "", queue_field, "spec.priorityClassName"))

    # ---- the end

    def finish(
        self, known_queues: Collection[str], known_priority_classes: Mapping[str, int]
    ) -> Workload:
        self.build_manifest_jobs()
        queue_names = set(self.queues) | set(known_queues)
        for key, job in self.jobs.items():
            origin = self.job_origin[key]
            if job.queue not in queue_names:
                raise origin.error(
                    f"queue {job.queue!r} is not declared by any file "
                    "(add it under queues: or as a Queue object)",
                    origin.queue_field,
                )
            if (
                job.priority_class is not None
                and job.priority_class not in self.priority_classes
                and job.priority_class not in known_priority_classes
            ):
                raise origin.error(
                    f"priority class {job.priority_class!r} is not declared by any file",
                    origin.pc_field,
                )
        for name, queue in self.queues.items():
            if queue.parent is not None and queue.parent not in queue_names:
                raise self.queue_origin[name].error(
                    f"parent queue {queue.parent!r} is not declared by any file", "parent"
                )
        pcs = dict(known_priority_classes)
        pcs.update(self.priority_classes)
        return Workload(
            jobs=sort_jobs(self.jobs.values()),
            queues=tuple(self.queues.values()),
            priority_classes=pcs,
            skipped=self.skipped,
            warnings=tuple(self.warnings),
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
    - The compact form: a ``kind: Workload`` document (``apiVersion: pumice.io/v1alpha1``)
      with ``queues``, ``priorityClasses`` and ``jobs``.

    Objects of other kinds (Nodes, say) are skipped and counted. Every job's queue must be
    declared by some file or be in ``known_queues``; every priority class it names must be
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
    return builder.finish(known_queues, known_priority_classes or {})


# --------------------------------------------------------------------------- form details


def _metadata(obj: Mapping[str, Any], file: str, kind: str) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not meta.get("name"):
        raise InputError("missing metadata.name", file=file, obj=kind, field="metadata.name")
    return meta


def _bool(value: object, *, field: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"expected true or false, got {value!r}", field=field)
    return value


def _optional_str(value: object, *, field: str) -> str | None:
    if value is None or value == "":
        return None
    return require_str(value, field=field)


def _optional_resources(d: Mapping[str, Any], key: str, field: str) -> dict[str, float] | None:
    if d.get(key) is None:
        return None
    return parse_resources(d[key], field=field)


def _compact_queue(q: object, f: str) -> QueueSpec:
    if not isinstance(q, Mapping):
        raise InputError("expected a map", field=f)
    check_keys(q, _QUEUE_KEYS, field=f)
    name = require_str(q.get("name"), field=f"{f}.name")
    if not is_dns_label(name):
        raise InputError(f"invalid queue name {name!r}", field=f"{f}.name")
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
        raise InputError(f"invalid task name {name!r}", field=f"{f}.name")
    if "replicas" not in t:
        raise InputError("missing replicas", field=f"{f}.replicas")
    replicas = require_int(t["replicas"], field=f"{f}.replicas", minimum=1)
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
        raise InputError(f"invalid job name {name!r}", field=f"{f}.name")
    ns = j.get("namespace", namespace)
    if not isinstance(ns, str) or not is_dns_label(ns):
        raise InputError(f"invalid namespace {ns!r}", field=f"{f}.namespace")
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
                raise InputError(f"duplicate task name {n!r}", field=f"{f}.tasks[{k}].name")
    else:
        if "replicas" not in j:
            raise InputError("missing replicas (or tasks)", field=f"{f}.replicas")
        replicas = require_int(j["replicas"], field=f"{f}.replicas", minimum=1)
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
    )


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


def _tasks_from_pods(pods: Sequence[_Pod]) -> tuple[TaskSpec, ...]:
    order: list[str] = []
    shapes: dict[str, dict[str, float]] = {}
    counts: dict[str, int] = {}
    for pod in pods:
        if pod.task not in shapes:
            order.append(pod.task)
            shapes[pod.task] = pod.requests
            counts[pod.task] = 0
        elif shapes[pod.task] != pod.requests:
            raise InputError(
                f"pod {pod.namespace}/{pod.name} requests {render_resources(pod.requests)} "
                f"but other pods of task {pod.task!r} request "
                f"{render_resources(shapes[pod.task])}; give each shape its own "
                f"{ANNOTATION_TASK_SPEC}",
                field="spec.containers",
            )
        counts[pod.task] += 1
    return tuple(TaskSpec(name=t, replicas=counts[t], requests=shapes[t]) for t in order)


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
        by_name[task_name] = TaskSpec(
            task_name, by_name[task_name].replicas, by_name[task_name].requests, m
        )
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
        tasks=(TaskSpec(name=pod.task, replicas=1, requests=pod.requests),),
        min_available=1,
        priority_class=pod.priority_class,
        outcome=outcome,
        end_fraction=end_fraction,
    )
