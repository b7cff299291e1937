"""What a cycle's decisions look like to users of a real cluster.

The cache carries out binds, evictions and podgroup status (the cluster protocol). What
else users read with ``kubectl describe`` and ``kubectl get`` comes from here:

- a pending pod's ``PodScheduled=False`` condition with reason ``Unschedulable`` and
  pumice's explanation of its job, written when the explanation changes and at most
  ``conditions_per_cycle`` per cycle (a backlog of thousands is brought up to date over
  a few cycles instead of in one burst against the API server);
- Events: ``FailedScheduling`` on pending pods, ``Unschedulable`` on their PodGroup (or
  the group object of their dialect: a coscheduling or Kubernetes PodGroup, a Workload),
  ``Scheduled`` on bound pods, ``Preempted``/``Evicted`` on victims, ``InvalidSpec`` on
  objects the cache had to skip (all through :class:`EventRecorder`: deduplicated and
  rate-limited);
- Queue status: resources allocated and podgroup counts by phase, written when changed
  (a resource no longer held is removed, not left at its last value);
- what a cycle writes nothing for: a Volcano PodGroup left out of it (skipped as
  invalid, or its queue missing) and without a phase gets ``Pending`` with an
  ``Unschedulable`` condition saying why; a pod of ours skipped for a bad value gets
  ``PodScheduled=False``, reason ``InvalidSpec``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping
from typing import Any

from pumice.api.job import JobInfo
from pumice.api.parse import group_of
from pumice.api.quantity import render_resources
from pumice.api.task import TaskStatus
from pumice.cache.apply import ApplyResult
from pumice.cache.cache import SchedulerCache
from pumice.cluster.kube import KubeCluster
from pumice.cluster.kube_client import rfc3339
from pumice.errors import InputError
from pumice.framework.decisions import Decisions
from pumice.run.events import EventRecorder

log = logging.getLogger("pumice.report")

UNSCHEDULABLE = "Unschedulable"
#: The reason of what is said about an object pumice skipped (event, condition).
INVALID = "InvalidSpec"
#: Pod conditions written per cycle, at most (the rest follow in the next cycles).
CONDITIONS_PER_CYCLE = 500
#: Seconds between two looks at the queues' status.
QUEUE_STATUS_PERIOD = 5.0

_PHASE_COUNTS = {
    "Pending": "pending",
    "Inqueue": "inqueue",
    "Running": "running",
    "Unknown": "unknown",
    "Completed": "completed",
}


#: Per gang dialect of a job uid (:func:`pumice.api.parse.group_of`): the object's kind
#: and the kind the cluster keeps it under.
_GROUP_KINDS = {
    "volcano": ("PodGroup", "PodGroup"),
    "coscheduling": ("PodGroup", "CoschedulingPodGroup"),
    "podgroup": ("PodGroup", "WorkloadPodGroup"),
    "workload": ("Workload", "Workload"),
}


def _group_object(uid: str) -> tuple[str, str, str]:
    """(kind, the cluster's kind, key) of the group object job ``uid`` names: the one
    its Events are about."""
    dialect, namespace, name = group_of(uid)
    kind, store = _GROUP_KINDS.get(dialect, ("PodGroup", "PodGroup"))
    return kind, store, f"{namespace}/{name}"


def _timeout_reason(decisions: Decisions, uid: str) -> str:
    """``ScheduleTimeout`` or ``BackingOff`` when the gang's condition this cycle says
    so (a gang of a dialect with timeouts), else ""."""
    upd = decisions.podgroups.get(uid)
    for c in upd.conditions if upd is not None else ():
        if c.get("reason") in ("ScheduleTimeout", "BackingOff"):
            return str(c["reason"])
    return ""


def _pod_scheduled(pod: Mapping[str, Any]) -> tuple[str, str, str] | None:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled":
            return (str(c.get("status")), str(c.get("reason") or ""), str(c.get("message") or ""))
    return None


class Reporter:
    """Pod conditions, events and queue status after each cycle (see module docstring)."""

    def __init__(
        self,
        cluster: KubeCluster,
        events: EventRecorder,
        *,
        conditions_per_cycle: int = CONDITIONS_PER_CYCLE,
        queue_period: float = QUEUE_STATUS_PERIOD,
        clock: Any = time.monotonic,
        scheduler_names: Collection[str] = ("volcano",),
    ) -> None:
        self.cluster = cluster
        #: Pods with these (or no) schedulerName are ours: a bad one gets a condition.
        self.ours = frozenset(("", *scheduler_names))
        self.events = events
        self.conditions_per_cycle = conditions_per_cycle
        self.queue_period = queue_period
        self.clock = clock
        #: pod key -> the message last asked for (until the pod shows it or goes).
        self._asked: dict[str, str] = {}
        self._queues_at = -queue_period
        self._queue_status: dict[str, dict[str, Any]] = {}
        self._bad_seen: set[tuple[str, str, str]] = set()

    # -- after a cycle ------------------------------------------------------------------

    def after_cycle(
        self, cache: SchedulerCache, decisions: Decisions, applied: ApplyResult
    ) -> None:
        budget = self.conditions_per_cycle
        for uid, reason in decisions.pending.items():
            job = cache.jobs.get(uid)
            pods = self._pending_pods(cache, uid, job)
            kind, store, key = _group_object(uid)
            pg = self.cluster.get(store, key)
            if pg is not None:
                why = _timeout_reason(decisions, uid) or UNSCHEDULABLE
                self.events.record(kind, pg, "Warning", why, reason)
                if store == "PodGroup" and (job is None or uid in cache.queueless):
                    # (left out of the cycle: no status is written for it otherwise)
                    self._pending_phase(key, pg, UNSCHEDULABLE, reason)
            for key in pods:
                pod = self.cluster.get("Pod", key)
                if pod is None or (pod.get("spec") or {}).get("nodeName"):
                    continue
                self.events.record("Pod", pod, "Warning", "FailedScheduling", reason)
                if budget > 0 and self._condition_due(key, pod, reason):
                    budget -= 1
                    self._asked[key] = reason
                    self.cluster.set_pod_condition(
                        key,
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": UNSCHEDULABLE,
                            "message": reason,
                            "lastProbeTime": None,
                            "lastTransitionTime": rfc3339(),
                        },
                    )
        reasons = {a.get("task"): str(a.get("reason", "")) for a in decisions.audit if "task" in a}
        for key in applied.evicted:
            pod = self.cluster.get("Pod", key)
            if pod is not None:
                why = reasons.get(key) or "evicted by the scheduler"
                self.events.record("Pod", pod, "Normal", "Preempted", why)
        if len(self._asked) > 4 * max(1, len(cache.tasks)) + 1000:
            self._asked = {k: v for k, v in self._asked.items() if k in cache.tasks}

    def _pending_pods(self, cache: SchedulerCache, uid: str, job: JobInfo | None) -> list[str]:
        if job is not None:
            tasks = job.by_status.get(TaskStatus.PENDING) or {}
            return [f"{t.namespace}/{t.name}" for t in tasks.values()]
        orphans = cache.orphans.get(uid) or {}
        return [f"{t.namespace}/{t.name}" for t in orphans.values()]

    def _condition_due(self, key: str, pod: Mapping[str, Any], message: str) -> bool:
        if _pod_scheduled(pod) == ("False", UNSCHEDULABLE, message):
            self._asked.pop(key, None)
            return False
        return self._asked.get(key) != message

    def on_bound(self, pod_key: str, node: str) -> None:
        """A bind landed (called from a bind worker)."""
        self._asked.pop(pod_key, None)
        pod = self.cluster.get("Pod", pod_key)
        if pod is not None:
            self.events.record(
                "Pod", pod, "Normal", "Scheduled", f"Successfully assigned {pod_key} to {node}"
            )

    # -- objects the cache skipped ------------------------------------------------------

    def bad_object(self, kind: str, key: str, obj: Mapping[str, Any], err: InputError) -> None:
        """Log once per object and message, and tell the object's owner by an Event."""
        ident = (kind, key, err.message)
        if ident in self._bad_seen:
            return
        self._bad_seen.add(ident)
        message = f"skipped by pumice: {err.render()}"
        log.warning("%s %s %s", kind, key, message)
        real = self.cluster.get(kind, key) or obj
        self.events.record(kind, real, "Warning", INVALID, message)
        if kind == "PodGroup":
            self._pending_phase(key, real, INVALID, message)
        elif kind == "Pod" and self._waiting_pod_of_ours(real):
            self.cluster.set_pod_condition(
                key,
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": INVALID,
                    "message": message,
                    "lastProbeTime": None,
                    "lastTransitionTime": rfc3339(),
                },
            )

    def _waiting_pod_of_ours(self, pod: Mapping[str, Any]) -> bool:
        spec = pod.get("spec")
        if not isinstance(spec, Mapping) or spec.get("nodeName"):
            return False
        return spec.get("schedulerName") in self.ours or spec.get("schedulerName") is None

    def _pending_phase(self, key: str, pg: Mapping[str, Any], reason: str, message: str) -> None:
        """A Volcano PodGroup pumice cannot schedule (invalid, or its queue missing) and
        whose status says nothing gets the phase Volcano's controllers give every
        PodGroup they create, ``Pending``, with an ``Unschedulable`` condition saying
        why: ``kubectl get podgroup`` shows a STATUS instead of a blank."""
        status = pg.get("status")
        if isinstance(status, Mapping) and status.get("phase"):
            return
        condition = {"type": UNSCHEDULABLE, "status": "True", "reason": reason, "message": message}
        self.cluster.update_podgroup_status(key, "Pending", [condition])

    # -- queues -------------------------------------------------------------------------

    def queues(self, cache: SchedulerCache) -> None:
        """Write each Queue's allocated resources and podgroup counts, when changed,
        every ``queue_period`` seconds."""
        now = self.clock()
        if now - self._queues_at < self.queue_period:
            return
        self._queues_at = now
        names = sorted(cache.queues)
        if not names:
            return
        counts: dict[str, dict[str, int]] = {
            q: dict.fromkeys(_PHASE_COUNTS.values(), 0) for q in names
        }
        for job in cache.jobs.values():
            field = _PHASE_COUNTS.get(job.phase)
            per = counts.get(job.queue)
            if field and per is not None:
                per[field] += 1
        order, sums = cache.ledger.matrices(names)
        rows = dict(zip(order, sums.allocated, strict=True))
        dims = cache.space.names
        for name in names:
            row = rows.get(name)
            held = {} if row is None else {dims[d]: float(v) for d, v in enumerate(row) if v > 0}
            allocated = render_resources(held)
            status: dict[str, Any] = {"allocated": allocated, **counts.get(name, {})}
            if self._queue_status.get(name) == status:
                continue
            obj = self.cluster.get("Queue", name)
            if obj is None:
                continue
            current = obj.get("status") or {}
            if all(current.get(k) == v for k, v in status.items()):
                self._queue_status[name] = status
                continue
            # A merge patch keeps the keys it does not name: a resource no longer held
            # (known from the object or from the last write) is removed by a null.
            last = self._queue_status.get(name) or {}
            gone = set(current.get("allocated") or {}) | set(last.get("allocated") or {})
            patch = dict(status)
            patch["allocated"] = {**dict.fromkeys(gone - set(allocated)), **allocated}
            self._queue_status[name] = status
            self.cluster.update_queue_status(name, patch)


__all__ = ["Reporter"]
