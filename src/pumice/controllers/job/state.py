"""The Job state machine: for a phase and an action, what to do and where to go.

Volcano's job controller (``pkg/controllers/job/state``) handles each request in the
state of the Job's phase. Every state does one of three things:

- **sync**: create the pods that are missing (once the PodGroup is admitted), delete
  those beyond the spec, count;
- **kill**: delete the job's pods but those in ``retain`` (Succeeded and Failed for a
  "soft" kill; none for a restart; soft anyway on the last retry), delete the PodGroup,
  count, bump ``status.version`` (when the kill deleted pods or moved the phase: unlike
  Volcano, a kill that changes nothing writes nothing, so a finished job stays quiet);
- **kill a target**: delete the pods of one task (``RestartTask``) or one pod
  (``RestartPod``), keeping the PodGroup;

then applies a transition to the counts (``Transition``), which may change the phase:

=============  ======================================  ================================
phase          action                                  does, then
=============  ======================================  ================================
Pending        RestartJob / RestartTask, RestartPod    kill (none) / target; retry+1,
                                                       Restarting
Pending        AbortJob, CompleteJob, TerminateJob     kill (soft); Aborting,
                                                       Completing, Terminating
Pending        otherwise                               sync; Running once minAvailable
                                                       pods run or ran
Running        as Pending for the kills                same
Running        otherwise                               sync; Completed / Failed by the
                                                       completion rule (:func:`_run`)
Restarting     SyncJob / RestartTask, RestartPod /     sync / target / kill (none);
               otherwise                               Failed at maxRetry, else
                                                       Pending once the pods are gone
Aborting       ResumeJob / otherwise                   kill (soft); retry+1 Restarting
                                                       / Aborted once no pod is alive
Aborted        ResumeJob / otherwise                   kill (soft); retry+1 Restarting
Completing     any                                     kill (soft); Completed once no
                                                       pod is alive
Terminating    any                                     kill (soft); Terminated likewise
Completed,     any                                     kill (soft)
Failed,
Terminated
=============  ======================================  ================================
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from pumice.controllers.job.spec import JobSpec

PENDING = "Pending"
RUNNING = "Running"
RESTARTING = "Restarting"
ABORTING = "Aborting"
ABORTED = "Aborted"
COMPLETING = "Completing"
COMPLETED = "Completed"
TERMINATING = "Terminating"
TERMINATED = "Terminated"
FAILED = "Failed"
PHASES = (
    PENDING,
    RUNNING,
    RESTARTING,
    ABORTING,
    ABORTED,
    COMPLETING,
    COMPLETED,
    TERMINATING,
    TERMINATED,
    FAILED,
)
#: Phases the garbage collector counts as finished (ttlSecondsAfterFinished).
FINISHED = frozenset({COMPLETED, FAILED, TERMINATED})

SYNC = "SyncJob"
SOFT = frozenset({"Succeeded", "Failed"})
NONE: frozenset[str] = frozenset()


@dataclass(slots=True)
class Counts:
    """The job's pods by phase, and per task (``status.taskStatusCount``)."""

    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    unknown: int = 0
    tasks: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, task: str, phase: str) -> None:
        """Count one pod of ``task`` in ``phase`` (not terminating)."""
        # (the fields by name, not through getattr and setattr: a reconcile counts
        # every pod of its Job)
        if phase == "Running":
            self.running += 1
        elif phase == "Pending":
            self.pending += 1
        elif phase == "Succeeded":
            self.succeeded += 1
        elif phase == "Failed":
            self.failed += 1
        else:
            self.unknown += 1
            phase = "Unknown"
        if task:
            by = self.tasks.get(task)
            if by is None:
                by = self.tasks[task] = {}
            by[phase] = by.get(phase, 0) + 1

    @property
    def alive(self) -> bool:
        return bool(self.terminating or self.pending or self.running)


@dataclass(slots=True)
class Status:
    """What a transition reads and changes."""

    phase: str
    retry_count: int
    min_available: int
    counts: Counts


#: Changes ``status`` after the work; True when the phase changed.
Transition = Callable[[Status, JobSpec], bool]


