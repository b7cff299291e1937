"""Tasks (pods) and their scheduling status."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from pumice.api.gpus import DeviceAsk
from pumice.api.resources import Vector


class TaskStatus(IntEnum):
    """Where a task is in its life, as the scheduler sees it (Volcano's TaskStatus)."""

    PENDING = 1
    ALLOCATED = 2  # placed in this session, not yet bound
    PIPELINED = 3  # placed onto resources that terminating pods are releasing
    BINDING = 4
    BOUND = 5
    RUNNING = 6
    RELEASING = 7  # terminating: still on its node, resources about to free
    SUCCEEDED = 8
    FAILED = 9
    UNKNOWN = 10


#: Statuses that hold node resources and count towards a gang (Volcano's AllocatedStatus).
ALLOCATED_STATUSES = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING}
)
#: Statuses that count a task as ready for its gang.
READY_STATUSES = ALLOCATED_STATUSES | {TaskStatus.SUCCEEDED}
#: Statuses that count a task as a valid member of its gang.
VALID_STATUSES = READY_STATUSES | {TaskStatus.PIPELINED, TaskStatus.PENDING}
#: Statuses whose pod no longer occupies a node.
TERMINATED_STATUSES = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED})


def status_of_pod(phase: str, node_name: str | None, terminating: bool) -> TaskStatus:
    """The task status Volcano derives from a pod's phase, node and deletion mark."""
    if phase == "Running":
        return TaskStatus.RELEASING if terminating else TaskStatus.RUNNING
    if phase == "Pending":
        if terminating:
            return TaskStatus.RELEASING
        return TaskStatus.BOUND if node_name else TaskStatus.PENDING
    if phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if phase == "Failed":
        return TaskStatus.FAILED
    return TaskStatus.UNKNOWN


