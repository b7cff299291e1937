"""The simulated cluster's storage: StorageClasses, PersistentVolumes, CSINodes and
CSIDrivers from a cluster file, and the local volumes of a compact node group.

A cluster file may hold these objects as ordinary manifests (what ``kubectl get
storageclass,pv,csinode,csidriver -o yaml`` prints); each is checked as the scheduler
reads it (:data:`~pumice.api.volumes.STORAGE_PARSERS`), so a malformed one is refused
before the run with the file, the object and the field. A PV's claim and phase are
dropped: the run starts with every volume free (bound PVs belong to claims of a
cluster that is not being simulated).

A compact node group may give each of its nodes local volumes::

    localVolumes: {storageClass: local-nvme, count: 4, size: 3500Gi}

makes ``count`` PVs of ``size`` per node, named ``<node>-<class>-<i>``, each reaching its
node only (a required node affinity on ``kubernetes.io/hostname``), ``ReadWriteOnce``,
reclaim policy ``Delete`` (see docs/simulation.md for what a released volume becomes),
with a StorageClass of that name (``kubernetes.io/no-provisioner``,
``WaitForFirstConsumer``) when the file defines none. ``accessModes`` may be given too.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pumice.api.quantity import parse_quantity
from pumice.api.volumes import NO_PROVISIONER, STORAGE_PARSERS, WAIT_FOR_FIRST_CONSUMER
from pumice.errors import InputError, shown
from pumice.sim.fields import check_keys, is_dns_subdomain, require_int, require_str

#: The kinds a cluster file may hold besides nodes and HyperNodes.
STORAGE_KINDS = ("StorageClass", "PersistentVolume", "CSINode", "CSIDriver")
HOSTNAME_LABEL = "kubernetes.io/hostname"
_LOCAL_KEYS = ("storageClass", "count", "size", "accessModes")
_API = {
    "StorageClass": "storage.k8s.io/v1",
    "PersistentVolume": "v1",
    "CSINode": "storage.k8s.io/v1",
    "CSIDriver": "storage.k8s.io/v1",
}


def checked_object(
    obj: Mapping[str, Any], file: str, parsers: Mapping[str, Callable[..., Any]]
) -> dict[str, Any]:
    """A copy of a cluster file's manifest of one of ``parsers``' kinds, checked as the
    scheduler reads it (an InputError naming the file, the object and the field)."""
    kind = str(obj.get("kind"))
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    where = f"{kind} {name}" if isinstance(name, str) and name else kind
    try:
        parsers[kind](obj)
    except InputError as exc:
        raise exc.located(file=file, obj=where) from None
    return copy.deepcopy(dict(obj))


def storage_object(obj: Mapping[str, Any], file: str) -> dict[str, Any]:
    """A storage manifest of a cluster file, checked; a PV starts free."""
    out = checked_object(obj, file, STORAGE_PARSERS)
    kind = out.get("kind")
    if kind == "PersistentVolume":
        out.get("spec", {}).pop("claimRef", None)
        out["status"] = {"phase": "Available"}
    return out


def local_volumes(value: object, field: str) -> tuple[str, int, str, list[str]]:
    """A node group's ``localVolumes`` block: (class, count, size, access modes)."""
    if not isinstance(value, Mapping):
        raise InputError("expected {storageClass, count, size}", field=field)
    check_keys(value, _LOCAL_KEYS, field=field)
    cls = require_str(value.get("storageClass"), field=f"{field}.storageClass")
    if not is_dns_subdomain(cls):
        raise InputError(f"invalid storage class name {shown(cls)}", field=f"{field}.storageClass")
    count = require_int(value.get("count", 1), field=f"{field}.count", minimum=1)
    size = value.get("size")
    if size is None:
        raise InputError("missing size (e.g. 3500Gi)", field=f"{field}.size")
    if parse_quantity(size, field=f"{field}.size") <= 0:
        raise InputError(f"expected a size above 0, got {shown(size)}", field=f"{field}.size")
    modes = value.get("accessModes", ["ReadWriteOnce"])
    if not isinstance(modes, list) or not modes:
        raise InputError("expected a non-empty list", field=f"{field}.accessModes")
    return cls, count, str(size), [str(m) for m in modes]


def local_pvs(
    nodes: Iterable[str], cls: str, count: int, size: str, modes: list[str]
) -> list[dict[str, Any]]:
    """``count`` local PVs of ``size`` on each of ``nodes`` (module docstring)."""
    out = []
    for node in nodes:
        reach = {"key": HOSTNAME_LABEL, "operator": "In", "values": [node]}
        affinity = {"required": {"nodeSelectorTerms": [{"matchExpressions": [reach]}]}}
        for i in range(count):
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": f"{node}-{cls}-{i}", "labels": {HOSTNAME_LABEL: node}},
                    "spec": {
                        "capacity": {"storage": size},
                        "accessModes": list(modes),
                        "storageClassName": cls,
                        "volumeMode": "Filesystem",
                        "persistentVolumeReclaimPolicy": "Delete",
                        "local": {"path": f"/mnt/{cls}/{i}"},
                        "nodeAffinity": copy.deepcopy(affinity),
                    },
                    "status": {"phase": "Available"},
                }
            )
    return out


def local_class(name: str) -> dict[str, Any]:
    """The StorageClass of statically made local volumes."""
    return {
        "apiVersion": _API["StorageClass"],
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": NO_PROVISIONER,
        "volumeBindingMode": WAIT_FOR_FIRST_CONSUMER,
        "reclaimPolicy": "Delete",
    }


def check_storage(objects: list[dict[str, Any]], file: str) -> None:
    """No two objects of one kind and name; a local group's PV names clash too."""
    seen: set[tuple[str, str]] = set()
    for obj in objects:
        key = (obj["kind"], obj["metadata"]["name"])
        if key in seen:
            raise InputError(f"duplicate {key[0]} {key[1]}", file=file, obj=f"{key[0]} {key[1]}")
        seen.add(key)


__all__ = [
    "STORAGE_KINDS",
    "check_storage",
    "local_class",
    "local_pvs",
    "local_volumes",
    "storage_object",
]
