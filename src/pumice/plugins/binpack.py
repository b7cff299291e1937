"""binpack: prefer nodes that the task fills up, to keep whole nodes free for big gangs.

Per requested resource with a weight: (used + request) / allocatable * weight; the sum
over resources divided by the sum of weights, times 100 and ``binpack.weight``. A node
where some weighted resource would overflow scores 0. Volcano's argument keys:
``binpack.weight`` (1), ``binpack.cpu`` (1), ``binpack.memory`` (1), ``binpack.resources``
(extra resource names, comma-separated) and ``binpack.resources.<name>`` (1).
"""

from __future__ import annotations

import numpy as np

from pumice.api.task import TaskInfo
from pumice.conf.arguments import Arguments
from pumice.errors import InputError
from pumice.framework.scoring import SeparableScore
from pumice.framework.session import Session
from pumice.framework.verdicts import timeless

MAX_SCORE = 100.0


class BinpackPlugin:
    name = "binpack"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = (
        "binpack.weight",
        "binpack.cpu",
        "binpack.memory",
        "binpack.resources",
        "binpack.resources.*",
    )

    def __init__(self, arguments: Arguments) -> None:
        self.score: BinpackScore | None = None
        #: The last weights, with the resource space and shared dimensions they follow.
        self._weighed: tuple[object, np.ndarray, np.ndarray] | None = None
        self.weight = arguments.get_int("binpack.weight", 1)
        self.resource_weights: dict[str, int] = {
            "cpu": arguments.get_int("binpack.cpu", 1),
            "memory": arguments.get_int("binpack.memory", 1),
        }
        extra = arguments.get_str("binpack.resources", "")
        for name in (r.strip() for r in extra.split(",")):
            if name:
                self.resource_weights[name] = arguments.get_int(f"binpack.resources.{name}", 1)
        for name, wt in self.resource_weights.items():
            if wt < 0:
                raise InputError(
                    f"must not be negative, got {wt}",
                    obj="plugin binpack",
                    field=f"arguments.binpack.{name}",
                )

    def on_session_open(self, ssn: Session) -> None:
        self.score = None
        if self.weight:
            self.score = BinpackScore(ssn, self._weights(ssn), MAX_SCORE * self.weight)
            ssn.on("node_order", self.name, self.score)

    def on_cycle_open(self, ssn: Session) -> None:
        """The score reads the cycle's nodes (the weights follow its resources)."""
        if self.score is not None:
            self.score.renew(ssn, self._weights(ssn))

    def _weights(self, ssn: Session) -> np.ndarray:
        """Per dimension, the weight of the resource (0 for pods and for what is not
        shared), read-only: kept while the cycles have the same resource space."""
        space = ssn.space
        kept = self._weighed
        if kept is not None and kept[0] is space and kept[1] is space.share:
            return kept[2]
        weights = np.zeros(space.size)
        for name, wt in self.resource_weights.items():
            if name in space.index:
                weights[space.index[name]] = wt
        weights[space.index["pods"]] = 0.0
        weights[~space.share] = 0.0
        weights.setflags(write=False)
        self._weighed = (space, space.share, weights)
        return weights


#: How many requests :meth:`BinpackScore._dims` keeps before it starts afresh (the
#: requests of a run are interned, so they are few).
_PREP_KEPT = 4096


class BinpackScore(SeparableScore):
    """The ``node_order`` function of one session. Each node is scored on its own, so
    :meth:`context` is always None and :meth:`rows` / :meth:`one` (one node, plain
    floats, same result to the last bit) serve the allocate fast path (see
    :class:`pumice.plugins.nodeorder.NodeOrderScore`)."""

    __slots__ = ("_prep", "factor", "nodes", "weights")

    def __init__(self, ssn: Session, weights: np.ndarray, factor: float) -> None:
        self.factor = factor
        self.renew(ssn, weights)

    def renew(self, ssn: Session, weights: np.ndarray) -> None:
        """Score the nodes of ``ssn``'s cycle (a living session's next one)."""
        self.nodes = ssn.nodes
        if weights is not getattr(self, "weights", None) or len(self._prep) > _PREP_KEPT:
            # (what _dims keeps follows from the request and the weights alone)
            self.weights = weights
            self._prep: dict[int, tuple] = {}

    def rows(self, task: TaskInfo, cand: np.ndarray, _ctx: None) -> np.ndarray:
        nodes, weights, factor = self.nodes, self.weights, self.factor
        req = task.resreq
        dims = np.flatnonzero((req > 0) & (weights > 0))
        if dims.size == 0 or factor == 0:
            return np.zeros(cand.size)
        alloc = nodes.allocatable[cand][:, dims]
        final = nodes.used[cand][:, dims] + req[dims]
        wt = weights[dims]
        with np.errstate(divide="ignore", invalid="ignore"):
            per = np.where(alloc > 0, final * wt / alloc, 0.0)
        overflow = np.any((alloc > 0) & (final > alloc), axis=1)
        s = per.sum(axis=1) / wt.sum()
        return np.where(overflow, 0.0, s * factor)

    def _dims(self, req: np.ndarray) -> tuple[tuple[tuple[int, float, float], ...], float]:
        """The weighted dimensions ``req`` asks for, as (dim, request, weight) floats, and
        the sum of their weights (summed in the same order as before): once per
        (interned, read-only) request vector. Keyed by identity; the entry keeps the
        vector alive, so an id is never reused while it is in the memo."""
        got = self._prep.get(id(req))
        if got is not None and got[0] is req:
            return got[1], got[2]
        weights = self.weights
        items = tuple(
            (d, float(req[d]), float(weights[d]))
            for d in range(req.size)
            if req[d] > 0 and weights[d] > 0
        )
        wsum = 0.0
        for _, _, wt in items:
            wsum += wt
        self._prep[id(req)] = (req, items, wsum)
        return items, wsum

    def one(self, task: TaskInfo, i: int, _ctx: None) -> float:
        """:meth:`rows` for node ``i`` alone."""
        items, wsum = self._dims(task.resreq)
        if not items or self.factor == 0:
            return 0.0
        alloc_row, used_row = self.nodes.allocatable[i].tolist(), self.nodes.used[i].tolist()
        total, overflow = 0.0, False
        for d, r, wt in items:
            alloc = alloc_row[d]
            final = used_row[d] + r
            if alloc > 0:
                total += final * wt / alloc
                if final > alloc:
                    overflow = True
        return 0.0 if overflow else total / wsum * self.factor
