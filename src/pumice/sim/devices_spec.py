"""The simulated cluster's devices (dynamic resource allocation): ResourceSlices and
DeviceClasses from a cluster file, and the devices of a compact node group.

A cluster file may hold these objects as ordinary manifests (what ``kubectl get
resourceslices,deviceclasses -o yaml`` prints); each is checked as the scheduler reads
it (:data:`~pumice.api.side_objects.DRA_PARSERS`), so a malformed one is refused before
the run with the file, the object and the field; a slice's ``nodeName`` must be a node
of the file.

A compact node group may give each of its nodes devices of a driver::

    devices: {driver: gpu.example.com, count: 8, attributes: {model: A100},
              capacity: {memory: 80Gi}}

makes one ResourceSlice per node, named ``<node>-<driver>``, in a pool named after the
node (generation 1, one slice), reaching that node only (``nodeName``), with ``count``
devices named ``<namePrefix>-<i>`` (``namePrefix`` defaults to the driver's first
label: ``gpu``). Attributes are written as plain values (a string, an integer, a
boolean) or typed as in a slice (``{version: 1.2.0}``); capacities as quantities. Their
names belong to the driver's domain unless qualified (``gpu.example.com/model``), as
Kubernetes defines. ``devices`` may also be a list of such blocks (GPUs and NICs).
A DeviceClass named after each driver, selecting its devices
(``device.driver == "<driver>"``), is added when the file defines no class of that name.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pumice.api.quantity import parse_quantity
from pumice.api.side_objects import DRA_PARSERS
from pumice.errors import InputError, shown
from pumice.sim.fields import check_keys, is_dns_label, is_dns_subdomain, require_int, require_str
from pumice.sim.storage_spec import checked_object

#: The device kinds a cluster file may hold.
DEVICE_KINDS = ("ResourceSlice", "DeviceClass")
DRA_API = "resource.k8s.io/v1"
_BLOCK_KEYS = ("driver", "count", "namePrefix", "attributes", "capacity")
_TYPED = ("int", "bool", "string", "version")


@dataclass(frozen=True, slots=True)
class DeviceBlock:
    """A node group's ``devices`` block, checked."""

    driver: str
    count: int
    name_prefix: str
    #: Attribute name -> its typed value (``{"string": "A100"}``), as a slice holds it.
    attributes: Mapping[str, Mapping[str, Any]]
    #: Capacity name -> quantity text.
    capacity: Mapping[str, str]


def device_object(obj: Mapping[str, Any], file: str) -> dict[str, Any]:
    """A ResourceSlice or DeviceClass manifest of a cluster file, checked."""
    out = checked_object(obj, file, DRA_PARSERS)
    out.pop("status", None)
    return out


def _typed(value: object, field: str) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)  # (typed as in a slice; checked with the sample slice)
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, str):
        return {"string": value}
    raise InputError(
        f"expected a string, an integer, a boolean or a typed value ({', '.join(_TYPED)}), "
        f"got {shown(value)}",
        field=field,
    )


def _block(value: object, field: str) -> DeviceBlock:
    if not isinstance(value, Mapping):
        raise InputError("expected {driver, count, attributes}", field=field)
    check_keys(value, _BLOCK_KEYS, field=field)
    driver = require_str(value.get("driver"), field=f"{field}.driver")
    if not is_dns_subdomain(driver) or len(driver) > 63:
        raise InputError(
            f"invalid driver name {shown(driver)} (a DNS subdomain of at most 63 characters, "
            "e.g. gpu.example.com)",
            field=f"{field}.driver",
        )
    count = require_int(value.get("count", 1), field=f"{field}.count", minimum=1)
    prefix = value.get("namePrefix", driver.split(".")[0])
    if not isinstance(prefix, str) or not is_dns_label(f"{prefix}-{count - 1}"):
        raise InputError(f"invalid device name prefix {shown(prefix)}", field=f"{field}.namePrefix")
    attrs = value.get("attributes") or {}
    if not isinstance(attrs, Mapping):
        raise InputError("expected a map of name: value", field=f"{field}.attributes")
    attributes = {str(k): _typed(v, f"{field}.attributes.{k}") for k, v in attrs.items()}
    caps = value.get("capacity") or {}
    if not isinstance(caps, Mapping):
        raise InputError("expected a map of name: quantity", field=f"{field}.capacity")
    capacity = {}
    for k, v in caps.items():
        parse_quantity(v, field=f"{field}.capacity.{k}")
        capacity[str(k)] = str(v)
    block = DeviceBlock(driver, count, prefix, attributes, capacity)
    sample = device_slices(["node"], block)[0]
    try:  # (names, attribute types and lengths, as the scheduler will read them)
        DRA_PARSERS["ResourceSlice"](sample)
    except InputError as exc:
        inner = exc.field or ""
        for prefix_ in ("spec.devices[0].", "spec."):
            if inner.startswith(prefix_):
                inner = inner[len(prefix_) :]
                break
        raise InputError(exc.message, field=f"{field}.{inner}" if inner else field) from None
    return block


def device_blocks(value: object, field: str) -> list[DeviceBlock]:
    """A node group's ``devices``: one block or a list of them, one per driver."""
    items = value if isinstance(value, list) else [value]
    out: list[DeviceBlock] = []
    for i, item in enumerate(items):
        f = f"{field}[{i}]" if isinstance(value, list) else field
        block = _block(item, f)
        if any(b.driver == block.driver for b in out):
            raise InputError(f"driver {block.driver} is given twice", field=f"{f}.driver")
        out.append(block)
    return out


def device_slices(nodes: Iterable[str], block: DeviceBlock) -> list[dict[str, Any]]:
    """One ResourceSlice per node with ``block``'s devices (module docstring)."""
    out = []
    for node in nodes:
        devices = []
        for i in range(block.count):
            device: dict[str, Any] = {"name": f"{block.name_prefix}-{i}"}
            if block.attributes:
                device["attributes"] = copy.deepcopy(dict(block.attributes))
            if block.capacity:
                device["capacity"] = {k: {"value": v} for k, v in block.capacity.items()}
            devices.append(device)
        out.append(
            {
                "apiVersion": DRA_API,
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-{block.driver}"},
                "spec": {
                    "driver": block.driver,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            }
        )
    return out


def driver_class(driver: str) -> dict[str, Any]:
    """The DeviceClass of all of a driver's devices, named after the driver."""
    return {
        "apiVersion": DRA_API,
        "kind": "DeviceClass",
        "metadata": {"name": driver},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def check_devices(objects: Sequence[dict[str, Any]], nodes: Iterable[str], file: str) -> None:
    """No two objects of one kind and name; a slice's ``nodeName`` is a node of the file."""
    known = set(nodes)
    seen: set[tuple[str, str]] = set()
    for obj in objects:
        key = (obj["kind"], obj["metadata"]["name"])
        where = f"{key[0]} {key[1]}"
        if key in seen:
            raise InputError(f"duplicate {where}", file=file, obj=where)
        seen.add(key)
        node = (obj.get("spec") or {}).get("nodeName") if key[0] == "ResourceSlice" else None
        if node and node not in known:
            raise InputError(
                f"names node {node}, which the file does not define",
                file=file,
                obj=where,
                field="spec.nodeName",
            )


__all__ = [
    "DEVICE_KINDS",
    "DeviceBlock",
    "check_devices",
    "device_blocks",
    "device_object",
    "device_slices",
    "driver_class",
]
