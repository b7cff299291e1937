"""Resource fit of one task over all nodes, and the explanation of a miss."""

from __future__ import annotations

import numpy as np

from pumice.api.job import FitError
from pumice.api.node import NodeTable
from pumice.api.quantity import PODS
from pumice.api.task import TaskInfo
from pumice.framework.session import Session

#: Why nodes refuse a task: (reason, mask of the nodes it refuses), predicate by predicate.
Reasons = list[tuple[str, np.ndarray]]


def fits(req: np.ndarray, avail: np.ndarray) -> np.ndarray:
    """Nodes (rows of ``avail``) where every requested dimension of ``req`` fits."""
    dims = np.flatnonzero(req)
    if dims.size == 0:
        return np.ones(avail.shape[0], dtype=bool)
    return np.all(avail[:, dims] >= req[dims], axis=1)


def fits_one(req: np.ndarray, avail: np.ndarray) -> bool:
    """:func:`fits` for one row of available resources (a vector): the eviction
    actions ask it node by node, where the matrix form's indexing costs more than the
    test, and plain floats cost less than numpy's calls on a handful of dimensions."""
    for r, a in zip(req.tolist(), avail.tolist(), strict=True):  # noqa: SIM110 - hot path
        if r and a < r:
            return False
    return True


def predicate_filter(ssn: Session, task: TaskInfo) -> tuple[np.ndarray | None, Reasons]:
    """The nodes the predicate hooks refuse for ``task`` and why: (blocked, reasons)."""
    blocked: np.ndarray | None = None
    reasons: Reasons = []
    for fn in ssn.hooks.flat("predicate"):
        b, r = fn(task)
        if b is not None:
            blocked = b.copy() if blocked is None else (blocked | b)
            reasons.extend(r)
    return blocked, reasons


def with_left_out(nodes: NodeTable, hist: dict[str, int]) -> FitError:
    """The fit error of a histogram over the session's nodes, with the nodes the
    session leaves out (not ready, out of sync) counted too: a task whose only fitting
    nodes are not ready says so. ``hist`` is extended in place."""
    left = nodes.left_out_counts()
    for reason, k in left.items():
        hist[reason] = hist.get(reason, 0) + k
    return FitError(len(nodes) + len(nodes.left_out), hist)


def no_nodes(nodes: NodeTable) -> FitError:
    """Why a task finds no node in a session without nodes."""
    if nodes.left_out:
        return with_left_out(nodes, {})
    return FitError(0, {}, "there are no nodes in the cluster")


def explain_no_fit(
    ssn: Session,
    task: TaskInfo,
    reasons: Reasons,
    avail: np.ndarray,
    rows: np.ndarray | None = None,
) -> FitError:
    """Each node counted under the first predicate that refused it, or else under every
    resource it is short of (in ``avail``, per requested dimension); the nodes left out
    of the session under their reason. With ``rows``, only those nodes (one HyperNode's)
    are counted, and none left out."""
    hist: dict[str, int] = {}
    claimed = None
    if rows is not None:
        reasons = [(reason, mask[rows]) for reason, mask in reasons]
        avail = avail[rows]
    for reason, mask in reasons:
        new = mask if claimed is None else mask & ~claimed
        k = int(np.count_nonzero(new))
        if k:
            hist[reason] = hist.get(reason, 0) + k
            claimed = new if claimed is None else claimed | new
    req = task.init_resreq
    dims = np.flatnonzero(req)
    if dims.size:
        short = avail[:, dims] < req[dims]
        if claimed is not None:
            short &= ~claimed[:, None]
        names = ssn.space.names
        for d, k in zip(dims.tolist(), np.count_nonzero(short, axis=0).tolist(), strict=True):
            if k:
                reason = "too many pods" if names[d] == PODS else f"insufficient {names[d]}"
                hist[reason] = hist.get(reason, 0) + k
    if rows is not None:
        return FitError(int(rows.size), hist)
    return with_left_out(ssn.nodes, hist)
