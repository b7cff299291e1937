"""The pending jobs of a cycle, as users read them: position, stage, reason.

:func:`pending_jobs` is the one function every mode uses (``pumice cycle``'s output,
``pumice run``'s endpoint, ``pumice queue pending`` and the simulator's report): it
reads a cycle's :class:`~pumice.framework.decisions.Decisions`, whose ``waiting`` holds
the line the cycle left (see :mod:`pumice.framework.waiting` for the order) and whose
``pending`` says why each job waits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pumice.framework.decisions import Decisions

#: Where a list came from (``source`` in the JSON).
FROM_SCHEDULER = "scheduler"
FROM_LOCAL_CYCLE = "local-cycle"


@dataclass(slots=True)
class PendingJob:
    """One waiting job. Positions count from 1 (1: tried first).

    ``eta`` and ``assumption`` are for a start-time forecast (seconds from now, and
    what the estimate assumes); absent (None) unless a forecast fills them, and then
    left out of the JSON."""

    name: str
    namespace: str
    queue: str
    priority: int
    position_in_queue: int
    position_in_cluster: int
    stage: str
    reason: str
    eta: float | None = None
    assumption: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "queue": self.queue,
            "priority": self.priority,
            "positionInQueue": self.position_in_queue,
            "positionInCluster": self.position_in_cluster,
            "stage": self.stage,
            "reason": self.reason,
        }
        if self.eta is not None:
            out["eta"] = self.eta
        if self.assumption is not None:
            out["assumption"] = self.assumption
        return out


@dataclass(slots=True)
class PendingList:
    """The pending jobs of one queue (``queue``) or of all (None), in line order;
    ``total`` counts them before ``offset`` and ``limit`` cut the page ``jobs``."""

    jobs: list[PendingJob]
    queue: str | None = None
    source: str = FROM_SCHEDULER
    total: int = 0
    offset: int = 0
    #: By stage: how many of ``total`` each stage stopped.
    stages: dict[str, int] = field(default_factory=dict)
    #: With start estimates: when and how the forecast was computed (see
    #: :func:`pumice.visibility.eta.forecast_info`), None without.
    forecast: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "PendingJobs",
            "apiVersion": "visibility.pumice.io/v1",
            "source": self.source,
            "total": self.total,
            "offset": self.offset,
            "stages": dict(sorted(self.stages.items())),
            "items": [j.to_json() for j in self.jobs],
        }
        if self.queue is not None:
            out["queue"] = self.queue
        if self.forecast is not None:
            out["forecast"] = self.forecast
        return out


def pending_jobs(decisions: Decisions) -> list[PendingJob]:
    """Every job ``decisions`` left waiting, in line order, with its positions (in its
    queue, in the cluster), stage and reason."""
    out: list[PendingJob] = []
    in_queue: dict[str, int] = {}
    reasons = decisions.pending
    for i, w in enumerate(decisions.waiting, 1):
        n = in_queue[w.queue] = in_queue.get(w.queue, 0) + 1
        namespace, _, name = w.uid.rpartition("/")
        out.append(
            PendingJob(name, namespace, w.queue, w.priority, n, i, w.stage, reasons.get(w.uid, ""))
        )
    return out


def select(
    jobs: list[PendingJob],
    queue: str | None = None,
    *,
    offset: int = 0,
    limit: int | None = None,
    source: str = FROM_SCHEDULER,
) -> PendingList:
    """The page of ``jobs`` (all, or ``queue``'s) from ``offset``, at most ``limit``."""
    chosen = jobs if queue is None else [j for j in jobs if j.queue == queue]
    stages: dict[str, int] = {}
    for j in chosen:
        stages[j.stage] = stages.get(j.stage, 0) + 1
    end = None if limit is None else offset + limit
    return PendingList(chosen[offset:end], queue, source, len(chosen), offset, stages)


__all__ = [
    "FROM_LOCAL_CYCLE",
    "FROM_SCHEDULER",
    "PendingJob",
    "PendingList",
    "pending_jobs",
    "select",
]
