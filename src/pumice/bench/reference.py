"""A per-node reference for the allocate choice: fit, predicates and scores, one node at
a time in plain Python, written from the Kubernetes / Volcano rules and not from the
vectorized code.

It exists to check the fast path (:mod:`pumice.framework.fastpath`) and the vectorized
plugins: for any session state and task, :func:`choose` must pick the same node (the
first, in name order, of the best-scored candidates) and the same mode (allocate when
the task fits the idle resources of some candidate, pipeline otherwise). The property
test ``tests/properties/test_fast_path_equivalence.py`` runs whole cycles with the
reference in place of the fast path and compares the decisions.

It covers the default predicates (hard pod topology spread constraints included),
nodeorder and binpack plugins; a session with other
``predicate`` or ``node_order`` functions is outside its scope (:func:`supported`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pumice.api.node import NodeTable
from pumice.api.spread import SpreadConstraint
from pumice.api.task import Placement, SelectorTerm, Taint, TaskInfo, TaskStatus, Toleration
from pumice.framework.session import Session
from pumice.plugins.binpack import BinpackPlugin
from pumice.plugins.nodeorder import NodeOrderPlugin

MAX = 100.0
HARD = ("NoSchedule", "NoExecute")
UNSCHEDULABLE = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


def supported(ssn: Session) -> bool:
    """Only the default predicates / nodeorder / binpack functions are modelled, and
    neither inter-pod (anti-)affinity nor what pods attach (volumes, devices)."""
    preds = [n for tier in ssn.hooks.chain("predicate") for n, _ in tier]
    scorers = [n for tier in ssn.hooks.chain("node_order") for n, _ in tier]
    if not (set(preds) <= {"predicates"} and set(scorers) <= {"nodeorder", "binpack"}):
        return False
    tasks = [t for job in ssn.jobs.values() for t in job.tasks.values()]
    tasks += [t for on_node in ssn.nodes.tasks for t in on_node.values()]
    return all(getattr(t, "pod_affinity", None) is None and not t.attaches for t in tasks)


# -- predicates ----------------------------------------------------------------------


def _tolerated(taint: Taint, tolerations: Sequence[Toleration]) -> bool:
    for t in tolerations:
        if t.effect and t.effect != taint.effect:
            continue
        if not t.key:
            if t.operator == "Exists":
                return True
            continue
        if t.key == taint.key and (t.operator == "Exists" or t.value == taint.value):
            return True
    return False


def _term_matches(term: SelectorTerm, name: str, labels: dict[str, str]) -> bool:
    if not term.requirements:
        return False
    for r in term.requirements:
        if r.field:
            present, value = True, name
        else:
            present, value = r.key in labels, labels.get(r.key, "")
        op = r.operator
        if op == "Exists":
            ok = present
        elif op == "DoesNotExist":
            ok = not present
        elif op == "In":
            ok = present and value in r.values
        elif op == "NotIn":
            ok = not (present and value in r.values)
        else:  # Gt / Lt
            try:
                v = int(value) if present else None
            except ValueError:
                v = None
            bound = int(r.values[0])
            ok = v is not None and (v > bound if op == "Gt" else v < bound)
        if not ok:
            return False
    return True


def allowed(nodes: NodeTable, i: int, task: TaskInfo) -> bool:
    """The predicates plugin's verdict for node ``i``."""
    spec = nodes.specs[i]
    p: Placement = task.placement
    if not spec.ready:
        return False
    if spec.unschedulable and not _tolerated(UNSCHEDULABLE, p.tolerations):
        return False
    for taint in spec.taints:
        if taint.effect in HARD and not _tolerated(taint, p.tolerations):
            return False
    for key, value in p.node_selector:
        if spec.labels.get(key) != value:
            return False
    if p.required_terms is not None and not any(
        _term_matches(t, spec.name, spec.labels) for t in p.required_terms
    ):
        return False
    return all(nodes.ports.get(port, {}).get(i, 0) <= 0 for port in task.host_ports)


