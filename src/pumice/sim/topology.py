"""The simulated cluster's network: a HyperNode tree, the tier a gang spans, what it costs.

Why: network-topology-aware scheduling (Volcano's HyperNodes and a PodGroup's
``spec.networkTopology``) can only be judged on a cluster that has a network. This
module gives the simulator one:

- :class:`TreeShape` and :func:`hypernode_objects`: a leaf-spine tree over the cluster's
  nodes, in the order they are listed: ``nodes_per_leaf`` consecutive nodes under each
  tier-1 HyperNode (a leaf switch), ``leaves_per_spine`` consecutive tier-1 HyperNodes
  under each tier-2 one (a spine), and, for ``tiers`` above 2, ``leaves_per_spine``
  HyperNodes of each tier under one of the next. The objects are ordinary
  ``topology.volcano.sh/v1alpha1`` HyperNodes; the simulator puts them in the cluster,
  where the scheduler's cache reads them like any other object.
- :func:`cluster_topology`: the tree the objects describe
  (:func:`pumice.api.hypernode.build_topology`), checked as the scheduler checks it.
- :class:`Spans`: the lowest HyperNode holding a set of nodes and its tier (the virtual
  root, the whole cluster, counts as one tier above the highest real one).
- :class:`Slowdown`: a run-time factor per tier spanned (``{1: 1.0, 2: 1.15, 3: 1.4}``):
  a gang whose pods talk across a spine runs longer than one within a leaf.
- :func:`with_network_topology`: the same workload with the large gangs' constraint
  replaced (``hard``, ``soft`` or ``none``), the variants of a what-if.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pumice.api.hypernode import (
    CLUSTER,
    NodeFacts,
    Topology,
    build_topology,
    parse_hypernode,
)
from pumice.api.limits import MAX_NODES
from pumice.api.topology_spec import HARD, SOFT, NetworkTopology
from pumice.errors import InputError, shown
from pumice.sim.fields import check_keys, require_int
from pumice.sim.objects import min_resources
from pumice.sim.workload import JobSpec, Workload

HYPERNODE_API = "topology.volcano.sh/v1alpha1"
#: The names of the tiers the generated tree uses; higher tiers are ``tier<N>``.
TIER_NAMES = {1: "leaf", 2: "spine", 3: "core"}
SHAPE_KEYS = ("nodesPerLeaf", "leavesPerSpine", "tiers")
#: Most tiers of a generated tree (real networks have two or three).
MAX_TIERS = 16
#: The what-if modes of :func:`with_network_topology`.
MODES = (HARD, SOFT, "none")


@dataclass(slots=True, frozen=True)
class TreeShape:
    """How many nodes share a leaf switch, leaves a spine, and how many tiers there are."""

    nodes_per_leaf: int = 4
    leaves_per_spine: int = 4
    tiers: int = 2

    @classmethod
    def parse(cls, value: Any, field: str = "topology") -> TreeShape:
        """From a mapping ``{nodesPerLeaf, leavesPerSpine, tiers}`` (any subset; the rest
        default) or ``None``/``{}`` for the default shape."""
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise InputError("expected a map {nodesPerLeaf, leavesPerSpine, tiers}", field=field)
        check_keys(value, SHAPE_KEYS, field=field)
        d = cls()
        return cls(
            nodes_per_leaf=require_int(
                value.get("nodesPerLeaf", d.nodes_per_leaf),
                field=f"{field}.nodesPerLeaf",
                minimum=1,
                maximum=MAX_NODES,
            ),
            leaves_per_spine=require_int(
                value.get("leavesPerSpine", d.leaves_per_spine),
                field=f"{field}.leavesPerSpine",
                minimum=1,
                maximum=MAX_NODES,
            ),
            tiers=require_int(
                value.get("tiers", d.tiers), field=f"{field}.tiers", minimum=1, maximum=MAX_TIERS
            ),
        )

    @classmethod
    def from_text(cls, text: str, field: str = "--topology") -> TreeShape:
        """From ``nodesPerLeaf=4,leavesPerSpine=4,tiers=2`` (any subset; "" = default)."""
        values: dict[str, Any] = {}
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            key, eq, raw = part.partition("=")
            if not eq:
                raise InputError(
                    f"expected key=value, got {shown(part)} (keys: {', '.join(SHAPE_KEYS)})",
                    field=field,
                )
            try:
                values[key.strip()] = int(raw)
            except ValueError:
                raise InputError(
                    f"expected an integer, got {shown(raw)}", field=f"{field} {key.strip()}"
                ) from None
        return cls.parse(values, field)

    def fanout(self) -> list[int]:
        """Children per HyperNode, tier by tier from the leaves up."""
        return [self.nodes_per_leaf] + [self.leaves_per_spine] * (self.tiers - 1)

    def as_dict(self) -> dict[str, int]:
        return {
            "nodesPerLeaf": self.nodes_per_leaf,
            "leavesPerSpine": self.leaves_per_spine,
            "tiers": self.tiers,
        }


def _tier_name(tier: int) -> str:
    return TIER_NAMES.get(tier, f"tier{tier}")


def hypernode_objects(node_names: Sequence[str], shape: TreeShape) -> list[dict[str, Any]]:
    """HyperNode manifests of a ``shape`` tree over ``node_names`` (in that order).

    Each HyperNode is named ``<tier name>-<index>`` (``leaf-00``, ``spine-0``,
    ``core-0``) and carries its ``tierName``; a leaf names its nodes by ``exactMatch``,
    a higher HyperNode its children. The last HyperNode of a tier may hold fewer
    members when the counts do not divide. No nodes, no HyperNodes.
    """
    out: list[dict[str, Any]] = []
    members: list[tuple[str, str]] = [("Node", n) for n in node_names]
    for tier, fan in enumerate(shape.fanout(), start=1):
        if not members:
            break
        groups = [members[i : i + fan] for i in range(0, len(members), fan)]
        width = len(str(len(groups) - 1))
        names = [f"{_tier_name(tier)}-{i:0{width}d}" for i in range(len(groups))]
        for name, group in zip(names, groups, strict=True):
            out.append(
                {
                    "apiVersion": HYPERNODE_API,
                    "kind": "HyperNode",
                    "metadata": {"name": name},
                    "spec": {
                        "tier": tier,
                        "tierName": _tier_name(tier),
                        "members": [
                            {"type": kind, "selector": {"exactMatch": {"name": member}}}
                            for kind, member in group
                        ],
                    },
                }
            )
        members = [("HyperNode", n) for n in names]
    return out


def cluster_topology(
    nodes: Sequence[Mapping[str, Any]], hypernodes: Sequence[Mapping[str, Any]]
) -> Topology | None:
    """The tree of ``hypernodes`` over ``nodes`` (None without HyperNodes); a malformed
    HyperNode, a cycle or a HyperNode with two parents is an :class:`InputError`; the
    tree's notes (members matching no node, nodes in no HyperNode) are on the result."""
    if not hypernodes:
        return None
    records = []
    for obj in hypernodes:
        name = (obj.get("metadata") or {}).get("name", "?")
        try:
            records.append(parse_hypernode(obj))
        except InputError as err:
            raise err.located(obj=f"HyperNode {name}") from None
    facts = []
    for n in nodes:
        meta = n.get("metadata") or {}
        facts.append(NodeFacts(str(meta.get("name", "")), dict(meta.get("labels") or {})))
    return build_topology(records, facts)


