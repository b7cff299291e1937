"""The predicates plugin's volume checks: which nodes can reach what a pod mounts, and
which PersistentVolume each of its unbound claims gets.

kube-scheduler's VolumeRestrictions, NodeVolumeLimits, VolumeBinding and VolumeZone,
as Volcano runs them inside its predicates plugin, in that order, and with their words:

- a claim that does not exist, or is being deleted, refuses every node;
- a ``ReadWriteOncePod`` claim another pod already uses refuses every node;
- a claim bound to a PV refuses the nodes outside the PV's node affinity ("volume node
  affinity conflict") and, for a zonal PV, the nodes outside its zone or region;
- an unbound claim of an ``Immediate`` class (or of no class) refuses every node: the
  PV controller binds it, not the scheduler ("pod has unbound immediate
  PersistentVolumeClaims");
- an unbound ``WaitForFirstConsumer`` claim needs, on the node, an available PV of its
  class that is large enough, has its access modes and volume mode, matches its
  selector and reaches the node, or a class that can provision there (a provisioner
  and ``allowedTopologies``) ("didn't find available persistent volumes to bind");
- a node whose CSINode publishes an attach limit for a driver takes no more of that
  driver's volumes than the limit, counted over the node's pods ("exceed max volume
  count").

The choice is part of the session's tentative state: when a task is allocated (or
pipelined) the smallest fitting PV on its node is assumed for each unbound claim (or
provisioning there), and given back when the task is deallocated (a statement
discarded, a gang that did not come together), so two tasks of one gang never get
the same PV. At the session's close the choices of the tasks that bind become their
:class:`~pumice.framework.decisions.PreBind` writes.

Costs: a pod with no claims costs nothing here. The PVs of a class are columns
(capacity, access modes, free), and each distinct node affinity is one node mask, so
a claim's nodes are a few vector operations whatever the number of PVs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pumice.api.node import NodeTable
from pumice.api.task import SelectorTerm, TaskInfo
from pumice.api.volumes import (
    IMMEDIATE,
    NO_PROVISIONER,
    RWOP,
    PersistentVolumeClaimRecord,
    PersistentVolumeRecord,
    StorageClassRecord,
)
from pumice.framework.decisions import Decisions

Reasons = list[tuple[str, np.ndarray]]

#: kube-scheduler's words (without the "node(s)" the count stands for).
NODE_CONFLICT = "had volume node affinity conflict"
BIND_CONFLICT = "didn't find available persistent volumes to bind"
ZONE_CONFLICT = "had no available volume zone"
MAX_VOLUMES = "exceed max volume count"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
PV_MISSING = "unavailable due to one or more pvc(s) bound to non-existent pv(s)"
RWOP_CONFLICT = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
)
#: A PV reaching at most this many nodes is kept as its rows, not as a mask.
_FEW = 1


@dataclass(slots=True)
class _ClassVolumes:
    """The PVs of one storage class, smallest first, as columns."""

    pvs: list[PersistentVolumeRecord]
    capacity: np.ndarray
    modes: np.ndarray
    #: Each PV's volume mode, as its index in ``volume_modes``.
    volume_mode: np.ndarray
    volume_modes: dict[str, int]
    free: np.ndarray  # available, and not assumed in this session
    #: Each PV's node reach: a row (one node), or -1 with the group's mask in ``masks``.
    row: np.ndarray
    group: np.ndarray
    masks: list[np.ndarray]
    by_name: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Choice:
    """One unbound claim of a task, settled in this session: the PV assumed for it, or
    provisioning (``pv`` None) on ``node``."""

    claim: str
    pv: str | None
    node: str


class VolumeChecks:
    """One cycle's volume state over the session's nodes (see the module docstring)."""

    def __init__(
        self,
        nodes: NodeTable,
        records: Mapping[str, Mapping[str, Any]],
        *,
        binding: bool = True,
        zone: bool = True,
        limits: bool = True,
    ) -> None:
        self.nodes = nodes
        self.index = nodes.labels
        self.pvs: Mapping[str, PersistentVolumeRecord] = records.get("PersistentVolume") or {}
        self.pvcs: Mapping[str, PersistentVolumeClaimRecord] = (
            records.get("PersistentVolumeClaim") or {}
        )
        self.classes: Mapping[str, StorageClassRecord] = records.get("StorageClass") or {}
        self.csinodes = records.get("CSINode") or {}
        self.drivers = records.get("CSIDriver") or {}
        self.binding, self.zone, self.limits = binding, zone, limits
        self._terms: dict[tuple[SelectorTerm, ...] | None, np.ndarray] = {}
        self._by_class: dict[str, _ClassVolumes] = {}
        self._prebound: dict[str, str] | None = None
        self._default_class: str | None = None
        self._defaults_seen = False
        #: Claims settled this session, by claim key, and each task's (by uid).
        self.chosen: dict[str, _Choice] = {}
        self.by_task: dict[str, tuple[str, list[_Choice]]] = {}
        #: RWOP claims -> the pods using them (made when first asked).
        self._users: dict[str, set[str]] | None = None
        #: Rows with an attach limit -> driver -> limit, and what the node attaches.
        self._limits: dict[int, dict[str, int]] | None = None
        self._attached: dict[int, dict[str, dict[str, int]]] = {}

    # -- the filter ---------------------------------------------------------------------

    def reasons(self, task: TaskInfo) -> Reasons:
        """The nodes ``task``'s claims refuse, each under the first check refusing it."""
        n = len(self.nodes)
        out: Reasons = []
        everywhere = np.ones(n, dtype=bool)
        wffc: list[PersistentVolumeClaimRecord] = []
        for name in task.claims:
            key = f"{task.namespace}/{name}"
            pvc = self.pvcs.get(key)
            if pvc is None:
                out.append((f'persistentvolumeclaim "{name}" not found', everywhere))
                continue
            if pvc.terminating:
                out.append((f'persistentvolumeclaim "{name}" is being deleted', everywhere))
                continue
            if pvc.access_modes & RWOP and self._rwop_users(key) - {task.key}:
                out.append((RWOP_CONFLICT, everywhere))
                continue
            if not self.binding:
                continue
            bound = pvc.volume_name or self._settled_pv(key)
            if bound:
                pv = self.pvs.get(bound)
                if pv is None:
                    out.append((PV_MISSING, everywhere))
                    continue
                reach = self._reach(pv.node_terms)
                if not reach.all():
                    out.append((NODE_CONFLICT, ~reach))
                if self.zone:
                    zoned = self._zone_mask(pv)
                    if zoned is not None:
                        out.append((ZONE_CONFLICT, ~zoned))
                continue
            choice = self.chosen.get(key)
            if choice is not None:  # provisioning chosen this session (a shared claim)
                out.append((BIND_CONFLICT, self.index.names != choice.node))
                continue
            cls = self._class_of(pvc)
            if cls is None or cls.binding_mode == IMMEDIATE:
                out.append((f"{UNBOUND_IMMEDIATE} ({name})", everywhere))
                continue
            wffc.append(pvc)
        if wffc:
            ok = np.ones(n, dtype=bool)
            for pvc in wffc:
                ok &= self._claim_nodes(pvc)
            if len(wffc) > 1:  # (claims may compete for one node's PVs)
                for i in np.flatnonzero(ok):
                    if self._choose(task, wffc, int(i)) is None:
                        ok[i] = False
            if not ok.all():
                out.append((BIND_CONFLICT, ~ok))
        if self.limits:
            over = self._over_limit(task)
            if over is not None:
                out.insert(0, (MAX_VOLUMES, over))
        return out

    def _class_of(self, pvc: PersistentVolumeClaimRecord) -> StorageClassRecord | None:
        name = pvc.storage_class
        if name is None:
            name = self._default()
        return self.classes.get(name) if name else None

    def _default(self) -> str | None:
        if not self._defaults_seen:
            self._defaults_seen = True
            defaults = sorted(c.name for c in self.classes.values() if c.default)
            self._default_class = defaults[0] if defaults else None
        return self._default_class

    def _reach(self, terms: tuple[SelectorTerm, ...] | None) -> np.ndarray:
        """The nodes a node affinity admits (None: all), kept per distinct affinity."""
        got = self._terms.get(terms)
        if got is None:
            if terms is None:
                got = np.ones(len(self.nodes), dtype=bool)
            else:
                got = np.zeros(len(self.nodes), dtype=bool)
                for t in terms:
                    got |= self.index.term(t)
            self._terms[terms] = got
        return got

    def _zone_mask(self, pv: PersistentVolumeRecord) -> np.ndarray | None:
        zones = pv.zones()
        if not zones:
            return None
        mask = np.ones(len(self.nodes), dtype=bool)
        for key, values in zones.items():
            column, present = self.index.column(key)
            mask &= present & np.isin(column, list(values))
        return mask

    def _settled_pv(self, key: str) -> str:
        """The PV assumed for claim ``key`` this session by another task (a claim two
        pods share), or the PV pre-bound to it (its ``claimRef`` names the claim)."""
        choice = self.chosen.get(key)
        if choice is not None and choice.pv is not None:
            return choice.pv
        return self._prebound_pv(key)

    def _prebound_pv(self, key: str) -> str:
        """The available PV whose ``claimRef`` names claim ``key`` ("" when none): a
        binding begun (by an earlier bind, or by hand) that the PV controller has not
        finished."""
        if self._prebound is None:
            self._prebound = {
                pv.claim_ref.key: pv.name
                for pv in self.pvs.values()
                if pv.claim_ref is not None and pv.phase in ("", "Available", "Pending")
            }
        return self._prebound.get(key, "")

    # -- WaitForFirstConsumer claims ----------------------------------------------------

    def _volumes(self, cls: str) -> _ClassVolumes:
        got = self._by_class.get(cls)
        if got is not None:
            return got
        pvs = sorted(
            (pv for pv in self.pvs.values() if pv.storage_class == cls and pv.available()),
            key=lambda pv: (pv.capacity, pv.name),
        )
        rows = np.full(len(pvs), -1, dtype=np.intp)
        groups = np.full(len(pvs), -1, dtype=np.intp)
        masks: list[np.ndarray] = []
        seen: dict[tuple[SelectorTerm, ...] | None, int] = {}
        for k, pv in enumerate(pvs):
            reach = self._reach(pv.node_terms)
            hits = np.flatnonzero(reach)
            if len(hits) <= _FEW:
                rows[k] = hits[0] if len(hits) else -2  # (-2: reaches no node)
                continue
            g = seen.get(pv.node_terms)
            if g is None:
                g = seen[pv.node_terms] = len(masks)
                masks.append(reach)
            groups[k] = g
        volume_modes: dict[str, int] = {}
        got = self._by_class[cls] = _ClassVolumes(
            pvs=pvs,
            capacity=np.array([pv.capacity for pv in pvs], dtype=np.int64),
            modes=np.array([pv.access_modes for pv in pvs], dtype=np.int64),
            volume_mode=np.array(
                [volume_modes.setdefault(pv.volume_mode, len(volume_modes)) for pv in pvs],
                dtype=np.int64,
            ),
            volume_modes=volume_modes,
            free=np.ones(len(pvs), dtype=bool),
            row=rows,
            group=groups,
            masks=masks,
            by_name={pv.name: k for k, pv in enumerate(pvs)},
        )
        for choice in self.chosen.values():  # (a class first asked after some choices)
            if choice.pv is not None and choice.pv in got.by_name:
                got.free[got.by_name[choice.pv]] = False
        return got

    def _candidates(self, pvc: PersistentVolumeClaimRecord, cls: str) -> np.ndarray:
        """Which PVs of class ``cls`` could take ``pvc`` on some node."""
        vols = self._volumes(cls)
        want = pvc.access_modes
        ok = vols.free & (vols.capacity >= pvc.request) & ((vols.modes & want) == want)
        ok &= vols.volume_mode == vols.volume_modes.get(pvc.volume_mode, -1)
        if pvc.selector is not None:
            for k in np.flatnonzero(ok):
                if not pvc.selector.matches(dict(vols.pvs[k].labels)):
                    ok[k] = False
        return ok

    def _claim_nodes(self, pvc: PersistentVolumeClaimRecord) -> np.ndarray:
        """The nodes on which ``pvc`` (unbound, WaitForFirstConsumer) could get a volume."""
        n = len(self.nodes)
        cls = self._class_of(pvc)
        assert cls is not None
        if pvc.selected_node:  # (provisioning for that node is under way)
            return self.index.names == pvc.selected_node
        vols = self._volumes(cls.name)
        ok = self._candidates(pvc, cls.name)
        mask = np.zeros(n, dtype=bool)
        rows = vols.row[ok]
        mask[rows[rows >= 0]] = True
        if vols.masks:
            for g in np.unique(vols.group[ok]):
                if g >= 0:
                    mask |= vols.masks[g]
        if cls.provisioner != NO_PROVISIONER:
            mask |= self._reach(cls.allowed)
        return mask

    def _choose(
        self, task: TaskInfo, claims: list[PersistentVolumeClaimRecord], row: int
    ) -> list[_Choice] | None:
        """For each of ``claims`` on node ``row``, the smallest fitting PV not taken by
        an earlier claim of the list, else provisioning; None when one gets neither."""
        node = str(self.index.names[row])
        taken: set[str] = set()
        out: list[_Choice] = []
        for pvc in claims:
            if pvc.selected_node:
                if pvc.selected_node != node:
                    return None
                continue  # (already asked of the provisioner: nothing to write)
            cls = self._class_of(pvc)
            assert cls is not None
            vols = self._volumes(cls.name)
            ok = self._candidates(pvc, cls.name)
            reach = vols.row == row
            for g, mask in enumerate(vols.masks):
                if mask[row]:
                    reach |= vols.group == g
            found = None
            for k in np.flatnonzero(ok & reach):
                if vols.pvs[k].name not in taken:
                    found = vols.pvs[k].name
                    break
            if found is not None:
                taken.add(found)
                out.append(_Choice(pvc.key, found, node))
            elif cls.provisioner != NO_PROVISIONER and self._reach(cls.allowed)[row]:
                out.append(_Choice(pvc.key, None, node))
            else:
                return None
        return out

    # -- the session's tentative state --------------------------------------------------

    def assume(self, task: TaskInfo) -> None:
        """``task`` was allocated or pipelined: settle its unbound claims on its node."""
        if not task.claims or task.node is None or not self.binding:
            return
        row = self.nodes.index.get(task.node)
        if row is None:
            return
        open_claims = []
        begun: list[_Choice] = []  # (the bind still waits for the PV controller)
        for name in task.claims:
            key = f"{task.namespace}/{name}"
            pvc = self.pvcs.get(key)
            if pvc is None or pvc.volume_name or key in self.chosen:
                continue
            prebound = self._prebound_pv(key)
            if prebound:
                begun.append(_Choice(key, prebound, task.node))
                continue
            cls = self._class_of(pvc)
            if cls is not None and cls.binding_mode != IMMEDIATE:
                open_claims.append(pvc)
        kept = begun + ((self._choose(task, open_claims, row) if open_claims else None) or [])
        for c in kept:
            self.chosen[c.claim] = c
            if c.pv is not None:
                self._mark(c.pv, taken=True)
        self.by_task[task.uid] = (task.key, kept)
        self._count(task, row, +1)
        if self._users is not None:
            for key in self._rwop_claims(task):
                self._users.setdefault(key, set()).add(task.key)

    def forget(self, task: TaskInfo) -> None:
        """``task`` was deallocated: give back what :meth:`assume` took for it."""
        got = self.by_task.pop(task.uid, None)
        if got is None:
            return
        for c in got[1]:
            if self.chosen.get(c.claim) is c:
                del self.chosen[c.claim]
                if c.pv is not None:
                    self._mark(c.pv, taken=False)
        row = self.nodes.index.get(task.node) if task.node is not None else None
        if row is not None:
            self._count(task, row, -1)
        if self._users is not None:
            for key in self._rwop_claims(task):
                self._users.get(key, set()).discard(task.key)

    def _mark(self, pv_name: str, *, taken: bool) -> None:
        pv = self.pvs.get(pv_name)
        vols = self._by_class.get(pv.storage_class) if pv is not None else None
        if vols is not None and pv_name in vols.by_name:
            vols.free[vols.by_name[pv_name]] = not taken

    def write(self, decisions: Decisions) -> None:
        """The choices of the tasks that bind this cycle, as their pre-bind writes."""
        binds = decisions.binds
        for key, choices in self.by_task.values():
            if not choices or key not in binds:
                continue
            pre = decisions.prebind_of(key)
            for c in choices:
                if c.pv is not None:
                    pre.volumes[c.claim] = c.pv
                else:
                    pre.provision[c.claim] = c.node

    # -- ReadWriteOncePod ---------------------------------------------------------------

    def _rwop_claims(self, task: TaskInfo) -> list[str]:
        keys = (f"{task.namespace}/{name}" for name in task.claims)
        return [k for k in keys if (p := self.pvcs.get(k)) is not None and p.access_modes & RWOP]

    def _rwop_users(self, key: str) -> set[str]:
        if self._users is None:
            users: dict[str, set[str]] = {}
            for tasks in self.nodes.tasks:
                for t in tasks.values():
                    if t.claims:
                        for k in self._rwop_claims(t):
                            users.setdefault(k, set()).add(t.key)
            self._users = users
        return self._users.get(key, set())

    # -- attach limits ------------------------------------------------------------------

    def _volume_ids(self, task: TaskInfo) -> dict[str, str]:
        """Volume id -> CSI driver, for the claims of ``task`` a limit counts."""
        out: dict[str, str] = {}
        for name in task.claims:
            key = f"{task.namespace}/{name}"
            pvc = self.pvcs.get(key)
            if pvc is None:
                continue
            bound = pvc.volume_name or self._settled_pv(key)
            pv = self.pvs.get(bound) if bound else None
            if pv is not None:
                driver, ident = pv.csi_driver, pv.name
            else:
                cls = self._class_of(pvc)
                driver, ident = (cls.provisioner if cls else ""), f"claim {key}"
            d = self.drivers.get(driver)
            if driver and (d is None or d.attach_required):
                out[ident] = driver
        return out

    def _limit_rows(self) -> dict[int, dict[str, int]]:
        if self._limits is None:
            self._limits = {}
            index = self.nodes.index
            for name, rec in self.csinodes.items():
                row = index.get(name)
                caps = {d: c for d, c in rec.limits if c is not None}
                if row is not None and caps:
                    self._limits[row] = caps
            for row in self._limits:
                for t in self.nodes.tasks[row].values():
                    if t.claims:
                        self._count(t, row, +1)
        return self._limits

    def _count(self, task: TaskInfo, row: int, sign: int) -> None:
        if self._limits is None or row not in self._limits or not task.claims:
            return
        seen = self._attached.setdefault(row, {})
        for ident, driver in self._volume_ids(task).items():
            counts = seen.setdefault(driver, {})
            left = counts.get(ident, 0) + sign
            if left > 0:
                counts[ident] = left
            else:
                counts.pop(ident, None)

    def _over_limit(self, task: TaskInfo) -> np.ndarray | None:
        limited = self._limit_rows()
        if not limited:
            return None
        mine = self._volume_ids(task)
        if not mine:
            return None
        over = np.zeros(len(self.nodes), dtype=bool)
        for row, caps in limited.items():
            attached = self._attached.get(row, {})
            for driver, cap in caps.items():
                used = attached.get(driver, {})
                new = sum(1 for ident, d in mine.items() if d == driver and ident not in used)
                if new and len(used) + new > cap:
                    over[row] = True
                    break
        return over if over.any() else None


__all__ = [
    "BIND_CONFLICT",
    "MAX_VOLUMES",
    "NODE_CONFLICT",
    "RWOP_CONFLICT",
    "UNBOUND_IMMEDIATE",
    "ZONE_CONFLICT",
    "VolumeChecks",
]
