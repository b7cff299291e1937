"""The simulated cluster's nodes: read from a file, or the built-in demo cluster.

``pumice simulate`` needs Node objects to put in its in-memory cluster. They come from a
file of ordinary Node manifests (what ``kubectl get nodes -o yaml`` prints), from a
compact description (``nodes: [{count: 32, allocatable: {...}}]``) that saves writing
hundreds of identical nodes, or from :func:`default_cluster`. Whatever the source, the
result is a list of v1 Node dicts with ``status.allocatable`` and ``status.capacity`` set
and quantities already checked, so the cluster side never sees a malformed node.

The network, when there is one, comes with the nodes (:func:`load_cluster_spec`): the
file's ``topology.volcano.sh`` HyperNode manifests, or a compact ``topology:`` block
(``{nodesPerLeaf, leavesPerSpine, tiers}``, :class:`~pumice.sim.topology.TreeShape`)
that generates a leaf-spine tree over the file's nodes in the order they are listed.

So does the storage (:mod:`pumice.sim.storage_spec`): StorageClass, PersistentVolume,
CSINode and CSIDriver manifests, and a compact node group's ``localVolumes`` block; and
the devices of dynamic resource allocation (:mod:`pumice.sim.devices_spec`):
ResourceSlice and DeviceClass manifests, and a compact node group's ``devices`` block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pumice.api.limits import MAX_NODES
from pumice.api.quantity import plural, render_resources
from pumice.errors import InputError, shown, shown_text
from pumice.sim.devices_spec import (
    DEVICE_KINDS,
    DeviceBlock,
    check_devices,
    device_blocks,
    device_object,
    device_slices,
    driver_class,
)
from pumice.sim.documents import iter_objects, read_documents
from pumice.sim.fields import (
    check_keys,
    is_dns_subdomain,
    parse_resources,
    require_int,
    require_str,
)
from pumice.sim.storage_spec import (
    STORAGE_KINDS,
    check_storage,
    local_class,
    local_pvs,
    local_volumes,
    storage_object,
)
from pumice.sim.topology import TreeShape, cluster_topology, hypernode_objects
from pumice.sim.workload import GPU

DEFAULT_PODS = 110
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
HOSTNAME_LABEL = "kubernetes.io/hostname"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

_GROUP_KEYS = (
    "count",
    "namePrefix",
    "allocatable",
    "labels",
    "taints",
    "localVolumes",
    "devices",
)
_CLUSTER_KEYS = ("apiVersion", "kind", "nodes", "topology")


def node_object(
    name: str,
    allocatable: Mapping[str, float],
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """A ready v1 Node with ``allocatable`` (canonical units) as capacity and allocatable.

    ``pods`` defaults to 110 (the kubelet's default) when ``allocatable`` lacks it.
    """
    resources = dict(allocatable)
    resources.setdefault("pods", float(DEFAULT_PODS))
    rendered = render_resources(resources)
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME_LABEL: name, **(labels or {})}},
        "spec": {},
        "status": {
            "capacity": dict(rendered),
            "allocatable": rendered,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    if taints:
        node["spec"]["taints"] = [dict(t) for t in taints]
    return node


def default_cluster() -> list[dict[str, Any]]:
    """The built-in demo cluster: a multi-tenant GPU cluster of 56 nodes.

    - 32 x ``gpu-a100``: 96 cpu, 768Gi, 8 GPUs (labelled ``NVIDIA-A100-SXM4-80GB``);
    - 16 x ``gpu-v100``: 64 cpu, 512Gi, 8 GPUs (labelled ``Tesla-V100-SXM2-32GB``);
    - 8 x ``cpu``: 64 cpu, 256Gi, no GPU (parameter servers, data loaders).

    384 GPUs in all, the size :func:`pumice.sim.synthetic.default_workload` is loaded for.
    """
    spec = {
        "nodes": [
            {
                "count": 32,
                "namePrefix": "gpu-a100",
                "allocatable": {"cpu": 96, "memory": "768Gi", GPU: 8},
                "labels": {GPU_PRODUCT_LABEL: "NVIDIA-A100-SXM4-80GB"},
            },
            {
                "count": 16,
                "namePrefix": "gpu-v100",
                "allocatable": {"cpu": 64, "memory": "512Gi", GPU: 8},
                "labels": {GPU_PRODUCT_LABEL: "Tesla-V100-SXM2-32GB"},
            },
            {
                "count": 8,
                "namePrefix": "cpu",
                "allocatable": {"cpu": 64, "memory": "256Gi"},
            },
        ]
    }
    return _compact_nodes(spec, "<default cluster>")


@dataclass(slots=True)
class ClusterSpec:
    """A cluster file's Node objects, the HyperNodes of its network (none: no
    network-topology information), its storage objects (StorageClasses,
    PersistentVolumes, CSINodes, CSIDrivers; none: no storage) and its devices
    (ResourceSlices and DeviceClasses; none: no devices)."""

    nodes: list[dict[str, Any]]
    hypernodes: list[dict[str, Any]] = field(default_factory=list)
    storage: list[dict[str, Any]] = field(default_factory=list)
    devices: list[dict[str, Any]] = field(default_factory=list)


def load_cluster(path: str | None, notes: list[str] | None = None) -> list[dict[str, Any]]:
    """The nodes of :func:`load_cluster_spec` (HyperNodes are said to be left out)."""
    spec = load_cluster_spec(path, notes, network=False)
    return spec.nodes


def load_cluster_spec(
    path: str | None, notes: list[str] | None = None, *, network: bool = True
) -> ClusterSpec:
    """Nodes (and HyperNodes) from ``path`` (a YAML or JSON file), or
    :func:`default_cluster` when ``None``.

    The file holds Node objects (several documents, or a ``kind: List``) or one compact
    document ``{nodes: [{count, namePrefix, allocatable, labels, taints}, ...]}``; node
    names are ``{namePrefix}-{i:03d}``, numbered per prefix across groups and padded so
    that they sort. With ``network``, ``topology.volcano.sh`` HyperNode objects are kept,
    or a compact document's ``topology: {nodesPerLeaf, leavesPerSpine, tiers}`` block
    generates a tree over all the file's nodes, in file order (not both). StorageClass,
    PersistentVolume, CSINode and CSIDriver objects are kept, and a node group's
    ``localVolumes`` makes local PVs on each of its nodes (:mod:`pumice.sim.storage_spec`).
    ResourceSlice and DeviceClass objects are kept, and a node group's ``devices`` makes
    a ResourceSlice per node (:mod:`pumice.sim.devices_spec`).
    Objects of other kinds are left out, as ``pumice cycle`` takes what it needs from a whole dump
    (``kubectl get nodes,pods -A -o yaml``): the workload comes from elsewhere. How many
    were left out is said in ``notes``, when given. Bad input raises
    :class:`InputError` naming the file, node and field.
    """
    if path is None:
        return ClusterSpec(default_cluster())
    if not Path(path).is_file():
        raise InputError("no such file", file=path)
    nodes: list[dict[str, Any]] = []
    hypernodes: list[dict[str, Any]] = []
    storage: list[dict[str, Any]] = []
    local: list[dict[str, Any]] = []  # (the local volumes of compact node groups)
    devices: list[dict[str, Any]] = []
    slices: list[dict[str, Any]] = []  # (the devices of compact node groups)
    shape: TreeShape | None = None
    skipped: dict[str, int] = {}
    for obj in iter_objects(read_documents(path), file=path):
        kind = obj.get("kind")
        if kind == "Node":
            nodes.append(_node_manifest(obj, path))
        elif kind in STORAGE_KINDS:
            storage.append(storage_object(obj, path))
        elif kind in DEVICE_KINDS:
            devices.append(device_object(obj, path))
        elif "nodes" in obj and kind in (None, "Cluster"):
            nodes.extend(_compact_nodes(obj, path, local, slices))
            if "topology" in obj and network:
                if shape is not None:
                    raise InputError(
                        "a second topology block", file=path, obj="cluster", field="topology"
                    )
                try:
                    shape = TreeShape.parse(obj.get("topology") or {}, "topology")
                except InputError as exc:
                    raise exc.located(file=path, obj="cluster") from None
        elif kind == "HyperNode" and network:
            hypernodes.append(dict(obj))
        elif isinstance(kind, str) and kind:
            skipped[kind] = skipped.get(kind, 0) + 1
        else:
            raise InputError(
                "expected Node objects or a compact {nodes: [...]} document, got an "
                "object without a kind",
                file=path,
            )
    if skipped and notes is not None:
        kinds = ", ".join(plural(n, kind) for kind, n in sorted(skipped.items()))
        notes.append(f"{path}: took its {plural(len(nodes), 'Node')}, left out {kinds}")
    seen: set[str] = set()
    for node in nodes:
        name = node["metadata"]["name"]
        if name in seen:
            raise InputError(f"duplicate node {name}", file=path, obj=f"Node {name}")
        seen.add(name)
    if not nodes:
        raise InputError("no nodes", file=path)
    if shape is not None:
        if hypernodes:
            raise InputError(
                "give HyperNode objects or a topology block, not both",
                file=path,
                obj="cluster",
                field="topology",
            )
        hypernodes = hypernode_objects([n["metadata"]["name"] for n in nodes], shape)
    try:
        cluster_topology(nodes, hypernodes)  # a tree that lies is refused here
    except InputError as exc:
        raise exc.located(file=path) from None
    classes = {o["metadata"]["name"] for o in storage if o["kind"] == "StorageClass"}
    for name in sorted({o["spec"]["storageClassName"] for o in local} - classes):
        storage.append(local_class(name))
    storage.extend(local)
    check_storage(storage, path)
    classes = {o["metadata"]["name"] for o in devices if o["kind"] == "DeviceClass"}
    for name in sorted({o["spec"]["driver"] for o in slices} - classes):
        devices.append(driver_class(name))
    devices.extend(slices)
    check_devices(devices, seen, path)
    return ClusterSpec(nodes, hypernodes, storage, devices)


def _node_manifest(obj: Mapping[str, Any], file: str) -> dict[str, Any]:
    """Check a Node manifest's quantities; fill a missing allocatable from capacity."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise InputError(
            f"expected a map, got {shown(meta)}", file=file, obj="Node", field="metadata"
        )
    if not meta.get("name"):
        raise InputError("missing metadata.name", file=file, obj="Node", field="metadata.name")
    name = meta["name"]
    if not isinstance(name, str):
        raise InputError(
            f"expected a string, got {shown(name)}", file=file, obj="Node", field="metadata.name"
        )
    where = f"Node {shown_text(name)}"
    status = obj.get("status") or {}
    if not isinstance(status, Mapping):
        raise InputError("expected a map", file=file, obj=where, field="status")
    try:
        capacity = parse_resources(status.get("capacity"), field="status.capacity")
        allocatable = parse_resources(status.get("allocatable"), field="status.allocatable")
    except InputError as exc:
        raise exc.located(file=file, obj=where) from None
    if not allocatable and not capacity:
        raise InputError(
            "node has neither status.allocatable nor status.capacity",
            file=file,
            obj=where,
            field="status.allocatable",
        )
    node = dict(obj)
    new_status = dict(status)
    if not allocatable:
        new_status["allocatable"] = dict(status["capacity"])
    if not capacity:
        new_status["capacity"] = dict(status["allocatable"])
    node["status"] = new_status
    return node


