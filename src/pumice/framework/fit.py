"""Resource fit of one task over all nodes, and the explanation of a miss."""

from __future__ import annotations

import numpy as np

from pumice.api.job import FitError
from pumice.api.quantity import PODS
from pumice.api.resources import ResourceSpace
from pumice.api.task import TaskInfo
from pumice.framework.session import Session


def fits(req: np.ndarray, avail: np.ndarray) -> np.ndarray:
    """Nodes (rows of ``avail``) where every requested dimension of ``req`` fits."""
    dims = np.flatnonzero(req)
    if dims.size == 0:
        return np.ones(avail.shape[0], dtype=bool)
    return np.all(avail[:, dims] >= req[dims], axis=1)


def insufficient(task: TaskInfo, avail: np.ndarray, space: ResourceSpace):
    """Per requested dimension, the nodes short of it: [(reason, mask)]."""
    req = task.init_resreq
    out = []
    for d in np.flatnonzero(req):
        short = avail[:, d] < req[d]
        if short.any():
            name = space.names[d]
            out.append(("too many pods" if name == PODS else f"insufficient {name}", short))
    return out


def predicate_filter(ssn: Session, task: TaskInfo):
    """The nodes the predicate hooks refuse for ``task`` and why: (blocked, reasons)."""
    blocked = None
    reasons: list = []
    for fn in ssn.hooks.flat("predicate"):
        b, r = fn(task)
        if b is not None:
            blocked = b.copy() if blocked is None else (blocked | b)
            reasons.extend(r)
    return blocked, reasons


def explain_no_fit(ssn: Session, task: TaskInfo, reasons, avail: np.ndarray) -> FitError:
    """Each node counted under the first predicate that refused it, or else under every
    resource it is short of."""
    n = len(ssn.nodes)
    hist: dict[str, int] = {}
    claimed = np.zeros(n, dtype=bool)
    for reason, mask in reasons:
        new = mask & ~claimed
        k = int(new.sum())
        if k:
            hist[reason] = hist.get(reason, 0) + k
            claimed |= new
    for reason, mask in insufficient(task, avail, ssn.space):
        k = int((mask & ~claimed).sum())
        if k:
            hist[reason] = hist.get(reason, 0) + k
    return FitError(n, hist)
