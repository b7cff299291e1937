"""Label selectors, node affinity and taints evaluated over all nodes at once.

Node labels and taints do not change within a session, so :class:`NodeIndex` turns them
into columns once (one array of values per label key, nodes grouped by identical taint
sets) and every term or toleration list is then answered for all nodes with a few
array operations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from pumice.api.task import Requirement, SelectorTerm, Taint, Toleration

if TYPE_CHECKING:
    from pumice.api.node import NodeSpec

HARD_EFFECTS = ("NoSchedule", "NoExecute")


class NodeIndex:
    """Column views of the static node specs."""

    def __init__(self, specs: Sequence[NodeSpec]) -> None:
        self.specs = specs
        self.n = len(specs)
        self._columns: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.names = np.array([s.name for s in specs], dtype=object)
        groups: dict[tuple[Taint, ...], list[int]] = {}
        for i, s in enumerate(specs):
            groups.setdefault(s.taints, []).append(i)
        self.taint_groups = [(t, np.array(ix, dtype=np.intp)) for t, ix in groups.items()]
        self.unschedulable = np.array([s.unschedulable for s in specs], dtype=bool)
        self.not_ready = np.array([not s.ready for s in specs], dtype=bool)

    def column(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(values, present) for label ``key`` across nodes."""
        col = self._columns.get(key)
        if col is None:
            values = np.array([s.labels.get(key, "") for s in self.specs], dtype=object)
            present = np.array([key in s.labels for s in self.specs], dtype=bool)
            col = (values, present)
            self._columns[key] = col
        return col

    def _requirement(self, r: Requirement) -> np.ndarray:
        if r.field:
            values, present = self.names, np.ones(self.n, dtype=bool)
        else:
            values, present = self.column(r.key)
        op = r.operator
        if op == "Exists":
            return present.copy()
        if op == "DoesNotExist":
            return ~present
        if op == "In":
            return present & np.isin(values, list(r.values))
        if op == "NotIn":
            return ~(present & np.isin(values, list(r.values)))
        bound = int(r.values[0])
        out = np.zeros(self.n, dtype=bool)
        for i in np.flatnonzero(present):
            try:
                v = int(values[i])
            except ValueError:
                continue
            out[i] = v > bound if op == "Gt" else v < bound
        return out

    def term(self, term: SelectorTerm) -> np.ndarray:
        """Nodes matching every requirement of ``term`` (an empty term matches none)."""
        if not term.requirements:
            return np.zeros(self.n, dtype=bool)
        mask = np.ones(self.n, dtype=bool)
        for r in term.requirements:
            mask &= self._requirement(r)
        return mask

    def selector(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        mask = np.ones(self.n, dtype=bool)
        for key, value in pairs:
            values, present = self.column(key)
            mask &= present & (values == value)
        return mask

    def untolerated(
        self, tolerations: Sequence[Toleration], effects: Sequence[str] = HARD_EFFECTS
    ) -> list[tuple[Taint, np.ndarray]]:
        """Per untolerated taint (the first one of each node), the nodes it blocks."""
        out: dict[Taint, list[np.ndarray]] = {}
        for taints, nodes in self.taint_groups:
            for taint in taints:
                if taint.effect in effects and not any(t.tolerates(taint) for t in tolerations):
                    out.setdefault(taint, []).append(nodes)
                    break
        return [(t, np.concatenate(ix)) for t, ix in out.items()]

    def intolerable_count(self, tolerations: Sequence[Toleration]) -> np.ndarray:
        """Per node, PreferNoSchedule taints not tolerated (by tolerations whose effect
        is empty or PreferNoSchedule), for the taint-toleration score."""
        soft = [t for t in tolerations if t.effect in ("", "PreferNoSchedule")]
        counts = np.zeros(self.n, dtype=np.float64)
        for taints, nodes in self.taint_groups:
            c = sum(
                1
                for taint in taints
                if taint.effect == "PreferNoSchedule" and not any(t.tolerates(taint) for t in soft)
            )
            if c:
                counts[nodes] = c
        return counts
