"""Storage objects as the scheduler reads them: PersistentVolumes, their claims,
StorageClasses, and the CSI drivers' per-node attach limits.

The records keep what kube-scheduler's volume plugins (VolumeBinding, VolumeZone,
NodeVolumeLimits, VolumeRestrictions) read, and nothing else, so that a PV's status
write that changes none of it is no change to the scheduler. Parsing refuses what the
API server would refuse (a negative capacity, an unknown access mode) with an
:class:`~pumice.errors.InputError` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pumice.api.parse import as_list, as_mapping, as_str, selector_term
from pumice.api.pdb import LabelSelector, parse_label_selector
from pumice.api.quantity import parse_quantity
from pumice.api.task import SelectorTerm
from pumice.errors import InputError, shown

#: The annotation by which the scheduler tells a provisioner which node a
#: ``WaitForFirstConsumer`` claim's volume is for.
SELECTED_NODE = "volume.kubernetes.io/selected-node"
#: The annotation the PV controller reads on a PV the scheduler pre-bound.
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
#: The StorageClass annotation that makes it the default class.
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
#: A provisioner name that provisions nothing (statically created local volumes).
NO_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
#: Access modes, as bits, so that "has every mode asked" is one mask test.
ACCESS_MODES = {"ReadWriteOnce": 1, "ReadOnlyMany": 2, "ReadWriteMany": 4, "ReadWriteOncePod": 8}
RWOP = ACCESS_MODES["ReadWriteOncePod"]
#: The node labels a zonal PV names its zone or region by (VolumeZone reads these).
ZONE_LABELS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)


@dataclass(slots=True, frozen=True)
class PVClaimRef:
    namespace: str
    name: str
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True, frozen=True)
class PersistentVolumeRecord:
    name: str
    capacity: int  # bytes
    access_modes: int  # bits of ACCESS_MODES
    storage_class: str
    volume_mode: str
    #: Required node affinity (None: every node can reach the volume).
    node_terms: tuple[SelectorTerm, ...] | None
    claim_ref: PVClaimRef | None
    phase: str
    labels: tuple[tuple[str, str], ...] = ()
    csi_driver: str = ""

    def available(self) -> bool:
        """Free for a new claim: bound to none, and not released or failed."""
        return self.claim_ref is None and self.phase in ("", "Available", "Pending")

    def zones(self) -> dict[str, frozenset[str]]:
        """Zone and region label -> the values a node may have (``a__b``: either)."""
        return {k: frozenset(v.split("__")) for k, v in self.labels if k in ZONE_LABELS}


@dataclass(slots=True, frozen=True)
class PersistentVolumeClaimRecord:
    namespace: str
    name: str
    uid: str
    #: None: no class named (the default class applies); "": no class at all.
    storage_class: str | None
    request: int  # bytes
    access_modes: int
    volume_mode: str
    selector: LabelSelector | None
    volume_name: str
    phase: str
    selected_node: str = ""
    terminating: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True, frozen=True)
class StorageClassRecord:
    name: str
    provisioner: str
    binding_mode: str
    #: ``allowedTopologies`` as node selector terms (None: every node).
    allowed: tuple[SelectorTerm, ...] | None
    default: bool = False


@dataclass(slots=True, frozen=True)
class CSINodeRecord:
    """A node's CSI drivers: driver -> how many of its volumes the node may attach
    (None: no limit published)."""

    name: str
    limits: tuple[tuple[str, int | None], ...]


@dataclass(slots=True, frozen=True)
class CSIDriverRecord:
    name: str
    attach_required: bool = True


def _meta(obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    meta = as_mapping(obj.get("metadata"), "metadata")
    return meta, as_str(meta.get("name"), "metadata.name", required=True)


def _bytes(value: Any, path: str) -> int:
    amount = parse_quantity(value, field=path)
    if amount > 2**63 - 1:
        raise InputError("quantity is too large", field=path)
    return int(-(-amount // 1))


def _modes(value: Any, path: str) -> int:
    bits = 0
    for i, m in enumerate(as_list(value, path)):
        bit = ACCESS_MODES.get(m) if isinstance(m, str) else None
        if bit is None:
            raise InputError(f"unknown access mode {as_str(m, f'{path}[{i}]')!r}", field=path)
        bits |= bit
    return bits


def _terms(value: Any, path: str) -> tuple[SelectorTerm, ...]:
    return tuple(selector_term(t, f"{path}[{i}]") for i, t in enumerate(as_list(value, path)))


def _class_name(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    """``spec.storageClassName``, or the beta annotation older objects carry."""
    if "storageClassName" in spec and spec["storageClassName"] is not None:
        return as_str(spec["storageClassName"], "spec.storageClassName")
    notes = as_mapping(meta.get("annotations"), "metadata.annotations")
    beta = notes.get("volume.beta.kubernetes.io/storage-class")
    return None if beta is None else as_str(beta, "metadata.annotations")


def parse_pv(obj: Mapping[str, Any]) -> PersistentVolumeRecord:
    meta, name = _meta(obj)
    spec = as_mapping(obj.get("spec"), "spec")
    status = as_mapping(obj.get("status"), "status")
    capacity = as_mapping(spec.get("capacity"), "spec.capacity")
    ref = spec.get("claimRef")
    claim = None
    if ref is not None:
        ref = as_mapping(ref, "spec.claimRef")
        claim = PVClaimRef(
            as_str(ref.get("namespace"), "spec.claimRef.namespace") or "default",
            as_str(ref.get("name"), "spec.claimRef.name", required=True),
            as_str(ref.get("uid"), "spec.claimRef.uid"),
        )
    affinity = as_mapping(spec.get("nodeAffinity"), "spec.nodeAffinity")
    required = affinity.get("required")
    terms = None
    if required is not None:
        path = "spec.nodeAffinity.required.nodeSelectorTerms"
        terms = _terms(as_mapping(required, "spec.nodeAffinity.required").get("nodeSelectorTerms"),
                       path)  # fmt: skip
    labels = as_mapping(meta.get("labels"), "metadata.labels")
    csi = as_mapping(spec.get("csi"), "spec.csi")
    return PersistentVolumeRecord(
        name=name,
        capacity=_bytes(capacity.get("storage", 0), "spec.capacity.storage"),
        access_modes=_modes(spec.get("accessModes"), "spec.accessModes"),
        storage_class=_class_name(meta, spec) or "",
        volume_mode=as_str(spec.get("volumeMode"), "spec.volumeMode") or "Filesystem",
        node_terms=terms,
        claim_ref=claim,
        phase=as_str(status.get("phase"), "status.phase"),
        labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
        csi_driver=as_str(csi.get("driver"), "spec.csi.driver"),
    )


def parse_pvc(obj: Mapping[str, Any]) -> PersistentVolumeClaimRecord:
    meta, name = _meta(obj)
    namespace = as_str(meta.get("namespace"), "metadata.namespace") or "default"
    spec = as_mapping(obj.get("spec"), "spec")
    status = as_mapping(obj.get("status"), "status")
    resources = as_mapping(spec.get("resources"), "spec.resources")
    requests = as_mapping(resources.get("requests"), "spec.resources.requests")
    notes = as_mapping(meta.get("annotations"), "metadata.annotations")
    return PersistentVolumeClaimRecord(
        namespace=namespace,
        name=name,
        uid=as_str(meta.get("uid"), "metadata.uid"),
        storage_class=_class_name(meta, spec),
        request=_bytes(requests.get("storage", 0), "spec.resources.requests.storage"),
        access_modes=_modes(spec.get("accessModes"), "spec.accessModes"),
        volume_mode=as_str(spec.get("volumeMode"), "spec.volumeMode") or "Filesystem",
        selector=parse_label_selector(spec.get("selector"), "spec.selector"),
        volume_name=as_str(spec.get("volumeName"), "spec.volumeName"),
        phase=as_str(status.get("phase"), "status.phase"),
        selected_node=as_str(notes.get(SELECTED_NODE), f"metadata.annotations.{SELECTED_NODE}"),
        terminating=meta.get("deletionTimestamp") is not None,
    )


def parse_storage_class(obj: Mapping[str, Any]) -> StorageClassRecord:
    meta, name = _meta(obj)
    mode = as_str(obj.get("volumeBindingMode"), "volumeBindingMode") or IMMEDIATE
    if mode not in (IMMEDIATE, WAIT_FOR_FIRST_CONSUMER):
        raise InputError(f"unknown volume binding mode {shown(mode)}", field="volumeBindingMode")
    allowed = None
    topologies = as_list(obj.get("allowedTopologies"), "allowedTopologies")
    if topologies:
        terms = []
        for i, t in enumerate(topologies):
            path = f"allowedTopologies[{i}].matchLabelExpressions"
            exprs = as_list(as_mapping(t, f"allowedTopologies[{i}]").get("matchLabelExpressions"),
                            path)  # fmt: skip
            as_terms = [
                {"key": as_mapping(e, f"{path}[{j}]").get("key"), "operator": "In",
                 "values": e.get("values")}
                for j, e in enumerate(exprs)
            ]  # fmt: skip
            terms.append(selector_term({"matchExpressions": as_terms}, path))
        allowed = tuple(terms)
    notes = as_mapping(meta.get("annotations"), "metadata.annotations")
    return StorageClassRecord(
        name=name,
        provisioner=as_str(obj.get("provisioner"), "provisioner", required=True),
        binding_mode=mode,
        allowed=allowed,
        default=str(notes.get(DEFAULT_CLASS, "")).lower() == "true",
    )


def parse_csinode(obj: Mapping[str, Any]) -> CSINodeRecord:
    _, name = _meta(obj)
    spec = as_mapping(obj.get("spec"), "spec")
    limits = []
    for i, d in enumerate(as_list(spec.get("drivers"), "spec.drivers")):
        path = f"spec.drivers[{i}]"
        d = as_mapping(d, path)
        count = as_mapping(d.get("allocatable"), f"{path}.allocatable").get("count")
        if count is not None and (not isinstance(count, int) or isinstance(count, bool)
                                  or not 0 <= count < 2**31):  # fmt: skip
            raise InputError("expected a count from 0 to 2^31-1", field=f"{path}.allocatable.count")
        limits.append((as_str(d.get("name"), f"{path}.name", required=True), count))
    return CSINodeRecord(name, tuple(sorted(limits)))


def parse_csidriver(obj: Mapping[str, Any]) -> CSIDriverRecord:
    _, name = _meta(obj)
    spec = as_mapping(obj.get("spec"), "spec")
    attach = spec.get("attachRequired", True)
    if not isinstance(attach, bool):
        raise InputError("expected true or false", field="spec.attachRequired")
    return CSIDriverRecord(name, attach)


#: Parsers by kind (the kinds every mode reads for volumes).
STORAGE_PARSERS = {
    "PersistentVolume": parse_pv,
    "PersistentVolumeClaim": parse_pvc,
    "StorageClass": parse_storage_class,
    "CSINode": parse_csinode,
    "CSIDriver": parse_csidriver,
}


__all__ = [
    "ACCESS_MODES",
    "BOUND_BY_CONTROLLER",
    "IMMEDIATE",
    "NO_PROVISIONER",
    "RWOP",
    "SELECTED_NODE",
    "STORAGE_PARSERS",
    "WAIT_FOR_FIRST_CONSUMER",
    "CSIDriverRecord",
    "CSINodeRecord",
    "PVClaimRef",
    "PersistentVolumeClaimRecord",
    "PersistentVolumeRecord",
    "StorageClassRecord",
]
