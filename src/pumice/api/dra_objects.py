"""``resource.k8s.io`` objects (Dynamic Resource Allocation) -> validated records.

ResourceSlices (the devices a driver publishes), DeviceClasses, ResourceClaims and
ResourceClaimTemplates are read in the shapes of ``resource.k8s.io/v1`` and ``v1beta2``
(a request's fields under ``exactly:``, or ``firstAvailable`` subrequests) and of
``v1beta1`` (the fields directly on the request; a device's attributes and capacity
under ``basic:``); both give the same records. Bad input raises
:class:`~pumice.errors.InputError` naming the object and the field, as the API server
would refuse it.

Attribute and capacity names are kept fully qualified (``gpu.example.com/model``): an
unqualified name belongs to the driver's domain, as Kubernetes defines. Fields of the
API that pumice does not model (counters, consumable capacity, device taints and
tolerations, binding conditions) are read past; :mod:`pumice.api.dra` says what that
means for allocation.

The module also names a pod's claims (:func:`pod_claim_names`) and builds the claim the
resource-claim controller would create from a template (:func:`claim_from_template`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar

from pumice.api.parse import (
    PodClaimRef,
    as_int,
    as_labels,
    as_list,
    as_mapping,
    as_str,
    copy_tree,
    pod_device_claims,
    selector_term,
)
from pumice.api.quantity import parse_quantity
from pumice.api.task import Requirement, SelectorTerm
from pumice.errors import InputError, shown

GROUP = "resource.k8s.io"
#: The annotation the resource-claim controller puts on a claim made from a template.
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
EXACT_COUNT = "ExactCount"
ALL = "All"

_MODES = frozenset({EXACT_COUNT, ALL})
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: semver.org 2.0.0, as Kubernetes validates ``version`` attributes.
SEMVER_PATTERN = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)


# -- records -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Version:
    """A ``version`` attribute: a semantic version (semver.org 2.0.0). Two versions are
    equal when they have the same precedence (build metadata does not count)."""

    text: str
    #: A sort key in semver precedence: numbers, then a release above its pre-releases,
    #: pre-release identifiers numeric below alphanumeric (worked out once).
    precedence: tuple[Any, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        m = SEMVER_PATTERN.match(self.text)
        if m is None:  # (parsing refuses these; a hand-made record sorts lowest)
            key: tuple[Any, ...] = ((-1, -1, -1), 0, ())
        else:
            numbers = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
            pre = m.group(4)
            if pre is None:
                key = (numbers, 1, ())
            else:
                ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
                key = (numbers, 0, ids)
        object.__setattr__(self, "precedence", key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self.precedence == other.precedence

    def __hash__(self) -> int:
        return hash(self.precedence)


#: An attribute's value: ``int``, ``bool``, ``string`` or ``version`` in the API.
AttributeValue = int | bool | str | Version
#: A device as the allocator names it: (driver, pool, device name).
DeviceKey = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a ResourceSlice. ``attributes`` and ``capacity`` are sorted pairs of
    a fully qualified name and its value (capacities exact, as Decimals), so that a
    device is a hashable value (selector answers are cached by it)."""

    name: str
    attributes: tuple[tuple[str, AttributeValue], ...] = ()
    capacity: tuple[tuple[str, Decimal], ...] = ()
    #: Whether it consumes a slice's shared counters (a partition of a device): pumice
    #: does not model counters and never allocates such a device.
    consumes_counters: bool = False
    #: With the slice's ``perDeviceNodeSelection``, the device's own node access.
    node_name: str = ""
    all_nodes: bool = False
    node_selector: tuple[SelectorTerm, ...] | None = None

    def attribute(self, qualified: str) -> AttributeValue | None:
        """The value of the attribute named ``domain/name`` (None: the device has none)."""
        for name, value in self.attributes:
            if name == qualified:
                return value
        return None


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """A ResourceSlice: some devices of one pool of one driver, and the nodes that can
    reach them (exactly one of ``node_name``, ``all_nodes``, ``node_selector``,
    ``per_device``)."""

    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    devices: tuple[Device, ...]
    node_name: str = ""
    all_nodes: bool = False
    node_selector: tuple[SelectorTerm, ...] | None = None
    #: ``perDeviceNodeSelection``: each device says which nodes reach it.
    per_device: bool = False


