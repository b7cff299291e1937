"""Dynamic Resource Allocation with structured parameters: which devices a pod's
ResourceClaims get on a node. Pure and I/O-free; the scheduler's DRA plugin calls it.

:func:`allocate` answers, for a pod's claims and one node, either an
:class:`Allocation` (the devices per claim and the ``status.allocation`` to write) or a
:class:`Shortfall` saying, in words a person can act on, what was missing. The records
and parsers live in :mod:`pumice.api.dra_objects`, the CEL selectors in
:mod:`pumice.api.dra_cel`; both are re-exported here, so this module is the one to
import.

What is supported, as Kubernetes' ``resource.k8s.io`` (v1, v1beta2, v1beta1) defines it:

- ResourceSlices reached by a node through ``nodeName``, ``allNodes``, a
  ``nodeSelector`` or ``perDeviceNodeSelection``; of a pool, only the slices of its
  latest generation (among those the node reaches) count, and a pool that publishes a
  device name twice is not used;
- DeviceClasses and requests with CEL selectors (all must hold; see
  :mod:`pumice.api.dra_cel` for the CEL subset); ``allocationMode`` ``ExactCount``
  (``count``, default 1) and ``All`` (every matching device the node reaches, at least
  one, none in use, no pool being updated); ``adminAccess`` (such devices are not
  exclusive); ``firstAvailable`` subrequests, the first that can be satisfied winning;
- ``matchAttribute`` constraints across a claim's requests;
- claims already allocated: usable on the node when their node selector admits it.

Not supported: partitionable devices (shared counters; a device that consumes counters
is never allocated), consumable capacity (``allowMultipleAllocations``, capacity
requests, ``distinctAttribute``), device taints and tolerations, binding conditions,
list-valued attributes, ``derivedAttributes``, and any scoring of ``firstAvailable``
beyond its order (the first alternative that fits is taken, as Kubernetes does without
scoring). Not checked: the namespace label Kubernetes requires for ``adminAccess``, and
the limit of 256 consumers in ``reservedFor``. Kubernetes would report a selector's
evaluation error; here the device simply does not match and the error is shown in the
explanation.

For a pod, :func:`pod_claim_names` lists the claims it needs (a template's claim may
not exist yet), and :func:`claim_from_template` builds the claim the resource-claim
controller would create.

The search is deterministic (devices in order of driver, pool, slice name, device name)
and backtracks when an earlier choice breaks a constraint or starves a later request;
it stops after ``max_steps`` devices tried and reports the claim as too complex.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from pumice.api.dra_cel import (
    FUNCTIONS,
    CelQuantity,
    CelSemver,
    SelectorEvaluator,
    evaluate_selector,
    shared_evaluator,
)
from pumice.api.dra_objects import (
    ALL,
    EXACT_COUNT,
    POD_CLAIM_NAME_ANNOTATION,
    ClaimAllocation,
    ClaimConfig,
    ClaimSpec,
    ConsumerRef,
    Device,
    DeviceClass,
    DeviceKey,
    DeviceRequest,
    DeviceResult,
    MatchAttribute,
    RequestSpec,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    Version,
    claim_from_template,
    device_available_on,
    generated_claim_name,
    node_selector_matches,
    parse_claim_spec,
    parse_device_class,
    parse_node_selector,
    parse_resource_claim,
    parse_resource_claim_template,
    parse_resource_slice,
    pod_claim_names,
    render_node_selector,
    slice_available_on,
)
from pumice.api.parse import PodClaimRef
from pumice.api.quantity import plural
from pumice.api.task import Requirement, SelectorTerm

__all__ = [
    "ALL",
    "EXACT_COUNT",
    "FUNCTIONS",
    "POD_CLAIM_NAME_ANNOTATION",
    "Allocation",
    "CelQuantity",
    "CelSemver",
    "ClaimAllocation",
    "ClaimConfig",
    "ClaimResult",
    "ClaimSpec",
    "ConsumerRef",
    "Device",
    "DeviceClass",
    "DeviceKey",
    "DeviceRequest",
    "DeviceResult",
    "MatchAttribute",
    "NodeDevices",
    "OfferedDevice",
    "PodClaimRef",
    "RequestSpec",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceSlice",
    "SelectorEvaluator",
    "Shortfall",
    "Version",
    "allocate",
    "claim_from_template",
    "device_available_on",
    "devices_in_use",
    "devices_on_node",
    "evaluate_selector",
    "generated_claim_name",
    "node_selector_matches",
    "parse_claim_spec",
    "parse_device_class",
    "parse_node_selector",
    "parse_resource_claim",
    "parse_resource_claim_template",
    "parse_resource_slice",
    "pod_claim_names",
    "render_node_selector",
    "slice_available_on",
]

#: How many devices the search may try for one pod on one node before it gives up.
MAX_STEPS = 10_000


# -- the devices a node reaches ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OfferedDevice:
    """A device a node reaches, with where it comes from."""

    driver: str
    pool: str
    slice_name: str
    device: Device
    #: Whether only its node reaches it (``nodeName``).
    node_local: bool
    #: Otherwise the slice's (or, per device, the device's) node selector; None when
    #: every node reaches it (``allNodes``).
    node_selector: tuple[SelectorTerm, ...] | None

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.device.name)


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """What a node reaches: the devices in search order, and the pools being updated
    (fewer slices at the latest generation than the pool announces), as ``(driver,
    pool, slices seen, slices announced)``."""

    node: str
    devices: tuple[OfferedDevice, ...]
    incomplete: tuple[tuple[str, str, int, int], ...] = ()


def devices_on_node(
    node_name: str, node_labels: Mapping[str, str], slices: Iterable[ResourceSlice]
) -> NodeDevices:
    """The devices ``node_name`` reaches, ordered by driver, pool, slice and device
    name: of each pool only the slices of the latest generation among those the node
    reaches (as Kubernetes gathers pools per node); a pool naming a device twice is
    left out; devices consuming shared counters are left out."""
    pools: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in slices:
        if not slice_available_on(s, node_name, node_labels):
            continue
        group = pools.setdefault((s.driver, s.pool), [])
        if group and s.generation < group[0].generation:
            continue
        if group and s.generation > group[0].generation:
            group.clear()
        group.append(s)
    offered: list[OfferedDevice] = []
    incomplete = []
    for (driver, pool), group in sorted(pools.items()):
        group.sort(key=lambda s: s.name)
        if len(group) != group[0].slice_count:
            incomplete.append((driver, pool, len(group), group[0].slice_count))
        names = [d.name for s in group for d in s.devices]
        if len(names) != len(set(names)):
            continue  # (Kubernetes calls such a pool invalid and uses none of it)
        pool_devices = []
        for s in group:
            for d in s.devices:
                if d.consumes_counters or not device_available_on(s, d, node_name, node_labels):
                    continue
                owner: Any = d if s.per_device else s
                local = bool(owner.node_name)
                selector = None if local or owner.all_nodes else owner.node_selector
                pool_devices.append(OfferedDevice(driver, pool, s.name, d, local, selector))
        pool_devices.sort(key=lambda o: (o.slice_name, o.device.name))
        offered.extend(pool_devices)
    return NodeDevices(node_name, tuple(offered), tuple(incomplete))


def devices_in_use(claims: Iterable[ResourceClaim]) -> frozenset[DeviceKey]:
    """The devices allocated claims hold exclusively (admin access holds none): the
    starting ``in_use`` view for :func:`allocate`."""
    return frozenset(
        r.key
        for c in claims
        if c.allocation is not None
        for r in c.allocation.results
        if not r.admin_access
    )


# -- answers -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClaimResult:
    """A claim allocated on the node: its devices, the node selector Kubernetes
    writes, and the configuration entries it copies from the classes and the claim."""

    claim: str  # namespace/name
    results: tuple[DeviceResult, ...]
    node_selector: tuple[SelectorTerm, ...] | None
    config: tuple[dict[str, Any], ...] = ()

    def status_allocation(self) -> dict[str, Any]:
        """The claim's ``status.allocation`` (resource.k8s.io/v1 shape)."""
        results = []
        for r in self.results:
            entry: dict[str, Any] = {
                "request": r.request,
                "driver": r.driver,
                "pool": r.pool,
                "device": r.device,
            }
            if r.admin_access:
                entry["adminAccess"] = True
            results.append(entry)
        devices: dict[str, Any] = {"results": results}
        if self.config:
            devices["config"] = [dict(c) for c in self.config]
        out: dict[str, Any] = {"devices": devices}
        if self.node_selector is not None:
            out["nodeSelector"] = render_node_selector(self.node_selector)
        return out


