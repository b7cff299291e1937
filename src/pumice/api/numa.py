"""A node's NUMA topology as Volcano's resource exporter publishes it: the
``nodeinfo.volcano.sh/v1alpha1`` Numatopology object, cluster-scoped, named after its
node.

The record keeps what the numa-aware plugin reads (:mod:`pumice.plugins.numa_aware`):

- ``spec.policies``: the kubelet's ``CPUManagerPolicy`` (``static`` pins CPUs) and
  ``TopologyManagerPolicy`` (``single-numa-node``, ``restricted``, ``best-effort``,
  ``none``);
- ``spec.numares``: per resource, the ids still free (``allocatable``, a cpuset such as
  ``0-3,8``) and the ``capacity``;
- ``spec.cpuDetail``: each CPU id's NUMA node, socket and core;
- ``spec.resReserved``: what the kubelet reserves (its cpu, whole CPUs rounded up, is
  taken from the topology before any pod);
- ``spec.podAllocations``: the pods the kubelet has already given CPUs, by uid or
  namespace and name (Volcano keeps a pod it placed off its CPUs until the pod shows
  up here).

Parsing refuses what the CRD's schema or the exporter never produces (a cpuset that is
not one, a negative id, a CPU that is allocatable but absent from ``cpuDetail``) with
an :class:`~pumice.errors.InputError` naming the field. Policy names other than the
two are stored by the API server and not read, as in Volcano.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pumice.api.parse import as_int, as_list, as_mapping, as_str, quota_amounts
from pumice.errors import InputError, shown

#: The kind's name in pumice (``Snapshot.records``) and in the API.
NUMATOPOLOGY = "Numatopology"
CPU_MANAGER_POLICY = "CPUManagerPolicy"
TOPOLOGY_MANAGER_POLICY = "TopologyManagerPolicy"
_POLICY_NAMES = (CPU_MANAGER_POLICY, TOPOLOGY_MANAGER_POLICY)


@dataclass(slots=True, frozen=True)
class CpuInfo:
    """Where one logical CPU sits."""

    numa: int
    socket: int
    core: int


@dataclass(slots=True, frozen=True)
class NumaResource:
    """One resource of ``spec.numares``: the ids still free, and how many there are."""

    allocatable: frozenset[int]
    capacity: int


@dataclass(slots=True, frozen=True)
class PodAllocationRef:
    """A pod the kubelet has assigned resources to (``spec.podAllocations``)."""

    uid: str
    namespace: str
    name: str


@dataclass(slots=True, frozen=True)
class NumatopologyRecord:
    name: str  # the node's
    cpu_policy: str
    topology_policy: str
    #: resource name -> its NUMA resource info, sorted by name.
    resources: tuple[tuple[str, NumaResource], ...]
    #: cpu id -> where it sits, sorted by id.
    cpus: tuple[tuple[int, CpuInfo], ...]
    #: Whole CPUs the kubelet reserves (``spec.resReserved.cpu``, rounded up).
    reserved_cpus: int = 0
    allocations: tuple[PodAllocationRef, ...] = ()

    def resource(self, name: str) -> NumaResource | None:
        for n, r in self.resources:
            if n == name:
                return r
        return None

    def assigned(self, uid: str, namespace: str, name: str) -> bool:
        """The kubelet lists the pod among its allocations (by uid, or by namespace and
        name, as the exporter reports either)."""
        return any(
            a.uid == uid or (a.name == name and a.namespace == namespace) for a in self.allocations
        )


def parse_cpuset(text: str, path: str) -> frozenset[int]:
    """A Linux cpuset list (``0-3,8,10-11``; "" is empty) -> its ids."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, dash, hi = part.partition("-")
        try:
            first = int(lo)
            last = int(hi) if dash else first
        except ValueError:
            raise InputError(f"invalid cpuset {shown(text)}", field=path) from None
        if first < 0 or last < first or last - first > 1 << 16:
            raise InputError(f"invalid cpuset range {shown(part)}", field=path)
        out.update(range(first, last + 1))
    return frozenset(out)


def parse_numatopology(obj: Mapping[str, Any]) -> NumatopologyRecord:
    meta = as_mapping(obj.get("metadata"), "metadata")
    name = as_str(meta.get("name"), "metadata.name", required=True)
    spec = as_mapping(obj.get("spec"), "spec")
    policies: dict[str, str] = {}
    for key, value in as_mapping(spec.get("policies"), "spec.policies").items():
        if key in _POLICY_NAMES:  # (others are stored by the API server, and not read)
            policies[key] = as_str(value, f"spec.policies.{key}")
    cpus: dict[int, CpuInfo] = {}
    for key, value in as_mapping(spec.get("cpuDetail"), "spec.cpuDetail").items():
        path = f"spec.cpuDetail.{key}"
        try:
            cpu = int(str(key))
        except ValueError:
            raise InputError("a cpu id must be a whole number", field=path) from None
        if cpu < 0:
            raise InputError("a cpu id must not be negative", field=path)
        detail = as_mapping(value, path)
        cpus[cpu] = CpuInfo(
            as_int(detail.get("numa"), f"{path}.numa", 0, minimum=0),
            as_int(detail.get("socket"), f"{path}.socket", 0, minimum=0),
            as_int(detail.get("core"), f"{path}.core", 0, minimum=0),
        )
    res: dict[str, NumaResource] = {}
    for key, value in as_mapping(spec.get("numares"), "spec.numares").items():
        path = f"spec.numares.{key}"
        info = as_mapping(value, path)
        free = parse_cpuset(as_str(info.get("allocatable"), f"{path}.allocatable"), path)
        capacity = as_int(info.get("capacity"), f"{path}.capacity", 0, minimum=0)
        if key == "cpu":
            unknown = sorted(free - cpus.keys())
            if unknown:
                raise InputError(
                    f"cpu {unknown[0]} is allocatable but not in spec.cpuDetail",
                    field=f"{path}.allocatable",
                )
        res[str(key)] = NumaResource(free, capacity)
    reserved = quota_amounts(spec.get("resReserved"), "spec.resReserved").get("cpu", 0.0)
    allocations = []
    for i, a in enumerate(as_list(spec.get("podAllocations"), "spec.podAllocations")):
        path = f"spec.podAllocations[{i}]"
        a = as_mapping(a, path)
        allocations.append(
            PodAllocationRef(
                as_str(a.get("uid"), f"{path}.uid"),
                as_str(a.get("namespace"), f"{path}.namespace"),
                as_str(a.get("name"), f"{path}.name"),
            )
        )
    return NumatopologyRecord(
        name=name,
        cpu_policy=policies.get(CPU_MANAGER_POLICY, ""),
        topology_policy=policies.get(TOPOLOGY_MANAGER_POLICY, ""),
        resources=tuple(sorted(res.items())),
        cpus=tuple(sorted(cpus.items())),
        reserved_cpus=-(-int(reserved) // 1000),
        allocations=tuple(allocations),
    )


#: Kind -> parser, for :data:`pumice.api.side_objects.SIDE_PARSERS`.
NUMA_PARSERS = {NUMATOPOLOGY: parse_numatopology}

__all__ = [
    "CPU_MANAGER_POLICY",
    "NUMATOPOLOGY",
    "NUMA_PARSERS",
    "TOPOLOGY_MANAGER_POLICY",
    "CpuInfo",
    "NumaResource",
    "NumatopologyRecord",
    "PodAllocationRef",
    "parse_cpuset",
    "parse_numatopology",
]
