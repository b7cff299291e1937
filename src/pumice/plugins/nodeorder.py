"""nodeorder: Kubernetes' node scores, weighted as Volcano's nodeorder plugin does.

Scores over the candidate nodes, each 0-100 then multiplied by its weight:
least requested (cpu, memory), most requested (off by default), balanced allocation
(cpu, memory, nvidia.com/gpu), preferred node affinity (the raw sum of matching term
weights, not normalized, as in Volcano) and taint toleration (PreferNoSchedule taints
not tolerated, normalized over the candidates). Integer arithmetic follows Kubernetes'
(scores are truncated), so that ties fall where Volcano's fall.

Argument keys are Volcano's: ``leastrequested.weight`` (1), ``mostrequested.weight`` (0),
``balancedresource.weight`` (1), ``nodeaffinity.weight`` (2), ``tainttoleration.weight``
(3); ``podaffinity.weight``, ``imagelocality.weight`` and ``podtopologyspread.weight``
are accepted and have nothing to score in pumice's model.
"""

from __future__ import annotations

import numpy as np

from pumice.api.task import TaskInfo
from pumice.conf.arguments import Arguments
from pumice.framework.session import Session

MAX_SCORE = 100.0
BALANCED_RESOURCES = ("cpu", "memory", "nvidia.com/gpu")

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


class NodeOrderPlugin:
    name = "nodeorder"

    def __init__(self, arguments: Arguments) -> None:
        self.weights = {k: arguments.get_int(k, v) for k, v in WEIGHT_KEYS.items()}

    def on_session_open(self, ssn: Session) -> None:
        nodes = ssn.nodes
        space = ssn.space
        w = self.weights
        cpu, mem = space.index["cpu"], space.index["memory"]
        bal_dims = [space.index[r] for r in BALANCED_RESOURCES if r in space.index]
        affinity_cache: dict = {}

        def score(task: TaskInfo, cand: np.ndarray) -> np.ndarray:
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
                requested = (nodes.used[cand] + nodes.pipelined[cand] + task.resreq)[:, bal_dims]
                total += balanced(requested, alloc[:, bal_dims]) * w["balancedresource.weight"]
            placement = task.placement
            if w["nodeaffinity.weight"] and placement.preferred_terms:
                pref = affinity_cache.get(placement)
                if pref is None:
                    pref = np.zeros(len(nodes), dtype=np.float64)
                    for weight, term in placement.preferred_terms:
                        pref += np.where(nodes.labels.term(term), float(weight), 0.0)
                    affinity_cache[placement] = pref
                total += pref[cand] * w["nodeaffinity.weight"]
            if w["tainttoleration.weight"]:
                counts = nodes.labels.intolerable_count(placement.tolerations)[cand]
                top = counts.max() if counts.size else 0.0
                if top == 0:
                    norm = np.full(cand.size, MAX_SCORE)
                else:
                    norm = MAX_SCORE - np.floor(MAX_SCORE * counts / top)
                total += norm * w["tainttoleration.weight"]
            return total

        ssn.on("node_order", self.name, score)