@dataclass(frozen=True, slots=True)
class Allocation:
    """The devices a pod's unallocated claims get on ``node`` (claims already allocated
    are not in it: they keep what they have)."""

    node: str
    claims: tuple[ClaimResult, ...] = ()

    def result_for(self, claim: ResourceClaim | str) -> ClaimResult:
        """The result for a claim (a record or ``namespace/name``); KeyError if the
        claim was not allocated here."""
        key = claim if isinstance(claim, str) else claim.key
        for c in self.claims:
            if c.claim == key:
                return c
        raise KeyError(key)

    def status_allocation(self, claim: ResourceClaim | str) -> dict[str, Any]:
        """Exactly the ``status.allocation`` dict to write on the claim (v1 shape)."""
        return self.result_for(claim).status_allocation()

    @property
    def devices(self) -> frozenset[DeviceKey]:
        """The devices taken exclusively (not for admin access): what the caller adds
        to its view of the devices in use once it keeps this allocation."""
        return frozenset(r.key for c in self.claims for r in c.results if not r.admin_access)


@dataclass(frozen=True, slots=True)
class Shortfall:
    """Why the claims cannot be allocated on the node: the claim (``namespace/name``),
    the request when one is to blame, and the reason as a sentence."""

    claim: str
    request: str
    reason: str
    #: Selector evaluation errors met on the way ("selector X on device Y: ...").
    errors: tuple[str, ...] = ()
    #: The search gave up (too many combinations), which proves nothing about the node.
    too_complex: bool = False

    def __str__(self) -> str:
        return self.reason


