"""nodeorder: Kubernetes' node scores, weighted as Volcano's nodeorder plugin does.

Scores over the candidate nodes, each 0-100 then multiplied by its weight:
least requested (cpu, memory), most requested (off by default), balanced allocation
(cpu, memory, and nvidia.com/gpu for a task that requests it: Kubernetes leaves out an
extended resource the pod does not ask for), preferred node affinity (the raw sum of
matching term weights, not normalized, as in Volcano), taint toleration
(PreferNoSchedule taints not tolerated, normalized over the candidates) and pod topology
spread (the soft constraints, ``whenUnsatisfiable: ScheduleAnyway``, normalized over the
candidates: see :class:`SpreadScore`). Integer arithmetic follows Kubernetes' (scores are
truncated), so that ties fall where Volcano's fall.

Argument keys are Volcano's: ``leastrequested.weight`` (1), ``mostrequested.weight`` (0),
``balancedresource.weight`` (1), ``nodeaffinity.weight`` (2), ``tainttoleration.weight``
(3), ``podtopologyspread.weight`` (2); ``podaffinity.weight`` and
``imagelocality.weight`` are accepted and have nothing to score in pumice's model.
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np

from pumice.api.node import NodeTable
from pumice.api.spread import SpreadCounts
from pumice.api.task import Placement, TaskInfo, Toleration
from pumice.conf.arguments import Arguments
from pumice.framework.session import Session
from pumice.framework.verdicts import timeless

MAX_SCORE = 100.0
BALANCED_RESOURCES = ("cpu", "memory", "nvidia.com/gpu")
#: Kubernetes counts the pods of a hostname-keyed constraint on the node itself.
HOSTNAME = "kubernetes.io/hostname"

WEIGHT_KEYS = {
    "leastrequested.weight": 1,
    "mostrequested.weight": 0,
    "balancedresource.weight": 1,
    "nodeaffinity.weight": 2,
    "tainttoleration.weight": 3,
    "podaffinity.weight": 2,
    "imagelocality.weight": 1,
    "podtopologyspread.weight": 2,
}


def least_requested(requested: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Per node, the cpu/memory average of (capacity - requested) * 100 / capacity."""
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(
            requested > capacity, 0.0, np.floor((capacity - requested) * MAX_SCORE / capacity)
        )
    valid = capacity > 0
    per = np.where(valid, per, 0.0)
    weights = valid.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(weights > 0, np.floor(per.sum(axis=1) / np.maximum(weights, 1)), 0.0)


