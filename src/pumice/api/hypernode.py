"""The network as Volcano describes it: ``topology.volcano.sh/v1alpha1`` HyperNodes.

A HyperNode is a performance domain, usually a switch. A tier-1 HyperNode holds nodes;
a higher tier holds HyperNodes; together they form a tree (a forest, joined here under
one virtual root that holds every node, as Volcano's scheduler does). Two nodes talk
faster the lower the tier of the smallest HyperNode holding both.

This module holds the records (:func:`parse_hypernode`), the tree built from them and
the cluster's nodes (:func:`build_topology`, checked for what would make it lie: a
cycle, a HyperNode claimed by two parents, members that name nothing), and the tree's
arithmetic (ancestors, lowest common ancestor, the tier a set of nodes spans). It is
pure: the scheduling core asks it for node rows through :meth:`Topology.rows`.

A member's ``regexMatch`` is searched anywhere in the node name (Go's
``regexp.MatchString``), with RE2, the engine and syntax Go's ``regexp`` has: a pattern
Volcano refuses (a lookahead, a back-reference) is refused here too, and matching takes
time linear in the name whatever the pattern (Python's own engine backtracks, and a
pattern such as ``^(a|aa)+$`` would take it years on a long node name); ``exactMatch``
may name a node that does not exist yet (it joins when it appears); ``labelMatch``
applies to nodes only, and HyperNode members are named by ``exactMatch`` alone, as in
Volcano.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import re2  # type: ignore[import-untyped]  # (google-re2: no type information)

from pumice.api.pdb import LabelSelector, parse_label_selector
from pumice.errors import InputError, shown

#: The highest tier accepted: real networks have a handful, and some of the arithmetic
#: walks the tiers one by one.
MAX_TIER = 1000

#: The virtual root: every node of the cluster, one tier above the highest real tier.
CLUSTER = "<cluster>"

NODE = "Node"
HYPERNODE = "HyperNode"


@dataclass(slots=True, frozen=True)
class Member:
    """One ``spec.members[]`` entry: a selector of nodes or of one HyperNode."""

    kind: str  # NODE or HYPERNODE
    exact: str = ""
    regex: str = ""
    labels: LabelSelector | None = None

    def describe(self) -> str:
        if self.exact:
            return f"{self.kind} {self.exact!r}"
        if self.regex:
            return f"nodes matching /{self.regex}/"
        return "nodes with the labels selected"


@dataclass(slots=True, frozen=True)
class HyperNodeRecord:
    name: str
    tier: int
    tier_name: str
    members: tuple[Member, ...]


def _member(value: Any, path: str) -> Member:
    if not isinstance(value, Mapping):
        raise InputError("expected a mapping", field=path)
    kind = value.get("type")
    if kind not in (NODE, HYPERNODE):
        raise InputError(f"expected Node or HyperNode, got {shown(kind)}", field=f"{path}.type")
    sel = value.get("selector") or {}
    if not isinstance(sel, Mapping):
        raise InputError("expected a mapping", field=f"{path}.selector")
    given = [k for k in ("exactMatch", "regexMatch", "labelMatch") if sel.get(k) is not None]
    if len(given) != 1:
        raise InputError(
            "needs exactly one of exactMatch, regexMatch, labelMatch"
            + (f" (has {', '.join(given)})" if given else ""),
            field=f"{path}.selector",
        )
    which = given[0]
    where = f"{path}.selector.{which}"
    body = sel[which]
    if kind == HYPERNODE and which != "exactMatch":
        raise InputError("a HyperNode member is named by exactMatch only", field=where)
    if which == "labelMatch":
        labels = parse_label_selector(body, where)
        if labels is None or labels.empty():
            raise InputError("selects nothing: give matchLabels or matchExpressions", field=where)
        return Member(kind, labels=labels)
    if not isinstance(body, Mapping):
        raise InputError("expected a mapping", field=where)
    key = "name" if which == "exactMatch" else "pattern"
    text = body.get(key)
    if not isinstance(text, str) or not text:
        raise InputError("is required (a non-empty string)", field=f"{where}.{key}")
    if which == "regexMatch":
        try:
            _compile(text)
        except re2.error as err:
            said = err.args[0] if err.args else ""
            said = said.decode(errors="replace") if isinstance(said, bytes) else str(said)
            raise InputError(
                f"not a valid regular expression: {shown(said)}", field=f"{where}.{key}"
            ) from None
        return Member(kind, regex=text)
    return Member(kind, exact=text)


def parse_hypernode(obj: Mapping[str, Any]) -> HyperNodeRecord:
    """A HyperNode dict -> record; errors name the field."""
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise InputError("is required", field="metadata.name")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InputError("expected a mapping", field="spec")
    tier = spec.get("tier", 0)
    if isinstance(tier, bool) or not isinstance(tier, int):
        raise InputError(f"expected an integer, got {shown(tier)}", field="spec.tier")
    if tier < 0:
        raise InputError("must not be negative", field="spec.tier")
    if tier > MAX_TIER:
        raise InputError(f"must be at most {MAX_TIER}, got {tier}", field="spec.tier")
    tier_name = spec.get("tierName") or ""
    if not isinstance(tier_name, str):
        raise InputError("expected a string", field="spec.tierName")
    members = spec.get("members") or []
    if not isinstance(members, list):
        raise InputError("expected a list", field="spec.members")
    if not members:
        raise InputError("a HyperNode needs at least one member", field="spec.members")
    return HyperNodeRecord(
        name=meta["name"],
        tier=tier,
        tier_name=tier_name,
        members=tuple(_member(m, f"spec.members[{i}]") for i, m in enumerate(members)),
    )


@dataclass(slots=True)
class HyperNode:
    """One HyperNode in the tree: its place and every node below it, by name."""

    name: str
    tier: int
    tier_name: str = ""
    parent: str = ""
    children: list[str] = field(default_factory=list)
    #: Every node below (its own node members and its children's), by name; only
    #: nodes that exist.
    nodes: frozenset[str] = frozenset()


@dataclass(slots=True)
class NodeFacts:
    """What member selectors read of a node."""

    name: str
    labels: Mapping[str, str]


class Topology:
    """The HyperNode tree of a snapshot, joined under :data:`CLUSTER`.

    ``hypernodes`` includes the virtual root. ``tiers`` are every tier present, root's
    included, ascending (Volcano's ``HyperNodesTiers``). Node rows for a session's node
    table are asked through :meth:`rows`; they are computed once per table layout.
    """

    __slots__ = ("_ancestors", "_rows", "by_tier", "hypernodes", "notes", "tier_names", "tiers")

    def __init__(self, hypernodes: dict[str, HyperNode], notes: list[str]) -> None:
        self.hypernodes = hypernodes
        self.notes = notes
        by_tier: dict[int, list[str]] = {}
        for hn in hypernodes.values():
            by_tier.setdefault(hn.tier, []).append(hn.name)
        self.by_tier = {t: sorted(by_tier[t]) for t in sorted(by_tier)}
        self.tiers = list(self.by_tier)
        self.tier_names: dict[str, int] = {}
        for hn in sorted(hypernodes.values(), key=lambda h: h.name):
            if hn.tier_name:
                self.tier_names.setdefault(hn.tier_name, hn.tier)
        self._ancestors: dict[str, list[str]] = {}
        self._rows: tuple[object, dict[str, np.ndarray], np.ndarray] | None = None

    @property
    def root(self) -> HyperNode:
        return self.hypernodes[CLUSTER]

    def real(self) -> list[HyperNode]:
        """Every HyperNode but the virtual root, by name."""
        return [h for n, h in sorted(self.hypernodes.items()) if n != CLUSTER]

    def ancestors(self, name: str) -> list[str]:
        """``name`` and every HyperNode above it, nearest first, the root last."""
        got = self._ancestors.get(name)
        if got is None:
            got = []
            cur = name
            while cur:
                got.append(cur)
                cur = self.hypernodes[cur].parent if cur in self.hypernodes else ""
            self._ancestors[name] = got
        return got

    def lca(self, a: str, b: str) -> str:
        """The lowest HyperNode holding both (either may be "": the other is the answer)."""
        if not a:
            return b
        if not b:
            return a
        above = set(self.ancestors(a))
        for name in self.ancestors(b):
            if name in above:
                return name
        return CLUSTER

    def tier_of(self, name: str) -> int:
        return self.hypernodes[name].tier

    def subtree(self, name: str) -> list[HyperNode]:
        """``name`` and its descendants, breadth first (children in name order)."""
        out: list[HyperNode] = []
        todo = [name]
        seen = {name}
        while todo:
            cur = self.hypernodes[todo.pop(0)]
            out.append(cur)
            for child in cur.children:
                if child not in seen:
                    seen.add(child)
                    todo.append(child)
        return out

    def rows(self, names: Sequence[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """For a node table whose row ``i`` is node ``names[i]``: each HyperNode's rows
        (sorted), and each row's lowest-tier HyperNode (Volcano's
        ``FindHyperNodeForNode``: among those of the lowest tier present; "" when the
        node is in none of them)."""
        cached = self._rows
        if cached is not None and cached[0] is names:
            return cached[1], cached[2]
        index = {n: i for i, n in enumerate(names)}
        rows: dict[str, np.ndarray] = {}
        for name, hn in self.hypernodes.items():
            if name == CLUSTER:
                rows[name] = np.arange(len(names), dtype=np.intp)
            else:
                ix = [index[n] for n in hn.nodes if n in index]
                rows[name] = np.array(sorted(ix), dtype=np.intp)
        leaf = np.full(len(names), "", dtype=object)
        lowest = self.tiers[0] if self.tiers else None
        if lowest is not None:
            for name in reversed(self.by_tier[lowest]):  # the first by name wins
                leaf[rows[name]] = name
        self._rows = (names, rows, leaf)
        return rows, leaf

    def span(self, node_names: Iterable[str]) -> str:
        """The lowest HyperNode holding every node of ``node_names`` ("" for none)."""
        out = ""
        for n in node_names:
            out = self.lca(out, self.home(n))
        return out

    def home(self, node: str) -> str:
        """The lowest-tier HyperNode holding ``node`` (the root if none does)."""
        best: HyperNode | None = None
        for hn in self.hypernodes.values():
            if node in hn.nodes and (best is None or (hn.tier, hn.name) < (best.tier, best.name)):
                best = hn
        return best.name if best is not None else CLUSTER


_QUIET = re2.Options()
_QUIET.log_errors = False  # (RE2 would print its own line on stderr for a bad pattern)


def _compile(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (see the module's docstring); ``re2.error`` if RE2
    refuses it."""
    return re2.compile(pattern, _QUIET)


