"""When a running pod ends, and on what that guess rests.

A forecast replays the scheduler forward; what frees room in it is pods ending, so each
running pod needs an end time. Three sources, the first that applies wins:

- the pod's **duration annotation** (``pumice.sim/duration``, the one the simulator's
  workloads carry: seconds the pod runs once started; on the pod, else on its Volcano
  Job), capped by its deadline when it has one;
- its **activeDeadlineSeconds**: the kubelet stops the pod then at the latest, so this
  is a late bound;
- the **queue estimate**: what the recent jobs of its queue ran
  (:class:`~pumice.forecast.durations.QueueDurations`).

A pod none of them covers has no known end: it is taken to run past the horizon, and
the forecast says so for the jobs that wait on it. Run times count from the pod's
start: ``status.startTime`` when the kubelet wrote one, else when it was bound plus the
forecast's startup delay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pumice.api.parse import DURATION_ANNOTATION, pod_scheduled_at, timestamp
from pumice.forecast.durations import QueueDurations

#: The sources of an end time, as the assumptions name them.
ANNOTATION, DEADLINE, LEARNED, UNKNOWN = "annotation", "deadline", "learned", "unknown"


@dataclass(slots=True, frozen=True)
class PodEnd:
    """A pod's expected end (None: not known) and its source (one of the names above)."""

    at: float | None
    source: str


def pod_start(pod: Mapping[str, Any], startup: float, now: float) -> float:
    """When a bound pod started running (see the module docstring); ``now`` when
    nothing says."""
    status = pod.get("status") or {}
    started = status.get("startTime")
    if started:
        try:
            return timestamp(started, "status.startTime")
        except ValueError:
            pass
    bound = pod_scheduled_at(status) if status.get("conditions") else 0.0
    return bound + startup if bound else now


def _seconds(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return out if out >= 0 else None


def pod_end(
    pod: Mapping[str, Any],
    queue: str,
    started: float,
    durations: QueueDurations | None,
    annotation: str | None = DURATION_ANNOTATION,
    owner: Mapping[str, str] | None = None,
) -> PodEnd:
    """The end of ``pod`` (of a job in ``queue``), running since ``started``.
    ``annotation``: the duration annotation to read (None: read none), on the pod, else
    in ``owner`` (the annotations of the Volcano Job that made it)."""
    spec = pod.get("spec") or {}
    deadline = _seconds(spec.get("activeDeadlineSeconds"))
    by_deadline = None if deadline is None else started + deadline
    if annotation is not None:
        notes = (pod.get("metadata") or {}).get("annotations") or {}
        given = _seconds(notes.get(annotation, (owner or {}).get(annotation)))
        if given is not None:
            end = started + given
            if by_deadline is not None and by_deadline < end:
                return PodEnd(by_deadline, DEADLINE)
            return PodEnd(end, ANNOTATION)
    if by_deadline is not None:
        return PodEnd(by_deadline, DEADLINE)
    guess = durations.estimate(queue) if durations is not None else None
    if guess is not None:
        return PodEnd(started + guess, LEARNED)
    return PodEnd(None, UNKNOWN)


__all__ = [
    "ANNOTATION",
    "DEADLINE",
    "LEARNED",
    "UNKNOWN",
    "PodEnd",
    "pod_end",
    "pod_start",
]