def _compact_nodes(
    doc: Mapping[str, Any],
    file: str,
    local: list[dict[str, Any]] | None = None,
    slices: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The nodes of a compact document; the local PVs of its groups' ``localVolumes``
    go into ``local``, the ResourceSlices of their ``devices`` into ``slices``."""
    try:
        check_keys(doc, _CLUSTER_KEYS, field=None)
    except InputError as exc:
        raise exc.located(file=file, obj="cluster") from None
    groups = doc.get("nodes")
    if not isinstance(groups, list) or not groups:
        raise InputError("expected a non-empty list", file=file, obj="cluster", field="nodes")
    next_index: dict[str, int] = {}
    planned: list[tuple[str, int, int, Mapping[str, Any]]] = []
    for g, group in enumerate(groups):
        f = f"nodes[{g}]"
        if not isinstance(group, Mapping):
            raise InputError("expected a map", file=file, obj="cluster", field=f)
        try:
            check_keys(group, _GROUP_KEYS, field=f)
            count = require_int(
                group.get("count", 1), field=f"{f}.count", minimum=1, maximum=MAX_NODES
            )
            total = count + sum(p[2] for p in planned)
            if total > MAX_NODES:
                raise InputError(
                    f"{total:,} nodes in all, more than the {MAX_NODES:,} a cluster may have",
                    field=f"{f}.count",
                )
            prefix = require_str(group.get("namePrefix", "node"), field=f"{f}.namePrefix")
            if not is_dns_subdomain(prefix):
                raise InputError(
                    f"invalid node name prefix {shown(prefix)}", field=f"{f}.namePrefix"
                )
        except InputError as exc:
            raise exc.located(file=file, obj="cluster") from None
        start = next_index.get(prefix, 0)
        next_index[prefix] = start + count
        planned.append((prefix, start, count, group))
    nodes: list[dict[str, Any]] = []
    for g, (prefix, start, count, group) in enumerate(planned):
        f = f"nodes[{g}]"
        width = max(3, len(str(next_index[prefix] - 1)))
        try:
            allocatable = parse_resources(group.get("allocatable"), field=f"{f}.allocatable")
            if not allocatable:
                raise InputError("missing allocatable", field=f"{f}.allocatable")
            labels = _labels(group.get("labels"), f"{f}.labels")
            taints = _taints(group.get("taints"), f"{f}.taints")
            volumes = None
            if group.get("localVolumes") is not None:
                volumes = local_volumes(group["localVolumes"], f"{f}.localVolumes")
            blocks: list[DeviceBlock] = []
            if group.get("devices") is not None:
                blocks = device_blocks(group["devices"], f"{f}.devices")
        except InputError as exc:
            raise exc.located(file=file, obj=f"node group {prefix}") from None
        names = [f"{prefix}-{i:0{width}d}" for i in range(start, start + count)]
        for name in names:
            nodes.append(node_object(name, allocatable, labels=labels, taints=taints))
        if volumes is not None and local is not None:
            local.extend(local_pvs(names, *volumes))
        if slices is not None:
            for block in blocks:
                slices.extend(device_slices(names, block))
    return nodes


def _labels(value: object, field: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError("expected a map of label: value", field=field)
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or not k:
            raise InputError(f"invalid label key {shown(k)}", field=field)
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise InputError(f"invalid label value {shown(v)}", field=f"{field}.{k}")
        out[k] = str(v)
    return out


def _taints(value: object, field: str) -> list[dict[str, str]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError("expected a list", field=field)
    out = []
    for i, t in enumerate(value):
        f = f"{field}[{i}]"
        if not isinstance(t, Mapping):
            raise InputError("expected a map", field=f)
        check_keys(t, ("key", "value", "effect"), field=f)
        key = require_str(t.get("key"), field=f"{f}.key")
        effect = t.get("effect")
        if effect not in TAINT_EFFECTS:
            raise InputError(
                f"expected one of {', '.join(TAINT_EFFECTS)}, got {shown(effect)}",
                field=f"{f}.effect",
            )
        taint = {"key": key, "effect": str(effect)}
        if t.get("value") is not None:
            taint["value"] = str(t["value"])
        out.append(taint)
    return out


__all__ = [
    "DEFAULT_PODS",
    "GPU_PRODUCT_LABEL",
    "ClusterSpec",
    "default_cluster",
    "load_cluster",
    "load_cluster_spec",
    "node_object",
]