# -- the search --------------------------------------------------------------------------


class _TooComplex(Exception):
    pass


@dataclass(slots=True)
class _Alt:
    """One way to serve a request: its result name, spec, the matching devices (by
    index into the node's devices) and, when it cannot be used, why."""

    result_name: str
    spec: RequestSpec
    matching: list[int] = field(default_factory=list)
    problem: str = ""
    errors: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Unit:
    claim: int
    request: DeviceRequest
    alts: list[_Alt]


def _typed(value: Any) -> tuple[str, Any]:
    """An attribute value with its type, so that ``1`` and ``true`` differ."""
    return (type(value).__name__, value)


class _Search:
    """A depth-first search over the pod's unallocated requests, device by device."""

    def __init__(
        self,
        claims: Sequence[ResourceClaim],
        units: list[_Unit],
        offered: tuple[OfferedDevice, ...],
        in_use: AbstractSet[DeviceKey],
        max_steps: int,
        use_constraints: bool = True,
    ) -> None:
        self.claims = claims
        self.units = units
        self.offered = offered
        self.in_use = in_use
        self.steps = 0
        self.max_steps = max_steps
        self.constraints = [c.spec.constraints if use_constraints else () for c in claims]
        self.values: list[list[list[Any] | None]] = [[None] * len(c) for c in self.constraints]
        self.exclusive: set[int] = set()  # devices taken without admin access
        self.claim_taken: list[set[int]] = [set() for _ in claims]
        self.chosen: list[tuple[int, str, int, bool]] = []  # claim, result, device, admin

    def run(self) -> bool:
        return self._solve(0)

    def _step(self) -> None:
        self.steps += 1
        if self.steps > self.max_steps:
            raise _TooComplex

    def _fits(self, ci: int, result: str, d: int, admin: bool) -> bool:
        if d in self.claim_taken[ci]:
            return False
        if not admin and (d in self.exclusive or self.offered[d].key in self.in_use):
            return False
        device = self.offered[d].device
        for k, c in enumerate(self.constraints[ci]):
            if c.covers(result):
                value = device.attribute(c.attribute)
                if value is None:
                    return False
                current = self.values[ci][k]
                if current is not None and current[0] != _typed(value):
                    return False
        return True

    def _push(self, ci: int, result: str, d: int, admin: bool) -> None:
        self.claim_taken[ci].add(d)
        if not admin:
            self.exclusive.add(d)
        device = self.offered[d].device
        for k, c in enumerate(self.constraints[ci]):
            if c.covers(result):
                current = self.values[ci][k]
                if current is None:
                    self.values[ci][k] = [_typed(device.attribute(c.attribute)), 1]
                else:
                    current[1] += 1
        self.chosen.append((ci, result, d, admin))

    def _pop(self) -> None:
        ci, result, d, admin = self.chosen.pop()
        self.claim_taken[ci].discard(d)
        if not admin:
            self.exclusive.discard(d)
        for k, c in enumerate(self.constraints[ci]):
            if c.covers(result):
                current = self.values[ci][k]
                assert current is not None
                current[1] -= 1
                if current[1] == 0:
                    self.values[ci][k] = None

    def _solve(self, u: int) -> bool:
        if u == len(self.units):
            return True
        unit = self.units[u]
        for alt in unit.alts:
            if alt.problem:
                continue
            if alt.spec.mode == ALL:
                if self._take_all(u, alt):
                    return True
            elif self._pick(u, alt, alt.spec.count, 0):
                return True
        return False

    def _take_all(self, u: int, alt: _Alt) -> bool:
        ci, admin = self.units[u].claim, alt.spec.admin_access
        depth = len(self.chosen)
        for d in alt.matching:
            self._step()
            if not self._fits(ci, alt.result_name, d, admin):
                break
            self._push(ci, alt.result_name, d, admin)
        else:
            if self._solve(u + 1):
                return True
        while len(self.chosen) > depth:
            self._pop()
        return False

    def _pick(self, u: int, alt: _Alt, need: int, start: int) -> bool:
        if need == 0:
            return self._solve(u + 1)
        ci, admin = self.units[u].claim, alt.spec.admin_access
        matching = alt.matching
        for pos in range(start, len(matching) - need + 1):
            self._step()
            d = matching[pos]
            if not self._fits(ci, alt.result_name, d, admin):
                continue
            self._push(ci, alt.result_name, d, admin)
            if self._pick(u, alt, need - 1, pos + 1):
                return True
            self._pop()
        return False


