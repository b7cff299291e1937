"""Gang timeouts for the coscheduling and Workload dialects: part of the gang plugin.

Upstream, a gang of these dialects waits at Permit for the rest of its pods only so
long: scheduler-plugins' coscheduling for the PodGroup's ``scheduleTimeoutSeconds``, or
its ``permitWaitingTimeSeconds`` (60s) when that is not set; Kubernetes' GangScheduling
plugin for a Workload's pod group (and a v1alpha2 PodGroup) for 5 minutes. When the
time is up the waiting pods are rejected: the gang gives up what it holds and its pods
back off before they are tried again (kube-scheduler's pod backoff, 1s doubling up to
10s; coscheduling's ``podGroupBackoffSeconds`` for the whole group when set).

pumice models that on the session's clock (:attr:`Session.now`: the snapshot's time,
the virtual clock in ``pumice simulate``). For a job whose ``api`` is not ``volcano``
and whose gang needs at least two pods, :class:`GangTimeouts` keeps a :class:`Clock` in
``Snapshot.carried``:

- the clock starts in the first cycle that finds the gang admitted, valid and not ready
  (for a coscheduling PodGroup whose status has ``scheduleStartTime``, and no clock yet,
  at that time); a gang that is not valid (too few pods) is not tried, and loses its
  clock;
- a cycle that ends with the gang still not ready once the clock has passed its
  timeout times it out: the places it holds uncommitted (pipelined onto releasing
  resources, or allocated for a gang not yet whole) are given back, its podgroup update
  gets an ``Unschedulable`` condition of reason ``ScheduleTimeout`` and its pending
  reason says it timed out and when it is tried again;
- until then it backs off: it is not valid (``job_valid`` says "backing off until
  ..."), so no action places it or evicts for it; its condition's reason is
  ``BackingOff``;
- the first cycle at or after the end of the backoff tries it again, and its clock
  starts again then.

A gang that is ready drops its clock (and its count of timeouts, which the pod backoff
doubles with). Volcano PodGroups are never timed out: nothing here looks at them, and a
session with no clock in ``carried`` registers the gang's own ``job_valid`` unchanged.

Arguments (of the ``gang`` plugin, coscheduling's names):

``gang.permitWaitingTimeSeconds``
    The timeout of a coscheduling PodGroup without ``scheduleTimeoutSeconds`` (60).
``gang.podGroupBackoffSeconds``
    The backoff of a coscheduling PodGroup that timed out (0, the default: none for the
    group; its pods' backoff applies).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from pumice.api.job import JobInfo
from pumice.api.task import TaskStatus
from pumice.conf.arguments import Arguments
from pumice.errors import InputError
from pumice.framework.session import Session
from pumice.framework.statement import ALLOCATE, PIPELINE, Operation, Statement

PERMIT_WAITING_TIME = "gang.permitWaitingTimeSeconds"
POD_GROUP_BACKOFF = "gang.podGroupBackoffSeconds"
ARGUMENT_KEYS = (PERMIT_WAITING_TIME, POD_GROUP_BACKOFF)

#: coscheduling's default permit waiting time (``permitWaitingTimeSeconds``).
DEFAULT_PERMIT_WAITING = 60
#: Kubernetes' GangScheduling timeout (``DefaultSchedulingTimeoutDuration``).
WORKLOAD_TIMEOUT = 300.0
#: kube-scheduler's pod backoff: ``podInitialBackoffSeconds``, ``podMaxBackoffSeconds``.
POD_INITIAL_BACKOFF, POD_MAX_BACKOFF = 1.0, 10.0

#: The key of the clocks in ``Snapshot.carried``: job uid -> :class:`Clock`.
CARRY_KEY = "gang.timeouts"

TIMED_OUT = "ScheduleTimeout"
BACKING_OFF = "BackingOff"


@dataclass(slots=True)
class Clock:
    """One gang's scheduling clock."""

    #: When its scheduling (this try) started.
    start: float
    #: Times it timed out since it was last ready (the pod backoff doubles with it).
    timeouts: int = 0
    #: Backing off until then (None: not backing off).
    until: float | None = None
    #: The timeout that ran out last, and what set it (for the reasons).
    timeout: float = 0.0
    source: str = ""


def stamp(t: float) -> str:
    """``t`` as Kubernetes writes a time (RFC 3339, UTC, to the second)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def pod_backoff(attempts: int) -> float:
    """kube-scheduler's backoff of a pod after ``attempts`` failed attempts."""
    duration = POD_INITIAL_BACKOFF
    for _ in range(1, attempts):
        if duration > POD_MAX_BACKOFF - duration:
            return POD_MAX_BACKOFF
        duration += duration
    return duration


def backoff_reason(clock: Clock) -> str:
    """Why a job that backs off is not tried (its pending reason)."""
    return (
        f"backing off until {stamp(clock.until or 0.0)}: its gang timed out "
        f"({clock.timeout:g}s, {clock.source}); it is tried again then"
    )


def _seconds(arguments: Arguments, key: str, default: int) -> int:
    value = arguments.get_int(key, default)
    if value < 0:
        raise InputError(
            f"expected seconds >= 0, got {value}", obj="plugin gang", field=f"arguments.{key}"
        )
    return value


