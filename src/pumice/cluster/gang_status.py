"""The status pumice writes on the gang objects of other dialects, in their vocabulary.

A Volcano PodGroup takes the phase and conditions a cycle derives as they are. The others
define their own status, which their users and controllers read:

- scheduler-plugins coscheduling (``scheduling.x-k8s.io/v1alpha1`` PodGroup): ``phase``
  (``Pending``, ``Scheduling``, ``Running``, ``Finished``, ``Failed``), the ``running``,
  ``succeeded`` and ``failed`` counts of its pods, and ``scheduleStartTime``, as
  scheduler-plugins' PodGroup controller derives them: Pending while fewer pods than
  ``minMember`` exist; Scheduling once they do; Running once ``minMember`` of them run
  (or have succeeded); Failed when one failed and the failed, running and succeeded
  reach ``minMember``; Finished once ``minMember`` succeeded.
- Kubernetes' ``scheduling.k8s.io/v1alpha2`` PodGroup: the ``PodGroupScheduled``
  condition (a ``metav1.Condition``): True with reason ``Scheduled`` once the gang's
  required pods hold nodes; False with reason ``Unschedulable`` and the cycle's
  explanation while a cycle could not place it; absent before any cycle decided.

The functions are pure: the time stamps of what did not change are kept from the
status the object already has, so a status that says the same thing is the same dict
content, and the caller writes nothing (see ``SchedulerCache.apply``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The condition type and reasons of a v1alpha2 PodGroup's status.
POD_GROUP_SCHEDULED = "PodGroupScheduled"
SCHEDULED = "Scheduled"
UNSCHEDULABLE = "Unschedulable"


@dataclass(frozen=True, slots=True)
class GangFacts:
    """What a gang's status is derived from: its minimum, its pods, how many hold a
    node (``scheduled``), how many run, succeeded, failed, and the cycle's explanation
    when it could not be placed (``unschedulable``, "" otherwise)."""

    min_member: int
    pods: int
    scheduled: int
    running: int
    succeeded: int
    failed: int
    unschedulable: str = ""


def coscheduling_phase(f: GangFacts) -> str:
    """The phase scheduler-plugins' PodGroup controller gives a PodGroup with these pods."""
    if f.pods < f.min_member:
        return "Pending"
    phase = "Running" if f.succeeded + f.running >= f.min_member else "Scheduling"
    if f.failed and f.failed + f.running + f.succeeded >= f.min_member:
        phase = "Failed"
    if f.succeeded >= f.min_member:
        phase = "Finished"
    return phase


def coscheduling_status(f: GangFacts, old: Mapping[str, Any] | None, now: str) -> dict[str, Any]:
    """A coscheduling PodGroup's status fields (``old``: the status it has; ``now``:
    an RFC 3339 time, the ``scheduleStartTime`` of a group that has none yet)."""
    old = old or {}
    return {
        "phase": coscheduling_phase(f),
        "running": f.running,
        "succeeded": f.succeeded,
        "failed": f.failed,
        "scheduleStartTime": old.get("scheduleStartTime") or now,
    }


def scheduled_condition(f: GangFacts) -> tuple[str, str, str] | None:
    """(status, reason, message) of ``PodGroupScheduled``; None: nothing to say yet."""
    need = max(f.min_member, 1)
    if f.scheduled >= need:
        return "True", SCHEDULED, f"{f.scheduled} of {f.pods} pods are scheduled"
    if f.unschedulable:
        return "False", UNSCHEDULABLE, f.unschedulable
    return None


def workload_podgroup_status(
    f: GangFacts, old: Mapping[str, Any] | None, now: str
) -> dict[str, Any] | None:
    """A v1alpha2 PodGroup's ``conditions`` with ``PodGroupScheduled`` set (the other
    conditions kept); None when there is nothing to write."""
    said = scheduled_condition(f)
    if said is None:
        return None
    status, reason, message = said
    conditions = [dict(c) for c in (old or {}).get("conditions") or () if isinstance(c, dict)]
    mine = next((c for c in conditions if c.get("type") == POD_GROUP_SCHEDULED), None)
    if mine is None:
        mine = {"type": POD_GROUP_SCHEDULED}
        conditions.append(mine)
    if mine.get("status") != status or not mine.get("lastTransitionTime"):
        mine["lastTransitionTime"] = now
    mine.update(status=status, reason=reason, message=message)
    return {"conditions": conditions}


__all__ = [
    "POD_GROUP_SCHEDULED",
    "GangFacts",
    "coscheduling_phase",
    "coscheduling_status",
    "scheduled_condition",
    "workload_podgroup_status",
]