class Spans:
    """The lowest HyperNode holding a set of nodes, and its tier, over one topology.

    Each node's own (lowest-tier) HyperNode is looked up once; a span is then the
    lowest common ancestor of those. A node in no HyperNode is under the root only.
    """

    __slots__ = ("_home", "topology")

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        home: dict[str, tuple[int, str]] = {}
        for hn in topology.hypernodes.values():
            if hn.name == CLUSTER:
                continue
            for node in hn.nodes:
                best = home.get(node)
                if best is None or (hn.tier, hn.name) < best:
                    home[node] = (hn.tier, hn.name)
        self._home = {n: name for n, (_t, name) in home.items()}

    @property
    def root_tier(self) -> int:
        return self.topology.root.tier

    def span(self, nodes: Iterable[str]) -> str:
        """The lowest HyperNode holding every node of ``nodes`` ("" for none)."""
        out = ""
        lca, home = self.topology.lca, self._home
        for n in nodes:
            out = lca(out, home.get(n, CLUSTER))
        return out

    def tier(self, hypernode: str) -> int:
        return self.topology.tier_of(hypernode)

    def limit(self, nt: NetworkTopology) -> int | None:
        """The highest tier ``nt`` allows (its ``highestTierName`` resolved), or None."""
        if nt.highest_tier is not None:
            return nt.highest_tier
        if nt.highest_tier_name:
            return self.topology.tier_names.get(nt.highest_tier_name)
        return None


