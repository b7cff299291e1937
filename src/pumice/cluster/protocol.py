"""What pumice needs from a cluster, and nothing more.

The cache (:mod:`pumice.cache.cache`) is the only caller. It lists objects once, then
follows watch events, and carries out a cycle's decisions through :meth:`Cluster.bind`,
:meth:`Cluster.evict` and :meth:`Cluster.update_podgroup_status`. Objects are
Kubernetes-shaped dicts (``apiVersion``, ``kind``, ``metadata``, ``spec``, ``status``);
keys are ``namespace/name`` for namespaced kinds and ``name`` otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

ADDED: Literal["ADDED"] = "ADDED"
MODIFIED: Literal["MODIFIED"] = "MODIFIED"
DELETED: Literal["DELETED"] = "DELETED"

#: The gang objects of the dialects besides Volcano's (see :mod:`pumice.api.gang_apis`),
#: each under a kind name of its own, so that PodGroups of one name in one namespace but
#: of different API groups never share a key: coscheduling's ``scheduling.x-k8s.io``
#: PodGroup, Kubernetes' ``scheduling.k8s.io/v1alpha2`` PodGroup, and Kubernetes'
#: Workloads (``v1alpha1``; ``v1alpha2`` is listed apart: a server that serves both
#: versions shows each Workload twice). ``PodGroup`` is Volcano's.
GANG_KINDS = ("CoschedulingPodGroup", "WorkloadPodGroup", "Workload", "WorkloadV1alpha2")
#: The kinds the scheduler reads (Volcano's informers, and the gang objects of other
#: dialects). HyperNodes (``topology.volcano.sh``, cluster-scoped) describe the network;
#: a cluster without their CRD has none, as one without a dialect's CRD has none of it.
KINDS = (
    "Node",
    "Pod",
    "PodGroup",
    "Queue",
    "PriorityClass",
    "PodDisruptionBudget",
    "HyperNode",
    *GANG_KINDS,
    # What pods attach: storage (read by the predicates plugin's volume checks).
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    # Devices (dynamic resource allocation, resource.k8s.io).
    "ResourceSlice",
    "DeviceClass",
    "ResourceClaim",
    "ResourceClaimTemplate",
    # Nodes' measured load (metrics.k8s.io, served by metrics-server; read by the usage
    # plugin). The API lists it but cannot watch it: it is listed again periodically.
    "NodeMetrics",
    # What plugins look up: nodes' NUMA topology (``nodeinfo.volcano.sh``, cluster-scoped;
    # a cluster without the CRD has none) and namespaces' ResourceQuotas.
    "Numatopology",
    "ResourceQuota",
)
#: The kind ``kind: PodGroup`` objects of each API group are kept under.
PODGROUP_KINDS = {
    "scheduling.volcano.sh": "PodGroup",
    "scheduling.x-k8s.io": "CoschedulingPodGroup",
    "scheduling.k8s.io": "WorkloadPodGroup",
}
#: Kinds keyed ``namespace/name``: the scheduler's, and those the controllers read and
#: write (:mod:`pumice.controllers`).
NAMESPACED = frozenset(
    {
        "Pod",
        "PodGroup",
        "CoschedulingPodGroup",
        "WorkloadPodGroup",
        "Workload",
        "WorkloadV1alpha2",
        "PodDisruptionBudget",
        "PersistentVolumeClaim",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "ResourceQuota",
        "Job",
        "Command",
        "Service",
        "Secret",
        "ConfigMap",
        "ReplicaSet",
        "StatefulSet",
        "Deployment",
        "BatchJob",
        "Event",
    }
)


@dataclass(slots=True)
class WatchEvent:
    """One change: ``obj`` is the object after the change (before it, for DELETED).

    Read-only, the event and its ``obj`` alike: the store hands the same event to
    every watcher, and may change ``obj`` later (a watcher that needs a value keeps a
    copy). Not frozen only because one is made per change and per store, and a frozen
    dataclass is several times slower to make.
    """

    type: str  # ADDED | MODIFIED | DELETED
    kind: str
    key: str
    obj: Mapping[str, Any]


def condition_key(conditions: Iterable[Mapping[str, Any]]) -> tuple:
    """Conditions without their per-cycle fields (transition id and time), to tell a
    real change of a status from a rewrite."""
    return tuple(
        (c.get("type"), c.get("status"), c.get("reason"), c.get("message")) for c in conditions
    )


def store_kind(obj: Mapping[str, Any]) -> str:
    """The kind an object is kept under: its ``kind``, except a ``PodGroup`` of another
    API group than Volcano's (none: Volcano's), kept under its dialect's kind name
    (:data:`PODGROUP_KINDS`; a group pumice does not read stays ``PodGroup``, where the
    cache skips it with a note)."""
    kind = str(obj.get("kind") or "")
    if kind != "PodGroup":
        return kind
    api_version = obj.get("apiVersion")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
    return PODGROUP_KINDS.get(group, "PodGroup")


def object_key(kind: str, obj: Mapping[str, Any]) -> str:
    """``namespace/name`` for namespaced kinds, ``name`` otherwise."""
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    if kind in NAMESPACED:
        return f"{meta.get('namespace') or 'default'}/{name}"
    return name


class BindWrites(Protocol):
    """What is written before a pod's binding so that what it attaches is ready on its
    node (the scheduler's pre-bind): ``volumes`` (claim key -> the PV whose
    ``claimRef`` is set to it), ``provision`` (claim key -> the node named in its
    ``volume.kubernetes.io/selected-node``), ``claims`` (ResourceClaim key -> its
    ``status.allocation``), ``annotations`` (merged into the pod's), and ``timeout``:
    how long the bind may wait for the volumes to be bound. (Read only here: what
    writes them may hold them in dicts.)"""

    @property
    def volumes(self) -> Mapping[str, str]: ...

    @property
    def provision(self) -> Mapping[str, str]: ...

    @property
    def claims(self) -> Mapping[str, Mapping[str, Any]]: ...

    @property
    def annotations(self) -> Mapping[str, str]: ...

    @property
    def timeout(self) -> float: ...


class Watch(Protocol):
    """A subscription: events queue up until :meth:`drain` hands them over, in order."""

    def drain(self) -> list[WatchEvent]: ...

    def close(self) -> None: ...


class Cluster(Protocol):
    """The cluster as the scheduler sees it.

    Contracts:

    - ``list`` returns the current objects of a kind, sorted by key (deterministic).
    - ``watch`` returns a subscription that receives every later change of the given
      kinds, in the order they happened; ``list`` then ``watch`` with no change in between
      misses nothing.
    - ``bind`` sets a pending pod's node, after ``writes`` (:class:`BindWrites`) when
      given; binding a pod that is gone or already bound is refused with ``False`` (a
      stale decision), never an exception. A write that fails fails the bind (the
      pod stays pending for the next cycle to decide again).
    - ``evict`` starts a graceful deletion (the pod turns terminating and keeps its node
      until the kubelet releases it); evicting a pod that is gone or already terminating
      returns ``False``.
    - ``update_podgroup_status`` writes phase and conditions of a Volcano PodGroup; a
      missing podgroup is ignored (``False``).
    - ``update_gang_status`` merges ``status`` (the fields of another dialect's status,
      :mod:`pumice.cluster.gang_status`) into the status of the object ``kind`` ``key``
      (one of :data:`GANG_KINDS`); a missing object is ignored (``False``). A write
      that changes nothing makes no watch event.
    """

    def list(self, kind: str) -> Sequence[Mapping[str, Any]]: ...

    def watch(self, kinds: Sequence[str] = KINDS) -> Watch: ...

    def bind(self, pod_key: str, node: str, writes: BindWrites | None = None) -> bool: ...

    def evict(self, pod_key: str, reason: str = "") -> bool: ...

    def update_podgroup_status(
        self,
        key: str,
        phase: str,
        conditions: Sequence[Mapping[str, Any]] = (),
        *,
        running: int = 0,
        succeeded: int = 0,
        failed: int = 0,
    ) -> bool: ...

    def update_gang_status(self, kind: str, key: str, status: Mapping[str, Any]) -> bool: ...