def _matches(member: Member, nodes: Sequence[NodeFacts]) -> set[str]:
    if member.exact:
        return {member.exact}
    if member.regex:
        pattern = _compile(member.regex)
        return {n.name for n in nodes if pattern.search(n.name)}
    assert member.labels is not None
    return {n.name for n in nodes if member.labels.matches(n.labels)}


def _some(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} and {len(names) - limit} more"


def _count(names: list[str], what: str) -> str:
    return f"1 {what} is" if len(names) == 1 else f"{len(names)} {what}s are"


def build_topology(
    records: Sequence[HyperNodeRecord],
    nodes: Sequence[NodeFacts],
    *,
    on_bad: Callable[[str, str], None] | None = None,
) -> Topology | None:
    """The tree of ``records`` over ``nodes``; None when there are no HyperNodes.

    A cycle of HyperNode members, or a HyperNode claimed as member by two parents,
    makes the tree lie about the network: it is an :class:`InputError` naming the
    HyperNode and field, or, with ``on_bad(object, message)`` (a running scheduler),
    reported there and repaired (a cycle's HyperNodes left out; a second parent's
    claim ignored, the first parent by name keeping the child). Members that name
    nothing, a child whose tier is not below its parent's and nodes in no HyperNode
    become notes.
    """
    if not records:
        return None
    notes: list[str] = []
    by_name = {r.name: r for r in records}
    existing = {n.name for n in nodes}

    def bad(name: str, message: str, path: str) -> None:
        if on_bad is None:
            raise InputError(message, obj=f"HyperNode {name}", field=path)
        on_bad(f"HyperNode {name}", f"{message} (field {path})")

    # Parents: every HyperNode member names its child; one parent each.
    parent: dict[str, str] = {}
    claims: dict[str, str] = {}
    for rec in sorted(records, key=lambda r: r.name):
        for i, m in enumerate(rec.members):
            if m.kind != HYPERNODE:
                continue
            path = f"spec.members[{i}].selector.exactMatch.name"
            child = m.exact
            if child not in by_name:
                notes.append(
                    f"HyperNode {rec.name} names HyperNode {child!r} as a member, which "
                    f"does not exist; it adds no nodes"
                )
                continue
            if child == rec.name:
                bad(rec.name, "a HyperNode cannot be its own member", path)
                continue
            if child in parent and parent[child] != rec.name:
                bad(
                    rec.name,
                    f"HyperNode {child} is already a member of HyperNode {parent[child]}; "
                    f"a HyperNode has one parent",
                    path,
                )
                continue
            parent[child] = rec.name
            claims[child] = path
            if by_name[child].tier >= rec.tier:
                notes.append(
                    f"HyperNode {rec.name} (tier {rec.tier}) holds HyperNode {child} of tier "
                    f"{by_name[child].tier}: a member's tier should be below its parent's"
                )

    # Cycles: follow parents from each HyperNode.
    dropped: set[str] = set()
    for start in sorted(by_name):
        path_seen: list[str] = []
        cur = start
        while cur in parent and cur not in dropped:
            if cur in path_seen:
                loop = path_seen[path_seen.index(cur) :]
                shown = " -> ".join([*loop, cur])
                first = min(loop)
                bad(
                    parent[first],
                    f"HyperNode members form a cycle: {shown}",
                    claims[first],
                )
                dropped.update(loop)
                break
            path_seen.append(cur)
            cur = parent[cur]

    hypernodes: dict[str, HyperNode] = {}
    for rec in by_name.values():
        if rec.name in dropped:
            continue
        hypernodes[rec.name] = HyperNode(rec.name, rec.tier, rec.tier_name)
    for child, up in parent.items():
        if child in hypernodes and up in hypernodes:
            hypernodes[child].parent = up
            hypernodes[up].children.append(child)
    for hn in hypernodes.values():
        hn.children.sort()

    # Nodes: own members, then children's, bottom up.
    own: dict[str, set[str]] = {}
    unknown: dict[str, list[str]] = {}
    for rec in by_name.values():
        if rec.name in dropped:
            continue
        got: set[str] = set()
        for m in rec.members:
            if m.kind != NODE:
                continue
            found = _matches(m, nodes) & existing if not m.exact else {m.exact} & existing
            if not found:
                unknown.setdefault(rec.name, []).append(m.describe())
            got |= found
        own[rec.name] = got
    for name, what in sorted(unknown.items()):
        notes.append(
            f"HyperNode {name}: {', '.join(what)} {'matches' if len(what) == 1 else 'match'} "
            f"no node"
        )

    done: dict[str, frozenset[str]] = {}

    def below(name: str) -> frozenset[str]:
        got = done.get(name)
        if got is None:
            acc = set(own.get(name, ()))
            for child in hypernodes[name].children:
                acc |= below(child)
            got = done[name] = frozenset(acc)
        return got

    for name in hypernodes:
        hypernodes[name].nodes = below(name)

    top = max((h.tier for h in hypernodes.values()), default=0)
    root = HyperNode(CLUSTER, max(top + 1, 1), nodes=frozenset(existing))
    root.children = sorted(n for n, h in hypernodes.items() if not h.parent)
    for name in root.children:
        hypernodes[name].parent = CLUSTER
    hypernodes[CLUSTER] = root

    real = [h for h in hypernodes.values() if h.name != CLUSTER]
    covered: set[str] = set()
    for h in real:
        covered |= h.nodes
    outside = sorted(existing - covered)
    if outside:
        notes.append(
            f"{_count(outside, 'node')} in no HyperNode ({_some(outside)}): a job with a "
            f"network-topology constraint can use them only through the whole cluster"
        )
    for tier in sorted({h.tier for h in real}):
        seen: dict[str, str] = {}
        twice: dict[str, tuple[str, str]] = {}
        for h in sorted((h for h in real if h.tier == tier), key=lambda h: h.name):
            for n in sorted(h.nodes):
                if n in seen and n not in twice:
                    twice[n] = (seen[n], h.name)
                seen.setdefault(n, h.name)
        if twice:
            n, (a, b) = next(iter(sorted(twice.items())))
            notes.append(
                f"{_count(list(twice), 'node')} in two HyperNodes of tier {tier} (node {n} in "
                f"{a} and {b}): the tree does not say which switch it is on; pumice takes "
                f"the first by name"
            )
    return Topology(hypernodes, notes)


__all__ = [
    "CLUSTER",
    "HyperNode",
    "HyperNodeRecord",
    "Member",
    "NodeFacts",
    "Topology",
    "build_topology",
    "parse_hypernode",
]