@dataclass(frozen=True, slots=True)
class Step:
    """What to do: ``work`` is ``sync``, ``kill`` or ``target`` (with ``task`` and, for
    a pod, ``pod``); ``retain`` the pod phases a kill keeps."""

    work: str
    transition: Transition | None = None
    retain: frozenset[str] = NONE
    task: str = ""
    pod: str = ""


def _to(phase: str, *, retry: bool = False) -> Transition:
    def go(s: Status, spec: JobSpec) -> bool:
        if retry:
            s.retry_count += 1
        s.phase = phase
        return True

    return go


def _when_quiet(phase: str) -> Transition:
    def go(s: Status, spec: JobSpec) -> bool:
        if s.counts.alive:
            return False
        s.phase = phase
        return True

    return go


def _pending(s: Status, spec: JobSpec) -> bool:
    c = s.counts
    if spec.min_available <= c.running + c.succeeded + c.failed:
        s.phase = RUNNING
        return True
    return False


def _run(s: Status, spec: JobSpec) -> bool:
    """Volcano's completion rule for a running job."""
    c = s.counts
    replicas = spec.total_replicas
    if replicas == 0:
        return False
    if spec.min_success is not None and c.succeeded >= spec.min_success:
        s.phase = COMPLETED
        return True
    if c.succeeded + c.failed == replicas:
        if spec.min_available >= sum(t.min_available for t in spec.tasks):
            for t in spec.tasks:
                done = c.tasks.get(t.name)
                if done is not None and done.get("Succeeded", 0) < t.min_available:
                    s.phase = FAILED
                    return True
        if spec.min_success is not None and c.succeeded < spec.min_success:
            s.phase = FAILED
        elif c.succeeded >= spec.min_available:
            s.phase = COMPLETED
        else:
            s.phase = FAILED
        return True
    if c.pending > replicas - spec.min_available:
        s.phase = PENDING
        return True
    return False


def _restarting(s: Status, spec: JobSpec) -> bool:
    if s.retry_count >= spec.max_retry:
        s.phase = FAILED
        return True
    if spec.total_replicas - s.counts.terminating >= s.min_available:
        s.phase = PENDING
        return True
    return False


_TARGETED = ("RestartTask", "RestartPod")


@functools.lru_cache(maxsize=1024)
def decide(phase: str, action: str, *, task: str = "", pod: str = "") -> Step:
    """The step for ``action`` in ``phase`` (the module docstring's table). ``task``
    and ``pod`` name the target of RestartTask and RestartPod. A phase Volcano does not
    know is Pending, as in Volcano. (Kept per argument: a step and its transition hold
    no state, and every reconcile asks.)"""
    if phase not in PHASES:
        phase = PENDING
    if phase in (PENDING, RUNNING):
        if action == "RestartJob":
            return Step("kill", _to(RESTARTING, retry=True))
        if action in _TARGETED:
            return Step(
                "target",
                _to(RESTARTING, retry=True),
                task=task,
                pod=pod if action == "RestartPod" else "",
            )
        if action == "AbortJob":
            return Step("kill", _to(ABORTING), SOFT)
        if action == "CompleteJob":
            return Step("kill", _to(COMPLETING), SOFT)
        if action == "TerminateJob":
            return Step("kill", _to(TERMINATING), SOFT)
        return Step("sync", _run if phase == RUNNING else _pending)
    if phase == RESTARTING:
        if action == SYNC:
            return Step("sync", _restarting)
        if action in _TARGETED:
            return Step("target", _restarting, task=task, pod=pod if action == "RestartPod" else "")
        return Step("kill", _restarting)
    if phase in (ABORTING, ABORTED):
        if action == "ResumeJob":
            return Step("kill", _to(RESTARTING, retry=True), SOFT)
        return Step("kill", _when_quiet(ABORTED) if phase == ABORTING else None, SOFT)
    if phase == COMPLETING:
        return Step("kill", _when_quiet(COMPLETED), SOFT)
    if phase == TERMINATING:
        return Step("kill", _when_quiet(TERMINATED), SOFT)
    return Step("kill", None, SOFT)  # Completed, Failed, Terminated


__all__ = [
    "FINISHED",
    "PHASES",
    "SOFT",
    "SYNC",
    "Counts",
    "Status",
    "Step",
    "Transition",
    "decide",
]
