"""network-topology-aware: where a gang goes in the network, and how HyperNodes fill up.

Registers:

``hypernode_gradient``
    For a gang with a tier limit, the HyperNodes it may be tried in, breadth first from
    the search root, grouped by tier (lowest first): those of tier at most the limit
    whose idle (or future idle) resources, summed, hold the gang's ``minResources``
    (a gang already holding a HyperNode skips that filter, and its search starts at the
    highest ancestor of what it holds that the limit allows). A gang without a limit
    is tried at the start alone.
``hypernode_order``
    HyperNode-level bin packing: per weighted resource, (used + the sub-job's requests)
    / allocatable, the weighted mean, 0 where it would overflow; ties between the best
    broken by the share of the sub-job's tasks already in the HyperNode. Times 100 and
    ``weight``.
``node_order``
    For a task of a constrained sub-job: the lower the tier of the lowest HyperNode
    holding both the node's switch and what the sub-job holds so far, the better
    ((max tier - that tier) / (max tier - min tier)); ties between the best broken as
    above. For other tasks (``hypernode.binpack.normal-pod.enable``, on by default):
    each tier's HyperNode of the node bin-packed for the task, weighted ``fading^(tier
    - 1)``, a tier where the node is in no HyperNode counting full. Times 100 and
    ``weight``.

Arguments are Volcano's: ``weight`` (1), ``hypernode.binpack.cpu`` (1),
``hypernode.binpack.memory`` (1), ``hypernode.binpack.resources`` (names, comma
separated) with ``hypernode.binpack.resources.<name>`` (1),
``hypernode.binpack.normal-pod.enable`` (true), ``hypernode.binpack.normal-pod.fading``
(0.8), ``hypernode.gradient.evict.max-hypernodes`` (8, for eviction searches). A
negative weight falls back to 1, as in Volcano.

The resource sums per HyperNode are taken when the session opens; ``used`` then follows
every allocation and release in the session, ``idle`` does not (Volcano's cache, and
the gradient filter reads it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pumice.api.resources import Vector
from pumice.api.task import TaskInfo
from pumice.conf.arguments import Arguments
from pumice.framework.session import EventHandler, Session
from pumice.framework.topology import EVICT_PURPOSE, SessionTopology, SubJob, session_topology
from pumice.framework.verdicts import timeless

MAX_SCORE = 100.0


class NetworkTopologyPlugin:
    name = "network-topology-aware"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = (
        "weight",
        "hypernode.binpack.cpu",
        "hypernode.binpack.memory",
        "hypernode.binpack.resources",
        "hypernode.binpack.resources.*",
        "hypernode.binpack.normal-pod.enable",
        "hypernode.binpack.normal-pod.fading",
        "hypernode.gradient.evict.max-hypernodes",
    )

    def __init__(self, arguments: Arguments) -> None:
        def weight(key: str) -> int:
            w = arguments.get_int(key, 1)
            return 1 if w < 0 else w

        self.weight = weight("weight")
        self.resource_weights: dict[str, int] = {
            "cpu": weight("hypernode.binpack.cpu"),
            "memory": weight("hypernode.binpack.memory"),
        }
        extra = arguments.get_str("hypernode.binpack.resources", "")
        for name in (r.strip() for r in extra.split(",")):
            if name:
                self.resource_weights[name] = weight(f"hypernode.binpack.resources.{name}")
        self.normal_pods = arguments.get_bool("hypernode.binpack.normal-pod.enable", True)
        fading = arguments.get_float("hypernode.binpack.normal-pod.fading", 0.8)
        self.fading = 0.8 if fading < 0 else fading
        #: The cycle's sums per HyperNode (see :meth:`on_cycle_open`, which sets them
        #: before any function registered at open can run).
        self._state: _State
        most = arguments.get_int("hypernode.gradient.evict.max-hypernodes", 8)
        self.evict_max = 8 if most <= 0 else most

    def on_cycle_open(self, ssn: Session) -> None:
        """The cycle's sums per HyperNode, from the session's network and nodes; the
        functions registered at open read them."""
        self._state = _State(ssn, session_topology(ssn), self)

    def on_session_open(self, ssn: Session) -> None:
        """Register the functions, once for as long as the session lives: each hands
        the call to the cycle's :class:`_State`."""

        def gradient(*args: Any) -> list[list[str]] | None:  # (see _State.gradient)
            return self._state.gradient(*args)

        def node_order(task: TaskInfo, cand: np.ndarray) -> np.ndarray:
            return self._state.node_order(task, cand)

        def allocated(task: TaskInfo) -> None:
            self._state.allocated(task)

        def released(task: TaskInfo) -> None:
            self._state.released(task)

        ssn.on("hypernode_gradient", self.name, gradient)
        ssn.on("hypernode_order", self.name, _Order(self))
        ssn.on("node_order", self.name, node_order)
        ssn.add_event_handler(EventHandler(allocate=allocated, deallocate=released))


