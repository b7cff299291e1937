"""Victim functions asked of a whole gang.

``gangpreempt`` and ``gangreclaim`` ask one hook, ``gang_evictable(context, candidates)``,
where ``preempt`` and ``reclaim`` ask ``preemptable`` / ``reclaimable`` of one task. A
plugin whose rule is the same either way registers its task-level function through
:func:`on_kind`, asked with the gang's first pending task.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pumice.api.task import TaskInfo

Victims = Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo] | None]


def on_kind(
    kind: str | None, fn: Victims
) -> Callable[[Any, list[TaskInfo]], list[TaskInfo] | None]:
    """``fn`` as a ``gang_evictable`` function for actions of ``kind`` ("gangpreempt",
    "gangreclaim"; None: both); it abstains (None) for the other kind."""

    def evictable(ctx: Any, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
        if kind is not None and ctx.kind != kind:
            return None
        return fn(ctx.task, candidates)

    return evictable


__all__ = ["on_kind"]