def _matching(
    alt: _Alt,
    device_class: DeviceClass,
    offered: tuple[OfferedDevice, ...],
    evaluator: SelectorEvaluator,
) -> None:
    """Fill ``alt.matching`` with the devices every class and request selector admits,
    and ``alt.errors`` with the first few selector errors met."""
    expressions = device_class.selectors + alt.spec.selectors
    for i, o in enumerate(offered):
        for e in expressions:
            ok, error = evaluator.matches(e, o.driver, o.device)
            if not ok:
                if error and len(alt.errors) < 3:
                    alt.errors.append(
                        f"selector {_short(e)} on device {o.driver}/{o.pool}/{o.device.name}: "
                        f"{error}"
                    )
                break
        else:
            alt.matching.append(i)


def _short(expression: str) -> str:
    text = " ".join(expression.split())
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _alt_problem(
    alt: _Alt,
    node: NodeDevices,
    in_use: AbstractSet[DeviceKey],
) -> str:
    """Why this way to serve the request cannot work on the node even alone ("" when
    it might)."""
    spec = alt.spec
    offered = node.devices
    free = sum(1 for d in alt.matching if spec.admin_access or offered[d].key not in in_use)
    used = len(alt.matching) - free
    of_class = f"of class {spec.device_class}"
    if spec.mode == ALL:
        if not alt.matching:
            return f"needs all devices {of_class} on the node, node {node.node} has none matching"
        if used:
            return (
                f"needs all {len(alt.matching)} matching devices {of_class}, "
                f"{used} of them in use by other claims"
            )
        for driver, pool, seen, announced in node.incomplete:  # (it may hide more)
            return (
                f"needs all devices {of_class}, but pool {pool} of driver {driver} is "
                f"being updated ({seen} of {announced} slices published)"
            )
        return ""
    if free >= spec.count:
        return ""
    text = f"needs {plural(spec.count, 'device')} {of_class}, node {node.node} has "
    if not used:
        return text + f"{free} matching"
    return text + f"{free} free of {len(alt.matching)} matching ({used} in use by other claims)"