def _spread_matching(nodes: NodeTable, i: int, c: SpreadConstraint, namespace: str) -> int:
    """The pods on node ``i`` that constraint ``c``'s selector counts: in ``namespace``,
    not terminating (Kubernetes' ``countPodsMatchSelector``)."""
    return sum(
        1
        for t in nodes.tasks[i].values()
        if t.status != TaskStatus.RELEASING
        and t.namespace == namespace
        and c.selector is not None
        and c.selector.matches(t.labels)
    )


def spread_allowed(nodes: NodeTable, task: TaskInfo) -> list[bool]:
    """Kubernetes' PodTopologySpread PreFilter and Filter for the task's hard
    (``DoNotSchedule``) constraints, node by node (Volcano 1.7's feature gates: node
    affinity honoured, taints ignored, no ``minDomains``)."""
    hard = [c for c in task.spread if not c.soft]
    n = len(nodes)
    if not hard:
        return [True] * n
    p = task.placement
    labels = [nodes.specs[i].labels for i in range(n)]

    def matching(i: int, c: SpreadConstraint) -> int:
        return _spread_matching(nodes, i, c, task.namespace)

    # PreFilter: TpPairToMatchNum over the nodes passing node affinity with every key.
    pairs: dict[tuple[str, str], int] = {}
    for i in range(n):
        spec = nodes.specs[i]
        if any(spec.labels.get(key) != value for key, value in p.node_selector):
            continue
        if p.required_terms is not None and not any(
            _term_matches(t, spec.name, spec.labels) for t in p.required_terms
        ):
            continue
        if any(c.topology_key not in labels[i] for c in hard):
            continue
        for c in hard:
            pair = (c.topology_key, labels[i][c.topology_key])
            pairs[pair] = pairs.get(pair, 0) + matching(i, c)
    lowest = {c.topology_key: 2**31 - 1 for c in hard}
    for (key, _value), num in pairs.items():
        lowest[key] = min(lowest[key], num)
    # Filter, node by node.
    out = []
    for i in range(n):
        ok = True
        for c in hard:
            value = labels[i].get(c.topology_key)
            if value is None:
                ok = False
                break
            own = 1 if c.selector is not None and c.selector.matches(task.labels) else 0
            num = pairs.get((c.topology_key, value), 0)
            if num + own - lowest[c.topology_key] > c.max_skew:
                ok = False
                break
        out.append(ok)
    return out


# -- fit -----------------------------------------------------------------------------


def fits(req: Sequence[float], avail: Sequence[float]) -> bool:
    return all(avail[d] >= r for d, r in enumerate(req) if r != 0)


# -- scores --------------------------------------------------------------------------


def _least(req: list[float], cap: list[float]) -> float:
    total, n = 0.0, 0
    for r, c in zip(req, cap, strict=True):
        if c > 0:
            total += 0.0 if r > c else math.floor((c - r) * MAX / c)
            n += 1
    return float(math.floor(total / n)) if n else 0.0


def _most(req: list[float], cap: list[float]) -> float:
    total, n = 0.0, 0
    for r, c in zip(req, cap, strict=True):
        if c > 0:
            total += math.floor(min(r, c) * MAX / c)
            n += 1
    return float(math.floor(total / n)) if n else 0.0


def _balanced(req: list[float], cap: list[float]) -> float:
    fr = [min(r / c, 1.0) for r, c in zip(req, cap, strict=True) if c > 0]
    if len(fr) < 2:
        return MAX
    if len(fr) == 2:
        std = abs(fr[0] - fr[1]) / 2
    else:
        mean = sum(fr) / len(fr)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fr) / len(fr))
    return float(math.trunc((1 - std) * MAX))


def _soft_untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> int:
    soft = [t for t in tolerations if t.effect in ("", "PreferNoSchedule")]
    return sum(1 for t in taints if t.effect == "PreferNoSchedule" and not _tolerated(t, soft))


