"""Answers kept from one cycle to the next, each with the stamp of what it depends on.

A scheduler that rebuilds every answer each cycle pays for its whole backlog every
period, although most cycles of a busy cluster repeat the last one's verdicts: the same
jobs refused for the same reasons. :class:`Verdicts` is the one place such answers are
kept. Whoever keeps an answer names it (``key``) and says what it was computed from
(``stamp``: any value compared with ``==``, such as a change counter, a job's version or
the configuration); the answer is handed back only while the stamp is the same, so
forgetting is never needed for correctness, only for memory.

Two scopes use it. A cluster's: the snapshot's owner keeps one store for the life of the
cluster it follows (the scheduler cache hands the same store to every snapshot,
``Snapshot.verdicts``); a snapshot built from files starts with an empty one, so
``pumice cycle`` computes everything afresh. A job's: ``JobInfo.verdicts`` holds what is
known of one job's tasks (their shapes, their order, the placements its gang needs),
stamped with the job's version; it goes with the job, and a job rebuilt from the
cluster's records starts with an empty one.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

_MISSING: Any = object()


class Verdicts:
    """A store of answers by key, each valid for one stamp (see the module docstring)."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: dict[Hashable, tuple[Any, Any]] = {}

    def recall(self, key: Hashable, stamp: Any, default: Any = None) -> Any:
        """The answer kept under ``key`` if it was kept with an equal ``stamp``, else
        ``default``."""
        got = self._kept.get(key, _MISSING)
        if got is _MISSING or got[0] != stamp:
            return default
        return got[1]

    def keep(self, key: Hashable, stamp: Any, value: Any) -> Any:
        """Keep ``value`` under ``key`` for ``stamp`` (replacing what was there);
        return it."""
        self._kept[key] = (stamp, value)
        return value

    def forget(self, key: Hashable) -> None:
        self._kept.pop(key, None)

    def __len__(self) -> int:
        return len(self._kept)


#: ``JobInfo.verdicts`` key, stamped with the job's version: the pending tasks' shapes
#: (placement and requests), as ((shape, how many, the first task) in order of first
#: appearance, each task's shape by uid); None when a task has what shapes cannot count
#: (host ports, inter-pod affinity). Made by :mod:`pumice.actions.room`, read by the
#: explanations (:mod:`pumice.framework.never`): one task per shape answers for all.
TASK_SHAPES = "task-shapes"

__all__ = ["TASK_SHAPES", "Verdicts"]