@dataclass(slots=True, frozen=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(slots=True, frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


@dataclass(slots=True, frozen=True)
class Requirement:
    """One ``matchExpressions`` / ``matchFields`` entry of a node selector term."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()
    field: bool = False  # a matchFields entry (only metadata.name exists)


@dataclass(slots=True, frozen=True)
class SelectorTerm:
    """A node selector term: all requirements must hold (an empty term matches nothing)."""

    requirements: tuple[Requirement, ...]


@dataclass(slots=True, frozen=True)
class Placement:
    """Everything about a pod that decides *which* nodes it may use, apart from resources.

    Tasks with equal placements (the replicas of one gang, as a rule) share one cached
    node mask per session: that is why this is a frozen, hashable value.
    """

    node_selector: tuple[tuple[str, str], ...] = ()
    required_terms: tuple[SelectorTerm, ...] | None = None  # None: no required affinity
    preferred_terms: tuple[tuple[int, SelectorTerm], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    #: The pod may use revocable nodes while their zone's window is open (Volcano's
    #: ``volcano.sh/revocable-zone: "*"`` annotation, or ``volcano.sh/preemptable:
    #: "true"``; read by the tdm plugin). Part of the placement because it decides
    #: which nodes the pod may use, so tasks that differ in it never share an answer.
    revocable: bool = False


@dataclass(slots=True, frozen=True)
class PodTerm:
    """A required pod (anti-)affinity term: pods matching ``selector`` in
    ``namespaces`` (the pod's own namespace when empty), within the topology domain
    named by the node label ``topology_key``."""

    selector: Any  # pumice.api.pdb.LabelSelector | None (None matches nothing)
    topology_key: str
    namespaces: tuple[str, ...] = ()

    def matches(self, owner_namespace: str, namespace: str, labels: dict[str, str]) -> bool:
        spaces = self.namespaces or (owner_namespace,)
        if namespace not in spaces or self.selector is None:
            return False
        return self.selector.matches(labels)


@dataclass(slots=True, frozen=True)
class PodAffinity:
    """Required inter-pod affinity and anti-affinity of one pod."""

    affinity: tuple[PodTerm, ...] = ()
    anti: tuple[PodTerm, ...] = ()


@dataclass(slots=True, frozen=True)
class NumaAsk:
    """What the numa-aware plugin reads of a Guaranteed pod (see
    :mod:`pumice.plugins.numa_aware`): the whole CPUs each container asks for, in
    ``spec.containers`` order (0 for a container whose cpu request is not a whole
    number: the kubelet gives it no exclusive CPUs), and the pod's
    ``volcano.sh/numa-topology-policy`` annotation ("" when absent or ``none``)."""

    cpus: tuple[tuple[str, int], ...]  # (container name, whole CPUs)
    policy: str = ""


#: The pod annotation by which a pod asks for a topology manager policy (Volcano's
#: ``NumaPolicyKey``; Volcano's job controller sets it from a task's ``topologyPolicy``).
NUMA_POLICY_ANNOTATION = "volcano.sh/numa-topology-policy"


@dataclass(slots=True, eq=False)
class TaskInfo:
    """One pod, as the scheduler sees it.

    ``resreq`` is what the pod holds on its node once running (containers plus
    overhead); ``init_resreq`` is what must be free to start it (Kubernetes' effective
    request: the larger of the init containers' peak and the containers' sum, plus
    overhead). Fit checks use ``init_resreq``; node and queue accounting use ``resreq``.
    """

    uid: str
    namespace: str
    name: str
    job: str | None  # job uid; None for pods of other schedulers
    role: str
    status: TaskStatus
    node: str | None
    resreq: Vector
    init_resreq: Vector
    priority: int
    best_effort: bool
    placement: Placement
    host_ports: tuple[tuple[str, int], ...] = ()  # (protocol, port)
    creation: float = 0.0
    preemption_policy: str = "PreemptLowerPriority"
    priority_class: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    name_index: int | None = None  # the trailing "-N" of "job-role-N" pod names
    #: (cpu, memory) with Kubernetes' defaults for zero requests, for scoring.
    nonzero: Vector | None = None
    #: When the pod's PodScheduled condition turned True (0.0: unknown), for cooldowns.
    scheduled_at: float = 0.0
    #: Required inter-pod (anti-)affinity, or None.
    pod_affinity: PodAffinity | None = None
    #: Topology spread constraints (``pumice.api.spread.SpreadConstraint``).
    spread: tuple[Any, ...] = ()
    #: The PersistentVolumeClaims the pod mounts (names in its namespace).
    claims: tuple[str, ...] = ()
    #: The DRA ResourceClaims the pod needs (``pumice.api.parse.PodClaimRef``; one made
    #: from a template may not exist yet).
    device_claims: tuple[Any, ...] = ()
    #: The shared GPUs it asks (Volcano's deviceshare resources, card by card), None
    #: when none.
    devices: DeviceAsk | None = None
    #: A Guaranteed pod the numa-aware plugin may pin to NUMA nodes (None: never).
    numa: NumaAsk | None = None

    @property
    def attaches(self) -> bool:
        """The pod attaches volumes or devices: whether a node suits it depends on
        which volumes and devices are still free, not on its shape alone, so it never
        shares a fit answer with another task. (A pod whose CPUs the numa-aware plugin
        may pin is such a task too, in sessions where that applies: see
        ``Session.attaching``, which the per-shape shortcuts ask.)"""
        return bool(self.claims or self.device_claims or self.devices is not None)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def clone(self) -> TaskInfo:
        """A copy whose status and node may change without touching the original."""
        return TaskInfo(
            self.uid, self.namespace, self.name, self.job, self.role, self.status,
            self.node, self.resreq, self.init_resreq, self.priority, self.best_effort,
            self.placement, self.host_ports, self.creation, self.preemption_policy,
            self.priority_class, self.annotations, self.labels, self.name_index,
            self.nonzero, self.scheduled_at, self.pod_affinity, self.spread, self.claims,
            self.device_claims, self.devices, self.numa,
        )  # fmt: skip

    @property
    def preemptable(self) -> bool:
        """Volcano's ``volcano.sh/preemptable`` (annotation first, then label; absent
        means yes; a value that is not a boolean means no)."""
        for source in (self.annotations, self.labels):
            value = source.get(PREEMPTABLE_KEY)
            if value is not None:
                return _parse_go_bool(value)
        return True

    def __repr__(self) -> str:
        return f"TaskInfo({self.key}, {self.status.name}, node={self.node})"


PREEMPTABLE_KEY = "volcano.sh/preemptable"
#: Volcano's annotation (pods, PodGroups) and node label naming a revocable zone.
REVOCABLE_ZONE_KEY = "volcano.sh/revocable-zone"


def revocable_zone(annotations: dict[str, str]) -> str:
    """Volcano's ``GetPodRevocableZone``: ``"*"`` when the annotations let a pod use
    revocable nodes (``volcano.sh/revocable-zone: "*"``; without that annotation,
    ``volcano.sh/preemptable`` parsing as true), else ``""`` (any other zone value
    means none: Volcano supports only ``*``)."""
    value = annotations.get(REVOCABLE_ZONE_KEY)
    if value is not None:
        return "*" if value == "*" else ""
    preemptable = annotations.get(PREEMPTABLE_KEY)
    return "*" if preemptable is not None and _parse_go_bool(preemptable) else ""


_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


def _parse_go_bool(value: str) -> bool:
    """Go's ``strconv.ParseBool``, with anything unparsable read as false."""
    return value in _GO_TRUE


def default_task_order(a: TaskInfo, b: TaskInfo) -> int:
    """Volcano's fallback task order: pod index in ``job-role-N`` names, then creation
    time, then uid."""
    if a.name_index is not None and b.name_index is not None and a.name_index != b.name_index:
        return -1 if a.name_index < b.name_index else 1
    if a.creation != b.creation:
        return -1 if a.creation < b.creation else 1
    return (a.uid > b.uid) - (a.uid < b.uid)