def nodeorder_scores(
    ssn: Session, weights: dict[str, int], task: TaskInfo, cand: list[int]
) -> list[float]:
    nodes, space = ssn.nodes, ssn.space
    cpu, mem = space.index["cpu"], space.index["memory"]
    bal = [space.index[r] for r in ("cpu", "memory", "nvidia.com/gpu") if r in space.index]
    # (an extended resource counts only for a task that requests it, as in Kubernetes)
    bal = [d for d in bal if d in (cpu, mem) or task.init_resreq[d] > 0]
    w = weights
    p = task.placement
    counts = [_soft_untolerated(nodes.specs[i].taints, p.tolerations) for i in cand]
    top = max(counts) if counts else 0
    out = []
    for k, i in enumerate(cand):
        alloc = nodes.allocatable[i].tolist()
        total = 0.0
        if w["leastrequested.weight"] or w["mostrequested.weight"]:
            nz = nodes.nonzero[i].tolist()
            assert task.nonzero is not None  # (every parsed task has its nonzero requests)
            req = [nz[0] + float(task.nonzero[0]), nz[1] + float(task.nonzero[1])]
            cap = [alloc[cpu], alloc[mem]]
            if w["leastrequested.weight"]:
                total += _least(req, cap) * w["leastrequested.weight"]
            if w["mostrequested.weight"]:
                total += _most(req, cap) * w["mostrequested.weight"]
        if w["balancedresource.weight"]:
            used, pipe = nodes.used[i].tolist(), nodes.pipelined[i].tolist()
            req = [used[d] + pipe[d] + float(task.resreq[d]) for d in bal]
            total += _balanced(req, [alloc[d] for d in bal]) * w["balancedresource.weight"]
        if w["nodeaffinity.weight"] and p.preferred_terms:
            spec = nodes.specs[i]
            pref = 0.0
            for weight, term in p.preferred_terms:
                pref += float(weight) if _term_matches(term, spec.name, spec.labels) else 0.0
            total += pref * w["nodeaffinity.weight"]
        if w["tainttoleration.weight"]:
            norm = MAX if top == 0 else MAX - math.floor(MAX * counts[k] / top)
            total += norm * w["tainttoleration.weight"]
        out.append(total)
    soft = [c for c in task.spread if c.soft]
    if w["podtopologyspread.weight"] and soft:
        spread = _spread_scores(nodes, task, soft, cand)
        out = [t + s * w["podtopologyspread.weight"] for t, s in zip(out, spread, strict=True)]
    return out