@dataclass(frozen=True, slots=True)
class DeviceClass:
    """A DeviceClass: CEL selectors every device of the class must satisfy, and the
    configuration handed to the driver (``{"opaque": {...}}`` entries, as written)."""

    name: str
    selectors: tuple[str, ...] = ()
    config: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """What one request (``exactly``) or one ``firstAvailable`` subrequest asks for."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = EXACT_COUNT  # ExactCount or All
    count: int = 1  # for ExactCount
    admin_access: bool = False


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """A claim's request: either ``exactly`` one spec, or ``first_available``
    alternatives tried in order."""

    name: str
    exactly: RequestSpec | None = None
    first_available: tuple[RequestSpec, ...] = ()

    def alternatives(self) -> tuple[tuple[str, RequestSpec], ...]:
        """(the name a result records, spec) in the order to try: ``gpu`` for an exact
        request, ``gpu/large``, ``gpu/small`` for subrequests."""
        if self.exactly is not None:
            return ((self.name, self.exactly),)
        return tuple((f"{self.name}/{s.name}", s) for s in self.first_available)


@dataclass(frozen=True, slots=True)
class MatchAttribute:
    """A ``matchAttribute`` constraint: every device chosen for the named requests (all
    of the claim's when empty) has this attribute, with one value."""

    attribute: str
    requests: tuple[str, ...] = ()

    def covers(self, result_name: str) -> bool:
        """Whether a device allocated for ``result_name`` (``req`` or ``req/sub``) is
        bound by this constraint (naming ``req`` covers all of its subrequests)."""
        if not self.requests:
            return True
        return result_name in self.requests or result_name.split("/", 1)[0] in self.requests


@dataclass(frozen=True, slots=True)
class ClaimConfig:
    """A claim's ``spec.devices.config`` entry: the requests it applies to (all when
    empty) and the configuration as written (``{"opaque": {...}}``)."""

    requests: tuple[str, ...]
    configuration: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    """A ResourceClaim's (or a template's) ``spec.devices``."""

    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[MatchAttribute, ...] = ()
    config: tuple[ClaimConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """One allocated device: the request (``req`` or ``req/sub``) it serves."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True, slots=True)
class ClaimAllocation:
    """A claim's ``status.allocation``: its devices, and the nodes that can use them
    (None: every node)."""

    results: tuple[DeviceResult, ...]
    node_selector: tuple[SelectorTerm, ...] | None = None


@dataclass(frozen=True, slots=True)
class ConsumerRef:
    """A ``status.reservedFor`` entry (a pod, as a rule)."""

    resource: str
    name: str
    uid: str
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str
    spec: ClaimSpec
    annotations: dict[str, str] = field(default_factory=dict)
    allocation: ClaimAllocation | None = None
    reserved_for: tuple[ConsumerRef, ...] = ()

    @property
    def key(self) -> str:
        """``namespace/name``, as messages and the allocator name a claim."""
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    """A ResourceClaimTemplate: the claim spec (``spec.spec``) and the metadata
    (``spec.metadata``) a claim made from it gets."""

    namespace: str
    name: str
    spec: ClaimSpec
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


# -- helpers -----------------------------------------------------------------------------

_R = TypeVar("_R")


def _located(kind: str, obj: Any, parse: Callable[[Mapping[str, Any]], _R]) -> _R:
    """``parse(obj)`` with any InputError naming ``Kind namespace/name``."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    name, ns = meta.get("name", "?"), meta.get("namespace")
    label = f"{kind} {ns}/{name}" if isinstance(ns, str) and ns else f"{kind} {name}"
    try:
        if not isinstance(obj, Mapping):
            raise InputError(f"expected a mapping, got {type(obj).__name__}")
        return parse(obj)
    except InputError as exc:
        raise exc.located(obj=label) from None


def _as_bool(value: Any, path: str, default: bool = False) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InputError(f"expected true or false, got {type(value).__name__}", field=path)
    return value


def _qualified(name: str, driver: str, path: str) -> str:
    """``name`` with the driver's domain when it has none; the part after the domain
    must be a C identifier (a CEL field name), as Kubernetes requires."""
    domain, _, ident = name.rpartition("/")
    if not _IDENTIFIER.match(ident):
        raise InputError(f"name {shown(name)} must end in a C identifier", field=path)
    return name if domain else f"{driver}/{name}"


def parse_node_selector(value: Any, path: str) -> tuple[SelectorTerm, ...] | None:
    """A ``v1.NodeSelector`` (``{nodeSelectorTerms: [...]}``) -> its terms (None when
    absent). Any term may match; a term's requirements must all hold."""
    if value is None:
        return None
    terms_path = f"{path}.nodeSelectorTerms"
    terms = as_list(as_mapping(value, path).get("nodeSelectorTerms"), terms_path)
    out = tuple(selector_term(t, f"{terms_path}[{i}]") for i, t in enumerate(terms))
    if not out:
        raise InputError("needs at least one term", field=terms_path)
    return out


def _requirement_holds(r: Requirement, node_name: str, labels: Mapping[str, str]) -> bool:
    if r.field:
        present, value = r.key == "metadata.name", node_name
    else:
        present, value = r.key in labels, labels.get(r.key, "")
    op = r.operator
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op == "In":
        return present and value in r.values
    if op == "NotIn":
        return not (present and value in r.values)
    if not present or not value.lstrip("-").isdigit():
        return False
    return int(value) > int(r.values[0]) if op == "Gt" else int(value) < int(r.values[0])


def node_selector_matches(
    terms: tuple[SelectorTerm, ...] | None, node_name: str, labels: Mapping[str, str]
) -> bool:
    """Whether a node selector admits the node (None admits every node; a term with no
    requirements admits none, as in Kubernetes)."""
    if terms is None:
        return True
    return any(
        t.requirements and all(_requirement_holds(r, node_name, labels) for r in t.requirements)
        for t in terms
    )


def render_node_selector(terms: tuple[SelectorTerm, ...]) -> dict[str, Any]:
    """Terms back as a ``v1.NodeSelector`` dict."""
    out = []
    for t in terms:
        term: dict[str, Any] = {}
        for key, fields in (("matchExpressions", False), ("matchFields", True)):
            reqs = [r for r in t.requirements if r.field == fields]
            if reqs:
                term[key] = [
                    {
                        "key": r.key,
                        "operator": r.operator,
                        **({"values": list(r.values)} if r.values else {}),
                    }
                    for r in reqs
                ]
        out.append(term)
    return {"nodeSelectorTerms": out}


def _node_access(spec: Mapping[str, Any], path: str, *, device: bool) -> tuple[str, bool, Any]:
    """(nodeName, allNodes, nodeSelector terms) of a slice spec or a device; exactly one
    of them (or, on a slice, ``perDeviceNodeSelection``) must be set."""
    node_name = as_str(spec.get("nodeName"), f"{path}.nodeName")
    all_nodes = _as_bool(spec.get("allNodes"), f"{path}.allNodes")
    selector = parse_node_selector(spec.get("nodeSelector"), f"{path}.nodeSelector")
    per_device = (
        False
        if device
        else _as_bool(spec.get("perDeviceNodeSelection"), f"{path}.perDeviceNodeSelection")
    )
    chosen = sum((bool(node_name), all_nodes, selector is not None, per_device))
    if device and chosen > 1:
        raise InputError("set at most one of nodeName, allNodes and nodeSelector", field=path)
    if not device and chosen != 1:
        raise InputError(
            "set exactly one of nodeName, allNodes, nodeSelector and perDeviceNodeSelection",
            field=path,
        )
    return node_name, all_nodes, selector


# -- ResourceSlice -----------------------------------------------------------------------


def _attribute(value: Any, path: str) -> AttributeValue:
    attr = as_mapping(value, path)
    kinds = [k for k in ("int", "bool", "string", "version") if attr.get(k) is not None]
    if len(kinds) != 1:
        lists = [k for k in ("ints", "bools", "strings", "versions") if attr.get(k) is not None]
        if lists and not kinds:
            raise InputError(f"list attributes ({lists[0]}) are not supported", field=path)
        raise InputError("set exactly one of int, bool, string and version", field=path)
    kind = kinds[0]
    raw = attr[kind]
    if kind == "int":
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise InputError(f"expected an integer, got {type(raw).__name__}", field=f"{path}.int")
        return raw
    if kind == "bool":
        return _as_bool(raw, f"{path}.bool")
    text = as_str(raw, f"{path}.{kind}")
    if len(text) > 64:
        raise InputError("must be at most 64 characters", field=f"{path}.{kind}")
    if kind == "version":
        if not SEMVER_PATTERN.match(text):
            raise InputError(f"invalid semantic version {shown(text)}", field=f"{path}.version")
        return Version(text)
    return text


def _device(value: Any, path: str, driver: str, per_device: bool) -> Device:
    d = as_mapping(value, path)
    name = as_str(d.get("name"), f"{path}.name", required=True)
    body, body_path = d, path
    if d.get("basic") is not None:  # v1beta1
        body_path = f"{path}.basic"
        body = as_mapping(d.get("basic"), body_path)
    attributes: dict[str, AttributeValue] = {}
    ap = f"{body_path}.attributes"
    for k, v in as_mapping(body.get("attributes"), ap).items():
        key = _qualified(str(k), driver, f"{ap}.{k}")
        if key in attributes:
            raise InputError(f"attribute {key} is given twice", field=f"{ap}.{k}")
        attributes[key] = _attribute(v, f"{ap}.{k}")
    capacity: dict[str, Decimal] = {}
    cp = f"{body_path}.capacity"
    for k, v in as_mapping(body.get("capacity"), cp).items():
        key = _qualified(str(k), driver, f"{cp}.{k}")
        if key in capacity:
            raise InputError(f"capacity {key} is given twice", field=f"{cp}.{k}")
        if isinstance(v, Mapping):
            capacity[key] = parse_quantity(v.get("value"), field=f"{cp}.{k}.value")
        else:  # (the v1alpha3 shape: the quantity itself)
            capacity[key] = parse_quantity(v, field=f"{cp}.{k}")
    node_name, all_nodes, selector = _node_access(body, body_path, device=True)
    if per_device and not (node_name or all_nodes or selector is not None):
        raise InputError(
            "needs nodeName, allNodes or nodeSelector (the slice sets perDeviceNodeSelection)",
            field=body_path,
        )
    if not per_device and (node_name or all_nodes or selector is not None):
        raise InputError(
            "node access per device needs the slice's perDeviceNodeSelection", field=body_path
        )
    return Device(
        name=name,
        attributes=tuple(sorted(attributes.items())),
        capacity=tuple(sorted(capacity.items())),
        consumes_counters=bool(
            as_list(body.get("consumesCounters"), f"{body_path}.consumesCounters")
        ),
        node_name=node_name,
        all_nodes=all_nodes,
        node_selector=selector,
    )


def _parse_slice(obj: Mapping[str, Any]) -> ResourceSlice:
    meta = as_mapping(obj.get("metadata"), "metadata")
    name = as_str(meta.get("name"), "metadata.name", required=True)
    spec = as_mapping(obj.get("spec"), "spec")
    driver = as_str(spec.get("driver"), "spec.driver", required=True)
    pool = as_mapping(spec.get("pool"), "spec.pool")
    if not pool:
        raise InputError("is required", field="spec.pool")
    node_name, all_nodes, selector = _node_access(spec, "spec", device=False)
    per_device = _as_bool(spec.get("perDeviceNodeSelection"), "spec.perDeviceNodeSelection")
    devices = []
    seen: set[str] = set()
    for i, d in enumerate(as_list(spec.get("devices"), "spec.devices")):
        device = _device(d, f"spec.devices[{i}]", driver, per_device)
        if device.name in seen:
            raise InputError(
                f"device {device.name} is given twice", field=f"spec.devices[{i}].name"
            )
        seen.add(device.name)
        devices.append(device)
    return ResourceSlice(
        name=name,
        driver=driver,
        pool=as_str(pool.get("name"), "spec.pool.name", required=True),
        generation=as_int(pool.get("generation"), "spec.pool.generation", 0, minimum=0),
        slice_count=as_int(
            pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount", 1, minimum=1
        ),
        devices=tuple(devices),
        node_name=node_name,
        all_nodes=all_nodes,
        node_selector=selector,
        per_device=per_device,
    )


def parse_resource_slice(obj: Mapping[str, Any]) -> ResourceSlice:
    """A ResourceSlice (v1, v1beta2 or v1beta1) -> its record."""
    return _located("ResourceSlice", obj, _parse_slice)


def slice_available_on(
    slice_: ResourceSlice, node_name: str, node_labels: Mapping[str, str]
) -> bool:
    """Whether a node reaches the slice's devices: its ``nodeName`` is the node,
    ``allNodes``, or its ``nodeSelector`` matches the node. With
    ``perDeviceNodeSelection``, whether it reaches any of them (see
    :func:`device_available_on`)."""
    if slice_.per_device:
        return any(device_available_on(slice_, d, node_name, node_labels) for d in slice_.devices)
    if slice_.node_name:
        return slice_.node_name == node_name
    if slice_.all_nodes:
        return True
    return node_selector_matches(slice_.node_selector, node_name, node_labels)


def device_available_on(
    slice_: ResourceSlice, device: Device, node_name: str, node_labels: Mapping[str, str]
) -> bool:
    """Whether a node reaches one device of the slice."""
    if not slice_.per_device:
        return slice_available_on(slice_, node_name, node_labels)
    if device.node_name:
        return device.node_name == node_name
    if device.all_nodes:
        return True
    return node_selector_matches(device.node_selector, node_name, node_labels)


# -- DeviceClass -------------------------------------------------------------------------


def _selectors(value: Any, path: str) -> tuple[str, ...]:
    out = []
    for i, s in enumerate(as_list(value, path)):
        sp = f"{path}[{i}]"
        cel = as_mapping(as_mapping(s, sp).get("cel"), f"{sp}.cel")
        if not cel:
            raise InputError("needs a cel selector", field=sp)
        expression = as_str(cel.get("expression"), f"{sp}.cel.expression", required=True)
        if not expression.strip():
            raise InputError("must not be empty", field=f"{sp}.cel.expression")
        out.append(expression)
    return tuple(out)


def _configs(value: Any, path: str) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """Config entries: (requests, the configuration without ``requests``)."""
    out = []
    for i, c in enumerate(as_list(value, path)):
        cp = f"{path}[{i}]"
        c = as_mapping(c, cp)
        opaque = as_mapping(c.get("opaque"), f"{cp}.opaque")
        if not opaque:
            raise InputError("needs opaque configuration", field=cp)
        as_str(opaque.get("driver"), f"{cp}.opaque.driver", required=True)
        requests = tuple(
            as_str(r, f"{cp}.requests") for r in as_list(c.get("requests"), f"{cp}.requests")
        )
        out.append((requests, {k: copy_tree(v) for k, v in c.items() if k != "requests"}))
    return out


def _parse_class(obj: Mapping[str, Any]) -> DeviceClass:
    meta = as_mapping(obj.get("metadata"), "metadata")
    spec = as_mapping(obj.get("spec"), "spec")
    return DeviceClass(
        name=as_str(meta.get("name"), "metadata.name", required=True),
        selectors=_selectors(spec.get("selectors"), "spec.selectors"),
        config=tuple(c for _, c in _configs(spec.get("config"), "spec.config")),
    )


def parse_device_class(obj: Mapping[str, Any]) -> DeviceClass:
    """A DeviceClass -> its record."""
    return _located("DeviceClass", obj, _parse_class)


# -- ResourceClaim -----------------------------------------------------------------------

_FLAT_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess")


def _spec(r: Mapping[str, Any], path: str, name: str, *, sub: bool) -> RequestSpec:
    mode = as_str(r.get("allocationMode"), f"{path}.allocationMode") or EXACT_COUNT
    if mode not in _MODES:
        raise InputError(f"unknown allocation mode {shown(mode)}", field=f"{path}.allocationMode")
    if mode == ALL and r.get("count") is not None:
        raise InputError("count is only used with ExactCount", field=f"{path}.count")
    if sub and r.get("adminAccess") is not None:
        raise InputError("a subrequest cannot ask for admin access", field=f"{path}.adminAccess")
    return RequestSpec(
        name=name,
        device_class=as_str(r.get("deviceClassName"), f"{path}.deviceClassName", required=True),
        selectors=_selectors(r.get("selectors"), f"{path}.selectors"),
        mode=mode,
        count=as_int(r.get("count"), f"{path}.count", 1, minimum=1),
        admin_access=_as_bool(r.get("adminAccess"), f"{path}.adminAccess"),
    )


def _request(value: Any, path: str, api_version: str) -> DeviceRequest:
    r = as_mapping(value, path)
    name = as_str(r.get("name"), f"{path}.name", required=True)
    flat = [k for k in _FLAT_FIELDS if r.get(k) is not None]
    exactly, first = r.get("exactly"), r.get("firstAvailable")
    if exactly is not None and first is not None:
        raise InputError("set only one of exactly and firstAvailable", field=path)
    if exactly is not None:
        if flat:
            raise InputError("belongs under exactly", field=f"{path}.{flat[0]}")
        return DeviceRequest(
            name,
            exactly=_spec(
                as_mapping(exactly, f"{path}.exactly"), f"{path}.exactly", name, sub=False
            ),
        )
    if first is not None:
        if flat:
            raise InputError("cannot be set with firstAvailable", field=f"{path}.{flat[0]}")
        fp = f"{path}.firstAvailable"
        subs: list[RequestSpec] = []
        for i, s in enumerate(as_list(first, fp)):
            sp = f"{fp}[{i}]"
            s = as_mapping(s, sp)
            sub_name = as_str(s.get("name"), f"{sp}.name", required=True)
            if any(x.name == sub_name for x in subs):
                raise InputError(f"subrequest {sub_name} is given twice", field=f"{sp}.name")
            subs.append(_spec(s, sp, sub_name, sub=True))
        if not subs:
            raise InputError("needs at least one subrequest", field=fp)
        return DeviceRequest(name, first_available=tuple(subs))
    if flat:
        if api_version in (f"{GROUP}/v1", f"{GROUP}/v1beta2"):
            raise InputError(f"belongs under exactly in {api_version}", field=f"{path}.{flat[0]}")
        return DeviceRequest(name, exactly=_spec(r, path, name, sub=False))  # v1beta1
    raise InputError("needs exactly (deviceClassName in v1beta1) or firstAvailable", field=path)


def parse_claim_spec(value: Any, path: str, api_version: str = "") -> ClaimSpec:
    """A ResourceClaimSpec (``{devices: {requests, constraints, config}}``) at ``path``."""
    devices = as_mapping(as_mapping(value, path).get("devices"), f"{path}.devices")
    dp = f"{path}.devices"
    requests: list[DeviceRequest] = []
    for i, r in enumerate(as_list(devices.get("requests"), f"{dp}.requests")):
        request = _request(r, f"{dp}.requests[{i}]", api_version)
        if any(x.name == request.name for x in requests):
            raise InputError(
                f"request {request.name} is given twice", field=f"{dp}.requests[{i}].name"
            )
        requests.append(request)
    known = {r.name for r in requests}
    known |= {name for r in requests for name, _ in r.alternatives()}

    def check(names: tuple[str, ...], where: str) -> None:
        for n in names:
            if n not in known:
                raise InputError(f"no request {n} in this claim", field=where)

    constraints = []
    for i, c in enumerate(as_list(devices.get("constraints"), f"{dp}.constraints")):
        cp = f"{dp}.constraints[{i}]"
        c = as_mapping(c, cp)
        attribute = as_str(c.get("matchAttribute"), f"{cp}.matchAttribute")
        if not attribute:
            other = "distinctAttribute is not supported; " if c.get("distinctAttribute") else ""
            raise InputError(f"{other}matchAttribute is required", field=f"{cp}.matchAttribute")
        if "/" not in attribute:
            raise InputError(
                f"must be a fully qualified attribute name (domain/name), got {shown(attribute)}",
                field=f"{cp}.matchAttribute",
            )
        names = tuple(
            as_str(n, f"{cp}.requests") for n in as_list(c.get("requests"), f"{cp}.requests")
        )
        check(names, f"{cp}.requests")
        constraints.append(MatchAttribute(attribute, names))
    configs = []
    for names, configuration in _configs(devices.get("config"), f"{dp}.config"):
        check(names, f"{dp}.config")
        configs.append(ClaimConfig(names, configuration))
    return ClaimSpec(tuple(requests), tuple(constraints), tuple(configs))


def _allocation(value: Any, path: str) -> ClaimAllocation | None:
    if value is None:
        return None
    alloc = as_mapping(value, path)
    devices = as_mapping(alloc.get("devices"), f"{path}.devices")
    rp = f"{path}.devices.results"
    results = []
    for i, r in enumerate(as_list(devices.get("results"), rp)):
        p = f"{rp}[{i}]"
        r = as_mapping(r, p)
        results.append(
            DeviceResult(
                request=as_str(r.get("request"), f"{p}.request", required=True),
                driver=as_str(r.get("driver"), f"{p}.driver", required=True),
                pool=as_str(r.get("pool"), f"{p}.pool", required=True),
                device=as_str(r.get("device"), f"{p}.device", required=True),
                admin_access=_as_bool(r.get("adminAccess"), f"{p}.adminAccess"),
            )
        )
    return ClaimAllocation(
        tuple(results), parse_node_selector(alloc.get("nodeSelector"), f"{path}.nodeSelector")
    )


def _parse_claim(obj: Mapping[str, Any]) -> ResourceClaim:
    meta = as_mapping(obj.get("metadata"), "metadata")
    name = as_str(meta.get("name"), "metadata.name", required=True)
    namespace = as_str(meta.get("namespace"), "metadata.namespace") or "default"
    api_version = as_str(obj.get("apiVersion"), "apiVersion")
    status = as_mapping(obj.get("status"), "status")
    reserved = []
    for i, r in enumerate(as_list(status.get("reservedFor"), "status.reservedFor")):
        p = f"status.reservedFor[{i}]"
        r = as_mapping(r, p)
        reserved.append(
            ConsumerRef(
                resource=as_str(r.get("resource"), f"{p}.resource", required=True),
                name=as_str(r.get("name"), f"{p}.name", required=True),
                uid=as_str(r.get("uid"), f"{p}.uid", required=True),
                api_group=as_str(r.get("apiGroup"), f"{p}.apiGroup"),
            )
        )
    return ResourceClaim(
        namespace=namespace,
        name=name,
        uid=as_str(meta.get("uid"), "metadata.uid") or f"{namespace}/{name}",
        spec=parse_claim_spec(obj.get("spec"), "spec", api_version),
        annotations=as_labels(meta.get("annotations"), "metadata.annotations"),
        allocation=_allocation(status.get("allocation"), "status.allocation"),
        reserved_for=tuple(reserved),
    )


def parse_resource_claim(obj: Mapping[str, Any]) -> ResourceClaim:
    """A ResourceClaim (v1, v1beta2 or v1beta1) -> its record, with its allocation and
    consumers when it has them."""
    return _located("ResourceClaim", obj, _parse_claim)


def _parse_template(obj: Mapping[str, Any]) -> ResourceClaimTemplate:
    meta = as_mapping(obj.get("metadata"), "metadata")
    spec = as_mapping(obj.get("spec"), "spec")
    claim_meta = as_mapping(spec.get("metadata"), "spec.metadata")
    return ResourceClaimTemplate(
        namespace=as_str(meta.get("namespace"), "metadata.namespace") or "default",
        name=as_str(meta.get("name"), "metadata.name", required=True),
        spec=parse_claim_spec(
            spec.get("spec"), "spec.spec", as_str(obj.get("apiVersion"), "apiVersion")
        ),
        labels=as_labels(claim_meta.get("labels"), "spec.metadata.labels"),
        annotations=as_labels(claim_meta.get("annotations"), "spec.metadata.annotations"),
    )


def parse_resource_claim_template(obj: Mapping[str, Any]) -> ResourceClaimTemplate:
    """A ResourceClaimTemplate -> its record (``spec.spec`` is a claim spec)."""
    return _located("ResourceClaimTemplate", obj, _parse_template)


# -- a pod's claims ----------------------------------------------------------------------


def pod_claim_names(pod: Mapping[str, Any]) -> list[PodClaimRef]:
    """The claims a pod (a dict) needs, in ``spec.resourceClaims`` order (see
    :func:`pumice.api.parse.pod_device_claims`)."""

    def names(obj: Mapping[str, Any]) -> list[PodClaimRef]:
        meta = as_mapping(obj.get("metadata"), "metadata")
        namespace = as_str(meta.get("namespace"), "metadata.namespace") or "default"
        spec, status = as_mapping(obj.get("spec"), "spec"), as_mapping(obj.get("status"), "status")
        return list(pod_device_claims(spec, status, namespace))

    return _located("Pod", pod, names)


#: The characters the API server draws a ``generateName`` suffix from.
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: The longest ``generateName`` prefix the controller uses (63 less a 5-character suffix
#: and a hyphen).
_MAX_BASE = 57


def _generate_name(pod_name: str, claim_name: str) -> str:
    """``<pod>-<claim>-``, both parts shortened in proportion when too long, as the
    resource-claim controller does (so neither part is lost)."""
    base = f"{pod_name}-{claim_name}-"
    if len(base) > _MAX_BASE:
        base = (
            pod_name[: len(pod_name) * _MAX_BASE // len(base)]
            + "-"
            + claim_name[: len(claim_name) * _MAX_BASE // len(base)]
            + "-"
        )
    return base


def generated_claim_name(pod_name: str, pod_uid: str, entry: str) -> str:
    """The name of the claim made for a pod's template ``entry``: the controller's
    ``generateName`` (``<pod>-<entry>-``) with a 5-character suffix derived from the
    pod's uid and the entry (the API server would draw it at random), so that a replay
    or a simulation names it the same way every time."""
    digest = hashlib.sha256(f"{pod_uid}/{entry}".encode()).digest()
    suffix = "".join(_SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in digest[:5])
    return _generate_name(pod_name, entry) + suffix


def claim_from_template(
    pod: Mapping[str, Any], ref: PodClaimRef, template: Mapping[str, Any]
) -> dict[str, Any]:
    """The ResourceClaim the resource-claim controller would create for ``ref`` (a
    template entry of the pod): ``generateName`` ``<pod>-<entry>-`` and, so that a
    simulator can create it as is, a name with a 5-character suffix derived from the
    pod's uid and the entry (the API server would draw it at random); owned by the pod;
    annotated with ``resource.kubernetes.io/pod-claim-name``; the template's
    ``spec.metadata`` labels and annotations and its ``spec.spec``, in its
    ``apiVersion``."""
    tmpl = parse_resource_claim_template(template)  # (validates it)
    meta = as_mapping(pod.get("metadata"), "metadata")
    pod_name = as_str(meta.get("name"), "metadata.name", required=True)
    uid = as_str(meta.get("uid"), "metadata.uid") or f"{ref.namespace}/{pod_name}"
    prefix = _generate_name(pod_name, ref.name)
    spec = as_mapping(template.get("spec"), "spec")
    claim_meta: dict[str, Any] = {
        "name": generated_claim_name(pod_name, uid, ref.name),
        "generateName": prefix,
        "namespace": ref.namespace,
        "annotations": {**tmpl.annotations, POD_CLAIM_NAME_ANNOTATION: ref.name},
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod_name,
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if tmpl.labels:
        claim_meta["labels"] = dict(tmpl.labels)
    return {
        "apiVersion": template.get("apiVersion") or f"{GROUP}/v1",
        "kind": "ResourceClaim",
        "metadata": claim_meta,
        "spec": copy_tree(dict(as_mapping(spec.get("spec"), "spec.spec"))),
    }
