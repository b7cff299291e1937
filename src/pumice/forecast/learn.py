"""Run times learned live, from the pods of a running cluster as they finish.

A running scheduler's forecast needs, for the pods that say nothing of their own end,
what its queue's jobs take (:class:`~pumice.forecast.durations.QueueDurations`).
:class:`FinishedPods` subscribes to the cluster's pod events (a watch of its own beside
the scheduler cache's, so the cache is left as it is) and, on each call of
:meth:`~FinishedPods.take`, hands every pod that has newly ``Succeeded`` to the
durations: its run time is from ``status.startTime`` to the latest ``finishedAt`` of its
containers, its queue that of its group (``queue_of``). Each pod counts once; pods
whose queue is not known are left out. The pods already finished when it starts count
too, so a restarted scheduler does not start from nothing.

A gang's pods each count as a run of their queue (they run together, so they give the
queue the same run time several times: the quantile is still the jobs', weighted by
their size).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pumice.api.parse import GROUP_ANNOTATION, timestamp
from pumice.errors import InputError
from pumice.forecast.durations import QueueDurations


def run_seconds(pod: Mapping[str, Any]) -> float | None:
    """A finished pod's run time (start to its containers' last finish), None for a pod
    that has not succeeded or does not say."""
    status = pod.get("status") or {}
    if status.get("phase") != "Succeeded" or not status.get("startTime"):
        return None
    try:
        ends = [
            timestamp(term["finishedAt"], "finishedAt")
            for c in status.get("containerStatuses") or ()
            if (term := (c.get("state") or {}).get("terminated")) and term.get("finishedAt")
        ]
        if not ends:
            return None
        return max(ends) - timestamp(status["startTime"], "status.startTime")
    except (InputError, TypeError, AttributeError):
        return None  # (a pod the forecast cannot read: it learns nothing from it)


def group_of(pod: Mapping[str, Any]) -> str | None:
    """``namespace/group`` of a pod's PodGroup (its group-name annotation), or None."""
    meta = pod.get("metadata") or {}
    group = (meta.get("annotations") or {}).get(GROUP_ANNOTATION)
    return f"{meta.get('namespace') or 'default'}/{group}" if group else None


class FinishedPods:
    """Feeds ``durations`` from the pods of ``cluster`` that finish (see the module
    docstring). ``take`` is for one thread (the scheduler's loop)."""

    def __init__(self, cluster: Any, durations: QueueDurations | None = None) -> None:
        self.durations = durations if durations is not None else QueueDurations()
        self._watch = cluster.watch(("Pod",))
        self._backlog: list[Mapping[str, Any]] = list(cluster.list("Pod"))
        #: The pods counted, until they are deleted.
        self._counted: set[str] = set()

    def take(self, queue_of: Callable[[str], str | None]) -> int:
        """Count the pods that finished since the last call; return how many.
        ``queue_of(group_key)`` names the queue of a PodGroup (None: not known)."""
        pods, self._backlog = self._backlog, []
        for ev in self._watch.drain():
            if ev.type == "DELETED":
                self._counted.discard(ev.key)
            else:
                pods.append(ev.obj)
        n = 0
        for pod in pods:
            meta = pod.get("metadata") or {}
            key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
            if key in self._counted:
                continue
            seconds = run_seconds(pod)
            group = group_of(pod)
            if seconds is None or group is None:
                continue
            queue = queue_of(group)
            if queue is None:
                continue
            self._counted.add(key)
            self.durations.finished(queue, seconds)
            n += 1
        return n

    def close(self) -> None:
        self._watch.close()


__all__ = ["FinishedPods", "group_of", "run_seconds"]
