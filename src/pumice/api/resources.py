"""Resource vectors over a fixed set of named dimensions.

A :class:`ResourceSpace` fixes, for one snapshot, which resource names exist and in which
column each lives. Every amount in pumice is then a float64 numpy vector over that space
(canonical units, see :mod:`pumice.api.quantity`), and the nodes of a cluster are a
matrix of such vectors, so that a fit check over all nodes is one vector comparison.

Unset dimensions are 0, except where a comparison needs "no limit": a queue capability
that names only ``cpu`` is ``+inf`` in every other dimension.

``pods`` is a dimension like the others (each task requests one), which makes the pod
count limit a plain fit check. Volcano leaves ``pods`` and ``ephemeral-storage`` out of
fair-share arithmetic (they are not in its ``Resource``), so :attr:`ResourceSpace.share`
marks the dimensions that count for queue and DRF shares.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

from pumice.api.quantity import CPU, MEMORY, PODS, format_amount

Vector = np.ndarray

_FIRST = (CPU, MEMORY, PODS)
_NOT_SHARED = frozenset({PODS, "ephemeral-storage"})


class ResourceSpace:
    """The ordered resource dimensions of one snapshot.

    ``cpu``, ``memory`` and ``pods`` always come first, in that order; the rest follow
    sorted by name, so that two snapshots with the same resource names agree on columns.
    """

    __slots__ = ("index", "names", "share", "size")

    def __init__(self, names: Iterable[str]) -> None:
        rest = sorted(set(names) - set(_FIRST))
        self.names: tuple[str, ...] = (*_FIRST, *rest)
        self.index: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        self.size = len(self.names)
        self.share = np.array([n not in _NOT_SHARED for n in self.names], dtype=bool)

    def zeros(self) -> Vector:
        return np.zeros(self.size, dtype=np.float64)

    def vector(self, amounts: Mapping[str, float], *, default: float = 0.0) -> Vector:
        """A vector from canonical amounts; names outside the space are an error."""
        v = np.full(self.size, default, dtype=np.float64)
        for name, amount in amounts.items():
            v[self.index[name]] = amount
        return v

    def render(self, v: Vector) -> str:
        """``cpu 2, memory 4Gi, nvidia.com/gpu 1`` for people (zero and infinite left out)."""
        parts = [
            f"{n} {format_amount(n, float(v[i]))}"
            for i, n in enumerate(self.names)
            if v[i] != 0 and np.isfinite(v[i])
        ]
        return ", ".join(parts) if parts else "nothing"


def is_empty(v: Vector, space: ResourceSpace) -> bool:
    """No cpu, memory or extended resource: a best-effort request (``pods`` ignored)."""
    return not bool(np.any(v[space.share] > 0))


def share_of(allocated: Vector, total: Vector, mask: np.ndarray) -> float:
    """The dominant share: max over dimensions with ``total > 0`` of allocated / total.

    Plain floats over the few dimensions (it runs on every allocation): the same
    divisions as the vector form, and their maximum."""
    return dominant_share(allocated, share_dims(total, mask))


def share_dims(total: Vector, mask: np.ndarray) -> list[tuple[int, float]]:
    """The dimensions a dominant share is taken over, as (dimension, total) pairs:
    shared ones with a finite positive total. A caller that asks many shares of one
    cluster lists them once and calls :func:`dominant_share`."""
    return [
        (k, t)
        for k, (t, m) in enumerate(zip(total.tolist(), mask.tolist(), strict=True))
        if m and t > 0 and t != math.inf
    ]


def dominant_share(allocated: Vector, dims: list[tuple[int, float]]) -> float:
    """:func:`share_of` over ``dims`` (see :func:`share_dims`); 0.0 when there are none."""
    a = allocated.tolist()
    best = None
    for k, t in dims:
        v = a[k] / t
        if best is None or v > best:
            best = v
    return 0.0 if best is None else best