class _Order:
    """The ``hypernode_order`` function, with its terms apart (``parts``), of the
    plugin's cycle state."""

    __slots__ = ("plugin",)

    def __init__(self, plugin: NetworkTopologyPlugin) -> None:
        self.plugin = plugin

    def __call__(self, sj: SubJob, names: list[str]) -> dict[str, float]:
        return self.plugin._state.hypernode_order(sj, names)

    def parts(self, sj: SubJob, names: list[str]) -> tuple[dict[str, float], dict[str, float]]:
        return self.plugin._state.parts(sj, names)


class _State:
    """One session's sums per HyperNode and the functions that read them."""

    def __init__(self, ssn: Session, topo: SessionTopology, plugin: NetworkTopologyPlugin) -> None:
        self.ssn = ssn
        self.topo = topo
        self.plugin = plugin
        self.factor = MAX_SCORE * plugin.weight
        tree = topo.tree
        self.names = sorted(tree.hypernodes)
        self.pos = {n: k for k, n in enumerate(self.names)}
        nodes = ssn.nodes
        n, h = len(nodes), len(self.names)
        member = np.zeros((n, h), dtype=bool)
        for k, name in enumerate(self.names):
            member[topo.rows_of(name), k] = True
        self.member = member
        #: Per node row, the HyperNodes (positions) holding it.
        self.holders = [np.flatnonzero(member[i]) for i in range(n)]
        m = member.T.astype(np.float64)
        self.allocatable = m @ nodes.allocatable
        self.used = m @ nodes.used
        self.idle = m @ nodes.idle
        self.future = m @ nodes.future_idle()
        space = ssn.space
        weights = np.zeros(space.size)
        for name, wt in plugin.resource_weights.items():
            if name in space.index:
                weights[space.index[name]] = wt
        self.weights = weights
        tiers = tree.tiers
        self.min_tier, self.max_tier = (tiers[0], tiers[-1]) if tiers else (1, 1)
        #: Each row's lowest-tier HyperNode, as a position (-1: none).
        self.leaf_pos = np.array(
            [self.pos[h] if h else -1 for h in topo.leaf.tolist()], dtype=np.intp
        )
        #: Per HyperNode a sub-job holds, the tier score of every HyperNode's LCA with
        #: it (by position; a gang's holding changes a few times in a cycle).
        self._tier_tables: dict[str, np.ndarray] = {}
        #: Per sub-job, how many of its tasks each HyperNode (position) holds, kept by
        #: the event handlers once asked.
        self._on: dict[str, np.ndarray] = {}
        #: Per tier, each row's HyperNode position at that tier (-1: none), the first
        #: by name where a node is in several.
        self.at_tier: dict[int, np.ndarray] = {}
        for tier in range(self.min_tier, self.max_tier + 1):
            col = np.full(n, -1, dtype=np.intp)
            for name in reversed(tree.by_tier.get(tier, [])):
                col[topo.rows_of(name)] = self.pos[name]
            self.at_tier[tier] = col

    # -- keeping the sums ---------------------------------------------------------------

    def allocated(self, task: TaskInfo) -> None:
        i = self.ssn.nodes.index.get(task.node or "")
        if i is not None:
            self.used[self.holders[i]] += task.resreq
            self._count(task, i, 1)

    def released(self, task: TaskInfo) -> None:
        i = self.ssn.nodes.index.get(task.node or "")
        if i is not None:
            self.used[self.holders[i]] -= task.resreq
            self._count(task, i, -1)

    def _count(self, task: TaskInfo, row: int, by: int) -> None:
        if not self._on:
            return
        job = self.ssn.jobs.get(task.job or "")
        sj = self.topo.subjob_of(job, task) if job is not None else None
        if sj is not None:
            on = self._on.get(sj.uid)
            if on is not None:
                on[self.holders[row]] += by

    def _tasks_on(self, sj: SubJob) -> np.ndarray:
        """How many of ``sj``'s tasks each HyperNode (position) holds."""
        on = self._on.get(sj.uid)
        if on is None:
            on = np.zeros(len(self.names), dtype=np.int64)
            index = self.ssn.nodes.index
            for t in sj.tasks:
                row = index.get(t.node) if t.node else None
                if row is not None:
                    on[self.holders[row]] += 1
            self._on[sj.uid] = on
        return on

    # -- where a gang may go ------------------------------------------------------------

    def gradient(
        self,
        limit: int | None,
        allocated: str,
        min_request: Vector | None,
        start: str,
        purpose: str,
    ) -> list[list[str]] | None:
        if limit is None:
            return [[start]]
        tree = self.topo.tree
        root = self._search_root(start, limit, allocated)
        if root is None:
            return []
        by_tier: dict[int, list[str]] = {}
        for hn in tree.subtree(root):
            if hn.tier > limit:
                continue
            if (
                not allocated
                and min_request is not None
                and not self._holds(hn.name, min_request, purpose)
            ):
                continue
            by_tier.setdefault(hn.tier, []).append(hn.name)
        out = [by_tier[t] for t in sorted(by_tier)]
        if purpose == EVICT_PURPOSE:
            out = self._widest_first(out)
        return out

    def _holds(self, name: str, request: Vector, purpose: str) -> bool:
        k = self.pos[name]
        if purpose == EVICT_PURPOSE:
            return bool(np.all(request <= self.allocatable[k]))
        return bool(np.all(request <= self.idle[k]) or np.all(request <= self.future[k]))

    def _search_root(self, start: str, limit: int, allocated: str) -> str | None:
        """``start``, narrowed to the highest ancestor of ``allocated`` the limit allows
        (None when the two do not overlap or no ancestor is allowed)."""
        if not allocated:
            return start
        tree = self.topo.tree
        highest = ""
        for name in tree.ancestors(allocated):
            if tree.tier_of(name) > limit:
                break
            highest = name
        if not highest:
            return None
        lca = tree.lca(start, highest)
        if lca == highest:
            return start
        if lca == start:
            return highest
        return None

    def _widest_first(self, gradients: list[list[str]]) -> list[list[str]]:
        left = self.plugin.evict_max
        out: list[list[str]] = []
        for names in reversed(gradients):
            if left == 0:
                break
            take = names if len(names) <= left else names[len(names) - left :]
            out.append(take)
            left -= len(take)
        return out

    # -- HyperNode scores ---------------------------------------------------------------

    def _pack(self, k: int, request: np.ndarray) -> float:
        """The weighted bin-packing score of HyperNode position ``k`` for ``request``."""
        dims = np.flatnonzero((request > 0) & (self.weights > 0))
        if dims.size == 0:
            return 0.0
        alloc = self.allocatable[k, dims]
        final = self.used[k, dims] + request[dims]
        if np.any(final > alloc):
            return 0.0
        wt = self.weights[dims]
        return float((wt * final / alloc).sum() / wt.sum())

    def _task_share(self, name: str, sj: SubJob) -> float:
        if not sj.tasks:
            return 1.0
        return float(self._tasks_on(sj)[self.pos[name]]) / len(sj.tasks)

    def hypernode_order(self, sj: SubJob, names: list[str]) -> dict[str, float]:
        packed, share = self.parts(sj, names)
        best = max(packed.values(), default=0.0)
        tied = [n for n, s in packed.items() if s == best]
        if len(tied) > 1:
            return {n: s + share[n] if s == best else s for n, s in packed.items()}
        return packed

    def parts(self, sj: SubJob, names: list[str]) -> tuple[dict[str, float], dict[str, float]]:
        """The two terms of :meth:`hypernode_order`, scaled, for each HyperNode alone:
        its bin-packing score, and the share of the sub-job's tasks in it (added only
        where the bin-packing scores of the best tie). The search reads them to try the
        most promising HyperNodes first (see :mod:`pumice.actions.topology`)."""
        request = np.zeros(self.ssn.space.size)
        for t in sj.tasks:
            request += t.resreq
        factor = self.factor
        packed = {name: self._pack(self.pos[name], request) * factor for name in names}
        share = {name: self._task_share(name, sj) * factor for name in names}
        return packed, share

    # -- node scores --------------------------------------------------------------------

    def node_order(self, task: TaskInfo, cand: np.ndarray) -> np.ndarray:
        job = self.ssn.jobs.get(task.job or "")
        sj = self.topo.subjob_of(job, task) if job is not None else None
        if sj is not None and sj.topology is not None:
            return self._aware(task, sj, cand) * self.factor
        if not self.plugin.normal_pods:
            return np.zeros(cand.size)
        return self._normal(task, cand) * self.factor

    def _tier_score(self, tier: int) -> float:
        lo, hi = self.min_tier, self.max_tier
        if lo == hi:
            return 1.0
        if lo <= tier <= hi:
            return (hi - tier) / (hi - lo)
        return 0.0

    def _aware(self, task: TaskInfo, sj: SubJob, cand: np.ndarray) -> np.ndarray:
        held = self.topo.domain_of_task.get(task.uid, "")
        if not held:
            return np.zeros(cand.size)
        table = self._tier_tables.get(held)
        if table is None:
            table = self._tier_tables[held] = self._tier_table(held)
        homes = self.leaf_pos[cand]
        scores = np.where(homes >= 0, table[homes], 0.0)
        best = scores.max() if scores.size else 0.0
        tied = scores == best
        if np.count_nonzero(tied) > 1 and sj.tasks:
            on = self._tasks_on(sj)
            share = np.where(homes >= 0, on[homes], 0) / len(sj.tasks)
            scores = np.where(tied & (homes >= 0), scores + share, scores)
        return scores

    def _tier_table(self, held: str) -> np.ndarray:
        """For each HyperNode (position) as a node's switch: 1 when it is ``held``,
        else the tier score of its lowest common ancestor with ``held``."""
        tree = self.topo.tree
        table = np.zeros(len(self.names))
        for k, name in enumerate(self.names):
            if name == held:
                table[k] = 1.0
            else:
                table[k] = self._tier_score(tree.tier_of(tree.lca(name, held)))
        return table

    def _normal(self, task: TaskInfo, cand: np.ndarray) -> np.ndarray:
        fading = self.plugin.fading
        total_weight = 0.0
        out = np.zeros(cand.size)
        req = task.resreq
        dims = np.flatnonzero((req > 0) & (self.weights > 0))
        for tier in range(self.min_tier, self.max_tier + 1):
            w = math.pow(fading, tier - 1) if fading or tier >= 1 else math.inf
            total_weight += w
            col = self.at_tier[tier][cand]
            tier_scores = np.ones(cand.size)
            present = col >= 0
            if present.any() and dims.size:
                ks = np.unique(col[present])
                alloc = self.allocatable[ks][:, dims]
                final = self.used[ks][:, dims] + req[dims]
                wt = self.weights[dims]
                with np.errstate(divide="ignore", invalid="ignore"):
                    per = (wt * final / alloc).sum(axis=1) / wt.sum()
                per = np.where(np.any(final > alloc, axis=1), 0.0, per)
                lookup = dict(zip(ks.tolist(), per.tolist(), strict=True))
                tier_scores[present] = [lookup[k] for k in col[present].tolist()]
            elif present.any():
                tier_scores[present] = 0.0
            out += w * tier_scores
        if total_weight <= 0:
            return np.zeros(cand.size)
        return out / total_weight


__all__ = ["NetworkTopologyPlugin"]