def _with_errors(text: str, errors: Sequence[str]) -> str:
    return f"{text}; {errors[0]}" if errors else text


def _node_selector(
    picked: Sequence[OfferedDevice], node_name: str
) -> tuple[SelectorTerm, ...] | None:
    """The node selector Kubernetes writes for a claim's devices: the node itself when
    any device is node-local, else the intersection of the slices' selectors, else none
    (every node reaches them)."""
    if any(o.node_local for o in picked):
        return (SelectorTerm((Requirement("metadata.name", "In", (node_name,), True),)),)
    combined: tuple[SelectorTerm, ...] | None = None
    for o in picked:
        if o.node_selector is None:
            continue
        if combined is None:
            combined = o.node_selector
        elif combined != o.node_selector:
            combined = tuple(
                SelectorTerm(a.requirements + b.requirements)
                for a in combined
                for b in o.node_selector
            )
    return combined


def _config(
    claim: ResourceClaim,
    chosen: Sequence[tuple[str, RequestSpec]],
    classes: Mapping[str, DeviceClass],
) -> tuple[dict[str, Any], ...]:
    """The ``config`` of the allocation: each used class's entries for the request
    that used it, then the claim's own, as Kubernetes copies them."""
    out: list[dict[str, Any]] = []
    for result_name, spec in chosen:
        for c in classes[spec.device_class].config:
            out.append({"source": "FromClass", "requests": [result_name], **c})
    for own in claim.spec.config:
        entry: dict[str, Any] = {"source": "FromClaim"}
        if own.requests:
            entry["requests"] = list(own.requests)
        entry.update(own.configuration)
        out.append(entry)
    return tuple(out)


def allocate(
    claims: Sequence[ResourceClaim],
    node_name: str,
    node_labels: Mapping[str, str],
    slices: Iterable[ResourceSlice] | NodeDevices,
    classes: Mapping[str, DeviceClass] | Iterable[DeviceClass],
    in_use: AbstractSet[DeviceKey],
    *,
    max_steps: int = MAX_STEPS,
    evaluator: SelectorEvaluator | None = None,
) -> Allocation | Shortfall:
    """Allocate a pod's claims on one node.

    ``claims``: the pod's claims; those already allocated are only checked to be
    usable on the node (their node selector), the others get devices. ``slices``: all
    ResourceSlices (those the node does not reach are ignored), or what
    :func:`devices_on_node` gave for this node (to reuse it across pods). ``classes``:
    DeviceClasses by name (or a list). ``in_use``: (driver, pool, device) allocated to
    other claims, the caller's tentative view; it is not changed. Selector answers are
    cached by ``evaluator`` (by default one shared by the process).

    Returns an :class:`Allocation` (nothing is recorded anywhere: the caller adds
    :attr:`Allocation.devices` to its view when it keeps it) or a :class:`Shortfall`
    for the first claim that cannot be served."""
    evaluator = evaluator or shared_evaluator()
    if not isinstance(classes, Mapping):
        classes = {c.name: c for c in classes}
    for claim in claims:
        alloc = claim.allocation
        if alloc is not None and not node_selector_matches(
            alloc.node_selector, node_name, node_labels
        ):
            return Shortfall(
                claim.key,
                "",
                f"claim {claim.key} is allocated to devices that node {node_name} cannot reach",
            )
    seen: set[str] = set()
    pending = []
    for c in claims:  # (two entries of a pod may name one claim)
        if c.allocation is None and c.key not in seen:
            seen.add(c.key)
            pending.append(c)
    if not pending:
        return Allocation(node_name)
    node = (
        slices
        if isinstance(slices, NodeDevices)
        else devices_on_node(node_name, node_labels, slices)
    )
    offered = node.devices
    units: list[_Unit] = []
    for ci, claim in enumerate(pending):
        for request in claim.spec.requests:
            alts = []
            for result_name, spec in request.alternatives():
                alt = _Alt(result_name, spec)
                device_class = classes.get(spec.device_class)
                if device_class is None:
                    alt.problem = f"no device class {spec.device_class}"
                else:
                    _matching(alt, device_class, offered, evaluator)
                    alt.problem = _alt_problem(alt, node, in_use)
                alts.append(alt)
            units.append(_Unit(ci, request, alts))
    for unit in units:  # a request no way can serve, even alone
        if all(a.problem for a in unit.alts):
            return _unit_shortfall(pending[unit.claim], unit)
    search = _Search(pending, units, offered, in_use, max_steps)
    try:
        found = search.run()
    except _TooComplex:
        key = pending[units[0].claim].key
        named = ", ".join(c.key for c in pending)
        named = f"claims {named}" if len(pending) > 1 else f"claim {named}"
        return Shortfall(
            key,
            "",
            f"{named}: too complex to allocate on node {node_name} "
            f"(no answer after trying {max_steps} devices)",
            too_complex=True,
        )
    if not found:
        return _joint_shortfall(pending, units, node, in_use, max_steps)
    by_claim: list[list[tuple[str, int, bool]]] = [[] for _ in pending]
    for ci, result_name, d, admin in search.chosen:
        by_claim[ci].append((result_name, d, admin))
    out = []
    for ci, claim in enumerate(pending):
        picked = by_claim[ci]
        results = tuple(
            DeviceResult(name, offered[d].driver, offered[d].pool, offered[d].device.name, admin)
            for name, d, admin in picked
        )
        used_specs: dict[str, RequestSpec] = {}
        for unit in units:
            if unit.claim == ci:
                for alt in unit.alts:
                    if any(name == alt.result_name for name, _, _ in picked):
                        used_specs[alt.result_name] = alt.spec
        out.append(
            ClaimResult(
                claim.key,
                results,
                _node_selector([offered[d] for _, d, _ in picked], node_name) if picked else None,
                _config(claim, list(used_specs.items()), classes),
            )
        )
    return Allocation(node_name, tuple(out))


