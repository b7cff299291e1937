"""How long a queue's jobs run, learned from the jobs of that queue that finished.

A forecast needs an end time for every running pod. When a pod says nothing of its own
(no ``activeDeadlineSeconds``, no duration annotation), the best guess left is what the
jobs of its queue took: :class:`QueueDurations` keeps the run times of the last ``keep``
finished jobs per queue and answers their 75th percentile (a job is more often shorter
than its queue's long runs than longer, so a forecast built on it errs late rather than
early, the side a user can plan with). A queue with fewer than ``least`` finished jobs
has no estimate.

It takes finished jobs one by one (:meth:`QueueDurations.finished`), so the same object
serves the simulator (jobs as they end) and a scheduler's cache (a finished pod's
start and finish times: :meth:`QueueDurations.from_pods`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: The percentile of a queue's recent run times its estimate is.
QUANTILE = 0.75
#: How many recent run times per queue are kept.
KEEP = 50
#: How many a queue needs before it has an estimate.
LEAST = 3


def quantile(values: Iterable[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (linear between the two nearest ranks, as
    numpy's default); ``values`` must not be empty."""
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(slots=True)
class QueueDurations:
    """Recent run times per queue and the estimate they give (see the module docstring)."""

    keep: int = KEEP
    least: int = LEAST
    q: float = QUANTILE
    runs: dict[str, deque[float]] = field(default_factory=dict)

    def finished(self, queue: str, seconds: float) -> None:
        """A job of ``queue`` ran ``seconds`` (from its start to its end)."""
        if seconds < 0 or math.isnan(seconds):
            return
        runs = self.runs.get(queue)
        if runs is None:
            runs = self.runs[queue] = deque(maxlen=self.keep)
        runs.append(float(seconds))

    def estimate(self, queue: str) -> float | None:
        """The run time to expect of a job of ``queue``, None while too few finished."""
        runs = self.runs.get(queue)
        if runs is None or len(runs) < self.least:
            return None
        return quantile(runs, self.q)

    def describe(self, queue: str) -> str:
        """How :meth:`estimate` came about, for a user: "p75 of the last 12 runs"."""
        runs = self.runs.get(queue) or ()
        return f"p{round(self.q * 100)} of the last {len(runs)} finished jobs"

    @classmethod
    def from_pods(
        cls, pods: Iterable[Mapping[str, Any]], queue_of: Mapping[str, str], **kw: Any
    ) -> QueueDurations:
        """Learned from the finished pods of a cluster (``Succeeded``, with a
        ``status.startTime`` and a container's ``finishedAt``): a job's run time is from
        its first pod's start to its last pod's finish. ``queue_of`` maps a pod's group
        (its ``scheduling.k8s.io/group-name`` annotation, in its namespace:
        ``namespace/group``) to the queue; pods of no known group are left out. Pods
        are taken in the order of their finish, so ``keep`` keeps the latest."""
        from pumice.api.parse import timestamp

        spans: dict[str, list[float]] = {}
        for pod in pods:
            status = pod.get("status") or {}
            if status.get("phase") != "Succeeded" or not status.get("startTime"):
                continue
            meta = pod.get("metadata") or {}
            group = (meta.get("annotations") or {}).get("scheduling.k8s.io/group-name")
            if not group:
                continue
            uid = f"{meta.get('namespace') or 'default'}/{group}"
            if uid not in queue_of:
                continue
            ends = [
                timestamp(c["state"]["terminated"].get("finishedAt"), "finishedAt")
                for c in status.get("containerStatuses") or ()
                if (c.get("state") or {}).get("terminated")
            ]
            if not ends:
                continue
            start = timestamp(status["startTime"], "status.startTime")
            span = spans.setdefault(uid, [start, max(ends)])
            span[0], span[1] = min(span[0], start), max(span[1], max(ends))
        out = cls(**kw)
        for uid, (start, end) in sorted(spans.items(), key=lambda kv: kv[1][1]):
            out.finished(queue_of[uid], end - start)
        return out


__all__ = ["KEEP", "LEAST", "QUANTILE", "QueueDurations", "quantile"]
