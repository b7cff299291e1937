"""Resource fit of one task over all nodes, and the explanation of a miss."""

from __future__ import annotations

import numpy as np

from pumice.api.quantity import PODS
from pumice.api.resources import ResourceSpace
from pumice.api.task import TaskInfo


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