class GangTimeouts:
    """The timeouts of the gangs of one gang plugin's configuration (see the module)."""

    __slots__ = ("backoff", "permit_waiting")

    def __init__(self, arguments: Arguments) -> None:
        waiting = _seconds(arguments, PERMIT_WAITING_TIME, DEFAULT_PERMIT_WAITING)
        # As coscheduling's GetWaitTimeDuration: 0 is the default.
        self.permit_waiting = float(waiting or DEFAULT_PERMIT_WAITING)
        self.backoff = float(_seconds(arguments, POD_GROUP_BACKOFF, 0))

    @staticmethod
    def applies(job: JobInfo) -> bool:
        """A gang of a dialect with timeouts (a group of one pod never waits for others)."""
        return job.api != "volcano" and job.min_available > 1

    def timeout(self, job: JobInfo) -> tuple[float, str]:
        """The job's timeout, and what sets it."""
        if job.api == "coscheduling":
            if job.schedule_timeout:
                return job.schedule_timeout, "scheduleTimeoutSeconds"
            return self.permit_waiting, "the permit waiting time"
        return WORKLOAD_TIMEOUT, "the Workload gang timeout"

    def backoff_for(self, job: JobInfo, timeouts: int) -> float:
        if job.api == "coscheduling" and self.backoff > 0:
            return self.backoff
        return pod_backoff(timeouts)

    def valid_until(self, ssn: Session) -> float:
        """The first time a clock kept for the session's gangs runs out or ends its
        backoff (as the cycle leaves them): until then a cycle on the same cluster
        answers the same."""
        clocks: dict[str, Clock] = ssn.snapshot.carried.get(CARRY_KEY) or {}
        until = math.inf
        for uid, clock in clocks.items():
            if clock.until is not None:
                until = min(until, clock.until)
                continue
            job = ssn.jobs.get(uid)
            if job is None:
                return -math.inf
            until = min(until, clock.start + self.timeout(job)[0])
        return until

    def valid(
        self, ssn: Session, valid: Callable[[JobInfo], str | None]
    ) -> Callable[[JobInfo], str | None]:
        """``valid``, and not while the job backs off; ``valid`` itself when nothing
        does (every Volcano session)."""
        clocks: dict[str, Clock] = ssn.snapshot.carried.get(CARRY_KEY) or {}
        now = ssn.now
        if not any(c.until is not None and now < c.until for c in clocks.values()):
            return valid

        def valid_(job: JobInfo) -> str | None:
            reason = valid(job)
            if reason is not None or job.api == "volcano":
                return reason
            clock = clocks.get(job.uid)
            if clock is None or clock.until is None or now >= clock.until:
                return None
            return backoff_reason(clock)

        return valid_

    def close(
        self,
        ssn: Session,
        ready: Callable[[JobInfo], bool],
        condition: Callable[[Session, str, str, str, str], None],
    ) -> None:
        """Start, stop and run out the clocks of the cycle's gangs (after gang has set
        its conditions: ``condition`` replaces them). ``ready``: is the gang ready as
        the cycle ends."""
        carried = ssn.snapshot.carried
        clocks: dict[str, Clock] | None = carried.get(CARRY_KEY)
        now = ssn.now
        for job in ssn.active.values():
            if not self.applies(job):
                continue
            uid = job.uid
            clock = clocks.get(uid) if clocks is not None else None
            if uid in ssn.invalid:
                reason = ssn.invalid[uid][1]
                if clock is not None and reason == backoff_reason(clock):
                    condition(ssn, uid, "Unschedulable", BACKING_OFF, reason)
                elif clock is not None and clocks is not None:  # (a clock is one of clocks)
                    del clocks[uid]  # too few pods: not tried
                continue
            if job.is_pending():
                continue  # not admitted: nothing tries it yet
            if ready(job):
                if clock is not None and clocks is not None:  # (a clock is one of clocks)
                    del clocks[uid]
                continue
            if clock is None or clock.until is not None:
                # The first try, or the first after a backoff: the clock starts.
                start = job.schedule_start if clock is None else None
                timeouts = clock.timeouts if clock is not None else 0
                clock = Clock(now if start is None else start, timeouts)
                if clocks is None:
                    clocks = carried[CARRY_KEY] = {}
                clocks[uid] = clock
            limit, source = self.timeout(job)
            if now < clock.start + limit:
                continue
            given = give_up(ssn, job)
            clock.timeouts += 1
            clock.until = now + self.backoff_for(job, clock.timeouts)
            clock.timeout, clock.source = limit, source
            held = f"; gave up {given} places it held" if given else ""
            message = (
                f"gang timed out: its scheduling started at {stamp(clock.start)} and it was "
                f"not ready {limit:g}s later ({source}){held}; backing off until "
                f"{stamp(clock.until)}, then tried again"
            )
            condition(ssn, uid, "Unschedulable", TIMED_OUT, message)
            ssn.invalid[uid] = (job, message)  # its pending reason; nothing places it now
        if clocks:
            for uid in [u for u in clocks if u not in ssn.active]:
                del clocks[uid]  # settled (ready, done) or gone: nothing to time out


def give_up(ssn: Session, job: JobInfo) -> int:
    """Give back the places ``job`` holds uncommitted: its tasks pipelined onto releasing
    resources, and those allocated but not bound (a statement kept for a pipelined gang
    that never became ready). How many."""
    stmt = Statement(ssn)
    for kind, status in ((ALLOCATE, TaskStatus.ALLOCATED), (PIPELINE, TaskStatus.PIPELINED)):
        for task in job.with_status(status):
            # Allocate and preempt place only pending tasks (node-less).
            stmt.operations.append(Operation(kind, task, task.node or "", TaskStatus.PENDING, None))
    n = len(stmt)
    stmt.discard()
    return n


__all__ = [
    "ARGUMENT_KEYS",
    "BACKING_OFF",
    "CARRY_KEY",
    "TIMED_OUT",
    "Clock",
    "GangTimeouts",
    "give_up",
    "pod_backoff",
]