@dataclass(slots=True, frozen=True)
class Slowdown:
    """Run-time factors by the tier a gang spans when it starts running.

    A tier not listed takes the factor of the highest listed tier below it (1.0 when
    there is none), so ``{2: 1.15}`` slows every gang that crosses a leaf, the ones
    spanning the whole cluster included. Empty: no gang is slowed (the default).
    """

    factors: tuple[tuple[int, float], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.factors)

    def factor(self, tier: int) -> float:
        got = 1.0
        for t, f in self.factors:
            if t <= tier:
                got = f
        return got

    def as_dict(self) -> dict[str, float]:
        return {str(t): f for t, f in self.factors}

    @classmethod
    def parse(cls, value: Any, field: str = "topology_slowdown") -> Slowdown:
        """From a mapping ``{tier: factor}`` or the text ``1=1.0,2=1.15,3=1.4``."""
        if value is None or value == "":
            return cls()
        items: list[tuple[Any, Any]]
        if isinstance(value, str):
            items = []
            for part in (p.strip() for p in value.split(",")):
                if not part:
                    continue
                tier, eq, factor = part.partition("=")
                if not eq:
                    raise InputError(f"expected tier=factor, got {shown(part)}", field=field)
                items.append((tier.strip(), factor.strip()))
        elif isinstance(value, Mapping):
            items = list(value.items())
        else:
            raise InputError("expected a map of tier: factor", field=field)
        out: dict[int, float] = {}
        for tier, factor in items:
            try:
                t = int(tier)
            except (TypeError, ValueError):
                raise InputError(
                    f"expected a tier number, got {shown(tier)}", field=field
                ) from None
            if t < 1:
                raise InputError(f"tiers start at 1, got {t}", field=field)
            try:
                f = float(factor)
            except (TypeError, ValueError):
                raise InputError(
                    f"expected a number, got {shown(factor)}", field=f"{field}.{t}"
                ) from None
            if not f > 0:
                raise InputError(f"must be > 0, got {shown(factor)}", field=f"{field}.{t}")
            if t in out:
                raise InputError(f"tier {t} is given twice", field=field)
            out[t] = f
        return cls(tuple(sorted(out.items())))


#: No gang is slowed (the default).
NO_SLOWDOWN = Slowdown()


def is_large(job: JobSpec, min_pods: int) -> bool:
    """A gang the what-if constrains: at least ``min_pods`` pods (and more than one)."""
    return job.replicas >= max(2, min_pods)


def with_network_topology(
    workload: Workload, mode: str, *, highest_tier: int = 2, min_pods: int = 2
) -> Workload:
    """``workload`` with every large gang's ``networkTopology`` (see :func:`is_large`)
    set to ``mode`` (``hard`` or ``soft`` with ``highestTierAllowed: highest_tier``) or
    removed (``none``). Smaller jobs keep what the workload gave them."""
    if mode not in MODES:
        raise InputError(f"expected one of {', '.join(MODES)}, got {shown(mode)}")
    nt = None if mode == "none" else NetworkTopology(mode, highest_tier)
    jobs = tuple(
        dataclasses.replace(j, network_topology=nt) if is_large(j, min_pods) else j
        for j in workload.jobs
    )
    return dataclasses.replace(workload, jobs=jobs)


def unplaceable_hard_gangs(
    workload: Workload, allocatable: Mapping[str, Mapping[str, float]], topology: Topology
) -> list[str]:
    """Hard gangs that no HyperNode of a tier they allow can ever hold: the minimum
    resources of the gang exceed, in some resource, the sum over every such HyperNode's
    nodes (``allocatable``: each node's, by name). A necessary condition only; the
    scheduler has the final word."""
    spans = Spans(topology)
    sums: list[tuple[int, dict[str, float]]] = []
    for hn in topology.hypernodes.values():
        total: dict[str, float] = {}
        for node in hn.nodes:
            for k, v in (allocatable.get(node) or {}).items():
                total[k] = total.get(k, 0.0) + v
        sums.append((hn.tier, total))
    out = []
    for job in workload.jobs:
        nt = job.network_topology
        if nt is None or nt.mode != HARD:
            continue
        limit = spans.limit(nt)
        need = min_resources(job)
        if not any(
            (limit is None or tier <= limit)
            and all(v <= total.get(k, 0.0) for k, v in need.items())
            for tier, total in sums
        ):
            out.append(f"{job.namespace}/{job.name}")
    return out


__all__ = [
    "HYPERNODE_API",
    "MODES",
    "NO_SLOWDOWN",
    "Slowdown",
    "Spans",
    "TreeShape",
    "cluster_topology",
    "hypernode_objects",
    "is_large",
    "unplaceable_hard_gangs",
    "with_network_topology",
]