def _spread_scores(nodes: NodeTable, task: TaskInfo, soft: list, cand: list[int]) -> list[float]:
    """Kubernetes' PodTopologySpread PreScore, Score and NormalizeScore (soft
    constraints; Volcano 1.7's feature gates: no node inclusion policies), node by node."""
    keys = [c.topology_key for c in soft]
    labels = [nodes.specs[i].labels for i in range(len(nodes))]
    ignored = {i for i in cand if any(k not in labels[i] for k in keys)}
    pairs: dict[tuple[str, str], int] = {}
    size = [0] * len(soft)
    for i in cand:
        if i in ignored:
            continue
        for k, c in enumerate(soft):
            if c.topology_key == "kubernetes.io/hostname":
                continue
            pair = (c.topology_key, labels[i][c.topology_key])
            if pair not in pairs:
                pairs[pair] = 0
                size[k] += 1
    weights = [
        math.log((len(cand) - len(ignored) if c.topology_key == "kubernetes.io/hostname"
                  else size[k]) + 2)
        for k, c in enumerate(soft)
    ]  # fmt: skip

    def matching(i: int, c: SpreadConstraint) -> int:
        return _spread_matching(nodes, i, c, task.namespace)

    p = task.placement
    for i in range(len(nodes)):
        spec = nodes.specs[i]
        if any(spec.labels.get(key) != value for key, value in p.node_selector):
            continue
        if p.required_terms is not None and not any(
            _term_matches(t, spec.name, spec.labels) for t in p.required_terms
        ):
            continue
        if any(k not in labels[i] for k in keys):
            continue
        for c in soft:
            pair = (c.topology_key, labels[i][c.topology_key])
            if pair in pairs:
                pairs[pair] += matching(i, c)
    raw: dict[int, int] = {}
    for i in cand:
        if i in ignored:
            continue
        score = 0.0
        for k, c in enumerate(soft):
            if c.topology_key == "kubernetes.io/hostname":
                cnt = matching(i, c)
            else:
                cnt = pairs[(c.topology_key, labels[i][c.topology_key])]
            score += float(cnt) * weights[k] + float(c.max_skew - 1)
        raw[i] = math.floor(score + 0.5)  # Go's math.Round, for score >= 0
    if not raw:
        return [0.0] * len(cand)
    low, high = min(raw.values()), max(raw.values())
    out = []
    for i in cand:
        if i in ignored:
            out.append(0.0)
        elif high == 0:
            out.append(MAX)
        else:
            out.append(float(100 * (high + low - raw[i]) // high))
    return out


def binpack_scores(
    ssn: Session, plugin: BinpackPlugin, task: TaskInfo, cand: list[int]
) -> list[float]:
    space, nodes = ssn.space, ssn.nodes
    weight = {d: 0.0 for d in range(space.size)}
    for name, wt in plugin.resource_weights.items():
        if name in space.index:
            weight[space.index[name]] = float(wt)
    for d, name in enumerate(space.names):
        if name == "pods" or not space.share[d]:
            weight[d] = 0.0
    factor = MAX * plugin.weight
    dims = [d for d in range(space.size) if task.resreq[d] > 0 and weight[d] > 0]
    out = []
    for i in cand:
        if not dims or factor == 0:
            out.append(0.0)
            continue
        per, wsum, overflow = 0.0, 0.0, False
        for d in dims:
            alloc = float(nodes.allocatable[i, d])
            final = float(nodes.used[i, d]) + float(task.resreq[d])
            wsum += weight[d]
            if alloc > 0:
                per += final * weight[d] / alloc
                overflow = overflow or final > alloc
        out.append(0.0 if overflow else per / wsum * factor)
    return out


def choose(ssn: Session, task: TaskInfo) -> tuple[int, bool] | None:
    """(node row, fits now) as allocate decides for ``task``; None when no node can
    take it."""
    nodes = ssn.nodes
    feasible, now = [], []
    spread = spread_allowed(nodes, task)
    for i in range(len(nodes)):
        if not allowed(nodes, i, task) or not spread[i]:
            continue
        idle = nodes.idle[i].tolist()
        future = [
            a + r - p
            for a, r, p in zip(
                idle, nodes.releasing[i].tolist(), nodes.pipelined[i].tolist(), strict=True
            )
        ]
        # A releasing pod still holds its pod slot (Volcano counts every pod on the node).
        pods = ssn.space.index["pods"]
        future[pods] = idle[pods] - float(nodes.pipelined[i, pods])
        req = task.init_resreq.tolist()
        if fits(req, future):
            feasible.append(i)
            if fits(req, idle):
                now.append(i)
    if not feasible:
        return None
    cand = now or feasible
    plugins = {p.name: p for p in ssn.plugins}
    total: list[float] | None = None
    for tier in ssn.hooks.chain("node_order"):
        for name, _fn in tier:
            plugin = plugins[name]
            if isinstance(plugin, NodeOrderPlugin):
                s = nodeorder_scores(ssn, plugin.weights, task, cand)
            else:
                assert isinstance(plugin, BinpackPlugin)  # (the reference knows only these)
                s = binpack_scores(ssn, plugin, task, cand)
            total = s if total is None else [a + b for a, b in zip(total, s, strict=True)]
    if total is None:
        return cand[0], bool(now)
    best = max(range(len(cand)), key=lambda k: (total[k], -k))
    return cand[best], bool(now)