def most_requested(requested: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.floor(np.minimum(requested, capacity) * MAX_SCORE / capacity)
    valid = capacity > 0
    per = np.where(valid, per, 0.0)
    weights = valid.sum(axis=1)
    return np.where(weights > 0, np.floor(per.sum(axis=1) / np.maximum(weights, 1)), 0.0)


def balanced(requested: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """(1 - standard deviation of the requested fractions) * 100, truncated."""
    valid = capacity > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(valid, np.minimum(requested / capacity, 1.0), 0.0)
    count = valid.sum(axis=1)
    mean = np.where(count > 0, frac.sum(axis=1) / np.maximum(count, 1), 0.0)
    var = np.where(valid, (frac - mean[:, None]) ** 2, 0.0).sum(axis=1) / np.maximum(count, 1)
    std = np.sqrt(var)
    if frac.shape[1] >= 2:
        # Kubernetes' two-resource shortcut: |f1 - f2| / 2 (equal to the std).
        two = count == 2
        if two.any():
            f = np.where(valid, frac, np.nan)
            pair = np.sort(np.nan_to_num(f, nan=-1.0), axis=1)[:, -2:]
            std = np.where(two, np.abs(pair[:, 1] - pair[:, 0]) / 2, std)
    std = np.where(count >= 2, std, 0.0)
    return np.trunc((1 - std) * MAX_SCORE)


def least_requested_one(requested: list[float], capacity: list[float]) -> float:
    """:func:`least_requested` for one node, in plain floats (same arithmetic, same
    order of operations, so the same result to the last bit)."""
    total, weights = 0.0, 0
    for r, c in zip(requested, capacity, strict=True):
        if c > 0:
            total += 0.0 if r > c else math.floor((c - r) * MAX_SCORE / c)
            weights += 1
    return float(math.floor(total / weights)) if weights else 0.0


def most_requested_one(requested: list[float], capacity: list[float]) -> float:
    total, weights = 0.0, 0
    for r, c in zip(requested, capacity, strict=True):
        if c > 0:
            total += math.floor(min(r, c) * MAX_SCORE / c)
            weights += 1
    return float(math.floor(total / weights)) if weights else 0.0


def balanced_one(requested: list[float], capacity: list[float]) -> float:
    """:func:`balanced` for one node, in plain floats (same operations in the same
    order; the dimensions without capacity only ever add 0.0 there)."""
    fracs = []
    for r, c in zip(requested, capacity, strict=True):
        if c > 0:
            f = r / c
            fracs.append(f if f < 1.0 else 1.0)
    count = len(fracs)
    if count < 2:
        return MAX_SCORE
    if count == 2:
        std = abs(fracs[1] - fracs[0]) / 2
    else:
        total = 0.0
        for f in fracs:
            total += f
        mean = total / count
        var = 0.0
        for f in fracs:
            var += (f - mean) * (f - mean)  # numpy squares as x * x
        std = math.sqrt(var / count)
    return float(math.trunc((1 - std) * MAX_SCORE))


class SpreadScore:
    """Kubernetes' PodTopologySpread score (the scoring half, soft constraints only),
    as Volcano 1.7's nodeorder runs it, over all candidates at once.

    For a task with soft constraints and candidate nodes ``cand``: a candidate without
    every constraint's topology key scores 0. For each constraint, the pods matching its
    selector in the task's namespace (not terminating) are counted per domain (nodes
    sharing the key's value), over the session's nodes that match the task's
    nodeSelector and required node affinity and have every key, domains of the
    candidates only; for ``kubernetes.io/hostname`` on the node alone. A node's raw score
    is the sum over constraints of ``count * log(domains + 2) + maxSkew - 1`` (domains:
    the candidates' distinct values of the key, or their number for hostname), rounded;
    then ``100 * (max + min - raw) / max`` over the candidates (100 each when max is 0),
    so the emptiest domain gets 100.

    Counts per (namespace, selector) are kept per node and brought up to date from the
    node table's change log, so a placement costs a recount of its node only. The score
    of one node depends on the others (its domain's count, the normalization), so
    allocate's fast path is not used for such tasks (see
    :mod:`pumice.framework.fastpath`).
    """

    __slots__ = ("_soft", "counts", "nodes")

    def __init__(self, nodes: NodeTable) -> None:
        self.nodes = nodes
        #: Domains, eligible nodes and matching pods per node, as the hard-spread
        #: predicate counts them.
        self.counts = SpreadCounts(nodes)
        self._soft: dict[tuple, tuple] = {}

    def soft(self, task: TaskInfo) -> tuple:
        """The task's ``ScheduleAnyway`` constraints."""
        got = self._soft.get(task.spread)
        if got is None:
            got = self._soft[task.spread] = tuple(c for c in task.spread if c.soft)
        return got

    def __call__(self, task: TaskInfo, cand: np.ndarray) -> np.ndarray:
        """The normalized score (0-100, before the weight) of each candidate."""
        soft = self.soft(task)
        if cand.dtype == bool:
            cand = np.flatnonzero(cand)
        if not soft or cand.size == 0:
            return np.full(cand.size, MAX_SCORE)
        labels = self.nodes.labels
        every = np.ones(labels.n, dtype=bool)
        for c in soft:
            every &= labels.column(c.topology_key)[1]
        ok = every[cand]
        counted = every & self.counts.eligible(task.placement)
        raw = np.zeros(cand.size, dtype=np.float64)
        for c in soft:
            pods = self.counts.pods(task.namespace, c.selector)
            if c.topology_key == HOSTNAME:
                domains = int(np.count_nonzero(ok))
                count = pods[cand]
            else:
                codes, k = self.counts.domains(c.topology_key)
                seen = np.zeros(k, dtype=bool)
                seen[codes[cand[ok]]] = True
                domains = int(np.count_nonzero(seen))
                # (at least one slot: with no node carrying the key there is nothing to
                # index, every candidate scoring 0 through ``ok``)
                sums = np.bincount(codes[counted], weights=pods[counted], minlength=max(k, 1))
                count = np.where(ok, sums[np.maximum(codes[cand], 0)], 0.0)
            raw = raw + (count * math.log(domains + 2) + float(c.max_skew - 1))
        floor = np.floor(raw)
        rounded = np.where(raw - floor >= 0.5, floor + 1.0, floor)  # Go's math.Round
        out = np.zeros(cand.size, dtype=np.float64)
        if not ok.any():
            return out
        scored = rounded[ok].astype(np.int64)
        low, high = int(scored.min()), int(scored.max())
        if high == 0:
            out[ok] = MAX_SCORE
        else:  # (int64 arithmetic, as Kubernetes')
            out[ok] = (int(MAX_SCORE) * (high + low - scored)) // high
        return out


#: How many entries the score's memos hold before they start afresh (they are keyed by
#: interned requests and placements, so they are few).
_KEPT = 4096


class NodeOrderScore:
    """The ``node_order`` function of one session, in three equivalent forms.

    ``score(task, cand)`` is the hook contract. The other forms serve the allocate fast
    path (:mod:`pumice.framework.fastpath`), which keeps per-node scores of each task
    shape and refreshes only the nodes that changed: the only thing the score takes
    from the candidate set is the taint-toleration normalizer (:meth:`context`); given
    it, :meth:`rows` (vectorized) and :meth:`one` (one node, plain floats) score nodes
    independently, and ``score(task, cand) == rows(task, cand, context(task, cand))``
    for every task without soft topology spread constraints. For a task with some, the
    hook adds :class:`SpreadScore`, which the separable forms leave out: the fast path
    is not used for such tasks. (A task without any gets 100 on every node from
    Kubernetes' plugin, which changes no choice and is left out.)
    """

    __slots__ = (
        "_affinity", "_bal_all", "_bal_base", "_bal_scalar", "_counts", "_cpu", "_floats",
        "_labels", "_mem", "_space", "_spread", "_wts", "nodes", "w",
    )  # fmt: skip

    def __init__(self, ssn: Session, weights: dict[str, int]) -> None:
        self.w = weights
        keys = ("leastrequested", "mostrequested", "balancedresource", "nodeaffinity")
        self._wts = tuple(weights[f"{k}.weight"] for k in (*keys, "tainttoleration"))
        self._space: object = None
        self._labels: object = None
        self.renew(ssn)

    def renew(self, ssn: Session) -> None:
        """Score the nodes of ``ssn``'s cycle (a living session's next one). What
        follows from the resource space (the dimensions, each request's floats) is kept
        while the cycles have the same space, and what follows from the nodes' labels
        and taints (preferred affinity, untolerated taints) while they have the same
        label index (replaced, never changed in place, when a node's labels or taints
        move or nodes come or go)."""
        self.nodes = ssn.nodes
        self._spread = SpreadScore(ssn.nodes) if self.w["podtopologyspread.weight"] else None
        labels = ssn.nodes.labels
        if labels is not self._labels or len(self._affinity) + len(self._counts) > _KEPT:
            self._labels = labels
            self._affinity: dict[Placement, np.ndarray] = {}
            self._counts: dict[tuple[Toleration, ...], tuple[np.ndarray, bool]] = {}
        space = ssn.space
        if space is self._space and len(self._floats) <= _KEPT:
            return
        self._space = space
        self._floats: dict = {}
        self._cpu, self._mem = space.index["cpu"], space.index["memory"]
        bal = [space.index[r] for r in BALANCED_RESOURCES if r in space.index]
        #: The balanced dimensions every task is scored on (cpu, memory), and the
        #: extended ones (nvidia.com/gpu), which count only for a task requesting them.
        self._bal_base = [d for d in bal if space.names[d] in ("cpu", "memory")]
        self._bal_scalar = [d for d in bal if d not in self._bal_base]
        self._bal_all = bal

    def _pref(self, placement: Placement) -> np.ndarray:
        pref = self._affinity.get(placement)
        if pref is None:
            nodes = self.nodes
            pref = np.zeros(len(nodes), dtype=np.float64)
            for weight, term in placement.preferred_terms:
                pref += np.where(nodes.labels.term(term), float(weight), 0.0)
            self._affinity[placement] = pref
        return pref

    def _intolerable(self, tolerations: tuple[Toleration, ...]) -> tuple[np.ndarray, bool]:
        c = self._counts.get(tolerations)
        if c is None:
            counts = self.nodes.labels.intolerable_count(tolerations)
            c = (counts, bool(counts.any()))
            self._counts[tolerations] = c
        return c

    def context(self, task: TaskInfo, cand: np.ndarray) -> float:
        """The largest count of untolerated PreferNoSchedule taints over ``cand``
        (indices or a boolean mask), which normalizes the taint score."""
        if not self.w["tainttoleration.weight"]:
            return 0.0
        counts, any_ = self._intolerable(task.placement.tolerations)
        if not any_:
            return 0.0
        sel = counts[cand]
        return float(sel.max()) if sel.size else 0.0

    def __call__(self, task: TaskInfo, cand: np.ndarray) -> np.ndarray:
        total = self.rows(task, cand, self.context(task, cand))
        spread = self._spread
        if spread is not None and task.spread and spread.soft(task):
            total += spread(task, cand) * self.w["podtopologyspread.weight"]
        return total

    def rows(self, task: TaskInfo, cand: np.ndarray, top: float) -> np.ndarray:
        nodes, w = self.nodes, self.w
        cpu, mem = self._cpu, self._mem
        total = np.zeros(cand.size, dtype=np.float64)
        alloc = nodes.allocatable[cand]
        if w["leastrequested.weight"] or w["mostrequested.weight"]:
            req_nz = nodes.nonzero[cand] + task.nonzero
            cap2 = alloc[:, [cpu, mem]]
            if w["leastrequested.weight"]:
                total += least_requested(req_nz, cap2) * w["leastrequested.weight"]
            if w["mostrequested.weight"]:
                total += most_requested(req_nz, cap2) * w["mostrequested.weight"]
        if w["balancedresource.weight"]:
            bal_dims = self._bal_dims(task)
            requested = (nodes.used[cand] + nodes.pipelined[cand] + task.resreq)[:, bal_dims]
            total += balanced(requested, alloc[:, bal_dims]) * w["balancedresource.weight"]
        placement = task.placement
        if w["nodeaffinity.weight"] and placement.preferred_terms:
            total += self._pref(placement)[cand] * w["nodeaffinity.weight"]
        if w["tainttoleration.weight"]:
            if top == 0:
                norm = np.full(cand.size, MAX_SCORE)
            else:
                counts = self._intolerable(placement.tolerations)[0][cand]
                norm = MAX_SCORE - np.floor(MAX_SCORE * counts / top)
            total += norm * w["tainttoleration.weight"]
        return total

    def _bal_dims(self, task: TaskInfo) -> list[int]:
        """The dimensions of the balanced-allocation score for ``task``: cpu and memory,
        and each extended one the task requests (Kubernetes'
        ``calculateResourceAllocatableRequest`` returns (0, 0) for an extended resource
        the pod does not request, which leaves it out of the deviation)."""
        if not self._bal_scalar:
            return self._bal_base
        req = task.init_resreq
        asked = [d for d in self._bal_scalar if req[d] > 0]
        if not asked:
            return self._bal_base
        return self._bal_all if len(asked) == len(self._bal_scalar) else self._bal_base + asked

    def _task_floats(self, task: TaskInfo) -> tuple[float, float, list[int], list[float]]:
        """The task's nonzero cpu and memory, its balanced dimensions and its requests
        of them, as floats: computed once per (interned, read-only) request vector, not
        per node. Keyed by identity; the entry keeps the vectors alive, so an id is
        never reused while it is in the memo."""
        req, init, nz = task.resreq, task.init_resreq, task.nonzero
        key = (id(req), id(init), id(nz))
        got = self._floats.get(key)
        if got is not None and got[0] is req and got[1] is init and got[2] is nz:
            return got[3]
        tnz = cast(np.ndarray, nz).tolist()  # (a session's tasks have them: see cache.model)
        bal = self._bal_dims(task)
        out = (tnz[0], tnz[1], bal, [float(req[d]) for d in bal])
        self._floats[key] = (req, init, nz, out)
        return out

    def one(self, task: TaskInfo, i: int, top: float) -> float:
        """:meth:`rows` for node ``i`` alone, in plain floats."""
        nodes = self.nodes
        wl, wm, wb, wa, wt = self._wts
        total = 0.0
        alloc = nodes.allocatable[i].tolist()
        tnz0, tnz1, bal, breq = self._task_floats(task)
        if wl or wm:
            nz = nodes.nonzero[i].tolist()
            req_nz = [nz[0] + tnz0, nz[1] + tnz1]
            cap2 = [alloc[self._cpu], alloc[self._mem]]
            if wl:  # least_requested_one(req_nz, cap2) inline: the same operations
                r0, r1 = req_nz
                c0, c1 = cap2
                lt, lw = 0.0, 0
                if c0 > 0:
                    lt += 0.0 if r0 > c0 else math.floor((c0 - r0) * MAX_SCORE / c0)
                    lw += 1
                if c1 > 0:
                    lt += 0.0 if r1 > c1 else math.floor((c1 - r1) * MAX_SCORE / c1)
                    lw += 1
                total += (float(math.floor(lt / lw)) if lw else 0.0) * wl
            if wm:
                total += most_requested_one(req_nz, cap2) * wm
        if wb:
            used, pipe = nodes.used[i].tolist(), nodes.pipelined[i].tolist()
            if len(bal) == 2:  # cpu and memory: balanced_one's two-resource case inline
                b0, b1 = bal
                c0, c1 = alloc[b0], alloc[b1]
                if c0 > 0 and c1 > 0:
                    f0 = (used[b0] + pipe[b0] + breq[0]) / c0
                    f1 = (used[b1] + pipe[b1] + breq[1]) / c1
                    f0 = f0 if f0 < 1.0 else 1.0
                    f1 = f1 if f1 < 1.0 else 1.0
                    bscore = float(math.trunc((1 - abs(f1 - f0) / 2) * MAX_SCORE))
                else:
                    bscore = MAX_SCORE
                total += bscore * wb
            else:
                requested = [used[d] + pipe[d] + r for d, r in zip(bal, breq, strict=True)]
                total += balanced_one(requested, [alloc[d] for d in bal]) * wb
        placement = task.placement
        if wa and placement.preferred_terms:
            total += float(self._pref(placement)[i]) * wa
        if wt:
            if top == 0:
                norm = MAX_SCORE
            else:
                count = float(self._intolerable(placement.tolerations)[0][i])
                norm = MAX_SCORE - math.floor(MAX_SCORE * count / top)
            total += norm * wt
        return total


class NodeOrderPlugin:
    name = "nodeorder"
    valid_until = timeless  # (answers do not depend on the clock)
    argument_keys = (
        "leastrequested.weight",
        "mostrequested.weight",
        "balancedresource.weight",
        "nodeaffinity.weight",
        "tainttoleration.weight",
        "podtopologyspread.weight",
    )

    def __init__(self, arguments: Arguments) -> None:
        self.weights = {k: arguments.get_int(k, v) for k, v in WEIGHT_KEYS.items()}
        self.score: NodeOrderScore | None = None

    def on_session_open(self, ssn: Session) -> None:
        self.score = NodeOrderScore(ssn, self.weights)
        ssn.on("node_order", self.name, self.score)

    def on_cycle_open(self, ssn: Session) -> None:
        """The score reads the cycle's nodes."""
        if self.score is not None:
            self.score.renew(ssn)
