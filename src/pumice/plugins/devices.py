"""The predicates plugin's device checks: Dynamic Resource Allocation with structured
parameters, as kube-scheduler's DynamicResources plugin does inside Volcano's
predicates plugin (``predicate.DynamicResourceAllocationEnable``).

For each ResourceClaim a pod needs (``spec.resourceClaims``):

- a claim made from a template that the resource-claim controller has not created
  yet refuses every node (the pod waits for it);
- a claim that does not exist refuses every node;
- a claim already allocated admits the nodes its allocation's node selector admits;
- the pod's other claims must all be allocatable together on the node, from the
  devices of the ResourceSlices the node reaches (:func:`pumice.api.dra.allocate`:
  device classes and CEL selectors, ``ExactCount`` and ``All``, ``firstAvailable``,
  ``matchAttribute``), leaving out devices allocated to other claims.

As with volumes, the choice is the session's tentative state: the devices are taken
when the pod is placed and given back when it is deallocated, so a gang's pods never
share a device; a claim shared by two pods of the session is allocated once. At the
session's close the allocations of the pods that bind become their pre-bind writes
(``status.allocation``, and the pod added to ``reservedFor``).

Cost: a pod without claims costs nothing here. A node's answer for a list of claim
specs (not names: it is worked out for stand-in claims and worded for each pod's own)
is kept until the devices in use on that node change, so the pods whose claims come
from one template search each node once, and later ones only the nodes an earlier one
took devices on. Nodes that reach no device are refused without a search.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np

from pumice.api.dra import (
    Allocation,
    ClaimResult,
    ClaimSpec,
    DeviceClass,
    DeviceKey,
    NodeDevices,
    ResourceClaim,
    ResourceSlice,
    Shortfall,
    allocate,
    devices_in_use,
    devices_on_node,
)
from pumice.api.node import NodeTable
from pumice.api.task import TaskInfo
from pumice.framework.decisions import Decisions

Reasons = list[tuple[str, np.ndarray]]

NO_DEVICES = "cannot allocate all claims (no devices)"


class DeviceChecks:
    """One cycle's device state over the session's nodes (see the module docstring)."""

    def __init__(self, nodes: NodeTable, records: Mapping[str, Mapping[str, Any]]) -> None:
        self.nodes = nodes
        self.claims: Mapping[str, ResourceClaim] = records.get("ResourceClaim") or {}
        self.slices: list[ResourceSlice] = list((records.get("ResourceSlice") or {}).values())
        self.classes: Mapping[str, DeviceClass] = {
            c.name: c for c in (records.get("DeviceClass") or {}).values()
        }
        self._in_use: set[DeviceKey] | None = None
        self._offered: dict[int, NodeDevices] = {}
        #: Rows reaching some device, and rows reaching a device others reach too.
        self._reach: np.ndarray | None = None
        #: Per row, how often the devices in use there changed this session; and for
        #: devices several nodes reach (not node-local), one count for all.
        self._version = np.zeros(len(nodes), dtype=np.int64)
        self._shared_version = 0
        self._memo: dict[tuple, tuple[int, int, Allocation | Shortfall]] = {}
        #: Claims allocated this session: key -> (result, node); and each task's.
        self.chosen: dict[str, tuple[ClaimResult, str]] = {}
        self.by_task: dict[str, tuple[str, list[str], frozenset[DeviceKey], int]] = {}
        #: The rows whose devices in use changed, in order; per list of claim specs,
        #: how far into it (and at which shared version) its refusals are up to date,
        #: the stand-in claims they are worded for, and the refusal codes by row.
        self._log: list[int] = []
        self._views: dict[tuple, tuple[int, int, list[ResourceClaim], np.ndarray]] = {}
        self._codes: dict[str, int] = {}
        self._texts: list[str] = []

    # -- the filter ---------------------------------------------------------------------

    def reasons(self, task: TaskInfo) -> Reasons:
        n = len(self.nodes)
        everywhere = np.ones(n, dtype=bool)
        out: Reasons = []
        pending: list[ResourceClaim] = []
        allowed = np.ones(n, dtype=bool)
        for ref in task.device_claims:
            if ref.waiting:
                out.append((
                    f"waiting for ResourceClaim {ref.name} of template {ref.template} to be "
                    "created", everywhere,
                ))  # fmt: skip
                continue
            claim = self.claims.get(ref.key)
            if claim is None:
                out.append((f'resourceclaim "{ref.claim_name}" not found', everywhere))
                continue
            settled = self.chosen.get(claim.key)
            if settled is not None:  # (shared with a pod placed earlier this session)
                allowed &= self._selector_mask(settled[0].node_selector)
            elif claim.allocation is not None:
                allowed &= self._selector_mask(claim.allocation.node_selector)
            elif claim not in pending:
                pending.append(claim)
        if not allowed.all():
            out.append(("cannot allocate all claims (allocated to devices it cannot reach)",
                        ~allowed))  # fmt: skip
        if pending:
            reach = self._reaching()
            if not reach.all():
                out.append((NO_DEVICES, ~reach))
            codes = self._refusals(pending)
            refused = np.flatnonzero((codes >= 0) & allowed)
            if refused.size:
                kinds, first = np.unique(codes[refused], return_index=True)
                named: dict[str, np.ndarray] = {}
                for code in kinds[np.argsort(first, kind="stable")].tolist():
                    text = _named(self._texts[code], pending)
                    mask = (codes == code) & allowed
                    got = named.get(text)
                    named[text] = mask if got is None else got | mask
                out.extend(named.items())
        return out

    def _refusals(self, claims: list[ResourceClaim]) -> np.ndarray:
        """Per row, the code (in ``_texts``) of why ``claims`` cannot all be allocated
        on its node (-1: they can, or it reaches no device). The answer depends on the
        claims' specs, not their names: it is kept per list of specs, worded for
        stand-in claims (:func:`_named` puts the pod's back), and brought up to date
        from the rows whose devices in use changed since it was last asked (all rows
        when devices several nodes reach did)."""
        key = tuple(_spec_key(c.spec) for c in claims)
        reach = self._reaching()
        got = self._views.get(key)
        if got is None or got[1] != self._shared_version:
            stand_ins = [
                ResourceClaim(STAND_IN, f"{i}{STAND_IN}", "", c.spec) for i, c in enumerate(claims)
            ]
            codes = np.full(len(self.nodes), -1, dtype=np.int64)
            rows: Iterable[int] = np.flatnonzero(reach).tolist()
        else:
            _, _, stand_ins, codes = got
            rows = {r for r in self._log[got[0] :] if reach[r]}
        for row in rows:
            spec = self.nodes.specs[row]
            answer = allocate(stand_ins, spec.name, spec.labels, self._devices(row),
                              self.classes, self.in_use())  # fmt: skip
            if isinstance(answer, Shortfall):
                reason = "cannot allocate all claims: " + answer.reason.replace(
                    f"node {spec.name}", "the node"
                )
                codes[row] = self._code(reason)
            else:
                codes[row] = -1
        self._views[key] = (len(self._log), self._shared_version, stand_ins, codes)
        return codes

    def _code(self, text: str) -> int:
        got = self._codes.get(text)
        if got is None:
            got = self._codes[text] = len(self._texts)
            self._texts.append(text)
        return got

    def _selector_mask(self, terms: Any) -> np.ndarray:
        if terms is None:
            return np.ones(len(self.nodes), dtype=bool)
        index = self.nodes.labels
        mask = np.zeros(len(self.nodes), dtype=bool)
        for t in terms:
            mask |= index.term(t)
        return mask

    def _devices(self, row: int) -> NodeDevices:
        got = self._offered.get(row)
        if got is None:
            spec = self.nodes.specs[row]
            got = self._offered[row] = devices_on_node(spec.name, spec.labels, self.slices)
        return got

    def _reaching(self) -> np.ndarray:
        if self._reach is None:
            reach = np.zeros(len(self.nodes), dtype=bool)
            if self.slices:
                local = {s.node_name for s in self.slices if s.node_name}
                wide = any(not s.node_name for s in self.slices)
                for row, name in enumerate(self.nodes.names):
                    if name in local or (wide and self._devices(row).devices):
                        reach[row] = True
            self._reach = reach
        return self._reach

    def in_use(self) -> set[DeviceKey]:
        if self._in_use is None:
            self._in_use = set(devices_in_use(self.claims.values()))
        return self._in_use

    def _allocate(self, claims: list[ResourceClaim], row: int) -> Allocation | Shortfall:
        """The allocator's answer for ``claims`` on node ``row``, kept while the devices
        in use there stay the same."""
        key = (tuple(_spec_key(c.spec) for c in claims), tuple(c.key for c in claims), row)
        version = int(self._version[row])
        got = self._memo.get(key)
        if got is not None and got[0] == version and got[1] == self._shared_version:
            return got[2]
        spec = self.nodes.specs[row]
        answer = allocate(claims, spec.name, spec.labels, self._devices(row), self.classes,
                          self.in_use())  # fmt: skip
        self._memo[key] = (version, self._shared_version, answer)
        return answer

    # -- the session's tentative state --------------------------------------------------

    def assume(self, task: TaskInfo) -> None:
        """``task`` was placed: allocate its claims on its node."""
        if task.node is None:
            return
        row = self.nodes.index.get(task.node)
        if row is None:
            return
        pending: list[ResourceClaim] = []
        reserved: list[str] = []
        for ref in task.device_claims:
            claim = self.claims.get(ref.key) if not ref.waiting else None
            if claim is None:
                continue
            if claim.allocation is not None or claim.key in self.chosen:
                reserved.append(claim.key)
            elif claim not in pending:
                pending.append(claim)
        taken: frozenset[DeviceKey] = frozenset()
        if pending:
            got = self._allocate(pending, row)
            if isinstance(got, Allocation):
                taken = got.devices
                for result in got.claims:
                    self.chosen[result.claim] = (result, task.node)
                    reserved.append(result.claim)
                self.in_use().update(taken)
                self._changed(row, taken)
        self.by_task[task.uid] = (task.key, reserved, taken, row)

    def forget(self, task: TaskInfo) -> None:
        got = self.by_task.pop(task.uid, None)
        if got is None:
            return
        _, claims, taken, row = got
        for key in claims:
            settled = self.chosen.get(key)
            mine = settled is not None and any(r.key in taken for r in settled[0].results)
            if mine:
                del self.chosen[key]
        if taken:
            self.in_use().difference_update(taken)
            self._changed(row, taken)

    def _changed(self, row: int, taken: frozenset[DeviceKey]) -> None:
        self._version[row] += 1
        self._log.append(row)
        local = {(o.driver, o.pool, o.device.name) for o in self._devices(row).devices
                 if o.node_local}  # fmt: skip
        if not taken <= local:
            self._shared_version += 1

    def write(self, decisions: Decisions) -> None:
        """The allocations of the pods that bind, as their pre-bind writes (a claim
        already allocated is only reserved for the pod: an empty allocation)."""
        binds = decisions.binds
        for pod, claims, _, _ in self.by_task.values():
            if pod not in binds or not claims:
                continue
            pre = decisions.prebind_of(pod)
            for key in claims:
                settled = self.chosen.get(key)
                pre.claims[key] = settled[0].status_allocation() if settled else {}


#: The namespace of the stand-in claims refusals are worded for, and the end of their
#: names: a character no Kubernetes name holds, so that a stand-in's key never occurs
#: in a text by chance.
STAND_IN = "\x00"


def _named(text: str, claims: list[ResourceClaim]) -> str:
    """A refusal worded for stand-in claims, with the keys of ``claims`` put back."""
    if STAND_IN not in text:
        return text
    for i, c in enumerate(claims):
        text = text.replace(f"{STAND_IN}/{i}{STAND_IN}", c.key)
    return text


def _spec_key(spec: ClaimSpec) -> Hashable:
    """A claim spec as a memo key: the spec itself, or, when its configuration entries
    (free-form dicts) keep it from hashing, its requests and constraints with the
    entries' text."""
    try:
        hash(spec)
    except TypeError:
        return (spec.requests, spec.constraints, repr(spec.config))
    return spec


__all__ = ["DeviceChecks"]
