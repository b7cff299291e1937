"""Naming a queue's limit for what it is, in explanations.

A queue's limit in one resource may be the ``spec.capability`` its owner set, the
deserved share proportion computed (or capacity's ``spec.deserved``), or, when no
capability is set, what pumice derives from the cluster: its total, less the other
queues' guarantees. Each is a different thing to change, so a message names each
resource's limit by its source: ``its capability (cpu 8) and its deserved share (memory
4Gi)``. The queue plugins say which source each resource's limit has; this module only
words it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from pumice.api.quantity import format_amount
from pumice.api.resources import ResourceSpace, Vector

CAPABILITY = "its capability"
DESERVED = "its deserved share"
#: How :func:`pumice.actions.room.queue_refusal` names the limit, which it cannot know;
#: the pending explanation replaces it with the one the deciding plugin names.
GENERIC_LIMIT = "the queue's deserved share"


class QueueRefusal(str):
    """A job's note that says its queue, not a node, refused one of its tasks (see
    :func:`pumice.actions.room.queue_refusal`): the explanation puts the job at the
    ``queue`` stage by this type, whatever the words. Resetting the note (to ``""``)
    drops the mark with it."""

    __slots__ = ()


def cluster_total(guarantees: bool) -> str:
    """The limit pumice derives for a queue without a capability."""
    if guarantees:
        return "the cluster's total less the other queues' guarantees"
    return "the cluster's total"


def amounts(space: ResourceSpace, v: Vector | Sequence[float], dims: Iterable[int]) -> str:
    """``cpu 8, memory 16Gi``: ``v`` in the resources ``dims``."""
    names = space.names
    # (Floats from a list: indexing an array makes a numpy scalar per amount.)
    vs = v.tolist() if isinstance(v, np.ndarray) else v
    return ", ".join(f"{names[d]} {format_amount(names[d], float(vs[d]))}" for d in dims)


def describe(
    space: ResourceSpace, limit: Vector, sources: Sequence[str], dims: Iterable[int]
) -> str:
    """``its capability (cpu 8) and its deserved share (memory 4Gi)``: ``limit`` in the
    resources ``dims``, grouped by each resource's source (in ``sources``).

    The sentence is a function of each named resource's name, amount and source
    alone, and an explanation asks it again in every cycle that explains a queue's
    refusal, mostly with the same figures: it is kept by those (a few sentences, and
    forgotten all at once past :data:`_DESCRIBED_MAX`)."""
    values = limit.tolist() if isinstance(limit, np.ndarray) else limit
    if not isinstance(dims, list | tuple):
        dims = list(dims)
    names = space.names
    key = tuple([(names[d], values[d], sources[d]) for d in dims])
    said = _described.get(key)
    if said is None:
        groups: dict[str, list[int]] = {}
        for d in dims:
            groups.setdefault(sources[d], []).append(d)
        said = " and ".join(f"{src} ({amounts(space, values, ds)})" for src, ds in groups.items())
        if len(_described) >= _DESCRIBED_MAX:
            _described.clear()
        _described[key] = said
    return said


#: :func:`describe`'s sentences by what they quote: ((name, amount, source) per
#: resource named, in order) -> sentence.
_described: dict[tuple[tuple[str, float, str], ...], str] = {}
_DESCRIBED_MAX = 1024


def finite_dims(limit: Vector, mask: np.ndarray) -> list[int]:
    """The resources of ``mask`` where ``limit`` is a number (not unlimited) above 0."""
    if limit.ndim != 1 or mask.shape != limit.shape or mask.dtype != np.bool_:
        return np.flatnonzero(mask & np.isfinite(limit) & (limit > 0)).tolist()
    # (In plain floats: a queue's vector has a handful of resources, where numpy's
    # per-call cost is most of the work.)
    inf = math.inf
    pairs = enumerate(zip(mask.tolist(), limit.tolist(), strict=True))
    return [d for d, (m, x) in pairs if m and 0 < x < inf]


__all__ = [
    "CAPABILITY",
    "DESERVED",
    "GENERIC_LIMIT",
    "amounts",
    "cluster_total",
    "describe",
    "finite_dims",
]
