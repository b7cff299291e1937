"""The workload data model of ``pumice simulate``: the jobs a simulation replays.

A :class:`Workload` is the simulator's whole input on the job side: jobs (gangs of one or
more task roles, each with an arrival time and a run time), the queues they go to and the
priority classes they name. It is a plain value. Loaders produce it
(:mod:`pumice.sim.loader` for files, :mod:`pumice.sim.synthetic` for generated ones,
:mod:`pumice.sim.traces` for public traces); :mod:`pumice.sim.objects` turns it into the
Kubernetes-shaped objects the scheduling core reads, so the simulator never builds objects
by hand and a workload can be written out as ordinary manifests. This module holds only the
values and the names they travel under, and imports none of those modules, so every
producer and consumer can depend on it without an import cycle.

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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pumice.api.parse import DURATION_ANNOTATION, job_uid
from pumice.api.topology_spec import NetworkTopology

GPU = "nvidia.com/gpu"

ANNOTATION_ARRIVAL = "pumice.sim/arrival"
ANNOTATION_DURATION = DURATION_ANNOTATION  # (a pod says how long it runs)
ANNOTATION_OUTCOME = "pumice.sim/outcome"
ANNOTATION_END_FRACTION = "pumice.sim/end-fraction"
ANNOTATION_GROUP_NAME = "scheduling.k8s.io/group-name"
ANNOTATION_TASK_SPEC = "volcano.sh/task-spec"
ANNOTATION_TASK_NAME = "volcano.sh/task-name"  # also accepted, as pumice.api.parse does
ANNOTATION_QUEUE_NAME = "scheduling.volcano.sh/queue-name"

VOLCANO_JOB_API = "batch.volcano.sh/v1alpha1"

PODGROUP_API = "scheduling.volcano.sh/v1beta1"
QUEUE_API = "scheduling.volcano.sh/v1beta1"
PRIORITY_CLASS_API = "scheduling.k8s.io/v1"
WORKLOAD_API = "pumice.io/v1alpha1"

#: The gang objects of the other dialects (see ``docs/gang-apis.md``).
COSCHEDULING_API = "scheduling.x-k8s.io/v1alpha1"
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
K8S_WORKLOAD_API = "scheduling.k8s.io/v1alpha1"
K8S_PODGROUP_API = "scheduling.k8s.io/v1alpha2"

#: How a job says "these pods start together": the prefix of its job uid
#: (:func:`pumice.api.parse.job_uid`). ``volcano``: a Volcano PodGroup (or Job);
#: ``coscheduling``: a scheduler-plugins PodGroup; ``workload``: a pod group (and replica
#: key) of a ``scheduling.k8s.io/v1alpha1`` Workload; ``podgroup``: a
#: ``scheduling.k8s.io/v1alpha2`` PodGroup.
Dialect = Literal["volcano", "coscheduling", "workload", "podgroup"]
DIALECTS: tuple[str, ...] = ("volcano", "coscheduling", "workload", "podgroup")
#: The pod group of a ``workload`` job of the compact form (its Workload has one).
DEFAULT_POD_GROUP = "gang"

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
    #: The role's own run time and outcome (a Volcano Job's task template annotations),
    #: overriding the job's; None: the job's.
    duration: float | None = None
    outcome: Outcome | None = None
    end_fraction: float | None = None
    #: The claims its pods attach: pod ``spec.volumes`` entries with a
    #: ``persistentVolumeClaim`` or an ``ephemeral`` claim template, as written.
    volumes: tuple[Mapping[str, Any], ...] = field(default=(), compare=False)
    #: The DRA ResourceClaims its pods need: pod ``spec.resourceClaims`` entries (a
    #: ``resourceClaimName`` or a ``resourceClaimTemplateName``), as written.
    resource_claims: tuple[Mapping[str, Any], ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True)
class JobOrigin:
    """Where a job was written, for a message refusing it: the file, the object, the
    field of its queue, and the field of a task's requests and replicas as the user
    wrote them, and of its pods' spec (``{task}`` stands for the task's index)."""

    file: str
    obj: str
    queue_field: str
    requests_field: str
    replicas_field: str
    spec_field: str = "spec"


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One gang: a PodGroup and its pods, as the simulator submits it at ``arrival``.

    Every task of the job runs ``duration`` seconds once started; a job whose ``outcome``
    is ``fail`` or ``cancel`` ends after ``end_fraction * duration`` instead.
    ``min_available`` is the PodGroup's ``minMember``: 1 <= min_available <= total
    replicas (loaders guarantee it).

    ``manifest`` is set for a ``batch.volcano.sh/v1alpha1`` Job read from a file: the
    simulator submits that Job at ``arrival`` and the job controller makes its PodGroup
    and pods and applies its policies; the other fields then only describe it (for the
    checks and the metrics). ``None``: the simulator submits a PodGroup and its pods.

    ``network_topology`` is the PodGroup's ``spec.networkTopology`` (a Volcano Job's
    ``spec.networkTopology``): how far apart in the network its pods may be placed.

    ``dialect`` is the gang API the job is written in (:data:`Dialect`); its group object
    reaches the simulated cluster in that dialect, never as a Volcano PodGroup. ``name``
    is then the group object's name (the Workload's, for ``workload``), and
    ``pod_group`` / ``replica_key`` the Workload pod group and replica key the job is.
    ``group`` is the group object as read from a file (without its status), rendered as
    it is; None: rendered from the fields (:func:`pumice.sim.objects.group_object`).
    For ``workload``, one Workload object serves every job that names it.
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
    manifest: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    network_topology: NetworkTopology | None = None
    dialect: Dialect = "volcano"
    group: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    pod_group: str = ""
    replica_key: str = ""
    #: Where it was written (a job read from a file); None for a generated one.
    origin: JobOrigin | None = field(default=None, compare=False, repr=False)

    @property
    def uid(self) -> str:
        """The job's uid, as the scheduler and the reports name it: ``ns/name`` for a
        Volcano job, ``ns/coscheduling:name`` and so on for the others."""
        api = "workload" if self.dialect == "podgroup" else self.dialect
        return job_uid(api, self.namespace, self.name, self.pod_group, self.replica_key)

    @property
    def pod_prefix(self) -> str:
        """What its pods' names start with: the name, and for a Workload's pod group
        the pod group and replica key too (the gangs of one Workload share its name)."""
        if self.dialect != "workload":
            return self.name
        return "-".join(x for x in (self.name, self.pod_group, self.replica_key) if x)

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

    ``jobs`` are sorted by ``(arrival, namespace, name, uid)``. Every job's queue is in
    ``queues`` (or was declared known by the caller of the loader), every priority class
    it names is in ``priority_classes``. ``claims`` are the PersistentVolumeClaim
    manifests of the workload, which the simulation creates when the first job that
    mounts one arrives (at the start for a claim no job mounts; see
    :mod:`pumice.sim.storage`). ``device_claims`` are its ResourceClaimTemplate and
    ResourceClaim manifests (dynamic resource allocation), created at the start, a
    claim a job names when the first such job arrives (see :mod:`pumice.sim.devices`).
    ``skipped`` counts input rows or objects a loader left out with a warning;
    ``warnings`` holds the first few messages.
    """

    jobs: tuple[JobSpec, ...]
    queues: tuple[QueueSpec, ...]
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    skipped: int = 0
    warnings: tuple[str, ...] = ()
    claims: tuple[Mapping[str, Any], ...] = field(default=(), compare=False)
    device_claims: tuple[Mapping[str, Any], ...] = field(default=(), compare=False)


def sort_jobs(jobs: Iterable[JobSpec]) -> tuple[JobSpec, ...]:
    """Jobs in the order a :class:`Workload` keeps them: arrival, then namespace, name
    and uid (the gangs of one Workload share its name)."""
    return tuple(sorted(jobs, key=lambda j: (j.arrival, j.namespace, j.name, j.uid)))