def _unit_shortfall(claim: ResourceClaim, unit: _Unit) -> Shortfall:
    errors = tuple(e for a in unit.alts for e in a.errors)
    where = f"claim {claim.key}, request {unit.request.name}"
    if unit.request.exactly is not None:
        alt = unit.alts[0]
        return Shortfall(
            claim.key,
            unit.request.name,
            _with_errors(f"{where}: {alt.problem}", alt.errors),
            errors,
        )
    parts = "; ".join(f"{a.result_name} {a.problem}" for a in unit.alts)
    return Shortfall(
        claim.key,
        unit.request.name,
        _with_errors(f"{where}: none of its alternatives fits: {parts}", errors),
        errors,
    )


def _joint_shortfall(
    pending: Sequence[ResourceClaim],
    units: list[_Unit],
    node: NodeDevices,
    in_use: AbstractSet[DeviceKey],
    max_steps: int,
) -> Shortfall:
    """Every request could be served alone, not all together: say which claim fails
    alone (its constraints, or its requests competing for devices), or that the claims
    compete with one another."""
    for ci, claim in enumerate(pending):
        mine = [_Unit(0, u.request, u.alts) for u in units if u.claim == ci]
        names = ", ".join(u.request.name for u in mine)
        try:
            if _Search([claim], mine, node.devices, in_use, max_steps).run():
                continue
            loose = _Search([claim], mine, node.devices, in_use, max_steps, use_constraints=False)
            if claim.spec.constraints and loose.run():
                rules = "; ".join(
                    f"matchAttribute {c.attribute}"
                    + (f" for requests {', '.join(c.requests)}" if c.requests else "")
                    for c in claim.spec.constraints
                )
                return Shortfall(
                    claim.key,
                    "",
                    f"claim {claim.key}: no choice of devices on node {node.node} satisfies "
                    f"its constraints ({rules})",
                )
        except _TooComplex:  # (the failure is proven; only its explanation is not)
            keys = ("claims " if len(pending) > 1 else "claim ") + ", ".join(c.key for c in pending)
            return Shortfall(
                claim.key,
                "",
                f"{keys}: the requests cannot all be served together on node {node.node}",
            )
        return Shortfall(
            claim.key,
            "",
            f"claim {claim.key}: its requests {names} together need more matching devices "
            f"than node {node.node} has free",
        )
    keys = ", ".join(c.key for c in pending)
    return Shortfall(
        pending[0].key,
        "",
        f"claims {keys} together need more matching devices than node {node.node} has free "
        "(they compete for the same devices)",
    )
