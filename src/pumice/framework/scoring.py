"""The separable form of a node scorer, which allocate's fast path reads.

A scorer registered at ``node_order`` is a callable ``fn(task, cand) -> scores``. One
that can also score a few nodes at a time lets :mod:`pumice.framework.fastpath` keep
its sums per task shape and refresh them row by row: ``context(task, cand)`` once per
choice (what the score of every node shares: a normalization, a lookup), then
``rows(task, rows, ctx)`` over nodes and ``one(task, i, ctx)`` for one node.
:class:`SeparableScore` gives a subclass the plain call in those terms, and a context
of None for scorers that need none; the subclass defines ``rows`` and ``one``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pumice.api.task import TaskInfo


class SeparableScore:
    """Base of separable scorers (see the module docstring)."""

    __slots__ = ()

    def context(self, task: TaskInfo, cand: np.ndarray) -> Any:
        """What scoring ``task`` on any node of ``cand`` shares (None: nothing)."""
        return None

    def __call__(self, task: TaskInfo, cand: np.ndarray) -> np.ndarray:
        return self.rows(task, cand, self.context(task, cand))

    def rows(self, task: TaskInfo, rows: np.ndarray, ctx: Any) -> np.ndarray:
        raise NotImplementedError

    def one(self, task: TaskInfo, i: int, ctx: Any) -> float:
        raise NotImplementedError


__all__ = ["SeparableScore"]
